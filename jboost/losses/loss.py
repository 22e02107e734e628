"""The Loss type, Domains, Interval and the task vocabulary (TASKS, CLASSIFICATION).

A loss is written for one sample (``fn(y, raw, **params) -> scalar``); boosting vmaps it and takes
its derivatives by autodiff (Friedman 2001, "Greedy Function Approximation"). Binary labels are
``{0, 1}``, K-class labels ``0 .. K-1``. See ``docs/losses.md``.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
from typing import Any, Callable, Mapping, NamedTuple, Optional

import jax
import jax.numpy as jnp
import numpy as np

from jboost.data import rows
from jboost.losses import links

CLASSIFICATION = ("binary", "multiclass")

#: The tasks of a loss (``Loss.task``): they decide the label checks and what
#: ``predict_proba`` means.
TASKS = ("regression", "binary", "multiclass", "count", "survival", "ranking")

#: The Newton curvatures of a loss (``Loss.hessian``; docs/losses.md, "The fields of a Loss").
HESSIANS = ("auto", "autodiff", "diagonal", "unit")

#: The hessian diagonals of a batch objective (``Loss.hessian_diag``; :mod:`jboost.objectives`).
BATCH_HESSIANS = ("exact", "groups", "hutchinson")

#: The exact leaf refits (``Loss.leaf_refit``; :func:`jboost.trees.refit.refit_leaf_values`).
LEAF_REFITS = (None, "quantile", "huber", "line_search", "exact")


# ---- Domains of loss parameters ------------------------------------------------------------


class Interval(NamedTuple):
    """A real interval, the domain of a loss parameter: open ends by default, ``(0, 1)``."""

    lo: float = -np.inf
    hi: float = np.inf
    lo_open: bool = True
    hi_open: bool = True

    def contains(self, x) -> np.ndarray:
        """Elementwise: whether ``x`` is finite and inside the interval (a bool array)."""
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


# ---- The Loss pytree -----------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Loss:
    """A per-sample loss with everything boosting needs around it (fields: ``docs/losses.md``).

    Attributes:
      fn: ``fn(y, raw, **params) -> scalar`` for one sample (``raw`` a scalar for one output,
        ``(K,)`` otherwise); a batch objective's ``fn(y, raw, w, **params)`` is the weighted sum.
        An optional ``fn.check_labels(y, name)`` is called with the label checks.
      params: continuous parameters (pytree leaves: traced, vmappable).
      name: a label used in reprs and results.
      n_outputs: K, the raw outputs (``None``: the number of classes, set at fit time).
      task: one of :data:`TASKS`; decides label checks and what ``predict_proba`` means.
      link: ``link(raw, **params)`` -> prediction or ``(..., n_classes)`` probabilities;
        ``None``: the task's link (:data:`jboost.losses.links.TASK_LINKS`, else the identity).
      baseline: ``baseline(y, w, n_outputs, **params) -> (K,)``, the optimal constant raw
        score, or ``None``: found numerically (L-BFGS).
      hessian: the Newton curvature, one of :data:`HESSIANS` (``"auto"``: Newton where every
        row's curvature is positive, else least squares with exact leaves).
      leaf_refit: one of :data:`LEAF_REFITS`.
      adaptive_huber_alpha: recompute ``params['delta']`` every round as the alpha-quantile of
        ``|y - f|`` (ESL section 10.10.2).
      domains: ``{parameter: Interval or (lo, hi[, lo_open, hi_open])}``, stored as
        :class:`Domains`.
      label_columns: ``None`` (labels ``(n,)``) or ``C`` (labels ``(n, C)``).
      per_column: ``fn`` is a scalar loss applied to each label column and summed
        (:func:`columnwise`).
      batch: ``fn`` is one function of every row (:mod:`jboost.objectives`).
      hessian_diag: a batch loss's hessian diagonal, one of :data:`BATCH_HESSIANS` or a
        function ``diag(y, raw, w, **params)``.
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
        """The per-sample loss ``fn(y, raw, **params)`` with this loss's parameters."""
        return self.fn(y, raw, **self.params)

    def replace(self, **changes) -> "Loss":
        """A copy with the given fields replaced (``dataclasses.replace``; the checks run again)."""
        return dataclasses.replace(self, **changes)

    def with_params(self, **params) -> "Loss":
        """A copy with these parameters set (numbers, arrays or tracers), the others kept."""
        return dataclasses.replace(self, params={**self.params, **params})


jax.tree_util.register_dataclass(
    Loss,
    data_fields=["params"],
    meta_fields=["fn", "name", "n_outputs", "task", "link", "baseline", "hessian", "leaf_refit",
                 "adaptive_huber_alpha", "domains", "label_columns", "per_column", "batch",
                 "hessian_diag", "max_group", "n_probes"],
)


def vector_fn(loss: Loss):
    """``f(y, raw (K,), params) -> scalar``: the loss with its raw argument always a vector.

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
    """``(n,)`` losses of labels ``y`` and raw scores ``raw (n, K)`` (a per-sample loss)."""
    f = vector_fn(loss)
    return jax.vmap(f, in_axes=(0, 0, None))(y, raw, loss.params)


def batch_raw(loss: Loss, raw):
    """A batch objective's raw argument: ``raw[:, 0]`` for one output, else ``raw (n, K)``."""
    return raw[:, 0] if loss.n_outputs == 1 else raw


@functools.lru_cache(maxsize=256)
def _takes_max_group(fn) -> bool:
    try:
        return "max_group" in inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False


def batch_value(loss: Loss, y, raw, w, params=None):
    """A batch objective's weighted sum ``fn(y, raw, w, **params)`` (``params``: default
    ``loss.params``); ``raw`` as :func:`batch_raw` gives it, and a function with a ``max_group``
    parameter also gets the static ``loss.max_group``.
    """
    params = loss.params if params is None else params
    extra = ({"max_group": int(loss.max_group)}
             if loss.max_group is not None and _takes_max_group(loss.fn) else {})
    return loss.fn(y, batch_raw(loss, raw), w, **params, **extra)


def total_loss(loss: Loss, y, raw, w):
    """The weighted sum of the loss over the rows: a batch objective's ``fn(y, raw, w)``, else
    ``sum_i w_i loss(y_i, raw_i)``.
    """
    if loss.batch:
        return jnp.asarray(batch_value(loss, y, raw, w), jnp.float32)
    return rows.row_sum(w * per_sample_losses(loss, y, raw))


def column_loss(loss: Loss) -> Loss:
    """The scalar loss of one column of a ``per_column`` loss (a :class:`Loss` field)."""
    return loss.replace(per_column=False, label_columns=None, n_outputs=1)


def columnwise(loss: Loss, n_columns: int) -> Loss:
    """A loss of a scalar label applied to each of ``n_columns`` label columns and summed.

    Multi-target regression (``squared_error``) or multi-label classification
    (``binomial_deviance``, ``task="binary"``).

    Args:
      loss: a loss of a scalar label and one output.
      n_columns: the number of label columns ``C``.

    Returns:
      A ``per_column`` loss with ``C`` outputs.
    """
    return loss.replace(per_column=True, label_columns=int(n_columns), n_outputs=int(n_columns))


def keeps_columns(loss: Loss) -> bool:
    """Whether predictions keep the label columns ``(n, C)``: a per-sample loss of vector labels."""
    return loss.label_columns is not None and not loss.batch


def as_predicted(raw, loss):
    """Raw scores ``(..., K)`` as :func:`jboost.predict` returns them: ``(...,)`` for one output
    unless ``loss`` (a :class:`Loss` or ``None``) keeps label columns.
    """
    keeps = isinstance(loss, Loss) and keeps_columns(loss)
    return raw[..., 0] if raw.shape[-1] == 1 and not keeps else raw
