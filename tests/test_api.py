"""The user-facing API (jboost/fitting/boost.py): input checks with errors naming the argument, input
types, missing values, predictions.

Error cases fail on the host before anything is compiled, so they are cheap; the fits that do
run use the session data sets and settings shared with other test files.
"""

from __future__ import annotations

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from tests import _processes

import jboost
from jboost.fitting import rounds

RNG = np.random.default_rng(0)
X10 = RNG.normal(size=(10, 3)).astype(np.float32)
Y10 = RNG.normal(size=10).astype(np.float32)


@pytest.fixture(scope="module")
def reg_model(regression_data, fit_kw):
    X, y, _, _ = regression_data
    return jboost.fit(X, y, **fit_kw)


# --------------------------------------------------------------------------------------------
# Errors
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("kwargs,error,match", [
    # Lengths of X, y, sample_weight.
    (dict(y=Y10[:9]), ValueError, "y has 9 samples but X has 10"),
    (dict(sample_weight=np.ones(11)), ValueError, "sample_weight has 11 samples but X has 10"),
    # Labels.
    (dict(y=np.where(np.arange(10) == 3, np.nan, Y10)), ValueError, "y must be finite"),
    (dict(y=np.where(np.arange(10) == 3, np.inf, Y10)), ValueError, "y must be finite"),
    (dict(y=np.arange(10) % 3, loss="binomial_deviance"), ValueError, "y must hold binary labels 0/1"),
    (dict(y=np.arange(10) - 1.0, loss="poisson"), ValueError, "y must be non-negative"),
    (dict(y=np.zeros(10), loss="multinomial_deviance"), ValueError, "y holds a single class"),
    (dict(y=np.arange(10) % 4, loss="multinomial_deviance", n_outputs=3), ValueError,
     r"integer class labels in \[0, 3\)"),
    # (Other class labels -- {-1, 1}, fractions, strings -- are mapped for a classification loss:
    # tests/test_class_labels.py.)
    (dict(y=np.array(["a"] * 10)), TypeError, "y holds non-numeric labels .* need a classification loss"),
    (dict(y=Y10[:, None, None]), ValueError, r"y must be 1-D \(n,\) or 2-D \(n, C\)"),
    # Weights.
    (dict(sample_weight=-np.ones(10)), ValueError, "sample_weight must be non-negative"),
    (dict(sample_weight=np.zeros(10)), ValueError, "sample_weight must have a positive sum"),
    (dict(sample_weight=np.full(10, np.nan)), ValueError, "sample_weight must be finite"),
    # Shape-setting settings.
    (dict(depth=0), ValueError, r"depth=0 must be in \[1, 16\]"),
    (dict(depth=17), ValueError, r"depth=17 must be in \[1, 16\]"),
    (dict(depth=2.0), TypeError, "depth must be an int"),
    (dict(depth=True), TypeError, "depth must be an int"),
    (dict(n_bins=2), ValueError, r"n_bins=2 must be in \[3, 256\]"),
    (dict(n_bins=257), ValueError, r"n_bins=257 must be in \[3, 256\]"),
    (dict(n_rounds=0), ValueError, r"n_rounds=0 must be in \[1, "),
    (dict(n_rounds=-5), ValueError, "n_rounds=-5 must be in"),
    (dict(n_rounds=3.5), TypeError, "n_rounds must be an int"),
    # Continuous hyperparameters.
    (dict(learning_rate=0.0), ValueError, r"learning_rate=0.0 must be in \(0"),
    (dict(learning_rate=-0.1), ValueError, "learning_rate=-0.1 must be in"),
    (dict(l2=-1.0), ValueError, r"l2=-1.0 must be in \[0"),
    (dict(min_split_gain=-1.0), ValueError, "min_split_gain=-1.0 must be in"),
    (dict(min_child_weight=np.nan), ValueError, "min_child_weight=nan must be in"),
    (dict(subsample=0.0), ValueError, r"subsample=0.0 must be in \(0.0, 1.0\]"),
    (dict(subsample=1.5), ValueError, "subsample=1.5 must be in"),
    (dict(colsample=0.0), ValueError, "colsample=0.0 must be in"),
    (dict(learning_rate=np.array([0.1, 0.2])), ValueError, "learning_rate must be a scalar"),
    (dict(colsample_by="node"), ValueError, "colsample_by='node' must be one of \\('tree', 'level'\\)"),
    # Loss and task.
    (dict(loss="hinge"), ValueError, "loss='hinge' is not a built-in loss"),
    (dict(loss=42), TypeError, "loss must be a name, a jboost.Loss or a function"),
    (dict(task="clustering", loss=lambda y, f: (y - f) ** 2), ValueError, "task='clustering' must be one of"),
    # Borders and eval_set.
    (dict(borders=np.zeros((3, 10), np.float32)), ValueError, r"borders has shape \(3, 10\); expected \(3, 255\)"),
    (dict(eval_set=(X10[:, :2], Y10)), ValueError, "eval_set X has 2 features but X has 3"),
    (dict(eval_set=(X10, Y10[:4])), ValueError, "eval_set y has 4 samples but eval_set X has 10"),
    (dict(eval_set=X10), TypeError, "eval_set must be a tuple"),
    (dict(eval_set=(X10, np.full(10, np.nan))), ValueError, "eval_set y must be finite"),
])
def test_fit_rejects_bad_arguments(kwargs, error, match):
    kwargs = dict(kwargs)
    X = kwargs.pop("X", X10)
    y = kwargs.pop("y", Y10)
    with pytest.raises(error, match=match):
        jboost.fit(X, y, **{"n_rounds": 2, "depth": 2, **kwargs})


@pytest.mark.parametrize("X,error,match", [
    (np.zeros((0, 3), np.float32), ValueError, r"X is empty: shape \(0, 3\)"),
    (np.zeros((10, 0), np.float32), ValueError, r"X is empty: shape \(10, 0\)"),
    (np.zeros(10, np.float32), ValueError, "X must be 2-D"),
    (np.zeros((10, 3, 1), np.float32), ValueError, "X must be 2-D"),
    (np.full((10, 3), "x"), TypeError, "X must be numeric"),
    (np.full((10, 3), None), TypeError, "X must be numeric"),
])
def test_fit_rejects_bad_X(X, error, match):
    y = np.zeros(X.shape[0], np.float32)
    with pytest.raises(error, match=match):
        jboost.fit(X, y, n_rounds=2, depth=2)


def test_bad_eval_set_labels_are_named_as_eval_set():
    # The labels of eval_set are checked against the loss; the error must name eval_set's labels
    # (naming the training labels "y" would send the user to the wrong array).
    with pytest.raises(ValueError, match="binary labels") as info:
        jboost.fit(X10, np.arange(10) % 2, "binomial_deviance", n_rounds=2, depth=2,
                   eval_set=(X10, np.arange(10) % 3))
    assert "eval_set" in str(info.value), str(info.value)


def test_traced_data_is_rejected_with_a_hint():
    with pytest.raises(TypeError, match="X must be a concrete array"):
        jax.vmap(lambda X: jboost.fit(X, Y10, n_rounds=2, depth=2).baseline)(jnp.stack([X10, X10]))


def test_predict_checks_its_input(reg_model):
    n_features = reg_model.n_features
    with pytest.raises(ValueError, match=rf"X has {n_features - 1} features, but the model was fitted on {n_features}"):
        jboost.predict(reg_model, np.zeros((4, n_features - 1), np.float32))
    with pytest.raises(ValueError, match=rf"X has {n_features + 1} features"):
        jboost.predict_mean(reg_model, np.zeros((4, n_features + 1), np.float32))
    assert jboost.predict(reg_model, np.zeros((0, n_features), np.float32)).shape == (0,)  # empty, not an error
    with pytest.raises(ValueError, match="predict_proba needs a classification model"):
        jboost.predict_proba(reg_model, np.zeros((4, n_features), np.float32))
    with pytest.raises(ValueError, match=r"n_rounds=-1 must be in \[0, "):
        jboost.predict(reg_model, np.zeros((4, n_features), np.float32), n_rounds=-1)


# --------------------------------------------------------------------------------------------
# Input types and missing values
# --------------------------------------------------------------------------------------------


def test_integer_boolean_float64_and_jax_inputs(regression_data, fit_kw, reg_model, assert_trees_equal):
    X, y, _, _ = regression_data
    # float64 / jax / list inputs are the same data: bitwise the same model as float32 NumPy.
    for X_in, y_in in ((X.astype(np.float64), y.astype(np.float64)), (jnp.asarray(X), jnp.asarray(y)),
                       (X.tolist(), y.tolist())):
        m = jboost.fit(X_in, y_in, **fit_kw)
        assert_trees_equal(m.trees, reg_model.trees)
    # Integer and boolean features and labels: the same model as their float32 versions.
    Xi = np.round(X * 3).astype(np.int64)
    Xb = X > 0
    yi = np.round(y).astype(np.int32)
    for X_in in (Xi, Xb):
        ref = jboost.fit(X_in.astype(np.float32), yi.astype(np.float32), **fit_kw)
        got = jboost.fit(X_in, yi, **fit_kw)
        assert_trees_equal(got.trees, ref.trees)
        np.testing.assert_array_equal(jboost.predict(got, X_in), jboost.predict(ref, X_in.astype(np.float32)))
    # Boolean labels for a binary loss.
    yb = y > np.median(y)
    got = jboost.fit(X, yb, "binomial_deviance", **fit_kw)
    ref = jboost.fit(X, yb.astype(np.float32), "binomial_deviance", **fit_kw)
    assert_trees_equal(got.trees, ref.trees)


def test_nan_in_X_is_missing(regression_data, fit_kw):
    X, y, Xv, _ = regression_data
    X = X.copy()
    nan = np.random.default_rng(1).random(X.shape) < 0.15
    X[nan] = np.nan
    m = jboost.fit(X, y, **fit_kw)
    assert np.all(np.isfinite(np.asarray(m.train_loss)))
    assert np.any(np.asarray(m.trees.missing_right)), "some level sends missing values right"
    pred = np.asarray(jboost.predict(m, X))
    assert np.all(np.isfinite(pred))
    # A row with every value missing follows each level's learned missing direction.
    t = jax.tree_util.tree_map(np.asarray, m.trees)
    Xv = Xv.copy()
    Xv[:, :] = np.nan
    all_nan = np.asarray(jboost.predict(m, Xv))
    depth = t.features.shape[-1]
    leaf_of_nan = lambda r: int(np.sum(t.missing_right[r, 0].astype(int) << np.arange(depth)))
    expected = float(m.baseline[0]) + sum(float(t.leaf_values[r, 0, leaf_of_nan(r), 0]) for r in range(m.n_rounds))
    np.testing.assert_allclose(all_nan, expected, rtol=1e-5)


def test_predictions_shapes_and_links(binary_data, multiclass_data, fit_kw):
    X, y, Xv, _ = binary_data
    m = jboost.fit(X, y, "binomial_deviance", **fit_kw)
    raw = np.asarray(jboost.predict(m, Xv))
    assert raw.shape == (Xv.shape[0],)
    proba = np.asarray(jboost.predict_proba(m, Xv))
    assert proba.shape == (Xv.shape[0], 2)
    np.testing.assert_allclose(proba[:, 1], 1 / (1 + np.exp(-raw)), rtol=1e-5)
    np.testing.assert_array_equal(np.asarray(jboost.predict_class(m, Xv)), (proba[:, 1] > proba[:, 0]).astype(int))
    imp = np.asarray(jboost.feature_importance(m))
    assert imp.shape == (X.shape[1],) and np.all(imp >= 0)
    np.testing.assert_allclose(imp.sum(), 1.0, rtol=1e-5)
    assert int(np.argmax(imp)) == 0  # the label is driven mostly by feature 0
    # Importance is the normalised total gain per feature.
    gains = np.asarray(m.trees.gains).reshape(-1)
    feats = np.asarray(m.trees.features).reshape(-1)
    np.testing.assert_allclose(imp, np.bincount(feats, weights=gains, minlength=X.shape[1]) / gains.sum(), rtol=1e-5)


def test_poisson_predict_mean_is_exp_of_raw(regression_data, fit_kw):
    X, _, Xv, _ = regression_data
    y = np.random.default_rng(2).poisson(np.exp(0.5 * X[:, 0])).astype(np.float32)
    m = jboost.fit(X, y, "poisson", **fit_kw)
    np.testing.assert_allclose(float(m.baseline[0]), np.log(y.mean()), rtol=1e-5)
    np.testing.assert_allclose(np.asarray(jboost.predict_mean(m, Xv)), np.exp(np.asarray(jboost.predict(m, Xv))),
                               rtol=1e-5)
    with pytest.raises(ValueError, match="predict_proba needs a classification model"):
        jboost.predict_proba(m, Xv)


def test_precomputed_borders_are_used(regression_data, fit_kw, reg_model, assert_trees_equal):
    X, y, _, _ = regression_data
    borders = jboost.compute_borders(X, fit_kw["n_bins"])
    m = jboost.fit(X, y, borders=borders, **fit_kw)
    assert_trees_equal(m.trees, reg_model.trees)
    coarse = np.full_like(borders, np.inf)
    coarse[:, 0] = 0.0  # one border per feature: every split must be at 0
    m = jboost.fit(X, y, borders=coarse, **fit_kw)
    used = np.asarray(m.trees.gains) > 0
    np.testing.assert_array_equal(np.asarray(m.trees.borders)[used], 0.0)


def test_fit_and_predict_run_under_strict_dtype_promotion():
    # equinox-style strictness: no implicit dtype promotion anywhere on the fit/predict path.
    rng = np.random.default_rng(0)
    X = rng.normal(size=(64, 3)).astype(np.float32)
    y = (X[:, 0] > 0).astype(np.float32)
    with jax.numpy_dtype_promotion("strict"):
        model = jboost.fit(X, y, "binomial_deviance", n_rounds=2, depth=2, subsample=0.5,
                           colsample=0.7, colsample_by="level")
        p = jboost.predict_proba(model, X)
    assert p.shape == (64, 2)


# --- Early stopping and warm start ---------------------------------------------------------------


def _stopping_data(seed=0, n=1500, n_valid=500):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n + n_valid, 5))
    y = X[:, 0] + np.sin(2 * X[:, 1]) + 0.7 * rng.normal(size=n + n_valid)
    return X[:n], y[:n], X[n:], y[n:]


ES_KW = dict(learning_rate=0.3, depth=4, n_bins=64)
# The static settings shared by the early-stopping and warm-start tests, so that they share
# compiled programs (the data sets of _stopping_data have one shape): an early-stopped fit
# (N_ES rounds at most, patience PATIENCE) and a fit of N_WHOLE rounds without early stopping.
N_ES, PATIENCE, N_WHOLE = 400, 10, 50


def _assert_same_fit(a, b, n_rounds, exact=True):
    """The first ``n_rounds`` rounds of two fits: bitwise the same trees and losses (``exact``), or
    the same rules with leaf values and losses equal up to float rounding (a vmapped program)."""
    for field in ("features", "thresholds", "missing_right"):
        np.testing.assert_array_equal(np.asarray(getattr(a.trees, field))[:n_rounds],
                                      np.asarray(getattr(b.trees, field))[:n_rounds])
    if exact:
        for x, y in [(a.trees.leaf_values, b.trees.leaf_values), (a.train_loss, b.train_loss),
                     (a.valid_loss, b.valid_loss)]:
            np.testing.assert_array_equal(np.asarray(x)[:n_rounds], np.asarray(y)[:n_rounds])
        return
    np.testing.assert_allclose(np.asarray(a.trees.leaf_values)[:n_rounds],
                               np.asarray(b.trees.leaf_values)[:n_rounds], rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(np.asarray(a.valid_loss)[:n_rounds], np.asarray(b.valid_loss)[:n_rounds],
                               rtol=1e-5)


def _assert_same_settings(a, b):
    """Two Booster.settings: the same names and bitwise the same arrays."""
    assert a.names == b.names and set(a.arrays) == set(b.arrays)
    for k in a.arrays:
        x, y = np.asarray(a.arrays[k]), np.asarray(b.arrays[k])
        assert x.dtype == y.dtype and x.tobytes() == y.tobytes(), k


@pytest.mark.slow
def test_early_stopping_stops_at_the_patience_after_the_best_round():
    X, y, Xv, yv = _stopping_data()
    m = jboost.fit(X, y, n_rounds=N_ES, eval_set=(Xv, yv), early_stopping_rounds=PATIENCE, **ES_KW)
    best = int(m.best_round)
    assert m.n_rounds == best + PATIENCE + 1 < N_WHOLE
    assert best == int(np.argmin(np.asarray(m.valid_loss)))  # the first minimum
    assert np.isfinite(np.asarray(m.train_loss)).all()
    # Its rounds are the first rounds of the fit without early stopping.
    full = jboost.fit(X, y, n_rounds=N_WHOLE, eval_set=(Xv, yv), **ES_KW)
    _assert_same_fit(m, full, m.n_rounds)
    # Predictions use the best round by default; n_rounds= overrides.
    np.testing.assert_array_equal(jboost.predict(m, Xv), jboost.predict(m, Xv, n_rounds=best + 1))
    assert not np.array_equal(jboost.predict(m, Xv), jboost.predict(m, Xv, n_rounds=m.n_rounds))
    # A tolerance larger than any improvement stops after the patience.
    m2 = jboost.fit(X, y, n_rounds=2000, eval_set=(Xv, yv), early_stopping_rounds=3,
                    early_stopping_tolerance=1e6, **ES_KW)
    assert m2.n_rounds == 4 and int(m2.best_round) == 0
    # Never stopping: every round, the best one recorded.
    m3 = jboost.fit(X, y, n_rounds=20, eval_set=(Xv, yv), early_stopping_rounds=50, **ES_KW)
    assert m3.n_rounds == 20 and int(m3.best_round) == int(np.argmin(np.asarray(m3.valid_loss)))


def test_early_stopping_really_stops():
    """The fit runs the rounds up to the stop and at most one chunk (8 rounds) more: a metric
    that counts its evaluations on the host sees no more rounds than that."""
    X, y, Xv, yv = _stopping_data(1)
    calls = []

    def counted_mse(y, raw, w):
        jax.debug.callback(lambda: calls.append(1))
        return jnp.sum(w * (y - raw) ** 2) / jnp.sum(w)

    m = jboost.fit(X, y, n_rounds=5000, eval_set=(Xv, yv), early_stopping_rounds=10,
                   eval_metric=counted_mse, **ES_KW)
    jax.block_until_ready(m.trees.leaf_values)
    assert m.n_rounds < 300
    assert m.n_rounds <= len(calls) < m.n_rounds + 8


@pytest.mark.slow
def test_early_stopping_named_metrics():
    X, y, Xv, yv = _stopping_data(2)
    by_mse = jboost.fit(X, y, n_rounds=N_ES, eval_set=(Xv, yv), early_stopping_rounds=PATIENCE,
                        eval_metric="mse", **ES_KW)
    by_loss = jboost.fit(X, y, n_rounds=N_ES, eval_set=(Xv, yv), early_stopping_rounds=PATIENCE, **ES_KW)
    assert int(by_mse.best_round) == int(by_loss.best_round)  # mse = 2 x the squared-error loss
    yb, yvb = (y > 0).astype(np.float64), (yv > 0).astype(np.float64)
    m = jboost.fit(X, yb, "binomial_deviance", n_rounds=N_ES, eval_set=(Xv, yvb),
                   early_stopping_rounds=PATIENCE, eval_metric="error_rate", **ES_KW)
    # The classes after every round (staged_predict: round r sees predict(n_rounds=r + 1), in one
    # compiled scan instead of a program per prefix length): one raw score, class 1 where > 0.
    classes = np.asarray(jboost.staged_predict(m, Xv))[..., 0] > 0
    np.testing.assert_array_equal(classes[int(m.best_round)],
                                  jboost.predict_class(m, Xv, n_rounds=int(m.best_round) + 1))
    errors = np.mean(classes != yvb, axis=1)
    assert len(errors) == m.n_rounds and int(m.best_round) == int(np.argmin(errors))


@pytest.mark.slow
def test_vmapped_early_stopping_equals_separate_fits():
    """Under vmap each model stops on its own: its rounds and best round equal its separate fit's,
    and its rounds after the stop are zero trees with NaN losses."""
    X, y, Xv, yv = _stopping_data(3)
    rates = jnp.asarray([0.1, 0.5, 1.0])
    kw = dict(n_rounds=N_ES, depth=4, n_bins=64, eval_set=(Xv, yv), early_stopping_rounds=PATIENCE)
    batch = jax.vmap(lambda lr: jboost.fit(X, y, learning_rate=lr, **kw))(rates)
    for i, lr in enumerate([0.1, 0.5, 1.0]):
        one = jboost.fit(X, y, learning_rate=lr, **kw)
        mi = jax.tree_util.tree_map(lambda a: a[i], batch)
        assert int(mi.best_round) == int(one.best_round)
        n = one.n_rounds
        _assert_same_fit(mi, one, n, exact=False)
        assert np.isnan(np.asarray(mi.valid_loss)[n:]).all()
        assert not np.asarray(mi.trees.leaf_values)[n:].any()
        np.testing.assert_allclose(np.asarray(jboost.predict(batch, Xv))[i], jboost.predict(one, Xv),
                                   rtol=1e-4, atol=1e-5)
    assert len({int(b) for b in batch.best_round}) > 1  # they did stop at different rounds


@pytest.mark.slow
@pytest.mark.parametrize("loss,subsample", [("squared_error", 1.0), ("multinomial_deviance", 0.7)])
def test_warm_start_continues_the_fit(loss, subsample):
    X, y, Xv, yv = _stopping_data(4)
    if loss == "multinomial_deviance":  # three classes, row subsampling: keys folded per round
        y, yv = np.digitize(y, [-0.5, 0.5]), np.digitize(yv, [-0.5, 0.5])
    kw = dict(eval_set=(Xv, yv), loss=loss, subsample=subsample, **ES_KW)
    first = jboost.fit(X, y, n_rounds=25, **kw)
    more = jboost.fit(X, y, n_rounds=25, init_model=first, **kw)
    whole = jboost.fit(X, y, n_rounds=N_WHOLE, **kw)
    assert more.n_rounds == N_WHOLE == 50
    _assert_same_fit(more, whole, 50)  # 25 + 25 rounds == 50 rounds, bitwise
    # The continued model records its own call's settings and the rounds it continued.
    assert int(more.settings["init_rounds"]) == 25 and int(more.settings["n_rounds"]) == 25
    assert int(whole.settings["init_rounds"]) == 0 and int(whole.settings["n_rounds"]) == 50
    assert np.asarray(more.settings["subsample"]) == np.float32(subsample)
    np.testing.assert_array_equal(jboost.predict(more, X), jboost.predict(whole, X))
    # Continued with early stopping: the best round counts from the first round of the model.
    stopped = jboost.fit(X, y, n_rounds=1000, init_model=first, early_stopping_rounds=5, **kw)
    # The record starts afresh at round 25: the best of the new rounds, the patience after it.
    assert int(stopped.best_round) == 25 + int(np.argmin(np.asarray(stopped.valid_loss)[25:]))
    assert stopped.n_rounds == int(stopped.best_round) + 5 + 1 < 1025


@pytest.mark.parametrize("kwargs,error,match", [
    (dict(early_stopping_rounds=5), ValueError, "early_stopping_rounds needs eval_set"),
    (dict(early_stopping_rounds=0, eval_set="valid"), ValueError, "early_stopping_rounds"),
    (dict(eval_metric="mse"), ValueError, "eval_metric=.mse. is computed on the validation rows: pass eval_set"),
    (dict(early_stopping_rounds=5, eval_set="valid", eval_metric="auc"), ValueError, "eval_metric"),
    (dict(early_stopping_rounds=5, eval_set="valid", eval_metric="error_rate"), ValueError,
     "needs a classification loss"),
    (dict(early_stopping_rounds=5, eval_set="valid", early_stopping_tolerance=-1.0), ValueError,
     "early_stopping_tolerance"),
    (dict(init_model="model"), TypeError, "init_model must be a Booster"),
    # The init models are the session's fits (fit_kw: depth 3, n_bins 32, 5 features): no new
    # program is compiled for them.
    (dict(init_model="regression", n_features=4), ValueError, "init_model has 5 features; X has 4"),
    (dict(init_model="poisson", depth=3, n_bins=32), ValueError, "init_model was fitted with loss 'poisson'"),
    (dict(init_model="regression", depth=6, n_bins=32), ValueError,
     r"depth=6 differs from init_model's trees \(depth 3\); pass depth=3"),
    (dict(init_model="regression", depth=3, n_bins=256), ValueError, r"n_bins=256 differs from init_model's \(32\)"),
    (dict(init_model="adaboost"), TypeError, "has an algorithm's state: continue it with its algorithm"),
])
def test_early_stopping_and_warm_start_argument_errors(kwargs, error, match, reg_model, regression_data,
                                                       fit_kw):
    kwargs = dict(kwargs)
    X, y, Xv, yv = _stopping_data(5, n=200, n_valid=50)
    if kwargs.get("eval_set") == "valid":
        kwargs["eval_set"] = (Xv, yv)
    X = X[:, :kwargs.pop("n_features", X.shape[1])]
    Xr = regression_data[0]
    models = {"model": "a model", "regression": reg_model,
              "poisson": lambda: jboost.fit(Xr, np.abs(regression_data[1]), "poisson", **fit_kw),
              "adaboost": lambda: jboost.algorithms.gradient_boost(X, y, n_rounds=2, depth=2)}
    if "init_model" in kwargs:
        made = models[kwargs["init_model"]]
        kwargs["init_model"] = made() if callable(made) else made
    with pytest.raises(error, match=match):
        jboost.fit(X, y, **{"n_rounds": 3, **kwargs})


def test_chunked_fits_equal_one_call_and_report_progress(capsys):
    """verbose= / callbacks= run the rounds as host-side chunks: bitwise the one-call model (with
    early stopping too); progress lines while the fit runs; a callback returning True stops it."""
    X, y, Xv, yv = _stopping_data(6)
    kw = dict(eval_set=(Xv, yv), **ES_KW)
    one = jboost.fit(X, y, n_rounds=N_ES, early_stopping_rounds=PATIENCE, **kw)
    seen = []
    chunked = jboost.fit(X, y, n_rounds=N_ES, early_stopping_rounds=PATIENCE, verbose=7,
                         callbacks=[lambda info: seen.append(info["round"])], **kw)
    _assert_same_fit(chunked, one, one.n_rounds)
    assert chunked.n_rounds == one.n_rounds and int(chunked.best_round) == int(one.best_round)
    _assert_same_settings(chunked.settings, one.settings)
    assert int(one.settings["early_stopping_rounds"]) == PATIENCE and one.settings["eval_metric"] == "loss"
    lines = [l for l in capsys.readouterr().out.splitlines() if l.startswith("[jboost] round ")]
    assert len(lines) == len(seen) == -(-one.n_rounds // 7) and "valid loss" in lines[0]
    assert seen[-1] == one.n_rounds and "best round" in lines[-1] and "elapsed" in lines[-1]
    stop_early = jboost.fit(X, y, n_rounds=100, checkpoint_every=4,
                            callbacks=[lambda info: info["round"] >= 12], **kw)
    assert stop_early.n_rounds == 12
    _assert_same_fit(stop_early, jboost.fit(X, y, n_rounds=N_WHOLE, **kw), 12)


_KILLED_FIT = """
import os, signal, sys
import numpy as np
import jboost
rng = np.random.default_rng(7)
X = rng.normal(size=(1500, 5)); y = X[:, 0] + np.sin(2 * X[:, 1]) + 0.7 * rng.normal(size=1500)
def killer(info):
    if os.environ.get("KILL_AT") and info["round"] >= int(os.environ["KILL_AT"]):
        os.kill(os.getpid(), signal.SIGKILL)  # a real kill, half-way through the fit
model = jboost.fit(X, y, "huber", n_rounds=40, depth=4, n_bins=64, learning_rate=0.3,
                   subsample=0.8, checkpoint_dir=sys.argv[1], checkpoint_every=5, callbacks=[killer])
jboost.save(model, sys.argv[2])
"""


@pytest.mark.subprocess
@pytest.mark.slow
def test_a_killed_fit_resumes_from_its_checkpoint_bitwise(tmp_path):
    import os
    import signal
    import subprocess
    import sys
    script = tmp_path / "fit.py"
    script.write_text(_KILLED_FIT)
    ckpt, out = tmp_path / "ckpt", tmp_path / "model.jbm"
    # The jboost under test, installed or not (a clone run with `python -m pytest`).
    root = os.path.dirname(os.path.dirname(os.path.abspath(jboost.__file__)))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")])))
    killed = _processes.run([sys.executable, str(script), str(ckpt), str(out)], quiet=20,
                            what="a fit killed mid-way", env=dict(env, KILL_AT="20"))
    assert killed.returncode == -signal.SIGKILL and not out.exists(), killed.stderr
    assert jboost.load(ckpt / "checkpoint.jbm").n_rounds == 15  # saved after rounds 5, 10, 15
    resumed = _processes.run([sys.executable, str(script), str(ckpt), str(out)], quiet=20,
                             what="the resumed fit", env=env)
    assert resumed.returncode == 0, resumed.stderr
    rng = np.random.default_rng(7)
    X = rng.normal(size=(1500, 5))
    y = X[:, 0] + np.sin(2 * X[:, 1]) + 0.7 * rng.normal(size=1500)
    whole = jboost.fit(X, y, "huber", n_rounds=40, depth=4, n_bins=64, learning_rate=0.3, subsample=0.8)
    model = jboost.load(out)
    assert model.n_rounds == 40
    _assert_same_fit(model, whole, 40)
    # The checkpoints and the resumed model record the fit's settings.
    _assert_same_settings(model.settings, whole.settings)
    _assert_same_settings(jboost.load(ckpt / "checkpoint.jbm").settings, whole.settings)
    assert np.asarray(whole.settings["subsample"]) == np.float32(0.8) and whole.settings["n_rounds"] == 40
    np.testing.assert_array_equal(jboost.predict(model, X), jboost.predict(whole, X))
    # Another fit in the same directory is refused, naming the checkpoint.
    with pytest.raises(ValueError, match="holds a checkpoint of another fit"):
        jboost.fit(X, y + 1.0, "huber", n_rounds=40, depth=4, n_bins=64, learning_rate=0.3,
                   subsample=0.8, checkpoint_dir=ckpt, checkpoint_every=5)


def test_ctrl_c_between_chunks_returns_the_rounds_fitted():
    """SIGINT (Ctrl-C) during a chunked fit: the fit returns the rounds fitted so far, with a
    warning, and they are the first rounds of the uninterrupted fit."""
    import signal
    X, y, Xv, yv = _stopping_data(8)
    # The chunks of 4 rounds and the reference fit are those of the chunked test (one program each).
    kw = dict(eval_set=(Xv, yv), **ES_KW)

    def interrupt(info):
        if info["round"] >= 12:
            signal.raise_signal(signal.SIGINT)

    with pytest.warns(UserWarning, match="interrupted after round 12 of 40"):
        partial = jboost.fit(X, y, n_rounds=40, checkpoint_every=4, callbacks=[interrupt], **kw)
    assert partial.n_rounds == 12
    _assert_same_fit(partial, jboost.fit(X, y, n_rounds=N_WHOLE, **kw), 12)


# --------------------------------------------------------------------------------------------
# Per-row offsets (base_margin)
# --------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_base_margin_fits_a_poisson_rate_with_exposure():
    # Counts over known exposures: y ~ Poisson(t * exp(f(x))). With base_margin = log t the model
    # learns the rate f (its baseline the intercept next to the offsets: log(sum y / sum t) for
    # Poisson); without it the exposure, independent of x, is noise it cannot explain.
    rng = np.random.default_rng(3)
    n = 1200
    X = rng.normal(size=(n, 3)).astype(np.float32)
    t = rng.uniform(0.1, 10.0, size=n)
    rate = np.exp(0.5 * X[:, 0])
    y = rng.poisson(t * rate).astype(np.float32)
    kw = dict(n_rounds=20, depth=2, n_bins=32, learning_rate=0.3)
    with_t = jboost.fit(X[:900], y[:900], "poisson", base_margin=np.log(t[:900]),
                        eval_set=(X[900:], y[900:]), eval_base_margin=np.log(t[900:]), **kw)
    np.testing.assert_allclose(with_t.baseline[0], np.log(y[:900].sum() / t[:900].sum()), atol=1e-4)
    mean = np.asarray(jboost.predict_mean(with_t, X[900:], base_margin=np.log(t[900:])))
    rel = np.asarray(jboost.predict_mean(with_t, X[900:])) * t[900:]  # the rate times exposure
    np.testing.assert_allclose(mean, rel, rtol=1e-5)
    err = np.mean(np.abs(np.log(rel / t[900:]) - np.log(rate[900:])))
    without = jboost.fit(X[:900], y[:900], "poisson", **kw)
    err_without = np.mean(np.abs(np.asarray(jboost.predict(without, X[900:])) - np.log(rate[900:])
                                 - np.log(t[900:])))
    assert err < 0.1 < err_without, (err, err_without)
    # The validation rows' offsets enter the validation loss: it is the loss of predict's means.
    mu = mean.astype(np.float64)
    want = np.mean(mu - y[900:] * np.log(mu))
    np.testing.assert_allclose(with_t.valid_loss[-1], want, rtol=1e-4)


@pytest.mark.slow
def test_base_margin_checks_and_errors():
    X = X10.astype(np.float64)
    m = jboost.fit(X, Y10, n_rounds=2, depth=1, n_bins=4, base_margin=np.arange(10.0))
    np.testing.assert_array_equal(jboost.predict(m, X, base_margin=np.ones(10)),
                                  jboost.predict(m, X) + 1.0)
    with pytest.raises(ValueError, match=r"base_margin must have shape \(10,\).*got \(9,\)"):
        jboost.fit(X, Y10, n_rounds=2, base_margin=np.ones(9))
    with pytest.raises(ValueError, match="base_margin must be finite"):
        jboost.fit(X, Y10, n_rounds=2, base_margin=np.full(10, np.nan))
    with pytest.raises(ValueError, match="pass eval_base_margin"):
        jboost.fit(X, Y10, n_rounds=2, base_margin=np.ones(10), eval_set=(X, Y10))
    with pytest.raises(ValueError, match="eval_base_margin is given without base_margin"):
        jboost.fit(X, Y10, n_rounds=2, eval_set=(X, Y10), eval_base_margin=np.ones(10))
    with pytest.raises(ValueError, match=r"base_margin must have shape \(3,\).*got \(3, 2\)"):
        jboost.predict(m, X[:3], base_margin=np.ones((3, 2)))
    forest = jboost.bagging.fit_forest(X, (Y10 > 0).astype(int), n_trees=2, depth=1, n_bins=4)
    with pytest.raises(TypeError, match=r"base_margin is for models fitted with offsets \(jboost.fit\(base_margin=\)"):
        jboost.predict(forest, X, base_margin=np.ones(10))


# --------------------------------------------------------------------------------------------
# Progress: the eval metric, the remaining time
# --------------------------------------------------------------------------------------------


def abs_error(y, raw, w):
    """A custom early-stopping metric (module level: static in the compiled program)."""
    return jnp.sum(w * jnp.abs(y - raw)) / jnp.sum(w)


def test_progress_shows_the_eval_metric(capsys):
    """With eval_metric=, the progress lines and the callbacks' dicts carry the metric after each
    round: the metric of the staged predictions, whose minimum is the best round."""
    X, y, Xv, yv = _stopping_data(9)
    seen = []
    m = jboost.fit(X, y, n_rounds=N_ES, eval_set=(Xv, yv), early_stopping_rounds=PATIENCE,
                   eval_metric=abs_error, verbose=7, callbacks=[seen.append], **ES_KW)
    assert all(info["metric"] == "abs_error" for info in seen)
    assert [len(info["valid_metric"]) for info in seen] == [len(info["rounds"]) for info in seen]
    curve = np.concatenate([info["valid_metric"] for info in seen])
    staged = np.asarray(jboost.staged_predict(m, Xv))[..., 0]            # (rounds, m)
    want = np.mean(np.abs(yv.astype(np.float32) - staged), axis=1)
    assert len(curve) == m.n_rounds
    np.testing.assert_allclose(curve, want, rtol=2e-5)
    assert int(m.best_round) == int(np.argmin(curve))
    assert not np.allclose(curve, np.concatenate([info["valid_loss"] for info in seen]))
    lines = [l for l in capsys.readouterr().out.splitlines() if l.startswith("[jboost] round ")]
    assert len(lines) == len(seen)
    for line, info in zip(lines, seen):
        assert f"valid abs_error {info['valid_metric'][-1]:.6g}  best round" in line, line


def test_the_remaining_time_leaves_out_the_first_chunk(monkeypatch, capsys):
    """The first chunk's time includes compiling: the first progress line gives no estimate, and
    the estimate after the second chunk is the pace of the chunks after the first (a fake clock:
    5 s for the first chunk of 7 rounds, then 0.14 s per chunk; the uninterrupted estimate would
    be ~(5 + 0.14) / 14 s per round). Before the first call a line says the program is being
    built, and after it how long that took."""
    assert rounds.time_left([4.6, 0.1, 0.1], [50, 50, 50], 5850) == pytest.approx(11.7)
    assert rounds.time_left([4.6], [50], 5950) == pytest.approx(547.4)
    assert rounds.time_left([], [], 10) == 0.0
    ticks = iter([0.0, 5.0] + [5.0 + 0.14 * i for i in range(1, 100)])
    monkeypatch.setattr(rounds, "_clock", lambda: next(ticks))
    X, y, Xv, yv = _stopping_data(6)  # the chunked fit of test_chunked_fits_equal_one_call...
    m = jboost.fit(X, y, n_rounds=N_ES, early_stopping_rounds=PATIENCE, verbose=7,
                   eval_set=(Xv, yv), **ES_KW)
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("[jboost] building the fit's program") and re.fullmatch(
        r"\[jboost\] program ready in [0-9.]+s", out[1]), out[:2]
    lines = [l for l in out if l.startswith("[jboost] round ")]
    assert len(lines) >= 3 and f"round {m.n_rounds}/{N_ES}" in lines[-1]
    assert lines[0].endswith("5.0s elapsed"), lines[0]  # no estimate from the first chunk
    for i, line in enumerate(lines[1:-1], start=2):  # 0.02 s per round for the rounds left
        assert line.endswith(f"{5.0 + 0.14 * (i - 1):.1f}s elapsed, ~{0.02 * (N_ES - 7 * i):.1f}s left"), line
    assert lines[-1].endswith("~0.0s left")
