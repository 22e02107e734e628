"""Fitting many models together: chunks of ``vmap``-ed models, and the memory estimates that
size the chunks (sweeps, forests, bagged boosters, ECOC bits)."""

from __future__ import annotations

import time

from typing import Optional

import jax
import jax.numpy as jnp
from jax import lax

from jboost import _native
from jboost import histograms

# Default memory budget of one chunk of models, per device (bytes).
DEFAULT_CPU_BUDGET = 1 << 30
# On CPU the kernels of a chunk's models run side by side (whole models spread over the kernel's
# threads, and the first level of a tree built for up to 8 models in one pass over the bins), so
# batching pays, up to a point: measured on 2 cores (2 host devices, spam, 80 models, 100 rounds,
# depth 6), 88-99 ms per model with 8 models per device, 105-115 with 4 (129-133 with 16, whose
# last chunk was half padding); on 100k x 50, 0.89-0.91 s per model with 4 or 8. Accelerators
# take as many models as the memory budget allows.
DEFAULT_CPU_MODELS_PER_DEVICE = 8


def map_in_chunks(fn, n_items: int, chunk_size: int, progress: Optional[str] = None):
    """``fn`` over ``arange(n_items)``: ``lax.map`` over chunks, each chunk one ``vmap``.

    The items are padded up to a whole number of equal chunks (the extra items are computed
    and dropped; fewer than the number of chunks), so only one chunk shape is compiled.
    ``progress``: a name (e.g. ``"forest: trees"``); then a line with the items done, the elapsed
    and the estimated remaining time is printed on the host as each chunk finishes
    (``jax.debug.callback``, ordered; not under an outer ``jax.vmap``).
    """
    n_chunks = -(-n_items // chunk_size)
    size = -(-n_items // n_chunks)
    idx = jnp.arange(n_chunks * size).reshape(n_chunks, size)
    body = jax.vmap(fn)
    if progress is not None:
        report = _ProgressLine(progress, n_items, n_chunks, size)
        inner = body

        def body(chunk):
            jax.debug.callback(report.start, chunk[0], ordered=True)
            out = inner(chunk)
            done = sum(jnp.sum(leaf.reshape(-1)[:1].astype(jnp.float32))
                       for leaf in jax.tree_util.tree_leaves(out))  # after the chunk's work
            jax.debug.callback(report.done, chunk[0], done, ordered=True)
            return out

    out = lax.map(body, idx)
    # The explicit size (not -1): an output with a zero-sized axis (an empty validation curve)
    # has no -1 to infer.
    return jax.tree_util.tree_map(
        lambda a: a.reshape((a.shape[0] * a.shape[1],) + a.shape[2:])[:n_items], out)


class _ProgressLine:
    """The host side of :func:`map_in_chunks`'s progress lines (real time between chunks)."""

    def __init__(self, name: str, n_items: int, n_chunks: int, size: int):
        self.name, self.n_items, self.n_chunks, self.size = name, n_items, n_chunks, size
        self.t0 = None

    def start(self, first) -> None:
        if int(first) == 0:
            self.t0 = time.perf_counter()

    def done(self, first, _) -> None:
        chunk = int(first) // self.size + 1
        elapsed = time.perf_counter() - (self.t0 or time.perf_counter())
        left = elapsed / chunk * (self.n_chunks - chunk)
        print(f"[jboost] {self.name} {min(chunk * self.size, self.n_items)}/{self.n_items} "
              f"(chunk {chunk}/{self.n_chunks})  {elapsed:.1f}s elapsed, ~{left:.1f}s left", flush=True)


def model_bytes(n_samples: int, n_features: int, depth: int, n_bins: int, n_outputs: int = 1,
                n_rounds: int = 100, trees_per_round: int = 1, keep_trees: bool = False,
                fused: bool = False) -> int:
    """Estimated peak device memory of ONE model of the sweep (bytes).

    The largest live arrays are the level histograms and the per-row state (raw scores,
    gradients, hessians, weights, leaf indices), then the outputs (validation/training curves,
    and the trees when kept). Pure JAX (``fused=False``: GPU, TPU, or CPU without the kernel)
    materialises every level's cumulative histograms, ``F x L x B x 2K`` float32, and the split
    search's fused temporaries: about three last-level histograms' worth (XLA's memory analysis
    measured 1.4-2.5 plus the rows). The CPU kernel's fused levels (``fused=True``) only
    materialise the split gains (``F x (B - 1) x 2``) and the histograms kept for histogram
    subtraction (:func:`jboost.histograms.level_plan`): the previous level's and this one's.
    """
    k = int(n_outputs)
    cell = n_features * n_bins * 2 * k * 4  # one leaf's histograms over all features, bytes
    if fused:
        plan = histograms.level_plan(n_samples, depth, n_bins, channels=2 * k)
        live = [cell * ((2**d if keep else 0) + (2 ** (d - 1) if subtract else 0))
                for d, (subtract, keep) in enumerate(plan)]
        hist = max(live, default=0) + n_features * n_bins * 2 * 4
    else:
        hist = 3 * cell * 2 ** max(int(depth) - 1, 0)
    rows = n_samples * (10 * k + 10) * 4
    out = 2 * n_rounds * 4 + (trees_bytes(depth, k, n_rounds, trees_per_round) if keep_trees else 0)
    return int(hist + rows + out)


def trees_bytes(depth: int, n_outputs: int, n_rounds: int, trees_per_round: int = 1) -> int:
    """Bytes of one boosted model's trees: per tree ``depth`` features, bins, thresholds and
    gains, and ``2^depth x K`` float32 leaf values."""
    return int((4 * 4 * depth + 2**depth * int(n_outputs) * 4) * trees_per_round * n_rounds)


def default_budget(device) -> int:
    if device.platform == "cpu":
        return DEFAULT_CPU_BUDGET
    try:
        limit = device.memory_stats()["bytes_limit"]
        return int(0.5 * limit)
    except Exception:  # noqa: BLE001 - a backend without memory_stats
        return 4 << 30


def auto_chunk_size(per_model_bytes: int, n_models: int, device, memory_budget: Optional[int] = None,
                    max_models: Optional[int] = None) -> int:
    """Models per device in one chunk: as many as ``memory_budget`` holds, at most ``max_models``
    (default: ``DEFAULT_CPU_MODELS_PER_DEVICE`` on CPU, no limit elsewhere) and ``n_models``,
    at least one; then evened out over the chunks that takes (20 models at most 8 per chunk:
    chunks of 7, the last padded by one, rather than 8, 8 and 4 padded by 4)."""
    budget = default_budget(device) if memory_budget is None else int(memory_budget)
    size = max(1, budget // max(per_model_bytes, 1))
    if max_models is None and device.platform == "cpu":
        max_models = DEFAULT_CPU_MODELS_PER_DEVICE
    if max_models is not None:
        size = min(size, int(max_models))
    size = int(max(1, min(size, n_models)))
    n_chunks = -(-max(n_models, 1) // size)
    return -(-max(n_models, 1) // n_chunks)


# Temporary bytes of one forest tree's fit per byte of its deepest histogram when the histograms
# are materialised (pure JAX: GPU, TPU, or CPU without the kernel): ``temp_size_in_bytes`` of
# ``jax.jit(fit_forest_binned).lower(...).compile().memory_analysis()`` divided by
# ``chunk_size * m * 2**(depth-1) * n_bins * C * 4`` was 2.56-2.62 for depths 10 and 14, m = 7 or
# 57, 32 bins, chunks of 1 and 4 (spam's shapes, two classes; trees grown by tree.fit_tree). With
# the fused CPU kernel no histogram of a subset level is materialised: the same programs' temporaries
# were 0.29-0.47 MB per tree (0.004-0.31 of the deepest histogram), about ``3 * depth`` int32 per
# row (levels' leaves, gathered bins) plus the histograms kept for subtraction (bagged trees).
FOREST_HIST_OVERHEAD = 2.6
FOREST_ROW_WORDS_PER_LEVEL = 3


def forest_tree_bytes(n_eligible: int, depth: int, n_bins: int, n_outputs: int, n_samples: int,
                      fused: bool = False, n_features: Optional[int] = None) -> int:
    """Estimated device memory of one forest tree's fit (bytes).

    Args:
      n_eligible: features per level ``m``; ``n_features`` (default ``m``) the total ``F``.
      n_outputs: the forest's K (two classes are fitted as one output).
      fused: the CPU kernel's fused levels (no level histogram materialised, except those kept
        for histogram subtraction when ``m == F``); ``False``: pure JAX, which materialises the
        deepest histogram and ``FOREST_HIST_OVERHEAD`` times it in temporaries.
    """
    k = 1 if n_outputs == 2 else n_outputs
    rows = n_samples * (2 * k + 4) * 4
    if not fused:
        hist = n_eligible * 2 ** max(depth - 1, 0) * n_bins * 2 * k * 4
        return int(FOREST_HIST_OVERHEAD * hist + rows)
    n_features = n_eligible if n_features is None else n_features
    kept = 0
    if n_eligible >= n_features:  # every feature at every level: fit_tree subtracts where it pays
        cell = n_features * n_bins * 2 * k * 4
        plan = histograms.level_plan(n_samples, depth, n_bins, channels=2 * k)
        kept = max([cell * ((2**d if keep else 0) + (2 ** (d - 1) if subtract else 0))
                    for d, (subtract, keep) in enumerate(plan)], default=0)
    return int(rows + n_samples * 4 * FOREST_ROW_WORDS_PER_LEVEL * depth + kept)


def chunk_size_for_budget(n_eligible: int, depth: int, n_bins: int, n_outputs: int, n_samples: int,
                          budget_bytes: Optional[int] = None, fused: bool = False,
                          n_features: Optional[int] = None) -> int:
    """Number of forest bags to fit together (one ``vmap``) so that their arrays fit in
    ``budget_bytes`` (default :data:`DEFAULT_CPU_BUDGET`): the budget over
    :func:`forest_tree_bytes`, at least 1."""
    budget = DEFAULT_CPU_BUDGET if budget_bytes is None else int(budget_bytes)
    per_tree = forest_tree_bytes(n_eligible, depth, n_bins, n_outputs, n_samples, fused, n_features)
    return max(1, int(budget // per_tree))


def kernel_fits(device) -> bool:
    """Whether fits on ``device`` run jboost's fused CPU kernels (a CPU device, kernels built)."""
    return device.platform == "cpu" and _native.available()


def forest_fused(device, n_samples: int, depth: int, n_bins: int, n_outputs: int) -> bool:
    """Whether a forest's trees on ``device`` are grown by the fused CPU kernels: a CPU device
    with the kernels built (:func:`kernel_fits`), and sizes the kernels can index
    (:func:`jboost._native.indexable`; larger ones run in pure JAX)."""
    k = 1 if n_outputs == 2 else int(n_outputs)
    return kernel_fits(device) and _native.indexable(n_samples, 1 << max(depth - 1, 0), n_bins, 2 * k)


def kernel_scratch_bytes(depth: int, n_bins: int, channels: int, n_features: int) -> int:
    """A lower bound of the scratch memory of the fused level kernel at the deepest level
    (bytes): each of its threads keeps about three of one feature's level histograms
    ``2^(depth-1) x n_bins x channels`` float32 (``jboost/_native/level.cc``: the features built
    per pass and the full level), and it uses at most one thread per feature."""
    threads = min(_native.cpu_threads(), max(int(n_features), 1))
    return int(3 * (1 << max(depth - 1, 0)) * n_bins * channels * 4 * threads)


def forest_chunk_size(n_eligible: int, n_features: int, depth: int, n_bins: int, n_outputs: int,
                      n_samples: int, n_trees: int, memory_budget: Optional[int] = None,
                      device=None) -> int:
    """Forest bags per chunk on ``device`` (default: the first device): :func:`auto_chunk_size` of
    :func:`forest_tree_bytes` (fused where :func:`forest_fused`), the policy of every batch of
    models (on CPU at most :data:`DEFAULT_CPU_MODELS_PER_DEVICE` per chunk, chunks evened out)."""
    device = jax.devices()[0] if device is None else device
    per_tree = forest_tree_bytes(n_eligible, depth, n_bins, n_outputs, n_samples,
                                 fused=forest_fused(device, n_samples, depth, n_bins, n_outputs),
                                 n_features=n_features)
    return auto_chunk_size(per_tree, n_trees, device, memory_budget)


def forest_bytes(n_eligible: int, n_features: int, depth: int, n_bins: int, n_outputs: int,
                 n_samples: int, n_trees: int, chunk_size: int, device=None) -> int:
    """Estimated peak device memory of one forest's fit (bytes): ``chunk_size`` trees' fits
    (:func:`forest_tree_bytes`) at once, the fused kernel's scratch where it runs
    (:func:`kernel_scratch_bytes`), and the outputs of every tree: leaf values
    ``n_trees x 2^depth x K`` and bootstrap weights ``n_trees x n_samples`` float32."""
    device = jax.devices()[0] if device is None else device
    fused = forest_fused(device, n_samples, depth, n_bins, n_outputs)
    per_tree = forest_tree_bytes(n_eligible, depth, n_bins, n_outputs, n_samples, fused=fused,
                                 n_features=n_features)
    k = 1 if n_outputs == 2 else int(n_outputs)
    scratch = kernel_scratch_bytes(depth, n_bins, 2 * k, n_eligible) if fused else 0
    out = n_trees * ((1 << depth) * int(n_outputs) * 4 + n_samples * 4 + depth * 16)
    return int(chunk_size * per_tree + scratch + out)
