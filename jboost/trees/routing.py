"""The one routing rule of every tree family: which side of a split rule a row goes to, and the
children's sums a rule gives (read off cumulative histograms).

On bins ``bin > t``, on floats ``x > borders[f, t]``: the same side by the binning rule, floats
compared as :func:`jboost.data.binning.clamp_subnormals_jax` gives them (a subnormal as the smallest
normal number of its sign). The C++ kernels repeat the rule; see docs/trees.md ("Routing")."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from jboost.data import binning


def goes_right(value, threshold, missing_right, is_missing) -> jax.Array:
    """Whether each row goes right: missing and ``missing_right``, or not missing and ``value >
    threshold`` (bins or floats, broadcast)."""
    return jnp.where(is_missing, missing_right, value > threshold)


def bin_goes_right(bins, threshold, missing_right, n_bins: int) -> jax.Array:
    """:func:`goes_right` on bins of any integer dtype (``n_bins - 1``: missing)."""
    return goes_right(bins.astype(jnp.int32), threshold, missing_right,
                      bins == binning.missing_bin(n_bins))


def float_goes_right(x, border, missing_right) -> jax.Array:
    """:func:`goes_right` on raw floats (NaN: missing), values and borders as
    :func:`jboost.data.binning.clamp_subnormals_jax` gives them."""
    return goes_right(binning.clamp_subnormals_jax(x), binning.clamp_subnormals_jax(border),
                      missing_right, jnp.isnan(x))


def children_sums(cum, thresholds, missing_right) -> jax.Array:
    """``(2L, C)`` the left then right children's sums of ``L`` nodes, read off each node's ``(L, B,
    C)`` cumulative histogram of its rule's feature (a null split: exactly zero right)."""
    n_nodes, n_bins = cum.shape[0], cum.shape[1]
    total = cum[:, n_bins - 1]
    missing = total - cum[:, n_bins - 2]
    thresholds = jnp.broadcast_to(jnp.asarray(thresholds), (n_nodes,))
    at_t = jnp.take_along_axis(cum, thresholds[:, None, None], axis=1)[:, 0]
    missing_right = jnp.broadcast_to(jnp.asarray(missing_right), (n_nodes,))
    right = cum[:, n_bins - 2] - at_t + jnp.where(missing_right[:, None], missing, 0.0)
    return jnp.concatenate([total - right, right], axis=0)


def rows_go_right(X_binned, node, features, thresholds, missing_right, n_bins: int) -> jax.Array:
    """``(n,)`` bool: :func:`bin_goes_right` of every row of ``X_binned (F, n)`` at the rule of its
    own node ``node[i]``."""
    rows = jnp.arange(X_binned.shape[1], dtype=jnp.int32)
    return bin_goes_right(X_binned[features[node], rows], thresholds[node], missing_right[node], n_bins)
