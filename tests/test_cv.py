"""Tests of jboost.data.folds: random and stratified partitions, the per-seed fold table of repeated
K-fold CV, weight masks and out-of-fold predictions."""

import hypothesis
import hypothesis.strategies as st
import numpy as np
import pytest

from jboost.data import folds as cv


@hypothesis.settings(max_examples=25, deadline=None, derandomize=True)
@hypothesis.given(n=st.integers(10, 300), k=st.integers(2, 7), n_classes=st.integers(2, 5),
                  seed=st.integers(0, 10**6))
def test_stratified_folds_are_balanced(n, k, n_classes, seed):
    hypothesis.assume(k <= n)
    rng = np.random.default_rng(seed)
    y = rng.choice(n_classes, size=n, p=rng.dirichlet(np.ones(n_classes))).astype(np.float32)
    f = cv.fold_ids(y, k, seed=seed, stratified=True)
    sizes = np.bincount(f, minlength=k)
    assert sizes.max() - sizes.min() <= 1
    for c in np.unique(y):
        counts = np.bincount(f[y == c], minlength=k)
        assert counts.max() - counts.min() <= 1, (c, counts)


def test_unstratified_folds_are_a_seeded_partition_of_equal_sizes():
    y = np.zeros(103, np.float32)
    f = cv.fold_ids(y, 5, seed=3)
    assert f.dtype == np.int32 and f.shape == (103,)
    assert np.ptp(np.bincount(f, minlength=5)) <= 1
    np.testing.assert_array_equal(f, cv.fold_ids(y, 5, seed=3))
    assert not np.array_equal(f, cv.fold_ids(y, 5, seed=4))


def test_two_dimensional_labels_get_the_common_error():
    y = np.zeros((20, 2), np.float32)
    for stratified in (False, True):
        with pytest.raises(ValueError, match=r"y has shape \(20, 2\): 2-D labels .* jboost.fit only"):
            cv.fold_ids(y, 5, stratified=stratified)


def test_folds_stratified_balance_the_classes_and_plain_ones_need_not():
    rng = np.random.default_rng(0)
    y = (rng.random(100) < 0.1).astype(np.float32)  # 10% positives
    plain = [cv.fold_ids(y, 5, seed=s) for s in range(20)]
    strat = cv.fold_ids(y, 5, seed=0, stratified=True)
    assert np.ptp(np.bincount(strat[y == 1], minlength=5)) <= 1
    # Without stratification some partition is unbalanced in the positives.
    assert max(np.ptp(np.bincount(p[y == 1], minlength=5)) for p in plain) > 1
    assert not np.array_equal(cv.fold_ids(y, 5, seed=0), cv.fold_ids(y, 5, seed=1))


def test_fold_table_repeats_partitions_per_seed_or_keeps_one():
    y = (np.arange(60) % 3 == 0).astype(np.float32)
    w = np.ones(60, np.float32)
    table, k = cv.fold_table(y, w, 4, 3, [7, 8], stratified=True)
    assert k == 4 and table.shape == (3, 60) and table.dtype == np.int32
    for s in range(3):  # seed s is fold_ids with seed [7, 8, s]
        np.testing.assert_array_equal(table[s], cv.fold_ids(y, 4, seed=[7, 8, s], stratified=True))
    assert not np.array_equal(table[0], table[1])
    once, _ = cv.fold_table(y, w, 4, 3, [7, 8], stratified=True, repeat=False)
    for s in range(3):
        np.testing.assert_array_equal(once[s], table[0])
    explicit = np.arange(60) % 3
    fixed, k = cv.fold_table(y, w, explicit, 2)
    assert k == 3
    np.testing.assert_array_equal(fixed, np.stack([explicit, explicit]))


@pytest.mark.parametrize("folds, weights, match", [
    (1, None, "folds=1"),
    (61, None, "folds=61"),
    (np.arange(60) % 3 + 1, None, "folds ids"),
    (np.zeros(59, np.int64), None, "folds must be"),
    (np.arange(60) % 2, np.where(np.arange(60) % 2 == 0, 0.0, 1.0), "fold 0 of seed 0"),
])
def test_fold_table_errors(folds, weights, match):
    y = np.zeros(60, np.float32)
    w = np.ones(60, np.float32) if weights is None else weights
    with pytest.raises(ValueError, match=match):
        cv.fold_table(y, w, folds, 1)


def test_fold_masks_and_out_of_fold():
    ids = np.array([0, 1, 2, 1, 0, 2])
    masks = np.asarray(cv.fold_masks(ids, 3))
    np.testing.assert_array_equal(masks, (ids[None, :] != np.arange(3)[:, None]).astype(np.float32))
    per_fold = np.arange(3 * 6 * 2, dtype=np.float32).reshape(3, 6, 2)  # (folds, n, K)
    oof = np.asarray(cv.out_of_fold(per_fold, masks))
    np.testing.assert_array_equal(oof, per_fold[ids, np.arange(6)])
