"""The ``multiclass_table`` experiment's real AdaBoost.MH (experiments/configs/_adaboost_mh.py,
Schapire and Singer 1999) against a NumPy transcription: weights on (row, class) pairs, each
round's split the brute-force minimiser of ``Z = 2 sum_j sum_l sqrt(W+_jl W-_jl)`` over every
feature and threshold, leaves ``1/2 ln((W+ + eps) / (W- + eps))`` with ``eps = 1 / (n K)``."""

from __future__ import annotations

import numpy as np

import jboost
from experiments.configs import _adaboost_mh as mh


def z_of(D, Y, left):
    """Schapire and Singer's Z of the partition (left, right) under weights D."""
    z = 0.0
    for part in (left, ~left):
        wp, wm = (D * (Y > 0))[part].sum(0), (D * (Y < 0))[part].sum(0)
        z += 2 * np.sqrt(wp * wm).sum()
    return z


def test_rounds_minimise_z_and_their_leaves_are_the_smoothed_confidences():
    rng = np.random.default_rng(0)
    n, F, K = 300, 4, 3
    X = rng.integers(0, 10, size=(n, F)).astype(np.float32)
    y = ((X[:, 0] > 4).astype(int) + (X[:, 1] > 6) + (rng.random(n) < 0.2)) % K
    Y = 2 * np.eye(K)[y] - 1
    model = mh.adaboost_mh(X, y, n_classes=K, n_rounds=3, max_leaves=2, n_bins=16)
    staged = np.asarray(jboost.staged_predict(model, X, lambda raw: raw)).reshape(3, n, K)
    D, eps, before = np.full((n, K), 1.0 / (n * K)), 1.0 / (n * K), np.zeros((n, K))
    for r in range(3):
        step = staged[r] - before
        before = staged[r]
        left = np.all(np.isclose(step, step[0], atol=1e-6), axis=1)  # the stump's side of row 0
        assert 0 < left.sum() < n
        brute = min(z_of(D, Y, X[:, f] <= t + 0.5) for f in range(F) for t in range(9))
        assert z_of(D, Y, left) <= brute + 1e-9, r
        leaves = np.zeros((2, K))
        for j, part in enumerate((left, ~left)):
            wp, wm = (D * (Y > 0))[part].sum(0), (D * (Y < 0))[part].sum(0)
            leaves[j] = 0.5 * np.log((wp + eps) / (wm + eps))
        expected = np.where(left[:, None], leaves[0], leaves[1])
        np.testing.assert_allclose(step, expected, atol=1e-4)
        D = D * np.exp(-Y * expected)
        D /= D.sum()
