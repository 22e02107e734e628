"""What every algorithm of :mod:`jboost.algorithms` shares: the fitted result, the round status
codes, host-side input checks and binning, one round's randomness, the weak-learner tree fit, and
staged (round-by-round) evaluation of a fitted model.

Every algorithm returns a :class:`Fitted`: its ``model`` is a :class:`jboost.Booster` (so
``jboost.predict``, ``predict_proba`` and ``predict_class`` work on it) whose raw score is on the
scale of the loss that the algorithm minimises in the forward-stagewise view (ESL Section 10.4;
Friedman, Hastie and Tibshirani 2000), plus per-round diagnostics.
"""

from __future__ import annotations

import functools
from typing import Any, Callable, NamedTuple, Optional

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from jboost import _validation
from jboost import api
from jboost import binning
from jboost import boosting
from jboost import losses as losses_lib
from jboost import model as model_lib
from jboost import samplers
from jboost import tree as tree_lib

# Round status codes (``Fitted.status``).
OK = 0        # the round's weak learner was added
PERFECT = 1   # err_m == 0: added with the capped weight log((1 - err_floor) / err_floor) + log(K-1); model stops
WEAK = 2      # err_m >= 1 - 1/K (no better than chance): nothing added; model stops
STOPPED = 3   # a previous round was PERFECT or WEAK: nothing added
STATUS_NAMES = ("ok", "perfect", "weak", "stopped")


class Fitted(NamedTuple):
    """A fitted ensemble and what each round did.

    Attributes:
      model: a :class:`jboost.Booster`; trees have leading axes ``(n_rounds, trees_per_round)`` and
        leaf values that already include each round's coefficient and shrinkage.
      coef: ``(n_rounds,)`` the round's coefficient: ``alpha_m`` of AdaBoost.M1 / SAMME (times the
        learning rate), ``beta_m`` of forward stagewise modelling (times the learning rate), the
        learning rate of the round otherwise; 0 for a round that added nothing.
      err: ``(n_rounds,)`` weighted training error of the round's classifier (discrete and real
        AdaBoost, SAMME, SAMME.R); NaN where the algorithm has none.
      status: ``(n_rounds,)`` int32, one of :data:`OK`, :data:`PERFECT`, :data:`WEAK`,
        :data:`STOPPED`.
      weights: ``(n_samples,)`` observation weights after the last round, normalised to sum to
        ``n_samples`` (AdaBoost family); the sample weights otherwise.
    """

    model: model_lib.Booster
    coef: jax.Array
    err: jax.Array
    status: jax.Array
    weights: jax.Array


Data = boosting.Data


# --------------------------------------------------------------------------------------------
# Host side: checks, binning, settings.
# --------------------------------------------------------------------------------------------


def check_labels(y: np.ndarray, task: str, n_classes: Optional[int], name: str = "y") -> int:
    """Check class labels (0/1 or 0..K-1) and return the number of classes K."""
    return _validation.n_classes_of(y, n_classes, name, task)


def prepare(X, y, *, sample_weight, eval_set, n_bins: int, borders,
            label_check: Optional[Callable[[np.ndarray, str], Any]] = None):
    """Check inputs (errors name the argument), compute borders and bin.

    Returns ``(Data, borders (F, n_bins-1) jax array)``. ``label_check(y, name)`` validates labels.
    """
    data = _validation.prepare(X, y, sample_weight=sample_weight, eval_set=eval_set,
                               n_bins=n_bins, borders=borders, label_check=label_check)
    return Data(*data[:6]), data.borders


def prepare_classes(X, y, n_classes, *, sample_weight, eval_set, n_bins: int, borders):
    """:func:`prepare` for K-class labels: K from ``n_classes`` or the training labels, and the
    eval-set labels checked against that K. Returns ``(Data, borders, K)``."""
    found = {}

    def label_check(v, name):
        k = check_labels(v, "multiclass", n_classes if name == "y" else found["k"], name)
        found.setdefault("k", k)

    data, borders = prepare(X, y, sample_weight=sample_weight, eval_set=eval_set, n_bins=n_bins,
                            borders=borders, label_check=label_check)
    return data, borders, found["k"]


def settings(**kwargs):
    """:func:`jboost.api.settings`: ``(BoostConfig, Hyperparams)`` from checked keyword arguments."""
    return api.settings(**kwargs)


def as_key(key):
    return _validation.as_key(key)


def finish(trees: tree_lib.ObliviousTrees, borders, baseline, loss, train_loss, valid_loss) -> model_lib.Booster:
    """Wrap fitted trees (bin thresholds) as a :class:`jboost.Booster` (float thresholds filled)."""
    return model_lib.Booster(trees=tree_lib.with_borders(trees, borders), borders=borders,
                       baseline=jnp.asarray(baseline, jnp.float32), loss=loss,
                       train_loss=train_loss, valid_loss=valid_loss)


# --------------------------------------------------------------------------------------------
# Inside the scan.
# --------------------------------------------------------------------------------------------


def round_randomness(key, m, n: int, n_features: int, config: boosting.BoostConfig,
                     hyper: boosting.Hyperparams):
    """Round ``m``'s row mask ``(n,)`` float32 (Bernoulli(subsample)) and ``(depth, F)`` column masks.

    Exactly the draws of :func:`jboost.boosting.boost` (``fold_in(key, m)`` then split), so a
    round does not depend on how many rounds follow, and same key, same draws as ``jboost.fit``.
    """
    k_rows, k_cols = jax.random.split(jax.random.fold_in(key, m))
    keep = (jax.random.uniform(k_rows, (n,)) < hyper.subsample).astype(jnp.float32)
    masks = samplers.column_masks(k_cols, n_features, config.depth, hyper.colsample,
                                  config.colsample_by)
    return keep, masks


def learning_rate(config: boosting.BoostConfig, hyper: boosting.Hyperparams, m):
    """Shrinkage of round ``m``: ``learning_rate * schedule(m)`` (ESL Section 10.12.1)."""
    lr = hyper.learning_rate
    if config.learning_rate_schedule is not None:
        lr = lr * jnp.asarray(config.learning_rate_schedule(m), jnp.float32)
    return lr


def fit_weak_tree(X_binned, grad, hess, masks, config: boosting.BoostConfig,
                  hyper: boosting.Hyperparams):
    """The shared oblivious-tree builder :func:`jboost.tree.fit_tree` with this fit's settings.

    ``grad``, ``hess``: ``(n, K)`` already multiplied by the round's weights. With
    ``grad = -w z`` and ``hess = w`` the tree is the weighted least-squares fit of ``z`` and its
    leaf values are the weighted means of ``z`` (``l2 = 0``) with the parent's value in empty leaves.
    Returns ``(tree, leaf (n,))``.
    """
    return tree_lib.fit_tree(X_binned, grad, hess, depth=config.depth, n_bins=config.n_bins,
                             l2=hyper.l2, min_split_gain=hyper.min_split_gain,
                             min_child_weight=hyper.min_child_weight, feature_masks=masks)


def valid_leaf(tree: tree_lib.ObliviousTrees, X_valid, config: boosting.BoostConfig):
    return tree_lib.leaf_index_binned(tree, X_valid, config.n_bins)


def mean_loss(loss: losses_lib.Loss, y, raw, w):
    """Weighted mean loss; NaN when there are no rows (an empty validation set)."""
    total = jnp.sum(w)
    s = jnp.sum(w * losses_lib.per_sample_losses(loss, y, raw))
    return jnp.where(total > 0, s / jnp.where(total > 0, total, 1.0), jnp.nan)


def normalise_log_weights(log_w):
    """Log weights shifted so that the weights sum to ``n`` (ESL Alg. 10.1 renormalises; in log
    space no weight overflows however many rounds pass)."""
    n = log_w.shape[0]
    return log_w - jax.nn.logsumexp(log_w) + jnp.log(jnp.float32(n))


def weighted_error(w, miss):
    """``err = sum_i w_i I(miss_i) / sum_i w_i`` (ESL Alg. 10.1, step 2(b))."""
    return jnp.sum(w * miss.astype(jnp.float32)) / jnp.sum(w)


# --------------------------------------------------------------------------------------------
# Staged evaluation of a fitted model.
# --------------------------------------------------------------------------------------------


def _round_values(trees_m: tree_lib.ObliviousTrees, X_t):
    """Sum over the trees of one round ``(T, ...)`` of their values at rows ``X_t (F, n)`` -> (n, K)."""
    leaves = jax.vmap(lambda t: tree_lib.leaf_index_raw(t, X_t))(trees_m)
    return jnp.sum(jax.vmap(lambda t, leaf: t.leaf_values[leaf])(trees_m, leaves), axis=0)


@functools.partial(jax.jit, static_argnames=("fn",))
def _staged(model: model_lib.Booster, X, fn, args):
    X_t = jnp.asarray(X, jnp.float32).T
    n = X_t.shape[1]
    raw0 = jnp.broadcast_to(model.baseline, (n, model.baseline.shape[-1]))

    def step(raw, trees_m):
        raw = raw + _round_values(trees_m, X_t)
        return raw, fn(raw, *args)

    _, out = lax.scan(step, raw0, model.trees)
    return out


def staged_metric(model: model_lib.Booster, X, fn: Callable, *args):
    """``fn(raw (n, K), *args)`` after each round, stacked: one jit-compiled scan over rounds.

    ``fn`` is static (a module-level function); ``args`` are traced arrays/pytrees. Memory is one
    ``(n, K)`` score matrix, however many rounds.
    """
    X = _validation.predict_matrix(X, model.n_features)
    return _staged(model, jnp.asarray(X), fn, args)


def classify(raw):
    """Class of each row from raw scores ``(n, K)``: ``raw > 0`` for one output, else argmax."""
    if raw.shape[-1] == 1:
        return (raw[:, 0] > 0).astype(jnp.int32)
    return jnp.argmax(raw, axis=-1).astype(jnp.int32)


def _error(raw, y):
    return jnp.mean((classify(raw) != y.astype(jnp.int32)).astype(jnp.float32))


def staged_error(model: model_lib.Booster, X, y):
    """Misclassification rate after each round ``(n_rounds,)`` (class as in :func:`classify`)."""
    return staged_metric(model, X, _error, jnp.asarray(np.asarray(y, np.float32)))


def _loss(raw, loss, y):
    return jnp.mean(losses_lib.per_sample_losses(loss, y, raw))


def staged_loss(model: model_lib.Booster, X, y):
    """Mean of ``model.loss`` on ``(X, y)`` after each round ``(n_rounds,)`` (e.g. test deviance)."""
    return staged_metric(model, X, _loss, model.loss, jnp.asarray(np.asarray(y, np.float32)))
