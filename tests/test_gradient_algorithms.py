"""Tests of jboost.algorithms.gradient: gradient boosting with line search on squared error
against jboost.fit's Newton trees, the line searches at a stationary point of the true loss,
the clipped Newton steps on a saturated leaf, and learning-rate schedules."""

import jax
import jax.numpy as jnp
import numpy as np
import optax

import jboost
from jboost import algorithms as A
from jboost.algorithms import gradient

from tests._algorithms_data import (BIN, DEPTH, N_ROUNDS, REG, REG_KW, assert_fits_equal,
                                    binary_fit, leaves)


def test_gradient_boost_squared_error_equals_newton_trees():
    """Line search on squared error is exact: ESL Alg. 10.3 == jboost.fit's Newton trees (l2 = 0)."""
    X, y, _, _ = REG
    kw = REG_KW
    gb = A.gradient_boost(X, y, "squared_error", **kw)
    newton = jboost.fit(X, y, "squared_error", **kw)
    np.testing.assert_array_equal(gb.trees.features, newton.trees.features)
    np.testing.assert_array_equal(gb.trees.thresholds, newton.trees.thresholds)
    np.testing.assert_allclose(jboost.predict(gb, X), jboost.predict(newton, X), rtol=1e-4,
                               atol=1e-4)
    # Forward stagewise on squared error: the least-squares tree already has beta = 1.
    fs = A.forward_stagewise(X, y, "squared_error", **kw)
    np.testing.assert_allclose(fs.info["coef"], 0.3, rtol=1e-4)
    np.testing.assert_allclose(jboost.predict(fs, X), jboost.predict(gb, X), rtol=1e-4, atol=1e-4)


def test_line_searches_minimise_the_true_loss():
    """Binomial deviance: each leaf's gamma (Alg. 10.3) and the global beta (Alg. 10.2) are stationary."""
    X, y, _, _ = BIN
    f0 = np.log(y.mean() / (1 - y.mean()))
    sigmoid = lambda t: 1 / (1 + np.exp(-t))
    gb = binary_fit("gradient_boost")                                    # learning rate 0.5
    leaf = leaves(gb, X)
    gamma = np.asarray(gb.trees.leaf_values[0, 0, :, 0]) / 0.5
    for j in range(2**DEPTH):
        rows = leaf == j
        if rows.any():
            grad = np.sum(sigmoid(f0 + gamma[j]) - y[rows])
            assert abs(grad) < 1e-3 * rows.sum(), (j, grad)
    fs = binary_fit("forward_stagewise")
    coef = float(fs.info["coef"][0])
    beta = coef / 0.5
    b = np.asarray(fs.trees.leaf_values[0, 0, :, 0])[leaves(fs, X)] / coef
    assert abs(beta - 1.0) > 0.05                                        # a real search happened
    phi_prime = np.sum((sigmoid(f0 + beta * b) - y) * b)
    assert abs(phi_prime) < 1e-3 * len(y), phi_prime


def test_clipped_leaf_line_search_stays_finite_on_a_saturated_leaf():
    """Leaf 0: two class-1 rows at raw -40 (p ~ 4e-18: no curvature, the optimum is +inf);
    leaf 1: one row of each class at raw 0 (optimum gamma = logit(1/2) = 0). Each Newton step
    is clipped to max_step = 1, so leaf 0 moves by exactly 1 per step instead of ~1e17."""
    loss = jboost.losses.binomial_deviance()
    y = jnp.array([1.0, 1.0, 0.0, 1.0])
    raw = jnp.array([[-40.0], [-40.0], [0.0], [0.0]])
    leaf = jnp.array([0, 0, 1, 1])
    gamma = gradient.line_search_leaf_values(loss, y, raw, jnp.ones(4), leaf, 2,
                                             jnp.array([[1.0], [0.0]]), 5, 1.0)
    np.testing.assert_allclose(gamma, [[6.0], [0.0]], atol=1e-6)
    beta = gradient.line_search_coefficient(loss, y, raw, jnp.ones((4, 1)), jnp.ones(4), 5, 1.0)
    assert np.isfinite(float(beta)) and abs(float(beta) - 1.0) <= 5.0


def test_learning_rate_schedule_is_an_optax_schedule():
    X, y, _, _ = BIN
    schedule = optax.piecewise_constant_schedule(0.5, {10: 0.2})      # 0.5, then 0.1 from round 10
    fit = A.gradient_boost(X, y, "binomial_deviance", n_rounds=N_ROUNDS, depth=DEPTH,
                           learning_rate=schedule)
    const = binary_fit("gradient_boost")                               # learning rate 0.5
    np.testing.assert_allclose(fit.info["coef"], [0.5] * 10 + [0.1] * (N_ROUNDS - 10), rtol=1e-6)
    first = lambda f: jax.tree_util.tree_map(lambda a: a[:10], f.trees)
    assert_fits_equal(first(fit), first(const))
    assert not np.allclose(fit.trees.leaf_values[10:], const.trees.leaf_values[10:])
