"""Gradients and Newton curvatures of a per-sample loss, by autodiff, vmapped over samples.

A tree's Newton leaf value is ``-G_k / H_k`` for each output ``k`` separately: the step of a
separable (diagonal) quadratic model of the loss. For one output the curvature is the second
derivative. For K coupled outputs (the multinomial deviance, or any vector-valued loss whose
hessian has off-diagonal terms) the diagonal of the hessian ``H`` under-estimates the curvature
along directions that move several outputs at once, so the separable step overshoots the
coupled Newton step and boosting at a large learning rate diverges (issue 14: the multinomial
deviance at learning rate 1 went 0.563 -> 0.774 -> 3.558). The default curvature is therefore
a diagonal majorant of ``H`` by diagonal dominance (Gershgorin 1931):

    h_k = H_kk + sum_{j != k} |H_kj|,

so ``diag(h) - H`` is diagonally dominant with a non-negative diagonal, hence positive
semi-definite: the separable quadratic model lies above the coupled one at the current scores (a
quadratic majoriser in the sense of Böhning and Lindsay 1988 and Lange, Hunter and Yang 2000,
taken locally rather than Böhning's global bound), so its step lowers the coupled quadratic
model however a leaf mixes its rows. For one output it IS the second derivative (no off-diagonal
terms: every single-output number is unchanged). For the softmax (``H = diag(p) - p p^T``) it is
``2 p_k (1 - p_k)``, exactly XGBoost's ``multi:softprob`` hessian
(``src/objective/multiclass_obj.cu``: ``h = 2 p (1 - p)``). The classical diagonal (Friedman
2001, Algorithm 6 without its ``(K - 1)/K`` factor) stays available as ``hessian="diagonal"``;
LightGBM's ``multiclass`` (``src/objective/multiclass_objective.hpp``) scales it by ``K / (K -
1)``, which is the majorant's factor 2 only for K = 2 and was not enough at K = 12 (training
deviance 1.82 -> 5.72 in one round at learning rate 1; ``benchmarks/multiclass_step.py``).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from jboost import losses as losses_lib


def curvature(hess, kind: str = "autodiff", learning_rate=None):
    """Newton curvatures ``(..., K)`` from full per-sample hessians ``hess`` ``(..., K, K)``.

    ``kind="autodiff"``: the Gershgorin majorant ``M_k = H_kk + sum_{j != k} |H_kj|`` (module
    docstring); ``"diagonal"``: ``H_kk``. Equal when ``K == 1`` or ``H`` is diagonal. With a
    ``learning_rate`` ``lr`` (traced), ``"autodiff"`` gives ``max(H_kk, lr M_k)``: the shrunk step
    ``lr G / h`` then never exceeds the majorised Newton step ``G / M``, and it is the classical
    diagonal step wherever the shrinkage alone keeps it there (``lr <= H_kk / M_k``, which is
    ``1/2`` for the softmax).
    """
    diag = jnp.diagonal(hess, axis1=-2, axis2=-1)
    if kind == "diagonal":
        return diag
    majorant = diag + (jnp.sum(jnp.abs(hess), axis=-1) - jnp.abs(diag))
    if learning_rate is None:
        return majorant
    return jnp.maximum(diag, jnp.asarray(learning_rate, hess.dtype) * majorant)


def grad_hess(loss: losses_lib.Loss, y, raw, learning_rate=None):
    """First derivatives and Newton curvatures of ``loss`` in ``raw``.

    Args:
      loss: a :class:`jboost.Loss`.
      y: ``(n,)`` labels.
      raw: ``(n, K)`` raw scores.
      learning_rate: ``None``, or the shrinkage the Newton step is multiplied by (traced): for K
        coupled outputs the ``"autodiff"`` curvature is then ``max(H_kk, lr M_k)`` (see
        :func:`curvature`); no effect with one output.

    Returns:
      ``(g, h)``, each ``(n, K)``: ``g_k = d loss / d raw_k`` from ``jax.grad``, and ``h`` from
      the per-sample hessian ``H = jax.hessian`` computed as forward-over-reverse (a jvp of the
      gradient along each basis vector, K of them): by ``loss.hessian``, ``"autodiff"`` (the
      default) the Gershgorin majorant ``h_k = H_kk + sum_{j != k} |H_kj|`` (the second
      derivative when ``K == 1``; ``2 p_k (1 - p_k)`` for the multinomial deviance; see the module
      docstring), ``"diagonal"`` ``h_k = H_kk``, or ``"unit"`` ``h = 1`` (the tree structure is a
      least-squares fit to the negative gradient, ESL Algorithm 10.3).
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
            h = curvature(jax.vmap(hvp)(eye), loss.hessian, learning_rate)
        return g, h

    return jax.vmap(one, in_axes=(0, 0, None))(y, raw, loss.params)
