"""Tests of jboost.bagging.boosters: bagging any boosted learner, and the model protocol on
BaggedBoosters."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jboost
from jboost import bagging
from jboost import model as model_lib
from _bagging_data import clf_data  # noqa: F401 (fixture)
from test_oob import brute_force_oob

KW = dict(n_rounds=4, depth=2, learning_rate=0.5, n_bins=8)


@pytest.fixture(scope="module")
def bagged(clf_data):
    X, y, _, _ = clf_data
    X, y = X[:120, :4], y[:120]
    return X, y, bagging.fit_bagged_boosters(X, y, "binomial_deviance", n_bags=3, chunk_size=2, key=9, **KW)


def test_bagged_boosters_equal_separate_fits_and_oob(bagged):
    X, y, model = bagged
    assert model.trees.features.shape == (3, 4, 1, 2)
    for b in range(3):
        k_boot, k_fit = bagging.bag_keys(jax.random.PRNGKey(9), b)
        wb = np.asarray(bagging.bootstrap_weights(k_boot, 120))
        np.testing.assert_array_equal(model.bag_weights[b], wb)
        ref = jboost.fit(X, y, "binomial_deviance", sample_weight=wb, key=k_fit, borders=model.borders, **KW)
        np.testing.assert_array_equal(model.trees.features[b], ref.trees.features)
        np.testing.assert_array_equal(model.trees.thresholds[b], ref.trees.thresholds)
        np.testing.assert_allclose(model.trees.leaf_values[b], ref.trees.leaf_values, rtol=1e-4, atol=1e-6)
        np.testing.assert_allclose(model.baseline[b], ref.baseline, rtol=1e-5)
        np.testing.assert_allclose(bagging.bagged_outputs(model, X[:7])[b], jboost.predict_proba(ref, X[:7]),
                                   rtol=1e-5, atol=1e-6)
    outs = np.asarray(bagging.bagged_outputs(model, X))
    np.testing.assert_allclose(bagging.bagged_predict(model, X), outs.mean(0), rtol=1e-6)
    oob = bagging.bagged_oob(model, X, y)
    pred, _, errors = brute_force_oob(outs, np.asarray(model.bag_weights), y, classification=True)
    np.testing.assert_allclose(oob.prediction, pred, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(oob.error, errors[:, 0], atol=1e-6)


def _bag(model, b):
    """Bag ``b`` as a Booster."""
    return jboost.Booster(trees=jax.tree_util.tree_map(lambda a: a[b], model.trees), borders=model.borders,
                          baseline=model.baseline[b],
                          loss=jax.tree_util.tree_map(lambda a: a[b], model.loss),
                          train_loss=model.train_loss[b], valid_loss=model.train_loss[b])


def test_every_protocol_function_on_bagged_boosters(bagged):
    X, y, model = bagged
    Xs = X[:30]
    assert isinstance(model, model_lib.Model)
    assert model.task == "binary" and model.batch_shape == () and model.n_features == 4
    assert model.n_stages == model.n_rounds == 4 and model.n_bags == 3
    per_bag = np.stack([np.asarray(jboost.predict(_bag(model, b), Xs)) for b in range(3)])
    raw = np.asarray(jboost.predict(model, Xs))
    assert raw.shape == (30,)
    np.testing.assert_allclose(raw, per_bag.mean(0), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(jboost.predict(model, Xs, n_rounds=2),
                               np.mean([np.asarray(jboost.predict(_bag(model, b), Xs, n_rounds=2))
                                        for b in range(3)], axis=0), rtol=1e-6, atol=1e-6)
    proba = np.asarray(jboost.predict_proba(model, Xs))
    assert proba.shape == (30, 2)
    np.testing.assert_array_equal(np.asarray(jboost.predict_class(model, Xs)), proba.argmax(1))
    # Bagging's usual combination: the mean of the bags' probabilities (not the link of the mean raw).
    per_bag_proba = np.stack([np.asarray(jboost.predict_proba(_bag(model, b), Xs)) for b in range(3)])
    np.testing.assert_allclose(proba, per_bag_proba.mean(0), rtol=1e-5)
    assert not np.allclose(proba[:, 1], 1 / (1 + np.exp(-raw)), rtol=1e-5)
    np.testing.assert_allclose(bagging.bagged_predict_proba(model, Xs), per_bag_proba.mean(0), rtol=1e-5)
    np.testing.assert_allclose(bagging.bagged_predict(model, Xs), per_bag_proba.mean(0), rtol=1e-5)
    staged = np.asarray(jboost.staged_predict(model, Xs))
    assert staged.shape == (4, 30, 1)
    for m in range(1, 5):
        np.testing.assert_array_equal(staged[m - 1, :, 0], np.asarray(jboost.predict(model, Xs, n_rounds=m)))
    imp = np.asarray(jboost.feature_importance(model))
    assert imp.shape == (4,) and abs(imp.sum() - 1.0) < 1e-5


def test_regression_bagged_boosters(clf_data):
    X, _, _, _ = clf_data
    X = X[:100, :3]
    y = (X[:, 0] + 0.1 * X[:, 1]).astype(np.float32)
    model = bagging.fit_bagged_boosters(X, y, n_bags=2, key=1, **KW)
    assert model.task == "regression"
    pred = np.asarray(jboost.predict(model, X[:10]))
    np.testing.assert_allclose(pred, np.asarray(bagging.bagged_predict(model, X[:10])), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(np.asarray(jboost.predict_mean(model, X[:10])), pred, rtol=1e-6)
    with pytest.raises(ValueError, match="predict_proba needs a classification model"):
        jboost.predict_proba(model, X[:10])
    with pytest.raises(ValueError, match="predict_proba needs a classification model"):
        bagging.bagged_predict_proba(model, X[:10])


def test_wrong_number_of_columns_raises(bagged):
    X, y, model = bagged
    for call in (lambda X: jboost.predict(model, X), lambda X: bagging.bagged_predict(model, X),
                 lambda X: bagging.bagged_outputs(model, X), lambda X: bagging.bagged_predict_proba(model, X),
                 lambda X: jboost.staged_predict(model, X)):
        with pytest.raises(ValueError, match=r"X has 3 features, but the model was fitted on 4"):
            call(X[:5, :3])
    with pytest.raises(ValueError, match=r"X_train has 5 features, but the model was fitted on 4"):
        bagging.bagged_oob(model, np.concatenate([X, X[:, :1]], axis=1), y)


def test_argument_errors_name_the_argument():
    X = np.zeros((10, 3), np.float32)
    y = (np.arange(10) % 2).astype(np.float32)
    with pytest.raises(ValueError, match="bootstrap='half' must be one of"):
        bagging.fit_bagged_boosters(X, y, bootstrap="half")
    with pytest.raises(ValueError, match=r"n_bags=0 must be in \[1, "):
        bagging.fit_bagged_boosters(X, y, n_bags=0)
    with pytest.raises(ValueError, match=r"depth=0 must be in \[1, 16\]"):
        bagging.fit_bagged_boosters(X, y, depth=0)
    with pytest.raises(ValueError, match="y must hold binary labels 0/1"):
        bagging.fit_bagged_boosters(X, y + 2, "binomial_deviance")


def test_verbose_bagged_boosters_report_each_chunk(capsys):
    """verbose=True prints a line as each chunk of bags finishes; the bags are the same."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 4))
    y = X[:, 0] + rng.normal(size=300)
    kw = dict(n_bags=6, chunk_size=2, n_rounds=5, depth=2, n_bins=16)
    quiet = bagging.fit_bagged_boosters(X, y, **kw)
    loud = bagging.fit_bagged_boosters(X, y, verbose=True, **kw)
    jax.block_until_ready(loud.trees)
    for a, b in zip(jax.tree_util.tree_leaves(quiet), jax.tree_util.tree_leaves(loud)):
        np.testing.assert_array_equal(a, b)
    lines = [l for l in capsys.readouterr().out.splitlines() if l.startswith("[jboost] bagged boosters")]
    assert [l.split()[4] for l in lines] == ["2/6", "4/6", "6/6"]
