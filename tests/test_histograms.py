"""Histograms of (feature, leaf, bin) sums (jboost/trees/histograms.py) against a NumPy triple loop."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jboost.trees import histograms


def reference_histogram(X_binned, payload, leaf, n_leaves, n_bins):
    """Brute force: for every feature, row and channel, add the row's payload to its cell."""
    n_features, n = X_binned.shape
    out = np.zeros((n_features, n_leaves, n_bins, payload.shape[1]), np.float64)
    for f in range(n_features):
        for i in range(n):
            for c in range(payload.shape[1]):
                out[f, leaf[i], X_binned[f, i], c] += payload[i, c]
    return out


def _data(seed, n, n_features, n_bins, n_leaves, channels, integer):
    rng = np.random.default_rng(seed)
    X_binned = rng.integers(0, n_bins, size=(n_features, n)).astype(np.uint8)
    X_binned[0, :3] = n_bins - 1  # some rows in the missing bin
    if integer:  # small integers: every float32 sum is exact, so equality is exact
        payload = rng.integers(-5, 6, size=(n, channels)).astype(np.float32)
    else:
        payload = rng.normal(size=(n, channels)).astype(np.float32)
    leaf = rng.integers(0, n_leaves, size=n).astype(np.int32)
    return X_binned, payload, leaf


@pytest.mark.parametrize("channels", [1, 2, 3, 4])  # odd: plain payload; even: packed as complex64
@pytest.mark.parametrize("n_leaves", [1, 2, 8])
@pytest.mark.parametrize("n_bins", [5, 16])
def test_histogram_equals_triple_loop(channels, n_leaves, n_bins):
    X_binned, payload, leaf = _data(channels * 100 + n_leaves * 10 + n_bins, 61, 3, n_bins, n_leaves,
                                    channels, integer=True)
    got = histograms.build_histogram(jnp.asarray(X_binned), jnp.asarray(payload), jnp.asarray(leaf),
                                     n_leaves=n_leaves, n_bins=n_bins)
    assert got.shape == (3, n_leaves, n_bins, channels) and got.dtype == jnp.float32
    np.testing.assert_array_equal(np.asarray(got),
                                  reference_histogram(X_binned, payload, leaf, n_leaves, n_bins))


@pytest.mark.parametrize("channels", [3, 4])
def test_histogram_of_real_valued_payload(channels):
    X_binned, payload, leaf = _data(7, 61, 3, 16, 4, channels, integer=False)
    got = histograms.build_histogram(jnp.asarray(X_binned), jnp.asarray(payload), jnp.asarray(leaf),
                                     n_leaves=4, n_bins=16)
    ref = reference_histogram(X_binned, payload, leaf, 4, 16)
    np.testing.assert_allclose(np.asarray(got), ref, rtol=1e-5, atol=1e-5)
    # Every feature's histogram adds up to the leaf totals of the payload.
    totals = np.stack([payload[leaf == l].sum(0) for l in range(4)])
    np.testing.assert_allclose(np.asarray(got).sum(axis=2), np.broadcast_to(totals, (3, 4, channels)),
                               rtol=1e-5, atol=1e-5)


def test_zero_payload_rows_contribute_nothing():
    X_binned, payload, leaf = _data(8, 61, 3, 5, 2, 2, integer=True)
    payload[::2] = 0.0  # e.g. rows with sample weight 0
    got = histograms.build_histogram(jnp.asarray(X_binned), jnp.asarray(payload), jnp.asarray(leaf),
                                     n_leaves=2, n_bins=5)
    keep = np.arange(61) % 2 == 1
    ref = reference_histogram(X_binned[:, keep], payload[keep], leaf[keep], 2, 5)
    np.testing.assert_array_equal(np.asarray(got), ref)


def test_rows_sharded_over_a_mapped_axis_are_summed():
    # With axis_name, every shard's histogram is psum-ed: each shard sees the global histogram.
    X_binned, payload, leaf = _data(9, 60, 3, 5, 2, 2, integer=True)
    shard = lambda a, axis: jnp.stack(jnp.split(jnp.asarray(a), 2, axis=axis))
    fn = lambda xb, p, l: histograms.build_histogram(xb, p, l, n_leaves=2, n_bins=5, axis_name="rows")
    got = jax.vmap(fn, axis_name="rows")(shard(X_binned, 1), shard(payload, 0), shard(leaf, 0))
    ref = reference_histogram(X_binned, payload, leaf, 2, 5)
    for s in range(2):
        np.testing.assert_array_equal(np.asarray(got[s]), ref)


def test_level_plan_for_wide_payloads():
    # Up to 16 channels the plan does not depend on them; wider payloads subtract only with 8
    # rows per cell (their kept histograms cost more memory traffic than the rows save).
    from jboost.trees import histograms

    n, depth, n_bins = 20_000, 6, 256
    narrow = histograms.level_plan(n, depth, n_bins)
    assert narrow == histograms.level_plan(n, depth, n_bins, channels=16)
    assert [s for s, _ in narrow] == [False, True, True, True, True, True] and narrow[-1][1]
    wide = histograms.level_plan(n, depth, n_bins, channels=52)
    assert wide == [(False, True), (True, True), (True, True), (True, False), (False, False),
                    (False, False)]
