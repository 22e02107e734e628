"""What the ensemble model types share: raw scores of ensembles batched over leading axes,
rounds-first tree stacks, and a sum of trees viewed as one Booster."""

from __future__ import annotations

from typing import Optional

import jax
import jax.numpy as jnp

from jboost.losses import loss as loss_lib
from jboost.models import booster, metadata
from jboost.trees import family, oblivious


def batched_raw_scores(trees: oblivious.ObliviousTrees, baselines, X, n_lead: int) -> jax.Array:
    """Raw scores ``(*lead, n, K)`` of ensembles batched over ``n_lead`` leading axes: ensemble
    ``i`` is ``baselines[i] + predict_raw(trees[i], X)`` (the order of :func:`jboost.predict`)."""
    fn = lambda t, b: b + family.predict_raw(t, X)
    for _ in range(n_lead):
        fn = jax.vmap(fn)
    return fn(trees, baselines)


def rounds_first(trees: oblivious.ObliviousTrees) -> oblivious.ObliviousTrees:
    """``(P, n_rounds, T, ...)`` trees of ``P`` ensembles -> ``(n_rounds, P * T, ...)``: round
    ``r`` holds every ensemble's round-``r`` trees, ensemble by ensemble."""

    def one(a):
        a = jnp.swapaxes(a, 0, 1)
        return a.reshape((a.shape[0], a.shape[1] * a.shape[2]) + a.shape[3:])

    return jax.tree_util.tree_map(one, trees)


def as_booster(trees: oblivious.ObliviousTrees, borders, baseline, loss: loss_lib.Loss,
               classes: Optional[metadata.Classes] = None,
               feature_names: Optional[metadata.FeatureNames] = None) -> booster.Booster:
    """A sum of trees with leading axes ``(n_rounds, trees_per_round)`` as a
    :class:`jboost.Booster` (no training curves: NaN), with the ensemble's ``classes`` and
    ``feature_names``."""
    nan = jnp.full((trees.features.shape[0],), jnp.nan, jnp.float32)
    return booster.Booster(trees=trees, borders=borders, baseline=baseline, loss=loss,
                             train_loss=nan, valid_loss=nan, classes=classes,
                             feature_names=feature_names)
