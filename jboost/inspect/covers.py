"""Background covers of a sum of trees and the path-dependent value function they define (shared by SHAP and partial dependence)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax import lax

from jboost.trees import depthwise as depthwise_lib, oblivious, routing


def check_trees(trees) -> None:
    """Raise ``TypeError`` unless ``trees`` are oblivious or depth-wise trees."""
    if not isinstance(trees, (oblivious.ObliviousTrees, depthwise_lib.DepthwiseTrees)):
        raise TypeError(f"SHAP values are implemented for oblivious and depth-wise trees; this "
                        f"model's trees are {type(trees).__name__}.")


# ---- One tree: the value function of every subset of levels, and the Shapley weights -------


def leaf_covers(trees: oblivious.ObliviousTrees, data_t, weight) -> jax.Array:
    """``(T, L)`` float32 background cover (``weight`` sum) of every leaf slot of every tree,
    from feature-major background rows ``data_t (F, m)``."""
    n_leaves = trees.leaf_values.shape[-2]

    def one(tree):
        leaf = tree.leaf_index_raw(data_t)
        return jax.ops.segment_sum(weight, leaf, num_segments=n_leaves)

    return lax.map(one, trees)


def _level_split(c, l: int, total):
    """The covers ``(2**l,)`` of level ``l``'s nodes from their children's covers ``c`` (node
    ``j``'s children: ``j`` and ``j + 2**l``) and ``ratio[b, j]``, the share of the walk that
    goes to child ``b`` (a node of zero cover: the level's proportions over all rows)."""
    child = c.reshape(2, 2**l)
    node = jnp.sum(child, axis=0)
    level = jnp.sum(child, axis=1) / jnp.where(total > 0, total, 1.0)
    return node, jnp.where(node > 0, child / jnp.where(node > 0, node, 1.0), level[:, None])


def subset_values(leaf_values, covers, leaves) -> jax.Array:
    """The path-dependent value ``v(x, S)`` of one tree for every subset ``S`` of its levels.

    Args:
      leaf_values: ``(2**D, K)``.
      covers: ``(2**D,)`` background cover of each leaf (node covers are sums over leaves).
      leaves: ``(X,)`` int32 the leaves of the explained rows (``x`` enters only through them).

    Returns:
      ``(X, 2**D, K)``: ``v[x, S]``, level ``l`` in ``S`` iff bit ``l`` of the index is set
      (docs/inspect.md); one bottom-up pass over the levels.
    """
    n_leaves, k = leaf_values.shape
    depth = n_leaves.bit_length() - 1
    n_x = leaves.shape[0]
    g = jnp.broadcast_to(leaf_values[None, None], (n_x, 1, n_leaves, k))  # (X, S_below, node, K)
    c = covers
    total = jnp.sum(covers)
    for l in range(depth - 1, -1, -1):
        node, ratio = _level_split(c, l, total)
        gb = g.reshape(n_x, g.shape[1], 2, 2**l, k)
        out = jnp.einsum("xsbnk,bn->xsnk", gb, ratio)               # level l not in S
        bit = ((leaves >> l) & 1).reshape(n_x, 1, 1, 1)
        inn = jnp.where(bit == 1, gb[:, :, 1], gb[:, :, 0])          # level l in S: follow x
        g = jnp.stack([out, inn], axis=2).reshape(n_x, 2 * g.shape[1], 2**l, k)
        c = node
    return g[:, :, 0, :]


# --------------------------------------------------------------------------------------------
# Depth-wise trees: path-dependent TreeSHAP leaf by leaf (each root-to-leaf path a product game).
# --------------------------------------------------------------------------------------------


def path_terms(tree, cover, path):
    """One depth-wise tree's ``(ratio (N + 1, D), features (N + 1, D))``: the share of the
    background cover that follows each leaf's path at each of its nodes (docs/inspect.md), and
    the feature of each path node. ``path``: :func:`jboost.trees.node_table.paths`."""
    nodes, right, valid = path
    n_nodes = tree.features.shape[-1]
    n_leaves = tree.leaf_values.shape[-2]
    # Every leaf's cover onto the nodes of its path: the node covers.
    node_cover = jnp.zeros((n_nodes,), cover.dtype).at[nodes].add(
        jnp.where(valid, cover[:, None], jnp.zeros((), cover.dtype)))
    child = tree.children[nodes, right.astype(jnp.int32)]                # (L, D)
    child_cover = jnp.where(child >= 0, node_cover[jnp.maximum(child, 0)],
                            cover[jnp.clip(~child, 0, n_leaves - 1)])
    node = node_cover[nodes]
    share = jnp.where(node > 0, child_cover / jnp.where(node > 0, node, 1.0), 0.5)
    split = tree.gains[nodes] > 0
    ratio = jnp.where(split, share, jnp.where(right, 0.0, 1.0))
    return jnp.where(valid, ratio, 1.0), tree.features[nodes]


def path_agree(tree, x, path):
    """``(N + 1, D)`` bool: whether row ``x (F,)`` goes the way of each leaf's path at each of
    its nodes (a step past the path's end agrees)."""
    nodes, right_path, valid = path
    col = x[tree.features]
    right = routing.float_goes_right(col, tree.borders, tree.missing_right) & (tree.gains > 0)
    return (right[nodes] == right_path) | ~valid


def walk_values(leaf_values, covers, leaves, in_s) -> jax.Array:
    """Friedman's weighted traversal of one oblivious tree for the levels ``in_s`` (``(D,)``
    bool) -> ``(X, K)``: the one-subset case of :func:`subset_values`."""
    n_leaves, k = leaf_values.shape
    depth = n_leaves.bit_length() - 1
    n_x = leaves.shape[0]
    g = jnp.broadcast_to(leaf_values[None], (n_x, n_leaves, k))
    c = covers
    total = jnp.sum(covers)
    for l in range(depth - 1, -1, -1):
        node, ratio = _level_split(c, l, total)
        gb = g.reshape(n_x, 2, 2**l, k)
        out = jnp.einsum("xbnk,bn->xnk", gb, ratio)
        bit = ((leaves >> l) & 1).reshape(n_x, 1, 1)
        inn = jnp.where(bit == 1, gb[:, 1], gb[:, 0])
        g = jnp.where(in_s[l], inn, out)
        c = node
    return g[:, 0, :]
