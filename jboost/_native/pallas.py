"""Pallas kernels for the accelerator path (Triton backend): histograms as one-hot matmuls,
deterministic quantised histograms and split gains. Tested in interpret mode and lowered to Triton
IR; **not wired into** :func:`jboost.fit`. ``interpret=None``: interpret mode when JAX's default
backend is the CPU. See docs/native.md ("Pallas kernels")."""

from __future__ import annotations

import functools
from typing import Optional

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.experimental import pallas as pl
from jax.experimental.pallas import triton as pltriton

from jboost import _compile
from jboost._native import newton

#: Rows per block: the contraction dimension of the one-hot matmul (see docs/native.md).
BLOCK_ROWS = 128
#: Histogram cells (``leaf * n_bins + bin``) per block: the matmul's M dimension.
BLOCK_CELLS = 128
#: Smallest dimension of a Triton ``tl.dot`` operand (cells and channels are padded to it).
MIN_DOT = 16
#: Warps per Triton program.
NUM_WARPS = 4
#: The quantised absolute sum of a channel is at most ``2**QUANT_BITS`` (plus half a unit per row).
QUANT_BITS = 30
#: int32 values are summed as ``N_LIMBS`` int8 limbs of ``LIMB_BITS`` bits (see
#: :func:`quantized_histogram`): 5 x 7 bits cover the 32 bits of two's complement.
LIMB_BITS = 7
N_LIMBS = 5


def _next_pow2(x: int) -> int:
    return 1 << max(0, int(x) - 1).bit_length()


def _use_interpret(interpret: Optional[bool]) -> bool:
    """``interpret=None``: interpret mode exactly when JAX's default backend is the CPU (which has
    no Pallas GPU lowering)."""
    return jax.default_backend() == "cpu" if interpret is None else bool(interpret)


def _compiler_params():
    # Selects the Triton backend on CUDA: without it JAX 0.10 lowers pallas_call to Mosaic GPU.
    return pltriton.CompilerParams(num_warps=NUM_WARPS)


def _check_block(name: str, size: int, least: int):
    if size < least or size & (size - 1):
        raise ValueError(f"{name} must be a power of two >= {least} (Triton), got {size}")


def _block_sums(bins, leaf, payload, cell0, *, n_leaves: int, n_bins: int, block_cells: int,
                acc_dtype):
    """One row block's sums into cells ``[cell0, cell0 + block_cells)``: ``one_hot.T @ payload``."""
    bins = jnp.minimum(bins.astype(jnp.int32), n_bins - 1)
    valid = (leaf >= 0) & (leaf < n_leaves)
    cell = jnp.where(valid, leaf * n_bins + bins - cell0, -1)
    ids = lax.broadcasted_iota(jnp.int32, (bins.shape[0], block_cells), 1)
    one_hot = (cell[:, None] == ids).astype(payload.dtype)
    return lax.dot_general(one_hot, payload, (((0,), (0,)), ((), ())),
                           precision=lax.Precision.HIGHEST, preferred_element_type=acc_dtype)


def _loop_kernel(x_ref, leaf_ref, p_ref, out_ref, *, n_row_blocks: int, block_rows: int,
                 **kw):
    """Grid (feature, cell block); the row blocks are looped over inside the program."""
    cell0 = pl.program_id(1) * kw["block_cells"]

    def body(i, acc):
        rows = pl.ds(pl.multiple_of(i * block_rows, block_rows), block_rows)
        return acc + _block_sums(x_ref[rows], leaf_ref[rows], p_ref[rows, :], cell0, **kw)

    acc = lax.fori_loop(0, n_row_blocks, body, jnp.zeros(out_ref.shape, kw["acc_dtype"]))
    out_ref[...] = acc


def _grid_kernel(x_ref, leaf_ref, p_ref, out_ref, **kw):
    """Grid (feature, cell block, row block); the output block is revisited along the rows."""

    @pl.when(pl.program_id(2) == 0)
    def _():
        out_ref[...] = jnp.zeros(out_ref.shape, out_ref.dtype)

    cell0 = pl.program_id(1) * kw["block_cells"]
    out_ref[...] += _block_sums(x_ref[...], leaf_ref[...], p_ref[...], cell0, **kw)


def _histogram_call(X_binned, payload, leaf, *, n_leaves: int, n_bins: int, acc_dtype,
                    interpret: bool, block_rows: int, block_cells: int, rows_in_grid: bool):
    """``(F, cells_padded, C_padded)`` sums of the (padded) payload per (feature, cell)."""
    _check_block("block_rows", block_rows, MIN_DOT)
    _check_block("block_cells", block_cells, MIN_DOT)
    n_features, n = X_binned.shape
    c = payload.shape[1]
    cells = n_leaves * n_bins
    block_cells = min(block_cells, _next_pow2(max(cells, MIN_DOT)))
    n_cell_blocks = -(-cells // block_cells)
    n_row_blocks = max(1, -(-n // block_rows))
    n_pad = n_row_blocks * block_rows
    c_pad = _next_pow2(max(c, MIN_DOT))
    # Padded rows: bin 0, no leaf (n_leaves is out of range) and zero payload.
    X_binned = jnp.pad(X_binned, ((0, 0), (0, n_pad - n)))
    leaf = jnp.pad(leaf.astype(jnp.int32), (0, n_pad - n), constant_values=n_leaves)
    payload = jnp.pad(payload, ((0, n_pad - n), (0, c_pad - c)))
    kw = dict(n_leaves=n_leaves, n_bins=n_bins, block_cells=block_cells, acc_dtype=acc_dtype)
    out_shape = jax.ShapeDtypeStruct((n_features, n_cell_blocks * block_cells, c_pad), acc_dtype)
    if rows_in_grid:
        kernel = functools.partial(_grid_kernel, **kw)
        grid = (n_features, n_cell_blocks, n_row_blocks)
        in_specs = [pl.BlockSpec((None, block_rows), lambda f, b, r: (f, r)),
                    pl.BlockSpec((block_rows,), lambda f, b, r: (r,)),
                    pl.BlockSpec((block_rows, c_pad), lambda f, b, r: (r, 0))]
        out_specs = pl.BlockSpec((None, block_cells, c_pad), lambda f, b, r: (f, b, 0))
    else:
        kernel = functools.partial(_loop_kernel, n_row_blocks=n_row_blocks,
                                   block_rows=block_rows, **kw)
        grid = (n_features, n_cell_blocks)
        in_specs = [pl.BlockSpec((None, n_pad), lambda f, b: (f, 0)),
                    pl.BlockSpec((n_pad,), lambda f, b: (0,)),
                    pl.BlockSpec((n_pad, c_pad), lambda f, b: (0, 0))]
        out_specs = pl.BlockSpec((None, block_cells, c_pad), lambda f, b: (f, b, 0))
    return pl.pallas_call(kernel, out_shape=out_shape, grid=grid, in_specs=in_specs,
                          out_specs=out_specs, interpret=interpret,
                          compiler_params=None if interpret else _compiler_params(),
                          name="jboost_histogram")(X_binned, leaf, payload)


_HIST_STATIC = ("n_leaves", "n_bins", "interpret", "block_rows", "block_cells", "rows_in_grid")


@functools.partial(_compile.jit, static_argnames=_HIST_STATIC)
def histogram(X_binned, payload, leaf, *, n_leaves: int, n_bins: int,
              interpret: Optional[bool] = None, block_rows: int = BLOCK_ROWS,
              block_cells: int = BLOCK_CELLS, rows_in_grid: bool = False):
    """Sums of ``payload (n, C)`` rows per (feature, leaf, bin), ``(F, n_leaves, n_bins, C)``, by
    one-hot matmuls in a Pallas kernel: :func:`jboost.trees.histograms.build_histogram`'s sums up to
    float32 summation order. ``block_rows``, ``block_cells``: powers of two >= 16; ``rows_in_grid``:
    the row blocks on the last grid axis, for sequential backends only (docs/native.md,
    "Schedules")."""
    n_features, c = X_binned.shape[0], payload.shape[1]
    out = _histogram_call(X_binned, payload.astype(jnp.float32), leaf, n_leaves=n_leaves,
                          n_bins=n_bins, acc_dtype=jnp.float32,
                          interpret=_use_interpret(interpret), block_rows=block_rows,
                          block_cells=block_cells, rows_in_grid=rows_in_grid)
    return out[:, : n_leaves * n_bins, :c].reshape(n_features, n_leaves, n_bins, c)


def quantize_payload(payload):
    """Per-channel int32 quantisation of finite ``payload`` ``(n, C)``: ``(q, scale (C,))``
    (docs/native.md, "Quantised histograms")."""
    p = payload.astype(jnp.float32)
    n = p.shape[0]
    a = jnp.abs(p)
    # n * max|p| < 2**(e_max + ceil(log2 n)), in integers: no float32 overflow.
    e = jnp.frexp(jnp.max(a, axis=0, initial=0.0))[1] + max(0, n - 1).bit_length()
    if n <= 2**23:  # recursive float32 summation of n >= 0 terms: relative error <= n * 2**-23
        by_sum = jnp.sum(a, axis=0) * np.float32((1 + n * 2.0**-23) * (1 + 2.0**-20))
        e = jnp.where(jnp.isfinite(by_sum), jnp.minimum(e, jnp.frexp(by_sum)[1]), e)
    e = jnp.clip(e - QUANT_BITS, -126, 127)  # 2**-126: the smallest normal float32
    scale = jnp.ldexp(jnp.ones((p.shape[1],), jnp.float32), e)
    return jnp.round(p / scale).astype(jnp.int32), scale


def _limbs(q):
    """``(n, C)`` int32 -> ``(n, N_LIMBS * C)`` int8: column ``j * C + c`` holds bits
    ``[7j, 7j + 7)`` of ``q[:, c]``'s two's complement (0..127, so a non-negative int8)."""
    parts = [lax.shift_right_logical(q, jnp.int32(LIMB_BITS * j)) & jnp.int32(2**LIMB_BITS - 1)
             for j in range(N_LIMBS)]
    return jnp.concatenate(parts, axis=1).astype(jnp.int8)


def _combine_limbs(sums, c: int):
    """``(..., N_LIMBS * C)`` int32 limb sums -> ``(..., C)`` int32 ``sum_j sums_j << 7j``: exact,
    since the cell's sum is in int32's range and int32 arithmetic wraps modulo ``2**32``."""
    out = sums[..., :c]
    for j in range(1, N_LIMBS):
        out = out + lax.shift_left(sums[..., j * c:(j + 1) * c], jnp.int32(LIMB_BITS * j))
    return out


@functools.partial(_compile.jit, static_argnames=_HIST_STATIC)
def quantized_histogram(X_binned, payload, leaf, *, n_leaves: int, n_bins: int,
                        interpret: Optional[bool] = None, block_rows: int = BLOCK_ROWS,
                        block_cells: int = BLOCK_CELLS, rows_in_grid: bool = False):
    """Deterministic histograms ``(hist_int (F, n_leaves, n_bins, C) int32, scale (C,))``: the
    quantised payload summed exactly in int32 by int8 limb matmuls, bitwise the same under any row
    order, block sizes and schedule (docs/native.md, "Quantised histograms"); as
    :func:`histogram`."""
    n_features, c = X_binned.shape[0], payload.shape[1]
    q, scale = quantize_payload(payload)
    sums = _histogram_call(X_binned, _limbs(q), leaf, n_leaves=n_leaves, n_bins=n_bins,
                           acc_dtype=jnp.int32, interpret=_use_interpret(interpret),
                           block_rows=block_rows, block_cells=block_cells,
                           rows_in_grid=rows_in_grid)
    hist = _combine_limbs(sums[:, : n_leaves * n_bins, : N_LIMBS * c], c)
    return hist.reshape(n_features, n_leaves, n_bins, c), scale


def dequantize(hist_int, scale):
    """Float32 histograms from :func:`quantized_histogram`'s ``(hist_int, scale)``."""
    return hist_int.astype(jnp.float32) * scale.astype(jnp.float32)


def _gains_kernel(params_ref, cum_ref, out_ref, *, n_bins: int, missing: bool):
    """One feature: ``cum_ref`` ``(2, L, B)`` (gradient, hessian), ``out_ref`` ``(2, B)``."""
    l2, min_child_weight = params_ref[0], params_ref[1]
    g, h = cum_ref[0], cum_ref[1]                               # (L, B) left sums
    total_g = cum_ref[0, :, pl.ds(n_bins - 1, 1)]               # (L, 1)
    total_h = cum_ref[1, :, pl.ds(n_bins - 1, 1)]
    parent = newton.newton_score(total_g, total_h, l2)

    def direction(left_g, left_h):
        right_g, right_h = total_g - left_g, total_h - left_h
        leaf_gain = (newton.newton_score(left_g, left_h, l2)
                     + newton.newton_score(right_g, right_h, l2) - parent)
        ok = (left_h >= min_child_weight) & (right_h >= min_child_weight)
        return jnp.sum(jnp.where(ok, leaf_gain, 0.0), axis=0)  # (B,)

    # Direction 0: missing goes left; direction 1: missing goes right.
    miss_g = total_g - cum_ref[0, :, pl.ds(n_bins - 2, 1)]
    miss_h = total_h - cum_ref[1, :, pl.ds(n_bins - 2, 1)]
    out_ref[0] = direction(g + miss_g, h + miss_h)
    if missing:
        out_ref[1] = direction(g, h)
    else:
        out_ref[1] = jnp.full((g.shape[1],), -jnp.inf, jnp.float32)


@functools.partial(_compile.jit, static_argnames=("missing", "interpret"))
def split_gains(cum_hist, l2, min_child_weight, *, missing: bool = True,
                interpret: Optional[bool] = None):
    """Newton split gains ``(F, B - 1, 2)`` of one output from ``(F, L, B, 2)`` cumulative
    histograms, as :func:`jboost.trees.splits.split_gains_cumulative`, one program per feature."""
    n_features, n_leaves, n_bins, c = cum_hist.shape
    if c != 2:
        raise ValueError(f"split_gains takes one output (2 channels), got {c} channels")
    if n_bins < 2:
        return jnp.zeros((n_features, 0, 2), jnp.float32)
    l_pad, b_pad = _next_pow2(n_leaves), _next_pow2(n_bins)
    # (F, 2, L, B), padded with zero leaves (gain exactly 0) and bins (results dropped).
    cum = jnp.moveaxis(cum_hist.astype(jnp.float32), 3, 1)
    cum = jnp.pad(cum, ((0, 0), (0, 0), (0, l_pad - n_leaves), (0, b_pad - n_bins)))
    params = jnp.stack([jnp.asarray(l2, jnp.float32).reshape(()),
                        jnp.asarray(min_child_weight, jnp.float32).reshape(())])
    interpret = _use_interpret(interpret)
    out = pl.pallas_call(
        functools.partial(_gains_kernel, n_bins=n_bins, missing=missing),
        out_shape=jax.ShapeDtypeStruct((n_features, 2, b_pad), jnp.float32),
        grid=(n_features,),
        in_specs=[pl.BlockSpec((2,), lambda f: (0,)),
                  pl.BlockSpec((None, 2, l_pad, b_pad), lambda f: (f, 0, 0, 0))],
        out_specs=pl.BlockSpec((None, 2, b_pad), lambda f: (f, 0, 0)),
        interpret=interpret, compiler_params=None if interpret else _compiler_params(),
        name="jboost_split_gains")(params, cum)
    return jnp.moveaxis(out[:, :, : n_bins - 1], 1, 2)
