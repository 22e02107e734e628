"""Baselines: the optimal constant raw score of a loss (the initial model ``F_0 = argmin_c sum_i
w_i L(y_i, c)`` of Friedman 2001, Algorithm 1), in closed form or found numerically by L-BFGS
(Liu and Nocedal 1989, via optax).

Every baseline is ``baseline(y, w, n_outputs, **params) -> (K,)`` of labels ``(n,)`` and
non-negative weights ``(n,)`` of positive sum; parameters it does not use are ignored.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from jboost.data import rows
from jboost.losses import loss as loss_lib

# The class-frequency clip of the binary baselines: [1e-12, the largest float32 below 1] (1 - 1e-12
# rounds to 1.0 in float32, which would give all-positive labels an infinite baseline).
_P_MIN = 1e-12
_P_MAX = float(np.nextafter(np.float32(1.0), np.float32(0.0)))


def weighted_quantile(values, weights, q):
    """The smallest of ``values (n,)`` whose cumulative weight reaches ``q`` of the total (the
    inverted CDF); jit-able, ``q`` may be traced.
    """
    order = jnp.argsort(values)
    v, w = values[order], weights[order]
    cw = jnp.cumsum(w)
    idx = jnp.searchsorted(cw, q * cw[-1], side="left")
    return v[jnp.clip(idx, 0, v.shape[0] - 1)]


def _mean(y, w):
    return rows.row_sum(w * y) / rows.row_sum(w)


def _class_freq(y, w, k):
    counts = jax.ops.segment_sum(w, y.astype(jnp.int32), num_segments=k)
    return jnp.clip(counts / rows.row_sum(w), 1e-12, 1.0)


def mean_baseline(y, w, n_outputs, **params):
    """The weighted mean of the labels: squared error's optimal constant, ``(1,)``."""
    return _mean(y, w)[None]


def median_baseline(y, w, n_outputs, **params):
    """The weighted median of the labels: absolute error's optimal constant, ``(1,)``."""
    return weighted_quantile(y, w, 0.5)[None]


def quantile_baseline(y, w, n_outputs, alpha, **params):
    """The weighted ``alpha``-quantile of the labels: the pinball loss's optimal constant,
    ``(1,)``.
    """
    return weighted_quantile(y, w, alpha)[None]


def huber_baseline(y, w, n_outputs, delta, n_steps: int = 50, **params):
    """Huber's M-estimate of location ``argmin_c sum_i w_i huber(y_i - c; delta)``, ``(1,)`` (Huber
    1964): ``n_steps`` (static) Newton iterations from the weighted median; a step with no row inside
    ``delta`` keeps the estimate.
    """
    c0 = weighted_quantile(y, w, 0.5)

    def body(_, c):
        r = y - c
        inside = jnp.abs(r) <= delta
        g = rows.row_sum(w * jnp.clip(r, -delta, delta))
        h = rows.row_sum(w * inside.astype(w.dtype))
        return c + jnp.where(h > 0, g / jnp.where(h > 0, h, 1.0), 0.0)

    return jax.lax.fori_loop(0, n_steps, body, c0)[None]


def logit_baseline(y, w, n_outputs, **params):
    """``log(p / (1 - p))`` of the weighted positive frequency ``p``, ``(1,)``; ``p`` is clipped to
    ``[1e-12, 1 - 2^-24]``, finite when every label is 0 or every label is 1.
    """
    p = jnp.clip(_mean(y, w), _P_MIN, _P_MAX)
    return jnp.log(p / (1.0 - p))[None]


def half_logit_baseline(y, w, n_outputs, **params):
    """Half the log-odds of the positive frequency: the exponential loss's optimal constant,
    ``(1,)`` (Friedman, Hastie and Tibshirani 2000).
    """
    return 0.5 * logit_baseline(y, w, n_outputs)


def log_freq_baseline(y, w, n_outputs, **params):
    """Centred log class frequencies ``(K,)``: the multinomial deviance's optimal constant (up to a
    shift); an absent class has frequency 1e-12.
    """
    logp = jnp.log(_class_freq(y, w, n_outputs))
    return logp - jnp.mean(logp)


def samme_baseline(y, w, n_outputs, **params):
    """SAMME's optimal constant ``(K-1)(log p_k - mean log p)``, ``(K,)`` (Zhu et al. 2009)."""
    return (n_outputs - 1) * log_freq_baseline(y, w, n_outputs)


def log_mean_baseline(y, w, n_outputs, **params):
    """The log of the weighted mean (floored at 1e-12): the Poisson deviance's optimal constant,
    ``(1,)``.
    """
    return jnp.log(jnp.maximum(_mean(y, w), 1e-12))[None]


def lbfgs_minimize(objective, params0, n_steps: int):
    """``n_steps`` (static) optax L-BFGS iterations with a zoom line search on a differentiable
    ``objective(params) -> scalar`` from ``params0``; a ``fori_loop``: jit-able and vmappable (Liu
    and Nocedal 1989).
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
    """The optimal constant ``(K,)`` found numerically (L-BFGS from 0 on the weighted mean loss), for
    losses without a closed form or next to per-row offsets ``margin (n, K)``.
    """

    def objective(c):
        raw = rows.broadcast(c, y)  # its gradient a padding-invariant sum
        if margin is not None:
            raw = margin + raw
        return loss_lib.total_loss(loss, y, raw, w) / rows.row_sum(w)

    return lbfgs_minimize(objective, jnp.zeros((loss.n_outputs,), jnp.float32), n_steps)


def baseline(loss: loss_lib.Loss, y, w, margin=None):
    """The optimal constant raw score ``(K,)`` float32 of ``loss`` on weighted labels.

    The loss's closed-form baseline where it has one, else (or next to per-row offsets ``margin (n,
    K)``) :func:`numeric_baseline`; a per-column loss gets each column's scalar baseline.
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
