"""Loss-guided ("best-first", leaf-wise) trees: the open leaf of largest gain splits next, up to
``max_leaves`` leaves (LightGBM's ``num_leaves``, XGBoost's ``grow_policy="lossguide"``).

Rows are kept grouped by leaf; a fitted tree is a :class:`jboost.trees.depthwise.DepthwiseTrees`
node table. See docs/trees.md ("Loss-guided trees")."""

from __future__ import annotations

from typing import Any, NamedTuple, Optional

import jax
import jax.numpy as jnp
from jax import lax

from jboost.data import rows as rows_lib
from jboost.trees import (depthwise as depthwise_lib, histograms, interactions, monotone, node_splits,
                          routing, splits as splits_lib)

#: Default leaves of a loss-guided tree (LightGBM's ``num_leaves`` default).
DEFAULT_MAX_LEAVES = 31
#: The largest ``max_leaves`` (node slots ``max_leaves - 1`` per tree and round).
MAX_LEAVES = 1 << 16


class LossGuidedTrees(depthwise_lib.DepthwiseTrees):
    """The loss-guided tree family (``jboost.fit(tree_family="lossguide", max_leaves=...)``): grown
    by :func:`fit_tree`, its trees :class:`jboost.trees.depthwise.DepthwiseTrees` node tables."""

    __slots__ = ()

    @staticmethod
    def grow(X_binned, grad, hess, **settings):
        """:func:`fit_tree` (``max_leaves`` default :data:`DEFAULT_MAX_LEAVES`)."""
        return fit_tree(X_binned, grad, hess, **settings)


#: The most rows per step of a split's loop over its leaf's rows (:func:`chunk_rows`).
CHUNK_ROWS = 16384
#: The fewest (unless the data have fewer rows).
MIN_CHUNK_ROWS = 1024


def chunk_rows(n: int) -> int:
    """Rows per step of a split's loop: about a sixteenth of the ``n`` rows (a power of 2),
    between :data:`MIN_CHUNK_ROWS` and :data:`CHUNK_ROWS`, at most ``n``'s bucket
    (:func:`jboost.data.rows.bucket`). A step reads a whole chunk, so a small leaf wants small
    chunks and a large one few steps."""
    n = rows_lib.bucket(n)  # a fit padded to its bucket steps alike (docs/compile.md)
    c = 1 << max(0, (n // 16).bit_length() - 1)
    return min(n, CHUNK_ROWS, max(MIN_CHUNK_ROWS, c))


class _Open(NamedTuple):
    """The open leaves' best splits and the tree grown so far (the loop's carry)."""

    order: jax.Array        # (n,) int32 the rows, each leaf's rows together
    start: jax.Array        # (L,) int32 where each leaf's rows begin in ``order``
    count: jax.Array        # (L,) int32 and how many (every row, of any payload)
    hist: jax.Array         # (L, F, B, C) each leaf's histograms (summed over devices)
    gain: jax.Array         # (L,) best split gain of each leaf (0: not open)
    feature: jax.Array      # (L,) int32
    threshold: jax.Array    # (L,) int32
    missing_right: jax.Array  # (L,) bool
    leaf_depth: jax.Array   # (L,) int32
    pointer: jax.Array      # (L,) int32 the children cell (2 * node + side) that names the leaf; -1: root
    value: jax.Array        # (L, K) each leaf's value
    features: jax.Array     # (N,) the table
    thresholds: jax.Array
    missing: jax.Array
    gains: jax.Array
    children: jax.Array     # (N, 2)
    node_depth: jax.Array   # (N,) int32 (depth of each splitting node; -1: unused)
    used: Any = None        # (L, F) bool the features of each leaf's path (interaction constraints)
    bounds: Any = None      # (L, K) (lo, hi) each leaf's monotone bounds


def _per_depth_masks(feature_masks, feature_subsets, depth: int, n_features: int):
    """``(depth, F)`` the features eligible at each depth, or ``None``: per-depth masks as given,
    per-depth subsets as masks. Per-node masks or subsets are refused."""
    masks = None
    if feature_masks is not None:
        masks = jnp.asarray(feature_masks, bool)
        if masks.ndim != 2:
            raise ValueError("lossguide.fit_tree: feature_masks must be (depth, F), one mask per "
                             f"depth; got shape {masks.shape} (per-node masks name the heap nodes "
                             "of depth-wise levels).")
    if feature_subsets is not None:
        if isinstance(feature_subsets, (list, tuple)) or jnp.ndim(feature_subsets) != 2:
            raise ValueError("lossguide.fit_tree: feature_subsets must be (depth, m), one subset "
                             "per depth (per-node subsets name the heap nodes of depth-wise levels).")
        fs = jnp.asarray(feature_subsets, jnp.int32)
        sub = jnp.zeros((fs.shape[0], n_features), bool).at[
            jnp.arange(fs.shape[0])[:, None], fs].set(True)
        masks = sub if masks is None else masks & sub
    if masks is not None and masks.shape != (depth, n_features):
        raise ValueError(f"lossguide.fit_tree: feature masks must be ({depth}, {n_features}) "
                         f"(depth, F); got {masks.shape}.")
    return masks


class _Grow(NamedTuple):
    """One loss-guided tree's inputs and settings, as the growth steps read them."""

    X_binned: jax.Array       # (F, n) bins, feature-major
    payload: jax.Array        # (n, 2K) float32 [grad, hess]
    depth: int                # static depth bound
    n_bins: int
    max_leaves: int
    l2: Any
    min_split_gain: Any
    min_child_weight: Any
    missing: bool
    criterion: splits_lib.SplitCriterion
    masks: Any                # (depth, F) bool or None
    axis_name: Optional[str]
    chunk: int                # rows per step of a split's loops (chunk_rows)
    groups: Optional[tuple] = None  # interaction constraints (jboost.trees.interactions), static
    monotone: Optional[tuple] = None  # a sign per feature (jboost.trees.monotone), static

    @property
    def k(self) -> int:
        return self.payload.shape[-1] // 2

    @property
    def n(self) -> int:
        return self.X_binned.shape[1]

    def value_of(self, sums):
        """``(S, K)`` the criterion's value of each of ``S`` nodes' ``(S, C)`` sums."""
        return self.criterion.value(sums[:, :self.k], sums[:, self.k:], self.l2)

    def chunks(self, rows, body, init):
        """``body`` over the chunks of ``rows`` rows (one chunk: no loop)."""
        if self.chunk >= self.n:
            return body(0, init)
        return lax.fori_loop(0, (rows + self.chunk - 1) // self.chunk, body, init)


def _best_splits(g: _Grow, hist, child_depth, used, bounds):
    """The best splits of the ``S`` nodes of ``(F, S, B, C)`` histograms ``hist`` at depths
    ``child_depth (S,)``, their paths' features ``used`` ``(S, F)`` and monotone ``bounds`` (each
    ``None`` without constraints): ``(split, can, sums)``, ``can`` where a node may split."""
    cum = histograms.prefix_sum(hist, axis=2)                        # (F, S, B, C)
    sums = cum[0, :, g.n_bins - 1]                                   # (S, C) every row
    mask = None if g.masks is None else g.masks[jnp.minimum(child_depth, g.depth - 1)]
    mask = interactions.combine(mask, used, g.groups)
    sp = node_splits.best_node_splits(g, cum, mask, bounds)
    can = (child_depth < g.depth) & (sp.gain > 0)
    return sp, can, sums


def _start(g: _Grow) -> _Open:
    """The root leaf (every row, its histograms and best split) and an empty table."""
    n, max_leaves, n_nodes = g.n, g.max_leaves, g.max_leaves - 1
    null = splits_lib.null_threshold(g.n_bins)
    root = histograms.build_histogram(g.X_binned, g.payload, jnp.zeros((n,), jnp.int32), n_leaves=1,
                                      n_bins=g.n_bins, axis_name=g.axis_name)  # (F, 1, B, C)
    used = None if g.groups is None else jnp.zeros((max_leaves, g.X_binned.shape[0]), bool)
    bounds = None if g.monotone is None else monotone.unbounded(max_leaves, g.k)
    sp, can, sums = _best_splits(g, root, jnp.zeros((1,), jnp.int32), None if used is None else used[:1],
                                 None if bounds is None else tuple(b[:1] for b in bounds))

    def at0(x, fill, dtype):  # (L,) with leaf 0's entry x[0]
        return jnp.full((max_leaves,), fill, dtype).at[0].set(x[0].astype(dtype))

    return _Open(
        order=jnp.arange(n, dtype=jnp.int32),
        start=jnp.zeros((max_leaves,), jnp.int32),
        count=jnp.zeros((max_leaves,), jnp.int32).at[0].set(n),
        hist=jnp.zeros((max_leaves,) + root[:, 0].shape, jnp.float32).at[0].set(root[:, 0]),
        gain=at0(jnp.where(can, sp.gain, 0.0), 0.0, jnp.float32),
        feature=at0(sp.feature, 0, jnp.int32),
        threshold=at0(sp.threshold, null, jnp.int32),
        missing_right=at0(sp.missing_right, False, bool),
        leaf_depth=jnp.zeros((max_leaves,), jnp.int32),
        pointer=jnp.full((max_leaves,), -1, jnp.int32),
        value=jnp.zeros((max_leaves, g.k), jnp.float32).at[0].set(g.value_of(sums)[0]),
        features=jnp.zeros((n_nodes,), jnp.int32),
        thresholds=jnp.full((n_nodes,), null, jnp.int32),
        missing=jnp.zeros((n_nodes,), bool),
        gains=jnp.zeros((n_nodes,), jnp.float32),
        children=jnp.full((n_nodes, 2), -1, jnp.int32),
        node_depth=jnp.full((n_nodes,), -1, jnp.int32), used=used, bounds=bounds)


def _partition(g: _Grow, s: _Open, best):
    """Leaf ``best``'s rows moved to their child's place in ``order`` (left rows up from the leaf's
    start, right rows down from its end): ``(order, n_left, n_right, used)``, ``used`` ``(2,)``
    the rows of each child with a non-zero payload (the rows its histogram sums)."""
    n, chunk = g.n, g.chunk
    f, thr, mr = s.feature[best], s.threshold[best], s.missing_right[best]
    first, size = s.start[best], s.count[best]
    lane = jnp.arange(chunk, dtype=jnp.int32)

    def body(c, carry):  # chunk c of the leaf's rows
        order, n_left, n_right, used = carry
        at = c * chunk + lane
        valid = at < size
        rows = s.order[jnp.minimum(first + at, n - 1)]
        right = routing.bin_goes_right(g.X_binned[f, rows], thr, mr, g.n_bins)
        left, right = valid & ~right, valid & right
        to = jnp.where(left, first + n_left + jnp.cumsum(left) - 1,
                       jnp.where(right, first + size - n_right - jnp.cumsum(right), n))
        part = jnp.any(g.payload[rows] != 0, axis=-1)
        used = used + jnp.stack([jnp.sum(left & part, dtype=jnp.int32),
                                 jnp.sum(right & part, dtype=jnp.int32)])
        return (order.at[to].set(rows, mode="drop"), n_left + jnp.sum(left, dtype=jnp.int32),
                n_right + jnp.sum(right, dtype=jnp.int32), used)

    return g.chunks(size, body, (s.order, jnp.int32(0), jnp.int32(0), jnp.zeros((2,), jnp.int32)))


def _children_histograms(g: _Grow, order, first, n_left, n_right, used, parent):
    """The two children's ``(F, B, C)`` histograms of a leaf: the smaller child's from its rows, the
    other's as ``parent`` minus them (summed over devices). Smaller by ``used``, the rows each
    sums: rows of zero payload (zero weight, padding) change neither sum nor choice."""
    n, chunk = g.n, g.chunk
    both = used if g.axis_name is None else lax.psum(used, g.axis_name)
    left_small = both[0] <= both[1]
    small_first = jnp.where(left_small, first, first + n_left)
    small_size = jnp.where(left_small, n_left, n_right)
    lane = jnp.arange(chunk, dtype=jnp.int32)

    def build(c, hist):
        at = c * chunk + lane
        rows = order[jnp.minimum(small_first + at, n - 1)]
        part = jnp.where((at < small_size)[:, None], g.payload[rows], 0.0)
        return hist + histograms.build_histogram(g.X_binned[:, rows], part, jnp.zeros((chunk,), jnp.int32),
                                                 n_leaves=1, n_bins=g.n_bins)[:, 0]

    small = g.chunks(small_size, build, jnp.zeros_like(parent))
    if g.axis_name is not None:
        small = lax.psum(small, g.axis_name)
    large = parent - small
    return jnp.where(left_small, small, large), jnp.where(left_small, large, small)


def _split(g: _Grow, t, s: _Open) -> _Open:
    """Split ``t``: the open leaf of largest gain (the first of equal gains) splits into itself
    (left) and leaf ``t + 1`` (right), node ``t`` of the table."""
    n_nodes = g.max_leaves - 1
    best = jnp.argmax(s.gain).astype(jnp.int32)
    new = t + 1
    first = s.start[best]
    order, n_left, n_right, used = _partition(g, s, best)
    left_hist, right_hist = _children_histograms(g, order, first, n_left, n_right, used,
                                                 s.hist[best])
    hist = jnp.stack([left_hist, right_hist], axis=1)               # (F, 2, B, C)
    child_depth = jnp.full((2,), s.leaf_depth[best] + 1, jnp.int32)
    pair = jnp.stack([best, new])
    used, bounds = s.used, s.bounds
    if used is not None:  # both children: the leaf's path and its feature
        path = interactions.with_split(used[best], s.feature[best], True)
        used = used.at[pair].set(jnp.stack([path, path]))
    if bounds is not None:  # the children's bounds from the leaf's and the children's sums
        kids = monotone.children_bounds(
            jnp.sum(hist[0], axis=1), bounds[0][best][None], bounds[1][best][None],
            jnp.asarray(g.monotone, jnp.int32)[s.feature[best]], g.l2)
        bounds = tuple(b.at[pair].set(c) for b, c in zip(bounds, kids))
    sp, can, sums = _best_splits(g, hist, child_depth, None if used is None else used[pair],
                                 None if bounds is None else tuple(b[pair] for b in bounds))
    children = s.children.at[t].set(jnp.stack([~best, ~new]))
    parent_cell = s.pointer[best]
    children = children.reshape(-1).at[jnp.where(parent_cell >= 0, parent_cell, 2 * n_nodes)].set(
        t, mode="drop").reshape(n_nodes, 2)
    return s._replace(
        order=order,
        hist=s.hist.at[best].set(left_hist).at[new].set(right_hist),
        start=s.start.at[new].set(first + n_left),
        count=s.count.at[pair].set(jnp.stack([n_left, n_right])),
        gain=s.gain.at[pair].set(jnp.where(can, sp.gain, 0.0)),
        feature=s.feature.at[pair].set(sp.feature),
        threshold=s.threshold.at[pair].set(sp.threshold),
        missing_right=s.missing_right.at[pair].set(sp.missing_right),
        leaf_depth=s.leaf_depth.at[pair].set(child_depth),
        pointer=s.pointer.at[pair].set(2 * t + jnp.arange(2, dtype=jnp.int32)),
        value=s.value.at[pair].set(g.value_of(sums)),
        features=s.features.at[t].set(s.feature[best]),
        thresholds=s.thresholds.at[t].set(s.threshold[best]),
        missing=s.missing.at[t].set(s.missing_right[best]),
        gains=s.gains.at[t].set(s.gain[best]),
        children=children,
        node_depth=s.node_depth.at[t].set(s.leaf_depth[best]), used=used, bounds=bounds)


def _row_leaves(s: _Open, n: int):
    """``(n,)`` int32 each row's leaf: the leaf whose range of ``order`` holds it."""
    starts = jnp.where(s.count > 0, s.start, n)
    by_start = jnp.argsort(starts).astype(jnp.int32)
    at = jnp.searchsorted(starts[by_start], jnp.arange(n, dtype=jnp.int32), side="right") - 1
    return jnp.zeros((n,), jnp.int32).at[s.order].set(by_start[at])


def fit_tree(X_binned, grad, hess, *, depth: int, n_bins: int, l2, min_split_gain, min_child_weight,
             max_leaves: int = DEFAULT_MAX_LEAVES, feature_masks=None, feature_subsets=None,
             axis_name: Optional[str] = None, missing: bool = True,
             criterion: splits_lib.SplitCriterion = splits_lib.NEWTON,
             interactions: Optional[tuple] = None, monotone: Optional[tuple] = None):
    """Fit one loss-guided tree to weighted gradients and hessians, with the arguments of
    :func:`jboost.trees.oblivious.fit_tree`: ``depth`` a static depth bound, ``max_leaves`` (static,
    at least 2) the most leaves, per-depth ``feature_masks`` ``(depth, F)`` or ``feature_subsets``
    ``(depth, m)``, static ``interactions`` (feature groups, :mod:`jboost.trees.interactions`: each
    node splits on a feature its path allows) and ``monotone`` (a sign per feature,
    :mod:`jboost.trees.monotone`: each node's candidates valued within its bounds, out-of-order
    ones refused; the round clips the final leaf values). Returns ``(tree, leaf)``: a
    :class:`jboost.trees.depthwise.DepthwiseTrees` table of ``max_leaves - 1`` nodes and ``(n,)``
    int32 each row's leaf."""
    max_leaves, depth = int(max_leaves), int(depth)
    if max_leaves < 2:
        raise ValueError(f"lossguide.fit_tree: max_leaves must be at least 2; got {max_leaves}.")
    if depth < 1:
        raise ValueError(f"lossguide.fit_tree: depth must be at least 1; got {depth}.")
    n_features, n = X_binned.shape
    g = _Grow(X_binned=X_binned, payload=jnp.concatenate([grad, hess], axis=-1).astype(jnp.float32),
              depth=depth, n_bins=n_bins, max_leaves=max_leaves, l2=l2, min_split_gain=min_split_gain,
              min_child_weight=min_child_weight, missing=missing, criterion=criterion,
              masks=_per_depth_masks(feature_masks, feature_subsets, depth, n_features),
              axis_name=axis_name, chunk=chunk_rows(n), groups=interactions, monotone=monotone)
    n_nodes = max_leaves - 1
    # A while loop: a `lax.cond` per step would copy the leaves' histograms every step.
    _, state = lax.while_loop(lambda c: (c[0] < n_nodes) & (jnp.max(c[1].gain) > 0),
                              lambda c: (c[0] + 1, _split(g, c[0], c[1])), (jnp.int32(0), _start(g)))
    level_counts = jnp.sum((state.node_depth[None, :] == jnp.arange(depth)[:, None]).astype(jnp.int32),
                           axis=1)
    tree = depthwise_lib.DepthwiseTrees(
        features=state.features, thresholds=state.thresholds,
        borders=jnp.zeros((n_nodes,), jnp.float32), missing_right=state.missing,
        children=state.children, leaf_values=state.value, gains=state.gains,
        level_counts=level_counts)
    return tree, _row_leaves(state, n)
