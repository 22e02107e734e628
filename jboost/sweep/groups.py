"""One (depth, n_bins) group of a sweep: memory estimate and chunk size, its compiled program, progress log and statistics; the checkpoint fingerprint."""

from __future__ import annotations

import time
from typing import Any, Dict, Optional

import numpy as np

from jboost import _native, devices as devices_lib, sweep as sweep_lib
from jboost.engine import checkpoints as checkpoints_lib, distributed, memory
from jboost.sweep import (categorical as sweep_categorical, chunks,
                          program as sweep_program)

CHECKPOINT_KIND = "sweep"


def checkpoint_fingerprint(X, y, w, loss, grid_, fold_table, seed_keys, metric, greater, stopping, keep_trees,
                 fixed_hyper, colsample_by, per_output_trees, devices, cat_spec=None,
                 family=None) -> str:
    """What a sweep's checkpoints must match to be continued
    (:func:`jboost.engine.checkpoints.fingerprint`; listed in docs/sweeps.md)."""
    arrays = (X, y, w, fold_table, seed_keys, grid_.hyper_values, grid_.loss_values, loss.params,
              grid_.cat_values)
    settings = (grid_.points, grid_.names, grid_.rounds, grid_.depths, grid_.bins, grid_.configs,
                fixed_hyper, colsample_by, bool(per_output_trees),
                tuple(sorted((k, getattr(v, "__name__", v)) for k, v in (family or {}).items())),
                (loss.name, loss.fn, loss.n_outputs, loss.task, loss.hessian, loss.leaf_refit,
                 loss.adaptive_huber_alpha),
                metric, bool(greater), stopping, bool(keep_trees),
                [d.platform for d in devices], _native.available())
    if cat_spec is not None:  # the categorical columns' kinds and vocabularies (a new sweep's
        settings = settings + (cat_spec.to_json(),)  # files are unchanged without them)
    return checkpoints_lib.fingerprint(arrays, settings)


class GroupStats:
    """Chunking, timings and compilations of a sweep's groups (``SweepResult.info``)."""

    def __init__(self):
        self.chunk_size, self.first_chunk_s, self.model_bytes = {}, {}, {}
        self.n_chunks = self.n_models = self.n_compilations = self.n_resumed = 0

    def info(self, n_devices: int, t_start: float) -> Dict[str, Any]:
        name = lambda g: f"depth={g[0]},n_bins={g[1]}"  # noqa: E731
        return dict(n_compilations=self.n_compilations,
                    chunk_size={name(g): s for g, s in self.chunk_size.items()},
                    n_chunks=self.n_chunks, n_resumed_chunks=self.n_resumed,
                    n_devices=n_devices, n_models=self.n_models,
                    seconds=time.perf_counter() - t_start,
                    first_chunk_seconds={name(g): s for g, s in self.first_chunk_s.items()},
                    model_bytes={name(g): s for g, s in self.model_bytes.items()})


def group_callbacks(callbacks, group):
    """The sweep's callbacks with each chunk's dict naming its ``(depth, n_bins)`` group."""
    name = f"depth={group[0]},n_bins={group[1]}"
    return [lambda entry, cb=cb: cb({"group": name, **entry}) for cb in callbacks or ()]


def run_group(config, shared, grid_, loss, layout, metric, keep_trees, devices, chunk_size,
               memory_budget, stats: GroupStats, t_start: Optional[float],
               greater: bool = False,
               checkpoints: Optional[checkpoints_lib.ChunkCheckpoints] = None,
               callbacks=(), stop: Optional[list] = None,
               cat_layout: Optional[sweep_categorical.CatLayout] = None,
               local=None) -> chunks.GroupFit:
    """Every model of one ``(depth, n_bins)`` group: the chunk size from the memory estimate,
    then the chunks through the group's compiled program."""
    group, n_dev = (config.depth, config.n_bins), len(devices)
    n, n_features = shared.X_binned.shape[1], shared.X_binned.shape[0]
    if local is not None:  # each device holds a shard of the rows and fits all the models
        n, n_dev = n // n_dev, 1
    k = loss.n_outputs
    if cat_layout is not None:  # the trees' features: host rows, then J x K statistics
        codes, targets = shared.categorical.codes, shared.categorical.targets
        n_features = cat_layout.host_width + codes.shape[1] * targets.shape[1]
    fused = (devices[0].platform == "cpu" and _native.available() and config.n_bins <= 256
             and _native.indexable(n, 1 << (config.depth - 1), config.n_bins, 2 * k))
    dense = memory.dense_hessian(loss, k)  # each model's estimate, its family's and hessians'
    mb = memory.fit_model_bytes(config, n, n_features, k, dense_hessian=dense, fused=fused,
                                keep_trees=bool(keep_trees))
    if cat_layout is not None:  # each model's own bins, and its statistics' sort and scan
        j_k = n_features - cat_layout.host_width
        mb += n * n_features + 24 * n * j_k
    cpu_max = memory.cpu_models_per_device(n_dev, n, n_features) if devices[0].platform == "cpu" else None
    size = chunk_size or sweep_lib.auto_chunk_size(mb, -(-layout.n_models // n_dev), devices[0], memory_budget,
                                         max_models=cpu_max)
    if local is not None:  # the same chunks on every process (the same programs)
        size = int(distributed.allgather_rows(np.array([size], np.int64)).min())
    (devices_lib.check_memory if local is None else local.everywhere(devices_lib.check_memory))(
        size * mb + memory.data_bytes(n, n_features)
        + memory.fit_scratch_bytes(config, n_features, k, fused),
        devices=devices, what="this sweep's chunk of models",
        detail=f"estimated for {size} models per device fitted together, each on {n} rows, "
        f"{n_features} features, {memory.histogram_note(config)}, n_outputs={k}, "
        f"n_rounds={config.n_rounds} (jboost.engine.memory.fit_model_bytes: histograms "
        f"{memory.histogram_shape(config)}{', per-row K x K autodiff hessians' if dense else ''}"
        f"); use a smaller chunk_size, depth, n_bins or n_outputs"
        f"{memory.family_fix(config, k, dense)}")
    # The direction only matters to early stopping (the selection flips it on the host).
    # Calls of a few rounds each (jboost.sweep.chunks), so that a Ctrl-C lands within one.
    per_call = chunks.rounds_per_call(config.n_rounds)
    if local is None:
        program = sweep_program.chunk_program(config, metric, bool(keep_trees), devices,
                                              bool(greater) and config.early_stopping is not None,
                                              cat_layout, per_call)
    else:
        program = sweep_program.rows_chunk_program(
            config, metric, bool(keep_trees), local.mesh,
            bool(greater) and config.early_stopping is not None, per_call)
    compiled_before = sweep_program.n_compiled(program)
    log = None
    if t_start is not None:
        finished, t_group = [], time.perf_counter()  # when each chunk of this group ended

        def log(c, n_chunks, resumed):
            if resumed:
                print(f"[sweep] depth={group[0]} n_bins={group[1]}: chunk {c + 1}/{n_chunks} "
                      f"({size * n_dev} models) read from checkpoint_dir", flush=True)
                return
            now = time.perf_counter()
            finished.append(now)
            # The pace of the chunks after the first (whose time includes compiling).
            times = [t_group] + finished
            gaps = np.diff(times)[1:] if len(times) > 2 else np.diff(times)
            left = float(np.mean(gaps)) * (n_chunks - c - 1)
            print(f"[sweep] depth={group[0]} n_bins={group[1]}: chunk {c + 1}/{n_chunks} "
                  f"({size * n_dev} models) done, {now - t_start:.1f}s elapsed, ~{left:.1f}s left "
                  "in this group", flush=True)
    fit = chunks.fit_group(program, shared, grid_, loss, layout, size * n_dev, config.n_rounds,
                           config.early_stopping is not None, log=log, checkpoints=checkpoints,
                           part=f"depth{group[0]}-bins{group[1]}-", callbacks=callbacks, stop=stop)
    stats.n_compilations += sweep_program.n_compiled(program) - compiled_before
    stats.chunk_size[group], stats.model_bytes[group] = size, mb
    stats.first_chunk_s[group] = fit.first_chunk_seconds
    stats.n_chunks += fit.n_chunks
    stats.n_resumed += fit.n_resumed
    stats.n_models += layout.n_models
    return fit
