"""Tests of jboost.bagging.boosters: bagging any boosted learner, the model protocol on
BaggedBoosters, and early stopping per bag (each bag stops on its own out-of-bag rows or a shared
eval_set, and equals its separate jboost.fit)."""

import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jboost
from jboost import bagging
from _bagging_data import clf_data  # noqa: F401 (fixture)
from _bagging_data import regression
from test_oob import brute_force_oob
from jboost.models import base

KW = dict(n_rounds=4, depth=2, learning_rate=0.5, n_bins=8)


@pytest.fixture(scope="module")
def bagged(clf_data):
    X, y, _, _ = clf_data
    X, y = X[:120, :4], y[:120]
    # eval_set="oob" without early stopping: each bag's out-of-bag loss curve, every round kept.
    return X, y, bagging.fit_bagged_boosters(X, y, "binomial_deviance", n_bags=3, chunk_size=2, key=9,
                                             eval_set="oob", **KW)


@pytest.mark.slow
def test_bagged_boosters_equal_separate_fits_and_oob(bagged):
    X, y, model = bagged
    assert model.trees.features.shape == (3, 4, 1, 2)
    assert model.best_round is None and model.valid_loss.shape == (3, 4)
    for b in range(3):
        k_boot, k_fit = bagging.bag_keys(jax.random.PRNGKey(9), b)
        wb = np.asarray(bagging.bootstrap_weights(k_boot, 120))
        np.testing.assert_array_equal(model.bag_weights[b], wb)
        ref = jboost.fit(X, y, "binomial_deviance", sample_weight=wb, key=k_fit, borders=model.borders,
                         eval_set=(X, y, (wb == 0).astype(np.float32)), **KW)
        np.testing.assert_allclose(model.valid_loss[b], ref.valid_loss, rtol=1e-5)
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
    assert isinstance(model, base.Model)
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
    assert model.valid_loss is None and model.best_round is None  # no eval_set: the fields of old
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


# --------------------------------------------------------------------------------------------
# Early stopping per bag.
# --------------------------------------------------------------------------------------------

ES_KW = dict(n_rounds=48, depth=2, learning_rate=0.3, n_bins=16)
ES_KEY = 5


@pytest.fixture(scope="module")
def stopped():
    """Three bags fitted together (one vmapped chunk), each stopping on its out-of-bag rows."""
    X, y = regression(200, seed=2)
    X = X[:, :4]
    model = bagging.fit_bagged_boosters(X, y, n_bags=3, chunk_size=3, key=ES_KEY, early_stopping_rounds=4,
                                        **ES_KW)
    return X, y, model


def _separate_fit(X, y, model, b, eval_set):
    """Bag ``b`` as its own jboost.fit: its bootstrap weights as sample weights, its key."""
    k_fit = bagging.bag_keys(jax.random.PRNGKey(ES_KEY), b)[1]
    return jboost.fit(X, y, sample_weight=np.asarray(model.bag_weights[b]), key=k_fit, borders=model.borders,
                      eval_set=eval_set, early_stopping_rounds=4, **ES_KW)


def _assert_bag_is(model, b, ref):
    """Bag ``b`` of ``model`` is ``ref`` (a concrete early-stopped fit): the same rounds, best round,
    trees and losses, and zero trees / NaN losses after its stop."""
    n = ref.n_rounds
    assert int(model.best_round[b]) == int(ref.best_round)
    np.testing.assert_array_equal(model.trees.features[b, :n], ref.trees.features)
    np.testing.assert_array_equal(model.trees.thresholds[b, :n], ref.trees.thresholds)
    np.testing.assert_allclose(model.trees.leaf_values[b, :n], ref.trees.leaf_values, rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(model.train_loss[b, :n], ref.train_loss, rtol=1e-4)
    np.testing.assert_allclose(model.valid_loss[b, :n], ref.valid_loss, rtol=1e-4)
    assert not np.any(model.trees.leaf_values[b, n:]) and np.all(np.isnan(model.train_loss[b, n:]))


@pytest.mark.slow
def test_each_bag_stops_on_its_out_of_bag_rows_as_its_separate_fit(stopped):
    """The vmapped bags stop at different rounds, each where its own jboost.fit (validation set:
    the rows its bootstrap left out) stops; the model keeps the rounds up to the last stop."""
    X, y, model = stopped
    stops = []
    for b in range(3):
        oob = (np.asarray(model.bag_weights[b]) == 0).astype(np.float32)
        ref = _separate_fit(X, y, model, b, (X, y, oob))
        _assert_bag_is(model, b, ref)
        stops.append(ref.n_rounds)
    assert len(set(stops)) == 3 and max(stops) == model.n_rounds < ES_KW["n_rounds"]
    assert len(set(np.asarray(model.best_round).tolist())) == 3


def test_a_shared_eval_set_stops_every_bag_on_it(stopped):
    X, y, oob_model = stopped
    Xv, yv = regression(200, seed=3)  # as many rows as the OOB eval sets: fit's program is reused
    Xv = Xv[:, :4]
    model = bagging.fit_bagged_boosters(X, y, n_bags=3, chunk_size=3, key=ES_KEY, eval_set=(Xv, yv),
                                        early_stopping_rounds=4, **ES_KW)
    np.testing.assert_array_equal(model.bag_weights, oob_model.bag_weights)
    for b in (0, 2):
        _assert_bag_is(model, b, _separate_fit(X, y, model, b, (Xv, yv)))


def test_predictions_use_each_bags_best_round(stopped):
    X, y, model = stopped
    best = np.asarray(model.best_round)
    # Each bag on its own, truncated after its best round.
    per_bag = np.stack([np.asarray(jboost.predict(_bag(model, b), X, n_rounds=int(best[b]) + 1))
                        for b in range(3)])
    np.testing.assert_array_equal(model.bag_raw_scores(X)[..., 0], per_bag)  # bitwise, bag by bag
    np.testing.assert_allclose(jboost.predict(model, X), per_bag.mean(0), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(bagging.bagged_predict(model, X), per_bag.mean(0), rtol=1e-6, atol=1e-6)
    # n_rounds=m: every bag's first m rounds (as a Booster with best_round); the last stage is
    # every round fitted, not the best rounds.
    every = np.stack([np.asarray(jboost.predict(_bag(model, b), X)) for b in range(3)]).mean(0)
    np.testing.assert_allclose(jboost.predict(model, X, n_rounds=model.n_rounds), every, rtol=1e-6, atol=1e-6)
    assert not np.allclose(every, per_bag.mean(0), rtol=1e-4)
    # The OOB estimate: each bag's best rounds at the rows it left out.
    oob = bagging.bagged_oob(model, X, y)
    pred, _, _ = brute_force_oob(per_bag[..., None], np.asarray(model.bag_weights), y, classification=False)
    np.testing.assert_allclose(oob.prediction, pred, rtol=1e-5, atol=1e-6)


def test_early_stopped_bags_round_trip_through_a_model_file(stopped, tmp_path):
    X, _, model = stopped
    path = os.path.join(tmp_path, "bags.jbm")
    jboost.save(model, path)
    loaded = jboost.load(path)
    assert type(loaded) is bagging.BaggedBoosters
    for (p, a), b in zip(jax.tree_util.tree_flatten_with_path(model)[0], jax.tree_util.tree_leaves(loaded)):
        assert np.asarray(a).dtype == np.asarray(b).dtype, jax.tree_util.keystr(p)
        np.testing.assert_array_equal(a, b, err_msg=jax.tree_util.keystr(p))
    np.testing.assert_array_equal(jboost.predict(loaded, X[:20]), jboost.predict(model, X[:20]))


@pytest.mark.parametrize("kwargs, error, match", [
    (dict(eval_metric="mse"), ValueError, "eval_metric is the early-stopping score: pass early_stopping_rounds too"),
    (dict(early_stopping_rounds=0), ValueError, r"early_stopping_rounds=0 must be in \[1, "),
    (dict(early_stopping_rounds=3, early_stopping_tolerance=-1.0), ValueError,
     r"early_stopping_tolerance=-1.0 must be in \[0.0, inf\]"),
    (dict(early_stopping_rounds=3, eval_metric="auc"), ValueError, "eval_metric='auc' must be None, one of"),
    (dict(early_stopping_rounds=3, eval_metric="error_rate"), ValueError,
     "eval_metric='error_rate' needs a classification loss"),
    (dict(early_stopping_rounds=3, eval_set="valid"), ValueError, "eval_set='valid' must be 'oob'"),
    (dict(early_stopping_rounds=3, eval_set=(np.zeros((4, 2)), np.zeros(4))), ValueError,
     "eval_set X has 2 features but X has 3"),
    (dict(early_stopping_rounds=3, bootstrap="bayesian"), ValueError,
     "bootstrap='bayesian' weights every row .* pass eval_set=\\(X_valid, y_valid\\)"),
    (dict(eval_set="oob", bootstrap="bayesian"), ValueError, "bootstrap='bayesian' weights every row"),
    # Only row 0 has weight: the bags that drew it have no weighted out-of-bag row to stop on.
    (dict(early_stopping_rounds=3, n_bags=10, sample_weight=np.eye(1, 12)[0]), ValueError,
     r"bag \d+ \(\d+ of 10 bags\) has no out-of-bag row with a positive sample_weight"),
])
def test_early_stopping_argument_errors(kwargs, error, match):
    X = np.arange(36, dtype=np.float32).reshape(12, 3)
    y = np.arange(12, dtype=np.float32)
    with pytest.raises(error, match=match):
        bagging.fit_bagged_boosters(X, y, **kwargs)
