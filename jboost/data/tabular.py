"""Tabular input: DataFrames and arrays as checked float32 matrices, feature names and column
order, Series values, vectors, weights and per-row margins."""

from __future__ import annotations

import warnings
from typing import Optional, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from jboost import checks

# --------------------------------------------------------------------------------------------
# Arrays.
# --------------------------------------------------------------------------------------------


def check_numeric(arr: np.ndarray, name: str) -> None:
    """Refuse an array that is not numeric (float, int or bool).

    Args:
      arr: the array.
      name: its argument name in the message.

    Raises:
      TypeError: an object, string or other non-numeric dtype.
    """
    if arr.dtype == object or not (np.issubdtype(arr.dtype, np.number) or arr.dtype == bool):
        raise TypeError(f"{name} must be numeric (float, int or bool); got dtype {arr.dtype}.")


def _is_series(y) -> bool:
    return type(y).__module__.startswith("pandas") and hasattr(y, "dtype") and hasattr(y, "to_numpy") \
        and not hasattr(y, "columns")


def series_values(y):
    """A pandas Series' values as NumPy: numeric and nullable ones as float64 (``pd.NA`` -> NaN,
    refused later as a missing label), others (``category``, strings) as their objects. Anything
    else is returned as it is.

    Args:
      y: a pandas Series, or anything else.

    Returns:
      A NumPy array for a Series, else ``y``.
    """
    if not _is_series(y):
        return y
    if getattr(y.dtype, "kind", "O") in "biuf" and str(y.dtype) != "category":
        if y.dtype.kind == "b" and not getattr(y, "hasnans", False):
            return y.to_numpy(dtype=bool)
        return y.to_numpy(dtype=np.float64, na_value=np.nan)
    return y.to_numpy(dtype=object)


def feature_names_of(X) -> Optional[tuple]:
    """The column names of a pandas DataFrame as strings.

    Args:
      X: a DataFrame or an array.

    Returns:
      A tuple of strings, or ``None`` for arrays.

    Raises:
      ValueError: duplicate column names.
    """
    if not is_frame(X):
        return None
    names = tuple(str(c) for c in X.columns)
    if len(set(names)) != len(names):
        dup = [n for n in dict.fromkeys(names) if names.count(n) > 1]
        raise ValueError(f"X has duplicate column names {dup[:5]}: every feature needs its own name.")
    return names


def frame_in_order(X, names: Optional[Sequence[str]], name: str = "X"):
    """A DataFrame ``X``'s columns in the order of the model's feature ``names`` (matched by
    name: reordered columns work); a missing or unexpected column is refused by name. Arrays,
    and any ``X`` when the model has no names, are returned as they are (by position).

    Args:
      X: a DataFrame or an array.
      names: the model's feature names, or ``None``.
      name: the argument's name in messages.

    Returns:
      ``X`` with its columns in the order of ``names``.

    Raises:
      ValueError: a missing or unexpected column.
    """
    if names is None or not is_frame(X):
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
    prediction matches columns by name (never silently by position).

    Args:
      X: the training features (a DataFrame or an array).
      init_model: the model a fit continues, or ``None``.
      eval_set: ``None``, a ``(X, y[, w])`` tuple or a list of them.
      name: the argument's name in messages.

    Returns:
      ``(X, names, eval_set)``.

    Raises:
      ValueError: columns that do not match ``init_model``'s or each other's, or duplicate names.
    """
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
    bad = [f"{col!r} ({dtype})" for col, dtype in zip(X.columns, X.dtypes)
           if not numeric_dtype(dtype)]
    if bad:
        cats = [c for c, d in zip(X.columns, X.dtypes) if categorical_dtype(d)]
        hint = (f"jboost.fit, jboost.sweep.sweep and jboost.bagging.fit_bagged_boosters encode "
                f"categorical columns ({cats[:8]} here: one-hot or ordered target statistics, "
                "cat_features=); this entry point takes numeric columns only: fit with one of "
                "them, or encode them as numbers yourself (e.g. df[c].cat.codes "
                "with -1 replaced by NaN, or pandas.get_dummies), or drop them"
                if cats else "convert them to numbers or drop them")
        raise TypeError(f"{name} has non-numeric columns {', '.join(bad[:8])}"
                        f"{'...' if len(bad) > 8 else ''}: {hint}.")
    return X.to_numpy(dtype=np.float64, na_value=np.nan)


def as_matrix(X, name: str = "X", allow_empty: bool = False) -> np.ndarray:
    """``X`` as a float32 ``(n_samples, n_features)`` host array (NaN = missing); zero rows only
    when ``allow_empty`` (prediction). A pandas DataFrame's numeric, bool and nullable columns
    are taken (missing values become NaN; its names: :func:`feature_names_of`).

    Args:
      X: a DataFrame or an array-like.
      name: the argument's name in messages.
      allow_empty: whether zero rows are allowed.

    Returns:
      A float32 ``(n_samples, n_features)`` NumPy array.

    Raises:
      TypeError: complex, traced or non-numeric input (non-numeric DataFrame columns by name).
      ValueError: not 2-D, or empty.

    Warns:
      UserWarning: a 64-bit column loses precision in float32
        (:func:`warn_if_features_lose_precision`).
    """
    if is_frame(X):
        X = _frame_values(X, name)
    if np.iscomplexobj(X):
        raise TypeError(f"{name} must be real; got a complex array (its imaginary part would be lost).")
    if checks.is_traced(X):
        raise TypeError(f"{name} must be a concrete array (it is binned on the host); under "
                        "jax.vmap/jit close over the data instead of passing it as a traced argument.")
    arr = np.asarray(X)
    if arr.dtype.kind in "OUS":
        raise TypeError(f"{name} must be numeric (float, int or bool); got dtype {arr.dtype}. "
                        "Categorical columns: jboost.fit encodes them, named by cat_features= "
                        "(column indices of an array) or inferred from a DataFrame's category "
                        "and string columns.")
    check_numeric(arr, name)
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
    the column collapses to a few values and a few bins). Two passes over the data (min, max).

    Args:
      arr: the features as given (float64 or 64-bit integers are checked; others are not).
      name: the argument's name in the message.

    Warns:
      UserWarning: some column loses precision; the message names the first and the fix.
    """
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
    """Check that ``v`` has ``n`` rows, as ``X`` (checked first, before its values are read).

    Args:
      v: an array-like or a pandas Series.
      n: the number of rows of ``X``.
      name: ``v``'s argument name in the message.
      x_name: ``X``'s argument name in the message.

    Raises:
      ValueError: the lengths differ.
    """
    rows = np.shape(series_values(v))[:1]
    if rows and rows[0] != n:
        raise ValueError(f"{name} has {rows[0]} samples but {x_name} has {n}: lengths must match.")


def as_vector(v, n: int, name: str, x_name: str = "X") -> np.ndarray:
    """``v`` as a float32 ``(n,)`` host array (a pandas Series: :func:`series_values`).

    Args:
      v: an array-like or a pandas Series.
      n: the number of rows of ``X``.
      name: ``v``'s argument name in messages.
      x_name: ``X``'s argument name in messages.

    Returns:
      A float32 ``(n,)`` NumPy array.

    Raises:
      TypeError: traced or non-numeric values.
      ValueError: not 1-D, or not ``n`` rows.
    """
    if checks.is_traced(v):
        raise TypeError(f"{name} must be a concrete array, not a traced value.")
    arr = np.asarray(series_values(v))
    check_numeric(arr, name)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be 1-D; got shape {arr.shape}.")
    if arr.shape[0] != n:
        raise ValueError(f"{name} has {arr.shape[0]} samples but {x_name} has {n}: lengths must match.")
    return arr.astype(np.float32)


def as_margin(base_margin, n: int, k: int, name: str = "base_margin", x_name: str = "X"):
    """Checked per-row raw-score offsets as a float32 ``(n, K)`` host array, or ``None``:
    ``(n,)`` for one output, ``(n, K)`` for ``K`` outputs (the scale of :func:`jboost.predict`),
    finite.

    Args:
      base_margin: the offsets, or ``None``.
      n: the number of rows of ``X``.
      k: the number of outputs ``K``.
      name: the argument's name in messages.
      x_name: ``X``'s argument name in messages.

    Returns:
      A float32 ``(n, K)`` NumPy array, or ``None``.

    Raises:
      TypeError: traced or non-numeric offsets.
      ValueError: the wrong shape, or a NaN or inf.
    """
    if base_margin is None:
        return None
    if checks.is_traced(base_margin):
        raise TypeError(f"{name} must be a concrete array, not a traced value.")
    arr = np.asarray(base_margin)
    check_numeric(arr, name)
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
    """Checked sample weights.

    Args:
      sample_weight: ``(n,)`` weights, or ``None``.
      n: the number of rows of ``X``.
      name: the argument's name in messages.
      x_name: ``X``'s argument name in messages.

    Returns:
      A float32 ``(n,)`` NumPy array: ones when ``None``.

    Raises:
      TypeError: traced or non-numeric weights.
      ValueError: the wrong shape, a NaN or inf, a negative weight, or all weights zero.
    """
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


def predict_matrix(X, n_features: int, name: str = "X"):
    """Rows to predict: a device array is kept as it is (no round trip through the host, tracers
    allowed); anything else becomes a float32 host array. The feature count must match.

    Args:
      X: the rows (a ``jax.Array``, a DataFrame or an array-like).
      n_features: the model's number of features.
      name: the argument's name in messages.

    Returns:
      ``X`` as a ``jax.Array`` (kept) or a float32 NumPy array.

    Raises:
      TypeError: non-numeric (or, for host input, complex or traced) rows.
      ValueError: not 2-D, or a feature count other than ``n_features``.
    """
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
# Columns as users hold them: kinds, vocabularies and codes (host).
# --------------------------------------------------------------------------------------------


def is_frame(X) -> bool:
    """Whether ``X`` is a pandas DataFrame (without importing pandas).

    Args:
      X: anything.

    Returns:
      A bool.
    """
    return type(X).__module__.startswith("pandas") and hasattr(X, "columns") and hasattr(X, "dtypes")


def categorical_dtype(dtype) -> bool:
    """Whether a pandas or NumPy dtype's values are categories: category, object, strings.

    Args:
      dtype: a dtype.

    Returns:
      A bool.
    """
    s = str(dtype)
    return s == "category" or s == "str" or s.startswith("string") or getattr(dtype, "kind", "O") in "OUS"


def numeric_dtype(dtype) -> bool:
    """Whether a pandas or NumPy dtype is numeric (bool, int, unsigned, float; not category).

    Args:
      dtype: a dtype.

    Returns:
      A bool.
    """
    return str(dtype) != "category" and getattr(dtype, "kind", "O") in "biuf"
