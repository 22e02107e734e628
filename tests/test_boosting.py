"""Boosting (jboost/engine/boosting.py, through jboost.fit / jboost.predict).

Most fits here share one compiled program: the same shapes (the session data sets, always with
the same weighted ``eval_set``), the same loss and the same static settings; only traced
hyperparameters and the key change. A few tests replicate round 0 (or round m) by hand from
the documented pieces (``fold_in(key, m)``, Bernoulli row weights, ``tree.fit_tree``) and
compare it with what ``boost`` produced.
"""

from __future__ import annotations

import functools

import chex
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import jboost
from jboost.losses import derivatives
from jboost import losses
from jboost.engine import samplers
from jboost.engine import boosting as boosting_lib
from jboost.engine import calls
from jboost.engine import state as state_lib
from jboost.trees import oblivious
from jboost.engine import calls as calls_mod

# Jitted pieces for the hand replications (one compilation per shape).
fit_tree = jax.jit(oblivious.fit_tree, static_argnames=("depth", "n_bins"))
grad_hess = jax.jit(derivatives.grad_hess)


@pytest.fixture(scope="module")
def data(regression_data):
    X, y, Xv, yv = regression_data
    wv = np.random.default_rng(10).uniform(0.5, 2.0, size=Xv.shape[0]).astype(np.float32)
    return X, y, Xv, yv, wv


@pytest.fixture(scope="module")
def fit_main(data, fit_kw):
    """``jboost.fit`` on the regression data with the shared weighted eval_set and settings."""
    X, y, Xv, yv, wv = data

    def run(**kw):
        return jboost.fit(X, y, "squared_error", eval_set=(Xv, yv, wv), **{**fit_kw, **kw})

    return run


@pytest.fixture(scope="module")
def model(fit_main):
    return fit_main(learning_rate=0.3, subsample=0.8, key=0)


def numpy_predict(model, X, n_rounds):
    """Brute-force staged prediction: baseline + the leaf values of every tree of the first rounds."""
    t = jax.tree_util.tree_map(np.asarray, model.trees)
    out = np.broadcast_to(np.asarray(model.baseline, np.float64), (X.shape[0], model.n_outputs)).copy()
    for m in range(n_rounds):
        for j in range(t.features.shape[1]):
            leaf = np.zeros(X.shape[0], np.int64)
            for d in range(t.features.shape[2]):
                x = X[:, t.features[m, j, d]]
                right = np.where(np.isnan(x), t.missing_right[m, j, d], x > t.borders[m, j, d])
                leaf += right.astype(np.int64) << d
            out += t.leaf_values[m, j][leaf]
    return out


def round_keys(key, m):
    """Documented randomness: round m uses fold_in(key, m), split into (rows, columns)."""
    return jax.random.split(jax.random.fold_in(key, m))


def assert_same_structure(a, b):
    for field in ("features", "thresholds", "missing_right"):
        np.testing.assert_array_equal(np.asarray(getattr(a, field)), np.asarray(getattr(b, field)),
                                      err_msg=field)


# --------------------------------------------------------------------------------------------
# Traced hyperparameters: vmap and compile-once
# --------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_vmap_over_hyperparameters_and_key_equals_separate_fits(data, fit_kw, fit_main, assert_trees_equal):
    X, y, Xv, yv, wv = data
    hp = dict(learning_rate=[0.1, 0.3, 0.5], l2=[0.0, 1.0, 5.0], min_split_gain=[0.0, 0.01, 0.1],
              min_child_weight=[0.0, 1.0, 4.0], subsample=[0.5, 0.8, 1.0], colsample=[0.4, 0.6, 1.0])
    seeds = [0, 1, 2]

    def one(lr, l2, msg, mcw, ss, cs, key):
        return jboost.fit(X, y, "squared_error", eval_set=(Xv, yv, wv), learning_rate=lr, l2=l2,
                          min_split_gain=msg, min_child_weight=mcw, subsample=ss, colsample=cs, key=key,
                          **fit_kw)

    keys = jax.vmap(jax.random.PRNGKey)(jnp.asarray(seeds))
    batched = jax.vmap(one)(*(jnp.asarray(v, jnp.float32) for v in hp.values()), keys)
    assert batched.trees.features.shape[:3] == (3, fit_kw["n_rounds"], 1)
    for i, seed in enumerate(seeds):
        single = fit_main(key=seed, **{k: v[i] for k, v in hp.items()})
        assert_trees_equal(jax.tree_util.tree_map(lambda a: a[i], batched.trees), single.trees)
        np.testing.assert_array_equal(batched.baseline[i], single.baseline)
        np.testing.assert_allclose(batched.train_loss[i], single.train_loss, rtol=1e-6)
        np.testing.assert_allclose(batched.valid_loss[i], single.valid_loss, rtol=1e-6)
    # The members really differ (the sweep is not three copies of one model).
    assert not np.array_equal(batched.trees.leaf_values[0], batched.trees.leaf_values[1])


def test_boost_compiles_once_for_all_hyperparameter_values(data, fit_kw, monkeypatch):
    X, y, *_ = data
    X, y = X[:197], y[:197]
    # The program of a concrete fit's rounds (boosting.boost_rounds, called once per host-side
    # call of rounds) traced at most once for four settings of every continuous hyperparameter
    # and the key, and for all the calls of each fit (chex raises on a second trace).
    counted = jax.jit(chex.assert_max_traces(calls.boost_rounds.__wrapped__, n=1),
                      static_argnames=("config",))
    monkeypatch.setattr(calls_mod, "boost_rounds", counted)
    settings = [dict(), dict(learning_rate=0.05, l2=3.0, key=1),
                dict(min_split_gain=0.1, min_child_weight=5.0, subsample=0.5, colsample=0.4, key=7),
                dict(learning_rate=1.0, l2=0.0, subsample=0.9, colsample=0.8)]
    models = [jboost.fit(X, y, "squared_error", **fit_kw, **s) for s in settings]
    assert len({float(m.train_loss[-1]) for m in models}) == len(settings)
    with pytest.raises(AssertionError, match="trace"):  # a static setting is a new program
        jboost.fit(X, y, "squared_error", **{**fit_kw, "depth": fit_kw["depth"] + 1})


def test_same_key_same_model_and_different_key_different_model(fit_main, model, assert_trees_equal):
    again = fit_main(learning_rate=0.3, subsample=0.8, key=0)
    assert_trees_equal(again.trees, model.trees)
    for a, b in ((again.train_loss, model.train_loss), (again.valid_loss, model.valid_loss),
                 (again.baseline, model.baseline), (again.borders, model.borders)):
        np.testing.assert_array_equal(a, b)
    other = fit_main(learning_rate=0.3, subsample=0.8, key=1)
    assert not np.array_equal(other.trees.leaf_values, model.trees.leaf_values)
    # Without subsampling nothing is random: the key does not matter.
    a, b = fit_main(learning_rate=0.3, key=0), fit_main(learning_rate=0.3, key=123)
    assert_trees_equal(a.trees, b.trees)


def test_subsample_is_bernoulli_row_weights(data, fit_kw, model):
    # Round 0, replicated: rows kept with probability `subsample` through uniform(k_rows) < 0.8,
    # i.e. weights 0/1 times the sample weights; one tree on the weighted gradients.
    X, y, *_ = data
    n = X.shape[0]
    k_rows, _ = round_keys(jax.random.PRNGKey(0), 0)
    w = (jax.random.uniform(k_rows, (n,)) < 0.8).astype(jnp.float32)
    assert 0.6 * n < float(w.sum()) < 0.95 * n
    loss = losses.squared_error()
    raw = jnp.broadcast_to(model.baseline, (n, 1))
    g, h = grad_hess(loss, jnp.asarray(y), raw)
    Xb = jboost.bin_features(X, model.borders)
    expected, _ = fit_tree(Xb, g * w[:, None], h * w[:, None], depth=fit_kw["depth"], n_bins=fit_kw["n_bins"],
                           l2=1.0, min_split_gain=0.0, min_child_weight=1.0)
    got = jax.tree_util.tree_map(lambda a: a[0, 0], model.trees)
    assert_same_structure(got, expected)
    np.testing.assert_allclose(got.leaf_values, 0.3 * expected.leaf_values, rtol=1e-6, atol=1e-7)
    # ...and it is not the tree of all rows.
    full, _ = fit_tree(Xb, g, h, depth=fit_kw["depth"], n_bins=fit_kw["n_bins"], l2=1.0,
                       min_split_gain=0.0, min_child_weight=1.0)
    assert not np.allclose(got.leaf_values, 0.3 * full.leaf_values)


def _used_levels(model):
    t = jax.tree_util.tree_map(np.asarray, model.trees)
    return t.features[:, 0], t.gains[:, 0] > 0  # (R, D) features and which levels really split


def test_colsample_by_tree_uses_only_eligible_features(fit_main):
    model = fit_main(colsample=0.4, key=3)  # round(0.4 * 5) = 2 eligible features per tree
    feats, split = _used_levels(model)
    assert split.all(), "every level splits on this data (the check below is not vacuous)"
    for m in range(feats.shape[0]):
        _, k_cols = round_keys(jax.random.PRNGKey(3), m)
        mask = np.asarray(samplers.column_masks(k_cols, 5, feats.shape[1], 0.4, "tree"))
        assert mask.sum(-1).tolist() == [2] * feats.shape[1]
        assert np.all(mask[np.arange(feats.shape[1]), feats[m]]), (m, feats[m], mask[0])
    assert max(len(set(f)) for f in feats) <= 2


def test_colsample_by_level_uses_only_eligible_features(fit_main):
    model = fit_main(colsample=0.2, colsample_by="level", key=4)  # one eligible feature per level
    feats, split = _used_levels(model)
    for m in range(feats.shape[0]):
        _, k_cols = round_keys(jax.random.PRNGKey(4), m)
        mask = np.asarray(samplers.column_masks(k_cols, 5, feats.shape[1], 0.2, "level"))
        for d in range(feats.shape[1]):
            if split[m, d]:
                assert np.flatnonzero(mask[d]).tolist() == [feats[m, d]]
    # Per level, a tree can mix features (per tree it could not: one feature per tree).
    assert any(len(set(f[s])) > 1 for f, s in zip(feats, split))


# --------------------------------------------------------------------------------------------
# Weights, eval_set, staged prediction, training loss
# --------------------------------------------------------------------------------------------


def test_integer_weights_equal_duplicated_rows(data, fit_main, fit_kw):
    X, y, Xv, yv, wv = data
    w = np.random.default_rng(11).integers(0, 4, size=X.shape[0])
    weighted = fit_main(sample_weight=w.astype(np.float32), learning_rate=0.3)
    dup = jboost.fit(np.repeat(X, w, axis=0), np.repeat(y, w), "squared_error", eval_set=(Xv, yv, wv),
                     learning_rate=0.3, **fit_kw)
    np.testing.assert_array_equal(weighted.borders, dup.borders)
    assert_same_structure(weighted.trees, dup.trees)
    np.testing.assert_allclose(weighted.trees.leaf_values, dup.trees.leaf_values, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(weighted.baseline, dup.baseline, rtol=1e-5)
    np.testing.assert_allclose(weighted.train_loss, dup.train_loss, rtol=1e-5)
    np.testing.assert_allclose(weighted.valid_loss, dup.valid_loss, rtol=1e-5)


def test_eval_set_losses_and_staged_prediction(data, model):
    X, y, Xv, yv, wv = data
    R = model.n_rounds
    for m in (0, 1, R // 2, R):  # staged prediction == brute-force NumPy prediction
        np.testing.assert_allclose(np.asarray(jboost.predict(model, Xv, n_rounds=m)),
                                   numpy_predict(model, Xv, m)[:, 0], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(np.asarray(jboost.predict(model, Xv, n_rounds=0)), float(model.baseline[0]))
    np.testing.assert_allclose(np.asarray(jboost.predict(model, X)), numpy_predict(model, X, R)[:, 0],
                               rtol=1e-5, atol=1e-5)
    for m in range(1, R + 1):
        # valid_loss[m-1] / train_loss[m-1]: the weighted mean loss of the first m rounds.
        valid = np.sum(wv * 0.5 * (yv - numpy_predict(model, Xv, m)[:, 0]) ** 2) / wv.sum()
        np.testing.assert_allclose(model.valid_loss[m - 1], valid, rtol=1e-5)
        train = np.mean(0.5 * (y - numpy_predict(model, X, m)[:, 0]) ** 2)
        np.testing.assert_allclose(model.train_loss[m - 1], train, rtol=1e-5)
    np.testing.assert_array_equal(jboost.predict(model, Xv, n_rounds=R), jboost.predict(model, Xv))
    with pytest.raises(ValueError, match=rf"n_rounds={R + 1} must be in \[0, {R}\]"):
        jboost.predict(model, Xv, n_rounds=R + 1)


def test_init_step_scan_is_boost_and_reads_held_out_rows_off_the_training_scores(data, fit_kw):
    # boost is lax.scan of step from init; a caller's own scan over step (as the CV sweep does)
    # can read the loss of zero-weight held-out rows off the training raw scores: the loss of
    # the same rows passed as a validation set (same trees, same scores; the final weighted sum
    # may be reduced in another order by XLA: equal to float rounding).
    X, y, *_ = data
    Xb = jnp.asarray(jboost.data.binning.bin_features(jnp.asarray(X), jboost.data.binning.compute_borders(X, 32)))
    held = (np.arange(len(y)) % 4 == 1).astype(np.float32)
    config = boosting_lib.BoostConfig(n_rounds=5, depth=3, n_bins=32)
    loss = losses.get("squared_error")
    key, hyper = jax.random.key(3), boosting_lib.Hyperparams.create(learning_rate=0.3, subsample=0.7)
    y_j, w_train, w_held = jnp.asarray(y), jnp.asarray(1.0 - held), jnp.asarray(held)
    with_valid = state_lib.Data(Xb, y_j, w_train, Xb, y_j, w_held)
    by_valid_set = boosting_lib.boost(with_valid, key, hyper, loss, jnp.zeros((1,)), config=config)

    train_only = state_lib.Data.train_only(Xb, y_j, w_train)

    def body(state, m):
        state, out = boosting_lib.step(state, m, data=train_only, key=key, hyper=hyper, config=config)
        return state, (out.trees, out.train_loss,
                       boosting_lib.mean_loss(state.loss, y_j, state.raw, w_held))

    state0 = boosting_lib.init(train_only, loss, jnp.zeros((1,)), config)
    _, (trees, train_loss, held_loss) = jax.jit(
        lambda s: jax.lax.scan(body, s, jnp.arange(config.n_rounds)))(state0)
    np.testing.assert_allclose(held_loss, by_valid_set.valid_loss, rtol=1e-6)
    np.testing.assert_array_equal(train_loss, by_valid_set.train_loss)
    np.testing.assert_array_equal(trees.leaf_values, by_valid_set.trees.leaf_values)
    assert np.all(np.isfinite(held_loss))


def test_without_eval_set_valid_loss_is_nan(data, fit_kw):
    X, y, *_ = data
    m = jboost.fit(X[:197], y[:197], "squared_error", **fit_kw)  # same program as the compile test
    assert m.valid_loss.shape == (fit_kw["n_rounds"],) and np.all(np.isnan(m.valid_loss))


def test_train_loss_decreases_for_squared_error(data, fit_main):
    X, y, *_ = data
    m = fit_main(learning_rate=0.3)
    initial = np.mean(0.5 * (y - y.mean()) ** 2)
    losses_ = np.concatenate([[initial], np.asarray(m.train_loss)])
    assert np.all(np.diff(losses_) < 0), losses_
    assert losses_[-1] < 0.5 * initial


def test_rounds_do_not_depend_on_later_rounds(fit_main, model, assert_trees_equal):
    short = fit_main(learning_rate=0.3, subsample=0.8, key=0, n_rounds=3)
    assert_trees_equal(short.trees, jax.tree_util.tree_map(lambda a: a[:3], model.trees))
    np.testing.assert_allclose(short.train_loss, model.train_loss[:3], rtol=1e-6)


def test_learning_rate_schedule(data, fit_kw, fit_main, assert_trees_equal):
    # An optax schedule as the learning rate: 0.3 for rounds 0-1, then 0.05.
    X, y, *_ = data
    schedule = optax.piecewise_constant_schedule(0.3, {2: 1 / 6})
    sched = fit_main(learning_rate=schedule)  # runs under strict promotion (see round_learning_rate)
    const = fit_main(learning_rate=0.3)
    first = lambda t: jax.tree_util.tree_map(lambda a: a[:2], t)
    assert_trees_equal(first(sched.trees), first(const.trees))
    # Round 2 replicated: a Newton tree on the residuals of the first two rounds, scaled by 0.05.
    raw2 = np.asarray(jboost.predict(sched, X, n_rounds=2))
    g = jnp.asarray(raw2 - y)[:, None]
    expected, _ = fit_tree(jboost.bin_features(X, sched.borders), g, jnp.ones_like(g), depth=fit_kw["depth"],
                           n_bins=fit_kw["n_bins"], l2=1.0, min_split_gain=0.0, min_child_weight=1.0)
    got = jax.tree_util.tree_map(lambda a: a[2, 0], sched.trees)
    assert_same_structure(got, expected)
    np.testing.assert_allclose(got.leaf_values, 0.05 * np.asarray(expected.leaf_values), rtol=1e-4, atol=1e-6)


# --------------------------------------------------------------------------------------------
# K outputs; leaf refits inside boosting
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("per_output_trees", [True, False])
def test_multinomial_round_zero(multiclass_data, fit_kw, per_output_trees):
    X, y, Xv, yv = multiclass_data
    m = jboost.fit(X, y, "multinomial_deviance", learning_rate=0.5, per_output_trees=per_output_trees,
                   **fit_kw)
    K, R = 3, fit_kw["n_rounds"]
    assert m.trees.features.shape[:2] == (R, K if per_output_trees else 1)
    assert m.trees.leaf_values.shape[-1] == K
    loss = losses.multinomial_deviance(K)
    raw0 = jnp.broadcast_to(m.baseline, (X.shape[0], K))
    g, h = grad_hess(loss, jnp.asarray(y), raw0, learning_rate=0.5)  # the learning-rate-aware curvature
    Xb = jboost.bin_features(X, m.borders)
    kw = dict(depth=fit_kw["depth"], n_bins=fit_kw["n_bins"], l2=1.0, min_split_gain=0.0, min_child_weight=1.0)
    if per_output_trees:
        # ESL Algorithm 10.4: one tree per class on that class's gradients; it moves only its score.
        for k in range(K):
            expected, _ = fit_tree(Xb, g[:, k:k + 1], h[:, k:k + 1], **kw)
            got = jax.tree_util.tree_map(lambda a: a[0, k], m.trees)
            assert_same_structure(got, expected)
            lv = np.asarray(got.leaf_values)
            np.testing.assert_allclose(lv[:, k], 0.5 * np.asarray(expected.leaf_values)[:, 0], rtol=1e-5, atol=1e-7)
            np.testing.assert_array_equal(np.delete(lv, k, axis=1), 0.0)
    else:
        expected, _ = fit_tree(Xb, g, h, **kw)
        got = jax.tree_util.tree_map(lambda a: a[0, 0], m.trees)
        assert_same_structure(got, expected)
        np.testing.assert_allclose(got.leaf_values, 0.5 * np.asarray(expected.leaf_values), rtol=1e-5, atol=1e-7)
    assert np.all(np.diff(np.asarray(m.train_loss)) < 0)
    proba = np.asarray(jboost.predict_proba(m, Xv))
    np.testing.assert_allclose(proba.sum(1), 1.0, rtol=1e-5)
    np.testing.assert_allclose(np.asarray(jboost.predict(m, Xv)), numpy_predict(m, Xv, R), rtol=1e-5, atol=1e-5)


def test_absolute_error_leaves_are_refitted_medians(regression_data, fit_kw):
    # LAD boosting (ESL Algorithm 10.3 / Friedman 2001): structure from the signs of the
    # residuals, then each leaf's value is the median of its residuals (times the learning rate).
    X, y, *_ = regression_data
    m = jboost.fit(X, y, "absolute_error", learning_rate=0.5, **fit_kw)
    assert float(m.baseline[0]) == np.float32(np.sort(y)[(len(y) - 1) // 2])  # lower median
    t0 = jax.tree_util.tree_map(lambda a: np.asarray(a[0, 0]), m.trees)
    leaf = np.zeros(len(y), np.int64)
    for d in range(t0.features.shape[0]):
        leaf += (X[:, t0.features[d]] > t0.borders[d]).astype(np.int64) << d
    r = y - np.float32(m.baseline[0])
    for j in np.unique(leaf):
        rs = np.sort(r[leaf == j])
        np.testing.assert_allclose(t0.leaf_values[j, 0], 0.5 * rs[(len(rs) - 1) // 2], rtol=1e-6)


def test_adaptive_huber_delta_is_the_alpha_quantile_of_the_last_residuals(regression_data, fit_kw):
    # ESL 10.10.2: each round, delta = alpha-quantile of |y - f_{m-1}|. After n rounds the model
    # carries the delta of its last round, computed from the raw scores after n - 1 rounds.
    X, y, _, _ = regression_data
    kw = {k: v for k, v in fit_kw.items() if k != "n_rounds"}
    loss = losses.huber(alpha=0.8)
    model = jboost.fit(X, y, loss, n_rounds=4, **kw)
    raw_before_last = np.asarray(jboost.predict(model, X, n_rounds=3))
    r = np.sort(np.abs(y - raw_before_last))
    expected = r[int(np.ceil(0.8 * len(r))) - 1]  # smallest value with cumulative weight >= 80%
    np.testing.assert_allclose(float(model.loss.params["delta"]), expected, rtol=1e-5)
    assert float(model.loss.params["alpha"]) == pytest.approx(0.8)


def test_typed_and_raw_keys_give_the_same_model(regression_data, fit_kw, assert_trees_equal):
    X, y, _, _ = regression_data
    typed = jboost.fit(X, y, subsample=0.6, key=jax.random.key(5), **fit_kw)
    raw = jboost.fit(X, y, subsample=0.6, key=jax.random.PRNGKey(5), **fit_kw)
    seed = jboost.fit(X, y, subsample=0.6, key=5, **fit_kw)
    assert_trees_equal(raw.trees, seed.trees)
    assert_trees_equal(typed.trees, raw.trees)
