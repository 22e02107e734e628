"""The user-facing functions: ``fit``, ``predict``, ``predict_proba``, ``predict_class``.

``fit`` checks its inputs on the host (clear ``ValueError``/``TypeError`` naming the argument),
bins the features, then calls the jit-compiled :func:`jboost.boosting.boost`. Continuous
hyperparameters may be JAX tracers: ``jax.vmap(lambda lr: jboost.fit(X, y, learning_rate=lr))``
fits a whole sweep in one compiled call (X and y must then be concrete, closed-over arrays).
"""

from __future__ import annotations

import numbers
from typing import Any, Callable, NamedTuple, Optional, Union

import jax
import jax.numpy as jnp
import numpy as np

from jboost import binning
from jboost import boosting
from jboost import losses as losses_lib
from jboost import tree as tree_lib

MAX_DEPTH = 16


class Booster(NamedTuple):
    """A fitted boosted ensemble: a pytree of arrays.

    Attributes:
      trees: :class:`jboost.ObliviousTrees` with leading axes ``(n_rounds, trees_per_round)``;
        leaf values already include the learning rate.
      borders: ``(n_features, n_bins - 1)`` float32 bin borders (``+inf`` padded).
      baseline: ``(K,)`` the constant raw score the rounds start from.
      loss: the :class:`jboost.Loss` (with its final parameters).
      train_loss: ``(n_rounds,)`` weighted mean training loss after each round.
      valid_loss: ``(n_rounds,)`` mean loss on ``eval_set`` after each round (NaN without one).
    """

    trees: tree_lib.ObliviousTrees
    borders: jax.Array
    baseline: jax.Array
    loss: losses_lib.Loss
    train_loss: jax.Array
    valid_loss: jax.Array

    @property
    def n_features(self) -> int:
        return self.borders.shape[-2]

    @property
    def n_outputs(self) -> int:
        return self.baseline.shape[-1]

    @property
    def n_rounds(self) -> int:
        return self.trees.features.shape[-3]

    @property
    def depth(self) -> int:
        return self.trees.features.shape[-1]


# --------------------------------------------------------------------------------------------
# Input checks (host side; traced values are skipped).
# --------------------------------------------------------------------------------------------


def _is_traced(v) -> bool:
    return isinstance(v, jax.core.Tracer)


def _as_matrix(X, name: str) -> np.ndarray:
    if _is_traced(X):
        raise TypeError(f"{name} must be a concrete array (it is binned on the host); under "
                        "jax.vmap/jit close over the data instead of passing it as a traced argument.")
    arr = np.asarray(X)
    if arr.dtype == object or not (np.issubdtype(arr.dtype, np.number) or arr.dtype == bool):
        raise TypeError(f"{name} must be numeric (float, int or bool); got dtype {arr.dtype}.")
    if arr.ndim != 2:
        raise ValueError(f"{name} must be 2-D (n_samples, n_features); got shape {arr.shape}.")
    if arr.shape[0] == 0 or arr.shape[1] == 0:
        raise ValueError(f"{name} is empty: shape {arr.shape}; need at least one sample and one feature.")
    return arr.astype(np.float32, copy=False)


def _as_vector(v, n: int, name: str, x_name: str = "X") -> np.ndarray:
    if _is_traced(v):
        raise TypeError(f"{name} must be a concrete array, not a traced value.")
    arr = np.asarray(v)
    if arr.dtype == object or not (np.issubdtype(arr.dtype, np.number) or arr.dtype == bool):
        raise TypeError(f"{name} must be numeric; got dtype {arr.dtype}.")
    if arr.ndim != 1:
        raise ValueError(f"{name} must be 1-D; got shape {arr.shape}.")
    if arr.shape[0] != n:
        raise ValueError(f"{name} has {arr.shape[0]} samples but {x_name} has {n}: lengths must match.")
    return arr.astype(np.float32)


def _check_weights(w: np.ndarray, name: str = "sample_weight") -> None:
    if not np.all(np.isfinite(w)):
        raise ValueError(f"{name} must be finite; found NaN or inf.")
    if np.any(w < 0):
        raise ValueError(f"{name} must be non-negative; found {w.min()}.")
    if not np.any(w > 0):
        raise ValueError(f"{name} must have a positive sum; all weights are zero.")


def _check_int(v, name: str, lo: int, hi: int) -> int:
    if isinstance(v, bool) or not isinstance(v, numbers.Integral):
        raise TypeError(f"{name} must be an int (it sets array shapes); got {type(v).__name__}.")
    if not lo <= int(v) <= hi:
        raise ValueError(f"{name}={v} must be in [{lo}, {hi}].")
    return int(v)


def _check_real(v, name: str, lo: float, hi: float, lo_open: bool = False) -> None:
    if _is_traced(v) or v is None:
        return
    arr = np.asarray(v)
    if arr.size != 1:
        raise ValueError(f"{name} must be a scalar; got shape {arr.shape} (use jax.vmap for sweeps).")
    x = float(arr)
    bad = (x <= lo if lo_open else x < lo) or x > hi or not np.isfinite(x)
    if bad:
        left = "(" if lo_open else "["
        raise ValueError(f"{name}={x} must be in {left}{lo}, {hi}].")


def _check_labels_finite(y: np.ndarray, name: str = "y") -> None:
    if not np.all(np.isfinite(y)):
        raise ValueError(f"{name} must be finite; found NaN or inf.")


def _as_key(key):
    if isinstance(key, numbers.Integral):
        return jax.random.PRNGKey(int(key))
    return key


def _resolve_loss(loss, y: np.ndarray, n_outputs: Optional[int], task: Optional[str]) -> losses_lib.Loss:
    resolved = losses_lib.get(loss, n_outputs=n_outputs, task=task)
    if resolved.n_outputs is None:
        if resolved.task != "multiclass":
            raise ValueError(f"n_outputs must be given for loss {resolved.name!r}.")
        if np.any(y != np.round(y)) or np.any(y < 0):
            raise ValueError(f"y must hold integer class labels 0..K-1 for loss {resolved.name!r}.")
        k = int(y.max()) + 1
        if k < 2:
            raise ValueError(f"y holds a single class; loss {resolved.name!r} needs at least 2.")
        resolved = resolved.replace(n_outputs=k)
    losses_lib.check_labels(resolved, y)
    return resolved


# --------------------------------------------------------------------------------------------
# fit / predict
# --------------------------------------------------------------------------------------------


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
) -> Booster:
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
      colsample_by: ``"tree"`` or ``"level"``.
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

    Returns:
      A :class:`Booster`.
    """
    X = _as_matrix(X, "X")
    n = X.shape[0]
    y = _as_vector(y, n, "y")
    _check_labels_finite(y)
    w = np.ones((n,), np.float32) if sample_weight is None else _as_vector(sample_weight, n, "sample_weight")
    _check_weights(w)
    n_rounds = _check_int(n_rounds, "n_rounds", 1, 10**7)
    depth = _check_int(depth, "depth", 1, MAX_DEPTH)
    n_bins = _check_int(n_bins, "n_bins", 3, binning.MAX_BINS)
    schedule = None
    if callable(learning_rate):
        schedule, learning_rate = learning_rate, 1.0
    _check_real(learning_rate, "learning_rate", 0.0, np.inf, lo_open=True)
    _check_real(l2, "l2", 0.0, np.inf)
    _check_real(min_split_gain, "min_split_gain", 0.0, np.inf)
    _check_real(min_child_weight, "min_child_weight", 0.0, np.inf)
    _check_real(subsample, "subsample", 0.0, 1.0, lo_open=True)
    _check_real(colsample, "colsample", 0.0, 1.0, lo_open=True)
    if colsample_by not in ("tree", "level"):
        raise ValueError(f"colsample_by={colsample_by!r} must be 'tree' or 'level'.")
    if task is not None and task not in losses_lib.TASKS:
        raise ValueError(f"task={task!r} must be one of {losses_lib.TASKS}.")
    loss_obj = _resolve_loss(loss, y, n_outputs, task)

    borders, X_binned, Xv_binned, yv, wv = bin_inputs(
        X, w, n_bins, borders, eval_set,
        label_check=lambda v, name: losses_lib.check_labels(loss_obj, v, name))

    hyper = boosting.Hyperparams.create(learning_rate, l2, min_split_gain, min_child_weight,
                                        subsample, colsample)
    config = boosting.BoostConfig(n_rounds=n_rounds, depth=depth, n_bins=n_bins,
                                  per_output_trees=bool(per_output_trees), colsample_by=colsample_by,
                                  learning_rate_schedule=schedule,
                                  missing=binning.has_missing(X_binned, n_bins))
    y_j, w_j = jnp.asarray(y), jnp.asarray(w)
    init_raw = _baseline(loss_obj, y_j, w_j)
    args = (X_binned, y_j, w_j, _as_key(key), hyper, loss_obj, init_raw, Xv_binned,
            jnp.asarray(yv), jnp.asarray(wv))
    mesh = _mesh(devices)
    if mesh is None:
        out = boosting.boost(*args, config=config)
    else:
        out = boosting.boost_sharded(mesh, *args, config=config)
    borders_j = jnp.asarray(borders)
    trees = tree_lib.with_borders(out.trees, borders_j)
    return Booster(trees=trees, borders=borders_j, baseline=init_raw, loss=out.final_loss,
                   train_loss=out.train_loss, valid_loss=out.valid_loss)


def _mesh(devices):
    if devices is None:
        return None
    if isinstance(devices, jax.sharding.Mesh):
        return devices
    if isinstance(devices, str):
        if devices != "all":
            raise ValueError(f"devices={devices!r} must be None, 'all', a list of devices or a Mesh.")
        devices = jax.devices()
    devices = list(devices)
    if not devices:
        raise ValueError("devices is empty.")
    return jax.sharding.Mesh(np.array(devices), ("rows",))


def bin_inputs(X: np.ndarray, w: np.ndarray, n_bins: int, borders, eval_set,
               label_check: Optional[Callable] = None):
    """Borders (computed, or checked when given), binned ``X`` and the checked, binned eval set.

    Shared by :func:`fit` and :mod:`jboost.algorithms`. ``X`` and ``w`` must already be checked
    (``_as_matrix``, ``_check_weights``). ``label_check(y_valid, "eval_set y")`` validates the
    eval-set labels. Returns ``(borders, X_binned, X_valid_binned, y_valid, w_valid)``; without
    an eval set the validation arrays have 0 rows.
    """
    if borders is None:
        borders = binning.compute_borders(X, n_bins, sample_weight=w)
    else:
        borders = np.asarray(borders, np.float32)
        if borders.shape != (X.shape[1], n_bins - 1):
            raise ValueError(f"borders has shape {borders.shape}; expected {(X.shape[1], n_bins - 1)} "
                             f"for {X.shape[1]} features and n_bins={n_bins}.")
    X_binned = binning.bin_features(X, borders)
    if eval_set is None:
        return (borders, X_binned, jnp.zeros((X.shape[1], 0), binning.X_BINNED_DTYPE),
                np.zeros((0,), np.float32), np.zeros((0,), np.float32))
    if not isinstance(eval_set, (tuple, list)) or len(eval_set) not in (2, 3):
        raise TypeError("eval_set must be a tuple (X_valid, y_valid) or (X_valid, y_valid, w_valid).")
    Xv = _as_matrix(eval_set[0], "eval_set X")
    if Xv.shape[1] != X.shape[1]:
        raise ValueError(f"eval_set X has {Xv.shape[1]} features but X has {X.shape[1]}.")
    yv = _as_vector(eval_set[1], Xv.shape[0], "eval_set y", "eval_set X")
    _check_labels_finite(yv, "eval_set y")
    if label_check is not None:
        label_check(yv, "eval_set y")
    wv = (np.ones((Xv.shape[0],), np.float32) if len(eval_set) == 2
          else _as_vector(eval_set[2], Xv.shape[0], "eval_set weights", "eval_set X"))
    return borders, X_binned, binning.bin_features(Xv, borders), yv, wv


@jax.jit
def _baseline(loss, y, w):
    return losses_lib.baseline(loss, y, w)


def _check_predict_X(model: Booster, X):
    if isinstance(X, jax.Array):  # a device array (or a tracer): no round trip through the host
        if X.ndim != 2:
            raise ValueError(f"X must be 2-D (n_samples, n_features); got shape {X.shape}.")
        if not (jnp.issubdtype(X.dtype, jnp.number) or X.dtype == bool):
            raise TypeError(f"X must be numeric (float, int or bool); got dtype {X.dtype}.")
        Xa = X
    else:
        Xa = _as_matrix(X, "X")
    if Xa.shape[1] != model.n_features:
        raise ValueError(f"X has {Xa.shape[1]} features, but the model was fitted on {model.n_features}.")
    return Xa


def _predict_raw(trees, X):
    """Host arrays go to one device with ``jax.device_put`` (on CPU it shares a suitably aligned
    numpy buffer instead of copying it); a model fitted on several devices (replicated there) is
    brought to that device too, rather than every device predicting every row. Column-major
    arrays (Fortran order, or row slices of one: each column contiguous) go feature-major, as
    whole columns instead of a transposition."""
    if not isinstance(X, np.ndarray):
        return tree_lib.predict_raw(trees, X)
    leaves = trees.leaf_values
    device = None
    if isinstance(leaves, jax.Array) and not _is_traced(leaves) and len(leaves.sharding.device_set) > 1:
        device = min(leaves.sharding.device_set, key=lambda d: d.id)
        trees = jax.device_put(trees, device)
    if X.shape[0] > 1 and X.strides[0] == X.itemsize:
        return tree_lib.predict_raw_feature_major(trees, jax.device_put(np.ascontiguousarray(X.T), device))
    return tree_lib.predict_raw(trees, jax.device_put(np.ascontiguousarray(X), device))


def predict(model: Booster, X, n_rounds: Optional[int] = None):
    """Raw scores: ``(n,)`` for one-output losses, ``(n, K)`` otherwise.

    Args:
      model: a :class:`Booster` (batched boosters from ``jax.vmap(fit)`` work under ``jax.vmap``).
      X: ``(n, n_features)``; NaN is missing.
      n_rounds: use only the first ``n_rounds`` rounds (staged prediction).
    """
    X = _check_predict_X(model, X)
    trees = model.trees
    if n_rounds is not None:
        n_rounds = _check_int(n_rounds, "n_rounds", 0, model.n_rounds)
        trees = jax.tree_util.tree_map(lambda a: a[:n_rounds], trees)
    raw = model.baseline + _predict_raw(trees, X)
    return raw[:, 0] if model.n_outputs == 1 else raw


def predict_proba(model: Booster, X, n_rounds: Optional[int] = None):
    """Class probabilities ``(n, n_classes)`` through the loss's link (classification losses)."""
    if model.loss.task not in ("binary", "multiclass"):
        raise ValueError(f"predict_proba needs a classification loss; {model.loss.name!r} is "
                         f"{model.loss.task!r} (use predict or predict_mean).")
    raw = predict(model, X, n_rounds)
    return model.loss.link(raw, **model.loss.params)


def predict_class(model: Booster, X, n_rounds: Optional[int] = None):
    """Predicted class labels ``(n,)`` (argmax of :func:`predict_proba`)."""
    return jnp.argmax(predict_proba(model, X, n_rounds), axis=-1)


def predict_mean(model: Booster, X, n_rounds: Optional[int] = None):
    """The loss's link applied to the raw score (the mean for Poisson, identity for regression)."""
    raw = predict(model, X, n_rounds)
    return model.loss.link(raw, **model.loss.params)


def feature_importance(model: Booster) -> jax.Array:
    """Total split gain per feature over all trees, normalised to sum to 1 ``(n_features,)``."""
    gains = model.trees.gains.reshape(-1)
    feats = model.trees.features.reshape(-1)
    total = jax.ops.segment_sum(gains, feats, num_segments=model.n_features)
    return total / jnp.maximum(jnp.sum(total), 1e-30)
