"""Validation metrics of a sweep on the held-out fold after every round: the loss (the
default, read off the training raw scores), a named metric (:data:`METRICS`) or a function
``metric(y, raw, w) -> scalar``."""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax import lax


# The metrics themselves live in jboost.losses.metrics (shared with early stopping); re-exported here.
from jboost.losses.metrics import METRICS  # noqa: F401
from jboost.losses.metrics import Metric  # noqa: F401
from jboost.losses.metrics import absolute_error  # noqa: F401
from jboost.losses.metrics import error_rate  # noqa: F401
from jboost.losses.metrics import evaluate
from jboost.losses.metrics import metric_name  # noqa: F401
from jboost.losses.metrics import squared_error  # noqa: F401
from jboost.losses import loss as loss_lib
from jboost.trees import family, oblivious


def first_raw(init_raw, n: int):
    """``(n, K)`` the raw scores before the first round: every row's ``init_raw`` ``(K,)``."""
    return jnp.broadcast_to(init_raw.astype(jnp.float32), (n, init_raw.shape[0]))


def _add_round(raw, round_trees, X_binned, n_bins: int):
    """``raw`` plus the values of one round's trees ``(T, ...)`` at every row."""
    take = jax.vmap(lambda t, leaf: t.leaf_values[leaf])
    leaves = jax.vmap(lambda t: family.leaf_index_binned(t, X_binned, n_bins))(round_trees)
    return raw + jnp.sum(take(round_trees, leaves), axis=0)


def metric_curve(metric: Metric, loss: loss_lib.Loss, trees: oblivious.ObliviousTrees, init_raw,
                 X_binned, y, w_valid, n_bins: int):
    """The metric after every round (``trees`` with leading axes ``(R, T)``), from the raw scores
    accumulated round by round."""
    def step(raw, round_trees):
        raw = _add_round(raw, round_trees, X_binned, n_bins)
        return raw, evaluate(metric, loss, y, raw, w_valid, name="metric")

    _, curve = lax.scan(step, first_raw(init_raw, y.shape[0]), trees)
    return curve


def metric_block(metric: Metric, loss: loss_lib.Loss, trees: oblivious.ObliviousTrees, raw,
                 X_binned, y, w_valid, n_bins: int, count):
    """:func:`metric_curve` of the first ``count`` rounds of ``trees`` (leading axes ``(B, T)``)
    after rounds whose raw scores are ``raw``: ``(raw after them, (B,) metric)``, bitwise the
    same rounds of :func:`metric_curve` (the values past ``count`` are not read)."""
    def step(raw, xs):
        i, round_trees = xs
        new = _add_round(raw, round_trees, X_binned, n_bins)
        return jnp.where(i < count, new, raw), evaluate(metric, loss, y, new, w_valid,
                                                         name="metric")

    n = jax.tree_util.tree_leaves(trees)[0].shape[0]
    return lax.scan(step, raw, (jnp.arange(n), trees))
