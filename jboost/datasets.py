"""Synthetic generators (no files needed) and loaders of the benchmark datasets, read as gzip
CSVs from a data directory (:func:`data_dir`). Loaders return float32
``(X_train, y_train, X_test, y_test)``; class labels are ``0..K-1``. See docs/datasets.md.
"""

from __future__ import annotations

import csv
import gzip
import os
from pathlib import Path
from typing import Optional, Tuple

import numpy as np

#: The environment variable naming the directory of the data sets (:func:`data_dir`).
ENV_VAR = "JBOOST_DATA_DIR"
_REPO = Path(__file__).resolve().parent.parent

Split = Tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]


# ---- Synthetic data ------------------------------------------------------------------------


# Median of the chi-square distribution with 10 degrees of freedom (ESL eq. 10.2).
CHI2_10_MEDIAN = 9.341817765591966


def nested_spheres(n: int, seed: int = 0, n_features: int = 10):
    """ESL eq. (10.2): ``X ~ N(0, I_10)``, ``y = 1`` if ``sum_j X_j^2 > chi2_10(0.5)`` else 0.

    (ESL codes the classes as -1/+1; jboost's binary losses take 0/1.) The classes are balanced
    and the Bayes error is 0.

    Args:
      n: the number of rows.
      seed: the random generator's seed.
      n_features: must be 10.

    Returns:
      ``(X (n, 10) float32, y (n,) float32)``.

    Raises:
      ValueError: ``n_features`` is not 10.
    """
    if n_features != 10:
        raise ValueError(f"n_features={n_features}: eq. (10.2) is defined for 10 features.")
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, n_features))
    y = (np.sum(X * X, axis=1) > CHI2_10_MEDIAN).astype(np.float32)
    return X.astype(np.float32), y


def samme_gaussian(n: int, seed: int = 0, n_features: int = 10, n_classes: int = 3):
    """Zhu, Zou, Rosset and Hastie (2009) simulation, as in scikit-learn's SAMME example.

    ``X ~ N(0, I_10)``; the classes cut the squared radius ``sum_j X_j^2`` at the quantiles of the
    chi-square(10) distribution (estimated from a large seeded reference sample) into
    ``n_classes`` classes of equal probability.

    Args:
      n: the number of rows.
      seed: the random generator's seed.
      n_features: the number of features.
      n_classes: the number of classes.

    Returns:
      ``(X (n, n_features) float32, y (n,) float32)`` with labels ``0 .. n_classes - 1``.
    """
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, n_features))
    r2 = np.sum(X * X, axis=1)
    ref = np.sum(np.random.default_rng(12345).standard_normal((200_000, n_features)) ** 2, axis=1)
    cuts = np.quantile(ref, np.arange(1, n_classes) / n_classes)
    y = np.searchsorted(cuts, r2).astype(np.float32)
    return X.astype(np.float32), y


def waveform(n: int, seed: int = 0):
    """Breiman, Friedman, Olshen and Stone's (1984) waveform generator, 21 features, 3 classes.

    As quoted by Zhu, Rosset, Zou and Hastie ("Multi-class AdaBoost", 2006 preprint, Section 4.1):
    ``x_j = u v_a(j) + (1 - u) v_b(j) + eps_j`` for ``j = 1..21`` with ``u ~ U(0, 1)``,
    ``eps_j ~ N(0, 1)``, the triangular waves ``v1(j) = max(6 - |j - 11|, 0)``,
    ``v2(j) = v1(j - 4)``, ``v3(j) = v1(j + 4)``, and ``(a, b)`` = (1, 2), (1, 3), (2, 3) for the
    classes 0, 1, 2 (equally likely). The Bayes error is 0.140 (Breiman et al.).

    ``jboost.datasets.load_waveform`` reads UCI's 5,000 generated rows instead; this draws as
    many fresh rows as an experiment needs (e.g. ten independent 300 / 5,000 splits).

    Args:
      n: the number of rows.
      seed: the random generator's seed.

    Returns:
      ``(X (n, 21) float32, y (n,) float32)`` with labels 0, 1, 2.
    """
    rng = np.random.default_rng(seed)
    j = np.arange(1, 22)
    v1 = np.maximum(6 - np.abs(j - 11), 0)
    waves = np.stack([v1, np.maximum(6 - np.abs(j - 4 - 11), 0), np.maximum(6 - np.abs(j + 4 - 11), 0)])
    pairs = np.array([[0, 1], [0, 2], [1, 2]])
    y = rng.integers(0, 3, n)
    u = rng.uniform(size=(n, 1))
    X = u * waves[pairs[y, 0]] + (1 - u) * waves[pairs[y, 1]] + rng.standard_normal((n, 21))
    return X.astype(np.float32), y.astype(np.float32)


def make_classification(n: int, n_features: int = 50, n_informative: int = 20, seed: int = 0,
                        flip: float = 0.01):
    """Binary classification like scikit-learn's: ``n_informative`` Gaussian features drive a
    random nonlinear score; the other features are noise; a fraction ``flip`` of labels flipped.

    Args:
      n: the number of rows.
      n_features: the number of features.
      n_informative: the number of features the score depends on.
      seed: the random generator's seed.
      flip: the fraction of labels flipped.

    Returns:
      ``(X (n, n_features) float32, y (n,) float32)`` with balanced 0/1 labels.
    """
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, n_features)).astype(np.float32)
    inf = X[:, :n_informative]
    w1 = rng.standard_normal((n_informative,))
    w2 = rng.standard_normal((n_informative,))
    score = inf @ w1 + 0.5 * np.sin(inf @ w2) * np.abs(inf[:, 0]) + 0.3 * inf[:, 1] * inf[:, 2]
    y = (score > np.median(score)).astype(np.float32)
    flips = rng.random(n) < flip
    y[flips] = 1.0 - y[flips]
    perm = rng.permutation(n_features)
    return X[:, perm], y


def make_regression(n: int, n_features: int = 50, n_informative: int = 20, seed: int = 0,
                    noise: float = 0.5):
    """Regression with a nonlinear signal in ``n_informative`` of ``n_features`` Gaussian features.

    Args:
      n: the number of rows.
      n_features: the number of features.
      n_informative: the number of features the signal depends on.
      seed: the random generator's seed.
      noise: the standard deviation of the Gaussian noise.

    Returns:
      ``(X (n, n_features) float32, y (n,) float32)``.
    """
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, n_features)).astype(np.float32)
    inf = X[:, :n_informative]
    w = rng.standard_normal((n_informative,))
    y = inf @ w + 2.0 * np.sin(inf[:, 0] * inf[:, 1]) + np.abs(inf[:, 2]) + noise * rng.standard_normal(n)
    return X, y.astype(np.float32)


# ---- Real data -----------------------------------------------------------------------------


def data_dir(path: Optional[os.PathLike] = None) -> Path:
    """The data directory.

    Args:
      path: an explicit directory, or ``None``: the environment variable :data:`ENV_VAR`, then
        ``../shared/data`` and ``shared/data`` relative to the working directory and to the
        repository (the first holding ``spambase.csv.gz``), else ``../shared/data``.

    Returns:
      The directory as a ``Path`` (it may not exist).
    """
    if path is not None:
        return Path(path)
    if os.environ.get(ENV_VAR):
        return Path(os.environ[ENV_VAR])
    for cand in (Path.cwd() / "../shared/data", Path.cwd() / "shared/data",
                 _REPO / "../shared/data", _REPO / "shared/data"):
        if (cand / "spambase.csv.gz").exists():
            return cand.resolve()
    return (Path.cwd() / "../shared/data").resolve()


def _file(name: str, path: Optional[os.PathLike]) -> Path:
    f = data_dir(path) / name
    if not f.exists():
        raise FileNotFoundError(
            f"dataset file {name!r} not found in {data_dir(path)}. Put the benchmark CSVs "
            f"(spambase.csv.gz, california_housing.csv.gz, ...) in a directory and pass "
            f"data_dir=... (or --data-dir), or set the environment variable {ENV_VAR}; by default "
            f"jboost looks in ../shared/data."
        )
    return f


def _numeric(name: str, path) -> Tuple[np.ndarray, np.ndarray, list]:
    with gzip.open(_file(name, path), "rt", newline="") as fh:
        reader = csv.reader(fh)
        header = next(reader)
        data = np.array([[float(v) for v in row] for row in reader], dtype=np.float64)
    if header[-1] != "target":
        raise ValueError(f"{name}: the last column must be 'target', got {header[-1]!r}.")
    return data[:, :-1].astype(np.float32), data[:, -1].astype(np.float32), header[:-1]


def _loader(fn):
    """A loader of the data directory: its docstring gets the ``data_dir`` argument, the split
    it returns and the error of a missing file, which every loader shares."""
    summary, _, own = fn.__doc__.partition("\n    Args:\n")
    own = "\n" + own.rstrip() if own.strip() else ""
    fn.__doc__ = (f"{summary.rstrip()}\n\n    Args:\n      data_dir: the data directory; ``None``: "
                  f"the search order of :func:`data_dir`.{own}\n\n    Returns:\n"
                  "      ``(X_train, y_train, X_test, y_test)``, float32.\n\n    Raises:\n"
                  "      FileNotFoundError: a dataset file is not in the data directory.\n")
    return fn


def _train_test(name: str, path) -> Split:
    """A dataset of two files, ``<name>_train.csv.gz`` and ``<name>_test.csv.gz``."""
    X, y, _ = _numeric(f"{name}_train.csv.gz", path)
    Xt, yt, _ = _numeric(f"{name}_test.csv.gz", path)
    return X, y, Xt, yt


def feature_names(name: str, data_dir: Optional[os.PathLike] = None) -> list:
    """Column names (without the target) of a numeric dataset file.

    Args:
      name: the file's name (``"california_housing.csv.gz"``).
      data_dir: the data directory; ``None``: the search order of :func:`data_dir`.

    Returns:
      A list of strings.

    Raises:
      FileNotFoundError: the file is not in the data directory.
    """
    with gzip.open(_file(name, data_dir), "rt", newline="") as fh:
        return next(csv.reader(fh))[:-1]


@_loader
def load_spam(data_dir: Optional[os.PathLike] = None, shuffle: Optional[int] = None) -> Split:
    """Spambase with ESL's split: 3065 train / 1536 test rows, 57 features, 1 = spam.

    The rows come in the file's order, **sorted by class**: the 1218 spam rows of the training
    set first, then its 1847 others (test: 595, then 941). A validation set cut from the end of
    the training rows is therefore one class; pass ``shuffle`` (or draw a random validation
    subset) for early stopping.

    Args:
      shuffle: ``None``: the file's order; an int: each split's rows permuted at random with that
        seed (the same split, the same rows).
    """
    X, y, _ = _numeric("spambase.csv.gz", data_dir)
    with gzip.open(_file("spambase_esl_split.csv.gz", data_dir), "rt") as fh:
        next(fh)
        is_test = np.array([int(float(line)) for line in fh], dtype=bool)
    train, test = np.flatnonzero(~is_test), np.flatnonzero(is_test)
    if shuffle is not None:
        if isinstance(shuffle, bool) or not isinstance(shuffle, (int, np.integer)) or shuffle < 0:
            raise TypeError(f"shuffle must be None or a non-negative int seed; got {shuffle!r}.")
        rng = np.random.default_rng(int(shuffle))
        train, test = rng.permutation(train), rng.permutation(test)
    return X[train], y[train], X[test], y[test]


@_loader
def load_california(data_dir: Optional[os.PathLike] = None, seed: int = 0,
                    test_fraction: float = 0.2) -> Split:
    """California housing (20640 x 8; target in $100,000), a seeded random 80/20 split.

    Args:
      seed: the split's seed.
      test_fraction: the fraction of rows held out.
    """
    X, y, _ = _numeric("california_housing.csv.gz", data_dir)
    perm = np.random.default_rng(seed).permutation(len(y))
    n_test = int(round(test_fraction * len(y)))
    te, tr = perm[:n_test], perm[n_test:]
    return X[tr], y[tr], X[te], y[te]


@_loader
def load_letter(data_dir: Optional[os.PathLike] = None) -> Split:
    """Letter recognition, 26 classes: the standard first 16000 rows train, last 4000 test."""
    X, y, _ = _numeric("letter.csv.gz", data_dir)
    return X[:16000], y[:16000], X[16000:], y[16000:]


@_loader
def load_waveform(data_dir: Optional[os.PathLike] = None, n_train: int = 300) -> Split:
    """Waveform (21 features, 3 classes): the first ``n_train`` rows train (CART's protocol of a
    small training set), the remaining rows test.

    Args:
      n_train: the number of training rows.
    """
    X, y, _ = _numeric("waveform.csv.gz", data_dir)
    return X[:n_train], y[:n_train], X[n_train:], y[n_train:]


@_loader
def load_vowel(data_dir: Optional[os.PathLike] = None) -> Split:
    """Vowel (10 features, 11 classes), ESL's 528 train / 462 test split."""
    return _train_test("vowel", data_dir)


@_loader
def load_segmentation(data_dir: Optional[os.PathLike] = None) -> Split:
    """Image segmentation (19 features, 7 classes), the official 210 train / 2100 test split."""
    return _train_test("segmentation", data_dir)


@_loader
def load_adult(data_dir: Optional[os.PathLike] = None) -> Split:
    """Adult income (14 features, 1 = >50K), the official train/test split.

    Categorical columns become integer codes (categories sorted, from the training file; a test
    category unseen in training becomes missing); missing values are NaN.
    """
    def columns(name):
        with gzip.open(_file(name, data_dir), "rt", newline="") as fh:
            reader = csv.reader(fh)
            header = next(reader)
            rows = list(reader)
        return header, [[r[j] for r in rows] for j in range(len(header))]

    header, train = columns("adult_train.csv.gz")
    _, test = columns("adult_test.csv.gz")
    Xs, Xts = [], []
    for j, name in enumerate(header[:-1]):
        col, colt = train[j], test[j]
        try:
            Xs.append(np.array([float(v) if v != "" else np.nan for v in col], np.float32))
            Xts.append(np.array([float(v) if v != "" else np.nan for v in colt], np.float32))
        except ValueError:
            cats = sorted({v for v in col if v != ""})
            code = {c: i for i, c in enumerate(cats)}
            Xs.append(np.array([code.get(v, np.nan) for v in col], np.float32))
            Xts.append(np.array([code.get(v, np.nan) for v in colt], np.float32))
    y = np.array([float(v) for v in train[-1]], np.float32)
    yt = np.array([float(v) for v in test[-1]], np.float32)
    return np.stack(Xs, 1), y, np.stack(Xts, 1), yt
