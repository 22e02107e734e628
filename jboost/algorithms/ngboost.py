"""NGBoost's method on the scaffold: the per-round line search algorithm (LINE_SEARCH) and fit(), jboost.fit with NGBoost's defaults (natural gradients, per-output trees, 20-row leaves)."""

from __future__ import annotations

from typing import Any, Mapping, Optional

import jax.numpy as jnp
from jax import lax

from jboost.engine import algorithm
from jboost.engine import boosting as boosting_lib
from jboost.fitting import boost
from jboost.losses import loss as loss_lib
from jboost.losses.distributions import base
from jboost.losses.distributions import families
from jboost.losses.distributions import nll_loss

# --------------------------------------------------------------------------------------------
# NGBoost's line search on the scale of a round (an algorithm of the boosting scaffold).
# --------------------------------------------------------------------------------------------

# ngboost's NGBoost.line_search: scales 1, 2, 4, ... up to 512, then halved; a step whose mean
# row norm is below LINE_SEARCH_TOL is taken as it is.
LINE_SEARCH_MAX_SCALE = 256.0
LINE_SEARCH_TOL = 1e-4
_LINE_SEARCH_HALVINGS = 64


def line_search_scale(loss: loss_lib.Loss, y, raw, step, w, axis_name=None):
    """NGBoost's scaling factor ``rho`` of a round (Duan et al. 2020, Algorithm 1: ``rho =
    argmin_rho sum_i S(theta_i + rho f(x_i), y_i)``), found as the ``ngboost`` package finds it
    (``NGBoost.line_search``): ``rho = 1, 2, 4, ...`` doubles while the weighted training loss
    at ``raw + rho step`` is finite and not above its value at ``raw`` (up to 512), then halves
    until it is finite and below it (or the step's weighted mean row norm ``rho |step_i|`` is
    below :data:`LINE_SEARCH_TOL`). So ``rho`` is a power of two at which the whole unshrunk
    step lowers the loss, up to twice its minimiser along the step; 0 if no halving (at most 64)
    finds one. Both loops are ``lax.while_loop``s (under ``jax.vmap`` each model its own).

    Args:
      y: ``(n,)``; raw, step: ``(n, K)`` (the round's trees' values before shrinkage); w: ``(n,)``.
      axis_name: rows sharded over this mesh axis: the sums are ``psum``-ed.
    """
    def sums(v):
        out = jnp.sum(v, axis=-1)
        return out if axis_name is None else lax.psum(out, axis_name)

    def total(rho):
        return sums(w * loss_lib.per_sample_losses(loss, y, raw + rho * step))

    start = total(jnp.float32(0.0))
    norm, weight = sums(jnp.stack([w * jnp.linalg.norm(step, axis=-1), w]))
    norm = norm / jnp.where(weight > 0, weight, 1.0)

    def up(c):
        rho, _ = c
        value = total(rho)
        stop = ~jnp.isfinite(value) | (value > start) | (rho > LINE_SEARCH_MAX_SCALE)
        return jnp.where(stop, rho, 2.0 * rho), stop

    rho, _ = lax.while_loop(lambda c: ~c[1], up, (jnp.float32(1.0), jnp.bool_(False)))

    def down(c):
        i, rho, _ = c
        value = total(rho)
        ok = (norm * rho < LINE_SEARCH_TOL) | (jnp.isfinite(value) & (value < start))
        return i + 1, jnp.where(ok, rho, 0.5 * rho), ok

    _, rho, ok = lax.while_loop(lambda c: ~c[2] & (c[0] < _LINE_SEARCH_HALVINGS), down,
                                (jnp.int32(0), rho, jnp.bool_(False)))
    return jnp.where(ok, rho, 0.0)


def line_search_round(r: algorithm.Round) -> algorithm.RoundResult:
    """A round of :func:`jboost.engine.algorithm.newton_round` (for a natural-gradient loss: trees fitted
    by least squares to ``F^{-1} g``) whose whole step is scaled by NGBoost's line search
    (:func:`line_search_scale`) before the shrinkage: ``learning_rate * rho * trees``, as
    ``ngboost`` updates its parameters. ``info["scale"]`` records ``rho`` per round."""
    unit = r._replace(learning_rate=jnp.ones_like(r.learning_rate))
    res = algorithm.newton_round(unit)
    step = boosting_lib.round_values(res.trees, res.leaves)
    rho = line_search_scale(r.loss, r.data.y, r.raw, step, r.data.w * r.sample,
                            r.config.axis_name)
    trees = res.trees._replace(leaf_values=res.trees.leaf_values * (r.learning_rate * rho))
    return algorithm.RoundResult(trees, res.leaves, info={"scale": rho})


#: NGBoost's per-round line search as an algorithm of the scaffold: ``jboost.fitting.settings.settings(...,
#: algorithm=LINE_SEARCH)`` and :func:`jboost.engine.boosting.boost` (module docstring: not a default).
LINE_SEARCH = algorithm.Algorithm(line_search_round)


# Least rows per leaf of fit()'s natural-gradient trees (min_child_weight on unit curvature):
# LightGBM's default min_data_in_leaf.
MIN_LEAF_ROWS = 20.0


def fit(X, y, dist: base.Distribution = families.Normal, *, natural_gradient: bool = True,
        line_search: bool = False, n_mc_samples: int = 100,
        dist_params: Optional[Mapping[str, Any]] = None, per_output_trees: bool = True,
        min_child_weight: Any = None, eval_set=None, **kwargs):
    """Fit a distributional model: :func:`jboost.fit` with ``dist``'s loss and the defaults of
    NGBoost's layout; returns a :class:`jboost.Booster` (read it with :func:`predict_params`,
    :func:`predict_interval`, :func:`nll`, :func:`crps`).

    The labels of ``y`` (and of ``eval_set``) are checked against ``dist``'s support first
    (:func:`check_labels`: counts must be non-negative integers, ``Gamma`` and ``LogNormal``
    labels positive). Then ``jboost.fit(X, y, loss(dist, natural_gradient, ...),
    per_output_trees=per_output_trees, min_child_weight=..., eval_set=eval_set, **kwargs)``:
    every other argument (``n_rounds``, ``learning_rate``, ``depth``, ``l2``, ``eval_set``,
    early stopping, ``init_model``, ...) is :func:`jboost.fit`'s, with its defaults.

    Defaults that differ from :func:`jboost.fit`'s, and why:

    * ``natural_gradient=True`` (NGBoost, Duan et al. 2020; module docstring): the trees are
      least-squares fits to ``F^{-1} g``, free of the labels' scale.
    * ``per_output_trees=True``: one tree per raw parameter per round (NGBoost's layout, ESL
      Algorithm 10.4), each with its own splits. A vector-leaf tree splits on the summed gain of
      all parameters, dominated by the location's (in the labels' units) where the labels
      spread widely.
    * ``min_child_weight=MIN_LEAF_ROWS`` (20) with natural gradients: their curvature is 1 per
      row, so it is the least number of rows in a leaf (LightGBM's default ``min_data_in_leaf``).
      Each tree of the scale estimates a variance from the residuals of its leaves' rows, which
      needs more rows than a mean: with 1 (:func:`jboost.fit`'s default) deep trees on small
      data sets leave a few rows per leaf and overfit the scale. Without
      natural gradients the curvature is on the labels' scale and the default is
      :func:`jboost.fit`'s (1).

    Args:
      X, y: as :func:`jboost.fit`; ``y`` in ``dist``'s support.
      dist: a :class:`Distribution` (default ``Normal``).
      natural_gradient, line_search, n_mc_samples: :func:`loss`'s. ``line_search`` (per-leaf
        Newton refits) applies to vector-leaf trees: pass ``per_output_trees=False`` with it.
      dist_params: the distribution's traced parameters (``{"df": 5.0}`` for ``StudentT``).
      per_output_trees, min_child_weight: as above (``None``: the default described).
      eval_set, **kwargs: :func:`jboost.fit`'s.
    """

    if not isinstance(dist, base.Distribution):
        raise TypeError(f"dist must be a jboost.distributions.Distribution (e.g. "
                        f"distributions.Normal); got {type(dist).__name__}.")
    if min_child_weight is None:
        min_child_weight = MIN_LEAF_ROWS if natural_gradient else 1.0
    fitted = nll_loss.loss(dist, natural_gradient, line_search=line_search, n_mc_samples=n_mc_samples,
                  **dict(dist_params or {}))
    return boost.fit(X, y, fitted, per_output_trees=per_output_trees,
                   min_child_weight=min_child_weight, eval_set=eval_set, **kwargs)
