"""Baselines: the optimal constant raw score of a loss (the initial model ``F_0 = argmin_c sum_i
w_i L(y_i, c)`` of Friedman 2001, Algorithm 1), in closed form or found numerically by L-BFGS
(Liu and Nocedal 1989, via optax).

Every baseline has the signature ``baseline(y, w, n_outputs, **params) -> (K,)``.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from jboost.losses import loss as loss_lib

# The class-frequency clip of the binary baselines: [1e-12, the largest float32 below 1]. The
# upper end must not be 1 - 1e-12, which rounds to 1.0 in float32 (all-positive labels would
# give an infinite baseline); every frequency below 1 is below this value, so the clip only acts
# at p = 1.
_P_MIN = 1e-12
_P_MAX = float(np.nextafter(np.float32(1.0), np.float32(0.0)))


# --------------------------------------------------------------------------------------------
# Baselines: the optimal constant raw score, (n,) labels and (n,) weights -> (K,).
# --------------------------------------------------------------------------------------------


def weighted_quantile(values, weights, q):
    """The smallest value whose cumulative weight reaches ``q`` of the total (the inverted CDF).

    Jit-able; ``q`` may be traced.

    Args:
      values: ``(n,)`` values.
      weights: ``(n,)`` non-negative weights, positive sum.
      q: the level in ``[0, 1]``.

    Returns:
      A scalar of ``values``' dtype.
    """
    order = jnp.argsort(values)
    v, w = values[order], weights[order]
    cw = jnp.cumsum(w)
    idx = jnp.searchsorted(cw, q * cw[-1], side="left")
    return v[jnp.clip(idx, 0, v.shape[0] - 1)]


def _mean(y, w):
    return jnp.sum(w * y) / jnp.sum(w)


def _class_freq(y, w, k):
    counts = jax.ops.segment_sum(w, y.astype(jnp.int32), num_segments=k)
    return jnp.clip(counts / jnp.sum(w), 1e-12, 1.0)


def mean_baseline(y, w, n_outputs, **params):
    """The weighted mean of the labels: squared error's optimal constant.

    Args:
      y: ``(n,)`` labels.
      w: ``(n,)`` non-negative weights, positive sum.
      n_outputs: ``K``.
      **params: the loss's other parameters (unused).

    Returns:
      ``(1,)`` float32.
    """
    return _mean(y, w)[None]


def median_baseline(y, w, n_outputs, **params):
    """The weighted median of the labels: absolute error's optimal constant.

    Args:
      y: ``(n,)`` labels.
      w: ``(n,)`` non-negative weights, positive sum.
      n_outputs: ``K``.
      **params: the loss's other parameters (unused).

    Returns:
      ``(1,)`` float32.
    """
    return weighted_quantile(y, w, 0.5)[None]


def quantile_baseline(y, w, n_outputs, alpha, **params):
    """The weighted ``alpha``-quantile of the labels: the pinball loss's optimal constant.

    Args:
      y: ``(n,)`` labels.
      w: ``(n,)`` non-negative weights, positive sum.
      n_outputs: ``K``.
      alpha: the quantile level in ``(0, 1)``.
      **params: the loss's other parameters (unused).

    Returns:
      ``(1,)`` float32.
    """
    return weighted_quantile(y, w, alpha)[None]


def huber_baseline(y, w, n_outputs, delta, n_steps: int = 50, **params):
    """Huber's M-estimate of location: ``argmin_c sum_i w_i huber(y_i - c; delta)``.

    Newton iterations from the weighted median (the loss is convex; its hessian is the weight of
    the rows with ``|y - c| <= delta``); a step with no such rows falls back to the median step
    (Huber 1964, "Robust Estimation of a Location Parameter").

    Args:
      y: ``(n,)`` labels.
      w: ``(n,)`` non-negative weights, positive sum.
      n_outputs: ``K``.
      delta: Huber's transition point.
      n_steps: the number of Newton iterations (static).
      **params: the loss's other parameters (unused).

    Returns:
      ``(1,)`` float32.
    """
    c0 = weighted_quantile(y, w, 0.5)

    def body(_, c):
        r = y - c
        inside = jnp.abs(r) <= delta
        g = jnp.sum(w * jnp.clip(r, -delta, delta))
        h = jnp.sum(w * inside.astype(w.dtype))
        return c + jnp.where(h > 0, g / jnp.where(h > 0, h, 1.0), 0.0)

    return jax.lax.fori_loop(0, n_steps, body, c0)[None]


def logit_baseline(y, w, n_outputs, **params):
    """``log(p / (1 - p))`` of the weighted positive frequency ``p``, clipped to
    ``[1e-12, 1 - 2^-24]``: finite (about -27.6 and 16.6) when every label is 0 or every label
    is 1; the clip is inactive for any other float32 frequency.

    Args:
      y: ``(n,)`` labels in ``{0, 1}``.
      w: ``(n,)`` non-negative weights, positive sum.
      n_outputs: ``K``.
      **params: the loss's other parameters (unused).

    Returns:
      ``(1,)`` float32.
    """
    p = jnp.clip(_mean(y, w), _P_MIN, _P_MAX)
    return jnp.log(p / (1.0 - p))[None]


def half_logit_baseline(y, w, n_outputs, **params):
    """Half the log-odds of the positive frequency: the exponential loss's optimal constant
    (Friedman, Hastie and Tibshirani 2000).

    Args:
      y: ``(n,)`` labels in ``{0, 1}``.
      w: ``(n,)`` non-negative weights, positive sum.
      n_outputs: ``K``.
      **params: the loss's other parameters (unused).

    Returns:
      ``(1,)`` float32.
    """
    return 0.5 * logit_baseline(y, w, n_outputs)


def log_freq_baseline(y, w, n_outputs, **params):
    """Centred log class frequencies: the multinomial deviance's optimal constant (up to a shift).

    An absent class has frequency 1e-12 (finite scores).

    Args:
      y: ``(n,)`` labels, classes ``0 .. K-1``.
      w: ``(n,)`` non-negative weights, positive sum.
      n_outputs: ``K``.
      **params: the loss's other parameters (unused).

    Returns:
      ``(K,)`` float32.
    """
    logp = jnp.log(_class_freq(y, w, n_outputs))
    return logp - jnp.mean(logp)


def samme_baseline(y, w, n_outputs, **params):
    """SAMME's optimal constant ``argmin_f sum_i w_i exp(-y_i.f/K)`` with ``sum_k f_k = 0``:
    ``(K-1)(log p_k - mean log p)`` (Zhu et al. 2009).

    Args:
      y: ``(n,)`` labels, classes ``0 .. K-1``.
      w: ``(n,)`` non-negative weights, positive sum.
      n_outputs: ``K``.
      **params: the loss's other parameters (unused).

    Returns:
      ``(K,)`` float32.
    """
    return (n_outputs - 1) * log_freq_baseline(y, w, n_outputs)


def log_mean_baseline(y, w, n_outputs, **params):
    """The log of the weighted mean (floored at 1e-12): the Poisson deviance's optimal constant.

    Args:
      y: ``(n,)`` labels, counts ``>= 0``.
      w: ``(n,)`` non-negative weights, positive sum.
      n_outputs: ``K``.
      **params: the loss's other parameters (unused).

    Returns:
      ``(1,)`` float32.
    """
    return jnp.log(jnp.maximum(_mean(y, w), 1e-12))[None]


def lbfgs_minimize(objective, params0, n_steps: int):
    """``n_steps`` optax L-BFGS iterations (zoom line search) on ``objective`` from ``params0``.

    A fixed iteration count in a ``fori_loop``: jit-able, vmappable, no host round trip (Liu and
    Nocedal 1989, "On the limited memory BFGS method for large scale optimization").

    Args:
      objective: ``objective(params) -> scalar``, differentiable.
      params0: the starting point (an array).
      n_steps: the number of iterations (static).

    Returns:
      The parameters after ``n_steps`` iterations, shaped like ``params0``.
    """
    import optax

    opt = optax.lbfgs()
    value_and_grad = optax.value_and_grad_from_state(objective)

    def body(_, carry):
        params, state = carry
        value, grad = value_and_grad(params, state=state)
        updates, state = opt.update(grad, state, params, value=value, grad=grad, value_fn=objective)
        return optax.apply_updates(params, updates), state

    params, _ = jax.lax.fori_loop(0, n_steps, body, (params0, opt.init(params0)))
    return params


def numeric_baseline(loss: "loss_lib.Loss", y, w, n_steps: int = 100, margin=None):
    """The optimal constant found numerically (L-BFGS from optax).

    For losses with no closed form, or next to per-row offsets ``margin`` (the intercept of a
    model with offsets).

    Args:
      loss: a :class:`jboost.Loss` (per-sample or batch).
      y: ``(n,)`` or ``(n, C)`` labels.
      w: ``(n,)`` weights.
      n_steps: the L-BFGS iterations (static).
      margin: ``None`` or ``(n, K)`` per-row raw-score offsets.

    Returns:
      ``(K,)`` float32: the minimiser of the weighted mean loss from 0.
    """

    def objective(c):
        raw = jnp.broadcast_to(c, (y.shape[0], c.shape[0]))
        if margin is not None:
            raw = margin + raw
        return loss_lib.total_loss(loss, y, raw, w) / jnp.sum(w)

    return lbfgs_minimize(objective, jnp.zeros((loss.n_outputs,), jnp.float32), n_steps)


def baseline(loss: loss_lib.Loss, y, w, margin=None):
    """The optimal constant raw score of ``loss`` on weighted labels.

    The loss's closed-form baseline where it has one, else (or next to per-row offsets) found
    numerically (:func:`numeric_baseline`); a per-column loss gets each column's scalar baseline.

    Args:
      loss: a :class:`jboost.Loss`.
      y: ``(n,)`` or ``(n, C)`` labels.
      w: ``(n,)`` weights.
      margin: ``None`` or ``(n, K)`` per-row raw-score offsets.

    Returns:
      ``(K,)`` float32.
    """
    if loss.baseline is None or margin is not None:
        return numeric_baseline(loss, y, w, margin=margin)
    if loss.per_column:  # the scalar loss's baseline of each column
        one = loss_lib.column_loss(loss)
        return jax.vmap(lambda yk: jnp.asarray(one.baseline(yk, w, 1, **one.params), jnp.float32)
                        .reshape(()), in_axes=1)(y)
    return jnp.asarray(loss.baseline(y, w, loss.n_outputs, **loss.params), jnp.float32).reshape(
        (loss.n_outputs,)
    )
