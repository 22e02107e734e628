"""Gradients and Newton curvatures of a per-sample loss (autodiff, vmapped over samples) and
of a batch objective.

K coupled outputs get the Gershgorin (1931) diagonal majorant of the hessian (the multinomial
deviance's in closed form beyond :data:`MAX_DENSE_HESSIAN_OUTPUTS` outputs, without a per-row
``K x K`` hessian); degenerate curvatures fall back to least-squares trees (ESL Algorithm 10.3);
batch objectives take the hessian's diagonal by Hessian-vector products. See ``docs/losses.md``,
``docs/objectives.md``.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from jboost.losses import loss as loss_lib, objectives, per_sample

#: The most outputs whose curvature :func:`grad_hess` takes from the per-row ``K x K`` autodiff
#: hessian when the loss has a closed form (:data:`STRUCTURED_CURVATURES`); beyond, the closed
#: form (``O(K)`` per row instead of ``O(K^2)``; the same values up to float rounding).
MAX_DENSE_HESSIAN_OUTPUTS = 32

#: The built-in losses whose hessian diagonal and Gershgorin majorant have a closed form:
#: ``fn -> curvatures(raw (K,)) -> (diagonal, majorant)``.
STRUCTURED_CURVATURES = {per_sample.multinomial_deviance_fn: per_sample.multinomial_curvatures}


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
    return majorant_curvature(diag, majorant, learning_rate)


def majorant_curvature(diag, majorant, learning_rate=None):
    """The ``"autodiff"`` curvature from a hessian's diagonal and Gershgorin majorant ``(..., K)``:
    the majorant, or ``max(H_kk, lr M_k)`` with a (traced) ``learning_rate``."""
    if learning_rate is None:
        return majorant
    return jnp.maximum(diag, jnp.asarray(learning_rate, majorant.dtype) * majorant)


def structured_curvature(loss: loss_lib.Loss, n_outputs=None) -> bool:
    """Whether :func:`grad_hess` takes ``loss``'s curvature in closed form: a loss of
    :data:`STRUCTURED_CURVATURES` with more than :data:`MAX_DENSE_HESSIAN_OUTPUTS` outputs
    (``n_outputs``, default ``loss.n_outputs``) and a hessian other than ``"unit"``."""
    k = loss.n_outputs if n_outputs is None else n_outputs
    return (not loss.batch and not loss.per_column and loss.hessian != "unit"
            and k is not None and int(k) > MAX_DENSE_HESSIAN_OUTPUTS
            and loss.fn in STRUCTURED_CURVATURES)


def dense_hessian(loss: loss_lib.Loss, n_outputs=None) -> bool:
    """Whether :func:`grad_hess` builds a ``K x K`` hessian per row for ``loss`` with
    ``n_outputs`` outputs (default ``loss.n_outputs``): a per-sample loss of several coupled
    outputs whose curvature is not ``"unit"`` nor in closed form (:func:`structured_curvature`);
    the memory estimates count ``4 n K^2`` bytes for it."""
    k = loss.n_outputs if n_outputs is None else n_outputs
    return (not loss.batch and not loss.per_column and loss.hessian != "unit"
            and k is not None and int(k) > 1 and not structured_curvature(loss, k))


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
      (``docs/losses.md``); a loss of :func:`structured_curvature` takes its closed form instead
      of the per-row ``K x K`` hessian.

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
    closed = STRUCTURED_CURVATURES[loss.fn] if structured_curvature(loss, k) else None

    def one(yi, ri, params):
        g_fn = jax.grad(f, argnums=1)
        g = g_fn(yi, ri, params)
        if loss.hessian == "unit":
            return g, jnp.ones_like(g)
        if closed is not None:  # O(K): no K x K hessian per row
            diag, majorant = closed(ri)
            return g, diag if loss.hessian == "diagonal" else majorant_curvature(
                diag, majorant, learning_rate)
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
