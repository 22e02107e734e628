"""The model protocol (jboost/models/base.py): predict, predict_proba, predict_class, predict_mean,
feature_importance and staged_predict on a Booster, one model or a vmapped batch of them."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jboost
from jboost.models import base


@pytest.fixture(scope="module")
def binary_model(binary_data, fit_kw):
    X, y, Xv, yv = binary_data
    return jboost.fit(X, y, "binomial_deviance", **fit_kw, learning_rate=0.3)


@pytest.fixture(scope="module")
def multi_model(multiclass_data, fit_kw):
    X, y, Xv, yv = multiclass_data
    return jboost.fit(X, y, "multinomial_deviance", **fit_kw, learning_rate=0.3)


def test_every_protocol_function_on_a_booster(binary_data, binary_model, multi_model, multiclass_data):
    _, _, Xv, _ = binary_data
    for model, k in ((binary_model, 1), (multi_model, 3)):
        assert isinstance(model, base.Model)
        raw = np.asarray(jboost.predict(model, Xv))
        assert raw.shape == ((len(Xv),) if k == 1 else (len(Xv), k))
        proba = np.asarray(jboost.predict_proba(model, Xv))
        n_classes = 2 if k == 1 else k
        assert proba.shape == (len(Xv), n_classes)
        np.testing.assert_allclose(proba.sum(axis=1), 1.0, rtol=1e-5)
        labels = np.asarray(jboost.predict_class(model, Xv))
        np.testing.assert_array_equal(labels, proba.argmax(axis=1))
        np.testing.assert_array_equal(np.asarray(jboost.predict_mean(model, Xv)), proba)
        imp = np.asarray(jboost.feature_importance(model))
        assert imp.shape == (model.n_features,) and abs(imp.sum() - 1.0) < 1e-5
        assert model.task == ("binary" if k == 1 else "multiclass") and model.batch_shape == ()
        assert model.n_stages == model.n_rounds


def test_staged_predict_is_predict_with_the_first_rounds(binary_data, binary_model):
    _, _, Xv, _ = binary_data
    staged = np.asarray(jboost.staged_predict(binary_model, Xv))
    assert staged.shape == (binary_model.n_rounds, len(Xv), 1)
    for m in range(1, binary_model.n_rounds + 1):
        np.testing.assert_array_equal(staged[m - 1, :, 0], np.asarray(jboost.predict(binary_model, Xv, n_rounds=m)))


def _error(raw, y):
    return jnp.mean(((raw[:, 0] > 0).astype(jnp.float32) != y).astype(jnp.float32))


def test_staged_predict_evaluates_a_function_per_round(binary_data, binary_model):
    _, _, Xv, yv = binary_data
    curve = np.asarray(jboost.staged_predict(binary_model, Xv, _error, jnp.asarray(yv)))
    ref = [np.mean(np.asarray(jboost.predict_class(binary_model, Xv, n_rounds=m)) != yv)
           for m in range(1, binary_model.n_rounds + 1)]
    np.testing.assert_allclose(curve, ref, rtol=0, atol=1e-7)


@pytest.mark.slow
def test_a_vmapped_batch_predicts_outside_vmap(binary_data, fit_kw):
    X, y, Xv, _ = binary_data
    rates = jnp.array([0.1, 0.5])
    batch = jax.vmap(lambda lr: jboost.fit(X, y, "binomial_deviance", **fit_kw, learning_rate=lr))(rates)
    assert batch.batch_shape == (2,)
    raw = np.asarray(jboost.predict(batch, Xv))
    proba = np.asarray(jboost.predict_proba(batch, Xv))
    labels = np.asarray(jboost.predict_class(batch, Xv))
    imp = np.asarray(jboost.feature_importance(batch))
    assert raw.shape == (2, len(Xv)) and proba.shape == (2, len(Xv), 2) and labels.shape == (2, len(Xv))
    assert imp.shape == (2, X.shape[1])
    for i, lr in enumerate(np.asarray(rates)):
        one = jboost.fit(X, y, "binomial_deviance", **fit_kw, learning_rate=float(lr))
        np.testing.assert_array_equal(raw[i], np.asarray(jboost.predict(one, Xv)))
        np.testing.assert_array_equal(proba[i], np.asarray(jboost.predict_proba(one, Xv)))
        np.testing.assert_array_equal(labels[i], np.asarray(jboost.predict_class(one, Xv)))
    with pytest.raises(ValueError, match="staged_predict takes one model"):
        jboost.staged_predict(batch, Xv)
    # Inside jax.vmap the model is traced: host rows are predicted as they are (no buckets).
    for fn in (jboost.predict, jboost.predict_proba, jboost.predict_class):
        inside = jax.vmap(lambda m: fn(m, np.asarray(Xv[:7], np.float32)))(batch)
        np.testing.assert_array_equal(np.asarray(inside), np.asarray(fn(batch, Xv[:7])))


def test_zero_rows_give_empty_predictions(binary_model, multi_model):
    X0 = np.zeros((0, binary_model.n_features), np.float32)
    assert jboost.predict(binary_model, X0).shape == (0,)
    assert jboost.predict_proba(binary_model, X0).shape == (0, 2)
    assert jboost.predict_class(binary_model, X0).shape == (0,)
    assert jboost.predict(multi_model, X0).shape == (0, 3)
    assert jboost.predict_proba(multi_model, X0).shape == (0, 3)


def test_not_a_model_and_wrong_columns_are_named(binary_model, binary_data):
    _, _, Xv, _ = binary_data
    with pytest.raises(TypeError, match="model must be a fitted jboost ensemble"):
        jboost.predict({"trees": 1}, Xv)
    with pytest.raises(ValueError, match=r"X has 4 features, but the model was fitted on 5"):
        jboost.predict_proba(binary_model, Xv[:, :4])


def test_regression_models_have_no_probabilities(regression_data, fit_kw):
    X, y, Xv, _ = regression_data
    reg = jboost.fit(X, y, "squared_error", **fit_kw)
    with pytest.raises(ValueError, match="predict_proba needs a classification model"):
        jboost.predict_proba(reg, Xv)
    with pytest.raises(ValueError, match="predict_class needs a classification model"):
        jboost.predict_class(reg, Xv)
    np.testing.assert_array_equal(np.asarray(jboost.predict_mean(reg, Xv)), np.asarray(jboost.predict(reg, Xv)))


def test_staged_predict_with_several_trees_per_round_is_predict(multiclass_data, fit_kw):
    # K-class LogitBoost: K trees per round whose vector leaves all move every output (centred), so
    # the order in which a round's trees are added shows in the last bits.
    X, y, Xv, _ = multiclass_data
    model = jboost.algorithms.logitboost(X, y, n_rounds=fit_kw["n_rounds"], depth=fit_kw["depth"],
                                         n_bins=fit_kw["n_bins"])
    assert model.trees.features.shape[1] == 3  # three trees per round
    assert np.all(np.count_nonzero(np.asarray(model.trees.leaf_values[0, 0]), axis=-1) == 3)
    staged = np.asarray(jboost.staged_predict(model, Xv))
    for m in range(1, model.n_rounds + 1):
        np.testing.assert_array_equal(staged[m - 1], np.asarray(jboost.predict(model, Xv, n_rounds=m)))


def test_row_buckets_cover_every_row_with_few_sizes():
    # Issue 19: host rows are predicted in at most 8 batch sizes per octave, so a new batch size
    # reuses a compiled program; the head is a view (no copy), only the rest is padded.
    sizes = set()
    for n in range(1, 5000):
        parts = base.row_parts(n)
        assert parts[0][0] == 0 and parts[-1][1] == n
        assert all(a[1] == b[0] for a, b in zip(parts, parts[1:]))
        assert all(stop - start <= size for start, stop, size in parts)
        assert parts[0][2] == parts[0][1] or n <= base.SMALLEST_BUCKET  # the head is not padded
        sizes.update(size for _, _, size in parts)
        assert base.row_bucket(n) >= n and base.row_bucket(n) <= max(16, 1.125 * n)
    assert len(sizes) <= 8 * 13 + 1, len(sizes)  # 8 per octave up to 2^13 rows, and 16


@pytest.mark.slow
@pytest.mark.parametrize("n", [1, 7, 16, 17, 33, 99])
def test_bucketed_predictions_are_the_exact_shape_predictions(binary_model, multi_model, binary_data, n):
    # Every row's prediction is independent of the batch: bucketed (padded, split) rows give
    # bitwise what the program of exactly n rows gives (a device array is predicted as it is).
    _, _, Xv, _ = binary_data
    X = np.asarray(Xv[:n], np.float32)
    for model in (binary_model, multi_model):
        for fn in (jboost.predict, jboost.predict_proba, jboost.predict_class, jboost.predict_mean):
            np.testing.assert_array_equal(np.asarray(fn(model, X)), np.asarray(fn(model, jnp.asarray(X))))
    margin = np.linspace(-1, 1, n, dtype=np.float32)
    np.testing.assert_array_equal(np.asarray(jboost.predict(binary_model, X, base_margin=margin)),
                                  np.asarray(jboost.predict(binary_model, jnp.asarray(X), base_margin=margin)))


def test_a_new_batch_size_in_a_predicted_bucket_compiles_nothing(binary_model, binary_data, caplog):
    # Issue 19: every new batch size used to compile the prediction program again (0.1-0.2 s).
    _, _, Xv, _ = binary_data
    X = np.asarray(Xv, np.float32)
    for n in (9, 40, 44):  # buckets 16 and 40 (+ tail 4 -> 16), 44
        for fn in (jboost.predict, jboost.predict_proba, jboost.predict_class):
            fn(binary_model, X[:n])
    with jax.log_compiles(True), caplog.at_level("WARNING"):
        for n in (3, 11, 42, 43):  # heads 40 (42, 43), tails padded to 16
            for fn in (jboost.predict, jboost.predict_proba, jboost.predict_class):
                fn(binary_model, X[:n]).block_until_ready()
    compiled = [r.getMessage()[:120] for r in caplog.records if "Compiling" in r.getMessage()]
    assert not compiled, compiled


def test_feature_importance_counts_only_the_rounds_predictions_use(binary_model):
    # With early stopping predictions use rounds 0..best_round: so does the importance.
    stopped = binary_model._replace(best_round=jnp.int32(1))
    first_two = binary_model._replace(trees=jax.tree_util.tree_map(lambda a: a[:2], binary_model.trees))
    np.testing.assert_array_equal(jboost.feature_importance(stopped), jboost.feature_importance(first_two))
    assert not np.array_equal(jboost.feature_importance(stopped), jboost.feature_importance(binary_model))
