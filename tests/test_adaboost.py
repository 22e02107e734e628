"""Tests of jboost.algorithms.adaboost: AdaBoost.M1 against a NumPy implementation of ESL
Algorithm 10.1 with brute-force stumps, its WEAK and PERFECT stops, SAMME and SAMME.R against
per-leaf statistics recomputed in NumPy, and SAMME with K = 2 against AdaBoost.M1."""

import numpy as np
import pytest

import jboost
from jboost import algorithms as A

from tests._algorithms_data import BIN, DEPTH, N_ROUNDS, TRI, binary_fit, leaves, three_class_fit


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
    assert isinstance(fit, jboost.Booster)
    np.testing.assert_array_equal(fit.info["status"], A.OK)
    np.testing.assert_array_equal(fit.trees.features[:, 0, 0], [r["feature"] for r in ref])
    np.testing.assert_allclose(fit.trees.borders[:, 0, 0], [r["threshold"] for r in ref],
                               rtol=1e-6)
    np.testing.assert_allclose(fit.info["err"], [r["err"] for r in ref], rtol=1e-5)
    np.testing.assert_allclose(fit.info["coef"], [r["alpha"] for r in ref], rtol=1e-5)
    np.testing.assert_allclose(np.asarray(fit.info["weights"]) / len(y), ref[-1]["weights"],
                               rtol=1e-5)
    # Output G(x) = sign(sum alpha_m G_m(x)), raw on the exponential-loss scale (alpha / 2).
    vote = sum(r["alpha"] * r["vote"] for r in ref)
    np.testing.assert_allclose(jboost.predict(fit, X), vote / 2, rtol=1e-5, atol=1e-5)


def test_adaboost_m1_round_no_better_than_chance_stops_the_model():
    X, y = _tiny("xor")
    fit = A.adaboost_m1(X, y, n_rounds=6, depth=1)
    assert int(fit.info["status"][0]) == A.WEAK
    np.testing.assert_array_equal(fit.info["status"][1:], A.STOPPED)
    np.testing.assert_allclose(fit.info["err"][0], 0.5)
    assert np.all(np.isnan(fit.info["err"][1:]))
    np.testing.assert_array_equal(fit.info["coef"], 0.0)
    np.testing.assert_array_equal(fit.trees.leaf_values, 0.0)
    np.testing.assert_allclose(fit.info["weights"], 1.0)          # weights untouched
    np.testing.assert_array_equal(jboost.predict(fit, X), 0.0)


def test_adaboost_m1_perfect_round_is_kept_with_finite_weight_and_stops():
    X, y = _tiny("separable")
    fit = A.adaboost_m1(X, y, n_rounds=6, depth=1)
    assert int(fit.info["status"][0]) == A.PERFECT
    np.testing.assert_array_equal(fit.info["status"][1:], A.STOPPED)
    assert float(fit.info["err"][0]) == 0.0
    np.testing.assert_allclose(fit.info["coef"][0], np.log(1e10), rtol=1e-5)   # err floored at 1e-10
    np.testing.assert_array_equal(fit.info["coef"][1:], 0.0)
    assert np.all(np.isfinite(fit.info["weights"])) and np.all(np.isfinite(fit.trees.leaf_values))
    np.testing.assert_array_equal(jboost.predict_class(fit, X), y)
    # Continued (init_model=), the stopped model stays stopped: its state says done, so the
    # new rounds are STOPPED, add nothing and keep the observation weights.
    assert bool(fit.info["done"])
    more = A.adaboost_m1(X, y, n_rounds=6, depth=1, init_model=fit)
    assert more.n_rounds == 12 and bool(more.info["done"])
    np.testing.assert_array_equal(more.info["status"][:6], fit.info["status"])
    np.testing.assert_array_equal(more.info["status"][6:], A.STOPPED)
    np.testing.assert_array_equal(more.info["coef"][6:], 0.0)
    np.testing.assert_array_equal(more.trees.leaf_values[6:], 0.0)
    np.testing.assert_array_equal(more.info["log_weights"], fit.info["log_weights"])
    np.testing.assert_array_equal(jboost.predict(more, X), jboost.predict(fit, X))


@pytest.mark.slow
def test_samme_with_two_classes_is_adaboost_m1():
    X, y, Xt, _ = BIN
    m1 = binary_fit("adaboost_m1")                                    # stumps
    s = A.samme(X, y, n_rounds=N_ROUNDS, depth=1)
    np.testing.assert_array_equal(s.info["status"], m1.info["status"])
    np.testing.assert_array_equal(s.trees.features, m1.trees.features)
    np.testing.assert_array_equal(s.trees.thresholds, m1.trees.thresholds)
    np.testing.assert_allclose(s.info["err"], m1.info["err"], rtol=1e-5)
    np.testing.assert_allclose(s.info["coef"], m1.info["coef"], rtol=1e-5)   # log(K - 1) = 0
    np.testing.assert_allclose(s.info["weights"], m1.info["weights"], rtol=1e-4)
    raw_s = np.asarray(jboost.predict(s, Xt))
    raw_m = np.asarray(jboost.predict(m1, Xt))
    np.testing.assert_allclose(raw_s[:, 1] - raw_s[:, 0], 2 * raw_m, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(jboost.predict_proba(s, Xt), jboost.predict_proba(m1, Xt),
                               atol=1e-5)


@pytest.mark.slow
def test_samme_first_round_against_numpy():
    X, y, _, _ = TRI
    k = 3
    fit = three_class_fit("samme")
    leaf = leaves(fit, X)
    counts = np.zeros((2**DEPTH, k))
    np.add.at(counts, (leaf, y.astype(int)), 1.0)
    cls = np.argmax(counts, axis=1)
    err = np.mean(cls[leaf] != y)
    alpha = np.log((1 - err) / err) + np.log(k - 1)
    np.testing.assert_allclose(fit.info["err"][0], err, rtol=1e-5)
    np.testing.assert_allclose(fit.info["coef"][0], alpha, rtol=1e-5)
    expected = (k - 1) * alpha * (np.eye(k)[cls] - 1 / k)
    np.testing.assert_allclose(fit.trees.leaf_values[0, 0], expected, rtol=1e-5, atol=1e-6)


def test_samme_r_first_round_against_numpy():
    X, y, _, _ = TRI
    k = 3
    fit = A.samme_r(X, y, n_rounds=1, depth=DEPTH)
    leaf = leaves(fit, X)
    counts = np.zeros((2**DEPTH, k))
    np.add.at(counts, (leaf, y.astype(int)), 1.0)
    p = np.clip(counts / counts.sum(1, keepdims=True), 1e-6, 1)
    h = (k - 1) * (np.log(p) - np.log(p).mean(1, keepdims=True))
    np.testing.assert_allclose(fit.trees.leaf_values[0, 0], h, rtol=1e-5, atol=1e-5)
    code = np.where(np.eye(k)[y.astype(int)] > 0, 1.0, -1.0 / (k - 1))
    w = np.exp(-(k - 1) / k * np.sum(code * np.log(p[leaf]), axis=1))
    np.testing.assert_allclose(fit.info["weights"], w * len(y) / w.sum(), rtol=1e-4)
