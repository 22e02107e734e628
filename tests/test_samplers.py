"""Row and column samplers (jboost/engine/samplers.py), and a new sampler written as one function."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jboost
from jboost import losses
from jboost.engine import samplers
from jboost.engine import boosting as boosting_lib
from jboost.engine import state


@pytest.mark.parametrize("by", ["tree", "level"])
def test_column_masks_have_exact_counts(by):
    n_features, depth = 7, 4
    rates = jnp.asarray([0.01, 0.2, 0.3, 0.5, 0.64, 0.9, 1.0], jnp.float32)
    keys = jax.random.split(jax.random.PRNGKey(3), 16)
    masks = jax.jit(jax.vmap(jax.vmap(lambda k, r: samplers.column_masks(k, n_features, depth, r, by),
                                      in_axes=(None, 0)), in_axes=(0, None)))(keys, rates)
    masks = np.asarray(masks)  # (keys, rates, depth, F)
    expected = np.clip(np.round(np.asarray(rates) * n_features), 1, n_features)
    np.testing.assert_array_equal(masks.sum(-1), np.broadcast_to(expected[None, :, None], masks.shape[:3]))
    same_per_level = np.all(masks == masks[:, :, :1, :], axis=(2, 3))
    if by == "tree":
        assert same_per_level.all()
    else:
        assert not same_per_level[:, 2].all(), "per-level masks must differ between levels"
    with pytest.raises(ValueError, match="colsample_by='node' must be 'tree' or 'level'"):
        samplers.column_masks(keys[0], n_features, depth, 0.5, "node")


def test_bernoulli_rows_keep_every_row_at_rate_one_and_a_fraction_below():
    key = jax.random.PRNGKey(0)
    np.testing.assert_array_equal(samplers.bernoulli_rows(key, 1000, jnp.float32(1.0)), np.ones(1000))
    kept = np.asarray(samplers.bernoulli_rows(key, 20000, jnp.float32(0.3)))
    assert set(np.unique(kept)) == {0.0, 1.0} and abs(kept.mean() - 0.3) < 0.02
    counts = np.asarray(samplers.poisson_rows(key, 20000, jnp.float32(1.0)))
    assert abs(counts.mean() - 1.0) < 0.03 and abs(counts.var() - 1.0) < 0.05 and counts.max() >= 4


def even_rows(key, n, rate):
    """A new row sampler (the README's "add a sampler"): only even rows take part."""
    return (jnp.arange(n) % 2 == 0).astype(jnp.float32)


@pytest.mark.slow
def test_a_new_row_sampler_is_one_function(regression_data, fit_kw):
    # Boosting with the even-rows sampler grows the trees of boosting on even-row weights.
    X, y, *_ = regression_data
    borders = jboost.compute_borders(X, fit_kw["n_bins"])
    Xb = jboost.bin_features(X, borders)
    even = (np.arange(len(y)) % 2 == 0).astype(np.float32)
    hyper = boosting_lib.Hyperparams.create(learning_rate=0.3)
    loss, init = losses.squared_error(), jnp.zeros((1,))
    config = boosting_lib.BoostConfig(n_rounds=4, depth=3, n_bins=fit_kw["n_bins"])
    by_sampler = boosting_lib.boost(state.Data.train_only(Xb, jnp.asarray(y), jnp.ones(len(y))),
                                jax.random.key(0), hyper, loss, init,
                                config=config._replace(row_sampler=even_rows))
    by_weights = boosting_lib.boost(state.Data.train_only(Xb, jnp.asarray(y), jnp.asarray(even)),
                                jax.random.key(0), hyper, loss, init, config=config)
    jax.tree_util.tree_map(np.testing.assert_array_equal, by_sampler.trees, by_weights.trees)
    # Through fit, by keyword: the same trees from fit's baseline.
    a = jboost.fit(X, y, **fit_kw, learning_rate=0.3, row_sampler=even_rows, borders=borders)
    ref = boosting_lib.boost(state.Data.train_only(Xb, jnp.asarray(y), jnp.ones(len(y))), jax.random.PRNGKey(0),
                         hyper, loss, a.baseline,
                         config=config._replace(n_rounds=fit_kw["n_rounds"], row_sampler=even_rows, missing=False))
    np.testing.assert_array_equal(a.trees.features, ref.trees.features)
    np.testing.assert_array_equal(a.trees.leaf_values, ref.trees.leaf_values)
    b = jboost.fit(X, y, **fit_kw, learning_rate=0.3, borders=borders)
    assert not np.array_equal(a.trees.leaf_values, b.trees.leaf_values)
