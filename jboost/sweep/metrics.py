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


def metric_curve(metric: Metric, loss: loss_lib.Loss, trees: oblivious.ObliviousTrees, init_raw,
                 X_binned, y, w_valid, n_bins: int):
    """The metric after every round (``trees`` with leading axes ``(R, T)``), from the raw scores
    accumulated round by round."""
    raw0 = jnp.broadcast_to(init_raw.astype(jnp.float32), (y.shape[0], init_raw.shape[0]))
    take = jax.vmap(lambda t, leaf: t.leaf_values[leaf])

    def step(raw, round_trees):
        leaves = jax.vmap(lambda t: family.leaf_index_binned(t, X_binned, n_bins))(round_trees)
        raw = raw + jnp.sum(take(round_trees, leaves), axis=0)
        return raw, evaluate(metric, loss, y, raw, w_valid)

    _, curve = lax.scan(step, raw0, trees)
    return curve
