"""One compiled rounds program for host-side calls: boost_rounds, its carry (RoundsCarry) and round buffers (Rounds)."""

from __future__ import annotations

import functools
from typing import Any, Mapping, NamedTuple

import jax
import jax.numpy as jnp
from jax import lax

from jboost import _compile
from jboost.engine import boosting, state as state_lib
from jboost.losses import loss as loss_lib
from jboost.trees import oblivious

# The rounds one call of :func:`boost_rounds` can fit (its ``config.n_rounds``): fits that differ
# only in ``n_rounds`` share one program.
ROUNDS_PER_CALL = 64


class Rounds(NamedTuple):
    """The per-round record of one call of :func:`boost_rounds`: buffers of ``config.n_rounds``
    rounds, index ``i`` holding the fit's round ``start + i`` (``start``: the input carry's
    ``done``)."""

    trees: oblivious.ObliviousTrees  # leading axes (n_rounds, trees_per_round)
    train_loss: jax.Array           # (n_rounds,)
    valid_loss: jax.Array           # (n_rounds,)
    info: Mapping[str, jax.Array]   # the algorithm's diagnostics, each (n_rounds,)
    score: jax.Array                # (n_rounds,) the eval score (metric or validation loss)


class RoundsCarry(NamedTuple):
    """What :func:`boost_rounds` hands from one call to the next."""

    state: state_lib.BoostState   # after the last round fitted
    rounds: Rounds      # the buffers
    best: Any           # early stopping: (best_score, best_round) so far; () without
    done: jax.Array     # int32 position after the last round fitted
    stopped: jax.Array  # bool: early stopping has ended the fit


def rounds_template(data: state_lib.Data, key, hyper: boosting.Hyperparams, loss: loss_lib.Loss, init_raw,
                    config: boosting.BoostConfig) -> RoundsCarry:
    """NumPy placeholders of :func:`boost_rounds`'s input for a new fit: a zero state, empty
    buffers, the initial early-stopping record (only shapes are traced, nothing is compiled)."""
    import numpy as np

    args = (data, key, hyper, loss, init_raw)
    leaves, treedef = jax.tree_util.tree_flatten(args)
    avals = tuple((np.shape(a), jnp.result_type(a), bool(getattr(jax.typeof(a), "weak_type", False)))
                  for a in leaves)
    state, out = _template_shapes(config, treedef, avals)
    n = config.n_rounds
    zeros = lambda s: np.zeros(s.shape, s.dtype)
    buf = lambda fill: (lambda s: np.full((n,) + tuple(s.shape), fill, s.dtype))
    state = jax.tree_util.tree_map(zeros, state)._replace(loss=loss)
    rounds = Rounds(jax.tree_util.tree_map(buf(0), out.trees), buf(np.nan)(out.train_loss),
                    buf(np.nan)(out.valid_loss), jax.tree_util.tree_map(buf(0), dict(out.info)),
                    np.full((n,), np.nan, np.float32))
    best = () if config.early_stopping is None else (np.float32(np.inf), np.int32(-1))
    return RoundsCarry(state, rounds, best, np.int32(0), np.bool_(False))


@functools.lru_cache(maxsize=256)
def _template_shapes(config: boosting.BoostConfig, treedef, avals):
    """The shapes of the state and of a round's output of a fit (``jax.eval_shape``, cached)."""
    specs = [jax.ShapeDtypeStruct(shape, dtype, weak_type=weak) for shape, dtype, weak in avals]
    data, key, hyper, loss, init_raw = jax.tree_util.tree_unflatten(treedef, specs)
    state = jax.eval_shape(functools.partial(boosting.init, config=config), data, loss, init_raw)
    _, out = jax.eval_shape(lambda d, k, h, st: boosting.step(st, jnp.int32(0), data=d, key=k, hyper=h,
                                                     config=config), data, key, hyper, state)
    return state, out


def eval_metric_of(config: boosting.BoostConfig):
    """The validation score recorded per round: the early-stopping metric, else
    ``config.eval_metric``; ``None``: the validation loss."""
    es = config.early_stopping
    return es.metric if es is not None and es.metric is not None else config.eval_metric


@functools.partial(_compile.jit, static_argnames=("config",))
def boost_rounds(data: state_lib.Data, key, hyper: boosting.Hyperparams, init_raw, carry: RoundsCarry, first_round,
                 end, fresh, *, config: boosting.BoostConfig) -> RoundsCarry:
    """Rounds ``carry.done .. end - 1`` of a fit whose first round is ``first_round`` (at most
    ``config.n_rounds``), as one host-side call of a program shared by every call (docs/engine.md,
    "Host-side rounds"). ``fresh``: start from :func:`jboost.engine.boosting.init`."""
    return rounds_body(data, key, hyper, init_raw, carry, first_round, end, fresh, config=config)


def rounds_body(data, key, hyper, init_raw, carry, first_round, end, fresh, *, config):
    """The traced body of :func:`boost_rounds`, for callers compiling it into their own program."""
    es = config.early_stopping
    metric = eval_metric_of(config)
    state = lax.cond(fresh, lambda s: boosting.init(data, s.loss, init_raw, config), lambda s: s, carry.state)
    first_round = jnp.asarray(first_round, jnp.int32)

    begin = jnp.asarray(carry.done, jnp.int32)  # the position of the buffers' index 0
    end = jnp.minimum(jnp.asarray(end, jnp.int32), begin + config.n_rounds)

    def cond(c):
        return (c.done < end) & ~c.stopped

    def body(c):
        j = c.done
        m = first_round + j
        state, out = boosting.step(c.state, m, data=data, key=key, hyper=hyper, config=config)
        s = (boosting.validation_score(metric, data, state, out)
             if metric is not None or es is not None else jnp.float32(jnp.nan))
        put = lambda b, o: lax.dynamic_update_index_in_dim(b, o.astype(b.dtype), j - begin, 0)
        rounds = Rounds(jax.tree_util.tree_map(put, c.rounds.trees, out.trees),
                        put(c.rounds.train_loss, out.train_loss), put(c.rounds.valid_loss, out.valid_loss),
                        jax.tree_util.tree_map(put, c.rounds.info, dict(out.info)),
                        put(c.rounds.score, s))
        best, stopped = c.best, c.stopped
        if es is not None:
            best_score, best_i = best
            better = s < best_score - es.tolerance  # NaN never improves
            best = (jnp.where(better, s, best_score), jnp.where(better, m, best_i))
            stopped = m - best[1] >= es.rounds
        return RoundsCarry(state, rounds, best, j + 1, stopped)

    start = carry._replace(state=state, done=jnp.asarray(carry.done, jnp.int32),
                           stopped=jnp.asarray(carry.stopped, jnp.bool_))
    if es is not None:
        start = start._replace(best=(jnp.asarray(carry.best[0], jnp.float32),
                                     jnp.asarray(carry.best[1], jnp.int32)))
    return lax.while_loop(cond, body, start)
