"""Tests of jboost.bagging: bootstrap weights, forests of oblivious trees, OOB, bagged boosters.

Every fit here is tiny (n <= 400, depth <= 4, n_bins = 16) and the fitted forests are shared
module fixtures, so the file compiles only a handful of programs.
"""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jboost
from jboost import bagging
from jboost import binning
from jboost import boosting
from jboost import samplers
from jboost import tree as tree_lib

N_BINS = 16
DEPTH = 4


def _noisy_classification(n, seed):
    """3 informative features of 8; 20% of labels flipped (noisy, so one deep tree overfits)."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, 8)).astype(np.float32)
    clean = ((X[:, 0] + X[:, 1] * X[:, 2] + 0.5 * X[:, 1]) > 0).astype(np.float32)
    flip = rng.random(n) < 0.2
    return X, np.where(flip, 1.0 - clean, clean).astype(np.float32), clean


def _regression(n, seed):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, 6)).astype(np.float32)
    y = X[:, 0] + np.sin(2 * X[:, 1]) + 0.5 * rng.standard_normal(n)
    return X, y.astype(np.float32)


@pytest.fixture(scope="module")
def clf_data():
    X, y, _ = _noisy_classification(400, seed=0)
    Xt, _, yt_clean = _noisy_classification(2000, seed=1)
    return X, y, Xt, yt_clean


@pytest.fixture(scope="module")
def forest(clf_data):
    X, y, _, _ = clf_data
    return bagging.fit_forest(X, y, n_trees=24, depth=DEPTH, max_features=3, n_bins=N_BINS, key=3,
                              chunk_size=8)


@pytest.fixture(scope="module")
def reg_setup():
    X, y = _regression(200, seed=2)
    borders = binning.compute_borders(X, N_BINS)
    Xb = binning.bin_features(X, borders)
    config = bagging.ForestConfig(n_trees=5, depth=DEPTH, n_bins=N_BINS, n_outputs=1, max_features=4,
                                  bootstrap="multinomial", chunk_size=2)
    hyper = bagging.ForestHyperparams.create(min_child_weight=1.0)
    key = jax.random.PRNGKey(7)
    trees, counts = bagging.fit_forest_binned(Xb, jnp.asarray(y), jnp.ones(200), key, hyper, config=config)
    return X, y, Xb, key, config, hyper, trees, counts


_core_fit = jax.jit(functools.partial(tree_lib.fit_tree, depth=DEPTH, n_bins=N_BINS, l2=0.0,
                                      min_split_gain=0.0))


# --------------------------------------------------------------------------------------------
# Bootstrap weights.
# --------------------------------------------------------------------------------------------


def test_multinomial_counts_sum_to_n_and_match_multinomial_statistics():
    n, n_bags = 40, 3000
    w = np.asarray(bagging.all_bootstrap_weights(jax.random.PRNGKey(0), n_bags, n, "multinomial"))
    assert w.shape == (n_bags, n)
    np.testing.assert_array_equal(w.sum(axis=1), n)
    np.testing.assert_array_equal(w, np.round(w))
    ref = np.random.default_rng(0).multinomial(n, np.full(n, 1.0 / n), size=n_bags)
    # Distribution of a single count: Binomial(n, 1/n); compare frequencies of 0, 1, 2, >=3.
    def freqs(c):
        return np.array([np.mean(c == 0), np.mean(c == 1), np.mean(c == 2), np.mean(c >= 3)])
    ours, theirs = freqs(w), freqs(ref)
    exact = np.array([(1 - 1 / n) ** n, (1 - 1 / n) ** (n - 1), 0.0, 0.0])
    exact[2] = (n * (n - 1) / 2) * (1 / n) ** 2 * (1 - 1 / n) ** (n - 2)
    exact[3] = 1 - exact[:3].sum()
    np.testing.assert_allclose(ours, exact, atol=0.01)
    np.testing.assert_allclose(ours, theirs, atol=0.015)
    # Var = (n-1)/n and Cov(c_i, c_j) = -1/n for a multinomial.
    assert abs(w.var() - (n - 1) / n) < 0.03
    cov = np.cov(w[:, 0], w[:, 1])[0, 1]
    assert abs(cov - (-1.0 / n)) < 0.03


def test_poisson_and_bayesian_bootstraps():
    n, n_bags = 50, 2000
    p = np.asarray(bagging.all_bootstrap_weights(jax.random.PRNGKey(1), n_bags, n, "poisson"))
    np.testing.assert_array_equal(p, np.round(p))
    assert abs(p.mean() - 1) < 0.02 and abs(p.var() - 1) < 0.05
    assert abs(np.mean(p == 0) - np.exp(-1)) < 0.01
    b = np.asarray(bagging.all_bootstrap_weights(jax.random.PRNGKey(2), n_bags, n, "bayesian"))
    assert np.all(b > 0)
    np.testing.assert_allclose(b.sum(axis=1), n, rtol=1e-5)
    # n * Dirichlet(1,...,1): each weight has mean 1 and variance n (n-1) / (n^2 (n+1)) * n.
    assert abs(b.var() - (n - 1) / (n + 1)) < 0.05
    with pytest.raises(ValueError, match="bootstrap='jackknife' must be one of"):
        bagging.bootstrap_weights(jax.random.PRNGKey(0), 5, "jackknife")


def test_bag_randomness_does_not_depend_on_number_of_bags():
    key = jax.random.PRNGKey(5)
    few = bagging.all_bootstrap_weights(key, 3, 30)
    many = bagging.all_bootstrap_weights(key, 7, 30)
    np.testing.assert_array_equal(few, many[:3])
    assert not np.array_equal(many[0], many[1])


# --------------------------------------------------------------------------------------------
# Forest fitting.
# --------------------------------------------------------------------------------------------


def test_feature_subsets_are_the_column_mask_sets():
    key = jax.random.PRNGKey(11)
    sub = bagging.feature_subsets(key, 9, 5, 3)
    assert sub.shape == (5, 3)
    assert np.all(np.diff(np.asarray(sub), axis=1) > 0)  # sorted, distinct
    masks = samplers.column_masks(key, 9, 5, 3 / 9, "level")
    np.testing.assert_array_equal(bagging.subsets_to_masks(sub, 9), masks)
    np.testing.assert_array_equal(bagging.feature_subsets(key, 9, 5, 9), np.tile(np.arange(9), (5, 1)))


def test_vmapped_bags_equal_separately_fitted_trees(reg_setup):
    """Chunked vmapped bags == core fit_tree, one bag at a time, with the same weights and masks."""
    X, y, Xb, key, config, hyper, trees, counts = reg_setup
    n_features = X.shape[1]
    assert trees.features.shape == (5, DEPTH) and counts.shape == (5, 200)
    for b in range(5):
        k_boot, k_feat = bagging.bag_keys(key, b)
        wb = np.asarray(bagging.bootstrap_weights(k_boot, 200))
        np.testing.assert_array_equal(counts[b], wb)
        masks = bagging.subsets_to_masks(bagging.feature_subsets(k_feat, n_features, DEPTH, 4), n_features)
        g = -jnp.asarray(y)[:, None] * wb[:, None]
        h = jnp.ones((200, 1)) * wb[:, None]
        ref, _ = _core_fit(Xb, g, h, feature_masks=masks, min_child_weight=1.0)
        one = jax.tree_util.tree_map(lambda a: a[b], trees)
        np.testing.assert_array_equal(one.features, ref.features)
        np.testing.assert_array_equal(one.thresholds, ref.thresholds)
        np.testing.assert_array_equal(one.missing_right, ref.missing_right)
        np.testing.assert_allclose(one.leaf_values, ref.leaf_values, rtol=1e-5, atol=1e-6)


def test_regression_leaves_are_bootstrap_weighted_means(reg_setup):
    X, y, Xb, key, config, hyper, trees, counts = reg_setup
    for b in range(2):
        one = jax.tree_util.tree_map(lambda a: a[b], trees)
        leaf = np.asarray(tree_lib.leaf_index_binned(one, Xb, N_BINS))
        w = np.asarray(counts[b])
        for j in np.unique(leaf[w > 0]):
            sel = (leaf == j) & (w > 0)
            if w[sel].sum() >= 1:
                np.testing.assert_allclose(one.leaf_values[j, 0], np.sum(w[sel] * y[sel]) / np.sum(w[sel]),
                                           rtol=1e-4, atol=1e-5)


def test_per_level_features_are_in_that_levels_subset(forest):
    n_features = 8
    key = jax.random.PRNGKey(3)
    split_levels = 0
    for b in range(forest.n_trees):
        _, k_feat = bagging.bag_keys(key, b)
        sub = np.asarray(bagging.feature_subsets(k_feat, n_features, DEPTH, 3))
        feats = np.asarray(forest.trees.features[b])
        gains = np.asarray(forest.trees.gains[b])
        for d in range(DEPTH):
            if gains[d] > 0:
                split_levels += 1
                assert feats[d] in sub[d], (b, d, feats[d], sub[d])
    assert split_levels > forest.n_trees * DEPTH // 2


def test_two_class_forest_equals_one_hot_gini_trees(forest, clf_data):
    """The two-class fast path (one 0/1 output) gives the trees of the one-hot (Gini) fit."""
    X, y, _, _ = clf_data
    Xb = binning.bin_features(X, forest.borders)
    g, h = bagging.tree_targets(jnp.asarray(y), 2)
    for b in range(3):
        k_boot, k_feat = bagging.bag_keys(jax.random.PRNGKey(3), b)
        wb = np.asarray(forest.bag_weights[b])[:, None]
        masks = bagging.subsets_to_masks(bagging.feature_subsets(k_feat, 8, DEPTH, 3), 8)
        ref, _ = _core_fit(Xb, g * wb, h * wb, feature_masks=masks, min_child_weight=2.0)
        np.testing.assert_array_equal(forest.trees.features[b], ref.features)
        np.testing.assert_array_equal(forest.trees.thresholds[b], ref.thresholds)
        np.testing.assert_allclose(forest.trees.leaf_values[b], ref.leaf_values, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(forest.trees.gains[b], ref.gains, rtol=1e-4, atol=1e-4)


def test_classification_leaves_are_class_frequencies(forest, clf_data):
    X, y, _, _ = clf_data
    lv = np.asarray(forest.trees.leaf_values)
    assert lv.shape == (24, 2**DEPTH, 2)
    np.testing.assert_allclose(lv.sum(-1), 1.0, atol=1e-5)
    one = jax.tree_util.tree_map(lambda a: a[0], forest.trees)
    leaf = np.asarray(tree_lib.leaf_index_raw(one, jnp.asarray(X).T))
    w = np.asarray(forest.bag_weights[0])
    j = np.bincount(leaf, weights=w).argmax()
    sel = leaf == j
    np.testing.assert_allclose(lv[0, j, 1], np.sum(w[sel] * y[sel]) / np.sum(w[sel]), rtol=1e-5)


def test_forest_beats_a_single_tree_on_noisy_data(forest, clf_data):
    X, y, Xt, yt_clean = clf_data
    borders = jnp.asarray(binning.compute_borders(X, N_BINS))
    g, h = bagging.tree_targets(jnp.asarray(y), 2)
    all_features = jnp.ones((DEPTH, X.shape[1]), bool)  # same program as the masked fits above
    single, _ = _core_fit(binning.bin_features(X, borders), g, h, feature_masks=all_features,
                          min_child_weight=2.0)
    single = tree_lib.with_borders(single, borders)
    single_err = np.mean(np.argmax(np.asarray(tree_lib.predict_raw(single, Xt)), 1) != yt_clean)
    forest_err = np.mean(np.asarray(bagging.forest_predict_class(forest, Xt)) != yt_clean)
    vote_err = np.mean(np.asarray(bagging.forest_predict_class(forest, Xt, vote=True)) != yt_clean)
    assert forest_err < single_err - 0.03, (forest_err, single_err)
    assert vote_err < single_err - 0.02, (vote_err, single_err)


def test_predictions_average_and_vote_over_trees(forest, clf_data):
    _, _, Xt, _ = clf_data
    Xs = Xt[:50]
    outs = np.asarray(bagging.tree_outputs(forest.trees, Xs))            # (B, n, K)
    np.testing.assert_allclose(bagging.forest_predict(forest, Xs), outs.mean(0), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(bagging.forest_predict(forest, Xs, n_trees=5), outs[:5].mean(0),
                               rtol=1e-5, atol=1e-6)
    votes = np.stack([np.mean(outs.argmax(-1) == k, axis=0) for k in range(2)], -1)
    np.testing.assert_allclose(bagging.forest_vote(forest, Xs), votes, atol=1e-6)
    staged = bagging.forest_staged(forest, Xs, np.zeros(50))
    for b in (1, 5, 24):
        err = np.mean(np.cumsum(outs, 0)[b - 1].argmax(-1) != 0)
        np.testing.assert_allclose(staged.error[b - 1], err, atol=1e-6)


# --------------------------------------------------------------------------------------------
# Out-of-bag estimates.
# --------------------------------------------------------------------------------------------


def _brute_force_oob(outs, counts, y, classification):
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


def test_oob_uses_exactly_the_bags_that_left_the_row_out(forest, clf_data):
    X, y, _, _ = clf_data
    oob = bagging.forest_oob(forest, X, y)
    outs = np.asarray(bagging.tree_outputs(forest.trees, X))
    counts = np.asarray(forest.bag_weights)
    pred, votes, errors = _brute_force_oob(outs, counts, y, classification=True)
    np.testing.assert_array_equal(oob.n_oob, (counts == 0).sum(0))
    np.testing.assert_allclose(oob.prediction, pred, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(oob.votes, votes, atol=1e-6)
    np.testing.assert_allclose(oob.error, errors[:, 0], atol=1e-6)
    np.testing.assert_allclose(oob.vote_error, errors[:, 1], atol=1e-6)
    assert oob.coverage[-1] == 1.0 and oob.coverage[0] < 0.5
    assert np.all(np.isnan(oob.abs_error))


def test_regression_oob_against_brute_force(reg_setup):
    X, y, Xb, key, config, hyper, trees, counts = reg_setup
    borders = jnp.asarray(binning.compute_borders(X, N_BINS))
    model = bagging.Forest(tree_lib.with_borders(trees, borders), borders, counts)
    oob = bagging.forest_oob(model, X, y)
    outs = np.asarray(bagging.tree_outputs(model.trees, X))
    pred, _, errors = _brute_force_oob(outs, np.asarray(counts), y, classification=False)
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


# --------------------------------------------------------------------------------------------
# Bagging a boosted learner.
# --------------------------------------------------------------------------------------------


def test_bagged_boosters_equal_separate_fits_and_oob(clf_data):
    X, y, _, _ = clf_data
    X, y = X[:120, :4], y[:120]
    kw = dict(n_rounds=4, depth=2, learning_rate=0.5, n_bins=8)
    model = bagging.fit_bagged_boosters(X, y, "binomial_deviance", n_bags=3, chunk_size=2, key=9, **kw)
    assert model.trees.features.shape == (3, 4, 1, 2)
    for b in range(3):
        k_boot, k_fit = bagging.bag_keys(jax.random.PRNGKey(9), b)
        wb = np.asarray(bagging.bootstrap_weights(k_boot, 120))
        np.testing.assert_array_equal(model.bag_weights[b], wb)
        ref = jboost.fit(X, y, "binomial_deviance", sample_weight=wb, key=k_fit, borders=model.borders, **kw)
        np.testing.assert_array_equal(model.trees.features[b], ref.trees.features)
        np.testing.assert_array_equal(model.trees.thresholds[b], ref.trees.thresholds)
        np.testing.assert_allclose(model.trees.leaf_values[b], ref.trees.leaf_values, rtol=1e-4, atol=1e-6)
        np.testing.assert_allclose(model.baseline[b], ref.baseline, rtol=1e-5)
        np.testing.assert_allclose(bagging.bagged_outputs(model, X[:7])[b], jboost.predict_proba(ref, X[:7]),
                                   rtol=1e-5, atol=1e-6)
    outs = np.asarray(bagging.bagged_outputs(model, X))
    np.testing.assert_allclose(bagging.bagged_predict(model, X), outs.mean(0), rtol=1e-6)
    oob = bagging.bagged_oob(model, X, y)
    pred, _, errors = _brute_force_oob(outs, np.asarray(model.bag_weights), y, classification=True)
    np.testing.assert_allclose(oob.prediction, pred, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(oob.error, errors[:, 0], atol=1e-6)


# --------------------------------------------------------------------------------------------
# Arguments and memory planning.
# --------------------------------------------------------------------------------------------


def test_argument_errors_name_the_argument():
    X = np.zeros((10, 3), np.float32)
    y = np.zeros(10, np.float32)
    with pytest.raises(ValueError, match=r"max_features=5 must be in \[1, 3\]"):
        bagging.fit_forest(X, y, max_features=5)
    with pytest.raises(ValueError, match="max_features='half' must be"):
        bagging.fit_forest(X, y, max_features="half")
    with pytest.raises(ValueError, match="task='ranking' must be one of"):
        bagging.fit_forest(X, y, task="ranking")
    with pytest.raises(TypeError, match="depth must be an int"):
        bagging.fit_forest(X, y, depth=3.0)
    with pytest.raises(ValueError, match="integer class labels"):
        bagging.fit_forest(X, y + 0.5)
    with pytest.raises(ValueError, match="bootstrap='half' must be one of"):
        bagging.fit_bagged_boosters(X, y, bootstrap="half")


def test_max_features_rules_and_chunk_size_budget():
    assert bagging.resolve_max_features("sqrt", 57) == 7
    assert bagging.resolve_max_features("third", 8) == 2
    assert bagging.resolve_max_features(None, 8) == 8
    assert bagging.resolve_max_features(0.5, 8) == 4
    small = bagging.chunk_size_for_budget(7, 8, 64, 2, 3000, budget_bytes=1 << 30)
    big = bagging.chunk_size_for_budget(57, 12, 256, 3, 3000, budget_bytes=1 << 30)
    assert big == 1 and small > 10
    hist = 7 * 2**7 * 64 * 2 * 4
    assert small * hist * bagging._HIST_OVERHEAD <= 1 << 30
