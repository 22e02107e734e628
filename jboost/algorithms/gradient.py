"""Gradient tree boosting with per-leaf line search (ESL Algorithm 10.3; Friedman 2001, 2002) and
forward stagewise additive modelling with one global line search per round (ESL Algorithm 10.2;
Friedman 2001, Algorithm 1) on the boosting scaffold. See docs/algorithms.md."""

from __future__ import annotations

from typing import Mapping

import jax
import jax.numpy as jnp
from jax import lax

from jboost import checks
from jboost.algorithms import _common
from jboost.engine import algorithm as algorithm_lib
from jboost.fitting import prepare, settings
from jboost.losses import baselines, checks as checks_lib, derivatives, loss as loss_lib
from jboost.models import booster
from jboost.trees import refit

LEAF_REFITS = ("auto", "line_search", "none")


def newton_step(G, H, max_step):
    """Newton step ``-G / H``, 0 where ``H <= 0``, clipped to ``[-max_step, max_step]`` (a trust
    region, cf. XGBoost's ``max_delta_step``: docs/algorithms.md)."""
    ok = H > 0
    return jnp.clip(-jnp.where(ok, G / jnp.where(ok, H, 1.0), 0.0), -max_step, max_step)


def line_search_leaf_values(loss: loss_lib.Loss, y, raw, w, leaf, n_leaves: int, init,
                            n_steps: int, max_step):
    """``gamma_j = argmin_gamma sum_{i in leaf j} w_i L(y_i, f_i + gamma)`` (ESL Alg. 10.3 2(c)):
    ``n_steps`` clipped Newton iterations from ``init`` ``(L, K)`` for all leaves at once; no
    leaf's loss rises (docs/algorithms.md)."""
    if loss.hessian == "unit":
        loss = loss.replace(hessian="autodiff")

    def leaf_loss(gamma):  # (L,) each leaf's weighted loss at its value gamma_j
        values = loss_lib.per_sample_losses(loss, y, raw + gamma[leaf])
        return jax.ops.segment_sum(w * values, leaf, num_segments=n_leaves)

    def body(_, gamma):
        g, h = derivatives.grad_hess(loss, y, raw + gamma[leaf])
        G = jax.ops.segment_sum(w[:, None] * g, leaf, num_segments=n_leaves)
        H = jax.ops.segment_sum(w[:, None] * h, leaf, num_segments=n_leaves)
        return gamma + newton_step(G, H, max_step)

    zero = jnp.zeros_like(init)
    at_zero = leaf_loss(zero)
    start = jnp.where((leaf_loss(init) <= at_zero)[:, None], init, zero)
    gamma = lax.fori_loop(0, n_steps, body, start)
    return jnp.where((leaf_loss(gamma) <= at_zero)[:, None], gamma, zero)


def line_search_coefficient(loss: loss_lib.Loss, y, raw, b, w, n_steps: int, max_step,
                            init=1.0):
    """``beta = argmin_beta sum_i w_i L(y_i, raw_i + beta b_i)`` by ``n_steps`` Newton iterations
    on the exact (autodiff) derivatives, clipped by :func:`newton_step`; ``raw``, ``b``: ``(n, K)``.
    """
    def phi(beta):
        return jnp.sum(w * loss_lib.per_sample_losses(loss, y, raw + beta * b))

    d1 = jax.grad(phi)
    d2 = jax.grad(d1)

    def body(_, beta):
        return beta + newton_step(d1(beta), d2(beta), max_step)

    return lax.fori_loop(0, n_steps, body, jnp.asarray(init, jnp.float32))


def _pseudo_residual_tree(r: algorithm_lib.Round, wk):
    """Least-squares tree of the pseudo-residuals ``r = -dL/df`` (ESL Alg. 10.3 2(a)-(b))."""
    g, _ = derivatives.grad_hess(r.loss.replace(hessian="unit"), r.data.y, r.raw)
    hess = jnp.broadcast_to(wk[:, None], g.shape)
    return algorithm_lib.grow_trees(r, wk[:, None] * g, hess)


def gradient_round(r: algorithm_lib.Round, *, leaf_refit: str = "auto", n_newton: int = 5,
                   max_step: float = 1.0) -> algorithm_lib.RoundResult:
    """Round ``m`` of gradient tree boosting (ESL Algorithm 10.3, step 2); no state."""
    loss, y, raw = r.loss, r.data.y, r.raw
    wk = r.data.w * r.sample
    tree, leaf = _pseudo_residual_tree(r, wk)
    # 2(c): gamma_jm = argmin_gamma sum_{x_i in R_jm} L(y_i, f + gamma).
    if leaf_refit == "none":
        gamma = tree.leaf_values
    elif leaf_refit == "auto" and loss.leaf_refit in ("quantile", "huber"):
        gamma = refit.refit_leaf_values(loss, y, raw, wk, leaf, tree.leaf_values.shape[-2], tree.leaf_values)
    else:
        gamma = line_search_leaf_values(loss, y, raw, wk, leaf, tree.leaf_values.shape[-2], tree.leaf_values,
                                        n_newton, jnp.float32(max_step))
    trees, leaves = algorithm_lib.one_tree(tree._replace(leaf_values=r.learning_rate * gamma), leaf)
    return algorithm_lib.RoundResult(trees, leaves, info=_common.info(r.learning_rate))


def stagewise_round(r: algorithm_lib.Round, *, n_newton: int = 5,
                    max_step: float = 1.0) -> algorithm_lib.RoundResult:
    """Round ``m`` of forward stagewise additive modelling (ESL Algorithm 10.2, step 2); no
    state."""
    wk = r.data.w * r.sample
    tree, leaf = _pseudo_residual_tree(r, wk)
    # beta_m = argmin sum L(y, f + beta b(x; gamma_m)).
    beta = line_search_coefficient(r.loss, r.data.y, r.raw, tree.leaf_values[leaf], wk, n_newton,
                                   jnp.float32(max_step))
    trees, leaves = algorithm_lib.one_tree(
        tree._replace(leaf_values=r.learning_rate * beta * tree.leaf_values), leaf)
    return algorithm_lib.RoundResult(trees, leaves, info=_common.info(r.learning_rate * beta))


def _fit(args: Mapping, name: str, algorithm: algorithm_lib.Algorithm) -> booster.Booster:
    """The fit of the call ``args`` (the entry point's ``locals()``) of algorithm ``name``."""
    loss, n_outputs, task = args["loss"], args["n_outputs"], args["task"]
    config, hyper = settings.settings_of(args, algorithm=algorithm)
    X, y, eval_set, borders, table = _common.read_table(
        args["X"], args["y"], args["eval_set"], args["init_model"], name, config, args["borders"],
        labels=loss, n_outputs=n_outputs, task=task)
    resolved = {}

    def label_check(v, name):
        if name == "y":
            resolved["loss"] = checks_lib.resolve_loss(loss, v, n_outputs, task)
        else:
            checks_lib.check_labels(resolved["loss"], v, name)

    data, borders = _common.prepare(X, y, sample_weight=args["sample_weight"], eval_set=eval_set,
                                    n_bins=args["n_bins"], borders=borders, label_check=label_check)
    loss_obj = resolved["loss"]
    if loss_obj.adaptive_huber_alpha:
        raise ValueError("the adaptive Huber loss (huber(alpha=...)) is supported by jboost.fit; "
                         "pass losses.huber(delta=...) here.")
    data = prepare.with_margins(data, args["base_margin"], args["eval_base_margin"], eval_set,
                           loss_obj.n_outputs)
    # A continued fit starts from init_model's baseline and raw scores; with offsets the
    # baseline is the optimal constant next to them (as jboost.fit's).
    init_raw = (None if args["init_model"] is not None else
                baselines.baseline(loss_obj, data.y, data.w, data.margin))
    return _common.run(data, borders, args["key"], hyper, config, loss_obj, init_raw, name=name,
                       init_model=args["init_model"], rounds=_common.rounds_args(args),
                       table=table)


def _newton_settings(n_newton, max_step):
    n_newton = checks.check_int(n_newton, "n_newton", 0, 1000)
    return n_newton, _common.static_real(max_step, "max_step", 0.0, float("inf"), lo_open=True)


@settings.takes_settings(depth=3, l2=0.0)
def gradient_boost(X, y, loss="squared_error", *, n_rounds, depth, learning_rate, subsample,
                   colsample, colsample_by, l2, min_split_gain, min_child_weight,
                   leaf_refit: str = "auto", n_newton: int = 5, max_step=1.0, n_bins, sample_weight,
                   eval_set, key, n_outputs, task, borders, init_model, early_stopping_rounds,
                   early_stopping_tolerance, eval_metric, verbose, callbacks, checkpoint_dir,
                   checkpoint_every, base_margin, eval_base_margin, tree_family,
                   max_leaves) -> booster.Booster:
    """Gradient tree boosting, ESL Algorithm 10.3 (Friedman 2001), with shrinkage and subsampling
    (stochastic gradient boosting, Friedman 2002). See docs/algorithms.md.

    Args:
      loss: any loss ``jboost.fit`` takes (name, :class:`jboost.Loss` or ``fn(y, raw)``).
      leaf_refit: how step 2(c) is solved: ``"line_search"`` (``n_newton`` clipped Newton
        iterations per leaf), ``"auto"`` (the loss's exact refit where it has one, else the line
        search) or ``"none"`` (the least-squares leaf values).
      max_step: trust region of each Newton iteration (static).
      init_model: a model of this algorithm with the same loss to continue.

    Returns:
      A :class:`jboost.Booster`; ``info``: ``coef`` the round's learning rate, ``err`` NaN,
      ``status`` OK, ``weights`` the sample weights.
    """
    checks.check_choice(leaf_refit, "leaf_refit", LEAF_REFITS)
    n_newton, max_step = _newton_settings(n_newton, max_step)
    return _fit(locals(), "gradient_boost", _common.algorithm(
        gradient_round, leaf_refit=leaf_refit, n_newton=n_newton, max_step=max_step))


@settings.takes_settings(depth=3, learning_rate=1.0, l2=0.0)
def forward_stagewise(X, y, loss="squared_error", *, n_rounds, depth, learning_rate, subsample,
                      colsample, colsample_by, l2, min_split_gain, min_child_weight,
                      n_newton: int = 5, max_step=1.0, n_bins, sample_weight, eval_set, key,
                      n_outputs, task, borders, init_model, early_stopping_rounds,
                      early_stopping_tolerance, eval_metric, verbose, callbacks, checkpoint_dir,
                      checkpoint_every, base_margin, eval_base_margin, tree_family,
                      max_leaves) -> booster.Booster:
    """Forward stagewise additive modelling, ESL Algorithm 10.2, with trees as basis functions.

    Each round's least-squares tree ``b(x)`` of the negative gradient is scaled by one
    coefficient ``beta_m`` (:func:`line_search_coefficient`; docs/algorithms.md). Other
    arguments as :func:`gradient_boost`.

    Returns:
      A :class:`jboost.Booster`; ``info``: ``coef`` ``nu beta_m``, ``err`` NaN, ``status`` OK,
      ``weights`` the sample weights.
    """
    n_newton, max_step = _newton_settings(n_newton, max_step)
    return _fit(locals(), "forward_stagewise", _common.algorithm(
        stagewise_round, n_newton=n_newton, max_step=max_step))
