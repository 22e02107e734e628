"""The settings and data layer (jboost/fitting/prepare.py): one message per mistake, and the same
message from every entry point."""

from __future__ import annotations

import re
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jboost
from jboost import algorithms
from jboost import bagging
from jboost import combine
from jboost import sweep as sweep_lib
from jboost import checks as checks_lib
from jboost import devices
from jboost.data import binning
from jboost.data import folds
from jboost.data import labels
from jboost.data import tabular
from jboost.engine import boosting as boosting_lib
from jboost.engine import calls
from jboost.fitting import prepare
from jboost.fitting import settings
from jboost.losses import checks
from jboost.losses import purity

# Plumbing tests on tiny programs: compiled without XLA's optimisations (conftest.quick_compiles).
pytestmark = pytest.mark.usefixtures("quick_compiles")

X8 = np.random.default_rng(0).normal(size=(24, 3)).astype(np.float32)
Y8 = (X8[:, 0] > 0).astype(np.float32)


@pytest.mark.parametrize("call, error, match", [
    (lambda: tabular.as_matrix(np.zeros(3)), ValueError, r"X must be 2-D \(n_samples, n_features\); got shape \(3,\)"),
    (lambda: tabular.as_matrix(np.zeros((0, 3))), ValueError, r"X is empty: shape \(0, 3\)"),
    (lambda: tabular.as_matrix(np.array([["a"]])), TypeError, "X must be numeric"),
    (lambda: tabular.as_matrix(np.ones((2, 2), np.complex64)), TypeError, "X must be real; got a complex array"),
    (lambda: labels.as_labels(np.array([1.0, np.nan]), 2), ValueError, "y must be finite"),
    (lambda: labels.as_labels(np.ones(3), 2), ValueError, "y has 3 samples but X has 2"),
    (lambda: tabular.as_weights(np.array([1.0, -1.0]), 2), ValueError, "sample_weight must be non-negative"),
    (lambda: tabular.as_weights(np.zeros(2), 2), ValueError, "sample_weight must have a positive sum"),
    (lambda: tabular.as_weights(np.array([np.inf, 1.0]), 2), ValueError, "sample_weight must be finite"),
    (lambda: checks_lib.check_int(2.0, "depth", 1, 16), TypeError, "depth must be an int"),
    (lambda: checks_lib.check_int(True, "depth", 1, 16), TypeError, "depth must be an int"),
    (lambda: checks_lib.check_int(17, "depth", 1, 16), ValueError, r"depth=17 must be in \[1, 16\]"),
    (lambda: settings.check_hyperparameter("learning_rate", 0.0), ValueError, r"learning_rate=0.0 must be in \(0.0, inf\]"),
    (lambda: settings.check_hyperparameter("subsample", 1.5), ValueError, r"subsample=1.5 must be in \(0.0, 1.0\]"),
    (lambda: settings.check_hyperparameter("l2", np.ones(2)), ValueError, "l2 must be a scalar"),
    (lambda: checks_lib.check_choice("node", "colsample_by", ("tree", "level")), ValueError, r"colsample_by='node' must be one of"),
    (lambda: checks_lib.as_key("seed"), TypeError, r"key must be an int seed or a jax.random key \(an int in \[0, 2\*\*64\)\); got str"),
    (lambda: checks_lib.as_key(1.5), TypeError, r"key must be an int seed or a jax.random key \(an int in \[0, 2\*\*64\)\); got float"),
    (lambda: labels.n_classes_of(np.array([0.0, 0.5]), None), ValueError, "y must hold integer class labels"),
    (lambda: labels.n_classes_of(np.zeros(4), None), ValueError, "y holds a single class"),
    (lambda: labels.n_classes_of(np.array([0.0, 3.0]), 3), ValueError, r"y must hold class labels in \[0, 3\)"),
    (lambda: labels.n_classes_of(np.array([0.0, 2.0]), None, task="binary"), ValueError, "y must hold binary labels 0/1"),
    (lambda: folds.check_folds(1, 10), ValueError, r"folds=1 must be in \[2, 10\]"),
    (lambda: folds.check_folds(np.array([0, 0, 2]), 3), ValueError, "folds ids must be 0..K-1 with every id used"),
    (lambda: devices.devices_of("most"), ValueError, "devices='most' must be None, 'all'"),
    (lambda: tabular.predict_matrix(np.zeros((2, 4)), 3), ValueError, "X has 4 features, but the model was fitted on 3"),
    (lambda: binning.check_borders(np.zeros((3, 10)), 3, 256), ValueError, r"borders has shape \(3, 10\); expected \(3, 255\)"),
])
def test_messages(call, error, match):
    with pytest.raises(error, match=match):
        call()


def test_valid_inputs_pass_through():
    assert tabular.as_matrix(np.ones((2, 3), np.float64)).dtype == np.float32
    np.testing.assert_array_equal(tabular.as_weights(None, 3), np.ones(3, np.float32))
    assert labels.n_classes_of(np.array([0.0, 1.0, 2.0])) == 3
    assert labels.n_classes_of(np.array([0.0, 1.0]), 4) == 4
    assert folds.check_folds(5, 10) is None
    np.testing.assert_array_equal(folds.check_folds(np.array([1, 0, 1]), 3), [1, 0, 1])
    np.testing.assert_array_equal(checks_lib.as_raw_key(3), np.asarray(jax.random.PRNGKey(3)))
    np.testing.assert_array_equal(checks_lib.as_raw_key(jax.random.key(3)), np.asarray(jax.random.PRNGKey(3)))
    assert devices.devices_of(None) == (jax.devices()[0],)
    assert devices.mesh_of(None) is None
    settings.check_hyperparameter("learning_rate", jnp.float32(0.1))
    jax.vmap(lambda lr: settings.check_hyperparameter("learning_rate", lr))(jnp.array([-1.0]))  # traced: unchecked
    assert tabular.predict_matrix(np.zeros((0, 3)), 3).shape == (0, 3)


def test_prepare_bins_training_and_eval_set_with_one_set_of_borders():
    Xv = X8[:5] + 0.01
    data = prepare.prepare(X8, Y8, eval_set=(Xv, Y8[:5]), n_bins=16)
    assert data.X_binned.shape == (3, 24) and data.X_valid.shape == (3, 5)
    assert data.borders.shape == (3, 15)
    np.testing.assert_array_equal(data.X_valid, jboost.bin_features(Xv, data.borders))
    with pytest.raises(ValueError, match="eval_set X has 2 features but X has 3"):
        prepare.prepare(X8, Y8, eval_set=(Xv[:, :2], Y8[:5]))
    with pytest.raises(TypeError, match="eval_set must be a tuple"):
        prepare.prepare(X8, Y8, eval_set=Xv)


# One mistake, one message, from every entry point that takes the setting.
ENTRY_POINTS = {
    "fit": lambda **kw: jboost.fit(X8, Y8, "binomial_deviance", n_rounds=2, **kw),
    "adaboost_m1": lambda **kw: algorithms.adaboost_m1(X8, Y8, n_rounds=2, **kw),
    "logitboost": lambda **kw: algorithms.logitboost(X8, Y8, n_rounds=2, **kw),
    "gradient_boost": lambda **kw: algorithms.gradient_boost(X8, Y8, "binomial_deviance", n_rounds=2, **kw),
    "fit_bagged_boosters": lambda **kw: bagging.fit_bagged_boosters(X8, Y8, "binomial_deviance", n_bags=2, n_rounds=2, **kw),
    "sweep": lambda **kw: sweep_lib.sweep(X8, Y8, "binomial_deviance", folds=2, seeds=1, n_rounds=2, **kw),
    "fit_ecoc_boosters": lambda **kw: combine.fit_ecoc_boosters(X8, Y8, np.array([[0, 1], [1, 0]]), n_rounds=2, **kw),
}
FOREST = lambda **kw: bagging.fit_forest(X8, Y8, n_trees=2, **kw)


@pytest.mark.parametrize("name", sorted(ENTRY_POINTS))
@pytest.mark.parametrize("kwargs, error, match", [
    (dict(depth=0), ValueError, r"depth=0 must be in \[1, 16\]"),
    (dict(depth=2.0), TypeError, "depth must be an int"),
    (dict(n_bins=2), ValueError, r"n_bins=2 must be in \[3, 256\]"),
    (dict(learning_rate=-1.0), ValueError, r"learning_rate=-1.0 must be in \(0.0, inf\]"),
    (dict(l2=-1.0), ValueError, r"l2=-1.0 must be in \[0.0, inf\]"),
    (dict(subsample=0.0), ValueError, r"subsample=0.0 must be in \(0.0, 1.0\]"),
    (dict(key="seed"), TypeError, "key must be an int seed or a jax.random key"),
    (dict(sample_weight=-np.ones(24)), ValueError, "sample_weight must be non-negative"),
])
def test_every_entry_point_gives_the_same_message(name, kwargs, error, match):
    with pytest.raises(error, match=match):
        ENTRY_POINTS[name](**kwargs)


@pytest.mark.parametrize("kwargs, error, match", [
    (dict(depth=0), ValueError, r"depth=0 must be in \[1, 30\]"),  # depth-wise trees by default
    (dict(depth=0, tree_family="oblivious"), ValueError, r"depth=0 must be in \[1, 16\]"),
    (dict(n_bins=2), ValueError, r"n_bins=2 must be in \[3, 256\]"),
    (dict(key="seed"), TypeError, "key must be an int seed or a jax.random key"),
    (dict(sample_weight=-np.ones(24)), ValueError, "sample_weight must be non-negative"),
])
def test_forests_give_the_same_messages(kwargs, error, match):
    with pytest.raises(error, match=match):
        FOREST(**kwargs)


@pytest.mark.parametrize("call", [
    lambda X: jboost.fit(X, Y8, n_rounds=2),
    lambda X: algorithms.adaboost_m1(X, Y8, n_rounds=2),
    lambda X: bagging.fit_forest(X, Y8, n_trees=2),
    lambda X: sweep_lib.sweep(X, Y8, folds=2, seeds=1, n_rounds=2),
])
def test_bad_X_is_named_the_same_everywhere(call):
    with pytest.raises(ValueError, match=r"X must be 2-D \(n_samples, n_features\); got shape \(24,\)"):
        call(X8[:, 0])
    with pytest.raises(TypeError, match="X must be real; got a complex array"):
        call(X8.astype(np.complex64))


# --------------------------------------------------------------------------------------------
# Issue 14: borders, loss parameters, memory.
# --------------------------------------------------------------------------------------------


def test_check_borders_accepts_what_compute_borders_makes():
    # +inf padding (a constant or all-missing feature) and repeated borders are non-decreasing.
    X = np.random.default_rng(1).normal(size=(50, 3)).astype(np.float32)
    X[:, 1], X[:, 2] = np.nan, 1.0
    borders = np.asarray(jboost.compute_borders(X, 8))
    np.testing.assert_array_equal(binning.check_borders(borders, 3, 8), borders)
    binning.check_borders(np.array([[0.0, 0.0, 1.0, np.inf]] * 2), 2, 5)
    with pytest.raises(ValueError, match="non-decreasing along each feature .*feature 1"):
        binning.check_borders(np.array([[0.0, 0.5, 1.0, 2.0], [0.0, 1.0, 0.5, 2.0]]), 2, 5)


def test_loss_parameters_are_checked_only_when_concrete():
    loss = jboost.losses.quantile(0.5)
    with pytest.raises(ValueError, match=r"loss 'quantile' parameter alpha=2 must be in \(0, 1\)"):
        checks.check_loss_param(loss, "alpha", 2.0)
    with pytest.raises(ValueError, match=r"grid\['q'\]: loss 'quantile' parameter alpha must be finite"):
        checks.check_loss_param(loss, "alpha", np.inf, "grid['q']")
    checks.check_loss_param(loss, "alpha", np.array([0.1, 0.9]))
    jax.vmap(lambda a: checks.check_loss_param(loss, "alpha", a) or a)(jnp.asarray([2.0]))  # traced: skipped


def test_check_memory_names_the_cause():
    limit = devices.memory_limit()
    assert limit > 1 << 20
    devices.check_memory(limit // 2)
    with pytest.raises(MemoryError, match=r"needs about .* GiB but the device has .*: K = 7 classes; settings"):
        devices.check_memory(2 * limit, cause="K = 7 classes", detail="settings")


# --------------------------------------------------------------------------------------------
# The purity rule (issue 14 item 9): a loss reading a global that changes between fits.
# --------------------------------------------------------------------------------------------

_SCALE = 1.0
_OFFSETS = np.zeros(2, np.float32)
_KW = dict(n_rounds=2, depth=2, n_bins=8, l2=0.0)
YR = X8[:, 0] + 0.5 * X8[:, 1]


def _scaled(y, f):
    return _SCALE * (y - f) ** 2


def _shifted(y, f):
    return _squared(y - _OFFSETS[1], f)


def _squared(y, f):
    return (y - f) ** 2 * _SCALE


def test_a_changed_global_compiles_anew_and_says_so():
    global _SCALE
    first = jboost.fit(X8, YR, _scaled, **_KW)
    compiled = calls.boost_rounds._cache_size()
    with warnings.catch_warnings():
        warnings.simplefilter("error")       # unchanged: no warning, and no recompilation
        again = jboost.fit(X8, YR, _scaled, **_KW)
    assert calls.boost_rounds._cache_size() == compiled
    np.testing.assert_array_equal(np.asarray(again.train_loss), np.asarray(first.train_loss))
    try:
        _SCALE = 100.0
        with pytest.warns(UserWarning, match=r"loss '_scaled' reads the global _SCALE \(1.0 -> 100.0\), "
                          r"which changed since its last fit.*jboost.Loss\(fn, params=\{'_SCALE': value\}\)"):
            changed = jboost.fit(X8, YR, _scaled, **_KW)
        assert calls.boost_rounds._cache_size() > compiled  # traced and compiled anew
        after_change = calls.boost_rounds._cache_size()
        # With l2 = 0 the Newton leaves, so the trees, do not depend on the scale: the loss does.
        np.testing.assert_allclose(np.asarray(changed.train_loss),
                                   100.0 * np.asarray(first.train_loss), rtol=1e-5)
        np.testing.assert_array_equal(np.asarray(changed.trees.features), np.asarray(first.trees.features))
    finally:
        _SCALE = 1.0
    with pytest.warns(UserWarning, match=r"_SCALE \(100.0 -> 1.0\)"):   # back: the first program
        back = jboost.fit(X8, YR, _scaled, **_KW)
    assert calls.boost_rounds._cache_size() == after_change  # the first program again
    np.testing.assert_array_equal(np.asarray(back.train_loss), np.asarray(first.train_loss))


def test_pinned_values_cover_closures_arrays_and_called_functions():
    scale = 1.0

    def closed(y, f):
        return scale * (y - f) ** 2

    loss = jboost.Loss(closed)
    pinned = purity.pin_globals(loss)
    assert isinstance(pinned.fn, purity.PinnedFn) and pinned.fn.fn is closed
    assert [name for name, _ in pinned.fn.values] == ["scale"]
    assert purity.pin_globals(loss) == pinned and hash(purity.pin_globals(loss).fn) == hash(pinned.fn)
    assert purity.pin_globals(pinned).fn == pinned.fn         # a pinned loss is pinned afresh
    scale = 2.0
    with pytest.warns(UserWarning, match=r"the closure variable scale \(1.0 -> 2.0\)"):
        assert purity.pin_globals(loss).fn != pinned.fn
    # A global array read through a called user function; the arithmetic is the function's.
    shifted = purity.pin_globals(jboost.Loss(_shifted))
    assert [name for name, _ in shifted.fn.values] == ["_OFFSETS", "_squared._SCALE"]
    _OFFSETS[1] = 3.0                                    # changed in place
    try:
        with pytest.warns(UserWarning, match=r"the global _OFFSETS \(\[0.0, 0.0\] -> \[0.0, 3.0\]\)"):
            assert purity.pin_globals(jboost.Loss(_shifted)).fn != shifted.fn
    finally:
        _OFFSETS[1] = 0.0
    assert float(shifted.fn(jnp.float32(2.0), jnp.float32(1.0))) == 1.0
    # Built-in losses and functions that read nothing from outside are left as they are.
    for same in (jboost.losses.huber(1.0), jboost.Loss(lambda y, f: (y - f) ** 2)):
        assert purity.pin_globals(same) is same


def test_traced_values_outside_their_domains_give_nan_rows_and_a_warning():
    # Under the caller's vmap nothing can be refused on the host: nan_outside_domains turns a bad
    # setting's row into NaN (never ranked) and says which value it was when the program runs.
    from jboost import losses

    def one(alpha, learning_rate):
        loss = losses.quantile(alpha)
        model = jboost.fit(X8, YR, loss, **_KW, learning_rate=learning_rate)
        return settings.nan_outside_domains(model.train_loss, loss,
                                     boosting_lib.Hyperparams.create(learning_rate=learning_rate))

    with pytest.warns(UserWarning) as record:
        curves = np.asarray(jax.block_until_ready(jax.vmap(one)(
            jnp.asarray([0.5, 1.5, 0.5]), jnp.asarray([0.1, 0.1, -1.0]))))
    assert np.isfinite(curves[0]).all() and np.isnan(curves[1:]).all()
    text = [str(w.message) for w in record]
    assert any(re.search(r"loss 'quantile' parameter alpha=1.5 is not in \(0, 1\): this fit's "
                         "results are NaN", t) for t in text), text
    assert any(re.search(r"learning_rate=-1 is not in \(0, inf\]", t) for t in text), text
    assert not any("alpha=0.5 " in t for t in text)
    # Concrete values are the host checks' (errors before fitting): returned as they are.
    assert settings.nan_outside_domains(curves, losses.quantile(0.5)) is curves
