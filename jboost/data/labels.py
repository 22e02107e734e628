"""Labels: finite float32 labels (1-D or (n, C)), float32 precision warnings, centring by an
offset, gain scaling, class counts and class codes."""

from __future__ import annotations

import warnings
from typing import Optional

import numpy as np

from jboost import checks
from jboost import devices as devices_lib
from jboost.data import tabular


def as_labels(y, n: int, name: str = "y", x_name: str = "X", warn: bool = True,
              columns: Optional[int] = 0) -> np.ndarray:
    """Finite float32 ``(n,)`` labels; warns (``warn=True``) when float32 loses what tells them
    apart (a large offset next to a small spread: :func:`warn_if_labels_lose_precision`).

    ``columns``: ``0`` (the default) refuses 2-D labels with the one message of every entry point
    that takes a label per row only (sweeps, forests, bagging, stacking, ECOC, the classical
    algorithms, cross-validation); ``None`` also takes ``(n, C)`` vector labels (``jboost.fit``:
    multi-output targets, survival and ranking labels); ``C``: ``(n, C)`` labels required (an
    ``eval_set``'s labels next to training labels of ``C`` columns).

    Args:
      y: the labels (array-like, a pandas Series).
      n: the number of rows of ``X``.
      name: the labels' argument name in messages.
      x_name: the features' argument name in messages.
      warn: whether to warn about float32 precision.
      columns: ``0``, ``None`` or ``C``, as above.

    Returns:
      float32 ``(n,)`` or ``(n, C)`` labels.

    Raises:
      TypeError: traced or non-numeric labels.
      ValueError: the wrong shape or length, or a NaN or inf.

    Warns:
      UserWarning: float32 moves the labels by more than :data:`LABEL_PRECISION` of their spread.
    """
    if checks.is_traced(y):
        raise TypeError(f"{name} must be a concrete array, not a traced value.")
    arr = np.asarray(y)
    if arr.ndim == 2 and columns == 0:
        raise ValueError(f"{name} has shape {arr.shape}: 2-D labels (multi-target regression, "
                         "multi-label classification, survival or ranking labels) are taken by "
                         "jboost.fit only; this entry point needs one label per row, (n,). Fit "
                         f"one model per column ({name}[:, k]), or use jboost.fit.")
    if columns is None and arr.ndim > 2:
        raise ValueError(f"{name} must be 1-D (n,) or 2-D (n, C) labels; got shape {arr.shape}.")
    if columns is None and arr.ndim == 2 or columns:
        tabular.check_numeric(arr, name)
        want = (n, columns) if columns else (n, arr.shape[-1] if arr.ndim == 2 else None)
        if arr.ndim != 2 or arr.shape[0] != n or (columns and arr.shape[1] != columns) \
                or arr.shape[1] < 1:
            raise ValueError(f"{name} must have shape {want} (one row per row of {x_name}"
                             f"{f', {columns} label columns as y' if columns else ''}); got "
                             f"{arr.shape}.")
        arr = arr.astype(np.float32)
    else:
        arr = tabular.as_vector(y, n, name, x_name)
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} must be finite; found NaN or inf.")
    if warn and not checks.is_traced(y):
        warn_if_labels_lose_precision(y, arr, name)
    return arr


#: A label cast to float32 may move by at most this fraction of the labels' spread (standard
#: deviation) before :func:`as_labels` warns.
LABEL_PRECISION = 1e-4


def label_precision_loss(y, y32: np.ndarray):
    """How far casting float64 labels to float32 moves them, when it matters.

    Args:
      y: the labels as given (float64 or 64-bit integers to be checked; others are not).
      y32: the same labels as float32.

    Returns:
      ``(moved, spread, median)`` when the cast moves them by more than :data:`LABEL_PRECISION`
      of their spread (standard deviation), else ``None``.
    """
    y64 = np.asarray(y)
    if y64.dtype.kind not in "fiu" or y64.dtype.itemsize <= 4 or y64.size < 2:
        return None
    if y64.ndim == 2:  # vector labels: column by column; the first column that loses
        for k in range(y64.shape[1]):
            lost = label_precision_loss(y64[:, k], y32[:, k])
            if lost is not None:
                return lost
        return None
    y64 = y64.astype(np.float64).reshape(-1)
    spread = float(np.std(y64))
    moved = float(np.max(np.abs(y32.astype(np.float64) - y64)))
    if moved > LABEL_PRECISION * spread and moved > 0:
        return moved, spread, float(np.median(y64))
    return None


def warn_if_labels_lose_precision(y, y32: np.ndarray, name: str = "y") -> None:
    """Warn when casting the labels to float32 (jboost's dtype) moves them by more than
    :data:`LABEL_PRECISION` of their spread (e.g. ``1e9 + N(0, 1)``: float32 holds 1e9 to +-64,
    and both the fit and its float32 predictions then lose the signal). ``jboost.fit`` removes
    such an offset itself for the losses of the residual
    (:func:`jboost.fitting.prepare.label_offset`); elsewhere the fix is the user's offset: fit
    ``y - c`` and add ``c`` back to the predictions in float64.

    Args:
      y: the labels as given.
      y32: the same labels as float32.
      name: the labels' argument name in the message.

    Warns:
      UserWarning: the labels lose precision; the message names the offset to subtract.
    """
    lost = label_precision_loss(y, y32)
    if lost is not None:
        moved, spread, centre = lost
        warnings.warn(f"{name} loses precision in float32, jboost's dtype: its values move by up to "
                      f"{moved:.3g} against a spread (standard deviation) of {spread:.3g}, because of "
                      f"their offset (median {centre:.6g}). Fit {name} - c (e.g. c = {centre:.6g}) and "
                      "add c back to the predictions in float64.", UserWarning, stacklevel=4)


#: A tree's split gain ``G^2 / H`` (``G`` a node's sum of weighted targets) overflows float32
#: (max 2^128) when ``G`` nears 2^64; :func:`gain_exponent` keeps every ``G`` below this bound.
GAIN_BOUND = 2.0 ** 60


def gain_exponent(y: np.ndarray, w: np.ndarray, max_count: float = 2.0) -> int:
    """The power of two ``e >= 0`` by which regression targets ``y`` (weights ``w``, bootstrap
    counts summing to about ``n``; ``max_count`` a margin for their spread) must be divided so
    that no node's weighted target sum exceeds :data:`GAIN_BOUND`, i.e. its split gain ``G^2 / H``
    stays finite in float32. 0 for ordinary labels (``|y| * sum(w) <= 2^60``: nothing changes).
    A power of two divides exactly, so the trees of ``y * 2^-e`` are those of ``y`` with leaf
    values scaled by ``2^-e`` and gains by ``2^-2e``; without it, labels at a scale such as 1e18
    overflow the gains and give a near-constant model.

    Args:
      y: ``(n,)`` regression targets.
      w: ``(n,)`` weights.
      max_count: a margin for the weights' spread.

    Returns:
      ``e``, a non-negative int.
    """
    y, w = np.asarray(y, np.float64), np.asarray(w, np.float64)
    bound = float(np.max(np.abs(y), initial=0.0)) * float(np.max(w, initial=0.0)) * y.shape[0] * max_count
    if not bound > GAIN_BOUND:
        return 0
    return int(np.ceil(np.log2(bound / GAIN_BOUND)))


def centred_labels(y, offset, n: int, name: str = "y", x_name: str = "X") -> np.ndarray:
    """``y - offset`` computed in float64, as float32 labels
    (:func:`jboost.fitting.prepare.label_offset`).

    Args:
      y: ``(n,)`` or ``(n, C)`` labels.
      offset: a scalar, or ``(C,)`` one per column.
      n: the number of rows of ``X``.
      name: the labels' argument name in messages.
      x_name: the features' argument name in messages.

    Returns:
      float32 labels shaped like ``y``.

    Raises:
      TypeError: as :func:`as_labels`.
      ValueError: as :func:`as_labels`.
    """
    if np.ndim(y) == 2:  # vector labels: the offset of each column
        as_labels(y, n, name, x_name, warn=False, columns=np.shape(offset)[-1])
        return (np.asarray(y, np.float64) - np.asarray(offset, np.float64)).astype(np.float32)
    as_labels(y, n, name, x_name, warn=False)  # the checks (shape, finite) on the raw labels
    return (np.asarray(y, np.float64).reshape(-1) - np.float64(offset)).astype(np.float32)


def n_classes_of(y: np.ndarray, n_classes: Optional[int] = None, name: str = "y",
                 task: str = "multiclass") -> int:
    """Check class labels (0/1 for ``task="binary"``, 0..K-1 otherwise) and return K (>= 2).

    ``n_classes`` (when given) fixes K; otherwise K is ``max(y) + 1``.

    Args:
      y: float32 labels.
      n_classes: ``K``, or ``None``.
      name: the labels' argument name in messages.
      task: ``"binary"`` or ``"multiclass"``.

    Returns:
      ``K`` (2 for ``"binary"``).

    Raises:
      ValueError: labels that are not integer classes in range, a single class, or more than
        ``2^20`` classes.
      MemoryError: ``K`` scores per row (``K`` from the labels' maximum) do not fit on the
        device (:func:`jboost.devices.check_memory`).

    Warns:
      UserWarning: class 0 is absent (:func:`warn_class_zero_absent`).
    """
    if np.any(y != np.round(y)) or np.any(y < 0):
        raise ValueError(f"{name} must hold integer class labels 0..K-1; got values in "
                         f"[{y.min()}, {y.max()}].")
    if task == "binary":
        bad = ~np.isin(y, (0, 1))
        if bad.any():
            raise ValueError(f"{name} must hold binary labels 0/1; got values such as "
                             f"{np.unique(y[bad])[:5].tolist()}.")
        return 2
    if n_classes is None:
        k = int(y.max()) + 1
        if k < 2:
            raise ValueError(f"{name} holds a single class (0); pass n_classes or labels of at least "
                             "2 classes.")
        if k > 1 << 20:
            raise ValueError(f"{name} has maximum {y.max()}: K = max({name}) + 1 = {k} classes (from "
                             f"the labels' maximum) is more than {1 << 20}; map the labels to 0..K-1.")
        warn_class_zero_absent(y, name)
        devices_lib.check_memory(devices_lib.fit_bytes(y.shape[0], 1, 1, 3, k),
                     cause=f"K = max({name}) + 1 = {k} classes, from the labels' maximum",
                     detail=f"{y.shape[0]} rows x K scores (a lower bound: one feature, depth 1, 3 bins)")
        return k
    k = checks.check_int(n_classes, "n_classes", 2, 1 << 20)
    if np.any(y >= k):
        raise ValueError(f"{name} must hold class labels in [0, {k}) for n_classes={k}; got max "
                         f"{y.max()}.")
    return k


def warn_class_zero_absent(y: np.ndarray, name: str) -> None:
    """Warn when K-class labels start at 1 or above (class 0 absent: ``K = max + 1`` counts an
    empty class).

    Args:
      y: class labels.
      name: the labels' argument name in the message.

    Warns:
      UserWarning: the smallest label is ``>= 1``.
    """
    if y.size and y.min() >= 1:
        warnings.warn(f"{name} holds class labels {y.min():g}..{y.max():g} with class 0 absent: "
                      f"K-class labels are 0..K-1, so K = max + 1 = {int(y.max()) + 1} includes "
                      "an empty class 0. Map the labels to 0..K-1 (e.g. y - 1) if that is not "
                      "intended.", UserWarning, stacklevel=3)


def class_codes(y, classes: np.ndarray, name: str = "eval_set y"):
    """Labels ``y`` (e.g. a validation set's) as indices into the training ``classes``
    (:func:`jboost.fitting.prepare.class_labels`); a label the training labels did not have is
    refused by name.

    Args:
      y: ``(n,)`` labels.
      classes: the training labels' sorted distinct values.
      name: the labels' argument name in messages.

    Returns:
      ``(n,)`` float32 class indices.

    Raises:
      ValueError: ``y`` is not 1-D, or holds a label not in ``classes``.
    """
    arr = np.asarray(y)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be 1-D class labels like y; got shape {arr.shape}.")
    try:
        idx = np.searchsorted(classes, arr)
        idx = np.clip(idx, 0, len(classes) - 1)
        found = classes[idx] == arr
    except TypeError:
        found, idx = np.zeros(arr.shape, bool), np.zeros(arr.shape, np.int64)
    if not np.all(found):
        unseen = list(dict.fromkeys(arr[~found].tolist()))[:5]
        raise ValueError(f"{name} holds labels the training labels do not have: {unseen} (the "
                         f"model's classes are {classes[:10].tolist()}).")
    return idx.astype(np.float32)
