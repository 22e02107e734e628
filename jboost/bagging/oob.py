"""Out-of-bag estimates and error curves of forests and bagged boosters (ESL 15.3.1).

Each row is scored by the bags whose bootstrap weight for it is 0, by one ``lax.scan`` over bags
carrying running sums (no ``(B, n, K)`` array); with every row out of every bag the same scan
gives the error of the first ``b`` trees on any data (ESL Figure 15.1)."""

from __future__ import annotations

import functools
from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp
from jax import lax

from jboost import _compile
from jboost.data import categorical_stats, labels, tabular as tabular_lib
from jboost.losses import loss as loss_lib
from jboost.models import bagged, base
from jboost.models.forest import Forest
from jboost.trees import family


def bagged_oob(model: bagged.BaggedBoosters, X_train, y_train) -> OOBResult:
    """OOB estimates of bagged boosters (as :func:`forest_oob`), each bag with its rounds
    ``0..best_round``; optimistic when the bags stopped early on their out-of-bag rows."""
    X_train, y_train = rows_and_labels(model, X_train, y_train, "X_train", "y_train")
    classification = model.task in loss_lib.CLASSIFICATION

    def outputs(x):
        trees, baseline, params, cat = x
        rows = X_train if cat is None else categorical_stats.expand(cat, X_train)  # its statistics
        raw = baseline + family.predict_raw(trees, rows)
        out = model.loss.link(raw if model.n_outputs > 1 else raw[:, 0], **params)
        return out if out.ndim == 2 else out[:, None]

    return oob_scan(outputs, (model.best_trees(), model.baseline, model.loss.params,
                              model.categorical), model.bag_weights, jnp.asarray(y_train),
                    classification)


class OOBResult(NamedTuple):
    """Out-of-bag predictions and error curves (ESL 15.3.1).

    Attributes:
      prediction: ``(n, K)`` average of the per-bag outputs over the bags where the row is out
        of bag (NaN for a row that is never out of bag).
      votes: ``(n, K)`` fraction of those bags voting for each class (classification; NaN rows
        as above; for regression equal to ``prediction``'s shape, all NaN).
      n_oob: ``(n,)`` number of bags where the row is out of bag.
      error: ``(B,)`` after ``b + 1`` bags: misclassification rate of the averaged outputs
        (classification) or mean squared error (regression), over rows with >= 1 OOB bag so far.
      vote_error: ``(B,)`` misclassification of the majority vote (NaN for regression).
      abs_error: ``(B,)`` mean absolute error (regression; NaN for classification).
      coverage: ``(B,)`` fraction of rows with >= 1 OOB bag so far.
    """

    prediction: jax.Array
    votes: jax.Array
    n_oob: jax.Array
    error: jax.Array
    vote_error: jax.Array
    abs_error: jax.Array
    coverage: jax.Array


def oob_scan(outputs_fn: Callable, xs, bag_weights, y, classification: bool) -> OOBResult:
    """OOB predictions and error curves by one ``lax.scan`` over bags.

    Args:
      outputs_fn: ``x -> (n, K)`` the outputs of one bag for the training rows (probabilities
        or class frequencies for classification, predictions for regression).
      xs: pytree with a leading bag axis, the scanned inputs of ``outputs_fn``.
      bag_weights: ``(B, n)``; a row is out of bag for bag ``b`` iff its weight is 0.
      y: ``(n,)`` training targets (class labels 0..K-1 for classification).
      classification: static.
    """
    n = bag_weights.shape[1]
    y = jnp.asarray(y)

    def step(carry, inp):
        total, votes, count = carry
        x, wb = inp
        out = outputs_fn(x).astype(jnp.float32)
        k = out.shape[-1]
        oob = (wb == 0).astype(jnp.float32)
        total = total + oob[:, None] * out
        count = count + oob
        has = count > 0
        n_has = jnp.maximum(jnp.sum(has), 1).astype(jnp.float32)
        avg = total / jnp.maximum(count, 1.0)[:, None]
        nan = jnp.float32(jnp.nan)
        if classification:
            votes = votes + oob[:, None] * jax.nn.one_hot(jnp.argmax(out, -1), k, dtype=jnp.float32)
            labels = y.astype(jnp.int32)
            err = jnp.sum(has & (jnp.argmax(avg, -1) != labels)).astype(jnp.float32) / n_has
            verr = jnp.sum(has & (jnp.argmax(votes, -1) != labels)).astype(jnp.float32) / n_has
            aerr = nan
        else:
            r = jnp.where(has, avg[:, 0] - y, 0.0)
            err = jnp.sum(r * r) / n_has
            aerr = jnp.sum(jnp.abs(r)) / n_has
            verr = nan
        cov = jnp.mean(has.astype(jnp.float32))
        return (total, votes, count), (err.astype(jnp.float32), verr.astype(jnp.float32),
                                       aerr.astype(jnp.float32), cov)

    k = jax.eval_shape(outputs_fn, jax.tree_util.tree_map(lambda a: a[0], xs)).shape[-1]
    init = (jnp.zeros((n, k), jnp.float32), jnp.zeros((n, k), jnp.float32), jnp.zeros((n,), jnp.float32))
    (total, votes, count), (err, verr, aerr, cov) = lax.scan(step, init, (xs, bag_weights))
    has = (count > 0)[:, None]
    denom = jnp.maximum(count, 1.0)[:, None]
    pred = jnp.where(has, total / denom, jnp.nan)
    vote_frac = jnp.where(has & classification, votes / denom, jnp.nan)
    return OOBResult(pred, vote_frac, count.astype(jnp.int32), err, verr, aerr, cov)


@functools.partial(_compile.jit, static_argnames=("classification",))
def _forest_oob(trees, bag_weights, X, y, classification: bool):
    X_t = jnp.asarray(X, jnp.float32).T
    fn = lambda t: t.leaf_values[t.leaf_index_raw(X_t)]
    return oob_scan(fn, trees, bag_weights, y, classification)


def rows_and_labels(model, X, y, x_name: str, y_name: str):
    """Rows ``X`` (a DataFrame's columns matched by the model's feature names; with categorical
    columns, rows as users hold them) and labels ``y`` mapped to the model's ``classes``."""
    X = base.checked_rows(model, X, x_name)
    classes = getattr(model, "classes", None)
    if classes is not None:
        y = labels.class_codes(tabular_lib.series_values(y), classes.array, y_name)
    y = labels.as_labels(y, X.shape[0], y_name, x_name)
    return jnp.asarray(X, jnp.float32), jnp.asarray(y, jnp.float32)


def forest_oob(forest: Forest, X_train, y_train) -> OOBResult:
    """OOB predictions and OOB error against the number of trees, for the forest's training data.

    ``X_train, y_train`` must be the rows the forest was fitted on, in the same order
    (``forest.bag_weights[b, i]`` is row ``i``'s bootstrap weight in tree ``b``)."""
    X_train, y_train = rows_and_labels(forest, X_train, y_train, "X_train", "y_train")
    if X_train.shape[0] != forest.bag_weights.shape[1]:
        raise ValueError(f"X_train has {X_train.shape[0]} rows but the forest was fitted on "
                         f"{forest.bag_weights.shape[1]}.")
    return _forest_oob(forest.trees, forest.bag_weights, X_train, y_train,
                       classification=forest.is_classifier)


def forest_staged(forest: Forest, X, y) -> OOBResult:
    """Errors of the first ``b = 1..B`` trees on any rows ``(X, y)`` (ESL Figure 15.1's curves):
    the OOB scan with every row out of every bag; ``prediction`` is the full average."""
    X, y = rows_and_labels(forest, X, y, "X", "y")
    zeros = jnp.zeros((forest.n_trees, X.shape[0]), jnp.float32)
    return _forest_oob(forest.trees, zeros, X, y, classification=forest.is_classifier)


def oob_from_outputs(outputs, bag_weights, y, classification: bool) -> OOBResult:
    """OOB estimates from precomputed per-bag outputs ``(B, n, K)`` of any bagged learner."""
    return oob_scan(lambda o: o, jnp.asarray(outputs, jnp.float32), jnp.asarray(bag_weights), y,
                    classification)
