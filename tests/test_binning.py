"""Binning: borders and the bin rule ``x -> i  iff  b[i-1] < x <= b[i]`` (jboost/data/binning.py).

Every check compares against a brute-force NumPy reference or hand-computed values.
"""

from __future__ import annotations

import hypothesis
import hypothesis.extra.numpy as hnp
import hypothesis.strategies as st
import numpy as np
import pytest

import jboost
from jboost.data import binning


def real_borders(row):
    """The borders of one feature without the ``+inf`` padding."""
    return row[row < np.inf]


def reference_bins(X, borders):
    """Brute-force bin rule: bin = number of borders strictly below x; NaN -> n_bins - 1."""
    n_bins = borders.shape[1] + 1
    out = np.empty((X.shape[1], X.shape[0]), np.int64)
    for f in range(X.shape[1]):
        b = real_borders(borders[f])
        for i, x in enumerate(X[:, f]):
            out[f, i] = n_bins - 1 if np.isnan(x) else int(np.sum(b < x))
    return out


def check_rule(X, borders, bins):
    """Each non-missing x sits in (b[i-1], b[i]] of its bin i (bin 0 is (-inf, b[0]], inf included)."""
    n_bins = borders.shape[1] + 1
    for f in range(X.shape[1]):
        b = real_borders(borders[f])
        m = b.size
        for x, i in zip(X[:, f], bins[f]):
            if np.isnan(x):
                assert i == n_bins - 1
                continue
            assert 0 <= i <= m
            if i > 0:
                assert b[i - 1] < x, (x, i, b)
            if i < m:
                assert x <= b[i], (x, i, b)


def check_borders_well_formed(borders, n_bins):
    assert borders.dtype == np.float32
    assert borders.shape[1] == n_bins - 1
    for row in borders:
        b = real_borders(row)
        m = b.size
        assert m <= n_bins - 2, "at most n_bins - 1 non-missing bins"
        assert np.all(np.diff(b.astype(np.float64)) > 0), "borders strictly increasing"
        assert np.all(row[m:] == np.inf), "padding is +inf after the real borders"


def probe_values(borders):
    """Values on and next to every border, the infinities and NaN: where a rule is easiest to get wrong."""
    b = borders[np.isfinite(borders)]
    with np.errstate(over="ignore"):
        vals = np.concatenate([
            b, np.nextafter(b, np.float32(np.inf)), np.nextafter(b, np.float32(-np.inf)),
            np.array([np.inf, -np.inf, np.nan, 0.0, -0.0], np.float32),
        ]).astype(np.float32)
    return vals


# --------------------------------------------------------------------------------------------
# Hand-computed cases
# --------------------------------------------------------------------------------------------


def test_hand_computed_exact_borders_and_bins():
    X = np.array([[1.0], [2.0], [3.0], [2.0]], np.float32)
    borders = jboost.compute_borders(X, n_bins=8)
    np.testing.assert_array_equal(borders, [[1.5, 2.5, np.inf, np.inf, np.inf, np.inf, np.inf]])
    new = np.array([[1.0], [1.5], [2.0], [2.5], [3.0], [-np.inf], [np.inf], [np.nan], [100.0]],
                   np.float32)
    bins = np.asarray(jboost.bin_features(new, borders))
    # Values equal to a border go to the lower bin; +-inf are the extreme bins; NaN the missing bin.
    np.testing.assert_array_equal(bins, [[0, 0, 1, 1, 2, 0, 2, 7, 2]])
    assert bins.dtype == np.uint8


def test_equal_frequency_quantile_borders():
    # 1000 distinct values into 10 non-missing bins (n_bins=11): inverse-CDF deciles put exactly
    # 100 values in every bin, with borders at the midpoints 99.5, 199.5, ...
    X = np.arange(1000, dtype=np.float32)[:, None]
    borders = jboost.compute_borders(X, n_bins=11)
    np.testing.assert_array_equal(borders[0, :9], np.arange(1, 10) * 100 - 0.5)
    assert borders[0, 9] == np.inf
    bins = np.asarray(jboost.bin_features(X, borders))[0]
    np.testing.assert_array_equal(np.bincount(bins, minlength=11), [100] * 10 + [0])


def test_hand_computed_weighted_border():
    # n_bins=3: one border at the weighted median. Values 0..9; unweighted median 4 -> 4.5.
    X = np.arange(10, dtype=np.float32)[:, None]
    np.testing.assert_array_equal(jboost.compute_borders(X, n_bins=3), [[4.5, np.inf]])
    # Weight 10 on the value 8 (total 19): the cumulative weight first reaches 9.5 at 8 -> 8.5.
    w = np.ones(10)
    w[8] = 10.0
    np.testing.assert_array_equal(jboost.compute_borders(X, n_bins=3, sample_weight=w), [[8.5, np.inf]])


def test_adjacent_floats_get_their_own_bins():
    # The midpoint of two adjacent float32 values rounds onto one of them: the border must fall
    # back to the lower value so that both values keep their own, non-empty bin.
    a = np.float32(1.0)
    vals = np.array([a, np.nextafter(a, np.float32(2)), np.nextafter(np.nextafter(a, np.float32(2)),
                                                                      np.float32(2))], np.float32)
    X = vals[:, None]
    borders = jboost.compute_borders(X, n_bins=8)
    check_borders_well_formed(borders, 8)
    np.testing.assert_array_equal(np.asarray(jboost.bin_features(X, borders))[0], [0, 1, 2])


def test_all_nan_feature_goes_to_missing_bin():
    X = np.array([[np.nan, 1.0], [np.nan, 2.0], [np.nan, 3.0]], np.float32)
    borders = jboost.compute_borders(X, n_bins=5)
    assert np.all(borders[0] == np.inf)
    bins = np.asarray(jboost.bin_features(X, borders))
    np.testing.assert_array_equal(bins[0], [4, 4, 4])
    np.testing.assert_array_equal(bins[1], [0, 1, 2])


# --------------------------------------------------------------------------------------------
# Exact borders for features with few distinct values; the n_bins limits
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("n_bins,n_distinct", [(3, 2), (8, 7), (8, 8), (8, 30), (256, 255), (256, 256),
                                               (256, 600)])
def test_bins_exact_or_quantile_and_never_empty(n_bins, n_distinct):
    rng = np.random.default_rng(n_bins * 1000 + n_distinct)
    values = np.sort(rng.choice(np.arange(-1000, 1000), n_distinct, replace=False)).astype(np.float32) / 7
    col = rng.choice(values, 2000)
    col[: n_distinct] = values  # every value occurs at least once
    col = np.concatenate([col, [np.nan] * 5]).astype(np.float32)
    X = col[:, None]
    borders = jboost.compute_borders(X, n_bins=n_bins)
    check_borders_well_formed(borders, n_bins)
    bins = np.asarray(jboost.bin_features(X, borders))[0]
    assert bins.dtype == np.uint8
    m = real_borders(borders[0]).size
    counts = np.bincount(bins, minlength=n_bins)
    assert counts[n_bins - 1] == 5, "NaN rows in the missing bin"
    assert np.all(counts[: m + 1] > 0), "every used non-missing bin holds rows"
    assert np.all(counts[m + 1 : n_bins - 1] == 0)
    assert bins[~np.isnan(col)].max() <= n_bins - 2
    if n_distinct <= n_bins - 1:
        # Exact borders: one bin per distinct value, in order, counts equal to value counts.
        assert m == n_distinct - 1
        uniq, inverse, value_counts = np.unique(col[~np.isnan(col)], return_inverse=True,
                                                return_counts=True)
        np.testing.assert_array_equal(bins[~np.isnan(col)], inverse)
        np.testing.assert_array_equal(counts[:n_distinct], value_counts)
    np.testing.assert_array_equal(bins, reference_bins(X, borders)[0])


@pytest.mark.parametrize("n_bins", [2, 1, 257, 1000])
def test_n_bins_out_of_range_raises(n_bins):
    with pytest.raises(ValueError, match=rf"n_bins={n_bins} must be in \[3, 256\]"):
        jboost.compute_borders(np.zeros((4, 2), np.float32), n_bins=n_bins)


def test_bad_shapes_raise():
    with pytest.raises(ValueError, match="X must be 2-D"):
        jboost.compute_borders(np.zeros(5, np.float32), n_bins=8)
    borders = jboost.compute_borders(np.zeros((4, 2), np.float32), n_bins=8)
    with pytest.raises(ValueError, match="borders are for 2 features"):
        jboost.bin_features(np.zeros((4, 3), np.float32), borders)


# --------------------------------------------------------------------------------------------
# Weighted borders
# --------------------------------------------------------------------------------------------


def test_integer_weights_equal_duplicated_rows():
    rng = np.random.default_rng(5)
    X = rng.normal(size=(300, 3)).astype(np.float32)
    X[rng.random(X.shape) < 0.05] = np.nan
    X[:, 2] = np.round(X[:, 2])  # a few distinct values: exact borders path
    w = rng.integers(0, 4, size=300)
    for n_bins in (8, 64):
        weighted = jboost.compute_borders(X, n_bins=n_bins, sample_weight=w.astype(np.float64))
        repeated = jboost.compute_borders(np.repeat(X, w, axis=0), n_bins=n_bins)
        np.testing.assert_array_equal(weighted, repeated)
    # Zero-weight rows play no part: a value seen only with weight 0 gets no border.
    X2 = np.array([[0.0], [1.0], [2.0], [50.0]], np.float32)
    np.testing.assert_array_equal(
        jboost.compute_borders(X2, n_bins=8, sample_weight=[1, 1, 1, 0])[0, :3], [0.5, 1.5, np.inf])


def test_weighted_borders_match_numpy_weighted_quantiles():
    # Reference: the smallest value whose cumulative weight reaches k/(n_bins-1) of the total,
    # then the float32 midpoint to the next distinct value (binning.py's documented construction).
    rng = np.random.default_rng(6)
    col = rng.normal(size=400).astype(np.float32)
    w = rng.exponential(size=400)
    n_bins = 9
    order = np.argsort(col)
    v, cw = col[order], np.cumsum(w[order])
    expected = []
    for k in range(1, n_bins - 1):
        q = v[np.nonzero(cw >= k / (n_bins - 1) * cw[-1])[0][0]]
        if q < v[-1] and (not expected or q > expected[-1][0]):
            nxt = v[v > q].min()
            expected.append((q, np.float32((np.float64(q) + np.float64(nxt)) / 2)))
    borders = jboost.compute_borders(col[:, None], n_bins=n_bins, sample_weight=w)
    got = real_borders(borders[0])
    np.testing.assert_array_equal(got, [mid for _, mid in expected])


# --------------------------------------------------------------------------------------------
# Property-based: the rule on arbitrary data (duplicates, infinities, NaN, extreme magnitudes)
# --------------------------------------------------------------------------------------------

_BIG = float(np.finfo(np.float32).max)
_special = st.sampled_from([0.0, -0.0, 1.0, -1.0, 2.5, np.nan, np.inf, -np.inf, _BIG, -_BIG])
_TINY = float(np.finfo(np.float32).tiny)
# Values within a few ``tiny`` of zero (subnormals, and normals whose midpoint is subnormal) are
# left out here: subnormals of one sign share one value (the smallest normal of their sign), so
# the exact-border counts below do not hold for them (pinned by the tests below and in
# tests/test_subnormal.py).
_element = st.one_of(
    st.floats(width=32, allow_subnormal=False).filter(lambda v: not 0 < abs(v) < 4 * _TINY),
    _special, st.integers(-4, 4).map(float))
_ROWS, _FEATURES = 48, 2  # binned through fixed shapes (NaN padding): one compilation per n_bins


def _bin_padded(X, borders, rows):
    """``bin_features`` through a fixed ``rows``-row shape (binning is row-independent)."""
    pad = np.full((rows - X.shape[0], X.shape[1]), np.nan, np.float32)
    return np.asarray(jboost.bin_features(np.concatenate([X, pad]), borders))[:, : X.shape[0]]


@st.composite
def _matrix_and_bins(draw):
    n = draw(st.integers(1, _ROWS))
    X = draw(hnp.arrays(np.float32, (n, _FEATURES), elements=_element))
    n_bins = draw(st.sampled_from([3, 4, 5, 8, 17, 256]))
    weighted = draw(st.booleans())
    w = draw(hnp.arrays(np.float64, (n,), elements=st.sampled_from([0.0, 0.5, 1.0, 3.0]))) if weighted else None
    return X, n_bins, w


@hypothesis.settings(max_examples=80, deadline=None, derandomize=True)
@hypothesis.given(_matrix_and_bins())
def test_bin_rule_property(data):
    X, n_bins, w = data
    borders = jboost.compute_borders(X, n_bins=n_bins, sample_weight=w)
    check_borders_well_formed(borders, n_bins)
    bins = _bin_padded(X, borders, _ROWS)
    assert bins.dtype == np.uint8 and bins.shape == (X.shape[1], X.shape[0])
    np.testing.assert_array_equal(bins, reference_bins(X, borders))
    check_rule(X, borders, bins)
    for f in range(X.shape[1]):
        col = X[:, f]
        present = ~np.isnan(col) if w is None else (~np.isnan(col) & (w > 0))
        m = real_borders(borders[f]).size
        used = np.unique(bins[f][present])
        # Every non-missing bin 0..m holds a (positively weighted) training row: none empty.
        np.testing.assert_array_equal(used, np.arange(m + 1) if present.any() else [])
        n_distinct = np.unique(col[present]).size
        if 0 < n_distinct <= n_bins - 1:
            assert m == n_distinct - 1, "few distinct values get exact borders"
    # New data (every border, its neighbours, +-inf, NaN) maps by the same rule.
    probe = np.full((3 * (n_bins - 1) + 5, _FEATURES), np.nan, np.float32)
    for f in range(_FEATURES):
        vals = probe_values(borders[f])
        probe[: vals.size, f] = vals
    # The neighbours of a zero border are subnormal: compared as the smallest normal of their sign,
    # they fall on the side of the border their raw value does (borders are never subnormal).
    pbins = np.asarray(jboost.bin_features(probe, borders))
    np.testing.assert_array_equal(pbins, reference_bins(probe, borders))
    check_rule(probe, borders, pbins)
    # bin(x) > t  iff  x > borders[f, t] for every threshold t: trees predict on raw floats.
    for data_, b_ in ((X, bins), (probe, pbins)):
        for f in range(_FEATURES):
            ok = ~np.isnan(data_[:, f])
            x, bx = data_[ok, f], b_[f][ok].astype(np.int64)
            for t in range(n_bins - 1):
                np.testing.assert_array_equal(bx > t, x > borders[f, t])


def test_values_near_zero_keep_distinct_bins():
    # Two distinct normal values must land in two bins even when their float32 midpoint is
    # subnormal (-5.9e-39): a subnormal border would compare as -FLT_MIN and leave its bin empty.
    # compute_borders then uses the lower value as border: -FLT_MIN | 0 (a subnormal below 0 with
    # the first).
    X = np.array([-_TINY, 0.0, -1e-40], np.float32)[:, None]
    borders = jboost.compute_borders(X, n_bins=3)
    assert borders[0, 0] == -np.float32(_TINY)
    bins = np.asarray(jboost.bin_features(X, borders))
    np.testing.assert_array_equal(bins[0], [0, 1, 0])


def test_subnormal_values_are_binned_as_the_smallest_normal_of_their_sign():
    # 1e-40 is compared as FLT_MIN: above 0 (its own bin, no empty bin), below 1.
    X = np.array([0.0, 1e-40, 1.0], np.float32)[:, None]
    borders = jboost.compute_borders(X, n_bins=4)
    assert np.isfinite(borders[0]).sum() == 2  # two borders: {0} | {1e-40} | {1}
    bins = np.asarray(jboost.bin_features(X, borders))
    np.testing.assert_array_equal(bins[0], [0, 1, 2])


def test_binning_is_row_independent_and_reproducible():
    rng = np.random.default_rng(3)
    X = rng.normal(size=(100, 4)).astype(np.float32)
    X[rng.random(X.shape) < 0.1] = np.nan
    borders = jboost.compute_borders(X, n_bins=16)
    np.testing.assert_array_equal(borders, jboost.compute_borders(X, n_bins=16))
    full = np.asarray(jboost.bin_features(X, borders))
    np.testing.assert_array_equal(np.asarray(jboost.bin_features(X[17:40], borders)), full[:, 17:40])
    # float64 input bins like its float32 rounding.
    np.testing.assert_array_equal(np.asarray(jboost.bin_features(X.astype(np.float64), borders)), full)
    assert binning.missing_bin(16) == 15 and binning.n_bins_of(borders) == 16
