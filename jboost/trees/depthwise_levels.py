"""The depth-wise growers in JAX: the dense heap levels (``2**d`` nodes at level ``d``) and the
compact levels (only the open nodes, written into the node table directly).

Their trees differ in the last float bits, so they stay two growers; the CPU whole-tree kernel
computes the compact one's. See docs/trees.md ("Two growers in JAX")."""

from __future__ import annotations

from typing import Any, NamedTuple, Optional

import jax
import jax.numpy as jnp
from jax import lax

from jboost.trees import (family, histograms, interactions, monotone, node_splits, node_table,
                          routing, splits as splits_lib)

#: The compact levels' shallow levels run as one loop of ``2 * EARLY_SLOTS`` open positions
#: and ``EARLY_SLOTS`` histogram slots (level ``d < EARLY_LEVELS`` has at most ``2**d``).
EARLY_LEVELS, EARLY_SLOTS = 6, 32


class Grow(NamedTuple):
    """One depth-wise tree's inputs and settings, as the growers' steps read them."""

    X_binned: jax.Array       # (F, n) bins, feature-major
    payload: jax.Array        # (n, 2K) float32 [grad, hess], row weights applied
    takes_part: jax.Array     # (n,) bool: rows of non-zero payload
    depth: int                # static levels
    n_bins: int               # static bins (missing bin included)
    n_rows: int               # static rows of every device (the bounds on slots and nodes)
    l2: Any                   # traced regularisation
    min_split_gain: Any
    min_child_weight: Any
    missing: bool             # static: some row may be in the missing bin
    criterion: splits_lib.SplitCriterion
    axis_name: Optional[str]  # rows sharded over this mapped axis
    subsets: Any              # node_splits.node_masks' subsets: None, (depth, m), or a list per node
    masks: Any                # node_splits.node_masks' masks, or None
    feature_key: Any          # the compact levels' per-node draws (node_splits.node_features), or None
    max_features: Optional[int]
    max_nodes: Optional[int]  # the compact levels' slot bound
    capacity: int             # the table's node slots (node_table.node_capacity)
    groups: Optional[tuple] = None  # interaction constraints (jboost.trees.interactions), static
    monotone: Optional[tuple] = None  # a sign per feature (jboost.trees.monotone), static

    @property
    def k(self) -> int:
        return self.payload.shape[-1] // 2

    @property
    def per_node(self) -> bool:
        return isinstance(self.subsets, list)

    def total(self, a):
        """``a`` summed over the devices of ``axis_name`` (itself when unsharded)."""
        return a if self.axis_name is None else lax.psum(a, self.axis_name)


# --- the dense heap levels -------------------------------------------------------------------

def dense_histograms(g: Grow, d: int, leaf, local):
    """Level ``d``'s ``(F', 2**d, B, C)`` cumulative histograms (summed over devices) and this
    device's own, kept for the next level's subtraction."""
    n_nodes, n = 1 << d, g.X_binned.shape[1]
    build = lambda X, axis_name: histograms.prefix_sum(histograms.build_histogram(  # noqa: E731
        X, g.payload, leaf, n_leaves=n_nodes, n_bins=g.n_bins, axis_name=axis_name), axis=2)
    if g.per_node:  # each node's own m features: row i's slot s is feature subsets[d][leaf_i, s]
        rows = jnp.arange(n, dtype=jnp.int32)
        return build(g.X_binned[g.subsets[d][leaf].T, rows[None, :]], g.axis_name), local
    if g.subsets is not None:  # this level's features only: built directly
        return build(g.X_binned[g.subsets[d]], g.axis_name), local
    if d == 0 or histograms.subtraction_pays(n, n_nodes, g.n_bins, g.payload.shape[-1]):
        # Level 0 directly; deeper levels from the last level's (this device's) histograms.
        return histograms.level_histograms(g.X_binned, g.payload, leaf, local if d else None,
                                           n_bins=g.n_bins, axis_name=g.axis_name)
    local = build(g.X_binned, None)  # few rows per cell: every node built directly
    return g.total(local), local


def dense_level(g: Grow, d: int, leaf, active, local, used, bounds):
    """Dense level ``d``: ``(rule, leaf, active, local, last, used, bounds)``: its ``2**d`` rules
    (null where not ``active`` or no positive gain), every row's next node, the next level's active
    nodes, this device's histograms, what :func:`dense_leaf_values` reads, and the next level's
    paths' features and monotone bounds (``used`` ``(2**d, F)``, ``bounds`` ``(2**d, K)`` each:
    this level's, ``None`` without constraints)."""
    n_nodes = 1 << d
    cum, local = dense_histograms(g, d, leaf, local)
    mask = None if g.masks is None else jnp.broadcast_to(g.masks[d][:n_nodes], (n_nodes, cum.shape[0]))
    mask = interactions.combine(mask, used, g.groups, None if g.subsets is None else g.subsets[d])
    split = node_splits.best_node_splits(g, cum, mask, bounds,
                                         None if g.subsets is None else g.subsets[d])
    ok = active & (split.gain > 0)  # a leaf's descendants never split
    pos = jnp.where(ok, split.feature, 0).astype(jnp.int32)
    thr = jnp.where(ok, split.threshold, splits_lib.null_threshold(g.n_bins)).astype(jnp.int32)
    mr = ok & split.missing_right
    if g.subsets is None:
        feature = pos
    elif g.per_node:  # node j's slot pos[j] is its feature subsets[d][j, pos[j]]
        feature = jnp.where(ok, jnp.take_along_axis(g.subsets[d], pos[:, None], axis=1)[:, 0], 0)
    else:
        feature = jnp.where(ok, g.subsets[d][pos], 0)
    feature = feature.astype(jnp.int32)
    leaf = node_splits.route_level(g.X_binned, leaf, feature, thr, mr, d, g.n_bins)
    rule = (feature, thr, mr, jnp.where(ok, split.gain, 0.0).astype(jnp.float32))
    if used is not None:  # node j's children j and j + 2**d
        used = jnp.tile(interactions.with_split(used, feature, ok), (2, 1))
    if bounds is not None:
        bounds = node_splits.children_bounds(g, cum, splits_lib.Split(
            pos, thr, mr, jnp.where(ok, split.gain, 0.0)), bounds, features=feature)
    return rule, leaf, jnp.concatenate([ok, ok]), local, (cum, pos, thr, mr), used, bounds


def dense_leaf_values(g: Grow, leaf, last):
    """``(2**D, K)`` the dense heap's leaf values: the sums off the last level's histograms, the row
    counts from the rows."""
    k = g.k
    if g.depth:
        sums = node_splits.node_children_sums(*last)
        counts = g.total(histograms.spread_sum(g.takes_part.astype(jnp.int32), leaf, 1 << g.depth))
    else:
        sums = jnp.sum(g.payload, axis=0, keepdims=True)
        counts = jnp.sum(g.takes_part.astype(jnp.int32), keepdims=True)
        sums, counts = g.total((sums, counts))
    return family.newton_leaf_values(sums[:, :k], sums[:, k:], g.l2, g.min_child_weight,
                                     value=g.criterion.value, rows=counts,
                                     output_sum=splits_lib.sum_outputs_16)


def grow_dense(g: Grow):
    """The dense heap levels as a table of ``g.capacity`` nodes: ``(fields, leaf)``, the
    :class:`jboost.trees.depthwise.DepthwiseTrees` fields (borders 0) and every row's table leaf."""
    n = g.X_binned.shape[1]
    leaf = jnp.zeros((n,), jnp.int32)
    active = jnp.ones((1,), bool)  # nodes of the level that may still split
    rules, local, last = [], None, None
    used = None if g.groups is None else jnp.zeros((1, g.X_binned.shape[0]), bool)
    bounds = None if g.monotone is None else monotone.unbounded(1, g.k)
    for d in range(g.depth):  # static unroll over levels: 2**d nodes
        rule, leaf, active, local, last, used, bounds = dense_level(g, d, leaf, active, local, used,
                                                                    bounds)
        rules.append(rule)
    cat = lambda i, dtype: (jnp.concatenate([r[i] for r in rules]) if g.depth  # noqa: E731
                            else jnp.zeros((0,), dtype))
    features, thresholds = cat(0, jnp.int32), cat(1, jnp.int32)
    missing_right, gains = cat(2, bool), cat(3, jnp.float32)
    fields, table_leaf = node_table.dense_table(
        features, thresholds, jnp.zeros(features.shape, jnp.float32), missing_right, gains,
        dense_leaf_values(g, leaf, last), g.capacity)
    return fields, table_leaf[leaf]


# --- the compact levels ----------------------------------------------------------------------

class CompactState(NamedTuple):
    """The compact levels' carry: level ``d``'s open nodes at positions ``0..n_open-1`` in heap
    order (the lefts, then the rights of the last level's splits), and the table so far."""

    pos: jax.Array            # (n,) int32 each row's open position (past the width: at a leaf)
    heap: jax.Array           # (width,) int32 the heap node of each position
    n_open: jax.Array         # int32 open positions
    node_base: jax.Array      # int32 the table number of the level's first splitting node
    leaf_base: jax.Array      # int32 and of its first leaf
    parent_base: jax.Array    # int32 the last level's first splitting node
    parent_splits: jax.Array  # int32 and how many split
    features: jax.Array       # (N,) int32 the table
    thresholds: jax.Array     # (N,) int32
    missing_right: jax.Array  # (N,) bool
    gains: jax.Array          # (N,) float32
    children: jax.Array       # (N, 2) int32
    row_leaf: jax.Array       # (n,) int32 each row's table leaf (once at a leaf)
    level_counts: jax.Array   # (D,) int32
    used: Any = None          # (width, F) bool the features of each position's path (constraints)
    bounds: Any = None        # (width, K) (lo, hi) each position's monotone bounds


def _ext(a, fill):
    """``a`` with one more entry ``fill`` (read by the rows past the open positions)."""
    return jnp.concatenate([a, jnp.full((1,), fill, a.dtype)])


def compact_plan(g: Grow):
    """Static shapes per level: ``(early, steady, slots, widths)``: the first ``early`` levels run
    as one loop of :data:`EARLY_SLOTS` slots, then each level its own widths, and from level
    ``steady`` on (one width and bound) a second loop. Loops need no per-level masks or subsets."""
    depth = g.depth
    loops = g.masks is None and g.subsets is None
    early = min(depth, EARLY_LEVELS) if loops else 0
    slots = [EARLY_SLOTS if d < early else node_table.node_slots(g.n_rows, int(g.max_nodes), d)
             for d in range(depth)]
    widths = [2 * EARLY_SLOTS if early else 1]
    for d in range(depth):
        widths.append(2 * min(slots[d], widths[d]))
    steady = depth  # the first level from which slots and widths stay the same
    while (steady > early and loops and slots[steady - 1] == slots[-1]
           and widths[steady - 1] == widths[-1] == widths[steady]):
        steady -= 1
    return early, steady, slots, widths


def compact_start(g: Grow, width: int) -> CompactState:
    """The root open at position 0 of ``width``, every row on it, an empty table."""
    n, capacity = g.X_binned.shape[1], g.capacity
    zero = jnp.asarray(0, jnp.int32)
    return CompactState(
        pos=jnp.zeros((n,), jnp.int32), heap=jnp.zeros((width,), jnp.int32),
        n_open=jnp.asarray(1, jnp.int32), node_base=zero, leaf_base=zero, parent_base=zero,
        parent_splits=jnp.asarray(1, jnp.int32),
        features=jnp.zeros((capacity,), jnp.int32),
        thresholds=jnp.full((capacity,), splits_lib.null_threshold(g.n_bins), jnp.int32),
        missing_right=jnp.zeros((capacity,), bool), gains=jnp.zeros((capacity,), jnp.float32),
        children=jnp.full((capacity, 2), -1, jnp.int32), row_leaf=jnp.zeros((n,), jnp.int32),
        level_counts=jnp.zeros((g.depth,), jnp.int32),
        used=None if g.groups is None else jnp.zeros((width, g.X_binned.shape[0]), bool),
        bounds=None if g.monotone is None else monotone.unbounded(width, g.k))


def slot_histograms(g: Grow, st: CompactState, d, width: int, n_slots: int):
    """Level ``d``'s histogram slots: ``(count, slot, pos_of_slot, cum, candidates)``; a slot goes
    to each of the first open positions with two rows of non-zero weight, at most ``node_slots``."""
    p = jnp.arange(width, dtype=jnp.int32)
    rows = jnp.arange(g.X_binned.shape[1], dtype=jnp.int32)
    count = g.total(histograms.spread_sum(g.takes_part.astype(jnp.int32), st.pos, width + 1))[:width]
    can = (p < st.n_open) & (count >= 2)
    order = jnp.cumsum(can.astype(jnp.int32)) - 1
    bound = jnp.minimum(node_table.node_slots(g.n_rows, int(g.max_nodes), d), n_slots)  # d: maybe traced
    slot = jnp.where(can & (order < bound), order, n_slots)          # n_slots: no slot
    pos_of_slot = jnp.zeros((n_slots + 1,), jnp.int32).at[slot].set(p)[:n_slots]
    heap_of_slot = st.heap[pos_of_slot]
    row_slot = _ext(slot, n_slots)[st.pos]
    candidates = None
    if g.feature_key is not None:  # the slots' own draws; rows of no slot read zeros
        candidates = node_splits.node_features(g.feature_key, d, heap_of_slot, g.X_binned.shape[0],
                                               g.max_features)
    elif g.per_node:
        candidates = g.subsets[d][heap_of_slot]
    if candidates is not None:
        pad = jnp.concatenate([candidates, jnp.zeros((1, candidates.shape[1]), jnp.int32)])
        X_level = g.X_binned[pad[row_slot].T, rows[None, :]]
    elif g.subsets is not None:
        X_level = g.X_binned[g.subsets[d]]
    else:
        X_level = g.X_binned
    cum = histograms.prefix_sum(histograms.build_histogram(
        X_level, g.payload, row_slot, n_leaves=n_slots + 1, n_bins=g.n_bins,
        axis_name=g.axis_name), axis=2)[:, :n_slots]
    return count, slot, pos_of_slot, cum, candidates


def position_rules(g: Grow, d, sp, slot, n_slots: int, candidates):
    """Each open position's rule ``(ok, gain, thresholds, missing_right, features)`` from its slot's
    best split ``sp`` (the null rule where no slot or no positive gain)."""
    at = jnp.minimum(slot, n_slots - 1)
    ok = (slot < n_slots) & (sp.gain[at] > 0)
    gain = sp.gain[at]
    thr = jnp.where(ok, sp.threshold[at], splits_lib.null_threshold(g.n_bins)).astype(jnp.int32)
    mr = ok & sp.missing_right[at]
    pos_f = jnp.where(ok, sp.feature[at], 0).astype(jnp.int32)
    if candidates is not None:
        slot_feature = jnp.take_along_axis(candidates, sp.feature[:, None], axis=1)[:, 0]
        feature = jnp.where(ok, slot_feature[at], 0)
    elif g.subsets is None:
        feature = pos_f
    else:
        feature = jnp.where(ok, g.subsets[d][pos_f], 0)
    return ok, gain, thr, mr, feature.astype(jnp.int32)


def compact_splits(g: Grow, st: CompactState, d, width: int, n_slots: int):
    """Level ``d``'s splits: ``(split, rule, right, kids)``. A split must send rows of non-zero
    weight both ways, else its node is a leaf (the bound of
    :func:`jboost.trees.node_table.node_capacity`). ``kids``: under monotone constraints each
    position's children's bounds ``(lo, hi)``, ``(2, width, K)`` each (left, right), else
    ``None``."""
    count, slot, pos_of_slot, cum, candidates = slot_histograms(g, st, d, width, n_slots)
    mask = None
    if g.masks is not None:
        mask = g.masks[d]
        mask = (mask[st.heap[pos_of_slot]] if mask.shape[0] > 1
                else jnp.broadcast_to(mask[0], (n_slots, mask.shape[-1])))
    if g.groups is not None:
        columns = candidates if candidates is not None else (
            None if g.subsets is None else g.subsets[d])
        mask = interactions.combine(mask, st.used[pos_of_slot], g.groups, columns)
    bounds = None if st.bounds is None else tuple(b[pos_of_slot] for b in st.bounds)
    columns = candidates if candidates is not None else (
        None if g.subsets is None else g.subsets[d])
    sp = node_splits.best_node_splits(g, cum, mask, bounds, columns)
    ok, gain, thr, mr, feature = position_rules(g, d, sp, slot, n_slots, candidates)
    kids = None
    if bounds is not None:  # the slots' children's bounds, read by each position of a slot
        at = jnp.minimum(slot, n_slots - 1)
        features = sp.feature  # each slot's split feature (not its position in the gathered ones)
        if columns is not None:
            columns = jnp.asarray(columns, jnp.int32)
            features = (columns[sp.feature] if columns.ndim == 1
                        else jnp.take_along_axis(columns, sp.feature[:, None], axis=1)[:, 0])
        kids = tuple(jnp.stack([b[at], b[n_slots + at]])
                     for b in node_splits.children_bounds(g, cum, sp, bounds, features))
    null = splits_lib.null_threshold(g.n_bins)
    right = routing.rows_go_right(g.X_binned, st.pos, _ext(feature, 0), _ext(thr, null),
                                  _ext(mr, False), g.n_bins)
    n_right = g.total(histograms.spread_sum((g.takes_part & right).astype(jnp.int32), st.pos,
                                            width + 1))[:width]
    ok = ok & (n_right > 0) & (n_right < count)
    thr = jnp.where(ok, thr, null).astype(jnp.int32)
    mr = ok & mr
    feature = jnp.where(ok, feature, 0).astype(jnp.int32)
    right = right & _ext(ok, False)[st.pos]
    return ok, (feature, thr, mr, jnp.where(ok, gain, 0.0).astype(jnp.float32)), right, kids


def link_level(g: Grow, st: CompactState, d, width: int, split):
    """Number the level's splitting nodes and leaves (in heap order, as the CPU kernel does), point
    the last level's splits at them and give the rows at new leaves their leaf."""
    p = jnp.arange(width, dtype=jnp.int32)
    valid = p < st.n_open
    leafy = valid & ~split
    rank_s = jnp.cumsum(split.astype(jnp.int32)) - 1
    rank_l = jnp.cumsum(leafy.astype(jnp.int32)) - 1
    n_split = jnp.sum(split.astype(jnp.int32))
    node_id = st.node_base + rank_s
    leaf_id = st.leaf_base + rank_l
    # the last level's splits point at their children: nodes or leaves (none at the root)
    half = jnp.maximum(st.parent_splits, 1)
    parent = jnp.where(valid & (jnp.asarray(d, jnp.int32) > 0), st.parent_base + p % half, g.capacity)
    kid = jnp.where(split, node_id, ~leaf_id)
    st = st._replace(
        children=st.children.at[parent, (p >= half).astype(jnp.int32)].set(kid, mode="drop"),
        row_leaf=jnp.where(_ext(leafy, False)[st.pos], _ext(leaf_id, 0)[st.pos], st.row_leaf))
    return st, rank_s, node_id, n_split, leafy


def compact_level(g: Grow, st: CompactState, d, width: int, n_slots: int) -> CompactState:
    """Level ``d`` (static or traced): its splits written into the table, its leaves numbered, the
    next level's open positions (split ``j``'s children at ``j`` and ``n_split + j``)."""
    split, (feature, thr, mr, gain), right, kids = compact_splits(g, st, d, width, n_slots)
    st, rank_s, node_id, n_split, leafy = link_level(g, st, d, width, split)
    put = jnp.where(split, node_id, g.capacity)
    nxt = 2 * min(n_slots, width)
    q = jnp.arange(nxt, dtype=jnp.int32)
    half = jnp.maximum(n_split, 1)
    at = jnp.where(split, rank_s, nxt // 2)
    of_split = lambda a: jnp.zeros((nxt // 2 + 1,) + a.shape[1:], a.dtype).at[at].set(  # noqa: E731
        a, mode="drop")[:nxt // 2][jnp.minimum(q % half, nxt // 2 - 1)]  # split j's: j, n_split + j
    used, bounds = st.used, st.bounds
    if used is not None:  # both children: the path's features and the split's
        used = of_split(interactions.with_split(used, feature, split))
    if bounds is not None:  # the left child's bounds at j, the right child's at n_split + j
        right_side = (q >= half)[:, None]
        bounds = tuple(jnp.where(right_side, of_split(b[1]), of_split(b[0])) for b in kids)
    new_pos = _ext(rank_s, 0)[st.pos] + jnp.where(right, n_split, 0)
    return st._replace(
        features=st.features.at[put].set(feature, mode="drop"),
        thresholds=st.thresholds.at[put].set(thr, mode="drop"),
        missing_right=st.missing_right.at[put].set(mr, mode="drop"),
        gains=st.gains.at[put].set(gain, mode="drop"),
        level_counts=st.level_counts.at[d].set(n_split),
        heap=of_split(st.heap) + jnp.where(
            q >= half, jnp.left_shift(jnp.int32(1), jnp.asarray(d, jnp.int32)), 0),
        pos=jnp.where(_ext(split, False)[st.pos], new_pos, nxt),
        parent_base=st.node_base, parent_splits=n_split, used=used, bounds=bounds,
        node_base=st.node_base + n_split,
        leaf_base=st.leaf_base + jnp.sum(leafy.astype(jnp.int32)),
        n_open=2 * n_split)


def grow_compact(g: Grow):
    """The compact levels written into a table of ``g.capacity`` nodes: ``(fields, leaf)``, as
    :func:`grow_dense`; no array is ``2**d`` wide."""
    early, steady, slots, widths = compact_plan(g)
    depth, i32 = g.depth, (lambda v: jnp.asarray(v, jnp.int32))
    state = compact_start(g, widths[0])
    if early:  # the shallow levels: one loop, ended when no node is open
        state = lax.while_loop(
            lambda c: (c[0] < early) & (c[1].n_open > 0),
            lambda c: (c[0] + 1, compact_level(g, c[1], c[0], widths[0], slots[0])),
            (i32(0), state))[1]
    for d in range(early, steady):
        state = compact_level(g, state, d, widths[d], slots[d])
    if steady < depth:  # the deep levels of one width: a loop, ended when no node is open
        state = lax.while_loop(
            lambda c: (c[0] < depth) & (c[1].n_open > 0),
            lambda c: (c[0] + 1, compact_level(g, c[1], c[0], widths[steady], slots[steady])),
            (i32(steady), state))[1]
    # below the deepest level every open node is a leaf
    state = link_level(g, state, depth, widths[depth], jnp.zeros((widths[depth],), bool))[0]
    sums = g.total(histograms.spread_sum(g.payload, state.row_leaf, g.capacity + 1))
    reached = g.total(histograms.spread_sum(g.takes_part.astype(jnp.int32), state.row_leaf,
                                            g.capacity + 1))
    values = node_table.table_leaf_values(state.children, state.node_base, sums, reached, depth,
                                          g.k, g.l2, g.min_child_weight, g.criterion)
    fields = (state.features, state.thresholds, jnp.zeros((g.capacity,), jnp.float32),
              state.missing_right, state.children, values, state.gains, state.level_counts)
    return fields, state.row_leaf
