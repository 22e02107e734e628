"""Memory estimates of fits and the chunk sizes they set: bytes per model and forest tree, budgets,
models per chunk and device, and :func:`check_boosting_memory` (a ``MemoryError`` before compiling
what cannot fit). See docs/engine.md ("Memory estimates")."""

from __future__ import annotations

from typing import Optional

import jax

from jboost import _native, devices as devices_lib
from jboost.engine import boosting as boosting_lib
from jboost.losses import loss as loss_lib
from jboost.trees import histograms

# Default memory budget of one chunk of models, per device (bytes).
DEFAULT_CPU_BUDGET = 1 << 30
# Models per chunk and CPU device (the kernels run a chunk's models side by side; accelerators
# take as many as the budget allows).
DEFAULT_CPU_MODELS_PER_DEVICE = 8
# A sweep's chunk on CPU: between these many models over all the CPU's devices, as many as keep
# their (row, feature) cells within CPU_CHUNK_CELLS (a power of two; small data gains most).
DEFAULT_CPU_MODELS_PER_CHUNK = 16
MAX_CPU_MODELS_PER_CHUNK = 64
CPU_CHUNK_CELLS = 1 << 24


def cpu_models_per_device(n_devices: int, n_rows: Optional[int] = None,
                          n_features: Optional[int] = None) -> int:
    """A sweep's models per CPU device and chunk: the models of a chunk (:data:`CPU_CHUNK_CELLS`)
    shared by ``n_devices`` devices."""
    models = DEFAULT_CPU_MODELS_PER_CHUNK
    cells = None if n_rows is None or n_features is None else max(int(n_rows) * int(n_features), 1)
    while cells is not None and models < MAX_CPU_MODELS_PER_CHUNK and 2 * models * cells <= CPU_CHUNK_CELLS:
        models *= 2
    return max(1, models // max(int(n_devices), 1))


def model_bytes(n_samples: int, n_features: int, depth: int, n_bins: int, n_outputs: int = 1,
                n_rounds: int = 100, trees_per_round: int = 1, keep_trees: bool = False,
                fused: bool = False) -> int:
    """Estimated peak device memory of ONE model of the sweep (bytes; docs/engine.md, "Memory
    estimates")."""
    k = int(n_outputs)
    cell = n_features * n_bins * 2 * k * 4  # one leaf's histograms over all features, bytes
    if fused:
        hist = kept_histogram_bytes(cell, n_samples, depth, n_bins, k) + n_features * n_bins * 2 * 4
    else:
        hist = 3 * cell * 2 ** max(int(depth) - 1, 0)
    rows = n_samples * (10 * k + 10) * 4
    out = 2 * n_rounds * 4 + (trees_bytes(depth, k, n_rounds, trees_per_round) if keep_trees else 0)
    return int(hist + rows + out)


def kept_histogram_bytes(cell: int, n_samples: int, depth: int, n_bins: int, k: int) -> int:
    """The most bytes of histograms the fused levels keep at once for histogram subtraction
    (:func:`jboost.trees.histograms.level_plan`), ``cell`` bytes per leaf."""
    plan = histograms.level_plan(n_samples, depth, n_bins, channels=2 * k)
    return max([cell * ((2**d if keep else 0) + (2 ** (d - 1) if subtract else 0))
                for d, (subtract, keep) in enumerate(plan)], default=0)


def trees_bytes(depth: int, n_outputs: int, n_rounds: int, trees_per_round: int = 1) -> int:
    """Bytes of one boosted model's trees: per tree ``depth`` features, bins, thresholds and
    gains, and ``2^depth x K`` float32 leaf values."""
    return int((4 * 4 * depth + 2**depth * int(n_outputs) * 4) * trees_per_round * n_rounds)


def default_budget(device) -> int:
    """The default memory budget of one chunk on ``device``: :data:`DEFAULT_CPU_BUDGET` on CPU, else
    half the device's ``bytes_limit`` (4 GiB when not reported)."""
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
    and ``n_models``, at least one, evened out over the chunks."""
    budget = default_budget(device) if memory_budget is None else int(memory_budget)
    size = max(1, budget // max(per_model_bytes, 1))
    if max_models is None and device.platform == "cpu":
        max_models = DEFAULT_CPU_MODELS_PER_DEVICE
    if max_models is not None:
        size = min(size, int(max_models))
    size = int(max(1, min(size, n_models)))
    n_chunks = -(-max(n_models, 1) // size)
    return -(-max(n_models, 1) // n_chunks)


# A pure-JAX forest tree's temporaries per byte of its deepest histogram (calibrated on XLA's
# memory_analysis()), and the fused kernel's int32 words per row and level.
FOREST_HIST_OVERHEAD = 2.6
FOREST_ROW_WORDS_PER_LEVEL = 3


def forest_tree_bytes(n_eligible: int, depth: int, n_bins: int, n_outputs: int, n_samples: int,
                      fused: bool = False, n_features: Optional[int] = None) -> int:
    """Estimated device memory of one forest tree's fit (bytes); ``fused``: the CPU kernel's fused
    levels."""
    k = 1 if n_outputs == 2 else n_outputs
    rows = n_samples * (2 * k + 4) * 4
    if not fused:
        hist = n_eligible * 2 ** max(depth - 1, 0) * n_bins * 2 * k * 4
        return int(FOREST_HIST_OVERHEAD * hist + rows)
    n_features = n_eligible if n_features is None else n_features
    kept = 0
    if n_eligible >= n_features:  # every feature at every level: fit_tree subtracts where it pays
        kept = kept_histogram_bytes(n_features * n_bins * 2 * k * 4, n_samples, depth, n_bins, k)
    return int(rows + n_samples * 4 * FOREST_ROW_WORDS_PER_LEVEL * depth + kept)


def chunk_size_for_budget(n_eligible: int, depth: int, n_bins: int, n_outputs: int, n_samples: int,
                          budget_bytes: Optional[int] = None, fused: bool = False,
                          n_features: Optional[int] = None) -> int:
    """Forest bags fitted together so that their arrays fit in ``budget_bytes`` (default
    :data:`DEFAULT_CPU_BUDGET`), at least 1."""
    budget = DEFAULT_CPU_BUDGET if budget_bytes is None else int(budget_bytes)
    per_tree = forest_tree_bytes(n_eligible, depth, n_bins, n_outputs, n_samples, fused, n_features)
    return max(1, int(budget // per_tree))


def kernel_fits(device) -> bool:
    """Whether fits on ``device`` run jboost's fused CPU kernels (a CPU device, kernels built)."""
    return device.platform == "cpu" and _native.available()


def forest_fused(device, n_samples: int, depth: int, n_bins: int, n_outputs: int) -> bool:
    """Whether a forest's trees on ``device`` are grown by the fused CPU kernels (built, and sizes
    they can index)."""
    k = 1 if n_outputs == 2 else int(n_outputs)
    return kernel_fits(device) and _native.indexable(n_samples, 1 << max(depth - 1, 0), n_bins, 2 * k)


def kernel_scratch_bytes(depth: int, n_bins: int, channels: int, n_features: int) -> int:
    """A lower bound of the fused level kernel's scratch at the deepest level: about three of one
    feature's level histograms per thread, one thread per feature at most."""
    threads = min(_native.cpu_threads(), max(int(n_features), 1))
    return int(3 * (1 << max(depth - 1, 0)) * n_bins * channels * 4 * threads)


def forest_chunk_size(n_eligible: int, n_features: int, depth: int, n_bins: int, n_outputs: int,
                      n_samples: int, n_trees: int, memory_budget: Optional[int] = None,
                      device=None) -> int:
    """Forest bags per chunk on ``device`` (default: the first device): :func:`auto_chunk_size` of
    :func:`forest_tree_bytes`."""
    device = jax.devices()[0] if device is None else device
    per_tree = forest_tree_bytes(n_eligible, depth, n_bins, n_outputs, n_samples,
                                 fused=forest_fused(device, n_samples, depth, n_bins, n_outputs),
                                 n_features=n_features)
    return auto_chunk_size(per_tree, n_trees, device, memory_budget)


#: Bytes of one depth-wise node (``jboost.trees.depthwise.DepthwiseTrees``' table): feature, threshold
#: and two children int32, border and gain float32, missing direction bool.
DEPTHWISE_RULE_BYTES = 25


def forest_bytes(n_eligible: int, n_features: int, depth: int, n_bins: int, n_outputs: int,
                 n_samples: int, n_trees: int, chunk_size: int, device=None,
                 tree_family: str = "oblivious", n_nodes: Optional[int] = None,
                 max_nodes: Optional[int] = None, kernel: Optional[bool] = None,
                 table_rows: Optional[int] = None) -> int:
    """Estimated peak device memory of one forest's fit (bytes): ``chunk_size`` trees' fits at once
    and the outputs of every tree (docs/engine.md, "Memory estimates")."""
    device = jax.devices()[0] if device is None else device
    depthwise = tree_family == "depthwise"
    k = 1 if n_outputs == 2 else int(n_outputs)
    if depthwise:
        fused = False
        kernel = (kernel_fits(device) and _native.indexable(n_samples, 1, n_bins, 2 * k)
                  if kernel is None else bool(kernel))
        slot_hist = n_eligible * n_bins * 2 * k * 4
        rows = n_samples * (2 * k + 4) * 4
        if kernel:
            per_tree = rows + n_samples * 4 * 8 + 3 * slot_hist
        else:
            # rows sharded: the slots are bounded by the whole table's rows
            whole = n_samples if table_rows is None else int(table_rows)
            cap = max(1, whole // 2) if max_nodes is None else int(max_nodes)
            slots = max(1, min(1 << max(depth - 1, 0), cap, whole // 2))
            # the levels' per-node arrays and the node table: at most 2n entries
            per_tree = int(rows + FOREST_HIST_OVERHEAD * (slots + 1) * slot_hist
                           + min(2 << depth, 2 * n_samples + 2) * 48)
    else:
        fused = forest_fused(device, n_samples, depth, n_bins, n_outputs)
        per_tree = forest_tree_bytes(n_eligible, depth, n_bins, n_outputs, n_samples, fused=fused,
                                     n_features=n_features)
    scratch = kernel_scratch_bytes(depth, n_bins, 2 * k, n_eligible) if fused else 0
    n_nodes = ((1 << depth) - 1 if n_nodes is None else int(n_nodes)) if depthwise else 0
    n_leaves = n_nodes + 1 if depthwise else 1 << depth
    out = n_trees * (n_leaves * int(n_outputs) * 4 + n_samples * 4 + depth * 16
                     + n_nodes * DEPTHWISE_RULE_BYTES)
    return int(chunk_size * per_tree + scratch + out)


def boosting_bytes(n_rows: int, n_features: int, depth: int, n_bins: int, n_outputs: int,
                   n_rounds: int, trees_per_round: int = 1, dense_hessian: bool = False,
                   devices=None) -> int:
    """Estimated peak memory of one :func:`jboost.fit` (bytes) on the first device used
    (docs/engine.md, "Memory estimates")."""
    devs = devices_lib.devices_of(devices)
    device = devs[0]
    k = int(n_outputs)
    fused = (devices is None and kernel_fits(device)
             and _native.indexable(n_rows, 1 << (depth - 1), n_bins, 2 * k))
    rows = -(-int(n_rows) // len(devs))
    need = model_bytes(rows, n_features, depth, n_bins, k, n_rounds=n_rounds,
                                 trees_per_round=trees_per_round, keep_trees=True, fused=fused)
    need += 4 * rows * k * k if dense_hessian and k > 1 else 0
    sharing = sum(1 for d in devs if d.platform == device.platform == "cpu"
                  and d.process_index == device.process_index) if devices is not None else 1
    return int(need * max(1, sharing))


def memory_depth(config: boosting_lib.BoostConfig) -> int:
    """The depth the memory estimates take for ``config``'s trees (loss-guided: the depth of
    ``max_leaves`` leaves, at least 3)."""
    if config.max_leaves is None:
        return config.depth
    return max(3, (int(config.max_leaves) - 1).bit_length())


def family_bytes(config: boosting_lib.BoostConfig, n_rows: int, n_features: int,
                 n_outputs: int) -> int:
    """Memory a tree family holds beside :func:`boosting_bytes`' levels: the loss-guided open
    leaves' histograms (twice) and row arrays; else 0."""
    if config.max_leaves is None:
        return 0
    cells = int(config.max_leaves) * int(n_features) * int(config.n_bins) * 2 * int(n_outputs)
    return 2 * 4 * cells + 3 * 4 * int(n_rows)


def histogram_note(config: boosting_lib.BoostConfig) -> str:
    """The settings that shape the largest histograms, for memory messages."""
    if config.max_leaves is None:
        return f"depth={config.depth}, n_bins={config.n_bins}"
    return f"max_leaves={config.max_leaves} (depth bound {config.depth}), n_bins={config.n_bins}"


def histogram_shape(config: boosting_lib.BoostConfig) -> str:
    """The largest histograms' shape in words, for memory messages."""
    return ("F x 2^(depth-1) x n_bins x 2K float32" if config.max_leaves is None
            else "of the open leaves, max_leaves x F x n_bins x 2K float32")


def sharded_memory_hint(devices) -> str:
    """What to do when a sharded fit's level histograms do not fit (for :func:`check_memory`)."""
    if devices is None:
        return ""
    return ("; sharded over devices, every device builds each level's full F x 2^d x n_bins x 2K "
            "histograms (dense, for their psum): fit on one device (devices=None: on CPU the "
            "kernel builds deep levels from the rows they hold, and uses every core) or lower depth")


def check_boosting_memory(n_rows: int, n_features: int, config: boosting_lib.BoostConfig,
                          loss: loss_lib.Loss, *, k_from_labels: bool = False, n_models: int = 1,
                          n_together: int = 1, devices=None, what: str = "models",
                          fix: str = "use a smaller depth, n_bins or n_outputs") -> None:
    """:func:`jboost.devices.check_memory` of ``n_models`` boosted models, ``n_together`` of them
    fitted at once and the others' trees kept."""
    k = int(loss.n_outputs)
    dense = loss.hessian != "unit"  # every non-unit hessian takes a per-row K x K Jacobian
    per_round = k if config.per_output_trees else 1
    one = boosting_bytes(n_rows, n_features, memory_depth(config), config.n_bins, k, config.n_rounds,
                         per_round, dense, devices) + family_bytes(config, n_rows, n_features, k)
    kept = trees_bytes(memory_depth(config), k, config.n_rounds, per_round)
    need = n_together * one + (n_models - n_together) * kept
    cause = (f"K = max(y) + 1 = {k} classes, from the labels' maximum (the n_outputs of a K-class "
             "loss)" if k_from_labels else None)
    devices_lib.check_memory(need, devices=devices, cause=cause,
                 detail=f"estimated for {n_models} {what}, {n_together} fitted together, each on "
                 f"{n_rows} rows, {n_features} features, {histogram_note(config)}, "
                 f"n_outputs={k}, n_rounds={config.n_rounds} (histograms "
                 f"{histogram_shape(config)}"
                 f"{', per-row K x K autodiff hessians' if dense and k > 1 else ''}); {fix}")
