"""Background covers of a sum of trees and the path-dependent value function they define (shared by SHAP and partial dependence)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax import lax

from jboost.trees import depthwise as depthwise_lib
from jboost.trees import oblivious
from jboost.trees import routing


def check_trees(trees) -> None:
    """Raise ``TypeError`` unless ``trees`` are oblivious or depth-wise trees."""
    if not isinstance(trees, (oblivious.ObliviousTrees, depthwise_lib.DepthwiseTrees)):
        raise TypeError(f"SHAP values are implemented for oblivious and depth-wise trees; this "
                        f"model's trees are {type(trees).__name__}.")


# --------------------------------------------------------------------------------------------
# One tree: the value function of every subset of levels, and the Shapley weights.
# --------------------------------------------------------------------------------------------


def leaf_covers(trees: oblivious.ObliviousTrees, data_t, weight) -> jax.Array:
    """``(T, L)`` float32 background cover (row count, or ``weight`` sum) of every leaf of
    every tree (one leading tree axis; ``L`` leaf slots: ``2**D`` for oblivious trees, ``N + 1``
    for depth-wise ones), from feature-major background rows ``data_t (F, m)``."""
    n_leaves = trees.leaf_values.shape[-2]

    def one(tree):
        leaf = tree.leaf_index_raw(data_t)
        return jax.ops.segment_sum(weight, leaf, num_segments=n_leaves)

    return lax.map(one, trees)


def subset_values(leaf_values, covers, leaves) -> jax.Array:
    """The path-dependent value ``v(x, S)`` of one tree for every subset ``S`` of its levels.

    Args:
      leaf_values: ``(2**D, K)``.
      covers: ``(2**D,)`` background cover of each leaf (node covers are sums over leaves).
      leaves: ``(X,)`` int32 the leaves of the explained rows (``x`` enters only through them).

    Returns:
      ``(X, 2**D, K)``: ``v[x, S]`` with level ``l`` in ``S`` iff bit ``l`` of the index is set
      (a level of ``S`` follows ``x``; any other splits the walk by its children's covers; a
      node of zero cover splits it by the level's proportions over all background rows).
      One bottom-up pass over the levels: ``O(D 2**D)`` per leaf.
    """
    n_leaves, k = leaf_values.shape
    depth = n_leaves.bit_length() - 1
    n_x = leaves.shape[0]
    g = jnp.broadcast_to(leaf_values[None, None], (n_x, 1, n_leaves, k))  # (X, S_below, node, K)
    c = covers
    total = jnp.sum(covers)
    for l in range(depth - 1, -1, -1):
        # Nodes of level l + 1 are  node + b * 2**l  (bit l of the leaf index is level l).
        child = c.reshape(2, 2**l)                                   # [b, node]
        node = jnp.sum(child, axis=0)
        level = jnp.sum(child, axis=1) / jnp.where(total > 0, total, 1.0)
        ratio = jnp.where(node > 0, child / jnp.where(node > 0, node, 1.0), level[:, None])
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
    background cover that follows each leaf's path at each of its nodes (``cover(child) /
    cover(node)``, a node's cover the sum of the covers of the leaves below it; a node that does
    not split sends everything left; a split node no background row reaches splits by halves;
    a step past the path's end is 1) and the feature of each path node. ``cover`` ``(N + 1,)``
    the leaves' covers, ``path`` :func:`jboost.trees.node_table.paths` of the tree."""
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
    its nodes (a node that does not split sends every row left; a step past the path's end
    agrees)."""
    nodes, right_path, valid = path
    col = x[tree.features]
    right = routing.float_goes_right(col, tree.borders, tree.missing_right) & (tree.gains > 0)
    return (right[nodes] == right_path) | ~valid


def walk_values(leaf_values, covers, leaves, in_s) -> jax.Array:
    """Friedman's weighted traversal of one oblivious tree for a set of levels: a level in
    ``in_s`` (``(D,)`` bool) follows the walk's own branch (bit ``l`` of ``leaves``), any other
    splits the walk between its children in proportion to their ``covers`` (a node of zero
    cover: by its level's proportions). ``leaf_values`` ``(2**D, K)``, ``covers`` ``(2**D,)``,
    ``leaves`` ``(X,)`` -> ``(X, K)``; ``O(2**D)`` per row. The one-subset case of
    :func:`subset_values` (the same value function)."""
    n_leaves, k = leaf_values.shape
    depth = n_leaves.bit_length() - 1
    n_x = leaves.shape[0]
    g = jnp.broadcast_to(leaf_values[None], (n_x, n_leaves, k))
    c = covers
    total = jnp.sum(covers)
    for l in range(depth - 1, -1, -1):
        child = c.reshape(2, 2**l)
        node = jnp.sum(child, axis=0)
        level = jnp.sum(child, axis=1) / jnp.where(total > 0, total, 1.0)
        ratio = jnp.where(node > 0, child / jnp.where(node > 0, node, 1.0), level[:, None])
        gb = g.reshape(n_x, 2, 2**l, k)
        out = jnp.einsum("xbnk,bn->xnk", gb, ratio)
        bit = ((leaves >> l) & 1).reshape(n_x, 1, 1)
        inn = jnp.where(bit == 1, gb[:, 1], gb[:, 0])
        g = jnp.where(in_s[l], inn, out)
        c = node
    return g[:, 0, :]
