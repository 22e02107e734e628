"""Tests of jboost.bagging.bootstrap: bootstrap weights, per-bag keys, per-level feature subsets."""

import jax
import numpy as np
import pytest

from jboost import bagging
from jboost.engine import samplers


def test_multinomial_counts_sum_to_n_and_match_multinomial_statistics():
    n, n_bags = 40, 3000
    w = np.asarray(bagging.all_bootstrap_weights(jax.random.PRNGKey(0), n_bags, n, "multinomial"))
    assert w.shape == (n_bags, n)
    np.testing.assert_array_equal(w.sum(axis=1), n)
    np.testing.assert_array_equal(w, np.round(w))
    ref = np.random.default_rng(0).multinomial(n, np.full(n, 1.0 / n), size=n_bags)
    # Distribution of a single count: Binomial(n, 1/n); compare frequencies of 0, 1, 2, >=3.
    def freqs(c):
        return np.array([np.mean(c == 0), np.mean(c == 1), np.mean(c == 2), np.mean(c >= 3)])
    ours, theirs = freqs(w), freqs(ref)
    exact = np.array([(1 - 1 / n) ** n, (1 - 1 / n) ** (n - 1), 0.0, 0.0])
    exact[2] = (n * (n - 1) / 2) * (1 / n) ** 2 * (1 - 1 / n) ** (n - 2)
    exact[3] = 1 - exact[:3].sum()
    np.testing.assert_allclose(ours, exact, atol=0.01)
    np.testing.assert_allclose(ours, theirs, atol=0.015)
    # Var = (n-1)/n and Cov(c_i, c_j) = -1/n for a multinomial.
    assert abs(w.var() - (n - 1) / n) < 0.03
    cov = np.cov(w[:, 0], w[:, 1])[0, 1]
    assert abs(cov - (-1.0 / n)) < 0.03


def test_poisson_and_bayesian_bootstraps():
    n, n_bags = 50, 2000
    p = np.asarray(bagging.all_bootstrap_weights(jax.random.PRNGKey(1), n_bags, n, "poisson"))
    np.testing.assert_array_equal(p, np.round(p))
    assert abs(p.mean() - 1) < 0.02 and abs(p.var() - 1) < 0.05
    assert abs(np.mean(p == 0) - np.exp(-1)) < 0.01
    b = np.asarray(bagging.all_bootstrap_weights(jax.random.PRNGKey(2), n_bags, n, "bayesian"))
    assert np.all(b > 0)
    np.testing.assert_allclose(b.sum(axis=1), n, rtol=1e-5)
    # n * Dirichlet(1,...,1): each weight has mean 1 and variance n (n-1) / (n^2 (n+1)) * n.
    assert abs(b.var() - (n - 1) / (n + 1)) < 0.05
    with pytest.raises(ValueError, match="bootstrap='jackknife' must be one of"):
        bagging.bootstrap_weights(jax.random.PRNGKey(0), 5, "jackknife")


def test_bag_randomness_does_not_depend_on_number_of_bags():
    key = jax.random.PRNGKey(5)
    few = bagging.all_bootstrap_weights(key, 3, 30)
    many = bagging.all_bootstrap_weights(key, 7, 30)
    np.testing.assert_array_equal(few, many[:3])
    assert not np.array_equal(many[0], many[1])


def test_feature_subsets_are_the_column_mask_sets():
    key = jax.random.PRNGKey(11)
    sub = bagging.feature_subsets(key, 9, 5, 3)
    assert sub.shape == (5, 3)
    assert np.all(np.diff(np.asarray(sub), axis=1) > 0)  # sorted, distinct
    masks = samplers.column_masks(key, 9, 5, 3 / 9, "level")
    np.testing.assert_array_equal(bagging.subsets_to_masks(sub, 9), masks)
    np.testing.assert_array_equal(bagging.feature_subsets(key, 9, 5, 9), np.tile(np.arange(9), (5, 1)))


def test_max_features_rules():
    assert bagging.resolve_max_features("sqrt", 57) == 7
    assert bagging.resolve_max_features("third", 8) == 2
    assert bagging.resolve_max_features("log2", 57) == 5
    assert bagging.resolve_max_features(None, 8) == 8
    assert bagging.resolve_max_features(0.5, 8) == 4
    assert bagging.resolve_max_features(3, 8) == 3
    with pytest.raises(ValueError, match=r"max_features=9 must be in \[1, 8\]"):
        bagging.resolve_max_features(9, 8)
    with pytest.raises(ValueError, match="as a fraction must be in"):
        bagging.resolve_max_features(1.5, 8)
    with pytest.raises(TypeError, match="got a bool"):
        bagging.resolve_max_features(True, 8)
