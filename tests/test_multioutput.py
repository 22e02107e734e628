"""Multi-output targets (issue 16 part 3): ``y`` of shape ``(n, C)`` through ``jboost.fit`` --
multi-target regression, multi-label classification, custom losses of a vector label -- and
the clear refusals of the entry points that take one label per row."""

import os

import jax.numpy as jnp
import numpy as np
import pytest

import jboost
from jboost import io as jio
from jboost import losses

N, F = 160, 4
FIT = dict(n_rounds=4, depth=2, learning_rate=0.5)


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(N, F)).astype(np.float32)
    Y = np.stack([X[:, 0] + 0.3 * rng.normal(size=N), X[:, 1] * X[:, 2], -X[:, 3]], 1)
    return X, Y.astype(np.float32)


def _same(a, b):
    return np.array_equal(np.asarray(a), np.asarray(b))


def test_one_column_equals_one_dimensional_labels_bitwise(data):
    X, Y = data
    col = jboost.fit(X, Y[:, :1], "squared_error", **FIT, eval_set=(X, Y[:, :1]))
    flat = jboost.fit(X, Y[:, 0], "squared_error", **FIT, eval_set=(X, Y[:, 0]))
    assert _same(col.trees.leaf_values, flat.trees.leaf_values)
    assert _same(col.trees.features, flat.trees.features)
    assert _same(col.train_loss, flat.train_loss) and _same(col.valid_loss, flat.valid_loss)
    pred = jboost.predict(col, X)
    assert pred.shape == (N, 1)                       # 2-D labels in, 2-D predictions out
    assert _same(pred[:, 0], jboost.predict(flat, X))
    with pytest.raises(ValueError, match="init_model was fitted on 1 label columns; this fit's y has 1-D"):
        jboost.fit(X, Y[:, 0], "squared_error", **FIT, init_model=col)


@pytest.mark.slow
def test_per_output_trees_equal_separate_fits_with_their_refits(data):
    """absolute_error per column, one tree per output: each output is the one-output fit of its
    column (its own tree, its own weighted-median leaf refit)."""
    X, Y = data
    multi = jboost.fit(X, Y, "absolute_error", **FIT, per_output_trees=True)
    pred = np.asarray(jboost.predict(multi, X))
    assert pred.shape == (N, 3)
    for k in range(3):
        one = jboost.fit(X, Y[:, k], "absolute_error", **FIT)
        assert _same(multi.trees.features[:, k], one.trees.features[:, 0])
        np.testing.assert_allclose(pred[:, k], np.asarray(jboost.predict(one, X)), rtol=0, atol=1e-6)
        np.testing.assert_allclose(multi.baseline[k], one.baseline[0], rtol=0, atol=0)
    # One output: a tree per output is the vector-leaf tree, refitted the same (the refit was
    # once skipped there: Newton leaves on unit curvature instead of weighted medians).
    single = jboost.fit(X, Y[:, 2], "absolute_error", **FIT, per_output_trees=True)
    np.testing.assert_array_equal(np.asarray(jboost.predict(single, X)), np.asarray(jboost.predict(one, X)))


def l2_vector(y, f):
    """Half the squared distance of a vector label: a hand-written multi-target loss."""
    return 0.5 * jnp.sum((y - f) ** 2)


@pytest.mark.slow
def test_custom_vector_label_loss_equals_columnwise_squared_error(data):
    X, Y = data
    w = np.random.default_rng(1).uniform(0.2, 2.0, size=N)
    margin = np.tile(np.float32([0.5, -1.0, 2.0]), (N, 1))   # weights and offsets of 3 outputs
    custom = jboost.fit(X, Y, l2_vector, **FIT, sample_weight=w, base_margin=margin)
    built = jboost.fit(X, Y, "squared_error", **FIT, sample_weight=w, base_margin=margin)
    assert custom.loss.label_columns == 3 and custom.n_outputs == 3
    assert _same(custom.trees.features, built.trees.features)
    np.testing.assert_allclose(jboost.predict(custom, X, base_margin=margin),
                               jboost.predict(built, X, base_margin=margin), atol=1e-5)
    np.testing.assert_allclose(custom.train_loss, built.train_loss, rtol=1e-5)


def test_multilabel_classification_predictions_and_early_stopping(data):
    X, Y = data
    L = (Y > 0).astype(np.float32)
    m = jboost.fit(X, L, "binomial_deviance", n_rounds=12, depth=2, learning_rate=0.5,
                   eval_set=(X[:80], L[:80]), early_stopping_rounds=2, eval_metric="error_rate")
    raw = np.asarray(jboost.predict(m, X))
    proba = np.asarray(jboost.predict_proba(m, X))
    assert raw.shape == proba.shape == (N, 3)
    np.testing.assert_allclose(proba, 1 / (1 + np.exp(-raw)), rtol=1e-5)
    classes = np.asarray(jboost.predict_class(m, X))
    assert _same(classes, (proba > 0.5).astype(classes.dtype))
    # The stopping score is the Hamming loss over every (row, label) of the eval rows.
    staged = jboost.staged_predict(m, X[:80])
    best = int(m.best_round)
    hamming = np.mean((np.asarray(staged[best]) > 0) != L[:80])
    assert m.n_rounds <= 12 and hamming < np.mean(L[:80] != (L[:80].mean(0) > 0.5))


def test_warm_start_and_model_files(data, tmp_path):
    X, Y = data
    full = jboost.fit(X, Y, "squared_error", **dict(FIT, n_rounds=8))
    half = jboost.fit(X, Y, "squared_error", **FIT)
    more = jboost.fit(X, Y, "squared_error", **FIT, init_model=half)
    assert _same(jboost.predict(more, X), jboost.predict(full, X))
    path = os.path.join(tmp_path, "multi.jbm")
    jboost.save(full, path)
    loaded = jboost.load(path)
    assert loaded.loss.per_column and loaded.loss.label_columns == 3
    assert _same(jboost.predict(loaded, X), jboost.predict(full, X))
    assert _same(jio.predict_numpy(path, X), jboost.predict(full, X))


def test_label_offset_per_column(data):
    X, Y = data
    big = Y.astype(np.float64) + np.array([1e9, 0.0, -5e8])
    with pytest.warns(UserWarning, match="column medians"):
        m = jboost.fit(X, big, "squared_error", **FIT)
    assert m.offset.shape == (3,)
    ref = jboost.fit(X, Y, "squared_error", **FIT)
    # Each column's float64 shift is taken out: the fit of y - c is the fit of Y moved by s - c
    # (squared error moves with its labels), so its raw scores before the offset plus c - s are
    # the reference's, to float32 rounding of the centred labels.
    assert _same(m.trees.features, ref.trees.features)
    shift = np.asarray(m.offset, np.float64) - np.array([1e9, 0.0, -5e8])
    centred = np.asarray(jboost.predict(m._replace(offset=None), X), np.float64)
    np.testing.assert_allclose(centred + shift, jboost.predict(ref, X), atol=1e-5)


def test_errors_name_the_labels(data):
    X, Y = data
    for call in (lambda: jboost.sweep.sweep(X, Y, "squared_error", grid={"l2": [0.0, 1.0]},
                                            folds=2, n_rounds=2, depth=2),
                 lambda: jboost.bagging.fit_forest(X, Y, n_trees=2, depth=2),
                 lambda: jboost.algorithms.adaboost_m1(X, Y, n_rounds=2)):
        with pytest.raises(ValueError, match=r"y has shape \(160, 3\): 2-D labels .* jboost.fit only"):
            call()
    with pytest.raises(ValueError, match="n_outputs=2 disagrees with y's 3 columns"):
        jboost.fit(X, Y, "squared_error", n_outputs=2, **FIT)
    with pytest.raises(ValueError, match="takes one column of class labels"):
        jboost.fit(X, (Y > 0).astype(np.float32), "multinomial_deviance", **FIT)
    with pytest.raises(ValueError, match=r"label vector of shape \(3,\).*jnp.sum"):
        jboost.fit(X, Y, lambda y, f: (y - f) ** 2, **FIT)
    with pytest.raises(ValueError, match=r"eval_set y must have shape \(160, 3\)"):
        jboost.fit(X, Y, "squared_error", eval_set=(X, Y[:, 0]), **FIT)
    with pytest.raises(ValueError, match="eval_set y has shape .* but y is 1-D"):
        jboost.fit(X, Y[:, 0], "squared_error", eval_set=(X, Y), **FIT)
    with pytest.raises(ValueError, match="binary labels 0/1"):
        jboost.fit(X, np.where(Y > 0, 2.0, 0.0), "binomial_deviance", **FIT)
    with pytest.raises(ValueError, match="adaptive Huber"):
        jboost.fit(X, Y, losses.huber(alpha=0.9), **FIT)
