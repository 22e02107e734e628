"""Oblivious trees (jboost/trees/oblivious.py) and exact leaf refits (jboost/trees/refit.py).

``fit_tree`` is called outside ``jit`` here (as the core does not jit it on its own). Evaluated
eagerly, every primitive of the split search and of the leaf values would be compiled separately
for every shape, which at depth 12 costs tens of seconds; the ``_jit_tree_pieces`` fixture
therefore swaps in jitted versions of ``splits.best_split`` and ``tree.newton_leaf_values`` for
this module (same functions, same arguments, same results; restored afterwards).
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jboost
from jboost.trees import histograms
from jboost import losses
from jboost.trees import refit
from jboost.trees import family
from jboost.trees import oblivious as oblivious_lib
from jboost.trees import splits as splits_lib


@pytest.fixture(scope="module", autouse=True)
def _jit_tree_pieces():
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(splits_lib, "best_split", jax.jit(splits_lib.best_split,
                                                 static_argnames=("cumulative", "missing", "criterion")))
        mp.setattr(family, "newton_leaf_values", jax.jit(family.newton_leaf_values, static_argnames="value"))
        yield


# One shape for every fitted tree (F features, N rows, N_BINS bins), so compilations are shared.
F, N, N_BINS = 3, 64, 8


def fit(X_binned, g, h, *, depth, n_bins, l2=0.0, min_split_gain=0.0, min_child_weight=0.0, **kw):
    g = jnp.asarray(g, jnp.float32).reshape(len(g), -1)
    h = jnp.asarray(h, jnp.float32).reshape(len(h), -1)
    return oblivious_lib.fit_tree(jnp.asarray(X_binned), g, h, depth=depth, n_bins=n_bins, l2=l2,
                         min_split_gain=min_split_gain, min_child_weight=min_child_weight, **kw)


def numpy_leaf_index(features, borders, missing_right, X):
    """Brute-force leaf of each raw row: bit d is set when row goes right at level d."""
    leaf = np.zeros(X.shape[0], np.int64)
    for d, (f, b, m) in enumerate(zip(features, borders, missing_right)):
        x = X[:, f]
        right = np.where(np.isnan(x), m, x > b)
        leaf += right.astype(np.int64) << d
    return leaf


def newton_reference(G, H, l2, min_child_weight, rows=None):
    """Leaf values by the documented recursion: each node's Newton value -G/(H+l2) unless no row
    reaches it (``rows``: per leaf; ``None``: its hessian sum is 0) or its hessian sum is below
    min_child_weight, then its parent's value. Leaf c's ancestor at level d is the node
    c mod 2**d (the low d bits of c: the first d split decisions)."""
    n_leaves, k = G.shape
    depth = n_leaves.bit_length() - 1
    rows = H.sum(1) > 0 if rows is None else np.asarray(rows)
    newton = lambda g, h: np.where(h + l2 > 0, -g / np.where(h + l2 > 0, h + l2, 1.0), 0.0)
    value = {0: newton(G.sum(0), H.sum(0))}  # root
    for d in range(1, depth + 1):
        nxt = {}
        for node in range(2**d):
            members = [c for c in range(n_leaves) if c % 2**d == node]
            g, h = G[members].sum(0), H[members].sum(0)
            ok = rows[members].sum() > 0 and h.sum() >= min_child_weight
            nxt[node] = newton(g, h) if ok else value[node % 2 ** (d - 1)]
        value = nxt
    return np.stack([value[c] for c in range(n_leaves)])


# --------------------------------------------------------------------------------------------
# Leaf index
# --------------------------------------------------------------------------------------------


def test_leaf_index_hand_computed():
    columns = jnp.asarray([[1, 3, 0], [2, 0, 7]])
    thresholds = jnp.asarray([1, 1])
    missing_right = jnp.asarray([False, True])
    is_missing = jnp.asarray([[False, False, False], [False, False, True]])
    # row 0: (1>1)=0, (2>1)=1 -> 2; row 1: 1, 0 -> 1; row 2: 0, missing->right -> 2.
    np.testing.assert_array_equal(oblivious_lib.leaf_index(columns, thresholds, missing_right, is_missing), [2, 1, 2])


def test_leaf_index_of_later_levels_adds_their_bits():
    """Fitting adds one level's bits at a time (``first_level=d``): the sum over levels is the
    leaf of all the levels at once."""
    rng = np.random.default_rng(3)
    columns = jnp.asarray(rng.integers(0, 6, size=(4, 50)))
    thresholds = jnp.asarray([2, 3, 1, 4])
    missing_right = jnp.asarray([True, False, True, False])
    is_missing = jnp.asarray(rng.random((4, 50)) < 0.2)
    whole = oblivious_lib.leaf_index(columns, thresholds, missing_right, is_missing)
    by_level = sum(oblivious_lib.leaf_index(columns[d:d + 1], thresholds[d:d + 1], missing_right[d:d + 1],
                                   is_missing[d:d + 1], first_level=d) for d in range(4))
    np.testing.assert_array_equal(by_level, whole)
    np.testing.assert_array_equal(oblivious_lib.leaf_index(columns[2:], thresholds[2:], missing_right[2:],
                                                  is_missing[2:], first_level=2),
                                  whole - whole % 4)


def test_known_rule_recovered_exactly_on_prebinned_data():
    # y = 2 [x0 > 2] + [x2 > 4] on bins 0..6 of three features; squared error from raw 0:
    # g = -y, h = 1. With l2 = 0 a depth-2 tree must find x0 > 2 first (larger gain), then
    # x2 > 4, with leaf values the leaf means 0, 2, 1, 3 and gains the drops in the sum of squares.
    rng = np.random.default_rng(0)
    Xb = rng.integers(0, N_BINS - 1, size=(F, N)).astype(np.uint8)
    y = 2.0 * (Xb[0] > 2) + 1.0 * (Xb[2] > 4)
    t, leaf = fit(Xb, -y, np.ones(N), depth=2, n_bins=N_BINS)
    np.testing.assert_array_equal(t.features, [0, 2])
    np.testing.assert_array_equal(t.thresholds, [2, 4])
    np.testing.assert_array_equal(t.missing_right, [False, False])
    np.testing.assert_allclose(np.asarray(t.leaf_values)[:, 0], [0.0, 2.0, 1.0, 3.0], atol=1e-6)
    expected_leaf = (Xb[0] > 2) + 2 * (Xb[2] > 4)
    np.testing.assert_array_equal(leaf, expected_leaf)
    np.testing.assert_array_equal(family.leaf_index_binned(t, jnp.asarray(Xb), N_BINS), expected_leaf)
    sse = lambda groups: sum(((y[groups == g] - y[groups == g].mean()) ** 2).sum() for g in np.unique(groups))
    sse0, sse1 = sse(np.zeros(N)), sse((Xb[0] > 2).astype(int))
    # With l2 = 0, G^2/H = n * mean^2 per node, so the gain is the drop in the sum of squares.
    np.testing.assert_allclose(t.gains, [sse0 - sse1, sse1 - 0.0], rtol=1e-5)


def test_vector_leaves_for_several_outputs():
    # K = 2 outputs share one structure; each output's leaf value is its own Newton step.
    rng = np.random.default_rng(1)
    Xb = rng.integers(0, N_BINS - 1, size=(F, N)).astype(np.uint8)
    y = np.stack([3.0 * (Xb[1] > 2), -1.0 * (Xb[1] > 2) + 0.5 * (Xb[0] > 4)], -1)
    t, leaf = fit(Xb, -y, np.ones_like(y), depth=2, n_bins=N_BINS, l2=0.0)
    assert t.leaf_values.shape == (4, 2)
    assert int(t.features[0]) == 1 and int(t.thresholds[0]) == 2
    for c in range(4):
        np.testing.assert_allclose(np.asarray(t.leaf_values)[c], y[np.asarray(leaf) == c].mean(0), atol=1e-5)


def test_fit_binned_and_raw_leaf_indices_agree():
    rng = np.random.default_rng(2)
    X = rng.normal(size=(N, F)).astype(np.float32)
    X[rng.random(X.shape) < 0.1] = np.nan
    y = np.where(np.isnan(X[:, 1]), 1.0, X[:, 1] > 0.3) + np.nan_to_num(X[:, 0])
    borders = jboost.compute_borders(X, n_bins=N_BINS)
    Xb = jboost.bin_features(X, borders)
    t, leaf = fit(Xb, -y, np.ones(N), depth=4, n_bins=N_BINS, l2=1.0)
    tr = family.with_borders(t, jnp.asarray(borders))
    np.testing.assert_array_equal(tr.borders, borders[np.asarray(t.features), np.asarray(t.thresholds)])
    np.testing.assert_array_equal(family.leaf_index_binned(t, Xb, N_BINS), leaf)
    np.testing.assert_array_equal(oblivious_lib.leaf_index_raw(tr, jnp.asarray(X.T)), leaf)
    np.testing.assert_array_equal(numpy_leaf_index(np.asarray(tr.features), np.asarray(tr.borders),
                                                   np.asarray(tr.missing_right), X), leaf)
    np.testing.assert_array_equal(family.predict_raw(tr, X), np.asarray(tr.leaf_values)[np.asarray(leaf)])
    # New rows, including values exactly on the used borders and +-inf: bins and raw floats agree.
    Xn = rng.normal(size=(N, F)).astype(np.float32)
    Xn[:8, np.asarray(tr.features)] = np.asarray(tr.borders)[None, :]
    Xn[8:12] = np.inf
    Xn[12:16] = -np.inf
    Xn[16:20] = np.nan
    via_bins = family.leaf_index_binned(t, jboost.bin_features(Xn, borders), N_BINS)
    np.testing.assert_array_equal(oblivious_lib.leaf_index_raw(tr, jnp.asarray(Xn.T)), via_bins)


def test_missing_values_follow_the_learned_direction():
    rng = np.random.default_rng(3)
    X = rng.uniform(size=(N, F)).astype(np.float32)
    nan_rows = rng.random(N) < 0.25
    X[nan_rows, 0] = np.nan
    borders = jboost.compute_borders(X, n_bins=N_BINS)
    Xb = jboost.bin_features(X, borders)
    cut = borders[0, 3]  # a rule the bins can express exactly
    for nan_target, expect_right in ((1.0, True), (-1.0, False)):
        y = np.where(nan_rows, nan_target, np.where(X[:, 0] > cut, 1.0, -1.0))
        t, leaf = fit(Xb, -y, np.ones(N), depth=1, n_bins=N_BINS)
        assert int(t.features[0]) == 0
        assert bool(t.missing_right[0]) is expect_right
        tr = family.with_borders(t, jnp.asarray(borders))
        pred = np.asarray(family.predict_raw(tr, X))[:, 0]
        np.testing.assert_allclose(pred[nan_rows], nan_target, atol=1e-6)
        np.testing.assert_array_equal(np.asarray(leaf)[nan_rows], int(expect_right))
    # A feature never missing in training: missing values at prediction time go left (the tie
    # between the two directions is broken towards "left").
    Xc = np.nan_to_num(X, nan=0.1)
    Xcb = jboost.bin_features(Xc, borders)
    t, _ = fit(Xcb, -np.where(Xc[:, 0] > cut, 1.0, -1.0), np.ones(N), depth=1, n_bins=N_BINS)
    assert int(t.features[0]) == 0 and not bool(t.missing_right[0])
    tr = family.with_borders(t, jnp.asarray(borders))
    probe = np.full((1, F), 0.5, np.float32)
    probe[0, 0] = np.nan
    assert float(family.predict_raw(tr, probe)[0, 0]) == float(t.leaf_values[0, 0])


def test_predict_raw_sums_all_trees_over_leading_axes():
    rng = np.random.default_rng(4)
    F, D, K = 4, 3, 2
    shape = (2, 3)
    trees = oblivious_lib.ObliviousTrees(
        features=jnp.asarray(rng.integers(0, F, size=shape + (D,)), jnp.int32),
        thresholds=jnp.zeros(shape + (D,), jnp.int32),
        borders=jnp.asarray(rng.normal(size=shape + (D,)), jnp.float32),
        missing_right=jnp.asarray(rng.random(shape + (D,)) < 0.5),
        leaf_values=jnp.asarray(rng.normal(size=shape + (2**D, K)), jnp.float32),
        gains=jnp.zeros(shape + (D,), jnp.float32),
    )
    X = rng.normal(size=(50, F)).astype(np.float32)
    X[rng.random(X.shape) < 0.2] = np.nan
    expected = np.zeros((50, K))
    for i in range(2):
        for j in range(3):
            leaf = numpy_leaf_index(np.asarray(trees.features[i, j]), np.asarray(trees.borders[i, j]),
                                    np.asarray(trees.missing_right[i, j]), X)
            expected += np.asarray(trees.leaf_values[i, j])[leaf]
    np.testing.assert_allclose(np.asarray(family.predict_raw(trees, X)), expected, rtol=1e-5, atol=1e-5)
    assert family.flatten_trees(trees).features.shape == (6, D)


# --------------------------------------------------------------------------------------------
# Leaf values
# --------------------------------------------------------------------------------------------


def test_newton_leaf_values_hand_computed():
    # Depth 2, l2 = 1. Leaf c's parent is node c mod 2 of level 1.
    # min_child_weight = 2: leaf 0 (H=1) falls back to its parent node 0 = leaves {0, 2}:
    # -(-8) / (5 + 1); leaves 1, 2, 3 keep -G/(H+1): 4/4, 6/5, -3/3.
    G = jnp.asarray([[-2.0], [-4.0], [-6.0], [3.0]])
    H = jnp.asarray([[1.0], [3.0], [4.0], [2.0]])
    np.testing.assert_allclose(family.newton_leaf_values(G, H, 1.0, 2.0)[:, 0], [8 / 6, 1.0, 1.2, -1.0], rtol=1e-6)
    # Level-1 node 1 (leaves 1 and 3) is empty: both its leaves get the root's value -(-8)/(5+1).
    G = jnp.asarray([[-2.0], [0.0], [-6.0], [0.0]])
    H = jnp.asarray([[1.0], [0.0], [4.0], [0.0]])
    np.testing.assert_allclose(family.newton_leaf_values(G, H, 1.0, 0.0)[:, 0], [1.0, 8 / 6, 1.2, 8 / 6], rtol=1e-6)
    # Nothing anywhere and l2 = 0: zeros, not NaN.
    np.testing.assert_array_equal(family.newton_leaf_values(jnp.zeros((4, 1)), jnp.zeros((4, 1)), 0.0, 0.0), 0.0)
    # Emptiness is decided by the rows, not by H: leaf 1's rows have vanishing hessians (H = 0,
    # as a difference of cumulative sums gives for log-cosh at residuals ~44), so it keeps its own
    # value -G / (0 + l2) = 4; leaf 3 holds a rounding residue in H but no row: its parent's
    # value, node 1 = leaves {1, 3}: 4 / (1e-6 + 1).
    G = jnp.asarray([[-2.0], [-4.0], [-6.0], [1e-7]])
    H = jnp.asarray([[1.0], [0.0], [4.0], [1e-6]])
    rows = jnp.asarray([3, 4, 5, 0])
    want = [1.0, 4.0, 1.2, (4 - 1e-7) / (1 + 1e-6)]
    np.testing.assert_allclose(family.newton_leaf_values(G, H, 1.0, 0.0, rows=rows)[:, 0], want, rtol=1e-6)
    np.testing.assert_allclose(np.asarray(family.newton_leaf_values(G, H, 1.0, 0.0, rows=rows)),
                               newton_reference(np.asarray(G), np.asarray(H), 1.0, 0.0, np.asarray(rows)), rtol=1e-6)
    # min_child_weight still applies to reached nodes: leaf 1 (H = 0 < 0.5) and its parent node 1
    # (H = 1e-6) fall back to the root: 12 / (5 + 1e-6 + 1).
    assert float(family.newton_leaf_values(G, H, 1.0, 0.5, rows=rows)[1, 0]) == pytest.approx(2.0, rel=1e-6)


@pytest.mark.parametrize("mcw", [0.0, 1.0, 3.0])
def test_newton_leaf_values_match_recursive_reference(mcw):
    rng = np.random.default_rng(int(mcw * 10))
    G = rng.normal(size=(16, 2)) * 3
    H = rng.uniform(0.0, 2.0, size=(16, 2))
    empty = rng.random(16) < 0.3
    G[empty], H[empty] = 0.0, 0.0
    got = family.newton_leaf_values(jnp.asarray(G, jnp.float32), jnp.asarray(H, jnp.float32), 0.5, mcw)
    np.testing.assert_allclose(np.asarray(got), newton_reference(G, H, 0.5, mcw), rtol=1e-5, atol=1e-6)


def numpy_leaf_index_binned(t, Xb, n_bins):
    """Brute-force leaf of each binned row (NumPy): bit d set when row goes right at level d."""
    leaf = np.zeros(Xb.shape[1], np.int64)
    for d, (f, thr, m) in enumerate(zip(t.features, t.thresholds, t.missing_right)):
        col = Xb[f].astype(np.int64)
        leaf += np.where(col == n_bins - 1, m, col > thr).astype(np.int64) << d
    return leaf


@pytest.mark.slow
def test_every_depth_from_1_to_12():
    # Small data, so most leaves of deep trees are empty and take their ancestors' values.
    # (Results are moved to NumPy at once: eager jnp ops on new shapes would each compile.)
    rng = np.random.default_rng(5)
    n, n_bins = N, N_BINS
    Xb = rng.integers(0, n_bins, size=(F, n)).astype(np.uint8)
    Xb[2, :5] = n_bins - 1  # a few missing values
    g = rng.normal(size=n) + 2.0 * (Xb[0] > 3)
    h = rng.uniform(0.5, 1.5, size=n)
    deepest = None
    for depth in range(12, 0, -1):
        t, leaf = fit(Xb, g, h, depth=depth, n_bins=n_bins, l2=1.0)
        t, leaf = jax.tree_util.tree_map(np.asarray, t), np.asarray(leaf)
        assert t.features.shape == (depth,) and t.leaf_values.shape == (2**depth, 1)
        assert leaf.min() >= 0 and leaf.max() < 2**depth
        np.testing.assert_array_equal(numpy_leaf_index_binned(t, Xb, n_bins), leaf)
        values = t.leaf_values[:, 0]
        assert np.all(np.isfinite(values))
        # A leaf holding training rows gets its own Newton value -G/(H + l2).
        G = np.bincount(leaf, weights=g, minlength=2**depth)
        H = np.bincount(leaf, weights=h, minlength=2**depth)
        used = H > 0
        np.testing.assert_allclose(values[used], -G[used] / (H[used] + 1.0), rtol=1e-5, atol=1e-6)
        # A shallower tree is the first levels of a deeper one (a level's split never depends on
        # the levels below it).
        if deepest is None:
            deepest = t
            assert np.sum(~used) > 2**11, "depth 12 on 64 rows: most leaves are empty"
        else:
            for field in ("features", "thresholds", "missing_right"):
                np.testing.assert_array_equal(getattr(t, field), getattr(deepest, field)[:depth])
            np.testing.assert_allclose(t.gains, deepest.gains[:depth], rtol=1e-6)


def test_zero_weight_rows_are_absent():
    # grad and hess arrive multiplied by the weights: a zero-weight row must change nothing,
    # whatever its bins and gradients.
    rng = np.random.default_rng(6)
    Xb = rng.integers(0, N_BINS, size=(F, N)).astype(np.uint8)
    g, h = rng.normal(size=N) + (Xb[1] > 4), np.ones(N)
    keep = rng.random(N) < 0.7
    t_a, leaf_a = fit(Xb, g * keep, h * keep, depth=3, n_bins=N_BINS, l2=1.0, min_child_weight=1.0)
    Xb2 = np.where(keep, Xb, rng.integers(0, N_BINS, size=(F, N))).astype(np.uint8)
    g2 = np.where(keep, g, 1e3)  # garbage gradients...
    t_b, _ = fit(Xb2, g2 * keep, h * keep, depth=3, n_bins=N_BINS, l2=1.0, min_child_weight=1.0)  # ...weight 0
    for field in t_a._fields:
        np.testing.assert_array_equal(getattr(t_a, field), getattr(t_b, field), err_msg=field)
    # And the leaf values are the Newton values of the kept rows only.
    leaf_a = np.asarray(leaf_a)
    G = np.bincount(leaf_a[keep], weights=g[keep], minlength=8)
    H = np.bincount(leaf_a[keep], weights=h[keep], minlength=8)
    ok = H >= 1.0
    np.testing.assert_allclose(np.asarray(t_a.leaf_values)[ok, 0], -G[ok] / (H[ok] + 1.0), rtol=1e-5, atol=1e-6)


def _reference_leaf_values(t, leaf, Xb, g, h, l2, min_child_weight):
    """newton_reference of a fitted tree from its rows' direct float64 sums; a row reaches its
    leaf when its (weighted) gradient or hessian is non-zero."""
    n_leaves = t.leaf_values.shape[0]
    G, H = (np.bincount(leaf, weights=v, minlength=n_leaves)[:, None] for v in (g, h))
    rows = np.bincount(leaf, weights=((g != 0) | (h != 0)).astype(float), minlength=n_leaves)
    return newton_reference(G, H, l2, min_child_weight, rows), rows


def test_vanishing_hessians_do_not_empty_a_leaf():
    # Issue 14: 40 rows of gradient -1 and hessians that vanish (2e-38 or 0: log-cosh at residuals
    # ~44) in bin 6 of feature 0. At depth 2 the leaf sums are read off the histograms: the far
    # leaf is built as parent - sibling, its hessian sum exactly 0; the direct sum (depth 1) is
    # 4e-37. Either way the leaf holds rows and gets its own value -G / (H + l2) = 40 / 0.1, not
    # its parent's (the root's, 1.45, as when emptiness was H <= 0).
    rng = np.random.default_rng(0)
    Xb = rng.integers(0, N_BINS - 1, size=(F, N)).astype(np.uint8)
    far = np.arange(N) < 40
    Xb[0] = np.where(far, 6, rng.integers(0, 6, N))
    g = np.where(far, -1.0, rng.normal(size=N)).astype(np.float32)
    h = np.where(far, np.where(np.arange(N) % 2, 0.0, 2e-38), rng.uniform(0.5, 1.5, N)).astype(np.float32)
    for depth in (1, 2):
        t, leaf = fit(Xb, g, h, depth=depth, n_bins=N_BINS, l2=0.1)
        t, leaf = jax.tree_util.tree_map(np.asarray, t), np.asarray(leaf)
        assert t.features[0] == 0 and t.thresholds[0] == 5
        want, _ = _reference_leaf_values(t, leaf, Xb, g.astype(np.float64), h.astype(np.float64), 0.1, 0.0)
        np.testing.assert_allclose(t.leaf_values, want, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(t.leaf_values[leaf[far]], 400.0, rtol=1e-5)


def test_a_leaf_no_row_reaches_takes_its_parents_value():
    # Histogram subtraction leaves rounding residue in an empty leaf's sums (here G ~ 1e-7,
    # H ~ 1e-7): with min_child_weight = 0 an H > 0 test took it for a leaf with rows and gave
    # it -G / (H + l2) ~ 0 instead of its parent's value. Every leaf equals the documented
    # recursion from the rows' direct sums.
    rng = np.random.default_rng(150)
    Xb = rng.integers(0, N_BINS, size=(F, N)).astype(np.uint8)
    Xb[1] = np.clip(Xb[0] + rng.integers(-1, 2, N), 0, N_BINS - 2)
    Xb[2] = np.clip((Xb[0] * 3 + rng.integers(0, 3, N)) % 7, 0, N_BINS - 2)
    g = rng.normal(size=N) * 3 + 2.0 * (Xb[0] > 3) - 3 * (Xb[2] > 4)
    h = rng.uniform(0.5, 1.5, size=N)
    t, leaf = fit(Xb, g, h, depth=2, n_bins=N_BINS, l2=1.0, min_child_weight=0.0)
    t, leaf = jax.tree_util.tree_map(np.asarray, t), np.asarray(leaf)
    want, rows = _reference_leaf_values(t, leaf, Xb, g, h, 1.0, 0.0)
    assert np.any(rows == 0)
    np.testing.assert_allclose(t.leaf_values, want, rtol=1e-5, atol=1e-6)


def test_feature_masks_per_level():
    rng = np.random.default_rng(7)
    Xb = rng.integers(0, N_BINS - 1, size=(F, N)).astype(np.uint8)
    g = -(3.0 * (Xb[0] > 3) + 2.0 * (Xb[1] > 2) + 1.0 * (Xb[2] > 5))
    masks = np.array([[False, False, True], [False, True, False], [True, False, True]])
    t, _ = fit(Xb, g, np.ones(N), depth=3, n_bins=N_BINS, feature_masks=jnp.asarray(masks))
    np.testing.assert_array_equal(t.features, [2, 1, 0])
    # Without masks the strongest feature comes first.
    t, _ = fit(Xb, g, np.ones(N), depth=3, n_bins=N_BINS)
    np.testing.assert_array_equal(t.features, [0, 1, 2])


def test_feature_subsets_equal_the_equivalent_masks():
    """A level restricted to ``feature_subsets[d]`` (histograms of the gathered rows only) grows
    the tree of the equivalent ``feature_masks``; subsets of every feature are the unrestricted
    tree."""
    rng = np.random.default_rng(8)
    n_features = 7
    X = rng.normal(size=(N, n_features)).astype(np.float32)
    X[rng.random(X.shape) < 0.1] = np.nan
    y = np.nan_to_num(X[:, 0]) + 2.0 * (np.nan_to_num(X[:, 3]) > 0.5) + 0.3 * rng.normal(size=N)
    Xb = jboost.bin_features(X, jboost.compute_borders(X, n_bins=N_BINS))
    subsets = jnp.asarray([[1, 3, 5], [0, 2, 6], [0, 1, 4], [2, 3, 5]], jnp.int32)
    masks = jnp.any(subsets[:, :, None] == jnp.arange(n_features), axis=1)
    t_sub, leaf_sub = fit(Xb, -y, np.ones(N), depth=4, n_bins=N_BINS, feature_subsets=subsets)
    t_mask, leaf_mask = fit(Xb, -y, np.ones(N), depth=4, n_bins=N_BINS, feature_masks=masks)
    for a, b in zip(t_sub, t_mask):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(t_sub.features, t_mask.features)
    np.testing.assert_array_equal(leaf_sub, leaf_mask)
    assert all(int(f) in np.asarray(subsets[d]) for d, f in enumerate(t_sub.features))
    every = jnp.broadcast_to(jnp.arange(n_features, dtype=jnp.int32), (4, n_features))
    t_all, _ = fit(Xb, -y, np.ones(N), depth=4, n_bins=N_BINS, feature_subsets=every)
    t_free, _ = fit(Xb, -y, np.ones(N), depth=4, n_bins=N_BINS)
    for a, b in zip(t_all, t_free):
        np.testing.assert_array_equal(a, b)


# --------------------------------------------------------------------------------------------
# Exact refits (ESL Algorithm 10.3, step 2(c))
# --------------------------------------------------------------------------------------------


def weighted_quantile_ref(v, w, q):
    keep = w > 0
    v, w = v[keep], w[keep]
    order = np.argsort(v)
    cw = np.cumsum(w[order])
    return v[order][np.nonzero(cw >= q * cw[-1])[0][0]]


def _refit_data(seed, n=90, n_leaves=8):
    rng = np.random.default_rng(seed)
    y = rng.standard_t(3, size=n).astype(np.float32)
    raw = rng.normal(scale=0.3, size=(n, 1)).astype(np.float32)
    w = rng.exponential(size=n).astype(np.float32)
    w[rng.random(n) < 0.15] = 0.0
    leaf = rng.integers(0, n_leaves, size=n).astype(np.int32)
    leaf[leaf == 5] = 4                  # leaf 5: no rows
    w[leaf == 6] = 0.0                   # leaf 6: rows, but all with zero weight
    return y, raw, w, leaf


# refit_leaf_values jitted once per loss (the loss is a pytree argument: alpha/delta traced).
refit_jit = jax.jit(refit.refit_leaf_values, static_argnums=5)


@pytest.mark.parametrize("q", [0.1, 0.5, 0.9])
def test_quantile_refit_matches_numpy(q):
    y, raw, w, leaf = _refit_data(8)
    newton = jnp.full((8, 1), 0.25)
    got = np.asarray(refit_jit(losses.quantile(alpha=q), jnp.asarray(y), jnp.asarray(raw), jnp.asarray(w),
                               jnp.asarray(leaf), 8, newton))
    r = y - raw[:, 0]
    for j in range(8):
        sel = leaf == j
        if np.sum(w[sel]) > 0:
            assert got[j, 0] == weighted_quantile_ref(r[sel], w[sel], q), j
        else:
            assert got[j, 0] == 0.0, "a leaf without weighted rows gets 0, not the Newton value"
    assert 5 not in leaf and np.all(w[leaf == 6] == 0)


def test_segment_quantile_default_for_empty_segments():
    v = jnp.asarray([3.0, 1.0, 2.0, 9.0])
    w = jnp.asarray([1.0, 1.0, 1.0, 0.0])
    seg = jnp.asarray([0, 0, 0, 2])
    fn = jax.jit(refit.segment_weighted_quantile, static_argnums=3)
    got = fn(v, w, seg, 3, 0.5, jnp.asarray([-1.0, -2.0, -3.0]))
    np.testing.assert_array_equal(got, [2.0, -2.0, -3.0])  # median 2; segments 1, 2: defaults


def test_huber_refit_matches_numpy():
    y, raw, w, leaf = _refit_data(9)
    delta = 0.7
    got = np.asarray(refit_jit(losses.huber(delta=delta), jnp.asarray(y), jnp.asarray(raw), jnp.asarray(w),
                               jnp.asarray(leaf), 8, jnp.full((8, 1), 0.25)))
    r = (y - raw[:, 0]).astype(np.float64)
    for j in range(8):
        sel = (leaf == j) & (w > 0)
        if not sel.any():
            assert got[j, 0] == 0.0
            continue
        med = weighted_quantile_ref(r[sel], w[sel], 0.5)
        dev = r[sel] - med
        expected = med + np.sum(w[sel] * np.sign(dev) * np.minimum(delta, np.abs(dev))) / np.sum(w[sel])
        np.testing.assert_allclose(got[j, 0], expected, rtol=1e-5, atol=1e-6)


def test_refit_dispatch():
    y, raw, w, leaf = _refit_data(10)
    args = (jnp.asarray(y), jnp.asarray(raw), jnp.asarray(w), jnp.asarray(leaf), 8)
    newton = jnp.full((8, 1), 0.25)
    # No refit: the Newton values unchanged.
    np.testing.assert_array_equal(refit.refit_leaf_values(losses.binomial_deviance(), *args, newton), newton)
    # Absolute error: the weighted median per leaf (q = 0.5 without an alpha parameter).
    got = np.asarray(refit_jit(losses.absolute_error(), *args, newton))
    r = y - raw[:, 0]
    for j in (0, 1, 2):
        assert got[j, 0] == weighted_quantile_ref(r[leaf == j], w[leaf == j], 0.5)
    assert got[5, 0] == 0.0 and got[6, 0] == 0.0


def test_line_search_refit_minimises_the_loss_per_leaf():
    rng = np.random.default_rng(11)
    n = 120
    y = (rng.random(n) < 0.6).astype(np.float32)
    raw = rng.normal(size=(n, 1)).astype(np.float32)
    w = rng.uniform(0.5, 2.0, size=n).astype(np.float32)
    leaf = rng.integers(0, 4, size=n).astype(np.int32)
    loss = losses.binomial_deviance().replace(leaf_refit="line_search")
    init = jnp.zeros((4, 1), jnp.float32)
    got = np.asarray(refit_jit(loss, jnp.asarray(y), jnp.asarray(raw), jnp.asarray(w), jnp.asarray(leaf), 4, init))
    for j in range(4):
        s = leaf == j
        grad = lambda c: np.sum(w[s] * (1 / (1 + np.exp(-(raw[s, 0] + c))) - y[s]))
        assert abs(grad(float(got[j, 0]))) < 1e-4 * np.sum(w[s])


def test_line_search_refit_stays_finite_and_never_raises_a_leaf_loss():
    # Leaf 0 holds only positives at raw -40 under logistic loss: its minimiser is at +infinity.
    # Damped, trust-region Newton moves it by at most n_steps * max_step and never increases any
    # leaf's loss; leaf 1 (one positive, one negative at raw 0) has its exact minimiser 0.
    from jboost.trees import refit

    loss = jboost.losses.binomial_deviance()
    y = jnp.array([1.0, 1.0, 0.0, 1.0])
    raw = jnp.array([[-40.0], [-40.0], [0.0], [0.0]])
    w = jnp.ones(4)
    leaf = jnp.array([0, 0, 1, 1])
    init = jnp.array([[1.0], [0.5]])
    out = np.asarray(refit.line_search_leaf_values(loss, y, raw, w, leaf, 2, init))
    assert np.all(np.isfinite(out))
    assert out[0, 0] <= 1.0 + 8 * 4.0 + 1e-5 and out[0, 0] > 1.0
    assert abs(out[1, 0]) < 1e-4

    def leaf_loss(gamma):
        per_row = np.asarray(jboost.losses.per_sample_losses(loss, y, raw + jnp.asarray(gamma)[leaf]))
        return np.array([per_row[:2].sum(), per_row[2:].sum()])

    assert np.all(leaf_loss(out) <= leaf_loss(np.asarray(init)) + 1e-6)


@pytest.mark.parametrize("k", [1, 3])
@pytest.mark.parametrize("depth", [0, 1, 6])
def test_predict_raw_equals_numpy_reference(k, depth, random_trees, predict_reference):
    # 1000 rows: several 128-row blocks and a ragged last block; NaNs follow missing_right.
    rng = np.random.default_rng(depth * 10 + k)
    X = rng.normal(size=(1000, 7)).astype(np.float32)
    X[rng.uniform(size=X.shape) < 0.1] = np.nan
    trees = random_trees(np.random.default_rng(depth + k), 37, depth, 7, k)
    got = family.predict_raw(trees, jnp.asarray(X))
    ref = predict_reference(trees, X)  # leaf = sum_d right_d << d
    np.testing.assert_allclose(np.asarray(got), ref, rtol=1e-5, atol=1e-5)


# --- How to extend: a tree family is one class (jboost.trees.family.TreeFamily) --------------------------


class DepthwiseTrees(NamedTuple):
    """A depth-wise (free) tree family in one class: level ``d`` has ``2**d`` nodes, each with its
    own rule, chosen by the criterion from the same (node, feature, bin) histograms. Rules are
    stored per node, level by level (node ``j`` of level ``d`` at ``2**d - 1 + j``); a row's node
    in level ``d`` is the bits of its first ``d`` comparisons, as in oblivious trees, so the leaf
    layout and the parent fallback of :func:`jboost.trees.family.newton_leaf_values` are shared."""

    features: jax.Array       # int32 (..., 2**D - 1)
    thresholds: jax.Array     # int32 (..., 2**D - 1)
    borders: jax.Array        # float32 (..., 2**D - 1)
    missing_right: jax.Array  # bool (..., 2**D - 1)
    leaf_values: jax.Array    # float32 (..., 2**D, K)
    gains: jax.Array          # float32 (..., 2**D - 1)

    @staticmethod
    def grow(X_binned, grad, hess, *, depth, n_bins, l2, min_split_gain, min_child_weight,
             feature_masks=None, feature_subsets=None, axis_name=None, missing=True,
             criterion=splits_lib.NEWTON):
        assert feature_subsets is None
        k, n = grad.shape[-1], X_binned.shape[1]
        payload = jnp.concatenate([grad, hess], axis=-1).astype(jnp.float32)
        leaf = jnp.zeros((n,), jnp.int32)
        rules = []
        for d in range(depth):
            hist = histograms.build_histogram(X_binned, payload, leaf, n_leaves=2**d, n_bins=n_bins,
                                              axis_name=axis_name)
            mask = None if feature_masks is None else feature_masks[d]
            node = jax.vmap(lambda h: splits_lib.best_split(
                h[:, None], l2=l2, min_split_gain=min_split_gain, min_child_weight=min_child_weight,
                feature_mask=mask, missing=missing, criterion=criterion), in_axes=1)(hist)
            col = jnp.take_along_axis(X_binned, node.feature[leaf][None], axis=0)[0].astype(jnp.int32)
            right = jnp.where(col == n_bins - 1, node.missing_right[leaf], col > node.threshold[leaf])
            leaf = leaf + (right.astype(jnp.int32) << d)
            rules.append(node)
        # The leaves' sums and row counts (a node is empty when no row of non-zero payload
        # reaches it), summed over devices when rows are sharded.
        takes_part = jnp.any(payload != 0, axis=-1, keepdims=True).astype(jnp.float32)
        sums = jax.ops.segment_sum(jnp.concatenate([payload, takes_part], axis=-1), leaf,
                                   num_segments=2**depth)
        if axis_name is not None:
            sums = jax.lax.psum(sums, axis_name)
        values = family.newton_leaf_values(sums[:, :k], sums[:, k:2 * k], l2, min_child_weight,
                                         value=criterion.value, rows=sums[:, -1])
        cat = lambda name: jnp.concatenate([getattr(r, name)[None] if getattr(r, name).ndim == 0
                                            else getattr(r, name) for r in rules])
        return DepthwiseTrees(cat("feature"), cat("threshold"),
                              jnp.zeros((2**depth - 1,), jnp.float32), cat("missing_right"),
                              values, cat("gain")), leaf

    def leaf_index_raw(self, X_t):
        depth = self.leaf_values.shape[-2].bit_length() - 1
        node = jnp.zeros((X_t.shape[1],), jnp.int32)
        for d in range(depth):
            rule = 2**d - 1 + node
            col = jnp.take_along_axis(X_t, self.features[rule][None], axis=0)[0]
            right = jnp.where(jnp.isnan(col), self.missing_right[rule], col > self.borders[rule])
            node = node + (right.astype(jnp.int32) << d)
        return node

    def leaf_index_binned(self, X_binned, n_bins):
        depth = self.leaf_values.shape[-2].bit_length() - 1
        node = jnp.zeros((X_binned.shape[1],), jnp.int32)
        for d in range(depth):
            rule = 2**d - 1 + node
            col = jnp.take_along_axis(X_binned, self.features[rule][None], axis=0)[0].astype(jnp.int32)
            right = jnp.where(col == n_bins - 1, self.missing_right[rule], col > self.thresholds[rule])
            node = node + (right.astype(jnp.int32) << d)
        return node

    def with_borders(self, borders):
        return self._replace(borders=borders[self.features, self.thresholds])


def test_a_new_tree_family_is_one_class():
    """The README's "How to extend": the depth-wise family above (one class) boosts through
    ``jboost.fit(tree_family=...)`` on the shared histograms and criterion, and the whole model
    protocol (predict, staged predictions, feature importance) works on it. On a target whose
    second split depends on the first (x1 left of x0 = 0, x2 right of it) depth-2 depth-wise
    trees find it (per-node rules (0, 1, 2)); oblivious trees of depth 2 cannot."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(2000, 4))
    X[rng.random(X.shape) < 0.02] = np.nan
    y = np.where(X[:, 0] > 0, 2.0 * (X[:, 2] > 0.5), -2.0 * (X[:, 1] > -0.5))
    y = np.nan_to_num(y) + 0.1 * rng.normal(size=2000)
    kw = dict(n_rounds=20, depth=2, learning_rate=0.5, n_bins=64)
    free = jboost.fit(X, y, tree_family=DepthwiseTrees, **kw)
    oblivious = jboost.fit(X, y, **kw)
    assert isinstance(free.trees, DepthwiseTrees) and free.trees.features.shape == (20, 1, 3)
    np.testing.assert_array_equal(free.trees.features[0, 0], [0, 1, 2])
    assert float(free.train_loss[0]) < 0.8 * float(oblivious.train_loss[0])  # the first tree
    # The model protocol: predictions recompute the training loss; staged == truncated predict.
    raw = np.asarray(jboost.predict(free, X))
    np.testing.assert_allclose(np.mean(0.5 * (raw - y) ** 2), free.train_loss[-1], rtol=1e-5)
    staged = np.asarray(jboost.staged_predict(free, X[:50]))
    np.testing.assert_array_equal(staged[4, :, 0], np.asarray(jboost.predict(free, X[:50], n_rounds=5)))
    importance = np.asarray(jboost.feature_importance(free))
    assert importance.shape == (4,) and importance[3] < 0.05 * importance[:3].min()
    # Each rule as written: a row's leaf from NumPy comparisons of the first tree's rules.
    t = jax.tree_util.tree_map(lambda a: np.asarray(a[0, 0]), free.trees)
    node = np.zeros(len(X), np.int64)
    for d in range(2):
        r = 2**d - 1 + node
        col = X[np.arange(len(X)), t.features[r]]
        node += np.where(np.isnan(col), t.missing_right[r], col > t.borders[r]).astype(np.int64) << d
    first = jax.tree_util.tree_map(lambda a: a[0, 0], free.trees)
    np.testing.assert_array_equal(first.leaf_index_raw(jnp.asarray(X.T, jnp.float32)), node)


def test_tree_family_must_implement_the_protocol():
    with pytest.raises(TypeError, match="or a class implementing jboost.trees.family.TreeFamily; .* lacks grow"):
        jboost.fit(np.zeros((4, 1)), np.zeros(4), tree_family=tuple)


def test_take_borders_on_the_host_is_jax_indexing():
    """tree.take_borders indexes concrete arrays on the host (one flat take); it must give JAX's
    own ``borders[features, thresholds]``: negative indices from the end, the rest clamped."""
    rng = np.random.default_rng(3)
    borders = jnp.asarray(rng.standard_normal((7, 15)).astype(np.float32))
    for shape in ((4, 6), (3, 2, 31), (0,)):
        features = rng.integers(-9, 11, shape).astype(np.int32)      # out of range both ways
        thresholds = rng.integers(-17, 19, shape).astype(np.int32)
        want = jax.jit(lambda b, f, t: b[f, t])(borders, features, thresholds)
        got = family.take_borders(borders, jnp.asarray(features), jnp.asarray(thresholds))
        assert got.shape == want.shape and got.dtype == want.dtype
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
    features = rng.integers(0, 7, (5, 9)).astype(np.int32)  # in range: the usual case
    thresholds = rng.integers(0, 15, (5, 9)).astype(np.int32)
    np.testing.assert_array_equal(np.asarray(family.take_borders(borders, features, thresholds)),
                                  np.asarray(borders)[features, thresholds])
