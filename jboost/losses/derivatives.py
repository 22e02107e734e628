"""Gradients and Newton curvatures of a per-sample loss (autodiff, vmapped over samples) and
of a batch objective.

K coupled outputs get the Gershgorin (1931) diagonal majorant of the hessian; degenerate
curvatures fall back to least-squares trees (ESL Algorithm 10.3); batch objectives take the
hessian's diagonal by Hessian-vector products. See ``docs/losses.md``, ``docs/objectives.md``.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from jboost.losses import loss as loss_lib, objectives


def curvature(hess, kind: str = "autodiff", learning_rate=None):
    """Newton curvatures ``(..., K)`` from full per-sample hessians ``(..., K, K)``.

    ``kind="autodiff"`` (or ``"auto"``): the Gershgorin majorant ``M_k = H_kk + sum_{j != k}
    |H_kj|``, or ``max(H_kk, lr M_k)`` with a (traced) ``learning_rate``; ``"diagonal"``: ``H_kk``
    (``docs/losses.md``).
    """
    diag = jnp.diagonal(hess, axis1=-2, axis2=-1)
    if kind == "diagonal":
        return diag
    majorant = diag + (jnp.sum(jnp.abs(hess), axis=-1) - jnp.abs(diag))
    if learning_rate is None:
        return majorant
    return jnp.maximum(diag, jnp.asarray(learning_rate, hess.dtype) * majorant)


def curvature_is_positive(g, h, w, axis_name=None):
    """Whether a round's curvature allows Newton leaves (traced bool): every weighted row has
    ``h > 0`` in every output or is stationary (``g == 0`` and ``h == 0``); summed over
    ``axis_name`` when the rows are sharded.
    """
    fine = (h > 0) | ((h == 0) & (g == 0)) | (w[:, None] == 0)
    bad = jnp.sum(~fine, dtype=jnp.int32)
    if axis_name is not None:
        bad = jax.lax.psum(bad, axis_name)
    return bad == 0


def first_order_curvature(g, task: str):
    """The unit curvature ``(n, K)`` that replaces a degenerate one: 1 for regression and count
    losses; for classification 1 where the row has a gradient, 0 on stationary rows (XGBoost's
    ``binary:hinge``; ``docs/losses.md``).
    """
    if task in ("binary", "multiclass"):
        return (g != 0).astype(g.dtype)
    return jnp.ones_like(g)


def grad_hess(loss: loss_lib.Loss, y, raw, learning_rate=None):
    """First derivatives and Newton curvatures of ``loss`` in ``raw`` (autodiff).

    Args:
      loss: a per-sample :class:`jboost.Loss`.
      y: ``(n,)`` labels, or ``(n, C)`` vector labels.
      raw: ``(n, K)`` raw scores.
      learning_rate: ``None``, or the (traced) shrinkage of the step: the ``"autodiff"`` curvature
        of K coupled outputs is then ``max(H_kk, lr M_k)`` (:func:`curvature`).

    Returns:
      ``(g, h)``, each ``(n, K)``: ``jax.grad`` and the curvature by ``loss.hessian``
      (``docs/losses.md``).

    Raises:
      TypeError: ``loss`` is a batch objective (use :func:`batch_grad_hess`).
    """
    if loss.per_column:  # a separable loss: each column's scalar derivatives, as a one-output fit
        one = loss_lib.column_loss(loss)
        g, h = jax.vmap(lambda yk, rk: grad_hess(one, yk, rk[:, None]), in_axes=(1, 1),
                        out_axes=2)(y, raw)
        return g[:, 0, :], h[:, 0, :]
    f = loss_lib.vector_fn(loss)
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


def batch_grad_hess(loss: loss_lib.Loss, y, raw, w, key=None):
    """Gradient and hessian diagonal of a batch objective by ``loss.hessian_diag``
    (``"exact"``, ``"groups"``, ``"hutchinson"`` or a function; ``docs/objectives.md``).

    Args:
      loss: a batch objective.
      y: ``(n, C)`` structured labels.
      raw: ``(n, K)`` raw scores.
      w: ``(n,)`` row weights (the objective applies them itself).
      key: the round's key (needed by ``"hutchinson"`` only).

    Returns:
      ``(g, h)``, each ``(n, K)``, already weighted.

    Raises:
      ValueError: ``hessian_diag="hutchinson"`` without a ``key``.
    """
    params = loss.params
    n, k = raw.shape
    f = lambda r: loss_lib.batch_value(loss, y, r, w, params)
    grad_f = jax.grad(f)
    g = grad_f(raw)
    hvp = lambda v: jax.jvp(grad_f, (raw,), (v,))[1]
    diag = loss.hessian_diag
    if callable(diag):
        h = jnp.asarray(diag(y, loss_lib.batch_raw(loss, raw), w, **params), raw.dtype)
        return g, h.reshape(n, k)
    if diag == "exact":
        def entry(j):
            return hvp(jax.nn.one_hot(j, n * k, dtype=raw.dtype).reshape(n, k)).reshape(-1)[j]
        h = jax.lax.map(entry, jnp.arange(n * k), batch_size=32).reshape(n, k)
    elif diag == "groups":
        _, pos = objectives.runs(y[:, 1])

        def probe(jk):
            j, c = jk // k, jk % k
            v = ((pos == j)[:, None] & (jnp.arange(k) == c)[None, :]).astype(raw.dtype)
            return v * hvp(v)
        h = jnp.sum(jax.lax.map(probe, jnp.arange(loss.max_group * k), batch_size=8), axis=0)
    else:  # "hutchinson"
        if key is None:
            raise ValueError("hessian_diag='hutchinson' needs the round's key.")
        v = jax.random.rademacher(key, (loss.n_probes, n, k), raw.dtype)
        h = jnp.mean(jax.lax.map(lambda vs: vs * hvp(vs), v, batch_size=8), axis=0)
        h = jnp.maximum(h, 0.0)
    return g, h
