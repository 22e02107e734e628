"""Row-count buckets: the row counts a fit's training rows are padded to (zero-weight rows), so
that nearby row counts share one compiled program, and the sums over rows that such padding
leaves bitwise unchanged. See docs/compile.md ("Row buckets").

A sum over rows in XLA adds its terms in an order that depends on the row count (vector lanes,
tiling), so padding would move the last bits of a baseline or a loss. :func:`row_sum` adds the
rows in blocks of :data:`BLOCK` (each block by a fixed tree of halvings) and the blocks' sums in
order: rows appended with zero terms add ``+-0.0`` to a running sum, which leaves it as it was.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from jboost import checks

#: Fits of at most this many rows are padded to a bucket (above it a fit spends little of its
#: time compiling, and padding would cost time on every round).
MAX_BUCKETED_ROWS = 1 << 16
#: The fewest rows a bucket holds.
SMALLEST_BUCKET = 256
#: Buckets per octave of row counts up to :data:`FINE_FROM` rows (at most a quarter of a bucket is
#: padding).
BUCKETS_PER_OCTAVE = 4
#: Buckets per octave above :data:`FINE_FROM` rows (at most a sixteenth of a bucket is padding:
#: padding costs time on every round).
FINE_BUCKETS_PER_OCTAVE = 16
#: The row count up to which there are :data:`BUCKETS_PER_OCTAVE` buckets per octave.
FINE_FROM = 1 << 13
#: Rows summed together by a fixed tree of halvings in :func:`row_sum` (a power of two).
BLOCK = 256


def bucket(n: int) -> int:
    """The row count ``>= n`` a fit of ``n`` rows runs on: :data:`SMALLEST_BUCKET` for a few rows,
    ``n`` itself above :data:`MAX_BUCKETED_ROWS`, else the next multiple of
    ``2^(ceil(log2 n) - 1) / BUCKETS_PER_OCTAVE`` (``FINE_BUCKETS_PER_OCTAVE`` above
    :data:`FINE_FROM` rows): 1,400 and 1,500 rows share 1,536. A bucket is its own bucket."""
    n = int(n)
    if n > MAX_BUCKETED_ROWS:
        return n
    if n <= SMALLEST_BUCKET:
        return SMALLEST_BUCKET
    per_octave = BUCKETS_PER_OCTAVE if n <= FINE_FROM else FINE_BUCKETS_PER_OCTAVE
    step = (1 << ((n - 1).bit_length() - 1)) // per_octave
    return -(-n // step) * step


def pad(a, size: int, value=0):
    """``a`` with its rows (axis 0) padded to ``size`` with ``value`` (``"edge"``: the last row
    repeated, so that padded labels stay valid labels of the loss); ``a`` itself when it has
    ``size`` rows, ``None`` for ``None``. Concrete arrays are padded on the host (no program
    compiled per row count)."""
    if a is None or a.shape[0] == size:
        return a
    xp = jnp if checks.is_traced(a) else np
    a = a if xp is jnp else np.asarray(a)
    extra = (size - a.shape[0],) + a.shape[1:]
    tail = xp.broadcast_to(a[-1:], extra) if value == "edge" else xp.full(extra, value, a.dtype)
    out = xp.concatenate([a, tail.astype(a.dtype)], axis=0)
    return out if xp is jnp else jax.device_put(out)


def pad_columns(a, size: int):
    """``(F, n)`` binned features with ``size`` columns (rows of the table), the new ones bin 0."""
    if a.shape[1] == size:
        return a
    return jnp.swapaxes(pad(jnp.swapaxes(a, 0, 1), size), 0, 1) if checks.is_traced(a) else \
        jax.device_put(np.pad(np.asarray(a), ((0, 0), (0, size - a.shape[1]))))


def row_sum(x):
    """The sum of ``x`` over its rows (axis 0), bitwise the same when rows of zeros are appended
    (for at most :data:`MAX_BUCKETED_ROWS` rows; above, ``jnp.sum``). ``-0.0`` sums give ``+0.0``."""
    n = x.shape[0]
    if n > MAX_BUCKETED_ROWS:
        return jnp.sum(x, axis=0) + 0.0
    blocks = -(-n // BLOCK) if n else 1
    x = jnp.concatenate([x, jnp.zeros((blocks * BLOCK - n,) + x.shape[1:], x.dtype)], axis=0)
    x = x.reshape((blocks, BLOCK) + x.shape[1:])
    while x.shape[1] > 1:  # a fixed tree within each block: elementwise adds
        half = x.shape[1] // 2
        x = x[:, :half] + x[:, half:]
    x = x[:, 0]
    total = lax.fori_loop(1, blocks, lambda i, acc: acc + x[i], x[0])  # the blocks in order
    return total + 0.0


@jax.custom_vjp
def broadcast(c, x):
    """``c`` ``(K,)`` repeated over the rows of ``x`` ``(n, ...)``: ``(n, K)``, whose gradient
    sums the rows by :func:`row_sum` (the transpose of ``jnp.broadcast_to``, a plain sum, would
    not be bitwise the same after padding)."""
    return jnp.broadcast_to(c, (x.shape[0],) + c.shape)


def _broadcast_fwd(c, x):
    return broadcast(c, x), x


def _broadcast_bwd(x, ct):
    return row_sum(ct), jnp.zeros_like(x)


broadcast.defvjp(_broadcast_fwd, _broadcast_bwd)
