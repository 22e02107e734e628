"""Export for serving (jboost.io.to_treelite): Treelite's GTIL raw margins equal jboost.predict's,
and its postprocessed predictions jboost.predict_proba's (or predict_mean's), to float32 rounding,
on random models of every tree family, task and model type, on rows with missing values, values
exactly on the split thresholds (and one float either side), subnormals, signed zeros,
infinities and one-hot categorical columns (seen, unseen and missing categories); what cannot be
exported raises a ValueError naming the fix; ``import jboost.io`` needs no treelite. The rows
and data sets are tests/test_onnx.py's."""

from __future__ import annotations

import json
import subprocess
import sys

import jax
import numpy as np
import pytest
import treelite

import jboost
from jboost import algorithms, bagging
from jboost import io as jio
from tests.test_onnx import FAMILIES, MyTrees, TASKS, categorical_data, custom_link, data, hard_rows

KW = dict(n_rounds=4, depth=3, n_bins=16, learning_rate=0.3)
SMALL = dict(n_rounds=3, depth=2, n_bins=16)
EPS = float(np.finfo(np.float32).eps)
TINY = np.finfo(np.float32).tiny
#: Borders and values at the subnormal clamp's edges (jboost compares a subnormal as +-tiny).
EDGES = np.array([-TINY, TINY, 0.0, -0.0, 1e-40, -1e-40, -2 * TINY], np.float32)
#: What GTIL's default prediction (the postprocessor's) is, by task.
DEFAULT = {"regression": jboost.predict, "binary": jboost.predict_proba,
           "multiclass": jboost.predict_proba}


def close(got, want):
    """Equal to float32 rounding: a few ulps of the largest value (GTIL sums the trees and the
    base score in another order)."""
    want = np.asarray(want)
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=8 * EPS, atol=16 * EPS * max(1.0, np.abs(want).max()))


def assert_matches(model, X, default=jboost.predict_proba, **kw):
    """GTIL's raw margins equal jboost.predict's on ``X``, and its default predictions
    ``default``'s (jboost.predict_proba: a binary model's positive class)."""
    X = np.asarray(X, np.float32)
    tl = jio.to_treelite(model, **kw)
    raw = treelite.gtil.predict(tl, X, pred_margin=True)
    want = np.asarray(jboost.predict(model, X))
    close(raw.reshape(want.shape), want)
    out = treelite.gtil.predict(tl, X).reshape(X.shape[0], -1)
    p = np.asarray(default(model, X)).reshape(X.shape[0], -1)
    close(out, p[:, 1:] if out.shape[1] == 1 and p.shape[1] == 2 else p)
    return tl


@pytest.mark.parametrize("family, task", [
    ("oblivious", "regression"), ("oblivious", "multiclass"), ("depthwise", "binary"),
    ("depthwise", "multiclass"), ("lossguide", "regression"), ("lossguide", "binary")])
def test_boosters_of_every_family_and_task_match(family, task):
    X, y = data(0, task)
    model = jboost.fit(X, y, TASKS[task], **{**KW, **FAMILIES[family]}, key=0)
    Xt, _ = data(100, task, n=200)
    assert_matches(model, np.concatenate([hard_rows(model, 0, Xt), Xt]), DEFAULT[task])


@pytest.mark.parametrize("family", ["oblivious", "depthwise"])
def test_borders_at_zero_and_the_subnormal_edges_route_as_in_jboost(family):
    """Borders 0, -0, +-tiny and subnormals on rows of exactly those values (``-tiny``: the test
    ``x < 0``)."""
    X, y = data(4, "binary")
    model = jboost.fit(X, y, "binomial_deviance", **{**KW, **FAMILIES[family]})
    model = model._replace(trees=model.trees._replace(borders=np.resize(EDGES, model.trees.borders.shape)))
    up, down = np.float32(np.inf), np.float32(-np.inf)
    values = np.concatenate([EDGES, np.nextafter(EDGES, up), np.nextafter(EDGES, down), [np.nan, 1, -1]])
    assert_matches(model, np.random.default_rng(4).choice(values, size=(400, X.shape[1])))


@pytest.mark.parametrize("make", ["adaboost", "poisson", "label_offset", "vector_labels",
                                  "multi_label", "per_output_trees"])
def test_links_and_outputs_match(make):
    """AdaBoost's ``sigmoid(2f)``, Poisson's mean (``exponential``), a label offset in the base
    score, ``(n, K)`` raw scores of vector labels (Treelite's targets) and multi-label
    probabilities (a sigmoid per target)."""
    X, y = data(3, "regression")
    Xb, yb = data(3, "binary")
    labels = np.stack([y, np.nan_to_num(X[:, 1])], axis=1).astype(np.float32)
    default = {"poisson": jboost.predict_mean, "label_offset": jboost.predict,
               "vector_labels": jboost.predict}.get(make, jboost.predict_proba)
    if make == "adaboost":
        model, X = algorithms.adaboost_m1(Xb, yb, **SMALL), Xb
    elif make == "poisson":
        model = jboost.fit(X, np.exp(np.clip(y, -2, 2)).round(), "poisson", **SMALL)
    elif make == "label_offset":
        with pytest.warns(UserWarning, match="large offset"):
            model = jboost.fit(X, 1e9 + y.astype(np.float64), **SMALL)
        assert model.offset is not None
    elif make == "vector_labels":
        model = jboost.fit(X, labels, "squared_error", **SMALL)
    elif make == "multi_label":
        model = jboost.fit(X, (labels > 0).astype(np.float32), "binomial_deviance", **SMALL)
    else:
        X, y = data(3, "multiclass")
        model = jboost.fit(X, y, "multinomial_deviance", per_output_trees=True, **SMALL)
    assert_matches(model, np.concatenate([hard_rows(model, 3, X), X]), default)


@pytest.mark.parametrize("task", ["regression", "multiclass"])
def test_forests_match(task):
    """Forests (the trees' mean; a classifier's averaged class frequencies)."""
    X, y = data(1, task)
    family = "depthwise" if task == "regression" else "oblivious"
    model = bagging.fit_forest(X, y, task="classification" if task == "multiclass" else task,
                               n_trees=5, depth=4, n_bins=16, key=1, tree_family=family)
    Xt, _ = data(101, task, n=200)
    assert_matches(model, np.concatenate([hard_rows(model, 1, Xt), Xt]), DEFAULT[task])


def test_bagged_boosters_match_and_their_probabilities_raise():
    """Raw scores: the mean of the bags' (leaves divided by the number of bags); the mean of
    the bags' probabilities has no postprocessor: refused unless ``raw_scores=True``."""
    X, y = data(2, "binary")
    model = bagging.fit_bagged_boosters(X, y, "binomial_deviance", n_bags=3, key=2, **SMALL)
    with pytest.raises(ValueError, match=r"3 bagged boosters.*raw_scores=True"):
        jio.to_treelite(model)
    assert_matches(model, np.concatenate([hard_rows(model, 2, X), X]), jboost.predict, raw_scores=True)


@pytest.mark.parametrize("family, task", [("oblivious", "multiclass"), ("depthwise", "binary")])
def test_one_hot_categorical_columns_match(family, task):
    """One-hot columns (negative codes, the missing category informative) as ``x == code`` and
    ``x`` NaN tests, with unseen codes and ``-0``."""
    X, score = categorical_data(0)
    X = X[:, [0, 1, 3, 4]]
    y = {"binary": (score > 0), "multiclass": np.digitize(score, [-0.5, 0.8])}[task].astype(np.float32)
    model = jboost.fit(X, y, TASKS[task], cat_features=[1], one_hot_max_size=8,
                       **{**KW, **FAMILIES[family]}, key=0)
    assert model.categorical.spec.kinds == ("numeric", "one_hot", "numeric", "numeric")
    Xt = categorical_data(100, n=200)[0][:, [0, 1, 3, 4]]
    Xt[:20, 1] = 7.0    # unseen codes
    Xt[20:30, 1] = -0.0
    assert_matches(model, Xt)
    # Borders sending both indicator values one way (1, 1.5: left; -0.5: right), or 1 right.
    borders = np.resize(np.float32([1.0, -0.5, 0.5, 1.5, 0.0]), model.trees.borders.shape)
    assert_matches(model._replace(trees=model.trees._replace(borders=borders)), Xt)


@pytest.fixture(scope="module")
def binary_model():
    return jboost.fit(*data(0, "binary"), "binomial_deviance", **SMALL)


def test_a_link_without_postprocessor_exports_raw_scores_when_asked(binary_model):
    """A link that is a Python function, SAMME's scaled softmax, a distribution's mean."""
    model = binary_model._replace(loss=binary_model.loss.replace(link=custom_link))
    with pytest.raises(ValueError, match=r"link 'custom_link'.*raw_scores=True"):
        jio.to_treelite(model)
    X = data(5, "binary")[0]
    assert_matches(model, X, jboost.predict, raw_scores=True)
    Xm, ym = data(5, "multiclass")
    samme = algorithms.samme(Xm, ym, **SMALL)
    with pytest.raises(ValueError, match=r"SAMME.*no scale.*raw_scores=True"):
        jio.to_treelite(samme)
    assert_matches(samme, Xm, jboost.predict, raw_scores=True)
    normal = jboost.distributions.fit(X, np.nan_to_num(X[:, 0]), jboost.distributions.Normal, **SMALL)
    with pytest.raises(ValueError, match=r"loss 'normal_natural'.*no postprocessor.*raw_scores=True"):
        jio.to_treelite(normal)
    assert_matches(normal, X, jboost.predict, raw_scores=True)


def test_what_cannot_be_exported_raises_naming_the_fix(binary_model):
    two = jax.tree_util.tree_map(lambda a: np.stack([a, a]), binary_model)  # batch axes (2,)
    with pytest.raises(ValueError, match=r"to_treelite exports one model.*batch axes \(2,\).*tree_map"):
        jio.to_treelite(two)
    with pytest.raises(ValueError, match=r"to_treelite exports the built-in tree families.*MyTrees"):
        jio.to_treelite(binary_model._replace(trees=MyTrees(*binary_model.trees)))
    with pytest.raises(TypeError, match="fitted jboost ensemble"):
        jio.to_treelite(np.zeros(3))


def test_target_statistics_and_string_categories_raise():
    X, score = categorical_data(0)
    model = jboost.fit(X, (score > 0).astype(np.float32), "binomial_deviance", cat_features=[1, 2],
                       one_hot_max_size=8, **SMALL)
    with pytest.raises(ValueError, match=r"columns \['x2'\].*target statistics.*to_onnx.*one_hot_max_size"):
        jio.to_treelite(model)
    pd = pytest.importorskip("pandas")
    rng = np.random.default_rng(0)
    df = pd.DataFrame({"x": rng.normal(size=100).astype(np.float32), "c": rng.choice(["a", "b"], size=100)})
    model = jboost.fit(df, (df["x"] > 0).astype(np.float32).to_numpy(), "binomial_deviance", **SMALL)
    with pytest.raises(ValueError, match=r"to_treelite.*column 'c'.*strings.*cat\.codes"):
        jio.to_treelite(model)


def test_the_model_is_saved_with_jboosts_attributes(binary_model, tmp_path):
    path = tmp_path / "model.tl"
    tl = jio.to_treelite(binary_model, path=path)
    again = treelite.Model.deserialize(str(path))
    X = data(1, "binary")[0]
    np.testing.assert_array_equal(treelite.gtil.predict(again, X), treelite.gtil.predict(tl, X))
    assert tl.num_tree == int(np.prod(binary_model.trees.features.shape[:-1]))
    attributes = json.loads(json.loads(again.dump_as_json(pretty_print=False))["attributes"])
    assert attributes == {"jboost_model_type": "Booster", "task": "binary", "feature_names": None}


def test_jboost_io_imports_without_treelite():
    """``import jboost.io`` imports no treelite; ``jboost.io.to_treelite`` loads it."""
    code = ("import sys, jboost.io; assert 'treelite' not in sys.modules; "
            "f = jboost.io.to_treelite; assert 'treelite' in sys.modules; print(f.__module__)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "jboost.io.treelite_export"
