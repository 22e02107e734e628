"""Gradients and Newton curvatures of a per-sample loss, by autodiff, vmapped over samples, and
of a batch objective.

For K coupled outputs the default curvature is the Gershgorin (1931) diagonal majorant of the
autodiff hessian, ``h_k = H_kk + sum_{j != k} |H_kj|``: a local quadratic majoriser (Böhning and
Lindsay 1988; Lange, Hunter and Yang 2000) whose separable Newton step does not overshoot the
coupled one; for the softmax it is XGBoost's ``multi:softprob`` hessian ``2 p (1 - p)``. Where a
custom loss's curvature is degenerate (zero or negative), a round falls back to least-squares
trees on the negative gradient (ESL Algorithm 10.3; Friedman 2001, "Greedy Function
Approximation: A Gradient Boosting Machine", Algorithm 1). Batch objectives take the hessian's
diagonal by Hessian-vector products: exact, by the colouring of Curtis, Powell and Reid (1974),
or by Hutchinson's estimator (Bekas, Kokiopoulou and Saad 2007).

The reasoning, and what the built-in losses use, is in ``docs/losses.md``.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from jboost.losses import loss as loss_lib
from jboost.losses import objectives


def curvature(hess, kind: str = "autodiff", learning_rate=None):
    """Newton curvatures from full per-sample hessians.

    ``kind="autodiff"`` (or ``"auto"``): the Gershgorin (1931) majorant ``M_k = H_kk + sum_{j !=
    k} |H_kj|`` (``docs/losses.md``); ``"diagonal"``: ``H_kk``. Equal when ``K == 1`` or ``H`` is
    diagonal. With a ``learning_rate`` ``lr`` (traced), ``"autodiff"`` gives ``max(H_kk, lr
    M_k)``: the shrunk step ``lr G / h`` then never exceeds the majorised Newton step ``G / M``,
    and it is the classical diagonal step wherever the shrinkage alone keeps it there (``lr <=
    H_kk / M_k``, which is ``1/2`` for the softmax).

    Args:
      hess: ``(..., K, K)`` per-sample hessians.
      kind: ``"autodiff"``, ``"auto"`` or ``"diagonal"``.
      learning_rate: ``None``, or the (traced) shrinkage of the step.

    Returns:
      ``(..., K)`` curvatures, of ``hess``'s dtype.
    """
    diag = jnp.diagonal(hess, axis1=-2, axis2=-1)
    if kind == "diagonal":
        return diag
    majorant = diag + (jnp.sum(jnp.abs(hess), axis=-1) - jnp.abs(diag))
    if learning_rate is None:
        return majorant
    return jnp.maximum(diag, jnp.asarray(learning_rate, hess.dtype) * majorant)


def curvature_is_positive(g, h, w, axis_name=None):
    """Whether a round's curvature allows Newton leaves (traced bool ``()``): every row of
    positive weight has ``h > 0`` in every output, or is stationary (``g == 0`` and ``h == 0``,
    e.g. a row beyond Tukey's cut-off, a saturated logistic row with ``p == y``: it changes no
    sum). A row with ``h <= 0`` and a gradient (a kink of a piecewise-linear loss, a non-convex
    region, a hessian that underflowed) or a NaN makes it ``False``. With rows sharded over
    ``axis_name``, all devices' rows count.

    Args:
      g: ``(n, K)`` gradients (:func:`grad_hess`).
      h: ``(n, K)`` curvatures.
      w: ``(n,)`` weights.
      axis_name: the ``pmap``/``shard_map`` axis the rows are sharded over, or ``None``.

    Returns:
      A traced bool scalar.
    """
    fine = (h > 0) | ((h == 0) & (g == 0)) | (w[:, None] == 0)
    bad = jnp.sum(~fine, dtype=jnp.int32)
    if axis_name is not None:
        bad = jax.lax.psum(bad, axis_name)
    return bad == 0


def first_order_curvature(g, task: str):
    """The unit curvature that replaces a degenerate one.

    With it the tree is a least-squares fit to the negative gradient (ESL Algorithm 10.3): 1 for
    every row of a regression or count loss (the built-in absolute, quantile and Huber losses'
    ``hessian="unit"``), and for a classification loss 1 where the row has a gradient and 0 on
    stationary rows (XGBoost's ``binary:hinge`` curvature: a row beyond the hinge's margin
    neither pulls nor dilutes a leaf's first-order value ``-G / (W + l2)``;
    :func:`jboost.trees.refit.degenerate_leaf_values`).

    Args:
      g: ``(n, K)`` gradients.
      task: the loss's task (:data:`jboost.losses.TASKS`).

    Returns:
      ``(n, K)`` curvatures of ``g``'s dtype.
    """
    if task in ("binary", "multiclass"):
        return (g != 0).astype(g.dtype)
    return jnp.ones_like(g)


def grad_hess(loss: loss_lib.Loss, y, raw, learning_rate=None):
    """First derivatives and Newton curvatures of ``loss`` in ``raw``.

    Args:
      loss: a :class:`jboost.Loss`.
      y: ``(n,)`` labels (``(n, C)`` vector labels: the loss sees each row's ``(C,)``; a
        :attr:`jboost.Loss.per_column` loss gets each column's scalar derivatives).
      raw: ``(n, K)`` raw scores.
      learning_rate: ``None``, or the shrinkage the Newton step is multiplied by (traced): for K
        coupled outputs the ``"autodiff"`` curvature is then ``max(H_kk, lr M_k)`` (see
        :func:`curvature`); no effect with one output.

    Returns:
      ``(g, h)``, each ``(n, K)``: ``g_k = d loss / d raw_k`` from ``jax.grad``, and ``h`` from
      the per-sample hessian ``H = jax.hessian`` computed as forward-over-reverse (a jvp of the
      gradient along each basis vector, K of them): by ``loss.hessian``, ``"autodiff"`` (the
      built-in losses') and ``"auto"`` (a custom loss's default, which boosting may replace by 1
      in a round, :func:`curvature_is_positive`) the Gershgorin majorant ``h_k = H_kk + sum_{j !=
      k} |H_kj|`` (the second derivative when ``K == 1``; ``2 p_k (1 - p_k)`` for the multinomial
      deviance; see ``docs/losses.md``), ``"diagonal"`` ``h_k = H_kk``, or ``"unit"`` ``h = 1``
      (the tree structure is a least-squares fit to the negative gradient, ESL Algorithm 10.3).

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
    """Gradient and hessian diagonal of a batch objective (:attr:`jboost.Loss.batch`).

    The objective is one scalar function ``L(raw)`` of every row, ``raw (n, K)``.

    ``g = jax.grad(L)``; the Newton curvature is the diagonal of the hessian ``H`` by
    ``loss.hessian_diag`` (each a Hessian-vector product ``Hv``, forward over reverse, costs
    about two gradients):

    * ``"exact"``: ``H_ii = (H e_i)_i``, ``n K`` products (``lax.map`` in batches of 32): exact,
      ``O(n)`` gradients per round, for small ``n``;
    * ``"groups"``: ``H`` block-diagonal over query groups (``y[:, 1]``, contiguous: a loss that
      is a sum over groups): probe ``v_j`` = the one-hot of position ``j`` in EVERY group at
      once; a row at position ``j`` reads its own diagonal entry off ``H v_j`` (no other row
      of its block is probed), so ``loss.max_group * K`` products give the exact diagonal
      (the colouring of Curtis, Powell and Reid 1974 for a block-diagonal pattern);
    * ``"hutchinson"``: ``diag(H) ~ mean_s v_s * H v_s`` over ``loss.n_probes`` Rademacher
      probes from ``key`` (the round's folded key; Bekas, Kokiopoulou and Saad 2007):
      unbiased, the variance of entry ``i`` is ``sum_{j != i} H_ij^2 / n_probes``; a negative
      estimate is floored at 0 (a row with no curvature; then biased upwards);
    * a function ``diag(y, raw, w, **params)``: a closed form or an autodiff route of the loss
      (Cox: :func:`jboost.objectives.cox`).

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
