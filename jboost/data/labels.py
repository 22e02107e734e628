"""Labels: finite float32 labels (1-D or (n, C)), float32 precision warnings, centring by an
offset, gain scaling, class counts and class codes."""

from __future__ import annotations

import warnings
from typing import Optional

import numpy as np

from jboost import checks, devices as devices_lib
from jboost.data import tabular


def as_labels(y, n: int, name: str = "y", x_name: str = "X", warn: bool = True,
              columns: Optional[int] = 0) -> np.ndarray:
    """Finite float32 labels ``(n,)`` (or ``(n, C)``), with a warning when float32 loses what tells
    them apart (``docs/data.md``).

    Args:
      y: the labels (array-like, a pandas Series).
      n: the number of rows of ``X``.
      name: the labels' argument name in messages.
      x_name: the features' argument name in messages.
      warn: whether to warn about float32 precision.
      columns: ``0`` refuses 2-D labels (entry points that take one label per row), ``None`` also
        takes ``(n, C)`` labels (``jboost.fit``), ``C`` requires ``(n, C)``.

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
    """``(moved, spread, median)`` when casting float64 (or 64-bit integer) labels to float32 moves
    them by more than :data:`LABEL_PRECISION` of their standard deviation, else ``None``; vector
    labels column by column.
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
    """Warn (``UserWarning``) when casting the labels to float32 moves them by more than
    :data:`LABEL_PRECISION` of their spread; the message names the offset to subtract
    (``docs/data.md``).
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
    """The power of two ``e >= 0`` by which regression targets ``y`` must be divided so that no
    node's weighted target sum exceeds :data:`GAIN_BOUND` (0 for ordinary labels; ``docs/data.md``).
    ``max_count`` is a margin for the spread of the weights ``w``.
    """
    y, w = np.asarray(y, np.float64), np.asarray(w, np.float64)
    bound = float(np.max(np.abs(y), initial=0.0)) * float(np.max(w, initial=0.0)) * y.shape[0] * max_count
    if not bound > GAIN_BOUND:
        return 0
    return int(np.ceil(np.log2(bound / GAIN_BOUND)))


def centred_labels(y, offset, n: int, name: str = "y", x_name: str = "X",
                   scale: float = 1.0) -> np.ndarray:
    """``(y - offset) / scale`` computed in float64, as float32 labels shaped like ``y``
    (``offset`` ``None``, a scalar, or ``(C,)`` one per column; ``scale`` a power of two:
    :mod:`jboost.fitting.standardise`); checked as :func:`as_labels`.
    """
    if np.ndim(y) == 2:  # vector labels: the offset of each column
        columns = np.shape(y)[-1] if np.ndim(offset) == 0 else np.shape(offset)[-1]
        as_labels(y, n, name, x_name, warn=False, columns=columns)
        y64 = np.asarray(y, np.float64)
    else:
        as_labels(y, n, name, x_name, warn=False)  # the checks (shape, finite) on the raw labels
        y64 = np.asarray(y, np.float64).reshape(-1)
    if offset is not None:
        y64 = y64 - np.asarray(offset, np.float64)
    return (y64 / scale).astype(np.float32)


def n_classes_of(y: np.ndarray, n_classes: Optional[int] = None, name: str = "y",
                 task: str = "multiclass") -> int:
    """Check class labels (0/1 for ``task="binary"``, 0..K-1 otherwise) and return K (>= 2).

    Args:
      y: float32 labels.
      n_classes: ``K``, or ``None``: ``max(y) + 1``.
      name: the labels' argument name in messages.
      task: ``"binary"`` or ``"multiclass"``.

    Returns:
      ``K`` (2 for ``"binary"``).

    Raises:
      ValueError: labels that are not integer classes in range, a single class, or more than
        ``2^20`` classes.
      MemoryError: ``K`` scores per row (``K`` from the labels' maximum) do not fit on the device.

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
    """Warn (``UserWarning``) when K-class labels start at 1 or above (class 0 absent: ``K = max +
    1`` counts an empty class).
    """
    if y.size and y.min() >= 1:
        warnings.warn(f"{name} holds class labels {y.min():g}..{y.max():g} with class 0 absent: "
                      f"K-class labels are 0..K-1, so K = max + 1 = {int(y.max()) + 1} includes "
                      "an empty class 0. Map the labels to 0..K-1 (e.g. y - 1) if that is not "
                      "intended.", UserWarning, stacklevel=3)


def class_codes(y, classes: np.ndarray, name: str = "eval_set y"):
    """Labels ``y (n,)`` (e.g. a validation set's) as float32 indices into the training ``classes``
    (sorted); a label the training labels did not have is refused by name (``ValueError``, as is
    ``y`` that is not 1-D).
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
