"""Quantile binning of features into ``uint8`` bins with a reserved missing-value bin.

As scikit-learn's histogram GBDT (after LightGBM: Ke et al. 2017): borders from the training
data on the host, a jit-compiled transform of floats to bins. ``x`` goes to bin ``i`` iff
``b[i-1] < x <= b[i]``, NaN to ``n_bins - 1``; borders are padded with ``+inf``, so ``bin(x) >
t`` iff ``x > borders[f, t]``. See ``docs/data.md``.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from jboost import _compile, _native
from jboost.data import rows as rows_lib


def check_borders(borders, n_features: int, n_bins: int) -> np.ndarray:
    """Check user-supplied bin borders ``(n_features, n_bins - 1)`` (no NaN, non-decreasing along
    each feature), else training bins and prediction thresholds would disagree; returns float32.

    Raises:
      TypeError: complex borders.
      ValueError: the wrong shape, a NaN, or a feature whose borders decrease.
    """
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

X_BINNED_DTYPE = jnp.uint8
MAX_BINS = 256
# Rows used to compute borders when the data is larger (a seeded subsample, as in
# scikit-learn's `subsample=2e5`); binning all rows then uses these borders.
DEFAULT_BORDER_SAMPLE = 200_000


def missing_bin(n_bins: int) -> int:
    """The index of the bin reserved for missing values (NaN): ``n_bins - 1``."""
    return n_bins - 1


#: Binned matrices of at most this many cells are checked by NumPy on the host (CPU arrays):
#: larger ones by one compiled program, which needs no temporary of the matrix's size.
HOST_CHECK_SIZE = 1 << 22


def has_missing(X_binned, n_bins: int) -> bool:
    """Whether any value of the binned data is missing: a host bool, to set the static
    ``BoostConfig.missing`` (without missing values the split search does half the work).
    """
    if np.size(X_binned) <= HOST_CHECK_SIZE and (
            isinstance(X_binned, np.ndarray)
            or all(d.platform == "cpu" for d in X_binned.devices())):  # no program compiled
        return bool((np.asarray(X_binned) == missing_bin(n_bins)).any())
    return bool(jnp.any(jnp.asarray(X_binned) == missing_bin(n_bins)))


def _quantile_values(v: np.ndarray, cw: np.ndarray, levels: np.ndarray) -> np.ndarray:
    """Smallest of the sorted values ``v`` whose cumulative weight ``cw`` reaches ``level * total``
    (the inverted CDF)."""
    idx = np.searchsorted(cw, levels * cw[-1], side="left")
    return v[np.clip(idx, 0, len(v) - 1)]


def _feature_borders(col: np.ndarray, weights: np.ndarray | None, max_bins: int) -> np.ndarray:
    """Borders for one float32 column (NaN already removed), at most ``max_bins - 1`` of them."""
    if weights is not None:
        keep = weights > 0
        col, weights = col[keep], weights[keep]
    if col.size == 0:
        return np.zeros((0,), np.float32)
    # One sort per column: the distinct values and the quantiles both come from it. Equal
    # weights (sample_weight=None is passed as ones) need no argsort: the sorted weights are the same.
    if weights is None or np.all(weights == weights[0]):
        v = np.sort(col)
    else:
        order = np.argsort(col, kind="stable")
        v, weights = col[order], weights[order]
    first = np.empty(v.shape, bool)
    first[0] = True
    np.not_equal(v[1:], v[:-1], out=first[1:])
    distinct = v[first]
    if distinct.size <= max_bins:
        # Exact borders: one bin per distinct value.
        lower, upper = distinct[:-1], distinct[1:]
    else:
        levels = np.arange(1, max_bins, dtype=np.float64) / max_bins
        cw = (np.arange(1, v.size + 1, dtype=np.float64) if weights is None
              else np.cumsum(weights, dtype=np.float64))
        q = np.unique(_quantile_values(v, cw, levels))
        # A border equal to the maximum would leave the last bin empty.
        q = q[q < distinct[-1]]
        lower = q
        upper = distinct[np.searchsorted(distinct, q, side="right")]
    # Midpoints between a border value and the next distinct value, in float32; fall back to the
    # lower value when rounding would reach the upper one (keeps every bin non-empty).
    with np.errstate(over="ignore", invalid="ignore"):
        mid = (lower.astype(np.float64) + upper.astype(np.float64)) / 2.0
        mid32 = mid.astype(np.float32)
    # Values are compared as clamp_subnormals gives them: a subnormal border would be compared as
    # the smallest normal of its sign, its bin empty (e.g. between -FLT_MIN and 0: -FLT_MIN).
    bad = (~(mid32 < upper) | ~(mid32 >= lower) | ~np.isfinite(mid32)
           | ((mid32 != 0) & (np.abs(mid32) < FLT_MIN)))
    return np.where(bad, lower, mid32).astype(np.float32)


#: The smallest normal float32 (``FLT_MIN``): what a positive subnormal value is compared as.
FLT_MIN = np.float32(np.finfo(np.float32).tiny)
_EXPONENT, _MANTISSA = 0x7F800000, 0x007FFFFF  # float32 bit fields


def clamp_subnormals(X: np.ndarray) -> np.ndarray:
    """A copy of float32 ``X`` with every subnormal value (``0 < |x| < FLT_MIN``) as the smallest
    normal number of its sign, ``copysign(FLT_MIN, x)``: the value every path compares (binning,
    prediction, routing, the C++ kernels); only the order among subnormals of one sign is lost
    (docs/data.md). NaN and normal values unchanged; a zero of either sign as +0 (comparisons do
    not tell them apart; the borders computed from it keep the bits they always had)."""
    X = np.asarray(X, np.float32)
    bits = X.view(np.int32)
    tiny = np.where(bits < 0, -FLT_MIN, FLT_MIN)
    return np.where((bits & _EXPONENT) == 0,
                    np.where((bits & _MANTISSA) != 0, tiny, np.float32(0)), X)


def clamp_subnormals_jax(x) -> jax.Array:
    """:func:`clamp_subnormals` of a JAX array, bitwise (traceable; an array of another dtype than
    float32, e.g. bins, unchanged). Read off the bits: XLA's CPU compares subnormals as 0 (flush
    to zero), so a float comparison cannot find them."""
    x = jnp.asarray(x)
    if x.dtype != jnp.float32:
        return x
    bits = jax.lax.bitcast_convert_type(x, jnp.int32)
    tiny = jnp.where(bits < 0, -FLT_MIN, FLT_MIN)
    return jnp.where((bits & _EXPONENT) == 0,
                     jnp.where((bits & _MANTISSA) != 0, tiny, jnp.float32(0)), x)


def compute_borders(
    X,
    n_bins: int = MAX_BINS,
    sample_weight=None,
    *,
    max_rows: int | None = DEFAULT_BORDER_SAMPLE,
    seed: int = 0,
) -> np.ndarray:
    """Per-feature quantile borders, padded with ``+inf`` to shape ``(n_features, n_bins - 1)``.

    Args:
      X: ``(n_samples, n_features)`` array; NaN means missing.
      n_bins: total number of bins including the missing bin (``3 <= n_bins <= 256``). Features
        with at most ``n_bins - 1`` distinct values get exact borders (one bin per value).
      sample_weight: optional non-negative weights; borders are weighted quantiles.
      max_rows: borders are computed from a seeded subsample of this many rows when the data is
        larger (``None``: always all rows).
      seed: seed of that subsample.

    Returns:
      float32 ``(n_features, n_bins - 1)``: row ``f`` holds its increasing borders, then ``+inf``.

    Raises:
      ValueError: ``n_bins`` outside ``[3, 256]``, or ``X`` not 2-D.
    """
    if not 3 <= int(n_bins) <= MAX_BINS:
        raise ValueError(f"n_bins={n_bins} must be in [3, {MAX_BINS}].")
    X = np.asarray(X, dtype=np.float32)
    if X.ndim != 2:
        raise ValueError(f"X must be 2-D (n_samples, n_features), got shape {X.shape}.")
    w = None if sample_weight is None else np.asarray(sample_weight, dtype=np.float64)
    rows = border_sample_rows(X.shape[0], max_rows, seed)
    if rows is not None:
        X = X[rows]
        w = None if w is None else w[rows]
    X = clamp_subnormals(X)  # after subsampling: no full-size temporaries for large X
    max_bins = n_bins - 1
    out = np.full((X.shape[1], n_bins - 1), np.inf, dtype=np.float32)
    for f in range(X.shape[1]):  # host-side, once per fit; not a hot path
        col = X[:, f]
        ok = ~np.isnan(col)
        b = _feature_borders(col[ok], None if w is None else w[ok], max_bins)
        out[f, : b.size] = b
    return out


def border_sample_rows(n_rows: int, max_rows: int | None = DEFAULT_BORDER_SAMPLE,
                       seed: int = 0) -> np.ndarray | None:
    """The rows of ``n_rows`` that :func:`compute_borders` reads: the sorted indices of a seeded
    subsample of ``max_rows`` when there are more, else ``None`` (all rows).
    """
    if max_rows is None or n_rows <= max_rows:
        return None
    return np.sort(np.random.default_rng(seed).choice(n_rows, max_rows, replace=False))


def local_border_sample(X, sample_weight, start: int, n_total: int, *,
                        max_rows: int | None = DEFAULT_BORDER_SAMPLE, seed: int = 0):
    """``(X_part, w_part)``: the rows of one block of a larger table (rows ``start ..`` of
    ``n_total``) that :func:`compute_borders` of the whole table reads, in their order; merged by
    :func:`merge_border_samples` (``docs/data.md``).

    Raises:
      ValueError: ``X`` is not 2-D, or the block does not fit in ``n_total`` rows.
    """
    X = np.asarray(X, dtype=np.float32)
    w = None if sample_weight is None else np.asarray(sample_weight, dtype=np.float64)
    if X.ndim != 2:
        raise ValueError(f"X must be 2-D (n_samples, n_features), got shape {X.shape}.")
    if start < 0 or start + X.shape[0] > n_total:
        raise ValueError(f"a block of {X.shape[0]} rows from row {start} does not fit in "
                         f"n_total={n_total} rows.")
    rows = border_sample_rows(n_total, max_rows, seed)
    if rows is None:
        return X, w
    lo, hi = np.searchsorted(rows, [start, start + X.shape[0]], side="left")
    mine = rows[lo:hi] - start
    return X[mine], None if w is None else w[mine]


def merge_border_samples(parts, n_bins: int = MAX_BINS, weights=None) -> np.ndarray:
    """Borders of a table held in blocks from their :func:`local_border_sample` parts (``parts``
    and ``weights``, the blocks' ``X_part`` and ``w_part`` in block order): :func:`compute_borders`
    of the concatenated table, bitwise.

    Raises:
      ValueError: no parts, or ``weights`` and ``parts`` of different lengths (and as
        :func:`compute_borders`).
    """
    parts = [np.asarray(p, np.float32) for p in parts]
    if not parts:
        raise ValueError("merge_border_samples needs at least one part.")
    X = np.concatenate(parts, axis=0)
    w = None
    if weights is not None:
        if len(weights) != len(parts):
            raise ValueError(f"weights has {len(weights)} parts but parts has {len(parts)}.")
        w = np.concatenate([np.asarray(v, np.float64) for v in weights])
    return compute_borders(X, n_bins, w, max_rows=None)


@functools.partial(_compile.jit, static_argnames=("n_bins",))
def _bin_transposed(X, borders, n_bins: int):
    def xla():
        search = jax.vmap(lambda b, x: jnp.searchsorted(b, x, side="left"))
        bins = search(clamp_subnormals_jax(borders[:, :-1]), clamp_subnormals_jax(X.T))
        bins = jnp.where(jnp.isnan(X.T), missing_bin(n_bins), bins)
        return bins.astype(X_BINNED_DTYPE)

    if not (_native.available() and n_bins <= 256):
        return xla()

    def native():  # jboost/_native: a branch-free binary search per value (clamped as above)
        out = jax.ShapeDtypeStruct((X.shape[1], X.shape[0]), X_BINNED_DTYPE)
        call = jax.ffi.ffi_call(_native.BIN, out, vmap_method="sequential")
        return call(X, borders[:, :-1], n_threads=np.int64(_native.cpu_threads()),
                    missing_bin=np.int64(missing_bin(n_bins)))

    return _native.platform_dependent(cpu=native, default=xla)


def bin_features(X, borders) -> jax.Array:
    """Map floats ``(n, n_features)`` to feature-major uint8 bins ``(n_features, n)``.

    The transposed layout puts each feature's bins in one contiguous row, as the histogram builder
    reads them. Concrete ``borders`` get :func:`check_borders`; traced ones are the caller's.

    Raises:
      ValueError: borders that are not 2-D or fail :func:`check_borders`, or ``X`` whose shape
        does not match them.
      TypeError: complex borders.
    """
    if not isinstance(borders, jax.core.Tracer):
        if np.ndim(borders) != 2:
            raise ValueError(f"borders must be 2-D (n_features, n_bins - 1); got shape "
                             f"{np.shape(borders)}.")
        borders = check_borders(borders, np.shape(borders)[0], np.shape(borders)[1] + 1)
    borders = jnp.asarray(borders, jnp.float32)
    X = jnp.asarray(X, jnp.float32)
    if X.ndim != 2 or X.shape[1] != borders.shape[0]:
        raise ValueError(
            f"X has shape {X.shape} but the borders are for {borders.shape[0]} features."
        )
    n, n_bins = X.shape[0], borders.shape[1] + 1
    size = rows_lib.bucket(n)
    if size == n or isinstance(X, jax.core.Tracer):
        return _bin_transposed(X, borders, n_bins=n_bins)
    # Host rows binned at their bucket's row count (no program compiled per row count).
    padded = np.zeros((size, X.shape[1]), np.float32)
    padded[:n] = np.asarray(X)
    return jax.device_put(np.asarray(_bin_transposed(padded, borders, n_bins=n_bins))[:, :n])


def n_bins_of(borders) -> int:
    """The total number of bins (the missing bin included) of ``borders (..., n_bins - 1)``."""
    return borders.shape[-1] + 1
