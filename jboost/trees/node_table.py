"""The depth-wise node table's layout: the pointer walk, node capacities and slots, the dense-heap
conversion, padding and trimming, leaf paths and a table's leaf values."""

from __future__ import annotations

from typing import Optional

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from jboost.data import binning
from jboost.trees import routing, splits as splits_lib
from jboost.trees.family import TreeFamily


def walk(features, thresholds, missing_right, children, depth: int, X_t, is_missing):
    """``(n,)`` int32 leaf of every row of one tree by ``max(depth, 1)`` pointer steps (``X_t (F,
    n)`` bins or floats in the units of ``thresholds``; ``is_missing(col)``: the missing values).
    Floats are compared as :func:`jboost.data.binning.clamp_subnormals_jax` gives them (the routing
    rule); bins as they are."""
    n = X_t.shape[1]
    rows = jnp.arange(n, dtype=jnp.int32)

    def step(_, cur):
        i = jnp.maximum(cur, 0)
        col = binning.clamp_subnormals_jax(X_t[features[i], rows].astype(thresholds.dtype))
        right = routing.goes_right(col, binning.clamp_subnormals_jax(thresholds[i]), missing_right[i],
                                   is_missing(col))
        return jnp.where(cur >= 0, children[i, right.astype(jnp.int32)], cur)

    # A loop, not one copy of the step per level: deep trees (depth 30) compile one step.
    return ~lax.fori_loop(0, max(depth, 1), step, jnp.zeros((n,), jnp.int32))


def node_capacity(depth: int, n_rows: int, max_nodes: Optional[int] = None) -> int:
    """Static node slots of a tree's table: ``2**D - 1``; with ``max_nodes`` (the compact path) also
    at most the levels' histogram slots and ``n_rows - 1``. At least 1."""
    cap = (1 << depth) - 1
    if max_nodes is not None:
        slots = sum(node_slots(n_rows, int(max_nodes), d) for d in range(depth))
        cap = min(cap, slots, n_rows - 1)
    return max(1, cap)


def dense_table(features, thresholds, borders, missing_right, gains, values, capacity: int):
    """One tree of the dense heap layout as the fields of a table of ``capacity`` nodes, and
    ``(2**D,)`` the table leaf of each dense leaf."""
    n_rules = features.shape[-1]
    depth = (n_rules + 1).bit_length() - 1
    k = values.shape[-1]
    split = gains > 0
    present, split_at, leaf_at = jnp.ones((1,), bool), [], []
    for d in range(depth):
        sd = present & split[(1 << d) - 1:(2 << d) - 1]
        split_at.append(sd)
        leaf_at.append(present & ~sd)
        present = jnp.concatenate([sd, sd])
    leaf_at.append(present)
    is_node = jnp.concatenate(split_at) if depth else jnp.zeros((0,), bool)     # (2**D - 1,)
    is_leaf = jnp.concatenate(leaf_at)                                          # (2**(D+1) - 1,)
    node_id = jnp.cumsum(is_node.astype(jnp.int32)) - 1
    leaf_id = jnp.cumsum(is_leaf.astype(jnp.int32)) - 1
    heap_j = np.concatenate([np.arange(1 << d) for d in range(depth + 1)]).astype(np.int32)
    # Each rule's children: heap nodes (d + 1, j) and (d + 1, j + 2**d), flat 2**(d+1) - 1 + ...
    kids = []
    for d in range(depth):
        j = np.arange(1 << d)
        flat = np.stack([(2 << d) - 1 + j, (2 << d) - 1 + j + (1 << d)], axis=-1)   # (2**d, 2)
        inner = (jnp.concatenate([is_node, jnp.zeros((1 << depth,), bool)])[flat]
                 if d + 1 < depth else jnp.zeros(flat.shape, bool))
        node_of = jnp.concatenate([node_id, jnp.zeros((1 << depth,), jnp.int32)])[flat]
        kids.append(jnp.where(inner, node_of, ~leaf_id[flat]))
    kids = jnp.concatenate(kids) if depth else jnp.zeros((0, 2), jnp.int32)
    at = jnp.where(is_node, node_id, capacity)  # rules that do not split: dropped
    null = jnp.argmax(~split) if depth else 0   # a rule that does not split: the null rule
    def fill(a):  # the null rule's fields, then the splitting rules'
        empty = jnp.full((capacity,) + a.shape[1:], a[null] if depth else 0, a.dtype)
        return empty.at[at].set(a, mode="drop")

    features_t, thresholds_t, borders_t, missing_t = (
        fill(features), fill(thresholds), fill(borders), fill(missing_right))
    gains_t = jnp.zeros((capacity,), gains.dtype).at[at].set(gains, mode="drop")
    children_t = jnp.full((capacity, 2), -1, jnp.int32).at[at].set(kids, mode="drop")
    leaf_at_id = jnp.where(is_leaf, leaf_id, capacity + 1)
    values_t = jnp.zeros((capacity + 1, k), values.dtype).at[leaf_at_id].set(values[heap_j], mode="drop")
    dense_to_table = jnp.zeros((1 << depth,), jnp.int32).at[jnp.where(is_leaf, heap_j, 1 << depth)].set(
        leaf_id, mode="drop")
    counts = jnp.stack([jnp.sum(s.astype(jnp.int32)) for s in split_at]) if depth else jnp.zeros((0,), jnp.int32)
    table = (features_t, thresholds_t, borders_t, missing_t, children_t, values_t, gains_t, counts)
    return table, dense_to_table


def pad_nodes(trees: TreeFamily, capacity: int, n_bins: int) -> TreeFamily:
    """``trees`` with ``capacity`` node slots (at least their own): null nodes and zero leaves
    added, which no row reaches."""
    n = trees.features.shape[-1]
    if capacity < n:
        raise ValueError(f"pad_nodes: capacity={capacity} is below the trees' {n} node slots.")
    if capacity == n:
        return trees
    extra = capacity - n

    def pad(a, value, axis):  # host arrays stay on the host (numpy: no compilation per shape)
        widths = [(0, 0)] * a.ndim
        widths[axis] = (0, extra)
        return (np.pad if isinstance(a, np.ndarray) else jnp.pad)(a, widths, constant_values=value)

    return trees._replace(
        features=pad(trees.features, 0, -1), thresholds=pad(trees.thresholds, n_bins - 2, -1),
        borders=pad(trees.borders, 0.0, -1), missing_right=pad(trees.missing_right, False, -1),
        children=pad(trees.children, -1, -2), leaf_values=pad(trees.leaf_values, 0.0, -2),
        gains=pad(trees.gains, 0.0, -1))


def trim_nodes(trees: TreeFamily, *, host: bool = False) -> TreeFamily:
    """Concrete trees cut to the node slots any of them uses (at least 1), and one leaf more: only
    null nodes and zero leaves go. ``host=True``: every array a numpy copy of its own."""
    counts = np.asarray(trees.level_counts)
    cap = max(1, int(counts.sum(axis=-1).max()) if counts.size else 0)
    if host:
        trees = jax.tree_util.tree_map(np.asarray, trees)
    if cap >= trees.features.shape[-1]:
        return jax.tree_util.tree_map(np.array, trees) if host else trees
    put = np.array if host else jax.device_put
    cut = lambda a, axis: put(np.asarray(a)[(Ellipsis, slice(0, cap)) + (slice(None),) * axis])  # noqa: E731
    return trees._replace(
        features=cut(trees.features, 0), thresholds=cut(trees.thresholds, 0),
        borders=cut(trees.borders, 0), missing_right=cut(trees.missing_right, 0),
        children=cut(trees.children, 1), gains=cut(trees.gains, 0),
        leaf_values=put(np.asarray(trees.leaf_values)[..., :cap + 1, :]),
        level_counts=put(np.asarray(trees.level_counts)))


def paths(tree: TreeFamily):
    """Every leaf's path from the root in one tree: ``(nodes, right, valid)``, each ``(N + 1, D)``,
    root first; steps past a path's end (and of unused leaves) are invalid, node 0, left."""
    n_nodes, depth = tree.features.shape[-1], tree.depth
    n_leaves = n_nodes + 1
    used = tree.gains > 0
    kids = tree.children
    ids = jnp.arange(n_nodes, dtype=jnp.int32)
    side = jnp.broadcast_to(jnp.arange(2, dtype=jnp.int32), (n_nodes, 2))
    parent_of = jnp.broadcast_to(ids[:, None], (n_nodes, 2))
    ok = used[:, None] & jnp.ones((1, 2), bool)
    inner = ok & (kids >= 0)
    at_node = jnp.where(inner, kids, n_nodes)
    at_leaf = jnp.where(ok & (kids < 0), ~kids, n_leaves)
    node_parent = jnp.full((n_nodes,), -1, jnp.int32).at[at_node].set(parent_of, mode="drop")
    node_side = jnp.zeros((n_nodes,), jnp.int32).at[at_node].set(side, mode="drop")
    leaf_parent = jnp.full((n_leaves,), -1, jnp.int32).at[at_leaf].set(parent_of, mode="drop")
    leaf_side = jnp.zeros((n_leaves,), jnp.int32).at[at_leaf].set(side, mode="drop")
    up_nodes, up_right = [], []   # step k: the k-th ancestor step from the leaf
    node, s = leaf_parent, leaf_side
    for _ in range(depth):
        up_nodes.append(node)
        up_right.append((s == 1) & (node >= 0))
        nxt = jnp.where(node >= 0, node_parent[jnp.maximum(node, 0)], -1)
        s = jnp.where(node >= 0, node_side[jnp.maximum(node, 0)], 0)
        node = nxt
    if not depth:
        z = jnp.zeros((n_leaves, 0), jnp.int32)
        return z, z.astype(bool), z.astype(bool)
    up_nodes = jnp.stack(up_nodes, axis=1)                                  # (L, D)
    up_right = jnp.stack(up_right, axis=1)
    length = jnp.sum((up_nodes >= 0).astype(jnp.int32), axis=1)              # (L,)
    step = jnp.arange(depth, dtype=jnp.int32)[None, :]
    valid = step < length[:, None]
    src = jnp.clip(length[:, None] - 1 - step, 0, depth - 1)               # root first
    nodes = jnp.where(valid, jnp.take_along_axis(up_nodes, src, axis=1), 0)
    right = valid & jnp.take_along_axis(up_right, src, axis=1)
    return nodes, right, valid


def _materialised(a):
    """``a`` written by a scatter, so computed once into a buffer: a chain of steps each reading the
    last one's array twice would otherwise fuse into code exponential in the steps on XLA's CPU."""
    return jnp.zeros_like(a).at[jnp.arange(a.shape[0])].set(a)


def table_leaf_values(children, n_split, sums, rows, depth: int, k: int, l2, min_child_weight,
                       criterion: splits_lib.SplitCriterion):
    """``(N + 1, K)`` leaf values of one node table from its leaves' ``sums (N + 1, 2K)`` and row
    counts, with :func:`jboost.trees.family.newton_leaf_values`' parent fallbacks."""
    n_nodes = children.shape[0]
    node = jnp.arange(n_nodes, dtype=jnp.int32)
    used = node < n_split
    f32 = jnp.float32

    def of(c, node_part, leaf_part):  # a child's entry: node c >= 0 or leaf ~c
        return jnp.where((c >= 0)[:, None], node_part[jnp.maximum(c, 0)], leaf_part[jnp.maximum(~c, 0)])

    node_sums = jnp.zeros((n_nodes, sums.shape[1]), f32)
    node_rows = jnp.zeros((n_nodes, 1), rows.dtype)
    for _ in range(depth):  # bottom up: after step s, the nodes of height <= s are right
        node_sums = _materialised(of(children[:, 0], node_sums, sums)
                                  + of(children[:, 1], node_sums, sums))
        node_rows = _materialised(of(children[:, 0], node_rows, rows[:, None])
                                  + of(children[:, 1], node_rows, rows[:, None]))

    def own(s):
        return criterion.value(s[:, :k], s[:, k:], l2)

    def ok(s, r):
        return (r > 0) & (splits_lib.sum_outputs_16(s[:, k:], keepdims=True) >= min_child_weight)

    flat = jnp.where(used[:, None], children, n_nodes + 1)
    parent_of = lambda kids: jnp.full((n_nodes + 1,), -1, jnp.int32).at[kids.reshape(-1)].set(  # noqa: E731
        jnp.repeat(node, 2), mode="drop")
    node_parent = parent_of(jnp.where(flat >= 0, flat, n_nodes + 1))[:n_nodes]
    leaf_parent = parent_of(jnp.where((flat < 0) & used[:, None], ~flat, n_nodes + 1))
    node_own, node_ok = own(node_sums), ok(node_sums, node_rows)
    values = node_own                                   # the root's own value
    for _ in range(depth):  # top down: after step s, the nodes of depth <= s are right
        up = values[jnp.maximum(node_parent, 0)]
        values = _materialised(jnp.where((node_parent < 0)[:, None] | node_ok, node_own, up))
    leaf_own = own(sums)
    up = values[jnp.maximum(leaf_parent, 0)] if n_nodes else leaf_own
    leaves = jnp.where((leaf_parent < 0)[:, None] | ok(sums, rows[:, None]), leaf_own, up)
    return jnp.where((jnp.arange(n_nodes + 1) <= n_split)[:, None], leaves, 0.0)


def node_slots(n_rows: int, max_nodes: int, depth_d):
    """Histogram slots of level ``d`` in the compact path, ``max(1, min(2**d, max_nodes, n_rows //
    2))``: static for an ``int`` level, traced for a traced one."""
    cap = min(max_nodes, n_rows // 2)
    if isinstance(depth_d, (int, np.integer)):
        return max(1, min(1 << int(depth_d), cap))
    wide = jnp.left_shift(jnp.int32(1), jnp.minimum(jnp.asarray(depth_d, jnp.int32), 30))
    return jnp.maximum(jnp.minimum(wide, cap), 1)
