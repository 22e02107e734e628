"""The Pallas kernels (jboost/_native/pallas.py) in interpret mode on the CPU: histograms against
the CPU kernel's (:func:`jboost.trees.histograms.build_histogram`) and a NumPy float64 reference,
quantised histograms against exact integer sums, split gains against the XLA gains of
:mod:`jboost.trees.splits`; and each kernel lowered to Triton IR for a CUDA target (what Pallas checks,
without a GPU)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jboost import _native
from jboost.trees import histograms
from jboost._native import pallas as pk
from jboost.trees import splits as splits_lib


def _data(seed, n, n_features, n_leaves, n_bins, channels):
    """Random bins, leaves and payload, with rows of zero payload and rows in the missing bin."""
    rng = np.random.default_rng(seed)
    X_binned = rng.integers(0, n_bins, size=(n_features, n)).astype(np.uint8)
    X_binned[:, : n // 10] = n_bins - 1                          # missing rows
    payload = rng.normal(size=(n, channels)).astype(np.float32)
    payload[:, channels // 2:] = np.abs(payload[:, channels // 2:])  # hessians >= 0
    payload[rng.random(n) < 0.2] = 0.0                             # rows of zero payload
    leaf = rng.integers(0, n_leaves, size=n).astype(np.int32)
    return X_binned, payload, leaf


def _numpy_histogram(X_binned, payload, leaf, n_leaves, n_bins, dtype=np.float64):
    """The CPU kernel's sums: bins above ``n_bins - 1`` in the missing bin, rows whose leaf is
    out of range nowhere."""
    n_features = X_binned.shape[0]
    out = np.zeros((n_features, n_leaves, n_bins, payload.shape[1]), dtype)
    keep = (leaf >= 0) & (leaf < n_leaves)
    for f in range(n_features):
        bins = np.minimum(X_binned[f].astype(np.int64), n_bins - 1)
        np.add.at(out[f], (leaf[keep], bins[keep]), payload[keep].astype(dtype))
    return out


def _counts(X_binned, leaf, n_leaves, n_bins):
    return _numpy_histogram(X_binned, np.ones((X_binned.shape[1], 1)), leaf, n_leaves, n_bins)


# float32 sums of the same values in another order: each cell's error is at most about
# n_cell * 2**-24 * sum |p| (a few 1e-5 for these cells of up to ~250 N(0, 1) values), and in
# practice a few ulps; rtol 1e-5 and atol 2e-5 leave room for that and nothing more (a row
# missing or counted twice moves a cell by ~0.1 or more).
RTOL, ATOL = 1e-5, 2e-5


@pytest.mark.parametrize("n, n_leaves, n_bins, channels", [
    (1000, 1, 16, 2),   # n not a multiple of the 128-row block
    (333, 4, 64, 4),    # 256 cells: two cell blocks
    (129, 4, 16, 2),    # one row into a second row block
    (700, 1, 64, 4),
])
def test_histogram_matches_cpu_kernel(n, n_leaves, n_bins, channels):
    X_binned, payload, leaf = _data(n + n_bins, n, 3, n_leaves, n_bins, channels)
    ref = np.asarray(histograms.build_histogram(X_binned, payload, leaf, n_leaves=n_leaves,
                                                n_bins=n_bins))
    got = np.asarray(pk.histogram(X_binned, payload, leaf, n_leaves=n_leaves, n_bins=n_bins,
                                  interpret=True))
    assert got.shape == ref.shape and got.dtype == np.float32
    np.testing.assert_allclose(got, ref, rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(got, _numpy_histogram(X_binned, payload, leaf, n_leaves, n_bins),
                               rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("rows_in_grid", [False, True])
def test_histogram_schedules_and_small_blocks(rows_in_grid):
    """Both schedules, with 16-row and 16-cell blocks (many row and cell blocks), give the sums
    of the default blocks."""
    n, n_leaves, n_bins = 250, 4, 16
    X_binned, payload, leaf = _data(7, n, 2, n_leaves, n_bins, 2)
    ref = np.asarray(pk.histogram(X_binned, payload, leaf, n_leaves=n_leaves, n_bins=n_bins,
                                  interpret=True))
    got = np.asarray(pk.histogram(X_binned, payload, leaf, n_leaves=n_leaves, n_bins=n_bins,
                                  interpret=True, block_rows=16, block_cells=16,
                                  rows_in_grid=rows_in_grid))
    np.testing.assert_allclose(got, ref, rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(got, _numpy_histogram(X_binned, payload, leaf, n_leaves, n_bins),
                               rtol=RTOL, atol=ATOL)


def test_histogram_clamps_bins_and_drops_out_of_range_leaves():
    """Bins >= n_bins count in the missing bin, leaves outside [0, L) nowhere: as the CPU kernel."""
    n, n_leaves, n_bins = 300, 4, 16
    X_binned, payload, leaf = _data(3, n, 2, n_leaves, n_bins, 2)
    X_binned[:, ::7] = 200                                # beyond the last bin
    leaf[::11] = -1
    leaf[5::13] = n_leaves
    leaf[3::17] = 2**28                                   # leaf * n_bins wraps to 0 in int32
    leaf[4::19] = -(2**28)
    got = np.asarray(pk.histogram(X_binned, payload, leaf, n_leaves=n_leaves, n_bins=n_bins,
                                  interpret=True))
    np.testing.assert_allclose(got, _numpy_histogram(X_binned, payload, leaf, n_leaves, n_bins),
                               rtol=RTOL, atol=ATOL)
    if _native.available():  # the pure-JAX scatter assumes bins < n_bins and leaves in range
        ref = histograms.build_histogram(X_binned, payload, leaf, n_leaves=n_leaves, n_bins=n_bins)
        np.testing.assert_allclose(got, np.asarray(ref), rtol=RTOL, atol=ATOL)


def _exact_quantized(X_binned, payload, leaf, n_leaves, n_bins):
    q, scale = pk.quantize_payload(jnp.asarray(payload))
    q = np.asarray(q).astype(np.int64)
    return _numpy_histogram(X_binned, q, leaf, n_leaves, n_bins, dtype=np.int64), np.asarray(scale)


@pytest.mark.slow
@pytest.mark.parametrize("n, n_leaves, n_bins, channels", [(1000, 4, 64, 4), (333, 1, 16, 2)])
def test_quantized_histogram_is_exact_and_order_independent(n, n_leaves, n_bins, channels):
    X_binned, payload, leaf = _data(n, n, 3, n_leaves, n_bins, channels)
    kw = dict(n_leaves=n_leaves, n_bins=n_bins, interpret=True)
    hist, scale = pk.quantized_histogram(X_binned, payload, leaf, **kw)
    ref, ref_scale = _exact_quantized(X_binned, payload, leaf, n_leaves, n_bins)
    assert hist.dtype == jnp.int32 and scale.dtype == jnp.float32
    np.testing.assert_array_equal(np.asarray(hist), ref)
    np.testing.assert_array_equal(np.asarray(scale), ref_scale)

    perm = np.random.default_rng(1).permutation(n)
    hist_p, scale_p = pk.quantized_histogram(X_binned[:, perm], payload[perm], leaf[perm], **kw)
    np.testing.assert_array_equal(np.asarray(hist_p), np.asarray(hist))
    np.testing.assert_array_equal(np.asarray(scale_p), np.asarray(scale))
    # The other schedule and other blocks: bitwise the same too.
    hist_g, _ = pk.quantized_histogram(X_binned[:, perm], payload[perm], leaf[perm], **kw,
                                       block_rows=32, block_cells=16, rows_in_grid=True)
    np.testing.assert_array_equal(np.asarray(hist_g), np.asarray(hist))

    # Dequantised: within n_cell * s_c / 2 of the exact (float64) sums, plus the float32
    # rounding of the int32 -> float32 conversion.
    exact = _numpy_histogram(X_binned, payload, leaf, n_leaves, n_bins)
    deq = np.asarray(pk.dequantize(hist, scale)).astype(np.float64)
    counts = _counts(X_binned, leaf, n_leaves, n_bins)
    bound = counts * np.asarray(scale) / 2 + np.abs(deq) * 2.0**-24
    assert np.all(np.abs(deq - exact) <= bound)
    # ...and the scale is not wastefully coarse: below 2**-29 of the channel's absolute sum.
    assert np.all(np.asarray(scale) <= 2.0**-29 * np.abs(payload).astype(np.float64).sum(0) * 1.001)


def test_quantize_payload_rounds_each_row_to_half_a_unit():
    payload = np.random.default_rng(2).normal(size=(500, 2)).astype(np.float32)
    q, scale = pk.quantize_payload(jnp.asarray(payload))
    err = np.abs(np.asarray(q).astype(np.float64) * np.asarray(scale) - payload)
    assert np.all(err <= np.asarray(scale) / 2)
    # One row per cell: each cell's error is one row's, at most s_c / 2.
    n = payload.shape[0]
    X_binned = (np.arange(n) % 64).astype(np.uint8)[None]
    leaf = (np.arange(n) // 64).astype(np.int32)
    hist, scale = pk.quantized_histogram(X_binned, payload, leaf, n_leaves=8, n_bins=64,
                                         interpret=True)
    deq = np.asarray(pk.dequantize(hist, scale)).reshape(-1, 2)[:n]
    assert np.all(np.abs(deq - payload) <= np.asarray(scale) / 2 + np.abs(payload) * 2.0**-24)


# 2**100 * (1 - 2**-10): n * |p| just below a power of two, where rounding the scale up to a
# power of two leaves no slack; 3e38: n * |p| overflows float32.
@pytest.mark.parametrize("value", [2.0**100 * (1 - 2.0**-10), 3e38])
def test_quantized_histogram_no_overflow_on_adversarial_payload(value):
    """All rows of one sign and large, every row in one cell of feature 0: the cell holds the
    channel's whole quantised sum, which must stay in int32 (and use its range)."""
    n = 4096
    rng = np.random.default_rng(4)
    payload = np.stack([np.full(n, value), rng.uniform(0.5, 1.0, n) * value], axis=1)
    payload = payload.astype(np.float32)
    X_binned = np.stack([np.zeros(n), rng.integers(0, 16, n)]).astype(np.uint8)
    leaf = np.zeros(n, np.int32)
    hist, scale = pk.quantized_histogram(X_binned, payload, leaf, n_leaves=1, n_bins=16,
                                         interpret=True)
    ref, _ = _exact_quantized(X_binned, payload, leaf, 1, 16)
    q, _ = pk.quantize_payload(jnp.asarray(payload))
    abs_sum = np.abs(np.asarray(q).astype(np.int64)).sum(axis=0)
    assert np.all(abs_sum <= 2**30 + n / 2)               # the documented headroom
    assert np.all(ref[0, 0, 0] > 2**28)                   # ...and most of the range used
    np.testing.assert_array_equal(np.asarray(hist), ref)
    exact = payload.astype(np.float64).sum(0)
    deq = np.asarray(pk.dequantize(hist, scale))[0, 0, 0].astype(np.float64)
    assert np.all(np.abs(deq - exact) <= n * np.asarray(scale) / 2 + np.abs(deq) * 2.0**-24)


def _cumulative(seed, n, n_leaves, n_bins):
    X_binned, payload, leaf = _data(seed, n, 4, n_leaves, n_bins, 2)
    hist = histograms.build_histogram(X_binned, payload, leaf, n_leaves=n_leaves, n_bins=n_bins)
    return histograms.prefix_sum(hist, axis=2)


@pytest.mark.slow
@pytest.mark.parametrize("n_leaves, n_bins", [(1, 16), (4, 64), (3, 5)])
@pytest.mark.parametrize("l2, weight_fraction", [(1.0, 0.0), (0.0, 0.15), (2.0, 0.35)])
def test_split_gains_match_xla(n_leaves, n_bins, l2, weight_fraction):
    """``min_child_weight``: a fraction of a leaf's typical hessian sum, so that some splits of
    some leaves are inadmissible (their leaf counts 0, as in the reference) and some are not."""
    cum = _cumulative(n_bins + n_leaves, 400, n_leaves, n_bins)
    min_child_weight = float(weight_fraction * np.median(np.asarray(cum)[:, :, -1, 1]))
    ref = splits_lib.split_gains_cumulative(cum, l2, min_child_weight)
    got = pk.split_gains(cum, l2, min_child_weight, interpret=True)
    assert got.shape == ref.shape == (4, n_bins - 1, 2) and got.dtype == ref.dtype
    # The same expression op for op; only the sum over leaves may be ordered differently.
    np.testing.assert_allclose(np.asarray(got), np.asarray(ref), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(
        np.asarray(got), np.asarray(splits_lib.cumulative_split_gains(cum, l2, min_child_weight)),
        rtol=1e-5, atol=1e-5)
    if min_child_weight > 0:  # some leaves' splits are inadmissible (and count 0), some not
        h_left = np.asarray(cum)[..., :-1, 1]
        h_total = np.asarray(cum)[..., -1:, 1]
        ok = (h_left >= min_child_weight) & (h_total - h_left >= min_child_weight)
        assert ok.any() and not ok.all()
        if n_leaves == 1:
            np.testing.assert_array_equal(np.asarray(got)[..., 1][~ok[:, 0]], 0.0)


def test_split_gains_without_missing_values():
    cum = _cumulative(5, 400, 4, 16)
    ref = splits_lib.split_gains_cumulative(cum, 1.0, 3.0, missing=False)
    got = pk.split_gains(cum, 1.0, 3.0, missing=False, interpret=True)
    np.testing.assert_array_equal(np.asarray(got)[..., 1], -np.inf)
    np.testing.assert_allclose(np.asarray(got), np.asarray(ref), rtol=1e-6, atol=1e-6)


@pytest.mark.slow
@pytest.mark.skipif(jax.default_backend() != "cpu", reason="checks the CPU's default")
def test_interpret_none_is_interpret_mode_on_cpu():
    """``interpret=None`` (the default) runs on the CPU backend, which has no Pallas GPU
    lowering: interpret mode."""
    n_leaves, n_bins = 2, 16
    X_binned, payload, leaf = _data(9, 200, 2, n_leaves, n_bins, 2)
    hist = pk.histogram(X_binned, payload, leaf, n_leaves=n_leaves, n_bins=n_bins)
    np.testing.assert_allclose(np.asarray(hist),
                               _numpy_histogram(X_binned, payload, leaf, n_leaves, n_bins),
                               rtol=RTOL, atol=ATOL)
    hist_int, scale = pk.quantized_histogram(X_binned, payload, leaf, n_leaves=n_leaves,
                                             n_bins=n_bins)
    ref, _ = _exact_quantized(X_binned, payload, leaf, n_leaves, n_bins)
    np.testing.assert_array_equal(np.asarray(hist_int), ref)
    cum = histograms.prefix_sum(hist, axis=2)
    np.testing.assert_allclose(np.asarray(pk.split_gains(cum, 1.0, 0.0)),
                               np.asarray(splits_lib.split_gains_cumulative(cum, 1.0, 0.0)),
                               rtol=1e-6, atol=1e-6)


@pytest.mark.slow
def test_kernels_lower_to_triton():
    """Compiled (``interpret=False``) for a CUDA target, each kernel lowers to a Triton call:
    Pallas's checks of the Triton lowering (power-of-two tensors, dot operand types) pass. What
    the Triton compiler and a GPU make of it is for a GPU run to say."""
    pytest.importorskip("jax._src.lib.triton", reason="this jaxlib has no Triton dialect")
    n, n_leaves, n_bins, c = 1000, 3, 48, 2  # no size a power of two: the padding is checked
    X = jax.ShapeDtypeStruct((3, n), jnp.uint8)
    p = jax.ShapeDtypeStruct((n, c), jnp.float32)
    leaf = jax.ShapeDtypeStruct((n,), jnp.int32)
    cum = jax.ShapeDtypeStruct((3, n_leaves, n_bins, 2), jnp.float32)
    s = jax.ShapeDtypeStruct((), jnp.float32)
    kw = dict(n_leaves=n_leaves, n_bins=n_bins, interpret=False)
    calls = [(lambda *a: pk.histogram(*a, **kw), (X, p, leaf)),
             (lambda *a: pk.histogram(*a, **{**kw, "n_leaves": 1}), (X, p, leaf)),  # 48 cells
             (lambda *a: pk.quantized_histogram(*a, **kw), (X, p, leaf)),
             (lambda *a: pk.split_gains(*a, interpret=False), (cum, s, s))]
    for fn, args in calls:
        text = jax.jit(fn).trace(*args).lower(lowering_platforms=("cuda",)).as_text()
        assert "__gpu$xla.gpu.triton" in text
