"""Tests of jboost.combine.stacking: out-of-fold fits, the second tier, the stacked model protocol."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jboost
from jboost import combine
from jboost.data import folds as cv
from jboost import checks
from jboost.combine import stacking as stacking_lib
from jboost.models import stacked

# Static settings of the small fits (tests/test_ecoc.py uses the same).
KW = dict(n_rounds=4, depth=2, n_bins=8)
# The memorisation test's settings.
MEMO_KW = dict(n_rounds=12, depth=3, n_bins=128)
HYPERS = [dict(learning_rate=1.0, l2=0.01, min_child_weight=0.0),
          dict(learning_rate=0.3, l2=1.0, min_child_weight=0.0)]
# The members of jboost.models.base.Model.
PROTOCOL = ("trees", "n_features", "task", "batch_shape", "n_stages", "raw_scores", "proba_from_raw",
            "classes_from_raw", "staged")


@pytest.fixture(scope="module")
def noisy():
    """A memorising feature (the row id), a clean signal, two noise features and 25% flipped labels."""
    rng = np.random.default_rng(0)
    n = 120
    signal = rng.standard_normal(n).astype(np.float32)
    clean = (signal > 0).astype(np.float32)
    flipped = np.zeros(n, bool)
    flipped[rng.choice(n, 30, replace=False)] = True
    y = np.where(flipped, 1.0 - clean, clean).astype(np.float32)
    X = np.stack([np.arange(n, dtype=np.float32), signal, rng.standard_normal(n).astype(np.float32),
                  rng.standard_normal(n).astype(np.float32)], 1)
    return X, y, clean, flipped


@pytest.fixture(scope="module")
def binary_stack(noisy):
    X, y, _, _ = noisy
    return stacking_lib.fit_stacked_boosters(X, y, "binomial_deviance", hypers=HYPERS, folds=4,
                                         stacker_l2=1e-2, key=1, **MEMO_KW)


def _learner(model, m):
    """Base learner ``m`` of a stacked model as a jboost.Booster."""
    nan = jnp.full((model.n_rounds,), jnp.nan)
    return jboost.Booster(jax.tree_util.tree_map(lambda a: a[m], model.trees), model.borders,
                          model.baseline[m], model.base_loss, nan, nan)


def _stacker_on_learners(model, X, n_rounds=None):
    """The definition: the stacker's linear output on the learners' raw scores ``(n, K_out)``."""
    z = np.concatenate([np.asarray(jboost.predict(_learner(model, m), X, n_rounds)).reshape(len(X), -1)
                        for m in range(model.n_learners)], axis=1)
    return np.asarray(stacked.linear_raw(model.stacker, z))


# --------------------------------------------------------------------------------------------
# Out-of-fold fits (the folds themselves: tests/test_cv.py).
# --------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_stacking_out_of_fold_predictions_never_see_their_row(noisy, binary_stack):
    """In-sample raw scores follow the flipped labels; out-of-fold scores must follow the clean
    signal instead."""
    X, y, clean, flipped = noisy
    model = binary_stack
    n = len(y)
    assert model.oof_raw.shape == (n, 2, 1)
    oof = np.asarray(model.oof_raw[:, 0, 0])
    k_folds, k_fit = jax.random.split(jax.random.PRNGKey(1))
    # The final learner 0 is jboost.fit on every row, with the key fold_in(k_fit, 0).
    full = jboost.fit(X, y, "binomial_deviance", borders=model.borders, key=jax.random.fold_in(k_fit, 0),
                      **HYPERS[0], **MEMO_KW)
    np.testing.assert_array_equal(model.trees.features[0], full.trees.features)
    insample = np.asarray(jboost.predict(_learner(model, 0), X))
    np.testing.assert_allclose(insample, np.asarray(jboost.predict(full, X)), rtol=1e-5, atol=1e-5)
    # In sample, the flipped rows are (partly) memorised: the score follows the noisy label.
    agree_in = np.mean((insample[flipped] > 0) == (y[flipped] == 1))
    agree_oof = np.mean((oof[flipped] > 0) == (y[flipped] == 1))
    assert agree_in > 0.6, agree_in
    assert agree_oof < 0.35, agree_oof
    # Each row's out-of-fold score is that of a fold model with zero weight on the row (stratified
    # folds from jboost.data.folds seeded by the first half of the key): refit fold 0's first learner
    # alone with jboost.fit and compare on its held-out rows.
    ids = cv.fold_ids(y, 4, seed=[int(v) for v in checks.as_raw_key(k_folds)], stratified=True)
    masks = np.asarray(cv.fold_masks(ids, 4))
    ref = jboost.fit(X, y, "binomial_deviance", sample_weight=masks[0], borders=model.borders,
                     key=jax.random.fold_in(k_fit, 0), **HYPERS[0], **MEMO_KW)
    np.testing.assert_allclose(oof[ids == 0], np.asarray(jboost.predict(ref, X))[ids == 0],
                               rtol=1e-4, atol=1e-4)
    # The stacked model predicts the clean signal better than chance.
    p = np.asarray(stacked.stacked_predict(model, X))
    assert p.shape == (n, 2)
    np.testing.assert_allclose(p.sum(1), 1.0, rtol=1e-5)
    assert np.mean((p[:, 1] > 0.5) == (clean == 1)) > 0.8


def test_explicit_fold_ids_are_the_folds(noisy, binary_stack):
    """folds=K draws stratified cv.fold_ids from the key; passing those ids gives the same model."""
    X, y, _, _ = noisy
    k_folds, _ = jax.random.split(jax.random.PRNGKey(1))
    ids = cv.fold_ids(y, 4, seed=[int(v) for v in checks.as_raw_key(k_folds)], stratified=True)
    again = stacking_lib.fit_stacked_boosters(X, y, "binomial_deviance", hypers=HYPERS, folds=ids,
                                          stacker_l2=1e-2, key=1, **MEMO_KW)
    np.testing.assert_array_equal(again.oof_raw, binary_stack.oof_raw)
    np.testing.assert_array_equal(again.stacker.coef, binary_stack.stacker.coef)
    # Renaming the folds changes nothing; another partition changes the out-of-fold scores.
    renamed = stacking_lib.fit_stacked_boosters(X, y, "binomial_deviance", hypers=HYPERS, folds=(ids + 1) % 4,
                                            stacker_l2=1e-2, key=1, **MEMO_KW)
    np.testing.assert_array_equal(renamed.oof_raw, binary_stack.oof_raw)
    other = stacking_lib.fit_stacked_boosters(X, y, "binomial_deviance", hypers=HYPERS, folds=np.roll(ids, 1),
                                          stacker_l2=1e-2, key=1, **MEMO_KW)
    assert not np.allclose(other.oof_raw, binary_stack.oof_raw, atol=1e-3)


# --------------------------------------------------------------------------------------------
# The model protocol.
# --------------------------------------------------------------------------------------------


def test_every_protocol_function_on_a_binary_stack(noisy, binary_stack):
    X, y, _, _ = noisy
    model = binary_stack
    assert all(hasattr(model, a) for a in PROTOCOL)
    assert model.task == "binary" and model.batch_shape == () and model.n_stages == 12
    assert model.n_features == 4 and model.n_learners == 2 and model.loss.name == "binomial_deviance"
    raw = np.asarray(jboost.predict(model, X))
    assert raw.shape == (len(X),)
    np.testing.assert_allclose(raw, _stacker_on_learners(model, X)[:, 0], rtol=1e-5, atol=1e-5)
    proba = np.asarray(jboost.predict_proba(model, X))
    p1 = 1 / (1 + np.exp(-raw.astype(np.float64)))
    np.testing.assert_allclose(proba, np.stack([1 - p1, p1], 1), rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(np.asarray(jboost.predict_class(model, X)), proba.argmax(1))
    np.testing.assert_array_equal(np.asarray(jboost.predict_mean(model, X)), proba)
    np.testing.assert_array_equal(np.asarray(stacked.stacked_predict(model, X)), proba)
    imp = np.asarray(jboost.feature_importance(model))
    gains = np.bincount(np.asarray(model.trees.features).ravel(),
                        np.asarray(model.trees.gains).ravel(), minlength=4)
    np.testing.assert_allclose(imp, gains / gains.sum(), rtol=1e-5)
    # Stages: the first m rounds of every base learner under the same stacker.
    staged = np.asarray(jboost.staged_predict(model, X))
    assert staged.shape == (12, len(X), 1)
    for m in (1, 5, 12):
        first = np.asarray(jboost.predict(model, X, n_rounds=m))
        np.testing.assert_allclose(first, _stacker_on_learners(model, X, m)[:, 0], rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(staged[m - 1, :, 0], first, rtol=1e-5, atol=1e-5)
    assert not np.allclose(staged[0], staged[-1], atol=1e-2)
    # Device arrays, zero rows, wrong columns.
    np.testing.assert_array_equal(np.asarray(jboost.predict(model, jnp.asarray(X))), raw)
    assert jboost.predict_proba(model, X[:0]).shape == (0, 2)
    with pytest.raises(ValueError, match=r"X has 3 features, but the model was fitted on 4"):
        jboost.predict(model, X[:, :3])
    with pytest.raises(ValueError, match=r"X has 3 features, but the model was fitted on 4"):
        stacked.stacked_predict(model, X[:, :3])


@pytest.mark.slow
def test_regression_and_multiclass_stacks(regression_data, multiclass_data):
    X, y, Xv, _ = regression_data
    reg = stacking_lib.fit_stacked_boosters(X, y, hypers=[dict(learning_rate=0.5), dict(l2=5.0)], folds=3, **KW)
    assert reg.task == "regression" and reg.loss.name == "squared_error"
    raw = np.asarray(jboost.predict(reg, Xv))
    np.testing.assert_allclose(raw, _stacker_on_learners(reg, Xv)[:, 0], rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(np.asarray(jboost.predict_mean(reg, Xv)), raw)
    np.testing.assert_array_equal(np.asarray(stacked.stacked_predict(reg, Xv)), raw)
    with pytest.raises(ValueError, match="predict_proba needs a classification model"):
        jboost.predict_proba(reg, Xv)
    with pytest.raises(ValueError, match="predict_class needs a classification model"):
        jboost.predict_class(reg, Xv)
    with pytest.raises(ValueError, match="predict_proba needs a classification model"):
        reg.proba_from_raw(jnp.zeros((2, 1)))

    X, y, Xv, _ = multiclass_data
    multi = stacking_lib.fit_stacked_boosters(X, y, "multinomial_deviance",
                                          hypers=[dict(learning_rate=0.5), dict(learning_rate=0.1)],
                                          folds=3, **KW)
    assert multi.task == "multiclass" and multi.oof_raw.shape == (len(X), 2, 3)
    raw = np.asarray(jboost.predict(multi, Xv))
    assert raw.shape == (len(Xv), 3)
    np.testing.assert_allclose(raw, _stacker_on_learners(multi, Xv), rtol=1e-5, atol=1e-5)
    proba = np.asarray(jboost.predict_proba(multi, Xv))
    e = np.exp(raw - raw.max(1, keepdims=True))
    np.testing.assert_allclose(proba, e / e.sum(1, keepdims=True), rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(np.asarray(jboost.predict_class(multi, Xv)), proba.argmax(1))
    staged = np.asarray(jboost.staged_predict(multi, Xv))
    assert staged.shape == (KW["n_rounds"], len(Xv), 3)
    np.testing.assert_allclose(staged[-1], raw, rtol=1e-5, atol=1e-5)
    assert jboost.feature_importance(multi).shape == (X.shape[1],)


# --------------------------------------------------------------------------------------------
# Settings.
# --------------------------------------------------------------------------------------------


def test_fit_stacked_boosters_checks_like_fit(binary_data):
    X, y, _, _ = binary_data
    fit = lambda **kw: stacking_lib.fit_stacked_boosters(X, y, "binomial_deviance", **dict(dict(hypers=HYPERS), **kw))
    with pytest.raises(ValueError, match="hypers must be a non-empty list of dicts"):
        fit(hypers=[])
    with pytest.raises(ValueError, match="hypers must be a non-empty list of dicts"):
        fit(hypers=dict(learning_rate=0.1))
    with pytest.raises(TypeError, match=r"hypers\[1\] must be a dict"):
        fit(hypers=[dict(), 0.1])
    with pytest.raises(ValueError, match=r"hypers\[0\] has unknown keys \['depth'\]"):
        fit(hypers=[dict(depth=3)])
    with pytest.raises(ValueError, match="schedules differ"):
        fit(hypers=[dict(learning_rate=lambda m: 0.1), dict(learning_rate=lambda m: 0.2)])
    # The settings are checked by jboost.fitting.settings.settings: the messages of jboost.fit.
    for bad, exc, where in ((dict(learning_rate=-1.0), ValueError, "hypers"),
                            (dict(l2=-1.0), ValueError, "hypers"),
                            (dict(subsample=0.0), ValueError, "hypers"),
                            (dict(depth=17), ValueError, "static"),
                            (dict(n_rounds=0), ValueError, "static"),
                            (dict(colsample_by="forest"), ValueError, "static")):
        with pytest.raises(exc) as ours:
            fit(hypers=[bad]) if where == "hypers" else fit(**bad)
        with pytest.raises(exc) as fits:
            jboost.fit(X, y, "binomial_deviance", **bad)
        assert str(ours.value) == str(fits.value)
    with pytest.raises(ValueError, match="y must hold binary labels 0/1 for loss 'binomial_deviance'"):
        stacking_lib.fit_stacked_boosters(X, y + 1, "binomial_deviance", hypers=HYPERS)
    with pytest.raises(ValueError, match=r"folds=1 must be in \[2, "):
        fit(folds=1)
    with pytest.raises(ValueError, match=r"folds must be an int or an \(n,\)"):
        fit(folds=np.zeros(3, np.int32))
    with pytest.raises(ValueError, match=r"stacker_l2=-1.0 must be in \[0.0, inf\]"):
        fit(stacker_l2=-1.0)
    with pytest.raises(ValueError, match="X must be 2-D"):
        stacking_lib.fit_stacked_boosters(X[:, 0], y, hypers=HYPERS)
    with pytest.raises(ValueError, match="sample_weight has 3 samples but X has"):
        fit(sample_weight=np.ones(3))
    checked = stacking_lib.stack_hyperparams([dict(learning_rate=0.3), dict(l2=2.0)])
    np.testing.assert_allclose(checked.learning_rate, [0.3, 0.1])
    np.testing.assert_allclose(checked.l2, [1.0, 2.0])
    assert combine.fit_stacked_boosters is stacking_lib.fit_stacked_boosters


def test_zero_sample_weights_are_the_fit_without_those_rows(regression_data):
    """Weights reach the borders, every fold's learners and the second tier: rows of weight 0
    (with explicit folds) give the stacked model fitted without them."""
    X, y, Xv, _ = regression_data
    hypers = [dict(learning_rate=0.5), dict(l2=5.0)]
    ids = np.arange(len(y), dtype=np.int32) % 3
    w = np.ones(len(y), np.float32)
    w[-40:] = 0.0
    weighted = stacking_lib.fit_stacked_boosters(X, y, hypers=hypers, folds=ids, sample_weight=w, **KW)
    dropped = stacking_lib.fit_stacked_boosters(X[:-40], y[:-40], hypers=hypers, folds=ids[:-40], **KW)
    np.testing.assert_array_equal(weighted.borders, dropped.borders)
    np.testing.assert_array_equal(weighted.trees.features, dropped.trees.features)
    np.testing.assert_allclose(weighted.oof_raw[:-40], dropped.oof_raw, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(weighted.stacker.coef, dropped.stacker.coef, rtol=1e-3, atol=1e-3)
    np.testing.assert_allclose(jboost.predict(weighted, Xv), jboost.predict(dropped, Xv), rtol=1e-3, atol=1e-3)
