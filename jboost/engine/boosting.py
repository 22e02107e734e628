"""Boosting as a public ``init`` / ``step`` pair; :func:`boost` is a ``lax.scan`` of ``step``.

ESL Algorithm 10.3 with second-order (Newton) trees as in XGBoost: per round gradients and hessians
by autodiff, row and column samplers, the algorithm's round
(:class:`jboost.engine.algorithm.Algorithm`) and shrinkage. Static settings are a
:class:`BoostConfig`, continuous ones traced :class:`Hyperparams`. See docs/engine.md ("The
boosting step")."""

from __future__ import annotations

import functools
from typing import Any, Callable, NamedTuple, Optional, Union

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from jboost import _compile, checks
from jboost.data import rows
from jboost.engine import algorithm as algorithm_lib, samplers, state as state_lib
from jboost.losses import baselines, loss as loss_lib, metrics as metrics_lib
from jboost.trees import family, oblivious, splits as splits_lib


class BoostConfig(NamedTuple):
    """Static settings: each distinct value is a separate compilation."""

    n_rounds: int
    depth: int
    n_bins: int
    per_output_trees: bool = False   # K trees per round (ESL Alg. 10.4) instead of vector leaves
    colsample_by: Union[str, Callable] = "tree"  # "tree", "level" or a column sampler (jboost.engine.samplers)
    learning_rate_schedule: Optional[Callable] = None  # round -> multiplier (e.g. an optax schedule)
    axis_name: Optional[str] = None   # set by boost_sharded: rows are sharded over this mesh axis
    missing: bool = True              # False: no training row has a missing value (half the split search)
    row_sampler: Union[str, Callable] = "bernoulli"  # "bernoulli", "poisson" or a row sampler
    algorithm: algorithm_lib.Algorithm = algorithm_lib.NEWTON     # the round rule (jboost.algorithms define others)
    early_stopping: Optional["EarlyStopping"] = None  # stop on the validation score
    split_criterion: splits_lib.SplitCriterion = splits_lib.NEWTON  # split scores and leaf values
    tree_family: type = oblivious.ObliviousTrees  # a tree_lib.TreeFamily: how trees grow and predict
    max_leaves: Optional[int] = None  # loss-guided trees (jboost.trees.lossguide): the most leaves
    monotone: Optional[tuple] = None  # a sign in {-1, 0, 1} per feature (jboost.trees.monotone)
    interactions: Optional[tuple] = None  # feature groups that may interact (jboost.trees.interactions)
    eval_metric: Union[None, str, Callable] = None  # a validation metric recorded per round (boost_rounds)
    # Sharded rows not in table order (a multi-process fit, jboost.engine.distributed): the table row of
    # each shard's first row, per device of the mesh axis (its row draws are read from there).
    row_starts: Optional[tuple] = None

    @property
    def column_sampler(self) -> Callable:
        by = self.colsample_by
        return samplers.COLUMN_SAMPLERS[by] if isinstance(by, str) else by

    @property
    def row_sampler_fn(self) -> Callable:
        s = self.row_sampler
        return samplers.ROW_SAMPLERS[s] if isinstance(s, str) else s


class Hyperparams(NamedTuple):
    """Continuous hyperparameters: traced, so they can be vmapped over."""

    learning_rate: jax.Array
    l2: jax.Array
    min_split_gain: jax.Array
    min_child_weight: jax.Array
    subsample: jax.Array
    colsample: jax.Array

    @classmethod
    def create(cls, learning_rate=0.1, l2=1.0, min_split_gain=0.0, min_child_weight=1.0,
               subsample=1.0, colsample=1.0) -> "Hyperparams":
        f = lambda v: checks.device_array(v, np.float32)
        return cls(f(learning_rate), f(l2), f(min_split_gain), f(min_child_weight), f(subsample),
                   f(colsample))


class EarlyStopping(NamedTuple):
    """Stop when the validation score (the mean validation loss, a named metric or ``metric(y, raw,
    w)``, minimised) has not improved by ``tolerance`` for ``rounds`` rounds; rounds run in chunks
    of ``chunk`` in a ``lax.while_loop`` (rounds past the stop are masked out)."""

    rounds: int
    tolerance: float = 0.0
    metric: Union[None, str, Callable] = None
    chunk: int = 8


def mean_loss(loss, y, raw, w, axis_name=None):
    """Weighted mean loss of the rows; NaN when they have no weight (e.g. an empty set)."""
    total = rows.row_sum(w)
    s = loss_lib.total_loss(loss, y, raw, w)
    if axis_name is not None:
        total, s = lax.psum((total, s), axis_name)
    return jnp.where(total > 0, s / total, jnp.nan)


def _all_rows(x, axis_name):
    return x if axis_name is None else lax.all_gather(x, axis_name, tiled=True)


def round_learning_rate(config: BoostConfig, hyper: Hyperparams, m):
    """Shrinkage of round ``m``: ``learning_rate * schedule(m)`` (ESL Section 10.12.1)."""
    lr = hyper.learning_rate
    if config.learning_rate_schedule is not None:
        # optax's schedules mix Python floats, bools and int32 counts: standard promotion.
        with jax.numpy_dtype_promotion("standard"):
            rate = config.learning_rate_schedule(m)
        lr = lr * jnp.asarray(rate, jnp.float32)
    return lr


def round_values(trees: oblivious.ObliviousTrees, leaves):
    """``(n, K)`` the values of a round's trees ``(T, ...)`` at rows whose leaves are ``(T, n)``,
    summed over the trees: the increment :func:`step` adds to the raw scores (an algorithm that
    reads it, e.g. SAMME.R's weight update, gets bitwise the same values)."""
    values = jax.vmap(lambda t, leaf: t.leaf_values[leaf])
    if trees.leaf_values.shape[0] == 1:
        return values(trees, leaves)[0]
    # Several trees: a loop over materialised leaf values, so that no FMA is contracted in the
    # fitting program that a continued fit (resume) would not contract.
    def add(t, acc):
        tree = jax.tree_util.tree_map(lambda a: a[t], trees)
        return acc + tree.leaf_values[leaves[t]]

    zero = jnp.zeros(leaves.shape[1:] + trees.leaf_values.shape[-1:], trees.leaf_values.dtype)
    return lax.fori_loop(0, trees.leaf_values.shape[0], add, zero)


def init(data: state_lib.Data, loss: loss_lib.Loss, init_raw, config: BoostConfig) -> state_lib.BoostState:
    """The state before round 0: every row's raw score is ``init_raw`` ``(K,)`` (plus the row's
    ``data.margin`` when given)."""
    k = init_raw.shape[0]
    raw0 = jnp.broadcast_to(init_raw.astype(jnp.float32), (data.y.shape[0], k))
    raw_valid0 = jnp.broadcast_to(init_raw.astype(jnp.float32), (data.y_valid.shape[0], k))
    if data.margin is not None:
        raw0 = data.margin + raw0
    if data.margin_valid is not None:
        raw_valid0 = data.margin_valid + raw_valid0
    return state_lib.BoostState(raw0, raw_valid0, loss, config.algorithm.init(data, loss), jnp.zeros_like(raw0),
                      jnp.zeros_like(raw_valid0))


def step(state: state_lib.BoostState, m, *, data: state_lib.Data, key, hyper: Hyperparams, config: BoostConfig):
    """Round ``m`` of boosting: returns ``(state, RoundOutput)``. With ``config.axis_name`` the
    training rows are this device's shard (sums ``psum``-ed), the validation set replicated."""
    axis = config.axis_name
    y = data.y
    n = y.shape[0]
    n_features = data.X_binned.shape[0]
    w = data.w.astype(jnp.float32)
    k_rows, k_cols = jax.random.split(jax.random.fold_in(key, m))
    raw_m, raw_valid_m = state.raw, state.raw_valid  # the last round's increment added, as stored
    loss_m = state.loss
    if loss_m.adaptive_huber_alpha:
        # ESL 10.10.2: delta = alpha-quantile of |y - f_{m-1}|.
        delta = baselines.weighted_quantile(_all_rows(jnp.abs(y - raw_m[:, 0]), axis),
                                             _all_rows(w, axis), loss_m.params["alpha"])
        loss_m = loss_m.with_params(delta=jnp.maximum(delta, 1e-12))
    # Draws for all rows, then this shard's slice: the same rows whatever the sharding.
    if axis is None:
        sample = config.row_sampler_fn(k_rows, n, hyper.subsample)
    else:
        # ``row_starts``: each shard's first table row (a multi-process fit's shards are padded).
        n_global = n * lax.psum(1, axis)
        start = (lax.axis_index(axis) * n if config.row_starts is None
                 else jnp.asarray(config.row_starts, jnp.int32)[lax.axis_index(axis)])
        sample = lax.dynamic_slice_in_dim(config.row_sampler_fn(k_rows, n_global, hyper.subsample),
                                          start, n)
    masks = config.column_sampler(k_cols, n_features, config.depth, hyper.colsample)
    lr = round_learning_rate(config, hyper, m)
    r = algorithm_lib.Round(m, data._replace(w=w), raw_m, loss_m, state.extra, sample, masks, lr, hyper, config,
              jax.random.fold_in(jax.random.fold_in(key, m), 2))
    res = config.algorithm.round(r)
    trees = res.trees
    inc = round_values(trees, res.leaves)
    leaves_valid = jax.vmap(lambda t: family.leaf_index_binned(t, data.X_valid, config.n_bins))(trees)
    inc_valid = round_values(trees, leaves_valid)
    new = state_lib.BoostState(raw_m, raw_valid_m, loss_m, res.extra, inc, inc_valid)
    out = state_lib.RoundOutput(trees, mean_loss(loss_m, y, new.raw, w, axis),
                      mean_loss(loss_m, data.y_valid, new.raw_valid, data.w_valid.astype(jnp.float32)),
                      dict(res.info))
    return new, out


@functools.partial(_compile.jit, static_argnames=("config",))
def boost(data: state_lib.Data, key, hyper: Hyperparams, loss: loss_lib.Loss, init_raw, *,
          config: BoostConfig, state: Optional[state_lib.BoostState] = None, first_round=0,
          best=None) -> state_lib.BoostOutput:
    """Run ``config.n_rounds`` rounds of boosting from the constant raw score ``init_raw`` ``(K,)``:
    a ``lax.scan`` of :func:`step` from :func:`init` (chunks in a ``while_loop`` with early
    stopping).

    Args:
      state: continue from this :class:`jboost.engine.state.BoostState` instead of :func:`init`.
      first_round: the (traced) index of the first round: ``r`` rounds, then ``s`` more from the
        state, equal ``r + s`` rounds bitwise.
      best: with early stopping, ``(best_score, best_round)`` of the rounds before ``first_round``.
    """
    body = functools.partial(step, data=data, key=key, hyper=hyper, config=config)
    state0 = init(data, loss, init_raw, config) if state is None else state
    rounds = jnp.asarray(first_round, jnp.int32) + jnp.arange(config.n_rounds, dtype=jnp.int32)
    if config.early_stopping is not None:
        if best is None:
            best = (jnp.float32(jnp.inf), rounds[0] - 1)
        return boost_until_stopped(body, state0, rounds, data, config.early_stopping, best)
    state, out = lax.scan(body, state0, rounds)
    return state_lib.BoostOutput(out.trees, out.train_loss, out.valid_loss, state.loss, out.info, state.extra,
                       state)


def resume(data: state_lib.Data, trees, init_raw, loss: loss_lib.Loss, config: BoostConfig,
           extra: Any = None) -> state_lib.BoostState:
    """The :class:`jboost.engine.state.BoostState` after an earlier fit's rounds ``trees`` on the
    same bins, accumulated as :func:`step` does; ``extra``: the algorithm's state (``None``: its
    ``init``)."""
    state = init(data, loss, init_raw, config)
    if extra is not None:
        state = state._replace(extra=extra)

    def one(raws, trees_m):
        raw, raw_valid = raws
        leaves = jax.vmap(lambda t: family.leaf_index_binned(t, data.X_binned, config.n_bins))(trees_m)
        leaves_valid = jax.vmap(lambda t: family.leaf_index_binned(t, data.X_valid, config.n_bins))(trees_m)
        return (raw + round_values(trees_m, leaves), raw_valid + round_values(trees_m, leaves_valid)), None

    (raw, raw_valid), _ = lax.scan(one, (state.raw, state.raw_valid), trees)
    return state._replace(base=raw, base_valid=raw_valid, pending=jnp.zeros_like(raw),
                          pending_valid=jnp.zeros_like(raw_valid))


def validation_score(metric, data: state_lib.Data, state: state_lib.BoostState, out):
    """A round's validation score: ``metric`` on the validation rows, or (``None``) the round's
    ``valid_loss``."""
    if metric is None:
        return out.valid_loss.astype(jnp.float32)
    return metrics_lib.evaluate(metric, state.loss, data.y_valid, state.raw_valid,
                                data.w_valid.astype(jnp.float32)).astype(jnp.float32).reshape(())


def _blank_rounds(out: state_lib.RoundOutput, lead: tuple = ()) -> state_lib.RoundOutput:
    """Rounds not fitted, of ``out``'s shapes with leading axes ``lead``: zero trees and info,
    NaN losses."""
    zeros = lambda s: jnp.zeros(lead + s.shape, s.dtype)  # noqa: E731
    nan = lambda s: jnp.full(lead + s.shape, jnp.nan, s.dtype)  # noqa: E731
    return state_lib.RoundOutput(jax.tree_util.tree_map(zeros, out.trees), nan(out.train_loss),
                                 nan(out.valid_loss), jax.tree_util.tree_map(zeros, out.info))


def boost_until_stopped(body, state0: state_lib.BoostState, rounds, data: state_lib.Data, es: EarlyStopping,
                        best) -> state_lib.BoostOutput:
    """:func:`boost` with early stopping: chunks of ``es.chunk`` rounds (a ``lax.scan``) in a
    ``lax.while_loop`` that ends when the score has not improved for ``es.rounds`` rounds.
    ``body(state, m)`` is one round; ``best`` the ``(best_score, best_round)`` so far."""
    n_rounds = rounds.shape[0]
    chunk = max(1, min(int(es.chunk), n_rounds))
    n_chunks = -(-n_rounds // chunk)
    _, template = jax.eval_shape(body, state0, rounds[0])
    buffers = _blank_rounds(template, (n_chunks * chunk,))
    def one_round(carry, i):
        c, state, best, best_i, last_i, stopped = carry
        j = c * chunk + i  # position in this fit
        active = (j < n_rounds) & ~stopped
        m = rounds[jnp.minimum(j, n_rounds - 1)]  # the round's index in the whole fit
        new_state, out = body(state, m)
        s = validation_score(es.metric, data, new_state, out)
        better = active & (s < best - es.tolerance)  # NaN never improves
        best, best_i = jnp.where(better, s, best), jnp.where(better, m, best_i)
        last_i = jnp.where(active, j, last_i)
        stopped = stopped | (active & (m - best_i >= es.rounds)) | (j >= n_rounds - 1)
        keep = lambda new, old: jnp.where(active, new, old)
        state = jax.tree_util.tree_map(keep, new_state, state)
        out = jax.tree_util.tree_map(keep, out, _blank_rounds(out))
        return (c, state, best, best_i, last_i, stopped), out

    def run_chunk(carry):
        (c, state, best, best_i, last_i, stopped), bufs = carry
        (_, state, best, best_i, last_i, stopped), outs = lax.scan(
            one_round, (c, state, best, best_i, last_i, stopped), jnp.arange(chunk))
        bufs = jax.tree_util.tree_map(
            lambda b, o: lax.dynamic_update_slice_in_dim(b, o, c * chunk, axis=0), bufs, outs)
        return (c + 1, state, best, best_i, last_i, stopped), bufs

    best_score0, best_round0 = best
    carry0 = (jnp.int32(0), state0, jnp.asarray(best_score0, jnp.float32),
              jnp.asarray(best_round0, jnp.int32), jnp.int32(-1), jnp.bool_(False))
    (_, state, best_score, best_i, last_i, _), bufs = lax.while_loop(
        lambda carry: ~carry[0][5], run_chunk, (carry0, buffers))
    bufs = jax.tree_util.tree_map(lambda b: b[:n_rounds], bufs)
    return state_lib.BoostOutput(bufs.trees, bufs.train_loss, bufs.valid_loss, state.loss, bufs.info,
                       state.extra, state, best_i, last_i + 1, best_score)
