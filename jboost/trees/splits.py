"""Split criteria (:class:`SplitCriterion`, :data:`NEWTON`), split gains from cumulative histograms
(JAX and the CPU kernel) and the best split of a level.

An oblivious level's gain sums the criterion's ``S(left) + S(right) - S(parent)`` over its leaves;
Newton's score is ``G^2 / (H + l2)`` (Chen & Guestrin 2016, eq. 7). See docs/trees.md ("Split
gains")."""

from __future__ import annotations

from typing import Callable, NamedTuple, Optional

import jax
import jax.numpy as jnp
import numpy as np

from jboost import _native
from jboost._native import newton
from jboost.trees import histograms


class Split(NamedTuple):
    """One split rule of an oblivious level and its gain (a null split: gain 0)."""

    feature: jax.Array        # int32 ()
    threshold: jax.Array      # int32 (): non-missing rows go right iff bin > threshold
    missing_right: jax.Array  # bool (): where rows in the missing bin go
    gain: jax.Array           # float32 (): the gain (0 for a null split)


def null_threshold(n_bins: int) -> int:
    """Threshold that sends every non-missing bin left (``bin > n_bins - 2`` never holds)."""
    return n_bins - 2


class SplitCriterion(NamedTuple):
    """How splits are scored and leaves valued: **the one place to write a new split criterion**.

    Attributes:
      score: ``score(G, H, l2) -> (..., K)``: the score of nodes of gradient and hessian sums ``G,
        H`` (each ``(..., K)``), pure JAX and elementwise; a split's gain is ``score(left) +
        score(right) - score(parent)`` summed over outputs and leaves.
      value: ``value(G, H, l2) -> (..., K)``: the leaf value of such a node (before shrinkage).
      name: for messages and ``repr``.
      kernel: set by :data:`NEWTON` only: the CPU kernel computes its gains fused with the
        histograms (other criteria get the kernel's histograms and their gains in JAX).

    A static setting (``jboost.fit(split_criterion=...)``): write it at module level so that
    repeated fits reuse the compiled program.
    """

    score: Callable
    value: Callable = newton.newton_value
    name: str = "custom"
    kernel: bool = False


#: The regularised Newton criterion (the default; fused in the CPU kernel).
NEWTON = SplitCriterion(score=newton.newton_score, value=newton.newton_value, name="newton", kernel=True)




def sum_outputs_16(x, keepdims: bool = False):
    """``x`` summed over its last axis in the depth-wise kernel's fixed order (16 running sums, then
    halved pairwise), bit for bit on every backend (docs/trees.md, "Split gains")."""
    k = x.shape[-1]
    if k == 1:
        out = 0.0 + x[..., 0]
    else:
        rows = -(-k // 16)
        x = jnp.pad(x, [(0, 0)] * (x.ndim - 1) + [(0, rows * 16 - k)])  # zeros change no sum
        x = x.reshape(x.shape[:-1] + (rows, 16))
        acc = 0.0 + x[..., 0, :]
        for r in range(1, rows):
            acc = acc + x[..., r, :]
        for w in (8, 4, 2, 1):
            acc = acc[..., :w] + acc[..., w:2 * w]
        out = acc[..., 0]
    return out[..., None] if keepdims else out


def split_gains(hist, l2, min_child_weight, criterion: SplitCriterion = NEWTON):
    """Gain of every candidate ``(feature, threshold, missing direction)``, ``(F, B-1, 2)``, from
    ``(F, L, B, 2K)`` histograms (gradients then hessians; bin ``B-1`` the missing bin)."""
    return split_gains_cumulative(histograms.prefix_sum(hist, axis=2), l2, min_child_weight,
                                  criterion=criterion)


def split_gains_cumulative(cum, l2, min_child_weight, missing: bool = True,
                           criterion: SplitCriterion = NEWTON, output_sum=None):
    """:func:`split_gains` from inclusive prefix sums over the ``B`` bins; ``missing=False``
    (static) computes direction 0 only (direction 1: ``-inf``); ``output_sum``: the sum over
    outputs."""
    out_sum = (lambda x: jnp.sum(x, axis=-1)) if output_sum is None else output_sum  # noqa: E731
    n_bins = cum.shape[2]
    k = cum.shape[-1] // 2
    present = cum[:, :, : n_bins - 1, :]                 # (F, L, B-1, 2K) left sums
    total = cum[:, :, n_bins - 1 :, :]                   # (F, L, 1, 2K)
    missing_sums = total - cum[:, :, n_bins - 2 : n_bins - 1, :] if n_bins > 1 else total

    def score(s):
        return out_sum(criterion.score(s[..., :k], s[..., k:], l2))

    parent = score(total)                                # (F, L, 1)

    def direction(left):
        right = total - left
        leaf_gain = score(left) + score(right) - parent  # (F, L, B-1)
        h_left = out_sum(left[..., k:])
        h_right = out_sum(right[..., k:])
        ok = (h_left >= min_child_weight) & (h_right >= min_child_weight)
        return jnp.sum(jnp.where(ok, leaf_gain, 0.0), axis=1)  # (F, B-1)

    # Direction 0: missing goes left; direction 1: missing goes right.
    if not missing:
        left_gains = direction(present + missing_sums)
        return jnp.stack([left_gains, jnp.full_like(left_gains, -jnp.inf)], axis=-1)
    return jnp.stack([direction(present + missing_sums), direction(present)], axis=-1)


def _scalar(x):
    return jnp.asarray(x, jnp.float32).reshape(())


def _native_level(X_binned, payload, leaf, parent, l2, min_child_weight, *, n_leaves: int,
                  n_bins: int, missing: bool, keep_hist: bool, n_threads: Optional[int] = None):
    n_features, c = X_binned.shape[-2], payload.shape[-1]
    _native.check_indexable(X_binned.shape[-1], n_leaves, n_bins, c)
    _native.load()
    out = (jax.ShapeDtypeStruct((n_features, n_bins - 1, 2), jnp.float32),
           jax.ShapeDtypeStruct((n_features, n_leaves, n_bins, c) if keep_hist else (1,), jnp.float32))
    call = jax.ffi.ffi_call(_native.LEVEL, out, vmap_method="expand_dims")
    gains, hist = call(X_binned, payload, leaf.astype(jnp.int32),
                       jnp.zeros((1,), jnp.float32) if parent is None else parent,
                       _scalar(l2), _scalar(min_child_weight),
                       n_threads=np.int64(n_threads or histograms.kernel_threads(None)), n_leaves=np.int64(n_leaves),
                       subtract=parent is not None, missing=missing, write_hist=keep_hist)
    return gains, hist if keep_hist else None


def level_gains(X_binned, payload, leaf, parent: Optional[jax.Array], *, n_leaves: int, n_bins: int,
                l2, min_child_weight, missing: bool = True, keep_hist: bool = False,
                criterion: SplitCriterion = NEWTON):
    """Split gains of one oblivious level: ``(gains (F, B - 1, 2), hist)``, one CPU kernel call for
    the Newton criterion; ``parent``: the last level's cumulative histograms, ``hist`` this level's
    (``keep_hist``)."""
    payload = payload.astype(jnp.float32)
    if not criterion.kernel:
        if parent is None:
            cum = histograms.prefix_sum(histograms.build_histogram(
                X_binned, payload, leaf, n_leaves=n_leaves, n_bins=n_bins), axis=2)
        else:
            cum, _ = histograms.level_histograms(X_binned, payload, leaf, parent, n_bins=n_bins)
        return split_gains_cumulative(cum, l2, min_child_weight, missing, criterion), cum if keep_hist else None

    def native():
        return _native_level(X_binned, payload, leaf, parent, l2, min_child_weight,
                             n_leaves=n_leaves, n_bins=n_bins, missing=missing, keep_hist=keep_hist)

    def xla():
        cum = histograms.xla_level_histograms(X_binned, payload, leaf, parent, n_leaves, n_bins)
        return split_gains_cumulative(cum, l2, min_child_weight, missing), cum if keep_hist else None

    if payload.shape[-1] % 2 or n_bins < 2:
        return xla()
    return histograms.dispatch(X_binned, n_bins, native, xla, n_leaves, payload.shape[-1])


def cumulative_split_gains(cum, l2, min_child_weight, missing: bool = True, axis_name=None,
                           criterion: SplitCriterion = NEWTON):
    """:func:`split_gains_cumulative`, by the CPU kernel when it is available and computes the
    criterion (used after the ``psum`` of sharded histograms)."""
    c = cum.shape[-1]

    def native():
        _native.load()
        out = jax.ShapeDtypeStruct((cum.shape[0], cum.shape[2] - 1, 2), jnp.float32)
        call = jax.ffi.ffi_call(_native.SPLIT_GAINS, out, vmap_method="expand_dims")
        return call(cum.astype(jnp.float32), _scalar(l2), _scalar(min_child_weight),
                    n_threads=np.int64(histograms.kernel_threads(axis_name)), missing=missing)

    xla = lambda: split_gains_cumulative(cum, l2, min_child_weight, missing, criterion)
    if c % 2 or cum.shape[2] < 2 or not criterion.kernel:
        return xla()
    return histograms.dispatch(None, cum.shape[2], native, xla)



def best_split(hist, *, l2, min_split_gain, min_child_weight, feature_mask=None,
               cumulative: bool = False, missing: bool = True,
               criterion: SplitCriterion = NEWTON) -> Split:
    """The admissible split of maximal gain for one oblivious level of ``(F, L, B, 2K)`` histograms
    (prefix sums if ``cumulative``), or a null split; ``feature_mask``: optional ``(F,)`` bool."""
    cum = hist if cumulative else histograms.prefix_sum(hist, axis=2)
    gains = split_gains_cumulative(cum, l2, min_child_weight, missing, criterion)
    return best_split_of_gains(gains, min_split_gain=min_split_gain, feature_mask=feature_mask)


def best_split_of_gains(gains, *, min_split_gain, feature_mask=None) -> Split:
    """:func:`best_split` from the ``(F, B - 1, 2)`` gains of :func:`split_gains_cumulative`: the
    first maximum in (feature, threshold, direction) order."""
    n_features, n_bins = gains.shape[0], gains.shape[1] + 1
    # Two stages (docs/trees.md, "Split gains"), the first maximum of one flat argmax; NaN, the
    # maximum for argmax, propagates through max to the same choice.
    per_feature = jnp.max(gains.reshape(n_features, -1), axis=1)
    if feature_mask is not None:
        per_feature = jnp.where(feature_mask, per_feature, -jnp.inf)
    f = jnp.argmax(per_feature)
    j = jnp.argmax(gains.reshape(n_features, -1)[f])
    t, d = j // 2, j % 2
    gain = per_feature[f] - min_split_gain
    admissible = gain > 0
    return Split(
        feature=jnp.where(admissible, f, 0).astype(jnp.int32),
        threshold=jnp.where(admissible, t, null_threshold(n_bins)).astype(jnp.int32),
        missing_right=admissible & (d == 1),
        gain=jnp.where(admissible, gain, 0.0).astype(jnp.float32),
    )
