"""Per-sample losses ``loss(y, raw) -> scalar``, their links and optimal constant baselines.

A loss is written for ONE sample, rlax-style: ``y`` is that sample's label (a scalar) and
``raw`` its raw score, a scalar for one-output losses and a ``(K,)`` vector for K-output losses.
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
from typing import Any, Callable, Mapping, NamedTuple, Optional

import jax
import jax.numpy as jnp
import numpy as np

# Beyond this exponent, exponentials continue as their second-order Taylor expansion: values,
# gradients and hessians stay finite and positive (no overflow at large margins).
_EXP_CLIP = 30.0

TASKS = ("regression", "binary", "multiclass", "count")

# Newton curvatures of a loss (Loss.hessian; jboost.derivatives.grad_hess). "auto", a custom
# loss's default: "autodiff" in a round where every row's curvature is positive, else "unit"
# trees with exact leaves (jboost.derivatives.curvature_is_positive, jboost.boosting.newton_round).
HESSIANS = ("auto", "autodiff", "diagonal", "unit")

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
        return jnp.sum(w * per_sample_losses(loss, y, raw)) / jnp.sum(w)

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
                 "adaptive_huber_alpha", "domains"],
)


def vector_fn(loss: Loss):
    """``(y, raw (K,), params) -> scalar``: the loss with its raw argument always a vector."""
    if loss.n_outputs == 1:
        return lambda y, raw, params: loss.fn(y, raw[0], **params)
    return lambda y, raw, params: loss.fn(y, raw, **params)


def per_sample_losses(loss: Loss, y, raw):
    """Loss of every sample: ``y (n,)``, ``raw (n, K)`` -> ``(n,)``."""
    f = vector_fn(loss)
    return jax.vmap(f, in_axes=(0, 0, None))(y, raw, loss.params)


def baseline(loss: Loss, y, w, margin=None):
    """Optimal constant raw score ``(K,)`` of ``loss`` on weighted labels (next to the per-row
    offsets ``margin`` ``(n, K)`` when given: found numerically)."""
    if loss.baseline is None or margin is not None:
        return numeric_baseline(loss, y, w, margin=margin)
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


def check_labels(loss: Loss, y: np.ndarray, name: str = "y") -> None:
    """Raise ``ValueError`` naming the labels (``name``) when they are not what ``loss`` expects."""
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
