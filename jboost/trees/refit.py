"""Exact per-leaf refits where a Newton step is a poor leaf value (ESL Algorithm 10.3, 2(c)).

Closed forms for the built-in losses of the residual (weighted quantiles, Friedman's Huber step) and
two searches on any loss by autodiff: :func:`exact_leaf_values` (bracketing and bisection, no
curvature) and :func:`line_search_leaf_values` (damped Newton). See docs/trees.md ("Leaf
refits")."""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax import lax

from jboost.losses import derivatives, loss as loss_lib


def _segmented_cumsum(values, starts):
    """Inclusive cumulative sum that restarts where ``starts`` is True."""

    def combine(a, b):
        va, sa = a
        vb, sb = b
        return jnp.where(sb, vb, va + vb), sa | sb

    out, _ = lax.associative_scan(combine, (values, starts))
    return out


def segment_weighted_quantile(values, weights, segment_ids, num_segments: int, q, default):
    """Weighted ``q``-quantile of ``values`` within each segment (``default[segment]`` for a segment
    without positive weight)."""
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
    """Friedman's one-step Huber leaf values (2001, eq. 24): the leaf's median residual plus the
    mean clipped deviation from it."""
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
    """``gamma_j = argmin_gamma sum_{i in leaf j} w_i L(y_i, f_i + gamma)`` by damped, clipped
    Newton steps from the better of ``init`` and 0 (docs/trees.md, "Leaf refits")."""
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


# The exact leaf search's bounds on doublings, bisections and safeguard halvings.
MAX_DOUBLINGS = 40
MAX_BISECTIONS = 48
MAX_HALVINGS = 8
_BISECTION_RTOL = 2.0 ** -22
# A leaf's slope counts as 0 (a loss as unchanged) within this fraction of the sum of its rows'
# magnitudes: float32 rounding, whatever order the rows were added in.
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


def _safeguard(loss_rows, y, raw, w, leaf, n_leaves: int, d, t, learning_rate, check, axis_name=None):
    """``t`` ``(L,)`` halved (at most ``MAX_HALVINGS`` times, then 0) where the shrunk step
    ``learning_rate * t * d`` raises its leaf's loss by more than float32 rounding; only leaves in
    ``check`` are tried."""
    sums = lambda v: _leaf_sums(v, leaf, n_leaves, axis_name)
    scale = jnp.float32(1.0) if learning_rate is None else jnp.asarray(learning_rate, jnp.float32)
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
    """Per-leaf minimisers of the user's loss by autodiff, without its curvature (ESL Algorithm 10.3
    step 2(c)): bracketing and bisection along a descent ray, then a safeguard for non-convex losses
    (docs/trees.md, "Leaf refits").

    Args:
      direction: ``(L, K)`` preferred directions (``None``: the first-order ones).
      learning_rate: the shrinkage applied later (traced; ``None``: 1), for the safeguard.
      active: traced bool: ``False`` returns zeros without searching.
      axis_name: rows sharded over this mesh axis: leaf sums are ``psum``-ed.

    Returns:
      ``(L, K)`` leaf values before shrinkage.
    """
    loss_rows, grad_rows = _row_fns(loss)
    sums = lambda v: _leaf_sums(v, leaf, n_leaves, axis_name)

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
        t = _safeguard(loss_rows, y, raw, w, leaf, n_leaves, d, t, learning_rate, go, axis_name)
        values = t[:, None] * d
        return jnp.where(jnp.isfinite(values), values, 0.0)

    return _when(active, n_leaves, raw.shape[-1], search)


def safeguarded_leaf_values(loss: loss_lib.Loss, y, raw, w, leaf, n_leaves: int, values,
                            learning_rate=None, active=True, axis_name=None):
    """``values`` ``(L, K)`` with :func:`exact_leaf_values`' safeguard alone (step 4): each leaf's
    halved while its shrunk step would raise its loss; ``active=False`` gives zeros."""
    loss_rows, _ = _row_fns(loss)

    def guard():
        ones = jnp.ones((n_leaves,), jnp.float32)
        t = _safeguard(loss_rows, y, raw, w, leaf, n_leaves, values, ones, learning_rate,
                       jnp.ones((n_leaves,), bool) & active, axis_name)
        return t[:, None] * values

    return _when(active, n_leaves, raw.shape[-1], guard)


def degenerate_leaf_values(loss: loss_lib.Loss, y, raw, w, leaf, n_leaves: int, values,
                           learning_rate=None, active=True, axis_name=None):
    """The leaves of a round of degenerate curvature from the tree's unit-curvature ``values``
    (docs/trees.md, "Leaf refits")."""
    fn = safeguarded_leaf_values if loss.task in CLASSIFICATION else exact_leaf_values
    return fn(loss, y, raw, w, leaf, n_leaves, values, learning_rate=learning_rate, active=active,
              axis_name=axis_name)


def refit_leaf_values(loss: loss_lib.Loss, y, raw, w, leaf, n_leaves: int, newton_values,
                      axis_name=None, learning_rate=None):
    """Dispatch on ``loss.leaf_refit``: ``(L, K)`` leaf values before shrinkage."""
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
