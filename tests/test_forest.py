"""Tests of jboost.bagging.forest: forests of oblivious trees grown by tree.fit_tree on per-level
feature subsets, their leaves, and the model protocol on a Forest."""

import inspect

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from tests import _processes

import jboost
from jboost import bagging
from jboost.data import binning
from jboost.trees import histograms
from _bagging_data import DEPTH, N_BINS, core_fit
from _bagging_data import clf_data, forest, reg_forest, reg_setup  # noqa: F401 (fixtures)
from jboost.engine import memory
from jboost.models import base
from jboost.trees import family
from jboost.trees import oblivious
from jboost.trees import splits as splits_lib


# --------------------------------------------------------------------------------------------
# Forest fitting: one grower (tree.fit_tree with feature_subsets).
# --------------------------------------------------------------------------------------------


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
        ref, _ = core_fit(Xb, g, h, feature_masks=masks, min_child_weight=1.0)
        one = jax.tree_util.tree_map(lambda a: a[b], trees)
        np.testing.assert_array_equal(one.features, ref.features)
        np.testing.assert_array_equal(one.thresholds, ref.thresholds)
        np.testing.assert_array_equal(one.missing_right, ref.missing_right)
        np.testing.assert_allclose(one.leaf_values, ref.leaf_values, rtol=1e-5, atol=1e-6)


def _subset_reference(X_binned, grad, hess, subsets, *, depth, n_bins, l2, min_split_gain,
                      min_child_weight):
    """The grower forests used before they grew through fit_tree (kept here as the reference of
    the numbers the experiments were published with): per level, the histograms of the gathered
    subset rows (build_histogram), splits.best_split on them (pure-JAX gains), every row's leaf
    updated; leaf sums over the rows (segment_sum)."""
    k = grad.shape[-1]
    payload = jnp.concatenate([grad, hess], axis=-1).astype(jnp.float32)
    leaf = jnp.zeros((X_binned.shape[1],), jnp.int32)
    feats, thrs, miss, gains = [], [], [], []
    for d in range(depth):
        hist = histograms.build_histogram(X_binned[subsets[d]], payload, leaf, n_leaves=2**d, n_bins=n_bins)
        split = splits_lib.best_split(hist, l2=l2, min_split_gain=min_split_gain,
                                  min_child_weight=min_child_weight)
        feature = jnp.where(split.gain > 0, subsets[d][split.feature], 0).astype(jnp.int32)
        col = X_binned[feature].astype(jnp.int32)
        right = jnp.where(col == binning.missing_bin(n_bins), split.missing_right, col > split.threshold)
        leaf = leaf + right.astype(jnp.int32) * (2**d)
        feats.append(feature)
        thrs.append(split.threshold)
        miss.append(split.missing_right)
        gains.append(split.gain)
    sums = jax.ops.segment_sum(payload, leaf, num_segments=2**depth)
    values = family.newton_leaf_values(sums[:, :k], sums[:, k:], l2, min_child_weight)
    return oblivious.ObliviousTrees(jnp.stack(feats), jnp.stack(thrs), jnp.zeros((depth,)),
                                   jnp.stack(miss), values, jnp.stack(gains)), leaf


@pytest.mark.slow
@pytest.mark.parametrize("task, max_features", [("regression", 2), ("binary", 8), ("multiclass", 3)])
def test_forest_trees_are_bitwise_those_of_the_previous_subset_grower(task, max_features):
    """What keeps the forest experiments' numbers: fit_tree(feature_subsets=...) chooses the same
    splits and gives bitwise the same leaf values as the previous grower (its leaf sums come from
    the rows too, as no histogram is kept on subsets); only the stored gains may differ in the
    last bits (the fused kernel sums them in double). Three cases (each two compilations): one
    output with a subset of 2 of the 8 features, two classes with every feature (m = F), and
    four classes with 3."""
    rng = np.random.default_rng(4)
    n, n_features = 700, 8
    X = rng.standard_normal((n, n_features)).astype(np.float32)
    X[rng.random((n, n_features)) < 0.05] = np.nan
    if task == "regression":
        y, k, n_outputs = (X[:, 0] * 2 + np.nan_to_num(X[:, 3]) + rng.standard_normal(n)).astype(np.float32), 1, 1
    else:
        k = 2 if task == "binary" else 4
        y = (rng.integers(0, k, n) + (np.nan_to_num(X[:, 1]) > 0.5)) % k
        n_outputs = 1 if k == 2 else k
    n_bins, depth = 32, 6
    Xb = binning.bin_features(X, binning.compute_borders(X, n_bins))
    g, h = bagging.tree_targets(jnp.asarray(y), n_outputs)
    kw = dict(depth=depth, n_bins=n_bins, l2=0.0, min_split_gain=0.0, min_child_weight=1.0)

    def bag(fn, b):
        k_boot, k_feat = bagging.bag_keys(jax.random.PRNGKey(1), b)
        wb = bagging.bootstrap_weights(k_boot, n)[:, None]
        sub = bagging.feature_subsets(k_feat, n_features, depth, max_features)
        return fn(Xb, g * wb, h * wb, sub)

    new = jax.jit(jax.vmap(lambda b: bag(lambda *a: oblivious.fit_tree(*a[:3], feature_subsets=a[3], **kw), b)))
    old = jax.jit(jax.vmap(lambda b: bag(lambda *a: _subset_reference(*a, **kw), b)))
    (t_new, leaf_new), (t_old, leaf_old) = new(jnp.arange(6)), old(jnp.arange(6))
    for name in ("features", "thresholds", "missing_right", "leaf_values"):
        np.testing.assert_array_equal(getattr(t_new, name), getattr(t_old, name), err_msg=name)
    np.testing.assert_array_equal(leaf_new, leaf_old)
    np.testing.assert_allclose(t_new.gains, t_old.gains, rtol=1e-5, atol=1e-5)


def test_feature_subsets_restrict_each_level_to_its_subset():
    """Feature 0 decides y; a level whose subset leaves it out must split on its own subset only,
    and the best feature of the subset, the one the masks choose."""
    rng = np.random.default_rng(0)
    n, n_features = 400, 6
    X = rng.standard_normal((n, n_features)).astype(np.float32)
    y = (X[:, 0] > 0).astype(np.float32) + 0.3 * (X[:, 4] > 0.5)
    Xb = binning.bin_features(X, binning.compute_borders(X, N_BINS))
    g, h = -jnp.asarray(y)[:, None], jnp.ones((n, 1))
    subsets = jnp.array([[1, 4], [0, 2], [3, 5], [2, 4]], jnp.int32)
    tree, _ = core_fit(Xb, g, h, feature_subsets=subsets, min_child_weight=1.0)
    feats = np.asarray(tree.features)
    assert feats[0] == 4 and feats[1] == 0   # the best of each subset: not feature 0 at level 0
    for d in range(DEPTH):
        assert tree.gains[d] == 0 or feats[d] in np.asarray(subsets[d]), (d, feats[d])
    masked, _ = core_fit(Xb, g, h, feature_masks=bagging.subsets_to_masks(subsets, n_features),
                         min_child_weight=1.0)
    np.testing.assert_array_equal(tree.features, masked.features)
    np.testing.assert_array_equal(tree.thresholds, masked.thresholds)
    unrestricted, _ = core_fit(Xb, g, h, min_child_weight=1.0)
    assert unrestricted.features[0] == 0


def test_regression_leaves_are_bootstrap_weighted_means(reg_setup):
    X, y, Xb, key, config, hyper, trees, counts = reg_setup
    for b in range(2):
        one = jax.tree_util.tree_map(lambda a: a[b], trees)
        leaf = np.asarray(family.leaf_index_binned(one, Xb, N_BINS))
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
        ref, _ = core_fit(Xb, g * wb, h * wb, feature_masks=masks, min_child_weight=2.0)
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
    leaf = np.asarray(oblivious.leaf_index_raw(one, jnp.asarray(X).T))
    w = np.asarray(forest.bag_weights[0])
    j = np.bincount(leaf, weights=w).argmax()
    sel = leaf == j
    np.testing.assert_allclose(lv[0, j, 1], np.sum(w[sel] * y[sel]) / np.sum(w[sel]), rtol=1e-5)


def test_forest_beats_a_single_tree_on_noisy_data(forest, clf_data):
    X, y, Xt, yt_clean = clf_data
    borders = jnp.asarray(binning.compute_borders(X, N_BINS))
    g, h = bagging.tree_targets(jnp.asarray(y), 2)
    all_features = jnp.ones((DEPTH, X.shape[1]), bool)  # same program as the masked fits above
    single, _ = core_fit(binning.bin_features(X, borders), g, h, feature_masks=all_features,
                         min_child_weight=2.0)
    single = family.with_borders(single, borders)
    single_err = np.mean(np.argmax(np.asarray(family.predict_raw(single, Xt)), 1) != yt_clean)
    forest_err = np.mean(np.asarray(bagging.forest_predict_class(forest, Xt)) != yt_clean)
    vote_err = np.mean(np.asarray(bagging.forest_predict_class(forest, Xt, vote=True)) != yt_clean)
    assert forest_err < single_err - 0.03, (forest_err, single_err)
    assert vote_err < single_err - 0.02, (vote_err, single_err)


def test_bagged_trees_use_every_feature_and_histogram_subtraction(clf_data):
    """max_features=None: bagged trees; fit_tree then grows the unrestricted tree (the subsets
    are every feature), the same as without subsets."""
    X, y, _, _ = clf_data
    bagged = bagging.fit_bagged_trees(X, y, n_trees=3, depth=DEPTH, n_bins=N_BINS, key=5,
                                      tree_family="oblivious")
    Xb = binning.bin_features(X, bagged.borders)
    g, h = bagging.tree_targets(jnp.asarray(y), 1)
    for b in range(3):
        wb = np.asarray(bagged.bag_weights[b])[:, None]
        ref, _ = core_fit(Xb, g * wb, h * wb, min_child_weight=1.0)
        np.testing.assert_array_equal(bagged.trees.features[b], ref.features)
        np.testing.assert_array_equal(bagged.trees.leaf_values[b][:, 1], ref.leaf_values[:, 0])


def test_bagged_trees_show_fit_forests_arguments_and_refuse_max_features(clf_data):
    """fit_bagged_trees is fit_forest(max_features=None): its signature is fit_forest's without
    max_features, and a max_features given to it is an error rather than silently replaced."""
    params = inspect.signature(bagging.fit_bagged_trees).parameters
    assert "max_features" not in params and {"n_trees", "depth", "key", "tree_family"} <= set(params)
    X, y, _, _ = clf_data
    with pytest.raises(TypeError, match="takes no max_features"):
        bagging.fit_bagged_trees(X, y, n_trees=2, max_features=2)


# --------------------------------------------------------------------------------------------
# Prediction: the model protocol on a Forest, and the forest's aliases.
# --------------------------------------------------------------------------------------------


def test_predictions_average_and_vote_over_trees(forest, clf_data):
    _, _, Xt, _ = clf_data
    Xs = Xt[:50]
    outs = np.asarray(bagging.tree_outputs(forest.trees, Xs))            # (B, n, K)
    np.testing.assert_allclose(bagging.forest_predict(forest, Xs), outs.mean(0), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(bagging.forest_predict(forest, Xs, n_trees=5), outs[:5].mean(0),
                               rtol=1e-5, atol=1e-6)
    votes = np.stack([np.mean(outs.argmax(-1) == k, axis=0) for k in range(2)], -1)
    np.testing.assert_allclose(bagging.forest_vote(forest, Xs), votes, atol=1e-6)
    np.testing.assert_allclose(bagging.forest_vote(forest, Xs, n_trees=5),
                               np.stack([np.mean(outs[:5].argmax(-1) == k, axis=0) for k in range(2)], -1),
                               atol=1e-6)
    staged = bagging.forest_staged(forest, Xs, np.zeros(50))
    for b in (1, 5, 24):
        err = np.mean(np.cumsum(outs, 0)[b - 1].argmax(-1) != 0)
        np.testing.assert_allclose(staged.error[b - 1], err, atol=1e-6)


def test_every_protocol_function_on_a_classification_forest(forest, clf_data):
    _, _, Xt, _ = clf_data
    Xs = Xt[:60]
    assert isinstance(forest, base.Model)
    assert forest.task == "binary" and forest.batch_shape == () and forest.n_features == 8
    assert forest.n_stages == forest.n_trees == 24
    outs = np.asarray(bagging.tree_outputs(forest.trees, Xs))
    raw = np.asarray(jboost.predict(forest, Xs))
    assert raw.shape == (60, 2)
    np.testing.assert_allclose(raw, outs.mean(0), rtol=1e-5, atol=1e-6)
    # A forest's raw score is its averaged class frequencies: its probabilities.
    np.testing.assert_array_equal(np.asarray(jboost.predict_proba(forest, Xs)), raw)
    np.testing.assert_array_equal(np.asarray(jboost.predict_class(forest, Xs)), raw.argmax(1))
    np.testing.assert_array_equal(np.asarray(bagging.forest_predict(forest, Xs)), raw)
    np.testing.assert_array_equal(np.asarray(bagging.forest_predict_class(forest, Xs)), raw.argmax(1))
    np.testing.assert_array_equal(np.asarray(jboost.predict(forest, Xs, n_rounds=7)),
                                  np.asarray(bagging.forest_predict(forest, Xs, n_trees=7)))
    staged = np.asarray(jboost.staged_predict(forest, Xs))
    assert staged.shape == (24, 60, 2)
    for b in (1, 2, 7, 24):
        np.testing.assert_array_equal(staged[b - 1], np.asarray(jboost.predict(forest, Xs, n_rounds=b)))
    imp = np.asarray(jboost.feature_importance(forest))
    assert imp.shape == (8,) and abs(imp.sum() - 1.0) < 1e-5 and imp[:3].sum() > 0.5
    with pytest.raises(ValueError, match=r"n_trees=25 must be in \[1, 24\]"):
        jboost.predict(forest, Xs, n_rounds=25)
    with pytest.raises(TypeError, match="predict_mean needs a model with a loss"):
        jboost.predict_mean(forest, Xs)


def test_every_protocol_function_on_a_regression_forest(reg_forest, reg_setup):
    X = reg_setup[0][:40]
    assert isinstance(reg_forest, base.Model)
    assert reg_forest.task == "regression" and reg_forest.n_stages == 5
    outs = np.asarray(bagging.tree_outputs(reg_forest.trees, X))
    pred = np.asarray(jboost.predict(reg_forest, X))
    assert pred.shape == (40,)
    np.testing.assert_allclose(pred, outs.mean(0)[:, 0], rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(np.asarray(bagging.forest_predict(reg_forest, X)), pred)
    staged = np.asarray(jboost.staged_predict(reg_forest, X))
    for b in range(1, 6):
        np.testing.assert_array_equal(staged[b - 1, :, 0], np.asarray(jboost.predict(reg_forest, X, n_rounds=b)))
    assert np.asarray(jboost.feature_importance(reg_forest)).shape == (6,)
    with pytest.raises(ValueError, match="predict_proba needs a classification model"):
        jboost.predict_proba(reg_forest, X)
    with pytest.raises(ValueError, match="predict_class needs a classification model"):
        jboost.predict_class(reg_forest, X)
    with pytest.raises(ValueError, match="forest_vote needs a classification forest"):
        bagging.forest_vote(reg_forest, X)


def test_wrong_number_of_columns_raises(forest, clf_data):
    """Today's error, formerly a silent clamp of the feature index: every prediction checks X."""
    _, _, Xt, _ = clf_data
    for call in (lambda X: jboost.predict(forest, X), lambda X: bagging.forest_predict(forest, X),
                 lambda X: bagging.forest_predict_class(forest, X),
                 lambda X: bagging.forest_predict_class(forest, X, vote=True),
                 lambda X: jboost.staged_predict(forest, X),
                 lambda X: bagging.forest_staged(forest, X, np.zeros(len(X)))):
        with pytest.raises(ValueError, match=r"X has 7 features, but the model was fitted on 8"):
            call(Xt[:10, :7])
        with pytest.raises(ValueError, match=r"X has 9 features, but the model was fitted on 8"):
            call(np.concatenate([Xt[:10], Xt[:10, :1]], axis=1))
    with pytest.raises(ValueError, match=r"X_train has 7 features, but the model was fitted on 8"):
        bagging.forest_oob(forest, Xt[:10, :7], np.zeros(10))


def test_zero_rows_give_empty_predictions(forest):
    X0 = np.zeros((0, 8), np.float32)
    assert jboost.predict(forest, X0).shape == (0, 2)
    assert jboost.predict_proba(forest, X0).shape == (0, 2)
    assert jboost.predict_class(forest, X0).shape == (0,)


# --------------------------------------------------------------------------------------------
# Arguments and memory planning.
# --------------------------------------------------------------------------------------------


def test_tasks_and_classes():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((60, 3)).astype(np.float32)
    y3 = np.arange(60) % 3
    kw = dict(n_trees=2, depth=2, n_bins=8)
    assert bagging.fit_forest(X, y3, **kw).task == "multiclass"
    assert bagging.fit_forest(X, y3, task="multiclass", **kw).n_outputs == 3
    assert bagging.fit_forest(X, y3 % 2, task="binary", **kw).task == "binary"
    assert bagging.fit_forest(X, y3 % 2, n_classes=4, **kw).n_outputs == 4
    assert bagging.fit_forest(X, X[:, 0], task="regression", **kw).task == "regression"
    with pytest.raises(ValueError, match="y must hold binary labels 0/1"):
        bagging.fit_forest(X, y3, task="binary", **kw)
    with pytest.raises(ValueError, match=r"y must hold class labels in \[0, 2\) for n_classes=2"):
        bagging.fit_forest(X, y3, n_classes=2, **kw)


def test_argument_errors_name_the_argument():
    X = np.zeros((10, 3), np.float32)
    y = (np.arange(10) % 2).astype(np.float32)
    with pytest.raises(ValueError, match=r"max_features=5 must be in \[1, 3\]"):
        bagging.fit_forest(X, y, max_features=5)
    with pytest.raises(ValueError, match="max_features='half' must be"):
        bagging.fit_forest(X, y, max_features="half")
    with pytest.raises(ValueError, match="task='ranking' must be one of"):
        bagging.fit_forest(X, y, task="ranking")
    with pytest.raises(TypeError, match="depth must be an int"):
        bagging.fit_forest(X, y, depth=3.0)
    with pytest.raises(ValueError, match="y must be finite"):  # other labels are mapped (classes_)
        bagging.fit_forest(X, np.where(y > 0, np.nan, y + 0.5))
    with pytest.raises(ValueError, match=r"l2=-1.0 must be in \[0.0, inf\]"):
        bagging.fit_forest(X, y, l2=-1.0)
    with pytest.raises(ValueError, match=r"memory_budget=0 must be in"):
        bagging.fit_forest(X, y, memory_budget=0)
    with pytest.raises(ValueError, match="bootstrap='half' must be one of"):
        bagging.fit_forest(X, y, bootstrap="half")
    with pytest.raises(ValueError, match=r"y has 9 samples but X has 10"):
        bagging.fit_forest(X, y[:9])


def test_chunk_size_budget():
    small = bagging.chunk_size_for_budget(7, 8, 64, 2, 3000, budget_bytes=1 << 30)
    big = bagging.chunk_size_for_budget(57, 12, 256, 3, 3000, budget_bytes=1 << 30)
    assert big == 1 and small > 10
    per_tree = memory.FOREST_HIST_OVERHEAD * 7 * 2**7 * 64 * 2 * 4 + 3000 * 6 * 4
    assert small * per_tree <= 1 << 30 < (small + 1) * per_tree
    # The fused kernel materialises no subset histogram: far more trees fit the same budget.
    fused = bagging.chunk_size_for_budget(7, 12, 256, 2, 3000, budget_bytes=1 << 30, fused=True)
    assert fused > 100 * bagging.chunk_size_for_budget(7, 12, 256, 2, 3000, budget_bytes=1 << 30)
    # Bagged trees keep the histograms histogram subtraction reads.
    assert (memory.forest_tree_bytes(57, 8, 64, 2, 3000, fused=True, n_features=57)
            > memory.forest_tree_bytes(56, 8, 64, 2, 3000, fused=True, n_features=57))
    cpu = jax.devices("cpu")[0]
    assert bagging.forest_chunk_size(7, 57, 12, 64, 2, 3000, 500, device=cpu) <= 8
    assert bagging.forest_chunk_size(7, 57, 12, 64, 2, 3000, 3, device=cpu) == 3


def test_chunking_does_not_change_the_trees(clf_data):
    X, y, _, _ = clf_data
    kw = dict(n_trees=5, depth=3, max_features=3, n_bins=N_BINS, key=2)
    one = bagging.fit_forest(X, y, chunk_size=1, **kw)
    three = bagging.fit_forest(X, y, chunk_size=3, **kw)   # chunks of 3, the last padded by 1
    for a, b in zip(jax.tree_util.tree_leaves(one), jax.tree_util.tree_leaves(three)):
        np.testing.assert_array_equal(a, b)


def test_verbose_forest_reports_each_chunk_and_grows_the_same_trees(capsys):
    """verbose=True prints a line as each chunk of trees finishes (trees done, elapsed and
    remaining time, from the host's clock while the program runs); the trees are the same."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(400, 5))
    y = (X[:, 0] + X[:, 1] > 0).astype(np.int32)
    kw = dict(n_trees=16, depth=4, chunk_size=4, n_bins=32)
    quiet = jboost.bagging.fit_forest(X, y, **kw)
    loud = jboost.bagging.fit_forest(X, y, verbose=True, **kw)
    jax.block_until_ready(loud.trees)
    for a, b in zip(jax.tree_util.tree_leaves(quiet.trees), jax.tree_util.tree_leaves(loud.trees)):
        np.testing.assert_array_equal(a, b)
    lines = [l for l in capsys.readouterr().out.splitlines() if l.startswith("[jboost] forest: trees")]
    assert [l.split()[3] for l in lines] == ["4/16", "8/16", "12/16", "16/16"]
    assert all("elapsed" in l and "left" in l for l in lines)


_KILLED_FOREST = """
import os, signal, sys
sys.path.insert(0, {tests!r})
from jboost import bagging
from jboost.engine import checkpoints
from _bagging_data import noisy_classification
save = checkpoints.ChunkCheckpoints.save
def save_then_die(self, part, chunk, outputs, items):
    save(self, part, chunk, outputs, items)
    os.kill(os.getpid(), signal.SIGKILL)  # a real kill, after the first chunk's file is written
checkpoints.ChunkCheckpoints.save = save_then_die
X, y, _ = noisy_classification(400, seed=0)
bagging.fit_forest(X, y, checkpoint_dir=sys.argv[1], **{kw!r})
"""


@pytest.mark.subprocess
def test_a_killed_forest_resumes_from_its_checkpoints_bitwise(forest, clf_data, tmp_path, capsys):
    """A forest killed (SIGKILL) after its first chunk of trees and rerun with the same call fits
    only the other chunks and ends with bitwise the trees and bootstrap weights of the fit without
    checkpoints (the ``forest`` fixture); another forest in that directory is refused."""
    import os
    import re
    import signal
    import subprocess
    import sys
    X, y, _, _ = clf_data
    kw = dict(n_trees=24, depth=DEPTH, max_features=3, n_bins=N_BINS, key=3, chunk_size=8,
              tree_family="oblivious")  # the fixture's
    ckpt = tmp_path / "ckpt"
    code = _KILLED_FOREST.format(tests=os.path.dirname(os.path.abspath(__file__)), kw=kw)
    killed = _processes.python(code, quiet=30, what="a forest killed mid-way",
                               extra_args=[str(ckpt)])
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-3000:]
    assert sorted(os.listdir(ckpt)) == ["forest-chunk00000.npz"]
    first = os.stat(ckpt / "forest-chunk00000.npz").st_mtime_ns
    resumed = bagging.fit_forest(X, y, checkpoint_dir=ckpt, verbose=True, **kw)
    for a, b in zip(jax.tree_util.tree_leaves(resumed), jax.tree_util.tree_leaves(forest)):
        assert a.dtype == b.dtype
        np.testing.assert_array_equal(a, b)
    assert os.stat(ckpt / "forest-chunk00000.npz").st_mtime_ns == first  # read, not fitted again
    lines = [l for l in capsys.readouterr().out.splitlines() if l.startswith("[jboost] forest: trees")]
    assert ["from the checkpoint" in l for l in lines] == [True, False, False]
    assert len(os.listdir(ckpt)) == 3
    with pytest.raises(ValueError, match=re.escape(str(ckpt / "forest-chunk00000.npz"))):
        bagging.fit_forest(X, y, checkpoint_dir=ckpt, **{**kw, "key": 4})
