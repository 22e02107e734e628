"""The compiled program of a sweep: a chunk of models vmapped over boosting init/step, its shard_map over devices, and the chunk loop of a group.

A model is a grid point, a fold (training / held-out weight masks) and a seed, all sharing the
group's binned data; its held-out score is read off the training raw scores. See docs/sweeps.md."""

from __future__ import annotations

import functools
import math
import time
from typing import Callable, NamedTuple, Optional, Tuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.sharding import Mesh, PartitionSpec as P

from jboost import _compile
from jboost.engine import (batching, boosting as boosting_lib, checkpoints as checkpoints_lib,
                           state as state_lib)
from jboost.fitting import settings
from jboost.losses import baselines, loss as loss_lib
from jboost.sweep import categorical as sweep_categorical, grid as grid_lib, metrics as metrics_lib
from jboost.trees import oblivious


class ChunkOut(NamedTuple):
    """What the program returns for the ``M`` models of a chunk."""

    valid: jax.Array   # (M, R) validation metric after each round
    train: jax.Array   # (M, R) training loss after each round
    baseline: Optional[jax.Array]  # (M, K) the constant raw score the rounds start from (kept trees)
    trees: Optional[oblivious.ObliviousTrees]  # (M, R, T, ...) when kept, else None
    n_fitted: Optional[jax.Array] = None  # (M,) early stopping: the rounds each model fitted
    cat: Optional["sweep_categorical.CatOut"] = None  # categorical columns, kept trees: each model's statistics


class RowsShared(NamedTuple):
    """The whole table's labels, weights and folds, replicated, and each table row's position in
    the sharded arrays, of a sweep whose rows are spread over processes (``rows="local"``)."""

    y: jax.Array            # (n,) or (n, C) the whole table's labels
    sample_weight: jax.Array  # (n,)
    fold_table: jax.Array   # (S, n) int32
    positions: jax.Array    # (n,) int32 (jboost.engine.distributed.LocalRows.table_positions)


def fit_chunk(X_binned, y, sample_weight, fold_table, seed_keys, hyper, loss, fold, seed,
              cat_shared: Optional[sweep_categorical.CatShared] = None, cat_point: Optional[sweep_categorical.CatPoint] = None, *,
              config: boosting_lib.BoostConfig, metric, keep_trees: bool,
              greater_is_better: bool = False, cat_layout: Optional[sweep_categorical.CatLayout] = None,
              rows: Optional[RowsShared] = None) -> ChunkOut:
    """Fit the models of one chunk (leading axis of ``hyper``, ``loss``, ``fold``, ``seed``, which
    index ``fold_table`` ``(S, n)`` and ``seed_keys`` ``(S, 2)``); with categorical columns each
    model bins its own statistics (:func:`model_bins`), with ``rows`` (inside ``shard_map``)
    every device fits every model on its shard of the rows."""
    return jax.vmap(lambda h, l, f, s, c: _one_model(
        X_binned, y, sample_weight, fold_table, seed_keys, h, l, f, s, cat_shared, c,
        config=config, metric=metric, keep_trees=keep_trees, greater_is_better=greater_is_better,
        cat_layout=cat_layout, rows=rows))(hyper, loss, fold, seed, cat_point)


def _one_model(X_binned, y, sample_weight, fold_table, seed_keys, hyper_i, loss_i, f, s,
               cat_shared, cat_i, *, config, metric, keep_trees, greater_is_better, cat_layout,
               rows: Optional[RowsShared] = None):
    """One model of :func:`fit_chunk` (no model axis)."""
    held_out = fold_table[s] == f
    w_train = jnp.where(held_out, 0.0, sample_weight)
    w_valid = jnp.where(held_out, sample_weight, 0.0)
    if rows is None:
        init_raw = baselines.baseline(loss_i, y, w_train)
    else:  # the whole table's baseline (this device holds a shard of the rows)
        held_all = rows.fold_table[s] == f
        init_raw = baselines.baseline(loss_i, rows.y, jnp.where(held_all, 0.0, rows.sample_weight))
    cat_out = None
    if cat_layout is not None:
        prior = jnp.where(jnp.isnan(cat_i.prior), cat_shared.priors[s, f], cat_i.prior)
        X_binned, cat_out = sweep_categorical.model_bins(X_binned, cat_shared, w_train, seed_keys[s], prior,
                                       cat_i.prior_weight, layout=cat_layout,
                                       n_bins=config.n_bins)
    data = state_lib.Data.train_only(X_binned, y, w_train)
    score = _held_out_score(metric, y, w_valid, config.axis_name, rows, s, f)
    stopping = config.early_stopping is not None
    # The held-out score in every round (early stopping's score, minimised), else after the rounds
    # from the kept trees (a named or custom metric).
    in_rounds = stopping or metric is None or rows is not None
    sign = -1.0 if (stopping and metric is not None and greater_is_better) else 1.0

    def body(state, m):
        state, out = boosting_lib.step(state, m, data=data, key=seed_keys[s], hyper=hyper_i,
                                       config=config)
        # No separate validation set: the held-out rows' score is read off the training raw
        # scores (every row is predicted as the trees grow).
        valid = score(state) if in_rounds else jnp.float32(0.0)
        return state, out._replace(valid_loss=-valid if sign < 0 else valid)

    state0 = boosting_lib.init(data, loss_i, init_raw, config)
    rounds = jnp.arange(config.n_rounds, dtype=jnp.int32)
    n_fitted = None
    if stopping:  # each model stops on its own; the chunk's loop ends when all have stopped
        out = boosting_lib.boost_until_stopped(body, state0, rounds, data, config.early_stopping,
                                               (jnp.float32(jnp.inf), jnp.int32(-1)))
        n_fitted = out.n_fitted
        valid = -out.valid_loss if sign < 0 else out.valid_loss  # the metric itself again
    else:
        state, out = lax.scan(body, state0, rounds)
        valid = out.valid_loss
        if not in_rounds:
            valid = metrics_lib.metric_curve(metric, state.loss, out.trees, init_raw, X_binned, y,
                                             w_valid, config.n_bins)
    # Curves NaN where a traced setting is outside its domain (never ranked): the grid was checked
    # on the host, so this guards the program itself.
    valid, train_loss = settings.nan_outside_domains((valid, out.train_loss), loss_i, hyper_i,
                                                     warn=False)
    if not keep_trees:
        return ChunkOut(valid, train_loss, None, None, n_fitted)
    return ChunkOut(valid, train_loss, init_raw, out.trees, n_fitted, cat=cat_out)


def _held_out_score(metric, y, w_valid, axis, rows: Optional[RowsShared], s, f):
    """``score(state)``: the held-out fold's mean loss (``metric`` ``None``; summed over the
    devices' rows under ``axis``) or ``metric`` (with rows spread over devices, on the whole
    table's rows in table order: the raw scores gathered), from the training raw scores."""
    if metric is None:
        return lambda state: boosting_lib.mean_loss(state.loss, y, state.raw, w_valid, axis)
    if rows is None:
        return lambda state: metrics_lib.evaluate(metric, state.loss, y, state.raw,
                                                  w_valid).astype(jnp.float32).reshape(())
    held_all = rows.fold_table[s] == f
    w_all = jnp.where(held_all, rows.sample_weight, 0.0)

    def score(state):
        raw = lax.all_gather(state.raw, axis, tiled=True)[rows.positions]
        return metrics_lib.evaluate(metric, state.loss, rows.y, raw, w_all).astype(
            jnp.float32).reshape(())
    return score


@functools.lru_cache(maxsize=64)
def chunk_program(config: boosting_lib.BoostConfig, metric, keep_trees: bool, devices: Tuple,
                  greater_is_better: bool = False,
                  cat_layout: Optional[sweep_categorical.CatLayout] = None) -> Callable:
    """The jit-compiled :func:`fit_chunk` for one static combination (cached per combination):
    ``program(X_binned, y, sample_weight, fold_table, seed_keys, hyper, loss, fold, seed)``,
    with categorical columns (``cat_layout``) followed by ``cat_shared, cat_point``."""

    def body(*args):
        return fit_chunk(*args, config=config, metric=metric, keep_trees=keep_trees,
                         greater_is_better=greater_is_better, cat_layout=cat_layout)

    if len(devices) == 1:
        return _compile.jit(body)
    mesh = Mesh(np.asarray(devices), ("models",))
    shared, per_model = P(), P("models")
    # check_vma=False: the core mixes per-model (varying) and shared values in one op, which is
    # what we want; every model's computation stays on its own device.
    cat_specs = () if cat_layout is None else (shared, per_model)
    mapped = jax.shard_map(body, mesh=mesh, in_specs=(shared,) * 5 + (per_model,) * 4 + cat_specs,
                           out_specs=per_model, check_vma=False)
    return _compile.jit(mapped)


@functools.lru_cache(maxsize=64)
def rows_chunk_program(config: boosting_lib.BoostConfig, metric, keep_trees: bool, mesh: Mesh,
                       greater_is_better: bool = False) -> Callable:
    """The compiled :func:`fit_chunk` of a sweep whose rows are spread over processes
    (``rows="local"``): the training arrays sharded over the rows of the one-axis ``mesh``,
    histograms ``psum``-ed, the replicated outputs returned as this process's arrays."""
    axis = mesh.axis_names[0]
    config = config._replace(axis_name=axis)

    def body(*args):
        *args, rows = args
        return fit_chunk(*args, config=config, metric=metric, keep_trees=keep_trees,
                         greater_is_better=greater_is_better, rows=rows)

    row, rep = P(axis), P()
    mapped = jax.shard_map(body, mesh=mesh,
                           in_specs=(P(None, axis), row, row, P(None, axis)) + (rep,) * 6,
                           out_specs=rep, check_vma=False)
    return _Localized(_compile.jit(mapped))


class _Localized:
    """A jitted multi-process program whose replicated outputs come back as this process's
    arrays (as :func:`jax.eval_shape` and :func:`n_compiled` see the jitted function)."""

    def __init__(self, fn):
        self.fn = fn

    def __call__(self, *args):
        def local(a):
            if isinstance(a, jax.core.Tracer) or not isinstance(a, jax.Array) or a.is_fully_addressable:
                return a
            return a.addressable_data(0)
        return jax.tree_util.tree_map(local, self.fn(*args))

    def _cache_size(self) -> int:
        return self.fn._cache_size()  # noqa: SLF001


def n_compiled(program: Callable) -> int:
    """How many executables ``program`` (a :func:`chunk_program`) holds: one per compilation."""
    return program._cache_size()  # noqa: SLF001 - jax.jit's own count of its compiled specialisations


class Shared(NamedTuple):
    """The inputs every model of a group shares (device arrays)."""

    X_binned: jax.Array      # (F, n) bins
    y: jax.Array             # (n,)
    sample_weight: jax.Array  # (n,)
    fold_table: jax.Array    # (S, n) int32
    seed_keys: jax.Array     # (S, 2) uint32
    categorical: Optional[sweep_categorical.CatShared] = None  # categorical columns: their codes, targets, priors
    rows: Optional[RowsShared] = None  # rows spread over processes: the whole table's labels, ...


class GroupFit(NamedTuple):
    """Every model of a ``(depth, n_bins)`` group, fitted (host arrays)."""

    valid: np.ndarray                # (n_models, R) float64
    train: np.ndarray                # (n_models, R) float64
    baseline: Optional[np.ndarray]   # (n_models, K) when trees are kept
    trees: Optional[oblivious.ObliviousTrees]  # (n_models, R, T, ...) when kept
    n_chunks: int
    first_chunk_seconds: float
    n_fitted: Optional[np.ndarray] = None  # (n_models,) early stopping: rounds each model fitted
    n_resumed: int = 0                     # chunks read from checkpoints instead of fitted
    n_models_fitted: Optional[int] = None  # a callback stopped: the models fitted (the rest NaN)
    cat: Optional[sweep_categorical.CatOut] = None           # categorical columns, kept trees: (n_models, ...) each


def fit_group(program: Callable, shared: Shared, grid: grid_lib.Grid, loss: loss_lib.Loss,
              layout: grid_lib.Layout, models_per_call: int, *,
              log: Optional[Callable[[int, int, bool], None]] = None,
              checkpoints: Optional[checkpoints_lib.ChunkCheckpoints] = None, part: str = "",
              callbacks=(), stop: Optional[list] = None) -> GroupFit:
    """Fit every model of ``layout`` with ``program``, ``models_per_call`` at a time (the last
    call padded by repeating the last model); ``log(chunk, n_chunks, resumed)`` after each chunk.
    ``checkpoints`` save each chunk (``part`` files) and read those saved; a callback returning
    ``True`` stops, and the models not fitted (in later groups too, through ``stop``) get NaN
    curves."""
    n_models = layout.n_models
    stop = [] if stop is None else stop
    n_chunks = math.ceil(n_models / models_per_call)
    order = np.minimum(np.arange(n_chunks * models_per_call), n_models - 1)  # the padding repeats
    models_of = lambda c: order[c * models_per_call:(c + 1) * models_per_call]  # noqa: E731

    def inputs(c):
        idx = models_of(c)
        pts = layout.point[idx]
        hyper = boosting_lib.Hyperparams(*(jnp.asarray(grid.hyper_values[h][pts])
                                       for h in grid_lib.HYPERPARAMETERS))
        loss_c = loss.replace(params={p: jnp.asarray(v[pts]) for p, v in grid.loss_values.items()})
        args = (*shared[:5], hyper, loss_c, jnp.asarray(layout.fold[idx], jnp.int32),
                jnp.asarray(layout.seed[idx], jnp.int32))
        if shared.rows is not None:
            return args + (shared.rows,)
        if shared.categorical is None:
            return args
        point = sweep_categorical.CatPoint(jnp.asarray(grid.cat_values["cat_prior"][pts]),
                         jnp.asarray(grid.cat_values["cat_prior_weight"][pts]))
        return args + (shared.categorical, point)

    first_s = []

    def run(c, _):
        t0 = time.perf_counter()
        out = program(*inputs(c))
        if not first_s:
            jax.block_until_ready(out)
            first_s.append(time.perf_counter() - t0)
        return out

    def on_chunk(c, out):
        if checkpoints is not None:
            checkpoints.save(part, c, out, models_of(c))
        if log is not None:
            log(c, n_chunks, False)

    done = {}
    if checkpoints is not None:
        done = checkpoints.load(part, n_chunks, lambda: jax.eval_shape(program, *inputs(0)), models_of)
        for c in sorted(done) if log is not None else ():
            log(c, n_chunks, True)

    def info(c, out):
        idx = [int(i) for i in range(c * models_per_call, (c + 1) * models_per_call) if i < n_models]
        return {"models": idx, "valid_curves": np.asarray(out.valid)[:len(idx)],
                "train_curves": np.asarray(out.train)[:len(idx)]}

    def stopping(entry):
        entry = {**entry, "done": min(entry["done"], n_models), "items": n_models}  # not the padding
        if any([bool(cb(entry)) for cb in callbacks]):
            stop.append(True)
            return True
        return False

    outs = [] if stop else batching.map_chunks(
        run, n_chunks * models_per_call, models_per_call, done=done, on_chunk=on_chunk,
        what="sweep chunks", keeps=checkpoints is not None,
        callbacks=[stopping] if callbacks else (), info=info)
    n_run = len(outs)
    if n_run < n_chunks:  # a callback stopped: the chunks not fitted are NaN (never ranked)
        like = jax.eval_shape(program, *inputs(0))
        blank = jax.tree_util.tree_map(
            lambda s: np.full(s.shape, np.nan if np.issubdtype(s.dtype, np.floating) else 0, s.dtype), like)
        outs = outs + [blank] * (n_chunks - n_run)

    def gather(*parts):
        return np.concatenate([np.asarray(p) for p in parts])[:n_models]

    valid = gather(*(o.valid for o in outs)).astype(np.float64)
    train = gather(*(o.train for o in outs)).astype(np.float64)
    baseline = trees = n_fitted = cat = None
    if outs[0].trees is not None:
        baseline = gather(*(o.baseline for o in outs))
        trees = jax.tree_util.tree_map(gather, *(o.trees for o in outs))
    if outs[0].cat is not None:
        cat = jax.tree_util.tree_map(gather, *(o.cat for o in outs))
    if outs[0].n_fitted is not None:
        n_fitted = gather(*(o.n_fitted for o in outs)).astype(np.int64)
    return GroupFit(valid, train, baseline, trees, n_chunks, first_s[0] if first_s else 0.0, n_fitted,
                    len(done), None if n_run == n_chunks else min(n_run * models_per_call, n_models),
                    cat)
