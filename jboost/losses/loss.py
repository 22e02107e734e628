"""The Loss type, Domains, Interval and the task vocabulary (TASKS, CLASSIFICATION).

A loss is written for ONE sample, rlax-style (``fn(y, raw, **params) -> scalar``; ``raw`` a
scalar for one output, a ``(K,)`` vector for K); boosting vmaps it over samples and takes its
gradients and Newton curvatures by autodiff (:mod:`jboost.losses.derivatives`), as in gradient
boosting of an arbitrary differentiable loss (Friedman 2001, "Greedy Function Approximation: A
Gradient Boosting Machine", Annals of Statistics). A :class:`Loss` bundles the function with its
number of outputs, link, optimal constant baseline, label check, curvature rule and optional
exact leaf refit; its continuous parameters are pytree leaves (traced, vmappable) with declared
domains (:class:`Domains`). Objectives that are not sums over samples are batch losses
(``Loss.batch``, :mod:`jboost.objectives`).

Binary labels are ``{0, 1}`` for every binary loss; class labels of K-class losses are the
integers ``0 .. K-1``. The concepts (vector labels, curvature rules, losses without smoothness)
are described in ``docs/losses.md``.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
from typing import Any, Callable, Mapping, NamedTuple, Optional

import jax
import jax.numpy as jnp
import numpy as np

from jboost.losses import links

CLASSIFICATION = ("binary", "multiclass")

TASKS = ("regression", "binary", "multiclass", "count", "survival", "ranking")

# Newton curvatures of a loss (Loss.hessian; jboost.losses.derivatives.grad_hess). "auto", a custom
# loss's default: "autodiff" in a round where every row's curvature is positive, else "unit"
# trees with exact leaves (jboost.losses.derivatives.curvature_is_positive, jboost.engine.algorithm.newton_round).
HESSIANS = ("auto", "autodiff", "diagonal", "unit")

# The hessian diagonals of a batch objective (Loss.hessian_diag; jboost.objectives).
BATCH_HESSIANS = ("exact", "groups", "hutchinson")

# Exact leaf refits (Loss.leaf_refit; jboost.trees.refit.refit_leaf_values).
LEAF_REFITS = (None, "quantile", "huber", "line_search", "exact")


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
        """Elementwise: whether ``x`` is finite and inside the interval.

        Args:
          x: a number or an array of numbers.

        Returns:
          A bool array shaped like ``x``.
        """
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
      hessian: the Newton curvature of the trees (:func:`jboost.losses.derivatives.grad_hess`):
        ``"auto"`` (the default of a custom loss), decided each round from the traced values
        (:func:`jboost.losses.derivatives.curvature_is_positive`): where every row that moves the fit
        has positive curvature, ``"autodiff"``; otherwise (a curvature zero almost everywhere or
        negative somewhere) ``"unit"`` trees whose leaves are the exact per-leaf minimisers of
        the loss (``leaf_refit`` if set, else ``"exact"``: :func:`jboost.trees.refit.exact_leaf_values`);
        ``"autodiff"`` (the built-in smooth losses'; Newton trees every round, whatever the
        curvature) the second derivative for one output and, for
        K coupled outputs, the Gershgorin majorant ``H_kk + sum_{j != k} |H_kj|`` of the
        autodiff hessian ``H`` (``2 p_k (1 - p_k)`` for the multinomial deviance, XGBoost's
        ``multi:softprob``), whose separable quadratic model bounds the coupled one, so the
        per-output step does not overshoot (for the softmax it is half the classical step);
        ``"diagonal"``: ``H_kk`` only, the classical diagonal Newton step (Friedman 2001,
        Algorithm 6 without its ``(K-1)/K`` factor), which can diverge for coupled outputs at
        large learning rates; equal to ``"autodiff"`` for one output; or ``"unit"``: tree
        structure fitted by least squares to the negative gradient (ESL Algorithm 10.3), used
        where the hessian is zero or a poor guide (absolute, quantile, Huber).
      leaf_refit: ``None``, ``"quantile"`` (weighted alpha-quantile of residuals per leaf; alpha
        from ``params['alpha']`` or 0.5), ``"huber"`` (ESL Algorithm 10.3 step 2(c)),
        ``"line_search"`` (Newton iterations on the true loss per leaf) or ``"exact"`` (the
        per-leaf minimiser of the true loss by autodiff bisection, no curvature needed:
        :func:`jboost.trees.refit.exact_leaf_values`).
      adaptive_huber_alpha: when set, ``params['delta']`` is recomputed every round as the
        alpha-quantile of ``|y - f|`` (ESL section 10.10.2, the M-regression of Friedman 2001).
      domains: ``{parameter: Interval or (lo, hi[, lo_open, hi_open])}``, the values each
        parameter may take (open ends by default); checked on the host when the loss is resolved
        (:func:`jboost.losses.checks.resolve_loss`). Stored as a hashable :class:`Domains`.
      label_columns: ``None`` (a scalar label per row, ``y (n,)``) or ``C``: each row's label is
        a ``(C,)`` vector, ``y (n, C)`` (set by :func:`jboost.losses.checks.resolve_loss` from
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

    Raises:
      ValueError: ``task``, ``hessian``, ``leaf_refit`` or (for a batch objective)
        ``hessian_diag`` is not one of its values, or ``n_outputs`` / ``label_columns`` is below 1.
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
            object.__setattr__(self, "link", links.TASK_LINKS.get(self.task) or links.identity_link)
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
        """The per-sample loss with this loss's parameters.

        Args:
          y: one sample's label.
          raw: its raw score (a scalar, or ``(K,)``).

        Returns:
          ``fn(y, raw, **params)``.
        """
        return self.fn(y, raw, **self.params)

    def replace(self, **changes) -> "Loss":
        """A copy with the given fields replaced (``dataclasses.replace``).

        Args:
          **changes: field names and their new values.

        Returns:
          A new :class:`Loss` (its checks run again).

        Raises:
          ValueError: as the constructor.
        """
        return dataclasses.replace(self, **changes)

    def with_params(self, **params) -> "Loss":
        """A copy with these parameters set (the others kept).

        Args:
          **params: parameter names and values (numbers, arrays or tracers).

        Returns:
          A new :class:`Loss`.
        """
        return dataclasses.replace(self, params={**self.params, **params})


jax.tree_util.register_dataclass(
    Loss,
    data_fields=["params"],
    meta_fields=["fn", "name", "n_outputs", "task", "link", "baseline", "hessian", "leaf_refit",
                 "adaptive_huber_alpha", "domains", "label_columns", "per_column", "batch",
                 "hessian_diag", "max_group", "n_probes"],
)


def vector_fn(loss: Loss):
    """The loss with its raw argument always a vector.

    Args:
      loss: a per-sample loss (a :attr:`Loss.per_column` loss: its scalar function summed over
        the columns).

    Returns:
      ``f(y, raw (K,), params) -> scalar``.

    Raises:
      TypeError: ``loss`` is a batch objective (it has no per-sample value).
    """
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
    """The loss of every sample.

    Args:
      loss: a per-sample loss.
      y: ``(n,)`` labels (``(n, C)`` vector labels).
      raw: ``(n, K)`` raw scores.

    Returns:
      ``(n,)`` losses.

    Raises:
      TypeError: ``loss`` is a batch objective.
    """
    f = vector_fn(loss)
    return jax.vmap(f, in_axes=(0, 0, None))(y, raw, loss.params)


def batch_raw(loss: Loss, raw):
    """A batch objective's raw argument.

    Args:
      loss: the batch objective.
      raw: ``(n, K)`` raw scores.

    Returns:
      ``(n,)`` for one output, else ``raw``.
    """
    return raw[:, 0] if loss.n_outputs == 1 else raw


@functools.lru_cache(maxsize=256)
def _takes_max_group(fn) -> bool:
    try:
        return "max_group" in inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False


def batch_value(loss: Loss, y, raw, w, params=None):
    """A batch objective's value ``fn(y, raw, w, **params)``.

    ``raw`` is passed as :func:`batch_raw` gives it; a function with a ``max_group`` parameter
    also gets the static :attr:`Loss.max_group`.

    Args:
      loss: the batch objective.
      y: ``(n, C)`` structured labels.
      raw: ``(n, K)`` raw scores.
      w: ``(n,)`` row weights.
      params: the parameters to use; ``None``: ``loss.params``.

    Returns:
      The weighted sum, a scalar.
    """
    params = loss.params if params is None else params
    extra = ({"max_group": int(loss.max_group)}
             if loss.max_group is not None and _takes_max_group(loss.fn) else {})
    return loss.fn(y, batch_raw(loss, raw), w, **params, **extra)


def total_loss(loss: Loss, y, raw, w):
    """The weighted sum of the loss over the rows.

    Args:
      loss: a per-sample loss or a batch objective.
      y: ``(n,)`` or ``(n, C)`` labels.
      raw: ``(n, K)`` raw scores.
      w: ``(n,)`` row weights.

    Returns:
      A batch objective's ``fn(y, raw, w)``, else ``sum_i w_i loss(y_i, raw_i)``: a scalar.
    """
    if loss.batch:
        return jnp.asarray(batch_value(loss, y, raw, w), jnp.float32)
    return jnp.sum(w * per_sample_losses(loss, y, raw))


def column_loss(loss: Loss) -> Loss:
    """The scalar loss of one column of a :attr:`Loss.per_column` loss.

    Args:
      loss: a per-column loss.

    Returns:
      The same loss with one output and scalar labels.
    """
    return loss.replace(per_column=False, label_columns=None, n_outputs=1)


def columnwise(loss: Loss, n_columns: int) -> Loss:
    """A loss of a scalar label applied to each of ``n_columns`` label columns and summed.

    Multi-target regression (``squared_error`` per column) or multi-label classification
    (``binomial_deviance`` per column, ``task="binary"``).

    Args:
      loss: a loss of a scalar label and one output.
      n_columns: the number of label columns ``C``.

    Returns:
      A :attr:`Loss.per_column` loss with ``C`` outputs.
    """
    return loss.replace(per_column=True, label_columns=int(n_columns), n_outputs=int(n_columns))


def keeps_columns(loss: Loss) -> bool:
    """Whether predictions keep the label columns ``(n, C)``.

    Args:
      loss: a loss.

    Returns:
      ``True`` for a per-sample loss of vector labels.
    """
    return loss.label_columns is not None and not loss.batch


def as_predicted(raw, loss):
    """Raw scores as :func:`jboost.predict` returns them.

    Args:
      raw: ``(..., K)`` raw scores.
      loss: a :class:`Loss`, or ``None`` for models without one.

    Returns:
      ``(...,)`` for one output (unless ``loss`` keeps label columns), else ``raw``.
    """
    keeps = isinstance(loss, Loss) and keeps_columns(loss)
    return raw[..., 0] if raw.shape[-1] == 1 and not keeps else raw
