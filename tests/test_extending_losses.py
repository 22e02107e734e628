"""How to extend jboost's losses layer, as a user does it (``docs/extending.md``): each test
writes the extension in a few lines of JAX and fits it with the public API.

* a per-sample loss: a plain function ``loss(y, raw)``; a hand-written squared error with the
  built-in's baseline is the built-in ``squared_error`` model, bit for bit;
* a batch objective: one function of the whole batch (``jboost.objectives.batch_loss``), here a
  RankNet-style pairwise loss over every pair of rows;
* a distribution: a :class:`jboost.distributions.Distribution` (the logistic distribution),
  fitted and predicted through ``jboost.distributions``.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy import special
from scipy import stats

import jboost
from jboost import distributions
from jboost import losses
from jboost import objectives


def half_squared_error(y, raw):
    return 0.5 * (y - raw) ** 2


def test_a_per_sample_loss_is_a_function_of_one_row(regression_data, fit_kw, assert_trees_equal):
    X, y, Xv, _ = regression_data
    mine = jboost.fit(X, y, jboost.Loss(half_squared_error, baseline=losses.mean_baseline), **fit_kw)
    built_in = jboost.fit(X, y, losses.squared_error(), **fit_kw)
    assert mine.loss.hessian == "auto" and mine.loss.name == "custom"
    assert_trees_equal(mine.trees, built_in.trees)
    np.testing.assert_array_equal(jboost.predict(mine, Xv), jboost.predict(built_in, Xv))
    np.testing.assert_array_equal(mine.train_loss, built_in.train_loss)


def pairwise_logistic(y, raw, w):
    """RankNet's loss over every pair of rows of the batch (Burges et al. 2005): the weighted sum
    of ``log(1 + exp(-(f_i - f_j)))`` over the pairs with ``y_i > y_j``."""
    above = y[:, 0][:, None] > y[:, 0][None, :]
    pair = jax.nn.softplus(-(raw[:, None] - raw[None, :]))
    return jnp.sum(jnp.where(above, w[:, None] * w[None, :] * pair, 0.0))


def test_a_batch_objective_is_one_function_of_the_batch(regression_data):
    X, y, Xv, yv = regression_data
    loss = objectives.batch_loss(pairwise_logistic, baseline=objectives.zero_baseline)
    model = jboost.fit(X[:80], y[:80, None], loss, n_rounds=6, depth=2, n_bins=32,
                       learning_rate=0.5)
    assert model.loss.batch and model.loss.hessian_diag == "exact"
    assert np.all(np.diff(np.asarray(model.train_loss)) < 0)
    # A score, not a prediction of y: it orders held-out rows as their labels do.
    scores = np.asarray(jboost.predict(model, Xv))
    assert scores.shape == yv.shape and stats.spearmanr(scores, yv)[0] > 0.5


def _logistic_nll(y, raw):
    z = (y - raw[..., 0]) * jnp.exp(-raw[..., 1])
    return z + 2.0 * jax.nn.softplus(-z) + raw[..., 1]


Logistic = distributions.Distribution(
    "logistic", ("loc", "scale"), ("loc", "log_scale"),
    nll=_logistic_nll,
    params=lambda raw: (raw[..., 0], jnp.exp(raw[..., 1])),
    mean=lambda raw: raw[..., 0],
    variance=lambda raw: jnp.exp(2.0 * raw[..., 1]) * math.pi ** 2 / 3.0,
    cdf=lambda y, raw: jax.nn.sigmoid((y - raw[..., 0]) * jnp.exp(-raw[..., 1])),
    sample=lambda key, raw, n: raw[0] + jnp.exp(raw[1]) * jax.random.logistic(key, (n,)),
    init=lambda y, w: jnp.stack([jnp.sum(w * y) / jnp.sum(w),
                                 0.5 * jnp.log(3.0 * jnp.var(y)) - math.log(math.pi)]),
    init_is_mle=False,
    ppf=lambda q, raw: raw[..., 0] + jnp.exp(raw[..., 1]) * special.logit(q))


def test_a_distribution_is_its_nll_and_what_prediction_needs(regression_data, fit_kw):
    X, y, Xv, yv = regression_data
    raw = jnp.asarray([[0.3, -0.2]], jnp.float32)
    np.testing.assert_allclose(Logistic.nll(jnp.float32(1.1), raw[0]),
                               -stats.logistic(0.3, np.exp(-0.2)).logpdf(1.1), rtol=1e-5)
    model = distributions.fit(X, y, Logistic, learning_rate=0.3, **fit_kw)  # Monte-Carlo Fisher
    assert distributions.distribution_of(model) is Logistic
    params = distributions.predict_params(model, Xv)
    assert set(params) == {"loc", "scale"} and np.all(np.asarray(params["scale"]) > 0)
    np.testing.assert_allclose(jboost.predict_mean(model, Xv), params["loc"])
    assert np.corrcoef(np.asarray(params["loc"]), yv)[0, 1] > 0.5
    lo, hi = distributions.predict_interval(model, Xv, 0.8)
    assert np.all(np.asarray(lo) < np.asarray(params["loc"]))
    assert np.all(np.asarray(params["loc"]) < np.asarray(hi))
    assert np.all(np.diff(np.asarray(model.train_loss)) < 0)
