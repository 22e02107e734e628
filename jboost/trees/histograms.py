"""Gradient and hessian histograms per (feature, leaf, bin): the hot path of tree fitting.

One set of sums, three implementations chosen when the program is lowered: the CPU kernel
(``jboost/_native/histogram.cc``, with histogram subtraction), a per-feature scatter in pure JAX on
CPU, and one spread scatter over all features on accelerators. See docs/trees.md ("Histograms")."""

from __future__ import annotations

import functools
from typing import Optional

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from jboost import _compile, _native
from jboost.data import rows


def prefix_sum(x, axis: int):
    """Inclusive prefix sum along ``axis`` as a two-level blocked cumsum (blocks of 16): O(16 B)
    where ``jnp.cumsum`` lowers to an O(B^2) reduce-window on XLA's CPU backend."""
    x = jnp.moveaxis(x, axis, -1)
    b = x.shape[-1]
    block = 16
    if b <= block:
        out = jnp.cumsum(x, axis=-1)
    else:
        nb = -(-b // block)
        xp = jnp.pad(x, [(0, 0)] * (x.ndim - 1) + [(0, nb * block - b)])
        xb = xp.reshape(x.shape[:-1] + (nb, block))
        within = jnp.cumsum(xb, axis=-1)
        offsets = jnp.cumsum(within[..., -1], axis=-1) - within[..., -1]
        out = (within + offsets[..., None]).reshape(x.shape[:-1] + (nb * block,))[..., :b]
    return jnp.moveaxis(out, -1, axis)


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


#: Cells per copy below which :func:`spread_sum` spreads rows over copies of its output on
#: accelerators (a level of one leaf, 256 bins: 16 copies per feature).
SPREAD_CELLS = 4096
#: At most this many copies.
MAX_SPREAD = 32


def _spread_copies(num_segments: int) -> int:
    return int(max(1, min(MAX_SPREAD, SPREAD_CELLS // max(1, num_segments))))


def spread_sum(values, idx, num_segments: int, cells_per_group: Optional[int] = None):
    """``jax.ops.segment_sum(values, idx, num_segments)``, spread over copies of the output on
    accelerators so that atomic adds do not queue."""
    groups_cells = num_segments if cells_per_group is None else cells_per_group
    copies = _spread_copies(groups_cells)

    def plain(values, idx):
        return jax.ops.segment_sum(values, idx, num_segments=num_segments)

    if copies == 1:
        return plain(values, idx)

    def spread(values, idx):
        # cell c of group g, copy r -> (g * R + r) * cells + c; the copies are then added up
        group, cell = idx // groups_cells, idx % groups_cells
        copy = jnp.arange(idx.shape[0], dtype=idx.dtype) % copies
        out = jax.ops.segment_sum(values, (group * copies + copy) * groups_cells + cell,
                                  num_segments=num_segments * copies)
        out = out.reshape((num_segments // groups_cells, copies, groups_cells) + out.shape[1:])
        return out.sum(axis=1, dtype=out.dtype).reshape((num_segments,) + out.shape[3:])

    return _platform_dependent(values, idx, cpu=plain, default=spread)


#: Tests only (``tests/_pure_jax.accelerator_paths``): trace the accelerators' branches on CPU.
_ACCELERATOR_PATHS = False


def _platform_dependent(*args, cpu, default):
    if _ACCELERATOR_PATHS:
        return default(*args)
    return _native.platform_dependent(*args, cpu=cpu, default=default)


def pure_jax_histogram(X_binned, payload, leaf, n_leaves: int, n_bins: int):
    """Sums of ``payload`` per (feature, leaf, bin), ``(F, n_leaves, n_bins, C)``: per feature on
    CPU, one spread scatter on accelerators."""
    cpu = functools.partial(_per_feature_histogram, n_leaves=n_leaves, n_bins=n_bins)
    accel = functools.partial(_all_features_histogram, n_leaves=n_leaves, n_bins=n_bins)
    return _platform_dependent(X_binned, payload, leaf, cpu=cpu, default=accel)


def _all_features_histogram(X_binned, payload, leaf, n_leaves: int, n_bins: int, keep=None):
    """The accelerators' histograms; rows where ``keep`` is False add nothing (their scatter
    indices are out of range, so no atomic add is issued for them)."""
    n_features, n = X_binned.shape
    c = payload.shape[-1]
    cells = n_leaves * n_bins
    idx = ((jnp.arange(n_features, dtype=jnp.int32)[:, None] * n_leaves + leaf.astype(jnp.int32)[None, :])
           * n_bins + X_binned.astype(jnp.int32))
    if keep is not None:
        idx = jnp.where(keep[None, :], idx, n_features * cells)
    idx = idx.reshape(-1)
    rows = jnp.broadcast_to(payload[None], (n_features, n, c)).reshape(n_features * n, c)
    hist = spread_sum(rows, idx, n_features * cells, cells_per_group=cells)
    return hist.reshape(n_features, n_leaves, n_bins, c)


def xla_level_histograms(X_binned, payload, leaf, parent: Optional[jax.Array], n_leaves: int,
                         n_bins: int):
    """The pure-JAX cumulative histograms of one level, by subtraction from this device's ``parent``
    on accelerators (docs/trees.md, "Histograms")."""
    direct = lambda X, p, l, par: prefix_sum(pure_jax_histogram(X, p, l, n_leaves, n_bins), axis=2)
    if parent is None:
        return direct(X_binned, payload, leaf, None)

    def subtracted(X_binned, payload, leaf, parent):
        half = parent.shape[1]
        leaf = leaf.astype(jnp.int32)
        rows = spread_sum(jnp.any(payload != 0, axis=-1).astype(jnp.int32), leaf, 2 * half)
        right_smaller = rows[half:] < rows[:half]
        slot = leaf % half
        in_small = (leaf >= half) == right_smaller[slot]
        small = prefix_sum(_all_features_histogram(X_binned, payload, slot, half, n_bins, keep=in_small),
                           axis=2)
        return siblings(parent, small, right_smaller)

    return _platform_dependent(X_binned, payload, leaf, parent, cpu=direct, default=subtracted)


def siblings(parent, small, right_smaller):
    """A level's ``(F, 2S, B, C)`` histograms from the parents' and the smaller siblings'
    ``(F, S, B, C)`` ones: the larger sibling is ``parent - small``."""
    other = parent - small
    flip = right_smaller[None, :, None, None]
    return jnp.concatenate([jnp.where(flip, other, small), jnp.where(flip, small, other)], axis=1)


def _per_feature_histogram(X_binned, payload, leaf, n_leaves: int, n_bins: int):
    packed_payload, packed = _pack(payload)
    base = leaf.astype(jnp.int32) * n_bins

    def one_feature(col):
        idx = base + col.astype(jnp.int32)
        return jax.ops.segment_sum(packed_payload, idx, num_segments=n_leaves * n_bins)

    hist = lax.map(one_feature, X_binned)
    return _unpack(hist, packed).reshape(X_binned.shape[0], n_leaves, n_bins, payload.shape[-1])


def kernel_threads(axis_name) -> int:
    """Threads per kernel call: the cores shared by the devices rows are sharded over."""
    devices = 1 if axis_name is None else lax.axis_size(axis_name)
    return max(1, _native.cpu_threads() // max(1, devices))


def _native_histogram(X_binned, payload, leaf, n_leaves: int, n_bins: int, axis_name,
                      cumulative: bool = False):
    _native.check_indexable(X_binned.shape[-1], n_leaves, n_bins, payload.shape[-1])
    _native.load()
    out = jax.ShapeDtypeStruct((X_binned.shape[0], n_leaves, n_bins, payload.shape[-1]), jnp.float32)
    call = jax.ffi.ffi_call(_native.HISTOGRAM, out, vmap_method="expand_dims")
    slot = jnp.arange(n_leaves, dtype=jnp.int32)
    return call(X_binned, payload, leaf.astype(jnp.int32), slot,
                n_threads=np.int64(kernel_threads(axis_name)), cumulative=cumulative)


def _native_smaller_sibling(X_binned, payload, leaf, n_slots: int, n_bins: int, axis_name):
    _native.check_indexable(X_binned.shape[-1], n_slots, n_bins, payload.shape[-1])
    _native.load()
    out = (jax.ShapeDtypeStruct((X_binned.shape[0], n_slots, n_bins, payload.shape[-1]), jnp.float32),
           jax.ShapeDtypeStruct((n_slots,), jnp.int32))
    call = jax.ffi.ffi_call(_native.SMALLER_SIBLING, out, vmap_method="expand_dims")
    return call(X_binned, payload, leaf.astype(jnp.int32),
                n_threads=np.int64(kernel_threads(axis_name)), cumulative=True)


def dispatch(X_binned, n_bins: int, native, xla, n_leaves: int = 1, channels: int = 0):
    """``native()`` on CPU when the kernel is built and applies (uint8 bins, indexable sizes),
    ``xla()`` elsewhere."""
    if X_binned is not None and not (X_binned.dtype == jnp.uint8 and n_bins <= 256):
        return xla()
    if X_binned is not None and not _native.indexable(X_binned.shape[-1], n_leaves, n_bins, channels):
        return xla()
    if not _native.available():
        return xla()
    return _native.platform_dependent(cpu=native, default=xla)


#: Histogram subtraction pays when the rows outnumber a level's cells per feature by this factor.
SUBTRACT_ROWS_PER_CELL = 2
#: The same for wide payloads (more than 16 channels), whose kept histograms cost more traffic.
SUBTRACT_ROWS_PER_CELL_WIDE = 8


def subtraction_pays(n_rows: int, n_leaves: int, n_bins: int, channels: int = 2) -> bool:
    """Whether a level of ``n_leaves`` leaves (``> 1``) is built by histogram subtraction
    (``channels``: the payload's, ``2K`` for ``K`` outputs)."""
    per_cell = SUBTRACT_ROWS_PER_CELL if channels <= 16 else SUBTRACT_ROWS_PER_CELL_WIDE
    # The rows' bucket, not their count: a fit padded to its bucket takes the same plan.
    return n_leaves > 1 and rows.bucket(n_rows) >= per_cell * n_leaves * n_bins


def level_plan(n_rows: int, depth: int, n_bins: int, channels: int = 2):
    """Static plan of a tree's levels on one device: ``[(subtract, keep_hist), ...]``."""
    subtract = [subtraction_pays(n_rows, 2**d, n_bins, channels) for d in range(depth)]
    return [(subtract[d], subtract[d + 1] if d + 1 < depth else subtract[d]) for d in range(depth)]


@functools.partial(_compile.jit, static_argnames=("n_leaves", "n_bins", "axis_name"))
def build_histogram(X_binned, payload, leaf, *, n_leaves: int, n_bins: int, axis_name=None):
    """Sums of ``payload (n, C)`` rows per (feature, leaf, bin): ``(F, n_leaves, n_bins, C)``
    float32 from ``(F, n)`` uint8 bins and ``(n,)`` int32 leaves; with ``axis_name`` (rows sharded
    over a mapped axis) ``psum``-ed."""
    payload = payload.astype(jnp.float32)
    hist = dispatch(X_binned, n_bins,
                     lambda: _native_histogram(X_binned, payload, leaf, n_leaves, n_bins, axis_name),
                     lambda: pure_jax_histogram(X_binned, payload, leaf, n_leaves, n_bins),
                     n_leaves, payload.shape[-1])
    if axis_name is not None:
        hist = lax.psum(hist, axis_name)
    return hist


def level_histograms(X_binned, payload, leaf, parent: Optional[jax.Array], *, n_bins: int,
                     axis_name=None):
    """Cumulative histograms of one level, by subtraction from the last level's: ``(hist, local)``,
    summed over ``axis_name`` and this device's own (the next ``parent``; ``None`` at the root).
    Leaves ``j`` and ``j + S`` are the children of ``parent``'s leaf ``j``."""
    payload = payload.astype(jnp.float32)
    n_leaves = 1 if parent is None else 2 * parent.shape[1]

    def native():
        if parent is None:
            return _native_histogram(X_binned, payload, leaf, n_leaves, n_bins, axis_name,
                                     cumulative=True)
        small, right_smaller = _native_smaller_sibling(X_binned, payload, leaf, parent.shape[1],
                                                       n_bins, axis_name)
        return siblings(parent, small, right_smaller == 1)

    xla = lambda: xla_level_histograms(X_binned, payload, leaf, parent, n_leaves, n_bins)
    local = dispatch(X_binned, n_bins, native, xla, n_leaves, payload.shape[-1])
    hist = local if axis_name is None else lax.psum(local, axis_name)
    return hist, local
