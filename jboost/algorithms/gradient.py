"""Gradient tree boosting with per-leaf line search (ESL Algorithm 10.3; Friedman 2001, 2002) and
forward stagewise additive modelling with one global line search per round (ESL Algorithm 10.2;
Friedman 2001, Algorithm 1).

Both are ``round`` functions on the boosting scaffold (:mod:`jboost.engine.boosting`: it draws the
round's rows and columns, adds the round's tree to the raw scores and records the loss) and fit
each round's oblivious tree (shared builder :func:`jboost.engine.algorithm.grow_trees`) to the
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
second-order (Newton) trees. Defaults differ from ``jboost.fit``'s where Friedman's algorithms
do: least-squares trees without an L2 penalty (``l2 = 0``: the leaf values are the mean
residuals before the line search), depth 3 (8 leaves: ESL Section 10.11 finds trees of 4 to 8
terminal nodes work well), and for forward stagewise modelling no shrinkage (``learning_rate =
1``: ESL Algorithm 10.2 as published).

Warm start: ``init_model=`` (a model the same algorithm fitted, with the same loss) boosts
``n_rounds`` more rounds from the model's baseline and raw scores (these algorithms keep no other
state), round keys folded from its round count, so ``r`` rounds then ``s`` more equal ``r + s``
rounds bitwise; as with :func:`jboost.fit`'s ``init_model=``, the rows may be new ones.
"""

from __future__ import annotations


import jax
import jax.numpy as jnp
from jax import lax

from jboost import checks
from jboost.algorithms import _common
from jboost.engine import algorithm as algorithm_lib
from jboost.fitting import settings
from jboost.losses import baselines
from jboost.losses import checks as checks_lib
from jboost.losses import derivatives
from jboost.losses import loss as loss_lib
from jboost.models import booster
from jboost.trees import refit

LEAF_REFITS = ("auto", "line_search", "none")


def newton_step(G, H, max_step):
    """Newton step ``-G / H``, 0 where ``H <= 0``, clipped to ``[-max_step, max_step]``.

    The clip is a trust region: where the loss has no finite minimiser along the step (a leaf
    whose rows are all of one class under the deviance) or its curvature vanishes (saturated
    probabilities, ``p (1 - p) ~ 1e-30``), a plain Newton step is astronomically large; clipped,
    the value grows by at most ``max_step`` per iteration (cf. XGBoost's ``max_delta_step``).
    """
    ok = H > 0
    return jnp.clip(-jnp.where(ok, G / jnp.where(ok, H, 1.0), 0.0), -max_step, max_step)


def line_search_leaf_values(loss: loss_lib.Loss, y, raw, w, leaf, n_leaves: int, init,
                            n_steps: int, max_step):
    """``gamma_j = argmin_gamma sum_{i in leaf j} w_i L(y_i, f_i + gamma)`` (ESL Alg. 10.3 2(c)).

    ``n_steps`` Newton iterations on the true loss from ``init`` ``(L, K)``, all leaves at once,
    each step clipped by :func:`newton_step` (unlike :func:`jboost.trees.refit.line_search_leaf_values`,
    whose unclipped steps can diverge). Exact after one step for squared error. The curvature is
    the loss's (:func:`jboost.losses.derivatives.grad_hess`; a ``"unit"`` loss gets the autodiff one):
    for K coupled outputs the Gershgorin majorant of the hessian by default, whose per-output
    step cannot overshoot the coupled Newton step, or its diagonal with
    ``hessian="diagonal"``.

    **The loss never rises.** The least-squares tree's leaf values (the mean pseudo-residuals,
    ``init``) are on the scale of the gradient, not of the step: for ``L = c (y - f)^2`` they are
    ``2c`` times the optimal step, and ``n_steps`` steps of at most ``max_step`` cannot come back
    from, say, ``2c = 200`` times it (the training loss would grow every round). So
    each leaf starts from the better of ``init`` and 0 (no move), and keeps 0 where the search
    ends above the leaf's loss at 0: every leaf's loss is at most its loss before the round (for
    a convex loss, the shrunk step ``nu * gamma`` then too).
    """
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
    """``beta = argmin_beta sum_i w_i L(y_i, raw_i + beta b_i)`` by ``n_steps`` Newton iterations.

    ``phi'(beta)`` and ``phi''(beta)`` are exact (autodiff of the scalar objective), so for a loss
    quadratic in ``raw`` one step is exact. Steps are clipped by :func:`newton_step`.

    Args:
      y: ``(n,)``; raw, b: ``(n, K)``; w: ``(n,)``.
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


def _fit(X, y, name, loss, algorithm, *, n_rounds, depth, learning_rate, subsample, colsample,
         colsample_by, l2, min_split_gain, min_child_weight, n_bins, sample_weight, eval_set, key,
         n_outputs, task, borders, init_model, rounds, base_margin,
         eval_base_margin, family) -> booster.Booster:
    config, hyper = settings.settings(n_rounds=n_rounds, depth=depth, n_bins=n_bins,
                                 learning_rate=learning_rate, l2=l2, min_split_gain=min_split_gain,
                                 min_child_weight=min_child_weight, subsample=subsample,
                                 colsample=colsample, colsample_by=colsample_by,
                                 algorithm=algorithm,
                                 **family)
    X, y, eval_set, borders, table = _common.read_table(X, y, eval_set, init_model, name, config,
                                                       borders, labels=loss, n_outputs=n_outputs,
                                                       task=task)
    resolved = {}

    def label_check(v, name):
        if name == "y":
            resolved["loss"] = checks_lib.resolve_loss(loss, v, n_outputs, task)
        else:
            checks_lib.check_labels(resolved["loss"], v, name)

    data, borders = _common.prepare(X, y, sample_weight=sample_weight, eval_set=eval_set,
                                    n_bins=n_bins, borders=borders, label_check=label_check)
    loss_obj = resolved["loss"]
    if loss_obj.adaptive_huber_alpha:
        raise ValueError("the adaptive Huber loss (huber(alpha=...)) is supported by jboost.fit; "
                         "pass losses.huber(delta=...) here.")
    data = _common.margins(data, name, base_margin, eval_base_margin, eval_set, loss_obj.n_outputs,
                           offsets=True)
    # A continued fit starts from init_model's baseline and raw scores; with offsets the
    # baseline is the optimal constant next to them (as jboost.fit's).
    init_raw = (None if init_model is not None else
                baselines.baseline(loss_obj, data.y, data.w, data.margin))
    return _common.run(data, borders, key, hyper, config, loss_obj, init_raw, name=name,
                       init_model=init_model, rounds=rounds, table=table)


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
      max_step: trust region of each Newton iteration (static).
      init_model: continue this Booster (fitted by :func:`gradient_boost` with the same loss,
        ``n_bins`` and ``depth``): ``n_rounds`` more rounds with its borders and baseline, keys
        folded from its round count (``r`` then ``s`` rounds equal ``r + s`` bitwise); the
        result holds every round.
      early_stopping_rounds, early_stopping_tolerance, eval_metric, verbose, callbacks,
        checkpoint_dir, checkpoint_every: as :func:`jboost.fit`'s (the lifecycle paragraph of
        :mod:`jboost.algorithms`).
      base_margin, eval_base_margin: per-row offsets of the raw scores, as :func:`jboost.fit`'s
        (the rounds start from them, the baseline is the optimal constant next to them; pass them again to :func:`jboost.predict`).
      l2, min_split_gain, min_child_weight: regularisation of the least-squares tree (with unit
        hessians ``min_child_weight`` is a minimal number of (weighted) rows per leaf); ``l2 = 0``
        by default: ESL's least-squares tree.

    Returns:
      A :class:`jboost.Booster` (it works with ``jboost.predict`` / ``predict_proba`` like a
      ``jboost.fit`` model); ``info``: ``coef`` the round's learning rate, ``err`` NaN,
      ``status`` OK, ``weights`` the sample weights.
    """
    checks.check_choice(leaf_refit, "leaf_refit", LEAF_REFITS)
    n_newton, max_step = _newton_settings(n_newton, max_step)
    algorithm = _common.algorithm(gradient_round, leaf_refit=leaf_refit, n_newton=n_newton,
                                  max_step=max_step)
    return _fit(X, y, "gradient_boost", loss, algorithm, n_rounds=n_rounds, depth=depth,
                learning_rate=learning_rate, subsample=subsample, colsample=colsample,
                colsample_by=colsample_by, l2=l2, min_split_gain=min_split_gain,
                min_child_weight=min_child_weight, n_bins=n_bins, sample_weight=sample_weight,
                eval_set=eval_set, key=key, n_outputs=n_outputs, task=task, borders=borders,
                init_model=init_model, rounds=_common.rounds_args(locals()),
                base_margin=base_margin, eval_base_margin=eval_base_margin,
                family=_common.family(tree_family, max_leaves))


@settings.takes_settings(depth=3, learning_rate=1.0, l2=0.0)
def forward_stagewise(X, y, loss="squared_error", *, n_rounds, depth, learning_rate, subsample,
                      colsample, colsample_by, l2, min_split_gain, min_child_weight,
                      n_newton: int = 5, max_step=1.0, n_bins, sample_weight, eval_set, key,
                      n_outputs, task, borders, init_model, early_stopping_rounds,
                      early_stopping_tolerance, eval_metric, verbose, callbacks, checkpoint_dir,
                      checkpoint_every, base_margin, eval_base_margin, tree_family,
                      max_leaves) -> booster.Booster:
    """Forward stagewise additive modelling, ESL Algorithm 10.2, with trees as basis functions.

    1. ``f_0 = argmin_gamma sum L(y_i, gamma)``. 2. For ``m = 1..M``: (a) the basis function
    ``b(x; gamma_m)`` is the least-squares oblivious tree of the negative gradient (Friedman 2001,
    Algorithm 1, line 4), and ``beta_m = argmin_beta sum_i L(y_i, f_{m-1}(x_i) + beta b(x_i;
    gamma_m))`` by ``n_newton`` Newton iterations from ``beta = 1``, steps clipped to
    ``[-max_step, max_step]`` (:func:`line_search_coefficient`);
    (b) ``f_m = f_{m-1} + nu beta_m b(x; gamma_m)``.

    Unlike :func:`gradient_boost` one coefficient scales the whole tree. The loss must be twice
    differentiable with positive curvature along ``b`` for the Newton steps (e.g. squared error,
    deviances, exponential, Poisson); elsewhere ``beta`` stays 1. No shrinkage by default
    (``learning_rate = 1``: Algorithm 10.2 as published); ``l2 = 0`` as :func:`gradient_boost`.

    ``init_model`` continues a :func:`forward_stagewise` model as in :func:`gradient_boost`.

    Returns:
      A :class:`jboost.Booster`; ``info``: ``coef`` ``nu beta_m``, ``err`` NaN, ``status`` OK,
      ``weights`` the sample weights.
    """
    n_newton, max_step = _newton_settings(n_newton, max_step)
    algorithm = _common.algorithm(stagewise_round, n_newton=n_newton, max_step=max_step)
    return _fit(X, y, "forward_stagewise", loss, algorithm, n_rounds=n_rounds, depth=depth,
                learning_rate=learning_rate, subsample=subsample, colsample=colsample,
                colsample_by=colsample_by, l2=l2, min_split_gain=min_split_gain,
                min_child_weight=min_child_weight, n_bins=n_bins, sample_weight=sample_weight,
                eval_set=eval_set, key=key, n_outputs=n_outputs, task=task, borders=borders,
                init_model=init_model, rounds=_common.rounds_args(locals()),
                base_margin=base_margin, eval_base_margin=eval_base_margin,
                family=_common.family(tree_family, max_leaves))
