"""NGBoost's method on the scaffold (Duan et al. 2020): the per-round line search algorithm
(:data:`LINE_SEARCH`) and :func:`fit`, ``jboost.fit`` with NGBoost's defaults (natural gradients,
per-output trees, 20-row leaves). See docs/algorithms.md and docs/distributions.md."""

from __future__ import annotations

from typing import Any, Mapping, Optional

import jax.numpy as jnp
from jax import lax

from jboost.engine import algorithm, boosting as boosting_lib
from jboost.fitting import boost
from jboost.losses import loss as loss_lib
from jboost.losses.distributions import base, families, nll_loss


# ngboost's NGBoost.line_search: scales 1, 2, 4, ... up to 512, then halved; a step whose mean
# row norm is below LINE_SEARCH_TOL is taken as it is.
LINE_SEARCH_MAX_SCALE = 256.0
LINE_SEARCH_TOL = 1e-4
_LINE_SEARCH_HALVINGS = 64


def line_search_scale(loss: loss_lib.Loss, y, raw, step, w, axis_name=None):
    """NGBoost's scaling factor ``rho`` of a round's unshrunk ``step`` ``(n, K)`` (Duan et al.
    2020, Algorithm 1), as ``ngboost``'s ``NGBoost.line_search`` finds it (docs/algorithms.md);
    ``axis_name``: the mesh axis the rows are sharded over (the sums are ``psum``-ed)."""
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
    """A round of :func:`jboost.engine.algorithm.newton_round` whose whole step is scaled by
    NGBoost's line search before the shrinkage; ``info["scale"]`` records ``rho`` per round."""
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


#: Least rows per leaf of :func:`fit`'s natural-gradient trees (``min_child_weight`` on unit
#: curvature): LightGBM's default ``min_data_in_leaf``.
MIN_LEAF_ROWS = 20.0


def fit(X, y, dist: base.Distribution = families.Normal, *, natural_gradient: bool = True,
        line_search: bool = False, n_mc_samples: int = 100,
        dist_params: Optional[Mapping[str, Any]] = None, per_output_trees: bool = True,
        min_child_weight: Any = None, eval_set=None, **kwargs):
    """Fit a distributional model (NGBoost, Duan et al. 2020): :func:`jboost.fit` with ``dist``'s
    loss and the defaults of NGBoost's layout (docs/algorithms.md); a :class:`jboost.Booster`.

    Args:
      X, y: as :func:`jboost.fit`; ``y`` in ``dist``'s support (checked first).
      dist: a :class:`jboost.losses.distributions.base.Distribution` (default ``Normal``).
      natural_gradient, line_search, n_mc_samples: :func:`jboost.distributions.loss`'s.
        ``line_search`` (per-leaf Newton refits) applies to vector-leaf trees: pass
        ``per_output_trees=False`` with it.
      dist_params: the distribution's traced parameters (``{"df": 5.0}`` for ``StudentT``).
      per_output_trees: one tree per raw parameter per round (default ``True``).
      min_child_weight: ``None``: :data:`MIN_LEAF_ROWS` with natural gradients, else 1.
      eval_set: :func:`jboost.fit`'s.
      **kwargs: :func:`jboost.fit`'s.
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
