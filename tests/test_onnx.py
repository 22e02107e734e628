"""Export for serving (jboost.io.to_onnx): ONNX Runtime's raw scores and class probabilities equal
jboost.predict's and jboost.predict_proba's to float32 rounding on random models of every tree
family, task and model type, on rows with missing values, values exactly on the split thresholds
(and one float either side), subnormals, signed zeros, infinities and categorical columns
(seen, unseen and missing categories); what cannot be exported raises a ValueError naming the
fix; ``import jboost.io`` needs no onnx."""

from __future__ import annotations

import subprocess
import sys

import jax
import numpy as np
import onnx
import onnxruntime as ort
import pytest

import jboost
from jboost import algorithms, bagging, combine
from jboost import io as jio
from jboost.models import sums

N, F = 300, 5
KW = dict(n_rounds=5, depth=3, n_bins=16, learning_rate=0.3)
FAMILIES = {"oblivious": {}, "depthwise": dict(tree_family="depthwise"),
            "lossguide": dict(tree_family="lossguide", max_leaves=6, depth=None)}
TASKS = {"regression": "squared_error", "binary": "binomial_deviance",
         "multiclass": "multinomial_deviance"}
TOL = dict(rtol=1e-5, atol=1e-5)  # float32 rounding: ONNX Runtime sums the trees in another order


def data(seed: int, task: str, n: int = N, nan: float = 0.1):
    """Random rows (a fraction ``nan`` missing) and labels of ``task``."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, F)).astype(np.float32)
    score = X @ rng.normal(size=(F, 3)) + 0.3 * rng.normal(size=(n, 3))
    X[rng.random(X.shape) < nan] = np.nan
    if task == "regression":
        return X, score[:, 0].astype(np.float32)
    if task == "binary":
        return X, (score[:, 0] > 0).astype(np.float32)
    return X, np.argmax(score, axis=1).astype(np.float32)


def split_points(model):
    """``{input column: the float borders of the splits on it}`` (numeric columns only)."""
    trees = (model.best_trees() if isinstance(model, jboost.bagging.BaggedBoosters)
             else sums.tree_sum(model)[0])
    feats = np.asarray(trees.features).ravel()
    borders = np.asarray(trees.borders, np.float32).ravel()
    cat = getattr(model, "categorical", None)
    source = np.arange(F) if cat is None else cat.spec.sources
    numeric = set(range(F)) if cat is None else {j for j, k in enumerate(cat.spec.kinds)
                                                 if k == "numeric"}
    out = {}
    for f, b in zip(feats, borders):
        j = int(source[f])
        if j in numeric and np.isfinite(b):
            out.setdefault(j, set()).add(b)
    return {j: np.asarray(sorted(v), np.float32) for j, v in out.items()}


def hard_rows(model, seed: int, X_like):
    """Rows on every split's border and one float either side, with missing values, subnormals,
    signed zeros and infinities, on top of ``X_like``'s kind of rows."""
    rng = np.random.default_rng(seed + 1000)
    X = np.array(X_like[:120], np.float32)
    for j, b in split_points(model).items():
        pick = rng.choice(b, size=X.shape[0])
        side = rng.integers(-1, 2, size=X.shape[0])
        on = np.where(side == 0, pick, np.nextafter(pick, np.where(side < 0, -np.inf, np.inf).astype(np.float32)))
        rows = rng.random(X.shape[0]) < 0.6
        X[rows, j] = on[rows]
    special = np.array([np.nan, 0.0, -0.0, 1e-40, -1e-40, np.finfo(np.float32).tiny,
                        -np.finfo(np.float32).tiny, np.inf, -np.inf], np.float32)
    cat = getattr(model, "categorical", None)
    for j in range(F):
        if cat is None or cat.spec.kinds[j] == "numeric":
            rows = rng.random(X.shape[0]) < 0.15
            X[rows, j] = rng.choice(special, size=int(rows.sum()))
    return X


def run(proto, X):
    """Every output of the ONNX model on ``X``, by name."""
    session = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    return dict(zip(names, session.run(None, {"X": np.asarray(X, np.float32)})))


def assert_matches(model, X, proba: bool = True):
    """ONNX Runtime's outputs equal jboost's on ``X`` to float32 rounding."""
    proto = jio.to_onnx(model)
    out = run(proto, X)
    want = np.asarray(jboost.predict(model, X))
    assert out["raw_scores"].shape == want.shape and out["raw_scores"].dtype == want.dtype
    np.testing.assert_allclose(out["raw_scores"], want, **TOL)
    assert ("probabilities" in out) == proba
    if proba:
        p = np.asarray(jboost.predict_proba(model, X))
        assert out["probabilities"].shape == p.shape
        np.testing.assert_allclose(out["probabilities"], p, **TOL)
    return out


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("task", list(TASKS))
@pytest.mark.parametrize("family", list(FAMILIES))
def test_boosters_of_every_family_and_task_match(family, task, seed):
    X, y = data(seed, task)
    model = jboost.fit(X, y, TASKS[task], **{**KW, **FAMILIES[family]}, key=seed)
    Xt, _ = data(seed + 100, task, n=200)
    assert_matches(model, np.concatenate([hard_rows(model, seed, Xt), Xt]),
                   proba=task != "regression")


def test_rows_on_thresholds_are_exercised():
    """The hard rows put values on the borders the trees split on (not only near them)."""
    X, y = data(0, "binary")
    model = jboost.fit(X, y, "binomial_deviance", **KW)
    rows = hard_rows(model, 0, data(100, "binary", n=200)[0])
    points = split_points(model)
    assert sum(np.isin(rows[:, j], b).sum() for j, b in points.items()) > 50


@pytest.mark.parametrize("family", ["oblivious", "depthwise"])
def test_borders_at_zero_and_the_subnormal_edges_route_as_in_jboost(family):
    """Borders 0, -0, +-tiny and subnormals (jboost compares subnormals as +-tiny) on rows of
    exactly those values: the one border whose ONNX node is not ``x <= border`` (``-tiny``)
    included."""
    X, y = data(4, "binary")
    model = jboost.fit(X, y, "binomial_deviance", **{**KW, **FAMILIES[family]})
    tiny = np.finfo(np.float32).tiny
    edges = np.array([-tiny, tiny, 0.0, -0.0, 1e-40, -1e-40, -2 * tiny], np.float32)
    borders = np.asarray(model.trees.borders).copy()
    flat = borders.reshape(-1)
    flat[:] = edges[np.arange(flat.size) % edges.size]
    model = model._replace(trees=model.trees._replace(borders=borders))
    rng = np.random.default_rng(4)
    values = np.concatenate([edges, np.nextafter(edges, np.float32(np.inf)),
                             np.nextafter(edges, np.float32(-np.inf)), [np.nan, 1.0, -1.0]])
    rows = rng.choice(values, size=(400, F)).astype(np.float32)
    assert_matches(model, rows)


@pytest.mark.parametrize("make", [
    "per_output_trees", "adaboost_m1", "samme", "label_offset", "poisson", "stacked", "ecoc",
    "early_stopped"])
def test_other_boosters_match(make):
    seed = 3
    Xb, yb = data(seed, "binary")
    Xm, ym = data(seed, "multiclass")
    Xr, yr = data(seed, "regression")
    small = dict(n_rounds=4, depth=2, n_bins=16)
    if make == "per_output_trees":
        model, X = jboost.fit(Xm, ym, "multinomial_deviance", per_output_trees=True, **KW), Xm
    elif make == "adaboost_m1":
        model, X = algorithms.adaboost_m1(Xb, yb, **small), Xb
    elif make == "samme":
        model, X = algorithms.samme(Xm, ym, **small), Xm
    elif make == "label_offset":
        with pytest.warns(UserWarning, match="large offset"):
            model = jboost.fit(Xr, 1e9 + yr.astype(np.float64), **KW)
        assert model.offset is not None
        X = Xr
    elif make == "poisson":
        model, X = jboost.fit(Xr, np.exp(np.clip(yr, -2, 2)).round(), "poisson", **KW), Xr
    elif make == "stacked":
        model = combine.fit_stacked_boosters(
            Xm, ym, "multinomial_deviance", hypers=[dict(learning_rate=0.5), dict(learning_rate=0.1)],
            folds=3, **small)
        X = Xm
    elif make == "ecoc":
        model, X = combine.fit_ecoc_boosters(Xm, ym, combine.exhaustive_code(3), **small), Xm
    else:
        model = jboost.fit(Xb[:200], yb[:200], "binomial_deviance", eval_set=(Xb[200:], yb[200:]),
                           early_stopping_rounds=2, n_rounds=12, depth=3, n_bins=16,
                           learning_rate=1.0)
        X = Xb
    proba = make not in ("label_offset", "poisson", "ecoc")
    assert_matches(model, np.concatenate([hard_rows(model, seed, X), X]), proba=proba)


@pytest.mark.parametrize("make", ["vector_labels", "one_vector_label", "multi_label", "cox",
                                  "distributional"])
def test_vector_labels_batch_objectives_and_distributions_match(make):
    """Raw scores of every kind of model (``(n, C)`` kept for vector labels, even ``C == 1``);
    multi-label probabilities ``(n, C)``; a Cox model's log risks; a distribution's parameters'
    raw scores."""
    X, y = data(6, "regression")
    small = dict(n_rounds=4, depth=2, n_bins=16)
    labels = np.stack([y, np.nan_to_num(X[:, 1])], axis=1).astype(np.float32)
    if make == "vector_labels":
        model = jboost.fit(X, labels, "squared_error", **small)
    elif make == "one_vector_label":
        model = jboost.fit(X, labels[:, :1], "squared_error", **small)
    elif make == "multi_label":
        model = jboost.fit(X, (labels > 0).astype(np.float32), "binomial_deviance", **small)
    elif make == "cox":
        rng = np.random.default_rng(6)
        time_ = rng.exponential(np.exp(-np.nan_to_num(X[:, 0])))
        model = jboost.fit(X, np.stack([time_, rng.random(N) < 0.7], axis=1).astype(np.float32),
                           jboost.objectives.cox("efron"), **small)
    else:
        model = jboost.distributions.fit(X, y, jboost.distributions.Normal, **small)
    out = assert_matches(model, np.concatenate([hard_rows(model, 6, X), X]),
                         proba=make == "multi_label")
    trailing = {"vector_labels": (2,), "one_vector_label": (1,), "multi_label": (2,), "cox": ()}
    assert out["raw_scores"].shape[1:] == trailing.get(make, out["raw_scores"].shape[1:])


@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("family", ["oblivious", "depthwise"])
@pytest.mark.parametrize("task", ["regression", "multiclass"])
def test_forests_match(task, family, seed):
    X, y = data(seed, task)
    kw = dict(depth=4) if family == "oblivious" else dict(depth=5)
    model = bagging.fit_forest(X, y, task="regression" if task == "regression" else "classification",
                               n_trees=6, n_bins=16, key=seed, tree_family=family, **kw)
    Xt, _ = data(seed + 100, task, n=200)
    assert_matches(model, np.concatenate([hard_rows(model, seed, Xt), Xt]),
                   proba=task != "regression")


@pytest.mark.parametrize("seed", [0, 1])
def test_bagged_boosters_match(seed):
    """Raw scores: the mean of the bags'; probabilities: the mean of the bags' probabilities."""
    X, y = data(seed, "binary")
    model = bagging.fit_bagged_boosters(X, y, "binomial_deviance", n_bags=3, key=seed,
                                        n_rounds=4, depth=2, n_bins=16)
    Xt, _ = data(seed + 100, "binary", n=200)
    assert_matches(model, np.concatenate([hard_rows(model, seed, Xt), Xt]))


def categorical_data(seed: int, n: int = N):
    """Columns 0 and 3 numeric, 1 a few integer codes (one-hot), 2 many (target statistics),
    4 numeric; NaN missing everywhere (column 1's missing category informative)."""
    rng = np.random.default_rng(seed)
    X, _ = data(seed, "regression", n=n, nan=0.0)
    X[:, 1] = rng.integers(0, 5, size=n) * 3 - 4           # codes -4, -1, 2, 5, 8
    X[:, 2] = rng.integers(0, 40, size=n) + 100            # codes 100..139
    missing = rng.random(X.shape) < 0.08
    effect = np.sin(X[:, 2]) + (X[:, 1] > 0) + 2.0 * missing[:, 1]  # the missing category counts
    score = X[:, 0] + effect + 0.3 * rng.normal(size=n)
    X[missing] = np.nan
    return X, score.astype(np.float32)


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("task", ["regression", "binary", "multiclass"])
@pytest.mark.parametrize("family", ["oblivious", "depthwise"])
def test_categorical_columns_match(family, task, seed):
    X, score = categorical_data(seed)
    y = {"regression": score, "binary": (score > 0).astype(np.float32),
         "multiclass": np.digitize(score, [-0.5, 0.8]).astype(np.float32)}[task]
    model = jboost.fit(X, y, TASKS[task], cat_features=[1, 2], one_hot_max_size=8,
                       **{**KW, **FAMILIES[family]}, key=seed)
    assert model.categorical.spec.kinds == ("numeric", "one_hot", "ctr", "numeric", "numeric")
    Xt, _ = categorical_data(seed + 100, n=200)
    Xt[:20, 1] = 7.0   # unseen codes
    Xt[20:40, 2] = 99.0
    Xt[40:50, 2] = -0.0
    assert_matches(model, np.concatenate([hard_rows(model, seed, Xt), Xt]),
                   proba=task != "regression")


def custom_link(raw, **params):
    """A link ONNX cannot express (a Python function)."""
    p = jax.nn.sigmoid(raw)
    return np.stack([1 - p, p], axis=-1)


@pytest.fixture(scope="module")
def binary_model():
    X, y = data(0, "binary")
    return jboost.fit(X, y, "binomial_deviance", **KW)


def test_a_custom_link_exports_raw_scores_when_asked(binary_model):
    model = binary_model._replace(loss=binary_model.loss.replace(link=custom_link))
    with pytest.raises(ValueError, match=r"link 'custom_link'.*outputs=\('raw_scores',\)"):
        jio.to_onnx(model)
    X = data(5, "binary")[0]
    out = run(jio.to_onnx(model, outputs=("raw_scores",)), X)
    assert list(out) == ["raw_scores"]
    np.testing.assert_allclose(out["raw_scores"], np.asarray(jboost.predict(model, X)), **TOL)


def test_what_cannot_be_exported_raises_naming_the_fix(binary_model):
    X, y = data(0, "binary")
    batched = jax.vmap(lambda lr: jboost.fit(X, y, "binomial_deviance", n_rounds=2, depth=2,
                                             n_bins=16, learning_rate=lr))(np.array([0.1, 0.5]))
    with pytest.raises(ValueError, match=r"batch axes \(2,\).*tree_map"):
        jio.to_onnx(batched)
    reg = jboost.fit(X, y, "squared_error", n_rounds=2, depth=2, n_bins=16)
    with pytest.raises(ValueError, match=r"'probabilities'.*'regression' model.*outputs=\('raw_scores',\)"):
        jio.to_onnx(reg, outputs=("raw_scores", "probabilities"))
    with pytest.raises(ValueError, match=r"outputs=\('leaves',\)"):
        jio.to_onnx(binary_model, outputs=("leaves",))
    with pytest.raises(ValueError, match="opset=9"):
        jio.to_onnx(binary_model, opset=9)
    with pytest.raises(TypeError, match="fitted jboost ensemble"):
        jio.to_onnx(np.zeros(3))


class MyTrees(jboost.ObliviousTrees):
    """A custom tree family (its routing may differ from the built-in one's)."""


def test_a_custom_tree_family_raises(binary_model):
    trees = MyTrees(*binary_model.trees)
    with pytest.raises(ValueError, match=r"built-in tree families.*MyTrees.*tree_family="):
        jio.to_onnx(binary_model._replace(trees=trees))


def test_string_categories_and_bagged_categorical_raise():
    pd = pytest.importorskip("pandas")
    rng = np.random.default_rng(0)
    df = pd.DataFrame({"x": rng.normal(size=100).astype(np.float32),
                       "c": rng.choice(["a", "b", "c"], size=100)})
    y = (df["x"] > 0).astype(np.float32).to_numpy()
    model = jboost.fit(df, y, "binomial_deviance", n_rounds=2, depth=2, n_bins=16)
    with pytest.raises(ValueError, match=r"column 'c'.*strings.*cat\.codes"):
        jio.to_onnx(model)
    X, score = categorical_data(0)
    bag = bagging.fit_bagged_boosters(X, (score > 0).astype(np.float32), "binomial_deviance",
                                      n_bags=2, key=0, cat_features=[1, 2], n_rounds=2, depth=2,
                                      n_bins=16)
    with pytest.raises(ValueError, match=r"bagged boosters with categorical columns.*own target"):
        jio.to_onnx(bag)


def test_the_graph_is_valid_typed_and_saved(binary_model, tmp_path):
    path = tmp_path / "model.onnx"
    proto = jio.to_onnx(binary_model, path=path, opset=13)
    onnx.checker.check_model(onnx.load(path), full_check=True)
    assert [o.name for o in proto.graph.output] == ["raw_scores", "probabilities"]
    props = {m.key: m.value for m in proto.metadata_props}
    assert (props["jboost_model_type"], props["task"], props["feature_names"]) == (
        "Booster", "binary", "null")
    X = data(1, "binary")[0]
    np.testing.assert_array_equal(run(onnx.load(path), X)["raw_scores"],
                                  run(jio.to_onnx(binary_model, opset=18), X)["raw_scores"])


def test_jboost_io_imports_without_onnx():
    """``import jboost.io`` (and jboost.load) imports no onnx; ``jboost.io.to_onnx`` loads it."""
    code = ("import sys, jboost.io; assert 'onnx' not in sys.modules; "
            "f = jboost.io.to_onnx; assert 'onnx' in sys.modules; print(f.__module__)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "jboost.io.onnx_export"
