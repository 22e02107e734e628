"""Custom losses end to end: a per-sample function is all a user writes; gradients, hessians and
the constant baseline come from autodiff and a numeric solve.

* Focal loss (Lin et al. 2017, "Focal Loss for Dense Object Detection", eq. 5) with ``gamma = 0``
  is the binomial deviance, so its model must match the built-in one.
* Log-cosh regression must reduce the error like squared error does.
* A parameterised :class:`jboost.Loss` is vmapped over its parameter: one compiled sweep that
  equals separate fits.
* Degenerate curvature (issue 16): a hand-written pinball loss, whose autodiff hessian is 0,
  equals the built-in quantile loss (least-squares trees, exact leaves; the absolute error's
  leaves: ``tests/test_refit.py``), vmapped over its level in one compilation; a Cauchy loss
  (negative hessian beyond its scale) fits without a rise of its training loss; a hinge loss
  does not stall at its kink; smooth custom losses keep their Newton trees bitwise.
"""

from __future__ import annotations

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jboost
from jboost import losses
from jboost.engine import boosting as boosting_lib


def focal(y, f, gamma):
    """Binary focal loss ``-(1-p_t)^gamma log p_t`` on the raw score, written stably:
    ``(1-p)^gamma = exp(gamma * log_sigmoid(-f))`` (no ``0 ** 0`` gradients at saturation)."""
    log_p, log_q = jax.nn.log_sigmoid(f), jax.nn.log_sigmoid(-f)
    return -(y * jnp.exp(gamma * log_q) * log_p + (1.0 - y) * jnp.exp(gamma * log_p) * log_q)


def focal_gamma0(y, f):
    return focal(y, f, 0.0)


def logcosh(y, f):
    """``log cosh(f - y)`` as ``|r| + softplus(-2|r|) - log 2`` (no overflow for large residuals)."""
    r = jnp.abs(f - y)
    return r + jax.nn.softplus(-2.0 * r) - jnp.log(2.0)


def softmax_cross_entropy(y, f):
    return -jax.nn.log_softmax(f)[y.astype(jnp.int32)]


def accuracy(model, X, y):
    return float(np.mean(np.asarray(jboost.predict_class(model, X)) == y))


def test_custom_loss_derivatives_by_autodiff():
    rng = np.random.default_rng(0)
    y = rng.integers(0, 2, 50).astype(np.float32)
    f = rng.normal(scale=3, size=(50, 1)).astype(np.float32)
    # gamma = 0: the binomial deviance's derivatives, p - y and p (1 - p).
    g, h = jax.jit(jboost.grad_hess)(jboost.Loss(focal_gamma0), jnp.asarray(y), jnp.asarray(f))
    p = 1 / (1 + np.exp(-f[:, 0].astype(np.float64)))
    np.testing.assert_allclose(np.asarray(g)[:, 0], p - y, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(np.asarray(h)[:, 0], p * (1 - p), rtol=1e-4, atol=1e-6)
    # log-cosh: tanh(r) and 1 / cosh(r)^2, with r = f - y.
    yr = rng.normal(size=50).astype(np.float32)
    g, h = jax.jit(jboost.grad_hess)(jboost.Loss(logcosh), jnp.asarray(yr), jnp.asarray(f))
    r = f[:, 0].astype(np.float64) - yr
    np.testing.assert_allclose(np.asarray(g)[:, 0], np.tanh(r), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(np.asarray(h)[:, 0], 1 / np.cosh(r) ** 2, rtol=1e-4, atol=1e-6)


def test_focal_gamma0_reproduces_binomial_deviance(binary_data, fit_kw):
    X, y, Xv, yv = binary_data
    custom = jboost.fit(X, y, loss=focal_gamma0, task="binary", learning_rate=0.3, **fit_kw)
    builtin = jboost.fit(X, y, "binomial_deviance", learning_rate=0.3, **fit_kw)
    assert custom.loss.task == "binary" and custom.loss.link is losses.sigmoid_link
    # The numeric baseline (L-BFGS) finds the closed-form log-odds.
    np.testing.assert_allclose(custom.baseline, builtin.baseline, atol=1e-5)
    # Same trees: identical structure; leaf values equal up to float32 rounding (the two
    # gradients are computed by different formulas, so not bitwise).
    for field in ("features", "thresholds", "missing_right"):
        np.testing.assert_array_equal(getattr(custom.trees, field), getattr(builtin.trees, field), err_msg=field)
    np.testing.assert_allclose(custom.trees.leaf_values, builtin.trees.leaf_values, rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(custom.train_loss, builtin.train_loss, rtol=1e-5)
    np.testing.assert_allclose(jboost.predict_proba(custom, Xv), jboost.predict_proba(builtin, Xv), atol=1e-5)


@pytest.mark.slow
def test_focal_loss_vmapped_over_gamma(binary_data, fit_kw):
    X, y, Xv, yv = binary_data
    make = lambda gamma: jboost.Loss(focal, params={"gamma": gamma}, name="focal", task="binary",
                                     link=losses.sigmoid_link)

    def fit(gamma):
        return jboost.fit(X, y, loss=make(gamma), learning_rate=0.3, **fit_kw)

    gammas = [0.0, 1.0, 2.0]
    sweep = jax.vmap(fit)(jnp.asarray(gammas, jnp.float32))
    singles = [fit(g) for g in gammas]
    for i, single in enumerate(singles):
        member = jax.tree_util.tree_map(lambda a: a[i], sweep.trees)
        # Same trees. Not bitwise: the numeric (L-BFGS) baseline, batched, can differ from the
        # unbatched one in the last bit (seen for gamma = 0), and that rounding carries on.
        for field in ("features", "thresholds", "missing_right"):
            np.testing.assert_array_equal(getattr(member, field), getattr(single.trees, field), err_msg=field)
        np.testing.assert_allclose(member.leaf_values, single.trees.leaf_values, rtol=1e-5, atol=1e-7)
        np.testing.assert_allclose(sweep.baseline[i], single.baseline, rtol=1e-6, atol=1e-7)
        np.testing.assert_allclose(sweep.train_loss[i], single.train_loss, rtol=1e-6)
    np.testing.assert_allclose(sweep.loss.params["gamma"], gammas)
    # The parameter matters: gamma = 2 down-weights easy examples, so its trees differ.
    assert not np.allclose(sweep.trees.leaf_values[0], sweep.trees.leaf_values[2])
    # Each member trains: its own (focal) training loss falls every round...
    assert np.all(np.diff(np.asarray(sweep.train_loss), axis=1) < 0)
    # ...and it classifies about as well as the built-in binomial deviance.
    builtin = jboost.fit(X, y, "binomial_deviance", learning_rate=0.3, **fit_kw)
    base_acc = accuracy(builtin, Xv, yv)
    assert base_acc > 0.8
    for single in singles:
        assert accuracy(single, Xv, yv) >= base_acc - 0.05


def test_logcosh_regression_reduces_error_like_squared_error(regression_data, fit_kw):
    X, y, Xv, yv = regression_data
    custom = jboost.fit(X, y, loss=logcosh, **fit_kw)
    builtin = jboost.fit(X, y, **fit_kw)  # squared error
    assert custom.loss.n_outputs == 1 and custom.loss.task == "regression"
    assert np.all(np.diff(np.asarray(custom.train_loss)) < 0)
    mse = lambda m: float(np.mean((np.asarray(jboost.predict(m, Xv)) - yv) ** 2))
    mse_const = float(np.mean((yv - y.mean()) ** 2))
    # Six rounds at learning rate 0.1 remove ~ 1 - 0.9^6 = 47% of what the trees can explain.
    assert mse(custom) < 0.8 * mse_const
    assert mse(custom) < 1.25 * mse(builtin)
    # Near the optimum log-cosh is squared error (log cosh r ~ r^2 / 2): same first split.
    assert int(custom.trees.features[0, 0, 0]) == int(builtin.trees.features[0, 0, 0])


def test_custom_multiclass_loss_matches_multinomial(multiclass_data, fit_kw):
    X, y, Xv, yv = multiclass_data
    custom = jboost.fit(X, y, loss=softmax_cross_entropy, n_outputs=3, task="multiclass",
                        learning_rate=0.5, **fit_kw)
    builtin = jboost.fit(X, y, "multinomial_deviance", learning_rate=0.5, **fit_kw)
    assert custom.loss.link is losses.softmax_link and custom.n_outputs == 3
    # The numeric baseline is defined up to a constant shift of the K scores (softmax is
    # shift-invariant): compare the implied class probabilities.
    np.testing.assert_allclose(jax.nn.softmax(custom.baseline), jax.nn.softmax(builtin.baseline), atol=1e-5)
    # The shift changes nothing else, so the trees agree.
    for field in ("features", "thresholds", "missing_right"):
        np.testing.assert_array_equal(getattr(custom.trees, field), getattr(builtin.trees, field), err_msg=field)
    np.testing.assert_allclose(custom.trees.leaf_values, builtin.trees.leaf_values, rtol=1e-3, atol=1e-5)
    np.testing.assert_allclose(jboost.predict_proba(custom, Xv), jboost.predict_proba(builtin, Xv), atol=1e-4)


# --------------------------------------------------------------------------------------------
# Degenerate curvature (issue 16): hessians zero almost everywhere or negative somewhere.
# --------------------------------------------------------------------------------------------


def pinball(y, f, alpha):
    return jnp.maximum(alpha * (y - f), (alpha - 1) * (y - f))


def cauchy(y, f):
    return jnp.log1p(4.0 * (y - f) ** 2)


def hinge(y, f):
    return jnp.maximum(0.0, 1.0 - (2.0 * y - 1.0) * f)


def _same_trees(a, b, rtol=1e-5, atol=1e-6):
    for field in ("features", "thresholds", "missing_right"):
        np.testing.assert_array_equal(getattr(a.trees, field), getattr(b.trees, field), err_msg=field)
    np.testing.assert_allclose(a.trees.leaf_values, b.trees.leaf_values, rtol=rtol, atol=atol)


@pytest.mark.slow
def test_hand_written_pinball_equals_the_built_in_quantile_loss_vmapped_over_alpha(
        regression_data, fit_kw, monkeypatch):
    # Its autodiff hessian is 0: "auto" grows least-squares trees on the gradient and searches
    # each leaf's minimiser, which is the built-in refit's weighted quantile (continuous weights:
    # no flat minimum, where the two may pick different minimisers; the same baseline: a custom
    # loss's own, found by L-BFGS, is the quantile to ~1e-3). A sweep over alpha by jax.vmap is
    # one compilation and equals the separate fits.
    X, y, *_ = regression_data
    w = np.random.default_rng(0).uniform(0.5, 1.5, len(y)).astype(np.float32)
    kw = dict(fit_kw, sample_weight=w, learning_rate=0.3)
    built_in = jboost.fit(X, y, losses.quantile(0.3), **kw)
    counted = jax.jit(chex.assert_max_traces(boosting_lib.boost.__wrapped__, n=1), static_argnames=("config",))
    monkeypatch.setattr(boosting_lib, "boost", counted)
    make = lambda alpha: jboost.Loss(pinball, params={"alpha": alpha}, baseline=losses.quantile_baseline)
    alphas = [0.1, 0.3, 0.9]
    sweep = jax.vmap(lambda a: jboost.fit(X, y, make(a), **kw))(jnp.asarray(alphas))
    for i, alpha in enumerate(alphas):
        single = jboost.fit(X, y, make(alpha), **kw)   # no new trace (chex would raise)
        assert single.loss.hessian == "auto"
        _same_trees(jax.tree_util.tree_map(lambda a: a[i], sweep), single)
        np.testing.assert_allclose(sweep.train_loss[i], single.train_loss, rtol=1e-6)
        assert np.all(np.diff(np.asarray(single.train_loss)) <= 0)
    # Each fits its own quantile: higher levels, higher predictions on average.
    assert np.all(np.diff(np.mean(np.asarray(jboost.predict(sweep, X)), axis=1)) > 0)
    single = jboost.fit(X, y, make(0.3), **kw)
    _same_trees(single, built_in)  # to float32 rounding of the bisection's last step
    np.testing.assert_allclose(single.train_loss, built_in.train_loss, rtol=1e-5)


def test_negative_curvature_loss_fits_and_never_raises_its_training_loss(regression_data, fit_kw):
    # Cauchy: concave beyond |y - f| = 1/2. Newton leaves -G / (H + l2) point uphill there.
    X, y, Xv, yv = regression_data
    auto = jboost.fit(X, y, cauchy, **fit_kw)
    curve = np.asarray(auto.train_loss)
    assert np.all(np.diff(curve) <= 0) and curve[-1] < 0.8 * curve[0]
    mse = float(np.mean((np.asarray(jboost.predict(auto, Xv)) - yv) ** 2))
    assert mse < 0.7 * float(np.var(yv))  # (hessian="autodiff": the loss rose in round 6)


def test_smooth_custom_losses_keep_their_newton_trees_bitwise(regression_data, fit_kw):
    X, y, *_ = regression_data
    auto = jboost.fit(X, y, logcosh, **fit_kw)
    newton = jboost.fit(X, y, jboost.Loss(logcosh, hessian="autodiff"), **fit_kw)
    for a, b in zip(jax.tree_util.tree_leaves((auto.trees, auto.train_loss)),
                    jax.tree_util.tree_leaves((newton.trees, newton.train_loss))):
        np.testing.assert_array_equal(a, b)


def test_hinge_loss_does_not_stall_at_its_kink(binary_data):
    # The exact minimiser of a hinge leaf puts its rows at margin 1, where the loss turns flat;
    # shrunk steps approach it without crossing and those rows keep their full gradient, so the
    # trees chase them round after round (with hessian="unit", leaf_refit="exact" the training
    # loss stays above 0.28 here). "auto" takes the first-order step of the rows with a gradient
    # (XGBoost's binary:hinge curvature), which crosses it.
    X, y, Xv, yv = binary_data
    kw = dict(n_rounds=20, depth=3, n_bins=32, learning_rate=0.3)
    auto = jboost.fit(X, y, jboost.Loss(hinge, task="binary"), **kw)
    assert np.all(np.diff(np.asarray(auto.train_loss)) <= 0) and auto.train_loss[-1] < 0.15
    assert accuracy(auto, X, y) > 0.93 and accuracy(auto, Xv, yv) > 0.85  # the deviance: 0.99, 0.91
