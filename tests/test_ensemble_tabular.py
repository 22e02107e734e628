"""Tabular input of every ensemble, as ``jboost.fit`` takes it: a DataFrame's column names kept
(prediction matches columns by name, never silently by position; a continued fit orders its
columns by the model's names) and class labels as users have them (strings, ``{-1, 1}``,
``{3, 7, 9}``: ``classes_``, labels out of ``predict_class``), for forests, bagged boosters,
ECOC and stacked ensembles. Every fit is tiny (160 rows, depth <= 3, 16 bins, a few trees)."""

import jax
import numpy as np
import pytest

import jboost
from jboost import bagging
from jboost import combine
from jboost.models import metadata

# Plumbing tests on tiny programs: compiled without XLA's optimisations (conftest.quick_compiles).
pytestmark = pytest.mark.usefixtures("quick_compiles")

pd = pytest.importorskip("pandas")

COLS = ["age", "income", "height", "score", "days"]
KINDS = ("forest", "bagged", "ecoc", "stacking")


def fit(kind, X, y, n_classes=3, **kw):
    """A tiny ensemble of ``kind`` on ``(X, y)`` (labels of ``n_classes`` classes)."""
    small = dict(depth=2, n_bins=16, key=1)
    if kind == "forest":
        return bagging.fit_forest(X, y, **{"n_trees": 4, "chunk_size": 2, **small, "depth": 3, **kw})
    loss = "multinomial_deviance" if n_classes > 2 else "binomial_deviance"
    if kind == "bagged":
        return bagging.fit_bagged_boosters(X, y, loss, **{"n_bags": 2, "n_rounds": 3, "chunk_size": 2,
                                                          "learning_rate": 0.5, **small, **kw})
    if kind == "ecoc":
        code = combine.exhaustive_code(3) if n_classes == 3 else np.array([[0], [1]])
        return combine.fit_ecoc_boosters(X, y, code, **{"n_rounds": 3, "learning_rate": 0.5, **small,
                                                        **kw})
    return combine.fit_stacked_boosters(X, y, loss, hypers=[{"learning_rate": 0.5}, {"l2": 3.0}],
                                        folds=2, n_rounds=3, **small, **kw)


@pytest.fixture(scope="module")
def table():
    """Five features on very different scales (so a column taken for another changes the
    scores), 3-class and 2-class labels as class indices."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(160, 5)) * np.array([1.0, 30.0, 0.1, 5.0, 100.0]) + np.array([40, 500, 1.7, 0, 0])
    z = (X - X.mean(0)) / X.std(0)
    y3 = np.digitize(z[:, 0] + z[:, 1] - z[:, 4], [-0.7, 0.7]).astype(np.int32)
    y2 = (z[:, 1] + z[:, 3] > 0).astype(np.int32)
    return pd.DataFrame(X, columns=COLS), y3, y2


@pytest.fixture(scope="module")
def fitted(table):
    """Each kind fitted on the DataFrame with class indices: 3 classes and 2."""
    df, y3, y2 = table
    return {kind: (fit(kind, df, y3), fit(kind, df, y2, n_classes=2)) for kind in KINDS}


def _arrays(out):
    return [np.asarray(a) for a in jax.tree_util.tree_leaves(out)]


def assert_same(a, b):
    la, lb = _arrays(a), _arrays(b)
    assert len(la) == len(lb)
    for u, v in zip(la, lb):
        assert u.dtype == v.dtype and u.shape == v.shape
        np.testing.assert_array_equal(u, v)


def prediction_paths(kind, y):
    """Every way to predict from rows that the kind offers: the protocol's and its own."""
    paths = {"predict": jboost.predict, "predict_class": jboost.predict_class,
             "staged_predict": lambda m, X: jboost.staged_predict(m, X)}
    if kind != "ecoc":
        paths["predict_proba"] = jboost.predict_proba
    if kind == "forest":
        paths.update(vote=bagging.forest_vote,
                     vote_class=lambda m, X: bagging.forest_predict_class(m, X, vote=True),
                     oob=lambda m, X: bagging.forest_oob(m, X, y).prediction,
                     staged_errors=lambda m, X: bagging.forest_staged(m, X, y).error)
    elif kind == "bagged":
        paths.update(outputs=bagging.bagged_outputs, bagged_predict=bagging.bagged_predict,
                     bagged_proba=bagging.bagged_predict_proba,
                     oob=lambda m, X: bagging.bagged_oob(m, X, y).prediction)
    elif kind == "ecoc":
        paths.update(hamming=lambda m, X: combine.ecoc_predict(m, X, "hamming"),
                     bits=combine.ecoc_bit_scores)
    else:
        paths.update(stacked_predict=combine.stacked_predict,
                     as_booster=lambda m, X: jboost.predict(m.as_booster(), X))
    return paths


@pytest.mark.slow
@pytest.mark.parametrize("kind", KINDS)
def test_an_ensemble_fitted_on_a_dataframe_matches_columns_by_name(kind, table, fitted, tmp_path):
    """Reversed columns predict bitwise what the fit's order predicts, on every prediction path;
    the same values by position would not (so the check can fail); a missing and an unexpected
    column are named; a model file keeps the names."""
    df, y3, _ = table
    model = fitted[kind][0]
    assert model.feature_names == metadata.FeatureNames(COLS)
    np.testing.assert_array_equal(model.feature_names_in_, COLS)
    reversed_df = df[COLS[::-1]]
    for name, predict in prediction_paths(kind, y3).items():
        assert_same(predict(model, reversed_df), predict(model, df)), name
    by_position = np.asarray(jboost.predict(model, reversed_df.to_numpy()))
    assert not np.array_equal(by_position, np.asarray(jboost.predict(model, df)))
    with pytest.raises(ValueError, match=r"missing \['income'\]"):
        jboost.predict(model, df.drop(columns="income"))
    with pytest.raises(ValueError, match=r"unexpected \['extra'\]"):
        jboost.predict_class(model, df.assign(extra=1.0))
    jboost.save(model, tmp_path / "model.jbm")
    loaded = jboost.load(tmp_path / "model.jbm")
    assert type(loaded) is type(model) and loaded.feature_names == model.feature_names
    assert_same(jboost.predict(loaded, reversed_df), jboost.predict(model, df))


@pytest.mark.parametrize("kind", ["forest", "bagged", "ecoc"])
def test_a_continued_fit_orders_a_dataframes_columns_by_the_models_names(kind, table, fitted):
    """init_model= with the columns reversed continues on the columns the model was fitted on:
    bitwise the continuation in the fit's order (bagged boosters: the eval_set's columns too);
    the reversed values by position give another model."""
    df, y3, _ = table
    first = fitted[kind][0]
    more = dict(n_trees=2) if kind == "forest" else dict(n_rounds=2)
    if kind == "bagged":
        more.update(eval_set=(df.iloc[:40], y3[:40]))
    reversed_df = df[COLS[::-1]]
    ordered = fit(kind, df, y3, init_model=first, **more)
    if kind == "bagged":
        more.update(eval_set=(reversed_df.iloc[:40], y3[:40]))
    continued = fit(kind, reversed_df, y3, init_model=first, **more)
    assert_same(continued, ordered)
    assert continued.feature_names == metadata.FeatureNames(COLS)
    if kind == "bagged":
        assert np.isfinite(np.asarray(continued.valid_loss)[:, -1]).all()
        more.pop("eval_set")
    by_position = fit(kind, reversed_df.to_numpy(), y3, init_model=first, **more)
    assert not np.array_equal(np.asarray(jboost.predict(by_position, df.to_numpy())),
                              np.asarray(jboost.predict(ordered, df.to_numpy())))


LABELS = {"strings": (np.array(["cat", "cow", "dog"]), 3),
          "minus_one_one": (np.array([-1, 1]), 2),
          "fractions": (np.array([-0.5, 2.5, 7.0]), 3)}


@pytest.mark.parametrize("labels", list(LABELS))
@pytest.mark.parametrize("kind", KINDS)
def test_class_labels_as_users_have_them(kind, labels, table, fitted, tmp_path):
    """Labels mapped to 0..K-1 in sorted order: the model is the fit of their codes (its
    predictions bitwise), ``classes_`` lists them, ``predict_class`` (and the kind's own class
    predictions) returns them, the probabilities' columns follow them, out-of-bag estimates take
    them; model files keep them."""
    df, y3, y2 = table
    classes, k = LABELS[labels]
    codes = y3 if k == 3 else y2
    y = classes[codes]
    model = fit(kind, df, y, n_classes=k)
    reference = fitted[kind][0 if k == 3 else 1]
    np.testing.assert_array_equal(model.classes_, classes)
    assert model.classes == metadata.Classes(classes) and reference.classes is None
    assert_same(jboost.predict(model, df), jboost.predict(reference, df))
    if kind != "ecoc":
        assert_same(jboost.predict_proba(model, df), jboost.predict_proba(reference, df))
    predicted = jboost.predict_class(model, df)
    assert isinstance(predicted, np.ndarray) and predicted.dtype == classes.dtype
    np.testing.assert_array_equal(predicted, classes[np.asarray(jboost.predict_class(reference, df))])
    assert np.mean(predicted == y) > 0.5
    if kind == "forest":
        np.testing.assert_array_equal(
            bagging.forest_predict_class(model, df, vote=True),
            classes[np.asarray(bagging.forest_predict_class(reference, df, vote=True))])
        assert_same(bagging.forest_oob(model, df, y), bagging.forest_oob(reference, df, codes))
    elif kind == "bagged":
        assert_same(bagging.bagged_oob(model, df, y), bagging.bagged_oob(reference, df, codes))
    elif kind == "ecoc":
        np.testing.assert_array_equal(combine.ecoc_predict(model, df, "hamming"),
                                      classes[np.asarray(combine.ecoc_predict(reference, df, "hamming"))])
    elif kind == "stacking":
        np.testing.assert_array_equal(jboost.predict_class(model.as_booster(), df), predicted)
    jboost.save(model, tmp_path / "labels.jbm")
    loaded = jboost.load(tmp_path / "labels.jbm")
    assert loaded.classes == model.classes
    np.testing.assert_array_equal(jboost.predict_class(loaded, df), predicted)


def test_class_labels_continue_and_validate_with_the_models_classes(table, fitted):
    """A continued forest, bagged or ECOC fit and an eval_set map labels with the model's
    classes (bitwise the continuation of the codes); a label they lack, labels of another kind
    than the model's, and a count of classes the settings contradict are refused by name."""
    df, y3, _ = table
    names = LABELS["strings"][0]
    y = names[y3]
    for kind in ("forest", "bagged", "ecoc"):
        first = fit(kind, df, y)
        more = dict(n_trees=2) if kind == "forest" else dict(n_rounds=2)
        continued = fit(kind, df, y, init_model=first, **more)
        assert continued.classes == first.classes
        assert_same(jboost.predict(continued, df),
                    jboost.predict(fit(kind, df, y3, init_model=fitted[kind][0], **more), df))
        with pytest.raises(ValueError, match=r"y holds labels the training labels do not have: \['eel'\]"):
            fit(kind, df, np.where(y3 == 0, "eel", y), init_model=first, **more)
        with pytest.raises(ValueError, match="init_model was fitted on class indices"):
            fit(kind, df, y, init_model=fitted[kind][0], **more)
    bagged = fit("bagged", df, y, eval_set=(df.iloc[:40], y[:40]))
    reference = fit("bagged", df, y3, eval_set=(df.iloc[:40], y3[:40]))
    assert_same(bagged.valid_loss, reference.valid_loss)
    with pytest.raises(ValueError, match=r"eval_set y holds labels the training labels do not have"):
        fit("bagged", df, y, eval_set=(df.iloc[:4], np.array(["cat", "cow", "eel", "dog"])))
    with pytest.raises(ValueError, match=r"n_classes=4 but y holds 3 classes \['cat', 'cow', 'dog'\]"):
        bagging.fit_forest(df, y, n_classes=4, n_trees=2, depth=2, n_bins=16)
    with pytest.raises(ValueError, match=r"y holds 3 classes .* but code has 4 rows"):
        combine.fit_ecoc_boosters(df, y, combine.exhaustive_code(4), n_rounds=2)
    with pytest.raises(ValueError, match="the loss is binary"):
        fit("forest", df, y, task="binary")


def test_non_negative_integer_labels_stay_class_indices_as_in_jboost_fit(table):
    """Labels {3, 7, 9} are class indices, as jboost.fit (and XGBoost) take them: K = 10 with
    class 0 absent, warned; no classes kept; an ECOC code of 3 rows refuses them by name."""
    df, y3, _ = table
    y = np.array([3, 7, 9])[y3]
    with pytest.warns(UserWarning, match="class 0 absent"):
        forest = fit("forest", df, y)
    assert forest.classes is None and forest.n_outputs == 10
    assert set(np.unique(np.asarray(jboost.predict_class(forest, df)))) <= {3, 7, 9}
    with pytest.warns(UserWarning, match="class 0 absent"):
        booster = jboost.fit(df, y, "multinomial_deviance", n_rounds=1, depth=2, n_bins=16)
    assert booster.classes is None and booster.n_outputs == 10
    with pytest.raises(ValueError, match=r"y must hold class labels in \[0, 3\)"):
        combine.fit_ecoc_boosters(df, y, combine.exhaustive_code(3), n_rounds=2)
