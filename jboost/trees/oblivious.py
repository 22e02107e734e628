"""Oblivious (symmetric) trees: the :class:`ObliviousTrees` arrays, their leaf index and the
level-by-level grower :func:`fit_tree`. See docs/trees.md."""

from __future__ import annotations

import functools
from typing import NamedTuple, Optional

import jax
import jax.numpy as jnp
from jax import lax

from jboost import _compile, _native
from jboost.data import binning
from jboost.trees import (family, histograms, interactions as interactions_lib, monotone as monotone_lib,
                          routing, splits as splits_lib)


class ObliviousTrees(NamedTuple):
    """One or many oblivious trees as arrays (leading axes index trees): the default
    :class:`jboost.trees.family.TreeFamily`."""

    features: jax.Array       # int32 (..., D)
    thresholds: jax.Array     # int32 (..., D) bin thresholds: right iff bin > threshold
    borders: jax.Array        # float32 (..., D) float thresholds: right iff x > border
    missing_right: jax.Array  # bool (..., D)
    leaf_values: jax.Array    # float32 (..., 2**D, K)
    gains: jax.Array          # float32 (..., D) split gain of each level (0: null split)

    @property
    def depth(self) -> int:
        return self.features.shape[-1]

    @property
    def n_outputs(self) -> int:
        return self.leaf_values.shape[-1]

    # The TreeFamily members.
    @staticmethod
    def grow(X_binned, grad, hess, **settings):
        """:func:`fit_tree`."""
        return fit_tree(X_binned, grad, hess, **settings)

    def leaf_index_raw(self, X_t) -> jax.Array:
        """:func:`leaf_index_raw`."""
        return leaf_index_raw(self, X_t)

    def leaf_index_binned(self, X_binned, n_bins: int) -> jax.Array:
        """:func:`leaf_index` of one tree on feature-major bins ``(F, n)``."""
        cols = X_binned[self.features]
        return leaf_index(cols.astype(jnp.int32), self.thresholds, self.missing_right,
                          cols == binning.missing_bin(n_bins))

    def predict_native(self, X, feature_major: bool) -> jax.Array:
        """Every tree's leaf values summed by the compiled CPU kernel (``predict.cc``)."""
        return family.native_sum(_native.PREDICT, self, X, feature_major)

    def with_borders(self, borders) -> "ObliviousTrees":
        """Fill the float thresholds from the bin thresholds: ``border = borders[f, t]``."""
        return self._replace(borders=family.take_borders(borders, self.features, self.thresholds))


def leaf_index(columns, thresholds, missing_right, is_missing, first_level: int = 0):
    """``(n,)`` int32 leaf of each row from the given levels' ``(D, n)`` comparisons, ``sum_d
    right_d << d``; ``first_level`` (static): the tree level of the first of them."""
    right = routing.goes_right(columns, thresholds[:, None], missing_right[:, None], is_missing)
    weights = jnp.left_shift(1, jnp.arange(first_level, first_level + columns.shape[0], dtype=jnp.int32))
    return jnp.sum(right.astype(jnp.int32) * weights[:, None], axis=0)


def leaf_index_raw(tree: ObliviousTrees, X_t):
    """:func:`leaf_index` of one tree on feature-major raw floats ``(F, n)`` (NaN = missing), values
    and borders as :func:`jboost.data.binning.clamp_subnormals_jax` gives them (the routing rule)."""
    cols = binning.clamp_subnormals_jax(X_t[tree.features])
    return leaf_index(cols, binning.clamp_subnormals_jax(tree.borders), tree.missing_right,
                      jnp.isnan(cols))


def _level_gains(X_level, payload, leaf, hist, local, plan, *, n_leaves: int, n_bins: int, l2,
                 min_child_weight, missing: bool, axis_name, criterion, subsets: bool):
    """An unconstrained level's ``(gains, hist, local)``: the split gains of its ``n_leaves``
    nodes, its cumulative histograms (summed over devices) and this device's own."""
    if axis_name is None:
        subtract, keep = plan
        gains, hist = splits_lib.level_gains(
            X_level, payload, leaf, hist if subtract else None, n_leaves=n_leaves, n_bins=n_bins,
            l2=l2, min_child_weight=min_child_weight, missing=missing, keep_hist=keep,
            criterion=criterion)
        return gains, hist, local
    if not subsets:  # rows sharded: local histograms, psum, global gains
        hist, local = histograms.level_histograms(X_level, payload, leaf, local, n_bins=n_bins,
                                                  axis_name=axis_name)
        cum = hist
    else:  # sharded, subsets: each level's histograms built directly (and psum-ed)
        cum = histograms.prefix_sum(histograms.build_histogram(
            X_level, payload, leaf, n_leaves=n_leaves, n_bins=n_bins, axis_name=axis_name), axis=2)
    gains = splits_lib.cumulative_split_gains(cum, l2, min_child_weight, missing,
                                              axis_name=axis_name, criterion=criterion)
    return gains, hist, local


@functools.partial(_compile.jit, static_argnames=("depth", "n_bins", "axis_name", "missing", "criterion",
                                                  "monotone", "interactions"))
def fit_tree(X_binned, grad, hess, *, depth: int, n_bins: int, l2, min_split_gain, min_child_weight,
             feature_masks=None, feature_subsets=None, axis_name: Optional[str] = None,
             missing: bool = True, criterion: splits_lib.SplitCriterion = splits_lib.NEWTON,
             monotone: Optional[tuple] = None, interactions: Optional[tuple] = None):
    """Fit one oblivious tree of fixed depth to weighted gradients and hessians ``(n, K)``: each
    level's best admissible split from its leaves' histograms (docs/trees.md, "Oblivious trees").

    Args:
      X_binned: ``(F, n)`` uint8 bins.
      feature_masks: optional ``(depth, F)`` bool: the features eligible at each level.
      feature_subsets: optional ``(depth, m)`` sorted, distinct feature indices per level: the tree
        of the equivalent masks, from the histograms of those features only.
      axis_name: the mapped axis rows are sharded over (histograms ``psum``-ed).
      missing: static; ``False`` promises that no row is in the missing bin.
      criterion: static :class:`jboost.trees.splits.SplitCriterion` (default Newton).
      monotone: static: one sign in ``{-1, 0, 1}`` per feature (:mod:`jboost.trees.monotone`):
        each level's admissible splits and gains under the constraints (the Newton criterion;
        the leaf values are clipped to their bounds by the round, after any leaf refit).
      interactions: static feature groups (:mod:`jboost.trees.interactions`): each level splits
        on a feature the levels above allow.

    Returns:
      ``(tree, leaf)``: an :class:`ObliviousTrees` (leaf values before shrinkage) and ``(n,)`` the
      leaf of every training row.
    """
    k = grad.shape[-1]
    payload = jnp.concatenate([grad, hess], axis=-1).astype(jnp.float32)
    n_features, n = X_binned.shape
    if feature_subsets is not None and feature_subsets.shape[-1] >= n_features:
        feature_subsets = None  # sorted and distinct: every feature, every level
    leaf = jnp.zeros((n,), jnp.int32)
    feats, thrs, miss, gains = [], [], [], []
    # Levels of different subsets share no histograms: built directly, nothing kept.
    plan = (histograms.level_plan(n, depth, n_bins, channels=payload.shape[-1])
            if feature_subsets is None else [(False, False)] * depth)
    hist = local = None  # the level's (global) cumulative histograms; this device's own
    bounds = None if monotone is None else monotone_lib.unbounded(1, k)
    used = jnp.zeros((n_features,), bool)  # the features the levels above split on
    for d in range(depth):  # static unroll over levels: the leaf count sets the shapes
        if feature_subsets is None:
            X_level, mask = X_binned, None if feature_masks is None else feature_masks[d]
        else:
            X_level = X_binned[feature_subsets[d]]  # (m, n): only the eligible features
            mask = None if feature_masks is None else feature_masks[d][feature_subsets[d]]
        mask = interactions_lib.combine(mask, used, interactions,
                                        None if feature_subsets is None else feature_subsets[d])
        if monotone is not None:  # constrained: the nodes' bounds decide gains and admissibility
            signs = jnp.asarray(monotone, jnp.int32)
            signs = signs if feature_subsets is None else signs[feature_subsets[d]]
            level_gains, hist = monotone_lib.oblivious_level(
                X_level, payload, leaf, bounds, signs, n_leaves=2**d, n_bins=n_bins, l2=l2,
                min_child_weight=min_child_weight, missing=missing, axis_name=axis_name)
        else:
            level_gains, hist, local = _level_gains(
                X_level, payload, leaf, hist, local, plan[d], n_leaves=2**d, n_bins=n_bins, l2=l2,
                min_child_weight=min_child_weight, missing=missing, axis_name=axis_name,
                criterion=criterion, subsets=feature_subsets is not None)
        split = splits_lib.best_split_of_gains(level_gains, min_split_gain=min_split_gain,
                                           feature_mask=mask)
        if monotone is not None:
            bounds = monotone_lib.next_bounds(hist, split, bounds, signs, l2)
        if feature_subsets is not None:  # position in the subset -> feature index
            split = split._replace(feature=jnp.where(split.gain > 0, feature_subsets[d][split.feature],
                                                     0).astype(jnp.int32))
        used = interactions_lib.with_split(used, split.feature, split.gain > 0)
        col = X_binned[split.feature][None]  # (1, n): this level's feature
        leaf = leaf + leaf_index(col.astype(jnp.int32), split.threshold[None], split.missing_right[None],
                                 col == binning.missing_bin(n_bins), first_level=d)
        feats.append(split.feature)
        thrs.append(split.threshold)
        miss.append(split.missing_right)
        gains.append(split.gain)
    # Rows of non-zero payload decide which nodes are empty, not the float hessian sums.
    takes_part = jnp.any(payload != 0, axis=-1)
    if depth and hist is not None and monotone is None:
        # The leaves' sums off the last level's histograms; only the counts read the rows.
        sums = routing.children_sums(hist[split.feature], split.threshold, split.missing_right)
        rows = histograms.spread_sum(takes_part.astype(jnp.int32), leaf, 2**depth)
        if axis_name is not None:
            rows = lax.psum(rows, axis_name)
    else:  # one pass over the rows: the sums and the counts (exact in float32: only > 0 matters)
        sums = histograms.spread_sum(jnp.concatenate([payload, takes_part[:, None].astype(jnp.float32)], axis=-1),
                                     leaf, 2**depth)
        if axis_name is not None:
            sums = lax.psum(sums, axis_name)
        sums, rows = sums[:, :-1], sums[:, -1]
    values = family.newton_leaf_values(sums[:, :k], sums[:, k:], l2, min_child_weight,
                                value=criterion.value, rows=rows)
    tree = ObliviousTrees(
        features=jnp.stack(feats) if depth else jnp.zeros((0,), jnp.int32),
        thresholds=jnp.stack(thrs) if depth else jnp.zeros((0,), jnp.int32),
        borders=jnp.zeros((depth,), jnp.float32),  # filled in by with_borders
        missing_right=jnp.stack(miss) if depth else jnp.zeros((0,), bool),
        leaf_values=values,
        gains=jnp.stack(gains) if depth else jnp.zeros((0,), jnp.float32),
    )
    return tree, leaf
