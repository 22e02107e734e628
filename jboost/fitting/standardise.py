"""Label standardisation of regression fits: a fit of a built-in loss of the residual
(``squared_error``, ``huber``, ``absolute_error``, ``quantile``) runs on ``(y - c) / 2^e`` and
its model is turned back into label units exactly, so that the model does not depend on the
labels' scale or shift (up to rounding). See docs/fitting.md ("Label scale and offset").

``c`` is the label offset (:func:`label_offset`, kept as
``Booster.offset``), ``2^e`` the power of two nearest the centred labels' standard deviation.
Multiplying by a power of two is exact in floating point (in the normal range), and these
losses are homogeneous in the residual once their parameters with units (Huber's ``delta``)
are scaled too, so the model fitted on the standardised labels, with its leaf values, baseline,
split gains, losses and parameters multiplied back, is the model of the labels as given: bitwise
the same for labels whose sums stay in float32's normal range, and a right one beyond it
(labels of scale ``1e-25`` no longer underflow to a constant model, of scale ``1e20`` no longer
overflow).
"""

from __future__ import annotations

import warnings
from typing import Any, NamedTuple, Optional

import jax
import jax.numpy as jnp
import numpy as np

from jboost import _compile, checks
from jboost.data import labels, tabular
from jboost.engine import boosting as boosting_lib
from jboost.losses import loss as loss_lib, per_sample

#: Named metrics' degree in the labels' scale.
METRIC_DEGREE = {"mse": 2, "mae": 1}

#: The offset rule's ratio: labels whose median exceeds this many standard deviations are
#: centred (float32 near the median would otherwise round them to ``2^-12`` of their spread).
CENTRE_RATIO = 2.0 ** 11


def label_offset(y, y32: np.ndarray, loss, name: str = "y"):
    """The offset ``c`` (the labels' median) that ``jboost.fit`` subtracts from the labels in
    float64 and ``Booster.offset`` adds back, for a loss of the residual when float32 would lose
    what tells the labels apart; else ``None`` (docs/fitting.md); :func:`label_scale` also centres labels far from 0 against their spread."""
    lost = labels.label_precision_loss(y, y32)
    if lost is None or not per_sample.shifts_with_labels(loss):
        if lost is not None:
            labels.warn_if_labels_lose_precision(y, y32, name)
        return None
    _, spread, centre = lost
    vector = np.ndim(y) == 2  # vector labels: every column's median (a shift of each target)
    centres = np.median(np.asarray(y, np.float64), axis=0) if vector else np.float64(centre)
    if jax.config.jax_enable_x64:
        return centres
    c = centres.astype(np.float32)
    if vector:
        warnings.warn(f"{name} has a large offset (column medians {centres.tolist()[:4]}): the fit "
                      "subtracts each column's median in float64 and the model adds it back "
                      "(Booster.offset), but its float32 predictions are rounded to the offsets' "
                      "float32 spacing. Enable float64 predictions with "
                      "jax.config.update('jax_enable_x64', True) before fitting.", UserWarning,
                      stacklevel=4)
    else:
        warnings.warn(f"{name} has a large offset (median {centre:.6g}, spread {spread:.3g}): the "
                      f"fit subtracts c = {float(c):.9g} in float64 and the model adds it back "
                      f"(Booster.offset), but its float32 predictions near c are rounded to "
                      f"+-{float(np.spacing(c)) / 2:.3g}. Enable float64 predictions with "
                      "jax.config.update('jax_enable_x64', True) before fitting.", UserWarning,
                      stacklevel=4)
    return c


class LabelScale(NamedTuple):
    """A regression fit's standardisation: labels ``(y - offset) / 2^exponent``."""

    offset: Any      # None, or the label offset c (a scalar, (C,) for vector labels)
    exponent: int    # e: the scale is 2^e
    degree: int      # the loss's degree in the labels' scale
    gradient: int    # its gradient's degree
    units: tuple     # the loss parameters in label units

    @property
    def scale(self) -> float:
        return float(2.0 ** self.exponent)

    def loss_unit(self) -> float:
        """A loss value's factor from standardised to label units."""
        return float(2.0 ** (self.exponent * self.degree))

    def gain_unit(self) -> float:
        """A split gain's factor (and ``min_split_gain``'s) from standardised to label units."""
        return float(2.0 ** (2 * self.exponent * self.gradient))

    def metric_unit(self, metric) -> float:
        """A validation score's factor: a named metric's degree, the loss's for ``None``, 1 for
        a custom metric (it sees label units, :func:`scaled_settings`)."""
        if metric is None:
            return self.loss_unit()
        if callable(metric):
            return 1.0
        return float(2.0 ** (self.exponent * METRIC_DEGREE.get(metric, 0)))


#: No standardisation (classification, custom losses, continued fits).
NONE = LabelScale(None, 0, 0, 0, ())


def label_scale(y, y32: np.ndarray, loss: loss_lib.Loss, offset, centre: bool = True) -> LabelScale:
    """The standardisation of labels ``y`` (as given; ``y32`` their float32 values) for ``loss``
    with label offset ``offset`` (:func:`label_offset`, or ``None``): the
    offset is also set when the median exceeds :data:`CENTRE_RATIO` standard deviations; the
    exponent is the nearest integer to ``log2`` of the centred labels' standard deviation (of
    their largest magnitude when they are constant; 0 when all are zero). :data:`NONE` for a loss
    outside :data:`jboost.losses.per_sample.SCALE_DEGREES`. ``centre=False``: a scale only (for
    models without ``offset``, e.g. bagged boosters)."""
    spec = per_sample.SCALE_DEGREES.get(loss.fn)
    if spec is None:
        return NONE
    y64 = np.asarray(y, np.float64)
    if offset is None and centre:
        median = np.median(y64, axis=0)
        if np.any(np.abs(median) > CENTRE_RATIO * np.std(y64, axis=0)):
            offset = np.asarray(median, np.float64 if jax.config.jax_enable_x64 else np.float32)
    centred = y64 if offset is None else y64 - np.asarray(offset, np.float64)
    size = float(np.std(centred)) or float(np.max(np.abs(centred), initial=0.0))
    exponent = int(np.round(np.log2(size))) if size > 0 and np.isfinite(size) else 0
    return LabelScale(offset, exponent, *spec)


def standardised(y, ls: LabelScale, n: int, name: str = "y", x_name: str = "X") -> np.ndarray:
    """``(y - offset) / 2^exponent`` in float64, as float32 labels shaped like ``y``."""
    return labels.centred_labels(y, ls.offset, n, name, x_name, scale=ls.scale)


def standardised_inputs(y, eval_set, ls: LabelScale, n: int, eval_metric=None):
    """The labels of ``y`` and of ``eval_set`` standardised by ``ls`` (a warning when a custom
    ``eval_metric`` will see the labels minus the label offset)."""
    if callable(eval_metric) and ls.offset is not None:
        warnings.warn("eval_metric sees the labels and raw scores minus the label offset "
                      f"Booster.offset = {np.asarray(ls.offset).tolist()} (a metric of the "
                      "residual is unchanged; one of the labels' scale, such as a relative error, "
                      "is not).", UserWarning, stacklevel=4)
    y = standardised(y, ls, n)
    if eval_set is not None and isinstance(eval_set, (tuple, list)) and len(eval_set) in (2, 3):
        Xv = tabular.as_matrix(eval_set[0], "eval_set X")
        yv = standardised(eval_set[1], ls, Xv.shape[0], "eval_set y", "eval_set X")
        eval_set = (Xv, yv) + tuple(eval_set[2:])
    return y, eval_set


def scaled_loss(loss: loss_lib.Loss, ls: LabelScale, factor: float) -> loss_lib.Loss:
    """``loss`` with its parameters in label units multiplied by ``factor``."""
    if not ls.units or factor == 1.0:
        return loss
    return loss.with_params(**{k: loss.params[k] * factor for k in ls.units if k in loss.params})


def scaled_settings(config: boosting_lib.BoostConfig, hyper: boosting_lib.Hyperparams,
                    ls: LabelScale):
    """``(config, hyper)`` in standardised units: ``min_split_gain`` divided by the gain unit,
    the early-stopping tolerance by the score's unit, a custom metric seeing label units."""
    if ls.exponent == 0:
        return config, hyper
    factor = 1.0 / ls.gain_unit()
    factor = np.float32(factor if factor <= float(np.finfo(np.float32).max) else np.inf)
    gain = hyper.min_split_gain  # 0 stays 0; beyond float32, inf (no split passes)
    hyper = hyper._replace(min_split_gain=_scaled_gain(gain, factor))
    metric = config.eval_metric
    if callable(metric):
        config = config._replace(eval_metric=_InLabelUnits(metric, ls.scale))
    es = config.early_stopping
    if es is not None:
        unit = ls.metric_unit(es.metric if es.metric is not None else None)
        es_metric = _InLabelUnits(es.metric, ls.scale) if callable(es.metric) else es.metric
        config = config._replace(early_stopping=es._replace(tolerance=es.tolerance / unit,
                                                            metric=es_metric))
    return config, hyper


@_compile.jit
def _scaled_gain(gain, factor):
    """``gain * factor``, 0 staying 0 (one program, not one per operation)."""
    return jnp.where(gain == 0, 0.0, gain * factor).astype(gain.dtype)


class _InLabelUnits:
    """A custom metric ``metric(y, raw, w)`` called with standardised labels and raw scores
    multiplied back by ``scale`` (hashed by value: the compiled program is shared)."""

    def __init__(self, metric, scale: float):
        self.metric, self.scale = metric, float(scale)
        self.__name__ = getattr(metric, "__name__", "custom")

    def __call__(self, y, raw, w):
        return self.metric(y * self.scale, raw * self.scale, w)

    def __eq__(self, other):
        return (isinstance(other, _InLabelUnits) and other.metric == self.metric
                and other.scale == self.scale)

    def __hash__(self):
        return hash((_InLabelUnits, self.metric, self.scale))


def unscaled_model(model, ls: LabelScale, factor: Optional[float] = None):
    """A Booster (or BaggedBoosters) fitted on standardised labels in label units (``factor``:
    the scale to apply, default ``2^exponent``; its inverse turns a model back to standardised
    units)."""
    if ls.exponent == 0 or model is None:
        return model
    s = ls.scale if factor is None else factor  # a power of two: its powers are exact
    lost = []
    gains = _in_label_units(model.trees.gains, s ** (2 * ls.gradient), "split gains", lost)
    trees = model.trees._replace(leaf_values=model.trees.leaf_values * s, gains=gains)
    loss = scaled_loss(model.loss, ls, s) if isinstance(model.loss, loss_lib.Loss) else model.loss
    train, valid = (_in_label_units(c, s ** ls.degree, f"{name} loss curve", lost)
                    for c, name in ((model.train_loss, "training"), (model.valid_loss, "validation")))
    if lost:
        warnings.warn(
            f"the labels' scale (2^{ls.exponent}) puts the model's {' and '.join(lost)} beyond "
            "float32 in label units (squared units overflow above about 1e19 and underflow below "
            "about 1e-19): those values are inf or 0. Predictions, leaf values and the baseline "
            "are exact; for importances and curves, fit labels in other units (e.g. y / 1e10).",
            UserWarning, stacklevel=4)
    return model._replace(trees=trees, baseline=model.baseline * s, loss=loss,
                          train_loss=train, valid_loss=valid)


def _in_label_units(values, factor: float, name: str, lost: list):
    """``values * factor`` (``factor`` a power of two: exact), computed in float64 and stored in
    the values' float32; ``name`` appended to ``lost`` when a finite nonzero value overflows or
    underflows there. ``None`` stays ``None``; traced values are multiplied as they are."""
    if values is None:
        return None
    if checks.is_traced(values):
        return values * factor
    host = np.asarray(values)
    wide = host.astype(np.float64) * factor
    with np.errstate(over="ignore", under="ignore"):
        narrow = wide.astype(host.dtype)
    bad = np.isfinite(wide) & (wide != 0) & (~np.isfinite(narrow) | (narrow == 0))
    if bad.any():
        lost.append(name)
    return jax.device_put(narrow) if isinstance(values, jax.Array) else narrow


#: Entry points that do not standardise (sweeps, bagged boosters) refuse labels whose scale
#: exponent lies beyond this (spread outside about [1e-12, 1e12]), where float32 losses and split
#: gains would underflow or overflow.
SAFE_EXPONENT = 40


def refuse_extreme_scale(y, y32: np.ndarray, loss: loss_lib.Loss, what: str) -> None:
    """Raise ``ValueError`` naming ``y`` and the fix when ``what`` (an entry point that does not
    standardise its labels) is given labels of an extreme scale for a loss of
    :data:`jboost.losses.per_sample.SCALE_DEGREES`."""
    ls = label_scale(y, y32, loss, None)
    if abs(ls.exponent) > SAFE_EXPONENT:
        raise ValueError(f"y has a spread of about 2^{ls.exponent} ({ls.scale:.3g}): {what} does "
                         "not standardise the labels, and float32 losses and split gains would "
                         f"{'underflow' if ls.exponent < 0 else 'overflow'} at this scale. Fit "
                         f"y / {ls.scale:.17g} (a power of two: exact) and multiply the "
                         "predictions back, or use jboost.fit, which does this itself.")
