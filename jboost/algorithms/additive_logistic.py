"""Real AdaBoost, Gentle AdaBoost and LogitBoost (Friedman, Hastie and Tibshirani 2000, "FHT"):
``round`` functions on the boosting scaffold whose trees are weighted least-squares fits of a
working response; raw scores ``F(x)`` are FHT's. See docs/algorithms.md."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from jboost import checks
from jboost.algorithms import _common
from jboost.engine import algorithm as algorithm_lib
from jboost.fitting import prepare, settings
from jboost.losses import per_sample
from jboost.models import booster


def _reweighting_round(r: algorithm_lib.Round, leaf_function) -> algorithm_lib.RoundResult:
    """One round of Real or Gentle AdaBoost (state: the log observation weights);
    ``leaf_function`` turns each leaf's weighted mean ``E_w[y | leaf]`` into ``f_m``."""
    log_w = r.extra
    w = jnp.exp(log_w)
    y_pm = 2.0 * r.data.y - 1.0
    wk = w * r.sample
    tree, leaf = algorithm_lib.grow_trees(r, (-wk * y_pm)[:, None], wk[:, None])
    values = r.learning_rate * leaf_function(tree.leaf_values)     # leaf values: E_w[y | leaf]
    f_rows = values[leaf, 0]
    log_w = _common.normalise_log_weights(log_w - y_pm * f_rows)
    err = _common.weighted_error(w, jnp.where(f_rows > 0, 1.0, -1.0) != y_pm)
    trees, leaves = algorithm_lib.one_tree(tree._replace(leaf_values=values), leaf)
    return algorithm_lib.RoundResult(trees, leaves, log_w, _common.info(r.learning_rate, err))


def real_adaboost_round(r: algorithm_lib.Round, *, eps: float = 1e-6) -> algorithm_lib.RoundResult:
    """Round ``m`` of Real AdaBoost (FHT Algorithm 2, step 2): ``p_m(x) = P_w(y = 1 | x) =
    (1 + E_w[y | x]) / 2`` clipped to ``[eps, 1 - eps]``, ``f_m = 1/2 log(p / (1 - p))``."""
    eps = jnp.float32(eps)

    def half_log_odds(mean_y):
        p = jnp.clip(0.5 * (1.0 + mean_y), eps, 1.0 - eps)
        return 0.5 * jnp.log(p / (1.0 - p))

    return _reweighting_round(r, half_log_odds)


def gentle_adaboost_round(r: algorithm_lib.Round) -> algorithm_lib.RoundResult:
    """Round ``m`` of Gentle AdaBoost (FHT Algorithm 4, step 2): ``f_m`` is the weighted
    least-squares fit of ``y``, i.e. ``E_w[y | x]``."""
    return _reweighting_round(r, lambda mean_y: mean_y)


@settings.takes_settings(depth=1, learning_rate=1.0, l2=0.0, min_child_weight=0.0)
def real_adaboost(X, y, *, n_rounds, depth, learning_rate, l2, min_split_gain, min_child_weight,
                  subsample, colsample, colsample_by, eps=1e-6, n_bins, sample_weight, eval_set,
                  key, borders, init_model, early_stopping_rounds, early_stopping_tolerance,
                  eval_metric, verbose, callbacks, checkpoint_dir, checkpoint_every, base_margin,
                  eval_base_margin, tree_family, max_leaves) -> booster.Booster:
    """Real AdaBoost (FHT Algorithm 2; Schapire and Singer 1999).

    Leaves hold ``f_m = 1/2 log(p / (1 - p))`` of their weighted proportion ``p`` of class 1
    (clipped to ``[eps, 1 - eps]``, static). Published defaults (docs/algorithms.md).

    Args:
      X: ``(n, F)`` features (NaN missing).
      y: ``(n,)`` labels 0/1.
      eps: the clip of the leaves' class proportions (static).
      init_model: a model of the same algorithm to continue on the same rows.
      base_margin, eval_base_margin: refused (docs/algorithms.md says why).

    Returns:
      A :class:`jboost.Booster` (exponential loss); ``info``: ``coef`` the learning rate, ``err``
      the weighted training error of ``sign(f_m)``, ``status``, ``weights``, ``log_weights``,
      ``algorithm``.
    """
    return _common.fit_reweighted(locals(), "real_adaboost", real_adaboost_round,
                                  _common.init_log_weights, binary=True, weights=jnp.exp,
                                  state=("log_weights",), eps=eps)


@settings.takes_settings(depth=1, learning_rate=1.0, l2=0.0, min_child_weight=0.0)
def gentle_adaboost(X, y, *, n_rounds, depth, learning_rate, l2, min_split_gain, min_child_weight,
                    subsample, colsample, colsample_by, n_bins, sample_weight, eval_set, key,
                    borders, init_model, early_stopping_rounds, early_stopping_tolerance,
                    eval_metric, verbose, callbacks, checkpoint_dir, checkpoint_every, base_margin,
                    eval_base_margin, tree_family, max_leaves) -> booster.Booster:
    """Gentle AdaBoost (FHT Algorithm 4): each round's tree is the weighted least-squares fit
    ``f_m`` of ``y in {-1, +1}``. Published defaults (docs/algorithms.md).

    Args:
      X: ``(n, F)`` features (NaN missing).
      y: ``(n,)`` labels 0/1 (class 1 is ``+1``).
      init_model: a model of the same algorithm to continue on the same rows.
      base_margin, eval_base_margin: refused (docs/algorithms.md says why).

    Returns:
      A :class:`jboost.Booster` (exponential loss); ``info`` as :func:`real_adaboost`'s.
    """
    return _common.fit_reweighted(locals(), "gentle_adaboost", gentle_adaboost_round,
                                  _common.init_log_weights, binary=True, weights=jnp.exp,
                                  state=("log_weights",))


def working_response(is_class, p, q, z_max):
    """``z = (y* - p) / (p (1 - p))`` clipped to ``[-z_max, z_max]`` (FHT Section 4 and eq. 34),
    as ``1/p`` or ``-1/q`` with ``q = 1 - p`` given (no ``0/0``: docs/algorithms.md)."""
    z = jnp.where(is_class, 1.0 / p, -1.0 / q)
    return jnp.clip(z, -z_max, z_max)


def logitboost_2_round(r: algorithm_lib.Round, *, z_max: float = 4.0) -> algorithm_lib.RoundResult:
    """Round ``m`` of two-class LogitBoost (FHT Algorithm 3, step 2); no state."""
    z_max = jnp.float32(z_max)
    F = r.raw[:, 0]
    p, q = jax.nn.sigmoid(2.0 * F), jax.nn.sigmoid(-2.0 * F)
    # (a) working response and weights.
    z = working_response(r.data.y > 0.5, p, q, z_max)
    wz = r.data.w * r.sample * p * q
    # (b) f_m: weighted least-squares fit of z.
    tree, leaf = algorithm_lib.grow_trees(r, (-wz * z)[:, None], wz[:, None])
    # (c) F <- F + f_m / 2.
    tree = tree._replace(leaf_values=0.5 * r.learning_rate * tree.leaf_values)
    trees, leaves = algorithm_lib.one_tree(tree, leaf)
    return algorithm_lib.RoundResult(trees, leaves, info=_common.info(r.learning_rate))


def logitboost_k_round(r: algorithm_lib.Round, *, z_max: float = 4.0) -> algorithm_lib.RoundResult:
    """Round ``m`` of K-class LogitBoost (FHT Algorithm 6, step 2): K trees; no state."""
    z_max = jnp.float32(z_max)
    k = r.raw.shape[-1]
    onehot = jax.nn.one_hot(r.data.y.astype(jnp.int32), k, dtype=jnp.float32)
    # Tree j moves F by (K-1)/K (f_j e_j - f_j/K): the centring of step 2(b) as vector leaves.
    centring = (k - 1) / k * (jnp.eye(k, dtype=jnp.float32) - 1.0 / k)     # (K, K)
    P = jax.nn.softmax(r.raw, axis=-1)
    Q = 1.0 - P
    # 2(a) for j = 1..K: z_ij = (y*_ij - p_ij) / (p_ij (1 - p_ij)), w_ij = p_ij (1 - p_ij).
    Z = working_response(onehot > 0.5, P, Q, z_max)
    W = (r.data.w * r.sample)[:, None] * P * Q
    # f_mj: weighted least-squares fit of z_j, one tree per class (leading axis K).
    trees, leaves = jax.vmap(lambda g, h: algorithm_lib.grow_trees(r, g[:, None], h[:, None]),
                             in_axes=(1, 1))(-W * Z, W)
    # 2(b) f_mj <- (K-1)/K (f_mj - 1/K sum_k f_mk); F_j <- F_j + f_mj.
    values = r.learning_rate * trees.leaf_values[:, :, 0:1] * centring[:, None, :]  # (K, L, K)
    return algorithm_lib.RoundResult(trees._replace(leaf_values=values), leaves,
                                info=_common.info(r.learning_rate))


@settings.takes_settings(depth=2, learning_rate=1.0, l2=0.0, min_child_weight=0.0)
def logitboost(X, y, *, n_classes=None, form: str = "auto", n_rounds, depth, learning_rate, l2,
               min_split_gain, min_child_weight, subsample, colsample, colsample_by, z_max=4.0,
               n_bins, sample_weight, eval_set, key, borders, init_model, early_stopping_rounds,
               early_stopping_tolerance, eval_metric, verbose, callbacks, checkpoint_dir,
               checkpoint_every, base_margin, eval_base_margin, tree_family,
               max_leaves) -> booster.Booster:
    """LogitBoost: Newton steps for the Bernoulli / multinomial log-likelihood (FHT Alg. 3 and 6).

    Each round fits the working response ``z`` (clipped to ``[-z_max, z_max]``, static) by
    weighted least squares: one tree (two classes) or K centred trees (docs/algorithms.md).

    Args:
      y: labels ``0..K-1`` (0/1 for two classes); ``n_classes`` defaults to ``max(y) + 1``.
      form: ``"auto"`` (Algorithm 3 for K = 2, else 6), ``"two_class"`` or ``"k_class"`` (also
        for K = 2: then ``F_1 - F_0`` equals twice Algorithm 3's ``F``).
      init_model: a LogitBoost model to continue (same form and K; other rows may be used).
      X: ``(n, F)`` features (NaN missing).

    Returns:
      A :class:`jboost.Booster`: one tree per round and loss :func:`logit_deviance` (two-class
      form), or K vector-leaf trees per round and ``multinomial_deviance``. ``info``: ``coef``
      the learning rate, ``err`` NaN, ``status``, ``weights`` the sample weights.
    """
    checks.check_choice(form, "form", ("auto", "two_class", "k_class"))
    z_max = _common.static_real(z_max, "z_max", 0.0, float("inf"), lo_open=True)
    config, hyper = settings.settings_of(locals())
    data, borders, k, eval_set, table = _common.read_classes(locals(), "logitboost", config,
                                                             binary=False)
    if form == "two_class" and k != 2:
        raise ValueError(f"form='two_class' needs 2 classes; y has {k}.")
    if form == "two_class" or (form == "auto" and k == 2):
        round_fn, loss = logitboost_2_round, per_sample.logit_deviance()
    else:
        round_fn, loss = logitboost_k_round, per_sample.multinomial_deviance(k)
    # The round (one tree, or K per round) depends on K, known once the labels are checked.
    config = config._replace(algorithm=_common.algorithm(round_fn, z_max=z_max))
    data = prepare.with_margins(data, base_margin, eval_base_margin, eval_set, loss.n_outputs)
    return _common.run(data, borders, key, hyper, config, loss, name="logitboost",
                       init_model=init_model, k_from_labels=n_classes is None,
                       rounds=_common.rounds_args(locals()), table=table)
