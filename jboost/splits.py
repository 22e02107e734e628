"""Best oblivious split of one level from its histograms (regularised Newton gain).

An oblivious level applies ONE rule (feature ``f``, bin threshold ``t``, direction of missing
values) to every current leaf. Its gain is summed over the ``L`` leaves::

    gain(f, t, d) = sum_l [ S(G_L) + S(G_R) - S(G) ] - min_split_gain,
    S(G, H) = sum_k G_k^2 / (H_k + l2)

where, for each leaf, ``G_L, H_L`` are the gradient/hessian sums of rows with ``bin <= t``
(plus the missing bin when missing goes left) and ``G_R, H_R`` the rest. ``min_child_weight``:
a leaf contributes to the gain only when both of its children have hessian sum >= it (children
below it later keep their parent's value, see :func:`jboost.tree.newton_leaf_values`). The level
is split only when the best gain is > 0; otherwise it is a null split sending everything left.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax import lax


class Split(NamedTuple):
    feature: jax.Array        # int32 ()
    threshold: jax.Array      # int32 (): non-missing rows go right iff bin > threshold
    missing_right: jax.Array  # bool (): where rows in the missing bin go
    gain: jax.Array           # float32 (): the gain (0 for a null split)


def null_threshold(n_bins: int) -> int:
    """Threshold that sends every non-missing bin left (``bin > n_bins - 2`` never holds)."""
    return n_bins - 2


def prefix_sum(x, axis: int):
    """Inclusive prefix sum along ``axis`` as a two-level blocked cumsum.

    ``jnp.cumsum`` over ``B`` bins lowers to an O(B^2) reduce-window on XLA's CPU backend and a
    log-depth associative scan is slow to compile; cumsums within blocks of 16 plus a cumsum of
    the block totals cost O(16 B) and compile quickly.
    """
    x = jnp.moveaxis(x, axis, -1)
    b = x.shape[-1]
    block = 16
    if b <= block:
        out = jnp.cumsum(x, axis=-1)
    else:
        nb = -(-b // block)
        xp = jnp.pad(x, [(0, 0)] * (x.ndim - 1) + [(0, nb * block - b)])
        xb = xp.reshape(x.shape[:-1] + (nb, block))
        within = jnp.cumsum(xb, axis=-1)
        offsets = jnp.cumsum(within[..., -1], axis=-1) - within[..., -1]
        out = (within + offsets[..., None]).reshape(x.shape[:-1] + (nb * block,))[..., :b]
    return jnp.moveaxis(out, -1, axis)


def _score(G, H, l2):
    denom = H + l2
    ok = denom > 0
    # G * (G / denom) rather than G**2 / denom: stays finite for very large G (exponential loss).
    return jnp.where(ok, G * (G / jnp.where(ok, denom, 1.0)), 0.0)


def split_gains(hist, l2, min_child_weight):
    """Gain of every candidate ``(feature, threshold, missing direction)``: ``(F, B-1, 2)``.

    ``hist`` is ``(F, L, B, 2K)`` with gradient sums in ``[..., :K]`` and hessian sums in
    ``[..., K:]``; bin ``B-1`` is the missing bin.
    """
    return split_gains_cumulative(prefix_sum(hist, axis=2), l2, min_child_weight)


def split_gains_cumulative(cum, l2, min_child_weight, missing: bool = True):
    """:func:`split_gains` from inclusive prefix sums of the histograms over all ``B`` bins.

    ``cum[:, :, t]`` is then the left child of threshold ``t`` (missing rows excluded) and
    ``cum[:, :, B-1]`` the leaf's total. Each missing direction is one elementwise expression
    reduced over leaves, which XLA fuses into a single loop. With ``missing=False`` (static: the
    training rows have no missing values, so both directions give the same gains) only direction 0
    is computed and direction 1 gets ``-inf``: half the work.
    """
    n_bins = cum.shape[2]
    k = cum.shape[-1] // 2
    present = cum[:, :, : n_bins - 1, :]                 # (F, L, B-1, 2K) left sums
    total = cum[:, :, n_bins - 1 :, :]                   # (F, L, 1, 2K)
    missing_sums = total - cum[:, :, n_bins - 2 : n_bins - 1, :] if n_bins > 1 else total

    def score(s):
        return jnp.sum(_score(s[..., :k], s[..., k:], l2), axis=-1)

    parent = score(total)                                # (F, L, 1)

    def direction(left):
        right = total - left
        leaf_gain = score(left) + score(right) - parent  # (F, L, B-1)
        h_left = jnp.sum(left[..., k:], axis=-1)
        h_right = jnp.sum(right[..., k:], axis=-1)
        ok = (h_left >= min_child_weight) & (h_right >= min_child_weight)
        return jnp.sum(jnp.where(ok, leaf_gain, 0.0), axis=1)  # (F, B-1)

    # Direction 0: missing goes left; direction 1: missing goes right.
    if not missing:
        left_gains = direction(present + missing_sums)
        return jnp.stack([left_gains, jnp.full_like(left_gains, -jnp.inf)], axis=-1)
    return jnp.stack([direction(present + missing_sums), direction(present)], axis=-1)


def best_split(hist, *, l2, min_split_gain, min_child_weight, feature_mask=None,
               cumulative: bool = False, missing: bool = True) -> Split:
    """The admissible split of maximal gain for one oblivious level, or a null split.

    Args:
      hist: ``(F, L, B, 2K)`` histograms of this level's leaves.
      l2: L2 regularisation of leaf values (traced).
      min_split_gain: the gain must exceed this (traced).
      min_child_weight: minimal hessian sum of a child for its leaf to count (traced).
      feature_mask: optional ``(F,)`` bool; only these features are eligible.
      cumulative: ``hist`` already holds inclusive prefix sums over the bins (as built by
        :func:`jboost.histograms.level_histograms`; static).
      missing: whether any training row may be missing (static; ``False`` skips the gains of
        sending missing values right, which then equal those of sending them left).
    """
    cum = hist if cumulative else prefix_sum(hist, axis=2)
    gains = split_gains_cumulative(cum, l2, min_child_weight, missing)
    return best_split_of_gains(gains, min_split_gain=min_split_gain, feature_mask=feature_mask)


def best_split_of_gains(gains, *, min_split_gain, feature_mask=None) -> Split:
    """:func:`best_split` from the ``(F, B - 1, 2)`` gains of :func:`split_gains_cumulative`
    (the first maximum in (feature, threshold, direction) order)."""
    n_features, n_bins = gains.shape[0], gains.shape[1] + 1
    # Two stages, the same first maximum as one argmax over the flattened gains: each feature's
    # maximum (a plain max-reduction, which vectorises), the first feature reaching the largest,
    # then the first (threshold, direction) of that feature's gains reaching it. (A single
    # argmax is a (value, index) reduction that XLA's CPU backend runs one element at a time;
    # NaN, which argmax takes as the maximum, propagates through max to the same choice.)
    per_feature = jnp.max(gains.reshape(n_features, -1), axis=1)
    if feature_mask is not None:
        per_feature = jnp.where(feature_mask, per_feature, -jnp.inf)
    f = jnp.argmax(per_feature)
    j = jnp.argmax(gains.reshape(n_features, -1)[f])
    t, d = j // 2, j % 2
    gain = per_feature[f] - min_split_gain
    admissible = gain > 0
    return Split(
        feature=jnp.where(admissible, f, 0).astype(jnp.int32),
        threshold=jnp.where(admissible, t, null_threshold(n_bins)).astype(jnp.int32),
        missing_right=admissible & (d == 1),
        gain=jnp.where(admissible, gain, 0.0).astype(jnp.float32),
    )
