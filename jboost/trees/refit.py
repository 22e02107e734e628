"""Exact per-leaf refits where a Newton step is a poor leaf value (ESL Algorithm 10.3, 2(c)).

A leaf's value is ``gamma_j = argmin_gamma sum_{i in leaf j} w_i L(y_i, f_i + gamma)``, the
per-leaf line search of ESL Algorithm 10.3 step 2(c) (Friedman 2001, eq. 18). Closed forms for
the built-in losses of the residual: the weighted quantile of the residuals (absolute error,
quantile loss) and Friedman's one-step Huber estimate; for any other loss two searches on the
user's loss by autodiff:

* :func:`exact_leaf_values` (``Loss.leaf_refit="exact"``, and the default of a custom loss whose
  curvature is degenerate, ``Loss.hessian="auto"``): the first minimiser of the leaf's loss
  along a descent ray, by bracketing (doubling) and bisection on the leaf's summed directional
  (sub)gradient. It needs no curvature at all, so it is exact where the hessian is zero almost
  everywhere (pinball, absolute error, hinge, epsilon-insensitive: it finds the same kink as the
  closed forms, the weighted quantile for a hand-written pinball loss) and safe where it is
  negative (Cauchy, Tukey's biweight: bisection keeps ``phi'(lo) < 0 <= phi'(hi)``, so it stops
  at a local minimum, never a maximum, and a final check keeps the shrunk step from raising the
  leaf's loss);
* :func:`line_search_leaf_values` (``"line_search"``): damped Newton iterations, for smooth
  losses whose curvature is positive.

All functions take fixed-shape arrays: rows are grouped by leaf with one ``lax.sort`` over
``(leaf, residual)``; within-leaf cumulative weights come from a segmented associative scan
(exact per leaf, no global float cumsum whose rounding would leak between leaves); the searches
are ``lax.while_loop``s over all leaves at once that stop when every leaf has converged (under
``jax.vmap`` each model's leaves keep their own result).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax import lax

from jboost.losses import derivatives
from jboost.losses import loss as loss_lib


def _segmented_cumsum(values, starts):
    """Inclusive cumulative sum that restarts where ``starts`` is True."""

    def combine(a, b):
        va, sa = a
        vb, sb = b
        return jnp.where(sb, vb, va + vb), sa | sb

    out, _ = lax.associative_scan(combine, (values, starts))
    return out


def segment_weighted_quantile(values, weights, segment_ids, num_segments: int, q, default):
    """Weighted ``q``-quantile of ``values`` within each segment.

    The quantile is the smallest value whose within-segment cumulative weight reaches
    ``q * (segment weight)``. Segments with no positive weight get ``default[segment]``.

    Args:
      values, weights: ``(n,)``; segment_ids: ``(n,)`` int32 in ``[0, num_segments)``.
      q: traced level in ``[0, 1]``.
      default: ``(num_segments,)``.
    """
    n = values.shape[0]
    seg, val, w = lax.sort((segment_ids.astype(jnp.int32), values, weights), num_keys=2)
    starts = jnp.concatenate([jnp.ones((1,), bool), seg[1:] != seg[:-1]])
    cw = _segmented_cumsum(w, starts)
    total = jax.ops.segment_sum(w, seg, num_segments=num_segments)
    hit = (cw >= q * total[seg]) & (w > 0)
    first = jax.ops.segment_min(jnp.where(hit, jnp.arange(n), n), seg, num_segments=num_segments)
    found = (first < n) & (total > 0)
    return jnp.where(found, val[jnp.clip(first, 0, n - 1)], default)


def quantile_leaf_values(y, raw, w, leaf, n_leaves: int, q, default):
    """Leaf values ``(L, 1)``: weighted q-quantile of residuals ``y - f`` per leaf (LAD: q=0.5)."""
    r = y - raw[:, 0]
    return segment_weighted_quantile(r, w, leaf, n_leaves, q, default[:, 0])[:, None]


def huber_leaf_values(y, raw, w, leaf, n_leaves: int, delta, default):
    """ESL Algorithm 10.3 step 2(c) for Huber loss (Friedman 2001, eq. 24)::

        gamma_j = median_j(r) + mean_j( sign(r - median_j) * min(delta, |r - median_j|) )
    """
    r = y - raw[:, 0]
    med = segment_weighted_quantile(r, w, leaf, n_leaves, 0.5, default[:, 0])
    dev = r - med[leaf]
    clipped = jnp.sign(dev) * jnp.minimum(delta, jnp.abs(dev))
    num = jax.ops.segment_sum(w * clipped, leaf, num_segments=n_leaves)
    den = jax.ops.segment_sum(w, leaf, num_segments=n_leaves)
    out = med + jnp.where(den > 0, num / jnp.where(den > 0, den, 1.0), 0.0)
    return jnp.where(den > 0, out, default[:, 0])[:, None]


def line_search_leaf_values(loss: loss_lib.Loss, y, raw, w, leaf, n_leaves: int, init,
                            n_steps: int = 8, n_halvings: int = 12, max_step: float = 4.0,
                            axis_name=None):
    """``gamma_j = argmin_gamma sum_{i in leaf j} w_i L(y_i, f_i + gamma)`` (ESL Alg. 10.3, 2(c)).

    Damped Newton iterations on the true loss, vectorised over all leaves: each iteration takes
    the diagonal Newton step ``-G/H`` of every leaf and then the longest of the steps
    ``2^-k (-G/H)``, ``k = 0..n_halvings-1``, that lowers that leaf's loss (backtracking), so the
    leaf loss never increases even where the hessian is nearly zero (a saturated logistic
    leaf). Each step is also clipped to ``max_step`` in raw-score units (a trust region): where
    the minimiser is at infinity (a leaf whose rows are all of one class under a logistic loss),
    ``gamma`` moves at most ``n_steps * max_step`` from ``init`` instead of diverging. Starts,
    per leaf, from the better of ``init`` (``(L, K)``, e.g. the Newton step) and 0 (the leaf
    unchanged): where ``init`` raises the leaf's loss (a Newton step far beyond the minimiser, a
    natural-gradient step from a Monte-Carlo Fisher information that missed the rare values, a
    NaN), the iterations start from 0, so the result never raises the leaf's loss above its
    value at 0. Leaves without hessian mass keep their start.
    """
    scales = 2.0 ** -jnp.arange(n_halvings, dtype=jnp.float32)
    auto = loss if loss.hessian != "unit" else loss.replace(hessian="autodiff")

    def leaf_losses(gamma):
        return _leaf_sums(w * loss_lib.per_sample_losses(auto, y, raw + gamma[leaf]), leaf, n_leaves,
                          axis_name)

    def body(_, gamma):
        g, h = derivatives.grad_hess(auto, y, raw + gamma[leaf])
        G = jax.ops.segment_sum(w[:, None] * g, leaf, num_segments=n_leaves)
        H = jax.ops.segment_sum(w[:, None] * h, leaf, num_segments=n_leaves)
        if axis_name is not None:
            G, H = lax.psum((G, H), axis_name)
        ok = H > 0
        step = jnp.clip(jnp.where(ok, -G / jnp.where(ok, H, 1.0), 0.0), -max_step, max_step)
        current = leaf_losses(gamma)
        trial = jax.vmap(lambda s: leaf_losses(gamma + s * step))(scales)  # (n_halvings, L)
        better = trial < current[None, :]
        first = jnp.argmax(better, axis=0)  # the longest step that lowers the loss
        scale = jnp.where(jnp.any(better, axis=0), scales[first], 0.0)
        new = gamma + scale[:, None] * step
        return jnp.where(jnp.isfinite(new), new, gamma)

    # The better start per leaf: ``init`` unless 0 has a lower loss (or ``init``'s is not finite).
    at_init = leaf_losses(init)
    worse = ~(at_init <= leaf_losses(jnp.zeros_like(init)))
    start = jnp.where(worse[:, None], 0.0, init)
    return lax.fori_loop(0, n_steps, body, start)


# The exact leaf search (exact_leaf_values): the ray is probed at t = 1, 2, 4, ... first-order
# steps (at most 2^39 of them), the bracket then halved until it is 2^-22 of t wide (at most 48
# times), and a shrunk step that would raise a leaf's loss is halved (at most 8 times, then 0).
MAX_DOUBLINGS = 40
MAX_BISECTIONS = 48
MAX_HALVINGS = 8
_BISECTION_RTOL = 2.0 ** -22
# A leaf's slope counts as 0 within this fraction of the sum of its rows' |terms|, and a shrunk
# step as raising a leaf's loss when it adds more than this fraction of the sum of the leaf's
# |loss|: float32 sums round at about this level, so a flat stretch of a piecewise-linear loss
# (weights balancing exactly) is flat whatever order the rows were added in (one device or
# several, a vmapped sweep or a separate fit).
_RISE_RTOL = 2.0 ** -20

# Tasks whose raw score is a margin of the scale the loss fixes (safeguarded first-order leaves).
CLASSIFICATION = ("binary", "multiclass")


def _leaf_sums(values, leaf, n_leaves: int, axis_name=None):
    out = jax.ops.segment_sum(values, leaf, num_segments=n_leaves)
    return out if axis_name is None else lax.psum(out, axis_name)


def _row_fns(loss: loss_lib.Loss):
    """Per-row losses and gradients ``(y (n,), raw (n, K)) -> (n,), (n, K)``."""
    f = loss_lib.vector_fn(loss)
    loss_rows = jax.vmap(f, in_axes=(0, 0, None))
    grad_rows = jax.vmap(jax.grad(f, argnums=1), in_axes=(0, 0, None))
    return (lambda y, raw: loss_rows(y, raw, loss.params),
            lambda y, raw: grad_rows(y, raw, loss.params))


def _safeguard(loss_rows, y, raw, w, leaf, n_leaves: int, d, t, scale, check, axis_name=None):
    """``t`` ``(L,)`` halved (at most ``MAX_HALVINGS`` times, then 0) where the shrunk step
    ``scale * t * d`` raises its leaf's weighted loss by more than float32 rounding of its sum;
    only the leaves in ``check`` are evaluated (a ``while_loop`` that ends when all pass)."""
    sums = lambda v: _leaf_sums(v, leaf, n_leaves, axis_name)
    base = loss_rows(y, raw)
    tol = _RISE_RTOL * sums(w * jnp.abs(base))
    d_rows = d[leaf]

    def halve(c):
        i, t, ok = c
        rise = sums(w * (loss_rows(y, raw + (scale * t)[leaf][:, None] * d_rows) - base))
        bad = ~(rise <= tol)  # a NaN loss counts as a rise
        last = i >= MAX_HALVINGS
        return i + 1, jnp.where(bad, jnp.where(last, 0.0, 0.5 * t), t), ~bad | last

    _, t, _ = lax.while_loop(lambda c: jnp.any(~c[2]), halve, (jnp.int32(0), t, ~check))
    return t


def _when(active, n_leaves: int, k: int, fn):
    """``fn()`` where the traced bool ``active`` holds, else ``(L, K)`` zeros (not computed)."""
    if active is True:
        return fn()
    return lax.cond(active, fn, lambda: jnp.zeros((n_leaves, k), jnp.float32))


def exact_leaf_values(loss: loss_lib.Loss, y, raw, w, leaf, n_leaves: int, direction=None,
                      learning_rate=None, active=True, axis_name=None):
    """Per-leaf minimisers of the user's loss, found by autodiff without its curvature.

    ESL Algorithm 10.3 step 2(c) (Friedman 2001, eq. 18) for any loss: each leaf ``j`` moves
    along a descent direction ``d_j`` ``(K,)`` to ``gamma_j = t_j d_j``, where ``t_j > 0`` is the
    first local minimiser of ``phi_j(t) = sum_{i in j} w_i L(y_i, f_i + t d_j)`` along the ray:

    1. ``d_j`` is ``direction[j]`` (e.g. the tree's leaf value) where it is a descent direction
       of the leaf (``phi_j'(0) < 0``), else the leaf's mean negative gradient ``-G_j / W_j``
       (the first-order, unit-curvature value), which always is one; a leaf with no weighted row
       or a zero gradient sum (already stationary) gets 0;
    2. bracketing: ``phi_j'`` (the leaf's summed directional (sub)gradient, by ``jax.grad``) at
       ``t = 1, 2, 4, ...`` until it is ``>= 0`` (at most ``2^(MAX_DOUBLINGS - 1)``: a leaf
       whose loss falls without end moves that far and no farther);
    3. bisection keeping ``phi_j'(lo) < 0 <= phi_j'(hi)`` until the bracket is ``2^-22`` of ``t``
       wide; ``t_j = hi`` (a slope within float32 rounding of its sum, ``2^-20`` of the sum of its
       terms' magnitudes, counts as 0). For a convex loss this is its minimiser (where the
       minimisers form an interval, the one nearest the current scores); for a convex
       piecewise-linear loss (pinball, absolute error, epsilon-insensitive) it is the kink the
       closed forms find, to float32 rounding: the weighted ``alpha``-quantile of the leaf's
       residuals for a pinball loss (:func:`quantile_leaf_values`). For a non-convex loss (Cauchy, Tukey's biweight)
       the sign change it converges to is a local minimum, never a maximum;
    4. a safeguard for non-convex losses: where the shrunk step ``learning_rate * t_j d_j`` would
       raise the leaf's loss (by more than float32 rounding of its sum), ``t_j`` is halved, at
       most ``MAX_HALVINGS`` times, then 0. So a round never raises the weighted training loss
       (a convex loss never needs it: ``phi(lr t) <= (1 - lr) phi(0) + lr phi(t)``).

    Unlike the Newton value, the result ignores ``l2`` (as the closed-form refits do: ``l2``
    shapes the tree only). It is equivariant in the labels' scale (fitting ``c y`` with a loss
    of ``(y - f) / c`` gives ``c`` times the leaves), which a unit-curvature step is not. Every
    step is a ``lax.while_loop`` over all leaves at once that ends when every leaf has
    converged; a sweep under ``jax.vmap`` gives each model its own result.

    Args:
      loss: a :class:`jboost.Loss` (only its function and parameters are used).
      y: ``(n,)`` labels; raw: ``(n, K)`` raw scores; w: ``(n,)`` weights; leaf: ``(n,)`` leaves.
      direction: ``(L, K)`` preferred directions (``None``: the first-order ones).
      learning_rate: the shrinkage the values will be multiplied by (traced; ``None``: 1), for
        the safeguard.
      active: traced bool: ``False`` returns zeros without searching (a round whose curvature
        allows Newton leaves, :func:`jboost.engine.algorithm.newton_round`).
      axis_name: rows sharded over this mesh axis: leaf sums are ``psum``-ed.

    Returns:
      ``(L, K)`` leaf values before shrinkage.
    """
    loss_rows, grad_rows = _row_fns(loss)
    sums = lambda v: _leaf_sums(v, leaf, n_leaves, axis_name)
    scale = jnp.float32(1.0) if learning_rate is None else jnp.asarray(learning_rate, jnp.float32)

    def search():
        G = sums(w[:, None] * grad_rows(y, raw))              # (L, K)
        W = sums(w)
        first = -G / jnp.where(W > 0, W, 1.0)[:, None]
        d = first
        if direction is not None:
            along = jnp.sum(G * direction, axis=-1) < 0
            d = jnp.where(along[:, None], direction, first)
        # `active` again: under jax.vmap the cond runs both branches, and an inactive model's
        # loops then stop at once.
        go = (W > 0) & (jnp.sum(G * d, axis=-1) < 0) & jnp.all(jnp.isfinite(d), axis=-1) & active
        d = jnp.where(go[:, None], d, 0.0)
        d_rows = d[leaf]

        def rising(t):  # phi_j'(t) >= 0 (to float32 rounding of its sum) for every leaf
            g = grad_rows(y, raw + t[leaf][:, None] * d_rows)
            terms = w * jnp.sum(g * d_rows, axis=-1)
            slope, size = sums(jnp.stack([terms, jnp.abs(terms)], axis=-1)).T
            return ~(slope < -_RISE_RTOL * size)  # a NaN slope counts as rising

        def bracket(c):
            i, lo, hi, found = c
            t = jnp.full((n_leaves,), 2.0, jnp.float32) ** i.astype(jnp.float32)
            now = ~found & rising(t)  # a NaN slope stops the ray there too
            return i + 1, jnp.where(~found & ~now, t, lo), jnp.where(now, t, hi), found | now

        zeros = jnp.zeros((n_leaves,), jnp.float32)
        _, lo, hi, found = lax.while_loop(lambda c: (c[0] < MAX_DOUBLINGS) & jnp.any(~c[3]),
                                          bracket, (jnp.int32(0), zeros, zeros, ~go))
        hi = jnp.where(found, hi, lo)  # never bracketed: the farthest probe

        def bisect(c):
            i, lo, hi = c
            mid = 0.5 * (lo + hi)
            up = rising(mid)
            return i + 1, jnp.where(up, lo, mid), jnp.where(up, mid, hi)

        _, _, t = lax.while_loop(
            lambda c: (c[0] < MAX_BISECTIONS) & jnp.any(c[2] - c[1] > _BISECTION_RTOL * c[2]),
            bisect, (jnp.int32(0), lo, hi))
        t = _safeguard(loss_rows, y, raw, w, leaf, n_leaves, d, t, scale, go, axis_name)
        values = t[:, None] * d
        return jnp.where(jnp.isfinite(values), values, 0.0)

    return _when(active, n_leaves, raw.shape[-1], search)


def safeguarded_leaf_values(loss: loss_lib.Loss, y, raw, w, leaf, n_leaves: int, values,
                            learning_rate=None, active=True, axis_name=None):
    """``values`` ``(L, K)`` (e.g. first-order leaves), each leaf's halved (at most
    ``MAX_HALVINGS`` times, then 0) while its shrunk step ``learning_rate * values[j]`` would
    raise the leaf's weighted loss by more than float32 rounding: step 4 of
    :func:`exact_leaf_values` alone. ``active=False`` (traced) gives zeros without evaluating."""
    loss_rows, _ = _row_fns(loss)
    scale = jnp.float32(1.0) if learning_rate is None else jnp.asarray(learning_rate, jnp.float32)

    def guard():
        ones = jnp.ones((n_leaves,), jnp.float32)
        t = _safeguard(loss_rows, y, raw, w, leaf, n_leaves, values, ones, scale,
                       jnp.ones((n_leaves,), bool) & active, axis_name)
        return t[:, None] * values

    return _when(active, n_leaves, raw.shape[-1], guard)


def degenerate_leaf_values(loss: loss_lib.Loss, y, raw, w, leaf, n_leaves: int, values,
                           learning_rate=None, active=True, axis_name=None):
    """The leaves of a round whose curvature is degenerate (``Loss.hessian="auto"``,
    :func:`jboost.losses.derivatives.first_order_curvature`), from the tree's unit-curvature values
    ``values`` ``(L, K)``:

    * regression and count losses, whose raw score is in the labels' units: the exact per-leaf
      minimisers (:func:`exact_leaf_values`), scale-equivariant, searched along ``values``;
    * classification losses (``task`` ``"binary"`` or ``"multiclass"``), whose raw score is a
      margin of the scale the loss fixes (the hinge's margin 1): ``values`` themselves, the
      first-order step on the unit curvature of the rows with a gradient (XGBoost's
      ``binary:hinge``), safeguarded (:func:`safeguarded_leaf_values`). The exact minimiser of
      such a leaf sits where its rows reach the flat part of the loss (the hinge's margin 1);
      shrunk steps approach that kink geometrically and never cross it, so those rows keep their
      full gradient and the trees keep chasing them (``benchmarks/custom_losses.py``).
    """
    fn = safeguarded_leaf_values if loss.task in CLASSIFICATION else exact_leaf_values
    return fn(loss, y, raw, w, leaf, n_leaves, values, learning_rate=learning_rate, active=active,
              axis_name=axis_name)


def refit_leaf_values(loss: loss_lib.Loss, y, raw, w, leaf, n_leaves: int, newton_values,
                      axis_name=None, learning_rate=None):
    """Dispatch on ``loss.leaf_refit``; returns ``(L, K)`` leaf values (before shrinkage).

    The quantile and Huber refits give every leaf with weighted rows its exact value and an
    empty leaf 0; the line search starts from the Newton values (which fall back to the
    parent's value), or from 0 where they raise the leaf's loss, and keeps its start where a
    leaf has no hessian mass; the exact search
    (:func:`exact_leaf_values`, whose safeguard reads ``learning_rate``) searches along the
    Newton values where they descend and gives an empty leaf 0.

    With rows sharded over ``axis_name``, the quantile refits gather the rows of all devices
    (every device then computes the same values); the line search sums over devices.
    """
    kind = loss.leaf_refit
    if kind is None:
        return newton_values
    if kind == "line_search":
        return line_search_leaf_values(loss, y, raw, w, leaf, n_leaves, newton_values,
                                       axis_name=axis_name)
    if kind == "exact":
        return exact_leaf_values(loss, y, raw, w, leaf, n_leaves, newton_values,
                                 learning_rate=learning_rate, axis_name=axis_name)
    if axis_name is not None:
        y, raw, w, leaf = (lax.all_gather(a, axis_name, tiled=True) for a in (y, raw, w, leaf))
    # A leaf no weighted training row reaches gets 0 (the tree leaves such rows unchanged).
    empty = jnp.zeros_like(newton_values)
    if kind == "quantile":
        q = loss.params.get("alpha", jnp.float32(0.5))
        return quantile_leaf_values(y, raw, w, leaf, n_leaves, q, empty)
    if kind == "huber":
        return huber_leaf_values(y, raw, w, leaf, n_leaves, loss.params["delta"], empty)
    raise ValueError(f"unknown leaf_refit={kind!r}.")
