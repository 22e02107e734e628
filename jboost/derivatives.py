"""Gradients and diagonal hessians of a per-sample loss, by autodiff, vmapped over samples."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from jboost import losses as losses_lib


def grad_hess(loss: losses_lib.Loss, y, raw):
    """First and (diagonal) second derivatives of ``loss`` in ``raw``.

    Args:
      loss: a :class:`jboost.Loss`.
      y: ``(n,)`` labels.
      raw: ``(n, K)`` raw scores.

    Returns:
      ``(g, h)``, each ``(n, K)``: ``g_k = d loss / d raw_k`` from ``jax.grad`` and
      ``h_k = d^2 loss / d raw_k^2``, the diagonal of ``jax.hessian`` computed as
      forward-over-reverse (a jvp of the gradient along each basis vector). When the loss asks
      for ``hessian="unit"`` the tree structure is a least-squares fit to the negative gradient
      (ESL Algorithm 10.3) and ``h`` is one.
    """
    f = losses_lib.vector_fn(loss)
    k = raw.shape[-1]
    eye = jnp.eye(k, dtype=raw.dtype)

    def one(yi, ri, params):
        g_fn = jax.grad(f, argnums=1)
        g = g_fn(yi, ri, params)
        if loss.hessian == "unit":
            return g, jnp.ones_like(g)
        hvp = lambda v: jax.jvp(lambda r: g_fn(yi, r, params), (ri,), (v,))[1]
        if k == 1:
            h = hvp(eye[0])
        else:
            h = jnp.diagonal(jax.vmap(hvp)(eye))
        return g, h

    return jax.vmap(one, in_axes=(0, 0, None))(y, raw, loss.params)
