"""Real AdaBoost.MH (Schapire and Singer 1999) with domain-partitioning trees, written for the
``multiclass_table`` experiment as one round function on jboost's boosting scaffold (the
extension point of docs/extending.md: ``jboost.engine.algorithm.Algorithm(round, init)`` run by
``jboost.engine.boosting.boost``). Not part of jboost: ``jboost.algorithms`` has no AdaBoost.MH.

The algorithm (Schapire and Singer 1999, Sections 4.2 and 7 / Figure 5, "AdaBoost.MH" with
real-valued predictions on a partition of the domain):

* the weights ``D(i, l)`` live on (row, class) pairs, ``n x K`` of them, uniform at the start
  (``f = 0``), normalised to sum to 1 after every round (kept in log space: no underflow over
  600 rounds);
* ``Y(i, l) = +1`` for the row's class, ``-1`` for the others (the K one-vs-all codings);
* the weak learner partitions the rows (here: a loss-guided tree of ``max_leaves`` leaves, the
  same partition for every class); in block ``j``, ``W+_jl`` / ``W-_jl`` are the weights of the
  pairs with ``Y = +1`` / ``-1``, and the tree's splits minimise Schapire and Singer's
  ``Z = 2 sum_j sum_l sqrt(W+_jl W-_jl)`` (a jboost ``SplitCriterion`` whose node score is
  ``(sqrt(W+) - sqrt(W-))^2`` summed over the classes: ``W = W+ + W-`` is additive, so a split's
  gain is the decrease of ``Z``), best first;
* each leaf predicts ``c_jl = 1/2 ln((W+_jl + eps) / (W-_jl + eps))`` (their smoothed
  confidences, ``eps = 1 / (n K)``, the initial weight of one pair: "on the order of 1/m"), no
  learning rate; ``D(i, l) <- D(i, l) exp(-Y(i, l) c_{j(i) l})``, renormalised;
* the class is ``argmax_l f(x, l)``, ``f = sum_t c^{(t)}``.

Tested (tests/test_adaboost_mh.py): three rounds of stumps on 300 rows of integer features, 3
classes: each round's split is the brute-force minimiser of ``Z`` over every feature and
threshold, and its leaf values match a NumPy transcription of the above.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

import jboost
from jboost.algorithms import _common
from jboost.engine import algorithm, boosting as boosting_lib
from jboost.models import booster as booster_lib
from jboost.trees import family as family_lib, splits as splits_lib


def _w_pm(G, H):
    """``(W+, W-)`` of nodes with gradient and hessian sums of ``g = -D Y``, ``h = D``."""
    return jnp.maximum(0.5 * (H - G), 0.0), jnp.maximum(0.5 * (H + G), 0.0)


def z_score(G, H, l2):
    """Node score ``(sqrt(W+) - sqrt(W-))^2 = W - 2 sqrt(W+ W-)``: a split's gain is the fall of
    Schapire and Singer's ``Z`` (``W`` is additive)."""
    wp, wm = _w_pm(G, H)
    return (jnp.sqrt(wp) - jnp.sqrt(wm)) ** 2


def _confidence(wp, wm, eps):
    return 0.5 * (jnp.log(wp + eps) - jnp.log(wm + eps))


def z_value(G, H, l2):
    """The tree's own leaf value (the round replaces it by the smoothed confidence)."""
    wp, wm = _w_pm(G, H)
    return _confidence(wp, wm, 1e-12)


Z_CRITERION = splits_lib.SplitCriterion(score=z_score, value=z_value, name="schapire_singer_z")


def _coding(y, k):
    return 2.0 * jax.nn.one_hot(y.astype(jnp.int32), k, dtype=jnp.float32) - 1.0


def mh_init(data, loss):
    """``log D`` ``(n, K)``: the sample weights spread over the K classes, summing to 1."""
    k = loss.n_outputs
    log_w = jnp.broadcast_to(jnp.log(data.w)[:, None], (data.w.shape[0], k))
    return (log_w - jax.nn.logsumexp(log_w),)


def mh_round(r: algorithm.Round) -> algorithm.RoundResult:
    k = r.raw.shape[-1]
    (log_w,) = r.extra
    n_pairs = jnp.sum(r.data.w > 0).astype(jnp.float32) * k
    d = jnp.exp(log_w) * r.sample[:, None]                       # (n, K) D(i, l), sums to 1
    yk = _coding(r.data.y, k)
    tree, leaf = algorithm.grow_trees(r, -d * yk, d)             # splits by Z
    n_leaves = tree.leaf_values.shape[-2]
    wp = jax.ops.segment_sum(jnp.where(yk > 0, d, 0.0), leaf, num_segments=n_leaves)
    wm = jax.ops.segment_sum(jnp.where(yk < 0, d, 0.0), leaf, num_segments=n_leaves)
    c = _confidence(wp, wm, 1.0 / n_pairs)                       # (L, K)
    log_w = log_w - yk * c[leaf]
    log_w = log_w - jax.nn.logsumexp(log_w)
    z = 2.0 * jnp.sum(jnp.sqrt(wp * wm))                         # Schapire-Singer's Z_t
    trees, leaves = algorithm.one_tree(tree._replace(leaf_values=c), leaf)
    return algorithm.RoundResult(trees, leaves, (log_w,), _common.info(1.0, z))


MH = algorithm.Algorithm(mh_round, mh_init)


def _mh_loss_fn(y, raw):
    """Schapire and Singer's Hamming-loss bound ``sum_l exp(-Y_l f_l)`` of one row."""
    return jnp.sum(jnp.exp(-_coding(y, raw.shape[-1]) * raw))


def _zero_baseline(y, w, n_outputs):
    return jnp.zeros((n_outputs,), jnp.float32)


def adaboost_mh(X, y, *, n_classes, n_rounds, n_bins=256, key=0, tree_family="lossguide",
                depth=None, max_leaves=None):
    """Real AdaBoost.MH on loss-guided trees of ``max_leaves`` leaves (or depth-wise trees of
    ``depth``): a :class:`jboost.Booster` (raw score ``f (n, K)``; ``jboost.predict_class`` is
    ``argmax f``; ``info["err"]`` is each round's ``Z_t``)."""
    config, hyper = jboost.fitting.settings.settings(
        n_rounds=n_rounds, depth=depth, n_bins=n_bins, learning_rate=1.0, l2=0.0,
        min_split_gain=0.0, min_child_weight=0.0, subsample=1.0, colsample=1.0, algorithm=MH,
        split_criterion=Z_CRITERION, tree_family=tree_family, max_leaves=max_leaves)
    data, borders, k = _common.prepare_classes(np.asarray(X, np.float32), np.asarray(y), n_classes,
                                               n_bins=n_bins)
    config = config._replace(missing=bool(np.isnan(np.asarray(X, np.float32)).any()))
    loss = jboost.Loss(_mh_loss_fn, name="adaboost_mh_exponential", n_outputs=k, task="multiclass",
                       baseline=_zero_baseline, hessian="autodiff")
    init_raw = jnp.zeros((k,), jnp.float32)
    out = boosting_lib.boost(data, jax.random.PRNGKey(key), hyper, loss, init_raw, config=config)
    return booster_lib.Booster(trees=family_lib.with_borders(out.trees, borders), borders=borders,
                               baseline=init_raw, loss=out.final_loss, train_loss=out.train_loss,
                               valid_loss=out.valid_loss, info=dict(out.info), best_round=None)
