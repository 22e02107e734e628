"""Gradient and hessian histograms per (feature, leaf, bin).

The hot path of tree fitting. Two implementations of the same sums:

* **CPU kernel** (``jboost/_native/histogram.cc``, an XLA FFI custom call, used on CPU when it
  was built at install time): rows are compacted once per level, then features are split across
  threads; each feature's sums run in row order on one thread, so the result does not depend on
  the thread count. It skips rows of zero weight (subsampled-out rows cost nothing) and, level
  by level, builds only the smaller sibling of each pair (**histogram subtraction**: the larger
  sibling is the parent's histogram minus the smaller one's). Any number of outputs (payloads
  of 2K channels); sizes it cannot index with 32-bit offsets (:func:`jboost._native.indexable`)
  run in pure JAX.
* **Pure JAX on CPU** (no kernel): a scatter-add per feature (``lax.map`` over features, one
  ``segment_sum`` of the whole payload per feature), which on CPU beats vectorising over features
  because each feature's bins and the payload stay in cache;
  pairs of float32 channels are packed into one complex64 payload so one scatter moves both.
* **Pure JAX on accelerators** (GPU, TPU): one float32 scatter-add over all features at once,
  with the rows of a shallow level spread over copies of its histograms (:func:`spread_sum`) so
  that atomic adds to the same cell do not queue (the CPU's complex64 per-feature scatter would
  be slow there: complex atomics are emulated). Float atomics add in no fixed order: on a GPU the sums, and so near-tied splits, may differ in
  the last bits from run to run (the README's determinism section).

``jax.lax.platform_dependent`` picks the implementation when the program is lowered, so the same
jitted function runs everywhere (in a CPU-only process only the CPU's branches are traced:
:func:`jboost._native.platform_dependent`).
"""

from __future__ import annotations

import functools
from typing import Optional

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from jboost import _compile
from jboost import _native


def prefix_sum(x, axis: int):
    """Inclusive prefix sum along ``axis`` as a two-level blocked cumsum.

    ``jnp.cumsum`` over ``B`` bins lowers to an O(B^2) reduce-window on XLA's CPU backend and a
    log-depth associative scan is slow to compile; cumsums within blocks of 16 plus a cumsum of
    the block totals cost O(16 B) and compile quickly.
    """
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
    """``jax.ops.segment_sum(values, idx, num_segments)`` (``values``: ``(n, ...)``).

    On CPU exactly that. On accelerators, where the sum is a scatter of atomic adds, rows are
    first spread over ``R`` copies of the output (row ``i`` into copy ``i % R``) which are then
    added up, so that the many rows of a small output (a shallow level's histogram, a tree's
    leaf sums) do not queue on the same cells; ``R`` is static, from the cells per group
    (``cells_per_group``, default ``num_segments``: one group).
    """
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


#: Tests only (``tests/_pure_jax.accelerator_paths``): trace the accelerators' pure-JAX branches
#: on the CPU too.
_ACCELERATOR_PATHS = False


def _platform_dependent(*args, cpu, default):
    if _ACCELERATOR_PATHS:
        return default(*args)
    return _native.platform_dependent(*args, cpu=cpu, default=default)


def pure_jax_histogram(X_binned, payload, leaf, n_leaves: int, n_bins: int):
    """Sums of ``payload`` per (feature, leaf, bin), ``(F, n_leaves, n_bins, C)``: per feature on
    CPU, one spread scatter on accelerators (see the module's docstring)."""
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
    """The pure-JAX cumulative histograms of one level (``(F, n_leaves, B, C)``).

    On CPU every leaf is built directly. On accelerators, given the previous level's cumulative
    histograms ``parent`` (``(F, n_leaves / 2, B, C)``, this device's), only the sibling of each
    pair with fewer rows of non-zero payload is scattered; the other is ``parent - sibling``
    (as the CPU kernel does). The atomic adds, which bound the accelerators' histograms, fall
    to the smaller siblings' rows: at most half of them.
    """
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
    """``native()`` on CPU when the kernel is built and applies (uint8 bins, sizes it can index:
    see :func:`jboost._native.indexable`), ``xla()`` elsewhere; ``lax.platform_dependent``
    chooses when the program is lowered."""
    if X_binned is not None and not (X_binned.dtype == jnp.uint8 and n_bins <= 256):
        return xla()
    if X_binned is not None and not _native.indexable(X_binned.shape[-1], n_leaves, n_bins, channels):
        return xla()
    if not _native.available():
        return xla()
    return _native.platform_dependent(cpu=native, default=xla)


#: Histogram subtraction at a level of ``L`` leaves pays when the rows outnumber the level's
#: histogram cells per feature by this factor: it saves building about half the rows but reads
#: the parent's and writes the level's ``L x B`` cells per feature (so small data builds its deep
#: levels directly, large data subtracts throughout).
SUBTRACT_ROWS_PER_CELL = 2
#: The same for wide payloads (more than 16 channels: 9 or more outputs), whose kept histograms
#: (``F x L x B x 2K`` floats per level) cost memory traffic that the rows they save do not
#: repay as soon (mostly the last level's histograms, kept only to read the leaf sums off them).
SUBTRACT_ROWS_PER_CELL_WIDE = 8


def subtraction_pays(n_rows: int, n_leaves: int, n_bins: int, channels: int = 2) -> bool:
    """Whether a level of ``n_leaves`` leaves (``> 1``) is built by histogram subtraction
    (``channels``: the payload's, ``2K`` for ``K`` outputs)."""
    per_cell = SUBTRACT_ROWS_PER_CELL if channels <= 16 else SUBTRACT_ROWS_PER_CELL_WIDE
    return n_leaves > 1 and n_rows >= per_cell * n_leaves * n_bins


def level_plan(n_rows: int, depth: int, n_bins: int, channels: int = 2):
    """Static plan of a tree's levels on one device: ``[(subtract, keep_hist), ...]`` per level.

    Level ``d`` (``2**d`` leaves) is built by subtraction when :func:`subtraction_pays`; it keeps
    its histograms when the next level subtracts from them, and the last level when they are
    cheap next to the rows (the leaf sums are then read off them, else summed over the rows).
    ``channels``: the payload's (``2K``); up to 16 (the default, 2) the plan does not depend on it.
    """
    subtract = [subtraction_pays(n_rows, 2**d, n_bins, channels) for d in range(depth)]
    return [(subtract[d], subtract[d + 1] if d + 1 < depth else subtract[d]) for d in range(depth)]


@functools.partial(_compile.jit, static_argnames=("n_leaves", "n_bins", "axis_name"))
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
    """Cumulative histograms of one level of an oblivious tree, by subtraction from the last level.

    The result holds inclusive prefix sums over the bins (``cum[..., t, :]`` = sums of bins
    ``<= t``), which is what :func:`jboost.trees.splits.split_gains_cumulative` needs; prefix sums are
    linear, so subtraction and ``psum`` apply to them unchanged. Leaves ``j`` and ``j + S``
    (``S = 2**d`` at level ``d``) are the children of the previous level's leaf ``j``. With the CPU
    kernel and on accelerators only the sibling with fewer rows of non-zero weight is built; the
    other is ``parent - sibling``. The CPU without the kernel builds every leaf directly.

    Args:
      X_binned, payload, leaf: as in :func:`build_histogram`; ``leaf`` in ``[0, 2 * S)``.
      parent: this device's ``(F, S, B, C)`` cumulative histograms of the previous level (before
        any ``psum``), or ``None`` at the first level (one leaf).
      n_bins: static number of bins.
      axis_name: mapped axis rows are sharded over (the returned ``hist`` is ``psum``-ed).

    Returns:
      ``(hist, local)``: the level's ``(F, L, B, C)`` cumulative histograms summed over devices,
      and this device's own (to pass as ``parent`` to the next level).
    """
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
