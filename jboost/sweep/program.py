"""The compiled program of a sweep: a chunk of models vmapped over boosting init/step, its
shard_map over devices, whole or in calls of a few rounds (:class:`BlockProgram`).

A model is a grid point, a fold (training / held-out weight masks) and a seed, all sharing the
group's binned data; its held-out score is read off the training raw scores. See docs/sweeps.md."""

from __future__ import annotations

import functools
from typing import Any, Callable, NamedTuple, Optional, Tuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P, SingleDeviceSharding

from jboost import _compile
from jboost.engine import boosting as boosting_lib, state as state_lib
from jboost.fitting import settings
from jboost.losses import baselines
from jboost.sweep import categorical as sweep_categorical, metrics as metrics_lib
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


class BlockCarry(NamedTuple):
    """What a call of a block program (:func:`chunk_program` with ``rounds_per_call``) hands to
    the next, per model (a leading model axis; ``()`` where unused)."""

    state: state_lib.BoostState  # after the last round fitted
    best: Any = ()     # early stopping: (best score, best round) so far
    last: Any = ()     # early stopping: the last round fitted (-1: none)
    stopped: Any = ()  # early stopping: whether the fit has stopped
    raw: Any = ()      # a metric computed from the trees: the raw scores of those rounds so far


class BlockOut(NamedTuple):
    """What a call of a block program returns for the ``M`` models of a chunk: its rounds
    ``start .. end - 1`` at positions ``0 .. end - start - 1`` of ``B = rounds_per_call``."""

    valid: jax.Array   # (M, B) the held-out score after each round
    train: jax.Array   # (M, B) the training loss after each round
    baseline: Optional[jax.Array]  # (M, K) kept trees: the constant raw score the rounds start from
    trees: Optional[oblivious.ObliviousTrees]  # (M, B, T, ...) when kept, else None
    n_fitted: Optional[jax.Array] = None  # (M,) early stopping: the rounds each model fitted so far
    stopped: Optional[jax.Array] = None   # (M,) early stopping: whether each model has stopped
    cat: Optional["sweep_categorical.CatOut"] = None  # categorical columns, kept trees


def fit_chunk(X_binned, y, sample_weight, fold_table, seed_keys, hyper, loss, fold, seed,
              cat_shared: Optional[sweep_categorical.CatShared] = None,
              cat_point: Optional[sweep_categorical.CatPoint] = None, *,
              config: boosting_lib.BoostConfig, metric, keep_trees: bool,
              greater_is_better: bool = False,
              cat_layout: Optional[sweep_categorical.CatLayout] = None,
              rows: Optional[RowsShared] = None, block=None, rounds_per_call: int = 0):
    """Fit the models of one chunk (leading axis of ``hyper``, ``loss``, ``fold``, ``seed``, which
    index ``fold_table`` ``(S, n)`` and ``seed_keys`` ``(S, 2)``); with categorical columns each
    model bins its own statistics (:func:`jboost.sweep.categorical.model_bins`), with ``rows``
    (inside ``shard_map``) every device fits every model on its shard of the rows.

    Without ``block``: every round, a :class:`ChunkOut`. With ``block = (carry, start, end)``:
    rounds ``start .. end - 1`` (at most ``rounds_per_call``) after the :class:`BlockCarry`
    ``carry`` (ignored when ``start`` is 0), ``(carry, BlockOut)``: the same rounds bitwise."""
    kw = dict(config=config, metric=metric, greater_is_better=greater_is_better,
              cat_layout=cat_layout, rows=rows)
    shared = (X_binned, y, sample_weight, fold_table, seed_keys, cat_shared)
    if block is None:
        return jax.vmap(lambda h, l, f, s, c: _one_model(
            shared, h, l, f, s, c, keep_trees=keep_trees, **kw))(hyper, loss, fold, seed, cat_point)
    carry, start, end = block
    return jax.vmap(lambda h, l, f, s, c, k: _model_block(
        shared, h, l, f, s, c, k, start, end, keep_trees=keep_trees,
        rounds_per_call=rounds_per_call, **kw))(hyper, loss, fold, seed, cat_point, carry)


def first_carry(X_binned, y, sample_weight, fold_table, seed_keys, hyper, loss, fold, seed,
                cat_shared=None, cat_point=None, *, config, metric, greater_is_better=False,
                cat_layout=None, rows=None) -> BlockCarry:
    """The :class:`BlockCarry` of a chunk's models before their first round (what a block
    program starts from; its shapes give a chunk's first call its carry)."""
    shared = (X_binned, y, sample_weight, fold_table, seed_keys, cat_shared)
    return jax.vmap(lambda h, l, f, s, c: _model_carry(
        _model(shared, h, l, f, s, c, config=config, metric=metric, cat_layout=cat_layout,
               rows=rows), l, config))(hyper, loss, fold, seed, cat_point)


class _Model(NamedTuple):
    """One model of a chunk: its data (training weights of its folds), baseline, held-out
    weights, round with its held-out score and (categorical columns) its statistics."""

    data: state_lib.Data
    init_raw: jax.Array
    w_valid: jax.Array
    body: Callable        # body(state, m) -> (state, RoundOutput): round m, its held-out score
    in_rounds: bool       # the held-out score is computed in each round (else from the trees)
    sign: float           # -1: the score is negated in the rounds (maximised, early stopping)
    cat_out: Any


def _model(shared, hyper_i, loss_i, f, s, cat_i, *, config, metric, cat_layout, rows,
           greater_is_better: bool = False) -> _Model:
    """One model's inputs and round (no model axis)."""
    X_binned, y, sample_weight, fold_table, seed_keys, cat_shared = shared
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
        X_binned, cat_out = sweep_categorical.model_bins(
            X_binned, cat_shared, w_train, seed_keys[s], prior, cat_i.prior_weight,
            layout=cat_layout, n_bins=config.n_bins)
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

    return _Model(data, init_raw, w_valid, body, in_rounds, sign, cat_out)


def _one_model(shared, hyper_i, loss_i, f, s, cat_i, *, config, metric, keep_trees,
               greater_is_better, cat_layout, rows: Optional[RowsShared] = None):
    """One model of :func:`fit_chunk`, every round (no model axis)."""
    md = _model(shared, hyper_i, loss_i, f, s, cat_i, config=config, metric=metric,
                cat_layout=cat_layout, rows=rows, greater_is_better=greater_is_better)
    state0 = boosting_lib.init(md.data, loss_i, md.init_raw, config)
    rounds = jnp.arange(config.n_rounds, dtype=jnp.int32)
    n_fitted = None
    if config.early_stopping is not None:  # each model stops on its own; the chunk's loop ends
        out = boosting_lib.boost_until_stopped(  # when all have stopped
            md.body, state0, rounds, md.data, config.early_stopping,
            (jnp.float32(jnp.inf), jnp.int32(-1)))
        n_fitted = out.n_fitted
        valid = -out.valid_loss if md.sign < 0 else out.valid_loss  # the metric itself again
    else:
        state, out = lax.scan(md.body, state0, rounds)
        valid = out.valid_loss
        if not md.in_rounds:
            valid = metrics_lib.metric_curve(metric, state.loss, out.trees, md.init_raw,
                                             md.data.X_binned, shared[1], md.w_valid,
                                             config.n_bins)
    # Curves NaN where a traced setting is outside its domain (never ranked): the grid was checked
    # on the host, so this guards the program itself.
    valid, train_loss = settings.nan_outside_domains((valid, out.train_loss), loss_i, hyper_i,
                                                     warn=False)
    if not keep_trees:
        return ChunkOut(valid, train_loss, None, None, n_fitted)
    return ChunkOut(valid, train_loss, md.init_raw, out.trees, n_fitted, cat=md.cat_out)


def _model_carry(md: _Model, loss_i, config) -> BlockCarry:
    """A model's :class:`BlockCarry` before its first round."""
    state = boosting_lib.init(md.data, loss_i, md.init_raw, config)
    carry = BlockCarry(state)
    if config.early_stopping is not None:
        carry = carry._replace(best=(jnp.float32(jnp.inf), jnp.int32(-1)), last=jnp.int32(-1),
                               stopped=jnp.bool_(False))
    if not md.in_rounds:
        carry = carry._replace(raw=metrics_lib.first_raw(md.init_raw, md.data.y.shape[0]))
    return _strong(carry)


def _strong(tree):
    """``tree`` with no weak-typed leaf (a call's carry has the types of the next call's input)."""
    return jax.tree_util.tree_map(lambda a: lax.convert_element_type(a, jnp.result_type(a)), tree)


def _model_block(shared, hyper_i, loss_i, f, s, cat_i, carry: BlockCarry, start, end, *, config,
                 metric, keep_trees, greater_is_better, cat_layout, rows, rounds_per_call):
    """Rounds ``start .. end - 1`` of one model of :func:`fit_chunk` (no model axis): a
    ``while_loop`` of the round :func:`_one_model` scans, which with early stopping also ends
    when the model has stopped (the round of ``boost_until_stopped``)."""
    md = _model(shared, hyper_i, loss_i, f, s, cat_i, config=config, metric=metric,
                cat_layout=cat_layout, rows=rows, greater_is_better=greater_is_better)
    start, end = jnp.asarray(start, jnp.int32), jnp.asarray(end, jnp.int32)
    carry = lax.cond(start == 0, lambda c: _model_carry(md, loss_i, config), lambda c: c, carry)
    _, like = jax.eval_shape(md.body, carry.state, start)
    with_trees = keep_trees or not md.in_rounds
    bufs = (jnp.full((rounds_per_call,), jnp.nan, like.valid_loss.dtype),
            jnp.full((rounds_per_call,), jnp.nan, like.train_loss.dtype),
            jax.tree_util.tree_map(lambda a: jnp.zeros((rounds_per_call,) + a.shape, a.dtype),
                                   like.trees) if with_trees else None)

    def put(buf, value, j):
        return lax.dynamic_update_index_in_dim(buf, value.astype(buf.dtype), j - start, 0)

    def record(bufs, out, j):
        trees = (jax.tree_util.tree_map(lambda b, o: put(b, o, j), bufs[2], out.trees)
                 if with_trees else None)
        return put(bufs[0], out.valid_loss, j), put(bufs[1], out.train_loss, j), trees

    es = config.early_stopping
    if es is None:
        def one_round(c):
            j, state, bufs = c
            state, out = md.body(state, j)
            return j + 1, state, record(bufs, out, j)

        _, state, bufs = lax.while_loop(lambda c: c[0] < end, one_round, (start, carry.state, bufs))
        carry = carry._replace(state=state)
    else:
        def one_round(c):  # boost_until_stopped's round of an active model
            j, (state, (best, best_i), _, _, raw), bufs = c
            state, out = md.body(state, j)
            s = boosting_lib.validation_score(es.metric, md.data, state, out)
            better = s < best - es.tolerance  # NaN never improves
            best, best_i = jnp.where(better, s, best), jnp.where(better, j, best_i)
            stopped = (j - best_i >= es.rounds) | (j >= config.n_rounds - 1)
            return j + 1, BlockCarry(state, (best, best_i), j, stopped, raw), record(bufs, out, j)

        _, carry, bufs = lax.while_loop(lambda c: (c[0] < end) & ~c[1].stopped, one_round,
                                        (start, carry, bufs))
    valid, train, trees = bufs
    if es is not None and md.sign < 0:
        valid = -valid  # the metric itself again
    if not md.in_rounds:
        raw, valid = metrics_lib.metric_block(metric, carry.state.loss, trees, carry.raw,
                                              md.data.X_binned, shared[1], md.w_valid,
                                              config.n_bins, end - start)
        carry = carry._replace(raw=raw)
    valid, train = settings.nan_outside_domains((valid, train), loss_i, hyper_i, warn=False)
    out = BlockOut(valid, train, None, None)
    if es is not None:
        out = out._replace(n_fitted=carry.last + 1, stopped=carry.stopped)
    if keep_trees:
        out = out._replace(baseline=md.init_raw, trees=trees, cat=md.cat_out)
    return _strong(carry), out


def _held_out_score(metric, y, w_valid, axis, rows: Optional[RowsShared], s, f):
    """``score(state)``: the held-out fold's mean loss (``metric`` ``None``; summed over the
    devices' rows under ``axis``) or ``metric`` (with rows spread over devices, on the whole
    table's rows in table order: the raw scores gathered), from the training raw scores."""
    if metric is None:
        return lambda state: boosting_lib.mean_loss(state.loss, y, state.raw, w_valid, axis)
    if rows is None:
        return lambda state: metrics_lib.evaluate(metric, state.loss, y, state.raw, w_valid,
                                                  name="metric").astype(jnp.float32).reshape(())
    held_all = rows.fold_table[s] == f
    w_all = jnp.where(held_all, rows.sample_weight, 0.0)

    def score(state):
        raw = lax.all_gather(state.raw, axis, tiled=True)[rows.positions]
        return metrics_lib.evaluate(metric, state.loss, rows.y, raw, w_all,
                                    name="metric").astype(jnp.float32).reshape(())
    return score


@functools.lru_cache(maxsize=64)
def chunk_program(config: boosting_lib.BoostConfig, metric, keep_trees: bool, devices: Tuple,
                  greater_is_better: bool = False,
                  cat_layout: Optional[sweep_categorical.CatLayout] = None,
                  rounds_per_call: Optional[int] = None) -> Callable:
    """The jit-compiled :func:`fit_chunk` for one static combination (cached per combination):
    ``program(X_binned, y, sample_weight, fold_table, seed_keys, hyper, loss, fold, seed)``,
    with categorical columns (``cat_layout``) followed by ``cat_shared, cat_point``: every round
    in one call. With ``rounds_per_call``: the :class:`BlockProgram` of the same models, at most
    that many rounds a call (what a sweep runs)."""
    kw = dict(config=config, metric=metric, greater_is_better=greater_is_better,
              cat_layout=cat_layout)

    def body(*args):
        if rounds_per_call is None:
            return fit_chunk(*args, keep_trees=keep_trees, **kw)
        *args, carry, start, end = args
        return fit_chunk(*args, keep_trees=keep_trees, block=(carry, start, end),
                         rounds_per_call=rounds_per_call, **kw)

    def init(*args):
        return first_carry(*args, **kw)

    if len(devices) == 1:
        if rounds_per_call is None:
            return _compile.jit(body)
        return BlockProgram(_compile.jit(body), _compile.jit(init),
                            SingleDeviceSharding(devices[0]), rounds_per_call)
    mesh = Mesh(np.asarray(devices), ("models",))
    shared, per_model = P(), P("models")
    # check_vma=False: the core mixes per-model (varying) and shared values in one op, which is
    # what we want; every model's computation stays on its own device.
    cat_specs = () if cat_layout is None else (shared, per_model)
    specs = (shared,) * 5 + (per_model,) * 4 + cat_specs
    if rounds_per_call is None:
        return _compile.jit(jax.shard_map(body, mesh=mesh, in_specs=specs, out_specs=per_model,
                                          check_vma=False))
    block = jax.shard_map(body, mesh=mesh, in_specs=specs + (per_model, shared, shared),
                          out_specs=(per_model, per_model), check_vma=False)
    init_mapped = jax.shard_map(init, mesh=mesh, in_specs=specs, out_specs=per_model,
                                check_vma=False)
    return BlockProgram(_compile.jit(block), _compile.jit(init_mapped),
                        NamedSharding(mesh, per_model), rounds_per_call)


@functools.lru_cache(maxsize=64)
def rows_chunk_program(config: boosting_lib.BoostConfig, metric, keep_trees: bool, mesh: Mesh,
                       greater_is_better: bool = False,
                       rounds_per_call: Optional[int] = None) -> Callable:
    """The compiled :func:`fit_chunk` of a sweep whose rows are spread over processes
    (``rows="local"``): the training arrays sharded over the rows of the one-axis ``mesh``,
    histograms ``psum``-ed, the replicated outputs returned as this process's arrays. With
    ``rounds_per_call``: its :class:`BlockProgram` (each device's carry its own)."""
    axis = mesh.axis_names[0]
    config = config._replace(axis_name=axis)
    kw = dict(config=config, metric=metric, greater_is_better=greater_is_better)
    row, rep = P(axis), P()
    specs = (P(None, axis), row, row, P(None, axis)) + (rep,) * 6

    def body(*args):
        if rounds_per_call is None:
            *args, rows = args
            return fit_chunk(*args, keep_trees=keep_trees, rows=rows, **kw)
        *args, rows, carry, start, end = args
        carry, out = fit_chunk(*args, keep_trees=keep_trees, rows=rows,
                               block=(jax.tree_util.tree_map(lambda a: a[0], carry), start, end),
                               rounds_per_call=rounds_per_call, **kw)
        return jax.tree_util.tree_map(lambda a: a[None], carry), out

    def init(*args):
        *args, rows = args
        return jax.tree_util.tree_map(lambda a: a[None], first_carry(*args, rows=rows, **kw))

    if rounds_per_call is None:
        return _Localized(_compile.jit(jax.shard_map(body, mesh=mesh, in_specs=specs,
                                                     out_specs=rep, check_vma=False)))
    block = jax.shard_map(body, mesh=mesh, in_specs=specs + (row, rep, rep),
                          out_specs=(row, rep), check_vma=False)
    init_mapped = jax.shard_map(init, mesh=mesh, in_specs=specs, out_specs=row, check_vma=False)
    return BlockProgram(_compile.jit(block), _compile.jit(init_mapped), NamedSharding(mesh, row),
                        rounds_per_call, localize=True)


def _local(tree):
    """A multi-process program's replicated outputs as this process's arrays."""
    def local(a):
        if isinstance(a, jax.core.Tracer) or not isinstance(a, jax.Array) or a.is_fully_addressable:
            return a
        return a.addressable_data(0)
    return jax.tree_util.tree_map(local, tree)


class _Localized:
    """A jitted multi-process program whose replicated outputs come back as this process's
    arrays (as :func:`jax.eval_shape` and :func:`n_compiled` see the jitted function)."""

    def __init__(self, fn):
        self.fn = fn

    def __call__(self, *args):
        return _local(self.fn(*args))

    def _cache_size(self) -> int:
        return self.fn._cache_size()  # noqa: SLF001


class BlockProgram:
    """A group's compiled program in calls of at most ``rounds_per_call`` rounds (a sweep's
    rounds as host-side calls, so that ``Ctrl-C`` lands within one):
    ``program(*inputs, carry, start, end) -> (carry, BlockOut)`` fits rounds ``start .. end - 1``
    of a chunk's models after ``carry`` (a :class:`BlockCarry`; :meth:`first_carry` gives the
    first call one, whose values are not read)."""

    def __init__(self, fn, init, sharding, rounds_per_call: int, localize: bool = False):
        self.fn, self.init, self.sharding = fn, init, sharding
        self.rounds_per_call, self.localize = int(rounds_per_call), localize

    def __call__(self, *args):
        carry, out = self.fn(*args)
        # The next call's carry placed as this one's (XLA may place an empty output otherwise),
        # so that every call runs the one compiled program; a no-op for the others.
        carry = jax.device_put(carry, jax.tree_util.tree_map(lambda a: a.sharding, args[-3]))
        return carry, (_local(out) if self.localize else out)

    def first_carry(self, *inputs) -> BlockCarry:
        """Zeros of the shapes of ``inputs``' :class:`BlockCarry`, placed as the calls'."""
        like = jax.eval_shape(self.init, *inputs)

        def zeros(s):
            host = np.broadcast_to(np.zeros((), s.dtype), s.shape)
            return jax.make_array_from_callback(s.shape, self.sharding, lambda idx: host[idx])
        return jax.tree_util.tree_map(zeros, like)

    def out_shapes(self, *inputs, carry) -> BlockOut:
        """The shapes of a call's :class:`BlockOut` (nothing is compiled)."""
        _, out = jax.eval_shape(self.fn, *inputs, carry, np.int32(0), np.int32(1))
        return out

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
