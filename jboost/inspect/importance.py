"""Feature importance: ESL relative importance, summed gains, split counts, permutation importance."""

from __future__ import annotations

import functools
from typing import Optional

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from jboost import _compile, checks
from jboost.data import labels, tabular
from jboost.inspect import covers as covers_lib
from jboost.losses import loss as loss_lib, metrics as metrics_lib, per_sample
from jboost.models import base as base_lib, metadata


IMPORTANCE_KINDS = ("relative", "gain", "split_count")


def importance(model, kind: str = "relative", per_class: bool = False) -> jax.Array:
    """Feature importance from the splits of the trees a prediction uses, per model of a batch
    (ESL eq. 10.42-10.43; docs/inspect.md).

    Args:
      kind: ``"relative"`` (ESL's relative importance, the largest 100), ``"gain"`` (the summed
        gains) or ``"split_count"`` (the number of splits on each feature).
      per_class: each output's importance from its own trees (ESL's ``I_lk``: models with one
        tree per output per round, and ECOC's code bits).

    Returns:
      ``(F,)``, or ``(K, F)`` with ``per_class`` (batch axes in front), float32: a NumPy
      :class:`jboost.models.metadata.Importance` labelled with the model's feature names when
      it has them (under ``jit``/``vmap``: a JAX array).
    """
    base_lib.check_model(model)
    if kind not in IMPORTANCE_KINDS:
        raise ValueError(f"kind={kind!r} is not an importance kind; use one of {IMPORTANCE_KINDS}.")
    covers_lib.check_trees(model.trees)
    axis = getattr(model, "class_axis", None)  # how the trees divide among the outputs
    if per_class and axis is None:
        raise ValueError(
            f"per_class=True needs one tree per output: a {type(model).__name__} with "
            f"{getattr(model, 'n_outputs', 1)} output(s) whose trees each move every output (their "
            "gains are summed over the outputs and cannot be split by class). Fit with "
            "per_output_trees=True (ESL Algorithm 10.4), or use per_class=False.")

    return metadata.importance_of(model, _importance(model, kind=kind, per_class=per_class,
                                                     axis=axis))


@functools.partial(_compile.jit, static_argnames=("kind", "per_class", "axis"))
def _importance(model, *, kind: str, per_class: bool, axis: Optional[str]):
    """:func:`importance` of checked arguments, every model of a batch."""

    def one(m):
        n_features = m.n_features
        gains, feats = base_lib.used_gains(m), m.trees.features          # (..., D)
        if axis == "bits":  # (L, R, 1, D) -> groups (L, R*D)
            groups_g = gains.reshape(gains.shape[0], -1)
            groups_f = feats.reshape(feats.shape[0], -1)
        elif axis == "per_output":  # (B?, R, K, D) -> (K, ...)
            groups_g = jnp.moveaxis(gains, -2, 0).reshape(gains.shape[-2], -1)
            groups_f = jnp.moveaxis(feats, -2, 0).reshape(feats.shape[-2], -1)
        else:
            groups_g, groups_f = gains.reshape(1, -1), feats.reshape(1, -1)
        if kind == "split_count":
            g = (groups_g > 0).astype(jnp.float32)
        else:
            g = jnp.maximum(groups_g, 0.0)
        per = jax.vmap(lambda gg, ff: jax.ops.segment_sum(gg, ff, num_segments=n_features))(g, groups_f)
        if kind != "relative":
            return per if per_class else jnp.sum(per, axis=0)
        n_trees = groups_g.shape[1] / max(gains.shape[-1], 1)
        root = jnp.sqrt(per / n_trees)                                       # I_lk (eq. 10.43)
        if per_class:
            return _scaled(root)
        return _scaled(jnp.mean(root, axis=0))  # I_l = mean_k I_lk; one group: sqrt of the sum

    return base_lib.batched(model, one)


def _scaled(imp):
    """Scaled so the largest entry (along the last axis) is 100 (all zero stays zero)."""
    top = jnp.max(imp, axis=-1, keepdims=True)
    return 100.0 * imp / jnp.where(top > 0, top, 1.0)


def permutation_importance(model, X, y, metric=None, n_repeats: int = 5, key=0,
                           sample_weight=None, n_rounds: Optional[int] = None) -> jax.Array:
    """Permutation importance on held-out rows (Breiman 2001; ESL 15.3.2): the increase of
    ``metric`` when a feature's column is shuffled, over ``n_repeats`` permutations.

    Args:
      model: any fitted ensemble with a loss (a Forest or ECOC model needs ``metric``); batch
        axes allowed (each model its own importance).
      X, y: held-out rows and labels.
      metric: ``None`` (the model's loss, the mean weighted loss of the raw scores), a named
        metric (``"mse"``, ``"mae"``, ``"error_rate"``) or ``metric(y, raw, w) -> scalar`` (raw
        scores as :func:`jboost.predict` gives them). Lower must be better.
      n_repeats: permutations per feature.
      key: int seed or a ``jax.random`` key (docs/inspect.md).

    Returns:
      ``(F, n_repeats)`` the increases (their mean is the importance), batch axes in front.
    """
    base_lib.check_model(model)
    X = jnp.asarray(tabular.predict_matrix(base_lib.in_order(model, X), model.n_features),
                    jnp.float32)
    n_repeats = checks.check_int(n_repeats, "n_repeats", 1, 10**6)
    classes = getattr(model, "classes", None)
    if classes is not None:  # labels as the model was fitted on: strings, {-1, 1}, ...
        y = labels.class_codes(tabular.series_values(y), classes.array, "y")
    y = jnp.asarray(tabular.series_values(y))
    if y.shape[0] != X.shape[0]:
        raise ValueError(f"y has {y.shape[0]} rows but X has {X.shape[0]}.")
    w = jnp.asarray(tabular.as_weights(sample_weight, X.shape[0]))
    key = checks.as_key(key)
    if metric is None and not isinstance(getattr(model, "loss", None), loss_lib.Loss):
        raise ValueError(f"a {type(model).__name__} has no loss: pass metric= (\"mse\", "
                         "\"error_rate\", or metric(y, raw, w)).")
    if isinstance(metric, str) and metric not in metrics_lib.METRICS:
        raise ValueError(f"metric={metric!r} is not a named metric; use one of "
                         f"{sorted(metrics_lib.METRICS)} or a function metric(y, raw, w).")
    return _permutation(model, X, y, w, key, metric=metric, n_repeats=n_repeats, n_rounds=n_rounds)


@functools.partial(_compile.jit, static_argnames=("metric", "n_repeats", "n_rounds"))
def _permutation(model, X, y, w, key, *, metric, n_repeats: int, n_rounds):
    """:func:`permutation_importance` of checked arguments: one compiled program."""

    def score(m, raw):
        if metric is None:  # the mean weighted loss (a batch objective: its value over the rows)
            return loss_lib.total_loss(m.loss, y, raw, w) / jnp.sum(w)
        m_loss = getattr(m, "loss", None)
        if m_loss is None:  # a forest: its raw scores are the prediction (identity link)
            m_loss = per_sample.squared_error()
        return metrics_lib.evaluate(metric, m_loss, y, raw, w, name="metric")

    def one(m):
        base = score(m, m.raw_scores(X, n_rounds))

        def feature(j):
            def repeat(r):
                perm = jax.random.permutation(jax.random.fold_in(jax.random.fold_in(key, j), r), X.shape[0])
                Xp = X.at[:, j].set(X[perm, j])
                return score(m, m.raw_scores(Xp, n_rounds)) - base
            return jax.vmap(repeat)(jnp.arange(n_repeats))

        return lax.map(feature, jnp.arange(X.shape[1]))

    return base_lib.batched(model, one)
