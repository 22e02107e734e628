"""Depth-wise trees (jboost/trees/depthwise.py): each node's split against a NumPy brute force of the
Newton gain on that node's rows, a depth-1 tree against the oblivious one, the NumPy tree walk
(missing values to the learned side), leaf values, feature masks per node and subsets per level,
multi-output, vmap over traced hyperparameters (one compilation), and the model protocol
(jboost.fit(tree_family=), predictions on host and traced rows, staged, n_rounds=, importance).

One shape for the grower's trees (N rows, F features, N_BINS bins, depth 3): compiled once."""

from __future__ import annotations

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jboost
import jboost.plot
from jboost import _native
from jboost.data import binning
from jboost.trees.depthwise import DepthwiseTrees
from jboost.trees import depthwise as depthwise_lib
from jboost.trees import family as family_lib
from jboost.trees import node_table
from jboost.trees import oblivious

N, F, N_BINS, DEPTH = 400, 4, 16, 3


def _data(seed=0, k=1):
    """Rows with an interaction (the sign of x0 picks x1 or x2) and missing values in x1 whose
    rows have large targets (so a node learns to send them right)."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(N, F)).astype(np.float32)
    y = np.where(X[:, 0] > 0, X[:, 1], -2.0 * X[:, 2]) + 0.1 * rng.normal(size=N)
    miss = rng.random(N) < 0.15
    y = np.where(miss, 3.0 + 0.1 * rng.normal(size=N), y)
    X[miss, 1] = np.nan
    Y = np.stack([y * (1.0 + 0.5 * j) + j * X[:, 3] for j in range(k)], axis=1).astype(np.float32)
    borders = binning.compute_borders(X, N_BINS)
    Xb = np.asarray(binning.bin_features(X, borders))
    return X, Y, borders, Xb


def _grow(Xb, g, h, family=DepthwiseTrees, depth=DEPTH, l2=1.0, min_split_gain=0.0,
          min_child_weight=0.0, **kw):
    return family.grow(jnp.asarray(Xb), jnp.asarray(g, jnp.float32), jnp.asarray(h, jnp.float32),
                       depth=depth, n_bins=N_BINS, l2=jnp.float32(l2),
                       min_split_gain=jnp.float32(min_split_gain),
                       min_child_weight=jnp.float32(min_child_weight), **kw)


def _squared_error(Y):
    """Gradients and hessians of squared error at raw score 0."""
    return -Y, np.ones_like(Y)


# --------------------------------------------------------------------------------------------
# NumPy references.
# --------------------------------------------------------------------------------------------


def numpy_walk(t, X, binned=False):
    """Leaf of each row by following the node table's children pointers from the root."""
    f, thr, mr = (np.asarray(a) for a in (t.features, t.thresholds if binned else t.borders, t.missing_right))
    kids = np.asarray(t.children)
    out = np.zeros(X.shape[0], np.int64)
    for i, x in enumerate(X):
        node = 0
        while node >= 0:
            v = x[f[node]]
            missing = (v == N_BINS - 1) if binned else np.isnan(v)
            node = kids[node, int(mr[node] if missing else v > thr[node])]
        out[i] = ~node
    return out


def node_at(t, d, j):
    """The table node at heap position ``j`` of level ``d`` (the path of ``j``'s bits from the
    root: bit ``l`` set = right at level ``l``), or ``None`` when a leaf ends the path above it."""
    kids, node = np.asarray(t.children), 0 if float(np.asarray(t.gains)[0]) > 0 else -1
    for level in range(d):
        if node < 0:
            return None
        node = int(kids[node, (j >> level) & 1])
    return node if node >= 0 else None


def _leaves_below(kids, code):
    """The leaf codes (``~leaf``) under table node or leaf ``code``."""
    if code < 0:
        return [code]
    return _leaves_below(kids, int(kids[code, 0])) + _leaves_below(kids, int(kids[code, 1]))


def _gain_at(t, d, j):
    node = node_at(t, d, j)
    return 0.0 if node is None else float(np.asarray(t.gains)[node])


def check_table(t, n_bins=N_BINS):
    """The node table's invariants: used nodes ``0..I-1`` (positive gains) numbered level by level
    (``level_counts``), children after their parent, leaves ``0..I`` each reached once, and null
    unused slots (feature 0, threshold n_bins - 2, missing left, children (~0, ~0), zero leaves)."""
    gains, kids = np.asarray(t.gains), np.asarray(t.children)
    used = int(np.sum(gains > 0))
    assert (gains[:used] > 0).all() and (gains[used:] == 0).all()
    counts = np.asarray(t.level_counts)
    assert counts.sum() == used
    level = np.zeros(len(gains), np.int64)
    for i in range(used):
        for c in kids[i]:
            if c >= 0:
                assert i < c < used
                level[c] = level[i] + 1
    np.testing.assert_array_equal(np.bincount(level[:used], minlength=t.depth), counts)
    assert (np.diff(level[:used]) >= 0).all()  # level by level
    leaves = sorted(~c for c in kids[:used].ravel() if c < 0) if used else [0]
    assert leaves == list(range(used + 1))
    assert (np.asarray(t.features)[used:] == 0).all() and (np.asarray(t.thresholds)[used:] == n_bins - 2).all()
    assert not np.asarray(t.missing_right)[used:].any() and (kids[used:] == -1).all()
    assert (np.asarray(t.leaf_values)[used + 1:] == 0).all()
    return used


def newton_score(G, H, l2):
    return np.sum(np.where(H + l2 > 0, G * G / np.where(H + l2 > 0, H + l2, 1.0), 0.0))


def brute_force_split(xb, g, h, l2, min_child_weight):
    """The best (gain, feature, threshold, missing_right) over every candidate on one node's rows
    (``xb (m, F)`` bins, ``g, h (m, K)``), first maximum in (feature, threshold, direction) order."""
    G, H = g.sum(0), h.sum(0)
    parent = newton_score(G, H, l2)
    best = (0.0, 0, N_BINS - 2, False)
    for f in range(xb.shape[1]):
        missing = xb[:, f] == N_BINS - 1
        for t in range(N_BINS - 1):
            for mr in (False, True):
                right = np.where(missing, mr, xb[:, f] > t)
                GR, HR = g[right].sum(0), h[right].sum(0)
                GL, HL = G - GR, H - HR
                if HL.sum() < min_child_weight or HR.sum() < min_child_weight:
                    continue
                gain = newton_score(GL, HL, l2) + newton_score(GR, HR, l2) - parent
                if gain > best[0] + 1e-4 * max(1.0, abs(best[0])):
                    best = (gain, f, t, mr)
    return best


# --------------------------------------------------------------------------------------------
# The grower.
# --------------------------------------------------------------------------------------------


def test_depth_one_equals_the_oblivious_tree():
    X, Y, borders, Xb = _data()
    g, h = _squared_error(Y)
    a, leaf_a = _grow(Xb, g, h, depth=1)
    b, leaf_b = _grow(Xb, g, h, family=oblivious.ObliviousTrees, depth=1)
    for name in ("features", "thresholds", "missing_right"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name), err_msg=name)
    np.testing.assert_allclose(a.gains, b.gains, rtol=1e-5)
    np.testing.assert_allclose(a.leaf_values, b.leaf_values, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(leaf_a, leaf_b)


@pytest.mark.parametrize("k, l2, min_split_gain, min_child_weight",
                         [(1, 1.0, 0.0, 0.0), (1, 0.5, 2.0, 20.0), (2, 1.0, 0.0, 5.0)])
def test_each_node_splits_as_a_brute_force_search_on_its_rows(k, l2, min_split_gain, min_child_weight):
    X, Y, borders, Xb = _data(k=k)
    g, h = _squared_error(Y)
    h = h * (1.0 + (np.arange(N) % 3)[:, None]).astype(np.float32)  # unequal hessians
    t, leaf = _grow(Xb, g, h, l2=l2, min_split_gain=min_split_gain, min_child_weight=min_child_weight)
    assert t.features.shape == (2**DEPTH - 1,) and t.leaf_values.shape == (2**DEPTH, k)
    used = check_table(t)
    features, thresholds = np.asarray(t.features), np.asarray(t.thresholds)
    missing_right, gains, kids = np.asarray(t.missing_right), np.asarray(t.gains), np.asarray(t.children)
    values = np.asarray(t.leaf_values)
    xb = Xb.T
    expected_leaf = np.full(N, -1, np.int64)
    # Breadth first from the root: (table node or ~leaf, its rows, its level).
    todo, n_split = [(0 if used else -1, np.ones(N, bool), 0)], 0
    while todo:
        code, rows, d = todo.pop(0)
        gain, f, thr, mr = brute_force_split(xb[rows], g[rows], h[rows], l2, min_child_weight)
        splits = d < DEPTH and rows.any() and gain - min_split_gain > 1e-4 * max(1.0, gain)
        assert splits == (code >= 0), (code, d)
        if splits:
            n_split += 1
            assert (features[code], thresholds[code], missing_right[code]) == (f, thr, mr), code
            np.testing.assert_allclose(gains[code], gain - min_split_gain, rtol=2e-3)
            right = np.where(xb[:, f] == N_BINS - 1, mr, xb[:, f] > thr)
            todo += [(kids[code, 0], rows & ~right, d + 1), (kids[code, 1], rows & right, d + 1)]
        else:  # a leaf: -G / (H + l2) of its rows (each holds rows above min_child_weight here)
            expected_leaf[rows] = ~code
            np.testing.assert_allclose(values[~code], -g[rows].sum(0) / (h[rows].sum(0) + l2),
                                       rtol=1e-4, atol=1e-5)
    assert n_split == used >= 3  # the test has splits to check
    np.testing.assert_array_equal(leaf, expected_leaf)
    np.testing.assert_array_equal(numpy_walk(t, xb, binned=True), expected_leaf)


def test_the_walk_on_floats_and_bins_and_missing_values_go_to_the_learned_side():
    X, Y, borders, Xb = _data()
    t, leaf = _grow(Xb, *_squared_error(Y))
    t = t.with_borders(jnp.asarray(borders))
    np.testing.assert_array_equal(t.leaf_index_raw(jnp.asarray(X.T)), numpy_walk(t, X))
    np.testing.assert_array_equal(t.leaf_index_binned(jnp.asarray(Xb), N_BINS), numpy_walk(t, Xb.T, binned=True))
    np.testing.assert_array_equal(leaf, numpy_walk(t, X))
    # The missing rows of x1 have large targets: some node splitting on x1 sends them right, and
    # a row whose x1 is missing reaches the leaf the rule says.
    f1 = np.asarray(t.features) == 1
    assert np.any(np.asarray(t.missing_right)[f1 & (np.asarray(t.gains) > 0)])
    miss = np.isnan(X[:, 1])
    values = np.asarray(t.leaf_values)[:, 0]
    assert values[numpy_walk(t, X[miss])].mean() > values[numpy_walk(t, X[~miss])].mean() + 1.0


@pytest.mark.slow
def test_per_node_feature_masks_and_per_level_subsets():
    X, Y, borders, Xb = _data()
    g, h = _squared_error(Y)
    full, _ = _grow(Xb, g, h)
    # Node 2 of level 2 may not use its best feature; every other node may use all.
    r = node_at(full, 2, 2)
    banned = int(full.features[r])
    assert _gain_at(full, 2, 2) > 0 and _gain_at(full, 2, 0) > 0
    masks = np.ones((DEPTH, 2**(DEPTH - 1), F), bool)
    masks[2, 2, banned] = False
    t, _ = _grow(Xb, g, h, feature_masks=jnp.asarray(masks))
    assert int(t.features[node_at(t, 2, 2)]) != banned and _gain_at(t, 2, 2) > 0
    for d, j in [(0, 0), (1, 0), (1, 1), (2, 0), (2, 1)]:  # the other nodes above and beside it
        a, b = node_at(t, d, j), node_at(full, d, j)
        assert (a is None) == (b is None) and (a is None or int(t.features[a]) == int(full.features[b]))
    # A node no feature is allowed at is a leaf: its descendants never split, whatever they may use.
    masks = np.ones((DEPTH, 2**(DEPTH - 1), F), bool)
    masks[1, 0] = False
    t, leaf = _grow(Xb, g, h, feature_masks=jnp.asarray(masks))
    check_table(t)
    assert _gain_at(full, 2, 0) > 0 and _gain_at(full, 2, 2) > 0  # below it, the unmasked tree splits
    assert node_at(t, 1, 0) is None and node_at(t, 2, 0) is None and node_at(t, 2, 2) is None
    left = ~int(np.asarray(t.children)[0, 0])
    assert left >= 0  # node 0 of level 1 is a leaf: every row going left at the root reaches it
    root_left = np.asarray(numpy_walk(full, Xb.T, binned=True))  # any tree: rows left at the root
    kids = np.asarray(full.children)
    goes_left = np.isin(root_left, [~c for c in _leaves_below(kids, int(kids[0, 0]))])
    np.testing.assert_array_equal(np.asarray(leaf)[goes_left], left)
    # Per-level subsets == the equivalent per-level masks (histograms of the gathered features).
    subsets = np.array([[0, 1], [1, 2], [0, 2]], np.int32)
    level_masks = np.zeros((DEPTH, F), bool)
    for d in range(DEPTH):
        level_masks[d, subsets[d]] = True
    a, la = _grow(Xb, g, h, feature_subsets=jnp.asarray(subsets))
    b, lb = _grow(Xb, g, h, feature_masks=jnp.asarray(level_masks))
    for name in ("features", "thresholds", "missing_right"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name), err_msg=name)
    np.testing.assert_allclose(a.leaf_values, b.leaf_values, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(la, lb)
    # Per-node subsets == per-node masks.
    node_subsets = np.tile(subsets[:, None, :], (1, 2**(DEPTH - 1), 1))
    node_subsets[2, 1] = [1, 3]
    node_masks = np.zeros((DEPTH, 2**(DEPTH - 1), F), bool)
    for d in range(DEPTH):
        for j in range(2**(DEPTH - 1)):
            node_masks[d, j, node_subsets[d, j]] = True
    c, _ = _grow(Xb, g, h, feature_subsets=jnp.asarray(node_subsets))
    e, _ = _grow(Xb, g, h, feature_masks=jnp.asarray(node_masks))
    np.testing.assert_array_equal(c.features, e.features)
    np.testing.assert_array_equal(c.thresholds, e.thresholds)


def test_vmap_over_l2_equals_separate_fits_and_compiles_once():
    X, Y, borders, Xb = _data()
    g, h = _squared_error(Y)
    l2s = jnp.asarray([0.0, 1.0, 10.0], jnp.float32)
    traces = []

    @jax.jit
    def grow(l2, msg):
        traces.append(1)
        return _grow(Xb, g, h, l2=l2, min_split_gain=msg)

    batched = jax.vmap(grow)(l2s, jnp.asarray([0.0, 0.5, 1.0], jnp.float32))
    for i, l2 in enumerate([0.0, 1.0, 10.0]):
        one = grow(jnp.float32(l2), jnp.float32([0.0, 0.5, 1.0][i]))
        for name in DepthwiseTrees._fields:
            np.testing.assert_allclose(np.asarray(getattr(batched[0], name)[i], np.float32),
                                       np.asarray(getattr(one[0], name), np.float32), rtol=1e-6, err_msg=name)
        np.testing.assert_array_equal(batched[1][i], one[1])
    assert len(traces) == 1  # the batch and every separate value: one trace
    # The values are used: heavier l2 shrinks the leaves.
    lv = np.abs(np.asarray(batched[0].leaf_values)).max(axis=(1, 2))
    assert lv[0] > lv[1] > lv[2]


# --------------------------------------------------------------------------------------------
# Boosting and the model protocol.
# --------------------------------------------------------------------------------------------

KW = dict(n_rounds=8, depth=DEPTH, n_bins=N_BINS, learning_rate=0.3)


@pytest.fixture(scope="module")
def models():
    X, Y, borders, Xb = _data()
    fam = jboost.fit(X, Y[:, 0], "squared_error", tree_family=DepthwiseTrees, eval_set=(X[:100], Y[:100, 0]), **KW)
    obl = jboost.fit(X, Y[:, 0], "squared_error", eval_set=(X[:100], Y[:100, 0]), **KW)
    return X, Y, fam, obl


def test_boosting_predicts_on_host_and_traced_rows_bitwise_staged_and_n_rounds(models):
    X, Y, m, _ = models
    assert isinstance(m.trees, DepthwiseTrees) and m.trees.features.shape == (KW["n_rounds"], 1, 2**DEPTH - 1)
    p = np.asarray(jboost.predict(m, X))
    np.testing.assert_array_equal(p, np.asarray(jax.jit(jboost.predict)(m, jnp.asarray(X))))
    # The NumPy walk of every tree, summed in round order from the baseline.
    ref = np.zeros(N, np.float32)
    for r in range(KW["n_rounds"]):
        t = jax.tree_util.tree_map(lambda a: a[r, 0], m.trees)
        ref = ref + np.asarray(t.leaf_values)[numpy_walk(t, X), 0]
    np.testing.assert_allclose(p, np.asarray(m.baseline)[0] + ref, rtol=1e-5, atol=1e-5)
    staged = np.asarray(jboost.staged_predict(m, X))[..., 0]
    np.testing.assert_array_equal(staged[-1], p)
    np.testing.assert_array_equal(staged[2], np.asarray(jboost.predict(m, X, n_rounds=3)))
    # The validation loss the fit recorded is the loss of its own predictions (trees replayed on bins).
    pv = np.asarray(jboost.predict(m, X[:100]))
    np.testing.assert_allclose(m.valid_loss[-1], np.mean(0.5 * (pv - Y[:100, 0]) ** 2), rtol=1e-4)
    imp = np.asarray(jboost.feature_importance(m))
    assert imp.shape == (F,) and abs(imp.sum() - 1.0) < 1e-5 and imp[0] > 0


def test_depthwise_fits_an_interaction_better_than_oblivious_trees(models):
    X, Y, m, obl = models
    print(m.train_loss[-1], obl.train_loss[-1], m.valid_loss[-1], obl.valid_loss[-1])
    assert m.train_loss[-1] < 0.95 * obl.train_loss[-1]
    assert m.valid_loss[-1] < 0.95 * obl.valid_loss[-1]


def test_multi_output_vector_leaves_and_per_output_trees():
    X, Y, borders, Xb = _data(k=2)
    m = jboost.fit(X, Y, "squared_error", tree_family=DepthwiseTrees, **KW)
    assert m.trees.leaf_values.shape == (KW["n_rounds"], 1, 2**DEPTH, 2)
    ref = np.asarray(m.baseline) + sum(
        np.asarray(t.leaf_values)[numpy_walk(t, X)]
        for t in (jax.tree_util.tree_map(lambda a: a[r, 0], m.trees) for r in range(KW["n_rounds"])))
    np.testing.assert_allclose(np.asarray(jboost.predict(m, X)), ref, rtol=1e-5, atol=1e-5)


def test_plot_tree_draws_each_splitting_node_and_the_leaves_in_path_order(models):
    pytest.importorskip("matplotlib")
    import matplotlib
    matplotlib.use("Agg")
    X, Y, m, _ = models
    ax = jboost.plot.tree(m, 2)
    texts = [t.get_text() for t in ax.texts]
    t = jax.tree_util.tree_map(lambda a: np.asarray(a[2, 0]), m.trees)
    kids = t.children
    # Rules level by level, left to right (breadth first from the root, left child first).
    level, bfs = [0], []
    while level:
        bfs += level
        level = [int(c) for node in level for c in kids[node] if c >= 0]
    rules = [f"x{t.features[r]} <= {t.borders[r]:.3g}\n(NaN {'R' if t.missing_right[r] else 'L'})"
             for r in bfs]
    assert len(rules) == int((t.gains > 0).sum()) >= 3 and texts[:len(rules)] == rules
    # Leaves left to right as the walk meets them (left subtree first), labelled by their ids.
    order = [~c for c in _leaves_below(kids, 0)]
    assert texts[len(rules):] == [f"{t.leaf_values[leaf, 0]:.3g}" for leaf in order]
    assert [tk.get_text() for tk in ax.get_xticklabels()] == [str(leaf) for leaf in order]


def test_depthwise_by_name_saved_loaded_and_continued(tmp_path):
    """The built-in family is named by a string, loads without tree_family= and continues."""
    rng = np.random.default_rng(5)
    X = rng.normal(size=(300, 4)).astype(np.float32)
    y = (np.where(X[:, 0] > 0, X[:, 1], X[:, 2]) + 0.1 * rng.normal(size=300)).astype(np.float32)
    kw = dict(depth=3, n_bins=32, learning_rate=0.3)
    model = jboost.fit(X, y, tree_family="depthwise", n_rounds=3, **kw)
    assert type(model.trees).__name__ == "DepthwiseTrees" and model.depth == 3
    path = tmp_path / "d.jbm"
    jboost.save(model, path)
    loaded = jboost.load(path)
    assert type(loaded.trees) is type(model.trees)
    np.testing.assert_array_equal(np.asarray(jboost.predict(loaded, X)), np.asarray(jboost.predict(model, X)))
    more = jboost.fit(X, y, tree_family="depthwise", n_rounds=2, init_model=loaded, **kw)
    once = jboost.fit(X, y, tree_family="depthwise", n_rounds=5, **kw)
    np.testing.assert_array_equal(np.asarray(jboost.predict(more, X)), np.asarray(jboost.predict(once, X)))
    with pytest.raises(ValueError, match='tree_family must be "oblivious", "depthwise"'):
        jboost.fit(X, y, tree_family="free", n_rounds=1)


# ---------------------------------------------------------------------------------------------
# The CPU whole-tree kernel (jboost/_native/depthwise.cc) against the pure-JAX compact levels.

KERNEL_DEPTH, KERNEL_F = 6, 10


def _kernel_case(k, seed, n_bins=N_BINS):
    """Binned rows (missing values in feature 1), bootstrap-weighted targets of K outputs."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(N, KERNEL_F)).astype(np.float32)
    X[rng.random((N, KERNEL_F)) < np.array([0.0, 0.2] + [0.0] * (KERNEL_F - 2))] = np.nan
    cls = (X[:, 0] > 0.3).astype(int) + (np.nan_to_num(X[:, 1]) * X[:, 2] > 0).astype(int) + (X[:, 3] > 1)
    Xb = binning.bin_features(X, binning.compute_borders(X, n_bins))
    w = rng.poisson(1.0, N).astype(np.float32)[:, None]
    t = (cls[:, None] == 1).astype(np.float32) if k == 1 else np.eye(k, dtype=np.float32)[cls % k]
    return Xb, jnp.asarray(-t * w), jnp.asarray(np.ones_like(t) * w)


@pytest.mark.slow
@pytest.mark.parametrize("k,max_features,max_nodes,n_bins", [(1, 3, N // 2, N_BINS), (1, KERNEL_F, 3, N_BINS),
                                                      (3, 4, N // 2, N_BINS), (2, 3, N // 2, 64),
                                                      (1, KERNEL_F, N // 2, 200)])
def test_kernel_tree_is_bitwise_the_pure_jax_levels(k, max_features, max_nodes, n_bins):
    """The kernel grows the compact path's tree: the same per-node draws (node_features' hash),
    splits, gains, rows' leaves and Newton leaf values, bit for bit (for K outputs both sum a
    node's scores in one written order, splits.sum_outputs_16), with max_nodes capping the
    slots; and it is the program that ran."""
    from _pure_jax import pure_jax
    assert depthwise_lib.kernel_available()
    Xb, g, h = _kernel_case(k, seed=k + max_features, n_bins=n_bins)
    kw = dict(depth=KERNEL_DEPTH, n_bins=n_bins, l2=0.5, min_split_gain=0.01, min_child_weight=1.0,
              feature_key=jax.random.PRNGKey(3), max_features=max_features, max_nodes=max_nodes)
    assert _native.DEPTHWISE_TREE in str(jax.jit(
        lambda g: depthwise_lib.fit_tree(Xb, g, h, **kw)).lower(g).as_text())
    a, la = depthwise_lib.fit_tree(Xb, g, h, **kw)
    b, lb = pure_jax(depthwise_lib.fit_tree, Xb, g, h, **kw)
    for name in ("features", "thresholds", "missing_right", "leaf_values"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name), err_msg=name)
    np.testing.assert_array_equal(la, lb)
    np.testing.assert_array_equal(a.gains, b.gains)
    for name in ("children", "level_counts"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name), err_msg=name)
    assert a.features.shape == (node_table.node_capacity(KERNEL_DEPTH, N, max_nodes),)
    splits = check_table(a, n_bins)
    assert splits >= 8
    per_level = list(np.asarray(a.level_counts))
    assert max(per_level) <= max_nodes and (max_nodes > 3 or max(per_level) == 3), per_level


@pytest.mark.slow
@pytest.mark.parametrize("layout,k,n_bins", [
    ("onehot-shared", 4, N_BINS), ("onehot-own", 4, N_BINS), ("dense-shared", 4, N_BINS),
    ("dense-own", 4, N_BINS), ("onehot-shared", 20, N_BINS), ("dense-own", 20, N_BINS),
    ("onehot-shared", 40, 256)])
def test_kernel_payload_layouts_with_row_weights_are_bitwise_the_pure_jax_levels(layout, k, n_bins):
    """The kernel reads a tree's weighted payload in the fewest histogram channels that hold it
    (hessians equal across the K outputs: one channel; at most one non-zero gradient per row:
    one add) -- the same sums, so the same tree, bit for bit, as the pure-JAX levels of
    ``grad * row_weights`` and ``hess * row_weights``, for each layout: one-hot gradients (a
    forest's classes) or dense ones, hessians shared or each output's own; bootstrap counts
    with zeros as the row weights; K = 4 and 20 outputs (more than the kernel's 16 running
    sums of a node's scores); with more than 16 classes all present, and 40 classes on 256 bins
    (most nodes take the sparse search, whose scores run over the node's own classes, each in
    its output's running sum: nodes hold outputs j, j + 16 and j + 32)."""
    from _pure_jax import pure_jax
    rng = np.random.default_rng(11)
    X = rng.normal(size=(N, KERNEL_F)).astype(np.float32)
    X[rng.random((N, KERNEL_F)) < 0.1] = np.nan
    Xb = binning.bin_features(X, binning.compute_borders(X, n_bins))
    cls = ((X[:, 0] > 0).astype(int) + 2 * (np.nan_to_num(X[:, 2]) * X[:, 3] > 0)) % k
    if k > 16:  # every class, so that nodes hold outputs j and j + 16 (one running sum) and more
        band = np.clip(np.floor(np.nan_to_num(X[:, 1]) * 2 + 5), 0, 9).astype(int)
        cls = (cls + 4 * band) % k
    if layout.startswith("onehot"):
        g = -np.eye(k, dtype=np.float32)[cls] * rng.uniform(0.5, 2, (N, 1)).astype(np.float32)
    else:
        g = (rng.normal(size=(N, k)) + np.eye(k)[cls]).astype(np.float32)
    h = (np.ones((N, k), np.float32) * rng.uniform(0.5, 2, (N, 1)).astype(np.float32)
         if layout.endswith("shared") else rng.uniform(0.1, 2, (N, k)).astype(np.float32))
    counts = rng.multinomial(N, np.full(N, 1.0 / N)).astype(np.float32)
    assert (counts == 0).any()
    kw = dict(depth=KERNEL_DEPTH, n_bins=n_bins, l2=0.5, min_split_gain=0.0, min_child_weight=0.5,
              feature_key=jax.random.PRNGKey(4), max_features=4, max_nodes=N // 2,
              row_weights=jnp.asarray(counts))
    g, h = jnp.asarray(g), jnp.asarray(h)
    assert _native.DEPTHWISE_TREE in str(jax.jit(
        lambda g: depthwise_lib.fit_tree(Xb, g, h, **kw)).lower(g).as_text())
    a, la = depthwise_lib.fit_tree(Xb, g, h, **kw)
    b, lb = pure_jax(depthwise_lib.fit_tree, Xb, g, h, **kw)
    for name in a._fields:
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name), err_msg=name)
    np.testing.assert_array_equal(la, lb)
    assert check_table(a, n_bins) >= 8
    # row_weights is the weighted targets' tree: the same as passing them weighted.
    c, lc = depthwise_lib.fit_tree(Xb, g * counts[:, None], h * counts[:, None],
                               **{**kw, "row_weights": None})
    for name in a._fields:
        np.testing.assert_array_equal(getattr(a, name), getattr(c, name), err_msg=name)
    np.testing.assert_array_equal(la, lc)
    with pytest.raises(ValueError, match="row_weights must be"):
        depthwise_lib.fit_tree(Xb, g, h, **{**kw, "row_weights": jnp.asarray(counts)[:, None]})


@pytest.mark.slow
@pytest.mark.parametrize("case", ["one-hot", "a row of two gradients", "an infinite weight"])
def test_bags_sharing_one_payload_are_bitwise_the_pure_jax_levels(case):
    """A forest's trees: one unweighted payload (one-hot gradients of K = 5 classes, one hessian
    each row; a row of zero gradient; a row of tiny gradient) shared by a vmapped batch of bags
    that differ by their row weights (bootstrap counts with zeros). The kernel reads the shared
    payload's classes once per call; each bag's tree is bitwise the pure-JAX levels' on the
    same weights -- also when the payload is not one-hot (a row with two non-zero gradients) or a
    weight is not finite, where each tree reads its own weighted payload."""
    from _pure_jax import pure_jax
    k, n_bags = 5, 3
    rng = np.random.default_rng(21)
    X = rng.normal(size=(N, KERNEL_F)).astype(np.float32)
    X[rng.random((N, KERNEL_F)) < 0.1] = np.nan
    Xb = binning.bin_features(X, binning.compute_borders(X, 64))
    cls = ((X[:, 0] > 0).astype(int) + 2 * (np.nan_to_num(X[:, 2]) > 0.5) + (X[:, 3] > 1)) % k
    g = -np.eye(k, dtype=np.float32)[cls] * rng.uniform(0.5, 2, (N, 1)).astype(np.float32)
    g[7] = 0.0
    g[8, cls[8]] = -1e-30
    if case == "a row of two gradients":
        g[9, (cls[9] + 1) % k] = -0.5
    h = np.ones((N, k), np.float32) * rng.uniform(0.5, 2, (N, 1)).astype(np.float32)
    counts = rng.multinomial(N, np.full(N, 1.0 / N), size=n_bags).astype(np.float32)
    assert (counts == 0).any()
    if case == "an infinite weight":
        counts[1, 5] = np.inf
    kw = dict(depth=KERNEL_DEPTH, n_bins=64, l2=0.5, min_split_gain=0.0, min_child_weight=0.5,
              max_features=4, max_nodes=N // 2)
    g, h = jnp.asarray(g), jnp.asarray(h)

    def bags(c, keys):
        return jax.vmap(lambda w, key: depthwise_lib.fit_tree(Xb, g, h, feature_key=key, row_weights=w,
                                                          **kw))(c, keys)

    keys = jax.random.split(jax.random.PRNGKey(6), n_bags)
    assert _native.DEPTHWISE_TREE in str(jax.jit(bags).lower(jnp.asarray(counts), keys).as_text())
    a, la = bags(jnp.asarray(counts), keys)
    b, lb = pure_jax(bags, jnp.asarray(counts), keys)
    for name in a._fields:
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name), err_msg=name)
    np.testing.assert_array_equal(la, lb)
    for t in range(n_bags):  # (a bag of an infinite weight has infinite sums: no split)
        if np.isfinite(counts[t]).all():
            assert check_table(jax.tree_util.tree_map(lambda v: v[t], a), 64) >= 8


@pytest.mark.parametrize("k", [4, 20])
def test_min_child_weight_at_the_shared_hessian_boundary_is_the_pure_jax_levels(k):
    """One hessian shared by the K outputs, integer row weights: a child's hessian sum is K times
    an integer, and min_child_weight set exactly on such sums (and just above and below them)
    decides splits at the boundary (sum >= min_child_weight). The kernel finds the smallest
    hessian that passes once per tree; its trees are bitwise the pure-JAX levels' at each
    setting, and the settings grow different trees (the boundary is reached)."""
    from _pure_jax import pure_jax
    rng = np.random.default_rng(5)
    X = rng.normal(size=(N, KERNEL_F)).astype(np.float32)
    Xb = binning.bin_features(X, binning.compute_borders(X, N_BINS))
    cls = ((X[:, 0] > 0).astype(int) + 2 * (X[:, 1] > 0.3)) % k
    counts = rng.poisson(1.0, N).astype(np.float32)
    g = jnp.asarray(-np.eye(k, dtype=np.float32)[cls] * counts[:, None])
    h = jnp.asarray(np.ones((N, k), np.float32) * counts[:, None])
    trees = []
    for mcw in (3.0 * k, np.nextafter(np.float32(3.0 * k), np.float32(0)), np.nextafter(np.float32(3.0 * k), np.float32(99)),
                6.0 * k):
        kw = dict(depth=KERNEL_DEPTH, n_bins=N_BINS, l2=0.0, min_split_gain=0.0,
                  min_child_weight=float(mcw), feature_key=jax.random.PRNGKey(2), max_features=KERNEL_F,
                  max_nodes=N // 2)
        a, la = depthwise_lib.fit_tree(Xb, g, h, **kw)
        b, lb = pure_jax(depthwise_lib.fit_tree, Xb, g, h, **kw)
        for name in a._fields:
            np.testing.assert_array_equal(getattr(a, name), getattr(b, name), err_msg=f"{name} {mcw}")
        np.testing.assert_array_equal(la, lb)
        trees.append(np.asarray(a.level_counts).sum())
    assert trees[1] >= trees[0] >= trees[2] >= trees[3] and trees[1] > trees[3], trees


@pytest.mark.slow
def test_deep_trees_hold_only_their_nodes():
    """Depth 12 on 400 rows, grown until nodes are pure: a table of N - 1 = 399 node slots, not
    4095; every split node is used at most once, the kernel's table is bitwise the pure-JAX
    levels', each leaf holds a row of non-zero weight, and the walk finds the rows' leaves."""
    from _pure_jax import pure_jax
    Xb, g, h = _kernel_case(2, seed=5)
    kw = dict(depth=12, n_bins=N_BINS, l2=0.0, min_split_gain=0.0, min_child_weight=0.0,
              feature_key=jax.random.PRNGKey(1), max_features=KERNEL_F, max_nodes=N // 2)
    a, la = depthwise_lib.fit_tree(Xb, g, h, **kw)
    assert node_table.node_capacity(12, N, N // 2) == N - 1 and a.features.shape == (N - 1,)
    used = check_table(a)
    weighted = np.asarray(jnp.any(h != 0, axis=-1))
    leaves_with_rows = np.unique(np.asarray(la)[weighted])
    np.testing.assert_array_equal(leaves_with_rows, np.arange(used + 1))  # each leaf holds one
    assert used >= 40 and int(np.asarray(a.level_counts)[6:].sum()) > 0  # deep, not a stub
    np.testing.assert_array_equal(numpy_walk(a, np.asarray(Xb).T, binned=True), la)
    b, lb = pure_jax(depthwise_lib.fit_tree, Xb, g, h, **kw)
    for name in a._fields:
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name), err_msg=name)
    np.testing.assert_array_equal(la, lb)


@pytest.mark.slow
@pytest.mark.parametrize("seed,n_bins,distinct", [(0, 64, None), (1, 64, None), (2, 256, 9)])
def test_kernel_small_nodes_on_many_bins_are_bitwise_the_pure_jax_levels(seed, n_bins, distinct):
    """Nodes of fewer occupied bins than half the bins (few rows, or features of few distinct
    values: then every node) take the kernel's sparse split search (occupied bins, the block
    starts of the blocked prefix sum next to occupied blocks); 64 bins, or 256 bins with 9
    distinct values a feature spread over the blocks (empty blocks between them), depth 10,
    l2 = 0, heavy-tailed targets: the same tree as the pure-JAX levels' dense search, bit for
    bit."""
    from _pure_jax import pure_jax
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(N, 6)).astype(np.float32)
    if distinct is not None:  # values 0, 1, 2, 4, 8, ...: their bins far apart
        X = (2.0 ** rng.integers(0, distinct, size=(N, 6)) - 1).astype(np.float32)
    X[rng.random((N, 6)) < 0.1] = np.nan
    borders = binning.compute_borders(X, n_bins)
    if distinct is not None:  # borders spread over the bins: the values land in distant blocks
        borders = np.sort(np.concatenate([np.linspace(-1, 2.0 ** distinct, n_bins - 2 - 2 * distinct),
                                          2.0 ** np.arange(distinct) - 1.5,
                                          2.0 ** np.arange(distinct) - 0.5])).astype(np.float32)[None].repeat(6, 0)
    Xb = binning.bin_features(X, borders)
    if distinct is not None:
        assert max(len(np.unique(c[c < n_bins - 1])) for c in np.asarray(Xb)) <= distinct + 1
    w = rng.poisson(1.0, N).astype(np.float32)[:, None]
    y = rng.normal(size=(N, 1)).astype(np.float32) * (1 + 1e3 * (rng.random((N, 1)) < 0.05))
    g = jnp.asarray(-y * w)
    h = jnp.asarray(w * rng.uniform(0.5, 2, size=(N, 1)).astype(np.float32))
    kw = dict(depth=10, n_bins=n_bins, l2=0.0, min_split_gain=0.0, min_child_weight=0.0,
              feature_key=jax.random.PRNGKey(seed), max_features=3, max_nodes=N // 2)
    a, la = depthwise_lib.fit_tree(Xb, g, h, **kw)
    b, lb = pure_jax(depthwise_lib.fit_tree, Xb, g, h, **kw)
    assert check_table(a, n_bins) >= (100 if distinct is None else 30)  # deep trees
    for name in a._fields:
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name), err_msg=name)
    np.testing.assert_array_equal(la, lb)


def test_a_table_too_small_for_the_tree_is_an_error_not_a_dropped_node():
    """The kernel refuses to write a tree into fewer node slots than it splits (node_capacity
    bounds them; a smaller table would lose nodes silently)."""
    Xb, g, h = _kernel_case(1, seed=4)
    payload = jnp.concatenate([g, h], axis=-1)
    kw = dict(depth=KERNEL_DEPTH, n_bins=N_BINS, max_features=KERNEL_F, max_nodes=N // 2, missing=True)
    args = (Xb, payload, None, 0.5, 0.0, 1.0)
    tree, _ = depthwise_lib._kernel_tree(*args, capacity=node_table.node_capacity(KERNEL_DEPTH, N, N // 2), **kw)
    used = int(np.asarray(tree.level_counts).sum())
    assert used >= 8
    with pytest.raises(Exception, match="more node slots than its table holds"):
        jax.block_until_ready(depthwise_lib._kernel_tree(*args, capacity=used - 1, **kw))
    exact, _ = depthwise_lib._kernel_tree(*args, capacity=used, **kw)  # exactly enough: the same tree
    np.testing.assert_array_equal(exact.features, tree.features[:used])
    np.testing.assert_array_equal(exact.leaf_values, tree.leaf_values[:used + 1])


def test_prediction_kernel_is_bitwise_the_pure_jax_walk():
    """predict_raw of node tables on CPU runs predict.cc's pointer steps: bitwise the pure-JAX
    walk, row- and feature-major, with NaN and subnormal inputs and K = 3 outputs, for fitted
    trees and for a hostile table (children past the end, a walk that ends on a node) whose
    indices both clamp the same way."""
    from _pure_jax import pure_jax
    Xb, g, h = _kernel_case(3, seed=9)
    kw = dict(depth=KERNEL_DEPTH, n_bins=N_BINS, l2=0.5, min_split_gain=0.0, min_child_weight=1.0,
              feature_key=jax.random.PRNGKey(2), max_features=4, max_nodes=N // 2)
    scales = jnp.arange(5, dtype=jnp.float32)
    trees = jax.vmap(lambda s: depthwise_lib.fit_tree(Xb, g * (1.0 + s), h, **kw)[0])(scales)
    rng = np.random.default_rng(3)
    borders = np.sort(rng.normal(size=(KERNEL_F, N_BINS - 1)).astype(np.float32), axis=1)
    trees = trees.with_borders(jnp.asarray(borders))
    X = rng.normal(size=(700, KERNEL_F)).astype(np.float32)
    X[rng.random(X.shape) < 0.1] = np.nan
    X[:5, :] = np.float32(1e-40)  # subnormal: compared as FLT_MIN on both paths
    hostile = trees._replace(children=trees.children.at[0, 0, 1].set(10_000).at[1, 0, 0].set(0),
                             features=trees.features.at[2, 0].set(99))
    for t in (trees, hostile):
        assert family_lib.predict_raw(t, X).shape == (700, 3)
        assert "jboost_predict_depthwise" in str(jax.jit(family_lib.predict_raw).lower(t, X).as_text())
        np.testing.assert_array_equal(family_lib.predict_raw(t, X), pure_jax(family_lib.predict_raw, t, X))
        np.testing.assert_array_equal(family_lib.predict_raw_feature_major(t, X.T),
                                      pure_jax(family_lib.predict_raw_feature_major, t, X.T))


@pytest.mark.slow
def test_from_dense_refuses_a_capacity_below_the_splitting_nodes():
    """from_dense converts the dense heap layout exactly at any capacity that holds the tree's
    splitting nodes (the same predictions) and refuses a smaller one, naming the argument."""
    X, Y, borders, Xb = _data()
    g, h = _squared_error(Y)
    t, _ = _grow(Xb, g, h)
    used = int(np.asarray(t.level_counts).sum())
    assert used >= 3
    # The dense heap of this tree: rule 2**d - 1 + j at heap node j of level d.
    n_rules = 2**DEPTH - 1
    dense = dict(features=np.zeros(n_rules, np.int32), thresholds=np.full(n_rules, N_BINS - 2, np.int32),
                 borders=np.zeros(n_rules, np.float32), missing_right=np.zeros(n_rules, bool),
                 gains=np.zeros(n_rules, np.float32), leaf_values=np.zeros((2**DEPTH, 1), np.float32))
    kids = np.asarray(t.children)

    def fill(code, d, j):
        if code < 0 or d == DEPTH:  # a leaf: its rows go left below, to dense leaf j
            dense["leaf_values"][j] = np.asarray(t.leaf_values)[~code]
            return
        r = 2**d - 1 + j
        for name in ("features", "thresholds", "borders", "missing_right", "gains"):
            dense[name][r] = np.asarray(getattr(t, name))[code]
        fill(int(kids[code, 0]), d + 1, j)
        fill(int(kids[code, 1]), d + 1, j + 2**d)

    fill(0, 0, 0)
    back = depthwise_lib.from_dense(capacity=used, **dense)
    np.testing.assert_array_equal(numpy_walk(back, Xb.T, binned=True), numpy_walk(t, Xb.T, binned=True))
    np.testing.assert_array_equal(back.features, np.asarray(t.features)[:used])
    with pytest.raises(ValueError, match=f"capacity={used - 1}.*capacity >= {used}"):
        depthwise_lib.from_dense(capacity=used - 1, **dense)


def test_kernel_vmapped_trees_equal_separate_calls():
    """A batch of trees (vmap: the kernel's threads take whole trees) == each tree alone."""
    Xb, g, h = _kernel_case(1, seed=7)
    scale = jnp.asarray([1.0, 0.0, 2.0])[:, None, None] * jnp.asarray(
        np.random.default_rng(1).poisson(1.0, (3, N, 1)).astype(np.float32))
    keys = jax.random.split(jax.random.PRNGKey(0), 3)
    kw = dict(depth=KERNEL_DEPTH, n_bins=N_BINS, min_split_gain=0.0, min_child_weight=1.0,
              max_features=3, max_nodes=N // 2)
    fit = lambda g, h, key, l2: depthwise_lib.fit_tree(Xb, g, h, l2=l2, feature_key=key, **kw)  # noqa: E731
    l2s = jnp.asarray([0.0, 1.0, 0.5])
    batched = jax.vmap(fit)(g * scale, h * scale, keys, l2s)
    for i in range(3):
        one = fit(g * scale[i], h * scale[i], keys[i], l2s[i])
        for x, y in zip(jax.tree_util.tree_leaves(batched), jax.tree_util.tree_leaves(one)):
            np.testing.assert_array_equal(np.asarray(x)[i], y)
    assert not np.asarray(batched[0].gains[1]).any()  # zero weights: no split, a null tree


@pytest.mark.slow
@pytest.mark.parametrize("seed,depth,max_nodes", [(6, 30, N // 2), (7, 30, 8), (8, 9, 3)])
def test_compact_levels_in_jax_are_the_kernels_tree_at_any_depth(seed, depth, max_nodes):
    """The pure-JAX compact path numbers each level's open nodes compactly (no ``2**depth``
    array: depth 30 on 400 rows) and runs the deep levels of one width as a while loop that
    ends once no node is open: depth 30 grown until pure, the slot bound ``max_nodes`` reached
    from level 3 on (a loop over 27 levels of 16 open nodes), and a shallow bound; random
    targets, poisson row weights (zero rows), two outputs. Bitwise the CPU kernel's table."""
    from _pure_jax import pure_jax
    Xb, g, h = _kernel_case(2, seed=seed)
    w = jnp.asarray(np.random.default_rng(seed).poisson(1.0, N).astype(np.float32))
    kw = dict(depth=depth, n_bins=N_BINS, l2=0.5, min_split_gain=0.0, min_child_weight=1.0,
              feature_key=jax.random.PRNGKey(seed), max_features=KERNEL_F // 2,
              max_nodes=max_nodes, row_weights=w)
    a, la = depthwise_lib.fit_tree(Xb, g, h, **kw)
    b, lb = pure_jax(depthwise_lib.fit_tree, Xb, g, h, **kw)
    used = check_table(b)
    assert used >= (40 if max_nodes > 8 else 2 * max_nodes), used
    counts = np.asarray(b.level_counts)
    if max_nodes == 8:  # the bound held; levels of the loop split; the loop ended before depth 30
        assert counts.max() <= 8 and counts[4:].sum() > 0 and counts[-1] == 0, counts
    for name in a._fields:
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name), err_msg=name)
    np.testing.assert_array_equal(la, lb)
