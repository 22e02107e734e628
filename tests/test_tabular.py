"""Data as users hold it (issue 17 part 1): pandas DataFrames and Series in the core, feature
names kept in the model, prediction matching columns by name."""

from __future__ import annotations

import numpy as np
import pytest

import jboost
from jboost import io as jio
from jboost.data import tabular

pd = pytest.importorskip("pandas")

KW = dict(n_rounds=3, depth=2, n_bins=16)


@pytest.fixture(scope="module")
def frame():
    rng = np.random.default_rng(0)
    df = pd.DataFrame({"age": rng.normal(size=120).astype(np.float32),
                       "income": pd.array(rng.integers(0, 5, 120), dtype="Int64"),
                       "member": rng.random(120) > 0.5,
                       "score": pd.array(rng.normal(size=120), dtype="Float64")})
    df.loc[[3, 7], "income"] = pd.NA
    df.loc[[5], "score"] = pd.NA
    y = (df["age"] + df["member"] > 0.5).astype(np.float32)
    return df, y


def _array(df):
    return np.column_stack([df["age"].to_numpy(np.float64),
                            df["income"].to_numpy(np.float64, na_value=np.nan),
                            df["member"].to_numpy(np.float64),
                            df["score"].to_numpy(np.float64, na_value=np.nan)])


def test_a_frame_is_its_array_and_keeps_its_names(frame, tmp_path):
    df, y = frame
    # Nullable columns' pd.NA become NaN (missing), bools 0/1: the settings layer's matrix.
    np.testing.assert_array_equal(tabular.as_matrix(df), _array(df).astype(np.float32))
    assert np.isnan(tabular.as_matrix(df)[[3, 7], 1]).all()
    model = jboost.fit(df, y, "binomial_deviance", **KW)
    ref = jboost.fit(_array(df), y.to_numpy(), "binomial_deviance", **KW)
    np.testing.assert_array_equal(jboost.predict(model, df), jboost.predict(ref, _array(df)))
    assert list(model.feature_names_in_) == ["age", "income", "member", "score"]
    assert ref.feature_names is None
    # Reordered columns are matched by name (they used to move raw scores silently).
    shuffled = df[["score", "member", "age", "income"]]
    np.testing.assert_array_equal(jboost.predict(model, shuffled), jboost.predict(model, df))
    np.testing.assert_array_equal(jboost.predict_proba(model, shuffled), jboost.predict_proba(model, df))
    with pytest.raises(ValueError, match=r"X's columns do not match the model's features: missing "
                                         r"\['income'\]; unexpected \['salary'\]"):
        jboost.predict(model, df.rename(columns={"income": "salary"}))
    # A NumPy array is taken by position, as before.
    np.testing.assert_array_equal(jboost.predict(model, _array(df)), jboost.predict(model, df))
    path = tmp_path / "m.jbm"
    jboost.save(model, path)
    assert jio.read_header(path)["feature_names"] == ["age", "income", "member", "score"]
    loaded = jboost.load(path)
    assert loaded.feature_names == model.feature_names
    np.testing.assert_array_equal(jboost.predict(loaded, shuffled), jboost.predict(model, df))


def test_eval_set_and_continued_fits_match_columns_by_name(frame):
    df, y = frame
    model = jboost.fit(df, y, "binomial_deviance", eval_set=(df[["member", "age", "score", "income"]], y), **KW)
    ref = jboost.fit(df, y, "binomial_deviance", eval_set=(df, y), **KW)
    np.testing.assert_array_equal(model.valid_loss, ref.valid_loss)
    more = jboost.fit(df[["income", "score", "member", "age"]], y, "binomial_deviance",
                      init_model=ref, **KW)
    again = jboost.fit(df, y, "binomial_deviance", init_model=ref, **KW)
    np.testing.assert_array_equal(jboost.predict(more, df), jboost.predict(again, df))


def test_category_labels_and_non_numeric_columns(frame):
    df, y = frame
    labels = pd.Series(np.where(y > 0, "yes", "no")).astype("category")
    model = jboost.fit(df, labels, "binomial_deviance", **KW)
    assert list(model.classes_) == ["no", "yes"]
    assert set(jboost.predict_class(model, df)) <= {"no", "yes"}
    text = df.assign(city=["a", "b", "c"] * 40, kind=pd.Categorical(["u", "v"] * 60))
    cats = jboost.fit(text, y, "binomial_deviance", **KW)  # categorical columns: jboost.fit encodes
    assert cats.categorical.spec.kinds[-2:] == ("one_hot", "one_hot")
    with pytest.raises(TypeError, match=r"X has non-numeric columns 'city' \((object|str)\), 'kind' "
                                        r"\(category\): jboost.fit, jboost.sweep.sweep and "
                                        r"jboost.bagging.fit_bagged_boosters encode categorical columns"):
        tabular.as_matrix(text)  # the entry points of numeric columns only (forests, algorithms)
    dates = df.assign(when=pd.to_datetime(["2020-01-01"] * 120))
    with pytest.raises(TypeError, match=r"X column 'when' has dtype datetime64\[\w+\], which jboost "
                                        "cannot use"):
        jboost.fit(dates.assign(city=text.city), y, "binomial_deviance", **KW)
    with pytest.raises(ValueError, match=r"duplicate column names \['age'\]"):
        jboost.fit(pd.concat([df, df[["age"]]], axis=1), y, **KW)
