"""Exact path-dependent SHAP (interaction) values of oblivious and depth-wise tree sums
(Lundberg et al. 2020, TreeSHAP's path-dependent value function with covers from background
rows): per-leaf tables for oblivious trees, product games per path for depth-wise ones.

See docs/inspect.md for the algorithms.
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
from jboost.data import categorical as categorical_lib, tabular
from jboost.inspect import covers as covers_lib
from jboost.models import base as base_lib, sums
from jboost.trees import depthwise as depthwise_lib, node_table, oblivious

#: Trees up to this depth get per-leaf SHAP tables when there are at least ``2**D`` rows to
#: explain; deeper trees (or fewer rows) are explained row by row.
MAX_TABLE_DEPTH = 10

#: Rows explained together by trees deeper than :data:`MAX_TABLE_DEPTH` (bounds the memory).
_ROW_BATCH = 64


class ShapValues(NamedTuple):
    """SHAP values and the expected value they add to (unpacks as ``values, expected_value``).

    ``values``: ``(n, F)``, ``(n, F, K)`` for ``K`` outputs (interactions ``(n, F, F[, K])``);
    ``expected_value``: ``()`` / ``(K,)``; batch axes in front. ``values`` summed over the
    feature axes plus ``expected_value`` is :func:`jboost.predict`'s raw score of every row.
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
    """``(2**D, D)`` the map ``W`` from ``v`` of every subset of levels to one tree's Shapley
    values: ``phi[j] = sum_S W[S, j] v(S)`` for the first level ``j`` of each distinct feature;
    ``W[S, j] = w(|S| - 1)`` if ``j`` in ``S``, else ``-w(|S|)``, ``w(s) = s! (p - s - 1)! / p!``."""
    bits, consistent, canonical, p = _players(features)
    s = jnp.sum(jnp.where(canonical, bits, 0), axis=1)[:, None]  # players in S
    size = jnp.where(bits == 1, s - 1, s)                       # |S \ {j}|
    size = jnp.clip(size, 0, jnp.maximum(p - 1, 0))
    w = jnp.exp(_log_factorial(size) + _log_factorial(p - size - 1) - _log_factorial(p))
    w = jnp.where(bits == 1, w, -w)
    return jnp.where(consistent[:, None] & canonical[None, :], w, 0.0)


def interaction_weights(features) -> jax.Array:
    """``(2**D, D, D)`` the map from ``v`` of every subset of levels to one tree's SHAP
    interaction values (Lundberg et al. 2020, eq. 9: the Shapley interaction index off the
    diagonal, ``phi_i`` minus the row's other entries on it)."""
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
    """Each path's players ``(one, zero)`` ``(..., L, D)``: a feature met at several nodes is one
    player (its first slot), the other slots null players (``one = zero = 1``)."""
    depth = fpath.shape[-1]
    first = jnp.argmax(fpath[..., :, None] == fpath[..., None, :], axis=-1)     # (L, D)
    owner = first[..., None, :] == jnp.arange(depth)[:, None]                  # (L, U, D)
    one = jnp.prod(jnp.where(owner, agree[..., None, :], True), axis=-1).astype(jnp.float32)
    zero = jnp.prod(jnp.where(owner, ratio[..., None, :], 1.0), axis=-1)
    return one, zero


def _shapley_of_products(one, zero, n_out: int):
    """Shapley values ``(..., P)`` (``n_out = 1``) or interaction indices ``(..., P, P)``
    (``n_out = 2``) of the product games ``g(S) = prod_{i in S} one_i prod_{i not in S} zero_i``,
    from the polynomial ``prod_i (zero_i + one_i t)`` without the players themselves."""
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
    """:func:`explain_trees` of depth-wise trees: a product game per leaf's path
    (Lundberg et al. 2020, Algorithm 2; docs/inspect.md)."""
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


@functools.partial(_compile.jit, static_argnames=("interactions", "per_leaf"))
def explain_trees(trees: oblivious.ObliviousTrees, X, data, weight, interactions: bool = False,
                  per_leaf: Optional[bool] = None):
    """Exact path-dependent SHAP values of a sum of trees (one leading tree axis).

    Args:
      trees: oblivious or depth-wise trees, leaf values ``(T, leaves, K)``, float thresholds.
      X: ``(n, F)`` float32 rows to explain (NaN: missing).
      data: ``(m, F)`` background rows whose counts are the covers.
      weight: ``(m,)`` their weights.
      interactions: static; SHAP interaction values instead.
      per_leaf: static; oblivious trees' per-leaf tables, or (``False``) the same pass per row;
        default: tables for depth <= :data:`MAX_TABLE_DEPTH` and at least ``2**D`` rows.

    Returns:
      ``(values, expected)``: ``(n, F, K)`` (interactions ``(n, F, F, K)``) and ``(K,)``, the
      sum over trees (no constant).
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
    """SHAP values of rows ``X``; with categorical columns, of the encoded features summed by
    input column (docs/inspect.md)."""
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
    """Every model of a batch: its sum of trees explained (:func:`explain_trees`)."""

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
    """Exact SHAP values of every row and feature (path-dependent TreeSHAP, Lundberg et al.
    2020; docs/inspect.md).

    Args:
      model: any fitted jboost ensemble, batch axes allowed.
      X: ``(n, F)`` rows to explain; NaN is missing.
      n_rounds: explain the model of the first ``n_rounds`` stages (as :func:`jboost.predict`).
      data: ``(m, F)`` background rows whose node counts are the trees' covers (the training
        rows for TreeSHAP's path-dependent definition); default ``X``.
      data_weight: ``(m,)`` non-negative weights of ``data``.

    Returns:
      :class:`ShapValues` ``(values, expected_value)``.
    """
    return _explain(model, X, n_rounds, data, data_weight, interactions=False)


def shap_interaction_values(model, X, n_rounds: Optional[int] = None, *, data=None,
                            data_weight=None) -> ShapValues:
    """Exact SHAP interaction values ``(n, F, F[, K])`` (Lundberg et al. 2020, eq. 9-10):
    symmetric, each row summing over ``j`` to :func:`shap_values`. Arguments as
    :func:`shap_values`."""
    return _explain(model, X, n_rounds, data, data_weight, interactions=True)
