"""Loss-guided (best-first) trees (jboost/trees/lossguide.py): every split against a NumPy best-first
reference on random cases with exact float sums, the full leaf budget against the depth-wise
tree, vmap over traced hyperparameters (one compilation, the separate fits), the pure-JAX
histograms against the kernel's, and the model protocol (jboost.fit(tree_family="lossguide"),
model files, SHAP, continuation, determinism, the settings' errors)."""

from __future__ import annotations

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jboost
from jboost.data import binning
from jboost.trees import lossguide
from jboost.trees import depthwise as depthwise_lib
from jboost.trees import node_splits
from jboost.trees import splits as splits_lib

N, F, N_BINS = 300, 5, 16


def _case(seed, k=1):
    """Binned rows (missing values in feature 1) and targets whose float sums are exact in any
    order (gradients multiples of 1/4, hessians 1/2, 1 or 2): histograms, gains and leaf sums are
    then the same floats however they are summed, so a reference decides every tie alike."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(N, F)).astype(np.float32)
    X[rng.random(N) < 0.15, 1] = np.nan
    Xb = np.asarray(binning.bin_features(X, binning.compute_borders(X, N_BINS)))
    signal = (X[:, 0] > 0) * 4 + np.where(np.isnan(X[:, 1]), 6, 0) + (X[:, 2] > 0.5) * (X[:, 3] > 0) * 3
    g = (np.round(rng.normal(size=(N, k)) * 4) / 4 - signal[:, None]).astype(np.float32)
    h = rng.choice(np.float32([0.5, 1.0, 2.0]), size=(N, k)).astype(np.float32)
    return Xb, g, h


def _node_best(Xb, g, h, rows, l2, min_split_gain, min_child_weight, mask):
    """One node's best split (jboost's gain arithmetic on a NumPy histogram of its rows)."""
    k = g.shape[1]
    payload = np.concatenate([g, h], axis=1)[rows]
    hist = np.zeros((F, 1, N_BINS, 2 * k), np.float32)
    for f in range(F):
        np.add.at(hist[f, 0], Xb[f, rows].astype(int), payload)
    cum = np.cumsum(hist, axis=2, dtype=np.float32)
    gains = node_splits.node_gains(jnp.asarray(cum), l2, min_child_weight)[0]
    sp = splits_lib.best_split_of_gains(gains, min_split_gain=min_split_gain,
                                    feature_mask=None if mask is None else jnp.asarray(mask))
    return float(sp.gain), int(sp.feature), int(sp.threshold), bool(sp.missing_right)


def _reference(Xb, g, h, *, depth, max_leaves, l2, min_split_gain, min_child_weight, masks=None):
    """Best-first growth written out: split the open leaf of largest gain (the lowest number of
    equal ones) into itself and a new leaf, max_leaves - 1 times or until no leaf is open."""
    leaf = np.zeros(N, int)
    opened = {}

    def open_leaf(l, d):
        rows = np.flatnonzero(leaf == l)
        best = _node_best(Xb, g, h, rows, l2, min_split_gain, min_child_weight,
                          None if masks is None else masks[min(d, depth - 1)])
        opened[l] = (best if d < depth and best[0] > 0 else (0.0,) + best[1:]) + (d,)

    open_leaf(0, 0)
    nodes = []
    for t in range(max_leaves - 1):
        gains = [opened[l][0] for l in range(t + 1)]
        if max(gains) <= 0:
            break
        best = int(np.argmax(gains))
        gain, f, thr, mr, d = opened[best]
        col = Xb[f]
        right = np.where(col == binning.missing_bin(N_BINS), mr, col > thr)
        leaf = np.where((leaf == best) & right, t + 1, leaf)
        nodes.append((f, thr, mr, gain, d))
        open_leaf(best, d + 1)
        open_leaf(t + 1, d + 1)
    return nodes, leaf


CASES = [  # seed, k, depth, max_leaves, l2, min_split_gain, min_child_weight, masks, chunk rows
    (0, 1, 6, 9, 1.0, 0.0, 1.0, False, None),
    (1, 1, 3, 12, 0.0, 0.5, 3.0, False, None),   # the depth bound stops growth before max_leaves
    (2, 2, 5, 7, 2.0, 0.0, 0.0, True, None),      # two outputs, a feature mask per depth
    (3, 1, 8, 40, 1.0, 2.0, 10.0, False, None),  # growth stops when no leaf gains
    (4, 1, 7, 20, 1.0, 0.0, 1.0, False, 16),     # a leaf's rows in many chunks of 16
]


@pytest.mark.slow
@pytest.mark.parametrize("seed,k,depth,max_leaves,l2,msg,mcw,use_masks,chunk", CASES)
def test_each_split_is_the_best_first_reference(seed, k, depth, max_leaves, l2, msg, mcw, use_masks,
                                                chunk, monkeypatch):
    if chunk is not None:
        monkeypatch.setattr(lossguide, "CHUNK_ROWS", chunk)
    Xb, g, h = _case(seed, k)
    masks = None
    if use_masks:
        masks = np.random.default_rng(seed + 10).random((depth, F)) < 0.6
        masks[:, 0] = True
    nodes, ref_leaf = _reference(Xb, g, h, depth=depth, max_leaves=max_leaves, l2=l2,
                                 min_split_gain=msg, min_child_weight=mcw, masks=masks)
    tree, leaf = lossguide.fit_tree(jnp.asarray(Xb), jnp.asarray(g), jnp.asarray(h), depth=depth,
                                    n_bins=N_BINS, l2=l2, min_split_gain=msg, min_child_weight=mcw,
                                    max_leaves=max_leaves, feature_masks=masks)
    used = len(nodes)
    assert 2 <= used  # the cases grow trees
    if seed in (1, 3):
        assert used < max_leaves - 1  # and stop early, by the depth bound or the gains
    t = jax.tree_util.tree_map(np.asarray, tree)
    np.testing.assert_array_equal(t.features[:used], [n[0] for n in nodes])
    np.testing.assert_array_equal(t.thresholds[:used], [n[1] for n in nodes])
    np.testing.assert_array_equal(t.missing_right[:used], [n[2] for n in nodes])
    np.testing.assert_array_equal(t.gains[:used], np.float32([n[3] for n in nodes]))
    assert (t.gains[used:] == 0).all() and (t.thresholds[used:] == N_BINS - 2).all()
    np.testing.assert_array_equal(t.level_counts, np.bincount([n[4] for n in nodes], minlength=depth))
    np.testing.assert_array_equal(np.asarray(leaf), ref_leaf)
    # The table's walk reaches each row's training leaf; leaf values are the Newton values.
    np.testing.assert_array_equal(np.asarray(tree.leaf_index_binned(jnp.asarray(Xb), N_BINS)), ref_leaf)
    for l in range(used + 1):
        rows = ref_leaf == l
        G, H = g[rows].sum(0, dtype=np.float32), h[rows].sum(0, dtype=np.float32)
        np.testing.assert_allclose(t.leaf_values[l], -G / (H + np.float32(l2)), rtol=1e-6)
    assert (t.leaf_values[used + 1:] == 0).all()


def test_the_full_leaf_budget_grows_the_depthwise_tree():
    """max_leaves = 2**depth: every node that gains splits, whatever the order, so the tree is
    the depth-wise tree of that depth: the same partition of the rows, the same values."""
    Xb, g, h = _case(4)
    kw = dict(depth=4, n_bins=N_BINS, l2=1.0, min_split_gain=0.0, min_child_weight=1.0)
    lg, lg_leaf = lossguide.fit_tree(jnp.asarray(Xb), jnp.asarray(g), jnp.asarray(h), max_leaves=16, **kw)
    dw, dw_leaf = depthwise_lib.fit_tree(jnp.asarray(Xb), jnp.asarray(g), jnp.asarray(h), **kw)
    lg_leaf, dw_leaf = np.asarray(lg_leaf), np.asarray(dw_leaf)
    pairs = set(zip(lg_leaf.tolist(), dw_leaf.tolist()))
    assert len(pairs) == len(set(lg_leaf.tolist())) == len(set(dw_leaf.tolist())) >= 10
    np.testing.assert_array_equal(np.asarray(lg.leaf_values)[lg_leaf], np.asarray(dw.leaf_values)[dw_leaf])
    np.testing.assert_array_equal(np.sort(np.asarray(lg.gains)), np.sort(np.asarray(dw.gains)))


@pytest.mark.slow
def test_vmap_over_traced_settings_equals_separate_fits_and_compiles_once():
    Xb, g, h = _case(5)
    settings = [(0.0, 0.0, 0.0), (1.0, 0.5, 1.0), (10.0, 1.0, 8.0)]

    @jax.jit
    @chex.assert_max_traces(n=1)
    def grow(l2, msg, mcw):
        return lossguide.fit_tree(jnp.asarray(Xb), jnp.asarray(g), jnp.asarray(h), depth=6,
                                  n_bins=N_BINS, l2=l2, min_split_gain=msg, min_child_weight=mcw,
                                  max_leaves=12)

    batched = jax.vmap(grow)(*(jnp.float32([s[i] for s in settings]) for i in range(3)))
    for i, s in enumerate(settings):
        one = grow(*(jnp.float32(v) for v in s))
        for name in depthwise_lib.DepthwiseTrees._fields:
            np.testing.assert_array_equal(np.asarray(getattr(batched[0], name)[i]),
                                          np.asarray(getattr(one[0], name)), err_msg=name)
        np.testing.assert_array_equal(batched[1][i], one[1])
    used = np.asarray(batched[0].level_counts).sum(axis=1)
    assert used[0] == 11 and used[2] < used[0]  # the settings are used: heavier ones split less


@pytest.mark.slow
def test_pure_jax_histograms_grow_the_kernels_tree():
    """The CPU histogram kernel, the pure-JAX path and the branches GPUs and TPUs take (traced on
    the CPU) grow the same tree (leaf values to rounding: their sums' order differs)."""
    from _pure_jax import accelerator_paths, pure_jax
    Xb, g, h = _case(6, k=2)
    rng = np.random.default_rng(6)
    g = g + rng.normal(size=g.shape).astype(np.float32)  # inexact sums: order-dependent floats
    grow = jax.jit(lambda: lossguide.fit_tree(jnp.asarray(Xb), jnp.asarray(g), jnp.asarray(h), depth=7,
                                              n_bins=N_BINS, l2=1.0, min_split_gain=0.0,
                                              min_child_weight=1.0, max_leaves=20))
    a = grow()
    for b in (pure_jax(grow), accelerator_paths(grow)):
        for name in ("features", "thresholds", "missing_right", "children", "level_counts"):
            np.testing.assert_array_equal(np.asarray(getattr(a[0], name)), np.asarray(getattr(b[0], name)), name)
        np.testing.assert_array_equal(np.asarray(a[1]), np.asarray(b[1]))
        np.testing.assert_allclose(np.asarray(a[0].leaf_values), np.asarray(b[0].leaf_values),
                                   rtol=1e-5, atol=1e-6)


# --------------------------------------------------------------------------------------------
# Boosting and the model protocol.
# --------------------------------------------------------------------------------------------

def _table(seed=7, n=600):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 6)).astype(np.float32)
    X[rng.random((n, 6)) < 0.05] = np.nan
    y = (np.where(np.nan_to_num(X[:, 0]) > 0, 2 * np.nan_to_num(X[:, 1]), -np.nan_to_num(X[:, 2]))
         + 0.3 * rng.normal(size=n)).astype(np.float32)
    return X, y


KW = dict(tree_family="lossguide", max_leaves=10, n_rounds=6, n_bins=32, learning_rate=0.3,
          subsample=0.8, colsample=0.8, key=11)


@pytest.mark.slow
def test_boosting_model_protocol_files_shap_continuation_and_determinism(tmp_path):
    X, y = _table()
    m = jboost.fit(X, y, depth=None, **KW)
    assert isinstance(m.trees, depthwise_lib.DepthwiseTrees) and m.trees.features.shape == (6, 1, 9)
    assert m.depth == 9 and int(m.settings["max_leaves"]) == 10
    assert m.settings["tree_family"] == "LossGuidedTrees"
    assert (np.asarray(m.trees.level_counts).sum(-1) == 9).all()  # every tree uses its 10 leaves
    p = np.asarray(jboost.predict(m, X))
    assert np.mean((p - y) ** 2) < 0.5 * np.var(y)
    np.testing.assert_array_equal(p, np.asarray(jax.jit(jboost.predict)(m, jnp.asarray(X))))
    np.testing.assert_array_equal(np.asarray(jboost.staged_predict(m, X))[2, :, 0],
                                  np.asarray(jboost.predict(m, X, n_rounds=3)))
    # Same key, same data: the same model, bit for bit.
    again = jboost.fit(X, y, depth=None, **KW)
    chex.assert_trees_all_equal(m.trees, again.trees)
    # Model files.
    jboost.save(m, tmp_path / "m.jbm")
    loaded = jboost.load(tmp_path / "m.jbm")
    np.testing.assert_array_equal(np.asarray(jboost.predict(loaded, X)), p)
    # TreeSHAP: the contributions add up to the raw prediction.
    sv = jboost.inspect.shap_values(m, X[:40])
    np.testing.assert_allclose(np.asarray(sv.values).sum(-1) + np.asarray(sv.expected_value), p[:40],
                               rtol=1e-5, atol=1e-5)
    # Continued from the file: the model of one fit.
    more = jboost.fit(X, y, depth=None, init_model=loaded, **{**KW, "n_rounds": 3})
    once = jboost.fit(X, y, depth=None, **{**KW, "n_rounds": 9})
    np.testing.assert_array_equal(np.asarray(jboost.predict(more, X)), np.asarray(jboost.predict(once, X)))


def test_loss_guided_trees_beat_depthwise_trees_of_as_many_leaves_on_a_deep_interaction():
    """A signal one branch deep: with 8 leaves best-first growth goes down the branch where the
    loss is, while depth-wise trees of 8 leaves (depth 3) split every branch alike."""
    rng = np.random.default_rng(8)
    n = 2000
    X = rng.normal(size=(n, 5)).astype(np.float32)
    deep = (X[:, 0] > 0) & (X[:, 1] > 0)
    y = (np.where(deep, 3 * np.sin(3 * X[:, 2]) + 2 * (X[:, 3] > 0) + 2 * (X[:, 4] > 0.5), 0.0)
         + 0.1 * rng.normal(size=n)).astype(np.float32)
    kw = dict(n_rounds=30, learning_rate=0.3, n_bins=64)
    lg = jboost.fit(X, y, tree_family="lossguide", max_leaves=8, depth=None, **kw)
    dw = jboost.fit(X, y, tree_family="depthwise", depth=3, **kw)
    print(lg.train_loss[-1], dw.train_loss[-1])
    assert lg.train_loss[-1] < 0.8 * dw.train_loss[-1]


@pytest.mark.slow
def test_settings_errors_name_the_argument_and_the_fix():
    X, y = _table(n=100)
    with pytest.raises(ValueError, match="max_leaves=5 bounds loss-guided trees only"):
        jboost.fit(X, y, n_rounds=1, max_leaves=5)
    with pytest.raises(ValueError, match="max_leaves=5 bounds loss-guided trees only"):
        jboost.fit(X, y, n_rounds=1, max_leaves=5, tree_family="depthwise")
    with pytest.raises(ValueError, match=r"depth=None \(no depth bound\) is for loss-guided trees"):
        jboost.fit(X, y, n_rounds=1, depth=None)
    with pytest.raises(ValueError, match="max_leaves"):
        jboost.fit(X, y, n_rounds=1, tree_family="lossguide", max_leaves=1)
    with pytest.raises(ValueError, match="depth"):
        jboost.fit(X, y, n_rounds=1, tree_family="lossguide", depth=31)
    with pytest.raises(ValueError, match='"lossguide"'):
        jboost.fit(X, y, n_rounds=1, tree_family="leafwise")
    lg = jboost.fit(X, y, n_rounds=1, tree_family="lossguide", max_leaves=4, depth=3)
    assert lg.trees.features.shape[-1] == 3 and lg.depth == 3
    with pytest.raises(ValueError, match="pass max_leaves=4"):
        jboost.fit(X, y, n_rounds=1, tree_family="lossguide", max_leaves=5, depth=3, init_model=lg)
    with pytest.raises(ValueError, match="pass tree_family='lossguide'"):
        jboost.fit(X, y, n_rounds=1, tree_family="depthwise", depth=3, init_model=lg)
    ob = jboost.fit(X, y, n_rounds=1, depth=3)
    with pytest.raises(ValueError, match="pass tree_family='oblivious'"):
        jboost.fit(X, y, n_rounds=1, tree_family="lossguide", max_leaves=8, depth=3, init_model=ob)
    with pytest.raises(ValueError, match="feature_masks must be"):
        lossguide.fit_tree(jnp.zeros((F, 8), jnp.uint8), jnp.ones((8, 1)), jnp.ones((8, 1)), depth=2,
                           n_bins=N_BINS, l2=1.0, min_split_gain=0.0, min_child_weight=1.0,
                           max_leaves=3, feature_masks=jnp.ones((2, 2, F), bool))


def test_equal_gains_split_the_lowest_leaf_first():
    """Two halves told apart by feature 0, the second the first's mirror (gradients negated: the
    same scores): after the root, leaves 0 and 1 have the same best gain, bit for bit, and leaf 0
    (the left child) splits first, then leaf 1."""
    Xb, g, h = _case(9)
    half = N // 2
    Xb = np.concatenate([Xb[:, :half], Xb[:, :half]], axis=1)
    Xb[0] = np.repeat(np.uint8([0, 1]), half)
    g = np.concatenate([g[:half] + 20, -(g[:half] + 20)])
    h = np.concatenate([h[:half], h[:half]])
    tree, leaf = lossguide.fit_tree(jnp.asarray(Xb), jnp.asarray(g), jnp.asarray(h), depth=4,
                                    n_bins=N_BINS, l2=1.0, min_split_gain=0.0, min_child_weight=1.0,
                                    max_leaves=4)
    t = jax.tree_util.tree_map(np.asarray, tree)
    assert t.features[0] == 0 and t.gains[1] == t.gains[2] > 0
    assert (t.features[1], t.thresholds[1]) == (t.features[2], t.thresholds[2])
    np.testing.assert_array_equal(t.children, [[1, 2], [~0, ~2], [~1, ~3]])


@pytest.mark.slow
def test_scikit_learn_estimators_take_the_family_and_its_leaves():
    pytest.importorskip("sklearn")
    from sklearn.base import clone

    from jboost.sklearn import JBoostClassifier, JBoostRegressor
    X, y = _table(n=300)
    kw = dict(n_rounds=4, n_bins=32, depth=None, tree_family="lossguide", max_leaves=7, random_state=3)
    est = clone(JBoostRegressor(**kw)).fit(X, y)
    assert est.get_params()["max_leaves"] == 7 and est.get_params()["tree_family"] == "lossguide"
    model = jboost.fit(X, y, n_rounds=4, n_bins=32, depth=None, tree_family="lossguide", max_leaves=7, key=3)
    np.testing.assert_array_equal(est.predict(X), np.asarray(jboost.predict(model, X), np.float64))
    assert est.booster_.trees.features.shape[-1] == 6
    clf = JBoostClassifier(**kw).fit(X, np.where(y > 0, "up", "down"))
    assert set(clf.predict(X)) <= {"up", "down"} and clf.booster_.trees.features.shape[-1] == 6
    with pytest.raises(ValueError, match="max_leaves=7 bounds loss-guided trees only"):
        JBoostRegressor(n_rounds=2, max_leaves=7).fit(X, y)


@pytest.mark.slow
def test_a_sweep_of_loss_guided_trees_equals_its_separate_fits():
    from jboost import sweep as sweep_lib
    X, y = _table(n=240)
    res = sweep_lib.sweep(X, y, grid={"l2": [0.5, 4.0], "min_split_gain": [0.0, 0.3]}, folds=2,
                          seeds=1, n_rounds=4, depth=None, n_bins=32, tree_family="lossguide",
                          max_leaves=6, keep_trees=True, key=5, metric="mae", devices=None)
    trees = res.trees[(5, 32)]
    assert isinstance(trees, depthwise_lib.DepthwiseTrees) and trees.features.shape[-1] == 5
    for i in range(res.n_rows):
        w_train, w_valid = res.fold_weights(i)
        model = jboost.fit(X, y, **res.fit_kwargs(res.config[i]), sample_weight=w_train,
                           eval_set=(X, y, w_valid), key=res.row_key(i))
        row = jax.tree_util.tree_map(lambda a: a[res.model_of_row[i]], trees)
        for name in ("features", "thresholds", "missing_right", "children"):
            np.testing.assert_array_equal(np.asarray(getattr(model.trees, name)),
                                          np.asarray(getattr(row, name)), err_msg=f"row {i} {name}")
        np.testing.assert_allclose(np.asarray(model.trees.leaf_values), np.asarray(row.leaf_values),
                                   rtol=1e-6, atol=1e-7)
        np.testing.assert_allclose(res.train_curves[i], np.asarray(model.train_loss), rtol=2e-6)
        # The held-out metric: the mean absolute error of the fit's predictions on its fold.
        held = w_valid > 0
        mae = np.mean(np.abs(np.asarray(jboost.predict(model, X[held])) - y[held]))
        np.testing.assert_allclose(res.valid_curves[i, -1], mae, rtol=1e-5)
    refit = res.refit(X, y)
    assert isinstance(refit.trees, depthwise_lib.DepthwiseTrees) and int(refit.settings["max_leaves"]) == 6


@pytest.mark.slow
@pytest.mark.parametrize("name", ["adaboost_m1", "samme", "samme_r", "real_adaboost", "gentle_adaboost",
                                  "logitboost", "gradient_boost", "forward_stagewise"])
def test_every_algorithm_grows_loss_guided_weak_learners(name):
    """Each classical algorithm takes tree_family and max_leaves: its trees are node tables of
    max_leaves - 1 nodes, continuing the model equals one longer fit, and another family's
    continuation is refused."""
    from jboost import algorithms
    X, y = _table(n=200)
    labels = (y > 0).astype(np.int32)
    fn = getattr(algorithms, name)
    target = y if name in ("gradient_boost", "forward_stagewise") else labels
    kw = dict(n_rounds=3, n_bins=16, depth=None, tree_family="lossguide", max_leaves=5)
    m = fn(X, target, **kw)
    assert isinstance(m.trees, depthwise_lib.DepthwiseTrees) and m.trees.features.shape[-1] == 4
    assert np.asarray(m.trees.level_counts).sum() > 0
    more = fn(X, target, **{**kw, "n_rounds": 2}, init_model=fn(X, target, **{**kw, "n_rounds": 1}))
    np.testing.assert_array_equal(np.asarray(jboost.predict(more, X)),
                                  np.asarray(jboost.predict(m, X)))  # 1 + 2 rounds: the 3 of m
    with pytest.raises(ValueError, match="pass tree_family='lossguide', max_leaves=5"):
        fn(X, target, n_rounds=1, n_bins=16, depth=4, init_model=m)
    with pytest.raises(ValueError, match="pass tree_family='lossguide', max_leaves=5"):
        fn(X, target, n_rounds=1, n_bins=16, depth=4, init_model=m, tree_family="depthwise")


@pytest.mark.slow
def test_bagged_boosters_of_loss_guided_trees_continue_as_one_fit():
    from jboost import bagging
    X, y = _table(n=200)
    kw = dict(n_bags=3, n_rounds=2, n_bins=16, depth=None, tree_family="lossguide", max_leaves=6, key=4)
    bags = bagging.fit_bagged_boosters(X, y, **kw)
    assert isinstance(bags.trees, depthwise_lib.DepthwiseTrees) and bags.trees.features.shape[-1] == 5
    assert bags.trees.features.shape[0] == 3
    more = bagging.fit_bagged_boosters(X, y, **{**kw, "n_rounds": 1},
                                       init_model=bagging.fit_bagged_boosters(X, y, **{**kw, "n_rounds": 1}))
    np.testing.assert_array_equal(np.asarray(jboost.predict(more, X)), np.asarray(jboost.predict(bags, X)))
    with pytest.raises(ValueError, match="pass tree_family='lossguide', max_leaves=6"):
        bagging.fit_bagged_boosters(X, y, n_bags=3, n_rounds=1, n_bins=16, depth=5, init_model=bags)


@pytest.mark.slow
def test_stacked_and_ecoc_boosters_grow_loss_guided_trees():
    from jboost import combine
    X, y = _table(n=240)
    cls = np.digitize(y, [-0.5, 0.5]).astype(np.int32)
    kw = dict(n_rounds=3, n_bins=16, depth=None, tree_family="lossguide", max_leaves=5)
    stack = combine.fit_stacked_boosters(X, cls, "multinomial_deviance", folds=2,
                                         hypers=[dict(learning_rate=0.3), dict(l2=3.0)], **kw)
    assert isinstance(stack.trees, depthwise_lib.DepthwiseTrees) and stack.trees.features.shape[-1] == 4
    assert np.asarray(jboost.predict_proba(stack, X)).shape == (240, 3)
    ecoc = combine.fit_ecoc_boosters(X, cls, combine.exhaustive_code(3), **kw)
    assert isinstance(ecoc.trees, depthwise_lib.DepthwiseTrees) and ecoc.trees.features.shape[-1] == 4
    more = combine.fit_ecoc_boosters(X, cls, combine.exhaustive_code(3), init_model=ecoc,
                                     **{**kw, "n_rounds": 1})
    assert more.n_rounds == ecoc.n_rounds + 1 and isinstance(more.trees, depthwise_lib.DepthwiseTrees)
    with pytest.raises(ValueError, match="pass tree_family='lossguide', max_leaves=5"):
        combine.fit_ecoc_boosters(X, cls, combine.exhaustive_code(3), init_model=ecoc, n_rounds=1,
                                  n_bins=16, depth=4)
