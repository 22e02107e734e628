"""Tests of jboost.algorithms: the literature's boosting algorithms on the shared tree builder.

Every check compares against something independent: a NumPy implementation of ESL Algorithm 10.1
with brute-force stumps, per-leaf statistics recomputed in NumPy from the fitted leaves,
separately fitted models (SAMME with K = 2 vs AdaBoost.M1, LogitBoost's two forms, line-search
gradient boosting vs ``jboost.fit``'s Newton trees), or separate fits vs one vmapped fit.

Compilation dominates the run time, so the tests share data shapes and settings (one compiled
scan serves several tests).
"""

import importlib
import pathlib

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import jboost
from jboost import algorithms as A
from jboost import tree as tree_lib

# The shared setting of the small fits. AdaBoost.M1, Real and Gentle AdaBoost use stumps (as in
# ESL Figure 10.2), so the smoke variant of experiments/configs/adaboost_spheres.py reuses their
# compiled scans; the smoke variants of samme_simulation and shrinkage_subsampling likewise share
# shapes and settings with the three-class fits and the vmap test.
N_ROUNDS, DEPTH = 30, 2
STUMPS = ("adaboost_m1", "real_adaboost", "gentle_adaboost")


def _nested_spheres():
    X, y = jboost.datasets.nested_spheres(400, seed=0)
    Xt, yt = jboost.datasets.nested_spheres(1000, seed=1)
    return X, y, Xt, yt


def _three_class():
    """Class = which of the first 3 of 10 Gaussian features is largest (trivial error 2/3)."""
    def draw(n, seed):
        X = np.random.default_rng(seed).standard_normal((n, 10)).astype(np.float32)
        return X, np.argmax(X[:, :3], axis=1).astype(np.float32)
    return draw(400, 0) + draw(1000, 1)


def _regression():
    # One draw split in two: make_regression's coefficients depend on the seed.
    X, y = jboost.datasets.make_regression(1400, n_features=10, n_informative=5, seed=0)
    return X[:400], y[:400], X[400:], y[400:]


BIN = _nested_spheres()
TRI = _three_class()
REG = _regression()


def _leaves(model, X, round_=0, tree=0):
    """Leaf of every row in one fitted tree, via the float-threshold path."""
    t = jax.tree_util.tree_map(lambda a: a[round_, tree], model.trees)
    return np.asarray(tree_lib.leaf_index_raw(t, jnp.asarray(X).T))


def _error(model, X, y):
    return float(np.mean(np.asarray(A.classify(_raw(model, X))) != y))


def _raw(model, X):
    raw = jboost.predict(model, X)
    return raw[:, None] if raw.ndim == 1 else raw


# ------------------------------------------------------------------------------------------------
# AdaBoost.M1 against a NumPy reference of ESL Algorithm 10.1
# ------------------------------------------------------------------------------------------------


def numpy_adaboost_m1_stumps(X, y01, n_rounds):
    """ESL Algorithm 10.1 in float64 with brute-force stumps.

    The stump maximises the weighted least-squares gain of ``y in {-1,+1}`` (the criterion of
    jboost's weak learner), thresholds are midpoints between distinct values, and each side votes
    the sign of its weighted class balance (ties: -1).
    """
    X = X.astype(np.float64)
    y = 2.0 * y01 - 1.0
    n, n_features = X.shape
    w = np.full(n, 1.0 / n)
    rounds = []
    for _ in range(n_rounds):
        cands = []
        for f in range(n_features):
            v = np.unique(X[:, f])
            for t in range(len(v) - 1):
                thr = (v[t] + v[t + 1]) / 2
                right = X[:, f] > thr
                gain = sum(np.sum(w[s] * y[s]) ** 2 / np.sum(w[s]) for s in (right, ~right))
                cands.append((gain - np.sum(w * y) ** 2 / np.sum(w), f, thr))
        gains = np.array([c[0] for c in cands])
        i = int(np.argmax(gains))
        margin = gains[i] - np.max(np.delete(gains, i))
        _, f, thr = cands[i]
        right = X[:, f] > thr
        pred = np.empty(n)
        for s in (right, ~right):
            pred[s] = 1.0 if np.sum(w[s] * y[s]) > 0 else -1.0
        miss = (pred != y).astype(np.float64)
        err = np.sum(w * miss) / np.sum(w)
        alpha = np.log((1 - err) / err)
        w = w * np.exp(alpha * miss)
        w = w / np.sum(w)
        rounds.append(dict(feature=f, threshold=thr, err=err, alpha=alpha, weights=w.copy(),
                           margin=margin, vote=pred))
    return rounds


def _tiny(kind):
    """12 rows, 2 features: all tiny fits share one compiled scan."""
    rng = np.random.default_rng(3)
    X = rng.standard_normal((12, 2)).astype(np.float32)
    if kind == "noisy":
        y = (X[:, 0] + 0.7 * X[:, 1] + 0.8 * rng.standard_normal(12) > 0).astype(np.float32)
    elif kind == "separable":
        y = (X[:, 0] > np.median(X[:, 0])).astype(np.float32)
    else:  # "xor": three copies of the XOR square, no stump beats chance
        X = np.tile(np.array([[0, 0], [0, 1], [1, 0], [1, 1]], np.float32), (3, 1))
        y = np.tile(np.array([0, 1, 1, 0], np.float32), 3)
    return X, y


def test_adaboost_m1_matches_numpy_reference_of_esl_algorithm_10_1():
    X, y = _tiny("noisy")
    ref = numpy_adaboost_m1_stumps(X, y, 6)
    # The reference's best stump must be clearly best, or float32 rounding could pick another.
    assert min(r["margin"] for r in ref) > 1e-3
    fit = A.adaboost_m1(X, y, n_rounds=6, depth=1)
    np.testing.assert_array_equal(fit.status, A.OK)
    np.testing.assert_array_equal(fit.model.trees.features[:, 0, 0], [r["feature"] for r in ref])
    np.testing.assert_allclose(fit.model.trees.borders[:, 0, 0], [r["threshold"] for r in ref],
                               rtol=1e-6)
    np.testing.assert_allclose(fit.err, [r["err"] for r in ref], rtol=1e-5)
    np.testing.assert_allclose(fit.coef, [r["alpha"] for r in ref], rtol=1e-5)
    np.testing.assert_allclose(np.asarray(fit.weights) / len(y), ref[-1]["weights"], rtol=1e-5)
    # Output G(x) = sign(sum alpha_m G_m(x)), raw on the exponential-loss scale (alpha / 2).
    vote = sum(r["alpha"] * r["vote"] for r in ref)
    np.testing.assert_allclose(jboost.predict(fit.model, X), vote / 2, rtol=1e-5, atol=1e-5)


def test_adaboost_m1_round_no_better_than_chance_stops_the_model():
    X, y = _tiny("xor")
    fit = A.adaboost_m1(X, y, n_rounds=6, depth=1)
    assert int(fit.status[0]) == A.WEAK
    np.testing.assert_array_equal(fit.status[1:], A.STOPPED)
    np.testing.assert_allclose(fit.err[0], 0.5)
    assert np.all(np.isnan(fit.err[1:]))
    np.testing.assert_array_equal(fit.coef, 0.0)
    np.testing.assert_array_equal(fit.model.trees.leaf_values, 0.0)
    np.testing.assert_allclose(fit.weights, 1.0)          # weights untouched
    np.testing.assert_array_equal(jboost.predict(fit.model, X), 0.0)


def test_adaboost_m1_perfect_round_is_kept_with_finite_weight_and_stops():
    X, y = _tiny("separable")
    fit = A.adaboost_m1(X, y, n_rounds=6, depth=1)
    assert int(fit.status[0]) == A.PERFECT
    np.testing.assert_array_equal(fit.status[1:], A.STOPPED)
    assert float(fit.err[0]) == 0.0
    np.testing.assert_allclose(fit.coef[0], np.log(1e10), rtol=1e-5)   # err floored at 1e-10
    np.testing.assert_array_equal(fit.coef[1:], 0.0)
    assert np.all(np.isfinite(fit.weights)) and np.all(np.isfinite(fit.model.trees.leaf_values))
    np.testing.assert_array_equal(jboost.predict_class(fit.model, X), y)


# ------------------------------------------------------------------------------------------------
# Every algorithm learns: clearly better than the trivial classifier / the mean
# ------------------------------------------------------------------------------------------------

BINARY = {
    "adaboost_m1": lambda X, y, **kw: A.adaboost_m1(X, y, **kw),
    "real_adaboost": lambda X, y, **kw: A.real_adaboost(X, y, **kw),
    "gentle_adaboost": lambda X, y, **kw: A.gentle_adaboost(X, y, **kw),
    "logitboost": lambda X, y, **kw: A.logitboost(X, y, **kw),
    "gradient_boost": lambda X, y, **kw: A.gradient_boost(X, y, "binomial_deviance", **kw),
    "forward_stagewise": lambda X, y, **kw: A.forward_stagewise(X, y, "binomial_deviance", **kw),
}


@pytest.fixture(scope="module")
def binary_fits():
    X, y, _, _ = BIN
    fits = {}
    for name, fn in BINARY.items():
        kw = dict(n_rounds=N_ROUNDS, depth=1 if name in STUMPS else DEPTH)
        if name in ("gradient_boost", "forward_stagewise"):
            kw["learning_rate"] = 0.5
        fits[name] = fn(X, y, **kw)
    return fits


@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_algorithm_beats_the_trivial_classifier(binary_fits, name):
    X, y, Xt, yt = BIN
    fit = binary_fits[name]
    trivial = min(np.mean(yt), 1 - np.mean(yt))          # about 0.5
    test_err = _error(fit.model, Xt, yt)
    assert test_err < trivial - 0.1, (name, test_err, trivial)
    # The training loss the algorithm minimises goes down.
    tl = np.asarray(fit.model.train_loss)
    assert tl[-1] < 0.9 * tl[0], (name, tl[0], tl[-1])
    # staged_error agrees with predict_class after the last round.
    staged = np.asarray(A.staged_error(fit.model, Xt, yt))
    assert staged.shape == (N_ROUNDS,)
    np.testing.assert_allclose(staged[-1], test_err, atol=1e-6)
    np.testing.assert_allclose(
        staged[-1], np.mean(np.asarray(jboost.predict_class(fit.model, Xt)) != yt), atol=1e-6)


@pytest.mark.parametrize("name", ["samme", "samme_r", "logitboost"])
def test_three_class_algorithm_beats_the_trivial_classifier(name):
    X, y, Xt, yt = TRI
    fit = getattr(A, name)(X, y, n_rounds=N_ROUNDS, depth=DEPTH)
    assert fit.model.n_outputs == 3
    test_err = _error(fit.model, Xt, yt)
    assert test_err < 2 / 3 - 0.4, (name, test_err)
    np.testing.assert_allclose(A.staged_loss(fit.model, Xt, yt)[-1],
                               np.mean(jboost.losses.per_sample_losses(fit.model.loss, jnp.asarray(yt),
                                                                       _raw(fit.model, Xt))),
                               rtol=1e-5)


# Settings shared by the regression fits (one compiled scan per algorithm and loss).
REG_KW = dict(n_rounds=N_ROUNDS, depth=DEPTH, learning_rate=0.3, subsample=0.7, l2=0.0, key=5)


@pytest.mark.parametrize("algo,loss", [("gradient_boost", "huber"),
                                       ("forward_stagewise", "squared_error")])
def test_regression_beats_the_mean(algo, loss):
    X, y, Xt, yt = REG
    fit = getattr(A, algo)(X, y, loss, **REG_KW)
    mse = np.mean((np.asarray(jboost.predict(fit.model, Xt)) - yt) ** 2)
    assert mse < 0.5 * np.var(yt), (algo, mse, np.var(yt))


# ------------------------------------------------------------------------------------------------
# Identities between algorithms
# ------------------------------------------------------------------------------------------------


def test_samme_with_two_classes_is_adaboost_m1(binary_fits):
    X, y, Xt, _ = BIN
    m1 = binary_fits["adaboost_m1"]                                   # stumps
    s = A.samme(X, y, n_rounds=N_ROUNDS, depth=1)
    np.testing.assert_array_equal(s.status, m1.status)
    np.testing.assert_array_equal(s.model.trees.features, m1.model.trees.features)
    np.testing.assert_array_equal(s.model.trees.thresholds, m1.model.trees.thresholds)
    np.testing.assert_allclose(s.err, m1.err, rtol=1e-5)
    np.testing.assert_allclose(s.coef, m1.coef, rtol=1e-5)          # log(K - 1) = 0
    np.testing.assert_allclose(s.weights, m1.weights, rtol=1e-4)
    raw_s = np.asarray(jboost.predict(s.model, Xt))
    raw_m = np.asarray(jboost.predict(m1.model, Xt))
    np.testing.assert_allclose(raw_s[:, 1] - raw_s[:, 0], 2 * raw_m, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(jboost.predict_proba(s.model, Xt), jboost.predict_proba(m1.model, Xt),
                               atol=1e-5)


def test_samme_first_round_against_numpy():
    X, y, _, _ = TRI
    k = 3
    fit = A.samme(X, y, n_rounds=N_ROUNDS, depth=DEPTH)
    leaf = _leaves(fit.model, X)
    counts = np.zeros((2**DEPTH, k))
    np.add.at(counts, (leaf, y.astype(int)), 1.0)
    cls = np.argmax(counts, axis=1)
    err = np.mean(cls[leaf] != y)
    alpha = np.log((1 - err) / err) + np.log(k - 1)
    np.testing.assert_allclose(fit.err[0], err, rtol=1e-5)
    np.testing.assert_allclose(fit.coef[0], alpha, rtol=1e-5)
    expected = (k - 1) * alpha * (np.eye(k)[cls] - 1 / k)
    np.testing.assert_allclose(fit.model.trees.leaf_values[0, 0], expected, rtol=1e-5, atol=1e-6)


def test_samme_r_first_round_against_numpy():
    X, y, _, _ = TRI
    k = 3
    fit = A.samme_r(X, y, n_rounds=1, depth=DEPTH)
    leaf = _leaves(fit.model, X)
    counts = np.zeros((2**DEPTH, k))
    np.add.at(counts, (leaf, y.astype(int)), 1.0)
    p = np.clip(counts / counts.sum(1, keepdims=True), 1e-6, 1)
    h = (k - 1) * (np.log(p) - np.log(p).mean(1, keepdims=True))
    np.testing.assert_allclose(fit.model.trees.leaf_values[0, 0], h, rtol=1e-5, atol=1e-5)
    code = np.where(np.eye(k)[y.astype(int)] > 0, 1.0, -1.0 / (k - 1))
    w = np.exp(-(k - 1) / k * np.sum(code * np.log(p[leaf]), axis=1))
    np.testing.assert_allclose(fit.weights, w * len(y) / w.sum(), rtol=1e-4)


def test_real_and_gentle_first_round_against_numpy(binary_fits):
    X, y, _, _ = BIN
    y_pm = 2 * y - 1
    for name in ("real_adaboost", "gentle_adaboost"):
        fit = binary_fits[name]
        leaf = _leaves(fit.model, X)
        full = np.unique(leaf)                                # a leaf may hold no training row
        mean_y = np.array([y_pm[leaf == j].mean() for j in full])
        if name == "gentle_adaboost":
            f = mean_y
        else:
            p = np.clip((1 + mean_y) / 2, 1e-6, 1 - 1e-6)
            f = 0.5 * np.log(p / (1 - p))
        np.testing.assert_allclose(fit.model.trees.leaf_values[0, 0, full, 0], f, rtol=1e-5,
                                   atol=1e-6)


def test_logitboost_two_class_equals_k_class_form_with_two_classes():
    X, y, Xt, _ = BIN
    two = A.logitboost(X, y, n_rounds=N_ROUNDS, depth=DEPTH)
    kcl = A.logitboost(X, y, n_rounds=N_ROUNDS, depth=DEPTH, form="k_class")
    assert two.model.trees.features.shape[:2] == (N_ROUNDS, 1)
    assert kcl.model.trees.features.shape[:2] == (N_ROUNDS, 2)
    # Class 1's trees of the K-class form have the two-class form's splits.
    np.testing.assert_array_equal(kcl.model.trees.features[:, 1], two.model.trees.features[:, 0])
    raw_k = np.asarray(jboost.predict(kcl.model, Xt))
    raw_2 = np.asarray(jboost.predict(two.model, Xt))
    np.testing.assert_allclose(raw_k[:, 1] - raw_k[:, 0], 2 * raw_2, rtol=1e-3, atol=1e-3)
    np.testing.assert_allclose(jboost.predict_proba(kcl.model, Xt), jboost.predict_proba(two.model, Xt),
                               atol=1e-4)
    # First round by hand: p = 1/2, z = +-2, w = 1/4, F = f/2 = mean z in the leaf / 2.
    leaf = _leaves(two.model, X)
    full = np.unique(leaf)
    z = np.where(y > 0, 2.0, -2.0)
    expected = np.array([z[leaf == j].mean() for j in full]) / 2
    np.testing.assert_allclose(two.model.trees.leaf_values[0, 0, full, 0], expected, rtol=1e-5)


def test_gradient_boost_squared_error_equals_newton_trees():
    """Line search on squared error is exact: ESL Alg. 10.3 == jboost.fit's Newton trees (l2 = 0)."""
    X, y, _, _ = REG
    kw = REG_KW
    gb = A.gradient_boost(X, y, "squared_error", **kw)
    newton = jboost.fit(X, y, "squared_error", **kw)
    np.testing.assert_array_equal(gb.model.trees.features, newton.trees.features)
    np.testing.assert_array_equal(gb.model.trees.thresholds, newton.trees.thresholds)
    np.testing.assert_allclose(jboost.predict(gb.model, X), jboost.predict(newton, X), rtol=1e-4,
                               atol=1e-4)
    # Forward stagewise on squared error: the least-squares tree already has beta = 1.
    fs = A.forward_stagewise(X, y, "squared_error", **kw)
    np.testing.assert_allclose(fs.coef, 0.3, rtol=1e-4)
    np.testing.assert_allclose(jboost.predict(fs.model, X), jboost.predict(gb.model, X), rtol=1e-4,
                               atol=1e-4)


def test_line_searches_minimise_the_true_loss(binary_fits):
    """Binomial deviance: each leaf's gamma (Alg. 10.3) and the global beta (Alg. 10.2) are stationary."""
    X, y, _, _ = BIN
    f0 = np.log(y.mean() / (1 - y.mean()))
    sigmoid = lambda t: 1 / (1 + np.exp(-t))
    gb = binary_fits["gradient_boost"]                                   # learning rate 0.5
    leaf = _leaves(gb.model, X)
    gamma = np.asarray(gb.model.trees.leaf_values[0, 0, :, 0]) / 0.5
    for j in range(2**DEPTH):
        rows = leaf == j
        if rows.any():
            grad = np.sum(sigmoid(f0 + gamma[j]) - y[rows])
            assert abs(grad) < 1e-3 * rows.sum(), (j, grad)
    fs = binary_fits["forward_stagewise"]
    beta = float(fs.coef[0]) / 0.5
    b = np.asarray(fs.model.trees.leaf_values[0, 0, :, 0])[_leaves(fs.model, X)] / float(fs.coef[0])
    assert abs(beta - 1.0) > 0.05                                        # a real search happened
    phi_prime = np.sum((sigmoid(f0 + beta * b) - y) * b)
    assert abs(phi_prime) < 1e-3 * len(y), phi_prime


def test_clipped_leaf_line_search_stays_finite_on_a_saturated_leaf():
    """Leaf 0: two class-1 rows at raw -40 (p ~ 4e-18: no curvature, the optimum is +inf);
    leaf 1: one row of each class at raw 0 (optimum gamma = logit(1/2) = 0). Each Newton step
    is clipped to max_step = 1, so leaf 0 moves by exactly 1 per step instead of ~1e17."""
    from jboost.algorithms import gradient

    loss = jboost.losses.binomial_deviance()
    y = jnp.array([1.0, 1.0, 0.0, 1.0])
    raw = jnp.array([[-40.0], [-40.0], [0.0], [0.0]])
    leaf = jnp.array([0, 0, 1, 1])
    gamma = gradient.line_search_leaf_values(loss, y, raw, jnp.ones(4), leaf, 2,
                                             jnp.array([[1.0], [0.0]]), 5, 1.0)
    np.testing.assert_allclose(gamma, [[6.0], [0.0]], atol=1e-6)
    beta = gradient.line_search_coefficient(loss, y, raw, jnp.ones((4, 1)), jnp.ones(4), 5, 1.0)
    assert np.isfinite(float(beta)) and abs(float(beta) - 1.0) <= 5.0


# ------------------------------------------------------------------------------------------------
# vmap, determinism, schedules, errors
# ------------------------------------------------------------------------------------------------


def _assert_fits_equal(a, b, loss_rtol=0.0):
    """Bitwise equal trees, coefficients, status and weights; the mean-loss records up to
    ``loss_rtol`` (under vmap XLA may reduce in another order: 1 ulp, jboost.fit alike)."""
    for (path, x), z in zip(jax.tree_util.tree_flatten_with_path(a)[0], jax.tree_util.tree_leaves(b)):
        name = jax.tree_util.keystr(path)
        if name.endswith(("train_loss", "valid_loss")):
            np.testing.assert_allclose(np.asarray(x), np.asarray(z), rtol=loss_rtol, err_msg=name)
        else:
            np.testing.assert_array_equal(np.asarray(x), np.asarray(z), err_msg=name)


def test_vmap_over_hyperparameters_and_key_equals_separate_fits():
    """One vmapped fit over (learning rate, subsample, key) == separate fits, for two algorithms.

    The gradient-boosting sweep is the smoke panel of experiments/configs/shrinkage_subsampling.py
    (ESL Fig. 10.12 settings), whose compiled scan this test shares.
    """
    X, y, _, _ = BIN

    def m1(lr, sub, key):
        return A.adaboost_m1(X, y, n_rounds=N_ROUNDS, depth=1, learning_rate=lr, subsample=sub,
                             key=key)

    def gb(lr, sub, key):
        return A.gradient_boost(X, y, "binomial_deviance", n_rounds=N_ROUNDS, depth=DEPTH,
                                learning_rate=lr, subsample=sub, key=key)

    sweeps = [(m1, [0.5, 1.0], [0.6, 0.9]), (gb, [1.0, 0.1, 1.0, 0.1], [1.0, 1.0, 0.5, 0.5])]
    for fn, lrs, subs in sweeps:
        lrs, subs = jnp.array(lrs), jnp.array(subs)
        keys = jax.random.split(jax.random.PRNGKey(0), len(lrs))
        batched = jax.vmap(fn)(lrs, subs, keys)
        for i in range(len(lrs)):
            single = fn(lrs[i], subs[i], keys[i])
            _assert_fits_equal(jax.tree_util.tree_map(lambda a: a[i], batched), single,
                               loss_rtol=1e-6)


def test_fits_are_bitwise_deterministic(binary_fits):
    X, y, _, _ = BIN
    _assert_fits_equal(A.adaboost_m1(X, y, n_rounds=N_ROUNDS, depth=1), binary_fits["adaboost_m1"])
    _assert_fits_equal(A.logitboost(X, y, n_rounds=N_ROUNDS, depth=DEPTH), binary_fits["logitboost"])


def test_learning_rate_schedule_is_an_optax_schedule(binary_fits):
    X, y, _, _ = BIN
    schedule = optax.piecewise_constant_schedule(0.5, {10: 0.2})      # 0.5, then 0.1 from round 10
    fit = A.gradient_boost(X, y, "binomial_deviance", n_rounds=N_ROUNDS, depth=DEPTH,
                           learning_rate=schedule)
    const = binary_fits["gradient_boost"]                              # learning rate 0.5
    np.testing.assert_allclose(fit.coef, [0.5] * 10 + [0.1] * (N_ROUNDS - 10), rtol=1e-6)
    first = lambda f: jax.tree_util.tree_map(lambda a: a[:10], f.model.trees)
    _assert_fits_equal(first(fit), first(const))
    assert not np.allclose(fit.model.trees.leaf_values[10:], const.model.trees.leaf_values[10:])


def test_errors_name_the_argument():
    X, y, _, _ = BIN
    with pytest.raises(ValueError, match="y must hold binary labels"):
        A.adaboost_m1(X, y + 1, n_rounds=2)
    with pytest.raises(ValueError, match="err_floor"):
        A.adaboost_m1(X, y, n_rounds=2, err_floor=0.0)
    with pytest.raises(ValueError, match="form="):
        A.logitboost(X, y, n_rounds=2, form="three")
    with pytest.raises(ValueError, match="leaf_refit="):
        A.gradient_boost(X, y, n_rounds=2, leaf_refit="newton")
    with pytest.raises(ValueError, match="learning_rate"):
        A.samme(X, y, n_rounds=2, learning_rate=-1.0)
    with pytest.raises(TypeError, match="depth must be an int"):
        A.real_adaboost(X, y, depth=2.0)


# ------------------------------------------------------------------------------------------------
# Experiment configs: smoke variants run through the runner contract with a tiny context
# ------------------------------------------------------------------------------------------------


class _Ctx:
    def __init__(self, workdir):
        self.workdir = pathlib.Path(workdir)
        self.data_dir = None
        self.smoke = True
        self.logged = []

    def log(self, step, **metrics):
        self.logged.append((step, metrics))

    def savefig(self, fig, name):
        fig.savefig(self.workdir / f"{name}.png")


@pytest.mark.parametrize("name", ["adaboost_spheres", "shrinkage_subsampling", "samme_simulation",
                                  "multiclass_table"])
def test_experiment_config_smoke(name, tmp_path):
    mod = importlib.import_module(f"experiments.configs.{name}")
    config = mod.get_config(smoke=True)
    assert "seed" in config and "description" in config
    ctx = _Ctx(tmp_path)
    out = mod.run(config, ctx)
    assert out["table"], name
    for row in out["table"]:
        assert set(row) >= {"quantity", "published", "ours"}
        assert np.isfinite(row["ours"]), row
    assert ctx.logged
