"""Validation metrics (early stopping, sweeps), the check of a metric=/eval_metric= argument,
and the held-out measures of batch objectives (concordance index, NDCG).

A custom metric is ``metric(y, raw, w) -> scalar``; with vector labels a named metric averages
over every (row, column) cell. See ``docs/losses.md``.
"""

from __future__ import annotations

from typing import Callable, Optional, Union

import jax.numpy as jnp
import numpy as np

from jboost.losses import checks, loss as loss_lib


def check_metric(metric, loss: loss_lib.Loss, greater_is_better: bool = False,
                 name: str = "metric") -> bool:
    """Check a ``metric=``/``eval_metric=`` argument against ``loss``; returns whether greater is
    better (only a custom metric may say so).

    Args:
      metric: ``None`` (the loss), a name of :data:`METRICS`, or a hashable function
        ``metric(y, raw, w) -> scalar``.
      loss: the fit's :class:`jboost.Loss`.
      greater_is_better: whether a custom metric is maximised.
      name: the argument's name in messages.

    Raises:
      ValueError: an unknown name, ``"error_rate"`` without a classification loss, or a named
        metric with a batch objective.
      TypeError: a custom metric that is not hashable.
    """
    if metric is not None and not callable(metric):
        if metric not in METRICS:
            raise ValueError(f"{name}={metric!r} must be None, one of {sorted(METRICS)} or a function "
                             "metric(y, raw, w).")
        if metric == "error_rate" and loss.task not in loss_lib.CLASSIFICATION:
            raise ValueError(f"{name}='error_rate' needs a classification loss; {loss.name!r} is "
                             f"{loss.task!r}.")
        if loss.batch:
            raise ValueError(f"{name}={metric!r} is a metric of per-row predictions; loss "
                             f"{loss.name!r} is a {loss.task} objective of structured labels: "
                             f"use {name}=None (the objective) or a function metric(y, raw, w).")
    if metric is not None and not isinstance(metric, str):
        try:
            hash(metric)
        except TypeError:
            raise TypeError(f"{name} must be hashable (a function); it is static in the compiled program.")
    return bool(greater_is_better) if callable(metric) else False

Metric = Union[None, str, Callable]


def _weighted_mean(values, w):
    if values.ndim == 2:  # vector labels: each row's mean over its columns
        values = jnp.mean(values, axis=-1)
    total = jnp.sum(w)
    return jnp.where(total > 0, jnp.sum(w * values) / jnp.where(total > 0, total, 1.0), jnp.nan)


def error_rate(y, raw, w, loss):
    """Weighted misclassification rate of the argmax of ``loss.link(raw)`` (multi-label: the
    Hamming loss); NaN when the weights sum to 0.
    """
    proba = loss.link(raw, **loss.params)
    return _weighted_mean((jnp.argmax(proba, axis=-1) != y.astype(jnp.int32)).astype(jnp.float32), w)


def squared_error(y, raw, w, loss):
    """Weighted mean squared error of ``loss.link(raw)``; NaN when the weights sum to 0."""
    pred = loss.link(raw, **loss.params)
    return _weighted_mean((y - pred) ** 2, w)


def absolute_error(y, raw, w, loss):
    """Weighted mean absolute error of ``loss.link(raw)``; NaN when the weights sum to 0."""
    pred = loss.link(raw, **loss.params)
    return _weighted_mean(jnp.abs(y - pred), w)


#: The named validation metrics of early stopping and sweeps (``eval_metric=`` / ``metric=``
#: ``"error_rate"``, ``"mse"`` or ``"mae"``): each ``(y, raw, w, loss) -> scalar``, lower is better.
METRICS = {"error_rate": error_rate, "mse": squared_error, "mae": absolute_error}


def metric_name(metric: Metric) -> str:
    """The name a metric is reported under: ``"loss"`` for ``None``, a named metric's name, a
    function's ``__name__``.
    """
    if metric is None:
        return "loss"
    if isinstance(metric, str):
        return metric
    return getattr(metric, "__name__", "custom")


def evaluate(metric: Metric, loss: loss_lib.Loss, y, raw, w, name: str = "eval_metric"):
    """A metric (a name of :data:`METRICS` or a function, not ``None``) of raw scores ``(n, K)``,
    seen as :func:`jboost.predict` returns them: a float32 scalar.

    Raises:
      ValueError: a function returning more than one number (``name``: the argument it was
        given as, in the message), when the program is traced.
    """
    if isinstance(metric, str):
        return METRICS[metric](y, loss_lib.as_predicted(raw, loss), w, loss)
    value = metric(y, loss_lib.as_predicted(raw, loss), w)
    if np.size(value) != 1:
        raise ValueError(f"{name}={metric_name(metric)!r} returned a value of shape "
                         f"{np.shape(value)}; it must return a scalar (one number per call: "
                         "reduce over the rows, e.g. a weighted mean with w).")
    return jnp.asarray(value, jnp.float32).reshape(())


# ---- Held-out measures (NumPy, on the host) ------------------------------------------------


def concordance_index(y, risk) -> float:
    """Harrell's concordance index of risk scores (higher: earlier event) on survival labels.

    The fraction of comparable pairs ordered correctly, ties in risk counting one half (Harrell et
    al. 1982; as ``sksurv.metrics.concordance_index_censored``).

    Args:
      y: ``(n, 2)`` survival labels ``(time, event)``.
      risk: ``(n,)`` risk scores.

    Returns:
      The index in ``[0, 1]`` (0.5: random ordering).
    """
    y, risk = np.asarray(y, np.float64), np.asarray(risk, np.float64).reshape(-1)
    t, d = y[:, 0], y[:, 1] > 0
    comparable = d[:, None] & (t[:, None] < t[None, :])
    right = (risk[:, None] > risk[None, :]) + 0.5 * (risk[:, None] == risk[None, :])
    return float(np.sum(comparable * right) / max(np.sum(comparable), 1))


def ndcg(y, scores, k: Optional[int] = 10) -> float:
    """Mean NDCG@k over the queries with a relevant row (Järvelin and Kekäläinen 2002).

    Args:
      y: ``(n, 2)`` labels ``(relevance, query id)``, query ids contiguous.
      scores: ``(n,)`` ranking scores.
      k: the cut-off; ``None``: every row of a query.

    Returns:
      The mean NDCG@k, or NaN when no query has a relevant row.
    """
    y, scores = np.asarray(y, np.float64), np.asarray(scores, np.float64).reshape(-1)
    starts = checks.query_starts(y[:, 1])
    ends = np.r_[starts[1:], len(y)]
    out = []
    for a, b in zip(starts, ends):
        g = np.exp2(y[a:b, 0]) - 1
        if not np.any(g > 0):
            continue
        top = k or (b - a)
        disc = 1 / np.log2(np.arange(2, b - a + 2))
        dcg = np.sum(g[np.argsort(-scores[a:b], kind="stable")][:top] * disc[:top])
        idcg = np.sum(np.sort(g)[::-1][:top] * disc[:top])
        out.append(dcg / idcg)
    return float(np.mean(out)) if out else float("nan")
