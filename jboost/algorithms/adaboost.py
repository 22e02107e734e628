"""Discrete AdaBoost.M1 (ESL Algorithm 10.1) and its multi-class extensions SAMME and SAMME.R
(Zhu, Zou, Rosset and Hastie 2009, "Multi-class AdaBoost", Algorithms 2 and 4) as ``round``
functions on the boosting scaffold. See docs/algorithms.md."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from jboost.algorithms import _common
from jboost.algorithms._common import OK, PERFECT, STOPPED, WEAK
from jboost.engine import algorithm, boosting as boosting_lib, state
from jboost.fitting import settings
from jboost.losses import loss as loss_lib
from jboost.models import booster


def discrete_alpha(err, n_classes: int, err_floor, done):
    """SAMME's ``alpha = log((1 - err) / err) + log(K - 1)`` (AdaBoost.M1's for K = 2):
    ``(alpha, status, done)``. A WEAK round (``err >= 1 - 1/K``) gets ``alpha = 0``, a PERFECT
    one (``err == 0``) ``err`` floored at ``err_floor``; either way the model stops."""
    k = n_classes
    err_floor = jnp.asarray(err_floor, jnp.float32)
    weak = err >= 1.0 - 1.0 / k
    perfect = err <= 0.0
    e = jnp.clip(err, err_floor, 1.0 - err_floor)
    alpha = jnp.log((1.0 - e) / e) + jnp.log(jnp.float32(k - 1))
    status = jnp.where(done, STOPPED, jnp.where(weak, WEAK, jnp.where(perfect, PERFECT, OK)))
    alpha = jnp.where((status == OK) | (status == PERFECT), alpha, 0.0)
    return alpha, status.astype(jnp.int32), done | weak | perfect


def _record(status, err):
    """``err`` of a round, NaN for a STOPPED round (its tree was fitted but not used)."""
    return jnp.where(status == STOPPED, jnp.nan, err)


def init_discrete(data: state.Data, loss: loss_lib.Loss):
    """State of AdaBoost.M1 and SAMME before round 0: ``(log weights, done=False)``."""
    return _common.init_log_weights(data, loss), jnp.array(False)


# The names under which Booster.info keeps the state (log weights, done) after the last round.
STATE = ("log_weights", "done")


def _final_weights(extra):
    return jnp.exp(extra[0])


def adaboost_m1_round(r: algorithm.Round, *, err_floor: float = 1e-10) -> algorithm.RoundResult:
    """Round ``m`` of AdaBoost.M1 (ESL Algorithm 10.1, step 2); state ``(log_w, done)``."""
    log_w, done = r.extra
    w = jnp.exp(log_w)                                                  # sums to n
    y_pm = 2.0 * r.data.y - 1.0
    wk = w * r.sample
    # 2(a) fit G_m to the weighted data: weighted least squares of y in {-1,+1}, leaf = sign.
    tree, leaf = algorithm.grow_trees(r, (-wk * y_pm)[:, None], wk[:, None])
    vote = jnp.where(tree.leaf_values > 0, 1.0, -1.0)                  # (L, 1) G_m per leaf
    miss = (vote[leaf, 0] != y_pm).astype(jnp.float32)
    # 2(b)-(c) err_m and alpha_m = log((1 - err_m) / err_m).
    err = _common.weighted_error(w, miss)
    alpha, status, done = discrete_alpha(err, 2, err_floor, done)
    alpha = alpha * r.learning_rate
    # 2(d) w_i <- w_i exp(alpha_m I(y_i != G_m(x_i))), renormalised.
    log_w = _common.normalise_log_weights(log_w + alpha * miss)
    # f_m = beta_m G_m with beta_m = alpha_m / 2 (ESL Section 10.4): exponential-loss scale.
    tree = tree._replace(leaf_values=0.5 * alpha * vote,
                         gains=jnp.where(alpha > 0, tree.gains, 0.0))
    trees, leaves = algorithm.one_tree(tree, leaf)
    return algorithm.RoundResult(trees, leaves, (log_w, done),
                                _common.info(alpha, _record(status, err), status))


@settings.takes_settings(depth=1, learning_rate=1.0, l2=0.0, min_child_weight=0.0)
def adaboost_m1(X, y, *, n_rounds, depth, learning_rate, l2, min_split_gain, min_child_weight,
                subsample, colsample, colsample_by, err_floor=1e-10, n_bins, sample_weight,
                eval_set, key, borders, init_model, early_stopping_rounds, early_stopping_tolerance,
                eval_metric, verbose, callbacks, checkpoint_dir, checkpoint_every, base_margin,
                eval_base_margin, tree_family, max_leaves) -> booster.Booster:
    """Discrete AdaBoost.M1 (ESL Algorithm 10.1; Freund and Schapire 1997).

    A WEAK (``err_m >= 1/2``) or PERFECT (``err_m == 0``, floored at ``err_floor``, static) round
    stops the model (:func:`discrete_alpha`); published defaults (docs/algorithms.md).

    Args:
      X: ``(n, F)`` features (NaN missing).
      y: ``(n,)`` labels 0/1 (class 1 is ESL's ``+1``).
      depth: tree depth (1: stumps, as in ESL Figure 10.2).
      init_model: a model of the same algorithm to continue on the same rows.
      base_margin, eval_base_margin: refused (docs/algorithms.md says why).

    Returns:
      A :class:`jboost.Booster` (exponential loss, raw score ``sum_m (alpha_m / 2) G_m(x)``);
      ``info``: ``coef`` (``alpha_m``), ``err`` (NaN once STOPPED), ``status``, ``weights``,
      ``log_weights``, ``done`` and ``algorithm`` (docs/algorithms.md).
    """
    return _common.fit_reweighted(locals(), "adaboost_m1", adaboost_m1_round, init_discrete,
                                  binary=True, weights=_final_weights, state=STATE,
                                  err_floor=err_floor)


def _plurality_tree(r: algorithm.Round, w):
    """The K-class tree on the round's weighted rows (least squares of the one-hot labels: leaf
    values proportional to the weighted class counts), the rows its leaves' plurality classes
    miss and its weighted error: ``(tree, leaf, counts (L, K), miss (n,), err)``."""
    k = r.raw.shape[-1]
    y_int = r.data.y.astype(jnp.int32)
    wk = w * r.sample
    onehot = jax.nn.one_hot(y_int, k, dtype=jnp.float32)
    grad = -wk[:, None] * onehot
    hess = jnp.broadcast_to(wk[:, None] / k, onehot.shape)
    tree, leaf = algorithm.grow_trees(r, grad, hess)
    counts = tree.leaf_values                                           # (L, K) ∝ W_k
    cls = jnp.argmax(counts, axis=-1)                                   # weighted plurality
    miss = (cls[leaf] != y_int).astype(jnp.float32)
    return tree, leaf, counts, miss, _common.weighted_error(w, miss)


def samme_round(r: algorithm.Round, *, err_floor: float = 1e-10) -> algorithm.RoundResult:
    """Round ``m`` of SAMME (Zhu et al. Algorithm 2, step 2); state ``(log_w, done)``."""
    k = r.raw.shape[-1]
    log_w, done = r.extra
    w = jnp.exp(log_w)
    tree, leaf, counts, miss, err = _plurality_tree(r, w)
    # alpha = log((1 - err) / err) + log(K - 1).
    alpha, status, done = discrete_alpha(err, k, err_floor, done)
    alpha = alpha * r.learning_rate
    log_w = _common.normalise_log_weights(log_w + alpha * miss)
    # f_m = beta_m T_m, beta_m = (K-1)^2/K alpha_m, T_m coded (1, -1/(K-1)):
    # = (K-1) alpha_m (onehot(G_m) - 1/K).
    onehot = jax.nn.one_hot(jnp.argmax(counts, axis=-1), k, dtype=jnp.float32)
    tree = tree._replace(leaf_values=(k - 1) * alpha * (onehot - 1.0 / k),
                         gains=jnp.where(alpha > 0, tree.gains, 0.0))
    trees, leaves = algorithm.one_tree(tree, leaf)
    return algorithm.RoundResult(trees, leaves, (log_w, done),
                                _common.info(alpha, _record(status, err), status))


def samme_r_round(r: algorithm.Round, *, eps: float = 1e-6) -> algorithm.RoundResult:
    """Round ``m`` of SAMME.R (Zhu et al. Algorithm 4, step 2); state ``(log_w, done)`` (``done``
    stays False: every round is added)."""
    k = r.raw.shape[-1]
    log_w, done = r.extra
    w = jnp.exp(log_w)
    tree, leaf, counts, _, err = _plurality_tree(r, w)
    # p = weighted class proportions of the leaf, h_k = (K-1) (log p_k - mean_j log p_j).
    total = jnp.sum(counts, axis=-1, keepdims=True)
    p = jnp.where(total > 0, counts / jnp.where(total > 0, total, 1.0), 1.0 / k)
    log_p = jnp.log(jnp.clip(p, jnp.float32(eps), 1.0))
    values = r.learning_rate * (k - 1) * (log_p - jnp.mean(log_p, axis=-1, keepdims=True))
    # w_i <- w_i exp(-(K-1)/K y_i^T log p(x_i)) = w_i exp(-h_{y_i}(x_i) / (K-1)) as
    # sum_k h_k = 0 (with the learning rate on h, as in scikit-learn).
    trees, leaves = algorithm.one_tree(tree._replace(leaf_values=values), leaf)
    h = boosting_lib.round_values(trees, leaves)                              # (n, K) h(x_i)
    h_true = jnp.take_along_axis(h, r.data.y.astype(jnp.int32)[:, None], axis=1)[:, 0]
    log_w = _common.normalise_log_weights(log_w - h_true / (k - 1))
    return algorithm.RoundResult(trees, leaves, (log_w, done), _common.info(r.learning_rate, err))


@settings.takes_settings(depth=2, learning_rate=1.0, l2=0.0, min_child_weight=0.0)
def samme(X, y, *, n_classes=None, n_rounds, depth, learning_rate, l2, min_split_gain,
          min_child_weight, subsample, colsample, colsample_by, err_floor=1e-10, n_bins,
          sample_weight, eval_set, key, borders, init_model, early_stopping_rounds,
          early_stopping_tolerance, eval_metric, verbose, callbacks, checkpoint_dir,
          checkpoint_every, base_margin, eval_base_margin, tree_family,
          max_leaves) -> booster.Booster:
    """SAMME (Zhu, Zou, Rosset and Hastie 2009, Algorithm 2): multi-class discrete AdaBoost.

    As :func:`adaboost_m1` with a K-class weak learner voting its leaf's weighted plurality
    class and ``alpha_m = log((1 - err_m) / err_m) + log(K - 1)`` (docs/algorithms.md).

    Args:
      X: ``(n, F)`` features (NaN missing).
      y: ``(n,)`` labels ``0..K-1``; ``n_classes`` defaults to ``max(y) + 1``.
      init_model: a model of the same algorithm to continue on the same rows.
      base_margin, eval_base_margin: refused (docs/algorithms.md says why).

    Returns:
      A :class:`jboost.Booster`: loss ``samme_exponential``, raw score
      ``f = (K-1) sum_m alpha_m (onehot(T_m) - 1/K)``; ``info`` as :func:`adaboost_m1`'s.
    """
    return _common.fit_reweighted(locals(), "samme", samme_round, init_discrete, binary=False,
                                  weights=_final_weights, state=STATE, err_floor=err_floor)


@settings.takes_settings(depth=2, learning_rate=1.0, l2=0.0, min_child_weight=0.0)
def samme_r(X, y, *, n_classes=None, n_rounds, depth, learning_rate, l2, min_split_gain,
            min_child_weight, subsample, colsample, colsample_by, eps=1e-6, n_bins, sample_weight,
            eval_set, key, borders, init_model, early_stopping_rounds, early_stopping_tolerance,
            eval_metric, verbose, callbacks, checkpoint_dir, checkpoint_every, base_margin,
            eval_base_margin, tree_family, max_leaves) -> booster.Booster:
    """SAMME.R (Zhu, Zou, Rosset and Hastie 2009, Algorithm 4): multi-class real AdaBoost.

    Leaves hold ``h_k = (K-1) (log p_k - mean_j log p_j)`` of their weighted class proportions
    ``p_k`` (clipped below at ``eps``, static).

    Args:
      X: ``(n, F)`` features (NaN missing).
      y: ``(n,)`` labels ``0..K-1``; ``n_classes`` defaults to ``max(y) + 1``.
      eps: the clip of the leaves' class proportions (static).
      init_model: a model of the same algorithm to continue on the same rows.
      base_margin, eval_base_margin: refused (docs/algorithms.md says why).

    Returns:
      A :class:`jboost.Booster` (raw score ``sum_m h^{(m)}(x)``); ``info``: ``coef`` the
      learning rate, ``err`` the weighted error of the leaf plurality class, ``status``,
      ``weights``.
    """
    return _common.fit_reweighted(locals(), "samme_r", samme_r_round, init_discrete, binary=False,
                                  weights=_final_weights, state=STATE, eps=eps)
