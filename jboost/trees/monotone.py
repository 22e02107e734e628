"""Monotone constraints: a model whose raw scores never decrease (``+1``) or never increase
(``-1``) in a chosen feature, every other feature held fixed (``monotone_constraints=``).

Enforced exactly, as XGBoost and LightGBM do (XGBoost's "Monotonic constraints" tutorial): every
node carries bounds ``[lo, hi]`` on the values of the leaves below it. A split on a constrained
feature gives its two children the values ``w_left``, ``w_right`` of their Newton steps clipped to
the node's bounds, and the midpoint ``m = (w_left + w_right) / 2`` splits the bounds: for ``+1``
the left child's leaves get ``hi = min(hi, m)`` and the right child's ``lo = max(lo, m)`` (``-1``:
the other way round). Every final leaf value (after the loss's leaf refit, before shrinkage) is
clipped to its bounds, so every leaf left of a constrained split is at most ``m`` and every leaf
right of it at least ``m``: as the feature grows, a row can only move from a left subtree to a
right one, and the tree's value never decreases. A positive learning rate and the sum of trees
(in one fixed order, float rounding being monotone) keep it so.

**Oblivious trees**: one level splits every node of the level on the same feature and border; each
node gets its own midpoint. A node whose children's clipped values are out of order (``w_left >
w_right`` for ``+1``) is pooled, as isotonic regression pools two values: both children at the
node's own clipped value, its midpoint, and no gain, so one node never vetoes a split the level's
other nodes gain by. A level's gain sums its ordered nodes' Newton gains of the clipped values,
``-(2 G w + (H + l2) w^2)`` per child minus the parent's. A feature used by several levels
(different borders) is then monotone along each of them, hence along the feature. Each output of a multi-output model is constrained on its own.

**Depth-wise and loss-guided trees** (node tables): each node carries its own bounds; a candidate
whose children's clipped values are out of order is refused, as XGBoost and LightGBM refuse it
(:func:`node_gains`); the final clip reads each leaf's bounds off the fitted table
(:func:`table_bounds`).

Missing values go where the split sends them: the constraint orders the non-missing values only.
See docs/guide/constraints.md.
"""

from __future__ import annotations

from typing import Optional

import jax
import jax.numpy as jnp
import numpy as np

from jboost._native import newton
from jboost.trees import family, histograms, routing

#: The values of a constraint: increasing, none, decreasing.
SIGNS = (-1, 0, 1)


def resolve(constraints, n_features: int, names=None) -> Optional[tuple]:
    """The constraints as a tuple of ``n_features`` signs in ``{-1, 0, 1}`` (``None`` when there
    are none or all are 0), from a sequence of ``n_features`` signs or a mapping of feature names
    (a DataFrame's columns) or indices to signs; an error names the argument and the fix."""
    if constraints is None:
        return None
    if isinstance(constraints, dict):
        signs = [0] * n_features
        known = list(names) if names is not None else []
        for key, sign in constraints.items():
            if isinstance(key, str):
                if key not in known:
                    raise ValueError(f"monotone_constraints names feature {key!r}, which X does "
                                     f"not have (its columns: {known[:20]}); name a column of X, "
                                     "or pass a list of one sign per feature.")
                index = known.index(key)
            elif isinstance(key, (int, np.integer)) and 0 <= int(key) < n_features:
                index = int(key)
            else:
                raise ValueError(f"monotone_constraints: key {key!r} is neither a column name nor "
                                 f"a feature index in [0, {n_features}).")
            signs[index] = _sign(sign, key)
    else:
        try:
            values = (list(constraints) if isinstance(constraints, (list, tuple))
                      else list(np.asarray(constraints).ravel()))
        except (TypeError, ValueError):
            values = None
        if values is None or np.ndim(constraints) != 1 or len(values) != n_features:
            raise ValueError(f"monotone_constraints must give one sign (+1, 0 or -1) per feature of "
                             f"X ({n_features}), or map feature names or indices to signs; got "
                             f"{constraints!r}.")
        signs = [_sign(v, i) for i, v in enumerate(values)]
    return tuple(signs) if any(signs) else None


def _sign(value, key) -> int:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer, float,
                                                                     np.floating)) \
            or value not in SIGNS:
        raise ValueError(f"monotone_constraints[{key!r}] must be +1 (increasing), 0 (free) or -1 "
                         f"(decreasing); got {value!r}.")
    return int(value)


def weight_score(G, H, w, l2):
    """The Newton objective decrease ``-(2 G w + (H + l2) w^2)`` of a node of sums ``G, H`` whose
    value is ``w`` (``G^2 / (H + l2)`` at the unconstrained ``w = -G / (H + l2)``)."""
    return -(2.0 * G * w + (H + l2) * w * w)


def clipped_value(G, H, lo, hi, l2):
    """The Newton value ``-G / (H + l2)`` clipped to ``[lo, hi]`` (0 where ``H + l2 <= 0``)."""
    return jnp.clip(newton.newton_value(G, H, l2), lo, hi)


def _split_gains(cum, lo, hi, signs, l2, min_child_weight, missing: bool, keep):
    """The gains of the candidates ``(feature, threshold, missing direction)`` of ``L`` nodes from
    ``(F, L, B, 2K)`` cumulative histograms, children's values clipped to their node's ``(L, K)``
    bounds: ``keep(gain, ok, ordered)`` of each direction's ``(F, L, B - 1)`` Newton gains, where
    both children hold ``min_child_weight`` (``ok``) and their values are in order for the
    feature's sign (``signs``: ``(F,)`` int32, or ``(F, L)`` when each node gathered its own
    features), stacked on a last axis of 2 (``missing=False``: direction 1 is ``-inf``)."""
    n_bins = cum.shape[2]
    k = cum.shape[-1] // 2
    present = cum[:, :, : n_bins - 1, :]                 # (F, L, B-1, 2K) left sums
    total = cum[:, :, n_bins - 1:, :]                    # (F, L, 1, 2K)
    missing_sums = total - cum[:, :, n_bins - 2: n_bins - 1, :]
    lo_, hi_ = lo[None, :, None, :], hi[None, :, None, :]

    def node(s):
        w = clipped_value(s[..., :k], s[..., k:], lo_, hi_, l2)
        return w, jnp.sum(weight_score(s[..., :k], s[..., k:], w, l2), axis=-1)

    _, parent = node(total)
    sign = signs.astype(jnp.float32)
    sign = sign[:, None, None, None] if sign.ndim == 1 else sign[:, :, None, None]

    def direction(left):
        right = total - left
        w_left, s_left = node(left)
        w_right, s_right = node(right)
        ok = ((jnp.sum(left[..., k:], axis=-1) >= min_child_weight)
              & (jnp.sum(right[..., k:], axis=-1) >= min_child_weight))
        ordered = jnp.all(sign * (w_right - w_left) >= 0, axis=-1)  # (F, L, B-1)
        return keep(s_left + s_right - parent, ok, ordered)

    with_left = direction(present + missing_sums)
    if not missing:
        return jnp.stack([with_left, jnp.full_like(with_left, -jnp.inf)], axis=-1)
    return jnp.stack([with_left, direction(present)], axis=-1)


def level_gains(cum, lo, hi, signs, l2, min_child_weight, missing: bool = True):
    """The ``(F, B - 1, 2)`` gains of one oblivious level's candidates under the constraints
    (``_split_gains``), summed over its ``L`` nodes: a node whose children are out of order
    adds no gain (pooled)."""
    return _split_gains(cum, lo, hi, signs, l2, min_child_weight, missing,
                        lambda gain, ok, ordered: jnp.sum(jnp.where(ok & ordered, gain, 0.0), axis=1))


def node_gains(cum, lo, hi, signs, l2, min_child_weight, missing: bool = True):
    """``(L, F, B - 1, 2)`` each node's own gains under the constraints (``_split_gains``),
    for depth-wise and loss-guided trees: a candidate whose children are out of order is refused
    (``-inf``), as XGBoost and LightGBM refuse it."""
    gains = _split_gains(cum, lo, hi, signs, l2, min_child_weight, missing,
                         lambda gain, ok, ordered: jnp.where(ok & ordered, gain, -jnp.inf))
    return jnp.moveaxis(gains, 1, 0)


def children_bounds(child_sums, lo, hi, sign, l2):
    """The ``(2L, K)`` bounds of the children of ``L`` nodes of bounds ``lo, hi`` ``(L, K)`` split
    on a feature of ``sign`` (traced int; 0: the children inherit the bounds), from the
    children's ``(2L, 2K)`` sums, left children first (a child ``j`` of node ``j mod L``)."""
    n, k = lo.shape[0], lo.shape[-1]
    lo2, hi2 = jnp.tile(lo, (2, 1)), jnp.tile(hi, (2, 1))
    w = clipped_value(child_sums[:, :k], child_sums[:, k:], lo2, hi2, l2)
    pooled = clipped_value(child_sums[:n, :k] + child_sums[n:, :k],
                           child_sums[:n, k:] + child_sums[n:, k:], lo, hi, l2)
    ordered = jnp.all(jnp.asarray(sign, jnp.float32) * (w[n:] - w[:n]) >= 0, axis=-1,
                      keepdims=True)
    mid = jnp.where(ordered, 0.5 * (w[:n] + w[n:]), pooled)  # out of order: pooled at its value
    up, down = sign > 0, sign < 0
    left_lo = jnp.where(down, jnp.maximum(lo, mid), lo)
    left_hi = jnp.where(up, jnp.minimum(hi, mid), hi)
    right_lo = jnp.where(up, jnp.maximum(lo, mid), lo)
    right_hi = jnp.where(down, jnp.minimum(hi, mid), hi)
    return (jnp.concatenate([left_lo, right_lo], axis=0),
            jnp.concatenate([left_hi, right_hi], axis=0))


def unbounded(n_nodes: int, k: int):
    """``(lo, hi)`` of ``n_nodes`` nodes with no bound: ``-inf`` and ``+inf``, ``(n_nodes, K)``."""
    return (jnp.full((n_nodes, k), -jnp.inf, jnp.float32),
            jnp.full((n_nodes, k), jnp.inf, jnp.float32))


def oblivious_bounds(features, gains, leaf_sums, signs, l2):
    """The ``(2**D, K)`` bounds ``(lo, hi)`` of an oblivious tree's leaves, level by level from its
    ``(2**D, 2K)`` leaf sums (a level of gain 0, a null split, constrains nothing)."""
    depth = features.shape[-1]
    k = leaf_sums.shape[-1] // 2
    levels = family.node_sums(leaf_sums)  # levels[d]: the (2**d, 2K) sums of level d's nodes
    lo, hi = unbounded(1, k)
    sign_of = jnp.asarray(signs, jnp.int32)
    for d in range(depth):
        sign = jnp.where(gains[d] > 0, sign_of[features[d]], 0)
        lo, hi = children_bounds(levels[d + 1], lo, hi, sign, l2)
    return lo, hi


def table_bounds(children, n_split, features, leaf_sums, signs, l2):
    """The ``(N + 1, K)`` bounds ``(lo, hi)`` of a node table's leaves (depth-wise and loss-guided
    trees, :class:`jboost.trees.depthwise.DepthwiseTrees`) from its ``(N + 1, 2K)`` leaf sums:
    each node's subtree sums bottom-up (a node's children come after it), then its children's
    bounds top-down from its own (:func:`children_bounds`); nodes ``>= n_split`` are null."""
    n, k = children.shape[0], leaf_sums.shape[-1] // 2
    sign_of = jnp.asarray(signs, jnp.int32)

    def child_sums(c, node_sums):
        return jnp.where((c >= 0)[..., None], node_sums[jnp.maximum(c, 0)], leaf_sums[jnp.maximum(~c, 0)])

    def up(t, node_sums):
        i = n - 1 - t
        return node_sums.at[i].set(jnp.sum(child_sums(children[i], node_sums), axis=0))

    node_sums = jax.lax.fori_loop(0, n, up, jnp.zeros((n, 2 * k), jnp.float32))

    def down(i, carry):
        node_lo, node_hi, lo, hi = carry
        real = i < n_split
        kids = children[i]
        sign = jnp.where(real, sign_of[features[i]], 0)
        c_lo, c_hi = children_bounds(child_sums(kids, node_sums), node_lo[i][None], node_hi[i][None],
                                     sign, l2)
        at_node = jnp.where(real & (kids >= 0), kids, n)
        at_leaf = jnp.where(real & (kids < 0), ~kids, n + 1)
        return (node_lo.at[at_node].set(c_lo, mode="drop"), node_hi.at[at_node].set(c_hi, mode="drop"),
                lo.at[at_leaf].set(c_lo, mode="drop"), hi.at[at_leaf].set(c_hi, mode="drop"))

    node_lo, node_hi = unbounded(max(n, 1), k)
    lo, hi = unbounded(n + 1, k)
    return jax.lax.fori_loop(0, n, down, (node_lo, node_hi, lo, hi))[2:]


def leaf_bounds(tree, leaf, grad, hess, signs, l2, axis_name=None):
    """The bounds ``(lo, hi)`` of a tree's leaf slots (an oblivious tree's
    :func:`oblivious_bounds`, a node table's :func:`table_bounds`) from the weighted ``(n, K)``
    ``grad``, ``hess`` of the rows in their ``(n,)`` ``leaf``: clip the final leaf values (before
    shrinkage) to them."""
    n_leaves = tree.leaf_values.shape[-2]
    sums = histograms.spread_sum(jnp.concatenate([grad, hess], axis=-1).astype(jnp.float32),
                                 leaf, n_leaves)
    if axis_name is not None:
        sums = jax.lax.psum(sums, axis_name)
    if hasattr(tree, "children"):  # a node table
        return table_bounds(tree.children, jnp.sum(tree.level_counts), tree.features, sums, signs, l2)
    return oblivious_bounds(tree.features, tree.gains, sums, signs, l2)


def oblivious_level(X_level, payload, leaf, bounds, signs, *, n_leaves: int, n_bins: int, l2,
                    min_child_weight, missing: bool, axis_name=None):
    """One constrained oblivious level: ``(gains (F, B - 1, 2), cum)`` from this level's
    cumulative histograms ``cum`` ``(F, L, B, 2K)`` (``psum``-ed over ``axis_name``) and its
    nodes' ``bounds``."""
    cum = histograms.prefix_sum(histograms.build_histogram(
        X_level, payload, leaf, n_leaves=n_leaves, n_bins=n_bins, axis_name=axis_name), axis=2)
    return level_gains(cum, *bounds, signs, l2, min_child_weight, missing), cum


def next_bounds(cum, split, bounds, signs, l2):
    """The bounds of the next level's nodes after ``split`` (its ``feature`` a position in
    ``cum``'s features and ``signs``; a null split constrains nothing)."""
    child_sums = routing.children_sums(cum[split.feature], split.threshold, split.missing_right)
    sign = jnp.where(split.gain > 0, signs[split.feature], 0)
    return children_bounds(child_sums, *bounds, sign, l2)
