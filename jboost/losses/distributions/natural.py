"""Fisher information (closed form or Monte Carlo) and NGBoost's natural gradient, with the
custom-jvp NLL whose derivative is ``F^-1 g``.

Implements the natural gradient of NGBoost (Duan, Avati, Ding, Thai, Basu, Ng and Schuler 2020,
"NGBoost: Natural Gradient Boosting for Probabilistic Prediction", ICML; Amari 1998, "Natural
gradient works efficiently in learning"); see ``docs/distributions.md``.
"""

from __future__ import annotations

import functools
from typing import Mapping, Optional

import jax
import jax.numpy as jnp
from jax import lax

from jboost.losses.distributions import base


def fisher_information(dist: base.Distribution, raw, params: Optional[Mapping] = None,
                       n_mc_samples: int = 100, key=None):
    """The Fisher information of ``dist`` at one row's raw parameters.

    The closed form ``dist.fisher`` where there is one; otherwise the Monte-Carlo estimate
    ``(1/M) sum_j g_j g_j^T`` of ``E_y[g g^T]``, ``g_j = d nll(y_j, raw) / d raw`` by autodiff at
    ``M = n_mc_samples`` draws ``y_j ~ dist(raw)``, plus ``1e-6 tr / K`` on the diagonal (an
    estimate of rank below K stays invertible). This is NGBoost's estimate (Duan et al. 2020).

    Args:
      dist: the distribution.
      raw: the row's raw parameters ``(K,)``.
      params: the distribution's traced parameters, or ``None``.
      n_mc_samples: the number of draws ``M`` of the Monte-Carlo estimate.
      key: the key of the draws; ``None``: a fixed key folded with the bits of ``raw``.

    Returns:
      ``(K, K)`` float32, symmetric positive semi-definite (definite for the Monte-Carlo
      estimate).
    """
    params = dict(params or {})
    raw = jnp.asarray(raw, jnp.float32)
    if dist.fisher is not None:
        return dist.fisher(raw, **params)
    if key is None:
        key = base.row_key(0.0, raw)
    ys = dist.sample(key, lax.stop_gradient(raw), n_mc_samples, **params)
    g = jax.vmap(lambda yi: jax.grad(lambda r: dist.nll(yi, r, **params))(raw))(ys)
    f = g.T @ g / n_mc_samples
    k = raw.shape[0]
    return f + (1e-6 * jnp.trace(f) / k) * jnp.eye(k, dtype=f.dtype)


def natural_gradient(dist: base.Distribution, y, raw, params: Optional[Mapping] = None,
                     n_mc_samples: int = 100):
    """NGBoost's natural gradient ``F(raw)^{-1} g`` of one row (Duan et al. 2020, eq. 6).

    The gradient ``g`` of the NLL in the raw parameters premultiplied by the inverse Fisher
    information (:func:`fisher_information`; Monte Carlo with the row's key ``(y, raw)`` where
    no closed form exists). ``F`` is held fixed under differentiation (``stop_gradient``).

    Args:
      dist: the distribution.
      y: the row's label.
      raw: the row's raw parameters ``(K,)``.
      params: the distribution's traced parameters, or ``None``.
      n_mc_samples: the draws of a Monte-Carlo Fisher information.

    Returns:
      ``(K,)`` float32.
    """
    params = dict(params or {})
    raw = jnp.asarray(raw, jnp.float32)
    g = jax.grad(lambda r: dist.nll(y, r, **params))(raw)
    return _solve_fisher(dist, y, raw, g, params, n_mc_samples)


def _spd_solve(f, g):
    """``f^{-1} g`` for a small symmetric positive-definite ``f (K, K)``: an unrolled Cholesky
    solve (elementwise ops: vmapped over rows it stays one fusion, where a batched LAPACK call
    of tiny systems is dominated by its per-call overhead on CPU); ``jnp.linalg.solve`` beyond
    K = 4."""
    k = g.shape[0]
    if k > 4:
        return jnp.linalg.solve(f, g)
    low = [[None] * k for _ in range(k)]
    for i in range(k):
        for j in range(i + 1):
            acc = f[i, j] - sum((low[i][m] * low[j][m] for m in range(j)), jnp.zeros_like(f[i, j]))
            low[i][j] = jnp.sqrt(acc) if i == j else acc / low[j][j]
    z = []
    for i in range(k):       # L z = g
        z.append((g[i] - sum((low[i][m] * z[m] for m in range(i)), jnp.zeros_like(g[i]))) / low[i][i])
    x = [None] * k
    for i in reversed(range(k)):   # L^T x = z
        x[i] = (z[i] - sum((low[m][i] * x[m] for m in range(i + 1, k)), jnp.zeros_like(g[i]))) / low[i][i]
    return jnp.stack(x)


def _solve_fisher(dist, y, raw, g, params, n_mc_samples):
    f = fisher_information(dist, raw, params, n_mc_samples, key=base.row_key(y, lax.stop_gradient(raw)))
    return _spd_solve(lax.stop_gradient(f), g)


@functools.lru_cache(maxsize=None)
def natural_nll(dist: base.Distribution, n_mc_samples: int):
    """The NLL of ``dist`` with the natural gradient as its derivative in ``raw``.

    A ``jax.custom_jvp`` whose value is ``dist.nll`` and whose tangent is ``<F^{-1} g, d raw>``
    (plus the true derivatives in ``y`` and the parameters), so that
    :func:`jboost.losses.derivatives.grad_hess` yields NGBoost's natural gradient while the
    reported losses stay the NLL. One function per distribution (cached), so jit caches hit.

    Args:
      dist: the distribution.
      n_mc_samples: the draws of a Monte-Carlo Fisher information.

    Returns:
      ``nll(y, raw, params) -> scalar``.
    """

    def value(y, raw, params):
        return dist.nll(y, raw, **params)

    fn = jax.custom_jvp(value)

    @fn.defjvp
    def _jvp(primals, tangents):
        y, raw, params = primals
        t_y, t_raw, t_params = tangents
        out, (g_y, g_raw, g_params) = jax.value_and_grad(value, argnums=(0, 1, 2))(y, raw, params)
        nat = _solve_fisher(dist, y, raw, g_raw, params, n_mc_samples)
        tangent = jnp.dot(nat, t_raw) + g_y * t_y
        for k in g_params:
            tangent = tangent + jnp.sum(g_params[k] * t_params[k])
        return out, tangent

    return fn
