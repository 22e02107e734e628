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

**Degenerate curvature** (issue 16). A hand-written loss can have a hessian that is zero almost
everywhere (pinball, absolute error, hinge, epsilon-insensitive: piecewise linear) or negative
somewhere (Cauchy, Tukey's biweight: non-convex). A Newton leaf ``-G / (H + l2)`` is then
meaningless: with ``H = 0`` it is ``-G / l2``, a step that grows with the number of rows (a
hand-written pinball loss diverged to a test loss 240-830 times the built-in's), and with ``H <
0`` it points uphill. A custom loss's default curvature, ``Loss.hessian="auto"``, therefore
decides every round, from the traced values (:func:`curvature_is_positive`): if every row that
moves the fit has positive curvature, the round is a Newton round as above; otherwise the tree
is grown on unit curvature (:func:`first_order_curvature`), i.e. fitted by least squares to the
negative gradient (ESL Algorithm 10.3; Friedman 2001, Algorithm 1), and its leaves
(:func:`jboost.trees.refit.degenerate_leaf_values`) are, for a regression loss, the exact minimisers
of the user's loss found by an autodiff search that needs no curvature
(:func:`jboost.trees.refit.exact_leaf_values`; the built-in absolute, quantile and Huber losses are
this rule with closed-form leaves: ``hessian="unit"`` and the quantile or Huber refit), and for
a classification loss the first-order values on the unit curvature of the rows with a
gradient (XGBoost's ``binary:hinge``), kept from raising a leaf's loss.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from jboost.losses import loss as loss_lib
from jboost.losses import objectives


def curvature(hess, kind: str = "autodiff", learning_rate=None):
    """Newton curvatures ``(..., K)`` from full per-sample hessians ``hess`` ``(..., K, K)``.

    ``kind="autodiff"`` (or ``"auto"``): the Gershgorin majorant ``M_k = H_kk + sum_{j != k}
    |H_kj|`` (module docstring); ``"diagonal"``: ``H_kk``. Equal when ``K == 1`` or ``H`` is
    diagonal. With a ``learning_rate`` ``lr`` (traced), ``"autodiff"`` gives ``max(H_kk, lr
    M_k)``: the shrunk step ``lr G / h`` then never exceeds the majorised Newton step ``G / M``,
    and it is the classical diagonal step wherever the shrinkage alone keeps it there (``lr <=
    H_kk / M_k``, which is ``1/2`` for the softmax).
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
      g, h: ``(n, K)`` gradients and curvatures (:func:`grad_hess`); w: ``(n,)`` weights.
    """
    fine = (h > 0) | ((h == 0) & (g == 0)) | (w[:, None] == 0)
    bad = jnp.sum(~fine, dtype=jnp.int32)
    if axis_name is not None:
        bad = jax.lax.psum(bad, axis_name)
    return bad == 0


def first_order_curvature(g, task: str):
    """The unit curvature ``(n, K)`` that replaces a degenerate one (ESL Algorithm 10.3: the tree
    is a least-squares fit to the negative gradient): 1 for every row of a regression or count
    loss (the built-in absolute, quantile and Huber losses' ``hessian="unit"``), and for a
    classification loss 1 where the row has a gradient and 0 on stationary rows (XGBoost's
    ``binary:hinge`` curvature: a row beyond the hinge's margin neither pulls nor dilutes a
    leaf's first-order value ``-G / (W + l2)``; :func:`jboost.trees.refit.degenerate_leaf_values`)."""
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
      deviance; see the module docstring), ``"diagonal"`` ``h_k = H_kk``, or ``"unit"`` ``h = 1``
      (the tree structure is a least-squares fit to the negative gradient, ESL Algorithm 10.3).
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
    """Gradient and hessian diagonal of a batch objective (:attr:`jboost.Loss.batch`): one
    scalar function ``L(raw)`` of every row, ``raw (n, K)``.

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

    Returns ``(g, h)``, each ``(n, K)``, already weighted (the loss applies ``w`` itself).
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
