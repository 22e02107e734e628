"""Forests of depth-wise trees (``bagging.fit_forest(tree_family="depthwise")``): ESL Algorithm
15.1's m features drawn per node, the trees equal to depthwise.fit_tree on the bag's weights,
and the model protocol (predict, staged, vote, OOB, importance, model files, warm start,
checkpoints) on such a forest. One small forest fitted once (module fixture)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jboost
from jboost import bagging
from jboost.data import binning
from jboost import io as jio
from jboost.bagging import bootstrap as bootstrap_lib
from _bagging_data import N_BINS, noisy_classification
from jboost.bagging import forest_binned
from jboost.models import forest
from jboost.trees import depthwise as depthwise_lib
from jboost.trees import family
from jboost.trees import node_table
from jboost.trees import oblivious

DEPTH = 4
KW = dict(n_trees=6, depth=DEPTH, max_features=3, n_bins=N_BINS, key=5, chunk_size=3,
          tree_family="depthwise")


def heap_of(t):
    """``{node: (level, j)}`` of one tree's used table nodes: the heap position of each (the
    children of ``(d, j)`` are ``(d + 1, j)`` and ``(d + 1, j + 2**d)``)."""
    kids, out = np.asarray(t.children), {}
    todo = [(0, 0, 0)] if float(np.asarray(t.gains)[0]) > 0 else []
    while todo:
        node, d, j = todo.pop()
        out[node] = (d, j)
        for side, c in enumerate(kids[node]):
            if c >= 0:
                todo.append((int(c), d + 1, j + side * 2**d))
    return out


@pytest.fixture(scope="module")
def data():
    X, y, _ = noisy_classification(300, seed=4)
    Xt, _, yt = noisy_classification(500, seed=5)
    return X, y, Xt, yt


@pytest.fixture(scope="module")
def dw_forest(data):
    X, y, _, _ = data
    return bagging.fit_forest(X, y, **KW)


@pytest.mark.slow
def test_trees_are_depthwise_fit_tree_of_the_bag_on_per_node_subsets(dw_forest, data):
    """Tree b == depthwise.fit_tree on bag b's bootstrap weights and its per-node subsets; each
    split node's feature is in its own node's subset, and nodes of one level differ (not one rule
    per level as in an oblivious tree)."""
    X, y, _, _ = data
    f = dw_forest
    assert isinstance(f.trees, depthwise_lib.DepthwiseTrees) and forest.tree_family_of(f) == "depthwise"
    assert f.trees.features.shape == (6, 2**DEPTH - 1) and f.depth == DEPTH and f.n_trees == 6
    Xb = binning.bin_features(X, f.borders)
    n_features = X.shape[1]
    distinct_in_a_level = 0
    for b in (0, 4):
        k_boot, k_feat = bootstrap_lib.bag_keys(jax.random.PRNGKey(5), jnp.int32(b))
        counts = bootstrap_lib.bootstrap_weights(k_boot, X.shape[0])
        np.testing.assert_array_equal(counts, f.bag_weights[b])
        subsets = bootstrap_lib.node_feature_subsets(k_feat, n_features, DEPTH, 3)
        assert [s.shape for s in subsets] == [(2**d, 3) for d in range(DEPTH)]
        wb = counts[:, None]
        g = -jnp.asarray(y)[:, None] * wb
        tree, _ = depthwise_lib.fit_tree(Xb, g, wb, depth=DEPTH, n_bins=N_BINS, l2=0.0, min_split_gain=0.0,
                                     min_child_weight=1.0, feature_subsets=subsets)
        t = jax.tree_util.tree_map(lambda a: a[b], f.trees)
        np.testing.assert_array_equal(t.features, tree.features)
        np.testing.assert_array_equal(t.thresholds, tree.thresholds)
        np.testing.assert_allclose(t.leaf_values[:, 1], tree.leaf_values[:, 0], rtol=1e-6, atol=1e-7)
        feats, gains = np.asarray(t.features), np.asarray(t.gains)
        assert (gains > 0).sum() >= 6
        heap = heap_of(t)
        assert len(heap) == (gains > 0).sum()
        for node, (d, j) in heap.items():
            assert feats[node] in np.asarray(subsets[d])[j], (b, d, j)
        for d in range(DEPTH):
            level = [feats[node] for node, (dd, _) in heap.items() if dd == d]
            distinct_in_a_level += len(set(level)) > 1
    assert distinct_in_a_level >= 2


@pytest.mark.slow
def test_per_node_subsets_differ_from_per_level_and_are_the_masks():
    """node_feature_subsets: sorted, distinct, m per node, different nodes different sets; each
    split in its node's set; the compact path and the in-tree draws give the same tree."""
    X, y, _ = noisy_classification(300, seed=4)
    borders = binning.compute_borders(X, N_BINS)
    Xb = binning.bin_features(X, borders)
    subsets = bootstrap_lib.node_feature_subsets(jax.random.PRNGKey(1), 8, DEPTH, 3)
    last = np.asarray(subsets[-1])
    assert np.all(np.diff(last, axis=1) > 0) and len({tuple(r) for r in last}) > 4
    assert bootstrap_lib.node_feature_subsets(jax.random.PRNGKey(1), 8, DEPTH, 8) is None
    g, h = -jnp.asarray(y)[:, None], jnp.ones((300, 1))
    kw = dict(depth=DEPTH, n_bins=N_BINS, l2=0.0, min_split_gain=0.0, min_child_weight=1.0)
    a, la = depthwise_lib.fit_tree(Xb, g, h, feature_subsets=subsets, **kw)
    heap = heap_of(a)  # (per-node subsets == per-node masks: tests/test_depthwise.py)
    assert len(heap) == int((np.asarray(a.gains) > 0).sum()) >= 3
    for node, (d, j) in heap.items():
        assert int(a.features[node]) in np.asarray(subsets[d][j])
    # The compact path (histogram slots for the splittable nodes only): the same tree with
    # n // 2 slots; with 2 slots, at most 2 nodes of a level split.
    c, lc = depthwise_lib.fit_tree(Xb, g, h, feature_subsets=subsets, max_nodes=150, **kw)
    np.testing.assert_array_equal(c.features, a.features)
    np.testing.assert_array_equal(c.thresholds, a.thresholds)
    np.testing.assert_array_equal(lc, la)
    np.testing.assert_allclose(c.leaf_values, a.leaf_values, rtol=1e-6, atol=1e-7)
    # Drawn inside from the key (only for the slots' nodes): the same sets, the same tree.
    k, lk = depthwise_lib.fit_tree(Xb, g, h, feature_key=jax.random.PRNGKey(1), max_features=3,
                               max_nodes=150, **kw)
    np.testing.assert_array_equal(k.features, a.features)
    np.testing.assert_array_equal(lk, la)
    two, _ = depthwise_lib.fit_tree(Xb, g, h, feature_subsets=subsets, max_nodes=2, **kw)
    per_level = [int(c) for c in np.asarray(two.level_counts)]
    assert max(per_level) == 2 and (np.asarray(a.gains) > 0).sum() > sum(per_level)


def test_protocol_on_a_depthwise_forest(dw_forest, data, tmp_path):
    _, _, Xt, yt = data
    f = dw_forest
    Xs = Xt[:50]
    outs = np.asarray(bagging.tree_outputs(f.trees, Xs))
    raw = np.asarray(jboost.predict(f, Xs))
    np.testing.assert_allclose(raw, outs.mean(0), rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(np.asarray(jboost.predict_proba(f, Xs)), raw)
    np.testing.assert_array_equal(np.asarray(jboost.predict_class(f, Xs)), raw.argmax(1))
    staged = np.asarray(jboost.staged_predict(f, Xs))
    np.testing.assert_array_equal(staged[-1], raw)
    np.testing.assert_array_equal(staged[2], np.asarray(jboost.predict(f, Xs, n_rounds=3)))
    imp = np.asarray(jboost.feature_importance(f))
    assert imp.shape == (8,) and abs(imp.sum() - 1.0) < 1e-5 and imp[:3].sum() > 0.5
    X, y, _, _ = data
    oob = bagging.forest_oob(f, X, y)
    assert oob.error.shape == (6,) and 0.0 < float(oob.error[-1]) < 0.5
    # A model file round-trips bit for bit.
    path = tmp_path / "forest.jbm"
    jio.save(f, path)
    g = jio.load(path)
    assert isinstance(g.trees, depthwise_lib.DepthwiseTrees)
    for a, b in zip(jax.tree_util.tree_leaves(g), jax.tree_util.tree_leaves(f)):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(np.asarray(jboost.predict(g, Xs)), raw)


def test_warm_start_and_checkpoints_equal_one_fit(dw_forest, data, tmp_path):
    X, y, _, _ = data
    part = bagging.fit_forest(X, y, **{**KW, "n_trees": 3})
    more = bagging.fit_forest(X, y, init_model=part, **{**KW, "n_trees": 3})
    ckpt = bagging.fit_forest(X, y, checkpoint_dir=tmp_path / "c", **KW)
    for other in (more, ckpt):
        for a, b in zip(jax.tree_util.tree_leaves(other), jax.tree_util.tree_leaves(dw_forest)):
            np.testing.assert_array_equal(a, b)
    # A forest whose tables hold more slots (an old model file's dense 2^D - 1, converted)
    # continues at the larger capacity: the same trees and predictions, null slots padded.
    cap = dw_forest.trees.features.shape[-1] + 9
    wide = part._replace(trees=family.with_borders(node_table.pad_nodes(part.trees, cap, N_BINS),
                                                     part.borders))
    cont = bagging.fit_forest(X, y, init_model=wide, **{**KW, "n_trees": 3})
    want = family.with_borders(node_table.pad_nodes(dw_forest.trees, cap, N_BINS), dw_forest.borders)
    assert cont.trees.features.shape == (6, cap)
    for a, b in zip(jax.tree_util.tree_leaves(cont.trees), jax.tree_util.tree_leaves(want)):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(jboost.predict_proba(cont, X), jboost.predict_proba(dw_forest, X))
    with pytest.raises(ValueError, match="tree_family='oblivious' differs from init_model's "
                                         "\\('depthwise' trees\\)"):
        bagging.fit_forest(X, y, init_model=part, **{**KW, "n_trees": 3, "tree_family": "oblivious"})
    with pytest.raises(ValueError, match="tree_family must be \"oblivious\" or \"depthwise\""):
        bagging.fit_forest(X, y, **{**KW, "tree_family": "lossguide"})


def test_default_chunks_of_kernel_grown_trees_give_the_same_forest(dw_forest, data):
    """On CPU with the kernel, a depth-wise forest's default chunk holds up to KERNEL_CHUNK trees
    (as many as KERNEL_CHUNK_BYTES of outputs hold, evened out): the same trees as chunks of 3."""
    X, y, _, _ = data
    assert forest_binned.kernel_grows(jnp.zeros((2, 2), jnp.uint8), N_BINS)
    assert forest_binned.kernel_chunk_size(DEPTH, 2, 300, 6) == 6
    assert forest_binned.kernel_chunk_size(16, 1, 3065, 500) == 63      # 8 chunks of 63
    assert forest_binned.kernel_chunk_size(16, 26, 16000, 300) == 60    # 5 chunks of at most 64
    assert forest_binned.kernel_chunk_size(16, 26, 16000, 300, memory_budget=1) == 1
    f = bagging.fit_forest(X, y, **{**KW, "chunk_size": None})
    for a, b in zip(jax.tree_util.tree_leaves(f), jax.tree_util.tree_leaves(dw_forest)):
        np.testing.assert_array_equal(a, b)


def test_forests_grow_beyond_depth_16_in_tables_of_their_nodes():
    """Depth 24 (oblivious trees stop at 16) on a target whose splits peel off about one row a
    level (y = 0.7**i along x): each tree grown in a table of n - 1 = 199 node slots, kept at the
    slots the trees use, used down to level 24, predicting as a walk of its children pointers; the memory check passes (a dense 2^24
    layout would not)."""
    n = 200
    X = np.arange(n, dtype=np.float32)[:, None]
    y = (0.7 ** np.arange(n)).astype(np.float32)
    f = bagging.fit_forest(X, y, task="regression", n_trees=4, depth=24, n_bins=256, key=2,
                           tree_family="depthwise", min_child_weight=0.5)
    counts = np.asarray(f.trees.level_counts)
    # Grown in tables of n - 1 = 199 slots, kept at the slots the trees use.
    assert f.trees.features.shape == (4, counts.sum(axis=1).max()) and counts.shape == (4, 24)
    assert node_table.node_capacity(24, n, n // 2) == n - 1 > counts.sum(axis=1).max()
    assert (counts[:, 20:].sum(axis=1) > 0).all() and f.depth == 24
    Xb = np.asarray(binning.bin_features(X, f.borders)).T
    mean = np.zeros(n)
    for b in range(4):
        t = jax.tree_util.tree_map(lambda a: np.asarray(a[b]), f.trees)
        for i, x in enumerate(Xb):
            node = 0
            while node >= 0:
                v = x[t.features[node]]
                node = t.children[node, int(t.missing_right[node] if v == 255 else v > t.thresholds[node])]
            mean[i] += t.leaf_values[~node, 0] / 4
    np.testing.assert_allclose(np.asarray(jboost.predict(f, X)).ravel(), mean, rtol=1e-5, atol=1e-7)
    with pytest.raises(ValueError, match="depth"):
        bagging.fit_forest(X, y, task="regression", n_trees=2, depth=24, n_bins=N_BINS,
                           tree_family="oblivious")  # oblivious: 1..16


@pytest.mark.slow
def test_the_default_forest_is_the_books_and_a_continued_forest_keeps_its_family(data):
    """``fit_forest``'s defaults grow ESL Algorithm 15.1's forest: depth-wise trees until their
    nodes are pure or too small (depth 30, the same trees as asking for them); continuing a
    forest without naming the family or depth keeps the model's (an oblivious forest of depth 3
    continued equals one fit of all its trees)."""
    X, y, _, _ = data
    default = bagging.fit_forest(X, y, n_trees=3, n_bins=N_BINS, key=1)
    assert isinstance(default.trees, depthwise_lib.DepthwiseTrees) and default.depth == 30
    asked = bagging.fit_forest(X, y, n_trees=3, n_bins=N_BINS, key=1, tree_family="depthwise",
                               depth=30)
    for a, b in zip(jax.tree_util.tree_leaves(default), jax.tree_util.tree_leaves(asked)):
        np.testing.assert_array_equal(a, b)
    assert int(np.asarray(default.trees.level_counts)[:, 6:].sum()) > 0  # grown past depth 6
    kw = dict(n_bins=N_BINS, key=1, max_features=3)
    first = bagging.fit_forest(X, y, n_trees=2, tree_family="oblivious", depth=3, **kw)
    more = bagging.fit_forest(X, y, n_trees=2, init_model=first, **kw)
    whole = bagging.fit_forest(X, y, n_trees=4, tree_family="oblivious", depth=3, **kw)
    assert isinstance(more.trees, oblivious.ObliviousTrees) and more.depth == 3
    for a, b in zip(jax.tree_util.tree_leaves(more), jax.tree_util.tree_leaves(whole)):
        np.testing.assert_array_equal(a, b)
