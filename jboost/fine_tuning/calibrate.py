"""``calibrate_quantiles``: a quantile model's baseline shifted, level by level, so that each
level's coverage on held-out calibration rows reaches the level (split conformal calibration,
Vovk et al. 2005; for quantile regression Romano, Patterson and Candes 2019, "Conformalized
Quantile Regression"). The shifted model is a :class:`jboost.Booster` like any other (files,
SHAP, export), and a :func:`jboost.losses.quantiles` model still cannot cross. See
docs/guide/multi-quantile.md."""

from __future__ import annotations

import math
from typing import Optional

import jax.numpy as jnp
import numpy as np

from jboost import checks
from jboost.data import tabular
from jboost.losses import loss as loss_lib, multi_quantile
from jboost.models import base, booster

#: Bisection steps per level: float32 baselines are resolved well before this.
STEPS = 64


def _checked_model(model) -> list:
    """The levels of a one-model quantile Booster, or an error naming the fix."""
    if not isinstance(model, booster.Booster):
        raise TypeError(f"model must be a jboost.Booster fitted with jboost.losses.quantile or "
                        f"jboost.losses.quantiles; got {type(model).__name__}.")
    if checks.is_traced(model.baseline):
        raise TypeError("model must be concrete (not traced under jax.jit or jax.vmap).")
    if model.batch_shape:
        raise ValueError(f"model is a batch of {model.batch_shape} models (jax.vmap): calibrate one "
                         "model at a time (index it with jax.tree_util.tree_map(lambda a: a[i], model)).")
    levels = multi_quantile.levels_of(model.loss)
    if levels is None:
        raise ValueError(f"model's loss is {model.loss.name!r}: calibrate_quantiles shifts the levels "
                         "of a jboost.losses.quantile(alpha) or jboost.losses.quantiles(levels) model.")
    return levels


def _checked_rows(y, sample_weight, n_rows: int):
    """The calibration labels and weights as float64 arrays ``(n,)``."""
    y = np.asarray(y, np.float64)
    if y.ndim != 1 or y.shape[0] != n_rows or n_rows == 0:
        raise ValueError(f"y has shape {y.shape}: calibrate_quantiles needs one label per row of X "
                         f"({n_rows} rows, at least one).")
    if not np.all(np.isfinite(y)):
        raise ValueError("y has NaN or infinite labels: drop those calibration rows.")
    w = tabular.as_weights(sample_weight, n_rows)
    return y, np.asarray(w, np.float64)


def target_coverage(level: float, n_rows: int) -> float:
    """The calibration rows' coverage a level is shifted to: ``ceil((n + 1) a) / n`` (at most
    1), so that a new row's coverage is at least ``a`` (split conformal)."""
    return min(1.0, math.ceil((n_rows + 1) * level) / n_rows)


def calibrate_quantiles(model: booster.Booster, X, y, *, sample_weight=None) -> booster.Booster:
    """The model with its baseline shifted so that each quantile level's coverage on the
    calibration rows ``X, y`` reaches the level (split conformal calibration).

    Level by level, from the lowest, the baseline's entry of that level is raised or lowered
    until the share of calibration rows with ``y <= q`` is the smallest at or above
    :func:`target_coverage` (``ceil((n + 1) a) / n``): a new row of the same distribution is then
    covered with probability at least ``a``, and close to ``a`` for many calibration rows.
    Boosted quantiles are fitted on their own training rows and cover the level less well on
    new rows (towards 0.5, as the rounds fit the training rows closely); these rows must not be
    the training rows. For :func:`jboost.losses.quantiles`, an entry moves its level and the
    levels above it, each gap through its softplus, so the quantiles still never cross for any
    input. Only the baseline changes: the trees, files, SHAP values (the expected value moves)
    and exports work as for the fitted model.

    Args:
      model: a :class:`jboost.Booster` of :func:`jboost.losses.quantile` or
        :func:`jboost.losses.quantiles`.
      X: the calibration rows (held out from the fit), as :func:`jboost.predict` takes them.
      y: their labels ``(n,)``.
      sample_weight: optional row weights: weighted coverage.

    Returns:
      The calibrated :class:`jboost.Booster`.
    """
    levels = _checked_model(model)
    bare = model._replace(baseline=jnp.zeros_like(model.baseline), offset=None)
    trees = np.asarray(base.predict(bare, X), np.float32)  # the trees' sum: fl(b + T) below
    trees = trees.reshape(trees.shape[0], -1)
    y, w = _checked_rows(y, sample_weight, trees.shape[0])
    baseline = np.asarray(model.baseline, np.float32).copy()
    for k, level in enumerate(levels):
        target = target_coverage(level, y.shape[0])
        baseline[k] = _shifted(baseline, k, trees, y, w, model, target)
        baseline[k] = _settled(model, baseline, k, X, y, w, target)
    return model._replace(baseline=jnp.asarray(baseline, model.baseline.dtype))


def _settled(model, baseline, k: int, X, y, w, target: float) -> np.float32:
    """Entry ``k`` moved by float32 steps until the model's own :func:`jboost.predict_mean` (whose
    compiled link may round a row's quantile one step otherwise than the search's) covers at
    least ``target`` and one step lower would not."""
    b = baseline.copy()

    def covers(value) -> bool:
        b[k] = value
        q = np.asarray(base.predict_mean(model._replace(baseline=jnp.asarray(b, model.baseline.dtype)), X))
        return float(np.sum(w * (y <= q.reshape(y.shape[0], -1)[:, k])) / np.sum(w)) >= target

    value = np.float32(baseline[k])
    for _ in range(STEPS):
        if covers(value):
            break
        value = np.nextafter(value, np.float32(np.inf))
    for _ in range(STEPS):
        lower = np.nextafter(value, np.float32(-np.inf))
        if not covers(lower):
            break
        value = lower
    return value


def _coverage(baseline, trees, y, w, model, k: int) -> float:
    """Weighted share of rows with ``y <= q_k`` for this baseline, as the model computes ``q``."""
    loss = model.loss
    raw = base.add_offset(jnp.asarray(baseline, jnp.float32) + jnp.asarray(trees), model.offset)
    q = np.asarray(loss.link(loss_lib.as_predicted(raw, loss), **loss.params), np.float64)
    q = q.reshape(q.shape[0], -1)[:, k]
    return float(np.sum(w * (y <= q)) / np.sum(w))


def _shifted(baseline, k: int, trees, y, w, model, target: float) -> np.float32:
    """The smallest float32 entry ``k`` of the baseline (to bisection precision) whose coverage of
    level ``k`` is at least ``target``; coverage never decreases as the entry grows."""
    b = baseline.copy()

    def covers(value) -> bool:
        b[k] = value
        return _coverage(b, trees, y, w, model, k) >= target

    spread = float(np.std(y)) + float(np.abs(baseline[k])) + 1.0
    lo, hi = float(baseline[k]) - spread, float(baseline[k]) + spread
    lo_fails, hi_covers = not covers(np.float32(lo)), covers(np.float32(hi))
    for _ in range(STEPS):  # widen until lo fails and hi covers (each end tested once per move)
        if lo_fails and hi_covers:
            break
        width = hi - lo
        if not lo_fails:
            lo -= width
            lo_fails = not covers(np.float32(lo))
        if not hi_covers:
            hi += width
            hi_covers = covers(np.float32(hi))
    else:
        raise ValueError(f"calibrate_quantiles: no baseline reaches coverage {target:.4f} at level "
                         f"{k}; check that the calibration labels are the model's target.")
    for _ in range(STEPS):
        mid = 0.5 * (lo + hi)
        if np.float32(mid) in (np.float32(lo), np.float32(hi)):
            break
        lo, hi = (lo, mid) if covers(np.float32(mid)) else (mid, hi)
    return np.float32(hi)


__all__ = ["calibrate_quantiles", "target_coverage"]
