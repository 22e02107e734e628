"""Tests of jboost.combine.weights: committee averages, error weights, simplex weights."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jboost import combine
from jboost.combine import weights


def test_average_and_weighted_average_hand_computed():
    p = np.array([[1.0, 2.0], [3.0, 6.0], [5.0, 1.0]])
    np.testing.assert_allclose(weights.average(p), [3.0, 3.0])
    np.testing.assert_allclose(weights.weighted_average(p, [0.5, 0.25, 0.25]), [2.5, 2.75])
    with pytest.raises(ValueError, match=r"weights has shape \(2,\); expected \(3,\)"):
        weights.weighted_average(p, [0.5, 0.5])


def test_error_weights_are_exponential_in_the_error():
    w = np.asarray(weights.error_weights([0.1, 0.2, 0.4], beta=10.0))
    e = np.exp(-10 * np.array([0.1, 0.2, 0.4]))
    np.testing.assert_allclose(w, e / e.sum(), rtol=1e-6)
    np.testing.assert_allclose(weights.error_weights([0.1, 0.3], 0.0), [0.5, 0.5])
    # Traced beta: a vmapped sweep.
    ws = jax.vmap(lambda b: weights.error_weights(jnp.array([0.1, 0.3]), b))(jnp.array([0.0, 5.0]))
    np.testing.assert_allclose(ws[1], [1 / (1 + np.exp(-1.0)), 1 - 1 / (1 + np.exp(-1.0))], rtol=1e-6)


def test_simplex_weights_squared_error_interior_optimum():
    # Model 1 predicts +1, model 2 predicts -3, target 0: w - 3 (1 - w) = 0  =>  w = 3/4.
    p = np.array([[1.0, 1.0, 1.0, 1.0], [-3.0, -3.0, -3.0, -3.0]])
    fit = weights.fit_simplex_weights(p, np.zeros(4), n_steps=400, learning_rate=0.1)
    np.testing.assert_allclose(fit.weights, [0.75, 0.25], atol=2e-3)
    np.testing.assert_allclose(np.sum(fit.weights), 1.0, rtol=1e-6)
    assert fit.losses[-1] < 1e-4 < fit.losses[0]


def test_simplex_weights_log_loss_hand_computed():
    # P(class 0): model 1 says 0.9, model 2 says 0.1; 3/4 of the labels are 0. The mixture
    # matches 0.75 when 0.9 w + 0.1 (1 - w) = 0.75, i.e. w = 0.8125.
    y = np.array([0, 0, 0, 1], np.float32)
    p1 = np.tile([0.9, 0.1], (4, 1))
    p2 = np.tile([0.1, 0.9], (4, 1))
    fit = weights.fit_simplex_weights(np.stack([p1, p2]), y, objective="log_loss", n_steps=400,
                                      learning_rate=0.1)
    np.testing.assert_allclose(fit.weights, [0.8125, 0.1875], atol=3e-3)
    with pytest.raises(ValueError, match="objective='hinge' must be one of"):
        weights.fit_simplex_weights(np.stack([p1, p2]), y, objective="hinge")


def test_the_package_re_exports_the_weights():
    assert combine.average is weights.average and combine.fit_simplex_weights is weights.fit_simplex_weights
