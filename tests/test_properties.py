"""Properties of ``jboost.fit`` on random small cases (Hypothesis; issue 14's property test).

Every case draws a shape (``n <= 300`` rows, ``F <= 6`` features; tied, constant and missing
columns), sample weights (with zeros), a NaN pattern, a loss (squared error, binomial deviance,
multinomial deviance with K = 3, log-cosh as a plain function, Huber), the depth, ``n_bins``, the
number of rounds, every continuous hyperparameter and the key, and checks

* every output is finite, and the predictions recomputed from the model (``jboost.predict``,
  then the loss, weighted mean) equal the last round's ``train_loss``;
* the same key and data give bitwise the same model (trees, baseline, losses);
* a vmapped sweep, the CPU kernel against pure JAX, and (in a subprocess with three XLA host
  devices) 2 or 3 devices against one, give the separate single-device fit **up to float
  rounding, where a near-tie may go the other way** -- the README's numerical contract, checked
  by :func:`compare` (below): every split, leaf value and training loss of the second model is
  one that the float32 rounding of the first model's gradient and hessian sums allows; where
  rounding decides (two splits' gains within rounding of each other, a leaf's hessian sum within
  rounding of ``min_child_weight``, or ``H + l2`` within rounding of 0), the models may part, and
  the comparison stops there. Whether a node is empty is no rounding question: it is decided by
  its rows (``test_saturated_leaf_same_on_one_and_two_devices``).

``test_comparison_rejects_a_real_difference`` shows the comparison fails where the difference
is not rounding (a perturbed leaf value, a split that is not a tie).
"""

from __future__ import annotations

import functools
import os
import subprocess
import sys
from pathlib import Path
from typing import NamedTuple

import hypothesis
import hypothesis.strategies as st
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from tests import _processes

import jboost
from jboost import _native
from jboost.losses import derivatives
from jboost import losses
from jboost.engine import samplers
from _pure_jax import accelerator_paths, pure_jax

U = 2.0 ** -24            # float32 unit roundoff
N_MAX, F_MAX = 300, 6
HUBER_DELTA = 0.5
# Examples per run (derandomised: the same ones every run); JBOOST_PROPERTY_EXAMPLES=200 for a
# thorough run. The default keeps this module within about a minute on 2 cores.
EXAMPLES = int(os.environ.get("JBOOST_PROPERTY_EXAMPLES", "0")) or None
LOSS_NAMES = ("multinomial_deviance", "squared_error", "binomial_deviance", "log_cosh", "huber")


def log_cosh(y, f):
    """log cosh(y - f): a custom loss given as a plain per-sample function."""
    r = y - f
    return jnp.logaddexp(r, -r) - jnp.log(2.0)


LOSSES = {"squared_error": "squared_error", "binomial_deviance": "binomial_deviance",
          "multinomial_deviance": "multinomial_deviance", "log_cosh": log_cosh,
          "huber": losses.huber(delta=HUBER_DELTA)}


class Case(NamedTuple):
    X: np.ndarray
    y: np.ndarray
    loss: str
    kw: dict      # the settings of jboost.fit (sample_weight included)

    @property
    def w(self):
        w = self.kw["sample_weight"]
        return np.ones(self.X.shape[0], np.float32) if w is None else w

    def fit(self, **changes):
        return jboost.fit(self.X, self.y, LOSSES[self.loss], **{**self.kw, **changes})


def _from(lo, hi, first):
    """Integers ``lo..hi`` whose simplest value (Hypothesis's first example) is ``first``."""
    return st.integers(0, hi - lo).map(lambda i: lo + (first - lo + i) % (hi - lo + 1))


@st.composite
def cases(draw, loss_names=LOSS_NAMES):
    """A random fit: data from a drawn seed, every setting drawn. The lists put a rich choice
    first: Hypothesis's first (simplest) example is a 150 x 5 multiclass fit with scattered
    NaN, zero weights, depth 3, row and column sampling."""
    n, n_features = draw(_from(2, N_MAX, 150)), draw(_from(1, F_MAX, 5))
    loss = draw(st.sampled_from(loss_names))
    columns = draw(st.lists(st.sampled_from(["normal", "ties", "constant"]), min_size=n_features,
                            max_size=n_features))
    nan = draw(st.sampled_from(["scattered", "none", "one column"]))
    weights = draw(st.sampled_from(["uniform with zeros", "integers with zeros", "none"]))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    X = rng.normal(size=(n, n_features)).astype(np.float32)
    for f, kind in enumerate(columns):
        if kind == "ties":
            X[:, f] = rng.integers(0, 4, n)
        elif kind == "constant":
            X[:, f] = 1.0
    if nan == "scattered":
        X[rng.random((n, n_features)) < draw(st.sampled_from([0.1, 0.5]))] = np.nan
    elif nan == "one column":
        X[:, draw(st.integers(0, n_features - 1))] = np.nan
    signal = np.nan_to_num(X[:, 0]) + (np.nan_to_num(X[:, 1]) ** 2 if n_features > 1 else 0.0)
    noisy = signal + rng.normal(size=n)
    if loss == "binomial_deviance":
        y = (noisy > 0.5).astype(np.float32)
    elif loss == "multinomial_deviance":
        y = np.digitize(noisy, [0.0, 1.0]).astype(np.float32)
        y[0], y[-1] = 0.0, 2.0   # K = 3 whatever the draw
    else:
        y = noisy.astype(np.float32)
    w = None
    if weights != "none":
        w = (rng.uniform(0.0, 2.0, n) * (rng.random(n) > 0.3) if weights == "uniform with zeros"
             else rng.integers(0, 4, n)).astype(np.float32)
        w[0] = 1.0   # some weight
    kw = dict(n_rounds=draw(_from(1, 4, 3)), depth=draw(_from(1, 4, 3)),
              n_bins=draw(st.sampled_from([16, 3, 4, 8, 32, 256])),
              learning_rate=draw(st.sampled_from([0.3, 0.1, 1.0])),
              l2=draw(st.sampled_from([1.0, 0.0, 0.1])),
              min_child_weight=draw(st.sampled_from([1.0, 0.0, 1e-3])),
              min_split_gain=draw(st.sampled_from([0.0, 0.01])),
              subsample=draw(st.sampled_from([0.7, 1.0])), colsample=draw(st.sampled_from([0.6, 1.0])),
              colsample_by=draw(st.sampled_from(["level", "tree"])), key=draw(st.integers(0, 2**31 - 1)),
              sample_weight=w)
    if loss == "multinomial_deviance":
        kw["per_output_trees"] = draw(st.booleans())
    return Case(X, y, loss, kw)


# --------------------------------------------------------------------------------------------
# The comparison: equal up to float rounding; a differing split or leaf a near-tie.
#
# Two fits that "agree up to float rounding" build the same gradient and hessian sums up to
# rounding: float32 sums of n terms, in any order and after subtracting cumulative sums, are
# exact to about 2 n U of the sum of the terms' magnitudes (Higham, Accuracy and Stability of
# Numerical Algorithms, 2nd ed., Section 4.2), plus a few U per term for the terms themselves.
# Where the two models' raw scores before a round already differ by `drift`, each row's gradient
# and hessian differ by at most 2 h drift (|dg/draw| <= 2h and |dh/draw| <= 2h for every loss
# drawn here: squared error, Huber, log-cosh, binomial and multinomial deviance). So each sum of
# a (round, tree) is known to an interval; the comparison replays the model ``a`` in float64 and
# checks that every choice of ``b`` lies in what these intervals allow:
#
# * a split where the models differ: the two splits' gain intervals overlap (a near-tie);
# * a leaf value -G / (H + l2): inside the interval, unless the leaf's hessian sum is within its
#   error of min_child_weight (then the leaf may keep its parent's value, see
#   jboost.trees.family.newton_leaf_values; whether a node is empty is decided exactly, by its rows) or
#   H + l2 is within its error of 0 (then any value is rounding): from there on the models may
#   legitimately differ, and the comparison stops;
# * the training loss of every round up to there: the two models' predictions' losses.
# --------------------------------------------------------------------------------------------


def _np(model):
    return jax.tree_util.tree_map(np.asarray, model)


def assert_bitwise_equal(a, b):
    for (path, x), y in zip(jax.tree_util.tree_leaves_with_path(_np(a)), jax.tree_util.tree_leaves(_np(b))):
        np.testing.assert_array_equal(x, y, err_msg=jax.tree_util.keystr(path))


def first_split_difference(a, b):
    """``(round, tree, level)`` of the first split (in fitting order) where ``a`` and ``b``
    differ, or ``None``."""
    ta, tb = _np(a.trees), _np(b.trees)
    differ = ((ta.features != tb.features) | (ta.thresholds != tb.thresholds)
              | (ta.missing_right != tb.missing_right))
    where = np.argwhere(differ)   # row-major: rounds, then trees, then levels
    return None if len(where) == 0 else tuple(int(i) for i in where[0])


class Sums:
    """Float64 gradient/hessian sums of row subsets of one (round, tree), with error bounds."""

    def __init__(self, g, h, drift):
        self.g, self.h = g, h
        n = g.shape[0]
        self.err_g = (2 * n + 4) * U * np.abs(g).sum(0) + 2 * drift * h.sum(0)   # (K,)
        self.err_h = (2 * n + 4) * U * h.sum(0) + 2 * drift * h.sum(0)
        self.takes_part = np.any(g != 0, axis=1) | np.any(h != 0, axis=1)   # the tree's rows

    def of(self, rows):
        return self.g[rows].sum(0), self.h[rows].sum(0)

    def reached(self, rows):
        """Whether a row of the tree reaches the node (exact: a row count, not a float sum)."""
        return bool(np.any(self.takes_part[rows]))


def _ratio(G, eG, D, eD):
    """Interval of ``G / D`` for ``G`` in ``G +- eG``, ``D`` in ``D +- eD``; ``None`` when ``D``
    may be 0."""
    if np.any(D - eD <= 0):
        return None
    corners = [(G + s * eG) / (D + t * eD) for s in (-1, 1) for t in (-1, 1)]
    return np.min(corners, 0), np.max(corners, 0)


def _score(sums, rows, l2):
    """Interval of ``S = sum_k G_k^2 / (H_k + l2)`` (a term with ``H_k + l2 <= 0`` is 0)."""
    G, H = sums.of(rows)
    lo = hi = 0.0
    for k in range(G.shape[0]):
        if H[k] + l2 + sums.err_h[k] <= 0:
            continue
        g_lo = max(abs(G[k]) - sums.err_g[k], 0.0)
        g_hi = abs(G[k]) + sums.err_g[k]
        d_lo = H[k] + l2 - sums.err_h[k]
        lo += g_lo ** 2 / (H[k] + l2 + sums.err_h[k])
        hi += np.inf if d_lo <= 0 else g_hi ** 2 / d_lo
    return lo, hi


def _admitted(sums, rows, min_child_weight):
    """Whether a node's hessian sum is >= min_child_weight: True, False, or None when that is
    within rounding."""
    H, err = sums.of(rows)[1].sum(), sums.err_h.sum()
    if H - err >= min_child_weight:
        return True
    if H + err < min_child_weight:
        return False
    return None


def _gain(sums, bins, leaf, split, kw):
    """Interval of the value of a split (its gain minus min_split_gain, splits.py's formula)."""
    feature, threshold, missing_right = split
    col = bins[feature].astype(np.int64)
    right = np.where(col == kw["n_bins"] - 1, missing_right, col > threshold)
    lo = hi = -kw["min_split_gain"]
    for l in np.unique(leaf):
        rows = leaf == l
        (l_lo, l_hi), (r_lo, r_hi), (p_lo, p_hi) = (_score(sums, rows & ~right, kw["l2"]),
                                                    _score(sums, rows & right, kw["l2"]),
                                                    _score(sums, rows, kw["l2"]))
        c_lo, c_hi = l_lo + r_lo - p_hi, l_hi + r_hi - p_lo
        ok = [_admitted(sums, rows & side, kw["min_child_weight"]) for side in (~right, right)]
        if False in ok:
            continue
        if None in ok:
            c_lo, c_hi = min(c_lo, 0.0), max(c_hi, 0.0)
        lo, hi = lo + c_lo, hi + c_hi
    return lo, hi


def _leaf_intervals(sums, leaf, depth, kw):
    """Per final leaf: the interval of its Newton value ``-G / (H + l2)`` (before shrinkage),
    following tree.newton_leaf_values' fallback to the parent (a node no row reaches, or whose
    hessian sum is below min_child_weight); ``None`` where rounding decides."""
    out = []
    for l in range(2 ** depth):
        value = None
        for j in range(depth + 1):
            rows = (leaf % (2 ** j)) == (l % (2 ** j))
            ok = True if j == 0 else sums.reached(rows) and _admitted(sums, rows, kw["min_child_weight"])
            if ok is None:
                return None
            if ok:
                G, H = sums.of(rows)
                r = _ratio(G, sums.err_g, H + kw["l2"], sums.err_h)
                if r is None:
                    return None
                value = (-r[1], -r[0])
        out.append(value)
    return out


@functools.partial(jax.jit, static_argnames="n")
def _row_sample(seed, m, subsample, *, n):
    """Round ``m``'s row weights: ``fold_in(key, m)`` split into (rows, columns), Bernoulli rows."""
    rows_key = jax.random.split(jax.random.fold_in(jax.random.PRNGKey(seed), m))[0]
    return samplers.bernoulli_rows(rows_key, n, jnp.float32(subsample))


@jax.jit
def _at_scores(loss, y, raws, learning_rate):
    """Gradients, Newton curvatures (those of a fit at ``learning_rate``: see
    :func:`jboost.losses.derivatives.grad_hess`) ``(S, n, K)`` and per-row losses ``(S, n)`` at raw
    scores ``(S, n, K)``."""
    def one(raw):
        g, h = derivatives.grad_hess(loss, y, raw, learning_rate=learning_rate)
        return g, h, losses.per_sample_losses(loss, y, raw)
    return jax.vmap(one)(raws)


def _round_sums(case, m, g, h, drift):
    """Per tree of round ``m``, the weighted float64 gradients and hessians ``g, h`` (at ``a``'s
    raw scores) of the rows it was grown on (documented randomness: ``fold_in(key, m)``,
    Bernoulli rows)."""
    w = case.w * np.asarray(_row_sample(case.kw["key"], m, case.kw["subsample"], n=case.X.shape[0]))
    g, h = (np.asarray(v, np.float64) * w[:, None] for v in (g, h))
    if case.kw.get("per_output_trees"):
        return [Sums(g[:, k:k + 1], h[:, k:k + 1], drift) for k in range(g.shape[1])]
    return [Sums(g, h, drift)]


def _leaves(trees, m, t, bins, depth, n_bins):
    leaf = np.zeros(bins.shape[1], np.int64)
    for j in range(depth):
        col = bins[trees.features[m, t, j]].astype(np.int64)
        right = np.where(col == n_bins - 1, trees.missing_right[m, t, j], col > trees.thresholds[m, t, j])
        leaf += right.astype(np.int64) << j
    return leaf


def _raw_before_rounds(model, X):
    """``(R + 1, n, K)``: the raw scores before every round and after the last."""
    n, k = X.shape[0], np.asarray(model.baseline).shape[-1]
    staged = np.asarray(jboost.staged_predict(model, X), np.float64).reshape(-1, n, k)
    return np.concatenate([np.broadcast_to(np.asarray(model.baseline, np.float64), (1, n, k)), staged])


def compare(a, b, case):
    """Where ``b`` leaves what float rounding allows of ``a`` (None: nowhere), as a message."""
    kw, n = case.kw, case.X.shape[0]
    ta, tb = _np(a.trees), _np(b.trees)
    n_rounds, n_trees, depth = ta.features.shape
    if not np.array_equal(np.asarray(a.baseline), np.asarray(b.baseline)):
        return f"baselines {a.baseline} != {b.baseline}"
    raw_a, raw_b = _raw_before_rounds(a, case.X), _raw_before_rounds(b, case.X)
    y, lr = jnp.asarray(case.y), kw["learning_rate"]
    grad, hess, loss_a = (np.asarray(v, np.float64) for v in _at_scores(a.loss, y, jnp.asarray(raw_a, jnp.float32), lr))
    loss_b = np.asarray(_at_scores(a.loss, y, jnp.asarray(raw_b, jnp.float32), lr)[2], np.float64)
    bins = np.asarray(jboost.bin_features(case.X, a.borders))
    w = case.w.astype(np.float64)
    for m in range(n_rounds):
        drift = float(np.max(np.abs(raw_a[m] - raw_b[m])))
        diverged = False
        for t, sums in enumerate(_round_sums(case, m, grad[m], hess[m], drift)):
            for d in range(depth):
                sa = (ta.features[m, t, d], ta.thresholds[m, t, d], ta.missing_right[m, t, d])
                sb = (tb.features[m, t, d], tb.thresholds[m, t, d], tb.missing_right[m, t, d])
                if sa != sb:   # a near-tie: the two splits' value intervals overlap
                    leaf = _leaves(ta, m, t, bins, d, kw["n_bins"])
                    va, vb = ((_gain(sums, bins, leaf, s, kw) if g != 0 else (0.0, 0.0))
                              for s, g in ((sa, ta.gains[m, t, d]), (sb, tb.gains[m, t, d])))
                    if va[1] < vb[0] or vb[1] < va[0]:
                        return (f"split (round {m}, tree {t}, level {d}) differs and is not a near-tie: "
                                f"value intervals {va} and {vb}")
                    return None
            if case.loss == "huber":
                # An exact refit (ESL Algorithm 10.3 2(c); jboost.trees.refit.huber_leaf_values):
                # median + mean of clipped deviations moves by at most 3 x the residuals' drift.
                bound = lr * (3 * drift + (2 * n + 4) * U * (np.abs(case.y).max() + np.abs(raw_a[m]).max()
                                                             + HUBER_DELTA))
                got = np.abs(ta.leaf_values[m, t] - tb.leaf_values[m, t]).max()
                if got > bound + 4 * U * np.abs(ta.leaf_values[m, t]).max():
                    return f"round {m} tree {t}: Huber leaf values differ by {got:.3g} > {bound:.3g}"
                continue
            intervals = _leaf_intervals(sums, _leaves(ta, m, t, bins, depth, kw["n_bins"]), depth, kw)
            if intervals is None:
                diverged = True    # rounding decides a leaf's value: the models may part here
                continue
            k = slice(t, t + 1) if kw.get("per_output_trees") else slice(None)
            for l, (lo, hi) in enumerate(intervals):
                vb = tb.leaf_values[m, t, l, k].astype(np.float64)
                slack = 4 * U * np.abs(vb)
                if np.any(vb < lr * lo - slack) or np.any(vb > lr * hi + slack):
                    return (f"round {m} tree {t} leaf {l}: value {vb} outside the rounding interval "
                            f"[{lr * lo}, {lr * hi}]")
        # The training loss after round m: the losses of the two models' scores, up to rounding.
        la, lb, ga = loss_a[m + 1], loss_b[m + 1], np.abs(grad[m + 1]).sum(1)
        scale = np.abs(raw_a[m + 1]).max()
        bound = (np.sum(w * np.abs(la - lb)) + (2 * n + 4) * U * np.sum(w * (np.abs(la) + ga * scale))) / w.sum()
        got = abs(float(np.asarray(a.train_loss)[m]) - float(np.asarray(b.train_loss)[m]))
        if got > bound:
            return f"train_loss[{m}] differs by {got:.3g} > {bound:.3g}"
        if diverged:
            return None
    return None


def assert_same_up_to_near_ties(a, b, case, what):
    """``b`` is ``a`` up to float rounding: every split and leaf value where they differ is one
    that rounding decides (see above)."""
    problem = compare(a, b, case)
    assert problem is None, f"{what}: {problem}"


# --------------------------------------------------------------------------------------------
# The properties
# --------------------------------------------------------------------------------------------


def assert_train_loss_recomputed(model, case):
    raw = jnp.asarray(jboost.predict(model, case.X)).reshape(1, case.X.shape[0], -1)
    per_row = np.asarray(_at_scores(model.loss, jnp.asarray(case.y), raw, case.kw["learning_rate"])[2][0], np.float64)
    w = case.w.astype(np.float64)
    # Non-negative terms: float32 sums of n <= 300 of them are exact to n * U ~ 1.8e-5.
    np.testing.assert_allclose(np.sum(w * per_row) / np.sum(w), np.asarray(model.train_loss)[-1],
                               rtol=2e-5)


@pytest.mark.slow
@hypothesis.settings(max_examples=EXAMPLES or 3)
@hypothesis.given(case=cases())
def test_fit_properties(case):
    model = case.fit()
    for name in ("leaf_values", "gains"):
        assert np.all(np.isfinite(np.asarray(getattr(model.trees, name)))), name
    for name in ("baseline", "train_loss"):
        assert np.all(np.isfinite(np.asarray(getattr(model, name)))), name
    assert np.all(np.isfinite(np.asarray(jboost.predict(model, case.X))))
    assert_train_loss_recomputed(model, case)
    # Same key, same data, same device: bitwise the same model.
    assert_bitwise_equal(case.fit(), model)
    # A vmapped sweep over traced hyperparameters: each member is its separate fit.
    lr, l2 = case.kw["learning_rate"], case.kw["l2"]
    other = dict(learning_rate=0.5 * lr, l2=l2 + 0.5)
    sweep = jax.vmap(lambda a, b: case.fit(learning_rate=a, l2=b))(
        jnp.asarray([lr, other["learning_rate"]], jnp.float32), jnp.asarray([l2, other["l2"]], jnp.float32))
    member = lambda i: jax.tree_util.tree_map(lambda x: x[i], sweep)
    assert_same_up_to_near_ties(model, member(0), case, "vmap member 0")
    separate = case.fit(**other)
    assert_same_up_to_near_ties(separate, member(1), case._replace(kw={**case.kw, **other}), "vmap member 1")
    # The kernel against pure JAX.
    if _native.available():
        assert_same_up_to_near_ties(model, pure_jax(case.fit), case, "pure JAX")
    # The branches GPUs and TPUs take (one spread scatter for all features), traced on the CPU.
    assert_same_up_to_near_ties(model, accelerator_paths(case.fit), case, "accelerator path")


def test_comparison_rejects_a_real_difference():
    # The comparison is no tautology: a leaf value off by more than rounding, or a split that is
    # not a tie (another learning rate changes round 1's gradients), fails it.
    rng = np.random.default_rng(0)
    X = rng.normal(size=(120, 3)).astype(np.float32)
    y = (X[:, 0] + X[:, 1] ** 2 + 0.1 * rng.normal(size=120)).astype(np.float32)
    kw = dict(n_rounds=3, depth=3, n_bins=16, learning_rate=0.3, l2=1.0, min_child_weight=1.0,
              min_split_gain=0.0, subsample=1.0, colsample=1.0, colsample_by="tree", key=0,
              sample_weight=None)
    case = Case(X, y, "squared_error", kw)
    model = case.fit()
    assert_same_up_to_near_ties(model, model, case, "itself")
    values = np.asarray(model.trees.leaf_values).copy()
    values[0, 0] *= 1.0 + 1e-2   # round 0's leaf values off by 1e-2 (relative)
    perturbed = model._replace(trees=model.trees._replace(leaf_values=jnp.asarray(values)))
    with pytest.raises(AssertionError, match="outside the rounding interval"):
        assert_same_up_to_near_ties(model, perturbed, case, "perturbed")
    # Round 0's first level moved to another threshold (everything else kept): not a tie.
    thresholds = np.asarray(model.trees.thresholds).copy()
    thresholds[0, 0, 0] = (thresholds[0, 0, 0] + 5) % 14
    moved = model._replace(trees=model.trees._replace(thresholds=jnp.asarray(thresholds)))
    assert first_split_difference(model, moved) == (0, 0, 0)
    with pytest.raises(AssertionError, match="not a near-tie"):
        assert_same_up_to_near_ties(model, moved, case, "moved")


# --------------------------------------------------------------------------------------------
# Several devices: run here when the session has several, else in a subprocess with three.
# --------------------------------------------------------------------------------------------


@pytest.mark.skipif(len(jax.devices()) < 2, reason="one device (test_sharded_in_a_subprocess runs this)")
@hypothesis.settings(max_examples=EXAMPLES or 2)
@hypothesis.given(case=cases(), data=st.data())
def test_sharded_fit_equals_single_device_fit(case, data):
    n_devices = data.draw(st.integers(2, len(jax.devices())), label="devices")
    model = case.fit()
    sharded = case.fit(devices=jax.devices()[:n_devices])
    assert_same_up_to_near_ties(model, sharded, case, f"{n_devices} devices")


@pytest.mark.skipif(len(jax.devices()) < 2, reason="one device (test_sharded_in_a_subprocess runs this)")
def test_saturated_leaf_same_on_one_and_two_devices():
    # Issue 14 (found by the property test): the 26 rows of the right leaf have log-cosh hessians
    # that underflow (~1e-38 or 0). Their direct sum (one device, depth 1) is 3.7e-36 > 0; the
    # sharded path's difference of cumulative sums is exactly 0. When a node was empty iff its
    # hessian sum was <= 0, one device gave the leaf -G / l2 = 260 and two devices the parent's
    # value (-0.0): predictions 260 apart with the same splits. Emptiness is now decided by the
    # rows that reach a node, so both give 260.
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 1)).astype(np.float32)
    y = (np.where(X[:, 0] > 1.0, 44.0, 0.0) + rng.normal(size=200)).astype(np.float32)
    kw = dict(n_rounds=3, depth=1, n_bins=16, learning_rate=1.0, l2=0.1, min_child_weight=0.0)
    # As drawn, and sorted so that the saturated rows all sit on the second device (the first
    # sees none of them: the devices' row counts are summed, or the first takes the leaf for empty).
    # The Newton leaves (hessian="autodiff"): a custom loss's default, hessian="auto", takes
    # these zero-curvature rows to exact leaf minimisers instead (issue 16).
    newton = jboost.Loss(log_cosh, name="log_cosh", hessian="autodiff")
    order = np.argsort(X[:, 0], kind="stable")
    for rows in (slice(None), order):
        one = jboost.fit(X[rows], y[rows], newton, **kw)
        two = jboost.fit(X[rows], y[rows], newton, devices=jax.devices()[:2], **kw)
        np.testing.assert_array_equal(two.trees.thresholds, one.trees.thresholds)
        np.testing.assert_allclose(two.trees.leaf_values, one.trees.leaf_values, rtol=1e-5, atol=1e-5)
        assert float(one.trees.leaf_values[0, 0, 1, 0]) == pytest.approx(260.0)


@pytest.mark.subprocess
@pytest.mark.slow
@pytest.mark.skipif(len(jax.devices()) >= 2, reason="several devices: the tests run directly")
def test_sharded_in_a_subprocess():
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=3", JAX_PLATFORMS="cpu")
    proc = _processes.run(
        [sys.executable, "-m", "pytest", "-x", "-p", "no:cacheprovider",
         f"{Path(__file__)}::test_sharded_fit_equals_single_device_fit",
         f"{Path(__file__)}::test_saturated_leaf_same_on_one_and_two_devices"],
        quiet=90, what="pytest on 3 host devices", env=env, cwd=Path(__file__).parent.parent)
    assert proc.returncode == 0 and "2 passed" in proc.stdout, proc.stdout[-6000:] + proc.stderr[-3000:]
