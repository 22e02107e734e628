"""Validation metrics of a sweep, evaluated on the held-out fold after every round.

The default metric is the loss itself: the weighted mean loss of the held-out rows, read off the
training raw scores (:mod:`jboost.sweep.program`). A named metric (:data:`METRICS`) or a custom
function ``metric(y, raw, w) -> scalar`` is evaluated on the raw scores accumulated round by round
(``raw`` shaped as :func:`jboost.predict` returns it, ``w`` zero outside the held-out fold).
"""

from __future__ import annotations

from typing import Callable, Union

import jax
import jax.numpy as jnp
from jax import lax

from jboost import _validation
from jboost import losses as losses_lib
from jboost import tree as tree_lib

Metric = Union[None, str, Callable]


def _weighted_mean(values, w):
    total = jnp.sum(w)
    return jnp.where(total > 0, jnp.sum(w * values) / jnp.where(total > 0, total, 1.0), jnp.nan)


def error_rate(y, raw, w, loss):
    """Weighted misclassification rate of the argmax of ``loss.link(raw)`` (classification)."""
    proba = loss.link(raw, **loss.params)
    return _weighted_mean((jnp.argmax(proba, axis=-1) != y.astype(jnp.int32)).astype(jnp.float32), w)


def squared_error(y, raw, w, loss):
    """Weighted mean squared error of ``loss.link(raw)`` (regression and counts)."""
    pred = loss.link(raw, **loss.params)
    return _weighted_mean((y - pred) ** 2, w)


def absolute_error(y, raw, w, loss):
    """Weighted mean absolute error of ``loss.link(raw)`` (regression and counts)."""
    pred = loss.link(raw, **loss.params)
    return _weighted_mean(jnp.abs(y - pred), w)


METRICS = {"error_rate": error_rate, "mse": squared_error, "mae": absolute_error}


def check_metric(metric: Metric, loss: losses_lib.Loss, greater_is_better: bool) -> bool:
    """Check ``metric`` against ``loss``; returns whether greater is better (only a custom
    metric may say so: the loss and the named metrics are minimised)."""
    if metric is not None and not callable(metric):
        if metric not in METRICS:
            raise ValueError(f"metric={metric!r} must be None, one of {sorted(METRICS)} or a function "
                             "metric(y, raw, w).")
        if metric == "error_rate" and loss.task not in _validation.CLASSIFICATION:
            raise ValueError(f"metric='error_rate' needs a classification loss; {loss.name!r} is "
                             f"{loss.task!r}.")
    if metric is not None and not isinstance(metric, str):
        try:
            hash(metric)
        except TypeError:
            raise TypeError("metric must be hashable (a function); it is static in the compiled program.")
    return bool(greater_is_better) if callable(metric) else False


def metric_name(metric: Metric) -> str:
    """``"loss"`` for the default, the name of a named or custom metric otherwise."""
    if metric is None:
        return "loss"
    if isinstance(metric, str):
        return metric
    return getattr(metric, "__name__", "custom")


def _squeeze(raw):
    return raw[:, 0] if raw.shape[-1] == 1 else raw


def evaluate(metric: Metric, loss: losses_lib.Loss, y, raw, w):
    """``metric`` (not ``None``) of raw scores ``(n, K)``, seen as :func:`jboost.predict` returns them."""
    if isinstance(metric, str):
        return METRICS[metric](y, _squeeze(raw), w, loss)
    return jnp.asarray(metric(y, _squeeze(raw), w), jnp.float32)


def metric_curve(metric: Metric, loss: losses_lib.Loss, trees: tree_lib.ObliviousTrees, init_raw,
                 X_binned, y, w_valid, n_bins: int):
    """The metric after every round (``trees`` with leading axes ``(R, T)``), from the raw scores
    accumulated round by round."""
    raw0 = jnp.broadcast_to(init_raw.astype(jnp.float32), (y.shape[0], init_raw.shape[0]))
    take = jax.vmap(lambda t, leaf: t.leaf_values[leaf])

    def step(raw, round_trees):
        leaves = jax.vmap(lambda t: tree_lib.leaf_index_binned(t, X_binned, n_bins))(round_trees)
        raw = raw + jnp.sum(take(round_trees, leaves), axis=0)
        return raw, evaluate(metric, loss, y, raw, w_valid)

    _, curve = lax.scan(step, raw0, trees)
    return curve
