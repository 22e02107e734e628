"""The one model protocol (jboost/models/base.py), over every model type at once.

One parametrised test per protocol function, each over every fitted model type: a Booster of
oblivious, depth-wise and loss-guided trees, a Forest of oblivious and of depth-wise trees,
BaggedBoosters, ECOCBoosters and StackedBoosters. Each model is registered
(``jboost.models.base.model_types``) and gives through the protocol alone: raw scores, class
probabilities and labels (classification), staged predictions equal to the predictions of the
same stages, a model file that loads bit for bit (and writes the same file again), SHAP values
that add up to the raw prediction (local accuracy), and -- where a scikit-learn wrapper fits it
-- the wrapper's predictions equal to the protocol's. A new model type is added here by one
entry of :data:`CASES`. The fits are small (200 rows, a few rounds) and shared by the tests.
"""

from __future__ import annotations

import numpy as np
import pytest

import jboost
from jboost import bagging
from jboost import combine
from jboost import inspect as ji
from jboost import io as jio
from jboost.io import registry
from jboost.models import base
from jboost.models import sums

try:
    from jboost import sklearn as jsk
except ImportError:  # scikit-learn is an optional extra
    jsk = None

CLASSIFICATION = ("binary", "multiclass")
SMALL = dict(n_rounds=4, depth=2, n_bins=16)


def _booster(loss, family=None, **extra):
    kw = dict(SMALL, learning_rate=0.3, **extra)
    if family is not None:
        kw["tree_family"] = family
    return (lambda X, y: jboost.fit(X, y, loss, key=0, **kw),
            lambda: (jsk.JBoostClassifier if loss == "binomial_deviance" else jsk.JBoostRegressor)(
                random_state=0, **kw))


def _forest(task, family=None):
    kw = dict(n_trees=5, depth=3, n_bins=16)
    if family is not None:
        kw["tree_family"] = family
    if task == "classification":
        est = lambda: jsk.JBoostForestClassifier(random_state=1, **kw)
    else:
        est = lambda: jsk.JBoostForestRegressor(random_state=1, **kw)
    return (lambda X, y: bagging.fit_forest(X, y, task=task, key=1, **kw), est)


#: ``name: (data set, fit(X, y) -> model, scikit-learn wrapper factory or None)``. With
#: scikit-learn installed a case with a wrapper is fitted by its wrapper (its ``booster_``).
CASES = {
    "booster": ("binary", *_booster("binomial_deviance")),
    "booster_depthwise": ("binary", *_booster("binomial_deviance", "depthwise")),
    "booster_lossguide": ("regression", *_booster("squared_error", "lossguide", max_leaves=6)),
    "forest_oblivious": ("multiclass", *_forest("classification")),
    "forest_depthwise": ("regression", *_forest("regression", "depthwise")),
    "bagged": ("binary",
               lambda X, y: bagging.fit_bagged_boosters(X, y, "binomial_deviance", n_bags=3, key=2,
                                                        **SMALL),
               lambda: jsk.JBoostBaggingClassifier(n_bags=3, random_state=2, **SMALL)),
    "ecoc": ("multiclass",
             lambda X, y: combine.fit_ecoc_boosters(X, y, combine.exhaustive_code(3), **SMALL), None),
    "stacked": ("multiclass",
                lambda X, y: combine.fit_stacked_boosters(
                    X, y, "multinomial_deviance",
                    hypers=[dict(learning_rate=0.5), dict(learning_rate=0.1)], folds=2, **SMALL),
                None),
}
TYPES = {"booster": "Booster", "booster_depthwise": "Booster", "booster_lossguide": "Booster",
         "forest_oblivious": "Forest", "forest_depthwise": "Forest", "bagged": "BaggedBoosters",
         "ecoc": "ECOCBoosters", "stacked": "StackedBoosters"}


@pytest.fixture(scope="module")
def datasets(binary_data, multiclass_data, regression_data):
    return {"binary": binary_data, "multiclass": multiclass_data, "regression": regression_data}


@pytest.fixture(scope="module")
def fitted(datasets):
    """``name -> (model, estimator or None, X_valid)``, fitted once on first use."""
    cache = {}

    def get(name):
        if name not in cache:
            data, fit, wrapper = CASES[name]
            X, y, Xv, _ = datasets[data]
            est = None
            if wrapper is not None and jsk is not None:
                est = wrapper().fit(X, y)
                model = est.booster_
            else:
                model = fit(X, y)
            cache[name] = (model, est, Xv[:60])
        return cache[name]

    return get


def _flat(raw, model):
    """Raw scores ``(n, K)`` as :func:`jboost.predict` returns them (``(n,)`` for one output)."""
    raw = np.asarray(raw)
    return raw[..., 0] if raw.shape[-1] == 1 and not base.keeps_columns(model) else raw


def test_every_model_type_is_covered_and_registered():
    assert set(TYPES.values()) == set(base.model_types())
    reg = registry.registry()["models"]
    for name, cls in base.model_types().items():
        assert reg[name] is cls and cls.__name__ == name
    assert {"LinearModel", "Categorical"} <= set(base.nested_types())
    with pytest.raises(ValueError, match="registered already"):
        base.register_model_type(type("Booster", (tuple,), {"_fields": ()}))


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(CASES))
def test_predictions(fitted, name):
    model, _, X = fitted(name)
    assert type(model).__name__ == TYPES[name] and isinstance(model, base.Model)
    assert model.batch_shape == () and model.n_features == X.shape[1]
    raw = np.asarray(jboost.predict(model, X))
    assert raw.shape[0] == len(X) and np.all(np.isfinite(raw))
    imp = np.asarray(jboost.feature_importance(model))
    assert imp.shape == (model.n_features,) and abs(imp.sum() - 1.0) < 1e-5
    if model.task not in CLASSIFICATION:
        with pytest.raises(ValueError, match="classification"):
            jboost.predict_proba(model, X)
        return
    labels = np.asarray(jboost.predict_class(model, X))
    assert labels.shape == (len(X),)
    if getattr(model, "code", None) is not None:  # ECOC: labels are decoded codewords, no proba
        with pytest.raises(ValueError, match="no calibrated class probabilities"):
            jboost.predict_proba(model, X)
        assert set(np.unique(labels)) <= set(range(model.n_classes))
        return
    proba = np.asarray(jboost.predict_proba(model, X))
    assert proba.shape[0] == len(X) and proba.shape[1] >= 2
    np.testing.assert_allclose(proba.sum(axis=1), 1.0, rtol=1e-5)
    np.testing.assert_array_equal(labels, proba.argmax(axis=1))


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(CASES))
def test_staged_predict_is_predict_of_the_first_stages(fitted, name):
    model, _, X = fitted(name)
    staged = np.asarray(jboost.staged_predict(model, X))
    assert staged.shape[:2] == (model.n_stages, len(X))
    np.testing.assert_array_equal(_flat(staged[-1], model), np.asarray(jboost.predict(model, X)))
    np.testing.assert_array_equal(_flat(staged[0], model),
                                  np.asarray(jboost.predict(model, X, n_rounds=1)))


@pytest.mark.parametrize("name", sorted(CASES))
def test_model_file_round_trips_bitwise(fitted, name, tmp_path):
    model, _, X = fitted(name)
    jboost.save(model, tmp_path / "a.jbm")
    loaded = jboost.load(tmp_path / "a.jbm")
    assert type(loaded) is type(model)
    assert jio.read_header(tmp_path / "a.jbm")["model_type"] == TYPES[name]
    a, b = np.asarray(jboost.predict(model, X)), np.asarray(jboost.predict(loaded, X))
    assert a.dtype == b.dtype and a.tobytes() == b.tobytes()
    jboost.save(loaded, tmp_path / "b.jbm")  # the loaded model writes the same file again
    (h1, arrays1), (h2, arrays2) = jio.read(tmp_path / "a.jbm"), jio.read(tmp_path / "b.jbm")
    assert h1 == h2 and arrays1.keys() == arrays2.keys()
    for k in arrays1:
        assert arrays1[k].dtype == arrays2[k].dtype and arrays1[k].tobytes() == arrays2[k].tobytes(), k


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(CASES))
def test_shap_values_add_up_to_the_raw_prediction(fitted, name):
    model, _, X = fitted(name)
    if getattr(model, "no_tree_sum", None) is not None:
        pytest.skip("not one sum of trees")
    X = X[:20]
    sv = ji.shap_values(model, X)
    values = np.asarray(sv.values)
    assert values.shape[:2] == (len(X), model.n_features)
    pred = np.asarray(jboost.predict(model, X))
    np.testing.assert_allclose(values.sum(axis=1) + np.asarray(sv.expected_value), pred,
                               atol=2e-5, rtol=1e-5)
    trees, constant, offset = sums.tree_sum(model)  # what the explainers read
    assert trees.features.ndim == 2 and offset is None


@pytest.mark.parametrize("name", sorted(n for n, c in CASES.items() if c[2] is not None))
def test_scikit_learn_wrapper_predicts_through_the_protocol(fitted, name):
    if jsk is None:
        pytest.skip("scikit-learn is not installed")
    model, est, X = fitted(name)
    assert est.booster_ is model
    np.testing.assert_array_equal(est.feature_importances_,
                                  np.asarray(jboost.feature_importance(model), np.float64))
    if model.task in CLASSIFICATION:
        proba = np.asarray(jboost.predict_proba(model, X), np.float64)
        np.testing.assert_array_equal(est.predict_proba(X), proba)
        np.testing.assert_array_equal(est.predict(X),
                                      est.classes_[np.asarray(jboost.predict_class(model, X))])
        if hasattr(est, "staged_predict_proba"):
            np.testing.assert_array_equal(list(est.staged_predict_proba(X))[-1], proba)
        return
    want = jboost.predict_mean(model, X) if hasattr(model, "loss") else jboost.predict(model, X)
    np.testing.assert_array_equal(est.predict(X), np.asarray(want, np.float64))
