"""Per-sample losses ``loss(y, raw) -> scalar``, their links and optimal constant baselines.

A loss is written for ONE sample, rlax-style: ``y`` is that sample's label (a scalar, or a
``(C,)`` vector when ``y`` has C columns: multi-target regression, multi-label classification)
and ``raw`` its raw score, a scalar for one-output losses and a ``(K,)`` vector for K-output
losses. A built-in loss given C label columns applies to each column and sums
(:func:`columnwise`, ``Loss.per_column``: output ``k`` is fitted as a one-output fit of column
``k``). Objectives that are not sums over samples (Cox, ranking) are batch losses
(``Loss.batch``, :mod:`jboost.objectives`).
The library vmaps it over samples and takes gradients and hessians with autodiff
(:mod:`jboost.derivatives`); no derivative code is ever written by hand.

A :class:`Loss` bundles the function with what boosting needs around it: the number of outputs,
the link (raw score -> prediction / probability), the optimal constant baseline, how labels are
checked, how the trees use its curvature, and optionally an exact leaf refit. Its continuous parameters (Huber ``delta``, quantile
level ``alpha``, ...) live in ``params`` and are pytree leaves, so they can be traced and vmapped;
everything else is static metadata.

A loss's parameters have declared domains (:attr:`Loss.domains`, e.g. the quantile level
``alpha`` in ``(0, 1)``), checked on the host wherever a loss is resolved
(:func:`jboost._validation.resolve_loss`) and for every value of a sweep's grid.

**Custom losses need no smoothness.** A custom loss's default ``hessian="auto"`` grows Newton
trees in a round where every row's autodiff curvature is positive, and otherwise (a hessian
zero almost everywhere: pinball, absolute error, hinge, epsilon-insensitive; or negative
somewhere: Cauchy, Tukey's biweight) a least-squares tree on the negative gradient (ESL
Algorithm 10.3) whose leaves are the exact minimisers of the loss, found by autodiff bisection
(:func:`jboost.refit.exact_leaf_values`; Friedman 2001, eq. 18). The built-in absolute error and
quantile loss are the closed-form case of this rule: a hand-written pinball loss gives the same
trees and, to float32 rounding, the same leaves (the weighted quantiles of the residuals).

Binary labels are ``{0, 1}`` for every binary loss (including the exponential loss, where the
margin is ``(2y - 1) * raw``). Class labels for K-class losses are the integers ``0 .. K-1``.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
from typing import Any, Callable, Mapping, NamedTuple, Optional

import jax
import jax.numpy as jnp
import numpy as np

# Beyond this exponent, exponentials continue as their second-order Taylor expansion: values,
# gradients and hessians stay finite and positive (no overflow at large margins).
_EXP_CLIP = 30.0

TASKS = ("regression", "binary", "multiclass", "count", "survival", "ranking")

# Newton curvatures of a loss (Loss.hessian; jboost.derivatives.grad_hess). "auto", a custom
# loss's default: "autodiff" in a round where every row's curvature is positive, else "unit"
# trees with exact leaves (jboost.derivatives.curvature_is_positive, jboost.boosting.newton_round).
HESSIANS = ("auto", "autodiff", "diagonal", "unit")

# The hessian diagonals of a batch objective (Loss.hessian_diag; jboost.objectives).
BATCH_HESSIANS = ("exact", "groups", "hutchinson")

# Exact leaf refits (Loss.leaf_refit; jboost.refit.refit_leaf_values).
LEAF_REFITS = (None, "quantile", "huber", "line_search", "exact")

# The class-frequency clip of the binary baselines: [1e-12, the largest float32 below 1]. The
# upper end used to be written 1 - 1e-12, which is 1.0 in float32, so all-positive labels gave an
# infinite baseline; every frequency below 1 is below this value, so the clip only acts at p = 1.
_P_MIN = 1e-12
_P_MAX = float(np.nextafter(np.float32(1.0), np.float32(0.0)))


def safe_exp(z):
    """``exp(z)`` for ``z <= 30``; beyond, the quadratic continuation (C2, finite, increasing)."""
    c = jnp.minimum(z, _EXP_CLIP)
    d = jnp.maximum(z - _EXP_CLIP, 0.0)
    return jnp.exp(c) * (1.0 + d + 0.5 * d * d)


# --------------------------------------------------------------------------------------------
# Per-sample loss functions (module level, so they are hashable static metadata).
# --------------------------------------------------------------------------------------------


def squared_error_fn(y, f):
    """Half squared error ``(y - f)^2 / 2`` (ESL Table 10.2)."""
    return 0.5 * (y - f) ** 2


def absolute_error_fn(y, f):
    """Absolute error ``|y - f|`` (least absolute deviation)."""
    return jnp.abs(y - f)


def huber_fn(y, f, delta):
    """Huber loss (ESL eq. 10.23): ``r^2/2`` for ``|r| <= delta``, else ``delta (|r| - delta/2)``."""
    r = jnp.abs(y - f)
    delta = jnp.asarray(delta, r.dtype)
    return jnp.where(r <= delta, 0.5 * r * r, delta * (r - 0.5 * delta))


def quantile_fn(y, f, alpha):
    """Pinball loss at level ``alpha``: ``alpha * r`` if ``r >= 0`` else ``(alpha - 1) * r``."""
    r = y - f
    alpha = jnp.asarray(alpha, r.dtype)
    return jnp.maximum(alpha * r, (alpha - 1.0) * r)


def binomial_deviance_fn(y, f):
    """Binomial deviance / log loss with ``p = sigmoid(f)``: ``log(1 + e^f) - y f``, y in {0,1}."""
    return jax.nn.softplus(f) - y * f


def exponential_fn(y, f):
    """AdaBoost's exponential loss ``exp(-y' f)`` with ``y' = 2y - 1`` (ESL eq. 10.8)."""
    return safe_exp(-(2.0 * y - 1.0) * f)


def multinomial_deviance_fn(y, f):
    """Multinomial deviance ``logsumexp(f) - f[y]`` for integer label ``y`` (ESL eq. 10.22)."""
    return jax.nn.logsumexp(f) - jnp.take(f, y.astype(jnp.int32))


def samme_exponential_fn(y, f):
    """K-class exponential loss ``exp(-y.f / K)`` with ESL/SAMME coding.

    ``y_k = 1`` for the true class and ``-1/(K-1)`` otherwise (Zhu, Zou, Rosset, Hastie 2009).
    """
    k = f.shape[-1]
    code = jnp.where(jnp.arange(k, dtype=jnp.int32) == y.astype(jnp.int32), 1.0, -1.0 / (k - 1)).astype(f.dtype)
    return safe_exp(-jnp.dot(code, f) / k)


def poisson_fn(y, f):
    """Poisson deviance up to a constant, log link: ``exp(f) - y f``."""
    return safe_exp(f) - y * f


# --------------------------------------------------------------------------------------------
# Links: raw score -> prediction (regression) or class probabilities (classification).
# --------------------------------------------------------------------------------------------


def identity_link(raw, **params):
    return raw


def exp_link(raw, **params):
    return jnp.exp(raw)


def sigmoid_link(raw, **params):
    p = jax.nn.sigmoid(raw)
    return jnp.stack([1.0 - p, p], axis=-1)


def adaboost_link(raw, **params):
    """P(y=1|x) = 1 / (1 + exp(-2 f)) (Friedman, Hastie, Tibshirani 2000)."""
    p = jax.nn.sigmoid(2.0 * raw)
    return jnp.stack([1.0 - p, p], axis=-1)


def softmax_link(raw, **params):
    return jax.nn.softmax(raw, axis=-1)


def samme_link(raw, **params):
    """SAMME probabilities ``p_k ∝ exp(f_k / (K - 1))`` (Zhu et al. 2009, eq. 4 inverted)."""
    k = raw.shape[-1]
    return jax.nn.softmax(raw / (k - 1), axis=-1)


# --------------------------------------------------------------------------------------------
# Baselines: the optimal constant raw score, (n,) labels and (n,) weights -> (K,).
# --------------------------------------------------------------------------------------------


def weighted_quantile(values, weights, q):
    """Smallest value whose cumulative weight reaches ``q`` of the total (jit-able, traced q)."""
    order = jnp.argsort(values)
    v, w = values[order], weights[order]
    cw = jnp.cumsum(w)
    idx = jnp.searchsorted(cw, q * cw[-1], side="left")
    return v[jnp.clip(idx, 0, v.shape[0] - 1)]


def _mean(y, w):
    return jnp.sum(w * y) / jnp.sum(w)


def _class_freq(y, w, k):
    counts = jax.ops.segment_sum(w, y.astype(jnp.int32), num_segments=k)
    return jnp.clip(counts / jnp.sum(w), 1e-12, 1.0)


def mean_baseline(y, w, n_outputs, **params):
    return _mean(y, w)[None]


def median_baseline(y, w, n_outputs, **params):
    return weighted_quantile(y, w, 0.5)[None]


def quantile_baseline(y, w, n_outputs, alpha, **params):
    return weighted_quantile(y, w, alpha)[None]


def huber_baseline(y, w, n_outputs, delta, n_steps: int = 50, **params):
    """Huber's M-estimate of location: ``argmin_c sum_i w_i huber(y_i - c; delta)``.

    Newton iterations from the weighted median (the loss is convex; its hessian is the weight of
    the rows with ``|y - c| <= delta``); a step with no such rows falls back to the median step.
    """
    c0 = weighted_quantile(y, w, 0.5)

    def body(_, c):
        r = y - c
        inside = jnp.abs(r) <= delta
        g = jnp.sum(w * jnp.clip(r, -delta, delta))
        h = jnp.sum(w * inside.astype(w.dtype))
        return c + jnp.where(h > 0, g / jnp.where(h > 0, h, 1.0), 0.0)

    return jax.lax.fori_loop(0, n_steps, body, c0)[None]


def logit_baseline(y, w, n_outputs, **params):
    """``log(p / (1 - p))`` of the weighted positive frequency ``p``, clipped to
    ``[1e-12, 1 - 2^-24]``: finite (about -27.6 and 16.6) when every label is 0 or every label
    is 1; the clip is inactive for any other float32 frequency."""
    p = jnp.clip(_mean(y, w), _P_MIN, _P_MAX)
    return jnp.log(p / (1.0 - p))[None]


def half_logit_baseline(y, w, n_outputs, **params):
    return 0.5 * logit_baseline(y, w, n_outputs)


def log_freq_baseline(y, w, n_outputs, **params):
    """Centred log class frequencies; an absent class has frequency 1e-12 (finite scores)."""
    logp = jnp.log(_class_freq(y, w, n_outputs))
    return logp - jnp.mean(logp)


def samme_baseline(y, w, n_outputs, **params):
    """argmin_f sum_i w_i exp(-y_i.f/K) with sum_k f_k = 0: ``(K-1)(log p_k - mean log p)``."""
    return (n_outputs - 1) * log_freq_baseline(y, w, n_outputs)


def log_mean_baseline(y, w, n_outputs, **params):
    return jnp.log(jnp.maximum(_mean(y, w), 1e-12))[None]


def lbfgs_minimize(objective, params0, n_steps: int):
    """``n_steps`` optax L-BFGS iterations (zoom line search) on ``objective`` from ``params0``.

    A fixed iteration count in a ``fori_loop``: jit-able, vmappable, no host round trip.
    """
    import optax

    opt = optax.lbfgs()
    value_and_grad = optax.value_and_grad_from_state(objective)

    def body(_, carry):
        params, state = carry
        value, grad = value_and_grad(params, state=state)
        updates, state = opt.update(grad, state, params, value=value, grad=grad, value_fn=objective)
        return optax.apply_updates(params, updates), state

    params, _ = jax.lax.fori_loop(0, n_steps, body, (params0, opt.init(params0)))
    return params


def numeric_baseline(loss: "Loss", y, w, n_steps: int = 100, margin=None):
    """Optimal constant found numerically (L-BFGS from optax) for losses with no closed form, or
    next to per-row offsets ``margin`` ``(n, K)`` (the intercept of a model with offsets)."""

    def objective(c):
        raw = jnp.broadcast_to(c, (y.shape[0], c.shape[0]))
        if margin is not None:
            raw = margin + raw
        return total_loss(loss, y, raw, w) / jnp.sum(w)

    return lbfgs_minimize(objective, jnp.zeros((loss.n_outputs,), jnp.float32), n_steps)


# --------------------------------------------------------------------------------------------
# Domains of loss parameters.
# --------------------------------------------------------------------------------------------


class Interval(NamedTuple):
    """A real interval, the domain of a loss parameter: open ends by default, ``(0, 1)``."""

    lo: float = -np.inf
    hi: float = np.inf
    lo_open: bool = True
    hi_open: bool = True

    def contains(self, x) -> np.ndarray:
        """Elementwise: ``x`` is finite and inside the interval."""
        x = np.asarray(x, np.float64)
        above = x > self.lo if self.lo_open else x >= self.lo
        below = x < self.hi if self.hi_open else x <= self.hi
        return np.isfinite(x) & above & below

    def __str__(self) -> str:
        return (f"{'(' if self.lo_open else '['}{self.lo:g}, {self.hi:g}{')' if self.hi_open else ']'}")


class Domains(Mapping):
    """An immutable, hashable mapping parameter name -> :class:`Interval` (static metadata of a
    :class:`Loss`, so it must hash); built from any mapping of name -> ``Interval`` or tuple."""

    __slots__ = ("_items",)

    def __init__(self, domains=None):
        items = dict(domains or {}).items()
        self._items = tuple(sorted((str(k), v if isinstance(v, Interval) else Interval(*v))
                                   for k, v in items))

    def __getitem__(self, name):
        for k, v in self._items:
            if k == name:
                return v
        raise KeyError(name)

    def __iter__(self):
        return (k for k, _ in self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __hash__(self) -> int:
        return hash(self._items)

    def __eq__(self, other) -> bool:
        return isinstance(other, Mapping) and dict(self._items) == dict(other.items())

    def __repr__(self) -> str:
        return "Domains({" + ", ".join(f"{k!r}: {str(v)!r}" for k, v in self._items) + "})"


PROBABILITY = Interval(0.0, 1.0)     # open: a quantile level, a fraction of residuals
POSITIVE = Interval(0.0, np.inf)     # open at 0: a scale such as Huber's delta

# Links a custom loss gets from its task when it names none (regression and counts: identity).
TASK_LINKS = {"binary": sigmoid_link, "multiclass": softmax_link}


# --------------------------------------------------------------------------------------------
# The Loss pytree.
# --------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Loss:
    """A per-sample loss with everything boosting needs around it.

    Attributes:
      fn: ``fn(y, raw, **params) -> scalar`` for one sample; ``raw`` is a scalar when
        ``n_outputs == 1`` and a ``(K,)`` vector otherwise.
        ``fn`` may define ``fn.check_labels(y, name)``, raising ``ValueError`` for labels
        outside its domain (the distributions' non-integer counts, non-positive scales): every
        entry point calls it with the other label checks, before compiling.
      params: continuous loss parameters (pytree leaves: traced, vmappable).
      name: a label used in reprs and results.
      n_outputs: K, the number of raw outputs (``None``: the number of classes, set at fit time).
      task: ``"regression"``, ``"binary"`` (labels 0/1), ``"multiclass"`` (labels 0..K-1) or
        ``"count"`` (labels >= 0); decides label checks and what ``predict_proba`` means.
      link: ``link(raw, **params)`` -> prediction (regression) or ``(..., n_classes)`` probabilities;
        ``None`` (the default): the task's link, :func:`sigmoid_link` for ``"binary"``,
        :func:`softmax_link` for ``"multiclass"``, the identity otherwise.
      baseline: ``baseline(y, w, n_outputs, **params) -> (K,)`` the optimal constant raw score
        (the adaptive Huber loss starts from the median, as Friedman's Algorithm 4), or ``None``
        to solve for it numerically (L-BFGS).
      hessian: the Newton curvature of the trees (:func:`jboost.derivatives.grad_hess`):
        ``"auto"`` (the default of a custom loss), decided each round from the traced values
        (:func:`jboost.derivatives.curvature_is_positive`): where every row that moves the fit
        has positive curvature, ``"autodiff"``; otherwise (a curvature zero almost everywhere or
        negative somewhere) ``"unit"`` trees whose leaves are the exact per-leaf minimisers of
        the loss (``leaf_refit`` if set, else ``"exact"``: :func:`jboost.refit.exact_leaf_values`);
        ``"autodiff"`` (the built-in smooth losses'; Newton trees every round, whatever the
        curvature) the second derivative for one output and, for
        K coupled outputs, the Gershgorin majorant ``H_kk + sum_{j != k} |H_kj|`` of the
        autodiff hessian ``H`` (``2 p_k (1 - p_k)`` for the multinomial deviance, XGBoost's
        ``multi:softprob``), whose separable quadratic model bounds the coupled one, so the
        per-output step does not overshoot (the training deviance fell every round up to
        learning rate 1 in the tests; for the softmax it is half the classical step);
        ``"diagonal"``: ``H_kk`` only, the classical diagonal Newton step (Friedman 2001,
        Algorithm 6 without its ``(K-1)/K`` factor), which can diverge for coupled outputs at
        large learning rates (issue 14); equal to ``"autodiff"`` for one output; or ``"unit"``: tree
        structure fitted by least squares to the negative gradient (ESL Algorithm 10.3), used
        where the hessian is zero or a poor guide (absolute, quantile, Huber).
      leaf_refit: ``None``, ``"quantile"`` (weighted alpha-quantile of residuals per leaf; alpha
        from ``params['alpha']`` or 0.5), ``"huber"`` (ESL Algorithm 10.3 step 2(c)),
        ``"line_search"`` (Newton iterations on the true loss per leaf) or ``"exact"`` (the
        per-leaf minimiser of the true loss by autodiff bisection, no curvature needed:
        :func:`jboost.refit.exact_leaf_values`).
      adaptive_huber_alpha: when set, ``params['delta']`` is recomputed every round as the
        alpha-quantile of ``|y - f|`` (ESL section 10.10.2, the M-regression of Friedman 2001).
      domains: ``{parameter: Interval or (lo, hi[, lo_open, hi_open])}``, the values each
        parameter may take (open ends by default); checked on the host when the loss is resolved
        (:func:`jboost._validation.resolve_loss`). Stored as a hashable :class:`Domains`.
      label_columns: ``None`` (a scalar label per row, ``y (n,)``) or ``C``: each row's label is
        a ``(C,)`` vector, ``y (n, C)`` (set by :func:`jboost._validation.resolve_loss` from
        ``y``'s columns): multi-target regression, multi-label classification (``task="binary"``:
        ``C`` independent 0/1 labels), or the structured labels of a batch objective
        (:mod:`jboost.objectives`: ``(time, event)``, ``(relevance, query id)``). A per-sample
        loss with vector labels has one raw output per column (``n_outputs == C``) and its
        predictions keep the columns, ``(n, C)``, even for ``C == 1``.
      per_column: ``fn`` is a loss of a scalar label and raw score, applied to each of the
        ``label_columns`` columns and summed (a built-in loss given ``y (n, C)``:
        :func:`columnwise`); its gradients, curvatures, baseline and leaf refit are the
        scalar loss's, column by column, so output ``k`` is fitted as a one-output fit of
        column ``k`` would be.
      batch: ``fn(y, raw, w, **params) -> scalar`` is ONE function of every row (a loss that is
        not a sum over rows: Cox's partial likelihood, listwise ranking; :mod:`jboost.objectives`):
        ``y (n, C)``, ``raw (n,)`` (one output) or ``(n, K)``, ``w (n,)`` the row weights it must
        apply itself; it returns the weighted SUM (its mean is ``fn / sum(w)``). Gradients are
        ``jax.grad`` of it; the Newton curvature is the hessian's diagonal by ``hessian_diag``.
      hessian_diag: a batch loss's hessian diagonal: ``"exact"`` (one Hessian-vector product per
        row: exact, ``n`` times a gradient's cost), ``"groups"`` (a hessian block-diagonal over
        the query groups of ``y[:, 1]``: exact with ``max_group`` products, one probe per
        position in a group, every group at once), ``"hutchinson"`` (Bekas, Kokiopoulou and
        Saad 2007: ``n_probes`` Rademacher probes drawn from the round's key, unbiased) or a
        function ``diag(y, raw, w, **params) -> (n,) or (n, K)``
        (:func:`jboost.objectives.hessian_diagonal`).
      max_group: the largest query group's size (static; set from the labels by ``fit``).
      n_probes: the probes of ``hessian_diag="hutchinson"``.
    """

    fn: Callable
    params: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    name: str = "custom"
    n_outputs: Optional[int] = 1
    task: str = "regression"
    link: Optional[Callable] = None
    baseline: Optional[Callable] = None
    hessian: str = "auto"
    leaf_refit: Optional[str] = None
    adaptive_huber_alpha: bool = False
    domains: Mapping[str, Any] = dataclasses.field(default_factory=Domains)
    label_columns: Optional[int] = None
    per_column: bool = False
    batch: bool = False
    hessian_diag: Any = None
    max_group: Optional[int] = None
    n_probes: int = 32

    def __post_init__(self):
        if self.task not in TASKS:
            raise ValueError(f"task={self.task!r} must be one of {TASKS}.")
        if self.hessian not in HESSIANS:
            raise ValueError(f"hessian={self.hessian!r} must be one of {HESSIANS}: 'auto' (the "
                             "default: Newton where the curvature is positive, else least squares "
                             "with exact leaves), 'autodiff' (Newton curvature, safe for coupled "
                             "outputs), 'diagonal' (the classical diagonal Newton step) or 'unit' "
                             "(least squares).")
        if self.leaf_refit not in LEAF_REFITS:
            raise ValueError(
                f"leaf_refit={self.leaf_refit!r} must be None, 'quantile', 'huber', 'line_search' "
                "or 'exact'."
            )
        if self.n_outputs is not None and int(self.n_outputs) < 1:
            raise ValueError(f"n_outputs={self.n_outputs} must be >= 1.")
        if self.label_columns is not None and int(self.label_columns) < 1:
            raise ValueError(f"label_columns={self.label_columns} must be >= 1 (or None).")
        if self.batch and not (callable(self.hessian_diag)
                               or self.hessian_diag in BATCH_HESSIANS):
            raise ValueError(f"hessian_diag={self.hessian_diag!r} must be one of {BATCH_HESSIANS} "
                             "or a function diag(y, raw, w, **params) for a batch objective.")
        if self.link is None:
            object.__setattr__(self, "link", TASK_LINKS.get(self.task) or identity_link)
        if not isinstance(self.domains, Domains):
            object.__setattr__(self, "domains", Domains(self.domains))
        # Parameters are stored as float32 arrays so that pytrees of losses stack and vmap.
        # (Tracers and placeholders used by pytree transformations are left untouched.)
        object.__setattr__(
            self,
            "params",
            {k: (jnp.asarray(v, jnp.float32) if isinstance(v, (int, float, np.ndarray, np.generic)) else v)
             for k, v in dict(self.params).items()},
        )

    def __call__(self, y, raw):
        """Per-sample loss with this loss's parameters."""
        return self.fn(y, raw, **self.params)

    def replace(self, **changes) -> "Loss":
        return dataclasses.replace(self, **changes)

    def with_params(self, **params) -> "Loss":
        return dataclasses.replace(self, params={**self.params, **params})


jax.tree_util.register_dataclass(
    Loss,
    data_fields=["params"],
    meta_fields=["fn", "name", "n_outputs", "task", "link", "baseline", "hessian", "leaf_refit",
                 "adaptive_huber_alpha", "domains", "label_columns", "per_column", "batch",
                 "hessian_diag", "max_group", "n_probes"],
)


def vector_fn(loss: Loss):
    """``(y, raw (K,), params) -> scalar``: the loss with its raw argument always a vector (a
    :attr:`Loss.per_column` loss: its scalar function summed over the columns)."""
    if loss.batch:
        raise TypeError(f"loss {loss.name!r} is a batch objective (a function of every row): it "
                        "has no per-sample value.")
    if loss.per_column:
        return lambda y, raw, params: jnp.sum(
            jax.vmap(lambda yk, rk: loss.fn(yk, rk, **params))(y, raw))
    if loss.n_outputs == 1:
        return lambda y, raw, params: loss.fn(y, raw[0], **params)
    return lambda y, raw, params: loss.fn(y, raw, **params)


def per_sample_losses(loss: Loss, y, raw):
    """Loss of every sample: ``y (n,)`` (or ``(n, C)``), ``raw (n, K)`` -> ``(n,)``."""
    f = vector_fn(loss)
    return jax.vmap(f, in_axes=(0, 0, None))(y, raw, loss.params)


def batch_raw(loss: Loss, raw):
    """A batch objective's raw argument: ``(n,)`` for one output, else ``(n, K)``."""
    return raw[:, 0] if loss.n_outputs == 1 else raw


@functools.lru_cache(maxsize=256)
def _takes_max_group(fn) -> bool:
    try:
        return "max_group" in inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False


def batch_value(loss: Loss, y, raw, w, params=None):
    """A batch objective's ``fn(y, raw, w, **params)`` with ``raw`` as :func:`batch_raw` gives it;
    a function with a ``max_group`` parameter also gets the static :attr:`Loss.max_group`."""
    params = loss.params if params is None else params
    extra = ({"max_group": int(loss.max_group)}
             if loss.max_group is not None and _takes_max_group(loss.fn) else {})
    return loss.fn(y, batch_raw(loss, raw), w, **params, **extra)


def total_loss(loss: Loss, y, raw, w):
    """The weighted sum of the loss over the rows ``y``, ``raw (n, K)``, ``w (n,)``: a batch
    objective's ``fn(y, raw, w)``, else ``sum_i w_i loss(y_i, raw_i)``."""
    if loss.batch:
        return jnp.asarray(batch_value(loss, y, raw, w), jnp.float32)
    return jnp.sum(w * per_sample_losses(loss, y, raw))


def column_loss(loss: Loss) -> Loss:
    """The scalar loss of one column of a :attr:`Loss.per_column` loss (one output)."""
    return loss.replace(per_column=False, label_columns=None, n_outputs=1)


def columnwise(loss: Loss, n_columns: int) -> Loss:
    """``loss`` (a loss of a scalar label) applied to each of ``n_columns`` label columns and
    summed: multi-target regression (``squared_error`` per column) or multi-label
    classification (``binomial_deviance`` per column, ``task="binary"``); one output per column."""
    return loss.replace(per_column=True, label_columns=int(n_columns), n_outputs=int(n_columns))


def keeps_columns(loss: Loss) -> bool:
    """Whether predictions keep the label columns ``(n, C)`` (a per-sample loss of vector labels)."""
    return loss.label_columns is not None and not loss.batch


def as_predicted(raw, loss):
    """Raw scores ``(..., K)`` as :func:`jboost.predict` returns them: ``(...,)`` for one output,
    unless ``loss`` (a :class:`Loss`, or ``None`` for models without one) keeps label columns."""
    keeps = isinstance(loss, Loss) and keeps_columns(loss)
    return raw[..., 0] if raw.shape[-1] == 1 and not keeps else raw


def baseline(loss: Loss, y, w, margin=None):
    """Optimal constant raw score ``(K,)`` of ``loss`` on weighted labels (next to the per-row
    offsets ``margin`` ``(n, K)`` when given: found numerically)."""
    if loss.baseline is None or margin is not None:
        return numeric_baseline(loss, y, w, margin=margin)
    if loss.per_column:  # the scalar loss's baseline of each column
        one = column_loss(loss)
        return jax.vmap(lambda yk: jnp.asarray(one.baseline(yk, w, 1, **one.params), jnp.float32)
                        .reshape(()), in_axes=1)(y)
    return jnp.asarray(loss.baseline(y, w, loss.n_outputs, **loss.params), jnp.float32).reshape(
        (loss.n_outputs,)
    )


# --------------------------------------------------------------------------------------------
# Constructors of the built-in losses.
# --------------------------------------------------------------------------------------------


def squared_error() -> Loss:
    return Loss(squared_error_fn, name="squared_error", baseline=mean_baseline, hessian="autodiff")


def absolute_error() -> Loss:
    return Loss(absolute_error_fn, name="absolute_error", baseline=median_baseline,
                hessian="unit", leaf_refit="quantile")


def huber(delta=1.0, alpha=None) -> Loss:
    """Huber loss with fixed ``delta``, or ESL's adaptive delta when ``alpha`` is given.

    With ``alpha`` (e.g. 0.9), delta is recomputed each round as the alpha-quantile of the
    absolute residuals ``|y - f_{m-1}|`` (ESL section 10.10.2); ``delta`` is then only the value
    used before the first round.

    The baseline is the optimal constant (Huber's M-estimate of location) for a fixed delta, and
    the weighted median with the adaptive delta, as in Friedman (2001), Algorithm 4.
    """
    params = {"delta": delta}
    domains = {"delta": POSITIVE}
    if alpha is not None:
        params["alpha"] = alpha
        domains["alpha"] = PROBABILITY
    return Loss(huber_fn if alpha is None else _huber_adaptive_fn, params=params, name="huber",
                baseline=huber_baseline if alpha is None else median_baseline, hessian="unit",
                leaf_refit="huber", adaptive_huber_alpha=alpha is not None, domains=domains)


def _huber_adaptive_fn(y, f, delta, alpha):
    return huber_fn(y, f, delta)


def quantile(alpha=0.5) -> Loss:
    return Loss(quantile_fn, params={"alpha": alpha}, name="quantile", baseline=quantile_baseline,
                hessian="unit", leaf_refit="quantile", domains={"alpha": PROBABILITY})


def binomial_deviance() -> Loss:
    return Loss(binomial_deviance_fn, name="binomial_deviance", task="binary",
                link=sigmoid_link, baseline=logit_baseline, hessian="autodiff")


def exponential() -> Loss:
    return Loss(exponential_fn, name="exponential", task="binary", link=adaboost_link,
                baseline=half_logit_baseline, hessian="autodiff")


def multinomial_deviance(n_classes=None) -> Loss:
    return Loss(multinomial_deviance_fn, name="multinomial_deviance", n_outputs=n_classes,
                task="multiclass", link=softmax_link, baseline=log_freq_baseline, hessian="autodiff")


def samme_exponential(n_classes=None) -> Loss:
    return Loss(samme_exponential_fn, name="samme_exponential", n_outputs=n_classes,
                task="multiclass", link=samme_link, baseline=samme_baseline, hessian="autodiff")


def poisson() -> Loss:
    return Loss(poisson_fn, name="poisson", task="count", link=exp_link,
                baseline=log_mean_baseline, hessian="autodiff")


# The per-sample functions of the built-in losses (custom losses get the host-side sanity checks
# of jboost.fit that these pass by construction, e.g. a gradient that is not zero everywhere).
BUILT_IN_FNS = frozenset({squared_error_fn, absolute_error_fn, huber_fn, _huber_adaptive_fn,
                          quantile_fn, binomial_deviance_fn, exponential_fn,
                          multinomial_deviance_fn, samme_exponential_fn, poisson_fn})


def is_built_in(loss: Loss) -> bool:
    """Whether ``loss`` computes one of jboost's built-in losses."""
    return loss.fn in BUILT_IN_FNS


# Built-in losses of the residual y - f alone: fitting y - c from the baseline of y - c and
# adding c back to the raw scores gives the same model (their baselines -- mean, median,
# quantile, Huber's M-estimate -- move with the labels too).
SHIFT_EQUIVARIANT_FNS = frozenset({squared_error_fn, absolute_error_fn, huber_fn,
                                   _huber_adaptive_fn, quantile_fn})


def shifts_with_labels(loss: Loss) -> bool:
    """Whether ``loss(y + c, f + c) == loss(y, f)`` for every ``c`` (a built-in loss of the
    residual), so that a fit may subtract a label offset in float64 and add it back to the model's
    raw scores (:func:`jboost._validation.label_offset`)."""
    return loss.fn in SHIFT_EQUIVARIANT_FNS


_REGISTRY = {
    "squared_error": squared_error,
    "absolute_error": absolute_error,
    "huber": huber,
    "quantile": quantile,
    "binomial_deviance": binomial_deviance,
    "logistic": binomial_deviance,
    "exponential": exponential,
    "multinomial_deviance": multinomial_deviance,
    "softmax": multinomial_deviance,
    "samme_exponential": samme_exponential,
    "poisson": poisson,
}


def get(loss, n_outputs: Optional[int] = None, task: Optional[str] = None) -> Loss:
    """Resolve a loss given as a name, a :class:`Loss` or a plain function ``fn(y, raw)``."""
    if isinstance(loss, Loss):
        out = loss
    elif isinstance(loss, str):
        if loss not in _REGISTRY:
            raise ValueError(f"loss={loss!r} is not a built-in loss; choose one of {sorted(_REGISTRY)}"
                             " or pass a function loss(y, raw).")
        out = _REGISTRY[loss]()
    elif callable(loss):
        # The link is the task's (Loss.link's default); a K-class task needs n_outputs (checked
        # in jboost._validation.resolve_loss, which says to pass it).
        out = Loss(loss, name=getattr(loss, "__name__", "custom"), n_outputs=n_outputs or 1,
                   task=task or "regression")
    else:
        raise TypeError(f"loss must be a name, a jboost.Loss or a function loss(y, raw); got {type(loss).__name__}.")
    if n_outputs is not None and out.n_outputs != n_outputs:
        out = out.replace(n_outputs=int(n_outputs))
    return out


def runs(v):
    """``(run (n,), position (n,))`` int32, traced: each entry's run of equal consecutive values
    of ``v`` ``(n,)`` (0, 1, ...: a query group, a block of tied times) and its position in it."""
    n = v.shape[0]
    new = jnp.concatenate([jnp.ones((1,), bool), v[1:] != v[:-1]])
    idx = jnp.arange(n, dtype=jnp.int32)
    return jnp.cumsum(new.astype(jnp.int32)) - 1, idx - jax.lax.cummax(jnp.where(new, idx, 0))


def query_starts(qid: np.ndarray, name: str = "y") -> np.ndarray:
    """The first row of each query group of the ids ``qid`` ``(n,)``, whose rows must be
    contiguous (each id one run of rows); raises ``ValueError`` naming ``name`` otherwise."""
    qid = np.asarray(qid)
    if np.any(qid != np.round(qid)) or np.any(np.abs(qid) >= 2**24):
        raise ValueError(f"{name}[:, 1] (query ids) must be integers below 2**24 = 16777216 in "
                         "absolute value (labels are float32, which merges larger ids); renumber "
                         f"them: {name}[:, 1] = np.unique(qid, return_inverse=True)[1].")
    starts = np.flatnonzero(np.r_[True, qid[1:] != qid[:-1]])
    if len(np.unique(qid)) != len(starts):
        raise ValueError(f"{name}[:, 1] (query ids) must be contiguous: every query's rows "
                         "together, one run each; sort the rows by query id first (order = "
                         f"np.argsort({name}[:, 1], kind='stable'); X, y = X[order], y[order]).")
    return starts


def check_labels(loss: Loss, y: np.ndarray, name: str = "y") -> None:
    """Raise ``ValueError`` naming the labels (``name``) when they are not what ``loss`` expects
    (the loss function's own ``check_labels`` first: the most specific message)."""
    check = getattr(loss.fn, "check_labels", None)  # a loss function's own domain of labels
    if callable(check):
        check(y, name)
    if loss.task == "binary":
        bad = ~np.isin(y, (0, 1))
        if bad.any():
            raise ValueError(f"{name} must hold binary labels 0/1 for loss {loss.name!r}; got values "
                             f"such as {np.unique(y[bad])[:5].tolist()}.")
    elif loss.task == "multiclass":
        k = loss.n_outputs
        if np.any(y != np.round(y)) or np.any(y < 0) or (k is not None and np.any(y >= k)):
            raise ValueError(f"{name} must hold integer class labels in [0, {k}) for loss "
                             f"{loss.name!r}; got values in [{y.min()}, {y.max()}].")
    elif loss.task == "count":
        if np.any(y < 0):
            raise ValueError(f"{name} must be non-negative for loss {loss.name!r}; got min {y.min()}.")
    elif loss.task == "survival":
        if y.ndim != 2 or y.shape[1] != 2:
            raise ValueError(f"{name} must be (n, 2) survival labels (time, event) for loss "
                             f"{loss.name!r}; got shape {y.shape}.")
        if np.any(y[:, 0] <= 0):
            raise ValueError(f"{name}[:, 0] (survival times) must be > 0 for loss {loss.name!r}; "
                             f"got min {y[:, 0].min()}.")
        bad = ~np.isin(y[:, 1], (0, 1))
        if bad.any():
            raise ValueError(f"{name}[:, 1] (events) must be 0 (censored) or 1 (event) for loss "
                             f"{loss.name!r}; got values such as {np.unique(y[bad, 1])[:5].tolist()}.")
    elif loss.task == "ranking":
        if y.ndim != 2 or y.shape[1] != 2:
            raise ValueError(f"{name} must be (n, 2) ranking labels (relevance, query id) for loss "
                             f"{loss.name!r}; got shape {y.shape}.")
        if np.any(y[:, 0] < 0):
            raise ValueError(f"{name}[:, 0] (relevance grades) must be >= 0 for loss "
                             f"{loss.name!r}; got min {y[:, 0].min()}.")
        query_starts(y[:, 1], name)
