"""Class labels as users have them (issue 17 part 3): strings, ``{-1, 1}`` and other
non-index labels are mapped to ``0..K-1`` by ``jboost.fit`` and kept in ``Booster.classes``."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jboost
from jboost import io as jio
from jboost.models import metadata

KW = dict(n_rounds=3, depth=2, n_bins=16)


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(120, 4)).astype(np.float32)
    codes = (X[:, 0] + 0.3 * rng.normal(size=120) > 0).astype(np.float32)
    return X, codes


def test_string_labels_are_the_fit_of_their_codes(data):
    X, codes = data
    names = np.array(["ham", "spam"])[codes.astype(int)]
    model = jboost.fit(X, names, "binomial_deviance", eval_set=(X[:30], names[:30]), **KW)
    ref = jboost.fit(X, codes, "binomial_deviance", eval_set=(X[:30], codes[:30]), **KW)
    assert model.classes == metadata.Classes(["ham", "spam"]) and ref.classes is None
    np.testing.assert_array_equal(model.classes_, ["ham", "spam"])
    np.testing.assert_array_equal(jboost.predict(model, X), jboost.predict(ref, X))
    np.testing.assert_array_equal(model.valid_loss, ref.valid_loss)
    labels = jboost.predict_class(model, X)
    assert isinstance(labels, np.ndarray) and labels.dtype.kind == "U"
    np.testing.assert_array_equal(labels, np.array(["ham", "spam"])[np.asarray(jboost.predict_class(ref, X))])
    assert jboost.predict_class(model, X[:0]).shape == (0,)
    with pytest.raises(ValueError, match=r"eval_set y holds labels the training labels do not have: "
                                         r"\['eggs'\]"):
        jboost.fit(X, names, "binomial_deviance", eval_set=(X[:2], np.array(["ham", "eggs"])), **KW)


def test_minus_one_one_labels_and_k_class_strings(data):
    X, codes = data
    pm = np.where(codes > 0, 1, -1)
    model = jboost.fit(X, pm, "binomial_deviance", **KW)
    np.testing.assert_array_equal(model.classes_, [-1, 1])
    ref = jboost.fit(X, codes, "binomial_deviance", **KW)
    np.testing.assert_array_equal(jboost.predict_class(model, X),
                                  np.where(np.asarray(jboost.predict_class(ref, X)) == 1, 1, -1))
    y3 = np.array(["a", "b", "c"])[np.argmax(X[:, :3], axis=1)]
    m3 = jboost.fit(X, y3, "multinomial_deviance", **KW)
    assert m3.n_outputs == 3 and list(m3.classes_) == ["a", "b", "c"]
    assert np.mean(jboost.predict_class(m3, X) == y3) > 0.6
    # Non-negative integers stay class indices (XGBoost's convention): no mapping.
    assert jboost.fit(X, codes.astype(int), "binomial_deviance", **KW).classes is None


def test_classes_survive_model_files_and_continued_fits(data, tmp_path):
    X, codes = data
    names = np.array(["no", "yes"])[codes.astype(int)]
    model = jboost.fit(X, names, "binomial_deviance", **KW)
    path = tmp_path / "m.jbm"
    jboost.save(model, path)
    assert jio.read_header(path)["format_version"] == 3
    loaded = jboost.load(path)
    assert loaded.classes == model.classes
    np.testing.assert_array_equal(jboost.predict_class(loaded, X), jboost.predict_class(model, X))
    jboost.save(jboost.fit(X, codes, "binomial_deviance", **KW), tmp_path / "plain.jbm")
    assert jio.read_header(tmp_path / "plain.jbm")["format_version"] == 2  # older jboost reads it
    # A checkpoint written during the fit keeps the classes too (it is a model file).
    jboost.fit(X, names, "binomial_deviance", checkpoint_dir=tmp_path / "ck", **KW)
    assert jboost.load(tmp_path / "ck" / "checkpoint.jbm").classes == model.classes
    more = jboost.fit(X, names, "binomial_deviance", init_model=model, **KW)
    assert more.classes == model.classes and more.n_rounds == 6
    with pytest.raises(ValueError, match=r"y holds labels the training labels do not have: \['maybe'\]"):
        jboost.fit(X, np.where(codes > 0, "maybe", "no"), "binomial_deviance", init_model=model, **KW)


def test_vmapped_fit_keeps_the_classes(data):
    X, codes = data
    names = np.array(["ham", "spam"])[codes.astype(int)]
    batch = jax.vmap(lambda lr: jboost.fit(X, names, "binomial_deviance", learning_rate=lr, **KW))(
        jnp.array([0.1, 0.5]))
    labels = jboost.predict_class(batch, X)
    assert labels.shape == (2, len(X)) and set(np.unique(labels)) <= {"ham", "spam"}
    one = jboost.fit(X, names, "binomial_deviance", learning_rate=0.5, **KW)
    np.testing.assert_array_equal(labels[1], jboost.predict_class(one, X))
    with pytest.raises(TypeError, match="non-numeric class labels .* needs concrete values"):
        jax.jit(lambda m: jboost.predict_class(m, jnp.asarray(X)))(one)


@pytest.mark.parametrize("labels,loss,error,match", [
    (np.array(["a", "b"] * 60), "squared_error", TypeError,
     r"y holds non-numeric labels \('a', 'b', dtype <U1\): class labels need a classification loss"),
    (np.array(["a", "b", "c"] * 40), "binomial_deviance", ValueError,
     r"y holds 3 classes .* but the loss is binary: use loss='multinomial_deviance'"),
    (np.array(["a", 1] * 60, dtype=object), "binomial_deviance", TypeError,
     r"class labels of mixed types that cannot be sorted"),
    (np.array(["a", None] * 60, dtype=object), "binomial_deviance", ValueError,
     r"y holds missing class labels \(None\)"),
])
def test_bad_class_labels_are_named(data, labels, loss, error, match):
    X, _ = data
    with pytest.raises(error, match=match):
        jboost.fit(X, labels, loss, **KW)
