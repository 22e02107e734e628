"""Discrete AdaBoost.M1 (ESL Algorithm 10.1) and its multi-class extensions SAMME and SAMME.R
(Zhu, Zou, Rosset and Hastie 2009, "Multi-class AdaBoost", Algorithms 2 and 4).

The weak learner is an oblivious tree grown by the shared builder :func:`jboost.tree.fit_tree`
on the weighted training data:

* two classes (AdaBoost.M1): the structure is the weighted least-squares fit of the labels
  ``y in {-1, +1}`` (gradients ``-w y``, hessians ``w``; for two classes this is the weighted Gini
  criterion) and each leaf votes the sign of its weighted class balance (weighted majority);
* K classes (SAMME, SAMME.R): the structure is the weighted least-squares fit of the one-hot
  labels (gradients ``-w Y``, hessians ``w / K`` per class, i.e. the weighted Gini criterion again;
  for K = 2 the very same gains as AdaBoost.M1's learner) and each leaf holds its weighted class
  proportions: SAMME votes the plurality class, SAMME.R uses the proportions as probabilities.

The observation weights live in log space and are renormalised to sum to ``n`` every round, so
no weight overflows or underflows to the whole sum however long the run. Raw scores are on the
scale of the exponential loss that each algorithm fits stagewise (ESL Section 10.4; Zhu et al.
Section 2.1), so ``jboost.predict_proba`` of the returned model gives the population-minimiser
probabilities: two classes ``f = sum_m (alpha_m / 2) G_m(x)`` and ``p = 1 / (1 + e^{-2f})``;
K classes ``f = sum_m beta_m T_m(x)`` with ``T`` the ``(1, -1/(K-1))`` coding and
``p_k ∝ exp(f_k / (K-1))``. The class decisions are exactly ESL's ``sign(sum alpha_m G_m)`` and
Zhu et al.'s ``argmax_k sum_m alpha_m I(T_m(x) = k)``.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax import lax

from jboost import _validation
from jboost import api
from jboost import boosting
from jboost import losses as losses_lib
from jboost.algorithms import _common
from jboost.algorithms._common import OK, PERFECT, STOPPED, WEAK


class _State(NamedTuple):
    log_w: jax.Array      # (n,) log observation weights (weights sum to n)
    raw: jax.Array        # (n, K) raw scores of the training rows
    raw_valid: jax.Array  # (m, K)
    done: jax.Array       # bool (): a PERFECT or WEAK round has stopped the model


def discrete_alpha(err, n_classes: int, err_floor, done):
    """SAMME's ``alpha = log((1 - err) / err) + log(K - 1)`` (AdaBoost.M1's for K = 2), and status.

    ``err >= 1 - 1/K`` (no better than chance): the round is WEAK and gets ``alpha = 0``.
    ``err == 0`` (perfect on the weighted data): ``err`` is floored at ``err_floor`` so alpha is
    finite (the round is PERFECT). Either way the model stops: later rounds are STOPPED.

    Returns ``(alpha, status, done)``.
    """
    k = n_classes
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


# --------------------------------------------------------------------------------------------
# AdaBoost.M1
# --------------------------------------------------------------------------------------------


@functools.partial(jax.jit, static_argnames=("config",))
def _adaboost_m1(data: _common.Data, key, hyper: boosting.Hyperparams, err_floor, *,
                 config: boosting.BoostConfig):
    n = data.y.shape[0]
    n_features = data.X_binned.shape[0]
    y_pm = 2.0 * data.y - 1.0
    loss = losses_lib.exponential()

    def step(state: _State, m):
        w = jnp.exp(state.log_w)                                          # sums to n
        keep, masks = _common.round_randomness(key, m, n, n_features, config, hyper)
        wk = w * keep
        # 2(a) fit G_m to the weighted data: weighted least squares of y in {-1,+1}, leaf = sign.
        tree, leaf = _common.fit_weak_tree(data.X_binned, (-wk * y_pm)[:, None], wk[:, None],
                                           masks, config, hyper)
        vote = jnp.where(tree.leaf_values > 0, 1.0, -1.0)                # (L, 1) G_m per leaf
        miss = (vote[leaf, 0] != y_pm).astype(jnp.float32)
        # 2(b)-(c) err_m and alpha_m = log((1 - err_m) / err_m).
        err = _common.weighted_error(w, miss)
        alpha, status, done = discrete_alpha(err, 2, err_floor, state.done)
        alpha = alpha * _common.learning_rate(config, hyper, m)
        # 2(d) w_i <- w_i exp(alpha_m I(y_i != G_m(x_i))), renormalised.
        log_w = _common.normalise_log_weights(state.log_w + alpha * miss)
        # f_m = beta_m G_m with beta_m = alpha_m / 2 (ESL Section 10.4): exponential-loss scale.
        values = 0.5 * alpha * vote
        tree = tree._replace(leaf_values=values, gains=jnp.where(alpha > 0, tree.gains, 0.0))
        raw = state.raw + values[leaf]
        raw_valid = state.raw_valid + values[_common.valid_leaf(tree, data.X_valid, config)]
        out = (jax.tree_util.tree_map(lambda a: a[None], tree), alpha, _record(status, err),
               status, _common.mean_loss(loss, data.y, raw, data.w),
               _common.mean_loss(loss, data.y_valid, raw_valid, data.w_valid))
        return _State(log_w, raw, raw_valid, done), out

    state0 = _State(_common.normalise_log_weights(jnp.log(data.w)),
                    jnp.zeros((n, 1), jnp.float32), jnp.zeros((data.y_valid.shape[0], 1), jnp.float32),
                    jnp.array(False))
    state, outs = lax.scan(step, state0, jnp.arange(config.n_rounds))
    return state, outs


def adaboost_m1(X, y, *, n_rounds: int = 100, depth: int = 1, learning_rate=1.0, l2=0.0,
                min_split_gain=0.0, min_child_weight=0.0, subsample=1.0, colsample=1.0,
                colsample_by: str = "tree", err_floor=1e-10, n_bins: int = 256, sample_weight=None,
                eval_set=None, key=0, borders=None) -> _common.Fitted:
    """Discrete AdaBoost.M1 (ESL Algorithm 10.1; Freund and Schapire 1997) with oblivious trees.

    1. ``w_i = 1/N``. 2. For ``m = 1..M``: (a) fit a classifier ``G_m(x) in {-1,+1}`` to the
    weighted data; (b) ``err_m = sum w_i I(y_i != G_m(x_i)) / sum w_i``; (c) ``alpha_m =
    log((1 - err_m) / err_m)``; (d) ``w_i <- w_i exp(alpha_m I(y_i != G_m(x_i)))``.
    3. ``G(x) = sign(sum_m alpha_m G_m(x))``.

    A round with ``err_m >= 1/2`` adds nothing and stops the model (status WEAK); a round with
    ``err_m == 0`` is added with ``err_m`` floored at ``err_floor`` and stops the model (PERFECT);
    later rounds are STOPPED (see :func:`discrete_alpha`). ``learning_rate`` (a number or an optax
    schedule ``round -> rate``) multiplies ``alpha_m``, in the vote and in the weight update (as in
    scikit-learn). Continuous settings and ``key`` may be traced (``jax.vmap``).

    Args:
      X: ``(n, F)`` features (NaN missing). y: ``(n,)`` labels 0/1 (class 1 is ESL's ``+1``).
      depth: oblivious-tree depth (1: stumps, as in ESL Figure 10.2).
      l2, min_split_gain, min_child_weight: regularisation of the weak learner's splits (weights
        are normalised to sum to ``n``, so ``min_child_weight`` is in units of an average row).
      subsample, colsample, colsample_by: the weak learner sees a Bernoulli(subsample) subset of
        the rows and a subset of the features; ``err_m`` is measured on all rows.

    Returns:
      :class:`jboost.algorithms.Fitted`; ``coef`` is ``alpha_m`` (times the learning rate), the
      model's loss is the exponential loss and its raw score ``sum_m (alpha_m / 2) G_m(x)``.
    """
    config, hyper = _common.settings(n_rounds=n_rounds, depth=depth, n_bins=n_bins,
                                     learning_rate=learning_rate, l2=l2, min_split_gain=min_split_gain,
                                     min_child_weight=min_child_weight, subsample=subsample,
                                     colsample=colsample, colsample_by=colsample_by)
    _validation.check_real(err_floor, "err_floor", 0.0, 0.5, lo_open=True)
    data, borders = _common.prepare(
        X, y, sample_weight=sample_weight, eval_set=eval_set, n_bins=n_bins, borders=borders,
        label_check=lambda v, name: _common.check_labels(v, "binary", None, name))
    state, (trees, coef, err, status, train_loss, valid_loss) = _adaboost_m1(
        data, _common.as_key(key), hyper, jnp.asarray(err_floor, jnp.float32), config=config)
    model = _common.finish(trees, borders, jnp.zeros((1,)), losses_lib.exponential(), train_loss,
                           valid_loss)
    return _common.Fitted(model, coef, err, status, jnp.exp(state.log_w))


# --------------------------------------------------------------------------------------------
# SAMME and SAMME.R
# --------------------------------------------------------------------------------------------


def _k_class_tree(data: _common.Data, wk, masks, n_classes: int, config, hyper):
    """Weighted least-squares tree of the one-hot labels (hessian ``w / K`` per class).

    Leaf values are ``W_k / (W / K + l2)``: proportional to the weighted class counts ``W_k``.
    """
    onehot = jax.nn.one_hot(data.y.astype(jnp.int32), n_classes, dtype=jnp.float32)
    grad = -wk[:, None] * onehot
    hess = jnp.broadcast_to(wk[:, None] / n_classes, onehot.shape)
    return _common.fit_weak_tree(data.X_binned, grad, hess, masks, config, hyper)


@functools.partial(jax.jit, static_argnames=("config", "n_classes", "real"))
def _samme(data: _common.Data, key, hyper: boosting.Hyperparams, floor, *, config, n_classes: int,
           real: bool):
    n = data.y.shape[0]
    k = n_classes
    n_features = data.X_binned.shape[0]
    y_int = data.y.astype(jnp.int32)
    loss = losses_lib.samme_exponential(k)

    def step(state: _State, m):
        w = jnp.exp(state.log_w)
        keep, masks = _common.round_randomness(key, m, n, n_features, config, hyper)
        tree, leaf = _k_class_tree(data, w * keep, masks, k, config, hyper)
        counts = tree.leaf_values                                         # (L, K) ∝ W_k
        cls = jnp.argmax(counts, axis=-1)                                 # weighted plurality
        miss = (cls[leaf] != y_int).astype(jnp.float32)
        err = _common.weighted_error(w, miss)
        lr = _common.learning_rate(config, hyper, m)
        if not real:
            # SAMME (Zhu et al. Algorithm 2): alpha = log((1 - err) / err) + log(K - 1).
            alpha, status, done = discrete_alpha(err, k, floor, state.done)
            alpha = alpha * lr
            log_w = state.log_w + alpha * miss
            # f_m = beta_m T_m, beta_m = (K-1)^2/K alpha_m, T_m coded (1, -1/(K-1)):
            # = (K-1) alpha_m (onehot(G_m) - 1/K).
            onehot = jax.nn.one_hot(cls, k, dtype=jnp.float32)
            values = (k - 1) * alpha * (onehot - 1.0 / k)
            coef, gains = alpha, jnp.where(alpha > 0, tree.gains, 0.0)
        else:
            # SAMME.R (Zhu et al. Algorithm 4): p = weighted class proportions of the leaf,
            # h_k = (K-1) (log p_k - mean_j log p_j).
            total = jnp.sum(counts, axis=-1, keepdims=True)
            p = jnp.where(total > 0, counts / jnp.where(total > 0, total, 1.0), 1.0 / k)
            log_p = jnp.log(jnp.clip(p, floor, 1.0))
            values = lr * (k - 1) * (log_p - jnp.mean(log_p, axis=-1, keepdims=True))
            # w_i <- w_i exp(-(K-1)/K y_i^T log p(x_i)) = w_i exp(-h_{y_i}(x_i) / (K-1)) as
            # sum_k h_k = 0 (with the learning rate on h, as in scikit-learn).
            h_true = jnp.take_along_axis(values[leaf], y_int[:, None], axis=1)[:, 0]
            log_w = state.log_w - h_true / (k - 1)
            status, done, coef, gains = jnp.int32(OK), state.done, lr, tree.gains
        log_w = _common.normalise_log_weights(log_w)
        tree = tree._replace(leaf_values=values, gains=gains)
        raw = state.raw + values[leaf]
        raw_valid = state.raw_valid + values[_common.valid_leaf(tree, data.X_valid, config)]
        out = (jax.tree_util.tree_map(lambda a: a[None], tree), coef, _record(status, err),
               status, _common.mean_loss(loss, data.y, raw, data.w),
               _common.mean_loss(loss, data.y_valid, raw_valid, data.w_valid))
        return _State(log_w, raw, raw_valid, done), out

    state0 = _State(_common.normalise_log_weights(jnp.log(data.w)), jnp.zeros((n, k), jnp.float32),
                    jnp.zeros((data.y_valid.shape[0], k), jnp.float32), jnp.array(False))
    return lax.scan(step, state0, jnp.arange(config.n_rounds))


def _fit_samme(X, y, *, real: bool, floor, floor_name: str, floor_hi: float, n_classes, n_rounds,
               depth, learning_rate, l2, min_split_gain, min_child_weight, subsample, colsample,
               colsample_by, n_bins, sample_weight, eval_set, key, borders) -> _common.Fitted:
    config, hyper = _common.settings(n_rounds=n_rounds, depth=depth, n_bins=n_bins,
                                     learning_rate=learning_rate, l2=l2, min_split_gain=min_split_gain,
                                     min_child_weight=min_child_weight, subsample=subsample,
                                     colsample=colsample, colsample_by=colsample_by)
    _validation.check_real(floor, floor_name, 0.0, floor_hi, lo_open=True)
    data, borders, k = _common.prepare_classes(X, y, n_classes, sample_weight=sample_weight,
                                               eval_set=eval_set, n_bins=n_bins, borders=borders)
    state, (trees, coef, err, status, train_loss, valid_loss) = _samme(
        data, _common.as_key(key), hyper, jnp.asarray(floor, jnp.float32), config=config,
        n_classes=k, real=real)
    model = _common.finish(trees, borders, jnp.zeros((k,)), losses_lib.samme_exponential(k),
                           train_loss, valid_loss)
    return _common.Fitted(model, coef, err, status, jnp.exp(state.log_w))


def samme(X, y, *, n_classes=None, n_rounds: int = 100, depth: int = 2, learning_rate=1.0, l2=0.0,
          min_split_gain=0.0, min_child_weight=0.0, subsample=1.0, colsample=1.0,
          colsample_by: str = "tree", err_floor=1e-10, n_bins: int = 256, sample_weight=None,
          eval_set=None, key=0, borders=None) -> _common.Fitted:
    """SAMME (Zhu, Zou, Rosset and Hastie 2009, Algorithm 2): multi-class discrete AdaBoost.

    As :func:`adaboost_m1` with a K-class weak learner (each leaf votes its weighted plurality
    class) and ``alpha_m = log((1 - err_m) / err_m) + log(K - 1)``; a round is WEAK when
    ``err_m >= 1 - 1/K``. Output ``C(x) = argmax_k sum_m alpha_m I(T_m(x) = k)``. For K = 2 it is
    AdaBoost.M1 (``log(K-1) = 0``; the weak learners' gains coincide).

    Args:
      y: ``(n,)`` labels ``0..K-1``; ``n_classes`` defaults to ``max(y) + 1``.
      Other arguments as in :func:`adaboost_m1`.

    Returns:
      :class:`jboost.algorithms.Fitted`; ``coef`` is ``alpha_m``; the model's loss is
      ``samme_exponential`` and its raw score ``f = (K-1) sum_m alpha_m (onehot(T_m) - 1/K)``.
    """
    return _fit_samme(X, y, real=False, floor=err_floor, floor_name="err_floor", floor_hi=0.5,
                      n_classes=n_classes, n_rounds=n_rounds, depth=depth,
                      learning_rate=learning_rate, l2=l2, min_split_gain=min_split_gain,
                      min_child_weight=min_child_weight, subsample=subsample, colsample=colsample,
                      colsample_by=colsample_by, n_bins=n_bins, sample_weight=sample_weight,
                      eval_set=eval_set, key=key, borders=borders)


def samme_r(X, y, *, n_classes=None, n_rounds: int = 100, depth: int = 2, learning_rate=1.0,
            l2=0.0, min_split_gain=0.0, min_child_weight=0.0, subsample=1.0, colsample=1.0,
            colsample_by: str = "tree", eps=1e-6, n_bins: int = 256, sample_weight=None,
            eval_set=None, key=0, borders=None) -> _common.Fitted:
    """SAMME.R (Zhu, Zou, Rosset and Hastie 2009, Algorithm 4): multi-class real AdaBoost.

    For ``m = 1..M``: (a) fit the K-class tree to the weighted data and take its leaf's weighted
    class proportions ``p_k(x)`` (clipped below at ``eps``); (b) ``h_k(x) = (K-1) (log p_k(x) -
    (1/K) sum_j log p_j(x))``; (c) ``w_i <- w_i exp(-(K-1)/K y_i^T log p(x_i))``, renormalised.
    Output ``C(x) = argmax_k sum_m h_k^{(m)}(x)``. ``learning_rate`` multiplies ``h`` (also in
    the weight update). ``err`` reports the weighted error of the leaf plurality class.

    Returns:
      :class:`jboost.algorithms.Fitted`; the model's raw score is ``sum_m h^{(m)}(x)`` (the
      ``samme_exponential`` scale; ``predict_proba`` gives ``p_k ∝ exp(f_k / (K-1))``).
    """
    return _fit_samme(X, y, real=True, floor=eps, floor_name="eps", floor_hi=1.0 / 2,
                      n_classes=n_classes, n_rounds=n_rounds, depth=depth,
                      learning_rate=learning_rate, l2=l2, min_split_gain=min_split_gain,
                      min_child_weight=min_child_weight, subsample=subsample, colsample=colsample,
                      colsample_by=colsample_by, n_bins=n_bins, sample_weight=sample_weight,
                      eval_set=eval_set, key=key, borders=borders)
