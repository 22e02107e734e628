"""Tests of jboost.combine.linear: the regularised linear / logistic / softmax second tier."""

import jax
import numpy as np
import pytest
from jboost.combine import linear as linear_lib
from jboost.models import stacked



def test_fit_linear_matches_least_squares_and_sklearn_logistic():
    rng = np.random.default_rng(0)
    Z = rng.standard_normal((80, 3)).astype(np.float32)
    y = (Z @ np.array([1.0, -2.0, 0.5]) + 0.3 + 0.1 * rng.standard_normal(80)).astype(np.float32)
    lin = linear_lib.fit_linear(Z, y, task="regression", l2=0.0, n_steps=50)
    A = np.hstack([Z, np.ones((80, 1))])
    ref = np.linalg.lstsq(A, y, rcond=None)[0]
    np.testing.assert_allclose(lin.coef[:, 0], ref[:3], atol=1e-3)
    np.testing.assert_allclose(lin.intercept[0], ref[3], atol=1e-3)

    from sklearn.linear_model import LogisticRegression
    yb = (Z[:, 0] - Z[:, 1] + 0.5 * rng.standard_normal(80) > 0).astype(np.float32)
    l2 = 0.05
    logit = linear_lib.fit_linear(Z, yb, task="binary", l2=l2, n_steps=100)
    sk = LogisticRegression(C=1.0 / (l2 * 80), tol=1e-10, max_iter=10000).fit(Z, yb)
    np.testing.assert_allclose(logit.coef[:, 0], sk.coef_[0], atol=2e-3)
    np.testing.assert_allclose(logit.intercept[0], sk.intercept_[0], atol=2e-3)
    with pytest.raises(ValueError, match="task='poisson' must be one of"):
        linear_lib.fit_linear(Z, y, task="poisson")


def test_fit_linear_softmax_matches_sklearn_multinomial():
    from sklearn.linear_model import LogisticRegression
    rng = np.random.default_rng(1)
    Z = rng.standard_normal((90, 3)).astype(np.float32)
    y = np.argmax(Z @ rng.standard_normal((3, 3)) + 0.5 * rng.standard_normal((90, 3)), 1).astype(np.float32)
    l2 = 0.05
    soft = linear_lib.fit_linear(Z, y, task="multiclass", n_outputs=3, l2=l2, n_steps=200)
    sk = LogisticRegression(C=1.0 / (l2 * 90), tol=1e-10, max_iter=10000).fit(Z, y)
    np.testing.assert_allclose(soft.coef, sk.coef_.T, atol=3e-3)
    np.testing.assert_allclose(soft.intercept - soft.intercept.mean(), sk.intercept_ - sk.intercept_.mean(), atol=3e-3)
    with pytest.raises(ValueError, match=r"n_outputs=0 must be in \[1, "):
        linear_lib.fit_linear(Z, y, task="multiclass", n_outputs=0)


def test_linear_loss_links_are_identity_sigmoid_softmax():
    raw = np.array([[0.5, -1.0, 2.0], [0.0, 1.0, -3.0]], np.float32)
    reg, binary, multi = (stacked.linear_loss("regression"), stacked.linear_loss("binary"),
                          stacked.linear_loss("multiclass", 3))
    assert (reg.name, binary.name, multi.name, multi.n_outputs) == (
        "squared_error", "binomial_deviance", "multinomial_deviance", 3)
    np.testing.assert_array_equal(reg.link(raw[:, 0]), raw[:, 0])
    p = 1 / (1 + np.exp(-raw[:, 0]))
    np.testing.assert_allclose(binary.link(raw[:, 0]), np.stack([1 - p, p], 1), rtol=1e-6)
    e = np.exp(raw - raw.max(1, keepdims=True))
    np.testing.assert_allclose(multi.link(raw), e / e.sum(1, keepdims=True), rtol=1e-6)
    with pytest.raises(ValueError, match="task='count' must be one of"):
        stacked.linear_loss("count")
