"""Non-crossing multi-quantile regression: one model, ``K`` quantile levels, outputs that cannot
cross (``docs/guide/multi-quantile.md``).

The ``K`` raw outputs ``r`` of a row are mapped to its quantiles by a map that is increasing in
the level by construction, the cumulative sum of positive increments::

    q_1 = r_1,    q_k = q_{k-1} + s softplus(r_k / s)      (k = 2 .. K)

so ``q_1 <= q_2 <= ... <= q_K`` for every row, whatever the trees predict: a base quantile
plus gaps through a positive activation, the construction of non-crossing quantile networks
(Shen, Dai, Wu, Luo, Shi and Zhu 2025, "Deep Distributional Learning with Non-crossing Quantile
Network", arXiv:2504.08215), here on the vector leaves of boosted trees. The loss is the
sum over the levels of the pinball loss of ``q_k`` (Koenker and Bassett 1978); its gradient
comes by autodiff through the map. Pinball losses have no curvature, so the trees are
least-squares trees on the gradient whose leaves are then searched exactly along their
direction on the loss itself (``hessian="unit"``, ``leaf_refit="exact"``). ``s`` (the traced
parameter ``scale``, default 1, in label units) is the gap below which the softplus bends: gaps
far below ``s`` learn slowly (their gradient is scaled by ``1 - exp(-gap / s)``).
"""

from __future__ import annotations

from typing import Optional

import jax
import jax.numpy as jnp
import numpy as np

from jboost import checks
from jboost.losses import baselines, loss as loss_lib

#: The smallest increment between adjacent quantiles of the baseline, as a fraction of the
#: labels' spread (their weighted standard deviation): tied sample quantiles (discrete labels)
#: map back to a finite raw score.
INCREMENT_FLOOR = 1e-3


def softplus_inverse(x):
    """``log(exp(x) - 1)`` for ``x > 0``, computed without overflow: the raw score whose softplus
    is ``x``."""
    return x + jnp.log(-jnp.expm1(-x))


def noncrossing_link(raw, scale=1.0, **params):
    """The ``K`` quantiles ``(..., K)`` of raw scores ``(..., K)``: ``q_1 = r_1``,
    ``q_k = q_{k-1} + scale * softplus(r_k / scale)``; increasing along the last axis for every
    finite ``raw`` (a softplus that rounds to 0 leaves two quantiles equal, never crossed). A
    ``scale`` that is not ``> 0`` (traced, or read from an edited model file) gives NaN gaps,
    never crossed quantiles."""
    raw = jnp.asarray(raw)
    scale = jnp.asarray(scale, raw.dtype)
    gaps = jnp.where(scale > 0, scale * jax.nn.softplus(raw[..., 1:] / scale), jnp.nan)
    return jnp.cumsum(jnp.concatenate([raw[..., :1], gaps], axis=-1), axis=-1)


def noncrossing_inverse(q, floor=0.0, scale=1.0):
    """The raw scores ``(..., K)`` whose :func:`noncrossing_link` (with ``scale``) is
    ``q (..., K)``, each increment ``q_k - q_{k-1}`` raised to at least ``floor`` (which must be
    ``> 0`` when two quantiles tie)."""
    q = jnp.asarray(q)
    scale = jnp.asarray(scale, q.dtype)
    steps = jnp.maximum(jnp.diff(q, axis=-1), floor)
    return jnp.concatenate([q[..., :1], scale * softplus_inverse(steps / scale)], axis=-1)


def pinball(y, q, levels):
    """The pinball losses ``(K,)`` of quantiles ``q (K,)`` at ``levels (K,)`` for label ``y``:
    ``max(a r, (a - 1) r)`` with ``r = y - q`` (Koenker and Bassett 1978)."""
    r = y - q
    levels = jnp.asarray(levels, r.dtype)
    return jnp.maximum(levels * r, (levels - 1.0) * r)


def levels_ok(levels):
    """Traced bool: ``levels`` strictly increasing (their domain ``(0, 1)`` is the loss's
    ``domains``, checked apart)."""
    return jnp.all(jnp.diff(levels) > 0)


def quantiles_fn(y, raw, levels, scale=1.0):
    """The multi-quantile loss of one row: the sum over the levels of the pinball loss of the
    row's quantiles :func:`noncrossing_link` of ``raw (K,)``; NaN when traced ``levels`` are not
    strictly increasing (concrete ones are refused by :func:`quantiles`)."""
    levels = jnp.reshape(jnp.asarray(levels), (-1,))
    raw = jnp.reshape(raw, levels.shape)
    total = jnp.sum(pinball(y, noncrossing_link(raw, scale), levels))
    return jnp.where(levels_ok(levels), total, jnp.nan)


def check_quantile_labels(y, name: str = "y") -> None:
    """The labels of :func:`quantiles` are one number per row: raises ``ValueError`` naming
    ``name`` for labels of shape ``(n, C)``."""
    if np.ndim(y) != 1:
        raise ValueError(f"{name} has shape {np.shape(y)}: jboost.losses.quantiles models K "
                         "quantiles of one label per row, so y must have shape (n,); for several "
                         "targets fit one model per column.")


quantiles_fn.check_labels = check_quantile_labels


def quantiles_baseline(y, w, n_outputs, levels, scale=1.0, **params):
    """The optimal constant raw score ``(K,)``: the weighted sample quantiles of the labels at
    ``levels``, mapped back through :func:`noncrossing_inverse`, increments floored at
    :data:`INCREMENT_FLOOR` times the labels' weighted standard deviation (or at ``1e-30`` for
    constant labels)."""
    levels = jnp.reshape(jnp.asarray(levels, jnp.float32), (-1,))
    q = jax.vmap(lambda a: baselines.weighted_quantile(y, w, a))(levels)
    total = jnp.sum(w)
    mean = jnp.sum(w * y) / total
    sd = jnp.sqrt(jnp.sum(w * (y - mean) ** 2) / total)
    floor = jnp.maximum(INCREMENT_FLOOR * sd, 1e-30)
    return noncrossing_inverse(q, floor, scale).astype(jnp.float32)


def check_levels(levels) -> np.ndarray:
    """``levels`` as a float64 array ``(K,)`` when concrete; raises ``ValueError`` naming the
    argument and the fix unless they are at least one finite level, each in ``(0, 1)``, strictly
    increasing."""
    arr = np.asarray(levels, np.float64)
    if arr.ndim != 1 or arr.size < 1:
        raise ValueError(f"levels={levels!r} must be a non-empty 1-D sequence of quantile levels, "
                         "e.g. jboost.losses.quantiles([0.05, 0.5, 0.95]).")
    bad = ~loss_lib.PROBABILITY.contains(arr)
    if bad.any():
        raise ValueError(f"levels={arr.tolist()}: each level must be in (0, 1) (finite, 0 and 1 "
                         f"excluded); {float(arr[bad][0])!r} is not. Pass levels such as [0.05, 0.5, "
                         "0.95].")
    if np.any(np.diff(arr) <= 0):
        raise ValueError(f"levels={arr.tolist()} must be strictly increasing (no repeats): the k-th "
                         "output is the k-th quantile. Pass them sorted and distinct, e.g. "
                         f"sorted(set(levels)) = {sorted(set(arr.tolist()))}.")
    return arr


def levels_of(loss) -> Optional[list]:
    """The levels of a :func:`jboost.losses.quantile` loss (one) or a :func:`quantiles` loss, as
    floats; ``None`` for any other loss."""
    name = getattr(loss, "name", None)
    if name == "quantile":
        return [float(loss.params["alpha"])]
    if name == "quantiles":
        return [float(a) for a in np.asarray(loss.params["levels"]).ravel()]
    return None


def quantiles(levels=(0.05, 0.5, 0.95), scale=1.0) -> loss_lib.Loss:
    """Non-crossing multi-quantile regression: one model of ``K = len(levels)`` quantiles.

    The ``K`` raw outputs of a row map to its quantiles by ``q_1 = r_1``,
    ``q_k = q_{k-1} + scale * softplus(r_k / scale)`` (:func:`noncrossing_link`), increasing in
    the level for every row, so the predicted quantiles never cross. The loss is the sum of the
    levels' pinball losses of ``q``; least-squares trees on its autodiff gradient, leaves
    searched exactly along their direction (``hessian="unit"``, ``leaf_refit="exact"``); the baseline is the labels'
    weighted quantiles mapped back through the inverse map. Predict the ``(n, K)`` quantiles with
    :func:`jboost.predict_mean` (:func:`jboost.predict` gives the raw scores). See
    ``docs/guide/multi-quantile.md``.

    Args:
      levels: the quantile levels, strictly increasing, each in ``(0, 1)``, at least one (a
        traced parameter ``levels`` of shape ``(K,)``: a ``jax.vmap`` over arrays of levels fits
        several sets in one program; ``K`` is static).
      scale: ``> 0``, in label units (traced): the gap between adjacent quantiles below which
        the softplus bends and the gap learns slowly. The default 1 suits labels whose quantile
        gaps are about 1 or more; for labels of another scale pass about the labels' standard
        deviation (the map is scale-equivariant: with ``scale = c`` it maps ``c * r`` to ``c``
        times the quantiles ``scale = 1`` gives ``r``).

    Returns:
      A regression :class:`jboost.Loss` with ``K`` outputs and scalar labels.

    Raises:
      ValueError: ``levels`` is empty, not 1-D, outside ``(0, 1)`` or not strictly increasing,
        or ``scale`` is not a finite number ``> 0``.
    """
    if not checks.is_traced(scale) and not (np.ndim(scale) == 0
                                            and loss_lib.POSITIVE.contains(scale)):
        raise ValueError(f"scale={scale!r} must be a finite number > 0 (label units): about the "
                         "labels' standard deviation, or leave the default 1.")
    if checks.is_traced(levels):  # under jax.vmap: checked when the program runs (NaN loss)
        if np.ndim(levels) != 1 or np.shape(levels)[0] < 1:
            raise ValueError(f"levels has shape {np.shape(levels)}: one model's levels must be a "
                             "1-D array (K,); vmap over the leading axis of a (B, K) array.")
        k = int(np.shape(levels)[0])
    else:
        k = check_levels(levels).size
        levels = np.asarray(levels, np.float32)
    return loss_lib.Loss(quantiles_fn, params={"levels": levels, "scale": scale}, name="quantiles",
                         n_outputs=k, link=noncrossing_link, baseline=quantiles_baseline,
                         hessian="unit", leaf_refit="exact",
                         domains={"levels": loss_lib.PROBABILITY, "scale": loss_lib.POSITIVE})
