"""Subnormal float32 features (issue 40): every path takes a subnormal value (``0 < |x| <
FLT_MIN``) as the smallest normal number of its sign, so a split at 0 separates negative from
positive subnormals and features of scale 1e-38 (and all-subnormal ones) are learned; the CPU
kernels, the pure-JAX paths (XLA's CPU compares subnormals as 0: the rule reads the bits) and the
NumPy reader agree; data without subnormals is binned and predicted exactly as before."""

from __future__ import annotations

import numpy as np
import pytest
from _pure_jax import pure_jax

import jboost
from jboost import io as jio
from jboost.data import binning

FLT_MIN = float(np.finfo(np.float32).tiny)


def _data(scale, n=240, n_features=3, seed=0):
    rng = np.random.default_rng(seed)
    X = (rng.standard_normal((n, n_features)) * scale).astype(np.float32)
    return X, (X[:, 0] > 0).astype(np.float32)


def _probe(n_features=3):
    """Rows of subnormals of both signs, zeros of both signs, +-FLT_MIN, NaN and ordinary values."""
    col = np.array([1e-45, -1e-45, 1e-41, -1e-41, 1e-39, -1e-39, FLT_MIN, -FLT_MIN, 0.0, -0.0,
                    np.nan, 2e-38, -2e-38, 1.0, -1.0, np.inf, -np.inf], np.float32)
    return np.stack([np.roll(col, j) for j in range(n_features)], axis=1)


def _old_flush(X):
    """The rule before issue 40: a subnormal (and -0.0) as +0."""
    X = np.asarray(X, np.float32)
    return np.where(np.abs(X) < np.float32(FLT_MIN), np.float32(0), X)


@pytest.mark.parametrize("family", ["oblivious", "depthwise"])
@pytest.mark.parametrize("scale", [1e-38, 1e-41])
def test_a_sign_split_of_tiny_and_subnormal_features_is_learned(family, scale):
    # 1e-38: most values subnormal; 1e-41: all of them. One depth-1 tree separates the classes.
    X, y = _data(scale)
    assert (np.abs(X) < FLT_MIN).mean() > (0.5 if scale == 1e-38 else 0.99)
    model = jboost.fit(X, y, "squared_error", n_rounds=2, depth=1, tree_family=family)
    p = np.asarray(jboost.predict(model, X))
    assert p[y == 1].min() > p[y == 0].max()
    borders = np.asarray(model.borders)
    finite = borders[np.isfinite(borders)]
    assert finite.size and not np.any((finite != 0) & (np.abs(finite) < FLT_MIN))  # none subnormal


def test_borders_separate_minus_flt_min_subnormals_and_zero():
    # -FLT_MIN, negative subnormals (as -FLT_MIN), zeros, positive subnormals (as FLT_MIN): three
    # values, three bins; the subnormal midpoint between -FLT_MIN and 0 falls back to -FLT_MIN.
    X = np.array([-FLT_MIN, -1e-40, 0.0, -0.0, 1e-42, 1e-45], np.float32)[:, None]
    borders = jboost.compute_borders(X, n_bins=5)
    np.testing.assert_array_equal(borders[0], np.array([-FLT_MIN, 0.0, np.inf, np.inf], np.float32))
    for bins in (jboost.bin_features(X, borders), pure_jax(jboost.bin_features, X, borders)):
        np.testing.assert_array_equal(np.asarray(bins)[0], [0, 0, 1, 1, 2, 2])


def test_clamp_subnormals_rule():
    x = np.array([1e-45, -1e-45, -1e-40, FLT_MIN, -FLT_MIN, 0.0, -0.0, np.nan, 3.0, -np.inf],
                 np.float32)
    want = np.array([FLT_MIN, -FLT_MIN, -FLT_MIN, FLT_MIN, -FLT_MIN, 0.0, 0.0, np.nan, 3.0, -np.inf],
                    np.float32)
    got = binning.clamp_subnormals(x)
    np.testing.assert_array_equal(got, want)
    assert not np.signbit(got[6])  # -0.0 as +0
    assert np.asarray(pure_jax(binning.clamp_subnormals_jax, x)).tobytes() == got.tobytes()
    assert jio.reader._clamp_subnormals(x).tobytes() == got.tobytes()  # the NumPy-only copy


def test_bins_of_the_native_and_pure_jax_paths_agree_with_subnormal_values_and_borders():
    X = np.concatenate([_probe(), _data(1e-38, n=64)[0]])
    # User borders with subnormals: compared as the smallest normal of their sign.
    row = np.array([-1.0, -FLT_MIN, -1e-40, 0.0, 1e-44, FLT_MIN, 1.5e-38, 1.0], np.float32)
    borders = np.tile(np.concatenate([row, np.full(7, np.inf, np.float32)]), (3, 1))
    native = np.asarray(jboost.bin_features(X, borders))
    xla = np.asarray(pure_jax(jboost.bin_features, X, borders))
    cb, cx = binning.clamp_subnormals(borders), binning.clamp_subnormals(X)
    want = np.stack([np.where(np.isnan(cx[:, f]), 15, np.searchsorted(cb[f, :-1], cx[:, f], "left"))
                     for f in range(3)])
    np.testing.assert_array_equal(native, want)
    np.testing.assert_array_equal(xla, want)


@pytest.mark.parametrize("family", ["oblivious", "depthwise"])
def test_predictions_agree_across_paths_on_subnormal_data(family, tmp_path):
    X, y = _data(1e-38, seed=1)
    model = jboost.fit(X, y, "squared_error", n_rounds=4, depth=3, tree_family=family)
    probe = np.concatenate([_probe(), X[:40]])
    native = np.asarray(jboost.predict(model, probe))
    xla = np.asarray(pure_jax(jboost.predict, model, probe))
    assert native.tobytes() == xla.tobytes()
    # Feature 0 (the label's sign): +1e-41 and -1e-41 go to different sides of the split at 0.
    assert native[probe[:, 0] == np.float32(1e-41)][0] > native[probe[:, 0] == np.float32(-1e-41)][0]
    if family == "oblivious":
        jboost.save(model, tmp_path / "m.jbm")
        numpy_ = jio.predict_numpy(tmp_path / "m.jbm", probe)
        assert numpy_.tobytes() == native.tobytes()


def test_data_without_subnormals_is_binned_and_predicted_as_before(tmp_path, monkeypatch):
    # Ordinary data (ties, zeros of both signs, NaN, infinities, normals near FLT_MIN): the borders,
    # the bins and the predictions are bitwise those of the old rule (subnormals as 0).
    rng = np.random.default_rng(5)
    X = rng.standard_normal((300, 4)).astype(np.float32)
    X[:, 1] = rng.integers(-2, 3, 300)
    X[rng.random(X.shape) < 0.05] = np.nan
    X[rng.random(X.shape) < 0.05] = -0.0
    X[:6, 2] = [FLT_MIN, -FLT_MIN, 1.5 * FLT_MIN, 3e-38, -2e-38, np.inf]
    X[:, 3] = np.copysign((np.abs(X[:, 3].astype(np.float64)) + 0.2) * 1e-37, X[:, 3])  # >= 2e-38
    assert not np.any((X != 0) & (np.abs(X) < FLT_MIN))
    y = X[:, 0] + (X[:, 1] > 0)
    y = np.where(np.isnan(y), 0.0, y).astype(np.float32)
    borders = jboost.compute_borders(X, n_bins=32)
    with monkeypatch.context() as mp:
        mp.setattr(binning, "clamp_subnormals", _old_flush)
        old_borders = jboost.compute_borders(X, n_bins=32)
    assert borders.tobytes() == old_borders.tobytes()
    bins = np.asarray(jboost.bin_features(X, borders))
    fx = _old_flush(X)
    old_bins = np.stack([np.where(np.isnan(fx[:, f]), 31, np.searchsorted(borders[f, :-1], fx[:, f]))
                         for f in range(4)])
    np.testing.assert_array_equal(bins, old_bins)
    np.testing.assert_array_equal(np.asarray(pure_jax(jboost.bin_features, X, borders)), old_bins)
    model = jboost.fit(X, y, "squared_error", n_rounds=3, depth=3, n_bins=32)
    native = np.asarray(jboost.predict(model, X))
    jboost.save(model, tmp_path / "m.jbm")
    with monkeypatch.context() as mp:
        mp.setattr(jio.reader, "_clamp_subnormals", _old_flush)
        old = jio.predict_numpy(tmp_path / "m.jbm", X)
    assert native.tobytes() == old.tobytes()
