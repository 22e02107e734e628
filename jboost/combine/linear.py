"""The second tier of stacking: regularised linear, logistic and softmax regression (optax L-BFGS).

Stacking (Wolpert 1992; Breiman 1996; ESL 8.8) fits a convex model on the out-of-fold raw scores
of the base learners; :func:`fit_linear` is that model, with a ridge penalty (LeBlanc and
Tibshirani 1996), and :func:`linear_loss` the :class:`jboost.Loss` whose link maps its raw
output to a prediction (identity, sigmoid, softmax).
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp

from jboost import _compile
from jboost import _validation
from jboost import losses as losses_lib

LINEAR_TASKS = ("regression", "binary", "multiclass")


class LinearModel(NamedTuple):
    coef: jax.Array       # (P, K)
    intercept: jax.Array  # (K,)


def linear_raw(model: LinearModel, Z) -> jax.Array:
    """Raw scores ``Z @ coef + intercept`` ``(n, K)``."""
    return jnp.asarray(Z, jnp.float32) @ model.coef + model.intercept


def linear_loss(task: str, n_outputs: int = 1) -> losses_lib.Loss:
    """The loss :func:`fit_linear` minimises for ``task``: squared error, binomial deviance or
    multinomial deviance with ``n_outputs`` classes (its ``link`` gives the prediction)."""
    _validation.check_choice(task, "task", LINEAR_TASKS)
    if task == "regression":
        return losses_lib.squared_error()
    if task == "binary":
        return losses_lib.binomial_deviance()
    return losses_lib.multinomial_deviance(int(n_outputs))


def _linear_per_sample(task: str):
    if task == "regression":
        return lambda y, f: losses_lib.squared_error_fn(y, f[0])
    if task == "binary":
        return lambda y, f: losses_lib.binomial_deviance_fn(y, f[0])
    return losses_lib.multinomial_deviance_fn


@functools.partial(_compile.jit, static_argnames=("task", "n_outputs", "n_steps"))
def fit_linear(Z, y, *, task: str, n_outputs: int = 1, l2=1e-3, n_steps: int = 200,
               sample_weight=None) -> LinearModel:
    """Regularised linear (squared error), logistic or softmax regression by optax L-BFGS.

    Minimises ``sum_i w_i loss(y_i, z_i^T B + b) / sum_i w_i + l2/2 ||B||^2`` (intercept not
    penalised): the convex second-tier model of stacking (ESL 8.8 with a ridge penalty,
    LeBlanc and Tibshirani 1996).

    Args:
      Z: ``(n, P)`` features (e.g. out-of-fold raw scores of the base learners).
      y: ``(n,)`` targets; 0/1 for ``"binary"``; 0..K-1 for ``"multiclass"``.
      task: ``"regression"``, ``"binary"`` or ``"multiclass"`` (static).
      n_outputs: K (1 for regression and binary; the number of classes for multiclass).
      l2: traced ridge penalty. n_steps: L-BFGS iterations (static).
      sample_weight: optional ``(n,)`` weights of the rows.
    """
    _validation.check_choice(task, "task", LINEAR_TASKS)
    n_outputs = _validation.check_int(n_outputs, "n_outputs", 1, 1 << 20)
    n_steps = _validation.check_int(n_steps, "n_steps", 1, _validation.MAX_ROUNDS)
    Z = jnp.asarray(Z, jnp.float32)
    y = jnp.asarray(y, jnp.float32)
    w = jnp.ones_like(y) if sample_weight is None else jnp.asarray(sample_weight, jnp.float32)
    per = _linear_per_sample(task)
    params0 = LinearModel(jnp.zeros((Z.shape[1], n_outputs), jnp.float32),
                          jnp.zeros((n_outputs,), jnp.float32))

    def objective(params):
        raw = linear_raw(params, Z)
        data = jnp.sum(w * jax.vmap(per)(y, raw)) / jnp.sum(w)
        return data + 0.5 * l2 * jnp.sum(params.coef ** 2)

    return losses_lib.lbfgs_minimize(objective, params0, n_steps)
