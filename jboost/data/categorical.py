"""Categorical columns: column kinds, vocabularies and encodings (one-hot splits, codes), and a
fit's encoding plan.

A column is one-hot (at most ``one_hot_max_size`` categories) or gets ordered target statistics
(:mod:`jboost.data.categorical_stats`), as in CatBoost (Prokhorenkova et al. 2018, NeurIPS,
Sections 3-4). See ``docs/categorical.md``."""

from __future__ import annotations

import numbers
from typing import NamedTuple, Optional, Sequence, Tuple

import jax
import jax.numpy as jnp
import numpy as np

from jboost import checks
from jboost.data import tabular


def categorical_plan(X, cat_features, one_hot_max_size, eval_set=None, n_stats: int = 1):
    """The one place a fit reads categorical columns: ``None`` when ``X`` has none, else a
    :class:`Plan` of the training rows and ``eval_set``'s (``n_stats``: K statistics per ctr
    column); errors name the argument (docs/categorical.md)."""
    size = check_settings(one_hot_max_size, None, None)
    if checks.is_traced(X):
        raise TypeError("X must be a concrete array (it is binned on the host); under "
                        "jax.vmap/jit close over the data instead of passing it as a traced argument.")
    if not has_categorical(X, cat_features):
        return None
    if not tabular.is_frame(X) and not isinstance(X, np.ndarray):
        X = np.asarray(X)
    names, mask = resolve_columns(X, cat_features)
    if not any(mask):
        return None
    if X.shape[0] == 0:
        raise ValueError(f"X is empty: shape {X.shape}; need at least one sample and one feature.")
    spec, X_enc = build_spec(X, mask, names, size, n_stats)
    X_valid = None
    if isinstance(eval_set, (tuple, list)) and len(eval_set) in (2, 3):
        X_valid = encode(spec, eval_set[0], "eval_set X")
    elif eval_set is not None and not isinstance(eval_set, (tuple, list)):
        raise TypeError("eval_set must be a tuple (X_valid, y_valid) or (X_valid, y_valid, w_valid).")
    return Plan(spec, X_enc, X_valid)


def categorical_plan_like(spec, X, eval_set=None):
    """The :class:`Plan` of a continued fit: ``X`` and the ``eval_set``'s rows encoded with the
    model's ``spec`` (an unseen category: the prior, as at prediction); raises as
    :func:`categorical_rows`."""
    X_valid = None
    if isinstance(eval_set, (tuple, list)) and len(eval_set) in (2, 3):
        X_valid = categorical_rows(spec, eval_set[0], "eval_set X")
    return Plan(spec, categorical_rows(spec, X, "X"), X_valid)


def categorical_rows(spec, X, name: str = "X") -> np.ndarray:
    """Rows to predict with a model fitted on categorical columns, as the encoded float32 matrix
    ``(n, spec.encoded_width)`` the model reads (:func:`encode`; unseen and missing categories are
    never an error)."""
    if checks.is_traced(X):
        raise TypeError(f"{name} of a model with categorical features must be concrete (its "
                        "categories are looked up on the host); predict outside jax.jit / jax.vmap.")
    if not tabular.is_frame(X) and not isinstance(X, np.ndarray):
        X = np.asarray(X)
    if len(getattr(X, "shape", ())) != 2:
        raise ValueError(f"{name} must be 2-D (n_samples, n_features); got shape {np.shape(X)}.")
    return encode(spec, X, name)


#: Default ``one_hot_max_size``: columns with at most this many categories (a missing value
#: counts as one) are one-hot encoded, the others get ordered target statistics
#: (``docs/categorical.md``).
ONE_HOT_MAX_SIZE = 16

#: How an input column enters the model (``CategoricalSpec.kinds``): as it is (numeric),
#: one-hot encoded, or as ordered target statistics (``"ctr"``).
KINDS = ("numeric", "one_hot", "ctr")
#: The name of the missing-value category of a column (in encoded feature names).
MISSING_NAME = "<missing>"


@jax.tree_util.register_pytree_node_class
class CategoricalSpec:
    """The static description of a model's input columns (a pytree node without leaves, so
    ``jax.vmap`` and ``jit`` pass it unchanged; JSON in model files).

    Attributes:
      names: the input columns' names (a DataFrame's), or ``None`` (arrays: by position).
      kinds: per input column, one of :data:`KINDS`.
      vocab: per input column, its categories (sorted training values; ``()`` for numeric).
      vocab_type: per input column, ``"str"``, ``"int"`` (integer codes) or ``""`` (numeric).
      missing: per input column, whether a missing value is a category (code ``len(vocab)``).
      n_stats: statistics per ``"ctr"`` column (K).
      one_hot_max_size: the setting the kinds were chosen with.
    """

    def __init__(self, names, kinds, vocab, vocab_type, missing, n_stats: int, one_hot_max_size: int):
        self.names = None if names is None else tuple(str(n) for n in names)
        self.kinds = tuple(kinds)
        self.vocab = tuple(tuple(v) for v in vocab)
        self.vocab_type = tuple(vocab_type)
        self.missing = tuple(bool(m) for m in missing)
        self.n_stats = int(n_stats)
        self.one_hot_max_size = int(one_hot_max_size)

    # pytree: all static
    def _key(self):
        return (self.names, self.kinds, self.vocab, self.vocab_type, self.missing, self.n_stats,
                self.one_hot_max_size)

    def tree_flatten(self):
        return (), self._key()

    @classmethod
    def tree_unflatten(cls, aux, children):
        return cls(*aux)

    def __eq__(self, other):
        return type(other) is type(self) and self._key() == other._key()

    def __hash__(self):
        return hash(self._key())

    def __repr__(self):
        cats = [f"{self.input_name(j)}:{k}({self.n_categories(j)})"
                for j, k in enumerate(self.kinds) if k != "numeric"]
        return f"CategoricalSpec(n_inputs={self.n_inputs}, categorical={cats})"

    # derived layout
    @property
    def n_inputs(self) -> int:
        """The number of input columns."""
        return len(self.kinds)

    def input_name(self, j: int) -> str:
        """The name of input column ``j`` (``x{j}`` for arrays)."""
        return self.names[j] if self.names is not None else f"x{j}"

    def n_categories(self, j: int) -> int:
        """Categories of input column ``j``, a missing value included when it is one."""
        return len(self.vocab[j]) + int(self.missing[j])

    @property
    def ctr_columns(self) -> Tuple[int, ...]:
        """The input columns encoded by ordered target statistics, in order."""
        return tuple(j for j, k in enumerate(self.kinds) if k == "ctr")

    @property
    def host_width(self) -> int:
        """Encoded features computed on the host: numeric columns and one-hot indicators."""
        return sum(1 if k == "numeric" else self.n_categories(j)
                   for j, k in enumerate(self.kinds) if k != "ctr")

    @property
    def encoded_width(self) -> int:
        """Columns of :func:`encode`'s matrix: the host features, then one code per ctr column."""
        return self.host_width + len(self.ctr_columns)

    @property
    def n_features(self) -> int:
        """Features the trees split on: host features, then ``n_stats`` per ctr column."""
        return self.host_width + self.n_stats * len(self.ctr_columns)

    @property
    def offsets(self) -> np.ndarray:
        """Row of each ctr column's first category in the statistics tables, ``(J,)``."""
        sizes = [self.n_categories(j) for j in self.ctr_columns]
        return np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int32) if sizes else \
            np.zeros((0,), np.int32)

    @property
    def n_table_rows(self) -> int:
        """The rows of the statistics tables: the categories of every ctr column."""
        return int(sum(self.n_categories(j) for j in self.ctr_columns))

    @property
    def sources(self) -> np.ndarray:
        """The input column of every encoded feature, ``(n_features,)`` int32."""
        out = []
        for j, k in enumerate(self.kinds):
            if k == "numeric":
                out.append(j)
            elif k == "one_hot":
                out += [j] * self.n_categories(j)
        for j in self.ctr_columns:
            out += [j] * self.n_stats
        return np.asarray(out, np.int32)

    def encoded_signs(self, signs: Optional[tuple]) -> Optional[tuple]:
        """Monotone signs of the input columns (:func:`jboost.trees.monotone.resolve`) as signs
        of the encoded features, ``None`` kept; a categorical column's must be 0 (its categories
        have no order): ``ValueError`` naming the column and the fix."""
        if signs is None:
            return None
        for j, sign in enumerate(signs):
            if sign != 0 and self.kinds[j] != "numeric":
                raise ValueError(f"monotone_constraints constrain {self.input_name(j)!r}, a "
                                 "categorical column: its categories have no order. Give it 0, or "
                                 "pass cat_features without it to treat its codes as numbers.")
        return tuple(int(signs[j]) for j in self.sources)

    def encoded_groups(self, groups: Optional[tuple]) -> Optional[tuple]:
        """Interaction groups of input columns (:func:`jboost.trees.interactions.resolve`) as
        groups of the encoded features, ``None`` kept: each group the features of its columns,
        and a group of its own for a column in no group that has several features (its one-hot
        indicators or statistics are one column, so a path may use several of them)."""
        if groups is None:
            return None
        sources = self.sources
        grouped = {j for group in groups for j in group}
        own = [(j,) for j in range(self.n_inputs)
               if j not in grouped and np.sum(sources == j) > 1]
        out = {tuple(int(f) for f in np.flatnonzero(np.isin(sources, group)))
               for group in tuple(groups) + tuple(own)}
        return tuple(sorted(out))

    def category_name(self, j: int, c: int) -> str:
        """The name of category ``c`` of input column ``j`` (:data:`MISSING_NAME` for missing)."""
        return MISSING_NAME if c == len(self.vocab[j]) else str(self.vocab[j][c])

    @property
    def encoded_names(self) -> Tuple[str, ...]:
        """Names of the encoded features: ``name``, ``name==category``, ``name:ctr`` (``name:ctr[k]``
        for statistic ``k`` of several)."""
        out = []
        for j, k in enumerate(self.kinds):
            if k == "numeric":
                out.append(self.input_name(j))
            elif k == "one_hot":
                out += [f"{self.input_name(j)}=={self.category_name(j, c)}"
                        for c in range(self.n_categories(j))]
        for j in self.ctr_columns:
            name = self.input_name(j)
            out += [f"{name}:ctr"] if self.n_stats == 1 else [f"{name}:ctr[{k}]" for k in range(self.n_stats)]
        return tuple(out)

    def to_json(self) -> dict:
        """The spec as a JSON-able dict (model files; :meth:`from_json` reads it back)."""
        return {"names": None if self.names is None else list(self.names), "kinds": list(self.kinds),
                "vocab": [list(v) for v in self.vocab], "vocab_type": list(self.vocab_type),
                "missing": list(self.missing), "n_stats": self.n_stats,
                "one_hot_max_size": self.one_hot_max_size}

    @classmethod
    def from_json(cls, d) -> "CategoricalSpec":
        """The spec of a model file's JSON (:meth:`to_json`); ``ValueError`` when malformed."""
        if not isinstance(d, dict):
            raise ValueError("not an object")
        kinds, vocab, vtype, missing = d.get("kinds"), d.get("vocab"), d.get("vocab_type"), d.get("missing")
        names = d.get("names")
        n = len(kinds) if isinstance(kinds, list) else -1
        ok = (n > 0 and all(k in KINDS for k in kinds) and isinstance(vocab, list) and len(vocab) == n
              and isinstance(vtype, list) and len(vtype) == n and isinstance(missing, list)
              and len(missing) == n and (names is None or (isinstance(names, list) and len(names) == n
                                                           and all(isinstance(s, str) for s in names)))
              and isinstance(d.get("n_stats"), int) and d["n_stats"] >= 1
              and isinstance(d.get("one_hot_max_size"), int))
        if ok:
            for k, v, t, m in zip(kinds, vocab, vtype, missing):
                want = {"str": str, "int": int}.get(t)
                if not isinstance(v, list) or not isinstance(m, bool) or (k == "numeric") != (t == "") \
                        or (k != "numeric" and (want is None or not all(
                            isinstance(x, want) and not isinstance(x, bool) for x in v))):
                    ok = False
                    break
        if not ok:
            raise ValueError("invalid categorical spec")
        return cls(names, kinds, vocab, vtype, missing, d["n_stats"], d["one_hot_max_size"])


def _missing_mask(values: np.ndarray) -> np.ndarray:
    if values.dtype.kind in "fc":
        return np.isnan(values)
    if values.dtype.kind in "biuUS":
        return np.zeros(values.shape, bool)
    try:
        import pandas as pd  # noqa: PLC0415 - optional
        return np.asarray(pd.isna(values), bool)
    except ImportError:
        return np.array([v is None or (isinstance(v, float) and v != v) for v in values], bool)


def _normalised(v) -> str:
    """A category value as the string it is compared as: integral numbers without ``.0``."""
    if isinstance(v, str):
        return v
    if isinstance(v, (bool, np.bool_)):
        return str(bool(v))
    if isinstance(v, numbers.Integral):
        return str(int(v))
    if isinstance(v, numbers.Real) and float(v).is_integer():
        return str(int(v))
    return str(v)


def _column(X, j: int):
    """Column ``j`` of a DataFrame (a Series) or of an array (a 1-D array)."""
    return X.iloc[:, j] if tabular.is_frame(X) else X[:, j]


def _raw_values(col) -> Tuple[np.ndarray, np.ndarray, str]:
    """``(values, missing, type)`` of one categorical column: ``type`` ``"int"`` for integer
    codes (values int64) or ``"str"`` (values a NumPy str array), ``missing`` a bool mask.
    Non-integer numbers raise ``_NonInteger``."""
    if hasattr(col, "cat"):  # pandas category: its categories, mapped through the codes
        cats = col.cat.categories
        codes = np.asarray(col.cat.codes.to_numpy(), np.int64)
        missing = codes < 0
        if tabular.numeric_dtype(cats.dtype) and cats.dtype.kind != "b":
            vals = np.asarray(cats.to_numpy(), np.float64)
            if np.all(vals == np.round(vals)):
                out = np.zeros(codes.shape, np.int64)
                out[~missing] = vals.astype(np.int64)[codes[~missing]]
                return out, missing, "int"
        names = np.asarray([_normalised(v) for v in cats.to_numpy(dtype=object)], dtype=str)
        out = np.full(codes.shape, "", dtype=names.dtype if names.size else "<U1")
        out[~missing] = names[codes[~missing]]
        return out, missing, "str"
    dtype = getattr(col, "dtype", None)
    if dtype is not None and tabular.numeric_dtype(dtype):
        vals = (col.to_numpy(dtype=np.float64, na_value=np.nan) if hasattr(col, "to_numpy")
                else np.asarray(col, np.float64))
        missing = np.isnan(vals)
        ok = vals[~missing]
        if not np.all(ok == np.round(ok)) or not np.all(np.isfinite(ok)):
            bad = ok[(ok != np.round(ok)) | ~np.isfinite(ok)][0]
            raise _NonInteger(float(bad))
        out = np.zeros(vals.shape, np.int64)
        out[~missing] = ok.astype(np.int64)
        return out, missing, "int"
    vals = col.to_numpy(dtype=object) if hasattr(col, "to_numpy") else np.asarray(col, dtype=object)
    missing = _missing_mask(vals)
    out = np.asarray([_normalised(v) for v in vals[~missing]], dtype=str)
    full = np.full(vals.shape, "", dtype=out.dtype if out.size else "<U1")
    full[~missing] = out
    return full, missing, "str"


class _NonInteger(ValueError):
    pass


def _numbers(col, name: str) -> np.ndarray:
    """A numeric column as float64 (NaN missing); a non-numeric value raises a ``TypeError``."""
    if hasattr(col, "to_numpy"):
        if tabular.numeric_dtype(col.dtype):
            return col.to_numpy(dtype=np.float64, na_value=np.nan)
        col = col.to_numpy(dtype=object)
    arr = np.asarray(col)
    if arr.dtype.kind in "biuf":
        return arr.astype(np.float64)
    missing = _missing_mask(arr)
    try:
        out = np.full(arr.shape, np.nan)
        out[~missing] = np.asarray(arr[~missing], dtype=np.float64)
        return out
    except (TypeError, ValueError):
        bad = next(v for v in arr[~missing] if not isinstance(v, numbers.Real))
        raise TypeError(name + f" is not numeric (a value {bad!r})") from None


def has_categorical(X, cat_features) -> bool:
    """Whether a fit on ``X`` has categorical columns: ``cat_features`` given and non-empty, or a
    DataFrame with category or string columns."""
    if cat_features is not None:
        return len(_as_list(cat_features)) > 0
    return tabular.is_frame(X) and any(tabular.categorical_dtype(d) for d in X.dtypes)


def _as_list(cat_features) -> list:
    if isinstance(cat_features, (str, bytes, numbers.Integral)):
        return [cat_features]
    return list(np.asarray(cat_features, dtype=object).tolist()) if not isinstance(cat_features, (list, tuple)) \
        else list(cat_features)


def resolve_columns(X, cat_features, name: str = "X") -> Tuple[Optional[Tuple[str, ...]], list]:
    """``(names, categorical)``: the input's column names (``None`` for arrays) and which columns
    are categorical (bools), from ``cat_features`` (``None``: a DataFrame's category, object and
    string columns; or names / indices / a boolean mask)."""
    if tabular.is_frame(X):
        names = tabular.feature_names_of(X)
        dtypes = list(X.dtypes)
    else:
        arr = np.asarray(X) if not isinstance(X, np.ndarray) else X
        if arr.ndim != 2:
            raise ValueError(f"{name} must be 2-D (n_samples, n_features); got shape {arr.shape}.")
        names, dtypes = None, [arr.dtype] * arr.shape[1]
    n = len(dtypes)
    if cat_features is None:
        return names, [names is not None and tabular.categorical_dtype(d) for d in dtypes]
    cat = [False] * n
    items = _as_list(cat_features)
    if len(items) and all(isinstance(i, (bool, np.bool_)) for i in items):
        if len(items) != n:
            raise ValueError(f"cat_features is a mask of {len(items)} booleans; {name} has {n} columns.")
        return names, [bool(i) for i in items]
    for item in items:
        if isinstance(item, (bool, np.bool_)):
            raise TypeError("cat_features must be column names, column indices or a boolean mask; "
                            f"got a mix including {item!r}.")
        if isinstance(item, numbers.Integral):
            j = int(item)
            if not -n <= j < n:
                raise ValueError(f"cat_features names column index {j}, but {name} has {n} columns "
                                 f"(indices 0..{n - 1}).")
            cat[j % n] = True
        elif isinstance(item, str):
            if names is None:
                raise TypeError(f"cat_features names the column {item!r}, but {name} is an array "
                                "without column names: give column indices, or a DataFrame.")
            if item not in names:
                raise ValueError(f"cat_features names the column {item!r}, which {name} does not have "
                                 f"(its columns: {list(names)[:10]}{'...' if n > 10 else ''}).")
            cat[names.index(item)] = True
        else:
            raise TypeError(f"cat_features must be column names or indices; got {item!r}.")
    return names, cat


def build_spec(X, categorical: Sequence[bool], names, one_hot_max_size: int, n_stats: int,
               name: str = "X") -> Tuple[CategoricalSpec, np.ndarray]:
    """``(spec, X_enc)``: the :class:`CategoricalSpec` of training rows ``X`` (vocabularies from
    its values; ``categorical`` says per column whether it is) and their :func:`encode` matrix."""
    kinds, vocab, vtype, missing = [], [], [], []
    for j, is_cat in enumerate(categorical):
        col = _column(X, j)
        label = f"{name} column {names[j]!r}" if names is not None else f"{name} column {j}"
        if not is_cat:
            dtype = getattr(col, "dtype", None)
            if dtype is not None and not tabular.numeric_dtype(dtype) and not tabular.categorical_dtype(dtype):
                raise TypeError(f"{label} has dtype {dtype}, which jboost cannot use: convert it to "
                                "numbers (e.g. a datetime to its year or a timestamp) or drop it.")
            if dtype is not None and tabular.categorical_dtype(dtype) and tabular.is_frame(X):
                raise TypeError(f"{label} is not numeric (dtype {dtype}) but cat_features does not "
                                "name it: add it to cat_features (or leave cat_features=None to "
                                "take every category and string column), or drop it.")
            try:
                _numbers(col, label)
            except TypeError as e:
                raise TypeError(f"{e}: add it to cat_features, or encode it as numbers.") from None
            kinds.append("numeric"), vocab.append(()), vtype.append(""), missing.append(False)
            continue
        try:
            vals, miss, t = _raw_values(col)
        except _NonInteger as e:
            raise ValueError(f"{label} is given as categorical but holds the non-integer number "
                             f"{e.args[0]!r}: categorical columns hold strings or integer codes. "
                             "Leave it out of cat_features (a numeric feature), or round it.") from None
        cats = np.unique(vals[~miss])
        size = len(cats) + int(miss.any())
        kinds.append("one_hot" if size <= one_hot_max_size else "ctr")
        vocab.append(tuple(int(c) for c in cats) if t == "int" else tuple(str(c) for c in cats))
        vtype.append(t)
        missing.append(bool(miss.any()))
    spec = CategoricalSpec(names, kinds, vocab, vtype, missing, n_stats, one_hot_max_size)
    return spec, encode(spec, X, name)


def _codes(spec: CategoricalSpec, j: int, col, label: str) -> np.ndarray:
    """Codes ``0..V-1`` of column ``j``'s values (``V``: missing when it is a category; ``-1``:
    unseen, or missing when training had none)."""
    try:
        vals, miss, t = _raw_values(col)
    except _NonInteger as e:
        raise ValueError(f"{label} holds the non-integer number {e.args[0]!r}, but the model's "
                         "column holds integer category codes.") from None
    want = spec.vocab_type[j]
    if t != want:  # compare as strings: integer codes of an int column, or strings of codes
        if want == "str":
            vals = np.asarray([_normalised(v) for v in vals], dtype=str)
        else:
            try:
                vals = np.asarray([int(v) if not m and str(v).lstrip("-").isdigit() else -(2**62)
                                   for v, m in zip(vals, miss)], np.int64)
            except (TypeError, ValueError):
                vals = np.full(vals.shape, -(2**62), np.int64)
    vocab = np.asarray(spec.vocab[j], dtype=np.int64 if want == "int" else str)
    codes = np.full(vals.shape, -1, np.int64)
    if vocab.size:
        idx = np.clip(np.searchsorted(vocab, vals), 0, vocab.size - 1)
        codes = np.where(vocab[idx] == vals, idx, -1)
    codes = np.where(miss, len(spec.vocab[j]) if spec.missing[j] else -1, codes)
    return codes


def encode(spec: CategoricalSpec, X, name: str = "X") -> np.ndarray:
    """Rows ``X`` (a DataFrame with the spec's columns in its order, or an array of
    ``spec.n_inputs`` columns) as the float32 ``(n, spec.encoded_width)`` matrix the model reads:
    numeric columns, one-hot indicators, then one category code per ctr column (``-1``: unseen).
    Host-side; never an error for unseen or missing categories."""
    n_cols = X.shape[1] if hasattr(X, "shape") and len(X.shape) == 2 else None
    if n_cols != spec.n_inputs:
        raise ValueError(f"{name} has {n_cols} columns, but the model was fitted on {spec.n_inputs} "
                         "(before its categorical columns were encoded).")
    n = X.shape[0]
    host, codes = [], []
    for j, k in enumerate(spec.kinds):
        col = _column(X, j)
        label = f"{name} column {spec.input_name(j)!r}"
        if k == "numeric":
            try:
                host.append(_numbers(col, label)[:, None])
            except TypeError as e:
                raise TypeError(f"{e}, but the model's column is numeric.") from None
            continue
        c = _codes(spec, j, col, label)
        if k == "one_hot":
            host.append((c[:, None] == np.arange(spec.n_categories(j))[None, :]).astype(np.float64))
        else:
            codes.append(c[:, None].astype(np.float64))
    parts = host + codes
    out = np.concatenate(parts, axis=1) if parts else np.zeros((n, 0))
    return out.astype(np.float32)


def encoded_names(model) -> Tuple[str, ...]:
    """Names of the features a model's trees split on: its spec's ``encoded_names``, else its
    feature names, or ``x0..``."""
    cat = getattr(model, "categorical", None)
    if cat is not None:
        return cat.spec.encoded_names
    names = getattr(model, "feature_names", None)
    return tuple(names.values) if names is not None else tuple(f"x{j}" for j in range(model.n_features))


def sum_by_input(model, values, axis: int = -1):
    """Per-encoded-feature quantities (importances, SHAP values: additive) summed by original input
    column along ``axis``; a model without categorical columns: ``values`` as they are."""
    cat = getattr(model, "categorical", None)
    if cat is None:
        return values
    values = jnp.moveaxis(jnp.asarray(values), axis, -1)
    out = jax.ops.segment_sum(jnp.moveaxis(values, -1, 0), jnp.asarray(cat.spec.sources),
                              num_segments=cat.spec.n_inputs)
    return jnp.moveaxis(jnp.moveaxis(out, 0, -1), -1, axis)


class Plan(NamedTuple):
    """A fit's categorical encoding before its statistics: the spec, the training rows' encoded
    matrix ``(n, encoded_width)`` and the eval set's (or ``None``)."""

    spec: CategoricalSpec
    X: np.ndarray
    X_valid: Optional[np.ndarray]


def check_settings(one_hot_max_size, prior, prior_weight) -> int:
    """``one_hot_max_size`` (an int ``>= 0``) as an int, after checking it and the concrete
    ``prior`` (a finite number or ``(K,)``) and ``prior_weight`` (finite, ``> 0``)."""
    size = checks.check_int(one_hot_max_size, "one_hot_max_size", 0, 2**31 - 1)
    if prior_weight is not None and not checks.is_traced(prior_weight):
        a = np.asarray(prior_weight, np.float64)
        if a.shape != () or not np.isfinite(a) or a <= 0:
            raise ValueError(f"cat_prior_weight={prior_weight!r} must be a finite number > 0 (the "
                             "weight of the prior in (sum + a * prior) / (count + a)).")
    if prior is not None and not checks.is_traced(prior):
        p = np.asarray(prior, np.float64)
        if p.ndim > 1 or not np.all(np.isfinite(p)):
            raise ValueError(f"cat_prior={prior!r} must be a finite number or a (K,) array of them.")
    return size


# The entry points that encode categorical columns (named by the refusal of the others).
CATEGORICAL_ENTRY_POINTS = ("jboost.fit, jboost.sweep.sweep or jboost.bagging.fit_bagged_boosters "
                            "(their cat_features=)")


def refuse_categorical(X, who: str, name: str = "X") -> None:
    """Raise ``TypeError`` when ``X`` is a DataFrame with categorical columns and the entry point
    ``who`` takes numeric columns only; the message names the columns and the fix."""
    if not tabular.is_frame(X):
        return
    cats = [str(c) for c, d in zip(X.columns, X.dtypes) if tabular.categorical_dtype(d)]
    if cats:
        raise TypeError(f"{name} has categorical columns {cats[:8]}{'...' if len(cats) > 8 else ''}, "
                        f"but {who} takes numeric columns only (it has no cat_features=): fit with "
                        f"{CATEGORICAL_ENTRY_POINTS}, which encode them (one-hot or ordered target "
                        "statistics), or encode them as numbers yourself (df[c].cat.codes with -1 "
                        "replaced by NaN, or pandas.get_dummies), or drop them.")
