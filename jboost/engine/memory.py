"""Memory estimates of fits and the chunk sizes they set: bytes per model and forest tree, per
tree family (:func:`fit_model_bytes`, :func:`fit_peak_bytes`) and per-row hessian, budgets,
models per chunk and device, and :func:`check_boosting_memory` (a ``MemoryError`` before compiling
what cannot fit). See docs/engine.md ("Memory estimates")."""

from __future__ import annotations

from typing import Optional

import jax

from jboost import _native, devices as devices_lib
from jboost.engine import boosting as boosting_lib
from jboost.losses import derivatives, loss as loss_lib
from jboost.trees import depthwise, histograms, oblivious

#: The default memory budget of one chunk of models, per device (bytes).
DEFAULT_CPU_BUDGET = 1 << 30
# Models per chunk and CPU device (the kernels run a chunk's models side by side; accelerators
# take as many as the budget allows).
DEFAULT_CPU_MODELS_PER_DEVICE = 8
# A sweep's chunk on CPU: between these many models over all the CPU's devices, as many as keep
# their (row, feature) cells within CPU_CHUNK_CELLS (a power of two; small data gains most).
DEFAULT_CPU_MODELS_PER_CHUNK = 16
MAX_CPU_MODELS_PER_CHUNK = 64
#: A sweep's CPU chunk takes as many models as keep their (row, feature) cells within this many.
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
        hist = oblivious_level_bytes(n_features, depth, n_bins, k)
    rows = n_samples * (10 * k + 10) * 4
    out = 2 * n_rounds * 4 + (trees_bytes(depth, k, n_rounds, trees_per_round) if keep_trees else 0)
    return int(hist + rows + out)


#: Pure JAX's temporaries of an oblivious level per byte of its ``(F, L, B, 2K)`` cumulative
#: histograms: the histograms, their prefix sums and the split search (2.6 measured, K = 1) ...
OBLIVIOUS_HIST_OVERHEAD = 3.0
#: ... and more for K > 1 outputs: the split search's per-output scores (5.1 to 5.3 in all
#: measured, K = 3 to 50).
OBLIVIOUS_OUTPUTS_OVERHEAD = 2.5


def oblivious_level_bytes(n_features: int, depth: int, n_bins: int, k: int) -> int:
    """Temporaries of an oblivious tree's deepest level in pure JAX (bytes; no fused kernel)."""
    hist = 4 * int(n_features) * int(n_bins) * 2 * int(k) * 2 ** max(int(depth) - 1, 0)
    factor = OBLIVIOUS_HIST_OVERHEAD + (OBLIVIOUS_OUTPUTS_OVERHEAD if int(k) > 1 else 0.0)
    return int(factor * hist)


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
    """Estimated peak memory of one :func:`jboost.fit` of oblivious trees (bytes) on the first
    device used (docs/engine.md, "Memory estimates"); :func:`fit_peak_bytes` estimates any
    family."""
    config = boosting_lib.BoostConfig(n_rounds=int(n_rounds), depth=int(depth), n_bins=int(n_bins))
    fused, rows, sharing = fit_placement(config, n_rows, n_outputs, devices)
    need = model_bytes(rows, n_features, depth, n_bins, int(n_outputs), n_rounds=n_rounds,
                       trees_per_round=trees_per_round, keep_trees=True, fused=fused)
    need += hessian_bytes(rows, n_outputs, dense_hessian)
    return int(need * sharing)


def fit_placement(config: boosting_lib.BoostConfig, n_rows: int, n_outputs: int, devices):
    """``(fused, rows, sharing)`` of a fit on ``devices``: whether the CPU kernel's fused levels
    grow its oblivious trees, the rows of the first device, and how many CPU devices of its host
    share that host's memory (their estimates add up)."""
    devs = devices_lib.devices_of(devices)
    device = devs[0]
    depth = memory_depth(config)
    fused = (devices is None and kernel_fits(device) and int(config.n_bins) <= 256
             and _native.indexable(n_rows, 1 << max(depth - 1, 0), config.n_bins,
                                   2 * int(n_outputs)))
    rows = -(-int(n_rows) // len(devs))
    sharing = sum(1 for d in devs if d.platform == device.platform == "cpu"
                  and d.process_index == device.process_index) if devices is not None else 1
    return fused, rows, max(1, sharing)


def memory_depth(config: boosting_lib.BoostConfig) -> int:
    """The depth the memory estimates take for ``config``'s trees (loss-guided: the depth of
    ``max_leaves`` leaves, at least 3)."""
    if config.max_leaves is None:
        return config.depth
    return max(3, (int(config.max_leaves) - 1).bit_length())


# --- One boosted model, per tree family ------------------------------------------------------

#: XLA's temporaries of a dense depth-wise level (:func:`jboost.trees.depthwise_levels.grow_dense`)
#: per byte of its ``(F, 2^d, B, 2K)`` cumulative histograms: the histograms, their prefix sums
#: and the split search (3.06 on ``memory_analysis()`` at depths 6 to 16).
DEPTHWISE_HIST_OVERHEAD = 3.1
#: The K-output split search's temporaries (:func:`jboost.trees.splits.sum_outputs_16`: the
#: outputs padded to rows of 16 lanes, then 16 running sums) per byte of
#: :func:`gain_lanes_bytes` (4.1 to 4.3 measured, K = 3 to 50).
GAIN_LANES_OVERHEAD = 4.5
#: A loss-guided tree's temporaries per byte of its open leaves' ``(L, F, B, 2K)`` histograms:
#: the table and its update in the loop (2.0 to 2.2 measured).
LOSSGUIDE_HIST_OVERHEAD = 2.0


def tree_kind(config: boosting_lib.BoostConfig) -> str:
    """``"lossguide"``, ``"depthwise"``, ``"oblivious"`` or ``"custom"``: the growers the
    estimates model for ``config``'s trees (a custom family is taken as dense oblivious levels)."""
    if config.max_leaves is not None:
        return "lossguide"
    if isinstance(config.tree_family, type) and issubclass(config.tree_family,
                                                           depthwise.DepthwiseTrees):
        return "depthwise"
    return "oblivious" if config.tree_family is oblivious.ObliviousTrees else "custom"


def gain_lanes_bytes(n_nodes: int, n_features: int, n_bins: int, k: int) -> int:
    """Bytes of one ``(nodes, F, B - 1, lanes)`` float32 array of a K-output node split search:
    the outputs padded to 16-lane rows plus the 16 running sums (0 for one output)."""
    if int(k) <= 1:
        return 0
    lanes = 16 * -(-int(k) // 16) + 16
    return 4 * int(n_nodes) * int(n_features) * max(int(n_bins) - 1, 1) * lanes


def depthwise_level_bytes(n_features: int, depth: int, n_bins: int, k: int) -> int:
    """Temporaries of a depth-wise tree's dense levels in JAX (bytes): its deepest level's,
    ``2^(depth-1)`` nodes' histograms and split search, whatever the rows."""
    nodes = 1 << max(int(depth) - 1, 0)
    hist = 4 * int(n_features) * nodes * int(n_bins) * 2 * int(k)
    return int(DEPTHWISE_HIST_OVERHEAD * hist
               + GAIN_LANES_OVERHEAD * gain_lanes_bytes(nodes, n_features, n_bins, k))


def lossguide_bytes(max_leaves: int, n_features: int, n_bins: int, k: int) -> int:
    """Temporaries of a loss-guided tree (bytes): its open leaves' histograms, a split's parent
    and children histograms, and the two children's split search."""
    leaf = 4 * int(n_features) * int(n_bins) * 2 * int(k)
    return int(LOSSGUIDE_HIST_OVERHEAD * int(max_leaves) * leaf + 3 * leaf
               + GAIN_LANES_OVERHEAD * gain_lanes_bytes(2, n_features, n_bins, k))


def dense_hessian(loss: loss_lib.Loss, n_outputs: Optional[int] = None) -> bool:
    """Whether a fit of ``loss`` builds per-row ``K x K`` hessians, which the estimates count
    (:func:`jboost.losses.derivatives.dense_hessian`)."""
    return derivatives.dense_hessian(loss, n_outputs)


def hessian_bytes(n_rows: int, n_outputs: int, dense: bool) -> int:
    """Bytes of the per-row ``K x K`` autodiff hessians (``dense``:
    :func:`jboost.losses.derivatives.dense_hessian`), else 0."""
    k = int(n_outputs)
    return 4 * int(n_rows) * k * k if dense and k > 1 else 0


def growth_bytes(config: boosting_lib.BoostConfig, n_rows: int, n_features: int, k: int,
                 fused: bool) -> int:
    """Temporaries of growing one tree of ``k`` outputs with ``config``'s family (bytes, the CPU
    kernel's scratch apart: :func:`fit_scratch_bytes`)."""
    kind, depth, n_bins = tree_kind(config), memory_depth(config), int(config.n_bins)
    if kind == "depthwise":
        return depthwise_level_bytes(n_features, depth, n_bins, k)
    if kind == "lossguide":
        return lossguide_bytes(config.max_leaves, n_features, n_bins, k)
    if fused and kind == "oblivious":
        cell = n_features * n_bins * 2 * k * 4  # one leaf's histograms over all features
        return kept_histogram_bytes(cell, n_rows, depth, n_bins, k) + n_features * n_bins * 2 * 4
    return oblivious_level_bytes(n_features, depth, n_bins, k)


def fit_scratch_bytes(config: boosting_lib.BoostConfig, n_features: int, n_outputs: int,
                      fused: bool) -> int:
    """The fused CPU kernel's per-thread scratch of an oblivious fit (once per process, whatever
    the models fitted together), else 0."""
    if not fused or tree_kind(config) != "oblivious":
        return 0
    k = 1 if config.per_output_trees else int(n_outputs)
    return kernel_scratch_bytes(config.depth, config.n_bins, 2 * k, n_features)


def kept_trees_bytes(config: boosting_lib.BoostConfig, n_outputs: int) -> int:
    """Bytes of one model's ``config.n_rounds`` rounds of trees: oblivious ones'
    (:func:`trees_bytes`), or node tables of ``2^depth - 1`` (depth-wise) or ``max_leaves - 1``
    (loss-guided) nodes of :data:`DEPTHWISE_RULE_BYTES` and their leaves' ``K`` values."""
    k, per_round = int(n_outputs), int(n_outputs) if config.per_output_trees else 1
    kind = tree_kind(config)
    if kind in ("oblivious", "custom"):
        return trees_bytes(config.depth, k, config.n_rounds, per_round)
    nodes = (1 << config.depth) - 1 if kind == "depthwise" else int(config.max_leaves) - 1
    tree = nodes * DEPTHWISE_RULE_BYTES + (nodes + 1) * k * 4 + config.depth * 4
    return int(tree * per_round * config.n_rounds)


def fit_model_bytes(config: boosting_lib.BoostConfig, n_rows: int, n_features: int,
                    n_outputs: int, *, dense_hessian: bool = False, fused: bool = False,
                    keep_trees: bool = True) -> int:
    """Estimated peak memory of one boosted model of ``config`` on ``n_rows`` rows (bytes): one
    tree's growth (:func:`growth_bytes`; ``K`` one-output trees with ``per_output_trees``), the
    per-row state, the per-row ``K x K`` hessians (``dense_hessian``), the curves and (with
    ``keep_trees``) the trees. The bins and the kernel's scratch are counted once per fit
    (:func:`data_bytes`, :func:`fit_scratch_bytes`)."""
    k = int(n_outputs)
    grow = (k * growth_bytes(config, n_rows, n_features, 1, fused) if config.per_output_trees
            else growth_bytes(config, n_rows, n_features, k, fused))
    rows = n_rows * (10 * k + 10) * 4
    out = 2 * config.n_rounds * 4 + (kept_trees_bytes(config, k) if keep_trees else 0)
    return int(grow + rows + out + hessian_bytes(n_rows, k, dense_hessian))


def data_bytes(n_rows: int, n_features: int) -> int:
    """Bytes of a fit's binned rows (uint8 ``(F, n)``), labels and weights."""
    return int(n_rows) * (int(n_features) + 8)


def fit_peak_bytes(config: boosting_lib.BoostConfig, n_rows: int, n_features: int, n_outputs: int,
              *, dense_hessian: bool = False, devices=None, n_models: int = 1) -> int:
    """Estimated peak memory of ``n_models`` boosted models of ``config`` fitted together on
    ``devices`` (bytes, on the first device used): :func:`fit_model_bytes` each, the bins and
    the CPU kernel's scratch once; the CPU devices of one host add up."""
    fused, rows, sharing = fit_placement(config, n_rows, n_outputs, devices)
    one = fit_model_bytes(config, rows, n_features, n_outputs, dense_hessian=dense_hessian,
                          fused=fused)
    need = (int(n_models) * one + data_bytes(rows, n_features)
            + fit_scratch_bytes(config, n_features, n_outputs, fused))
    return int(need * sharing)


def histogram_note(config: boosting_lib.BoostConfig) -> str:
    """The settings that shape the largest histograms, for memory messages."""
    if config.max_leaves is None:
        return f"depth={config.depth}, n_bins={config.n_bins}"
    return f"max_leaves={config.max_leaves} (depth bound {config.depth}), n_bins={config.n_bins}"


def histogram_shape(config: boosting_lib.BoostConfig) -> str:
    """The largest histograms' shape in words, for memory messages."""
    kind = tree_kind(config)
    if kind == "lossguide":
        return "of the open leaves, max_leaves x F x n_bins x 2K float32"
    if kind == "depthwise":
        return ("of a depth-wise level's 2^(depth-1) nodes, F x 2^(depth-1) x n_bins x 2K float32, "
                "whatever the rows")
    return "F x 2^(depth-1) x n_bins x 2K float32"


def memory_fix(config: boosting_lib.BoostConfig, n_outputs: int, dense: bool) -> str:
    """The settings to change when a boosted fit of ``config`` does not fit, for memory
    messages."""
    kind = tree_kind(config)
    if kind == "lossguide":
        fix = "use a smaller max_leaves or n_bins"
    elif kind == "depthwise":
        fix = ("use a smaller depth or n_bins (each depth-wise level doubles its nodes' "
               "histograms), or tree_family=\"lossguide\" with max_leaves (histograms of the "
               "open leaves only)")
    else:
        fix = "use a smaller depth or n_bins"
    if int(n_outputs) > 1:
        fix += ", or fewer n_outputs (classes)"
    if dense and int(n_outputs) > 1:
        fix += ("; the per-row K x K autodiff hessians take 4 x rows x K^2 bytes: fewer rows, or "
                "a Loss with hessian=\"unit\"")
    return fix


def family_fix(config: boosting_lib.BoostConfig, n_outputs: int, dense: bool) -> str:
    """``"; " + memory_fix(...)`` for the settings a caller's generic fix does not name
    (depth-wise and loss-guided trees, per-row K x K hessians), else ``""``."""
    if tree_kind(config) in ("oblivious", "custom") and not (dense and int(n_outputs) > 1):
        return ""
    return "; " + memory_fix(config, n_outputs, dense)


def sharded_memory_hint(devices) -> str:
    """What to do when a sharded fit's level histograms do not fit (for
    :func:`jboost.devices.check_memory`)."""
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
    fitted at once and the others' trees kept (:func:`fit_peak_bytes`); the message ends with
    ``fix`` (and :func:`family_fix`)."""
    k = int(loss.n_outputs)
    dense = dense_hessian(loss, k)
    need = (fit_peak_bytes(config, n_rows, n_features, k, dense_hessian=dense, devices=devices,
                      n_models=n_together)
            + (n_models - n_together) * kept_trees_bytes(config, k))
    cause = (f"K = max(y) + 1 = {k} classes, from the labels' maximum (the n_outputs of a K-class "
             "loss)" if k_from_labels else None)
    devices_lib.check_memory(need, devices=devices, cause=cause,
                 detail=f"estimated for {n_models} {what}, {n_together} fitted together, each on "
                 f"{n_rows} rows, {n_features} features, {histogram_note(config)}, "
                 f"n_outputs={k}, n_rounds={config.n_rounds} (histograms "
                 f"{histogram_shape(config)}"
                 f"{', per-row K x K autodiff hessians' if dense else ''}); {fix}"
                 f"{family_fix(config, k, dense)}")
