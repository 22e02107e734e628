"""Tests of jboost.algorithms.additive_logistic: Real and Gentle AdaBoost's first round against
per-leaf statistics recomputed in NumPy, and LogitBoost's two-class form against its K-class
form with two classes (and its first round by hand)."""

import numpy as np
import pytest

import jboost
from jboost import algorithms as A

from tests._algorithms_data import BIN, DEPTH, N_ROUNDS, binary_fit, leaves


@pytest.mark.slow
def test_real_and_gentle_first_round_against_numpy():
    X, y, _, _ = BIN
    y_pm = 2 * y - 1
    for name in ("real_adaboost", "gentle_adaboost"):
        fit = binary_fit(name)
        leaf = leaves(fit, X)
        full = np.unique(leaf)                                # a leaf may hold no training row
        mean_y = np.array([y_pm[leaf == j].mean() for j in full])
        if name == "gentle_adaboost":
            f = mean_y
        else:
            p = np.clip((1 + mean_y) / 2, 1e-6, 1 - 1e-6)
            f = 0.5 * np.log(p / (1 - p))
        np.testing.assert_allclose(fit.trees.leaf_values[0, 0, full, 0], f, rtol=1e-5, atol=1e-6)
        # The observation weights after the last round: exp(-y F(x)) normalised to sum to n
        # (learning rate 1, F = the model's raw score).
        w = np.exp(-y_pm * np.asarray(jboost.predict(fit, X), np.float64))
        np.testing.assert_allclose(fit.info["weights"], w * len(y) / w.sum(), rtol=2e-3)


@pytest.mark.slow
def test_logitboost_two_class_equals_k_class_form_with_two_classes():
    X, y, Xt, _ = BIN
    two = binary_fit("logitboost")
    kcl = A.logitboost(X, y, n_rounds=N_ROUNDS, depth=DEPTH, form="k_class")
    assert two.trees.features.shape[:2] == (N_ROUNDS, 1)
    assert kcl.trees.features.shape[:2] == (N_ROUNDS, 2)
    # Class 1's trees of the K-class form have the two-class form's splits.
    np.testing.assert_array_equal(kcl.trees.features[:, 1], two.trees.features[:, 0])
    raw_k = np.asarray(jboost.predict(kcl, Xt))
    raw_2 = np.asarray(jboost.predict(two, Xt))
    np.testing.assert_allclose(raw_k[:, 1] - raw_k[:, 0], 2 * raw_2, rtol=1e-3, atol=1e-3)
    np.testing.assert_allclose(jboost.predict_proba(kcl, Xt), jboost.predict_proba(two, Xt),
                               atol=1e-4)
    # First round by hand: p = 1/2, z = +-2, w = 1/4, F = f/2 = mean z in the leaf / 2.
    leaf = leaves(two, X)
    full = np.unique(leaf)
    z = np.where(y > 0, 2.0, -2.0)
    expected = np.array([z[leaf == j].mean() for j in full]) / 2
    np.testing.assert_allclose(two.trees.leaf_values[0, 0, full, 0], expected, rtol=1e-5)
    # No observation weights of its own: info holds the sample weights.
    np.testing.assert_array_equal(two.info["weights"], 1.0)
