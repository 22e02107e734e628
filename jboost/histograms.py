"""Gradient and hessian histograms per (feature, leaf, bin).

The hot path of tree fitting. On CPU, a scatter-add per feature (``lax.map`` over features,
one ``segment_sum`` of the whole payload per feature) beats vectorising over features, because
each feature's bins and the payload stay in cache (see ``../shared/PERF-NOTES.md``). Pairs of
float32 channels are packed into one complex64 payload so one scatter moves both.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from jax import lax


def _pack(payload):
    c = payload.shape[-1]
    if c % 2:
        return payload, False
    half = c // 2
    return lax.complex(payload[:, :half], payload[:, half:]), True


def _unpack(hist, packed):
    if not packed:
        return hist
    return jnp.concatenate([jnp.real(hist), jnp.imag(hist)], axis=-1)


@functools.partial(jax.jit, static_argnames=("n_leaves", "n_bins", "axis_name"))
def build_histogram(X_binned, payload, leaf, *, n_leaves: int, n_bins: int, axis_name=None):
    """Sums of ``payload`` rows per (feature, leaf, bin).

    Args:
      X_binned: ``(n_features, n_samples)`` uint8 bins (feature-major).
      payload: ``(n_samples, C)`` float32, e.g. ``[w*g_1..w*g_K, w*h_1..w*h_K]``.
      leaf: ``(n_samples,)`` int32 leaf of each row, in ``[0, n_leaves)``.
      n_leaves, n_bins: static sizes.
      axis_name: when rows are sharded over a mapped axis (``shard_map``/``pmap``), the
        histograms are summed across it with ``psum`` so every device sees the global sums.

    Returns:
      ``(n_features, n_leaves, n_bins, C)`` float32.
    """
    packed_payload, packed = _pack(payload.astype(jnp.float32))
    base = leaf.astype(jnp.int32) * n_bins

    def one_feature(col):
        idx = base + col.astype(jnp.int32)
        return jax.ops.segment_sum(packed_payload, idx, num_segments=n_leaves * n_bins)

    hist = lax.map(one_feature, X_binned)
    hist = _unpack(hist, packed).reshape(X_binned.shape[0], n_leaves, n_bins, payload.shape[-1])
    if axis_name is not None:
        hist = lax.psum(hist, axis_name)
    return hist
