"""Combining models: averaging, weighted averaging, stacking, error-correcting output codes.

* :func:`average`, :func:`weighted_average`: committee averages (ESL 8.8).
* :func:`error_weights`: weights fixed a priori from each model's training error,
  ``w_m ∝ exp(-beta * err_m)`` (exponential-weights aggregation; ESL 8.8 motivates
  posterior-like weights ``∝ exp(-BIC_m / 2)``).
* :func:`fit_simplex_weights`: weights trained on a validation set with optax, parameterised
  as ``softmax(logits)`` so they stay on the simplex (Breiman 1996, "Stacked regressions":
  non-negative weights summing to one).
* Stacking (Wolpert 1992; Breiman 1996; ESL 8.8): a second-tier learner fitted on out-of-fold
  predictions. The folds are weight masks ``(n_folds, n)`` (0 = held out) and every base
  learner of every fold -- plus the final all-data fit -- is ONE vmapped call of
  :func:`jboost.boosting.boost` (:func:`cross_fit_boosters`). The second tier is a regularised
  linear / logistic / softmax model trained with optax L-BFGS (:func:`fit_linear`), or any
  jboost learner fitted on the out-of-fold features.
* Error-correcting output codes (Dietterich and Bakiri 1995): a
  ``(K, L)`` 0/1 code matrix, one binary learner per bit, all ``L`` fitted in one vmapped
  call with the per-bit labels as a traced ``(L, n)`` array, decoded by the nearest codeword
  (Hamming distance on signs, or L1 distance on probabilities; Allwein, Schapire and Singer
  2000 for loss-based decoding).
"""

from __future__ import annotations

import functools
import numbers
from typing import NamedTuple, Optional, Sequence

import jax
import jax.numpy as jnp
import numpy as np
import optax

from jboost import bagging
from jboost import _validation
from jboost import cv
from jboost import _batching
from jboost import binning
from jboost import boosting
from jboost import losses as losses_lib
from jboost import tree as tree_lib

OBJECTIVES = ("squared_error", "log_loss")
LINEAR_TASKS = ("regression", "binary", "multiclass")


# --------------------------------------------------------------------------------------------
# Averages.
# --------------------------------------------------------------------------------------------


def average(predictions) -> jax.Array:
    """Simple committee average over the leading (model) axis: ``(M, ...) -> (...)``."""
    return jnp.mean(jnp.asarray(predictions, jnp.float32), axis=0)


def weighted_average(predictions, weights) -> jax.Array:
    """``sum_m w_m p_m`` over the leading axis; ``weights`` ``(M,)`` (not renormalised)."""
    predictions = jnp.asarray(predictions, jnp.float32)
    weights = jnp.asarray(weights, jnp.float32)
    if weights.ndim != 1 or weights.shape[0] != predictions.shape[0]:
        raise ValueError(f"weights has shape {weights.shape}; expected ({predictions.shape[0]},) "
                         "(one per model on the leading axis of predictions).")
    return jnp.tensordot(weights, predictions, axes=1)


def error_weights(errors, beta) -> jax.Array:
    """A-priori weights ``w_m = exp(-beta err_m) / sum_j exp(-beta err_j)`` (traced ``beta``).

    ``beta = 0`` gives the simple average; ``beta -> inf`` selects the model of least error.
    """
    errors = jnp.asarray(errors, jnp.float32)
    if errors.ndim != 1:
        raise ValueError(f"errors must be 1-D (one per model); got shape {errors.shape}.")
    return jax.nn.softmax(-jnp.asarray(beta, jnp.float32) * errors)


# --------------------------------------------------------------------------------------------
# Simplex weights learnt with optax.
# --------------------------------------------------------------------------------------------


class SimplexWeights(NamedTuple):
    weights: jax.Array   # (M,) on the simplex
    logits: jax.Array    # (M,) weights = softmax(logits)
    losses: jax.Array    # (n_steps,) objective before each step


def _mixture_loss(objective: str, mix, y, w):
    if objective == "squared_error":
        r = mix - (y if mix.ndim == 1 else y.reshape(mix.shape))
        per = r * r if r.ndim == 1 else jnp.sum(r * r, axis=-1)
    else:  # log_loss of mixed class probabilities (M, n, K)
        p = jnp.take_along_axis(mix, y.astype(jnp.int32)[:, None], axis=-1)[:, 0]
        per = -jnp.log(jnp.clip(p, 1e-12, 1.0))
    return jnp.sum(w * per) / jnp.sum(w)


@functools.partial(jax.jit, static_argnames=("objective", "n_steps"))
def fit_simplex_weights(predictions, y, *, objective: str = "squared_error", n_steps: int = 300,
                        learning_rate=0.1, sample_weight=None) -> SimplexWeights:
    """Weights on the simplex minimising the validation loss of the weighted average.

    Adam on ``logits`` (zero: the uniform average to start), ``weights = softmax(logits)``.

    Args:
      predictions: ``(M, n)`` or ``(M, n, K)`` validation predictions of ``M`` models (class
        probabilities ``(M, n, K)`` for ``objective="log_loss"``).
      y: ``(n,)`` targets (or ``(n, K)`` for vector regression); class labels for log loss.
      objective: ``"squared_error"`` (Breiman's stacked regression) or ``"log_loss"``.
      n_steps: optimiser steps (static); learning_rate: traced.
      sample_weight: optional ``(n,)`` weights of the validation rows.
    """
    if objective not in OBJECTIVES:
        raise ValueError(f"objective={objective!r} must be one of {OBJECTIVES}.")
    predictions = jnp.asarray(predictions, jnp.float32)
    y = jnp.asarray(y, jnp.float32)
    n = predictions.shape[1]
    w = jnp.ones((n,), jnp.float32) if sample_weight is None else jnp.asarray(sample_weight, jnp.float32)

    def objective_fn(logits):
        return _mixture_loss(objective, jnp.tensordot(jax.nn.softmax(logits), predictions, axes=1), y, w)

    opt = optax.adam(learning_rate)
    logits0 = jnp.zeros((predictions.shape[0],), jnp.float32)

    def step(carry, _):
        logits, state = carry
        value, grad = jax.value_and_grad(objective_fn)(logits)
        updates, state = opt.update(grad, state, logits)
        return (optax.apply_updates(logits, updates), state), value

    (logits, _), values = jax.lax.scan(step, (logits0, opt.init(logits0)), None, length=n_steps)
    return SimplexWeights(jax.nn.softmax(logits), logits, values)


# --------------------------------------------------------------------------------------------
# Folds as weight masks.
# --------------------------------------------------------------------------------------------


# --------------------------------------------------------------------------------------------
# Second-tier linear models trained with optax.
# --------------------------------------------------------------------------------------------


class LinearModel(NamedTuple):
    coef: jax.Array       # (P, K)
    intercept: jax.Array  # (K,)


def linear_raw(model: LinearModel, Z) -> jax.Array:
    """Raw scores ``Z @ coef + intercept`` ``(n, K)``."""
    return jnp.asarray(Z, jnp.float32) @ model.coef + model.intercept


def _linear_per_sample(task: str):
    if task == "regression":
        return lambda y, f: losses_lib.squared_error_fn(y, f[0])
    if task == "binary":
        return lambda y, f: losses_lib.binomial_deviance_fn(y, f[0])
    return losses_lib.multinomial_deviance_fn


@functools.partial(jax.jit, static_argnames=("task", "n_outputs", "n_steps"))
def fit_linear(Z, y, *, task: str, n_outputs: int = 1, l2=1e-3, n_steps: int = 200,
               sample_weight=None) -> LinearModel:
    """Regularised linear (squared error), logistic or softmax regression by optax L-BFGS.

    Minimises ``sum_i w_i loss(y_i, z_i^T B + b) / sum_i w_i + l2/2 ||B||^2`` (intercept not
    penalised): the convex second-tier model of stacking (ESL 8.8 with a ridge penalty,
    LeBlanc and Tibshirani 1996).

    Args:
      Z: ``(n, P)`` features (e.g. out-of-fold raw scores of the base learners).
      y: ``(n,)`` targets; 0/1 for ``"binary"``; 0..K-1 for ``"multiclass"``.
      task: ``"regression"``, ``"binary"`` or ``"multiclass"`` (static).
      n_outputs: K (1 for regression and binary; the number of classes for multiclass).
      l2: traced ridge penalty. n_steps: L-BFGS iterations (static).
    """
    if task not in LINEAR_TASKS:
        raise ValueError(f"task={task!r} must be one of {LINEAR_TASKS}.")
    Z = jnp.asarray(Z, jnp.float32)
    y = jnp.asarray(y, jnp.float32)
    w = jnp.ones_like(y) if sample_weight is None else jnp.asarray(sample_weight, jnp.float32)
    per = _linear_per_sample(task)
    params0 = LinearModel(jnp.zeros((Z.shape[1], n_outputs), jnp.float32),
                          jnp.zeros((n_outputs,), jnp.float32))

    def objective(params):
        raw = linear_raw(params, Z)
        data = jnp.sum(w * jax.vmap(per)(y, raw)) / jnp.sum(w)
        return data + 0.5 * l2 * jnp.sum(params.coef ** 2)

    return losses_lib.lbfgs_minimize(objective, params0, n_steps)


# --------------------------------------------------------------------------------------------
# Stacking of boosted learners.
# --------------------------------------------------------------------------------------------


def stack_hyperparams(hypers: Sequence[dict]) -> boosting.Hyperparams:
    """``M`` dicts of :class:`jboost.Hyperparams` fields -> one Hyperparams with ``(M,)`` leaves."""
    made = [boosting.Hyperparams.create(**h) for h in hypers]
    return jax.tree_util.tree_map(lambda *a: jnp.stack(a), *made)


@functools.partial(jax.jit, static_argnames=("config",))
def cross_fit_boosters(X_binned, y, w, key, masks, hypers: boosting.Hyperparams,
                       loss: losses_lib.Loss, *, config: boosting.BoostConfig):
    """Every (fold, learner) boosting fit in one vmapped call.

    Learner ``m`` of fold ``s`` is :func:`jboost.boosting.boost` with sample weights
    ``w * masks[s]``, hyperparameters ``hypers[m]`` and key ``fold_in(key, m)`` (the same in
    every fold), from the optimal constant on those weights.

    Returns:
      ``(trees, baselines)``: trees with leading axes ``(S, M, n_rounds, trees_per_round)``
      (bin thresholds only) and ``(S, M, K)`` baselines.
    """
    n_features = X_binned.shape[0]
    empty_X = jnp.zeros((n_features, 0), X_binned.dtype)
    empty = jnp.zeros((0,), jnp.float32)
    n_learners = jax.tree_util.tree_leaves(hypers)[0].shape[0]
    keys = jax.vmap(lambda m: jax.random.fold_in(key, m))(jnp.arange(n_learners))

    def one(mask, hyper, k):
        wm = w * mask
        init = losses_lib.baseline(loss, y, wm)
        out = boosting.boost(boosting.Data.train_only(X_binned, y, wm), k, hyper, loss, init, config=config)
        return out.trees, init

    per_learner = jax.vmap(one, in_axes=(None, 0, 0))
    return jax.vmap(per_learner, in_axes=(0, None, None))(masks, hypers, keys)


def raw_scores(trees: tree_lib.ObliviousTrees, baselines, X, n_lead: int) -> jax.Array:
    """Raw scores of ensembles batched over ``n_lead`` leading axes: ``(*lead, n, K)``."""
    fn = lambda t, b: b + tree_lib.predict_raw(t, X)
    for _ in range(n_lead):
        fn = jax.vmap(fn)
    return fn(trees, baselines)


class StackedBoosters(NamedTuple):
    """Base boosters fitted on all rows plus a linear second tier on their raw scores.

    Attributes:
      trees: ObliviousTrees with leading axes ``(M, n_rounds, trees_per_round)``.
      borders: ``(F, n_bins - 1)``.
      baseline: ``(M, K)``.
      stacker: :class:`LinearModel` on the ``(n, M*K)`` raw scores.
      oof_raw: ``(n_train, M, K)`` the out-of-fold raw scores the stacker was trained on.
      loss: the base learners' :class:`jboost.Loss`.
    """

    trees: tree_lib.ObliviousTrees
    borders: jax.Array
    baseline: jax.Array
    stacker: LinearModel
    oof_raw: jax.Array
    loss: losses_lib.Loss


def _stack_task(loss: losses_lib.Loss) -> str:
    if loss.task in ("binary", "multiclass"):
        return loss.task
    return "regression"


def fit_stacked_boosters(
    X,
    y,
    loss="squared_error",
    *,
    hypers: Sequence[dict],
    n_folds: int = 5,
    n_rounds: int = 100,
    depth: int = 4,
    n_bins: int = 256,
    stacker_l2=1e-3,
    stacker_steps: int = 200,
    key=0,
) -> StackedBoosters:
    """Stacking (Wolpert 1992; ESL 8.8) of ``M`` boosters differing in traced hyperparameters.

    1. Fold masks ``(n_folds, n)`` plus one all-ones mask; ONE call of
       :func:`cross_fit_boosters` fits all ``(n_folds + 1) * M`` ensembles.
    2. Out-of-fold raw scores ``(n, M, K)``: row ``i`` is scored by the fold models whose weight
       for ``i`` is 0 (:func:`out_of_fold`).
    3. :func:`fit_linear` on the flattened out-of-fold raw scores (logistic / softmax / linear).
    4. The final base learners are the all-data fits.

    Args:
      hypers: ``M`` dicts of :class:`jboost.Hyperparams` fields (learning_rate, l2, ...).
      Other arguments as in :func:`jboost.fit`.
    """
    X = np.asarray(X, np.float32)
    y = np.asarray(y, np.float32)
    if X.ndim != 2 or y.shape != (X.shape[0],):
        raise ValueError(f"X must be (n, F) and y (n,); got {X.shape} and {y.shape}.")
    if isinstance(n_folds, bool) or not isinstance(n_folds, numbers.Integral) or n_folds < 2:
        raise ValueError(f"n_folds={n_folds} must be an int >= 2.")
    if len(hypers) < 1:
        raise ValueError("hypers must list at least one base learner.")
    loss_obj = losses_lib.get(loss)
    if loss_obj.n_outputs is None:
        loss_obj = loss_obj.replace(n_outputs=max(2, int(y.max()) + 1))
    losses_lib.check_labels(loss_obj, y)
    k_folds, k_fit = jax.random.split(bagging._as_key(key))
    n = X.shape[0]
    ids = cv.fold_ids(y, n_folds, seed=[int(v) for v in _validation.as_raw_key(k_folds)],
                      stratified=loss_obj.task in _validation.CLASSIFICATION)
    masks = jnp.concatenate([cv.fold_masks(ids, n_folds), jnp.ones((1, n), jnp.float32)])
    borders = jnp.asarray(binning.compute_borders(X, n_bins))
    X_binned = binning.bin_features(X, borders)
    config = boosting.BoostConfig(n_rounds=n_rounds, depth=depth, n_bins=n_bins)
    y_j = jnp.asarray(y)
    trees, baselines = cross_fit_boosters(X_binned, y_j, jnp.ones_like(y_j), k_fit, masks,
                                          stack_hyperparams(hypers), loss_obj, config=config)
    trees = tree_lib.with_borders(trees, borders)
    fold_trees = jax.tree_util.tree_map(lambda a: a[:-1], trees)
    raw = raw_scores(fold_trees, baselines[:-1], jnp.asarray(X), n_lead=2)  # (S, M, n, K)
    oof = cv.out_of_fold(jnp.swapaxes(raw, 1, 2), masks[:-1])                 # (n, M, K)
    task = _stack_task(loss_obj)
    k_out = loss_obj.n_outputs if task == "multiclass" else 1
    stacker = fit_linear(oof.reshape(n, -1), y_j, task=task, n_outputs=k_out, l2=stacker_l2,
                         n_steps=stacker_steps)
    final = jax.tree_util.tree_map(lambda a: a[-1], trees)
    return StackedBoosters(final, borders, baselines[-1], stacker, oof, loss_obj)


def stacked_predict(model: StackedBoosters, X) -> jax.Array:
    """Probabilities ``(n, n_classes)`` for classification, predictions ``(n,)`` otherwise."""
    X = jnp.asarray(X, jnp.float32)
    raw = raw_scores(model.trees, model.baseline, X, n_lead=1)   # (M, n, K)
    z = jnp.swapaxes(raw, 0, 1).reshape(X.shape[0], -1)
    out = linear_raw(model.stacker, z)
    task = _stack_task(model.loss)
    if task == "binary":
        return losses_lib.sigmoid_link(out[:, 0])
    if task == "multiclass":
        return jax.nn.softmax(out, axis=-1)
    return out[:, 0]


# --------------------------------------------------------------------------------------------
# Error-correcting output codes.
# --------------------------------------------------------------------------------------------


def exhaustive_code(n_classes: int) -> np.ndarray:
    """Dietterich and Bakiri's (1995) exhaustive code: ``(K, 2**(K-1) - 1)`` 0/1 int32.

    Class 0 is all ones; class ``c >= 1`` alternates runs of ``2**(K-1-c)`` zeros and ones.
    Every column is a distinct non-trivial two-class split and every pair of rows is
    ``2**(K-2)`` apart (Hamming). Practical for ``3 <= K <= 11``.
    """
    if isinstance(n_classes, bool) or not isinstance(n_classes, numbers.Integral) or not 3 <= n_classes <= 11:
        raise ValueError(f"n_classes={n_classes} must be an int in [3, 11] for the exhaustive code.")
    k = int(n_classes)
    j = np.arange(2 ** (k - 1) - 1)
    rows = [np.ones_like(j)] + [(j >> (k - 1 - c)) & 1 for c in range(1, k)]
    return np.stack(rows).astype(np.int32)


def min_row_distance(code) -> jax.Array:
    """Smallest Hamming distance between two codewords (rows) of ``code``."""
    code = jnp.asarray(code, jnp.int32)
    d = jnp.sum(code[:, None, :] != code[None, :, :], axis=-1)
    k = code.shape[0]
    return jnp.min(jnp.where(jnp.eye(k, dtype=bool), jnp.iinfo(jnp.int32).max, d))


@functools.partial(jax.jit, static_argnames=("n_classes", "n_bits", "n_candidates"))
def random_code(key, n_classes: int, n_bits: int, n_candidates: int = 200) -> jax.Array:
    """Random dense code ``(K, L)`` 0/1 int32: the best of ``n_candidates`` Bernoulli(1/2) draws.

    A candidate is admissible when no column is constant (each bit is a real two-class
    problem) and no two columns are equal or complementary; among admissible candidates the one
    with the largest minimal row distance wins (Dietterich and Bakiri 1995, random codes;
    Allwein et al. 2000 draw many and keep the best).
    """
    draws = jax.random.bernoulli(key, 0.5, (n_candidates, n_classes, n_bits)).astype(jnp.int32)

    def score(c):
        col_sum = jnp.sum(c, axis=0)
        nonconstant = jnp.all((col_sum > 0) & (col_sum < n_classes))
        same = jnp.all(c[:, :, None] == c[:, None, :], axis=0)
        compl = jnp.all(c[:, :, None] != c[:, None, :], axis=0)
        off = ~jnp.eye(n_bits, dtype=bool)
        distinct = ~jnp.any((same | compl) & off)
        return jnp.where(nonconstant & distinct, min_row_distance(c), -1)

    scores = jax.vmap(score)(draws)
    best = jnp.argmax(scores)
    return draws[best]


def ecoc_targets(y, code) -> jax.Array:
    """``(L, n)`` 0/1 labels of the binary problems: bit ``l`` of row ``i`` is ``code[y_i, l]``."""
    return jnp.asarray(code, jnp.float32)[jnp.asarray(y).astype(jnp.int32)].T


def decode_hamming(raw, code) -> jax.Array:
    """Nearest codeword by Hamming distance between ``raw > 0`` and the codewords: ``(n,)``.

    Args:
      raw: ``(n, L)`` real scores of the bits (positive: bit 1).
      code: ``(K, L)`` 0/1. Ties go to the lowest class index.
    """
    bits = (jnp.asarray(raw) > 0).astype(jnp.int32)
    d = jnp.sum(bits[:, None, :] != jnp.asarray(code, jnp.int32)[None], axis=-1)
    return jnp.argmin(d, axis=-1)


def decode_l1(probs, code) -> jax.Array:
    """Nearest codeword in L1 distance ``sum_l |p_l - code_kl|`` of bit probabilities: ``(n,)``."""
    d = jnp.sum(jnp.abs(jnp.asarray(probs)[:, None, :] - jnp.asarray(code, jnp.float32)[None]), axis=-1)
    return jnp.argmin(d, axis=-1)


class ECOCBoosters(NamedTuple):
    """One boosted binary learner per code bit.

    Attributes:
      trees: ObliviousTrees with leading axes ``(L, n_rounds, 1)``.
      borders: ``(F, n_bins - 1)``.
      baseline: ``(L, 1)`` each bit's constant log-odds.
      code: ``(K, L)`` the 0/1 code matrix.
    """

    trees: tree_lib.ObliviousTrees
    borders: jax.Array
    baseline: jax.Array
    code: jax.Array


@functools.partial(jax.jit, static_argnames=("config", "chunk_size"))
def fit_ecoc_binned(X_binned, y, w, key, hyper: boosting.Hyperparams, code, *,
                    config: boosting.BoostConfig, chunk_size: int):
    """All ``L`` bit learners (binomial deviance boosting) in one call.

    Bit ``l`` is :func:`jboost.boosting.boost` on labels ``code[y, l]`` (a row of the traced
    ``(L, n)`` label array) with key ``fold_in(key, l)``; bits are vmapped in chunks of
    ``chunk_size`` (:func:`jboost.bagging.map_in_chunks`).

    Returns ``(trees (L, ...), baselines (L, 1))``.
    """
    bits = ecoc_targets(y, code)
    loss = losses_lib.binomial_deviance()
    n_features = X_binned.shape[0]
    empty_X = jnp.zeros((n_features, 0), X_binned.dtype)
    empty = jnp.zeros((0,), jnp.float32)

    def one(l):
        yl = bits[l]
        init = losses_lib.baseline(loss, yl, w)
        out = boosting.boost(boosting.Data.train_only(X_binned, yl, w), jax.random.fold_in(key, l), hyper, loss, init, config=config)
        return out.trees, init

    return _batching.map_in_chunks(one, code.shape[1], chunk_size)


def fit_ecoc_boosters(X, y, code, *, n_rounds: int = 100, depth: int = 4, learning_rate=0.1,
                      l2=1.0, min_child_weight=1.0, subsample=1.0, colsample=1.0,
                      n_bins: int = 256, key=0, chunk_size: Optional[int] = None) -> ECOCBoosters:
    """Fit an ECOC multiclass model (Dietterich and Bakiri 1995) with boosted bit learners.

    Args:
      X: ``(n, F)``; y: ``(n,)`` class labels ``0..K-1``.
      code: ``(K, L)`` 0/1 code matrix (:func:`exhaustive_code`, :func:`random_code`).
      chunk_size: bits fitted together per ``vmap`` (default: all).
      Other arguments as in :func:`jboost.fit` (binomial deviance per bit).
    """
    X = np.asarray(X, np.float32)
    y = np.asarray(y, np.float32)
    code = np.asarray(code)
    if code.ndim != 2 or not np.all(np.isin(code, (0, 1))):
        raise ValueError(f"code must be a (n_classes, n_bits) 0/1 matrix; got shape {code.shape}.")
    if X.ndim != 2 or y.shape != (X.shape[0],):
        raise ValueError(f"X must be (n, F) and y (n,); got {X.shape} and {y.shape}.")
    if np.any(y != np.round(y)) or np.any(y < 0) or np.any(y >= code.shape[0]):
        raise ValueError(f"y must hold class labels in [0, {code.shape[0]}) (the rows of code).")
    n_bits = code.shape[1]
    chunk_size = n_bits if chunk_size is None else min(int(chunk_size), n_bits)
    borders = jnp.asarray(binning.compute_borders(X, n_bins))
    X_binned = binning.bin_features(X, borders)
    hyper = boosting.Hyperparams.create(learning_rate, l2, 0.0, min_child_weight, subsample, colsample)
    config = boosting.BoostConfig(n_rounds=n_rounds, depth=depth, n_bins=n_bins)
    y_j = jnp.asarray(y)
    trees, init = fit_ecoc_binned(X_binned, y_j, jnp.ones_like(y_j), bagging._as_key(key), hyper,
                                  jnp.asarray(code, jnp.int32), config=config, chunk_size=chunk_size)
    return ECOCBoosters(tree_lib.with_borders(trees, borders), borders, init,
                        jnp.asarray(code, jnp.int32))


def ecoc_bit_scores(model: ECOCBoosters, X) -> jax.Array:
    """Raw log-odds of every bit ``(n, L)``."""
    raw = raw_scores(model.trees, model.baseline, jnp.asarray(X, jnp.float32), n_lead=1)  # (L, n, 1)
    return raw[:, :, 0].T


def ecoc_predict(model: ECOCBoosters, X, decoding: str = "l1") -> jax.Array:
    """Class labels ``(n,)``: nearest codeword, ``"l1"`` on probabilities or ``"hamming"`` on signs."""
    raw = ecoc_bit_scores(model, X)
    if decoding == "l1":
        return decode_l1(jax.nn.sigmoid(raw), model.code)
    if decoding == "hamming":
        return decode_hamming(raw, model.code)
    raise ValueError(f"decoding={decoding!r} must be 'l1' or 'hamming'.")

out_of_fold = cv.out_of_fold
