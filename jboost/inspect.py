"""Interpreting fitted ensembles: exact SHAP values of oblivious trees and feature importance.

**SHAP values** (Lundberg et al. 2020, "From local explanations to global understanding with
explainable AI for trees"). A tree's *path-dependent* value function of a feature set ``S`` at a
row ``x`` walks the tree from the root: a level whose feature is in ``S`` sends the walk where
``x`` goes (NaN: the level's missing direction); any other level splits it between the two
children in proportion to their *covers*. ``v(S)`` is the walk's average leaf value, and the
SHAP values are the Shapley values of ``v`` (``v(all) = f(x)``, ``v({}) =`` the cover-weighted
mean leaf value, the *expected value*).

jboost's trees store no covers (no per-node row counts or hessian sums), so the covers are the
row counts (or ``data_weight`` sums) of a **background data set** ``data`` at every node: with
``data`` the training rows (unweighted, squared error: the hessian sums XGBoost stores) this is
exactly TreeSHAP's ``feature_perturbation="tree_path_dependent"``, and the expected value is the
mean prediction over ``data``. ``data=None`` takes the explained rows ``X`` themselves. A node
that no background row reaches splits a walk by its level's split proportions over all rows.

**The algorithm.** In an oblivious tree ``v(S)``
depends on ``x`` only through the leaf ``x`` reaches (which way it goes at each level), so a
depth-``D`` tree has only ``2**D`` distinct SHAP vectors. For each leaf, ``v`` of all ``2**D``
subsets of levels comes from one bottom-up pass over the levels (``O(D 2**D)``); the Shapley
values over the tree's ``p <= D`` distinct features are then one fixed linear map of those
``2**D`` values (a ``(2**D, D)`` weight matrix of the tree's structure; a feature used at
several levels is one player). So each tree costs ``O(D 4**D)`` once (``D <= 10`` and at least
``2**D`` rows: a per-leaf table), and each row and tree costs ``O(D)``: find the leaf, add its ``D`` values --
``O(n T D)`` in all for ``n`` rows and ``T`` trees, against ``O(n T L D**2)`` for the
polynomial TreeSHAP recursion (``L`` leaves). Trees deeper than :data:`MAX_TABLE_DEPTH`
evaluate the same pass per row instead of per leaf (``O(D 2**D)`` per row and tree, still below
the recursion's ``O(2**D D**2)`` on a tree of ``2**D`` leaves).
Interaction values (:func:`shap_interaction_values`) use the Shapley interaction index the same
way (a ``(2**D, D, D)`` map). Everything is exact up to float32 rounding.

**Importance** (:func:`importance`): ESL's relative importance (eq. 10.42-10.43), the summed
split gains, split counts; :func:`permutation_importance` on held-out rows.

Every model of the protocol (:mod:`jboost.model`) is a constant plus a sum of trees (a forest and
bagged boosters average them, ECOC has one output per code bit, a stacked model maps its
learners' leaves by the stacker's coefficients), which is how it is explained; a model with batch
axes (``jax.vmap`` of fits) gives every model's values, the batch axes in front.
"""

from __future__ import annotations

import functools
import math
from typing import NamedTuple, Optional

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from jboost import _compile
from jboost import _validation
from jboost import depthwise
from jboost import losses as losses_lib
from jboost import metrics as metrics_lib
from jboost import model as model_lib
from jboost import tree as tree_lib
from jboost.bagging.boosters import BaggedBoosters
from jboost.bagging.forest import Forest
from jboost.combine.ecoc import ECOCBoosters

#: Trees up to this depth get per-leaf SHAP tables (``O(D 4**D)`` per tree) when there are at
#: least ``2**D`` rows to explain; deeper trees (or fewer rows) are explained row by row
#: (``O(D 2**D)`` per row and tree).
MAX_TABLE_DEPTH = 10

#: Rows explained together by trees deeper than :data:`MAX_TABLE_DEPTH` (bounds the memory).
_ROW_BATCH = 64


class ShapValues(NamedTuple):
    """SHAP values and the expected value they add to (unpacks as ``values, expected_value``).

    ``values``: ``(n, F)`` for one-output models, ``(n, F, K)`` for ``K`` outputs (interaction
    values: ``(n, F, F)`` / ``(n, F, F, K)``); ``expected_value``: ``()`` / ``(K,)``; a batched
    model's batch axes in front of both. Local accuracy: ``values`` summed over the feature
    axis (both feature axes for interactions) plus ``expected_value`` is the raw prediction
    (:func:`jboost.predict`) of every row.
    """

    values: jax.Array
    expected_value: jax.Array


# --------------------------------------------------------------------------------------------
# Every model as a constant plus a sum of trees.
# --------------------------------------------------------------------------------------------


def _zero_after(trees, keep_rounds):
    """Trees with zero leaf values in the rounds (axis 0) where ``keep_rounds`` is False."""
    lv = trees.leaf_values
    keep = keep_rounds.reshape(keep_rounds.shape + (1,) * (lv.ndim - keep_rounds.ndim))
    return trees._replace(leaf_values=jnp.where(keep, lv, jnp.zeros((), lv.dtype)))


def _refuse_bagged_categorical(model) -> None:
    """Bagged boosters with categorical columns: each bag encodes the rows with its own ordered
    target statistics, so no one feature matrix feeds all their trees."""
    if isinstance(model, BaggedBoosters) and getattr(model, "categorical", None) is not None:
        raise TypeError("SHAP values and partial dependence of bagged boosters with categorical "
                        "columns are not defined by one sum of trees (each bag encodes the rows "
                        "with its own ordered target statistics): explain a jboost.fit model, "
                        "or use jboost.inspect.permutation_importance, which predicts rows as "
                        "users hold them.")


def tree_sum(model, n_rounds: Optional[int] = None):
    """One unbatched model as ``(trees, constant, offset)``: its raw scores are
    ``offset + constant + sum_t trees[t].leaf_values[leaf_t(x)]`` (``offset`` may be ``None``).

    ``trees`` are :class:`jboost.ObliviousTrees` with one leading tree axis and leaf values
    ``(T, 2**D, K)`` in the model's output units (a forest's and bagged boosters' averages, an
    ECOC bit's one-hot column, a stacked model's mapped leaves); the stages are those
    :func:`jboost.predict` uses (``n_rounds``, else every round, or up to ``best_round``).
    """
    if hasattr(model, "as_booster") and not isinstance(model, model_lib.Booster):  # stacked
        return tree_sum(model.as_booster(), n_rounds)
    if isinstance(model, model_lib.Booster):
        trees = model.trees
        if n_rounds is None and model.best_round is not None:
            if _validation.is_traced(model.best_round):
                trees = _zero_after(trees, jnp.arange(model.n_rounds) <= model.best_round)
            else:
                n_rounds = int(model.best_round) + 1
        trees = model_lib.first_stages(trees, n_rounds, model.n_rounds)
        return tree_lib.flatten_trees(trees), model.baseline, model.offset
    if isinstance(model, Forest):
        if n_rounds is not None:
            n_rounds = _validation.check_int(n_rounds, "n_rounds", 1, model.n_trees)
        trees = model_lib.first_stages(model.trees, n_rounds, model.n_trees)
        n_used = trees.features.shape[0]
        trees = tree_lib.flatten_trees(trees)
        trees = trees._replace(leaf_values=trees.leaf_values / n_used)
        return trees, jnp.zeros((model.n_outputs,), jnp.float32), None
    if isinstance(model, BaggedBoosters):
        _refuse_bagged_categorical(model)
        if n_rounds is not None:
            n_rounds = _validation.check_int(n_rounds, "n_rounds", 0, model.n_rounds)
            trees = jax.tree_util.tree_map(lambda a: a[:, :n_rounds], model.trees)
        else:
            trees = model.best_trees()
        trees = tree_lib.flatten_trees(trees)
        trees = trees._replace(leaf_values=trees.leaf_values / model.n_bags)
        return trees, jnp.mean(model.baseline, axis=0), None
    if isinstance(model, ECOCBoosters):
        trees = model.trees  # (L, R, 1, ...) one-output learners, one per bit
        if n_rounds is not None:
            m = _validation.check_int(n_rounds, "n_rounds", 0, model.n_rounds)
            trees = jax.tree_util.tree_map(lambda a: a[:, :m], trees)
        n_bits = model.n_bits
        onehot = jnp.eye(n_bits, dtype=jnp.float32)[:, None, None, None, :]  # (L, 1, 1, 1, L)
        trees = trees._replace(leaf_values=trees.leaf_values * onehot)
        return tree_lib.flatten_trees(trees), model.baseline[:, 0], None
    raise TypeError(f"jboost.inspect explains Boosters, Forests, BaggedBoosters, ECOCBoosters and "
                    f"StackedBoosters; got {type(model).__name__}.")


def _check_trees(trees) -> None:
    if not isinstance(trees, (tree_lib.ObliviousTrees, depthwise.DepthwiseTrees)):
        raise TypeError(f"SHAP values are implemented for oblivious and depth-wise trees; this "
                        f"model's trees are {type(trees).__name__}.")


# --------------------------------------------------------------------------------------------
# One tree: the value function of every subset of levels, and the Shapley weights.
# --------------------------------------------------------------------------------------------


def leaf_covers(trees: tree_lib.ObliviousTrees, data_t, weight) -> jax.Array:
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


def _log_factorial(k):
    return lax.lgamma(jnp.asarray(k, jnp.float32) + 1.0)


def _players(features):
    """``(bits (2**D, D), consistent (2**D,), canonical (D,), n_players)`` of one tree's levels:
    level ``l`` plays for its feature's first level ``canonical``; a subset of levels is
    ``consistent`` when each level is in it iff its feature's first level is."""
    depth = features.shape[0]
    levels = jnp.arange(depth)
    first = jnp.argmax(features[:, None] == features[None, :], axis=1)
    canonical = first == levels
    subsets = jnp.arange(2**depth)
    bits = (subsets[:, None] >> levels[None, :]) & 1
    consistent = jnp.all(bits == bits[:, first], axis=1)
    return bits, consistent, canonical, jnp.sum(canonical)


def shapley_weights(features) -> jax.Array:
    """``(2**D, D)`` the map from ``v`` of every subset of levels to the Shapley values of one
    tree's features: ``phi[j] = sum_S W[S, j] v(S)`` for the first level ``j`` of each distinct
    feature (0 for a repeated feature's later levels). ``W[S, j] = w(|S| - 1)`` if ``j`` in
    ``S``, ``-w(|S|)`` if not, ``w(s) = s! (p - s - 1)! / p!`` with ``p`` distinct features,
    over the consistent subsets only (see :func:`_players`)."""
    bits, consistent, canonical, p = _players(features)
    s = jnp.sum(jnp.where(canonical, bits, 0), axis=1)[:, None]  # players in S
    size = jnp.where(bits == 1, s - 1, s)                       # |S \ {j}|
    size = jnp.clip(size, 0, jnp.maximum(p - 1, 0))
    w = jnp.exp(_log_factorial(size) + _log_factorial(p - size - 1) - _log_factorial(p))
    w = jnp.where(bits == 1, w, -w)
    return jnp.where(consistent[:, None] & canonical[None, :], w, 0.0)


def interaction_weights(features) -> jax.Array:
    """``(2**D, D, D)`` the map from ``v`` of every subset of levels to the SHAP interaction
    values of one tree (Lundberg et al. 2020, eq. 9): off the diagonal the Shapley interaction
    index ``sum_{S without i, j} s! (p - s - 2)! / (2 (p - 1)!) [v(S+ij) - v(S+i) - v(S+j) +
    v(S)]``, on it ``phi_i`` minus the row's other entries."""
    bits, consistent, canonical, p = _players(features)
    depth = features.shape[0]
    s = jnp.sum(jnp.where(canonical, bits, 0), axis=1)[:, None, None] - bits[:, :, None] - bits[:, None, :]
    s = jnp.clip(s, 0, jnp.maximum(p - 2, 0))
    w = jnp.exp(_log_factorial(s) + _log_factorial(p - s - 2) - _log_factorial(p - 1)) / 2.0
    sign = ((2 * bits[:, :, None] - 1) * (2 * bits[:, None, :] - 1)).astype(jnp.float32)
    off = ~jnp.eye(depth, dtype=bool)
    pair = canonical[:, None] & canonical[None, :] & off
    w2 = jnp.where(consistent[:, None, None] & pair[None] & (p >= 2), sign * w, 0.0)
    diag = shapley_weights(features) - jnp.sum(w2, axis=2)
    return w2 + jnp.eye(depth, dtype=jnp.float32)[None] * diag[:, :, None]


def _tree_tables(tree, covers, leaves, interactions: bool):
    """One tree's SHAP values (``(X, D, K)``; interactions ``(X, D, D, K)``) at ``leaves`` and
    its expected value ``(K,)``."""
    v = subset_values(tree.leaf_values, covers, leaves)                 # (X, 2**D, K)
    if interactions:
        table = jnp.einsum("xsk,sij->xijk", v, interaction_weights(tree.features))
    else:
        table = jnp.einsum("xsk,sj->xjk", v, shapley_weights(tree.features))
    return table, v[0, 0]


# --------------------------------------------------------------------------------------------
# Depth-wise trees: path-dependent TreeSHAP leaf by leaf (each root-to-leaf path a product game).
# --------------------------------------------------------------------------------------------


def _path_terms(tree, cover, path):
    """One depth-wise tree's ``(ratio (N + 1, D), features (N + 1, D))``: the share of the
    background cover that follows each leaf's path at each of its nodes (``cover(child) /
    cover(node)``, a node's cover the sum of the covers of the leaves below it; a node that does
    not split sends everything left; a split node no background row reaches splits by halves;
    a step past the path's end is 1) and the feature of each path node. ``cover`` ``(N + 1,)``
    the leaves' covers, ``path`` :func:`jboost.depthwise.paths` of the tree."""
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


def _path_agree(tree, x, path):
    """``(N + 1, D)`` bool: whether row ``x (F,)`` goes the way of each leaf's path at each of
    its nodes (a node that does not split sends every row left; a step past the path's end
    agrees)."""
    nodes, right_path, valid = path
    col = x[tree.features]
    right = jnp.where(jnp.isnan(col), tree.missing_right, col > tree.borders) & (tree.gains > 0)
    return (right[nodes] == right_path) | ~valid


def _players_of_paths(fpath, agree, ratio):
    """Each path's players: its distinct features, a feature met at several nodes of the path
    being one player (its first slot) whose ``one`` and ``zero`` fractions are products over
    those nodes; the other slots are null players (``one = zero = 1``), which change no
    Shapley value (so are a path's steps past its end: ``agree`` True, ``ratio`` 1, whatever
    their feature). Returns ``(one, zero)`` ``(..., L, D)`` float32."""
    depth = fpath.shape[-1]
    first = jnp.argmax(fpath[..., :, None] == fpath[..., None, :], axis=-1)     # (L, D)
    owner = first[..., None, :] == jnp.arange(depth)[:, None]                  # (L, U, D)
    one = jnp.prod(jnp.where(owner, agree[..., None, :], True), axis=-1).astype(jnp.float32)
    zero = jnp.prod(jnp.where(owner, ratio[..., None, :], 1.0), axis=-1)
    return one, zero


def _shapley_of_products(one, zero, n_out: int):
    """Shapley weights of the product games ``g(S) = prod_{i in S} one_i prod_{i not in S}
    zero_i`` of ``P`` players: ``(..., P)`` ``(one_u - zero_u) sum_s w(s) e_s`` where ``e_s`` is
    the coefficient of ``t**s`` in ``prod_{i != u} (zero_i + one_i t)`` and ``w(s) = s! (P - s -
    1)! / P!`` (``n_out = 1``); with ``n_out = 2``, the Shapley interaction index ``(..., P, P)``
    of pairs ``u != v``: ``(one_u - zero_u)(one_v - zero_v) sum_s s! (P - s - 2)! / (2 (P -
    1)!) e_s``, ``e_s`` of the players other than ``u, v``."""
    p = one.shape[-1]
    eye = jnp.eye(p, dtype=bool)
    if n_out == 1:
        out_mask = eye                                                  # (U, I): i == u left out
        o, z = one[..., None, :], zero[..., None, :]
    else:
        out_mask = eye[:, None, :] | eye[None, :, :]                    # (U, V, I)
        o, z = one[..., None, None, :], zero[..., None, None, :]
    o = jnp.where(out_mask, 0.0, o)
    z = jnp.where(out_mask, 1.0, z)
    poly = jnp.zeros(o.shape[:-1] + (p + 1,), jnp.float32).at[..., 0].set(1.0)
    for i in range(p):
        shifted = jnp.concatenate([jnp.zeros_like(poly[..., :1]), poly[..., :-1]], axis=-1)
        poly = z[..., i:i + 1] * poly + o[..., i:i + 1] * shifted
    f = math.factorial
    if n_out == 1:
        w = np.array([f(s) * f(p - s - 1) / f(p) if s <= p - 1 else 0.0 for s in range(p + 1)])
        diff = one - zero
        return jnp.sum(poly * jnp.asarray(w, jnp.float32), axis=-1) * diff
    w = np.array([f(s) * f(p - s - 2) / (2 * f(p - 1)) if s <= p - 2 else 0.0 for s in range(p + 1)])
    diff = one - zero
    pair = jnp.sum(poly * jnp.asarray(w, jnp.float32), axis=-1) * diff[..., :, None] * diff[..., None, :]
    return jnp.where(eye, 0.0, pair)


def _explain_depthwise(trees, X, data, weight, interactions: bool):
    """:func:`explain_trees` of depth-wise trees: TreeSHAP's path-dependent value function
    (Lundberg et al. 2020, Algorithm 2) taken leaf by leaf. A tree's ``v(S)`` is the sum over
    its leaves of the leaf value times, along the leaf's path, ``1[x goes the path's way]`` at a
    node whose feature is in ``S`` and the node's cover share otherwise: a product game per
    path, whose Shapley (interaction) values are closed-form polynomial sums
    (:func:`_shapley_of_products`; a feature met twice on a path is one player). The trees are
    node tables (:class:`jboost.depthwise.DepthwiseTrees`): a leaf's path
    (:func:`jboost.depthwise.paths`) is as long as its depth, the steps past its end null
    players. Per row and tree ``O(L D**3)`` for ``L = N + 1`` leaf slots (interactions ``O(L
    D**4)``), fixed shapes: rows in batches of :data:`_ROW_BATCH`, trees a ``lax.scan``."""
    n_features = X.shape[1]
    k = trees.leaf_values.shape[-1]
    covers = leaf_covers(trees, jnp.asarray(data, jnp.float32).T, weight)
    paths = jax.vmap(depthwise.paths)(trees)                                # (T, L, D) each
    ratios, fpaths = jax.vmap(_path_terms)(trees, covers, paths)            # (T, L, D) each
    expected = jnp.einsum("tl,tlk->k", jnp.prod(ratios, axis=-1), trees.leaf_values)
    shape = (n_features, n_features, k) if interactions else (n_features, k)

    def one_row(x):
        def step(acc, args):
            tree, ratio, fpath, path = args
            one, zero = _players_of_paths(fpath, _path_agree(tree, x, path), ratio)  # (L, D)
            phi = _shapley_of_products(one, zero, 1)                                # (L, D)
            contrib = phi[..., None] * tree.leaf_values[:, None, :]                 # (L, D, K)
            if not interactions:
                return acc.at[fpath].add(contrib), None
            pair = _shapley_of_products(one, zero, 2)                              # (L, D, D)
            pc = pair[..., None] * tree.leaf_values[:, None, None, :]
            diag = contrib - jnp.sum(pc, axis=2)                                    # phi_u - sum_v
            acc = acc.at[fpath[:, :, None], fpath[:, None, :]].add(pc)
            return acc.at[fpath, fpath].add(diag), None

        out, _ = lax.scan(step, jnp.zeros(shape, jnp.float32), (trees, ratios, fpaths, paths))
        return out

    values = lax.map(one_row, jnp.asarray(X, jnp.float32), batch_size=_ROW_BATCH)
    return values, expected


# --------------------------------------------------------------------------------------------
# Every row, every tree.
# --------------------------------------------------------------------------------------------


@functools.partial(_compile.jit, static_argnames=("interactions", "per_leaf"))
def explain_trees(trees: tree_lib.ObliviousTrees, X, data, weight, interactions: bool = False,
                  per_leaf: Optional[bool] = None):
    """Exact path-dependent SHAP values of a sum of oblivious trees (one leading tree axis).

    Args:
      trees: the trees, leaf values ``(T, 2**D, K)``, float thresholds filled in.
      X: ``(n, F)`` float32 rows to explain (NaN: missing).
      data: ``(m, F)`` background rows whose counts are the covers.
      weight: ``(m,)`` their weights.
      interactions: static; SHAP interaction values instead.
      per_leaf: static; per-leaf tables (default for depth <= :data:`MAX_TABLE_DEPTH` when the
        rows are at least as many as the leaves) or the same pass per row (``False``: deeper
        trees, or fewer rows than leaves; the same values).

    Returns:
      ``(values, expected)``: ``(n, F, K)`` (interactions ``(n, F, F, K)``) and ``(K,)``, the
      sum over trees (no constant). Per tree ``O(D 4**D)`` for its per-leaf table (depth <=
      :data:`MAX_TABLE_DEPTH`), then per row ``O(D)`` (``O(D**2)`` interactions): the rows are
      vmapped, the trees a ``lax.scan``.
    """
    if isinstance(trees, depthwise.DepthwiseTrees):
        return _explain_depthwise(trees, X, data, weight, interactions)
    n_features = X.shape[1]
    n_leaves, k = trees.leaf_values.shape[-2:]
    depth = n_leaves.bit_length() - 1
    covers = leaf_covers(trees, jnp.asarray(data, jnp.float32).T, weight)
    X_t = jnp.asarray(X, jnp.float32).T
    if per_leaf is None:  # a table costs 2**D leaves' passes, the rows n passes: the fewer
        per_leaf = depth <= MAX_TABLE_DEPTH and 2**depth <= max(X.shape[0], 1)

    if per_leaf:  # every tree's table of its 2**D leaves, then rows gather
        def table(args):
            tree, cover = args
            return _tree_tables(tree, cover, jnp.arange(n_leaves, dtype=jnp.int32), interactions)

        tables, expected = lax.map(table, (trees, covers))
    else:
        expected = jax.vmap(lambda t, c: _tree_tables(t, c, jnp.zeros((1,), jnp.int32),
                                                      interactions)[1])(trees, covers)

    def leaf_table(tree, cover, table, leaf):
        """``(D, K)`` (interactions ``(D, D, K)``) of one row's leaf."""
        if per_leaf:
            return table[leaf]
        return _tree_tables(tree, cover, leaf[None], interactions)[0][0]

    shape = (n_features, n_features, k) if interactions else (n_features, k)

    def one_row(leaves):
        """One row's values from its leaf in every tree ``(T,)``."""
        def step(acc, args):
            tree, cover, table, leaf = args
            contrib = leaf_table(tree, cover, table, leaf)
            f = tree.features
            acc = acc.at[f[:, None], f[None, :]].add(contrib) if interactions else acc.at[f].add(contrib)
            return acc, None

        out, _ = lax.scan(step, jnp.zeros(shape, jnp.float32),
                          (trees, covers, tables if per_leaf else jnp.zeros((covers.shape[0],)), leaves))
        return out

    leaves = jax.vmap(lambda t: t.leaf_index_raw(X_t), out_axes=1)(trees)  # (n, T)
    if per_leaf:
        values = jax.vmap(one_row)(leaves)
    else:
        values = lax.map(one_row, leaves, batch_size=_ROW_BATCH)
    return values, jnp.sum(expected, axis=0)


def _explain(model, X, n_rounds, data, data_weight, interactions: bool) -> ShapValues:
    """SHAP values of rows ``X`` (a DataFrame's columns matched by the model's names). A model
    with categorical columns is explained on the encoded features its trees split on
    (:func:`jboost.categorical.expanded_rows`: indicators, target statistics), then summed by
    input column (:func:`jboost.categorical.sum_by_input`; SHAP values are additive, so local
    accuracy holds per input column)."""
    _refuse_bagged_categorical(model)
    from jboost import categorical

    model_lib._check_model(model)
    encoded = getattr(model, "categorical", None) is not None
    if encoded and model.batch_shape:
        raise ValueError("SHAP values of a batch of models with categorical columns: explain "
                         "each model of the batch on its own (jax.tree_util.tree_map(lambda a: "
                         "a[i], model)); each has its own target statistics.")

    def rows(v, name):
        if encoded:
            return np.asarray(categorical.expanded_rows(model, v), np.float32)
        return _validation.predict_matrix(model_lib._in_order(model, v), model.n_features, name=name)

    X = rows(X, "X")
    if data is None:
        data, data_weight = X, None
    else:
        data = rows(data, "data")
    if data.shape[0] == 0:
        raise ValueError("data has no rows (without data=, the rows X explain themselves): the "
                         "covers of the trees' nodes are background row counts; pass some rows "
                         "(e.g. the training rows) as data=.")
    weight = jnp.asarray(_validation.as_weights(data_weight, data.shape[0], "data_weight", "data"))
    out = _explain_models(model, jnp.asarray(X, jnp.float32), jnp.asarray(data, jnp.float32), weight,
                          n_rounds=n_rounds, interactions=interactions, keeps=_keeps_columns(model))
    if not encoded:
        return out
    values = categorical.sum_by_input(model, out.values, axis=1)
    if interactions:
        values = categorical.sum_by_input(model, values, axis=2)
    return ShapValues(values, out.expected_value)


def _explain_models(model, X, data, weight, *, n_rounds, interactions: bool, keeps: bool) -> ShapValues:
    """Every model of a batch: its sum of trees explained (:func:`explain_trees`, compiled once
    per shape of the trees, whatever the model type)."""

    def one(m):
        trees, constant, offset = tree_sum(m, n_rounds)
        _check_trees(trees)
        values, expected = explain_trees(trees, X, data, weight, interactions=interactions)
        expected = model_lib.add_offset(constant + expected, offset)
        if values.shape[-1] == 1 and not keeps:
            values, expected = values[..., 0], expected[..., 0]
        return ShapValues(values, expected)

    return model_lib._batched(model, one)


def _keeps_columns(model) -> bool:
    loss = getattr(model, "loss", None)
    return isinstance(loss, losses_lib.Loss) and losses_lib.keeps_columns(loss)


def shap_values(model, X, n_rounds: Optional[int] = None, *, data=None,
                data_weight=None) -> ShapValues:
    """Exact SHAP values of every row and feature (path-dependent TreeSHAP; module docstring).

    Args:
      model: any fitted jboost ensemble (Booster from :func:`jboost.fit` or an algorithm,
        Forest, BaggedBoosters, ECOCBoosters: one output per code bit, StackedBoosters), batch
        axes allowed.
      X: ``(n, F)`` rows to explain; NaN is missing (it follows each level's missing direction).
      n_rounds: explain the model of the first ``n_rounds`` stages (as :func:`jboost.predict`).
      data: ``(m, F)`` background rows whose node counts are the trees' covers (the training
        rows for TreeSHAP's path-dependent definition); default ``X``.
      data_weight: ``(m,)`` non-negative weights of ``data`` (e.g. the training weights).

    Returns:
      :class:`ShapValues` ``(values, expected_value)``: ``values`` ``(n, F)`` (``(n, F, K)``
      for ``K`` outputs), summing with ``expected_value`` to :func:`jboost.predict`'s raw scores.
    """
    return _explain(model, X, n_rounds, data, data_weight, interactions=False)


def shap_interaction_values(model, X, n_rounds: Optional[int] = None, *, data=None,
                            data_weight=None) -> ShapValues:
    """Exact SHAP interaction values ``(n, F, F)`` (``(n, F, F, K)`` for ``K`` outputs):
    symmetric, each row summing over ``j`` to :func:`shap_values`, all entries with
    ``expected_value`` to the raw prediction (Lundberg et al. 2020, eq. 9-10). Arguments as
    :func:`shap_values`; memory ``n F**2 K`` floats."""
    return _explain(model, X, n_rounds, data, data_weight, interactions=True)


# --------------------------------------------------------------------------------------------
# Importance.
# --------------------------------------------------------------------------------------------

IMPORTANCE_KINDS = ("relative", "gain", "split_count")


def _class_axis(model):
    """``(n_groups, group_of_tree)``: how a model's trees (flattened leading axes, batch axes
    excluded) divide among its outputs for per-class importance, or ``None``."""
    if isinstance(model, ECOCBoosters):  # (L, R, 1): one learner per code bit
        return "bits"
    if isinstance(model, (model_lib.Booster, BaggedBoosters)):
        k = model.n_outputs
        if k > 1 and model.trees.features.shape[-2] == k:  # per_output_trees: tree p is output p
            return "per_output"
    return None


def importance(model, kind: str = "relative", per_class: bool = False) -> jax.Array:
    """Feature importance from the trees' splits, per model of a batched model (never summed).

    Args:
      kind: ``"relative"``: ESL's relative importance (eq. 10.42-10.43): ``I_l = sqrt(sum of the
        squared improvements of the splits on feature l, averaged over trees)``, scaled so the
        largest is 100. A split's squared improvement ``i_t**2`` is its gain (jboost's trees
        store one per level: the sum over the level's nodes, ESL's sum over nodes ``t``); for
        squared error with ``l2=0`` exactly ESL's improvement in squared error ``w_l w_r /
        (w_l + w_r) (ybar_l - ybar_r)**2``, otherwise the loss's second-order (Newton)
        improvement. ``"gain"``: the summed gains (the squared scale; :func:`jboost.feature_importance`
        is this normalised to sum to 1). ``"split_count"``: the number of splits (levels of
        positive gain) on each feature.
      per_class: ``(K, F)``: each output's importance from its own trees (ESL eq. 10.43's
        ``I_lk``: models with one tree per output per round, ``per_output_trees=True``, and
        ECOC's code bits). Without it a ``"relative"`` importance of such a model is ESL's
        average ``I_l = mean_k I_lk`` (then scaled to 100); of a model of vector-leaf trees
        (one tree moves all ``K`` outputs, its gain summed over them) the square root of the
        summed gains.

    The trees are those :func:`jboost.predict` uses: with early stopping only the rounds up to
    ``best_round`` count.

    Returns:
      ``(F,)``, or ``(K, F)`` with ``per_class`` (batch axes in front), float32.
    """
    model_lib._check_model(model)
    if kind not in IMPORTANCE_KINDS:
        raise ValueError(f"kind={kind!r} is not an importance kind; use one of {IMPORTANCE_KINDS}.")
    _check_trees(model.trees)
    axis = _class_axis(model)
    if per_class and axis is None:
        raise ValueError(
            f"per_class=True needs one tree per output: a {type(model).__name__} with "
            f"{getattr(model, 'n_outputs', 1)} output(s) whose trees each move every output (their "
            "gains are summed over the outputs and cannot be split by class). Fit with "
            "per_output_trees=True (ESL Algorithm 10.4), or use per_class=False.")

    return _importance(model, kind=kind, per_class=per_class, axis=axis)


@functools.partial(_compile.jit, static_argnames=("kind", "per_class", "axis"))
def _importance(model, *, kind: str, per_class: bool, axis: Optional[str]):
    """:func:`importance` of checked arguments, every model of a batch."""

    def one(m):
        n_features = m.n_features
        gains, feats = _used_gains(m), m.trees.features          # (..., D)
        if axis == "bits":  # (L, R, 1, D) -> groups (L, R*D)
            groups_g = gains.reshape(gains.shape[0], -1)
            groups_f = feats.reshape(feats.shape[0], -1)
        elif axis == "per_output":  # (B?, R, K, D) -> (K, ...)
            groups_g = jnp.moveaxis(gains, -2, 0).reshape(gains.shape[-2], -1)
            groups_f = jnp.moveaxis(feats, -2, 0).reshape(feats.shape[-2], -1)
        else:
            groups_g, groups_f = gains.reshape(1, -1), feats.reshape(1, -1)
        if kind == "split_count":
            g = (groups_g > 0).astype(jnp.float32)
        else:
            g = jnp.maximum(groups_g, 0.0)
        per = jax.vmap(lambda gg, ff: jax.ops.segment_sum(gg, ff, num_segments=n_features))(g, groups_f)
        if kind != "relative":
            return per if per_class else jnp.sum(per, axis=0)
        n_trees = groups_g.shape[1] / max(gains.shape[-1], 1)
        root = jnp.sqrt(per / n_trees)                                       # I_lk (eq. 10.43)
        if per_class:
            return _scaled(root)
        return _scaled(jnp.mean(root, axis=0))  # I_l = mean_k I_lk; one group: sqrt of the sum

    return model_lib._batched(model, one)


def _used_gains(m):
    """The split gains of the rounds a prediction uses (:func:`jboost.model.used_gains`)."""
    return model_lib.used_gains(m)


def _scaled(imp):
    """Scaled so the largest entry (along the last axis) is 100 (all zero stays zero)."""
    top = jnp.max(imp, axis=-1, keepdims=True)
    return 100.0 * imp / jnp.where(top > 0, top, 1.0)


def permutation_importance(model, X, y, metric=None, n_repeats: int = 5, key=0,
                           sample_weight=None, n_rounds: Optional[int] = None) -> jax.Array:
    """Permutation importance on held-out rows (Breiman 2001; ESL 15.3.2 for random forests):
    the increase of ``metric`` when feature ``j``'s column is shuffled, averaged over
    ``n_repeats`` permutations.

    Args:
      model: any fitted ensemble with a loss (a Forest or ECOC model needs ``metric``); batch
        axes allowed (each model its own importance).
      X, y: held-out rows and labels.
      metric: ``None`` (the model's loss, the mean weighted loss of the raw scores), a named
        metric (``"mse"``, ``"mae"``, ``"error_rate"``) or ``metric(y, raw, w) -> scalar`` (raw
        scores as :func:`jboost.predict` gives them). Lower must be better.
      n_repeats: permutations per feature.
      key: int seed or a ``jax.random`` key; feature ``j``'s repeat ``r`` uses
        ``fold_in(fold_in(key, j), r)``, the same for every model of a batch.

    Returns:
      ``(F, n_repeats)`` the increases (mean over the last axis for the importance), batch axes
      in front; one compiled program (a ``lax.map`` over features, ``vmap`` over repeats).
    """
    model_lib._check_model(model)
    X = jnp.asarray(_validation.predict_matrix(model_lib._in_order(model, X), model.n_features),
                    jnp.float32)
    n_repeats = _validation.check_int(n_repeats, "n_repeats", 1, 10**6)
    classes = getattr(model, "classes", None)
    if classes is not None:  # labels as the model was fitted on: strings, {-1, 1}, ...
        y = _validation.class_codes(_validation.series_values(y), classes.array, "y")
    y = jnp.asarray(_validation.series_values(y))
    if y.shape[0] != X.shape[0]:
        raise ValueError(f"y has {y.shape[0]} rows but X has {X.shape[0]}.")
    w = jnp.asarray(_validation.as_weights(sample_weight, X.shape[0]))
    if isinstance(key, (int, np.integer)):
        key = jax.random.PRNGKey(int(key))
    if metric is None and not isinstance(getattr(model, "loss", None), losses_lib.Loss):
        raise ValueError(f"a {type(model).__name__} has no loss: pass metric= (\"mse\", "
                         "\"error_rate\", or metric(y, raw, w)).")
    if isinstance(metric, str) and metric not in metrics_lib.METRICS:
        raise ValueError(f"metric={metric!r} is not a named metric; use one of "
                         f"{sorted(metrics_lib.METRICS)} or a function metric(y, raw, w).")
    return _permutation(model, X, y, w, key, metric=metric, n_repeats=n_repeats, n_rounds=n_rounds)


@functools.partial(_compile.jit, static_argnames=("metric", "n_repeats", "n_rounds"))
def _permutation(model, X, y, w, key, *, metric, n_repeats: int, n_rounds):
    """:func:`permutation_importance` of checked arguments: one compiled program."""

    def score(m, raw):
        if metric is None:  # the mean weighted loss (a batch objective: its value over the rows)
            return losses_lib.total_loss(m.loss, y, raw, w) / jnp.sum(w)
        m_loss = getattr(m, "loss", None)
        if m_loss is None:  # a forest: its raw scores are the prediction (identity link)
            m_loss = losses_lib.squared_error()
        return metrics_lib.evaluate(metric, m_loss, y, raw, w)

    def one(m):
        base = score(m, m.raw_scores(X, n_rounds))

        def feature(j):
            def repeat(r):
                perm = jax.random.permutation(jax.random.fold_in(jax.random.fold_in(key, j), r), X.shape[0])
                Xp = X.at[:, j].set(X[perm, j])
                return score(m, m.raw_scores(Xp, n_rounds)) - base
            return jax.vmap(repeat)(jnp.arange(n_repeats))

        return lax.map(feature, jnp.arange(X.shape[1]))

    return model_lib._batched(model, one)


# --------------------------------------------------------------------------------------------
# Partial dependence (ESL 10.13.2; Friedman 2001, section 8.2) and ICE curves.
# --------------------------------------------------------------------------------------------


class PartialDependence(NamedTuple):
    """:func:`partial_dependence`'s result.

    Attributes:
      grid: one ``(G_j,)`` float32 grid per target feature.
      values: the partial dependence on the raw-score scale (log-odds for binary losses, as ESL
        plots it): ``(G_1,)`` or ``(G_1, G_2)``, ``+ (K,)`` for ``K`` outputs, batch axes in
        front.
      individual: with ``ice=True`` (``method="average"``), every data row's curve (ICE):
        ``(m, G_1[, G_2][, K])``; else ``None``.
    """

    grid: tuple
    values: jax.Array
    individual: Optional[jax.Array] = None


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


@_compile.jit
def _pd_tree(trees, grid_rows, data, weight, targets):
    """``(G, K)``: the sum over trees of Friedman's traversal at the grid rows (only the target
    features' columns of ``grid_rows`` matter; covers from ``data``)."""
    covers = leaf_covers(trees, data.T, weight)
    X_t = grid_rows.T
    if isinstance(trees, depthwise.DepthwiseTrees):
        def walk(args):
            tree, cover = args
            path = depthwise.paths(tree)
            ratio, fpath = _path_terms(tree, cover, path)
            in_s = jnp.any(fpath[..., None] == targets, axis=-1)              # (L, D)
            agree = jax.vmap(lambda x: _path_agree(tree, x, path), in_axes=1)(X_t)  # (G, L, D)
            share = jnp.prod(jnp.where(in_s[None], agree.astype(jnp.float32), ratio[None]), axis=-1)
            return share @ tree.leaf_values

        return jnp.sum(lax.map(walk, (trees, covers)), axis=0)

    def one(args):
        tree, cover = args
        in_s = jnp.any(tree.features[:, None] == targets[None, :], axis=1)
        return walk_values(tree.leaf_values, cover, tree.leaf_index_raw(X_t), in_s)

    return jnp.sum(lax.map(one, (trees, covers)), axis=0)


@functools.partial(_compile.jit, static_argnames=("ice",))
def _pd_average(trees, grid_values, data, weight, targets, ice: bool):
    """``(G, K)`` the weighted mean over ``data`` of the trees' sum with the target columns set
    to each grid point (``grid_values`` ``(G, S)``); with ``ice``, also every row's ``(m, G, K)``."""
    def one(point):
        rows = data.at[:, targets].set(jnp.broadcast_to(point, (data.shape[0], point.shape[0])))
        raw = tree_lib.predict_raw(trees, rows)                          # (m, K)
        mean = jnp.sum(weight[:, None] * raw, axis=0) / jnp.sum(weight)
        return mean, (raw if ice else jnp.zeros((0, raw.shape[1]), raw.dtype))

    means, rows = lax.map(one, grid_values)
    return means, jnp.swapaxes(rows, 0, 1)


def _grid(column: np.ndarray, resolution: int, percentiles) -> np.ndarray:
    """scikit-learn's grid: the distinct values if at most ``resolution``, else ``resolution``
    equally spaced values between the column's ``percentiles``."""
    values = np.unique(column[np.isfinite(column)])
    if values.size == 0:
        raise ValueError("a target feature has no finite value in data: no grid can be made.")
    if values.size <= resolution:
        return values.astype(np.float32)
    lo, hi = np.percentile(column[np.isfinite(column)], [100 * p for p in percentiles])
    return np.linspace(lo, hi, resolution).astype(np.float32)


def partial_dependence(model, features, data, *, grid=None, grid_resolution: int = 20,
                       percentiles=(0.05, 0.95), method: str = "tree", ice: bool = False,
                       data_weight=None, n_rounds: Optional[int] = None) -> PartialDependence:
    """Partial dependence of the raw score on one or two features (ESL eq. 10.47-10.48).

    ``f_S(x_S)`` is the average of the model over the other features ``x_C``. Two estimates:

    * ``method="tree"`` (default; Friedman 2001, section 8.2, "weighted tree traversal"): each
      tree is walked once per grid point; a level splitting on a target feature follows the
      grid point, any other level splits the walk by its children's *covers* (row counts, or
      ``data_weight`` sums, of ``data`` at each node: the training rows for Friedman's
      definition). No pass over the data per grid point; ``O(T 2**D)`` per point.
    * ``method="average"``: the weighted mean over the rows of ``data`` of the model with the
      target columns set to the grid point (ESL eq. 10.47): one pass over ``data`` per point;
      ``ice=True`` also returns every row's curve (individual conditional expectation).

    The two agree for additive models (stumps) and differ in general (the traversal averages
    over the data reaching each node, the conditional rather than the marginal distribution of
    ``x_C``; ESL p. 370).

    Args:
      model: any fitted jboost ensemble (as :func:`shap_values`), batch axes allowed.
      features: a feature index or name (a model fitted on a DataFrame), or a pair of them.
      data: ``(m, F)`` rows: the covers (``"tree"``) or the rows averaged over (``"average"``);
        also the source of the default grid.
      grid: optional sequence of one grid per feature; default :func:`_grid` of ``data``'s
        column (its distinct values if at most ``grid_resolution``, else equally spaced
        between its ``percentiles``).
      method: ``"tree"`` or ``"average"``.
      ice: with ``method="average"``, also every row's curve.
      data_weight: optional ``(m,)`` weights of ``data``.
      n_rounds: the model of the first ``n_rounds`` stages (as :func:`jboost.predict`).

    Returns:
      :class:`PartialDependence` ``(grid, values, individual)`` on the raw-score scale.
    """
    model_lib._check_model(model)
    _refuse_bagged_categorical(model)
    _validation.check_choice(method, "method", ("tree", "average"))
    if ice and method != "average":
        raise ValueError("ice=True needs method='average' (the traversal has no per-row curves).")
    targets = _target_features(model, features)
    names = getattr(model, "feature_names", None)
    data = _validation.predict_matrix(_validation.frame_in_order(data, None if names is None else names.values),
                                      model.n_features, name="data")
    if data.shape[0] == 0:
        raise ValueError("data has no rows: partial dependence averages over (or counts covers of) "
                         "rows; pass e.g. the training rows.")
    data = np.asarray(data, np.float32)
    weight = jnp.asarray(_validation.as_weights(data_weight, data.shape[0], "data_weight", "data"))
    if grid is None:
        grid = [_grid(data[:, j], int(grid_resolution), percentiles) for j in targets]
    else:
        if len(grid) != len(targets):
            raise ValueError(f"grid has {len(grid)} grids for {len(targets)} features.")
        grid = [np.asarray(g, np.float32).reshape(-1) for g in grid]
        if any(g.size == 0 or not np.all(np.isfinite(g)) for g in grid):
            raise ValueError("every grid must hold finite values.")
    mesh = np.stack([m.reshape(-1) for m in np.meshgrid(*grid, indexing="ij")], axis=1)  # (G, S)
    shape = tuple(g.size for g in grid)
    t = jnp.asarray(targets, jnp.int32)
    keeps = _keeps_columns(model)

    def one(m):
        trees, constant, offset = tree_sum(m, n_rounds)
        _check_trees(trees)
        if method == "tree":
            rows = np.zeros((mesh.shape[0], model.n_features), np.float32)
            rows[:, targets] = mesh
            values, each = _pd_tree(trees, jnp.asarray(rows), jnp.asarray(data), weight, t), None
        else:
            values, each = _pd_average(trees, jnp.asarray(mesh), jnp.asarray(data), weight, t, ice)
        values = model_lib.add_offset(constant + values, offset)
        values = values.reshape(shape + values.shape[-1:])
        if ice:
            each = model_lib.add_offset(constant + each, offset).reshape((data.shape[0],) + shape + each.shape[-1:])
        if values.shape[-1] == 1 and not keeps:
            values = values[..., 0]
            each = None if each is None else each[..., 0]
        return values, each

    values, each = model_lib._batched(model, one)
    return PartialDependence(tuple(jnp.asarray(g) for g in grid), values, each if ice else None)


def _target_features(model, features) -> list:
    """One or two feature indices from indices or names."""
    items = list(features) if isinstance(features, (list, tuple)) else [features]
    if not 1 <= len(items) <= 2:
        raise ValueError(f"features must be one feature or a pair; got {len(items)}.")
    names = getattr(model, "feature_names", None)
    out = []
    for f in items:
        if isinstance(f, str):
            if names is None or f not in names.values:
                raise ValueError(f"feature {f!r} is not a feature name of the model"
                                 + ("" if names is None else f" ({list(names.values)[:10]})")
                                 + (" (it was fitted without names: pass column indices)" if names is None else "") + ".")
            out.append(names.values.index(f))
        else:
            out.append(_validation.check_int(f, "features", 0, model.n_features - 1))
    if len(set(out)) != len(out):
        raise ValueError(f"features names the same feature twice: {items}.")
    return out
