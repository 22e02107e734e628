"""The CPU histogram kernel (jboost/_native/histogram.cc) against the pure-JAX path and NumPy.

The kernel is what CPU fits run; the pure-JAX path is what GPUs and TPUs run (and CPUs without a
compiler at install time). Both must give the same sums; the kernel's histogram subtraction and
zero-weight skipping must not change any split; its result must not depend on its thread count.
"""

from __future__ import annotations

import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jboost
from jboost import _native
from jboost import histograms
from jboost import splits
from jboost import tree

pytestmark = pytest.mark.skipif(os.environ.get("JBOOST_NATIVE", "1") == "0",
                                reason="JBOOST_NATIVE=0: the kernel is switched off on purpose")


def test_kernel_is_built_and_loaded():
    assert _native.library_path() is not None, (
        "jboost/_native/_histogram*.so is missing: `pip install -e .` builds it and needs a C++17 "
        "compiler (g++ or clang++); see setup.py")
    assert _native.available()


def _data(seed, n, n_features, n_bins, n_leaves, channels, zero_rows=0.0):
    rng = np.random.default_rng(seed)
    X = rng.integers(0, n_bins, size=(n_features, n)).astype(np.uint8)
    X[0, : n // 50] = 3  # a run of equal bins: back-to-back updates of one cell
    payload = rng.normal(size=(n, channels)).astype(np.float32)
    if zero_rows:
        payload[rng.uniform(size=n) < zero_rows] = 0.0
    leaf = rng.integers(0, n_leaves, size=n).astype(np.int32)
    return jnp.asarray(X), jnp.asarray(payload), jnp.asarray(leaf)


def _kernel(X, payload, leaf, n_leaves, n_bins, threads, cumulative=False, slot=None):
    _native.load()
    out = jax.ShapeDtypeStruct((X.shape[0], n_leaves if slot is None else int(max(slot)) + 1, n_bins,
                                payload.shape[1]), jnp.float32)
    slot = jnp.arange(n_leaves, dtype=jnp.int32) if slot is None else jnp.asarray(slot, jnp.int32)
    call = jax.ffi.ffi_call(_native.HISTOGRAM, out, vmap_method="sequential")
    return call(X, payload, leaf, slot, n_threads=np.int64(threads), cumulative=cumulative)


@pytest.mark.parametrize("channels", [1, 2, 3, 4, 6])
@pytest.mark.parametrize("n_leaves", [1, 4, 32])
def test_kernel_equals_pure_jax(channels, n_leaves):
    # 60k rows x 9 features: large enough for the kernel's threaded path (it takes a thread per
    # 2**18 row-features) and its 4-feature blocks plus a remainder feature.
    X, payload, leaf = _data(channels + n_leaves, 60_000, 9, 256, n_leaves, channels)
    got = jax.jit(_kernel, static_argnums=(3, 4, 5))(X, payload, leaf, n_leaves, 256, 2)
    want = histograms._xla_histogram(X, payload, leaf, n_leaves, 256)
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-5, atol=1e-4)


def test_kernel_bitwise_independent_of_threads():
    # 200k rows x 11 features: the kernel really uses up to 8 threads (one per 2**18 row-features),
    # both for compacting rows and for the features; the one-leaf (dense) path too.
    X, payload, leaf = _data(1, 200_000, 11, 64, 8, 2, zero_rows=0.3)
    zeros = jnp.zeros_like(leaf)
    for lf, n_leaves in ((leaf, 8), (zeros, 1)):
        outs = [np.asarray(_kernel(X, payload, lf, n_leaves, 64, t, cumulative=True)) for t in (1, 2, 3, 7)]
        for o in outs[1:]:
            np.testing.assert_array_equal(o, outs[0])


def test_kernel_small_bins_clamped_and_slots():
    # Bins above n_bins - 1 land in the last bin (never out of bounds); leaves mapped to slot -1
    # are skipped; two leaves may share a slot.
    X, payload, leaf = _data(2, 3000, 5, 256, 4, 2)
    got = np.asarray(_kernel(X, payload, leaf, 4, 8, 2, slot=[1, -1, 0, 1]))
    Xn, pn, ln = np.asarray(X), np.asarray(payload), np.asarray(leaf)
    want = np.zeros((5, 2, 8, 2))
    slot = np.array([1, -1, 0, 1])
    for f in range(5):
        for i in range(3000):
            if slot[ln[i]] >= 0:
                want[f, slot[ln[i]], min(Xn[f, i], 7)] += pn[i]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-4)


def test_kernel_cumulative_is_prefix_sum():
    X, payload, leaf = _data(3, 5000, 4, 32, 2, 2)
    plain = np.asarray(_kernel(X, payload, leaf, 2, 32, 2))
    cum = np.asarray(_kernel(X, payload, leaf, 2, 32, 2, cumulative=True))
    np.testing.assert_allclose(cum, np.cumsum(plain, axis=2), rtol=1e-5, atol=1e-4)


def test_smaller_sibling_and_subtraction():
    # Leaves j and j + S are siblings. The kernel builds the one with fewer non-zero-weight rows;
    # level_histograms derives the other from the parent: all equal direct prefix sums.
    n, S = 150_000, 4  # several threads for counting, compacting and the features
    X, payload, leaf = _data(4, n, 6, 128, 2 * S, 2, zero_rows=0.2)
    ln = np.asarray(leaf).copy()
    ln[ln == 1] = 1 + S          # sibling pair 1: every row on the right
    ln[(ln == 2) & (np.arange(n) % 3 > 0)] = 2 + S  # pair 2: mostly right
    leaf = jnp.asarray(ln)
    parent_leaf = jnp.asarray(ln % S)
    parent = histograms._native_histogram(X, payload, parent_leaf, S, 128, None, cumulative=True)
    small, right_smaller = histograms._native_smaller_sibling(X, payload, leaf, S, 128, None)
    nonzero = np.any(np.asarray(payload) != 0, axis=1)
    counts = np.bincount(ln[nonzero], minlength=2 * S)
    np.testing.assert_array_equal(np.asarray(right_smaller), (counts[S:] < counts[:S]).astype(np.int32))
    hist, local = histograms.level_histograms(X, payload, leaf, parent, n_bins=128)
    direct = splits.prefix_sum(histograms._xla_histogram(X, payload, leaf, 2 * S, 128), axis=2)
    np.testing.assert_allclose(np.asarray(hist), np.asarray(direct), rtol=1e-5, atol=2e-3)
    assert np.all(np.asarray(hist)[:, 1] == 0)  # the empty child is exactly zero
    np.testing.assert_array_equal(np.asarray(local), np.asarray(hist))


def test_vmap_over_payloads_equals_loop():
    X, payload, leaf = _data(5, 4000, 5, 64, 4, 2)
    payloads = jnp.stack([payload, 2 * payload, -payload])
    f = jax.jit(jax.vmap(lambda p: histograms.build_histogram(X, p, leaf, n_leaves=4, n_bins=64)))
    got = f(payloads)
    for b in range(3):
        np.testing.assert_array_equal(
            np.asarray(got[b]),
            np.asarray(histograms.build_histogram(X, payloads[b], leaf, n_leaves=4, n_bins=64)))


def test_fit_tree_same_splits_with_and_without_kernel():
    rng = np.random.default_rng(6)
    n, F = 20_000, 8
    X = rng.integers(0, 255, size=(F, n)).astype(np.uint8)
    X[2, rng.uniform(size=n) < 0.1] = 255  # missing values
    signal = (X[0] > 100) * 1.5 - (X[3] > 30) + 0.7 * (X[5] > 200) + 0.3 * (X[2] == 255)
    g = (rng.normal(size=n) - signal).astype(np.float32)[:, None]
    h = rng.uniform(0.5, 1.5, size=(n, 1)).astype(np.float32)
    h[rng.uniform(size=n) < 0.3] = 0.0  # subsampled-out rows (zero weight)
    g[h == 0] = 0.0
    kw = dict(depth=6, n_bins=256, l2=1.0, min_split_gain=0.0, min_child_weight=1.0)
    native, native_leaf = tree.fit_tree(jnp.asarray(X), jnp.asarray(g), jnp.asarray(h), **kw)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(_native, "available", lambda: False)
        jax.clear_caches()
        pure, pure_leaf = tree.fit_tree(jnp.asarray(X), jnp.asarray(g), jnp.asarray(h), **kw)
    jax.clear_caches()
    np.testing.assert_array_equal(native.features, pure.features)
    np.testing.assert_array_equal(native.thresholds, pure.thresholds)
    np.testing.assert_array_equal(native.missing_right, pure.missing_right)
    np.testing.assert_array_equal(native_leaf, pure_leaf)
    np.testing.assert_allclose(native.gains, pure.gains, rtol=1e-4)
    np.testing.assert_allclose(native.leaf_values, pure.leaf_values, rtol=1e-4, atol=1e-5)


def test_fit_same_model_with_and_without_kernel():
    X, y = jboost.datasets.make_classification(6000, 10, 5, seed=3)
    kw = dict(loss="binomial_deviance", n_rounds=15, depth=4, learning_rate=0.3, subsample=0.7,
              key=jax.random.key(0))
    native = jboost.fit(X, y, **kw)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(_native, "available", lambda: False)
        jax.clear_caches()
        pure = jboost.fit(X, y, **kw)
    jax.clear_caches()
    np.testing.assert_array_equal(native.trees.features, pure.trees.features)
    np.testing.assert_array_equal(native.trees.thresholds, pure.trees.thresholds)
    np.testing.assert_allclose(jboost.predict(native, X), jboost.predict(pure, X), rtol=1e-4, atol=1e-4)


def test_nested_vmap_and_batched_bins_equal_separate_calls():
    # expand_dims batching: operands batched over one, both or neither of two vmapped axes (the
    # bins shared by every model, or one subset of features per model as in random forests).
    X, payload, leaf = _data(8, 40_000, 6, 64, 4, 2, zero_rows=0.2)
    payloads = jnp.stack([jnp.stack([payload * (1 + i + 3 * j) for j in range(3)]) for i in range(2)])
    leaves = jnp.stack([leaf, (leaf + 1) % 4])  # batched over the outer axis only
    Xs = jnp.stack([X, X[::-1]])                  # batched over the outer axis only

    def one(Xb, p, l):
        return histograms.build_histogram(Xb, p, l, n_leaves=4, n_bins=64)

    got = jax.jit(jax.vmap(jax.vmap(one, in_axes=(None, 0, None)), in_axes=(0, 0, 0)))(Xs, payloads, leaves)
    for i in range(2):
        for j in range(3):
            np.testing.assert_array_equal(np.asarray(got[i, j]), np.asarray(one(Xs[i], payloads[i, j], leaves[i])))

    sib = jax.jit(jax.vmap(lambda p: histograms._native_smaller_sibling(X, p, leaf, 2, 64, None)))
    small, which = sib(payloads[0])
    for j in range(3):
        s1, w1 = histograms._native_smaller_sibling(X, payloads[0, j], leaf, 2, 64, None)
        np.testing.assert_array_equal(np.asarray(small[j]), np.asarray(s1))
        np.testing.assert_array_equal(np.asarray(which[j]), np.asarray(w1))


def test_binning_kernel_equals_pure_jax():
    # Values on the borders (ties), between, outside, +-inf, NaN, subnormals and -0.0.
    from jboost import binning
    rng = np.random.default_rng(12)
    X = rng.normal(size=(5000, 6)).astype(np.float32)
    X[:, 1] = rng.integers(0, 4, 5000)                   # few distinct values: exact borders
    X[:, 4] = rng.choice([-1.0, 1.0], 5000)              # exact borders: one of them is 0.0
    borders = binning.compute_borders(X, 64)
    assert 0.0 in borders[4]
    X[:50, 0] = borders[0, :50]                           # exactly on a border
    X[50:60, 2] = np.inf
    X[60:70, 2] = -np.inf
    X[70:90, 3] = np.nan
    X[90:95, 4] = np.float32(1e-42)                       # subnormal: binned as 0
    X[95:100, 4] = -0.0
    got = binning.bin_features(X, borders)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(_native, "available", lambda: False)
        jax.clear_caches()
        want = binning.bin_features(X, borders)
    jax.clear_caches()
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
    assert np.all(np.asarray(got)[3, 70:90] == 63)
    assert np.all(np.asarray(got)[4, 90:100] == 0)        # subnormals and -0.0 bin as 0.0: not above 0
