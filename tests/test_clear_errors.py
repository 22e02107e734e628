"""Mistakes whose error used to come from deep inside (issue 46): each now names the argument or
the situation and the fix, and a rerun of a finished checkpointed fit returns its model.

* ``jax.jit`` around a fit entry point (a ``TracerBoolConversionError`` in the binning): a
  ``TypeError`` saying it is not jittable and what is (``jax.vmap`` over hyperparameters,
  ``jboost.predict`` under ``jit``);
* a fit whose checkpoint already holds every round (``nothing left to fit``): the model, bitwise
  the uninterrupted fit's, as forests and sweeps do;
* an ``eval_metric`` (or a sweep's ``metric``) returning a vector (a reshape error): a
  ``ValueError`` naming it and the shape;
* ``verbose="yes"`` (an int-parsing error): the setting's own check, naming ``verbose``.

The end-to-end fits share conftest's shapes (``FIT_KW``).
"""

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jboost
import jboost.sweep as sweep_lib
from jboost import bagging


def per_row_error(y, raw, w):
    """A mistaken metric: the error of each row, not their mean."""
    return w * (y - raw.reshape(y.shape)) ** 2


def _same(a, b):
    """Two models equal in every array and static field (NaN where NaN)."""
    assert jax.tree_util.tree_structure(a) == jax.tree_util.tree_structure(b)
    for (path, u), (_, v) in zip(jax.tree_util.tree_leaves_with_path(a),
                                 jax.tree_util.tree_leaves_with_path(b)):
        u, v = np.asarray(u), np.asarray(v)
        assert u.dtype == v.dtype, jax.tree_util.keystr(path)
        np.testing.assert_array_equal(u, v, err_msg=jax.tree_util.keystr(path))


# ---- jax.jit around a fit ----------------------------------------------------------------------


def test_jit_around_fit_says_fit_is_not_jittable_and_what_is(regression_data, fit_kw):
    X, y, _, _ = regression_data
    expected = (r"jboost.fit is not jittable: it bins the data on the host .* jax.vmap over "
                r"traced hyperparameters with concrete data.* jboost.predict\(model, X\) under "
                r"jax.jit")
    with pytest.raises(TypeError, match=expected):  # the data closed over, a traced setting
        jax.jit(lambda lr: jboost.fit(X, y, learning_rate=lr, **fit_kw).train_loss)(0.1)
    with pytest.raises(TypeError, match=expected):  # the data traced
        jax.jit(jboost.fit)(X, y)
    with pytest.raises(TypeError, match="jboost.sweep.sweep is not jittable"):
        jax.jit(lambda X: sweep_lib.sweep(X, y, n_rounds=2, depth=1, n_bins=8).best_scores)(X)
    with pytest.raises(TypeError, match="jboost.bagging.fit_forest is not jittable"):
        jax.jit(lambda X: bagging.fit_forest(X, y, task="regression").n_trees)(X)


def test_what_the_message_offers_works(regression_data, fit_kw):
    """jax.vmap over a traced hyperparameter and jboost.predict under jit are still allowed."""
    X, y, _, _ = regression_data
    losses = jax.vmap(lambda lr: jboost.fit(X, y, learning_rate=lr, **fit_kw).train_loss)(
        jnp.asarray([0.1, 0.3]))
    assert losses.shape == (2, fit_kw["n_rounds"])
    model = jboost.fit(X, y, **fit_kw)
    np.testing.assert_allclose(jax.jit(jboost.predict)(model, X), jboost.predict(model, X),
                               rtol=1e-6)


# ---- a checkpoint holding every round ------------------------------------------------------------


def test_rerunning_a_finished_checkpointed_fit_returns_its_model(binary_data, fit_kw, tmp_path):
    X, y, Xv, yv = binary_data
    kw = dict(fit_kw, loss="binomial_deviance", eval_set=(Xv, yv))
    whole = jboost.fit(X, y, **kw)
    first = jboost.fit(X, y, checkpoint_dir=tmp_path, **kw)
    again = jboost.fit(X, y, checkpoint_dir=tmp_path, **kw)  # nothing left: the checkpoint's model
    _same(first, whole)
    _same(again, whole)
    assert again.n_rounds == fit_kw["n_rounds"] and again.settings is not None


def test_rerunning_a_checkpointed_fit_early_stopping_ended_returns_its_model(regression_data,
                                                                             tmp_path):
    """The checkpoint of a fit early stopping ended (fewer rounds than asked) is finished too."""
    X, y, Xv, yv = regression_data
    kw = dict(n_rounds=200, depth=3, n_bins=32, learning_rate=1.0, eval_set=(Xv, yv),
              early_stopping_rounds=2)
    whole = jboost.fit(X, y, **kw)
    assert whole.n_rounds < 200  # it stopped
    jboost.fit(X, y, checkpoint_dir=tmp_path, **kw)
    _same(jboost.fit(X, y, checkpoint_dir=tmp_path, **kw), whole)


# ---- a metric returning a vector ---------------------------------------------------------------


def test_an_eval_metric_returning_a_vector_is_named_with_its_shape(regression_data, fit_kw):
    X, y, Xv, yv = regression_data
    msg = (r"eval_metric='per_row_error' returned a value of shape \(100,\); it must return a "
           r"scalar")
    with pytest.raises(ValueError, match=msg):  # shown and given to callbacks
        jboost.fit(X, y, eval_set=(Xv, yv), eval_metric=per_row_error, **fit_kw)
    with pytest.raises(ValueError, match=msg):  # the early-stopping score
        jboost.fit(X, y, eval_set=(Xv, yv), eval_metric=per_row_error, early_stopping_rounds=2,
                   **fit_kw)
    with pytest.raises(ValueError, match=r"metric='per_row_error' returned a value of shape "
                                         r"\(200,\)"):  # a sweep's metric (the held-out rows)
        sweep_lib.sweep(X, y, metric=per_row_error, folds=2, seeds=1, n_rounds=2, depth=1,
                        n_bins=8)


# ---- verbose ----------------------------------------------------------------------------------


@pytest.mark.parametrize("verbose, error", [("yes", TypeError), (2.5, TypeError),
                                            (-1, ValueError), (None, TypeError)])
def test_verbose_is_checked_by_its_setting(regression_data, fit_kw, verbose, error):
    X, y, _, _ = regression_data
    msg = r"verbose must be a bool or an int >= 0 .*; got " + repr(verbose).replace(".", r"\.")
    with pytest.raises(error, match=msg):
        jboost.fit(X, y, verbose=verbose, **fit_kw)
    with pytest.raises(error, match=msg):
        sweep_lib.sweep(X, y, verbose=verbose, n_rounds=2, depth=1, n_bins=8)
    with pytest.raises(error, match=msg):
        bagging.fit_forest(X, y, task="regression", verbose=verbose)


def test_verbose_takes_bools_and_counts(regression_data, fit_kw, capsys):
    X, y, _, _ = regression_data
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        jboost.fit(X, y, verbose=np.int64(3), **fit_kw)
        jboost.fit(X, y, verbose=False, **fit_kw)
    lines = [l for l in capsys.readouterr().out.splitlines() if l.startswith("[jboost] round")]
    assert len(lines) == 2  # rounds 3 and 6


def test_degenerate_class_labels_are_refused_at_fit():
    """String labels of a single class, or fewer distinct labels than n_outputs, made a model
    whose classes could not name its probabilities (refused by save and load since issue 46):
    the fit refuses them naming the fix."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(40, 3)).astype(np.float32)
    labels = np.array(["a", "b", "c"])[rng.integers(0, 3, 40)]
    with pytest.raises(ValueError, match=r"n_outputs=5 but y holds 3 class labels"):
        jboost.fit(X, labels, "multinomial_deviance", n_outputs=5, n_rounds=2)
    with pytest.raises(ValueError, match=r"y holds a single class label 'a'"):
        jboost.fit(X, np.array(["a"] * 40), "binomial_deviance", n_rounds=2)
    model = jboost.fit(X, labels, "multinomial_deviance", n_outputs=3, n_rounds=2)
    assert list(model.classes.labels) == ["a", "b", "c"]
