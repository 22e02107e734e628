"""Exact per-leaf refits where a Newton step is a poor leaf value (ESL Algorithm 10.3, 2(c)).

All functions take fixed-shape arrays: rows are grouped by leaf with one ``lax.sort`` over
``(leaf, residual)``; within-leaf cumulative weights come from a segmented associative scan
(exact per leaf, no global float cumsum whose rounding would leak between leaves).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax import lax

from jboost import derivatives
from jboost import losses as losses_lib


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


def line_search_leaf_values(loss: losses_lib.Loss, y, raw, w, leaf, n_leaves: int, init,
                            n_steps: int = 8, n_halvings: int = 12, max_step: float = 4.0,
                            axis_name=None):
    """``gamma_j = argmin_gamma sum_{i in leaf j} w_i L(y_i, f_i + gamma)`` (ESL Alg. 10.3, 2(c)).

    Damped Newton iterations on the true loss, vectorised over all leaves: each iteration takes
    the diagonal Newton step ``-G/H`` of every leaf and then the longest of the steps
    ``2^-k (-G/H)``, ``k = 0..n_halvings-1``, that lowers that leaf's loss (backtracking), so the
    leaf loss never increases even where the hessian is nearly zero (a saturated logistic
    leaf). Each step is also clipped to ``max_step`` in raw-score units (a trust region): where
    the minimiser is at infinity (a leaf whose rows are all of one class under a logistic loss),
    ``gamma`` moves at most ``n_steps * max_step`` from ``init`` instead of diverging. Starts
    from ``init`` (``(L, K)``, e.g. the Newton step); leaves without hessian mass keep it.
    """
    scales = 2.0 ** -jnp.arange(n_halvings, dtype=jnp.float32)
    auto = loss if loss.hessian != "unit" else loss.replace(hessian="autodiff")

    def leaf_losses(gamma):
        per_row = w * losses_lib.per_sample_losses(auto, y, raw + gamma[leaf])
        out = jax.ops.segment_sum(per_row, leaf, num_segments=n_leaves)
        return out if axis_name is None else lax.psum(out, axis_name)

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

    return lax.fori_loop(0, n_steps, body, init)


def refit_leaf_values(loss: losses_lib.Loss, y, raw, w, leaf, n_leaves: int, newton_values,
                      axis_name=None):
    """Dispatch on ``loss.leaf_refit``; returns ``(L, K)`` leaf values (before shrinkage).

    The quantile and Huber refits give every leaf with weighted rows its exact value and an
    empty leaf 0; the line search starts from the Newton values (which fall back to the
    parent's value) and keeps them where a leaf has no hessian mass.

    With rows sharded over ``axis_name``, the quantile refits gather the rows of all devices
    (every device then computes the same values); the line search sums over devices.
    """
    kind = loss.leaf_refit
    if kind is None:
        return newton_values
    if kind == "line_search":
        return line_search_leaf_values(loss, y, raw, w, leaf, n_leaves, newton_values,
                                       axis_name=axis_name)
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
