"""Predictions of a distributional model: per-row parameters, quantiles, intervals, and the mean
NLL and CRPS of labels."""

from __future__ import annotations

import functools
from typing import Optional

import jax
import jax.numpy as jnp
import numpy as np

from jboost import _compile
from jboost.data import labels, tabular
from jboost.losses import loss as loss_lib
from jboost.losses.distributions import base as base_lib, nll_loss
from jboost.models import base


def _raw_and_params(model, X, n_rounds, base_margin):
    dist = nll_loss.distribution_of(model)
    raw = jnp.asarray(base.predict(model, X, n_rounds=n_rounds, base_margin=base_margin))
    if dist.n_outputs == 1:
        raw = raw[..., None]
    return dist, raw, dict(model.loss.params)


def _per_model(model, fn, raw, params, *args):
    """``fn(raw (n, K), params, *args)`` for each model of a batch (vmapped over batch axes)."""
    f = fn
    for _ in model.batch_shape:
        f = jax.vmap(f, in_axes=(0, 0) + (None,) * len(args))
    return f(raw, params, *args)


@functools.partial(_compile.jit, static_argnames=("dist",))
def _params_rows(dist, raw, params):
    return dist.params(raw, **params)


@functools.partial(_compile.jit, static_argnames=("dist",))
def _quantile_rows(dist, raw, params, q):
    return jax.vmap(lambda r: base_lib.quantile(dist, q, r, params))(raw)


@functools.partial(_compile.jit, static_argnames=("dist",))
def _nll_rows(dist, raw, params, y):
    return jax.vmap(lambda yi, r: base_lib.support_nll(dist, yi, r, params))(y, raw)


@functools.partial(_compile.jit, static_argnames=("dist",))
def _crps_rows(dist, raw, params, y):
    keys = jax.random.split(jax.random.key(0), y.shape[0])
    return jax.vmap(lambda yi, r, k: base_lib.crps_one(dist, yi, r, params, k))(y, raw, keys)


def predict_params(model, X, n_rounds: Optional[int] = None, base_margin=None) -> dict:
    """The distribution's parameters per row: ``{name: (n,)}`` (``Normal``: ``loc``, ``scale``;
    with the model's batch axes in front for a vmapped sweep)."""
    dist, raw, params = _raw_and_params(model, X, n_rounds, base_margin)
    values = _per_model(model, functools.partial(_params_rows, dist), raw, params)
    return dict(zip(dist.param_names, values))


def predict_quantile(model, X, q, n_rounds: Optional[int] = None, base_margin=None):
    """The ``q``-quantile of each row's predicted distribution, ``(n,)``
    (:func:`jboost.losses.distributions.base.quantile`)."""
    if not loss_lib.PROBABILITY.contains(q):
        raise ValueError(f"q={q!r} must be in (0, 1).")
    dist, raw, params = _raw_and_params(model, X, n_rounds, base_margin)
    return _per_model(model, functools.partial(_quantile_rows, dist), raw, params,
                      jnp.float32(q))


def predict_interval(model, X, level: float = 0.9, n_rounds: Optional[int] = None,
                     base_margin=None):
    """Central prediction intervals ``(lower, upper)``, each ``(n,)``: the ``(1 - level)/2`` and
    ``(1 + level)/2`` quantiles of each row's predicted distribution."""
    if not loss_lib.PROBABILITY.contains(level):
        raise ValueError(f"level={level!r} must be in (0, 1), e.g. 0.9 for 90% intervals.")
    level = float(level)
    return (predict_quantile(model, X, 0.5 * (1.0 - level), n_rounds, base_margin),
            predict_quantile(model, X, 0.5 * (1.0 + level), n_rounds, base_margin))


def _weighted_mean(values, sample_weight, n):
    w = (np.ones(n, np.float32) if sample_weight is None
         else tabular.as_weights(sample_weight, n))
    w = jnp.asarray(w)
    return jnp.sum(values * w, axis=-1) / jnp.sum(w)


def _labels(y, n):
    return jnp.asarray(labels.as_labels(y, n))


def nll(model, X, y, sample_weight=None, n_rounds: Optional[int] = None, base_margin=None):
    """Mean negative log-likelihood of the labels ``y`` under each row's predicted distribution
    (weighted by ``sample_weight``; one value per model of a batch)."""
    dist, raw, params = _raw_and_params(model, X, n_rounds, base_margin)
    y = _labels(y, raw.shape[-2])
    values = _per_model(model, functools.partial(_nll_rows, dist), raw, params, y)
    return _weighted_mean(values, sample_weight, y.shape[0])


def crps(model, X, y, sample_weight=None, n_rounds: Optional[int] = None, base_margin=None):
    """Mean CRPS of the labels ``y`` under each row's predicted distribution 
    (:func:`jboost.losses.distributions.base.crps_one`: closed form, or Monte Carlo with
    :data:`jboost.losses.distributions.base.CRPS_MC_SAMPLES` draws per row and a fixed key)."""
    dist, raw, params = _raw_and_params(model, X, n_rounds, base_margin)
    y = _labels(y, raw.shape[-2])
    values = _per_model(model, functools.partial(_crps_rows, dist), raw, params, y)
    return _weighted_mean(values, sample_weight, y.shape[0])
