"""Committee weights: averages (ESL 8.8), a-priori error weights ``w_m ∝ exp(-beta err_m)``, and
simplex weights learnt with optax (Breiman 1996, "Stacked regressions"). See docs/combine.md.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import optax

from jboost import _compile, checks
from jboost.fitting import settings

OBJECTIVES = ("squared_error", "log_loss")


def average(predictions) -> jax.Array:
    """Simple committee average over the leading (model) axis: ``(M, ...) -> (...)``."""
    return jnp.mean(jnp.asarray(predictions, jnp.float32), axis=0)


def weighted_average(predictions, weights) -> jax.Array:
    """``sum_m w_m p_m`` over the leading axis; ``weights`` ``(M,)`` (not renormalised)."""
    predictions = jnp.asarray(predictions, jnp.float32)
    weights = jnp.asarray(weights, jnp.float32)
    if weights.ndim != 1 or weights.shape[0] != predictions.shape[0]:
        raise ValueError(f"weights has shape {weights.shape}; expected ({predictions.shape[0]},) "
                         "(one per model on the leading axis of predictions).")
    return jnp.tensordot(weights, predictions, axes=1)


def error_weights(errors, beta) -> jax.Array:
    """A-priori weights ``w_m = exp(-beta err_m) / sum_j exp(-beta err_j)`` (traced ``beta``;
    0: the simple average)."""
    errors = jnp.asarray(errors, jnp.float32)
    if errors.ndim != 1:
        raise ValueError(f"errors must be 1-D (one per model); got shape {errors.shape}.")
    return jax.nn.softmax(-jnp.asarray(beta, jnp.float32) * errors)


class SimplexWeights(NamedTuple):
    """Simplex weights learnt by :func:`fit_simplex_weights`, their logits and the objective per
    step."""
    weights: jax.Array   # (M,) on the simplex
    logits: jax.Array    # (M,) weights = softmax(logits)
    losses: jax.Array    # (n_steps,) objective before each step


def _mixture_loss(objective: str, mix, y, w):
    if objective == "squared_error":
        r = mix - (y if mix.ndim == 1 else y.reshape(mix.shape))
        per = r * r if r.ndim == 1 else jnp.sum(r * r, axis=-1)
    else:  # log_loss of mixed class probabilities (M, n, K)
        p = jnp.take_along_axis(mix, y.astype(jnp.int32)[:, None], axis=-1)[:, 0]
        per = -jnp.log(jnp.clip(p, 1e-12, 1.0))
    return jnp.sum(w * per) / jnp.sum(w)


@functools.partial(_compile.jit, static_argnames=("objective", "n_steps"))
def fit_simplex_weights(predictions, y, *, objective: str = "squared_error", n_steps: int = 300,
                        learning_rate=0.1, sample_weight=None) -> SimplexWeights:
    """Weights on the simplex minimising the validation loss of the weighted average (Breiman
    1996): Adam on ``logits`` (zero to start), ``weights = softmax(logits)``.

    Args:
      predictions: ``(M, n)`` or ``(M, n, K)`` validation predictions of ``M`` models (class
        probabilities ``(M, n, K)`` for ``objective="log_loss"``).
      y: ``(n,)`` targets (``(n, K)`` for vector regression; class labels for log loss).
      objective: ``"squared_error"`` or ``"log_loss"``. n_steps: Adam steps (static).
      learning_rate: traced. sample_weight: optional ``(n,)`` weights of the rows.
    """
    checks.check_choice(objective, "objective", OBJECTIVES)
    n_steps = checks.check_int(n_steps, "n_steps", 1, settings.MAX_ROUNDS)
    predictions = jnp.asarray(predictions, jnp.float32)
    y = jnp.asarray(y, jnp.float32)
    n = predictions.shape[1]
    w = jnp.ones((n,), jnp.float32) if sample_weight is None else jnp.asarray(sample_weight, jnp.float32)

    def objective_fn(logits):
        return _mixture_loss(objective, jnp.tensordot(jax.nn.softmax(logits), predictions, axes=1), y, w)

    opt = optax.adam(learning_rate)
    logits0 = jnp.zeros((predictions.shape[0],), jnp.float32)

    def step(carry, _):
        logits, state = carry
        value, grad = jax.value_and_grad(objective_fn)(logits)
        # optax's bias correction raises a float to an int32 count: standard promotion for it.
        with jax.numpy_dtype_promotion("standard"):
            updates, state = opt.update(grad, state, logits)
        return (optax.apply_updates(logits, updates), state), value

    (logits, _), values = jax.lax.scan(step, (logits0, opt.init(logits0)), None, length=n_steps)
    return SimplexWeights(jax.nn.softmax(logits), logits, values)
