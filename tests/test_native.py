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
from jboost.trees import histograms
from _pure_jax import pure_jax
from jboost.trees import family
from jboost.trees import oblivious
from jboost.trees import splits as splits_lib

pytestmark = pytest.mark.skipif(os.environ.get("JBOOST_NATIVE", "1") == "0",
                                reason="JBOOST_NATIVE=0: the kernel is switched off on purpose")


def test_kernel_is_built_and_loaded():
    assert _native.library_path() is not None, (
        "jboost/_native/_kernels*.so is missing: `pip install -e .` builds it and needs a C++17 "
        "compiler (g++ or clang++); see setup.py")
    assert _native.available()


def test_pure_jax_traces_a_cached_program_anew_without_the_kernels():
    """The helper of every pure-JAX comparison (tests/_pure_jax.py) must not reuse a program
    compiled with the kernels: a jit cache hit would compare the kernels with themselves."""
    traces = []

    @jax.jit
    def f(x):
        traces.append(_native.available())
        return x + 1

    x = jnp.ones(3, jnp.float32)
    f(x)
    pure_jax(f, x)
    f(x)
    assert traces == [True, False]


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


@pytest.mark.slow
@pytest.mark.parametrize("channels", [1, 2, 3, 4, 6])
@pytest.mark.parametrize("n_leaves", [1, 4, 32])
def test_kernel_equals_pure_jax(channels, n_leaves):
    # 60k rows x 9 features: large enough for the kernel's threaded path (it takes a thread per
    # 2**18 row-features) and its 4-feature blocks plus a remainder feature.
    X, payload, leaf = _data(channels + n_leaves, 60_000, 9, 256, n_leaves, channels)
    got = jax.jit(_kernel, static_argnums=(3, 4, 5))(X, payload, leaf, n_leaves, 256, 2)
    want = histograms.pure_jax_histogram(X, payload, leaf, n_leaves, 256)
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


@pytest.mark.parametrize("channels", [1, 2, 3])
def test_kernel_one_leaf_with_rows_outside_it(channels):
    # One leaf: the kernel reads the rows without compacting them only when every row is in leaf
    # 0 (checked in parallel over row chunks); rows of another leaf (here one at the end of the
    # second chunk), or with a zero payload, must add nothing.
    n = 300_000  # two threads check and compact it
    X, payload, leaf = _data(6, n, 5, 64, 1, channels, zero_rows=0.1)
    ln = np.asarray(leaf).copy()
    ln[n - 1] = 1
    ln[7] = -1
    got = np.asarray(_kernel(X, payload, jnp.asarray(ln), 1, 64, 2))
    Xn, pn = np.asarray(X), np.asarray(payload).astype(np.float64)
    want = np.zeros((5, 1, 64, channels))
    keep = ln == 0
    for f in range(5):
        for j in range(channels):
            want[f, 0, :, j] = np.bincount(Xn[f, keep], weights=pn[keep, j], minlength=64)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-3)
    whole = np.asarray(_kernel(X, payload, jnp.zeros_like(leaf), 1, 64, 2))
    assert not np.allclose(whole, got)  # the two outside rows do change the sums


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
    direct = histograms.prefix_sum(histograms.pure_jax_histogram(X, payload, leaf, 2 * S, 128), axis=2)
    np.testing.assert_allclose(np.asarray(hist), np.asarray(direct), rtol=1e-5, atol=2e-3)
    assert np.all(np.asarray(hist)[:, 1] == 0)  # the empty child is exactly zero
    np.testing.assert_array_equal(np.asarray(local), np.asarray(hist))


@pytest.mark.parametrize("channels", [1, 2, 3])
@pytest.mark.parametrize("n_leaves", [1, 4, 32])
def test_accelerator_histogram_equals_kernel(monkeypatch, channels, n_leaves):
    # The accelerators' branch (one scatter over all features, rows spread over copies of a
    # shallow level's cells) traced on the CPU: the kernel's sums, int32 counts exactly.
    monkeypatch.setattr(histograms, "_ACCELERATOR_PATHS", True)
    X, payload, leaf = _data(7 + channels + n_leaves, 20_000, 5, 256, n_leaves, channels)
    got = jax.jit(histograms.pure_jax_histogram, static_argnums=(3, 4))(X, payload, leaf, n_leaves, 256)
    want = jax.jit(_kernel, static_argnums=(3, 4, 5))(X, payload, leaf, n_leaves, 256, 2)
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-5, atol=1e-4)
    copies = histograms._spread_copies(n_leaves * 256)
    assert copies == {1: 16, 4: 4, 32: 1}[n_leaves]  # spread where cells are few
    cells = jnp.asarray(np.random.default_rng(n_leaves).integers(0, 3 * n_leaves, 20_000), jnp.int32)
    counts = jax.jit(histograms.spread_sum, static_argnums=(2, 3))(
        jnp.ones(20_000, jnp.int32), cells, 3 * n_leaves, n_leaves)
    np.testing.assert_array_equal(np.asarray(counts), np.bincount(np.asarray(cells), minlength=3 * n_leaves))


def test_accelerator_branch_under_x64(monkeypatch):
    # With jax_enable_x64 the spread copies' int32 row counts stay int32 (a sum over the copies
    # had promoted them to int64: lax.platform_dependent's branches then disagreed in type and a
    # GPU fit of 1024+ rows failed to trace). A fit through the accelerator branch equals the
    # CPU's up to rounding.
    rng = np.random.default_rng(5)
    X = rng.normal(size=(1100, 3)).astype(np.float32)
    y = (X[:, 0] + 0.1 * rng.normal(size=1100)).astype(np.float32)
    with jax.enable_x64(True), jax.numpy_dtype_promotion("standard"):  # a user's defaults
        counts = histograms.spread_sum(jnp.ones(1100, jnp.int32), jnp.zeros(1100, jnp.int32), 4)
        assert counts.dtype == jnp.int32
        monkeypatch.setattr(_native, "cpu_only", lambda: False)  # trace every branch, as on a GPU
        m = jboost.fit(X, y, "squared_error", n_rounds=3, depth=2, n_bins=16)
        monkeypatch.setattr(histograms, "_ACCELERATOR_PATHS", True)
        with jax.default_matmul_precision("bfloat16"):
            a = jboost.fit(X, y, "squared_error", n_rounds=3, depth=2, n_bins=16)
    np.testing.assert_array_equal(np.asarray(a.trees.features), np.asarray(m.trees.features))
    np.testing.assert_allclose(np.asarray(a.trees.leaf_values), np.asarray(m.trees.leaf_values), rtol=1e-5, atol=1e-6)


@pytest.mark.slow
@pytest.mark.parametrize("half", [1, 8])
def test_accelerator_level_by_subtraction_equals_direct(monkeypatch, half):
    # Accelerators scatter only the smaller sibling of each pair (rows of zero payload do not
    # count) and subtract it from the parent: the directly built level, up to float rounding.
    X, payload, leaf = _data(3 + half, 20_000, 5, 64, 2 * half, 2)
    rng = np.random.default_rng(half)
    leaf = jnp.asarray(np.where(rng.random(20_000) < 0.7, np.asarray(leaf) % half, np.asarray(leaf)), jnp.int32)
    payload = payload * jnp.asarray(rng.random(20_000) < 0.8, jnp.float32)[:, None]  # subsampled rows
    direct = lambda l, n: histograms.prefix_sum(histograms._per_feature_histogram(X, payload, l, n, 64), axis=2)
    parent = direct(leaf % half, half)
    monkeypatch.setattr(histograms, "_ACCELERATOR_PATHS", True)
    got = jax.jit(histograms.xla_level_histograms, static_argnums=(4, 5))(X, payload, leaf, parent, 2 * half, 64)
    want = direct(leaf, 2 * half)
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-5, atol=2e-4)
    assert not np.array_equal(np.asarray(got), np.asarray(want))  # not built directly


@pytest.mark.slow
def test_cpu_only_process_traces_the_cpu_branch_alone(monkeypatch):
    # CI's process has only the CPU backend: platform_dependent traces the CPU branch alone. A
    # process with an accelerator keeps lax.platform_dependent (every branch traced, the CPU's
    # lowered here): the same model, bitwise. Another trace context (the matmul precision, which
    # no CPU result depends on) makes the second fit trace anew.
    assert _native.cpu_only()
    rng = np.random.default_rng(3)
    X = rng.normal(size=(300, 4)).astype(np.float32)
    y = (X[:, 0] + 0.1 * rng.normal(size=300)).astype(np.float32)
    fit = lambda: jboost.fit(X, y, "squared_error", n_rounds=5, depth=3, n_bins=32)
    alone = fit()
    monkeypatch.setattr(_native, "cpu_only", lambda: False)
    with jax.default_matmul_precision("bfloat16"):
        both = fit()
    np.testing.assert_array_equal(np.asarray(both.trees.leaf_values), np.asarray(alone.trees.leaf_values))
    np.testing.assert_array_equal(np.asarray(both.trees.features), np.asarray(alone.trees.features))
    np.testing.assert_array_equal(np.asarray(jboost.predict(both, X)), np.asarray(jboost.predict(alone, X)))


def test_vmap_over_payloads_equals_loop():
    X, payload, leaf = _data(5, 4000, 5, 64, 4, 2)
    payloads = jnp.stack([payload, 2 * payload, -payload])
    f = jax.jit(jax.vmap(lambda p: histograms.build_histogram(X, p, leaf, n_leaves=4, n_bins=64)))
    got = f(payloads)
    for b in range(3):
        np.testing.assert_array_equal(
            np.asarray(got[b]),
            np.asarray(histograms.build_histogram(X, payloads[b], leaf, n_leaves=4, n_bins=64)))


@pytest.mark.slow
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
    native, native_leaf = oblivious.fit_tree(jnp.asarray(X), jnp.asarray(g), jnp.asarray(h), **kw)
    pure, pure_leaf = pure_jax(oblivious.fit_tree, jnp.asarray(X), jnp.asarray(g), jnp.asarray(h), **kw)
    np.testing.assert_array_equal(native.features, pure.features)
    np.testing.assert_array_equal(native.thresholds, pure.thresholds)
    np.testing.assert_array_equal(native.missing_right, pure.missing_right)
    np.testing.assert_array_equal(native_leaf, pure_leaf)
    np.testing.assert_allclose(native.gains, pure.gains, rtol=1e-4)
    np.testing.assert_allclose(native.leaf_values, pure.leaf_values, rtol=1e-4, atol=1e-5)


@pytest.mark.slow
def test_fit_same_model_with_and_without_kernel():
    X, y = jboost.datasets.make_classification(6000, 10, 5, seed=3)
    kw = dict(loss="binomial_deviance", n_rounds=15, depth=4, learning_rate=0.3, subsample=0.7,
              key=jax.random.key(0))
    native = jboost.fit(X, y, **kw)
    pure = pure_jax(jboost.fit, X, y, **kw)
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
    from jboost.data import binning
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
    X[90:95, 4] = np.float32(1e-42)                       # subnormal: binned as FLT_MIN
    X[95:100, 4] = -0.0
    got = binning.bin_features(X, borders)
    want = pure_jax(binning.bin_features, X, borders)
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
    assert np.all(np.asarray(got)[3, 70:90] == 63)
    b0 = int(np.searchsorted(borders[4], 0.0))            # the border at 0.0
    assert np.all(np.asarray(got)[4, 90:95] == b0 + 1)    # positive subnormals: above 0
    assert np.all(np.asarray(got)[4, 95:100] == b0)       # -0.0 bins as 0.0: not above 0


def _level_data(seed, n, n_features, n_bins, n_leaves, k, missing):
    """Bins (with the missing bin when `missing`), gradients, positive hessians (30% zero-weight
    rows) and skewed leaves: some leaves hold few rows, so min_child_weight bites."""
    rng = np.random.default_rng(seed)
    X = rng.integers(0, n_bins - 1, size=(n_features, n)).astype(np.uint8)
    if missing:
        X[:, rng.uniform(size=n) < 0.1] = n_bins - 1
    g = rng.normal(size=(n, k)).astype(np.float32)
    h = rng.uniform(0.1, 1.0, size=(n, k)).astype(np.float32)
    zero = rng.uniform(size=n) < 0.3
    g[zero], h[zero] = 0.0, 0.0
    leaf = np.minimum(rng.geometric(0.35, size=n) - 1, max(n_leaves - 2, 0)).astype(np.int32)
    leaf[rng.choice(n, 30, replace=False)] = n_leaves - 1  # a leaf of about 30 rows
    return jnp.asarray(X), jnp.asarray(np.concatenate([g, h], axis=1)), jnp.asarray(leaf)


def _assert_gains_close(got, want):
    got, want = np.asarray(got), np.asarray(want)
    np.testing.assert_array_equal(np.isneginf(got), np.isneginf(want))
    finite = np.isfinite(want)
    scale = max(1.0, float(np.max(np.abs(want[finite]))))
    np.testing.assert_allclose(got[finite], want[finite], rtol=1e-4, atol=2e-4 * scale)


@pytest.mark.slow
@pytest.mark.parametrize("k", [1, 2])
@pytest.mark.parametrize("missing", [True, False])
@pytest.mark.parametrize("subtract", [False, True])
@pytest.mark.parametrize("l2,mcw", [(1.0, 1.0), (0.0, 0.0), (3.0, 40.0)])
def test_level_kernel_equals_pure_jax(k, missing, subtract, l2, mcw):
    # The fused level (histograms, optional subtraction, prefix sums, gains) against pure JAX:
    # 60k rows x 9 features (threaded, 4-feature groups plus a remainder), 8 leaves.
    n_bins, L = 64, 8
    X, payload, leaf = _level_data(k + 2 * missing + 4 * subtract, 60_000, 9, n_bins, L, k, missing)
    direct = histograms.prefix_sum(histograms.pure_jax_histogram(X, payload, leaf, L, n_bins), axis=2)
    parent = None
    if subtract:
        parent = histograms.prefix_sum(histograms.pure_jax_histogram(X, payload, leaf % (L // 2), L // 2, n_bins),
                                   axis=2)
    gains, hist = jax.jit(
        lambda X, p, lf, par: splits_lib._native_level(X, p, lf, par, l2, mcw, n_leaves=L, n_bins=n_bins,
                                                       missing=missing, keep_hist=True, n_threads=2)
    )(X, payload, leaf, parent)
    np.testing.assert_allclose(np.asarray(hist), np.asarray(direct), rtol=1e-5, atol=2e-3)
    _assert_gains_close(gains, splits_lib.split_gains_cumulative(direct, l2, mcw, missing))
    if mcw > 1:  # the kernel skips a leaf below min_child_weight: there is one
        h_leaf = np.asarray(direct)[0, :, -1, k:].sum(axis=-1)
        assert np.any(h_leaf < mcw) and np.any(h_leaf >= mcw)
    # The same call without writing the histograms gives bitwise the same gains.
    gains2, none = splits_lib._native_level(X, payload, leaf, parent, l2, mcw, n_leaves=L, n_bins=n_bins,
                                            missing=missing, keep_hist=False, n_threads=2)
    assert none is None
    np.testing.assert_array_equal(np.asarray(gains2), np.asarray(gains))


@pytest.mark.slow
def test_level_gains_dispatch_equals_pure_jax():
    # The public function on CPU (kernel) and with the kernel off (pure JAX), one leaf (dense path).
    X, payload, leaf = _level_data(20, 30_000, 6, 256, 1, 1, False)
    kw = dict(n_leaves=1, n_bins=256, l2=1.0, min_child_weight=1.0, missing=False, keep_hist=True)
    g1, h1 = splits_lib.level_gains(X, payload, leaf, None, **kw)
    g0, h0 = pure_jax(splits_lib.level_gains, X, payload, leaf, None, **kw)
    np.testing.assert_allclose(np.asarray(h1), np.asarray(h0), rtol=1e-5, atol=1e-3)
    _assert_gains_close(g1, g0)


def test_level_kernel_bitwise_independent_of_threads():
    # 200k rows x 11 features: up to 8 threads for counting, compacting and the features.
    X, payload, leaf = _level_data(21, 200_000, 11, 64, 8, 1, True)
    parent = histograms._native_histogram(X, payload, leaf % 4, 4, 64, None, cumulative=True)
    for par in (None, parent):
        outs = [splits_lib._native_level(X, payload, leaf, par, 1.0, 1.0, n_leaves=8, n_bins=64,
                                         missing=True, keep_hist=True, n_threads=t) for t in (1, 2, 3, 7)]
        for g, h in outs[1:]:
            np.testing.assert_array_equal(np.asarray(g), np.asarray(outs[0][0]))
            np.testing.assert_array_equal(np.asarray(h), np.asarray(outs[0][1]))


def test_level_kernel_vmap_equals_separate_calls():
    # Models batched over payloads and per-model l2 / min_child_weight (a sweep), the bins and
    # the parent shared or batched: bitwise the separate calls.
    X, payload, leaf = _level_data(22, 20_000, 5, 64, 4, 1, True)
    payloads = jnp.stack([payload, 2 * payload, payload * jnp.array([1.0, 3.0])])
    l2s, mcws = jnp.array([0.0, 1.0, 5.0]), jnp.array([0.0, 2.0, 30.0])
    parents = jax.vmap(lambda p: histograms._native_histogram(X, p, leaf % 2, 2, 64, None, cumulative=True))(payloads)

    def one(p, par, l2, mcw):
        return splits_lib._native_level(X, p, leaf, par, l2, mcw, n_leaves=4, n_bins=64, missing=True,
                                        keep_hist=True)

    got = jax.jit(jax.vmap(one))(payloads, parents, l2s, mcws)
    for b in range(3):
        want = one(payloads[b], parents[b], l2s[b], mcws[b])
        np.testing.assert_array_equal(np.asarray(got[0][b]), np.asarray(want[0]))
        np.testing.assert_array_equal(np.asarray(got[1][b]), np.asarray(want[1]))
    gains = jax.jit(jax.vmap(lambda h, l2, mcw: splits_lib.cumulative_split_gains(h, l2, mcw)))(got[1], l2s, mcws)
    for b in range(3):
        np.testing.assert_array_equal(np.asarray(gains[b]), np.asarray(got[0][b]))


@pytest.mark.slow
@pytest.mark.parametrize("n_models", [2, 3, 5, 8, 17])
@pytest.mark.parametrize("missing", [True, False])
def test_first_level_batch_bitwise_equals_separate_calls(n_models, missing):
    # The first level of models sharing their bins is built for groups of up to 8 models at once
    # (payloads interleaved per row; groups padded to 1, 2, 4 or 8): bitwise the separate calls,
    # with each model's own zero-weight rows, rows outside the leaf (skipped) and l2 / mcw.
    X, payload, _ = _level_data(30 + n_models, 3_000, 6, 32, 1, 1, missing)
    rng = np.random.default_rng(n_models)
    scale = rng.uniform(0.5, 2.0, size=(n_models, 1, 2)).astype(np.float32)
    keep = rng.uniform(size=(n_models, X.shape[1], 1)) < 0.7  # each model's own zero rows
    payloads = jnp.asarray(np.asarray(payload)[None] * scale * keep)
    leaves = jnp.asarray(np.where(rng.uniform(size=(n_models, X.shape[1])) < 0.1, 1, 0), jnp.int32)
    leaves = leaves.at[0].set(0)
    l2s = jnp.asarray(rng.uniform(0.0, 3.0, n_models), jnp.float32)
    mcws = jnp.asarray(rng.choice([0.0, 1.0, 200.0], n_models), jnp.float32)

    def one(p, lf, l2, mcw, keep_hist):
        return splits_lib._native_level(X, p, lf, None, l2, mcw, n_leaves=1, n_bins=32, missing=missing,
                                        keep_hist=keep_hist)

    hists = None
    for keep_hist in (True, False):
        gains, hist = jax.jit(jax.vmap(lambda *a: one(*a, keep_hist)))(payloads, leaves, l2s, mcws)
        for b in range(n_models):
            want = one(payloads[b], leaves[b], l2s[b], mcws[b], keep_hist)
            np.testing.assert_array_equal(np.asarray(gains[b]), np.asarray(want[0]))
            if keep_hist:
                np.testing.assert_array_equal(np.asarray(hist[b]), np.asarray(want[1]))
        hists = hist if keep_hist else hists
    # ... and they are the pure-JAX sums (rows of leaf 1 left out).
    for b in (0, n_models - 1):
        direct = histograms.prefix_sum(histograms.pure_jax_histogram(X, payloads[b], leaves[b], 2, 32), axis=2)
        np.testing.assert_allclose(np.asarray(hists[b]), np.asarray(direct[:, :1]), rtol=1e-5, atol=1e-3)


@pytest.mark.slow
@pytest.mark.parametrize("k", [1, 3])
def test_split_gains_kernel_equals_pure_jax(k):
    X, payload, leaf = _level_data(23 + k, 30_000, 7, 128, 16, k, True)
    cum = histograms.prefix_sum(histograms.pure_jax_histogram(X, payload, leaf, 16, 128), axis=2)
    for missing in (True, False):
        _assert_gains_close(splits_lib.cumulative_split_gains(cum, 0.5, 2.0, missing),
                            splits_lib.split_gains_cumulative(cum, 0.5, 2.0, missing))


@pytest.mark.slow
@pytest.mark.parametrize("missing", [True, False])
def test_level_kernel_empty_bin_tails(missing):
    # Leaf l's rows only reach bins below 7 * l (leaf 0: bin 0 only), some rows are missing, one
    # feature is all-missing: the kernel's shortcut for each leaf's empty tail of bins must give
    # the gains and histograms of the full computation.
    n_bins, L = 64, 8
    X, payload, leaf = _level_data(30 + missing, 20_000, 6, n_bins, L, 1, missing)
    Xn, ln = np.asarray(X).copy(), np.asarray(leaf)
    for f in range(6):
        present = Xn[f] < n_bins - 1
        Xn[f, present] = Xn[f, present] % np.maximum(1, 7 * ln[present])
    Xn[5] = n_bins - 1 if missing else 0
    X = jnp.asarray(Xn)
    direct = histograms.prefix_sum(histograms.pure_jax_histogram(X, payload, leaf, L, n_bins), axis=2)
    gains, hist = splits_lib._native_level(X, payload, leaf, None, 1.0, 0.5, n_leaves=L, n_bins=n_bins,
                                           missing=missing, keep_hist=True, n_threads=1)
    np.testing.assert_allclose(np.asarray(hist), np.asarray(direct), rtol=1e-5, atol=1e-3)
    _assert_gains_close(gains, splits_lib.split_gains_cumulative(direct, 1.0, 0.5, missing))
    g = np.asarray(gains)
    assert np.all(g[:, 7 * (L - 1):, 0] == g[:, -1:, 0])  # above every leaf's bins: one gain


def _predict_data(rng, n, n_features):
    X = rng.normal(size=(n, n_features)).round(1).astype(np.float32)  # many ties with the borders
    X[rng.uniform(size=X.shape) < 0.05] = np.nan
    X[rng.uniform(size=X.shape) < 0.01] = np.inf
    X[rng.uniform(size=X.shape) < 0.01] = -np.inf
    X[rng.uniform(size=X.shape) < 0.01] = 1e-40   # subnormal: compares as FLT_MIN
    X[rng.uniform(size=X.shape) < 0.01] = -0.0
    return X


@pytest.mark.slow
@pytest.mark.parametrize("depth,k,n", [(0, 1, 300), (1, 1, 1), (4, 3, 1000), (6, 1, 5000), (6, 2, 777)])
def test_predict_kernel_bitwise_equals_pure_jax(depth, k, n, random_trees, predict_reference):
    # Row counts below, at and off the kernel's 128-row blocks; a (2, 15)-stack of trees.
    rng = np.random.default_rng(depth * 10 + k)
    trees = random_trees(rng, 15, depth, 7, k, lead=(2,), decimals=1)  # ties with the data
    trees = trees._replace(borders=trees.borders.at[0, 0].set(1e-40 if depth else 0.0))
    X = _predict_data(rng, n, 7)
    got = np.asarray(family.predict_raw(trees, X))
    np.testing.assert_array_equal(got, np.asarray(pure_jax(family.predict_raw, trees, X)))
    # Feature-major input: the same kernel reading columns.
    np.testing.assert_array_equal(np.asarray(family.predict_raw_feature_major(trees, X.T)), got)
    # And the NumPy definition (float64 sums: equal up to rounding).
    ref = predict_reference(trees, X)
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5)


@pytest.mark.slow
def test_predict_kernel_bitwise_independent_of_threads_and_vmap(random_trees):
    rng = np.random.default_rng(21)
    trees = random_trees(rng, 40, 5, 9, 2, decimals=1)
    X = jnp.asarray(_predict_data(rng, 3000, 9))
    flat = family.flatten_trees(trees)

    def call(threads):
        out = jax.ShapeDtypeStruct((X.shape[0], 2), jnp.float32)
        fn = jax.ffi.ffi_call(_native.PREDICT, out, vmap_method="sequential")
        return np.asarray(fn(X, flat.features, flat.borders, flat.missing_right.astype(jnp.uint8),
                             flat.leaf_values, n_threads=np.int64(threads), feature_major=False))

    one = call(1)
    for threads in (2, 3, 7, 64):  # more threads than 128-row blocks too
        np.testing.assert_array_equal(call(threads), one)
    np.testing.assert_array_equal(np.asarray(family.predict_raw(trees, X)), one)
    # Batched models (as from jax.vmap(fit)): vmapped prediction == one call per model.
    stacked = jax.tree_util.tree_map(lambda *a: jnp.stack(a), trees, random_trees(rng, 40, 5, 9, 2, decimals=1))
    batched = np.asarray(jax.jit(jax.vmap(family.predict_raw, in_axes=(0, None)))(stacked, X))
    for m in range(2):
        one_model = jax.tree_util.tree_map(lambda a: a[m], stacked)
        np.testing.assert_array_equal(batched[m], np.asarray(family.predict_raw(one_model, X)))


def test_predict_kernel_rejects_bad_shapes(random_trees):
    rng = np.random.default_rng(22)
    flat = random_trees(rng, 3, 2, 4, 1, decimals=1)
    out = jax.ShapeDtypeStruct((10, 1), jnp.float32)
    fn = jax.ffi.ffi_call(_native.PREDICT, out, vmap_method="sequential")
    with pytest.raises(Exception, match="jboost predict"):
        # leaf_values for depth 3 while the trees have 2 levels
        fn(jnp.zeros((10, 4)), flat.features, flat.borders, flat.missing_right.astype(jnp.uint8),
           jnp.zeros((3, 8, 1)), n_threads=np.int64(1), feature_major=False)


def _sparse_level_data(seed, n, n_features, n_bins, n_leaves, missing):
    # Few rows per (leaf, bin) cell and skewed features (most rows in one bin, as in word counts):
    # the kernel's sparse level path.
    rng = np.random.default_rng(seed)
    X = rng.integers(0, n_bins - 1, size=(n_features, n)).astype(np.uint8)
    X[rng.uniform(size=X.shape) < 0.7] = 0
    X[1] = np.where(rng.uniform(size=n) < 0.5, n_bins - 2, X[1])  # the last threshold's bin
    if missing:
        X[:, rng.uniform(size=n) < 0.1] = n_bins - 1
    g = rng.normal(size=(n, 1)).astype(np.float32)
    h = rng.uniform(0.1, 1.0, size=(n, 1)).astype(np.float32)
    zero = rng.uniform(size=n) < 0.3
    g[zero], h[zero] = 0.0, 0.0
    g[rng.uniform(size=n) < 0.05] = 0.0  # zero gradient, non-zero hessian
    leaf = rng.integers(0, n_leaves, size=n).astype(np.int32)
    leaf[leaf == n_leaves - 1] = 0  # an empty leaf
    leaf[np.flatnonzero(leaf == n_leaves - 2)[8:]] = 1  # a leaf of 8 rows
    return jnp.asarray(X), jnp.asarray(np.concatenate([g, h], axis=1)), jnp.asarray(leaf)


@pytest.mark.slow
@pytest.mark.parametrize("missing", [True, False])
@pytest.mark.parametrize("l2,mcw", [(1.0, 1.0), (0.0, 0.0), (2.0, 6.0)])
def test_sparse_level_bitwise_equals_dense_level(missing, l2, mcw):
    # 900 rows over 16 leaves x 256 bins: the gains come from the sparse path (marked cells only)
    # without keep_hist, from the dense path (prefix sums, change points of the cumulative
    # histograms) with it, and from the split-gain kernel on those histograms: bitwise the same,
    # and close to pure JAX.
    n_bins, L = 256, 16
    X, payload, leaf = _sparse_level_data(40 + missing, 900, 9, n_bins, L, missing)
    kw = dict(n_leaves=L, n_bins=n_bins, missing=missing)
    sparse, _ = splits_lib._native_level(X, payload, leaf, None, l2, mcw, keep_hist=False, n_threads=2, **kw)
    dense, hist = splits_lib._native_level(X, payload, leaf, None, l2, mcw, keep_hist=True, n_threads=2, **kw)
    np.testing.assert_array_equal(np.asarray(sparse), np.asarray(dense))
    from_hist = splits_lib.cumulative_split_gains(hist, l2, mcw, missing)
    np.testing.assert_array_equal(np.asarray(from_hist), np.asarray(sparse))
    direct = histograms.prefix_sum(histograms.pure_jax_histogram(X, payload, leaf, L, n_bins), axis=2)
    np.testing.assert_allclose(np.asarray(hist), np.asarray(direct), rtol=1e-5, atol=1e-4)
    _assert_gains_close(sparse, splits_lib.split_gains_cumulative(direct, l2, mcw, missing))
    if mcw > 1:  # a leaf below min_child_weight is skipped on both paths
        h_leaf = np.asarray(direct)[0, :, -1, 1]
        assert np.any((h_leaf < mcw) & (h_leaf > 0)) and np.any(h_leaf >= mcw)
    # Threads and repeated calls (the sparse path's buffer must be left all-zero): bitwise.
    for threads in (1, 3):
        again, _ = splits_lib._native_level(X, payload, leaf, None, l2, mcw, keep_hist=False,
                                            n_threads=threads, **kw)
        np.testing.assert_array_equal(np.asarray(again), np.asarray(sparse))


def test_sparse_level_in_a_sweep_sized_batch():
    # vmapped models (per-model payloads and leaves) on the sparse path == separate calls, and
    # a dense-sized call in between does not disturb the sparse path's zeroed buffer.
    n_bins, L = 64, 32
    X, payload, leaf = _sparse_level_data(50, 1500, 6, n_bins, L, True)
    payloads = jnp.stack([payload, payload * 2.0, payload[::-1]])
    leaves = jnp.stack([leaf, (leaf + 3) % L, leaf[::-1]])

    def one(p, lf):
        return splits_lib._native_level(X, p, lf, None, 1.0, 0.5, n_leaves=L, n_bins=n_bins,
                                        missing=True, keep_hist=False)[0]

    got = jax.jit(jax.vmap(one))(payloads, leaves)
    Xd, pd, ld = _level_data(51, 60_000, 6, n_bins, 4, 1, True)
    splits_lib._native_level(Xd, pd, ld, None, 1.0, 0.5, n_leaves=4, n_bins=n_bins, missing=True,
                             keep_hist=False)
    for b in range(3):
        np.testing.assert_array_equal(np.asarray(got[b]), np.asarray(one(payloads[b], leaves[b])))


# ---------------------------------------------------------------------------------------------
# Wide payloads: 9 or more outputs (C = 2K > 16) take the kernel's wide paths (any K).


@pytest.mark.slow
@pytest.mark.parametrize("k", [9, 26, 100])
@pytest.mark.parametrize("missing", [True, False])
@pytest.mark.parametrize("subtract", [False, True])
def test_wide_level_kernel_equals_pure_jax(k, missing, subtract):
    # The fused level for K > 8 outputs against pure JAX: histograms (built directly or by
    # subtraction), gains with l2 / min_child_weight (a leaf below it), with and without missing
    # rows; a feature using only its first 10 bins (the wide path's used-bin trimming).
    n_bins, L = 64, 8
    X, payload, leaf = _level_data(40 + k + 2 * missing + 4 * subtract, 6_000, 5, n_bins, L, k, missing)
    X = X.at[1].set(jnp.where(X[1] == n_bins - 1, X[1], X[1] % 10))
    direct = histograms.prefix_sum(histograms.pure_jax_histogram(X, payload, leaf, L, n_bins), axis=2)
    parent = None
    if subtract:
        parent = histograms.prefix_sum(histograms.pure_jax_histogram(X, payload, leaf % (L // 2), L // 2, n_bins),
                                   axis=2)
    for l2, mcw in ((1.0, 1.0), (0.0, 0.0), (3.0, 20.0 * k)):  # hessian sums add over K outputs
        outs = [splits_lib._native_level(X, payload, leaf, parent, l2, mcw, n_leaves=L, n_bins=n_bins,
                                         missing=missing, keep_hist=True, n_threads=t) for t in (1, 3)]
        gains, hist = outs[0]
        np.testing.assert_allclose(np.asarray(hist), np.asarray(direct), rtol=1e-5, atol=5e-3)
        _assert_gains_close(gains, splits_lib.split_gains_cumulative(direct, l2, mcw, missing))
        if mcw > 1:  # a leaf is below min_child_weight and another above it
            h_leaf = np.asarray(direct)[0, :, -1, k:].sum(axis=-1)
            assert np.any(h_leaf < mcw) and np.any(h_leaf >= mcw)
        # Bitwise the same with 3 threads, and without writing the histograms.
        np.testing.assert_array_equal(np.asarray(outs[1][0]), np.asarray(gains))
        np.testing.assert_array_equal(np.asarray(outs[1][1]), np.asarray(hist))
        gains2, none = splits_lib._native_level(X, payload, leaf, parent, l2, mcw, n_leaves=L,
                                                n_bins=n_bins, missing=missing, keep_hist=False)
        assert none is None
        np.testing.assert_array_equal(np.asarray(gains2), np.asarray(gains))
        # The split-gains kernel (sharded rows) on the same cumulative histograms.
        _assert_gains_close(splits_lib.cumulative_split_gains(direct, l2, mcw, missing),
                            splits_lib.split_gains_cumulative(direct, l2, mcw, missing))


@pytest.mark.slow
@pytest.mark.parametrize("k", [9, 26])
def test_wide_histogram_kernels_equal_pure_jax(k):
    # The histogram and smaller-sibling kernels (sharded fits) for K > 8, threads 1 and 3.
    X, payload, leaf = _data(50 + k, 20_000, 5, 32, 8, 2 * k, zero_rows=0.3)
    want = histograms.pure_jax_histogram(X, payload, leaf, 8, 32)
    for t in (1, 3):
        got = _kernel(X, payload, leaf, 8, 32, t)
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-5, atol=1e-3)
    parent = histograms.prefix_sum(histograms.pure_jax_histogram(X, payload, leaf % 4, 4, 32), axis=2)
    hist, _ = histograms.level_histograms(X, payload, leaf, parent, n_bins=32)
    np.testing.assert_allclose(np.asarray(hist), np.asarray(histograms.prefix_sum(want, axis=2)),
                               rtol=1e-5, atol=5e-3)


def test_wide_level_kernel_vmap_equals_separate_calls():
    # K = 26 models batched over payloads and l2 / min_child_weight, the parent batched:
    # bitwise the separate calls.
    X, payload, leaf = _level_data(60, 5_000, 4, 32, 4, 26, True)
    payloads = jnp.stack([payload, 2 * payload, 0.5 * payload])
    l2s, mcws = jnp.array([0.0, 1.0, 5.0]), jnp.array([0.0, 2.0, 30.0])
    parents = jax.vmap(lambda p: histograms._native_histogram(X, p, leaf % 2, 2, 32, None, cumulative=True))(payloads)

    def one(p, par, l2, mcw):
        return splits_lib._native_level(X, p, leaf, par, l2, mcw, n_leaves=4, n_bins=32, missing=True,
                                        keep_hist=True)

    got = jax.jit(jax.vmap(one))(payloads, parents, l2s, mcws)
    for b in range(3):
        want = one(payloads[b], parents[b], l2s[b], mcws[b])
        np.testing.assert_array_equal(np.asarray(got[0][b]), np.asarray(want[0]))
        np.testing.assert_array_equal(np.asarray(got[1][b]), np.asarray(want[1]))


@pytest.mark.slow
def test_wide_level_gains_dispatch_runs_the_kernel():
    # level_gains takes the kernel for K > 8 on CPU (no pure-JAX fallback): its program holds
    # the level custom call.
    X, payload, leaf = _level_data(61, 2_000, 3, 16, 2, 12, True)
    fn = lambda X, p, lf: splits_lib.level_gains(X, p, lf, None, n_leaves=2, n_bins=16, l2=1.0,
                                                 min_child_weight=1.0)
    assert _native.LEVEL in jax.jit(fn).lower(X, payload, leaf).as_text()
    g1, _ = fn(X, payload, leaf)
    g0, _ = pure_jax(fn, X, payload, leaf)
    _assert_gains_close(g1, g0)


@pytest.mark.slow
def test_multiclass_fit_same_model_with_and_without_kernel():
    # 12 classes (K > 8): the kernel's trees are pure JAX's.
    rng = np.random.default_rng(7)
    X = rng.normal(size=(3000, 6)).astype(np.float32)
    y = (np.digitize(X[:, 0] + 0.5 * X[:, 1], np.linspace(-2, 2, 11))).astype(np.int32)
    kw = dict(loss="multinomial_deviance", n_rounds=5, depth=4, learning_rate=0.3)
    native = jboost.fit(X, y, **kw)
    pure = pure_jax(jboost.fit, X, y, **kw)
    np.testing.assert_array_equal(native.trees.features, pure.trees.features)
    np.testing.assert_array_equal(native.trees.thresholds, pure.trees.thresholds)
    np.testing.assert_allclose(jboost.predict(native, X), jboost.predict(pure, X), rtol=1e-4, atol=1e-4)


def test_kernel_rejects_what_it_cannot_index():
    # One feature's histogram cells past 2**31 - 1 (leaves x bins x channels): a ValueError naming
    # the cause from the Python wrapper, an FFI error (not garbage, not a crash) from the kernel,
    # and the pure-JAX path from the dispatcher.
    n_leaves, n_bins, c = 2**14, 256, 1024
    assert not _native.indexable(4, n_leaves, n_bins, c) and _native.indexable(4, 64, 256, 200)
    assert not _native.indexable(2**31, 1, 256, 2)
    X = jnp.zeros((2, 4), jnp.uint8)
    payload = jnp.ones((4, c), jnp.float32)
    leaf = jnp.zeros((4,), jnp.int32)
    with pytest.raises(ValueError, match="32-bit"):
        splits_lib._native_level(X, payload, leaf, None, 1.0, 1.0, n_leaves=n_leaves, n_bins=n_bins,
                                 missing=True, keep_hist=False)
    with pytest.raises(ValueError, match="rows"):
        _native.check_indexable(2**31, 1, 256, 2)
    out = (jax.ShapeDtypeStruct((2, n_bins - 1, 2), jnp.float32), jax.ShapeDtypeStruct((1,), jnp.float32))
    call = jax.ffi.ffi_call(_native.LEVEL, out)
    with pytest.raises(Exception, match="32-bit offsets"):
        jax.block_until_ready(call(X, payload, leaf, jnp.zeros((1,), jnp.float32), jnp.float32(1.0),
                                   jnp.float32(1.0), n_threads=np.int64(1), n_leaves=np.int64(n_leaves),
                                   subtract=False, missing=True, write_hist=False))
    lowered = jax.jit(lambda X, p, lf: splits_lib.level_gains(
        X, p, lf, None, n_leaves=n_leaves, n_bins=n_bins, l2=1.0, min_child_weight=1.0)).lower(X, payload, leaf)
    assert _native.LEVEL not in lowered.as_text()


@pytest.mark.parametrize("what,message", [(1, "self-test exception"), (2, "out of memory"),
                                          (3, "on a worker thread")])
def test_kernel_exceptions_become_ffi_errors(what, message):
    # A C++ exception in a kernel (on the calling thread or on a worker thread) comes back as an
    # FFI error raised in Python; the process goes on, and the kernels still run afterwards.
    _native.load()
    call = jax.ffi.ffi_call(_native.SELF_TEST, jax.ShapeDtypeStruct((1,), jnp.int32))
    assert int(call(what=np.int64(0))[0]) == 1
    with pytest.raises(Exception, match=message):
        jax.block_until_ready(call(what=np.int64(what)))
    assert int(call(what=np.int64(0))[0]) == 1


@pytest.mark.slow
def test_stale_library_falls_back_with_a_warning(monkeypatch):
    # The library exports its ABI version; a library of another version (or of none: older than
    # the check) is not used: a warning says to rebuild, and jboost runs pure JAX.
    import ctypes
    import types

    lib = ctypes.cdll.LoadLibrary(_native.library_path())
    assert lib.JboostAbiVersion() == _native.ABI_VERSION
    assert _native.abi_matches(lib)
    monkeypatch.setattr(_native, "ABI_VERSION", _native.ABI_VERSION + 1)
    with pytest.warns(RuntimeWarning, match="stale.*pip install -e"):
        assert not _native.abi_matches(lib)
    with pytest.warns(RuntimeWarning, match="ABI version None"):
        assert not _native.abi_matches(types.SimpleNamespace())
    with pytest.warns(RuntimeWarning, match="stale"):
        assert not _native.load.__wrapped__()  # what load() does at import with a stale build
