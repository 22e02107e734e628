"""Categorical features in jboost.fit (issue 17 part 2): one-hot splits, CatBoost's ordered target
statistics without target leakage, unseen and missing categories at prediction, columns matched
by name, model files, a vmapped sweep over the prior, the errors of the settings layer."""

from __future__ import annotations

import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jboost
from jboost import io as jio
from jboost.data import categorical as categorical_lib
from jboost.data import categorical_stats
from jboost.models import base as base_lib

pd = pytest.importorskip("pandas")

KW = dict(n_rounds=6, depth=2, n_bins=16, learning_rate=0.5, one_hot_max_size=4)
CITIES = [f"c{i:02d}" for i in range(12)]


def _frame(n=240, seed=0):
    """A numeric column, a 3-category string column (one-hot by default) and a 12-category
    column (ordered target statistics), with missing values; binary labels driven by both."""
    rng = np.random.default_rng(seed)
    city = rng.choice(CITIES, n).astype(object)
    city[rng.random(n) < 0.05] = None
    df = pd.DataFrame({"x": rng.normal(size=n).astype(np.float32),
                       "color": pd.Categorical(rng.choice(["red", "green", "blue"], n)),
                       "city": city})
    effect = {c: (i % 4 - 1.5) for i, c in enumerate(CITIES)}
    logit = df.x + 2.0 * (df.color == "red") + df.city.map(effect).fillna(0.0)
    y = (rng.random(n) < 1 / (1 + np.exp(-logit.to_numpy()))).astype(np.float32)
    return df, y


@pytest.fixture(scope="module")
def fitted():
    df, y = _frame()
    return df, y, jboost.fit(df, y, "binomial_deviance", **KW)


@pytest.mark.slow
def test_kinds_vocabularies_and_layout(fitted):
    df, y, model = fitted
    spec = model.categorical.spec
    assert spec.kinds == ("numeric", "one_hot", "ctr")
    assert spec.vocab[1] == ("blue", "green", "red") and spec.vocab[2] == tuple(CITIES)
    assert spec.missing == (False, False, True)           # city has missing values: a category
    assert categorical_lib.encoded_names(model) == ("x", "color==blue", "color==green", "color==red", "city:ctr")
    assert model.n_features == 5 and model.n_inputs == 3
    assert list(model.feature_names_in_) == ["x", "color", "city"]


def test_one_hot_split_is_x_equals_c():
    """Labels that depend only on color == 'red': the first split is the 'red' indicator, so
    the prediction takes one value on red rows and one on the others."""
    rng = np.random.default_rng(1)
    color = rng.choice(["red", "green", "blue"], 90)
    df = pd.DataFrame({"color": color})
    y = (color == "red").astype(np.float32)
    model = jboost.fit(df, y, "squared_error", n_rounds=1, depth=1, n_bins=16, learning_rate=1.0, l2=0.0)
    f = int(np.asarray(model.trees.features).reshape(-1)[0])
    assert categorical_lib.encoded_names(model)[f] == "color==red"
    pred = np.asarray(jboost.predict(model, df))
    np.testing.assert_allclose(pred[color == "red"], 1.0, atol=1e-6)
    np.testing.assert_allclose(pred[color != "red"], 0.0, atol=1e-6)
    # an unseen or missing color is no category: it goes with the other colors
    new = pd.DataFrame({"color": ["purple", None, "red"]})
    np.testing.assert_allclose(np.asarray(jboost.predict(model, new)), [0.0, 0.0, 1.0], atol=1e-6)


def _positions(key, n):
    return np.asarray(jax.random.permutation(jax.random.fold_in(key, categorical_stats.PERMUTATION_STREAM), n))


def test_ordered_statistics_hand_worked():
    """Four rows of one category, targets 1, 0, 1, 1, prior 0.5 with weight 1, in the
    permutation's order r0 < r1 < r2 < r3: their values are 0.5, (t0 + .5)/2, (t0 + t1 + .5)/3,
    (t0 + t1 + t2 + .5)/4 (each from the rows before it only); a second column's rows of
    another category do not mix in. The table holds the sums of every row."""
    key = jax.random.PRNGKey(3)
    perm_key = jax.random.fold_in(key, categorical_stats.PERMUTATION_STREAM)
    t = np.array([[1.0], [0.0], [1.0], [1.0], [0.0], [1.0]], np.float32)
    w = np.ones(6, np.float32)
    codes = np.array([[0], [0], [0], [0], [1], [1]], np.int32)
    values, borders, bins, sums, counts = categorical_stats.training_features(
        jnp.asarray(codes), jnp.asarray(t), jnp.asarray(w), perm_key, jnp.array([0.5]), jnp.float32(1.0),
        jnp.array([0], jnp.int32), n_table_rows=2, n_bins=16)
    pos = _positions(key, 6)
    values = np.asarray(values)[:, 0]
    for cat in (0, 1):
        rows = [i for i in np.argsort(pos) if codes[i, 0] == cat]   # in permutation order
        seen = 0.0
        for k, i in enumerate(rows):
            assert values[i] == pytest.approx((seen + 0.5) / (k + 1.0), abs=1e-7)
            seen += t[i, 0]
    first = [i for i in np.argsort(pos) if codes[i, 0] == 0]
    t0, t1, t2 = (t[i, 0] for i in first[:3])
    np.testing.assert_allclose(values[first], [0.5, (t0 + 0.5) / 2, (t0 + t1 + 0.5) / 3,
                                               (t0 + t1 + t2 + 0.5) / 4], atol=1e-7)
    np.testing.assert_array_equal(np.asarray(sums)[:, 0], [3.0, 1.0])
    np.testing.assert_array_equal(np.asarray(counts), [4.0, 2.0])
    # bins follow the borders by jboost.data.binning's rule: bin > t iff value > border[t]
    b = np.asarray(borders)[0]
    np.testing.assert_array_equal(np.asarray(bins)[0], np.searchsorted(b[:-1], values, side="left"))


def test_no_target_leakage():
    """Changing row i's label leaves row i's training value unchanged, and every row before it
    in the permutation; the rows of its category after it change."""
    df, y = _frame(n=120)
    key = jax.random.PRNGKey(0)
    spec, X_enc = categorical_lib.build_spec(df, [False, True, True], ("x", "color", "city"), 4, 1)
    codes = jnp.asarray(X_enc[:, spec.host_width:], jnp.int32)
    perm_key = jax.random.fold_in(key, categorical_stats.PERMUTATION_STREAM)

    def values(labels):
        return np.asarray(categorical_stats.training_features(
            codes, jnp.asarray(labels[:, None]), jnp.ones(120), perm_key, jnp.array([0.3]),
            jnp.float32(1.0), jnp.asarray(spec.offsets), n_table_rows=spec.n_table_rows, n_bins=16)[0])[:, 0]

    pos = _positions(key, 120)
    c = np.asarray(codes)[:, 0]
    base = values(y)
    for i in (5, 17, 60):
        flipped = y.copy()
        flipped[i] = 1.0 - flipped[i]
        new = values(flipped)
        assert new[i] == base[i]                                   # its own label never enters
        before = pos < pos[i]
        np.testing.assert_array_equal(new[before], base[before])
        after = (pos > pos[i]) & (c == c[i])
        assert after.any() and np.all(new[after] != base[after])
        other = (pos > pos[i]) & (c != c[i])
        np.testing.assert_array_equal(new[other], base[other])


def test_zero_weight_rows_get_every_training_row():
    """A row of weight 0 (a held-out fold given as a weight mask) is encoded like a prediction
    row: the statistics of every training row; the training rows' statistics leave it out."""
    df, y = _frame(seed=1)
    w = np.ones(len(y), np.float32)
    w[::3] = 0.0
    model = jboost.fit(df, y, "binomial_deviance", sample_weight=w, **KW)
    cat = model.categorical
    codes = categorical_lib.encode(cat.spec, df)[:, cat.spec.host_width:]
    c = np.where(codes[:, 0] >= 0, codes[:, 0], 0).astype(int)
    keep = w > 0
    sums = np.bincount(c[keep], weights=y[keep], minlength=cat.spec.n_table_rows)
    counts = np.bincount(c[keep], minlength=cat.spec.n_table_rows)
    np.testing.assert_allclose(np.asarray(cat.sums)[:, 0], sums, atol=1e-5)
    np.testing.assert_array_equal(np.asarray(cat.counts), counts)
    p, a = float(cat.prior[0]), float(cat.prior_weight)
    assert p == pytest.approx(np.mean(y[keep]), abs=1e-6)
    spec, X_enc = categorical_lib.build_spec(df, [False, True, True], ("x", "color", "city"), 4, 1)
    vals = np.asarray(categorical_stats.training_features(
        jnp.asarray(X_enc[:, spec.host_width:], jnp.int32), jnp.asarray(y[:, None]), jnp.asarray(w),
        jax.random.fold_in(jax.random.PRNGKey(0), categorical_stats.PERMUTATION_STREAM), cat.prior,
        cat.prior_weight, jnp.asarray(spec.offsets), n_table_rows=spec.n_table_rows, n_bins=16)[0])[:, 0]
    np.testing.assert_allclose(vals[~keep], ((sums[c] + a * p) / (counts[c] + a))[~keep], rtol=1e-6)


def test_unseen_and_missing_categories_at_prediction(fitted):
    df, y, model = fitted
    cat = model.categorical
    new = pd.DataFrame({"x": [0.1] * 4, "color": ["red", "mauve", None, "red"],
                        "city": ["c03", None, None, "atlantis"]})
    enc = categorical_lib.encode(cat.spec, new)
    np.testing.assert_array_equal(enc[:, 1:4], [[0, 0, 1], [0, 0, 0], [0, 0, 0], [0, 0, 1]])
    assert list(enc[:, 4]) == [3, 12, 12, -1]      # missing: its own category (12); unseen: -1
    feats = np.asarray(categorical_stats.expand(cat, enc))
    assert feats[3, 4] == pytest.approx(float(cat.prior[0]))          # unseen: the prior
    s, n_c, p, a = (float(np.asarray(v).reshape(-1)[i]) for v, i in
                    ((cat.sums, 12), (cat.counts, 12), (cat.prior, 0), (cat.prior_weight, 0)))
    assert feats[2, 4] == pytest.approx((s + a * p) / (n_c + a))       # missing: its statistic
    pred = np.asarray(jboost.predict(model, new))
    assert np.all(np.isfinite(pred)) and pred[1] == pred[2]  # unseen and missing color: no indicator
    # a model whose training rows had no missing city: a missing city gets the prior
    clean = jboost.fit(df.fillna({"city": "c00"}), y, "binomial_deviance", **KW)
    enc = categorical_lib.encode(clean.categorical.spec, new)
    assert enc[2, 4] == -1 and np.all(np.isfinite(np.asarray(jboost.predict_proba(clean, new))))


def test_columns_matched_by_name(fitted):
    df, y, model = fitted
    ref = np.asarray(jboost.predict(model, df))
    np.testing.assert_array_equal(np.asarray(jboost.predict(model, df[["city", "x", "color"]])), ref)
    np.testing.assert_array_equal(np.asarray(jboost.predict_proba(model, df[["color", "city", "x"]]))[:, 1],
                                  np.asarray(jboost.predict_proba(model, df))[:, 1])
    staged = np.asarray(jboost.staged_predict(model, df[["city", "x", "color"]]))[-1, :, 0]
    np.testing.assert_array_equal(staged, ref)
    with pytest.raises(ValueError, match=r"missing \['city'\]"):
        jboost.predict(model, df.drop(columns="city"))


def test_save_load_round_trip(fitted, tmp_path):
    df, y, model = fitted
    path = os.fspath(tmp_path / "cats.jbm")
    jboost.save(model, path)
    header = jio.read_header(path)
    assert header["format_version"] == 4 and header["feature_names"] == ["x", "color", "city"]
    assert header["settings"]["one_hot_max_size"] == 4
    loaded = jboost.load(path)
    assert loaded.categorical.spec == model.categorical.spec
    new = pd.DataFrame({"x": [0.3, -1.0], "color": ["blue", "teal"], "city": ["c07", "nowhere"]})
    for rows in (df, new):
        np.testing.assert_array_equal(np.asarray(jboost.predict(loaded, rows)),
                                      np.asarray(jboost.predict(model, rows)))
    with pytest.raises(ValueError, match="categorical features"):
        jio.predict_numpy(path, np.zeros((2, 3), np.float32))
    # a file whose arrays do not fit its vocabularies is refused
    numeric = jboost.fit(df[["x"]], y, "binomial_deviance", **KW)
    jboost.save(numeric, path)
    assert jio.read_header(path)["format_version"] == 3   # no categorical: readable by older jboost


@pytest.mark.slow
def test_vmap_over_the_prior_is_one_program_equal_to_separate_fits(tmp_path):
    df, y = _frame(seed=2)
    weights = np.array([0.5, 2.0, 8.0], np.float32)
    before = categorical_stats.training_features._cache_size()
    fit = lambda a: jboost.fit(df, y, "binomial_deviance", cat_prior_weight=a, **KW)  # noqa: E731
    batch = jax.vmap(fit)(weights)
    assert categorical_stats.training_features._cache_size() - before <= 1   # traced once, one program
    assert batch.batch_shape == (3,)
    preds = np.asarray(jboost.predict(batch, df))
    for i, a in enumerate(weights):
        one = fit(float(a))
        np.testing.assert_allclose(preds[i], np.asarray(jboost.predict(one, df)), rtol=1e-5, atol=1e-5)
        np.testing.assert_array_equal(np.asarray(batch.trees.features[i]), np.asarray(one.trees.features))
    assert not np.allclose(preds[0], preds[2])                          # the prior weight matters
    assert jboost.feature_importance(batch).shape == (3, 3)             # per model, per column
    path = os.fspath(tmp_path / "batch.jbm")
    jboost.save(batch, path)
    np.testing.assert_array_equal(np.asarray(jboost.predict(jboost.load(path), df)), preds)
    prior = jax.vmap(lambda p: jboost.fit(df, y, "binomial_deviance", cat_prior=p, **KW))(
        jnp.array([0.1, 0.5, 0.9]))                                    # batch of 3: the program above
    np.testing.assert_allclose(np.asarray(prior.categorical.prior)[:, 0], [0.1, 0.5, 0.9])


def test_same_key_same_model_other_key_other_permutation():
    df, y = _frame(seed=3)
    a = jboost.fit(df, y, "binomial_deviance", key=4, **KW)
    b = jboost.fit(df, y, "binomial_deviance", key=4, **KW)
    c = jboost.fit(df, y, "binomial_deviance", key=5, **KW)
    np.testing.assert_array_equal(np.asarray(a.trees.leaf_values), np.asarray(b.trees.leaf_values))
    assert not np.array_equal(np.asarray(a.borders[-1]), np.asarray(c.borders[-1]))


@pytest.mark.slow
def test_numpy_codes_multiclass_and_regression():
    rng = np.random.default_rng(5)
    codes = rng.integers(0, 9, 240)
    X = np.stack([rng.normal(size=240), codes.astype(np.float64)], axis=1)
    y3 = (codes % 3).astype(np.float32)
    model = jboost.fit(X, y3, "multinomial_deviance", cat_features=[1], **KW)
    assert model.categorical.spec.kinds == ("numeric", "ctr") and model.categorical.spec.vocab[1] == tuple(range(9))
    assert model.n_features == 1 + 3                                   # one statistic per class
    assert np.mean(np.asarray(jboost.predict_class(model, X)) == y3) > 0.9
    assert jboost.feature_importance(model).shape == (2,)
    assert jboost.feature_importance(model, encoded=True).shape == (4,)
    strings = np.array([[f"k{c}", v] for c, v in zip(codes, X[:, 0])], dtype=object)
    with pytest.raises(TypeError, match="X must be numeric .* named by cat_features="):
        jboost.fit(strings, codes * 1.0, "squared_error", **KW)       # arrays: never inferred
    reg = jboost.fit(strings, codes * 1.0, "squared_error", cat_features=[0], **KW)
    assert reg.categorical.spec.kinds == ("ctr", "numeric")
    assert np.corrcoef(np.asarray(jboost.predict(reg, strings)), codes)[0, 1] > 0.9


def test_importance_and_shap_by_input_column(fitted):
    df, y, model = fitted
    imp = np.asarray(jboost.feature_importance(model))
    enc = np.asarray(jboost.feature_importance(model, encoded=True))
    np.testing.assert_allclose(imp, [enc[0], enc[1:4].sum(), enc[4]], rtol=1e-6)
    rows = np.asarray(base_lib.expanded_rows(model, df))
    plain = model._replace(categorical=None, feature_names=None)       # the trees on encoded rows
    values, expected = jboost.inspect.shap_values(plain, rows, data=rows)
    by_input = np.asarray(categorical_lib.sum_by_input(model, values))
    assert by_input.shape == (len(df), 3)
    np.testing.assert_allclose(by_input.sum(-1) + np.asarray(expected), np.asarray(jboost.predict(model, df)),
                               atol=1e-4)


@pytest.mark.parametrize("kwargs, X_fn, err, match", [
    (dict(cat_features=["town"]), None, ValueError, r"cat_features names the column 'town', which X does not have"),
    (dict(cat_features=[7]), None, ValueError, r"cat_features names column index 7, but X has 3 columns"),
    (dict(cat_features=["x", "color", "city"]), None, ValueError,
     r"X column 'x' is given as categorical but holds the non-integer number"),
    (dict(cat_features=["color"]), None, TypeError, r"X column 'city' is not numeric .* cat_features does not name it"),
    (dict(cat_prior_weight=0.0), None, ValueError, r"cat_prior_weight=0.0 must be a finite number > 0"),
    (dict(one_hot_max_size=-1), None, ValueError, "one_hot_max_size"),
    (dict(cat_features=["city"]), lambda df: df.to_numpy(), TypeError,
     r"cat_features names the column 'city', but X is an array without column names"),
])
def test_errors_name_the_argument(kwargs, X_fn, err, match):
    df, y = _frame(n=60)
    X = df if X_fn is None else X_fn(df)
    with pytest.raises(err, match=match):
        jboost.fit(X, y, "binomial_deviance", **{**KW, **kwargs})


def test_continued_fit_equals_the_longer_fit(fitted):
    """3 rounds, then 3 more with init_model: bitwise the 6 rounds of one fit (the continued
    fit encodes with the model's vocabularies, prior and borders, and the key's permutation)."""
    df, y, model = fitted
    first = jboost.fit(df, y, "binomial_deviance", **{**KW, "n_rounds": 3})
    more = jboost.fit(df[["city", "color", "x"]], y, "binomial_deviance", init_model=first,
                      cat_prior_weight=5.0, **{**KW, "n_rounds": 3})   # the model's prior is kept
    assert more.n_rounds == 6
    np.testing.assert_array_equal(np.asarray(more.trees.leaf_values), np.asarray(model.trees.leaf_values))
    np.testing.assert_array_equal(np.asarray(jboost.predict(more, df)), np.asarray(jboost.predict(model, df)))
    codes = df.color.cat.codes.to_numpy()[:, None].astype(np.float32)
    plain = jboost.fit(codes, y, "binomial_deviance", **KW)
    with pytest.raises(ValueError, match="init_model was fitted without categorical features"):
        jboost.fit(codes, y, "binomial_deviance", init_model=plain, cat_features=[0], **KW)


def test_string_dtypes_are_inferred():
    """object, pandas ``string`` and pandas 3's ``str`` (pandas 2's future.infer_string) columns
    are categorical; bool and nullable numbers are numeric."""
    with pd.option_context("future.infer_string", True):
        df = pd.DataFrame({"s3": ["a", "b", None], "o": pd.Series(["u", None, "v"], dtype=object),
                           "st": pd.array(["p", "q", None], dtype="string"), "b": [True, False, True],
                           "i": pd.array([1, None, 3], dtype="Int64")})
        names, cat = categorical_lib.resolve_columns(df, None)
    assert str(df["s3"].dtype) == "str" and cat == [True, True, True, False, False]
    spec, X_enc = categorical_lib.build_spec(df, cat, names, 4, 1)
    assert spec.vocab[:3] == (("a", "b"), ("u", "v"), ("p", "q")) and spec.missing[:3] == (True,) * 3
    np.testing.assert_array_equal(X_enc[:, -2:], [[1, 1], [0, np.nan], [1, 3]])
