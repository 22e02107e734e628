"""Data-parallel boosting: boost and boost_rounds with the training rows sharded over a mesh (shard_map, psum-ed histograms)."""

from __future__ import annotations

import functools
from typing import Optional

import jax
import jax.numpy as jnp

from jboost import _compile
from jboost.engine import boosting, calls, state as state_lib
from jboost.losses import loss as loss_lib


def boost_sharded(mesh, data: state_lib.Data, key, hyper: boosting.Hyperparams, loss: loss_lib.Loss, init_raw, *,
                  config: boosting.BoostConfig, state: Optional[state_lib.BoostState] = None, first_round=0,
                  best=None) -> state_lib.BoostOutput:
    """:func:`jboost.engine.boosting.boost` with the training rows sharded over the first axis of
    ``mesh`` (padded, histograms ``psum``-ed; docs/engine.md, "Rows sharded over devices"); the
    returned state holds every row."""
    axis = mesh.axis_names[0]
    n = data.y.shape[0]
    data, rows = pad_rows(data, mesh.shape[axis])
    if state is not None:
        state = state._replace(base=rows(state.base), pending=rows(state.pending))
    fn = _sharded_boost(mesh, config._replace(axis_name=axis), data.margin is not None,
                        data.margin_valid is not None, state is not None,
                        config.early_stopping is not None and best is not None)
    args = (data, key, hyper, loss, init_raw)
    if state is not None:
        args += (state, jnp.asarray(first_round, jnp.int32))
    if config.early_stopping is not None and best is not None:
        args += (best,)
    out = fn(*args)
    return out._replace(state=out.state._replace(base=out.state.base[:n], pending=out.state.pending[:n]))


@functools.lru_cache(maxsize=64)
def _sharded_boost(mesh, config: boosting.BoostConfig, margin: bool = False, margin_valid: bool = False,
                   continued: bool = False, with_best: bool = False):
    rep, data_spec, state_spec = _specs(config.axis_name, margin, margin_valid)
    in_specs = (data_spec, rep, rep, rep, rep)
    if continued:
        in_specs += (state_spec, rep)
    if with_best:
        in_specs += (rep,)

    def body(data, key, hyper, loss, init_raw, *rest):
        state, first_round = (rest[0], rest[1]) if continued else (None, 0)
        best = rest[-1] if with_best else None
        return boosting.boost.__wrapped__(data, key, hyper, loss, init_raw, config=config, state=state,
                                 first_round=first_round, best=best)

    out_spec = state_lib.BoostOutput(rep, rep, rep, rep, rep, rep, state_spec, rep, rep, rep)
    fn = jax.shard_map(body, mesh=mesh, in_specs=in_specs, out_specs=out_spec, check_vma=False)
    return _compile.jit(fn)


def _specs(axis: str, margin: bool, margin_valid: bool):
    """``(replicated, data_spec, state_spec)``: the partition specs of a fit's rows over ``axis``."""
    from jax.sharding import PartitionSpec as P

    rows, rep = P(axis), P()
    data_spec = state_lib.Data(P(None, axis), rows, rows, rep, rep, rep, rows if margin else None,
                               rep if margin_valid else None)
    return rep, data_spec, state_lib.BoostState(rows, rep, rep, rep, rows, rep)


def pad_rows(data: state_lib.Data, n_devices: int):
    """``(data, rows)``: ``data``'s training rows padded with zero-weight rows to a multiple of
    ``n_devices``, and ``rows``, which pads a per-row array likewise."""
    pad = (-data.y.shape[0]) % n_devices
    rows = lambda a: None if a is None or not pad else jnp.pad(a, ((0, pad),) + ((0, 0),) * (a.ndim - 1))
    if not pad:
        return data, lambda a: a
    return data._replace(X_binned=jnp.pad(data.X_binned, ((0, 0), (0, pad))), y=rows(data.y),
                         w=rows(data.w), margin=rows(data.margin)), rows


def boost_rounds_sharded(mesh, data: state_lib.Data, key, hyper: boosting.Hyperparams, init_raw, carry: calls.RoundsCarry,
                         first_round, end, fresh, *, config: boosting.BoostConfig) -> calls.RoundsCarry:
    """:func:`jboost.engine.calls.boost_rounds` with the training rows sharded over the first
    axis of ``mesh``, as :func:`boost_sharded` (rows padded by :func:`pad_rows`)."""
    axis = mesh.axis_names[0]
    fn = _sharded_rounds(mesh, config._replace(axis_name=axis), data.margin is not None,
                         data.margin_valid is not None)
    return fn(data, key, hyper, init_raw, carry, first_round, end, fresh)


@functools.lru_cache(maxsize=64)
def _sharded_rounds(mesh, config: boosting.BoostConfig, margin: bool = False, margin_valid: bool = False):
    rep, data_spec, state_spec = _specs(config.axis_name, margin, margin_valid)
    carry_spec = calls.RoundsCarry(state_spec, rep, rep, rep, rep)

    def body(data, key, hyper, init_raw, carry, first_round, end, fresh):
        return calls.rounds_body(data, key, hyper, init_raw, carry, first_round, end, fresh, config=config)

    fn = jax.shard_map(body, mesh=mesh, in_specs=(data_spec, rep, rep, rep, carry_spec, rep, rep, rep),
                       out_specs=carry_spec, check_vma=False)
    return _compile.jit(fn)
