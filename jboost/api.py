"""``fit``: gradient boosting of oblivious trees, from user data to a :class:`jboost.Booster`.

``fit`` checks its inputs on the host through the settings layer (clear ``ValueError`` /
``TypeError`` naming the argument), bins the features, then calls the jit-compiled
:func:`jboost.boosting.boost`. Continuous hyperparameters may be JAX tracers:
``jax.vmap(lambda lr: jboost.fit(X, y, learning_rate=lr))`` fits a whole sweep in one compiled
call (X and y must then be concrete, closed-over arrays). Prediction and the model protocol are
in :mod:`jboost.model`.
"""

from __future__ import annotations

from typing import Any, Callable, Optional, Union

import jax

from jboost import _validation
from jboost import binning
from jboost import boosting
from jboost import losses as losses_lib
from jboost import model as model_lib
from jboost import samplers
from jboost import tree as tree_lib

# Re-exported for compatibility: the model protocol lives in jboost.model.
Booster = model_lib.Booster
predict = model_lib.predict
predict_proba = model_lib.predict_proba
predict_class = model_lib.predict_class
predict_mean = model_lib.predict_mean
feature_importance = model_lib.feature_importance


def fit(
    X,
    y,
    loss: Union[str, losses_lib.Loss, Callable] = "squared_error",
    *,
    n_rounds: int = 100,
    depth: int = 6,
    learning_rate: Any = 0.1,
    l2: Any = 1.0,
    min_split_gain: Any = 0.0,
    min_child_weight: Any = 1.0,
    subsample: Any = 1.0,
    colsample: Any = 1.0,
    colsample_by: str = "tree",
    n_bins: int = 256,
    sample_weight=None,
    eval_set=None,
    key: Any = 0,
    n_outputs: Optional[int] = None,
    task: Optional[str] = None,
    per_output_trees: bool = False,
    borders=None,
    devices=None,
    row_sampler: Any = "bernoulli",
) -> model_lib.Booster:
    """Fit a boosted ensemble of oblivious trees (ESL Algorithm 10.3, Newton trees).

    Args:
      X: ``(n_samples, n_features)`` numeric; NaN is a missing value.
      y: ``(n_samples,)`` labels: real for regression, 0/1 for binary losses, 0..K-1 for K-class.
      loss: a built-in name (``"squared_error"``, ``"absolute_error"``, ``"huber"``,
        ``"quantile"``, ``"binomial_deviance"``, ``"exponential"``, ``"multinomial_deviance"``,
        ``"samme_exponential"``, ``"poisson"``), a :class:`jboost.Loss`, or any function
        ``loss(y, raw) -> scalar`` for one sample (gradients and hessians come from autodiff).
      n_rounds: boosting rounds (static).
      depth: levels per oblivious tree, 1..16 (static; 2**depth leaves).
      learning_rate: shrinkage (traced), or a callable ``round -> rate`` such as an optax schedule.
      l2: L2 penalty on leaf values, the lambda of ``-G / (H + lambda)`` (traced).
      min_split_gain: a level is split only if its gain exceeds this (traced).
      min_child_weight: minimal hessian sum of a child (traced; see :mod:`jboost.splits`).
      subsample: probability that a row takes part in a round (Bernoulli weights; traced).
      colsample: fraction of features eligible per tree or per level (traced).
      colsample_by: ``"tree"``, ``"level"`` or a column sampler function (:mod:`jboost.samplers`).
      n_bins: bins per feature including the missing bin, 3..256 (static).
      sample_weight: optional non-negative ``(n_samples,)`` weights.
      eval_set: optional ``(X_valid, y_valid)`` or ``(X_valid, y_valid, w_valid)``; its mean loss
        after every round is returned in ``Booster.valid_loss``.
      key: an int seed or a ``jax.random`` key. Same key, same data, same device: same model.
      n_outputs: number of raw outputs K for a custom loss (built-ins know theirs; K-class losses
        infer K from the labels).
      task: for a custom loss: ``"regression"``, ``"binary"``, ``"multiclass"`` or ``"count"``.
      per_output_trees: with K outputs, fit K separate trees per round (ESL Algorithm 10.4)
        instead of one tree with vector leaves.
      borders: precomputed ``(n_features, n_bins - 1)`` borders (from :func:`jboost.compute_borders`)
        to reuse a binning.
      devices: data-parallel training: ``"all"`` (every device of ``jax.devices()``), a list of
        devices, or a ``jax.sharding.Mesh`` whose first axis the rows are sharded over; histograms
        are summed across devices with ``psum`` (:func:`jboost.boosting.boost_sharded`).
        ``None`` (default): one device.
      row_sampler: ``"bernoulli"`` (each row kept with probability ``subsample``), ``"poisson"``
        (Poisson(``subsample``) counts: a bootstrap per round) or a function (:mod:`jboost.samplers`).

    Returns:
      A :class:`Booster`.
    """
    X = _validation.as_matrix(X, "X")
    y = _validation.as_labels(y, X.shape[0])
    loss_obj = _validation.resolve_loss(loss, y, n_outputs, task)
    config, hyper = settings(n_rounds=n_rounds, depth=depth, n_bins=n_bins,
                             learning_rate=learning_rate, l2=l2, min_split_gain=min_split_gain,
                             min_child_weight=min_child_weight, subsample=subsample,
                             colsample=colsample, colsample_by=colsample_by,
                             per_output_trees=per_output_trees, row_sampler=row_sampler)
    data, borders = _validation_prepare(X, y, sample_weight, eval_set, config.n_bins, borders,
                                        lambda v, name: losses_lib.check_labels(loss_obj, v, name))
    config = config._replace(missing=binning.has_missing(data.X_binned, config.n_bins))
    init_raw = _baseline(loss_obj, data.y, data.w)
    mesh = _validation.mesh_of(devices)
    args = (data, _validation.as_key(key), hyper, loss_obj, init_raw)
    if mesh is None:
        out = boosting.boost(*args, config=config)
    else:
        out = boosting.boost_sharded(mesh, *args, config=config)
    return model_lib.Booster(trees=tree_lib.with_borders(out.trees, borders), borders=borders,
                             baseline=init_raw, loss=out.final_loss, train_loss=out.train_loss,
                             valid_loss=out.valid_loss)


def _validation_prepare(X, y, sample_weight, eval_set, n_bins, borders, label_check):
    data = _validation.prepare(X, y, sample_weight=sample_weight, eval_set=eval_set, n_bins=n_bins,
                               borders=borders, label_check=label_check)
    return boosting.Data(*data[:6]), data.borders


def settings(*, n_rounds, depth, n_bins, learning_rate, l2, min_split_gain, min_child_weight,
             subsample, colsample, colsample_by="tree", per_output_trees=False,
             row_sampler="bernoulli", algorithm: Optional[boosting.Algorithm] = None):
    """Check the boosting settings; returns ``(BoostConfig (static), Hyperparams (traced))``.

    The one place every boosting entry point (``fit``, the algorithms, sweeps, bagged boosters,
    stacking, ECOC) turns its keyword arguments into a configuration. ``learning_rate`` may be a
    callable ``round -> rate`` (e.g. an optax schedule): it is then the static
    ``learning_rate_schedule`` and the traced rate is 1.
    """
    n_rounds = _validation.check_int(n_rounds, "n_rounds", 1, _validation.MAX_ROUNDS)
    depth = _validation.check_int(depth, "depth", 1, _validation.MAX_DEPTH)
    n_bins = _validation.check_int(n_bins, "n_bins", 3, binning.MAX_BINS)
    schedule = None
    if callable(learning_rate):
        schedule, learning_rate = learning_rate, 1.0
    values = dict(learning_rate=learning_rate, l2=l2, min_split_gain=min_split_gain,
                  min_child_weight=min_child_weight, subsample=subsample, colsample=colsample)
    for name, v in values.items():
        _validation.check_hyperparameter(name, v)
    if not callable(colsample_by):
        _validation.check_choice(colsample_by, "colsample_by", tuple(samplers.COLUMN_SAMPLERS))
    if not callable(row_sampler):
        _validation.check_choice(row_sampler, "row_sampler", tuple(samplers.ROW_SAMPLERS))
    config = boosting.BoostConfig(n_rounds=n_rounds, depth=depth, n_bins=n_bins,
                                  per_output_trees=bool(per_output_trees), colsample_by=colsample_by,
                                  learning_rate_schedule=schedule, row_sampler=row_sampler,
                                  algorithm=algorithm or boosting.NEWTON)
    return config, boosting.Hyperparams.create(**values)


@jax.jit
def _baseline(loss, y, w):
    return losses_lib.baseline(loss, y, w)
