"""Exact path-dependent SHAP (interaction) values of oblivious and depth-wise tree sums.

SHAP values (Lundberg et al. 2020, "From local explanations to global understanding with
explainable AI for trees") with TreeSHAP's path-dependent value function, whose covers are the
row counts (or ``data_weight`` sums) of a background data set ``data`` at every node (the
training rows: TreeSHAP's ``feature_perturbation="tree_path_dependent"``; ``None``: the explained
rows). In an oblivious tree the SHAP vector depends only on the leaf a row reaches, so each tree
of depth ``D <= MAX_TABLE_DEPTH`` gets a per-leaf table (``O(D 4**D)`` once) and each row and tree
costs ``O(D)``; deeper trees evaluate the same pass per row. Interaction values
(:func:`shap_interaction_values`) use the Shapley interaction index the same way. Everything is
exact up to float32 rounding. Every model of the protocol (:mod:`jboost.models.base`) is
explained as a constant plus a sum of trees; batch axes come first.

See docs/models.md for the algorithm.
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
from jboost.data import categorical as categorical_lib
from jboost.data import tabular
from jboost.inspect import covers as covers_lib
from jboost.models import base as base_lib
from jboost.models import sums
from jboost.trees import depthwise as depthwise_lib
from jboost.trees import node_table
from jboost.trees import oblivious

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
    v = covers_lib.subset_values(tree.leaf_values, covers, leaves)                 # (X, 2**D, K)
    if interactions:
        table = jnp.einsum("xsk,sij->xijk", v, interaction_weights(tree.features))
    else:
        table = jnp.einsum("xsk,sj->xjk", v, shapley_weights(tree.features))
    return table, v[0, 0]


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
    node tables (:class:`jboost.trees.depthwise.DepthwiseTrees`): a leaf's path
    (:func:`jboost.trees.node_table.paths`) is as long as its depth, the steps past its end null
    players. Per row and tree ``O(L D**3)`` for ``L = N + 1`` leaf slots (interactions ``O(L
    D**4)``), fixed shapes: rows in batches of :data:`_ROW_BATCH`, trees a ``lax.scan``."""
    n_features = X.shape[1]
    k = trees.leaf_values.shape[-1]
    covers = covers_lib.leaf_covers(trees, jnp.asarray(data, jnp.float32).T, weight)
    paths = jax.vmap(node_table.paths)(trees)                                # (T, L, D) each
    ratios, fpaths = jax.vmap(covers_lib.path_terms)(trees, covers, paths)            # (T, L, D) each
    expected = jnp.einsum("tl,tlk->k", jnp.prod(ratios, axis=-1), trees.leaf_values)
    shape = (n_features, n_features, k) if interactions else (n_features, k)

    def one_row(x):
        def step(acc, args):
            tree, ratio, fpath, path = args
            one, zero = _players_of_paths(fpath, covers_lib.path_agree(tree, x, path), ratio)  # (L, D)
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
def explain_trees(trees: oblivious.ObliviousTrees, X, data, weight, interactions: bool = False,
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
    if isinstance(trees, depthwise_lib.DepthwiseTrees):
        return _explain_depthwise(trees, X, data, weight, interactions)
    n_features = X.shape[1]
    n_leaves, k = trees.leaf_values.shape[-2:]
    depth = n_leaves.bit_length() - 1
    covers = covers_lib.leaf_covers(trees, jnp.asarray(data, jnp.float32).T, weight)
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
    (:func:`jboost.models.base.expanded_rows`: indicators, target statistics), then summed by
    input column (:func:`jboost.data.categorical.sum_by_input`; SHAP values are additive, so local
    accuracy holds per input column)."""
    sums.check_tree_sum(model)

    base_lib.check_model(model)
    encoded = getattr(model, "categorical", None) is not None
    if encoded and model.batch_shape:
        raise ValueError("SHAP values of a batch of models with categorical columns: explain "
                         "each model of the batch on its own (jax.tree_util.tree_map(lambda a: "
                         "a[i], model)); each has its own target statistics.")

    def rows(v, name):
        if encoded:
            return np.asarray(base_lib.expanded_rows(model, v), np.float32)
        return tabular.predict_matrix(base_lib.in_order(model, v), model.n_features, name=name)

    X = rows(X, "X")
    if data is None:
        data, data_weight = X, None
    else:
        data = rows(data, "data")
    if data.shape[0] == 0:
        raise ValueError("data has no rows (without data=, the rows X explain themselves): the "
                         "covers of the trees' nodes are background row counts; pass some rows "
                         "(e.g. the training rows) as data=.")
    weight = jnp.asarray(tabular.as_weights(data_weight, data.shape[0], "data_weight", "data"))
    out = _explain_models(model, jnp.asarray(X, jnp.float32), jnp.asarray(data, jnp.float32), weight,
                          n_rounds=n_rounds, interactions=interactions, keeps=base_lib.keeps_columns(model))
    if not encoded:
        return out
    values = categorical_lib.sum_by_input(model, out.values, axis=1)
    if interactions:
        values = categorical_lib.sum_by_input(model, values, axis=2)
    return ShapValues(values, out.expected_value)


def _explain_models(model, X, data, weight, *, n_rounds, interactions: bool, keeps: bool) -> ShapValues:
    """Every model of a batch: its sum of trees explained (:func:`explain_trees`, compiled once
    per shape of the trees, whatever the model type)."""

    def one(m):
        trees, constant, offset = sums.tree_sum(m, n_rounds)
        covers_lib.check_trees(trees)
        values, expected = explain_trees(trees, X, data, weight, interactions=interactions)
        expected = base_lib.add_offset(constant + expected, offset)
        if values.shape[-1] == 1 and not keeps:
            values, expected = values[..., 0], expected[..., 0]
        return ShapValues(values, expected)

    return base_lib.batched(model, one)


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
