"""Tables as users hold them, through the entry points beside jboost.fit: the algorithms, sweeps
and fine-tuning keep a DataFrame's feature names (prediction matches columns by name, never by
position) and map class labels as users have them (strings, {-1, 1}) to 0..K-1, keeping them."""

import numpy as np
import optax
import pytest

import jboost
from jboost import algorithms
from jboost import sweep as sweep_lib

# Plumbing tests on tiny programs: compiled without XLA's optimisations (conftest.quick_compiles).
pytestmark = pytest.mark.usefixtures("quick_compiles")

pd = pytest.importorskip("pandas")


def _table(n=240, seed=0):
    rng = np.random.default_rng(seed)
    X = pd.DataFrame(rng.normal(size=(n, 4)).astype(np.float32), columns=["a", "b", "c", "d"])
    binary = np.where(X.a + 0.5 * X.b > 0, "yes", "no")
    three = np.array(["x", "y", "z"])[(X.a > 0).to_numpy().astype(int) + (X.c > 0.5).to_numpy().astype(int)]
    return X, binary, three


def _check_by_name(model, X):
    """Reordered columns predict as the original order, which position would not."""
    reordered = X[list(X.columns[::-1])]
    by_name = np.asarray(jboost.predict(model, reordered))
    np.testing.assert_array_equal(by_name, np.asarray(jboost.predict(model, X)))
    positional = np.asarray(jboost.predict(model, reordered.to_numpy()))
    assert not np.array_equal(positional, by_name)  # the test can see a positional match
    with pytest.raises(ValueError, match="missing \\['d'\\]"):
        jboost.predict(model, X.drop(columns="d"))


FITS = {
    "adaboost_m1": lambda X, yb, yk: (algorithms.adaboost_m1(X, yb, n_rounds=4), yb),
    "samme": lambda X, yb, yk: (algorithms.samme(X, yk, n_rounds=4), yk),
    "gentle_adaboost": lambda X, yb, yk: (algorithms.gentle_adaboost(X, yb, n_rounds=4), yb),
    "logitboost": lambda X, yb, yk: (algorithms.logitboost(X, yk, n_rounds=4), yk),
    "gradient_boost": lambda X, yb, yk: (
        algorithms.gradient_boost(X, yb, loss="binomial_deviance", n_rounds=4), yb),
}


@pytest.mark.parametrize("name", sorted(FITS))
def test_algorithms_keep_names_and_classes(name):
    X, yb, yk = _table()
    model, y = FITS[name](X, yb, yk)
    assert tuple(model.feature_names_in_) == ("a", "b", "c", "d")
    np.testing.assert_array_equal(model.classes_, np.unique(y))
    _check_by_name(model, X)
    labels = jboost.predict_class(model, X)
    assert labels.dtype.kind == "U" and set(labels) <= set(y)
    assert np.mean(labels == y) > 0.8


def test_algorithm_labels_minus_one_one_and_continuation():
    X, yb, _ = _table()
    y = np.where(yb == "yes", 1, -1)
    model = algorithms.real_adaboost(X, y, n_rounds=3)
    np.testing.assert_array_equal(model.classes_, [-1, 1])
    assert set(np.asarray(jboost.predict_class(model, X))) <= {-1, 1}
    reordered = X[["c", "a", "d", "b"]]
    more = algorithms.real_adaboost(reordered, y, n_rounds=2, init_model=model)  # by name
    same = algorithms.real_adaboost(X, y, n_rounds=5)
    assert more.n_rounds == 5
    np.testing.assert_array_equal(np.asarray(jboost.predict(more, X)), np.asarray(jboost.predict(same, X)))
    with pytest.raises(ValueError, match="labels the training labels do not have"):
        algorithms.real_adaboost(X, np.where(y > 0, 2, -1), n_rounds=1, init_model=model)


def test_sweep_models_keep_names_and_classes():
    X, yb, _ = _table()
    result = sweep_lib.sweep(X, yb, loss="binomial_deviance", grid={"learning_rate": [0.1, 0.3]},
                             n_rounds=4, folds=3, keep_trees=True)
    assert result.feature_names == ("a", "b", "c", "d")
    np.testing.assert_array_equal(result.classes, ["no", "yes"])
    models = result.models()
    _check_by_name(models, X)
    labels = jboost.predict_class(models, X)
    assert labels.shape == models.batch_shape + (len(yb),) and set(np.unique(labels)) <= {"no", "yes"}
    refit = result.refit(X, yb)
    np.testing.assert_array_equal(refit.classes_, ["no", "yes"])


def test_finetune_reads_columns_by_name_and_labels_by_class():
    X, yb, _ = _table()
    model = jboost.fit(X, yb, loss="binomial_deviance", n_rounds=4)
    reordered = X[list(X.columns[::-1])]
    tuned = jboost.finetune(model, reordered, yb, None, optax.sgd(0.1), n_steps=2,
                            eval_set=(reordered, yb))
    again = jboost.finetune(model, X, yb, None, optax.sgd(0.1), n_steps=2, eval_set=(X, yb))
    np.testing.assert_array_equal(np.asarray(tuned.valid_loss), np.asarray(again.valid_loss))
    np.testing.assert_array_equal(np.asarray(jboost.predict(tuned, X)), np.asarray(jboost.predict(again, X)))
    np.testing.assert_array_equal(tuned.classes_, ["no", "yes"])
    with pytest.raises(ValueError, match="labels the training labels do not have"):
        jboost.finetune(model, X, np.where(yb == "yes", "Y", "no"), None, optax.sgd(0.1), n_steps=1)


def test_shap_and_permutation_importance_read_columns_by_name_and_labels_by_class():
    from jboost import inspect as inspect_lib

    X, yb, _ = _table()
    model = jboost.fit(X, yb, loss="binomial_deviance", n_rounds=4)
    reordered = X[list(X.columns[::-1])]
    shap = inspect_lib.shap_values(model, X[:20], data=X[:50])
    again = inspect_lib.shap_values(model, reordered[:20], data=reordered[:50])
    np.testing.assert_array_equal(np.asarray(again.values), np.asarray(shap.values))
    positional = inspect_lib.shap_values(model, reordered[:20].to_numpy(), data=reordered[:50].to_numpy())
    assert not np.array_equal(np.asarray(positional.values), np.asarray(shap.values))
    imp = np.asarray(inspect_lib.permutation_importance(model, X, yb, metric="error_rate", n_repeats=2))
    imp_r = np.asarray(inspect_lib.permutation_importance(model, reordered, yb, metric="error_rate", n_repeats=2))
    assert np.argmax(imp.mean(-1)) == 0  # column a decides the labels
    np.testing.assert_array_equal(imp_r, imp)  # feature j is the model's j-th feature either way


@pytest.mark.slow
def test_shap_values_of_categorical_columns_sum_by_input_column():
    from jboost import inspect as inspect_lib

    rng = np.random.default_rng(3)
    n = 400
    city = rng.choice([f"c{i}" for i in range(30)], n)  # target statistics (above one_hot_max_size)
    color = rng.choice(["red", "green"], n)               # one-hot
    X = pd.DataFrame({"x": rng.normal(size=n).astype(np.float32), "city": city, "color": color})
    effect = {f"c{i}": (i % 3 - 1.0) for i in range(30)}
    y = (X.x + X.city.map(effect) + (X.color == "red") > 0).astype(int).to_numpy()
    model = jboost.fit(X, y, "binomial_deviance", n_rounds=8, depth=3)
    shap = inspect_lib.shap_values(model, X[:30], data=X)
    values = np.asarray(shap.values)
    assert values.shape == (30, 3)  # one column per input column: x, city, color
    raw = np.asarray(jboost.predict(model, X[:30]))
    np.testing.assert_allclose(values.sum(1) + float(shap.expected_value), raw, rtol=1e-5, atol=1e-5)
    inter = inspect_lib.shap_interaction_values(model, X[:5], data=X)
    assert np.asarray(inter.values).shape == (5, 3, 3)
    np.testing.assert_allclose(np.asarray(inter.values).sum(2), values[:5], rtol=1e-4, atol=1e-5)
    reordered = X[["color", "x", "city"]]
    np.testing.assert_array_equal(np.asarray(inspect_lib.shap_values(model, reordered[:30], data=reordered).values),
                                  values)


def test_numpy_reader_matches_a_dataframes_columns_by_name(tmp_path):
    from jboost import io as jio

    X, yb, _ = _table()
    model = jboost.fit(X, yb, loss="binomial_deviance", n_rounds=4)
    path = tmp_path / "m.jbm"
    jboost.save(model, path)
    reordered = X[list(X.columns[::-1])]
    want = np.asarray(jboost.predict(model, X))
    np.testing.assert_array_equal(jio.predict_numpy(path, reordered), want)
    assert not np.array_equal(jio.predict_numpy(path, reordered.to_numpy()), want)
    with pytest.raises(ValueError, match="missing \\['d'\\]"):
        jio.predict_numpy(path, X.drop(columns="d"))


def test_a_model_of_class_indices_is_not_continued_with_mapped_labels():
    X, yb, _ = _table()
    y01 = (yb == "yes").astype(np.int32)
    model = jboost.fit(X, y01, loss="binomial_deviance", n_rounds=2)
    with pytest.raises(ValueError, match="fitted on class indices"):
        jboost.fit(X, yb, loss="binomial_deviance", n_rounds=2, init_model=model)
    with pytest.raises(ValueError, match="fitted on class indices"):
        algorithms.logitboost(X, yb, n_rounds=2, init_model=algorithms.logitboost(X, y01, n_rounds=2))
