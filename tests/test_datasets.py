"""Tests of jboost.datasets: synthetic generators against their defining rules, loaders against
the shapes and counts documented in shared/data/README.md, and the missing-data error."""

import math

import numpy as np
import pytest

from jboost import datasets


def chi2_even_cdf(x: float, dof: int) -> float:
    """CDF of chi-square with even ``dof``: ``1 - exp(-x/2) sum_{k < dof/2} (x/2)^k / k!``."""
    h = x / 2.0
    return 1.0 - math.exp(-h) * sum(h**k / math.factorial(k) for k in range(dof // 2))


# --------------------------------------------------------------------------------------------
# Synthetic generators
# --------------------------------------------------------------------------------------------


def test_chi2_median_constant_is_the_median():
    assert chi2_even_cdf(datasets.CHI2_10_MEDIAN, 10) == pytest.approx(0.5, abs=1e-12)
    assert chi2_even_cdf(9.0, 10) < 0.5 < chi2_even_cdf(9.7, 10)  # a wrong constant would fail


def test_nested_spheres_shapes_dtypes_and_radius_rule():
    X, y = datasets.nested_spheres(5000, seed=3)
    assert X.shape == (5000, 10) and y.shape == (5000,)
    assert X.dtype == np.float32 and y.dtype == np.float32
    assert set(np.unique(y)) == {0.0, 1.0}
    r2 = np.sum(X.astype(np.float64) ** 2, axis=1)
    rule = (r2 > datasets.CHI2_10_MEDIAN).astype(np.float32)
    # X was rounded to float32 after labelling: only rows within rounding of the sphere may differ.
    near = np.abs(r2 - datasets.CHI2_10_MEDIAN) < 1e-4
    assert np.array_equal(y[~near], rule[~near])
    # Standard Gaussian features.
    assert np.abs(X.mean(0)).max() < 0.06 and np.abs(X.std(0) - 1).max() < 0.05


def test_nested_spheres_balanced():
    _, y = datasets.nested_spheres(40000, seed=0)
    # Binomial(40000, 1/2): sd of the mean is 0.0025; 4 sd.
    assert abs(y.mean() - 0.5) < 0.01


def test_nested_spheres_deterministic_by_seed():
    X1, y1 = datasets.nested_spheres(300, seed=7)
    X2, y2 = datasets.nested_spheres(300, seed=7)
    X3, _ = datasets.nested_spheres(300, seed=8)
    assert np.array_equal(X1, X2) and np.array_equal(y1, y2)
    assert not np.array_equal(X1, X3)


def test_nested_spheres_rejects_other_dimensions():
    with pytest.raises(ValueError, match="n_features"):
        datasets.nested_spheres(10, n_features=5)


def test_waveform_follows_breimans_formula():
    """Class c's mean is the midpoint of its two triangular waves (u ~ U(0, 1), noise mean 0), its
    covariance that of u's spread along the waves' difference plus unit noise; balanced classes,
    the same rows for the same seed."""
    X, y = datasets.waveform(60000, seed=2)
    assert X.shape == (60000, 21) and y.shape == (60000,) and X.dtype == np.float32
    assert np.abs(np.bincount(y.astype(int)) / len(y) - 1 / 3).max() < 0.01
    j = np.arange(1, 22)
    v1 = np.maximum(6 - np.abs(j - 11), 0)
    v2, v3 = np.maximum(6 - np.abs(j - 15), 0), np.maximum(6 - np.abs(j - 7), 0)
    for c, (a, b) in enumerate([(v1, v2), (v1, v3), (v2, v3)]):
        Xc = X[y == c].astype(np.float64)
        assert np.abs(Xc.mean(0) - (a + b) / 2).max() < 0.06, c
        d = (a - b).astype(np.float64)
        cov = np.outer(d, d) / 12 + np.eye(21)           # Var(u) = 1/12
        assert np.abs(np.cov(Xc.T) - cov).max() < 0.15, c
    X2, y2 = datasets.waveform(50, seed=2)
    assert np.array_equal(X2, datasets.waveform(50, seed=2)[0]) and not np.array_equal(
        X2, datasets.waveform(50, seed=3)[0])


def test_samme_gaussian_classes_follow_radius_and_are_balanced():
    X, y = datasets.samme_gaussian(30000, seed=1, n_classes=3)
    assert X.shape == (30000, 10) and y.shape == (30000,)
    assert set(np.unique(y)) == {0.0, 1.0, 2.0}
    counts = np.bincount(y.astype(int)) / len(y)
    assert np.abs(counts - 1 / 3).max() < 0.015
    # Classes are shells of the squared radius: ordered, non-overlapping ranges.
    r2 = np.sum(X.astype(np.float64) ** 2, axis=1)
    assert r2[y == 0].max() <= r2[y == 1].min() + 1e-4
    assert r2[y == 1].max() <= r2[y == 2].min() + 1e-4
    Xa, ya = datasets.samme_gaussian(100, seed=2)
    Xb, yb = datasets.samme_gaussian(100, seed=2)
    assert np.array_equal(Xa, Xb) and np.array_equal(ya, yb)
    assert not np.array_equal(Xa, datasets.samme_gaussian(100, seed=3)[0])


@pytest.mark.parametrize("make", [datasets.make_classification, datasets.make_regression])
def test_make_shapes_and_determinism(make):
    X, y = make(200, n_features=12, n_informative=5, seed=4)
    assert X.shape == (200, 12) and y.shape == (200,)
    assert X.dtype == np.float32 and y.dtype == np.float32
    X2, y2 = make(200, n_features=12, n_informative=5, seed=4)
    X3, y3 = make(200, n_features=12, n_informative=5, seed=5)
    assert np.array_equal(X, X2) and np.array_equal(y, y2)
    assert not np.array_equal(y, y3)


def test_make_classification_labels_nearly_balanced():
    _, y = datasets.make_classification(4000, seed=0)
    assert set(np.unique(y)) <= {0.0, 1.0}
    assert abs(y.mean() - 0.5) < 0.03  # median split, then 1% flips


# --------------------------------------------------------------------------------------------
# Loaders (the files in ../shared/data; see shared/data/README.md)
# --------------------------------------------------------------------------------------------

HAVE_DATA = (datasets.data_dir() / "spambase.csv.gz").exists()
needs_data = pytest.mark.skipif(not HAVE_DATA, reason=f"benchmark CSVs not found in {datasets.data_dir()}; "
                                f"set {datasets.ENV_VAR}")


def _check_split(split, n_train, n_test, n_features):
    X, y, Xt, yt = split
    assert X.shape == (n_train, n_features) and y.shape == (n_train,)
    assert Xt.shape == (n_test, n_features) and yt.shape == (n_test,)
    for a in split:
        assert a.dtype == np.float32


@needs_data
def test_load_spam_esl_split():
    X, y, Xt, yt = split = datasets.load_spam()
    _check_split(split, 3065, 1536, 57)
    assert y.sum() + yt.sum() == 1813  # spam e-mails overall
    assert set(np.unique(np.concatenate([y, yt]))) == {0.0, 1.0}
    assert np.isfinite(X).all()
    names = datasets.feature_names("spambase.csv.gz")
    assert len(names) == 57 and names[0] == "word_freq_make" and names[-1] == "capital_run_length_total"


@needs_data
def test_load_california_split_and_values():
    X, y, Xt, yt = split = datasets.load_california(seed=0)
    _check_split(split, 16512, 4128, 8)
    assert datasets.feature_names("california_housing.csv.gz") == [
        "MedInc", "HouseAge", "AveRooms", "AveBedrms", "Population", "AveOccup", "Latitude", "Longitude"]
    allX, ally = np.concatenate([X, Xt]), np.concatenate([y, yt])
    # Column means documented in shared/data/README.md (the split is a permutation of all rows).
    np.testing.assert_allclose(allX.astype(np.float64).mean(0),
                               [3.8707, 28.6395, 5.4290, 1.0967, 1425.48, 3.0707, 35.632, -119.570],
                               rtol=2e-4)
    assert ally.astype(np.float64).mean() == pytest.approx(2.0686, abs=1e-4)
    assert ally.min() == pytest.approx(0.14999) and ally.max() == pytest.approx(5.00001)
    # Row 0 of the file, wherever the split put it.
    row0 = np.array([8.3252, 41, 6.984127, 1.023810, 322, 2.555556, 37.88, -122.23], np.float32)
    hits = np.where(np.all(np.abs(allX - row0) < 1e-4 * (1 + np.abs(row0)), axis=1))[0]
    assert len(hits) == 1 and ally[hits[0]] == pytest.approx(4.526)
    # Seeded: same seed same split, another seed another split.
    X2, *_ = datasets.load_california(seed=0)
    X3, *_ = datasets.load_california(seed=1)
    assert np.array_equal(X, X2) and not np.array_equal(X, X3)


@needs_data
def test_load_letter_standard_split():
    X, y, Xt, yt = split = datasets.load_letter()
    _check_split(split, 16000, 4000, 16)
    counts = np.bincount(np.concatenate([y, yt]).astype(int))
    assert len(counts) == 26 and counts[0] == 789 and counts[1] == 766 and counts[25] == 734
    assert X.min() >= 0 and X.max() <= 15


@needs_data
def test_load_waveform_vowel_segmentation():
    _check_split(datasets.load_waveform(), 300, 4700, 21)
    X, y, Xt, yt = datasets.load_waveform()
    assert np.bincount(np.concatenate([y, yt]).astype(int)).tolist() == [1657, 1647, 1696]
    X, y, Xt, yt = split = datasets.load_vowel()
    _check_split(split, 528, 462, 10)
    assert np.bincount(y.astype(int)).tolist() == [48] * 11
    assert np.bincount(yt.astype(int)).tolist() == [42] * 11
    X, y, Xt, yt = split = datasets.load_segmentation()
    _check_split(split, 210, 2100, 19)
    assert np.bincount(y.astype(int)).tolist() == [30] * 7
    assert np.bincount(yt.astype(int)).tolist() == [300] * 7


@needs_data
def test_load_adult_missing_values_and_labels():
    X, y, Xt, yt = split = datasets.load_adult()
    _check_split(split, 32561, 16281, 14)
    assert int(y.sum()) == 7841 and int(yt.sum()) == 3846
    # Missing values only in workclass (col 1), occupation (6), native-country (13).
    assert np.isnan(X).sum(0).tolist() == [0, 1836, 0, 0, 0, 0, 1843, 0, 0, 0, 0, 0, 0, 583]
    assert int(np.isnan(X).any(1).sum()) == 2399
    assert np.isnan(Xt).sum(0).tolist() == [0, 963, 0, 0, 0, 0, 966, 0, 0, 0, 0, 0, 0, 274]
    assert int(np.isnan(Xt).any(1).sum()) == 1221


# --------------------------------------------------------------------------------------------
# Missing data directory
# --------------------------------------------------------------------------------------------


def test_missing_data_dir_error_names_the_env_var(tmp_path):
    with pytest.raises(FileNotFoundError, match=datasets.ENV_VAR) as err:
        datasets.load_spam(data_dir=tmp_path)
    assert "spambase.csv.gz" in str(err.value) and str(tmp_path) in str(err.value)


def test_env_var_sets_the_data_dir(tmp_path, monkeypatch):
    monkeypatch.setenv(datasets.ENV_VAR, str(tmp_path))
    assert datasets.data_dir() == tmp_path
    with pytest.raises(FileNotFoundError, match="JBOOST_DATA_DIR"):
        datasets.load_california()
