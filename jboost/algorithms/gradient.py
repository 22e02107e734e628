"""Gradient tree boosting with per-leaf line search (ESL Algorithm 10.3; Friedman 2001, 2002) and
forward stagewise additive modelling with one global line search per round (ESL Algorithm 10.2;
Friedman 2001, Algorithm 1).

Both fit each round's oblivious tree (shared builder :func:`jboost.tree.fit_tree`) to the
pseudo-residuals ``r_i = -dL(y_i, f(x_i)) / df`` by least squares (unit hessians: the gain is the
reduction in squared error and the leaf values are the mean residuals). They differ in the step:

* :func:`gradient_boost`: every leaf gets ``gamma_jm = argmin_gamma sum_{x_i in R_jm}
  L(y_i, f(x_i) + gamma)`` (step 2(c)), found by a few (clipped) Newton iterations on the true
  loss, vectorised over leaves (:func:`line_search_leaf_values`), or the loss's exact refit
  (leaf quantile for absolute/quantile loss, Friedman's Huber step);
* :func:`forward_stagewise`: the tree ``b(x)`` is a basis function and one coefficient
  ``beta_m = argmin_beta sum_i L(y_i, f(x_i) + beta b(x_i))`` scales it (step 2(a) with the
  basis fitted to the negative gradient), found by Newton iterations on the exact 1-D second
  derivative (autodiff of the scalar objective).

Both take shrinkage ``nu`` (ESL eq. 10.41; a number or an optax schedule ``round -> rate``) and row
subsampling ``eta`` (stochastic gradient boosting, Friedman 2002; Bernoulli weights, so shapes are
fixed): tree and line search see the subsample. This sits beside ``jboost.fit``, whose default is
second-order (Newton) trees.
"""

from __future__ import annotations

import functools
from typing import NamedTuple, Optional

import jax
import jax.numpy as jnp
from jax import lax

from jboost import _validation
from jboost import api
from jboost import boosting
from jboost import derivatives
from jboost import losses as losses_lib
from jboost import refit
from jboost.algorithms import _common
from jboost.algorithms._common import OK

LEAF_REFITS = ("auto", "line_search", "none")


class _State(NamedTuple):
    raw: jax.Array        # (n, K)
    raw_valid: jax.Array  # (m, K)


def newton_step(G, H, max_step):
    """Newton step ``-G / H``, 0 where ``H <= 0``, clipped to ``[-max_step, max_step]``.

    The clip is a trust region: where the loss has no finite minimiser along the step (a leaf
    whose rows are all of one class under the deviance) or its curvature vanishes (saturated
    probabilities, ``p (1 - p) ~ 1e-30``), a plain Newton step is astronomically large; clipped,
    the value grows by at most ``max_step`` per iteration (cf. XGBoost's ``max_delta_step``).
    """
    ok = H > 0
    return jnp.clip(-jnp.where(ok, G / jnp.where(ok, H, 1.0), 0.0), -max_step, max_step)


def line_search_leaf_values(loss: losses_lib.Loss, y, raw, w, leaf, n_leaves: int, init,
                            n_steps: int, max_step):
    """``gamma_j = argmin_gamma sum_{i in leaf j} w_i L(y_i, f_i + gamma)`` (ESL Alg. 10.3 2(c)).

    ``n_steps`` diagonal Newton iterations on the true loss from ``init`` ``(L, K)``, all leaves at
    once, each step clipped by :func:`newton_step` (unlike :func:`jboost.refit.line_search_leaf_values`,
    whose unclipped steps can diverge). Exact after one step for squared error.
    """
    loss = loss.replace(hessian="autodiff")

    def body(_, gamma):
        g, h = derivatives.grad_hess(loss, y, raw + gamma[leaf])
        G = jax.ops.segment_sum(w[:, None] * g, leaf, num_segments=n_leaves)
        H = jax.ops.segment_sum(w[:, None] * h, leaf, num_segments=n_leaves)
        return gamma + newton_step(G, H, max_step)

    return lax.fori_loop(0, n_steps, body, init)


def line_search_coefficient(loss: losses_lib.Loss, y, raw, b, w, n_steps: int, max_step,
                            init=1.0):
    """``beta = argmin_beta sum_i w_i L(y_i, raw_i + beta b_i)`` by ``n_steps`` Newton iterations.

    ``phi'(beta)`` and ``phi''(beta)`` are exact (autodiff of the scalar objective), so for a loss
    quadratic in ``raw`` one step is exact. Steps are clipped by :func:`newton_step`.

    Args:
      y: ``(n,)``; raw, b: ``(n, K)``; w: ``(n,)``.
    """
    def phi(beta):
        return jnp.sum(w * losses_lib.per_sample_losses(loss, y, raw + beta * b))

    d1 = jax.grad(phi)
    d2 = jax.grad(d1)

    def body(_, beta):
        return beta + newton_step(d1(beta), d2(beta), max_step)

    return lax.fori_loop(0, n_steps, body, jnp.asarray(init, jnp.float32))


def _pseudo_residual_tree(data: _common.Data, loss, raw, wk, masks, config, hyper):
    """Least-squares tree of the pseudo-residuals ``r = -dL/df`` (ESL Alg. 10.3 2(a)-(b))."""
    g, _ = derivatives.grad_hess(loss.replace(hessian="unit"), data.y, raw)
    hess = jnp.broadcast_to(wk[:, None], g.shape)
    return _common.fit_weak_tree(data.X_binned, wk[:, None] * g, hess, masks, config, hyper)


@functools.partial(jax.jit, static_argnames=("config", "leaf_refit", "n_newton", "stagewise"))
def _gradient_boost(data: _common.Data, key, hyper: boosting.Hyperparams, loss: losses_lib.Loss,
                    init_raw, max_step, *, config, leaf_refit: str, n_newton: int, stagewise: bool):
    n = data.y.shape[0]
    n_features = data.X_binned.shape[0]
    n_leaves = 2**config.depth

    def step(state: _State, m):
        keep, masks = _common.round_randomness(key, m, n, n_features, config, hyper)
        wk = data.w * keep
        tree, leaf = _pseudo_residual_tree(data, loss, state.raw, wk, masks, config, hyper)
        lr = _common.learning_rate(config, hyper, m)
        if stagewise:
            # ESL Alg. 10.2: beta_m = argmin sum L(y, f + beta b(x; gamma_m)).
            beta = line_search_coefficient(loss, data.y, state.raw, tree.leaf_values[leaf], wk,
                                           n_newton, max_step)
            values, coef = lr * beta * tree.leaf_values, lr * beta
        else:
            # ESL Alg. 10.3 2(c): gamma_jm = argmin_gamma sum_{x_i in R_jm} L(y_i, f + gamma).
            if leaf_refit == "none":
                gamma = tree.leaf_values
            elif leaf_refit == "auto" and loss.leaf_refit in ("quantile", "huber"):
                gamma = refit.refit_leaf_values(loss, data.y, state.raw, wk, leaf, n_leaves,
                                                tree.leaf_values)
            else:
                gamma = line_search_leaf_values(loss, data.y, state.raw, wk, leaf, n_leaves,
                                                tree.leaf_values, n_newton, max_step)
            values, coef = lr * gamma, lr
        tree = tree._replace(leaf_values=values)
        raw = state.raw + values[leaf]
        raw_valid = state.raw_valid + values[_common.valid_leaf(tree, data.X_valid, config)]
        out = (jax.tree_util.tree_map(lambda a: a[None], tree), coef, jnp.float32(jnp.nan),
               jnp.int32(OK), _common.mean_loss(loss, data.y, raw, data.w),
               _common.mean_loss(loss, data.y_valid, raw_valid, data.w_valid))
        return _State(raw, raw_valid), out

    k = init_raw.shape[0]
    state0 = _State(jnp.broadcast_to(init_raw, (n, k)),
                    jnp.broadcast_to(init_raw, (data.y_valid.shape[0], k)))
    return lax.scan(step, state0, jnp.arange(config.n_rounds))


def _fit(X, y, loss, *, stagewise, n_rounds, depth, learning_rate, subsample, colsample,
         colsample_by, l2, min_split_gain, min_child_weight, leaf_refit, n_newton, max_step, n_bins,
         sample_weight, eval_set, key, n_outputs, task, borders) -> _common.Fitted:
    config, hyper = _common.settings(n_rounds=n_rounds, depth=depth, n_bins=n_bins,
                                     learning_rate=learning_rate, l2=l2, min_split_gain=min_split_gain,
                                     min_child_weight=min_child_weight, subsample=subsample,
                                     colsample=colsample, colsample_by=colsample_by)
    if leaf_refit not in LEAF_REFITS:
        raise ValueError(f"leaf_refit={leaf_refit!r} must be one of {LEAF_REFITS}.")
    n_newton = _validation.check_int(n_newton, "n_newton", 0, 1000)
    _validation.check_real(max_step, "max_step", 0.0, float("inf"), lo_open=True)
    if task is not None and task not in losses_lib.TASKS:
        raise ValueError(f"task={task!r} must be one of {losses_lib.TASKS}.")
    resolved = {}

    def label_check(v, name):
        if name == "y":
            resolved["loss"] = _validation.resolve_loss(loss, v, n_outputs, task)
        else:
            losses_lib.check_labels(resolved["loss"], v)

    data, borders = _common.prepare(X, y, sample_weight=sample_weight, eval_set=eval_set,
                                    n_bins=n_bins, borders=borders, label_check=label_check)
    loss_obj = resolved["loss"]
    if loss_obj.adaptive_huber_alpha:
        raise ValueError("the adaptive Huber loss (huber(alpha=...)) is supported by jboost.fit; "
                         "pass losses.huber(delta=...) here.")
    init_raw = losses_lib.baseline(loss_obj, data.y, data.w)
    _, (trees, coef, err, status, train_loss, valid_loss) = _gradient_boost(
        data, _common.as_key(key), hyper, loss_obj, init_raw, jnp.asarray(max_step, jnp.float32),
        config=config, leaf_refit=leaf_refit,
        n_newton=n_newton, stagewise=stagewise)
    model = _common.finish(trees, borders, init_raw, loss_obj, train_loss, valid_loss)
    return _common.Fitted(model, coef, err, status, data.w)


def gradient_boost(X, y, loss="squared_error", *, n_rounds: int = 100, depth: int = 3,
                   learning_rate=0.1, subsample=1.0, colsample=1.0, colsample_by: str = "tree",
                   l2=0.0, min_split_gain=0.0, min_child_weight=1.0, leaf_refit: str = "auto",
                   n_newton: int = 5, max_step=1.0, n_bins: int = 256, sample_weight=None,
                   eval_set=None, key=0, n_outputs: Optional[int] = None,
                   task: Optional[str] = None, borders=None) -> _common.Fitted:
    """Gradient tree boosting, ESL Algorithm 10.3 (Friedman 2001), with shrinkage and subsampling.

    1. ``f_0 = argmin_gamma sum L(y_i, gamma)``. 2. For ``m = 1..M``: (a) ``r_im = -dL(y_i,
    f(x_i))/df``; (b) fit a least-squares oblivious tree to ``r_im`` (on a Bernoulli(subsample)
    subset of rows: stochastic gradient boosting, Friedman 2002), regions ``R_jm``; (c)
    ``gamma_jm = argmin_gamma sum_{x_i in R_jm} L(y_i, f(x_i) + gamma)``; (d) ``f <- f + nu
    sum_j gamma_jm I(x in R_jm)``.

    Args:
      loss: any loss ``jboost.fit`` takes (name, :class:`jboost.Loss` or ``fn(y, raw)``);
        K-output losses get one tree with vector leaves per round.
      learning_rate: shrinkage ``nu`` (traced), or an optax schedule ``round -> nu``.
      subsample: ``eta``, the fraction of rows per round in expectation (traced).
      leaf_refit: how step 2(c) is solved: ``"line_search"``: ``n_newton`` Newton iterations on
        the true loss per leaf (all leaves at once), starting from the mean residual, each step
        clipped to ``[-max_step, max_step]`` (needs a positive second derivative; exact in one
        step for squared error; see :func:`newton_step`); ``"auto"``: the loss's own exact refit
        where it has one (weighted leaf quantile for absolute/quantile loss, Friedman's Huber
        step), else the line search; ``"none"``: keep the least-squares leaf values (plain L2
        functional gradient steps).
      max_step: trust region of each Newton iteration (traced).
      l2, min_split_gain, min_child_weight: regularisation of the least-squares tree (with unit
        hessians ``min_child_weight`` is a minimal number of (weighted) rows per leaf).

    Returns:
      :class:`jboost.algorithms.Fitted` (``coef`` holds the round's learning rate); its model
      works with ``jboost.predict`` / ``predict_proba`` like a ``jboost.fit`` model.
    """
    return _fit(X, y, loss, stagewise=False, n_rounds=n_rounds, depth=depth,
                learning_rate=learning_rate, subsample=subsample, colsample=colsample,
                colsample_by=colsample_by, l2=l2, min_split_gain=min_split_gain,
                min_child_weight=min_child_weight, leaf_refit=leaf_refit, n_newton=n_newton,
                max_step=max_step, n_bins=n_bins, sample_weight=sample_weight, eval_set=eval_set,
                key=key, n_outputs=n_outputs, task=task, borders=borders)


def forward_stagewise(X, y, loss="squared_error", *, n_rounds: int = 100, depth: int = 3,
                      learning_rate=1.0, subsample=1.0, colsample=1.0, colsample_by: str = "tree",
                      l2=0.0, min_split_gain=0.0, min_child_weight=1.0, n_newton: int = 5,
                      max_step=1.0, n_bins: int = 256, sample_weight=None, eval_set=None, key=0,
                      n_outputs: Optional[int] = None, task: Optional[str] = None,
                      borders=None) -> _common.Fitted:
    """Forward stagewise additive modelling, ESL Algorithm 10.2, with trees as basis functions.

    1. ``f_0 = argmin_gamma sum L(y_i, gamma)``. 2. For ``m = 1..M``: (a) the basis function
    ``b(x; gamma_m)`` is the least-squares oblivious tree of the negative gradient (Friedman 2001,
    Algorithm 1, line 4), and ``beta_m = argmin_beta sum_i L(y_i, f_{m-1}(x_i) + beta b(x_i;
    gamma_m))`` by ``n_newton`` Newton iterations from ``beta = 1``, steps clipped to
    ``[-max_step, max_step]`` (:func:`line_search_coefficient`);
    (b) ``f_m = f_{m-1} + nu beta_m b(x; gamma_m)``.

    Unlike :func:`gradient_boost` one coefficient scales the whole tree. The loss must be twice
    differentiable with positive curvature along ``b`` for the Newton steps (e.g. squared error,
    deviances, exponential, Poisson); elsewhere ``beta`` stays 1.

    Returns:
      :class:`jboost.algorithms.Fitted`; ``coef`` is ``nu beta_m``.
    """
    return _fit(X, y, loss, stagewise=True, n_rounds=n_rounds, depth=depth,
                learning_rate=learning_rate, subsample=subsample, colsample=colsample,
                colsample_by=colsample_by, l2=l2, min_split_gain=min_split_gain,
                min_child_weight=min_child_weight, leaf_refit="none", n_newton=n_newton,
                max_step=max_step, n_bins=n_bins, sample_weight=sample_weight, eval_set=eval_set,
                key=key, n_outputs=n_outputs, task=task, borders=borders)
