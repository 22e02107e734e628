"""The fine-tuned model's raw scores and objective as functions of its parameters: hard leaf
gathers, soft sigmoid splits, the weighted loss and its l2 penalty."""

from __future__ import annotations

from typing import NamedTuple, Optional

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from jboost import _compile
from jboost.losses import loss as loss_lib
from jboost.models import booster
from jboost.trees import family, routing


class Params(NamedTuple):
    """The parameters fine-tuning moves (a pytree: optax optimizes it as it is).

    Attributes:
      leaf_values: ``(n_trees, n_leaves, K)`` every tree's leaf values, in round order.
      baseline: ``(K,)`` the constant raw score every row starts from.
      thresholds: ``soft=True``: ``(n_trees, depth)`` the move of each level's border from its
        fitted value, in units of its feature's scale; ``None`` for hard fine-tuning.
    """

    leaf_values: jax.Array
    baseline: jax.Array
    thresholds: Optional[jax.Array] = None


class Rows(NamedTuple):
    """One set of rows as the objective reads it."""

    y: jax.Array                    # (n,) or (n, C) labels (centred by the model's label offset)
    w: jax.Array                    # (n,) weights
    margin: Optional[jax.Array]     # (n, K) per-row raw-score offsets, or None
    leaves: Optional[jax.Array]     # (S, n) int32 leaf of every row in every tree (hard)
    X_t: Optional[jax.Array]        # (F, n) float32 feature-major rows (soft)


class Structure(NamedTuple):
    """The fixed part of the trees that soft splits need (``None`` for hard fine-tuning)."""

    features: jax.Array       # (S, D) int32
    missing_right: jax.Array  # (S, D) bool
    movable: jax.Array        # (S, D) bool: a finite border (a level that splits)
    borders: jax.Array        # (S, D) float32 the fitted borders
    scale: jax.Array          # (F,) float32 per-feature scale


def _hard_raw(params: Params, leaves):
    """``(n, K)`` baseline + the sum over trees of each row's leaf value (a gather)."""
    s, n_leaves, k = params.leaf_values.shape
    index = leaves + (jnp.arange(s, dtype=jnp.int32) * n_leaves)[:, None]
    return params.baseline + jnp.sum(params.leaf_values.reshape(s * n_leaves, k)[index], axis=0)


def moved_borders(params: Params, st: Structure):
    """``(S, D)`` the float borders of the parameters' threshold moves (fitted ones where fixed;
    a move of 0 is the fitted border exactly)."""
    moved = st.borders + jnp.where(st.movable, params.thresholds, 0.0) * st.scale[st.features]
    return jnp.where(st.movable, moved, st.borders)


def _soft_tree(values, borders, features, missing_right, movable, X_t, scale, temperature):
    """One oblivious tree on rows ``X_t (F, n)``: its soft values ``(n, K)`` (sigmoid splits) and
    its hard values (:func:`jboost.trees.routing.float_goes_right`, as :func:`jboost.trees.oblivious.leaf_index_raw`)."""
    x = X_t[features]                                          # (D, n)
    hard = routing.float_goes_right(x, borders[:, None], missing_right[:, None])
    soft_ok = jnp.isfinite(x) & movable[:, None]
    z = ((jnp.where(soft_ok, x, 0.0) - jnp.where(movable, borders, 0.0)[:, None])
         / (temperature * scale[features])[:, None])
    p = jnp.where(soft_ok, jax.nn.sigmoid(z), hard.astype(jnp.float32))
    probs = jnp.ones((x.shape[1], 1), jnp.float32)
    for d in range(x.shape[0]):  # static: leaf j's bit d is level d's "right" (tree.leaf_index)
        pd = p[d][:, None]
        probs = jnp.concatenate([probs * (1.0 - pd), probs * pd], axis=1)
    leaf = jnp.sum(hard.astype(jnp.int32) << jnp.arange(x.shape[0], dtype=jnp.int32)[:, None], axis=0)
    return probs @ values, values[leaf]


def _soft_raw(params: Params, st: Structure, X_t, temperature):
    """``(soft (n, K), hard (n, K))`` raw scores of every tree on ``X_t``: a scan over trees,
    rematerialised in the backward pass (memory ``(n, 2**D)`` for one tree at a time)."""
    borders = moved_borders(params, st)
    k = params.baseline.shape[0]
    zeros = jnp.zeros((X_t.shape[1], k), jnp.float32)

    @jax.checkpoint
    def body(acc, tree):
        soft, hard = _soft_tree(*tree, X_t, st.scale, temperature)
        return (acc[0] + soft, acc[1] + hard), None

    (soft, hard), _ = lax.scan(body, (zeros, zeros), (params.leaf_values, borders, st.features,
                                                      st.missing_right, st.movable))
    return params.baseline + soft, lax.stop_gradient(params.baseline + hard)


def _hard_soft_raw(params: Params, st: Structure, X_t):
    """``(n, K)`` the hard model's raw scores at the parameters' borders (no sigmoids: the
    monitored losses of soft fine-tuning)."""
    borders = moved_borders(params, st)

    def body(acc, tree):
        values, b, features, missing_right = tree
        x = X_t[features]
        right = jnp.where(jnp.isnan(x), missing_right[:, None], x > b[:, None])
        leaf = jnp.sum(right.astype(jnp.int32) << jnp.arange(x.shape[0], dtype=jnp.int32)[:, None],
                       axis=0)
        return acc + values[leaf], None

    zeros = jnp.zeros((X_t.shape[1], params.baseline.shape[0]), jnp.float32)
    out, _ = lax.scan(body, zeros, (params.leaf_values, borders, st.features, st.missing_right))
    return lax.stop_gradient(params.baseline + out)


def _mean_loss(loss, raw, rows: Rows):
    """Weighted mean of the loss over ``rows`` at raw scores ``raw (n, K)`` (their offsets added);
    a batch objective's (:attr:`jboost.Loss.batch`) weighted sum over the weights' sum."""
    if rows.margin is not None:
        raw = raw + rows.margin
    if loss.batch:
        return loss_lib.total_loss(loss, rows.y, raw, rows.w) / jnp.sum(rows.w)
    per = loss_lib.per_sample_losses(loss, rows.y, raw)
    if per.shape != rows.w.shape:  # static: labels of another shape than the loss takes
        raise ValueError(f"the loss {loss.name!r} gives per-row values of shape {per.shape} on "
                         f"labels of shape {rows.y.shape}; it takes labels of another shape.")
    return jnp.sum(jnp.where(rows.w > 0, rows.w * per, 0.0)) / jnp.sum(rows.w)


def hard_loss(params: Params, rows: Rows, loss, st: Optional[Structure]):
    """The hard (returned) model's loss on ``rows``."""
    if st is None:
        return _mean_loss(loss, _hard_raw(params, rows.leaves), rows)
    return _mean_loss(loss, _hard_soft_raw(params, st, rows.X_t), rows)


def _losses(params: Params, rows: Rows, loss, st: Optional[Structure], temperature):
    """``(the loss the gradient is taken of, the hard model's loss)`` on ``rows``."""
    if st is None:
        value = _mean_loss(loss, _hard_raw(params, rows.leaves), rows)
        return value, value
    soft, hard = _soft_raw(params, st, rows.X_t, temperature)
    return _mean_loss(loss, soft, rows), lax.stop_gradient(_mean_loss(loss, hard, rows))


def penalised_loss(params: Params, rows: Rows, loss, st, temperature, l2, leaves0):
    """The objective and (aux) the hard model's data loss: the data loss of the (soft) model
    plus ``l2 / 2`` times the squared change of the leaf values."""
    value, hard = _losses(params, rows, loss, st, temperature)
    penalty = 0.5 * l2 * jnp.sum(jnp.square(params.leaf_values - leaves0))
    return value + penalty, hard


@_compile.jit
def leaf_indices(trees, X):
    """``(S, n)`` int32 leaf of each row of ``X (n, F)`` in each of the flattened trees (any
    :class:`jboost.trees.family.TreeFamily`: its ``leaf_index_raw``)."""
    X_t = jnp.asarray(X, jnp.float32).T
    return jax.vmap(lambda t: t.leaf_index_raw(X_t))(trees).astype(jnp.int32)


def round_loss(raw, y, w, margin, loss):
    """The weighted mean loss of the raw scores after a round (for ``Booster.staged``)."""
    return _mean_loss(loss, raw, Rows(y, w, margin, None, None))


def _feature_scale(borders) -> np.ndarray:
    """``(F,)`` a robust spread of each feature: the interquartile range of its finite bin
    borders over 1.349 (half their range, else 1, where that is 0)."""
    b = np.asarray(borders, np.float64)
    out = np.ones((b.shape[0],), np.float32)
    for f in range(b.shape[0]):
        finite = b[f][np.isfinite(b[f])]
        if finite.size:
            q25, q75 = np.percentile(finite, [25, 75])
            spread = (q75 - q25) / 1.349
            if not spread > 0 and finite.size > 1:
                spread = (finite.max() - finite.min()) / 2
            if spread > 0 and np.isfinite(spread):
                out[f] = spread
    return out


def soft_structure(model: booster.Booster) -> Structure:
    """The fixed part of a model's soft trees: split features, missing directions, movable
    levels, float borders and feature scales."""
    flat = family.flatten_trees(model.trees)
    borders = jnp.asarray(flat.borders, jnp.float32)
    return Structure(flat.features.astype(jnp.int32), flat.missing_right, jnp.isfinite(borders),
                      borders, jnp.asarray(_feature_scale(model.borders)))


def initial_params(model: booster.Booster, st: Optional[Structure]) -> Params:
    """The model's leaf values and baseline as :class:`Params`; threshold offsets 0 when ``st``
    is given (soft), else ``None``."""
    flat = family.flatten_trees(model.trees)
    thresholds = None
    if st is not None:
        thresholds = jnp.zeros(st.borders.shape, jnp.float32)
    return Params(jnp.asarray(flat.leaf_values, jnp.float32), jnp.asarray(model.baseline, jnp.float32),
                  thresholds)


@_compile.jit
def soft_scores(params, st, X_t, temperature):
    """Soft raw scores of the rows ``X_t`` at ``temperature`` (compiled)."""
    return _soft_raw(params, st, X_t, temperature)[0]
