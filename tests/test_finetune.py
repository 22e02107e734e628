"""Tests of jboost.finetune: every leaf value refitted jointly with optax.

One squared-error model of the suite's shared shapes (conftest's N x F rows, FIT_KW) is
fine-tuned throughout; the optimizers are created once per module so that calls with the same
static settings reuse one compiled loop.
"""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import jboost
from jboost import losses
from jboost import objectives
from jboost.fine_tuning import Curves, Params, objective, soft_predict

SGD = optax.sgd(0.05)
ADAM = optax.adam(0.05)


@pytest.fixture(scope="module")
def model(regression_data, fit_kw):
    X, y, _, _ = regression_data
    return jboost.fit(X, y, "squared_error", learning_rate=0.3, **fit_kw)


def _pinball(y, q, alpha):
    r = np.asarray(y, np.float64) - np.asarray(q, np.float64)
    return float(np.mean(np.maximum(alpha * r, (alpha - 1) * r)))


def test_same_loss_never_raises_the_training_loss(model, regression_data):
    # Gradient descent on the (convex, quadratic) leaf-value objective with a small step:
    # the training loss falls monotonically, under jax.vmap over the optimizer's learning rate
    # (traced: one compiled loop) exactly as in one call.
    X, y, _, _ = regression_data
    rates = jnp.array([0.02, 0.05], jnp.float32)
    tuned, curves = jax.vmap(lambda lr: jboost.finetune(model, X, y, None, optax.sgd(lr), n_steps=40,
                                                        return_curves=True))(rates)
    train = np.asarray(curves.train_loss)
    assert train.shape == (2, 41)
    np.testing.assert_allclose(train[:, 0], float(model.train_loss[-1]), rtol=1e-5)
    assert np.all(np.diff(train, axis=1) <= 1e-6 * train[:, :1])
    assert np.all(train[:, -1] < 0.98 * train[:, 0])                  # it does move
    one, one_curves = jboost.finetune(model, X, y, None, SGD, n_steps=40, return_curves=True)
    np.testing.assert_allclose(one_curves.train_loss, train[1], rtol=1e-5)
    # The returned Booster is consistent: its loss, per-round losses and predictions.
    assert one.loss.name == "squared_error" and one.best_round is None and one.info == {}
    half_mse = 0.5 * float(np.mean((np.asarray(jboost.predict(one, X)) - y) ** 2))
    assert float(one.train_loss[-1]) == pytest.approx(half_mse, rel=1e-5)
    assert float(one_curves.train_loss[-1]) == pytest.approx(half_mse, rel=1e-5)
    assert int(one_curves.best_step) == 40
    # Only leaf values and the baseline moved: the same splits.
    for name in ("features", "thresholds", "borders", "missing_right"):
        np.testing.assert_array_equal(getattr(one.trees, name), getattr(model.trees, name))


def test_squared_error_model_to_the_quantile_loss(model, regression_data, tmp_path):
    # A squared-error model predicts about the conditional mean (coverage ~0.5); fine-tuned to the
    # pinball loss at 0.9 its training pinball loss drops and its coverage moves toward 0.9.
    X, y, Xv, yv = regression_data
    before = np.asarray(jboost.predict(model, X))
    tuned, curves = jboost.finetune(model, X, y, losses.quantile(0.9), ADAM, n_steps=60,
                                    eval_set=(Xv, yv), restore_best=True, return_curves=True)
    after = np.asarray(jboost.predict(tuned, X))
    assert _pinball(y, after, 0.9) < 0.6 * _pinball(y, before, 0.9)
    cov0, cov1 = np.mean(y <= before), np.mean(y <= after)
    assert abs(cov1 - 0.9) < 0.05 and abs(cov0 - 0.9) > 0.3
    assert tuned.loss.name == "quantile" and float(tuned.loss.params["alpha"]) == pytest.approx(0.9)
    # restore_best: the returned parameters are those of the lowest eval_set loss (step 0 counts).
    valid = np.asarray(curves.valid_loss)
    best = int(curves.best_step)
    assert best == int(np.argmin(valid)) and valid[best] < valid[0]
    held_out = _pinball(yv, jboost.predict(tuned, Xv), 0.9)
    assert float(tuned.valid_loss[-1]) == pytest.approx(held_out, rel=1e-5)
    assert held_out == pytest.approx(float(valid.min()), rel=1e-5)
    # The fine-tuned model saves and loads (a built-in loss: by name), predicting bitwise.
    path = tmp_path / "tuned.jbm"
    jboost.save(tuned, path)
    loaded = jboost.load(path)
    np.testing.assert_array_equal(jboost.predict(loaded, Xv), jboost.predict(tuned, Xv))
    assert loaded.loss.name == "quantile"
    # The fit's settings no longer describe the tuned leaves: a fine-tuned model records none.
    assert len(model.settings) > 0 and len(tuned.settings) == 0 and len(loaded.settings) == 0


def test_gradient_matches_finite_differences(model, regression_data):
    # The leaf-value objective (hard: leaves and baseline; soft: thresholds too) against central
    # differences along random directions, on a smooth loss that is not quadratic.
    X, y, _, _ = regression_data

    def log_cosh(y, f):
        r = y - f
        return jnp.logaddexp(r, -r)

    rng = np.random.default_rng(0)
    for soft in (False, True):
        fn, params = objective(model, X, y, log_cosh, soft=soft, temperature=0.5, l2=0.1)
        value_and_grad = jax.jit(jax.value_and_grad(fn))  # one program: values and gradient
        fn = lambda p: value_and_grad(p)[0]
        grad = value_and_grad(params)[1]
        fields = ("leaf_values", "baseline") + (("thresholds",) if soft else ())
        for field in fields:
            d = jnp.asarray(rng.normal(size=getattr(params, field).shape), jnp.float32)
            direction = Params(*(d if f == field else jnp.zeros_like(getattr(params, f))
                                 if getattr(params, f) is not None else None for f in Params._fields))
            eps = 1e-2
            shifted = lambda s: jax.tree_util.tree_map(lambda p, q: p + s * q, params, direction)
            fd = (float(fn(shifted(eps))) - float(fn(shifted(-eps)))) / (2 * eps)
            exact = float(jnp.sum(getattr(grad, field) * d))
            assert fd == pytest.approx(exact, rel=2e-2, abs=1e-4), (soft, field)
        if soft:
            assert float(jnp.max(jnp.abs(grad.thresholds))) > 0
    # Sample weights: zero weights are rows left out, weights 2 count a row twice.
    w = np.tile(np.array([0.0, 1.0, 2.0], np.float32), len(y) // 3 + 1)[: len(y)]
    weighted, params = objective(model, X, y, log_cosh, sample_weight=w)
    rows = np.concatenate([np.flatnonzero(w == 1), np.repeat(np.flatnonzero(w == 2), 2)])
    subset, _ = objective(model, X[rows], y[rows], log_cosh)
    assert float(weighted(params)) == pytest.approx(float(subset(params)), rel=1e-5)


def test_soft_splits_at_a_tiny_temperature_are_the_hard_trees(model, regression_data):
    X, y, Xv, yv = regression_data
    hard = np.asarray(jboost.predict(model, Xv))
    np.testing.assert_allclose(soft_predict(model, Xv, 1e-7), hard, rtol=1e-5, atol=1e-5)
    assert np.max(np.abs(np.asarray(soft_predict(model, Xv, 1.0)) - hard)) > 0.05
    # Soft fine-tuning moves the thresholds; the returned hard model is the soft one's limit.
    tuned = jboost.finetune(model, X, y, None, ADAM, n_steps=20, soft=True, temperature=0.3)
    moved = np.asarray(tuned.trees.borders) != np.asarray(model.trees.borders)
    assert moved.any()
    np.testing.assert_allclose(soft_predict(tuned, Xv, 1e-7), jboost.predict(tuned, Xv),
                               rtol=1e-5, atol=1e-5)
    # The bin thresholds are the nearest bin at or above each moved border.
    f, t, b = (np.asarray(a) for a in (tuned.trees.features, tuned.trees.thresholds, tuned.trees.borders))
    borders = np.asarray(model.borders)
    assert np.all(borders[f, t] >= b)
    assert np.all((t == 0) | (borders[f, np.maximum(t - 1, 0)] < b))
    # A continued fit replays trees on bins: the moved thresholds would change its predictions.
    with pytest.raises(ValueError, match="init_model's split thresholds are not on its bin borders"):
        jboost.fit(X, y, "squared_error", init_model=tuned, n_rounds=1, depth=tuned.depth,
                   n_bins=tuned.borders.shape[-1] + 1)


def test_label_offset_is_kept(regression_data, fit_kw):
    # Labels float32 cannot hold next to their spread: the fit centres them (Booster.offset);
    # fine-tuning centres them the same way in float64, so the fit keeps its precision.
    X, y, _, _ = regression_data
    big = y.astype(np.float64) + 1e6
    with pytest.warns(UserWarning, match="large offset"):
        fitted = jboost.fit(X, big, "squared_error", learning_rate=0.3, **fit_kw)
    tuned = jboost.finetune(fitted, X, big, None, SGD, n_steps=40)
    assert tuned.offset is not None and float(tuned.offset) == float(fitted.offset)
    mse = lambda m: float(np.mean((np.asarray(jboost.predict(m, X), np.float64) - big) ** 2))
    assert mse(tuned) < 0.98 * mse(fitted) < 1.0
    with pytest.raises(ValueError, match="label offset.*not a loss of the residual"):
        jboost.finetune(fitted, X, big, "poisson", SGD, n_steps=1)


def test_errors_name_the_argument(model, regression_data):
    X, y, Xv, yv = regression_data
    with pytest.raises(ValueError, match="X has 4 features, but the model was fitted on 5"):
        jboost.finetune(model, X[:, :4], y, None, SGD, n_steps=1)
    with pytest.raises(ValueError, match="eval_set X has 4 features"):
        jboost.finetune(model, X, y, None, SGD, n_steps=1, eval_set=(Xv[:, :4], yv))
    with pytest.raises(TypeError, match="model must be a jboost.Booster.*no trees with leaf values"):
        jboost.finetune(object(), X, y, None, SGD, n_steps=1)
    batch = jax.tree_util.tree_map(lambda a: jnp.stack([a, a]), model)
    with pytest.raises(ValueError, match=r"batch of \(2,\) models"):
        jboost.finetune(batch, X, y, None, SGD, n_steps=1)
    with pytest.raises(TypeError, match="optimizer must be an optax GradientTransformation.*float"):
        jboost.finetune(model, X, y, None, 0.01, n_steps=1)
    with pytest.raises(ValueError, match=r"n_steps=0 must be in \[1"):
        jboost.finetune(model, X, y, None, SGD, n_steps=0)
    with pytest.raises(ValueError, match=r"temperature=0.0 must be in \(0"):
        jboost.finetune(model, X, y, None, SGD, n_steps=1, soft=True, temperature=0.0)
    with pytest.raises(ValueError, match="y must hold binary labels 0/1"):
        jboost.finetune(model, X, y, "binomial_deviance", SGD, n_steps=1)
    with pytest.raises(ValueError, match=r"temperature=0.5 applies to soft splits only"):
        jboost.finetune(model, X, y, None, SGD, n_steps=1, temperature=0.5)
    # The model's own loss takes the labels it was fitted on: (n,) here, not (n, 1).
    with pytest.raises(ValueError, match=r"y has shape \(200, 1\) but the model's loss .* \(200,\)"):
        jboost.finetune(model, X, y[:, None], None, SGD, n_steps=1)
    two = losses.Loss(lambda y, f: jnp.sum((y - f) ** 2), n_outputs=2, name="two")
    with pytest.raises(ValueError, match="loss 'two' has 2 raw output.*the model has 1"):
        jboost.finetune(model, X, y, two, SGD, n_steps=1)
    with pytest.raises(ValueError, match="restore_best needs eval_set"):
        jboost.finetune(model, X, y, None, SGD, n_steps=1, restore_best=True)
    with pytest.raises(ValueError, match="sample_weight has 3 samples but X has 200"):
        jboost.finetune(model, X, y, None, SGD, n_steps=1, sample_weight=np.ones(3))
    cox = model._replace(loss=objectives.cox())  # a batch objective: rows drawn would break it
    times = np.stack([np.arange(1.0, len(y) + 1.0), np.ones(len(y))], axis=1)
    with pytest.raises(ValueError, match="batch_size=10: loss 'cox_efron' is a batch objective"):
        jboost.finetune(cox, X, times, None, SGD, n_steps=1, batch_size=10)
    with pytest.raises(FloatingPointError, match="not finite from step 0"):  # (y - f)^2 overflows
        jboost.finetune(model, X, y * np.float32(1e20), None, SGD, n_steps=40)
