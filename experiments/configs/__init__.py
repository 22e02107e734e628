"""Experiment configs (one module per experiment) and the small helpers they share.

Each config module defines ``get_config(smoke: bool) -> dict`` and ``run(config, ctx) -> dict``
(the contract is in :mod:`experiments.run`). The helpers here evaluate a fitted
:class:`jboost.Booster` after every round in one compiled ``lax.scan``
(:func:`jboost.staged_predict`, no Python loop of ``predict`` calls) and time a fit with its
compilation separated from the run.
"""

from __future__ import annotations

import functools
import time
from typing import Callable, Optional

import jax
import jax.numpy as jnp
import numpy as np

import jboost


def binary_error(y, raw):
    """Misclassification rate of ``raw (n, 1)`` for 0/1 labels: class 1 iff ``raw > 0``.

    This is ``jboost.predict_class`` for the binary losses (``p = 1/2`` at ``raw = 0`` goes to
    class 0), written on raw scores so that it runs inside :func:`staged_metric`.
    """
    return jnp.mean((raw[:, 0] > 0) != (y > 0.5))


def multiclass_error(y, raw):
    """Misclassification rate of ``raw (n, K)`` for labels ``0 .. K-1``: the class is the argmax
    of the raw scores (``jboost.predict_class`` of the multi-class models: SAMME, SAMME.R,
    LogitBoost, multinomial deviance), written on raw scores for :func:`staged_metric`."""
    return jnp.mean(jnp.argmax(raw, axis=-1) != y.astype(jnp.int32))


def mean_absolute_error(y, raw):
    """Average absolute error ``mean |y - f(x)|`` of one-output raw scores (ESL 10.14.1)."""
    return jnp.mean(jnp.abs(y - raw[:, 0]))


def staged_metric(model: jboost.Booster, X, y, metric: Callable, *args):
    """``metric(y, raw, *args)`` after each boosting round, ``m = 1 .. n_rounds`` (ESL Figure 10.2).

    :func:`jboost.staged_predict`: one jit-compiled ``lax.scan`` over rounds carries the running
    sum of tree outputs, so the cost is that of a single prediction; round ``m`` sees exactly
    ``jboost.predict(model, X, n_rounds=m)`` (as ``(n, K)``).

    Args:
      model: a fitted :class:`jboost.Booster` (trees with leading axes ``(rounds, per_round)``),
        or any model :func:`jboost.staged_predict` takes (e.g. ECOC boosters: raw ``(n, L)``).
      X: ``(n, n_features)`` raw features (NaN = missing).
      y: ``(n,)`` labels.
      metric: ``metric(y (n,), raw (n, K), *args) -> pytree of arrays``; a module-level function
        (it is a static argument of the compiled scan).
      *args: arrays passed on to ``metric`` (traced: e.g. an ECOC code matrix).

    Returns:
      The metric's outputs stacked along a leading ``(n_rounds,)`` axis, as NumPy arrays.
    """
    out = jboost.staged_predict(model, np.asarray(X, np.float32), _raw_first(metric),
                                jnp.asarray(y, jnp.float32), *args)
    return jax.tree_util.tree_map(np.asarray, out)


@functools.lru_cache(maxsize=None)
def _raw_first(metric: Callable) -> Callable:
    """``metric(y, raw, *args)`` as ``fn(raw, y, *args)`` (the argument order of
    :func:`jboost.staged_predict`), one function object per metric so that the compiled scan is
    reused."""

    def fn(raw, y, *args):
        return metric(y, raw, *args)

    return fn


def timed(fn: Callable, *args, **kwargs):
    """Run ``fn`` and wait for its arrays; returns ``(result, wall seconds)``."""
    t0 = time.perf_counter()
    out = jax.block_until_ready(fn(*args, **kwargs))
    return out, time.perf_counter() - t0


def r_squared(y, pred) -> float:
    """Coefficient of determination ``1 - RSS / TSS`` (host NumPy, float64)."""
    y = np.asarray(y, np.float64)
    pred = np.asarray(pred, np.float64)
    return float(1.0 - np.sum((y - pred) ** 2) / np.sum((y - y.mean()) ** 2))


def pd_grid_figure(plt, curves: dict, ylabel: str, title: str, rugs: Optional[dict] = None):
    """A 2 x 2 figure of one-variable partial dependence curves ``{feature: {"grid", "values"}}``
    (as ESL Figs. 10.7 and 10.15), with an optional rug (e.g. deciles) per feature."""
    fig, axes = plt.subplots(2, 2, figsize=(8, 6))
    for ax, (f, c) in zip(axes.ravel(), curves.items()):
        ax.plot(c["grid"], c["values"], color="tab:green")
        if rugs is not None:
            ax.plot(rugs[f], np.full(len(rugs[f]), min(c["values"])), "|", color="k", ms=8)
        ax.set_xlabel(f)
        ax.set_ylabel(ylabel)
    fig.suptitle(title, fontsize=9, wrap=True)
    fig.tight_layout()
    return fig
