"""Shared data and fitted forests of the bagging tests (test_bootstrap, test_forest, test_oob,
test_bagged_boosters): every fit tiny (n <= 400, depth <= 4, n_bins = 16) and fitted once per
session, so the files compile only a handful of programs."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jboost import bagging
from jboost.data import binning
from jboost.trees import family
from jboost.trees import oblivious

N_BINS = 16
DEPTH = 4


def noisy_classification(n, seed):
    """3 informative features of 8; 20% of labels flipped (noisy, so one deep tree overfits)."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, 8)).astype(np.float32)
    clean = ((X[:, 0] + X[:, 1] * X[:, 2] + 0.5 * X[:, 1]) > 0).astype(np.float32)
    flip = rng.random(n) < 0.2
    return X, np.where(flip, 1.0 - clean, clean).astype(np.float32), clean


def regression(n, seed):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, 6)).astype(np.float32)
    y = X[:, 0] + np.sin(2 * X[:, 1]) + 0.5 * rng.standard_normal(n)
    return X, y.astype(np.float32)


@pytest.fixture(scope="session")
def clf_data():
    X, y, _ = noisy_classification(400, seed=0)
    Xt, _, yt_clean = noisy_classification(2000, seed=1)
    return X, y, Xt, yt_clean


@pytest.fixture(scope="session")
def forest(clf_data):
    X, y, _, _ = clf_data
    return bagging.fit_forest(X, y, n_trees=24, depth=DEPTH, max_features=3, n_bins=N_BINS, key=3,
                              chunk_size=8, tree_family="oblivious")


@pytest.fixture(scope="session")
def reg_setup():
    X, y = regression(200, seed=2)
    borders = binning.compute_borders(X, N_BINS)
    Xb = binning.bin_features(X, borders)
    config = bagging.ForestConfig(n_trees=5, depth=DEPTH, n_bins=N_BINS, n_outputs=1, max_features=4,
                                  bootstrap="multinomial", chunk_size=2)
    hyper = bagging.ForestHyperparams.create(min_child_weight=1.0)
    key = jax.random.PRNGKey(7)
    trees, counts = bagging.fit_forest_binned(Xb, jnp.asarray(y), jnp.ones(200), key, hyper, config=config)
    return X, y, Xb, key, config, hyper, trees, counts


@pytest.fixture(scope="session")
def reg_forest(reg_setup):
    X, y, Xb, key, config, hyper, trees, counts = reg_setup
    borders = jnp.asarray(binning.compute_borders(X, N_BINS))
    return bagging.Forest(family.with_borders(trees, borders), borders, counts)


core_fit = jax.jit(functools.partial(oblivious.fit_tree, depth=DEPTH, n_bins=N_BINS, l2=0.0,
                                     min_split_gain=0.0))
