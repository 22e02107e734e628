"""Row and column samplers: plain functions, chosen in the static :class:`jboost.BoostConfig`.

A row sampler ``(key, n, rate) -> (n,) float32`` multiplies each row's weight for one round; a
column sampler ``(key, n_features, depth, rate) -> (depth, n_features) bool`` gives the features
eligible at each level. See docs/engine.md ("Samplers")."""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax import lax


def bernoulli_rows(key, n: int, rate):
    """Each row takes part with probability ``rate`` (stochastic gradient boosting, Friedman 2002;
    XGBoost's ``subsample``); no draws when ``rate >= 1``."""
    draw = lambda k: (jax.random.uniform(k, (n,)) < rate).astype(jnp.float32)
    return lax.cond(rate < 1.0, draw, lambda k: jnp.ones((n,), jnp.float32), key)


def poisson_rows(key, n: int, rate):
    """Poisson(``rate``) counts per row: the online bootstrap (Oza and Russell 2001) of each
    round, ``rate = 1`` a full-size bootstrap sample."""
    return jax.random.poisson(key, rate, (n,)).astype(jnp.float32)


def feature_mask(key, n_features: int, rate):
    """Exactly ``clip(round(rate * F), 1, F)`` randomly chosen features (traced ``rate``)."""
    n_keep = jnp.clip(jnp.round(rate * n_features), 1, n_features).astype(jnp.int32)
    rank = jnp.argsort(jnp.argsort(jax.random.uniform(key, (n_features,)))).astype(jnp.int32)
    return rank < n_keep


def _draw_per_tree(key, n_features: int, depth: int, rate):
    return jnp.broadcast_to(feature_mask(key, n_features, rate), (depth, n_features))


def _draw_per_level(key, n_features: int, depth: int, rate):
    return jax.vmap(lambda k: feature_mask(k, n_features, rate))(jax.random.split(key, depth))


def _unless_all(draw, key, n_features: int, depth: int, rate):
    # Every feature when rate >= 1 (no draws: the drawn mask would keep all of them).
    return lax.cond(rate < 1.0, lambda k: draw(k, n_features, depth, rate),
                    lambda k: jnp.ones((depth, n_features), bool), key)


def columns_per_tree(key, n_features: int, depth: int, rate):
    """One feature subset per tree, shared by its levels (XGBoost's ``colsample_bytree``)."""
    return _unless_all(_draw_per_tree, key, n_features, depth, rate)


def columns_per_level(key, n_features: int, depth: int, rate):
    """A new feature subset at every level (XGBoost's ``colsample_bylevel``; a random forest's
    per-split sampling, for oblivious trees)."""
    return _unless_all(_draw_per_level, key, n_features, depth, rate)


ROW_SAMPLERS = {"bernoulli": bernoulli_rows, "poisson": poisson_rows}
COLUMN_SAMPLERS = {"tree": columns_per_tree, "level": columns_per_level}


def column_masks(key, n_features: int, depth: int, rate, by: str):
    """``(depth, F)`` eligible features per level: one draw per tree (``by="tree"``) or one per
    level (``by="level"``), always drawn (no shortcut for ``rate >= 1``)."""
    draws = {"tree": _draw_per_tree, "level": _draw_per_level}
    if by not in draws:
        raise ValueError(f"colsample_by={by!r} must be 'tree' or 'level'.")
    return draws[by](key, n_features, depth, rate)
