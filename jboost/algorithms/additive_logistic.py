"""Real AdaBoost, Gentle AdaBoost and LogitBoost (two-class and K-class) of Friedman, Hastie and
Tibshirani (2000), "Additive logistic regression: a statistical view of boosting", Annals of
Statistics 28(2) (FHT below), Algorithms 2, 4, 3 and 6.

Each round fits one oblivious tree with the shared builder :func:`jboost.tree.fit_tree` by
weighted least squares (gradients ``-w z``, hessians ``w``: the tree's leaf values are then the
weighted means of the working response ``z`` in each leaf, with ``l2 = 0``), as FHT do with
regression trees. Two-class labels are 0/1 (FHT's ``y* = y01`` and ``y = 2 y01 - 1``); raw scores
``F(x)`` are FHT's, with ``p(x) = e^F / (e^F + e^-F) = 1 / (1 + e^{-2F})`` for two classes and
``p_j = e^{F_j} / sum_k e^{F_k}`` for K classes, which is what ``jboost.predict_proba`` of the
returned model gives.
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
from jboost.algorithms._common import OK


def _logit_deviance_fn(y, f):
    """Binomial deviance of ``p = 1 / (1 + e^{-2f})``: ``log(1 + e^{2f}) - 2 y f`` (FHT eq. 21)."""
    return jax.nn.softplus(2.0 * f) - 2.0 * y * f


def logit_deviance() -> losses_lib.Loss:
    """The loss two-class LogitBoost minimises, on FHT's half-log-odds scale ``F``."""
    return losses_lib.Loss(_logit_deviance_fn, name="logit_deviance", task="binary",
                           link=losses_lib.adaboost_link, baseline=losses_lib.half_logit_baseline)


class _State(NamedTuple):
    log_w: jax.Array      # (n,) log weights (AdaBoost variants; unused by LogitBoost)
    raw: jax.Array        # (n, K)
    raw_valid: jax.Array  # (m, K)


def _outputs(tree, coef, err, loss, data, raw, raw_valid):
    return (tree, coef, err, jnp.int32(OK), _common.mean_loss(loss, data.y, raw, data.w),
            _common.mean_loss(loss, data.y_valid, raw_valid, data.w_valid))


# --------------------------------------------------------------------------------------------
# Real and Gentle AdaBoost (FHT Algorithms 2 and 4)
# --------------------------------------------------------------------------------------------


@functools.partial(jax.jit, static_argnames=("config", "gentle"))
def _reweighting_boost(data: _common.Data, key, hyper: boosting.Hyperparams, eps, *, config,
                       gentle: bool):
    n = data.y.shape[0]
    n_features = data.X_binned.shape[0]
    y_pm = 2.0 * data.y - 1.0
    loss = losses_lib.exponential()

    def step(state: _State, m):
        w = jnp.exp(state.log_w)
        keep, masks = _common.round_randomness(key, m, n, n_features, config, hyper)
        wk = w * keep
        tree, leaf = _common.fit_weak_tree(data.X_binned, (-wk * y_pm)[:, None], wk[:, None],
                                           masks, config, hyper)
        mean_y = tree.leaf_values                                  # (L, 1) weighted E_w[y | leaf]
        if gentle:
            # Gentle (Alg. 4): f_m = weighted least-squares fit of y, i.e. E_w[y | x].
            f = mean_y
        else:
            # Real (Alg. 2): p_m(x) = P_w(y = 1 | x) = (1 + E_w[y | x]) / 2, f_m = 1/2 log(p / (1-p)).
            p = jnp.clip(0.5 * (1.0 + mean_y), eps, 1.0 - eps)
            f = 0.5 * jnp.log(p / (1.0 - p))
        lr = _common.learning_rate(config, hyper, m)
        values = lr * f
        f_rows = values[leaf, 0]
        # w_i <- w_i exp(-y_i f_m(x_i)), renormalised.
        log_w = _common.normalise_log_weights(state.log_w - y_pm * f_rows)
        err = _common.weighted_error(w, jnp.where(f_rows > 0, 1.0, -1.0) != y_pm)
        tree = tree._replace(leaf_values=values)
        raw = state.raw + values[leaf]
        raw_valid = state.raw_valid + values[_common.valid_leaf(tree, data.X_valid, config)]
        out = _outputs(jax.tree_util.tree_map(lambda a: a[None], tree), lr, err, loss, data, raw,
                       raw_valid)
        return _State(log_w, raw, raw_valid), out

    state0 = _State(_common.normalise_log_weights(jnp.log(data.w)), jnp.zeros((n, 1), jnp.float32),
                    jnp.zeros((data.y_valid.shape[0], 1), jnp.float32))
    return lax.scan(step, state0, jnp.arange(config.n_rounds))


def _fit_binary(core, X, y, *, n_rounds, depth, learning_rate, l2, min_split_gain, min_child_weight,
                subsample, colsample, colsample_by, n_bins, sample_weight, eval_set, key, borders,
                extra, loss, **static):
    config, hyper = _common.settings(n_rounds=n_rounds, depth=depth, n_bins=n_bins,
                                     learning_rate=learning_rate, l2=l2, min_split_gain=min_split_gain,
                                     min_child_weight=min_child_weight, subsample=subsample,
                                     colsample=colsample, colsample_by=colsample_by)
    data, borders = _common.prepare(
        X, y, sample_weight=sample_weight, eval_set=eval_set, n_bins=n_bins, borders=borders,
        label_check=lambda v, name: _common.check_labels(v, "binary", None, name))
    state, (trees, coef, err, status, train_loss, valid_loss) = core(
        data, _common.as_key(key), hyper, jnp.asarray(extra, jnp.float32), config=config, **static)
    model = _common.finish(trees, borders, jnp.zeros((1,)), loss, train_loss, valid_loss)
    weights = jnp.exp(state.log_w)
    return _common.Fitted(model, coef, err, status, weights)


def real_adaboost(X, y, *, n_rounds: int = 100, depth: int = 1, learning_rate=1.0, l2=0.0,
                  min_split_gain=0.0, min_child_weight=0.0, subsample=1.0, colsample=1.0,
                  colsample_by: str = "tree", eps=1e-6, n_bins: int = 256, sample_weight=None,
                  eval_set=None, key=0, borders=None) -> _common.Fitted:
    """Real AdaBoost (FHT Algorithm 2; Schapire and Singer 1999).

    ``w_i = 1/N``, ``F = 0``. For ``m = 1..M``: (a) fit the classifier (a least-squares tree of
    ``y in {-1,+1}``) to obtain ``p_m(x) = P_w(y = 1 | x)``, the weighted proportion of class 1 in
    ``x``'s leaf, clipped to ``[eps, 1 - eps]``; (b) ``f_m(x) = 1/2 log(p_m(x) / (1 - p_m(x)))``;
    (c) ``w_i <- w_i exp(-y_i f_m(x_i))``, renormalised; ``F <- F + f_m``.
    Output ``sign(F(x))``. ``learning_rate`` (number or schedule) multiplies ``f_m``.

    Args: as :func:`jboost.algorithms.adaboost_m1`, with labels 0/1.

    Returns:
      :class:`jboost.algorithms.Fitted`; the model's loss is the exponential loss; ``err`` is the
      weighted training error of ``sign(f_m)``.
    """
    _validation.check_real(eps, "eps", 0.0, 0.5, lo_open=True)
    return _fit_binary(_reweighting_boost, X, y, n_rounds=n_rounds, depth=depth,
                       learning_rate=learning_rate, l2=l2, min_split_gain=min_split_gain,
                       min_child_weight=min_child_weight, subsample=subsample, colsample=colsample,
                       colsample_by=colsample_by, n_bins=n_bins, sample_weight=sample_weight,
                       eval_set=eval_set, key=key, borders=borders, extra=eps,
                       loss=losses_lib.exponential(), gentle=False)


def gentle_adaboost(X, y, *, n_rounds: int = 100, depth: int = 1, learning_rate=1.0, l2=0.0,
                    min_split_gain=0.0, min_child_weight=0.0, subsample=1.0, colsample=1.0,
                    colsample_by: str = "tree", n_bins: int = 256, sample_weight=None,
                    eval_set=None, key=0, borders=None) -> _common.Fitted:
    """Gentle AdaBoost (FHT Algorithm 4).

    ``w_i = 1/N``, ``F = 0``. For ``m = 1..M``: (a) fit ``f_m(x)`` by weighted least squares of
    ``y_i in {-1,+1}`` on ``x_i`` with weights ``w_i`` (an oblivious tree; its leaf values are the
    weighted means of ``y``); (b) ``F <- F + f_m``; (c) ``w_i <- w_i exp(-y_i f_m(x_i))``,
    renormalised. Output ``sign(F(x))``. ``learning_rate`` multiplies ``f_m``.

    Returns:
      :class:`jboost.algorithms.Fitted` (exponential loss; ``err`` of ``sign(f_m)``).
    """
    return _fit_binary(_reweighting_boost, X, y, n_rounds=n_rounds, depth=depth,
                       learning_rate=learning_rate, l2=l2, min_split_gain=min_split_gain,
                       min_child_weight=min_child_weight, subsample=subsample, colsample=colsample,
                       colsample_by=colsample_by, n_bins=n_bins, sample_weight=sample_weight,
                       eval_set=eval_set, key=key, borders=borders, extra=0.0,
                       loss=losses_lib.exponential(), gentle=True)


# --------------------------------------------------------------------------------------------
# LogitBoost (FHT Algorithms 3 and 6)
# --------------------------------------------------------------------------------------------


def working_response(is_class, p, q, z_max):
    """``z = (y* - p) / (p (1 - p))`` clipped to ``[-z_max, z_max]`` (FHT Section 4 and eq. 34).

    Written as ``1/p`` when ``y* = 1`` and ``-1/(1-p)`` when ``y* = 0``, with ``q = 1 - p`` given
    separately (for two classes ``q = sigmoid(-2F)`` exactly), so no ``0/0`` arises when ``p``
    saturates; the clip keeps ``z`` finite.
    """
    z = jnp.where(is_class, 1.0 / p, -1.0 / q)
    return jnp.clip(z, -z_max, z_max)


@functools.partial(jax.jit, static_argnames=("config",))
def _logitboost_2(data: _common.Data, key, hyper: boosting.Hyperparams, z_max, *, config):
    n = data.y.shape[0]
    n_features = data.X_binned.shape[0]
    loss = logit_deviance()

    def step(state: _State, m):
        F = state.raw[:, 0]
        p, q = jax.nn.sigmoid(2.0 * F), jax.nn.sigmoid(-2.0 * F)
        # (a) working response and weights.
        z = working_response(data.y > 0.5, p, q, z_max)
        keep, masks = _common.round_randomness(key, m, n, n_features, config, hyper)
        wz = data.w * keep * p * q
        # (b) f_m: weighted least-squares fit of z.
        tree, leaf = _common.fit_weak_tree(data.X_binned, (-wz * z)[:, None], wz[:, None], masks,
                                           config, hyper)
        # (c) F <- F + f_m / 2.
        lr = _common.learning_rate(config, hyper, m)
        values = 0.5 * lr * tree.leaf_values
        tree = tree._replace(leaf_values=values)
        raw = state.raw + values[leaf]
        raw_valid = state.raw_valid + values[_common.valid_leaf(tree, data.X_valid, config)]
        out = _outputs(jax.tree_util.tree_map(lambda a: a[None], tree), lr, jnp.float32(jnp.nan),
                       loss, data, raw, raw_valid)
        return _State(state.log_w, raw, raw_valid), out

    state0 = _State(jnp.log(data.w), jnp.zeros((n, 1), jnp.float32),
                    jnp.zeros((data.y_valid.shape[0], 1), jnp.float32))
    return lax.scan(step, state0, jnp.arange(config.n_rounds))


@functools.partial(jax.jit, static_argnames=("config", "n_classes"))
def _logitboost_k(data: _common.Data, key, hyper: boosting.Hyperparams, z_max, *, config,
                  n_classes: int):
    n = data.y.shape[0]
    k = n_classes
    n_features = data.X_binned.shape[0]
    loss = losses_lib.multinomial_deviance(k)
    onehot = jax.nn.one_hot(data.y.astype(jnp.int32), k, dtype=jnp.float32)
    # Tree j moves F by (K-1)/K (f_j e_j - f_j/K): the centring of step 2(b) as vector leaves.
    centring = (k - 1) / k * (jnp.eye(k, dtype=jnp.float32) - 1.0 / k)     # (K, K)

    def step(state: _State, m):
        P = jax.nn.softmax(state.raw, axis=-1)
        Q = 1.0 - P
        # 2(a) for j = 1..K: z_ij = (y*_ij - p_ij) / (p_ij (1 - p_ij)), w_ij = p_ij (1 - p_ij).
        Z = working_response(onehot > 0.5, P, Q, z_max)
        keep, masks = _common.round_randomness(key, m, n, n_features, config, hyper)
        W = (data.w * keep)[:, None] * P * Q
        # f_mj: weighted least-squares fit of z_j, one tree per class.
        fit = lambda g, h: _common.fit_weak_tree(data.X_binned, g[:, None], h[:, None], masks,
                                                 config, hyper)
        trees, leaves = jax.vmap(fit, in_axes=(1, 1))(-W * Z, W)           # leading axis K
        # 2(b) f_mj <- (K-1)/K (f_mj - 1/K sum_k f_mk); F_j <- F_j + f_mj.
        lr = _common.learning_rate(config, hyper, m)
        values = lr * trees.leaf_values[:, :, 0:1] * centring[:, None, :]  # (K, L, K)
        trees = trees._replace(leaf_values=values)
        take = jax.vmap(lambda v, leaf: v[leaf])
        raw = state.raw + jnp.sum(take(values, leaves), axis=0)
        leaves_valid = jax.vmap(lambda t: _common.valid_leaf(t, data.X_valid, config))(trees)
        raw_valid = state.raw_valid + jnp.sum(take(values, leaves_valid), axis=0)
        out = _outputs(trees, lr, jnp.float32(jnp.nan), loss, data, raw, raw_valid)
        return _State(state.log_w, raw, raw_valid), out

    state0 = _State(jnp.log(data.w), jnp.zeros((n, k), jnp.float32),
                    jnp.zeros((data.y_valid.shape[0], k), jnp.float32))
    return lax.scan(step, state0, jnp.arange(config.n_rounds))


def logitboost(X, y, *, n_classes=None, form: str = "auto", n_rounds: int = 100, depth: int = 2,
               learning_rate=1.0, l2=0.0, min_split_gain=0.0, min_child_weight=0.0, subsample=1.0,
               colsample=1.0, colsample_by: str = "tree", z_max=4.0, n_bins: int = 256,
               sample_weight=None, eval_set=None, key=0, borders=None) -> _common.Fitted:
    """LogitBoost: Newton steps for the Bernoulli / multinomial log-likelihood (FHT Alg. 3 and 6).

    Two classes (FHT Algorithm 3): ``F = 0``, ``p = 1/2``. For ``m = 1..M``: (a) ``z_i = (y*_i -
    p(x_i)) / (p(x_i)(1 - p(x_i)))``, ``w_i = p(x_i)(1 - p(x_i))``; (b) fit ``f_m`` by weighted
    least squares of ``z_i`` on ``x_i`` with weights ``w_i``; (c) ``F <- F + f_m / 2``,
    ``p = e^F / (e^F + e^-F)``.

    K classes (FHT Algorithm 6): ``F_j = 0``, ``p_j = 1/K``. For ``m = 1..M``: (a) for each
    ``j``, ``z_ij = (y*_ij - p_ij) / (p_ij (1 - p_ij))``, ``w_ij = p_ij (1 - p_ij)``, fit ``f_mj``
    by weighted least squares (one tree per class); (b) ``f_mj <- (K-1)/K (f_mj - 1/K sum_k
    f_mk)``, ``F_j <- F_j + f_mj``; (c) ``p_j = e^{F_j} / sum_k e^{F_k}``.

    ``z`` is clipped to ``[-z_max, z_max]`` (FHT recommend ``z_max`` in [2, 4]). Sample weights
    multiply ``w``; ``learning_rate`` (number or schedule) multiplies ``f_m``.

    Args:
      y: labels ``0..K-1`` (0/1 for two classes); ``n_classes`` defaults to ``max(y) + 1``.
      form: ``"auto"`` (Algorithm 3 for K = 2, else 6), ``"two_class"`` or ``"k_class"`` (also
        for K = 2: then ``F_1 - F_0`` equals twice Algorithm 3's ``F``).
      Other arguments as :func:`jboost.algorithms.adaboost_m1`.

    Returns:
      :class:`jboost.algorithms.Fitted`: two-class form: one tree per round, loss
      :func:`logit_deviance`; K-class form: K trees per round (leading axes ``(M, K)``) with
      vector leaves, loss ``multinomial_deviance``.
    """
    if form not in ("auto", "two_class", "k_class"):
        raise ValueError(f"form={form!r} must be 'auto', 'two_class' or 'k_class'.")
    _validation.check_real(z_max, "z_max", 0.0, float("inf"), lo_open=True)
    config, hyper = _common.settings(n_rounds=n_rounds, depth=depth, n_bins=n_bins,
                                     learning_rate=learning_rate, l2=l2, min_split_gain=min_split_gain,
                                     min_child_weight=min_child_weight, subsample=subsample,
                                     colsample=colsample, colsample_by=colsample_by)
    data, borders, k = _common.prepare_classes(X, y, n_classes, sample_weight=sample_weight,
                                               eval_set=eval_set, n_bins=n_bins, borders=borders)
    if form == "two_class" and k != 2:
        raise ValueError(f"form='two_class' needs 2 classes; y has {k}.")
    z = jnp.asarray(z_max, jnp.float32)
    if form == "two_class" or (form == "auto" and k == 2):
        state, (trees, coef, err, status, train_loss, valid_loss) = _logitboost_2(
            data, _common.as_key(key), hyper, z, config=config)
        model = _common.finish(trees, borders, jnp.zeros((1,)), logit_deviance(), train_loss,
                               valid_loss)
    else:
        state, (trees, coef, err, status, train_loss, valid_loss) = _logitboost_k(
            data, _common.as_key(key), hyper, z, config=config, n_classes=k)
        model = _common.finish(trees, borders, jnp.zeros((k,)), losses_lib.multinomial_deviance(k),
                               train_loss, valid_loss)
    return _common.Fitted(model, coef, err, status, data.w)
