"""The one routing rule of every tree family: which side of a split rule a row goes to, and the children's sums a rule gives (read off cumulative histograms).

A split rule is ``(feature, threshold, missing_right)``. On bins (fitting) ``threshold`` is a
bin index and the missing bin is ``n_bins - 1`` (:func:`jboost.data.binning.missing_bin`); on
raw floats (prediction) it is the border ``borders[feature, threshold]`` and NaN is missing. By
the binning rule (``bin(x) > t`` iff ``x > borders[f, t]`` for non-missing ``x``) both give the
same side, so one function serves fitting and prediction of every family.

The compiled kernels implement the same rule in C++ (the Python code keeps none of its own):
``GoesRight`` in ``jboost/_native/depthwise.cc`` (the depth-wise whole-tree kernel, on bins;
its leaf sums are summed over the routed rows), and ``PredictRows`` and ``PredictTableRows`` in
``jboost/_native/predict.cc`` (prediction of oblivious trees and node tables on floats:
``missing_right ? !(x <= border) : x > border``, NaN comparing false). The oblivious level
kernels (``level.cc``, ``rows.cc``) only build histograms and gains; their rows are routed here.
The NumPy-only reader of model files (``jboost/io/reader.py``, which runs without jax) repeats it
in NumPy; fine-tuning's hard splits and SHAP's leaf paths call :func:`float_goes_right`.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from jboost.data import binning


def goes_right(value, threshold, missing_right, is_missing) -> jax.Array:
    """Whether each row goes to the right child of its split rule.

    A row goes right iff it is missing and ``missing_right``, or it is not missing and
    ``value > threshold``; otherwise it goes left. A null split (threshold ``n_bins - 2``,
    missing left) sends every row left.

    Args:
      value: the row's value of the rule's feature: a bin (any integer dtype) or a raw float,
        in the units of ``threshold``.
      threshold: the rule's bin threshold or float border (broadcast against ``value``).
      missing_right: bool, where missing values go (broadcast against ``value``).
      is_missing: bool, which values are missing (the missing bin, or NaN).

    Returns:
      bool, the broadcast shape: ``True`` where the row goes right.
    """
    return jnp.where(is_missing, missing_right, value > threshold)


def bin_goes_right(bins, threshold, missing_right, n_bins: int) -> jax.Array:
    """:func:`goes_right` on bins: ``bins`` of the rule's feature (any integer dtype), read as
    int32; the missing bin ``n_bins - 1`` goes to ``missing_right``'s side, any other bin right
    iff it is above ``threshold``."""
    return goes_right(bins.astype(jnp.int32), threshold, missing_right,
                      bins == binning.missing_bin(n_bins))


def float_goes_right(x, border, missing_right) -> jax.Array:
    """:func:`goes_right` on raw floats: NaN goes to ``missing_right``'s side, any other value
    right iff it is above ``border``."""
    return goes_right(x, border, missing_right, jnp.isnan(x))


def children_sums(cum, thresholds, missing_right) -> jax.Array:
    """``(2L, C)`` the sums of the two children of ``L`` nodes split by :func:`goes_right`,
    read off each node's ``(L, B, C)`` cumulative histogram of its rule's feature (bin ``b``:
    the sum over bins ``<= b``; the missing bin last): node ``j``'s left child is row ``j``, its
    right child row ``j + L``.

    The right child holds the bins ``threshold < b < B - 1`` and, if ``missing_right``, the
    missing bin; the left child the rest (the node's total minus the right). The right side is
    computed first so a null split (threshold ``B - 2``, missing left) gives exactly zero.

    Args:
      cum: ``(L, B, C)`` cumulative histograms.
      thresholds: ``(L,)`` int32 bin thresholds, or a scalar shared by every node.
      missing_right: ``(L,)`` bool, or a scalar shared by every node.

    Returns:
      ``(2L, C)`` float32: the left children, then the right ones.
    """
    n_nodes, n_bins = cum.shape[0], cum.shape[1]
    total = cum[:, n_bins - 1]
    missing = total - cum[:, n_bins - 2]
    thresholds = jnp.broadcast_to(jnp.asarray(thresholds), (n_nodes,))
    at_t = jnp.take_along_axis(cum, thresholds[:, None, None], axis=1)[:, 0]
    missing_right = jnp.broadcast_to(jnp.asarray(missing_right), (n_nodes,))
    right = cum[:, n_bins - 2] - at_t + jnp.where(missing_right[:, None], missing, 0.0)
    return jnp.concatenate([total - right, right], axis=0)


def rows_go_right(X_binned, node, features, thresholds, missing_right, n_bins: int) -> jax.Array:
    """``(n,)`` bool: :func:`bin_goes_right` of every row of feature-major bins ``X_binned (F, n)``
    at its own node's rule: row ``i`` reads node ``node[i]``'s ``(features, thresholds,
    missing_right)`` (each indexed by ``node``)."""
    rows = jnp.arange(X_binned.shape[1], dtype=jnp.int32)
    return bin_goes_right(X_binned[features[node], rows], thresholds[node], missing_right[node], n_bins)
