"""A depth-wise level's per-node steps: eligible features (masks, subsets, per-node draws), gains,
children sums and row routing."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from jboost.trees import monotone, routing, splits as splits_lib


def node_masks(feature_masks, feature_subsets, depth: int, n_features: int):
    """``(subsets, masks)``: per-level ``(depth, m)`` or per-node (a list of ``(2**d, m)``) subsets
    to gather, or ``None``; and the per-node masks of the eligible features in the gathered
    coordinates, or ``None``."""
    per_level_subsets = None
    masks = None
    if feature_masks is not None:
        fm = jnp.asarray(feature_masks, bool)
        masks = fm[:, None, :] if fm.ndim == 2 else fm
    if isinstance(feature_subsets, (list, tuple)):  # per node, one (2**d, m) array per level
        levels = [jnp.asarray(s, jnp.int32) for s in feature_subsets]
        if len(levels) != depth or any(s.ndim != 2 or s.shape[0] != 1 << d for d, s in enumerate(levels)):
            raise ValueError(f"feature_subsets as a list must hold one (2**d, m) array per level d "
                             f"< depth={depth}; got shapes {[tuple(s.shape) for s in levels]}.")
        feature_subsets = None if levels and levels[0].shape[-1] >= n_features else levels
        if feature_subsets is None:  # every feature at every node
            return None, masks
        if masks is not None:  # the masks in the subsets' coordinates
            masks = [jnp.take_along_axis(jnp.broadcast_to(masks[d][:1 << d], (1 << d, n_features)),
                                         levels[d], axis=1) for d in range(depth)]
        return levels, masks
    if feature_subsets is not None:
        fs = jnp.asarray(feature_subsets, jnp.int32)
        if fs.shape[-1] >= n_features:
            pass  # sorted and distinct: every feature
        elif fs.ndim == 2:  # one subset per level: histograms of those features only
            per_level_subsets = fs
            if masks is not None:  # the masks in the subsets' coordinates
                masks = jnp.stack([masks[d][:, fs[d]] for d in range(depth)])
        else:  # one subset per node: histograms of each node's own m gathered features
            return node_masks(feature_masks, [fs[d, :1 << d] for d in range(depth)], depth,
                               n_features)
    return per_level_subsets, masks


def node_children_sums(cum, features, thresholds, missing_right):
    """``(2L, C)`` the children's sums of a level's ``L`` nodes, each split at its own rule, read
    off the ``(F, L, B, C)`` cumulative histograms (node ``j``'s children: ``j`` and ``j + L``)."""
    own = cum[features, jnp.arange(cum.shape[1])]                  # (L, B, C)
    return routing.children_sums(own, thresholds, missing_right)


def node_gains(cum, l2, min_child_weight, missing: bool = True,
               criterion: splits_lib.SplitCriterion = splits_lib.NEWTON):
    """``(L, F, B - 1, 2)`` each node's gains from a level's ``(F, L, B, C)`` cumulative histograms,
    summed over the outputs in the kernel's order (:func:`jboost.trees.splits.sum_outputs_16`)."""
    return jax.vmap(lambda c: splits_lib.split_gains_cumulative(
        c[:, None], l2, min_child_weight, missing, criterion,
        output_sum=splits_lib.sum_outputs_16), in_axes=1)(cum)


def best_node_splits(g, cum, mask=None, bounds=None, columns=None) -> splits_lib.Split:
    """Each node's first best split from its ``(F', S, B, C)`` cumulative histograms, with the
    settings of a grower ``g``; ``mask (S, F')``: the features each node may split on;
    ``bounds``: the nodes' ``(S, K)`` ``(lo, hi)`` under ``g.monotone``; ``columns``: the features
    ``cum`` gathered, ``(F',)`` for every node or ``(S, F')`` per node (``None``: every one)."""
    if bounds is None:
        gains = node_gains(cum, g.l2, g.min_child_weight, g.missing, g.criterion)  # (S, F', B-1, 2)
    else:
        signs = jnp.asarray(g.monotone, jnp.int32)
        if columns is not None:  # the gathered features' signs: (F',) or (F', S)
            signs = signs[jnp.asarray(columns, jnp.int32)]
            signs = signs if signs.ndim == 1 else signs.T
        gains = monotone.node_gains(cum, *bounds, signs, g.l2, g.min_child_weight, g.missing)
    if mask is None:
        return jax.vmap(lambda gn: splits_lib.best_split_of_gains(gn, min_split_gain=g.min_split_gain))(gains)
    return jax.vmap(lambda gn, mn: splits_lib.best_split_of_gains(
        gn, min_split_gain=g.min_split_gain, feature_mask=mn))(gains, mask)


def _mix(x):
    """lowbias32, a bijective mix of ``uint32`` values (the kernel's ``Mix``, depthwise.cc)."""
    x = x ^ jnp.right_shift(x, jnp.uint32(16))
    x = x * jnp.uint32(0x7FEB352D)
    x = x ^ jnp.right_shift(x, jnp.uint32(15))
    x = x * jnp.uint32(0x846CA68B)
    return x ^ jnp.right_shift(x, jnp.uint32(16))


def feature_seed(key) -> jax.Array:
    """``(2,)`` uint32: the words of ``key`` that :func:`node_features` hashes."""
    return jax.random.bits(key, (2,), jnp.uint32)


def node_features(key, level: int, nodes, n_features: int, m: int):
    """``(len(nodes), m)`` int32: the sorted random features of ``nodes`` of level ``level``, the
    CPU kernel's draws too (docs/trees.md, "Per-node feature draws")."""
    seed = feature_seed(key)
    golden = jnp.uint32(0x9E3779B9)
    a = _mix(seed[0] ^ _mix(jnp.uint32(level) ^ golden))
    c = _mix(_mix(a ^ jnp.asarray(nodes).astype(jnp.uint32)) ^ seed[1])          # (S,)
    u = _mix(c[:, None] + jnp.arange(n_features, dtype=jnp.uint32)[None, :] * golden)
    return jnp.sort(jnp.argsort(u, axis=1)[:, :m], axis=1).astype(jnp.int32)


def children_bounds(g, cum, split: splits_lib.Split, bounds, features=None):
    """The ``(2S, K)`` bounds ``(lo, hi)`` of the children of ``S`` nodes of ``bounds`` split by
    ``split`` (its features: positions in ``cum``'s; ``features``: the features they stand for,
    default the same; a null split constrains nothing), left children first
    (:func:`jboost.trees.monotone.children_bounds`)."""
    sums = node_children_sums(cum, split.feature, split.threshold, split.missing_right)
    features = split.feature if features is None else features
    sign = jnp.where(split.gain > 0, jnp.asarray(g.monotone, jnp.int32)[features], 0)
    return monotone.children_bounds(sums, *bounds, sign[:, None], g.l2)


def route_level(X_binned, leaf, feature, thr, mr, d: int, n_bins: int):
    """Each row's node at level ``d + 1`` of the dense heap: its node's rule read on its bin sets
    bit ``d``."""
    right = routing.rows_go_right(X_binned, leaf, feature, thr, mr, n_bins)
    return leaf + jnp.left_shift(right.astype(jnp.int32), d)
