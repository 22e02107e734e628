"""Tabular input: DataFrames and arrays as checked float32 matrices, feature names and column
order, Series values, vectors, weights and per-row margins. See ``docs/data.md``.
"""

from __future__ import annotations

import warnings
from typing import Optional, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from jboost import checks


def check_numeric(arr: np.ndarray, name: str) -> None:
    """Raise ``TypeError`` naming ``name`` for an array that is not numeric (float, int or bool)."""
    if arr.dtype == object or not (np.issubdtype(arr.dtype, np.number) or arr.dtype == bool):
        raise TypeError(f"{name} must be numeric (float, int or bool); got dtype {arr.dtype}.")


def _is_series(y) -> bool:
    return type(y).__module__.startswith("pandas") and hasattr(y, "dtype") and hasattr(y, "to_numpy") \
        and not hasattr(y, "columns")


def series_values(y):
    """A pandas Series' values as NumPy (numeric and nullable ones as float64, ``pd.NA`` -> NaN;
    others as objects); anything else as it is.
    """
    if not _is_series(y):
        return y
    if getattr(y.dtype, "kind", "O") in "biuf" and str(y.dtype) != "category":
        if y.dtype.kind == "b" and not getattr(y, "hasnans", False):
            return y.to_numpy(dtype=bool)
        return y.to_numpy(dtype=np.float64, na_value=np.nan)
    return y.to_numpy(dtype=object)


def feature_names_of(X) -> Optional[tuple]:
    """A DataFrame's column names as a tuple of strings (``None`` for arrays); ``ValueError`` on
    duplicate names.
    """
    if not is_frame(X):
        return None
    names = tuple(str(c) for c in X.columns)
    if len(set(names)) != len(names):
        dup = [n for n in dict.fromkeys(names) if names.count(n) > 1]
        raise ValueError(f"X has duplicate column names {dup[:5]}: every feature needs its own name.")
    return names


def frame_in_order(X, names: Optional[Sequence[str]], name: str = "X"):
    """A DataFrame ``X``'s columns in the order of the model's feature ``names`` (matched by name);
    arrays, and any ``X`` when ``names`` is ``None``, as they are.

    Raises:
      ValueError: a missing or unexpected column, named.
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
    """``(X, names, eval_set)``: the one place a fit reads a table's feature names
    (``docs/data.md``).

    A DataFrame's columns are put in ``init_model``'s order when the continued model has names;
    ``names`` are the fit's feature names (``None`` for arrays); the ``eval_set``'s X (a ``(X, y[,
    w])`` tuple or a list of them) is put in the same order.

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
    """A DataFrame's values as float64 ``(n, F)`` (nullable missing values -> NaN); non-numeric
    columns are refused by name, with the entry points that encode categorical columns.
    """
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
    """``X`` as a float32 ``(n_samples, n_features)`` host array (NaN = missing; a DataFrame's
    numeric, bool and nullable columns).

    Args:
      X: a DataFrame or an array-like.
      name: the argument's name in messages.
      allow_empty: whether zero rows are allowed (prediction).

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
    """Warn (``UserWarning``, naming the first column and the fix) when float64 or 64-bit integer
    features cannot be told apart in float32: a column whose float32 spacing at its largest
    magnitude exceeds :data:`FEATURE_PRECISION` of its range (``docs/data.md``).
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
    """Raise ``ValueError`` when ``v`` (an array-like or Series) does not have ``n`` rows, as ``X``;
    checked before its values are read.
    """
    rows = np.shape(series_values(v))[:1]
    if rows and rows[0] != n:
        raise ValueError(f"{name} has {rows[0]} samples but {x_name} has {n}: lengths must match.")


def as_vector(v, n: int, name: str, x_name: str = "X") -> np.ndarray:
    """``v`` (an array-like or a pandas Series) as a float32 ``(n,)`` host array.

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
    """Checked per-row raw-score offsets as a float32 ``(n, K)`` host array, or ``None``.

    ``base_margin``: ``None``, or finite offsets on the scale of :func:`jboost.predict`, ``(n,)``
    for one output (or ``(n, 1)``), ``(n, K)`` for ``K``.

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
    """Checked sample weights: float32 ``(n,)``, ones when ``sample_weight`` is ``None``.

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
    """Rows to predict with ``n_features`` features: a ``jax.Array`` is kept as it is (no host
    round trip, tracers allowed), anything else becomes a float32 host array (:func:`as_matrix`).

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


# Column kinds as users hold them (host).


def is_frame(X) -> bool:
    """Whether ``X`` is a pandas DataFrame (without importing pandas)."""
    return type(X).__module__.startswith("pandas") and hasattr(X, "columns") and hasattr(X, "dtypes")


def categorical_dtype(dtype) -> bool:
    """Whether a pandas or NumPy dtype's values are categories: category, object, strings."""
    s = str(dtype)
    return s == "category" or s == "str" or s.startswith("string") or getattr(dtype, "kind", "O") in "OUS"


def numeric_dtype(dtype) -> bool:
    """Whether a pandas or NumPy dtype is numeric (bool, int, unsigned, float; not category)."""
    return str(dtype) != "category" and getattr(dtype, "kind", "O") in "biuf"
