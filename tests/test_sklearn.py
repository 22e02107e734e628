"""jboost.sklearn: scikit-learn's estimator checks, and scikit-learn's tools over the estimators.

**Which checks run on which estimator, and why: the time budget.** Every estimator check fits
its own small data sets, of shapes scikit-learn chooses, and each new shape compiles new XLA
programs for each kind of estimator (measured on the 2-core machine: about 1.6 CPU s per new
shape for a boosting fit, 2.5 s for a forest or bagged boosters; with the optimisations off, as
here, 1.2 s); this file has 60 s of the suite's time, and every check on all six estimators
would take about three times that. So:

* ``JBoostClassifier`` runs every check of scikit-learn's list (``parametrize_with_checks``,
  :data:`FULL`). It has the most surface, and it exercises what all six estimators share: the
  validation, tags, sample weights and fit plumbing (``_JBoostBase``) and, for the three
  classifiers, the label encoding and prediction (``_ClassifierBase``).
* ``JBoostRegressor`` and the four ensembles (forests, bagged boosters) run
  :data:`SMALL_CHECKS` (:data:`OTHERS`): every check that fits nothing (API, tags, parameters,
  refused inputs, unfitted errors) and the checks of their kind that fit only the training
  check's data (``check_classifiers_train`` / ``check_regressors_train``: fit, predict,
  predict_proba, decision_function and score on scikit-learn's data), which is where they
  differ. Run ``check_estimator`` on one of them for its whole list (all pass but the
  expected failure below: measured on each of the five).
* ``JBoostRegressor`` also runs :data:`WEIGHT_CHECK` (:func:`test_regressor_sample_weight_check`).

The tests after the checks share one data shape (:data:`X`) and static settings, so that they
compile few programs. Expected failures (:func:`jboost.sklearn.expected_failed_checks`, the
estimators' own declarations), with their reasons, are the only checks not passing: the one,
:data:`WEIGHT_CHECK`, asks that integer sample weights equal repeated rows to rtol=1e-7. Forests
and bagged boosters draw bootstrap rows, so they cannot; the boosting estimators do to float32
rounding, which :func:`test_integer_sample_weights_equal_repeated_rows` tests, and the check's
rtol and ties decide (see docs/sklearn.md).
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import jax
import numpy as np
import pytest

from tests import _processes

pytest.importorskip("sklearn")

import sklearn  # noqa: E402
from sklearn.base import clone  # noqa: E402
from sklearn.model_selection import GridSearchCV, cross_val_score  # noqa: E402
from sklearn.pipeline import make_pipeline  # noqa: E402
from sklearn.preprocessing import StandardScaler  # noqa: E402
from sklearn.utils.estimator_checks import parametrize_with_checks  # noqa: E402

import jboost  # noqa: E402
from jboost import sklearn as jsk  # noqa: E402
from jboost.trees import depthwise as depthwise_lib

_SKLEARN = tuple(int(part) for part in sklearn.__version__.split(".")[:2])

SMALL = dict(n_rounds=5, depth=1, learning_rate=0.5)

#: Every check of scikit-learn's list.
FULL = [jsk.JBoostClassifier(**SMALL)]
#: :data:`SMALL_CHECKS` only.
OTHERS = [
    jsk.JBoostRegressor(**SMALL),
    jsk.JBoostForestClassifier(n_trees=4, depth=3),
    jsk.JBoostForestRegressor(n_trees=4, depth=3),
    jsk.JBoostBaggingClassifier(n_bags=2, **SMALL),
    jsk.JBoostBaggingRegressor(n_bags=2, **SMALL),
]

#: The checks of :data:`OTHERS` (see the module docstring): those that fit nothing, and the
#: checks of the estimator's kind (scikit-learn's ``_yield_classifier_checks`` and
#: ``_yield_regressor_checks``) that fit the training check's data sets or none. Left to
#: :data:`FULL`, each for a new shape (about 1-4 s): ``check_classifiers_classes``,
#: ``check_classifier_data_not_an_array``, ``check_supervised_y_2d``, ``check_regressors_int``,
#: ``check_regressors_no_decision_function``, and the generic fitting checks.
SMALL_CHECKS = frozenset({
    "check_estimator_cloneable", "check_estimator_tags_renamed", "check_valid_tag_types",
    "check_estimator_repr", "check_no_attributes_set_in_init", "check_estimators_unfitted",
    "check_do_not_raise_errors_in_init_or_set_params", "check_mixin_order",
    "check_parameters_default_constructible", "check_get_params_invariance", "check_set_params",
    "check_fit1d", "check_requires_y_none", "check_complex_data",
    "check_estimators_empty_data_messages", "check_estimator_sparse_tag",
    "check_estimator_sparse_array", "check_estimator_sparse_matrix",
    "check_all_zero_sample_weights_error",
    "check_classifiers_train", "check_classifiers_one_label",
    "check_classifiers_one_label_sample_weights", "check_classifiers_regression_target",
    "check_supervised_y_no_nan", "check_estimators_partial_fit_n_features",
    "check_non_transformer_estimators_n_iter", "check_decision_proba_consistency",
    "check_regressors_train", "check_regressor_data_not_an_array",
})

#: The check that integer sample weights equal repeated rows (see :func:`_with_checks`).
WEIGHT_CHECK = "check_sample_weight_equivalence_on_dense_data"


@pytest.fixture(scope="module", autouse=True)
def _quick_compiles():
    """XLA's optimisations off while this module runs: its programs (tiny data, 5 rounds)
    compile in half to three quarters of the time (measured: a boosting fit's 1.6 -> 1.2 CPU s,
    a forest's 2.5 -> 1.2) and run as fast. The flag is restored after and the module's
    programs dropped: a later test must not reuse a program compiled without optimisations,
    which may round differently from the optimised one it is compared with."""
    previous = jax.config.values["jax_disable_most_optimizations"]
    jax.config.update("jax_disable_most_optimizations", True)
    yield
    jax.config.update("jax_disable_most_optimizations", previous)
    jax.clear_caches()


def _check_name(case) -> str:
    check = case.values[1] if hasattr(case, "values") else case[1]
    return getattr(check, "func", check).__name__


def _with_checks(estimators, keep=None):
    """``parametrize_with_checks`` with jboost's expected failures
    (:func:`jboost.sklearn.expected_failed_checks`; strict where scikit-learn >= 1.8 can say so),
    keeping only the checks named in ``keep``. A boosting estimator's :data:`WEIGHT_CHECK` is a
    lenient expected failure: its float32 sums decide (the regressor passes on the check's data,
    the classifier not); :func:`test_integer_sample_weights_equal_repeated_rows` tests the
    equivalence itself."""
    if _SKLEARN < (1, 6):  # no expected_failed_checks before 1.6
        return pytest.mark.skip(reason="the estimator checks need scikit-learn >= 1.6")
    strict = {"xfail_strict": True} if _SKLEARN >= (1, 8) else {}
    mark = parametrize_with_checks(estimators, expected_failed_checks=jsk.expected_failed_checks,
                                   **strict)
    names, cases = mark.args
    if keep is not None:
        cases = [case for case in cases if _check_name(case) in keep]
    cases = [_lenient(case) for case in cases]
    return pytest.mark.parametrize(names, cases, **mark.kwargs)


def _lenient(case):
    """A boosting estimator's :data:`WEIGHT_CHECK` case as a non-strict expected failure."""
    estimator, check = case.values if hasattr(case, "values") else case
    boosting = isinstance(estimator, (jsk.JBoostClassifier, jsk.JBoostRegressor))
    if _check_name(case) != WEIGHT_CHECK or not boosting:
        return case
    reason = jsk.expected_failed_checks(estimator)[WEIGHT_CHECK]
    return pytest.param(estimator, check, marks=pytest.mark.xfail(reason=reason, strict=False))


@pytest.mark.slow
@_with_checks(FULL)
def test_every_estimator_check(estimator, check):
    check(estimator)


@pytest.mark.slow
@_with_checks(OTHERS, keep=SMALL_CHECKS)
def test_estimator_checks(estimator, check):
    check(estimator)


@_with_checks([jsk.JBoostRegressor(**SMALL)], keep={WEIGHT_CHECK})
def test_regressor_sample_weight_check(estimator, check):
    check(estimator)


def test_expected_failures_are_declared_with_their_reasons():
    """Each estimator declares the weight check, with its reason, through
    ``expected_failed_checks`` (scikit-learn >= 1.6) and the ``_xfail_checks`` tag (before)."""
    for est in FULL + OTHERS:
        declared = jsk.expected_failed_checks(est)
        assert set(declared) == {WEIGHT_CHECK}
        assert est._more_tags()["_xfail_checks"] == declared
        boosting = isinstance(est, (jsk.JBoostClassifier, jsk.JBoostRegressor))
        assert ("float32" if boosting else "a bootstrap draws rows") in declared[WEIGHT_CHECK]
    assert jsk.expected_failed_checks(StandardScaler()) == {}


# ----------------------------------------------------------------------------------------------
# scikit-learn's tools. One data shape (64 x 4, binary string labels) and one setting of the
# static parameters (depth=2) wherever a test allows, so that the tests share compiled programs.
# ----------------------------------------------------------------------------------------------

_rng = np.random.RandomState(0)
X = _rng.normal(size=(64, 4))
Y01 = (X[:, 0] + 0.5 * X[:, 1] > 0).astype(int)
Y = np.where(Y01 == 1, "yes", "no")
FIT = dict(n_rounds=5, depth=2, learning_rate=0.5, random_state=0)


#: Integer sample weights for :data:`X` (17 of them 0) and the rows they repeat.
W = np.random.RandomState(1).randint(0, 4, len(X))
ROWS = np.repeat(np.arange(len(X)), W)


@pytest.mark.parametrize("loss, y", [
    ("squared_error", 2 * X[:, 0] + X[:, 2] ** 2),
    ("binomial_deviance", Y01),
    ("multinomial_deviance", np.digitize(X[:, 0] + X[:, 3], [-0.5, 0.5])),
])
def test_integer_sample_weights_equal_repeated_rows(loss, y):
    """``jboost.fit`` with integer sample weights (some 0, the rows shuffled as scikit-learn's
    check does) is the fit on the rows repeated that many times: the same borders (weighted
    quantiles, rows of weight 0 place none), baseline and splits, and predictions to float32
    rounding (sums of g*w and of w repeated g's). The same through the estimators."""
    kw = dict(n_rounds=5, depth=2, learning_rate=0.5, key=0)
    perm = np.random.RandomState(2).permutation(len(X))
    weighted = jboost.fit(X[perm], y[perm], loss, sample_weight=W[perm], **kw)
    repeated = jboost.fit(X[ROWS], y[ROWS], loss, **kw)
    np.testing.assert_array_equal(weighted.borders, repeated.borders)
    np.testing.assert_allclose(weighted.baseline, repeated.baseline, rtol=1e-6)
    for field in ("features", "thresholds"):
        np.testing.assert_array_equal(getattr(weighted.trees, field),
                                      getattr(repeated.trees, field))
    np.testing.assert_allclose(jboost.predict(weighted, X), jboost.predict(repeated, X),
                               rtol=1e-5, atol=1e-5)

    if loss == "squared_error":
        est, labels, method = jsk.JBoostRegressor(**FIT), y, "predict"
    else:
        labels = np.array(["a", "b", "c"])[y]
        est, method = jsk.JBoostClassifier(**FIT), "predict_proba"
    by_weight = clone(est).fit(X[perm], labels[perm], sample_weight=W[perm])
    by_rows = clone(est).fit(X[ROWS], labels[ROWS])
    np.testing.assert_allclose(getattr(by_weight, method)(X), getattr(by_rows, method)(X),
                               rtol=1e-5, atol=1e-6)


@pytest.mark.subprocess
def test_importing_jboost_does_not_import_sklearn_and_missing_sklearn_says_how_to_install():
    code = textwrap.dedent("""
        import sys
        import jboost
        assert "sklearn" not in sys.modules, "import jboost imported scikit-learn"
        sys.modules["sklearn"] = None  # as if scikit-learn were not installed
        try:
            import jboost.sklearn
        except ImportError as e:
            print(e)
        else:
            raise AssertionError("no ImportError")
    """)
    out = _processes.python(code, quiet=5, what="an import without scikit-learn")
    assert out.returncode == 0, out.stderr
    assert 'pip install "jboost[sklearn]"' in out.stdout


def test_string_labels_round_trip_and_predict_proba_is_jboosts():
    clf = jsk.JBoostClassifier(**FIT).fit(X, Y)
    np.testing.assert_array_equal(clf.classes_, ["no", "yes"])
    pred = clf.predict(X)
    assert pred.dtype == Y.dtype and set(pred) <= {"no", "yes"}
    assert np.mean(pred == Y) > 0.9
    proba = clf.predict_proba(X)
    np.testing.assert_array_equal(proba, np.asarray(jboost.predict_proba(clf.booster_, X)))
    np.testing.assert_array_equal(pred, clf.classes_[proba.argmax(axis=1)])
    # random_state is jboost's key: the same model as jboost.fit on the labels 0..K-1.
    direct = jboost.fit(X, Y01, "binomial_deviance", n_rounds=5, depth=2, learning_rate=0.5, key=0)
    np.testing.assert_array_equal(clf.decision_function(X), np.asarray(jboost.predict(direct, X)))
    staged = list(clf.staged_predict_proba(X))
    assert len(staged) == 5
    np.testing.assert_allclose(staged[-1], proba, rtol=1e-6)
    np.testing.assert_array_equal(list(clf.staged_predict(X))[-1], pred)
    importances = clf.feature_importances_
    assert importances.shape == (4,) and importances.sum() == pytest.approx(1.0)
    assert importances[0] == importances.max()


def test_pipeline_cross_val_score_and_clone():
    pipe = make_pipeline(StandardScaler(), jsk.JBoostClassifier(**FIT))
    assert pipe.fit(X, Y).score(X, Y) > 0.9
    scores = cross_val_score(jsk.JBoostClassifier(**FIT), X, Y, cv=2)
    assert scores.shape == (2,) and scores.min() > 0.6
    fitted = jsk.JBoostClassifier(**FIT).fit(X, Y)
    copy = clone(fitted)
    assert copy.get_params() == fitted.get_params()
    assert not hasattr(copy, "booster_") and not hasattr(copy, "classes_")


def test_grid_search_over_learning_rate_and_depth():
    search = GridSearchCV(jsk.JBoostClassifier(n_rounds=5, random_state=0),
                          {"learning_rate": [0.1, 0.5], "depth": [1, 2]}, cv=2)
    search.fit(X, Y)
    assert len(search.cv_results_["params"]) == 4
    assert search.best_params_["learning_rate"] in (0.1, 0.5)
    assert search.best_estimator_.booster_.depth == search.best_params_["depth"]
    assert search.score(X, Y) > 0.8


def test_dataframe_feature_names_and_reordered_columns_are_refused():
    pd = pytest.importorskip("pandas")
    df = pd.DataFrame(X, columns=["a", "b", "c", "d"])
    clf = jsk.JBoostClassifier(**FIT).fit(df, Y)
    np.testing.assert_array_equal(clf.feature_names_in_, ["a", "b", "c", "d"])
    assert clf.n_features_in_ == 4
    np.testing.assert_array_equal(clf.predict_proba(df), np.asarray(jboost.predict_proba(clf.booster_, X)))
    with pytest.raises(ValueError, match="Feature names must be in the same order as they were in fit"):
        clf.predict(df[["b", "a", "c", "d"]])


def test_early_stopping_sets_best_round():
    # validation_fraction=0.5: 32 training and 32 validation rows (stratified), the shapes of
    # the eval_set fit below; fit_kwargs: any other keyword of jboost.fit.
    clf = jsk.JBoostClassifier(n_rounds=40, depth=2, learning_rate=0.5, random_state=0,
                               early_stopping_rounds=2, validation_fraction=0.5,
                               fit_kwargs={"eval_metric": "error_rate"}).fit(X, Y)
    np.testing.assert_array_equal(clf.classes_, ["no", "yes"])
    assert 0 <= clf.best_round_ < clf.booster_.n_rounds < 40  # it stopped
    assert np.mean(clf.predict(X) == Y) > 0.8
    assert len(list(clf.staged_predict_proba(X))) == clf.booster_.n_rounds

    given = clone(clf).fit(X[:32], Y[:32], eval_set=(X[32:], Y[32:]))
    assert 0 <= given.best_round_ < given.booster_.n_rounds
    np.testing.assert_array_equal(given.predict_proba(X), np.asarray(
        jboost.predict_proba(given.booster_, X, n_rounds=given.best_round_ + 1)))
    with pytest.raises(ValueError, match=r"eval_set has labels not in the training labels: \['maybe'\]"):
        clone(clf).fit(X[:32], Y[:32], eval_set=(X[32:34], np.array(["no", "maybe"])))


def test_fit_kwargs_may_not_repeat_a_parameter_and_jboost_checks_its_settings():
    with pytest.raises(ValueError, match=r"fit_kwargs sets \['depth'\]"):
        jsk.JBoostClassifier(**FIT, fit_kwargs={"depth": 3}).fit(X, Y)
    with pytest.raises(ValueError, match="depth"):  # jboost's own message for its settings
        jsk.JBoostClassifier(n_rounds=5, depth=0).fit(X, Y)



@pytest.mark.slow
def test_categorical_columns_go_to_jboost_as_they_are():
    """A DataFrame with category and string columns: the boosting and bagging estimators pass it
    to jboost, which encodes the columns (``cat_features=None``: inferred from the dtypes); the
    classifier equals ``jboost.fit`` on the mapped labels; predictions take the frame by name
    checks (scikit-learn's: same columns, same order), unseen categories included; early
    stopping's held-out split and cross-validation take rows of the frame."""
    pd = pytest.importorskip("pandas")
    rng = np.random.default_rng(3)
    n = 96
    city = np.array([f"c{i}" for i in range(20)])[rng.integers(0, 20, n)]
    df = pd.DataFrame({"x": rng.normal(size=n), "color": pd.Categorical(rng.choice(["r", "g", "b"], n)),
                       "city": city})
    effect = {f"c{i}": (i % 5 - 2) / 2 for i in range(20)}
    labels = np.where(df.x + df.city.map(effect) + (df.color == "r") > 0.3, "yes", "no")
    kw = dict(n_rounds=5, depth=2, learning_rate=0.5, n_bins=16, random_state=0)
    clf = jsk.JBoostClassifier(**kw).fit(df, labels)
    assert clf.booster_.categorical is not None and list(clf.classes_) == ["no", "yes"]
    np.testing.assert_array_equal(clf.feature_names_in_, ["x", "color", "city"])
    same = jboost.fit(df, (labels == "yes").astype(np.int32), "binomial_deviance", n_rounds=5, depth=2,
                      learning_rate=0.5, n_bins=16, key=0)
    new = pd.DataFrame({"x": [0.0, 1.0], "color": pd.Categorical(["r", "b"]), "city": ["c3", "atlantis"]})
    np.testing.assert_array_equal(clf.predict_proba(new), np.asarray(jboost.predict_proba(same, new), np.float64))
    assert set(clf.predict(new)) <= {"yes", "no"}
    with pytest.raises(ValueError, match="Feature names must be in the same order"):
        clf.predict(new[["city", "x", "color"]])
    # cat_features named; the held-out split takes rows of the frame
    stopped = jsk.JBoostClassifier(**dict(kw, n_rounds=20), early_stopping_rounds=3, validation_fraction=0.25,
                                   cat_features=["color", "city"]).fit(df, labels)
    assert stopped.best_round_ >= 0 and stopped.booster_.categorical.spec.names == ("x", "color", "city")
    scores = cross_val_score(jsk.JBoostClassifier(**kw), df, labels, cv=2)
    assert scores.shape == (2,) and np.all(scores > 0.5)
    bag = jsk.JBoostBaggingRegressor(n_bags=2, **kw).fit(df, df.x.to_numpy() * 2)
    assert bag.booster_.categorical is not None and bag.predict(new).shape == (2,)


@pytest.mark.slow
def test_forest_estimators_take_the_tree_family():
    """``tree_family="depthwise"`` reaches fit_forest: the forest of depth-wise trees (m features
    drawn per node) that fit_forest grows with the same key."""
    from jboost import bagging
    clf = jsk.JBoostForestClassifier(n_trees=2, depth=3, n_bins=16, tree_family="depthwise",
                                     random_state=0).fit(X, Y)
    assert isinstance(clf.booster_.trees, depthwise_lib.DepthwiseTrees)
    direct = bagging.fit_forest(X, Y01, n_trees=2, depth=3, n_bins=16, max_features="sqrt",
                                tree_family="depthwise", task="classification", n_classes=2, key=0)
    np.testing.assert_array_equal(clf.predict_proba(X), np.asarray(jboost.predict_proba(direct, X)))
    with pytest.raises(ValueError, match="tree_family"):
        jsk.JBoostForestRegressor(n_trees=2, depth=3, tree_family="free").fit(X, Y01.astype(float))
