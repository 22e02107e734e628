"""Fisher information (closed form or Monte Carlo) and NGBoost's natural gradient, with the
custom-jvp NLL whose derivative is ``F^-1 g``.

Duan et al. (2020), "NGBoost: Natural Gradient Boosting for Probabilistic Prediction", ICML;
Amari (1998). See ``docs/distributions.md``.
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
    """The Fisher information ``(K, K)`` of ``dist`` at one row's raw parameters ``(K,)``.

    The closed form ``dist.fisher``, else NGBoost's Monte-Carlo estimate ``(1/M) sum_j g_j g_j^T``
    from ``M = n_mc_samples`` draws with ``key`` (``None``: a fixed key folded with ``raw``), plus
    ``1e-6 tr / K`` on the diagonal so that it stays invertible.
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
    """NGBoost's natural gradient ``F(raw)^{-1} g`` ``(K,)`` of one row (Duan et al. 2020, eq. 6),
    ``F`` held fixed under differentiation.
    """
    params = dict(params or {})
    raw = jnp.asarray(raw, jnp.float32)
    g = jax.grad(lambda r: dist.nll(y, r, **params))(raw)
    return _solve_fisher(dist, y, raw, g, params, n_mc_samples)


def _spd_solve(f, g):
    """``f^{-1} g`` for a small symmetric positive-definite ``f (K, K)``: an unrolled Cholesky solve
    (elementwise, so vmapped over rows it stays one fusion); ``jnp.linalg.solve`` beyond K = 4.
    """
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
    """``nll(y, raw, params)``: ``dist.nll`` with the natural gradient as its derivative in ``raw``
    (a ``jax.custom_jvp``); cached per distribution, so jit caches hit.
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
