"""Oblivious split search (jboost/trees/splits.py) against brute-force enumeration in NumPy.

The reference enumerates every (feature f, threshold t, missing direction d) and applies the
module's gain formula literally: for each leaf, left = bins <= t (+ the missing bin when d is
"left"), right = the rest, ``S(G, H) = sum_k G_k^2 / (H_k + l2)`` (0 where ``H_k + l2 <= 0``);
a leaf counts only if both children have hessian sum >= min_child_weight; the level's gain is the
sum over leaves, and the split is taken only when ``max gain - min_split_gain > 0``.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jboost
from jboost import _native
from jboost.trees import histograms
from _pure_jax import pure_jax
from jboost._native import newton
from jboost.trees import oblivious
from jboost.trees import splits as splits_lib

# Jitted once per shape: eager evaluation would compile every primitive separately.
split_gains = jax.jit(splits_lib.split_gains)
best_split = jax.jit(splits_lib.best_split, static_argnames=("cumulative", "missing"))
prefix_sum = jax.jit(histograms.prefix_sum, static_argnums=1)


def _score(G, H, l2):
    denom = H + l2
    return np.where(denom > 0, G * G / np.where(denom > 0, denom, 1.0), 0.0).sum(-1)


def reference_gains(hist, l2, min_child_weight, score=_score):
    """``(F, B-1, 2)`` gains by explicit enumeration (float64), with the node score ``score``."""
    hist = np.asarray(hist, np.float64)
    n_features, n_leaves, n_bins, c = hist.shape
    k = c // 2
    out = np.zeros((n_features, n_bins - 1, 2))
    for f in range(n_features):
        for t in range(n_bins - 1):
            for d in range(2):  # 0: missing goes left, 1: missing goes right
                total_gain = 0.0
                for leaf in range(n_leaves):
                    h = hist[f, leaf]
                    left = h[: t + 1].sum(0) + (h[n_bins - 1] if d == 0 else 0.0)
                    right = h[t + 1 : n_bins - 1].sum(0) + (h[n_bins - 1] if d == 1 else 0.0)
                    parent = h.sum(0)
                    if left[k:].sum() >= min_child_weight and right[k:].sum() >= min_child_weight:
                        total_gain += (score(left[:k], left[k:], l2) + score(right[:k], right[k:], l2)
                                       - score(parent[:k], parent[k:], l2))
                out[f, t, d] = total_gain
    return out


def reference_best(hist, l2, min_split_gain, min_child_weight, feature_mask=None):
    gains = reference_gains(hist, l2, min_child_weight)
    if feature_mask is not None:
        gains = np.where(np.asarray(feature_mask)[:, None, None], gains, -np.inf)
    return gains, gains.max() - min_split_gain


def random_hist(seed, n_features=3, n_leaves=2, n_bins=6, k=1, n=40):
    """Histograms of real rows (so every feature sees the same per-leaf totals), with rows in the
    missing bin and, at this size, some empty (leaf, bin) cells."""
    rng = np.random.default_rng(seed)
    X_binned = rng.integers(0, n_bins, size=(n_features, n))
    leaf = rng.integers(0, n_leaves, size=n)
    g = rng.normal(size=(n, k)) + 2.0 * (X_binned[seed % n_features] > n_bins // 2)[:, None]
    h = rng.uniform(0.2, 2.0, size=(n, k))
    payload = np.concatenate([g, h], -1)
    hist = np.zeros((n_features, n_leaves, n_bins, 2 * k))
    for f in range(n_features):
        np.add.at(hist[f], (leaf, X_binned[f]), payload)
    return hist.astype(np.float32)


def _best(hist, **kw):
    return best_split(jnp.asarray(hist), **kw)


def test_prefix_sum_equals_cumsum():
    rng = np.random.default_rng(0)
    x = rng.integers(-9, 10, size=(3, 4, 255, 2)).astype(np.float32)
    for axis in range(4):
        np.testing.assert_array_equal(np.asarray(prefix_sum(jnp.asarray(x), axis)),
                                      np.cumsum(x, axis=axis))
    y = rng.normal(size=(2, 7, 31)).astype(np.float32)
    np.testing.assert_allclose(np.asarray(prefix_sum(jnp.asarray(y), 2)), np.cumsum(y, 2),
                               rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("n_leaves,k,l2,mcw", [(1, 1, 1.0, 0.0), (2, 1, 0.0, 0.0), (4, 1, 0.5, 1.5),
                                               (2, 2, 1.0, 2.0), (4, 3, 0.1, 0.0)])
def test_split_gains_equal_brute_force(n_leaves, k, l2, mcw):
    hist = random_hist(n_leaves * 10 + k, n_leaves=n_leaves, k=k)
    got = np.asarray(split_gains(jnp.asarray(hist), l2, mcw))
    ref = reference_gains(hist, l2, mcw)
    assert got.shape == ref.shape
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-3)
    if mcw > 0:  # the rule excluded something, so it was exercised
        assert np.any(reference_gains(hist, l2, 0.0) != ref)


@pytest.mark.parametrize("seed", range(6))
def test_best_split_is_the_brute_force_argmax(seed):
    hist = random_hist(seed, n_leaves=[1, 2, 4][seed % 3], k=1 + seed % 2)
    l2, mcw = 1.0, 0.5
    split = _best(hist, l2=l2, min_split_gain=0.0, min_child_weight=mcw)
    gains, best_gain = reference_best(hist, l2, 0.0, mcw)
    f, t, d = int(split.feature), int(split.threshold), int(split.missing_right)
    assert best_gain > 0
    # The chosen candidate is optimal under the reference (up to float32 rounding)...
    assert gains[f, t, d] >= best_gain - 1e-4 * abs(best_gain)
    np.testing.assert_allclose(float(split.gain), best_gain, rtol=1e-4)
    # ...and when the reference optimum is clear (no near tie), it is THE optimum.
    flat = np.sort(gains.reshape(-1))
    if flat[-1] - flat[-2] > 1e-3 * abs(flat[-1]):
        assert (f, t, d) == np.unravel_index(np.argmax(gains), gains.shape)


def test_missing_direction_is_chosen_by_gain():
    # One leaf, one feature, bins 0..3 + missing bin 4. Rows in bin 0 have g = -1, bins 1..3
    # g = +1, missing g = -1 (like bin 0): the best split is t = 0 with missing LEFT. Flip the
    # missing rows' gradient and missing must go RIGHT.
    def hist(g_missing):
        G = np.array([-4.0, 2.0, 1.0, 1.0, 4.0 * g_missing])
        H = np.array([4.0, 2.0, 1.0, 1.0, 4.0])
        return np.stack([G, H], -1)[None, None].astype(np.float32)

    left = _best(hist(-1.0), l2=0.0, min_split_gain=0.0, min_child_weight=0.0)
    right = _best(hist(+1.0), l2=0.0, min_split_gain=0.0, min_child_weight=0.0)
    assert (int(left.threshold), bool(left.missing_right)) == (0, False)
    assert (int(right.threshold), bool(right.missing_right)) == (0, True)
    # Hand-computed gain (l2 = 0): left child G=-8, H=8; right G=4, H=4; parent G=-4, H=12.
    np.testing.assert_allclose(float(left.gain), 64 / 8 + 16 / 4 - 16 / 12, rtol=1e-6)


def _assert_null(split, n_bins):
    assert int(split.feature) == 0
    assert int(split.threshold) == n_bins - 2 == splits_lib.null_threshold(n_bins)
    assert not bool(split.missing_right)
    assert float(split.gain) == 0.0


def test_null_split_when_nothing_is_admissible():
    hist = random_hist(11, n_leaves=2)
    n_bins = hist.shape[2]
    _, best_gain = reference_best(hist, 1.0, 0.0, 0.0)
    # min_split_gain above the best gain.
    _assert_null(_best(hist, l2=1.0, min_split_gain=best_gain + 1e-2, min_child_weight=0.0), n_bins)
    # ...just below it: the split is taken, with gain reduced by min_split_gain.
    split = _best(hist, l2=1.0, min_split_gain=best_gain - 1e-2, min_child_weight=0.0)
    np.testing.assert_allclose(float(split.gain), 1e-2, rtol=0.05)
    # min_child_weight larger than any child can be.
    _assert_null(_best(hist, l2=1.0, min_split_gain=0.0, min_child_weight=1e6), n_bins)
    # All gradients zero: no gain anywhere.
    flat = hist.copy()
    flat[..., :1] = 0.0
    _assert_null(_best(flat, l2=1.0, min_split_gain=0.0, min_child_weight=0.0), n_bins)
    # No eligible feature.
    _assert_null(_best(hist, l2=1.0, min_split_gain=0.0, min_child_weight=0.0,
                       feature_mask=jnp.zeros((3,), bool)), n_bins)


def test_feature_mask_is_respected():
    hist = random_hist(12, n_leaves=2)
    unmasked = _best(hist, l2=1.0, min_split_gain=0.0, min_child_weight=0.0)
    best_f = int(unmasked.feature)
    mask = np.ones(3, bool)
    mask[best_f] = False
    split = _best(hist, l2=1.0, min_split_gain=0.0, min_child_weight=0.0, feature_mask=jnp.asarray(mask))
    gains, best_gain = reference_best(hist, 1.0, 0.0, 0.0, mask)
    assert int(split.feature) != best_f and mask[int(split.feature)]
    np.testing.assert_allclose(float(split.gain), best_gain, rtol=1e-4)
    only = np.zeros(3, bool)
    only[(best_f + 1) % 3] = True
    split = _best(hist, l2=1.0, min_split_gain=0.0, min_child_weight=0.0, feature_mask=jnp.asarray(only))
    assert int(split.feature) == (best_f + 1) % 3


def test_large_gradients_stay_finite():
    # Exponential loss can produce huge gradient sums; G * (G / (H + l2)) must not overflow
    # where G^2 alone would.
    hist = random_hist(13, n_leaves=2) * np.float32(1e20)
    gains = np.asarray(split_gains(jnp.asarray(hist), 1.0, 0.0))
    assert np.all(np.isfinite(gains))


@pytest.mark.parametrize("n_leaves", [1, 4])
def test_no_missing_shortcut_gives_the_same_split(n_leaves):
    # With an empty missing bin both directions have equal gains; missing=False computes one.
    hist = random_hist(11 + n_leaves, n_features=4, n_leaves=n_leaves, n_bins=9)
    hist[:, :, -1, :] = 0.0
    cum = histograms.prefix_sum(jnp.asarray(hist), axis=2)
    kw = dict(l2=1.0, min_split_gain=0.0, min_child_weight=0.5, cumulative=True)
    full = best_split(cum, **kw)
    short = best_split(cum, missing=False, **kw)
    for a, b in zip(full, short):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    gains = np.asarray(jax.jit(splits_lib.split_gains_cumulative, static_argnums=3)(cum, 1.0, 0.5, False))
    np.testing.assert_allclose(gains[..., 0], reference_gains(hist, 1.0, 0.5)[..., 0], rtol=1e-4, atol=1e-4)
    assert np.all(gains[..., 1] == -np.inf)


@pytest.mark.parametrize("seed", range(6))
def test_best_split_of_gains_is_the_first_flat_maximum(seed):
    # The two-stage search (per-feature max, then within the feature) against one argmax over
    # the flattened gains: ties across and within features, -inf, NaN, masks (also all masked).
    rng = np.random.default_rng(seed)
    gains = rng.integers(-3, 4, size=(7, 15, 2)).astype(np.float32)  # many exact ties
    gains[rng.uniform(size=gains.shape) < 0.2] = -np.inf
    if seed % 3 == 1:
        gains[rng.integers(7), rng.integers(15), rng.integers(2)] = np.nan
    masks = [None, rng.uniform(size=7) < 0.5, np.zeros(7, bool)]
    for mask in masks:
        for msg in (0.0, 1.5, 10.0):
            got = splits_lib.best_split_of_gains(jnp.asarray(gains), min_split_gain=msg,
                                             feature_mask=None if mask is None else jnp.asarray(mask))
            g = gains if mask is None else np.where(mask[:, None, None], gains, -np.inf)
            flat = g.reshape(-1)
            nan = np.flatnonzero(np.isnan(flat))
            best = int(nan[0]) if nan.size else int(np.argmax(flat))
            f, t, d = np.unravel_index(best, g.shape)
            ok = flat[best] - msg > 0
            assert int(got.feature) == (f if ok else 0)
            assert int(got.threshold) == (t if ok else splits_lib.null_threshold(16))
            assert bool(got.missing_right) == bool(ok and d == 1)
            assert float(got.gain) == (float(flat[best] - msg) if ok else 0.0)


# --- How to extend: a split criterion is one SplitCriterion(score, value) -------------------------

ALPHA = 20.0  # the L1 penalty of the example criterion


def l1_score(G, H, l2):
    """XGBoost's ``reg_alpha`` (Chen & Guestrin 2016): the Newton score of the soft-thresholded
    gradient sum, ``T_alpha(G)^2 / (H + l2)``."""
    t = jnp.sign(G) * jnp.maximum(jnp.abs(G) - ALPHA, 0.0)
    return newton.newton_score(t, H, l2)


def l1_value(G, H, l2):
    return newton.newton_value(jnp.sign(G) * jnp.maximum(jnp.abs(G) - ALPHA, 0.0), H, l2)


L1 = splits_lib.SplitCriterion(score=l1_score, value=l1_value, name="l1")


def _np_l1_score(G, H, l2):
    t = np.sign(G) * np.maximum(np.abs(G) - ALPHA, 0.0)
    return _score(t, H, l2)


def reference_tree(X_binned, g, h, depth, n_bins, l2, score, alpha):
    """An oblivious tree grown by brute force in float64 with the node score ``score`` (leaf
    values: the soft-thresholded Newton value with penalty ``alpha``)."""
    n_features, n = X_binned.shape
    leaf = np.zeros(n, np.int64)
    payload = np.stack([g, h], -1).astype(np.float64)
    rules = []
    for d in range(depth):
        hist = np.zeros((n_features, 2**d, n_bins, 2))
        for f in range(n_features):
            np.add.at(hist[f], (leaf, X_binned[f]), payload)
        gains = reference_gains(hist, l2, 0.0, score)
        f, t, direction = np.unravel_index(np.argmax(gains), gains.shape)
        if gains[f, t, direction] <= 0:  # the null split: everything left
            f, t, direction = 0, splits_lib.null_threshold(n_bins), 0
        col = X_binned[f]
        right = np.where(col == n_bins - 1, direction == 1, col > t)
        leaf = leaf + (right.astype(np.int64) << d)
        rules.append((f, t, bool(direction)))
    values = np.zeros(1)
    for d in range(depth + 1):  # node j of level d holds the rows with leaf % 2**d == j
        G = np.bincount(leaf % 2**d, g, 2**d)
        H = np.bincount(leaf % 2**d, h, 2**d)
        own = -np.sign(G) * np.maximum(np.abs(G) - alpha, 0.0) / (H + l2)
        values = np.where(H > 0, own, np.tile(values, 2 if d else 1))  # empty: the parent's value
    return rules, H, values


def criterion_case(seed):
    """Feature 0 isolates one row with a large gradient (the Newton criterion's favourite split);
    feature 1 separates two halves of moderate, consistent gradients (the L1 criterion's)."""
    rng = np.random.default_rng(seed)
    n, n_bins = 200, 8
    X_binned = np.stack([rng.integers(0, 4, n), rng.integers(0, n_bins - 1, n),
                         rng.integers(0, n_bins, n)]).astype(np.uint8)
    X_binned[0, 0] = 6
    g = np.where(X_binned[1] > 3, 1.0, -1.0) + 0.3 * rng.normal(size=n)
    g[0] = 30.0
    h = rng.uniform(0.5, 1.5, n)
    return X_binned, g, h, n_bins


@functools.lru_cache(maxsize=None)
def _tree_program(depth, n_bins, criterion):
    """``tree.fit_tree`` jitted once per static setting (the same program for every seed)."""
    return jax.jit(functools.partial(oblivious.fit_tree, depth=depth, n_bins=n_bins, l2=1.0,
                                     min_split_gain=0.0, min_child_weight=0.0, criterion=criterion))


def _grow(X_binned, g, h, n_bins, depth, criterion):
    t, _ = _tree_program(depth, n_bins, criterion)(
        jnp.asarray(X_binned), jnp.asarray(g, jnp.float32)[:, None], jnp.asarray(h, jnp.float32)[:, None])
    return t


# Seed 2's second level has no positive gain: float32 rounding of the prefix sums then admits a
# zero-gain repeat of the first rule (the same predictions), where the reference takes the null split.
@pytest.mark.slow
@pytest.mark.parametrize("seed", [0, 1, 3])
def test_a_new_split_criterion_is_one_namedtuple(seed):
    """The README's "How to extend": the L1 criterion above, written once as
    ``SplitCriterion(score, value)``, grows the brute-force tree of its own score and values (on
    the CPU kernel's histograms and on pure JAX's), and jboost.fit takes it as ``split_criterion``."""
    X_binned, g, h, n_bins = criterion_case(seed)
    rules, H, values = reference_tree(X_binned, g, h, 2, n_bins, 1.0, _np_l1_score, ALPHA)
    assert (H == 0).any()  # the outlier's leaf is alone: its empty sibling takes the parent's value
    newton_rules, _, _ = reference_tree(X_binned, g, h, 2, n_bins, 1.0, _score, 0.0)
    assert rules[0][0] == 1 and newton_rules[0][0] == 0  # the criterion changes the split
    for grow in (_grow, lambda *a: pure_jax(_grow, *a)):
        t = grow(X_binned, g, h, n_bins, 2, L1)
        got = [(int(f), int(th), bool(m)) for f, th, m in zip(t.features, t.thresholds, t.missing_right)]
        assert got == [(int(f), int(th), m) for f, th, m in rules]
        np.testing.assert_allclose(np.asarray(t.leaf_values)[:, 0], values, rtol=1e-5, atol=1e-6)
    t_newton = _grow(X_binned, g, h, n_bins, 2, splits_lib.NEWTON)
    assert int(t_newton.features[0]) == newton_rules[0][0]
    # End to end: one round at learning rate 1 from a zero baseline is that tree.
    X = X_binned.T.astype(np.float64)
    loss = jboost.Loss(lambda y, f: 0.5 * (f - y) ** 2, baseline=lambda y, w, k: jnp.zeros((k,)))
    booster = jboost.fit(X, -g, loss, n_rounds=1, depth=2, learning_rate=1.0, n_bins=n_bins,
                         min_child_weight=0.0, split_criterion=L1)
    assert [int(f) for f in booster.trees.features[0, 0]] == [f for f, _, _ in rules]
    np.testing.assert_allclose(np.asarray(booster.trees.leaf_values[0, 0, :, 0]),
                               _grow(X_binned, g, np.ones_like(h), n_bins, 2, L1).leaf_values[:, 0],
                               rtol=1e-5)


def test_a_criterion_outside_the_kernel_gets_the_kernels_histograms():
    """The Newton criterion written as a plain SplitCriterion (so not fused in the kernel: its
    gains come from the level's cumulative histograms, built by subtraction where it pays) grows
    the default tree, at a size where every level subtracts."""
    rng = np.random.default_rng(0)
    n, n_features, n_bins, depth = 4000, 4, 16, 4
    X_binned = rng.integers(0, n_bins, (n_features, n)).astype(np.uint8)
    g = (X_binned[0] > 7) * 2.0 - (X_binned[1] > 3) + 0.5 * (X_binned[2] > 11) + rng.normal(size=n)
    h = rng.uniform(0.5, 1.5, n)
    assert all(s for s, _ in histograms.level_plan(n, depth, n_bins)[1:])
    plain = splits_lib.SplitCriterion(score=newton.newton_score, value=newton.newton_value)
    a, b = (_grow(X_binned, g, h, n_bins, depth, c) for c in (splits_lib.NEWTON, plain))
    for field in ("features", "thresholds", "missing_right"):
        np.testing.assert_array_equal(getattr(a, field), getattr(b, field))
    np.testing.assert_allclose(a.gains, b.gains, rtol=1e-5)
    np.testing.assert_allclose(a.leaf_values, b.leaf_values, rtol=1e-5, atol=1e-6)


def test_split_criterion_must_be_a_split_criterion():
    with pytest.raises(TypeError, match="split_criterion must be a jboost.trees.splits.SplitCriterion"):
        jboost.fit(np.zeros((4, 1)), np.zeros(4), split_criterion=l1_score)
