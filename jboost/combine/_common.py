"""What the stacked and the ECOC ensembles share: raw scores of ensembles batched over leading
(learner, fold) axes, and a sum of trees viewed as one :class:`jboost.Booster`."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from jboost import losses as losses_lib
from jboost import model as model_lib
from jboost import tree as tree_lib


def batched_raw_scores(trees: tree_lib.ObliviousTrees, baselines, X, n_lead: int) -> jax.Array:
    """Raw scores of ensembles batched over ``n_lead`` leading axes: ``(*lead, n, K)``.

    Ensemble ``i`` is ``baselines[i] + jboost.tree.predict_raw(trees[i], X)`` (its trees summed
    from 0 in order, the baseline added last: the order of :func:`jboost.predict`).
    """
    fn = lambda t, b: b + tree_lib.predict_raw(t, X)
    for _ in range(n_lead):
        fn = jax.vmap(fn)
    return fn(trees, baselines)


def rounds_first(trees: tree_lib.ObliviousTrees) -> tree_lib.ObliviousTrees:
    """``(P, n_rounds, T, ...)`` trees of ``P`` ensembles -> ``(n_rounds, P * T, ...)``: round
    ``r`` holds every ensemble's round-``r`` trees, ensemble by ensemble."""

    def one(a):
        a = jnp.swapaxes(a, 0, 1)
        return a.reshape((a.shape[0], a.shape[1] * a.shape[2]) + a.shape[3:])

    return jax.tree_util.tree_map(one, trees)


def as_booster(trees: tree_lib.ObliviousTrees, borders, baseline, loss: losses_lib.Loss) -> model_lib.Booster:
    """A sum of trees with leading axes ``(n_rounds, trees_per_round)`` as a
    :class:`jboost.Booster` (for its prediction and staged scan; no training curves: NaN)."""
    nan = jnp.full((trees.features.shape[0],), jnp.nan, jnp.float32)
    return model_lib.Booster(trees=trees, borders=borders, baseline=baseline, loss=loss,
                             train_loss=nan, valid_loss=nan)
