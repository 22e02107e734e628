"""CatBoost's ordered target statistics in JAX: training values, their bins, the model's tables
(Categorical) and prediction values.

Prokhorenkova, Gusev, Vorobev, Dorogush and Gulin (2018), "CatBoost: unbiased boosting with
categorical features", NeurIPS, Section 3.2. See ``docs/categorical.md``."""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jboost import _compile, checks
from jboost.data import categorical as categorical_lib

#: Default ``cat_prior_weight``: the weight ``a`` of the prior in ``(S + a p) / (N + a)``.
PRIOR_WEIGHT = 1.0
#: The ``fold_in`` data of the permutation's key (the fit's rounds fold in ``0..n_rounds - 1``).
PERMUTATION_STREAM = 0xFFFFFFFE


class Categorical(NamedTuple):
    """What a model fitted with categorical features needs to encode rows (``Booster.categorical``).

    Attributes:
      spec: the static :class:`jboost.data.categorical.CategoricalSpec`.
      sums: ``(V, K)`` float32: per category of every ctr column (rows ``spec.offsets[j] + c``),
        the weighted sum of the target statistic over all training rows.
      counts: ``(V,)`` float32: their weights' sum.
      prior: ``(K,)`` float32: the prior ``p`` (traced under ``jax.vmap``).
      prior_weight: ``()`` float32: its weight ``a``.
    """

    spec: categorical_lib.CategoricalSpec
    sums: jax.Array
    counts: jax.Array
    prior: jax.Array
    prior_weight: jax.Array


def targets(y: np.ndarray, loss) -> np.ndarray:
    """The target statistics' values ``t (n, K)`` float32 of labels ``y`` for ``loss``: the class
    indicators of a K-class loss, else the labels' columns."""
    y = np.asarray(y, np.float32)
    if loss.task == "multiclass" and y.ndim == 1:
        k = int(loss.n_outputs)
        return (y[:, None] == np.arange(k, dtype=np.float32)[None, :]).astype(np.float32)
    return y[:, None] if y.ndim == 1 else y


def checked_targets(spec, y, loss, prior, prior_weight):
    """``(spec, t)``: the statistics' values ``t (n, K)`` of labels ``y`` (:func:`targets`) and
    ``spec`` with their count ``K``, after the checks of ``loss`` (one label per row) and of the
    concrete categorical settings (``cat_prior``: one number or ``K``)."""
    if loss.batch:
        raise ValueError(f"categorical features need a loss of one label per row; {loss.name!r} is "
                         "an objective of the whole batch (Cox, ranking): encode the categorical "
                         "columns as numbers first.")
    t = targets(np.asarray(y), loss)
    K = t.shape[1]
    spec = categorical_lib.CategoricalSpec(spec.names, spec.kinds, spec.vocab, spec.vocab_type,
                                           spec.missing, K, spec.one_hot_max_size)
    categorical_lib.check_settings(spec.one_hot_max_size, prior, prior_weight)
    if prior is not None and not checks.is_traced(prior) and np.asarray(prior).size not in (1, K):
        raise ValueError(f"cat_prior has {np.asarray(prior).size} values; the statistics have {K} "
                         f"(one per class or label column): give one number or {K}.")
    return spec, t


def default_prior(t, w) -> np.ndarray:
    """The default prior ``(K,)`` float64 of the statistics ``t``: their mean weighted by ``w``
    (float32), summed on the host as :func:`jboost.fit` sums it."""
    w = np.asarray(w, np.float32)
    return (t * w[:, None]).sum(0, dtype=np.float64) / max(float(w.sum(dtype=np.float64)), 1e-30)


def _segmented_exclusive_sum(values, starts):
    """Per segment (``starts`` marks each first row, rows sorted by segment), the sum of the rows
    before each row in its segment: ``(n, K)``."""
    def combine(a, b):
        va, fa = a
        vb, fb = b
        return jnp.where(fb[:, None], vb, va + vb), fa | fb

    inclusive, _ = jax.lax.associative_scan(combine, (values, starts))
    shifted = jnp.concatenate([jnp.zeros_like(inclusive[:1]), inclusive[:-1]], axis=0)
    return jnp.where(starts[:, None], 0.0, shifted)


def _weighted_borders(v, w, n_bins: int):
    """Weighted quantile borders of one column ``v`` (rows of weight 0 left out) placed as
    :func:`jboost.data.binning.compute_borders` places them, ``+inf`` padded to ``n_bins - 1``."""
    n = v.shape[0]
    pos = w > 0
    v = jnp.where(pos, v, jnp.inf)
    order = jnp.argsort(v)
    vs = v[order]
    ws = jnp.where(pos, w, 0.0)[order]
    cw = jnp.cumsum(ws)
    # The levels are host constants and the cumulative weights are divided (correctly rounded)
    # rather than the levels multiplied in the program: XLA may fuse a product differently
    # under jax.vmap, and a level that lands exactly on a row's cumulative weight would then
    # pick another quantile (a vmapped fit must bin as its separate fit does).
    levels = (np.arange(1, n_bins - 1, dtype=np.float64) / (n_bins - 1)).astype(np.float32)
    idx = jnp.clip(jnp.searchsorted(cw / cw[-1], levels, side="left"), 0, n - 1)
    lower = vs[idx]
    n_pos = jnp.sum(pos)
    vmax = vs[jnp.maximum(n_pos - 1, 0)]
    upper = vs[jnp.clip(jnp.searchsorted(vs, lower, side="right"), 0, n - 1)]
    mid = (lower + (upper - lower) / 2).astype(jnp.float32)
    tiny = jnp.finfo(jnp.float32).tiny
    bad = ~(mid < upper) | ~(mid >= lower) | ~jnp.isfinite(mid) | ((mid != 0) & (jnp.abs(mid) < tiny))
    b = jnp.where(bad, lower, mid)
    b = jnp.where((lower < vmax) & jnp.isfinite(lower), b, jnp.inf)
    dup = jnp.concatenate([jnp.zeros((1,), bool), b[1:] == b[:-1]])
    b = jnp.sort(jnp.where(dup, jnp.inf, b))
    return jnp.concatenate([b, jnp.full((1,), jnp.inf, jnp.float32)])


def _flush(v):
    return jnp.where(jnp.abs(v) < jnp.finfo(jnp.float32).tiny, jnp.float32(0), v)


def bin_values(values, borders):
    """Bins ``(F, n)`` uint8 of values ``(n, F)`` with borders ``(F, n_bins - 1)`` by
    :mod:`jboost.data.binning`'s rule (no missing values here)."""
    search = jax.vmap(lambda b, x: jnp.searchsorted(b, x, side="left"))
    return search(borders[:, :-1], values.T).astype(jnp.uint8)


def table_values(sums, counts, prior, prior_weight):
    """Every category's statistic from all training rows, ``(S + a p) / (N + a)``: sums ``(V, K)``,
    counts ``(V,)``, prior ``(K,)`` and its weight ``()`` give ``(V, K)``."""
    return (sums + prior_weight * prior) / (counts[:, None] + prior_weight)


@functools.partial(_compile.jit, static_argnames=("n_table_rows", "n_bins"))
def training_features(codes, t, w, key, prior, prior_weight, offsets, *, n_table_rows: int,
                      n_bins: int):
    """The ordered target statistics of the training rows and what the model keeps.

    Args:
      codes: ``(n, J)`` int32 category codes of the ctr columns (training rows: all ``>= 0``).
      t: ``(n, K)`` the statistic's values (:func:`targets`); ``w``: ``(n,)`` sample weights.
      key: the permutation's key; ``prior`` ``(K,)``, ``prior_weight`` ``()``: traced.
      offsets: ``(J,)`` each column's first row in the tables.

    Returns:
      ``(values (n, J*K), borders (J*K, n_bins - 1), bins (J*K, n) uint8, sums (V, K),
      counts (V,))``: row ``i``'s value from the rows before it in the permutation (rows of
      weight 0: from every training row), column-major in ``(j, k)``.
    """
    n, J = codes.shape
    K = t.shape[1]
    idx = codes + offsets[None, :]                                       # (n, J) table rows
    tw = t * w[:, None]
    flat = idx.reshape(-1)
    sums = jax.ops.segment_sum(jnp.repeat(tw, J, axis=0), flat, num_segments=n_table_rows)
    counts = jax.ops.segment_sum(jnp.repeat(w, J), flat, num_segments=n_table_rows)
    position = jax.random.permutation(key, n)                            # row i's place in sigma
    rows = jnp.tile(jnp.arange(n), J)                                    # entries: column-major
    table = idx.T.reshape(-1)                                            # entry j*n + i
    order = jnp.lexsort((position[rows], table))                         # by category, then sigma
    t_sorted, w_sorted = tw[rows[order]], w[rows[order]]
    tab_sorted = table[order]
    starts = jnp.concatenate([jnp.ones((1,), bool), tab_sorted[1:] != tab_sorted[:-1]])
    before = _segmented_exclusive_sum(jnp.concatenate([t_sorted, w_sorted[:, None]], axis=1), starts)
    ordered = (before[:, :K] + prior_weight * prior) / (before[:, K:] + prior_weight)   # (nJ, K)
    ordered = jnp.zeros_like(ordered).at[order].set(ordered)             # entries in place
    final = table_values(sums, counts, prior, prior_weight)[table]        # (nJ, K)
    entry_w = w[rows]
    values = jnp.where((entry_w > 0)[:, None], ordered, final)           # (nJ, K): j-major
    values = _flush(values.reshape(J, n, K).transpose(1, 0, 2).reshape(n, J * K).astype(jnp.float32))
    wpos = w
    borders = jax.vmap(lambda col: _weighted_borders(col, wpos, n_bins))(values.T)
    return values, borders, bin_values(values, borders), sums, counts


def ctr_values(cat: Categorical, codes):
    """Prediction values ``(n, J*K)`` float32 of ctr codes ``(n, J)``: the category's statistic from
    every training row (code ``-1``, unseen or missing: the prior)."""
    spec = cat.spec
    codes = jnp.asarray(codes).astype(jnp.int32)
    idx = jnp.clip(codes + jnp.asarray(spec.offsets)[None, :], 0, max(spec.n_table_rows - 1, 0))
    table = table_values(cat.sums, cat.counts, cat.prior, cat.prior_weight)   # (V, K)
    vals = jnp.where((codes >= 0)[..., None], table[idx], cat.prior)         # (n, J, K)
    return _flush(vals.reshape(codes.shape[0], -1).astype(jnp.float32))


def expand(cat: Categorical, X_enc):
    """The trees' features ``(n, n_features)`` of encoded rows ``X_enc (n, encoded_width)``: the
    host features, then the ctr columns' statistics (one model: call it per model of a batch)."""
    spec = cat.spec
    X_enc = jnp.asarray(X_enc, jnp.float32)
    h = spec.host_width
    if not spec.ctr_columns:
        return X_enc
    return jnp.concatenate([X_enc[:, :h], ctr_values(cat, X_enc[:, h:])], axis=1)
