"""Validation metrics of a fit: ``metric(y, raw, w, loss)`` on raw scores seen as
:func:`jboost.predict` returns them (``(n,)`` for one output), through the loss's link.

The one home of the named metrics: early stopping (:class:`jboost.boosting.EarlyStopping`) and
sweeps (:mod:`jboost.sweep.metrics`) evaluate them here; :func:`jboost._validation.check_metric`
checks a metric against a loss. A custom metric is ``metric(y, raw, w) -> scalar``.

With vector labels ``y (n, C)`` (multi-target regression, multi-label classification) a named
metric averages over every (row, column) cell: ``"mse"`` and ``"mae"`` over all targets,
``"error_rate"`` the fraction of wrong labels (the Hamming loss). Batch objectives (Cox,
ranking: :mod:`jboost.objectives`) take their own value or a custom metric.
"""

from __future__ import annotations

from typing import Callable, Union

import jax.numpy as jnp

from jboost import losses as losses_lib

Metric = Union[None, str, Callable]


def _weighted_mean(values, w):
    if values.ndim == 2:  # vector labels: each row's mean over its columns
        values = jnp.mean(values, axis=-1)
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


def metric_name(metric: Metric) -> str:
    """``"loss"`` for the default, the name of a named or custom metric otherwise."""
    if metric is None:
        return "loss"
    if isinstance(metric, str):
        return metric
    return getattr(metric, "__name__", "custom")


def evaluate(metric: Metric, loss: losses_lib.Loss, y, raw, w):
    """``metric`` (not ``None``) of raw scores ``(n, K)``, seen as :func:`jboost.predict` returns them."""
    if isinstance(metric, str):
        return METRICS[metric](y, losses_lib.as_predicted(raw, loss), w, loss)
    return jnp.asarray(metric(y, losses_lib.as_predicted(raw, loss), w), jnp.float32)
