"""Divergence said aloud (docs/fitting.md, "Divergence"): a fit whose loss rises by orders of
magnitude over its start warns, naming learning_rate, the round and the values; under jax.vmap
each member is named by its index (a member whose loss turns NaN too); a sweep names its
configurations and marks the fits (SweepResult.diverged); bagged boosters name the bag. Ordinary
fits, and an overfitting validation curve, stay silent."""

from __future__ import annotations

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jboost
from jboost.losses import checks


def _said(record):
    """The divergence and non-finite warnings among ``record``."""
    return [str(w.message) for w in record
            if "diverged" in str(w.message) or "not finite" in str(w.message)]


def _scaled_square(y, raw, scale):
    """A custom loss whose parameter makes it NaN (``scale <= 0``: log of a negative)."""
    return jnp.log(scale) + (y - raw) ** 2 / scale


def _gaussian_nll(y, raw, sigma):
    """A negative log-likelihood: negative for small residuals (a loss of either sign)."""
    return 0.5 * ((y - raw) / sigma) ** 2 + jnp.log(sigma)


# ---- The rule ----------------------------------------------------------------------------


def test_rule_is_a_factor_over_the_start_or_its_scale():
    assert checks.DIVERGENCE_FACTOR == 10.0
    # A non-negative loss (scale = start): above 10 x the start.
    assert float(checks.divergence_thresholds(0.5, 0.5)) == pytest.approx(5.0)
    curves = np.array([[0.4, 0.3, 4.9], [0.4, 5.1, 0.2], [np.nan, 6.0, 0.1]])
    np.testing.assert_array_equal(checks.first_diverged(curves, [0.5] * 3, [0.5] * 3), [-1, 1, 1])
    # Rounds after n_fitted (early stopping) and NaN rounds never count.
    np.testing.assert_array_equal(
        checks.first_diverged(curves, [0.5] * 3, [0.5] * 3, n_fitted=[3, 1, 3]), [-1, -1, 1])
    # A loss of either sign: a rise of 9 x its mean absolute per-sample loss at the start.
    assert float(checks.divergence_thresholds(-1.0, 2.0)) == pytest.approx(17.0)
    assert checks.first_diverged(np.array([-1.5, 0.5, 16.0]), -1.0, 2.0) == -1
    # A start at zero loss: the floor, not every rounding error.
    assert float(checks.divergence_thresholds(0.0, 0.0)) == pytest.approx(
        9 * checks.DIVERGENCE_FLOOR)
    np.testing.assert_array_equal(checks.first_non_finite(curves), [-1, -1, 0])


# ---- Single fits ----------------------------------------------------------------------------


@pytest.mark.parametrize("learning_rate", [1e3, 1e30])
def test_binary_deviance_at_a_huge_learning_rate_warns(binary_data, fit_kw, learning_rate):
    X, y, _, _ = binary_data
    with pytest.warns(UserWarning, match="learning_rate") as record:
        model = jboost.fit(X, y, "binomial_deviance", learning_rate=learning_rate, **fit_kw)
    said = _said(record)
    assert len(said) == 1, said
    assert "training loss diverged" in said[0]
    assert f"learning_rate={learning_rate:g}" in said[0]
    assert "at the baseline" in said[0] and "train_loss[" in said[0] and "peak" in said[0]
    assert np.all(np.isfinite(np.asarray(model.train_loss)))  # finite: no FloatingPointError


def _counts(X):
    rng = np.random.default_rng(3)
    return rng.poisson(np.exp(0.5 * X[:, 0])).astype(np.float32)


@pytest.mark.slow
@pytest.mark.parametrize("loss,data", [
    ("squared_error", "regression_data"), ("binomial_deviance", "binary_data"),
    ("multinomial_deviance", "multiclass_data"), ("poisson", "regression_data"),
    ("quantile", "regression_data"), ("absolute_error", "regression_data"),
    ("huber", "regression_data")])
def test_ordinary_fits_do_not_warn(loss, data, fit_kw, request):
    X, y, Xv, yv = request.getfixturevalue(data)
    if loss == "poisson":
        y, yv = _counts(X), _counts(Xv)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for lr in (0.1, 1.0):
            jboost.fit(X, y, loss, learning_rate=lr, eval_set=(Xv, yv), **fit_kw)


def test_an_overfitting_validation_curve_does_not_warn(regression_data, fit_kw):
    X, _, Xv, _ = regression_data
    rng = np.random.default_rng(4)
    y = rng.normal(size=X.shape[0]).astype(np.float32)  # noise: every round overfits
    yv = rng.normal(size=Xv.shape[0]).astype(np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        model = jboost.fit(X, y, "squared_error", learning_rate=1.0, l2=0.0, eval_set=(Xv, yv),
                           **dict(fit_kw, n_rounds=20))
    valid = np.asarray(model.valid_loss)
    assert valid[-1] > 1.1 * valid.min()  # the validation loss rose, by far less than 10x


def test_a_loss_of_either_sign_does_not_warn(regression_data, fit_kw):
    X, y, Xv, yv = regression_data
    nll = jboost.Loss(_gaussian_nll, params={"sigma": 0.2})
    y, yv = 0.1 * y, 0.1 * yv  # residuals small next to sigma: the mean loss is negative
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        model = jboost.fit(X, y, nll, learning_rate=1.0, eval_set=(Xv, yv), **fit_kw)
    assert float(np.asarray(model.train_loss)[-1]) < 0


# ---- Under jax.vmap ---------------------------------------------------------------------------


def test_vmap_over_learning_rate_names_the_diverged_member_only(binary_data, fit_kw):
    X, y, _, _ = binary_data
    fit = jax.vmap(lambda lr: jboost.fit(X, y, "binomial_deviance", learning_rate=lr,
                                         **fit_kw).train_loss)
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        curves = jax.block_until_ready(fit(jnp.asarray([0.1, 1e3], jnp.float32)))
    said = _said(record)
    assert len(said) == 1, said
    assert said[0].startswith("jax.vmap member 1 (learning_rate=1000)")
    assert "training loss diverged" in said[0] and "learning_rate" in said[0]
    assert np.all(np.isfinite(np.asarray(curves)))


@pytest.mark.slow
def test_vmap_names_a_member_whose_custom_loss_turns_nan(regression_data, fit_kw):
    X, y, _, _ = regression_data
    with pytest.raises(FloatingPointError):  # the same fit alone raises
        jboost.fit(X, y, jboost.Loss(_scaled_square, params={"scale": -1.0}), **fit_kw)
    fit = jax.vmap(lambda s: jboost.fit(X, y, jboost.Loss(_scaled_square, params={"scale": s}),
                                        **fit_kw).train_loss)
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        curves = np.asarray(jax.block_until_ready(fit(jnp.asarray([1.0, -1.0], jnp.float32))))
    said = _said(record)
    assert len(said) == 1, said
    assert said[0].startswith("jax.vmap member 1 ") and "scale=-1" in said[0]
    assert "not finite" in said[0] and "FloatingPointError" in said[0]
    assert np.all(np.isfinite(curves[0])) and np.all(np.isnan(curves[1]))


# ---- Sweeps and bagged boosters -----------------------------------------------------------------


def test_sweep_names_the_diverged_configuration(binary_data, fit_kw):
    X, y, _, _ = binary_data
    with pytest.warns(UserWarning, match="diverged") as record:
        res = jboost.sweep.sweep(X, y, "binomial_deviance", grid={"learning_rate": [0.1, 1e3]},
                                 folds=2, seeds=1, **fit_kw)
    said = " ".join(_said(record))
    assert "configuration 1 {'learning_rate': 1000.0" in said
    assert "configuration 0 " not in said and "fold 0, seed 0" in said
    np.testing.assert_array_equal(res.diverged, res.config == 1)
    assert res.diverged_configs == [1]


def test_bagged_boosters_name_the_diverged_bag(binary_data, fit_kw):
    X, y, _, _ = binary_data
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        jboost.bagging.fit_bagged_boosters(X, y, "binomial_deviance", n_bags=2, **fit_kw)
    with pytest.warns(UserWarning, match="bag 0 \\(2 of 2 bags diverged") as record:
        jboost.bagging.fit_bagged_boosters(X, y, "binomial_deviance", n_bags=2,
                                           learning_rate=1e3, **fit_kw)
    assert "learning_rate" in _said(record)[0]


def test_gradient_algorithms_warn_as_fit_does(binary_data, fit_kw):
    """jboost.algorithms.gradient_boost at learning_rate 1e3 warns as fit does (the AdaBoost
    family is not checked: its exponential loss may spike and recover by design)."""
    X, y, _, _ = binary_data
    kw = {k: v for k, v in fit_kw.items() if k in ("n_rounds", "depth")}
    with pytest.warns(UserWarning, match="learning_rate") as record:
        jboost.algorithms.gradient_boost(X, y, "binomial_deviance", learning_rate=1e3, **kw)
    assert any("training loss diverged" in s for s in _said(record))
