"""Tests of jboost.bagging.oob: out-of-bag estimates (ESL 15.3.1) against brute force, by hand,
and the staged errors of a forest."""

import numpy as np
import pytest

import jboost
from jboost import bagging
from _bagging_data import clf_data, forest, reg_forest, reg_setup  # noqa: F401 (fixtures)


def brute_force_oob(outs, counts, y, classification):
    """NumPy loops: per row, the bags with count 0; per b, the error of the first b+1 bags."""
    n_bags, n, _ = outs.shape
    errors, pred = [], None
    for b in range(n_bags):
        pred = np.full(outs.shape[1:], np.nan)
        votes = np.full(outs.shape[1:], np.nan)
        for i in range(n):
            bags = [c for c in range(b + 1) if counts[c, i] == 0]
            if bags:
                pred[i] = outs[bags, i].mean(0)
                votes[i] = np.bincount(outs[bags, i].argmax(-1), minlength=outs.shape[2]) / len(bags)
        has = ~np.isnan(pred[:, 0])
        if classification:
            errors.append((np.mean(pred[has].argmax(-1) != y[has]), np.mean(votes[has].argmax(-1) != y[has])))
        else:
            errors.append((np.mean((pred[has, 0] - y[has]) ** 2), np.mean(np.abs(pred[has, 0] - y[has]))))
    return pred, votes, np.array(errors)


@pytest.mark.slow
def test_oob_uses_exactly_the_bags_that_left_the_row_out(forest, clf_data):
    X, y, _, _ = clf_data
    oob = bagging.forest_oob(forest, X, y)
    outs = np.asarray(bagging.tree_outputs(forest.trees, X))
    counts = np.asarray(forest.bag_weights)
    pred, votes, errors = brute_force_oob(outs, counts, y, classification=True)
    np.testing.assert_array_equal(oob.n_oob, (counts == 0).sum(0))
    np.testing.assert_allclose(oob.prediction, pred, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(oob.votes, votes, atol=1e-6)
    np.testing.assert_allclose(oob.error, errors[:, 0], atol=1e-6)
    np.testing.assert_allclose(oob.vote_error, errors[:, 1], atol=1e-6)
    assert oob.coverage[-1] == 1.0 and oob.coverage[0] < 0.5
    assert np.all(np.isnan(oob.abs_error))


def test_regression_oob_against_brute_force(reg_forest, reg_setup):
    X, y = reg_setup[0], reg_setup[1]
    oob = bagging.forest_oob(reg_forest, X, y)
    outs = np.asarray(bagging.tree_outputs(reg_forest.trees, X))
    pred, _, errors = brute_force_oob(outs, np.asarray(reg_forest.bag_weights), y, classification=False)
    np.testing.assert_allclose(oob.prediction, pred, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(oob.error, errors[:, 0], rtol=1e-5)
    np.testing.assert_allclose(oob.abs_error, errors[:, 1], rtol=1e-5)
    assert np.all(np.isnan(oob.votes)) and np.all(np.isnan(oob.vote_error))


def test_oob_hand_computed_case():
    # Bag 0 leaves out rows 0 and 1, bag 1 rows 0 and 2... row 3 is never out of bag.
    outs = np.array([[[0.9, 0.1], [0.2, 0.8], [0.6, 0.4], [0.5, 0.5]],
                     [[0.3, 0.7], [0.1, 0.9], [0.4, 0.6], [0.0, 1.0]]], np.float32)
    counts = np.array([[0, 0, 1, 2], [0, 3, 0, 1]], np.float32)
    y = np.array([0, 1, 1, 0], np.float32)
    oob = bagging.oob_from_outputs(outs, counts, y, classification=True)
    np.testing.assert_array_equal(oob.n_oob, [2, 1, 1, 0])
    np.testing.assert_allclose(oob.prediction[:3], [[0.6, 0.4], [0.2, 0.8], [0.4, 0.6]], atol=1e-6)
    assert np.all(np.isnan(oob.prediction[3]))
    np.testing.assert_allclose(oob.votes[0], [0.5, 0.5])
    # After bag 0: rows 0, 1 covered, both right; after bag 1: rows 0, 1, 2, all right.
    np.testing.assert_allclose(oob.error, [0.0, 0.0])
    np.testing.assert_allclose(oob.coverage, [0.5, 0.75])
    # Bayesian bootstrap weights are all positive: no row is ever out of bag.
    bayes = bagging.oob_from_outputs(outs, counts + 0.5, y, classification=True)
    assert np.all(np.isnan(bayes.prediction)) and np.all(bayes.coverage == 0)


def test_staged_errors_end_at_the_forest_error(reg_forest, reg_setup):
    X, y = reg_setup[0][:50], reg_setup[1][:50]
    staged = bagging.forest_staged(reg_forest, X, y)
    pred = np.asarray(jboost.predict(reg_forest, X))
    np.testing.assert_allclose(staged.abs_error[-1], np.mean(np.abs(pred - y)), rtol=1e-6)
    np.testing.assert_allclose(staged.prediction[:, 0], pred, rtol=1e-6)
    assert staged.coverage[0] == 1.0


def test_oob_needs_the_training_rows(forest, clf_data):
    X, y, _, _ = clf_data
    with pytest.raises(ValueError, match="X_train has 10 rows but the forest was fitted on 400"):
        bagging.forest_oob(forest, X[:10], y[:10])
    with pytest.raises(ValueError, match="y_train has 9 samples but X_train has 400"):
        bagging.forest_oob(forest, X, y[:9])
