"""fit_linear: the stacker's regularised linear / logistic / softmax regression by optax L-BFGS
(LeBlanc and Tibshirani 1996). See docs/combine.md.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp

from jboost import _compile, checks
from jboost.fitting import settings
from jboost.losses import baselines, per_sample
from jboost.models import stacked


def _linear_per_sample(task: str):
    if task == "regression":
        return lambda y, f: per_sample.squared_error_fn(y, f[0])
    if task == "binary":
        return lambda y, f: per_sample.binomial_deviance_fn(y, f[0])
    return per_sample.multinomial_deviance_fn


@functools.partial(_compile.jit, static_argnames=("task", "n_outputs", "n_steps"))
def fit_linear(Z, y, *, task: str, n_outputs: int = 1, l2=1e-3, n_steps: int = 200,
               sample_weight=None) -> stacked.LinearModel:
    """Regularised linear (squared error), logistic or softmax regression by optax L-BFGS:
    ``sum_i w_i loss(y_i, z_i^T B + b) / sum_i w_i + l2/2 ||B||^2`` (intercept not penalised).

    Args:
      Z: ``(n, P)`` features (e.g. out-of-fold raw scores of the base learners).
      y: ``(n,)`` targets; 0/1 for ``"binary"``; 0..K-1 for ``"multiclass"``.
      task: ``"regression"``, ``"binary"`` or ``"multiclass"`` (static).
      n_outputs: K (the number of classes for multiclass, else 1).
      l2: traced ridge penalty. n_steps: L-BFGS iterations (static).
      sample_weight: optional ``(n,)`` weights of the rows.
    """
    checks.check_choice(task, "task", stacked.LINEAR_TASKS)
    n_outputs = checks.check_int(n_outputs, "n_outputs", 1, 1 << 20)
    n_steps = checks.check_int(n_steps, "n_steps", 1, settings.MAX_ROUNDS)
    Z = jnp.asarray(Z, jnp.float32)
    y = jnp.asarray(y, jnp.float32)
    w = jnp.ones_like(y) if sample_weight is None else jnp.asarray(sample_weight, jnp.float32)
    per = _linear_per_sample(task)
    params0 = stacked.LinearModel(jnp.zeros((Z.shape[1], n_outputs), jnp.float32),
                          jnp.zeros((n_outputs,), jnp.float32))

    def objective(params):
        raw = stacked.linear_raw(params, Z)
        data = jnp.sum(w * jax.vmap(per)(y, raw)) / jnp.sum(w)
        return data + 0.5 * l2 * jnp.sum(params.coef ** 2)

    return baselines.lbfgs_minimize(objective, params0, n_steps)
