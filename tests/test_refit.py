"""The exact leaf search of jboost/trees/refit.py (issue 16: custom losses with degenerate curvature).

:func:`jboost.trees.refit.exact_leaf_values` minimises each leaf's loss by autodiff bracketing and
bisection, with no curvature. Checked against the closed forms (the weighted quantile of the
residuals for a pinball or absolute loss), against brute force in float64 (Huber, where the
built-in refit is Friedman's one-step approximation; the binomial deviance), and on non-convex
losses (a local minimum, never a rise of the shrunk step's leaf loss).
The closed-form refits themselves are tested in ``tests/test_tree.py``.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.optimize import minimize_scalar

import jboost
from jboost import losses
from jboost.trees import refit

L = 8  # leaves; leaf L - 1 holds no row and leaf L - 2 only zero-weight rows

exact_jit = jax.jit(refit.exact_leaf_values, static_argnums=5)
quantile_jit = jax.jit(refit.quantile_leaf_values, static_argnums=4)


def pinball(y, f, alpha):
    return jnp.maximum(alpha * (y - f), (alpha - 1) * (y - f))


def absolute(y, f):
    return jnp.abs(y - f)


def cauchy(y, f):
    return jnp.log1p((y - f) ** 2)


def _data(seed, n=300, unit_weights=False):
    rng = np.random.default_rng(seed)
    y = (2.0 * rng.standard_t(3, size=n)).astype(np.float32)
    raw = (0.5 * rng.normal(size=(n, 1))).astype(np.float32)
    w = np.ones(n, np.float32) if unit_weights else rng.uniform(0.2, 2.0, n).astype(np.float32)
    leaf = rng.integers(0, L - 1, n).astype(np.int32)
    w[leaf == L - 2] = 0.0
    return y, raw, w, leaf


def _leaf_loss(fn, y, raw, w, leaf, values):
    """``(L,)`` float64 weighted loss of every leaf at ``raw + values[leaf]``."""
    f = raw[:, 0].astype(np.float64) + np.asarray(values, np.float64)[leaf, 0]
    return np.bincount(leaf, weights=w * fn(y.astype(np.float64), f), minlength=L)


def _pinball_np(alpha):
    return lambda y, f: np.maximum(alpha * (y - f), (alpha - 1) * (y - f))


@pytest.mark.parametrize("alpha", [0.1, 0.5, 0.9])
def test_exact_search_of_a_hand_written_pinball_is_the_weighted_quantile(alpha):
    y, raw, w, leaf = _data(1)
    loss = jboost.Loss(pinball, params={"alpha": alpha})
    got = np.asarray(exact_jit(loss, y, raw, w, leaf, L))
    want = np.asarray(quantile_jit(y, raw, w, leaf, L, alpha, np.zeros((L, 1), np.float32)))
    # The kink the closed form picks, to float32 rounding of the bisection's last step.
    np.testing.assert_allclose(got, want, rtol=2e-6, atol=2e-6)
    assert got[L - 1, 0] == 0.0 and got[L - 2, 0] == 0.0  # no weighted row: no move
    # The same for the absolute error at alpha = 0.5, and equivariant in the labels' scale.
    if alpha == 0.5:
        np.testing.assert_allclose(exact_jit(jboost.Loss(absolute), y, raw, w, leaf, L), want,
                                   rtol=2e-6, atol=2e-6)
        for c in (1e-3, 1e3):
            scaled = exact_jit(loss, c * y, c * raw, w, leaf, L)
            np.testing.assert_allclose(scaled, c * got, rtol=2e-6, atol=2e-6 * c)


def test_flat_minima_are_minimisers_found_whatever_the_row_order():
    # Unit weights: a leaf with an even number of rows has a flat median, every value between
    # its two middle residuals (the closed form takes the lower end; the search the end nearest
    # the current score). Both are minimisers, and the search's choice does not depend on the
    # order in which the rows' slopes are summed (a slope within rounding of 0 is 0).
    y, raw, w, leaf = _data(2, unit_weights=True)
    loss = jboost.Loss(pinball, params={"alpha": 0.5})
    got = np.asarray(exact_jit(loss, y, raw, w, leaf, L))
    want = np.asarray(quantile_jit(y, raw, w, leaf, L, 0.5, np.zeros((L, 1), np.float32)))
    at_got, at_want = (_leaf_loss(_pinball_np(0.5), y, raw, w, leaf, v) for v in (got, want))
    np.testing.assert_allclose(at_got, at_want, rtol=1e-6, atol=1e-6)
    perm = np.random.default_rng(3).permutation(len(y))
    shuffled = exact_jit(loss, y[perm], raw[perm], w[perm], leaf[perm], L)
    np.testing.assert_allclose(shuffled, got, rtol=1e-6, atol=1e-6)
    assert np.any(np.abs(got - want) > 1e-2)  # the case really has flat minima


def test_exact_search_of_huber_is_the_float64_minimiser():
    y, raw, w, leaf = _data(4)
    loss = losses.huber(delta=1.0)
    got = np.asarray(exact_jit(loss, y, raw, w, leaf, L))
    one_step = np.asarray(jax.jit(refit.huber_leaf_values, static_argnums=4)(
        y, raw, w, leaf, L, 1.0, np.zeros((L, 1), np.float32)))

    def huber(y, f):
        r = np.abs(y - f)
        return np.where(r <= 1.0, 0.5 * r * r, r - 0.5)

    r = y.astype(np.float64) - raw[:, 0]
    for j in range(L - 2):
        m = leaf == j
        best = minimize_scalar(lambda g: np.sum(w[m] * huber(r[m], g)), bounds=(-10, 10),
                               method="bounded", options={"xatol": 1e-10}).x
        np.testing.assert_allclose(got[j, 0], best, rtol=1e-5, atol=1e-5)
    # Friedman's one-step Huber refit approximates the minimiser: never below it.
    at_got, at_one_step = (_leaf_loss(huber, y, raw, w, leaf, v) for v in (got, one_step))
    assert np.all(at_got <= at_one_step + 1e-9 * np.abs(at_one_step))


def test_exact_search_of_a_smooth_loss_is_the_float64_minimiser():
    rng = np.random.default_rng(5)
    n = 400
    leaf = rng.integers(0, L, n).astype(np.int32)
    raw = rng.normal(size=(n, 1)).astype(np.float32)
    y = (rng.uniform(size=n) < 0.3 + 0.05 * leaf).astype(np.float32)  # mixed classes per leaf
    w = np.ones(n, np.float32)
    got = np.asarray(exact_jit(losses.binomial_deviance(), y, raw, w, leaf, L))
    f = raw[:, 0].astype(np.float64)
    for j in range(L):
        m = leaf == j
        deviance = lambda g: np.sum(np.logaddexp(0.0, f[m] + g) - y[m] * (f[m] + g))
        best = minimize_scalar(deviance, bounds=(-5, 5), method="bounded", options={"xatol": 1e-12}).x
        np.testing.assert_allclose(got[j, 0], best, rtol=1e-5, atol=1e-6)
    # (refit.line_search_leaf_values, damped Newton whose backtracking compares float32 leaf
    # losses, stopped 3e-4 short of it in one leaf of this case.)


def test_non_convex_leaves_are_local_minima_whose_shrunk_steps_lower_the_loss():
    y, raw, w, leaf = _data(6)
    y = 3.0 * y  # residuals far beyond 1, where the Cauchy loss is concave
    for lr in (0.1, 1.0):
        got = np.asarray(exact_jit(jboost.Loss(cauchy), y, raw, w, leaf, L, None, lr))
        cauchy_np = lambda y, f: np.log1p((y - f) ** 2)
        before = _leaf_loss(cauchy_np, y, raw, w, leaf, np.zeros((L, 1)))
        after = _leaf_loss(cauchy_np, y, raw, w, leaf, lr * got)
        assert np.all(after <= before)
        assert np.all(after[: L - 2] < before[: L - 2])
        for eps in (1e-3,):  # a local minimum: the loss rises on both sides
            for s in (-eps, eps):
                assert np.all(_leaf_loss(cauchy_np, y, raw, w, leaf, got + s)[: L - 2]
                              >= _leaf_loss(cauchy_np, y, raw, w, leaf, got)[: L - 2])


def bump(y, f):
    """Along ``f`` from 0: a shallow minimum at 0.3, a bump at 0.55 above the start, a deep
    minimum near 1.5 (doubling from ``t = 1`` brackets the deep one)."""
    r = f - y
    return (-0.5 * jnp.exp(-(((r - 0.3) / 0.1) ** 2)) + jnp.exp(-(((r - 0.55) / 0.1) ** 2))
            - 3.0 * jnp.exp(-(((r - 1.5) / 0.4) ** 2)) - 0.1 * r)


def test_the_shrunk_step_never_raises_a_leaf_loss():
    y, raw, w = np.zeros(3, np.float32), np.zeros((3, 1), np.float32), np.ones(3, np.float32)
    leaf, one = np.zeros(3, np.int32), np.ones((1, 1), np.float32)
    loss = jboost.Loss(bump)
    fn = jax.jit(refit.exact_leaf_values, static_argnums=5)
    full = float(fn(loss, y, raw, w, leaf, 1, one, 1.0)[0, 0])
    ts = np.linspace(1.0, 2.0, 100001)
    deep = ts[np.argmin(np.asarray(jax.vmap(lambda t: bump(0.0, t))(ts)))]
    assert abs(full - deep) < 1e-4  # the deep minimum along the ray
    # A third of it lands on the bump, above the start: halved once, it lands near 0.25.
    assert float(bump(0.0, full / 3)) > float(bump(0.0, 0.0))
    shrunk = float(fn(loss, y, raw, w, leaf, 1, one, 1.0 / 3)[0, 0])
    np.testing.assert_allclose(shrunk, full / 2, rtol=1e-6)
    assert float(bump(0.0, shrunk / 3)) < float(bump(0.0, 0.0))


def test_an_inactive_search_is_zero_and_vmapped_members_search_on_their_own():
    y, raw, w, leaf = _data(7)
    loss = jboost.Loss(pinball, params={"alpha": 0.5})
    fn = jax.jit(lambda active, alpha: refit.exact_leaf_values(
        loss.with_params(alpha=alpha), y, raw, w, leaf, L, active=active))
    np.testing.assert_array_equal(fn(False, 0.5), np.zeros((L, 1)))
    batched = jax.vmap(fn)(jnp.array([True, False, True]), jnp.array([0.2, 0.5, 0.8]))
    np.testing.assert_array_equal(batched[1], np.zeros((L, 1)))
    for i, alpha in ((0, 0.2), (2, 0.8)):
        np.testing.assert_allclose(batched[i], fn(True, alpha), rtol=1e-6, atol=1e-7)


def test_refit_leaf_values_dispatches_exact():
    y, raw, w, leaf = _data(8)
    loss = jboost.Loss(pinball, params={"alpha": 0.7}, hessian="unit", leaf_refit="exact")
    got = jax.jit(refit.refit_leaf_values, static_argnums=5)(loss, y, raw, w, leaf, L, jnp.zeros((L, 1)),
                                                             learning_rate=0.1)
    want = quantile_jit(y, raw, w, leaf, L, 0.7, np.zeros((L, 1), np.float32))
    np.testing.assert_allclose(got, want, rtol=2e-6, atol=2e-6)


def test_the_line_search_starts_from_zero_where_the_start_raises_the_leaf_loss():
    # A start far beyond the minimiser (leaf 0) or NaN (leaf 1): the clipped iterations (at most
    # 8 x 4 from their start) would end far off; from 0 squared error's first Newton step is exact.
    y, raw, w, leaf = _data(9)
    loss = jboost.Loss(lambda y, f: 0.5 * (y - f) ** 2, hessian="autodiff")
    init = np.full((L, 1), 0.1, np.float32)
    init[0, 0], init[1, 0] = 1000.0, np.nan
    got = np.asarray(jax.jit(refit.line_search_leaf_values, static_argnums=5)(
        loss, y, raw, w, leaf, L, init))
    r = y.astype(np.float64) - raw[:, 0]
    for j in range(L - 2):
        m = leaf == j
        np.testing.assert_allclose(got[j, 0], np.sum(w[m] * r[m]) / np.sum(w[m]), rtol=1e-4, atol=1e-5)
    np.testing.assert_array_equal(got[L - 2:], init[L - 2:])  # no hessian mass: the start kept
