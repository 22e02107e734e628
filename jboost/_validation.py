"""The one settings and data layer: every entry point checks and bins its inputs here.

Every public function of jboost that takes user data or settings (``fit``, the classical
algorithms, forests, bagged boosters, stacking, ECOC, sweeps, ``predict``) validates through
the functions below, so one mistake gets one message everywhere; each message names the
argument and says what was expected. Values that may be JAX tracers (continuous
hyperparameters under ``jax.vmap``) are checked only when they are concrete.

The vocabulary (the README's glossary) and the shared defaults live here too:

* ``n_outputs`` (K): the number of raw scores per row a loss (or a tree leaf) holds;
* ``n_classes``: the number of classes of a classification problem (labels 0..K-1); for
  ``multinomial_deviance`` ``n_outputs == n_classes``, for binary losses ``n_outputs == 1`` and
  ``n_classes == 2``;
* ``task``: one of :data:`TASKS` (``"regression"``, ``"binary"``, ``"multiclass"``,
  ``"count"``); ``"classification"`` means binary or multiclass, K from the labels;
* ``label_columns`` (C): the columns of 2-D labels ``y (n, C)``, which only ``jboost.fit``
  takes (multi-output targets, survival and ranking labels; :func:`as_labels` refuses them
  everywhere else with one message);
* ``folds``: a number of folds K >= 2, or an ``(n,)`` int array of fold ids 0..K-1;
* ``devices``: ``None`` (one device), ``"all"`` (every device of ``jax.devices()``), a list of
  devices, or a ``jax.sharding.Mesh``; ``None`` is the default everywhere except
  :func:`jboost.sweep.sweep`, whose models are independent and default to ``"all"``;
* ``memory_budget``: bytes of device memory per chunk of models fitted together;
* ``key``: an int seed or a ``jax.random`` key.

Checks that need concrete values (loss parameter domains, the finiteness of a fitted model's
training loss in :func:`jboost.fit`) are skipped for traced values: under ``jax.vmap`` a sweep's
bad configuration is not refused here (the sweep checks its grid values on the host first).
Inside a trace, :func:`nan_outside_domains` makes a setting outside its domain a NaN result
with a warning when the program runs (the sweep's program uses it), so it is never ranked.

Memory is estimated before anything is compiled, and an impossible request refused with a
``MemoryError`` naming its cause (:func:`check_memory`; :func:`check_boosting_memory` for
batches of boosters, :func:`jboost._batching.forest_bytes` for forests).

A custom loss must be pure (the purity rule of :func:`resolve_loss`); the common impure case,
a Python number read from a global that changes between fits, is caught by
:func:`pin_globals`.
"""

from __future__ import annotations

import functools
import numbers
import os
import warnings
import weakref
from typing import Any, Callable, NamedTuple, Optional, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from jboost import _compile
from jboost import _batching
from jboost import _native
from jboost import binning
from jboost import boosting
from jboost import depthwise
from jboost import derivatives
from jboost import losses as losses_lib
from jboost import lossguide
from jboost import metrics as metrics_lib
from jboost import tree as tree_lib

MAX_DEPTH = 16
#: The built-in tree families by their ``tree_family=`` names.
TREE_FAMILIES = {"oblivious": tree_lib.ObliviousTrees, "depthwise": depthwise.DepthwiseTrees,
                 "lossguide": lossguide.LossGuidedTrees}
#: Depth-wise forests' trees (node tables grown by the CPU kernel over their non-empty nodes).
MAX_DEPTHWISE_DEPTH = 30
MAX_ROUNDS = 10**7
TASKS = losses_lib.TASKS
CLASSIFICATION = ("binary", "multiclass")

# Shared defaults of the boosting entry points (fit, sweep, bagged boosters, stacking, ECOC).
# The classical algorithms (jboost.algorithms) and forests differ where their docstrings say why
# (the published algorithms use stumps or small trees and no L2 penalty; forests grow deep,
# unpenalised trees).
DEFAULTS = dict(n_rounds=100, depth=6, learning_rate=0.1, l2=1.0, min_split_gain=0.0,
                min_child_weight=1.0, subsample=1.0, colsample=1.0, colsample_by="tree",
                n_bins=256)

# name -> (low, high, low end open): the domain of every continuous hyperparameter.
BOUNDS = {
    "learning_rate": (0.0, np.inf, True),
    "l2": (0.0, np.inf, False),
    "min_split_gain": (0.0, np.inf, False),
    "min_child_weight": (0.0, np.inf, False),
    "subsample": (0.0, 1.0, True),
    "colsample": (0.0, 1.0, True),
}


def is_traced(v) -> bool:
    """Whether ``v`` is a JAX tracer (a value inside ``jit``/``vmap``): not checkable on the host."""
    return isinstance(v, jax.core.Tracer)


# --------------------------------------------------------------------------------------------
# Arrays.
# --------------------------------------------------------------------------------------------


def _numeric(arr: np.ndarray, name: str) -> None:
    if arr.dtype == object or not (np.issubdtype(arr.dtype, np.number) or arr.dtype == bool):
        raise TypeError(f"{name} must be numeric (float, int or bool); got dtype {arr.dtype}.")


def _is_frame(X) -> bool:
    """Whether ``X`` is a pandas DataFrame (without importing pandas)."""
    return type(X).__module__.startswith("pandas") and hasattr(X, "columns") and hasattr(X, "dtypes")


def _is_series(y) -> bool:
    return type(y).__module__.startswith("pandas") and hasattr(y, "dtype") and hasattr(y, "to_numpy") \
        and not hasattr(y, "columns")


def series_values(y):
    """A pandas Series' values as NumPy: numeric and nullable ones as float64 (``pd.NA`` -> NaN,
    refused later as a missing label), others (``category``, strings) as their objects. Anything
    else is returned as it is."""
    if not _is_series(y):
        return y
    if getattr(y.dtype, "kind", "O") in "biuf" and str(y.dtype) != "category":
        if y.dtype.kind == "b" and not getattr(y, "hasnans", False):
            return y.to_numpy(dtype=bool)
        return y.to_numpy(dtype=np.float64, na_value=np.nan)
    return y.to_numpy(dtype=object)


def feature_names_of(X) -> Optional[tuple]:
    """The column names of a pandas DataFrame ``X`` as strings (``None`` for arrays)."""
    if not _is_frame(X):
        return None
    names = tuple(str(c) for c in X.columns)
    if len(set(names)) != len(names):
        dup = [n for n in dict.fromkeys(names) if names.count(n) > 1]
        raise ValueError(f"X has duplicate column names {dup[:5]}: every feature needs its own name.")
    return names


def frame_in_order(X, names: Optional[Sequence[str]], name: str = "X"):
    """A DataFrame ``X``'s columns in the order of the model's feature ``names`` (matched by
    name: reordered columns work); a missing or unexpected column is refused by name. Arrays,
    and any ``X`` when the model has no names, are returned as they are (by position)."""
    if names is None or not _is_frame(X):
        return X
    have = feature_names_of(X)
    missing = [n for n in names if n not in have]
    extra = [n for n in have if n not in set(names)]
    if missing or extra:
        raise ValueError(f"{name}'s columns do not match the model's features: "
                         + (f"missing {missing[:10]}" if missing else "")
                         + ("; " if missing and extra else "")
                         + (f"unexpected {extra[:10]}" if extra else "")
                         + f" (the model was fitted on {list(names)[:10]}"
                         + ("..." if len(names) > 10 else "") + ").")
    if have == tuple(names):
        return X
    return X.iloc[:, [have.index(n) for n in names]]


def tabular_input(X, init_model=None, eval_set=None, name: str = "X"):
    """The one place a fit reads a table's feature names: ``(X, names, eval_set)`` with a
    DataFrame's columns put in ``init_model``'s order (matched by name) when the model being
    continued has names, ``names`` the fit's feature names (``None`` for arrays), and the
    ``eval_set``'s X (a ``(X, y[, w])`` tuple or a list of them) in the same order. Every fit of
    every model type calls it, so a model fitted on a DataFrame always keeps its names and
    prediction matches columns by name (never silently by position)."""
    own = getattr(init_model, "feature_names", None)
    X = frame_in_order(X, None if own is None else own.values, name)
    names = feature_names_of(X)
    if names is not None and eval_set is not None:
        def ordered(pair):
            if isinstance(pair, (tuple, list)) and len(pair) in (2, 3):
                return (frame_in_order(pair[0], names, "eval_set X"),) + tuple(pair[1:])
            return pair
        if isinstance(eval_set, list) and eval_set and isinstance(eval_set[0], (tuple, list)):
            eval_set = [ordered(p) for p in eval_set]
        else:
            eval_set = ordered(eval_set)
    return X, names, eval_set


def _frame_values(X, name: str) -> np.ndarray:
    """A DataFrame's values as a float64 ``(n, F)`` array: numeric, bool and nullable columns
    (missing values, ``pd.NA``, become NaN); other columns are refused by name (categorical
    columns are encoded by :func:`jboost.fit` only: :func:`categorical_plan`)."""
    from jboost import categorical  # noqa: PLC0415 - categorical imports this module lazily
    bad = [f"{col!r} ({dtype})" for col, dtype in zip(X.columns, X.dtypes)
           if not categorical._numeric_dtype(dtype)]
    if bad:
        cats = [c for c, d in zip(X.columns, X.dtypes) if categorical._categorical_dtype(d)]
        hint = (f"jboost.fit, jboost.sweep.sweep and jboost.bagging.fit_bagged_boosters encode "
                f"categorical columns ({cats[:8]} here: one-hot or ordered target statistics, "
                "cat_features=); this entry point takes numeric columns only: fit with one of "
                "them, or encode them as numbers yourself (e.g. df[c].cat.codes "
                "with -1 replaced by NaN, or pandas.get_dummies), or drop them"
                if cats else "convert them to numbers or drop them")
        raise TypeError(f"{name} has non-numeric columns {', '.join(bad[:8])}"
                        f"{'...' if len(bad) > 8 else ''}: {hint}.")
    return X.to_numpy(dtype=np.float64, na_value=np.nan)


def categorical_plan(X, cat_features, one_hot_max_size, eval_set=None, n_stats: int = 1):
    """The one place a fit reads categorical columns (:mod:`jboost.categorical`): ``None`` when
    ``X`` has none (``cat_features=None`` and no category, object or string column; or
    ``cat_features=[]``), else a :class:`jboost.categorical.Plan`: the column kinds and
    vocabularies (a :class:`~jboost.categorical.CategoricalSpec`), the training rows' encoded
    matrix and the ``eval_set``'s (by the same vocabularies). Errors name the argument: a
    ``cat_features`` entry that names no column, a categorical column of non-integer numbers,
    a non-numeric column left out of ``cat_features``."""
    from jboost import categorical  # noqa: PLC0415
    size = categorical.check_settings(one_hot_max_size, None, None)
    if is_traced(X):
        raise TypeError("X must be a concrete array (it is binned on the host); under "
                        "jax.vmap/jit close over the data instead of passing it as a traced argument.")
    if not categorical.has_categorical(X, cat_features):
        return None
    if not _is_frame(X) and not isinstance(X, np.ndarray):
        X = np.asarray(X)
    names, mask = categorical.resolve_columns(X, cat_features)
    if not any(mask):
        return None
    if X.shape[0] == 0:
        raise ValueError(f"X is empty: shape {X.shape}; need at least one sample and one feature.")
    spec, X_enc = categorical.build_spec(X, mask, names, size, n_stats)
    X_valid = None
    if isinstance(eval_set, (tuple, list)) and len(eval_set) in (2, 3):
        X_valid = categorical.encode(spec, eval_set[0], "eval_set X")
    elif eval_set is not None and not isinstance(eval_set, (tuple, list)):
        raise TypeError("eval_set must be a tuple (X_valid, y_valid) or (X_valid, y_valid, w_valid).")
    return categorical.Plan(spec, X_enc, X_valid)


def categorical_plan_like(spec, X, eval_set=None):
    """The :class:`jboost.categorical.Plan` of a continued fit: ``X`` (and the ``eval_set``'s
    rows) encoded with the model's columns and vocabularies ``spec`` (a category unseen by the
    model: the prior, as at prediction)."""
    from jboost import categorical  # noqa: PLC0415
    X_valid = None
    if isinstance(eval_set, (tuple, list)) and len(eval_set) in (2, 3):
        X_valid = categorical_rows(spec, eval_set[0], "eval_set X")
    return categorical.Plan(spec, categorical_rows(spec, X, "X"), X_valid)


def categorical_rows(spec, X, name: str = "X") -> np.ndarray:
    """Rows to predict with a model fitted on categorical columns, as the encoded float32 matrix
    the model reads (:func:`jboost.categorical.encode`: vocabulary look-ups; unseen and missing
    categories never an error). A DataFrame's columns are matched by name beforehand
    (:func:`frame_in_order`)."""
    from jboost import categorical  # noqa: PLC0415
    if is_traced(X):
        raise TypeError(f"{name} of a model with categorical features must be concrete (its "
                        "categories are looked up on the host); predict outside jax.jit / jax.vmap.")
    if not _is_frame(X) and not isinstance(X, np.ndarray):
        X = np.asarray(X)
    if len(getattr(X, "shape", ())) != 2:
        raise ValueError(f"{name} must be 2-D (n_samples, n_features); got shape {np.shape(X)}.")
    return categorical.encode(spec, X, name)


def as_matrix(X, name: str = "X", allow_empty: bool = False) -> np.ndarray:
    """``X`` as a float32 ``(n_samples, n_features)`` host array (NaN = missing); zero rows only
    when ``allow_empty`` (prediction). A pandas DataFrame's numeric, bool and nullable columns
    are taken (missing values become NaN; its names: :func:`feature_names_of`)."""
    if _is_frame(X):
        X = _frame_values(X, name)
    if np.iscomplexobj(X):
        raise TypeError(f"{name} must be real; got a complex array (its imaginary part would be lost).")
    if is_traced(X):
        raise TypeError(f"{name} must be a concrete array (it is binned on the host); under "
                        "jax.vmap/jit close over the data instead of passing it as a traced argument.")
    arr = np.asarray(X)
    if arr.dtype.kind in "OUS":
        raise TypeError(f"{name} must be numeric (float, int or bool); got dtype {arr.dtype}. "
                        "Categorical columns: jboost.fit encodes them, named by cat_features= "
                        "(column indices of an array) or inferred from a DataFrame's category "
                        "and string columns.")
    _numeric(arr, name)
    if arr.ndim != 2:
        raise ValueError(f"{name} must be 2-D (n_samples, n_features); got shape {arr.shape}.")
    if (arr.shape[0] == 0 and not allow_empty) or arr.shape[1] == 0:
        raise ValueError(f"{name} is empty: shape {arr.shape}; need at least one sample and one feature.")
    if not allow_empty:
        warn_if_features_lose_precision(arr, name)
    return arr.astype(np.float32, copy=False)


#: A feature whose float32 spacing at its largest magnitude exceeds this fraction of its range
#: (max - min) makes :func:`as_matrix` warn: float32 then merges values that bins would separate.
FEATURE_PRECISION = 1e-3


def warn_if_features_lose_precision(arr: np.ndarray, name: str = "X") -> None:
    """Warn when float64 (or 64-bit integer) features cannot be told apart in float32, jboost's
    dtype: a column whose float32 spacing at its largest magnitude is more than
    :data:`FEATURE_PRECISION` of its range (e.g. ``1e9 + N(0, 1)``: float32 holds it to +-64, so
    the column collapses to a few values and a few bins). Two passes over the data (min, max)."""
    if arr.dtype.itemsize <= 4 or arr.dtype.kind not in "fiu" or arr.shape[0] < 2:
        return
    with np.errstate(invalid="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN columns
        lo, hi = np.nanmin(arr, axis=0).astype(np.float64), np.nanmax(arr, axis=0).astype(np.float64)
    spacing = np.spacing(np.maximum(np.abs(lo), np.abs(hi)).astype(np.float32)).astype(np.float64)
    bad = np.flatnonzero((hi > lo) & (spacing > FEATURE_PRECISION * (hi - lo)))
    if bad.size:
        j = int(bad[0])
        warnings.warn(f"{name} loses precision in float32, jboost's dtype: {bad.size} column(s) "
                      f"(first: column {j}, values {lo[j]:.10g}..{hi[j]:.10g}, float32 spacing "
                      f"{spacing[j]:.3g}) collapse to a few values because of their offset. Subtract "
                      f"an offset per column (e.g. its median) in float64 before fitting and "
                      "predicting.", UserWarning, stacklevel=4)


def check_length(v, n: int, name: str = "y", x_name: str = "X") -> None:
    """``v`` has ``n`` rows, as ``X`` (checked first, before its values are read)."""
    rows = np.shape(series_values(v))[:1]
    if rows and rows[0] != n:
        raise ValueError(f"{name} has {rows[0]} samples but {x_name} has {n}: lengths must match.")


def as_vector(v, n: int, name: str, x_name: str = "X") -> np.ndarray:
    """``v`` as a float32 ``(n,)`` host array (a pandas Series: :func:`series_values`)."""
    if is_traced(v):
        raise TypeError(f"{name} must be a concrete array, not a traced value.")
    arr = np.asarray(series_values(v))
    _numeric(arr, name)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be 1-D; got shape {arr.shape}.")
    if arr.shape[0] != n:
        raise ValueError(f"{name} has {arr.shape[0]} samples but {x_name} has {n}: lengths must match.")
    return arr.astype(np.float32)


def as_labels(y, n: int, name: str = "y", x_name: str = "X", warn: bool = True,
              columns: Optional[int] = 0) -> np.ndarray:
    """Finite float32 ``(n,)`` labels; warns (``warn=True``) when float32 loses what tells them
    apart (a large offset next to a small spread: :func:`warn_if_labels_lose_precision`).

    ``columns``: ``0`` (the default) refuses 2-D labels with the one message of every entry point
    that takes a label per row only (sweeps, forests, bagging, stacking, ECOC, the classical
    algorithms, cross-validation); ``None`` also takes ``(n, C)`` vector labels (``jboost.fit``:
    multi-output targets, survival and ranking labels); ``C``: ``(n, C)`` labels required (an
    ``eval_set``'s labels next to training labels of ``C`` columns)."""
    if is_traced(y):
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
        _numeric(arr, name)
        want = (n, columns) if columns else (n, arr.shape[-1] if arr.ndim == 2 else None)
        if arr.ndim != 2 or arr.shape[0] != n or (columns and arr.shape[1] != columns) \
                or arr.shape[1] < 1:
            raise ValueError(f"{name} must have shape {want} (one row per row of {x_name}"
                             f"{f', {columns} label columns as y' if columns else ''}); got "
                             f"{arr.shape}.")
        arr = arr.astype(np.float32)
    else:
        arr = as_vector(y, n, name, x_name)
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} must be finite; found NaN or inf.")
    if warn and not is_traced(y):
        warn_if_labels_lose_precision(y, arr, name)
    return arr


#: A label cast to float32 may move by at most this fraction of the labels' spread (standard
#: deviation) before :func:`as_labels` warns.
LABEL_PRECISION = 1e-4


def _label_precision_loss(y, y32: np.ndarray):
    """``(moved, spread, median)`` when casting float64 labels ``y`` to ``y32`` moves them by more
    than :data:`LABEL_PRECISION` of their spread, else ``None``."""
    y64 = np.asarray(y)
    if y64.dtype.kind not in "fiu" or y64.dtype.itemsize <= 4 or y64.size < 2:
        return None
    if y64.ndim == 2:  # vector labels: column by column; the first column that loses
        for k in range(y64.shape[1]):
            lost = _label_precision_loss(y64[:, k], y32[:, k])
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
    such an offset itself for the losses of the residual (:func:`label_offset`); elsewhere the
    fix is the user's offset: fit ``y - c`` and add ``c`` back to the predictions in float64."""
    lost = _label_precision_loss(y, y32)
    if lost is not None:
        moved, spread, centre = lost
        warnings.warn(f"{name} loses precision in float32, jboost's dtype: its values move by up to "
                      f"{moved:.3g} against a spread (standard deviation) of {spread:.3g}, because of "
                      f"their offset (median {centre:.6g}). Fit {name} - c (e.g. c = {centre:.6g}) and "
                      "add c back to the predictions in float64.", UserWarning, stacklevel=4)


def label_offset(y, y32: np.ndarray, loss, name: str = "y"):
    """The offset ``c`` that ``jboost.fit`` subtracts from the labels in float64 (and its
    :class:`jboost.Booster` adds back to the raw scores, ``Booster.offset``), or ``None``.

    Taken when the loss is a loss of the residual (:func:`jboost.losses.shifts_with_labels`:
    squared, absolute, Huber, quantile; the fit of ``y - c`` plus ``c`` is the same model) and
    float32 would lose what tells the labels apart (:func:`warn_if_labels_lose_precision`'s
    criterion): ``c`` is the labels' median, a float64 scalar with ``jax_enable_x64`` (the
    predictions are then float64 and lose nothing), else the nearest float32 (the fit is exact,
    but float32 predictions near ``c`` are rounded to its float32 spacing: a warning says so).
    Otherwise ``None``, and the precision warning is given where it applies.
    """
    lost = _label_precision_loss(y, y32)
    if lost is None or not losses_lib.shifts_with_labels(loss):
        if lost is not None:
            warn_if_labels_lose_precision(y, y32, name)
        return None
    _, spread, centre = lost
    if np.ndim(y) == 2:  # vector labels: every column's median (a shift of each target)
        centres = np.median(np.asarray(y, np.float64), axis=0)
        if jax.config.jax_enable_x64:
            return centres
        c = centres.astype(np.float32)
        warnings.warn(f"{name} has a large offset (column medians {centres.tolist()[:4]}): the fit "
                      "subtracts each column's median in float64 and the model adds it back "
                      "(Booster.offset), but its float32 predictions are rounded to the offsets' "
                      "float32 spacing. Enable float64 predictions with "
                      "jax.config.update('jax_enable_x64', True) before fitting.", UserWarning,
                      stacklevel=3)
        return c
    if jax.config.jax_enable_x64:
        return np.float64(centre)
    c = np.float32(centre)
    warnings.warn(f"{name} has a large offset (median {centre:.6g}, spread {spread:.3g}): the fit "
                  f"subtracts c = {float(c):.9g} in float64 and the model adds it back "
                  f"(Booster.offset), but its float32 predictions near c are rounded to "
                  f"+-{float(np.spacing(c)) / 2:.3g}. Enable float64 predictions with "
                  "jax.config.update('jax_enable_x64', True) before fitting.", UserWarning,
                  stacklevel=3)
    return c


#: A tree's split gain ``G^2 / H`` (``G`` a node's sum of weighted targets) overflows float32
#: (max 2^128) when ``G`` nears 2^64; :func:`gain_exponent` keeps every ``G`` below this bound.
GAIN_BOUND = 2.0 ** 60


def gain_exponent(y: np.ndarray, w: np.ndarray, max_count: float = 2.0) -> int:
    """The power of two ``e >= 0`` by which regression targets ``y`` (weights ``w``, bootstrap
    counts summing to about ``n``; ``max_count`` a margin for their spread) must be divided so
    that no node's weighted target sum exceeds :data:`GAIN_BOUND`, i.e. its split gain ``G^2 / H``
    stays finite in float32. 0 for ordinary labels (``|y| * sum(w) <= 2^60``: nothing changes).
    A power of two divides exactly, so the trees of ``y * 2^-e`` are those of ``y`` with leaf
    values scaled by ``2^-e`` and gains by ``2^-2e`` (forests of labels at scale 1e18, whose
    gains overflowed to a near-constant model)."""
    y, w = np.asarray(y, np.float64), np.asarray(w, np.float64)
    bound = float(np.max(np.abs(y), initial=0.0)) * float(np.max(w, initial=0.0)) * y.shape[0] * max_count
    if not bound > GAIN_BOUND:
        return 0
    return int(np.ceil(np.log2(bound / GAIN_BOUND)))


def centred_labels(y, offset, n: int, name: str = "y", x_name: str = "X") -> np.ndarray:
    """``y - offset`` computed in float64, as float32 labels (:func:`label_offset`)."""
    if np.ndim(y) == 2:  # vector labels: the offset of each column
        as_labels(y, n, name, x_name, warn=False, columns=np.shape(offset)[-1])
        return (np.asarray(y, np.float64) - np.asarray(offset, np.float64)).astype(np.float32)
    as_labels(y, n, name, x_name, warn=False)  # the checks (shape, finite) on the raw labels
    return (np.asarray(y, np.float64).reshape(-1) - np.float64(offset)).astype(np.float32)


def as_margin(base_margin, n: int, k: int, name: str = "base_margin", x_name: str = "X"):
    """Checked per-row raw-score offsets as a float32 ``(n, K)`` host array, or ``None``:
    ``(n,)`` for one output, ``(n, K)`` for ``K`` outputs (the scale of :func:`jboost.predict`),
    finite."""
    if base_margin is None:
        return None
    if is_traced(base_margin):
        raise TypeError(f"{name} must be a concrete array, not a traced value.")
    arr = np.asarray(base_margin)
    _numeric(arr, name)
    want = (n,) if k == 1 else (n, k)
    if arr.shape == (n, 1) and k == 1:
        arr = arr.reshape(n)
    if arr.shape != want:
        raise ValueError(f"{name} must have shape {want} (one raw-score offset per row of {x_name}"
                         f"{'' if k == 1 else f' and output, K = {k}'}); got {arr.shape}.")
    arr = arr.astype(np.float32).reshape(n, k)
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} must be finite; found NaN or inf.")
    return arr


def as_weights(sample_weight, n: int, name: str = "sample_weight", x_name: str = "X") -> np.ndarray:
    """Checked ``(n,)`` float32 weights: ones when ``None``; finite, non-negative, positive sum."""
    if sample_weight is None:
        return np.ones((n,), np.float32)
    w = as_vector(sample_weight, n, name, x_name)
    if not np.all(np.isfinite(w)):
        raise ValueError(f"{name} must be finite; found NaN or inf.")
    if np.any(w < 0):
        raise ValueError(f"{name} must be non-negative; found {w.min()}.")
    if not np.any(w > 0):
        raise ValueError(f"{name} must have a positive sum; all weights are zero.")
    return w


def check_early_stopping(rounds, tolerance, metric, loss, *, has_validation: bool,
                         needs: str = "eval_set=(X_valid, y_valid)"):
    """The static :class:`jboost.boosting.EarlyStopping` of ``early_stopping_rounds``,
    ``early_stopping_tolerance`` and ``eval_metric`` (``None`` without ``rounds``), for every
    entry point that stops early (``fit``, bagged boosters, the sweep); ``needs`` names the
    validation rows the entry point lacks when ``has_validation`` is false."""
    if tolerance is None or isinstance(tolerance, bool):
        raise TypeError(f"early_stopping_tolerance must be a real number >= 0; got {tolerance!r}.")
    check_real(tolerance, "early_stopping_tolerance", 0.0, np.inf)
    if rounds is None:
        if metric is not None:
            raise ValueError("eval_metric is the early-stopping score: pass early_stopping_rounds too.")
        if float(tolerance) != 0.0:
            raise ValueError(f"early_stopping_tolerance={tolerance} needs early_stopping_rounds: "
                             "pass early_stopping_rounds= too (or drop the tolerance).")
        return None
    rounds = check_int(rounds, "early_stopping_rounds", 1, MAX_ROUNDS)
    if not has_validation:
        raise ValueError(f"early_stopping_rounds needs {needs}: the rounds stop on its score.")
    check_metric(metric, loss, name="eval_metric")
    return boosting.EarlyStopping(rounds=rounds, tolerance=float(tolerance), metric=metric)


def check_init_model(model, booster_type: type, n_features: int, borders, *, n_bins: int,
                     depth: int, who: str = "jboost.fit",
                     config: Optional[boosting.BoostConfig] = None):
    """Check a model to continue (``init_model=``) against a new fit of ``who``: one
    ``booster_type`` (not a batch) on as many features, with the same ``n_bins`` and ``depth``
    (and, given a boosting ``config``, the same tree family: :func:`check_init_family`); given
    ``borders`` must be its own. Returns the borders to bin with (the model's)."""
    if not isinstance(model, booster_type):
        raise TypeError(f"init_model must be a {booster_type.__name__} fitted by {who}; got {type(model).__name__}.")
    if model.batch_shape:
        raise ValueError(f"init_model is a batch of {model.batch_shape} models (jax.vmap): "
                         "continue one model.")
    if model.n_features != n_features:
        raise ValueError(f"init_model has {model.n_features} features; X has {n_features}.")
    model_bins = model.borders.shape[-1] + 1
    if n_bins != model_bins:
        raise ValueError(f"n_bins={n_bins} differs from init_model's ({model_bins}): a continued "
                         f"fit bins with the model's borders; pass n_bins={model_bins}.")
    if depth != model.depth:
        raise ValueError(f"depth={depth} differs from init_model's trees (depth {model.depth}); "
                         f"pass depth={model.depth}.")
    if borders is not None and not np.array_equal(np.asarray(borders), np.asarray(model.borders)):
        raise ValueError("borders differ from init_model's: a continued fit bins with the model's "
                         "borders (omit borders=).")
    trees = model.trees
    if hasattr(trees, "thresholds") and not np.array_equal(
            np.asarray(trees.borders),
            np.asarray(model.borders)[np.asarray(trees.features), np.asarray(trees.thresholds)]):
        raise ValueError("init_model's split thresholds are not on its bin borders (a model "
                         "fine-tuned with jboost.finetune(soft=True) moved them): a continued fit "
                         "replays the trees on bins and would change its predictions; continue the "
                         "model before soft fine-tuning, or fine-tune with soft=False.")
    if config is not None:
        check_init_family(model, config)
    return model.borders


#: The ``tree_family=`` name of each built-in family class.
_FAMILY_ARGS = {cls.__name__: name for name, cls in TREE_FAMILIES.items()}


def check_init_family(model, config: boosting.BoostConfig) -> None:
    """A continued fit grows the model's tree family (the one its settings name, else the one
    its trees show: oblivious, or node tables of ``2**depth - 1`` nodes (depth-wise) or of
    another count (loss-guided, ``max_leaves - 1``)) with tables of as many node slots."""
    want = config.tree_family.__name__
    trees = model.trees
    tables = isinstance(trees, depthwise.DepthwiseTrees)
    slots = int(trees.features.shape[-1]) if tables else None
    grown = (getattr(getattr(model, "settings", None), "names", None) or {}).get("tree_family")
    if grown is None:  # no record (an algorithm's model, an older file): what the trees show
        grown = (("DepthwiseTrees" if slots == 2 ** model.depth - 1 else "LossGuidedTrees")
                 if tables else type(trees).__name__)
    if grown != want:
        arg = _FAMILY_ARGS.get(grown)
        hint = f"tree_family={arg!r}" if arg else f"tree_family={grown}"
        if grown == "LossGuidedTrees":
            hint += f", max_leaves={slots + 1}"
        raise ValueError(f"init_model's trees are {grown}; this fit's tree_family is {want}: a "
                         f"continued fit grows the model's family (pass {hint}).")
    if config.max_leaves is not None and slots != config.max_leaves - 1:
        raise ValueError(f"max_leaves={config.max_leaves} differs from init_model's trees "
                         f"({slots + 1} leaf slots); pass max_leaves={slots + 1}.")


def check_init_loss(model, loss) -> None:
    """A continued fit's loss must be its model's (name and number of outputs)."""
    if model.loss.name != loss.name or model.n_outputs != loss.n_outputs:
        raise ValueError(f"init_model was fitted with loss {model.loss.name!r} ({model.n_outputs} "
                         f"outputs); this fit has {loss.name!r} ({loss.n_outputs}).")
    if model.loss.label_columns != loss.label_columns:
        cols = lambda c: "1-D labels" if c is None else f"{c} label columns"
        raise ValueError(f"init_model was fitted on {cols(model.loss.label_columns)}; this fit's y "
                         f"has {cols(loss.label_columns)}: continue with labels of the same shape.")


def predict_matrix(X, n_features: int, name: str = "X"):
    """Rows to predict: a device array is kept as it is (no round trip through the host, tracers
    allowed); anything else becomes a float32 host array. The feature count must match."""
    if isinstance(X, jax.Array):
        if X.ndim != 2:
            raise ValueError(f"{name} must be 2-D (n_samples, n_features); got shape {X.shape}.")
        if not (jnp.issubdtype(X.dtype, jnp.number) or X.dtype == bool):
            raise TypeError(f"{name} must be numeric (float, int or bool); got dtype {X.dtype}.")
        out = X
    else:
        out = as_matrix(X, name, allow_empty=True)
    if out.shape[1] != n_features:
        raise ValueError(f"{name} has {out.shape[1]} features, but the model was fitted on {n_features}.")
    return out


# --------------------------------------------------------------------------------------------
# Settings.
# --------------------------------------------------------------------------------------------


def check_int(v, name: str, lo: int, hi: int) -> int:
    """A Python int in ``[lo, hi]`` (static settings: they set array shapes)."""
    if isinstance(v, np.generic):
        v = v.item()
    if isinstance(v, bool) or not isinstance(v, numbers.Integral):
        raise TypeError(f"{name} must be an int (it sets array shapes); got {type(v).__name__}.")
    if not lo <= int(v) <= hi:
        raise ValueError(f"{name}={v} must be in [{lo}, {hi}].")
    return int(v)


def check_real(v, name: str, lo: float, hi: float, lo_open: bool = False) -> None:
    """A concrete scalar in ``[lo, hi]`` (``(lo, hi]`` when ``lo_open``); tracers pass unchecked."""
    if is_traced(v) or v is None:
        return
    arr = np.asarray(v)
    if arr.size != 1:
        raise ValueError(f"{name} must be a scalar; got shape {arr.shape} (use jax.vmap for sweeps).")
    x = float(arr)
    bad = (x <= lo if lo_open else x < lo) or x > hi or not np.isfinite(x)
    if bad:
        left = "(" if lo_open else "["
        raise ValueError(f"{name}={x} must be in {left}{lo}, {hi}].")


def check_hyperparameter(name: str, v) -> None:
    """``v`` within the domain :data:`BOUNDS` of hyperparameter ``name``."""
    lo, hi, lo_open = BOUNDS[name]
    check_real(v, name, lo, hi, lo_open=lo_open)


def check_choice(v, name: str, choices: Sequence[Any]) -> Any:
    """``v`` must be one of ``choices``."""
    if not isinstance(v, str) and not isinstance(v, (bool, int, type(None))):
        raise TypeError(f"{name}={v!r} must be one of {tuple(choices)}.")
    if v not in choices:
        raise ValueError(f"{name}={v!r} must be one of {tuple(choices)}.")
    return v


def as_key(key):
    """A ``jax.random`` key from an int seed or a key (typed, or raw ``uint32[2]``)."""
    if isinstance(key, np.generic):
        key = key.item()
    if isinstance(key, numbers.Integral) and not isinstance(key, bool):
        return jax.random.PRNGKey(int(key))
    if isinstance(key, (jax.Array, np.ndarray)):
        if jnp.issubdtype(key.dtype, jax.dtypes.prng_key) or (key.dtype == np.uint32 and key.shape[-1:] == (2,)):
            return key
    raise TypeError(f"key must be an int seed or a jax.random key; got {type(key).__name__}"
                    f"{'' if not hasattr(key, 'shape') else f' of shape {key.shape}'}.")


def as_raw_key(key) -> np.ndarray:
    """:func:`as_key` as a host ``uint32[2]`` array (typed keys unwrapped)."""
    key = as_key(key)
    if is_traced(key):
        raise TypeError("key must be concrete here (an int seed or a jax.random key), not traced.")
    if jnp.issubdtype(key.dtype, jax.dtypes.prng_key):
        key = jax.random.key_data(key)
    key = np.asarray(key)
    if key.shape != (2,):
        raise TypeError(f"key must be a single jax.random key; got shape {key.shape}.")
    return key


def n_classes_of(y: np.ndarray, n_classes: Optional[int] = None, name: str = "y",
                 task: str = "multiclass") -> int:
    """Check class labels (0/1 for ``task="binary"``, 0..K-1 otherwise) and return K (>= 2).

    ``n_classes`` (when given) fixes K; otherwise K is ``max(y) + 1``.
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
        _warn_class_zero_absent(y, name)
        check_memory(fit_bytes(y.shape[0], 1, 1, 3, k),
                     cause=f"K = max({name}) + 1 = {k} classes, from the labels' maximum",
                     detail=f"{y.shape[0]} rows x K scores (a lower bound: one feature, depth 1, 3 bins)")
        return k
    k = check_int(n_classes, "n_classes", 2, 1 << 20)
    if np.any(y >= k):
        raise ValueError(f"{name} must hold class labels in [0, {k}) for n_classes={k}; got max "
                         f"{y.max()}.")
    return k


def resolve_loss(loss, y: np.ndarray, n_outputs: Optional[int] = None,
                 task: Optional[str] = None) -> losses_lib.Loss:
    """The :class:`jboost.Loss` for ``loss`` (name, Loss or function) with ``n_outputs`` set
    (K-class losses take K from the labels) and the labels ``y`` checked against it.

    Also checked here: the loss's parameters against their declared domains
    (:func:`check_loss_params`), that the loss returns one scalar per sample
    (:func:`check_loss_output`, by ``jax.eval_shape``), that a K-class loss has K >= 2 outputs,
    and that the K taken from the labels fits in memory (:func:`check_memory` of
    :func:`fit_bytes`); labels 1..K with class 0 absent get a ``UserWarning``.

    **The purity rule.** A loss function is traced once and compiled: the program keeps every
    value the function read from outside its arguments (a module global, a closure variable) as
    it was at that time, and ``jax.jit`` reuses the program for as long as the function object
    is the same. A value that changes between fits must therefore be a loss parameter, passed
    as ``jboost.Loss(fn, params={"scale": 2.0})`` with ``fn(y, raw, scale)``: it is then traced
    (no recompilation when it changes, and a sweep can vary it). The common case is caught
    here (:func:`pin_globals`): Python numbers, strings, NumPy/JAX scalars and small arrays read
    from globals and closure cells are compared with their values at the function's last fit;
    a changed one compiles the fit anew (the right answer) with a ``UserWarning`` naming it.
    Values read through object attributes, large arrays and custom links or baselines are the
    user's to keep constant.
    """
    if task is not None:
        check_choice(task, "task", TASKS)
    if n_outputs is not None:
        n_outputs = check_int(n_outputs, "n_outputs", 1, 1 << 20)
    resolved = losses_lib.get(loss, n_outputs=n_outputs, task=task)
    if np.ndim(y) == 2 and resolved.task == "multiclass":
        raise ValueError(f"y has shape {np.shape(y)}: loss {resolved.name!r} takes one column of "
                         "class labels 0..K-1. For several independent 0/1 labels (multi-label) "
                         "use 'binomial_deviance' with y of shape (n, C).")
    if resolved.n_outputs is None:
        if resolved.task != "multiclass":
            raise ValueError(f"n_outputs must be given for loss {resolved.name!r}.")
        if np.any(y != np.round(y)) or np.any(y < 0):
            raise ValueError(f"y must hold integer class labels 0..K-1 for loss {resolved.name!r}.")
        k = int(y.max()) + 1
        if k < 2:
            raise ValueError(f"y holds a single class; loss {resolved.name!r} needs at least 2.")
        if k > 1 << 20:
            raise ValueError(f"y has maximum {y.max()}: K = max(y) + 1 = {k} classes (from the "
                             f"labels' maximum) is more than {1 << 20}; map the labels to 0..K-1.")
        _warn_class_zero_absent(y, "y")
        check_memory(fit_bytes(y.shape[0], 1, 1, 3, k, dense_hessian=resolved.hessian != "unit"),
                     cause=f"K = max(y) + 1 = {k} classes, from the labels' maximum",
                     detail=f"{y.shape[0]} rows x K raw scores, gradients, hessians"
                     f"{' and K x K autodiff hessians' if resolved.hessian != 'unit' else ''} "
                     "(a lower bound: one feature, depth 1, 3 bins)")
        resolved = resolved.replace(n_outputs=k)
    elif resolved.task == "multiclass" and resolved.n_outputs < 2:
        raise ValueError(f"loss {resolved.name!r} has task='multiclass' but n_outputs="
                         f"{resolved.n_outputs}: pass n_outputs=K, the number of classes (raw "
                         "scores per row), to jboost.Loss or to fit.")
    if np.ndim(y) == 2:
        resolved = _with_label_columns(resolved, y, n_outputs)
    elif resolved.batch:
        raise ValueError(f"loss {resolved.name!r} is a {resolved.task} objective: y must be "
                         f"(n, 2) structured labels ({_STRUCTURE.get(resolved.task, 'see its docstring')}); "
                         f"got shape {np.shape(y)}.")
    check_loss_params(resolved)
    resolved = pin_globals(resolved)
    check_loss_output(resolved)
    check_link(resolved)
    losses_lib.check_labels(resolved, y)
    return resolved


def check_batch_objective(loss: losses_lib.Loss, eval_set, devices) -> losses_lib.Loss:
    """A batch objective's fit (:attr:`jboost.Loss.batch`): its value couples every row, so the
    rows must all be on one device (``devices=None``); a group-structured one's ``max_group``
    covers the ``eval_set``'s query groups too. Returns the loss to fit."""
    if devices is not None:
        raise ValueError(f"devices={devices!r}: loss {loss.name!r} is a batch objective (one function "
                         "of every row: risk sets, query groups), which needs all rows on one device; "
                         "fit with devices=None.")
    if loss.max_group is not None and isinstance(eval_set, (tuple, list)) and len(eval_set) >= 2:
        yv = np.asarray(eval_set[1])
        if yv.ndim == 2 and yv.shape[1] >= 2 and yv.shape[0] > 0:
            losses_lib.query_starts(yv[:, 1], "eval_set y")
            loss = loss.replace(max_group=max(loss.max_group, max_group_size(yv[:, 1])))
    return loss


_STRUCTURE = {"survival": "time > 0, event 0/1", "ranking": "relevance >= 0, query id"}


def _with_label_columns(loss: losses_lib.Loss, y: np.ndarray, n_outputs) -> losses_lib.Loss:
    """``loss`` for vector labels ``y (n, C)``: a batch objective reads its structured columns; a
    built-in loss of a scalar label is applied per column (:func:`jboost.losses.columnwise`: C
    outputs); a custom loss gets each row's ``(C,)`` label and has C outputs."""
    c = int(y.shape[1])
    if loss.batch:
        if loss.hessian_diag == "groups" or loss.task == "ranking":
            loss = loss.replace(max_group=max_group_size(y[:, 1]) if y.shape[1] >= 2 else 1)
        return loss.replace(label_columns=c)
    if loss.adaptive_huber_alpha:
        raise ValueError(f"y has shape {y.shape}: the adaptive Huber loss (huber(alpha=)) takes one "
                         "label column; use a fixed delta (jboost.losses.huber(delta)) or fit one "
                         "model per column.")
    given = n_outputs if n_outputs is not None else (loss.n_outputs if loss.n_outputs not in (None, 1)
                                                      else None)
    if given is not None and int(given) != c:
        raise ValueError(f"n_outputs={given} disagrees with y's {c} columns: with y of shape "
                         f"(n, C) every column is one output (n_outputs = C = {c}); pass "
                         f"n_outputs={c} or leave it out.")
    if loss.per_column or losses_lib.is_built_in(loss):
        if loss.label_columns is not None and loss.label_columns != c:
            raise ValueError(f"loss {loss.name!r} was made for {loss.label_columns} label columns; "
                             f"y has {c}.")
        return losses_lib.columnwise(loss, c)
    return loss.replace(label_columns=c, n_outputs=c)


def max_group_size(qid) -> int:
    """The largest query group's number of rows (contiguous ids, :func:`jboost.losses.query_starts`)."""
    qid = np.asarray(qid)
    if qid.size == 0:
        return 1
    starts = losses_lib.query_starts(qid)
    return int(np.max(np.diff(np.r_[starts, qid.shape[0]])))


# --------------------------------------------------------------------------------------------
# The purity rule: a loss that reads Python numbers from globals or closure cells.
# --------------------------------------------------------------------------------------------

# Arrays read by a loss are pinned by value up to this many elements (larger ones are not
# compared: copying them at every fit would cost more than it protects).
PIN_MAX_SIZE = 1 << 16
# Functions of these packages are not searched for the values they read (their constants do not
# change between fits).
_LIBRARIES = ("jax", "jaxlib", "numpy", "jboost", "optax", "chex", "scipy", "equinox")


class PinnedFn:
    """A user's loss function together with the values of the Python numbers and small arrays it
    reads from module globals and closure cells when it is resolved (:func:`pin_globals`).

    ``jax.jit`` caches a compiled program per static ``Loss.fn`` (a pytree meta field) and keeps
    in it the values the function read when it was traced; a loss whose global changes between
    fits would silently reuse the stale program. Two ``PinnedFn`` are equal only when they wrap
    the same function AND its values are equal, so a changed value compiles anew (the right
    answer) and an unchanged one reuses the program. Calls go to the wrapped function.
    """

    __slots__ = ("fn", "values", "__weakref__")

    def __init__(self, fn: Callable, values: tuple):
        self.fn = fn
        self.values = values   # ((name, (type name, value) or ("array", dtype, shape, bytes)), ...)

    def __call__(self, *args, **kwargs):
        return self.fn(*args, **kwargs)

    @property
    def __name__(self) -> str:  # noqa: A003 - callables are named by __name__
        return getattr(self.fn, "__name__", "custom")

    @property
    def __wrapped__(self) -> Callable:
        return self.fn

    def __eq__(self, other) -> bool:
        return isinstance(other, PinnedFn) and self.fn is other.fn and self.values == other.values

    def __hash__(self) -> int:
        return hash((id(self.fn), self.values))

    def __repr__(self) -> str:
        return f"PinnedFn({self.fn!r}, {', '.join(v[0] for v in self.values)})"


def _pinnable(v):
    """The comparable value of ``v`` if it is a Python number or string, a NumPy scalar or a
    small concrete array (a constant of the traced program); ``None`` otherwise."""
    if isinstance(v, np.generic):
        return (type(v).__name__, v.dtype.str, v.tobytes())
    if isinstance(v, (bool, numbers.Number, str)):
        return (type(v).__name__, v)
    if isinstance(v, jax.Array) and not is_traced(v) and v.size <= PIN_MAX_SIZE:
        try:
            v = np.asarray(v)
        except Exception:  # noqa: BLE001 - a deleted or non-addressable array: not pinned
            return None
    if isinstance(v, np.ndarray) and v.dtype != object and v.size <= PIN_MAX_SIZE:
        return ("array", v.dtype.str, v.shape, v.tobytes())
    return None


def _read_values(fn: Callable, prefix: str, out: dict, seen: set, depth: int = 0) -> None:
    """The pinnable values ``fn`` reads: its globals (the names of its code and nested code),
    its closure cells, and those of the user functions it calls through them (3 levels)."""
    code = getattr(fn, "__code__", None)
    if code is None or id(fn) in seen or depth > 3:
        return
    seen.add(id(fn))
    names, stack = set(), [code]
    while stack:
        c = stack.pop()
        names.update(c.co_names)
        stack.extend(k for k in c.co_consts if hasattr(k, "co_names"))
    found = []
    g = getattr(fn, "__globals__", {})
    found += [(n, g[n], "global") for n in sorted(names) if n in g]
    for n, cell in zip(code.co_freevars, getattr(fn, "__closure__", None) or ()):
        try:
            found.append((n, cell.cell_contents, "closure variable"))
        except ValueError:  # an empty cell
            pass
    for name, v, kind in found:
        pinned = _pinnable(v)
        if pinned is not None:
            shown = np.array(v) if isinstance(v, np.ndarray) else v   # a copy: arrays mutate
            out.setdefault(f"{prefix}{name}", (kind, pinned, shown))
        elif (callable(v) and hasattr(v, "__code__")
              and not str(getattr(v, "__module__", "") or "").split(".")[0] in _LIBRARIES):
            _read_values(v, f"{prefix}{name}.", out, seen, depth + 1)


# The values each user loss function read at its last resolution (to say what changed).
_LAST_VALUES: "weakref.WeakKeyDictionary[Callable, dict]" = weakref.WeakKeyDictionary()


def pin_globals(loss: losses_lib.Loss) -> losses_lib.Loss:
    """``loss`` with its user function wrapped in a :class:`PinnedFn` holding the values of the
    Python numbers, NumPy/JAX scalars and small arrays (up to :data:`PIN_MAX_SIZE` elements)
    that it reads from module globals and closure cells (and the user functions it calls read),
    so that jit's cache tells a changed value from an unchanged one. When a value changed since
    the function's last fit, a ``UserWarning`` names it and says how to make it a traced
    parameter (``jboost.Loss(fn, params={...})``). Built-in losses, and functions that read no
    such value, are returned unchanged.

    Not detected: values read through attributes of objects or modules (``cfg.scale``), arrays
    larger than :data:`PIN_MAX_SIZE`, and callable objects; the purity rule of
    :func:`resolve_loss` applies to them.
    """
    if not isinstance(loss.fn, PinnedFn) and losses_lib.is_built_in(loss):
        return loss
    fn = loss.fn.fn if isinstance(loss.fn, PinnedFn) else loss.fn
    values: dict = {}
    _read_values(fn, "", values, set())
    if not values:
        return loss.replace(fn=fn) if fn is not loss.fn else loss
    try:
        last = _LAST_VALUES.get(fn)
        _LAST_VALUES[fn] = values
    except TypeError:  # not weak-referenceable: no report, still pinned
        last = None
    if last is not None:
        changed = [(name, last[name][2], kind_now[2], kind_now[0]) for name, kind_now in values.items()
                   if name in last and last[name][1] != kind_now[1]]
        if changed:
            what = "; ".join(f"the {kind} {name} ({_short(old)} -> {_short(new)})"
                             for name, old, new, kind in changed)
            first = changed[0][0].split(".")[-1]
            warnings.warn(
                f"loss {loss.name!r} reads {what}, which changed since its last fit: a compiled "
                "program keeps the values its loss read when it was traced, so jboost compiles "
                "this fit anew for the new value. Pass such a value as a loss parameter instead, "
                f"traced (no recompilation; a sweep can vary it): jboost.Loss(fn, params="
                f"{{'{first}': value}}) with fn(y, raw, {first}).", UserWarning, stacklevel=4)
    key = tuple((name, kind_now[1]) for name, kind_now in sorted(values.items()))
    return loss.replace(fn=PinnedFn(fn, key))


def _short(v) -> str:
    text = repr(v.tolist() if isinstance(v, (np.ndarray, jax.Array)) else v)
    return text if len(text) <= 40 else text[:37] + "..."


def _warn_class_zero_absent(y: np.ndarray, name: str) -> None:
    if y.size and y.min() >= 1:
        warnings.warn(f"{name} holds class labels {y.min():g}..{y.max():g} with class 0 absent: "
                      f"K-class labels are 0..K-1, so K = max + 1 = {int(y.max()) + 1} includes "
                      "an empty class 0. Map the labels to 0..K-1 (e.g. y - 1) if that is not "
                      "intended.", UserWarning, stacklevel=3)


def check_loss_param(loss: losses_lib.Loss, name: str, value, label: Optional[str] = None) -> None:
    """A concrete value of parameter ``name`` of ``loss`` must be finite and inside the domain the
    loss declares for it (:attr:`jboost.Loss.domains`); tracers pass unchecked. ``label`` names
    where the value came from in the message (e.g. a sweep's grid key)."""
    if is_traced(value) or value is None:
        return
    where = f"{label}: " if label else ""
    arr = np.asarray(value, np.float64)
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{where}loss {loss.name!r} parameter {name} must be finite; got "
                         f"{arr.ravel()[~np.isfinite(arr.ravel())][0]}.")
    domain = loss.domains.get(name)
    if domain is not None:
        bad = ~domain.contains(arr)
        if bad.any():
            raise ValueError(f"{where}loss {loss.name!r} parameter {name}={arr.ravel()[bad.ravel()][0]:g} "
                             f"must be in {domain}.")


def check_loss_params(loss: losses_lib.Loss) -> None:
    """Every concrete parameter of ``loss`` inside its declared domain."""
    for name, value in loss.params.items():
        check_loss_param(loss, name, value)


def _traced_contains(domain, x) -> jax.Array:
    """Traced :meth:`jboost.losses.Interval.contains`: every element of ``x`` finite and inside
    ``domain`` (``None``: finite only)."""
    x = jnp.asarray(x, jnp.float32)
    ok = jnp.isfinite(x)
    if domain is not None:
        ok &= (x > domain.lo) if domain.lo_open else (x >= domain.lo)
        ok &= (x < domain.hi) if domain.hi_open else (x <= domain.hi)
    return jnp.all(ok)


def _hyper_domains() -> dict:
    return {name: losses_lib.Interval(lo, hi, lo_open, False) for name, (lo, hi, lo_open) in BOUNDS.items()}


def in_domains(loss: Optional[losses_lib.Loss], hyper=None) -> jax.Array:
    """A traced boolean: every parameter of ``loss`` is finite and inside its declared domain
    (:attr:`jboost.Loss.domains`, none without ``loss``) and every continuous hyperparameter of
    ``hyper`` (a :class:`jboost.boosting.Hyperparams` or a forest's, optional: the fields named
    in :data:`BOUNDS`) inside its bounds. The check that values traced under ``jax.vmap`` or
    ``jit`` get in place of the host's (:func:`check_loss_param`, :func:`check_hyperparameter`)."""
    ok = jnp.asarray(True)
    for name, value in ({} if loss is None else loss.params).items():
        ok &= _traced_contains(loss.domains.get(name), value)
    if hyper is not None:
        for name, domain in _hyper_domains().items():
            if getattr(hyper, name, None) is not None:
                ok &= _traced_contains(domain, getattr(hyper, name))
    return ok


def _report_outside(ok, params, hyper, *, loss_name: str, domains) -> None:
    """Host side of :func:`nan_outside_domains` (a ``jax.debug.callback``, one model's values)."""
    if bool(np.asarray(ok)):
        return
    bad = []
    for name, value in params.items():
        domain = domains.get(name)
        arr = np.asarray(value, np.float64)
        if not np.all(domain.contains(arr) if domain is not None else np.isfinite(arr)):
            bad.append(f"loss {loss_name!r} parameter {name}={arr.ravel()[0]:g} is not in "
                       f"{domain if domain is not None else '(-inf, inf)'}")
    for name, domain in _hyper_domains().items():
        if hyper is not None and name in hyper and not np.all(domain.contains(np.asarray(hyper[name]))):
            bad.append(f"{name}={float(np.asarray(hyper[name]).ravel()[0]):g} is not in {domain}")
    warnings.warn(f"{'; '.join(bad) or 'a traced setting is outside its domain'}: this fit's "
                  "results are NaN (a traced value, e.g. under "
                  "jax.vmap, is checked when the program runs instead of refused on the host); "
                  "use values inside the domain.", UserWarning, stacklevel=2)


def nan_outside_domains(values, loss: Optional[losses_lib.Loss], hyper=None, *, warn: bool = True):
    """``values`` (any pytree: a fit's outputs, its loss curves) with every floating leaf NaN
    when a traced parameter of ``loss`` or hyperparameter of ``hyper`` is outside its domain
    (:func:`in_domains`), so that a bad setting of a vmapped fit is a NaN row, never ranked; with
    ``warn``, a ``UserWarning`` names the value when the program runs (``jax.debug.callback``,
    once per model under ``vmap``). Concrete values were checked on the host already (errors):
    without a traced value ``values`` is returned as it is."""
    params = {} if loss is None else dict(loss.params)
    if not any(is_traced(leaf) for leaf in jax.tree_util.tree_leaves((params, hyper))):
        return values
    ok = in_domains(loss, hyper)
    if warn:
        hyper_dict = None if hyper is None else {name: getattr(hyper, name) for name in BOUNDS
                                                 if getattr(hyper, name, None) is not None}
        jax.debug.callback(functools.partial(
            _report_outside, loss_name=None if loss is None else loss.name,
            domains=losses_lib.Domains() if loss is None else loss.domains), ok, params, hyper_dict)

    def mask(a):
        if isinstance(a, jax.Array) or isinstance(a, np.ndarray):
            if jnp.issubdtype(a.dtype, jnp.floating):
                return jnp.where(ok, a, jnp.nan).astype(a.dtype)
        return a

    return jax.tree_util.tree_map(mask, values)


# --------------------------------------------------------------------------------------------
# After a concrete fit: no silent NaN model, no silent all-zero model.
# --------------------------------------------------------------------------------------------


@_compile.jit
def _at_baseline(loss, y, w, init_raw, margin=None):
    """At the baseline: whether any weighted row has a non-zero gradient, and the number of rows
    whose loss or gradient is not finite (one grad_hess, no tree)."""
    raw = jnp.broadcast_to(init_raw, (y.shape[0], init_raw.shape[-1]))
    if margin is not None:
        raw = margin + raw
    used = w > 0
    if loss.batch:  # one value of the whole batch: 1 if it is not finite
        value, g = jax.value_and_grad(lambda r: losses_lib.total_loss(loss, y, r, w))(raw)
        bad_grad = jnp.sum(~jnp.all(jnp.isfinite(g), axis=-1) & used)
        return jnp.any((g != 0) & used[:, None]), jnp.sum(~jnp.isfinite(value)), bad_grad
    g, _ = derivatives.grad_hess(loss, y, raw)
    values = losses_lib.per_sample_losses(loss, y, raw)
    moves = jnp.any((g != 0) & used[:, None])
    bad_loss = jnp.sum(~jnp.isfinite(values) & used)
    bad_grad = jnp.sum(~jnp.all(jnp.isfinite(g), axis=-1) & used)
    return moves, bad_loss, bad_grad


def _warn_no_gradient(loss, data, init_raw) -> None:
    moves, _, _ = _at_baseline(loss, data.y, data.w, init_raw, data.margin)
    if not bool(moves):
        warnings.warn(f"the gradient of loss {loss.name!r} is zero at every row at the baseline "
                      f"{np.asarray(init_raw).tolist()}: nothing will be learned (is the loss "
                      "piecewise constant, e.g. jnp.round, or does it stop gradients?).",
                      UserWarning, stacklevel=3)


def check_finite_fit(train_loss, loss, data, init_raw) -> None:
    """Raise ``FloatingPointError`` when a concrete fit's training loss (``(n_rounds,)``, or a
    batch of such curves) is NaN or infinite: the first such round and the likely causes (the
    loss's value and gradient at the labels and the baseline, the learning rate)."""
    curve = np.asarray(train_loss)
    finite = np.isfinite(curve)
    if finite.all():
        return
    first = int(np.argmax(~finite.reshape(-1, curve.shape[-1]).all(axis=0)))
    base = np.asarray(init_raw)
    _, bad_loss, bad_grad = (np.asarray(v) for v in _at_baseline(loss, data.y, data.w, init_raw, data.margin))
    n = int(np.sum(np.asarray(data.w) > 0))
    if not np.all(np.isfinite(base)):
        cause = (f"the baseline (optimal constant raw score) of loss {loss.name!r} is "
                 f"{base.tolist()}: check the labels and the loss's baseline")
    elif bad_loss.max() > 0 or bad_grad.max() > 0:
        cause = (f"loss {loss.name!r} at the labels and the baseline is not finite for "
                 f"{int(bad_loss.max())} of {n} rows (its gradient for {int(bad_grad.max())}): "
                 "check the loss function for these labels (a too large learning_rate is the "
                 "other possible cause)")
    else:
        cause = (f"loss {loss.name!r} is finite at the baseline, so the rounds diverged: "
                 "learning_rate too large, or the loss overflows at large raw scores")
        y = np.asarray(data.y, np.float64)
        scale = float(np.max(np.abs(y - np.median(y)))) if y.size else 0.0
        if loss.task == "regression" and scale > 1e15:
            cause += (f"; here the labels spread {scale:.3g} from their median, and float32 "
                      f"(max {float(np.finfo(np.float32).max):.3g}) overflows on their squares: "
                      "divide y by a scale (e.g. its standard deviation) and multiply the "
                      "predictions back")
    raise FloatingPointError(f"the training loss is not finite from round {first} on "
                             f"(Booster.train_loss[{first}] = {curve.reshape(-1, curve.shape[-1])[:, first].tolist()[:3]}); "
                             f"likely cause: {cause}.")



def warn_if_no_gradient(loss: losses_lib.Loss, data, init_raw) -> None:
    """Warn (``jboost.fit``'s ``UserWarning``) when a custom loss's gradient is zero at every row
    at the baseline ``init_raw``: nothing would be learned (``jnp.round``, a stopped gradient).
    ``data``: a :class:`jboost.boosting.Data` (or anything with ``y``, ``w``, ``margin``). Skipped
    for the built-in losses and for traced values (one check for every boosting entry point:
    fit, the gradient algorithms, bagged boosters, sweeps)."""
    if losses_lib.is_built_in(loss) or any(is_traced(v) for v in jax.tree_util.tree_leaves(
            (init_raw, loss.params))):
        return
    _warn_no_gradient(loss, data, init_raw)


def check_finite_fits(train_loss, loss: losses_lib.Loss, data, baselines, *, n_fitted=None,
                      names=None, what: str = "models") -> None:
    """``jboost.fit``'s ``FloatingPointError`` (:func:`check_finite_fit`: the first
    non-finite round and its likely cause: a NaN loss, a too large ``learning_rate``, labels whose
    squares overflow float32, "divide y by a scale") for a batch of concrete fits: ``train_loss``
    ``(..., n_rounds)`` curves with ``baselines`` ``(..., K)`` of the same leading axes (bagged
    boosters' bags, stacking's (fold, learner) fits). ``n_fitted`` (optional, the leading axes):
    the rounds each model fitted before it stopped early (the later rounds' NaN are not checked).
    ``names(index)`` names the first bad model in the message (e.g. ``"bag 1"``), ``what`` the
    batch's models (``"bags"``). Traced values
    (the caller's ``jax.vmap``) are skipped: :func:`nan_outside_domains` serves them."""
    if any(is_traced(v) for v in jax.tree_util.tree_leaves((train_loss, baselines, n_fitted,
                                                             loss.params))):
        return
    curve = np.asarray(train_loss)
    lead = curve.shape[:-1]
    curves = curve.reshape(-1, curve.shape[-1])
    finite = np.isfinite(curves)
    if n_fitted is not None:
        finite |= np.arange(curves.shape[-1])[None, :] >= np.asarray(n_fitted).reshape(-1, 1)
    bad = np.flatnonzero(~finite.all(axis=1))
    if not bad.size:
        return
    i = int(bad[0])
    base = np.asarray(baselines).reshape(curves.shape[0], -1)[i]
    try:
        fitted = curves[i] if n_fitted is None else curves[i][:int(np.asarray(n_fitted).reshape(-1)[i])]
        check_finite_fit(fitted, loss, data, jnp.asarray(base, jnp.float32))
    except FloatingPointError as e:
        where = names(np.unravel_index(i, lead)) if names is not None else f"model {i}"
        raise FloatingPointError(f"{where} ({bad.size} of {curves.shape[0]} {what} not finite): "
                                 f"{e}") from None


def check_loss_output(loss: losses_lib.Loss) -> None:
    """``loss(y, raw)`` must return one scalar per sample (checked abstractly, no computation)."""
    k = loss.n_outputs
    if k is None or any(is_traced(v) for v in jax.tree_util.tree_leaves(loss.params)):
        return
    c = loss.label_columns
    if loss.batch:
        n0 = 4
        raw_shape = (n0,) if k == 1 else (n0, k)
        out = jax.eval_shape(lambda y, raw, w: losses_lib.batch_value(loss, y, raw, w),
                             jax.ShapeDtypeStruct((n0, c or 2), jnp.float32),
                             jax.ShapeDtypeStruct((n0, k), jnp.float32),
                             jax.ShapeDtypeStruct((n0,), jnp.float32))
        if getattr(out, "shape", None) != ():
            raise ValueError(f"a batch objective must return one scalar (the weighted sum over the "
                             f"rows); loss {loss.name!r} called with y ({n0}, {c}), raw {raw_shape} "
                             f"and w ({n0},) returned shape {getattr(out, 'shape', None)}.")
        return
    f = losses_lib.vector_fn(loss)
    out = jax.eval_shape(f, jax.ShapeDtypeStruct(() if c is None else (c,), jnp.float32),
                         jax.ShapeDtypeStruct((k,), jnp.float32), loss.params)
    shape = getattr(out, "shape", None)
    if shape != ():
        raw = "a scalar raw score" if k == 1 else f"raw scores of shape ({k},)"
        label = "one label" if c is None else f"a label vector of shape ({c},) (y has {c} columns)"
        hint = ("" if c is None else ": sum over the columns (jnp.sum), or apply a loss of a "
                f"scalar label to each column, jboost.losses.columnwise(jboost.Loss(fn), {c})")
        raise ValueError(f"the loss must return a scalar per sample; loss {loss.name!r} called "
                         f"with {label} and {raw} returned shape {shape}{hint}.")


def check_link(loss: losses_lib.Loss) -> None:
    """A classification loss's ``link`` must give what ``predict_proba`` returns: ``(n,
    n_classes)`` class probabilities (each in [0, 1], each row summing to 1) from ``(n,)`` raw
    scores (one output: ``n_classes = 2``, as :func:`jboost.losses.sigmoid_link` gives
    ``[1 - p, p]``) or ``(n, K)`` (``n_classes = K``). Checked on a few raw scores in
    [-2, 2], for a loss of one label per row with concrete parameters; else a ``ValueError``
    naming ``link=`` (e.g. ``identity_link`` on a binary loss: ``(n,)`` "probabilities" whose
    argmax runs over the rows)."""
    k = loss.n_outputs
    if (loss.task not in CLASSIFICATION or k is None or loss.batch or loss.label_columns is not None
            or any(is_traced(v) for v in jax.tree_util.tree_leaves(loss.params))):
        return
    n0 = 3
    raw = jnp.linspace(-2.0, 2.0, n0 * k, dtype=jnp.float32).reshape(n0, k)
    raw = raw[:, 0] if k == 1 else raw
    n_classes = 2 if k == 1 else k
    name = getattr(loss.link, "__name__", repr(loss.link))
    fix = ("a link returning (n, n_classes) probabilities, e.g. jboost.losses.sigmoid_link for one "
           "raw score per row, softmax_link for K; or leave link= out (the task's link)")
    try:
        out = np.asarray(loss.link(raw, **loss.params), np.float64)
    except Exception as e:  # noqa: BLE001 - any failure of the user's link on valid raw scores
        raise ValueError(f"link={name} of loss {loss.name!r} (task {loss.task!r}) failed on raw "
                         f"scores of shape {raw.shape}: {type(e).__name__}: {e}. Pass {fix}.") from e
    if out.shape != (n0, n_classes):
        raise ValueError(f"link={name} of loss {loss.name!r} (task {loss.task!r}, {k} raw score(s) "
                         f"per row) returned shape {out.shape} for raw scores of shape {raw.shape}; "
                         f"predict_proba needs (n, {n_classes}) class probabilities. Pass {fix}.")
    if not (np.all(np.isfinite(out)) and np.all(out >= 0) and np.all(out <= 1)
            and np.allclose(out.sum(axis=-1), 1.0, atol=1e-4)):
        raise ValueError(f"link={name} of loss {loss.name!r} (task {loss.task!r}) must return class "
                         f"probabilities (in [0, 1], each row summing to 1); for raw scores in "
                         f"[-2, 2] it returned values in [{out.min():.3g}, {out.max():.3g}] with row "
                         f"sums in [{out.sum(-1).min():.3g}, {out.sum(-1).max():.3g}]. Pass {fix}.")


def check_folds(folds, n: int, name: str = "folds") -> Optional[np.ndarray]:
    """``folds`` is an int K in ``[2, n]`` (returns ``None``) or ``(n,)`` fold ids 0..K-1, every id
    used (returns them as int32)."""
    if isinstance(folds, (numbers.Integral, np.integer)) and not isinstance(folds, bool):
        check_int(folds, name, 2, max(n, 2))
        if int(folds) > n:
            raise ValueError(f"{name}={folds} must not exceed the number of samples, {n}.")
        return None
    explicit = np.asarray(folds)
    if explicit.shape != (n,) or not np.issubdtype(explicit.dtype, np.integer):
        raise ValueError(f"{name} must be an int or an (n,) = ({n},) int array of fold ids; got "
                         f"{explicit.dtype} array of shape {explicit.shape}.")
    k = int(explicit.max()) + 1
    if explicit.min() < 0 or k < 2 or len(np.unique(explicit)) != k:
        raise ValueError(f"{name} ids must be 0..K-1 with every id used and K >= 2; got ids "
                         f"{np.unique(explicit)[:10].tolist()}.")
    return explicit.astype(np.int32)


def devices_of(devices) -> tuple:
    """The devices named by ``devices``: ``None`` -> the default device; ``"all"``; a list; a Mesh."""
    if devices is None:
        return (jax.devices()[0],)
    if isinstance(devices, jax.sharding.Mesh):
        return tuple(devices.devices.flat)
    if isinstance(devices, str):
        if devices != "all":
            raise ValueError(f"devices={devices!r} must be None, 'all', a list of devices or a Mesh.")
        return tuple(jax.devices())
    out = tuple(devices)
    if not out:
        raise ValueError("devices is empty.")
    return out


def mesh_of(devices) -> Optional[jax.sharding.Mesh]:
    """A one-axis ``("rows",)`` mesh for data-parallel training, or ``None`` for one device."""
    if devices is None:
        return None
    if isinstance(devices, jax.sharding.Mesh):
        return devices
    return jax.sharding.Mesh(np.array(devices_of(devices)), ("rows",))


def check_memory_budget(memory_budget) -> Optional[int]:
    if memory_budget is None:
        return None
    return check_int(memory_budget, "memory_budget", 1, 1 << 62)


# --------------------------------------------------------------------------------------------
# Memory: refuse what cannot fit before compiling.
# --------------------------------------------------------------------------------------------


def memory_limit(devices=None) -> int:
    """Bytes of memory of the first device used: the accelerator's limit, or for a CPU device (or
    a backend that does not report it) the host's memory available now (Linux ``MemAvailable``,
    at most the physical memory)."""
    device = devices_of(devices)[0]
    if device.platform != "cpu":
        try:
            return int(device.memory_stats()["bytes_limit"])
        except Exception:  # noqa: BLE001 - a backend without memory_stats
            pass
    try:
        total = int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):
        total = 1 << 62
    try:  # Linux: what can be had now without swapping (other processes hold the rest)
        with open("/proc/meminfo") as f:
            available = next(int(line.split()[1]) * 1024 for line in f if line.startswith("MemAvailable:"))
        return min(total, available)
    except (OSError, StopIteration, ValueError, IndexError):
        return total


def fit_bytes(n_rows: int, n_features: int, depth: int, n_bins: int, n_outputs: int,
              dense_hessian: bool = False) -> int:
    """A lower bound of the memory one boosted model needs while it is fitted (bytes), for when
    only the labels are known (:func:`resolve_loss`, :func:`n_classes_of`): one level's
    histograms ``F x 2^(depth-1) x n_bins x 2K`` float32, the per-row raw scores, gradients and
    hessians ``3 x n x K`` float32, and ``n x K x K`` float32 when ``dense_hessian`` (the
    autodiff diagonal hessian of a K-output loss, :func:`jboost.derivatives.grad_hess`, takes the
    diagonal of a per-row ``K x K`` Jacobian)."""
    n, k = int(n_rows), int(n_outputs)
    dense = n * k * k if dense_hessian and k > 1 else 0
    return 4 * (n_features * (1 << (depth - 1)) * n_bins * 2 * k + 3 * n * k + dense)


def boosting_bytes(n_rows: int, n_features: int, depth: int, n_bins: int, n_outputs: int,
                   n_rounds: int, trees_per_round: int = 1, dense_hessian: bool = False,
                   devices=None) -> int:
    """Estimated peak memory of one :func:`jboost.fit` (bytes) on the memory of the first device
    used: the sweep's estimate :func:`jboost._batching.model_bytes` (fused levels when the CPU
    kernel serves every level of one device, else the materialised pure-JAX histograms
    ``3 x F x 2^(depth-1) x n_bins x 2K`` float32), plus the per-row ``K x K`` autodiff hessians
    when ``dense_hessian``. Sharded over ``devices``, every device materialises each level's
    full histograms (their ``psum`` needs them dense) for its share of the rows, and the CPU
    devices of one host share its memory: their estimates add up."""
    devs = devices_of(devices)
    device = devs[0]
    k = int(n_outputs)
    fused = (devices is None and _batching.kernel_fits(device)
             and _native.indexable(n_rows, 1 << (depth - 1), n_bins, 2 * k))
    rows = -(-int(n_rows) // len(devs))
    need = _batching.model_bytes(rows, n_features, depth, n_bins, k, n_rounds=n_rounds,
                                 trees_per_round=trees_per_round, keep_trees=True, fused=fused)
    need += 4 * rows * k * k if dense_hessian and k > 1 else 0
    sharing = sum(1 for d in devs if d.platform == device.platform == "cpu"
                  and d.process_index == device.process_index) if devices is not None else 1
    return int(need * max(1, sharing))


def memory_depth(config: boosting.BoostConfig) -> int:
    """The depth the memory estimates (:func:`boosting_bytes`) take for ``config``'s trees: its
    ``depth``; for loss-guided trees (``max_leaves``: three histogram slots per split, tables of
    ``max_leaves`` leaf slots) the depth of as many leaves, at least 3."""
    if config.max_leaves is None:
        return config.depth
    return max(3, (int(config.max_leaves) - 1).bit_length())


def family_bytes(config: boosting.BoostConfig, n_rows: int, n_features: int,
                 n_outputs: int) -> int:
    """Memory a tree family holds beside :func:`boosting_bytes`' levels: for loss-guided trees
    the open leaves' histograms (``max_leaves x F x n_bins x 2K`` float32, twice: the loop's
    state and its update) and the rows grouped by leaf (three ``(n,)`` int32); else 0."""
    if config.max_leaves is None:
        return 0
    cells = int(config.max_leaves) * int(n_features) * int(config.n_bins) * 2 * int(n_outputs)
    return 2 * 4 * cells + 3 * 4 * int(n_rows)


def histogram_note(config: boosting.BoostConfig) -> str:
    """The settings that shape the largest histograms, for memory messages."""
    if config.max_leaves is None:
        return f"depth={config.depth}, n_bins={config.n_bins}"
    return f"max_leaves={config.max_leaves} (depth bound {config.depth}), n_bins={config.n_bins}"


def histogram_shape(config: boosting.BoostConfig) -> str:
    """The largest histograms' shape in words, for memory messages."""
    return ("F x 2^(depth-1) x n_bins x 2K float32" if config.max_leaves is None
            else "of the open leaves, max_leaves x F x n_bins x 2K float32")


def sharded_memory_hint(devices) -> str:
    """What to do when a sharded fit's level histograms do not fit (for :func:`check_memory`)."""
    if devices is None:
        return ""
    return ("; sharded over devices, every device builds each level's full F x 2^d x n_bins x 2K "
            "histograms (dense, for their psum): fit on one device (devices=None: on CPU the "
            "kernel builds deep levels from the rows they hold, and uses every core) or lower depth")


def check_metric(metric, loss: losses_lib.Loss, greater_is_better: bool = False,
                 name: str = "metric") -> bool:
    """Check ``metric`` (``None``: the loss; a name of :data:`jboost.metrics.METRICS`; a function
    ``metric(y, raw, w)``) against ``loss``; returns whether greater is better (only a custom
    metric may say so: the loss and the named metrics are minimised). ``name``: the argument's
    name in messages (``metric`` of sweeps, ``eval_metric`` of fit)."""
    if metric is not None and not callable(metric):
        if metric not in metrics_lib.METRICS:
            raise ValueError(f"{name}={metric!r} must be None, one of {sorted(metrics_lib.METRICS)} or a function "
                             "metric(y, raw, w).")
        if metric == "error_rate" and loss.task not in CLASSIFICATION:
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


def check_memory(need: int, *, devices=None, cause: Optional[str] = None,
                 detail: str = "", what: str = "this fit") -> None:
    """Raise ``MemoryError`` before compiling when ``need`` bytes (:func:`boosting_bytes`,
    :func:`fit_bytes`) exceed the memory of the device (:func:`memory_limit`); the message names
    ``cause`` (e.g. the number of classes taken from the labels) and the settings (``detail``)."""
    have = memory_limit(devices)
    if need > have:
        why = f" {cause};" if cause else ""
        raise MemoryError(f"{what} needs about {need / 2**30:.3g} GiB but the device has "
                          f"{have / 2**30:.3g} GiB:{why} {detail}.")


def check_boosting_memory(n_rows: int, n_features: int, config: boosting.BoostConfig,
                          loss: losses_lib.Loss, *, k_from_labels: bool = False, n_models: int = 1,
                          n_together: int = 1, devices=None, what: str = "models",
                          fix: str = "use a smaller depth, n_bins or n_outputs") -> None:
    """:func:`check_memory` of ``n_models`` boosted models of ``loss`` (static settings
    ``config``), ``n_together`` of them fitted at once (one ``vmap``, each
    :func:`boosting_bytes`) and the others' trees kept (:func:`jboost._batching.trees_bytes`):
    bagged boosters, stacking, ECOC. ``k_from_labels``: the message names K = max(y) + 1 as the
    cause (a K-class loss took its K from the labels); ``fix`` ends the message."""
    k = int(loss.n_outputs)
    dense = loss.hessian != "unit"  # every non-unit hessian takes a per-row K x K Jacobian
    per_round = k if config.per_output_trees else 1
    one = boosting_bytes(n_rows, n_features, memory_depth(config), config.n_bins, k, config.n_rounds,
                         per_round, dense, devices) + family_bytes(config, n_rows, n_features, k)
    kept = _batching.trees_bytes(memory_depth(config), k, config.n_rounds, per_round)
    need = n_together * one + (n_models - n_together) * kept
    cause = (f"K = max(y) + 1 = {k} classes, from the labels' maximum (the n_outputs of a K-class "
             "loss)" if k_from_labels else None)
    check_memory(need, devices=devices, cause=cause,
                 detail=f"estimated for {n_models} {what}, {n_together} fitted together, each on "
                 f"{n_rows} rows, {n_features} features, {histogram_note(config)}, "
                 f"n_outputs={k}, n_rounds={config.n_rounds} (histograms "
                 f"{histogram_shape(config)}"
                 f"{', per-row K x K autodiff hessians' if dense and k > 1 else ''}); {fix}")


# --------------------------------------------------------------------------------------------
# Data: checked, binned.
# --------------------------------------------------------------------------------------------


class Data(NamedTuple):
    """Training and validation arrays after the host-side checks and binning.

    ``X_binned`` and ``X_valid`` are feature-major ``uint8`` bins; without an eval set the
    validation arrays have 0 rows. ``borders`` are the ``(F, n_bins - 1)`` float32 bin borders.
    """

    X_binned: jax.Array  # (F, n) uint8
    y: jax.Array         # (n,) float32
    w: jax.Array         # (n,) float32
    X_valid: jax.Array   # (F, m) uint8
    y_valid: jax.Array   # (m,)
    w_valid: jax.Array   # (m,)
    borders: jax.Array   # (F, n_bins - 1)

    @property
    def missing(self) -> bool:
        """Whether any training row has a missing value (static: halves the split search when not)."""
        return binning.has_missing(self.X_binned, self.borders.shape[1] + 1)


def check_borders(borders, n_features: int, n_bins: int) -> np.ndarray:
    """User-supplied ``(n_features, n_bins - 1)`` bin borders: no NaN, non-decreasing along each
    feature (as :func:`jboost.binning.compute_borders` makes them; +-inf allowed), else training
    bins and prediction thresholds would disagree."""
    if np.iscomplexobj(borders):
        raise TypeError("borders must be real; got a complex array.")
    borders = np.asarray(borders, np.float32)
    if borders.shape != (n_features, n_bins - 1):
        raise ValueError(f"borders has shape {borders.shape}; expected {(n_features, n_bins - 1)} "
                         f"for {n_features} features and n_bins={n_bins}.")
    nan = np.isnan(borders)
    if nan.any():
        raise ValueError(f"borders must not contain NaN; found NaN for feature "
                         f"{int(np.argmax(nan.any(axis=1)))}.")
    unsorted = ~(borders[:, 1:] >= borders[:, :-1]).all(axis=1)
    if unsorted.any():
        raise ValueError(f"borders must be non-decreasing along each feature (row); feature "
                         f"{int(np.argmax(unsorted))} is not sorted.")
    return borders


def prepare(X, y, *, sample_weight=None, eval_set=None, n_bins: int = 256, borders=None,
            label_check: Optional[Callable[[np.ndarray, str], Any]] = None,
            weighted_borders: bool = True, label_columns: bool = False) -> Data:
    """Check ``X``, ``y``, ``sample_weight`` and ``eval_set`` (errors name the argument), compute
    the bin borders (or check the given ones) and bin everything.

    Args:
      label_check: ``label_check(labels, name)`` validates the labels of ``y`` (``name="y"``) and
        of the eval set (``name="eval_set y"``), e.g. against the loss.
      weighted_borders: compute the borders from the sample-weighted quantiles (as ``fit``);
        ``False``: unweighted (forests, whose weights are bootstrap counts).
      label_columns: whether ``y`` may be ``(n, C)`` vector labels (``jboost.fit``); the
        ``eval_set``'s labels must then have the same ``C`` columns. Otherwise 2-D labels are
        refused (:func:`as_labels`).
    """
    X = as_matrix(X, "X")
    n, n_features = X.shape
    y = as_labels(y, n, columns=None if label_columns else 0)
    if label_check is not None:
        label_check(y, "y")
    w = as_weights(sample_weight, n)
    n_bins = check_int(n_bins, "n_bins", 3, binning.MAX_BINS)
    if borders is None:
        borders = binning.compute_borders(X, n_bins, sample_weight=w if weighted_borders else None)
    else:
        borders = check_borders(borders, n_features, n_bins)
    X_binned = binning.bin_features(X, borders)
    if eval_set is None:
        Xv = jnp.zeros((n_features, 0), binning.X_BINNED_DTYPE)
        yv = np.zeros((0,) + y.shape[1:], np.float32)
        wv = np.zeros((0,), np.float32)
    else:
        if not isinstance(eval_set, (tuple, list)) or len(eval_set) not in (2, 3):
            raise TypeError("eval_set must be a tuple (X_valid, y_valid) or (X_valid, y_valid, w_valid).")
        Xv_host = as_matrix(eval_set[0], "eval_set X")
        if Xv_host.shape[1] != n_features:
            raise ValueError(f"eval_set X has {Xv_host.shape[1]} features but X has {n_features}.")
        m = Xv_host.shape[0]
        if y.ndim == 1 and np.ndim(eval_set[1]) == 2:
            raise ValueError(f"eval_set y has shape {np.shape(eval_set[1])} but y is 1-D: give the "
                             "validation labels the shape of the training labels.")
        yv = as_labels(eval_set[1], m, "eval_set y", "eval_set X",
                       columns=y.shape[1] if y.ndim == 2 else 0)
        if label_check is not None:
            label_check(yv, "eval_set y")
        wv = (np.ones((m,), np.float32) if len(eval_set) == 2
              else as_weights(eval_set[2], m, "eval_set weights", "eval_set X"))
        Xv = binning.bin_features(Xv_host, borders)
    return Data(X_binned, jnp.asarray(y), jnp.asarray(w), Xv, jnp.asarray(yv), jnp.asarray(wv),
                jnp.asarray(borders))


def prepare_boosting(X, y, **kwargs):
    """:func:`prepare` as ``(jboost.boosting.Data, borders)``: the arrays boosting runs on and the
    bin borders the model keeps (the entry points that boost: ``fit``, the algorithms)."""
    data = prepare(X, y, **kwargs)
    return boosting.Data(*data[:6]), data.borders


def host_rounds_possible() -> bool:
    """Whether the caller runs outside every JAX transformation (``jit``, ``vmap``, ``grad``):
    a fit's rounds can then run as host-side calls of one compiled program
    (:func:`jboost.api.run_rounds`: ``Ctrl-C``, progress, checkpoints); inside one they are one
    traced program."""
    try:
        from jax._src import core as _core
        return bool(_core.trace_state_clean())
    except (ImportError, AttributeError):  # a JAX without it: a traced value tells
        return not isinstance(jax.device_put(np.int32(0)), jax.core.Tracer)


def check_eval_metric(metric, loss: losses_lib.Loss, *, has_validation: bool,
                      needs: str = "eval_set=(X_valid, y_valid)"):
    """``eval_metric`` given without ``early_stopping_rounds``: a validation metric computed
    after every round for the progress lines, the callbacks and the model's settings only
    (``None`` stays ``None``). It needs the validation rows (``needs``) and is checked as an
    early-stopping metric is (:func:`check_metric`)."""
    if metric is None:
        return None
    if not has_validation:
        raise ValueError(f"eval_metric={getattr(metric, '__name__', metric)!r} is computed on the "
                         f"validation rows: pass {needs}.")
    check_metric(metric, loss, name="eval_metric")
    return metric


def check_concrete_rounds(rounds, who: str = "jboost.fit") -> None:
    """``verbose=``, ``callbacks=`` and ``checkpoint_dir=`` (``rounds``: a dict of them) need a
    fit that runs on the host: refused inside ``jax.vmap`` / ``jax.jit`` (traced settings)."""
    given = [k for k in ("verbose", "callbacks", "checkpoint_dir") if rounds.get(k)]
    if given:
        raise ValueError(f"{who}: {', '.join(k + '=' for k in given)} need a concrete fit (not "
                         "under jax.vmap or jax.jit, where the rounds are one traced program); "
                         "drop them there.")


def check_base_margin_supported(who: str, base_margin, eval_base_margin, offsets: bool) -> None:
    """Refuse ``base_margin`` / ``eval_base_margin`` for an algorithm whose rounds cannot start
    from per-row offsets of the raw scores (``offsets`` false: the AdaBoost family reweights
    rows from their labels and weak learners' votes, not from raw scores)."""
    if offsets:
        return
    given = [k for k, v in (("base_margin", base_margin), ("eval_base_margin", eval_base_margin))
             if v is not None]
    if given:
        raise ValueError(f"{given[0]} is not supported by jboost.algorithms.{who}: its rounds "
                         "reweight the rows from the weak learners' votes, which an offset of the "
                         "raw scores would not enter. Use jboost.fit, gradient_boost, "
                         "forward_stagewise or logitboost for per-row offsets.")


# --------------------------------------------------------------------------------------------
# Class labels as users have them (issue 17): mapped to 0..K-1, the labels kept in the model.
# --------------------------------------------------------------------------------------------


def _is_class_index(arr: np.ndarray) -> bool:
    """Whether labels already are class indices: bools, or non-negative integers (of an integer
    or float dtype). Non-finite floats count as indices here (:func:`as_labels` refuses them)."""
    if arr.dtype.kind == "b":
        return True
    if arr.dtype.kind in "iu":
        return arr.size == 0 or int(arr.min()) >= 0
    if arr.dtype.kind == "f":
        finite = arr[np.isfinite(arr)]
        return bool(np.all(finite >= 0) and np.all(finite == np.round(finite)))
    return False


def class_labels(y, loss, n_outputs: Optional[int] = None, task: Optional[str] = None,
                 name: str = "y"):
    """``(labels, classes)``: class labels as users have them mapped to ``0..K-1`` for a
    classification loss, with the sorted distinct labels ``classes`` (``None`` when ``y`` is
    returned as it is).

    Non-negative integer (or integer-valued) labels and bools are class indices already
    (XGBoost's convention: ``0..K-1``; labels ``1..K`` keep their warning that class 0 is
    absent). Strings, objects, and numbers that are negative or fractional (``{-1, 1}``,
    ``{0.5, 2.5}``) are mapped in sorted order (``np.unique``); the model keeps ``classes`` and
    :func:`jboost.predict_class` returns them. Such labels with a regression loss: a
    ``TypeError`` for non-numbers (they cannot be regression targets), numbers pass as they are.
    """
    if is_traced(y) or isinstance(y, jax.Array):
        return y, None
    y = series_values(y)
    arr = np.asarray(y)
    if arr.dtype.kind == "O" and arr.ndim == 1 and arr.size and all(
            isinstance(v, str) for v in arr.tolist()):
        arr = arr.astype(str)
    if arr.ndim != 1 or arr.size == 0 or _is_class_index(arr):
        return y, None
    try:
        resolved_task = losses_lib.get(loss, n_outputs=n_outputs, task=task).task
    except Exception:  # noqa: BLE001 - resolve_loss gives the loss's own message next
        resolved_task = None
    numeric = arr.dtype.kind in "iuf"
    if resolved_task not in CLASSIFICATION:
        if numeric:
            return y, None
        examples = ", ".join(repr(v) for v in list(dict.fromkeys(arr.tolist()))[:3])
        raise TypeError(f"{name} holds non-numeric labels ({examples}, dtype {arr.dtype}): class "
                        "labels need a classification loss (loss='binomial_deviance' for 2 "
                        "classes, 'multinomial_deviance' for more), or convert them to numbers "
                        "for regression.")
    if arr.dtype.kind == "O":
        bad = [v for v in arr.tolist() if v is None or (isinstance(v, float) and not np.isfinite(v))]
        if bad:
            raise ValueError(f"{name} holds missing class labels ({bad[0]!r}): every row needs a "
                             "class; drop those rows or give them a class of their own.")
    try:
        classes, codes = np.unique(arr, return_inverse=True)
    except TypeError as e:
        raise TypeError(f"{name} holds class labels of mixed types that cannot be sorted "
                        f"({e}): make them one type (e.g. all strings).") from None
    if arr.dtype.kind == "f" and not np.all(np.isfinite(classes)):
        return y, None  # as_labels names the NaN / inf
    if resolved_task == "binary" and len(classes) > 2:
        raise ValueError(f"{name} holds {len(classes)} classes ({classes[:5].tolist()}...) but the "
                         "loss is binary: use loss='multinomial_deviance' for K classes.")
    return codes.reshape(-1).astype(np.float32), classes


def mapped_labels(y, eval_set, loss, n_outputs, task, init_model, n_rows: Optional[int] = None):
    """Class labels as users have them (strings, ``{-1, 1}``, ...) mapped to ``0..K-1`` for a
    classification loss (:func:`class_labels`), ``eval_set``'s labels with
    the same classes; a continued fit maps with ``init_model``'s classes. Returns
    ``(y, classes or None, eval_set)``. ``n_rows``: X's rows, which ``y`` must have (checked
    first, so that a short ``y`` is named as such, not by its labels)."""
    if n_rows is not None and not is_traced(y):
        check_length(y, n_rows)
    model_classes = getattr(init_model, "classes", None)
    if model_classes is not None:
        classes = model_classes.array
        y = class_codes(y, classes, "y")
    else:
        y, classes = class_labels(y, loss, n_outputs, task)
        if init_model is not None and classes is not None:  # else a silent relabelling
            raise ValueError(f"y holds class labels {classes[:5].tolist()} that are not class "
                             "indices 0..K-1, but init_model was fitted on class indices: continue "
                             "it with the labels it was fitted on.")
    if classes is not None and isinstance(eval_set, (tuple, list)) and len(eval_set) in (2, 3):
        eval_set = (eval_set[0], class_codes(eval_set[1], classes)) + tuple(eval_set[2:])
    return y, classes, eval_set


def class_codes(y, classes: np.ndarray, name: str = "eval_set y"):
    """Labels ``y`` (e.g. a validation set's) as indices into the training ``classes``
    (:func:`class_labels`); a label the training labels did not have is refused by name."""
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
