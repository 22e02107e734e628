"""The compiled optimizer loop: ``n_steps`` optax steps in one ``lax.scan``, minibatches,
``restore_best``, and the curves it records."""

from __future__ import annotations

import functools
from typing import Callable, NamedTuple, Optional

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax import lax

from jboost import _compile
from jboost.fine_tuning import scores


class Curves(NamedTuple):
    """The fine-tuning curves (``return_curves=True``) of the hard (returned) model.

    Attributes:
      train_loss: ``(n_steps + 1,)`` the weighted mean training loss after ``s`` steps, on the
        step's rows (the last entry: the final parameters, on all rows).
      valid_loss: ``(n_steps + 1,)`` the mean ``eval_set`` loss after ``s`` steps (NaN without).
      best_step: ``()`` int32 the step whose parameters were returned.
    """

    train_loss: jax.Array
    valid_loss: jax.Array
    best_step: jax.Array


def _batch(rows: scores.Rows, key, batch_size: int) -> scores.Rows:
    """``batch_size`` rows drawn uniformly with replacement (their weights kept)."""
    n = rows.y.shape[0]
    idx = jax.random.randint(key, (batch_size,), 0, n)
    take = lambda a, axis=0: None if a is None else jnp.take(a, idx, axis=axis)
    return scores.Rows(take(rows.y), take(rows.w), take(rows.margin), take(rows.leaves, 1), take(rows.X_t, 1))


def _update(optimizer, grads, state, params, value, value_fn):
    # optax's bias corrections raise a float to an int32 count: standard promotion for it.
    with jax.numpy_dtype_promotion("standard"):
        if isinstance(optimizer, optax.GradientTransformationExtraArgs):
            # L-BFGS and other line-search methods take the value and the objective itself.
            updates, state = optimizer.update(grads, state, params, value=value, grad=grads,
                                              value_fn=value_fn)
        else:
            updates, state = optimizer.update(grads, state, params)
        return optax.apply_updates(params, updates), state


@functools.partial(_compile.jit, static_argnames=("optimizer", "n_steps", "batch_size", "schedule",
                                             "restore_best"))
def run_steps(params0: scores.Params, rows: scores.Rows, valid: Optional[scores.Rows], loss, st: Optional[scores.Structure],
         temperature, l2, key, *, optimizer, n_steps: int, batch_size: Optional[int],
         schedule: Optional[Callable], restore_best: bool):
    """``n_steps`` optimizer steps in one ``lax.scan``; returns ``(params, Curves)``."""
    leaves0 = params0.leaf_values
    nan = jnp.float32(jnp.nan)

    def valid_loss(params):
        if valid is None:
            return nan
        return scores.hard_loss(params, valid, loss, st)

    def step(carry, s):
        params, state, best = carry
        rows_s = rows if batch_size is None else _batch(rows, jax.random.fold_in(key, s), batch_size)
        temp = temperature if schedule is None else jnp.asarray(schedule(s), jnp.float32)
        penalised = lambda p: scores.penalised_loss(p, rows_s, loss, st, temp, l2, leaves0)
        (value, train), grads = jax.value_and_grad(penalised, has_aux=True)(params)
        v = valid_loss(params)
        if restore_best:
            better = v < best[1]
            best = jax.tree_util.tree_map(lambda a, b: jnp.where(better, a, b),
                                          (params, v, s), best)
        params, state = _update(optimizer, grads, state, params, value, lambda p: penalised(p)[0])
        return (params, state, best), (train, v)

    best0 = (params0, jnp.float32(jnp.inf), jnp.int32(0))
    (params, _, best), (train, v) = lax.scan(step, (params0, optimizer.init(params0), best0),
                                             jnp.arange(n_steps, dtype=jnp.int32))
    train_end = scores.hard_loss(params, rows, loss, st)
    v_end = valid_loss(params)
    best_step = jnp.int32(n_steps)
    if restore_best:
        keep_end = ~(best[1] < v_end)  # ties and NaN histories: the last step's parameters
        params = jax.tree_util.tree_map(lambda a, b: jnp.where(keep_end, a, b), params, best[0])
        best_step = jnp.where(keep_end, best_step, best[2])
    curves = Curves(jnp.concatenate([train, train_end[None]]), jnp.concatenate([v, v_end[None]]),
                    best_step)
    return params, curves


def check_finite_curve(train_loss) -> None:
    """Raise ``FloatingPointError`` naming the first step whose fine-tuning loss is not finite."""
    curve = np.asarray(train_loss)
    if np.all(np.isfinite(curve)):
        return
    first = int(np.argmax(~np.isfinite(curve)))
    raise FloatingPointError(
        f"the fine-tuning training loss is not finite from step {first} on (it was "
        f"{curve[max(first - 1, 0)]:.6g} before): the optimizer's steps diverged; lower its "
        "learning rate (a step moves a prediction by up to n_trees x an Adam learning rate), or "
        "check that the loss is finite at the model's predictions.")
