"""Losses, links, baselines (jboost/losses/) and autodiff derivatives (jboost/losses/derivatives.py).

Derivatives are checked twice: against the closed forms of ESL Table 10.2 (float32, the dtype
boosting uses) and against central finite differences of the loss values (float64). Baselines
are checked against a brute-force 1-D minimisation of the weighted mean loss (golden-section
search on NumPy reference losses), or by optimality (gradient ~ 0) for K-class losses.
"""

from __future__ import annotations

import hypothesis
import hypothesis.strategies as st
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jboost
from jboost import losses
from jboost.losses import derivatives

K = 3  # classes of the K-class losses in this file

# Jitted once per (loss, shape): eager evaluation would compile every primitive separately.
grad_hess = jax.jit(jboost.grad_hess)
per_sample_losses = jax.jit(losses.per_sample_losses)


def _sigmoid(f):
    return 1.0 / (1.0 + np.exp(-f))


def _softmax(f):
    e = np.exp(f - f.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def _samme_code(y, k=K):
    code = np.full((y.shape[0], k), -1.0 / (k - 1))
    code[np.arange(y.shape[0]), y.astype(int)] = 1.0
    return code


# NumPy reference losses (float64): y (n,), f (n,) or (n, K) -> (n,).
REF_LOSS = {
    "squared_error": lambda y, f: 0.5 * (y - f) ** 2,
    "absolute_error": lambda y, f: np.abs(y - f),
    "huber": lambda y, f: np.where(np.abs(y - f) <= 1.0, 0.5 * (y - f) ** 2, np.abs(y - f) - 0.5),
    "quantile": lambda y, f: np.where(y - f >= 0, 0.3 * (y - f), (0.3 - 1) * (y - f)),
    "binomial_deviance": lambda y, f: np.logaddexp(0.0, f) - y * f,
    "exponential": lambda y, f: np.exp(-(2 * y - 1) * f),
    "poisson": lambda y, f: np.exp(f) - y * f,
    "multinomial_deviance": lambda y, f: (np.log(np.exp(f).sum(-1)) - f[np.arange(len(y)), y.astype(int)]),
    "samme_exponential": lambda y, f: np.exp(-np.sum(_samme_code(y) * f, -1) / K),
}


def make_loss(name):
    """The built-in loss under test, with the parameters the references above use."""
    return {
        "squared_error": losses.squared_error,
        "absolute_error": losses.absolute_error,
        "huber": lambda: losses.huber(delta=1.0),
        "huber_adaptive": lambda: losses.huber(delta=1.0, alpha=0.9),
        "quantile": lambda: losses.quantile(alpha=0.3),
        "binomial_deviance": losses.binomial_deviance,
        "exponential": losses.exponential,
        "poisson": losses.poisson,
        "multinomial_deviance": lambda: losses.multinomial_deviance(K),
        "samme_exponential": lambda: losses.samme_exponential(K),
    }[name]()


def closed_form(name, y, f):
    """Closed-form gradient and Newton curvature in the raw score: the second derivative for one
    output, the Gershgorin majorant ``H_kk + sum_{j != k} |H_kj|`` for K outputs (the default
    ``hessian='autodiff'``); ``hessian='unit'`` losses: 1."""
    one = np.ones_like(f)
    if name == "squared_error":
        return f - y, one
    if name == "absolute_error":
        return np.sign(f - y), one
    if name in ("huber", "huber_adaptive"):
        r = f - y
        return np.where(np.abs(r) <= 1.0, r, np.sign(r)), one
    if name == "quantile":
        return np.where(y - f > 0, -0.3, 0.7), one
    if name == "binomial_deviance":
        p = _sigmoid(f)
        return p - y, p * (1 - p)
    if name == "exponential":
        s = 2 * y - 1
        e = np.exp(-s * f)
        return -s * e, e
    if name == "poisson":
        return np.exp(f) - y, np.exp(f)
    if name == "multinomial_deviance":
        p = _softmax(f)
        onehot = np.eye(K)[y.astype(int)]
        return p - onehot, 2 * p * (1 - p)          # H = diag(p) - p p^T: XGBoost's 2 p (1 - p)
    if name == "samme_exponential":
        c = _samme_code(y)
        e = np.exp(-np.sum(c * f, -1, keepdims=True) / K)
        # H = e c c^T / K^2 (rank one): |c_k| sum_j |c_j| e / K^2, with sum_j |c_j| = 2.
        return -c / K * e, 2 * np.abs(c) / K**2 * e
    raise KeyError(name)


def sample_points(name, n=24, seed=0):
    """Labels and raw scores away from kinks (|y - f| not near 0 or delta), float64."""
    rng = np.random.default_rng(seed)
    if name in ("multinomial_deviance", "samme_exponential"):
        return rng.integers(0, K, n).astype(np.float64), rng.normal(scale=2.0, size=(n, K))
    if name in ("binomial_deviance", "exponential"):
        return rng.integers(0, 2, n).astype(np.float64), rng.normal(scale=3.0, size=n)
    if name == "poisson":
        return rng.poisson(3.0, n).astype(np.float64), rng.normal(size=n)
    y = rng.normal(size=n)
    r = rng.choice([-1, 1], n) * np.where(rng.random(n) < 0.5, rng.uniform(0.1, 0.9, n), rng.uniform(1.1, 3, n))
    return y, y + r


ALL = ["squared_error", "absolute_error", "huber", "huber_adaptive", "quantile", "binomial_deviance",
       "exponential", "poisson", "multinomial_deviance", "samme_exponential"]
UNIT_HESSIAN = {"absolute_error", "huber", "huber_adaptive", "quantile"}


def _raw2d(f):
    return f if f.ndim == 2 else f[:, None]


# --------------------------------------------------------------------------------------------
# Derivatives
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ALL)
def test_grad_hess_match_closed_form(name):
    loss = make_loss(name)
    y, f = sample_points(name)
    g, h = grad_hess(loss, jnp.asarray(y, jnp.float32), jnp.asarray(_raw2d(f), jnp.float32))
    assert g.shape == h.shape == _raw2d(f).shape and g.dtype == jnp.float32
    # The closed forms at the float32-rounded inputs.
    y32, f32 = y.astype(np.float32).astype(np.float64), f.astype(np.float32).astype(np.float64)
    g_ref, h_ref = closed_form(name, y32, f32)
    np.testing.assert_allclose(np.asarray(g), _raw2d(g_ref), rtol=2e-5, atol=2e-6)
    np.testing.assert_allclose(np.asarray(h), _raw2d(h_ref), rtol=2e-5, atol=2e-6)


@pytest.mark.parametrize("name", ALL)
def test_grad_hess_match_finite_differences_float64(name):
    y, f = sample_points(name, seed=1)
    raw = _raw2d(f)
    with jax.enable_x64(True):
        loss = make_loss(name)
        yj, rj = jnp.asarray(y), jnp.asarray(raw)
        g, h = grad_hess(loss, yj, rj)
        _, h_diag = grad_hess(loss.replace(hessian="diagonal") if name not in UNIT_HESSIAN else loss,
                              yj, rj)
        assert g.dtype == jnp.float64
        value = lambda r: np.asarray(per_sample_losses(loss, yj, jnp.asarray(r)))
        np.testing.assert_allclose(value(raw), REF_LOSS[name.replace("_adaptive", "")](y, f), rtol=1e-6)
        for k in range(raw.shape[1]):
            e1, e2 = np.zeros_like(raw), np.zeros_like(raw)
            e1[:, k], e2[:, k] = 1e-6, 1e-4
            g_fd = (value(raw + e1) - value(raw - e1)) / 2e-6
            np.testing.assert_allclose(np.asarray(g[:, k]), g_fd, rtol=1e-6, atol=1e-7)
            if name in UNIT_HESSIAN:
                np.testing.assert_array_equal(np.asarray(h[:, k]), 1.0)
                continue
            # Row k of the hessian by central differences: H_kk, then H_kj (mixed).
            row = np.zeros_like(raw)
            row[:, k] = (value(raw + e2) - 2 * value(raw) + value(raw - e2)) / 1e-8
            for j in set(range(raw.shape[1])) - {k}:
                d = np.zeros_like(raw)
                d[:, j] = 1e-4
                row[:, j] = (value(raw + e2 + d) - value(raw + e2 - d) - value(raw - e2 + d)
                             + value(raw - e2 - d)) / 4e-8
            majorant = row[:, k] + np.sum(np.abs(row), 1) - np.abs(row[:, k])
            np.testing.assert_allclose(np.asarray(h[:, k]), majorant, rtol=1e-5, atol=1e-6)
            np.testing.assert_allclose(np.asarray(h_diag[:, k]), row[:, k], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name", ["multinomial_deviance", "samme_exponential"])
def test_k_class_curvature_from_the_full_hessian(name):
    """``hessian='diagonal'``: diag(H); the default: the Gershgorin majorant of the full autodiff
    hessian, so ``diag(h) - H`` is positive semi-definite (the separable Newton model lies above
    the coupled one) and ``h >= diag(H)``; for the softmax ``h = 2 p (1 - p)``."""
    loss = make_loss(name)
    y, f = sample_points(name, n=5, seed=2)
    yj, fj = jnp.asarray(y, jnp.float32), jnp.asarray(f, jnp.float32)
    _, h = grad_hess(loss, yj, fj)
    _, h_diag = grad_hess(loss.replace(hessian="diagonal"), yj, fj)
    full = np.asarray(jax.jit(jax.vmap(jax.hessian(lambda yi, r: loss(yi, r), argnums=1)))(yj, fj))
    diag = np.diagonal(full, axis1=1, axis2=2)
    np.testing.assert_allclose(np.asarray(h_diag), diag, rtol=1e-5, atol=1e-7)
    gershgorin = diag + np.sum(np.abs(full), -1) - np.abs(diag)
    np.testing.assert_allclose(np.asarray(h), gershgorin, rtol=1e-5, atol=1e-7)
    assert np.all(np.asarray(h) >= np.asarray(h_diag)) and np.any(np.asarray(h) > np.asarray(h_diag))
    for i in range(full.shape[0]):
        assert np.linalg.eigvalsh(np.diag(np.asarray(h[i], np.float64)) - full[i]).min() > -1e-6
    if name == "multinomial_deviance":
        p = _softmax(f.astype(np.float32).astype(np.float64))
        np.testing.assert_allclose(np.asarray(h), 2 * p * (1 - p), rtol=1e-5, atol=1e-7)


def test_learning_rate_aware_curvature():
    """``grad_hess(..., learning_rate=lr)``: ``max(H_kk, lr M_k)``, traced (one compilation for a
    vmapped sweep of rates): the softmax keeps ``p (1 - p)`` up to ``lr = 1/2`` and reaches
    ``2 p (1 - p)`` at 1; one output is unchanged at any rate."""
    y, f = sample_points("multinomial_deviance", n=6, seed=5)
    yj, fj = jnp.asarray(y, jnp.float32), jnp.asarray(f, jnp.float32)
    p = _softmax(f.astype(np.float32).astype(np.float64))
    lrs = jnp.asarray([0.1, 0.5, 0.75, 1.0], jnp.float32)
    sweep = jax.jit(jax.vmap(lambda lr: jboost.grad_hess(make_loss("multinomial_deviance"), yj, fj,
                                                         learning_rate=lr)[1]))
    h = np.asarray(sweep(lrs))
    for i, scale in enumerate([1.0, 1.0, 1.5, 2.0]):
        np.testing.assert_allclose(h[i], scale * p * (1 - p), rtol=1e-5, atol=1e-7)
    yb, fb = sample_points("binomial_deviance", n=6, seed=5)
    one = [np.asarray(jboost.grad_hess(make_loss("binomial_deviance"), jnp.asarray(yb, jnp.float32),
                                       jnp.asarray(fb[:, None], jnp.float32), learning_rate=lr)[1])
           for lr in (None, 0.1, 3.0)]
    np.testing.assert_array_equal(one[0], one[1])
    np.testing.assert_array_equal(one[0], one[2])


@pytest.mark.parametrize("name", [n for n in ALL if n not in UNIT_HESSIAN | {"multinomial_deviance",
                                                                             "samme_exponential"}])
def test_one_output_curvature_is_the_second_derivative(name):
    """For one output the majorant has no off-diagonal terms: ``"autodiff"`` and ``"diagonal"``
    give bitwise the same hessians (every single-output model is unchanged by issue 14)."""
    loss = make_loss(name)
    y, f = sample_points(name, seed=3)
    yj, fj = jnp.asarray(y, jnp.float32), jnp.asarray(_raw2d(f), jnp.float32)
    _, h = grad_hess(loss, yj, fj)
    _, h_diag = grad_hess(loss.replace(hessian="diagonal"), yj, fj)
    np.testing.assert_array_equal(np.asarray(h), np.asarray(h_diag))


# --------------------------------------------------------------------------------------------
# The Newton step of coupled outputs end to end (issue 14, item 1)
# --------------------------------------------------------------------------------------------

# Shapes of the shared end-to-end fits (tests/conftest.py), lightly regularised so that the
# classical diagonal step overshoots (it rose within 6 rounds on 19 of 20 seeds of _ordinal).
STEP_KW = dict(n_rounds=6, depth=3, n_bins=32, l2=0.1, min_child_weight=0.1)


def _ordinal(k, seed, noise, n=200):
    """K ordered classes of a linear score (cut at its quantiles), ``noise`` of labels redrawn:
    leaves mix neighbouring classes, where the coupling of the softmax outputs matters."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 5)).astype(np.float32)
    s = X[:, 0] + 0.5 * X[:, 1]
    y = np.digitize(s, np.quantile(s, np.linspace(0, 1, k + 1)[1:-1]))
    flip = rng.random(n) < noise
    y[flip] = rng.integers(0, k, flip.sum())
    return X, y.astype(np.float32)


@pytest.mark.parametrize("k,per_output_trees", [(3, False), (3, True), (5, False)])
@hypothesis.settings(max_examples=8)
@hypothesis.given(seed=st.integers(0, 2**16), noise=st.floats(0.0, 0.3),
                  l2=st.floats(0.01, 1.0), learning_rate=st.floats(0.5, 1.0))
def test_multinomial_training_loss_never_rises_at_large_learning_rates(k, per_output_trees, seed, noise,
                                                                       l2, learning_rate):
    """With the default curvature (Gershgorin majorant, ``2 p (1 - p)``) the training deviance
    falls every round at learning rates up to 1, with vector leaves and with one tree per output."""
    X, y = _ordinal(k, seed, noise)
    kw = dict(STEP_KW, l2=l2, learning_rate=learning_rate, n_outputs=k,
              per_output_trees=per_output_trees)
    model = jboost.fit(X, y, "multinomial_deviance", **kw)
    tl = np.asarray(model.train_loss, np.float64)
    start = np.mean(np.asarray(per_sample_losses(
        model.loss, jnp.asarray(y), jnp.broadcast_to(model.baseline, (y.shape[0], k)))))
    assert np.all(np.diff(np.concatenate([[start], tl])) <= 1e-6 * start), tl


def test_diagonal_step_overshoots_where_the_majorant_does_not():
    """The classical diagonal (``hessian="diagonal"``) raises the training deviance at learning
    rate 1 on the same kind of data (issue 14: 0.563 -> 0.774 -> 3.558); the default does not."""
    X, y = _ordinal(3, 0, 0.1)
    curves = {kind: np.asarray(jboost.fit(X, y, losses.multinomial_deviance(3).replace(hessian=kind),
                                          learning_rate=1.0, n_outputs=3, **STEP_KW).train_loss)
              for kind in ("diagonal", "autodiff")}
    assert np.max(np.diff(curves["diagonal"])) > 0.01, curves
    assert np.all(np.diff(curves["autodiff"]) <= 0), curves


def _coupled_quadratic(y, f):
    """A custom 3-output regression loss ``(f - y)^T A (f - y) / 2`` with ``A = 0.1 I + 0.9 J``
    (eigenvalues 2.8, 0.1, 0.1): its diagonal step ``-G / A_kk`` overshoots 2.8-fold."""
    r = f - y
    return 0.05 * jnp.sum(r * r) + 0.45 * jnp.sum(r) ** 2


def _coupled_baseline(y, w, n_outputs):
    """The optimal constant of :func:`_coupled_quadratic`: the weighted mean in every output."""
    return jnp.full((n_outputs,), jnp.sum(w * y) / jnp.sum(w))


def test_a_custom_coupled_vector_loss_gets_the_safe_step():
    """Loss-agnostic: a researcher's own coupled loss gets the majorant from autodiff alone (the
    curvature is ``sum_j |A_kj| = 2.8``); the classical diagonal step diverges on it."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 5)).astype(np.float32)
    y = (X[:, 0] + 0.5 * X[:, 1] ** 2).astype(np.float32)
    loss = losses.Loss(_coupled_quadratic, n_outputs=3, baseline=_coupled_baseline)
    _, h = grad_hess(loss, jnp.asarray(y[:4]), jnp.zeros((4, 3), jnp.float32))
    np.testing.assert_allclose(np.asarray(h), 2.8, rtol=1e-6)
    kw = dict(STEP_KW, learning_rate=1.0, n_outputs=3)
    safe = np.asarray(jboost.fit(X, y, loss, **kw).train_loss)
    assert np.all(np.diff(safe) <= 0) and safe[-1] < 0.5 * safe[0], safe
    diag = np.asarray(jboost.fit(X, y, loss.replace(hessian="diagonal"), **kw).train_loss)
    assert diag[-1] > 10 * diag[0], diag


def test_a_custom_softmax_gets_the_built_in_curvature():
    """The curvature depends on the loss's values only: the multinomial deviance written by a user
    gets the built-in's ``2 p (1 - p)``."""
    custom = losses.Loss(lambda y, f: jax.nn.logsumexp(f) - f[y.astype(jnp.int32)], n_outputs=K,
                         task="multiclass")
    y, f = sample_points("multinomial_deviance", n=6, seed=4)
    yj, fj = jnp.asarray(y, jnp.float32), jnp.asarray(f, jnp.float32)
    np.testing.assert_allclose(np.asarray(grad_hess(custom, yj, fj)[1]),
                               np.asarray(grad_hess(make_loss("multinomial_deviance"), yj, fj)[1]),
                               rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("name", ["binomial_deviance", "exponential", "poisson", "multinomial_deviance",
                                  "samme_exponential"])
@pytest.mark.parametrize("margin", [1e3, 1e4])
def test_no_overflow_at_large_margins(name, margin):
    loss = make_loss(name)
    if name in ("multinomial_deviance", "samme_exponential"):
        y = np.repeat(np.arange(K), 4).astype(np.float32)
        base = np.array([[1, -1, 0], [-1, 1, 0], [1, 1, -1], [-1, -1, 1]], np.float32)
        raw = np.tile(base, (K, 1)) * margin
    else:
        labels = [0.0, 1.0] if name != "poisson" else [0.0, 5.0]
        y = np.repeat(labels, 2).astype(np.float32)
        raw = (np.array([1, -1] * 2, np.float32) * margin)[:, None]
    yj, rj = jnp.asarray(y), jnp.asarray(raw)
    value = np.asarray(per_sample_losses(loss, yj, rj))
    g, h = (np.asarray(a) for a in grad_hess(loss, yj, rj))
    for arr, what in ((value, "value"), (g, "grad"), (h, "hess")):
        assert np.all(np.isfinite(arr)), f"{name} {what} not finite at margin {margin}: {arr}"
    assert np.all(h >= 0), "hessians of convex losses are non-negative"
    if name != "poisson":
        assert np.all(value >= 0), "these losses are non-negative: a negative value is an overflow"


def test_exponential_continuation_is_smooth_and_increasing():
    # safe_exp continues exp beyond 30 by its second-order Taylor expansion: value, first and
    # second derivative match at the junction and it keeps increasing.
    z = jnp.array([29.999, 30.0, 30.001, 40.0, 1e4], jnp.float32)
    v = np.asarray(losses.safe_exp(z), np.float64)
    d1 = np.asarray(jax.vmap(jax.grad(losses.safe_exp))(z), np.float64)
    d2 = np.asarray(jax.vmap(jax.grad(jax.grad(losses.safe_exp)))(z), np.float64)
    e30 = np.exp(30.0)
    np.testing.assert_allclose(v[:3], np.exp([29.999, 30.0, 30.001]), rtol=1e-5)
    np.testing.assert_allclose(d1[:3], np.exp([29.999, 30.0, 30.001]), rtol=1e-5)
    np.testing.assert_allclose(d2[:3], [np.exp(29.999), e30, e30], rtol=1e-5)
    assert np.all(np.diff(v) > 0) and np.all(np.isfinite(v))


# --------------------------------------------------------------------------------------------
# Links
# --------------------------------------------------------------------------------------------


def test_links_hand_computed():
    f = np.array([-2.0, 0.0, 0.7], np.float32)
    p = _sigmoid(f.astype(np.float64))
    np.testing.assert_allclose(losses.sigmoid_link(jnp.asarray(f)), np.stack([1 - p, p], -1), rtol=1e-6)
    p2 = _sigmoid(2 * f.astype(np.float64))  # AdaBoost: P(y=1|x) = 1 / (1 + exp(-2f))
    np.testing.assert_allclose(losses.adaboost_link(jnp.asarray(f)), np.stack([1 - p2, p2], -1), rtol=1e-6)
    np.testing.assert_allclose(losses.exp_link(jnp.asarray(f)), np.exp(f), rtol=1e-6)
    np.testing.assert_array_equal(losses.identity_link(jnp.asarray(f)), f)
    F = np.array([[1.0, 2.0, -1.0], [0.0, 0.0, 0.0]], np.float32)
    np.testing.assert_allclose(losses.softmax_link(jnp.asarray(F)), _softmax(F), rtol=1e-6)
    np.testing.assert_allclose(losses.samme_link(jnp.asarray(F)), _softmax(F / (K - 1)), rtol=1e-6)


@pytest.mark.parametrize("name", ["binomial_deviance", "exponential", "multinomial_deviance",
                                  "samme_exponential", "poisson", "squared_error"])
def test_link_of_baseline_gives_weighted_class_frequencies(name):
    # The baseline is the population minimiser of the loss, so the link must map it back to the
    # (weighted) class frequencies / the mean: this ties each link to its loss.
    rng = np.random.default_rng(3)
    loss = make_loss(name)
    y, _ = sample_points(name, n=300, seed=4)
    w = rng.exponential(size=300)
    c = losses.baseline(loss, jnp.asarray(y, jnp.float32), jnp.asarray(w, jnp.float32))
    assert c.shape == (loss.n_outputs,)
    out = np.asarray(loss.link(c, **loss.params))
    if loss.task in ("binary", "multiclass"):
        freq = np.bincount(y.astype(int), weights=w, minlength=out.shape[-1]) / w.sum()
        np.testing.assert_allclose(out.reshape(-1), freq, rtol=1e-5)
    else:
        np.testing.assert_allclose(out, [np.sum(w * y) / w.sum()], rtol=1e-5)


# --------------------------------------------------------------------------------------------
# Baselines
# --------------------------------------------------------------------------------------------


def golden_section(fun, lo, hi, tol=1e-10):
    """Minimiser of a unimodal 1-D function (scipy-free)."""
    inv_phi = (np.sqrt(5.0) - 1) / 2
    a, b = lo, hi
    c, d = b - inv_phi * (b - a), a + inv_phi * (b - a)
    while b - a > tol:
        if fun(c) < fun(d):
            b, d = d, c
            c = b - inv_phi * (b - a)
        else:
            a, c = c, d
            d = a + inv_phi * (b - a)
    return (a + b) / 2


def _weighted_labels(name, seed):
    rng = np.random.default_rng(seed)
    y, _ = sample_points(name, n=101, seed=seed)
    if name not in ("binomial_deviance", "exponential", "poisson"):
        y = rng.standard_t(3, size=101)  # heavy tails separate mean, median and Huber's M-estimate
    w = rng.exponential(size=101)
    w[:10] = 0.0
    return y, w


@pytest.mark.parametrize("name", ["squared_error", "absolute_error", "huber", "quantile",
                                  "binomial_deviance", "exponential", "poisson"])
@pytest.mark.parametrize("seed", [0, 1])
def test_one_output_baselines_minimise_the_weighted_mean_loss(name, seed):
    y, w = _weighted_labels(name, seed)
    objective = lambda c: np.sum(w * REF_LOSS[name](y, np.full_like(y, c))) / w.sum()
    c_star = golden_section(objective, -10.0, 10.0)
    c = float(losses.baseline(make_loss(name), jnp.asarray(y, jnp.float32), jnp.asarray(w, jnp.float32))[0])
    # The baseline's weighted mean loss is the minimum (up to float32 rounding of c).
    assert objective(c) <= objective(c_star) + 1e-6 * (1 + abs(objective(c_star)))
    if name not in ("absolute_error", "quantile"):  # strictly convex: a unique minimiser
        assert abs(c - c_star) < 1e-4 * (1 + abs(c_star))


@pytest.mark.parametrize("name", ["huber_adaptive"])
def test_huber_baseline_is_the_weighted_median(name):
    # With ESL's adaptive delta, Friedman (2001), Algorithm 4 (M_TreeBoost), starts from the median,
    # not from the Huber M-estimate of location (the brute-force argmin differs on heavy tails).
    # (A fixed delta starts from the M-estimate: see the minimisation test above.)
    y, w = _weighted_labels("huber", 0)
    order = np.argsort(y)
    cw = np.cumsum(w[order])
    median = y[order][np.nonzero(cw >= 0.5 * cw[-1])[0][0]]
    c = losses.baseline(make_loss(name), jnp.asarray(y, jnp.float32), jnp.asarray(w, jnp.float32))
    assert float(c[0]) == np.float32(median)


@pytest.mark.parametrize("name", ["multinomial_deviance", "samme_exponential"])
def test_k_class_baselines_are_stationary(name):
    rng = np.random.default_rng(7)
    y = rng.choice(K, size=120, p=[0.6, 0.3, 0.1]).astype(np.float64)
    w = rng.exponential(size=120)
    c = np.asarray(losses.baseline(make_loss(name), jnp.asarray(y, jnp.float32),
                                   jnp.asarray(w, jnp.float32)), np.float64)
    objective = lambda c: np.sum(w * REF_LOSS[name](y, np.broadcast_to(c, (120, K)))) / w.sum()
    if name == "multinomial_deviance":
        grad = _softmax(c) - np.bincount(y.astype(int), weights=w, minlength=K) / w.sum()
    else:
        code = _samme_code(y)
        grad = np.sum(w[:, None] * (-code / K) * np.exp(-code @ c / K)[:, None], 0) / w.sum()
    np.testing.assert_allclose(grad, 0.0, atol=1e-5)
    for delta in rng.normal(scale=0.05, size=(20, K)):
        assert objective(c) <= objective(c + delta) + 1e-9


def test_k_class_baseline_with_an_absent_class_is_finite():
    y = jnp.asarray([0, 1, 1, 0, 1], jnp.float32)  # class 2 never occurs
    for name in ("multinomial_deviance", "samme_exponential"):
        loss = make_loss(name)
        c = losses.baseline(loss, y, jnp.ones(5, jnp.float32))
        assert np.all(np.isfinite(np.asarray(c)))
        assert float(loss.link(c)[2]) < 1e-6


def _logcosh(y, f):
    r = f - y
    return jnp.abs(r) + jax.nn.softplus(-2.0 * jnp.abs(r)) - jnp.log(2.0)


def test_numeric_baseline_of_a_custom_loss():
    y, w = _weighted_labels("huber", 3)
    loss = jboost.Loss(_logcosh)
    assert loss.baseline is None
    c = float(losses.baseline(loss, jnp.asarray(y, jnp.float32), jnp.asarray(w, jnp.float32))[0])
    objective = lambda c: np.sum(w * np.log(np.cosh(c - y))) / w.sum()
    assert abs(c - golden_section(objective, -10.0, 10.0)) < 1e-4


def test_numeric_baseline_of_a_two_output_custom_loss():
    # L = (f0 - y)^2 / 2 + (f1 - 2y)^2 / 2: the optimal constant is (mean y, 2 mean y).
    loss = jboost.Loss(lambda y, f: 0.5 * (f[0] - y) ** 2 + 0.5 * (f[1] - 2 * y) ** 2, n_outputs=2)
    y = jnp.asarray([1.0, 2.0, 4.0, -1.0], jnp.float32)
    w = jnp.asarray([1.0, 2.0, 1.0, 0.0], jnp.float32)
    np.testing.assert_allclose(np.asarray(losses.baseline(loss, y, w)), [2.25, 4.5], rtol=1e-5)


def test_weighted_quantile_matches_numpy_reference():
    rng = np.random.default_rng(8)
    v = rng.normal(size=57)
    w = rng.exponential(size=57)
    w[::5] = 0.0
    order = np.argsort(v)
    cw = np.cumsum(w[order])
    for q in (0.01, 0.1, 0.25, 0.5, 0.77, 0.9, 1.0):
        ref = v[order][np.nonzero(cw >= q * cw[-1])[0][0]]
        got = losses.weighted_quantile(jnp.asarray(v, jnp.float32), jnp.asarray(w, jnp.float32), q)
        assert float(got) == np.float32(ref), q


# --------------------------------------------------------------------------------------------
# Label checks, construction errors, pytree behaviour
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name,labels,match", [
    ("binomial_deviance", [0, 1, 2], "binary labels 0/1"),
    ("exponential", [-1, 1], "binary labels 0/1"),
    ("multinomial_deviance", [0, 1.5], r"integer class labels in \[0, 3\)"),
    ("multinomial_deviance", [0, 3], r"integer class labels in \[0, 3\)"),
    ("samme_exponential", [-1, 0], r"integer class labels in \[0, 3\)"),
    ("poisson", [0, 2, -0.5], "non-negative"),
])
def test_label_checks_reject(name, labels, match):
    with pytest.raises(ValueError, match="y must " + ".*" + match):
        losses.check_labels(make_loss(name), np.asarray(labels, np.float32))


@pytest.mark.parametrize("name,labels", [
    ("binomial_deviance", [0, 1, 1]), ("exponential", [1, 0]), ("multinomial_deviance", [0, 1, 2]),
    ("poisson", [0, 3.5, 7]), ("squared_error", [-1e6, 0.5, 3]), ("quantile", [-2, 2]),
])
def test_label_checks_accept(name, labels):
    losses.check_labels(make_loss(name), np.asarray(labels, np.float32))


def test_loss_construction_errors():
    with pytest.raises(ValueError, match="task='clustering' must be one of"):
        jboost.Loss(losses.squared_error_fn, task="clustering")
    with pytest.raises(ValueError, match="hessian='exact' must be one of .*'auto' .*the default"):
        jboost.Loss(losses.squared_error_fn, hessian="exact")
    with pytest.raises(ValueError, match="leaf_refit='mean' must be"):
        jboost.Loss(losses.squared_error_fn, leaf_refit="mean")
    with pytest.raises(ValueError, match="n_outputs=0 must be >= 1"):
        jboost.Loss(losses.squared_error_fn, n_outputs=0)
    with pytest.raises(ValueError, match="loss='hinge' is not a built-in loss"):
        losses.get("hinge")
    with pytest.raises(TypeError, match="loss must be a name, a jboost.Loss or a function"):
        losses.get(3)


def test_loss_params_are_traced_leaves():
    loss = losses.huber(delta=0.5)
    leaves = jax.tree_util.tree_leaves(loss)
    assert len(leaves) == 1 and leaves[0] is loss.params["delta"]
    y = jnp.asarray([0.0, 0.0, 0.0], jnp.float32)
    raw = jnp.asarray([[0.2], [1.0], [-3.0]], jnp.float32)
    deltas = jnp.asarray([0.5, 2.0], jnp.float32)
    batched = jax.vmap(lambda d: losses.per_sample_losses(loss.with_params(delta=d), y, raw))(deltas)
    for i, d in enumerate([0.5, 2.0]):
        np.testing.assert_allclose(np.asarray(batched[i]),
                                   np.asarray(losses.per_sample_losses(losses.huber(delta=d), y, raw)))
    np.testing.assert_allclose(np.asarray(batched[0]), [0.02, 0.375, 1.375], rtol=1e-6)


# --------------------------------------------------------------------------------------------
# Declared parameter domains and the task's default link (issue 14).
# --------------------------------------------------------------------------------------------


def test_built_in_losses_declare_their_parameter_domains():
    assert dict(losses.quantile(0.3).domains) == {"alpha": losses.Interval(0.0, 1.0)}
    assert dict(losses.huber(1.0).domains) == {"delta": losses.Interval(0.0, np.inf)}
    assert set(losses.huber(alpha=0.9).domains) == {"alpha", "delta"}
    assert not losses.squared_error().domains
    assert str(losses.PROBABILITY) == "(0, 1)" and str(losses.Interval(0, 1, False, False)) == "[0, 1]"
    np.testing.assert_array_equal(losses.PROBABILITY.contains([0.0, 0.5, 1.0, np.nan]),
                                  [False, True, False, False])
    np.testing.assert_array_equal(losses.Interval(0, 1, lo_open=False).contains([0.0, 1.0]), [True, False])


def test_domains_are_hashable_static_metadata():
    # Equal domains hash alike, so a jitted function sees the same static loss (one compilation).
    a = losses.Loss(losses.quantile_fn, params={"alpha": 0.5}, domains={"alpha": (0.0, 1.0)})
    b = losses.Loss(losses.quantile_fn, params={"alpha": 0.7}, domains={"alpha": losses.PROBABILITY})
    assert a.domains == b.domains and hash(a.domains) == hash(b.domains)
    assert jax.tree_util.tree_structure(a) == jax.tree_util.tree_structure(b)
    assert isinstance(a.domains, losses.Domains) and a.domains["alpha"] == losses.PROBABILITY
    assert jax.tree_util.tree_map(lambda x: x, a).domains == a.domains


@pytest.mark.parametrize("task,link", [("regression", losses.identity_link), ("count", losses.identity_link),
                                       ("binary", losses.sigmoid_link), ("multiclass", losses.softmax_link)])
def test_a_loss_without_a_link_gets_its_tasks(task, link):
    assert losses.Loss(losses.squared_error_fn, task=task).link is link
    assert losses.Loss(losses.squared_error_fn, task=task, link=losses.exp_link).link is losses.exp_link


def test_built_in_losses_are_recognised():
    names = ("squared_error", "absolute_error", "huber", "quantile", "binomial_deviance",
             "exponential", "multinomial_deviance", "samme_exponential", "poisson")
    assert all(losses.is_built_in(losses.get(name)) for name in names)
    assert losses.is_built_in(losses.huber(alpha=0.9))
    assert not losses.is_built_in(losses.get(lambda y, f: (y - f) ** 2))


def test_custom_losses_default_to_auto_curvature_and_built_ins_keep_theirs():
    # "auto": Newton where the curvature is positive, else least-squares trees with exact leaves
    # (jboost.engine.algorithm.newton_round); the built-ins say what they use, so their fits are unchanged.
    assert losses.get(lambda y, f: jnp.abs(y - f)).hessian == "auto"
    assert jboost.Loss(losses.squared_error_fn).hessian == "auto"
    want = {"squared_error": "autodiff", "binomial_deviance": "autodiff", "exponential": "autodiff",
            "multinomial_deviance": "autodiff", "samme_exponential": "autodiff", "poisson": "autodiff",
            "absolute_error": "unit", "huber": "unit", "quantile": "unit"}
    assert {name: losses.get(name).hessian for name in want} == want
    assert jboost.Loss(losses.quantile_fn, leaf_refit="exact").leaf_refit == "exact"


def test_curvature_is_positive_where_every_moving_row_has_positive_curvature():
    g = jnp.array([[1.0], [0.0], [-2.0], [0.5]])
    h = jnp.array([[0.5], [0.0], [1.0], [2.0]])
    w = jnp.ones(4)
    positive = jax.jit(derivatives.curvature_is_positive)
    assert bool(positive(g, h, w))  # the stationary row (g = h = 0) counts as fine
    for bad in (0.0, -1.0, np.nan):  # a kink, a concave region, a NaN
        assert not bool(positive(g, h.at[3, 0].set(bad), w))
        assert bool(positive(g, h.at[3, 0].set(bad), w.at[3].set(0.0)))  # a row of no weight
    assert not bool(positive(g.at[1, 0].set(1.0), h, w))  # h == 0 with a gradient
    # K outputs: every output of every moving row.
    assert not bool(positive(jnp.ones((4, 2)), jnp.ones((4, 2)).at[0, 1].set(0.0), w))
    # The unit curvature that replaces it: all rows (regression), rows with a gradient
    # (classification: XGBoost's binary:hinge).
    np.testing.assert_array_equal(derivatives.first_order_curvature(g, "regression"), np.ones((4, 1)))
    np.testing.assert_array_equal(derivatives.first_order_curvature(g, "binary"), [[1.0], [0.0], [1.0], [1.0]])


def test_columnwise_loss_is_its_scalar_loss_column_by_column():
    """A built-in loss of C label columns (multi-output targets): its value is the sum of the
    scalar loss over the columns, and its derivatives and baseline are each column's own."""
    rng = np.random.default_rng(0)
    y = jnp.asarray(rng.normal(size=(7, 2)), jnp.float32)
    raw = jnp.asarray(rng.normal(size=(7, 2)), jnp.float32)
    w = jnp.asarray(rng.uniform(0.5, 2.0, size=7), jnp.float32)
    one, both = losses.quantile(0.3), losses.columnwise(losses.quantile(0.3), 2)
    assert both.n_outputs == 2 and both.label_columns == 2 and losses.keeps_columns(both)

    @jax.jit
    def values():  # one program: the loss of C columns and its columns' scalar losses
        cols = [(losses.per_sample_losses(one, y[:, k], raw[:, k:k + 1]),
                 derivatives.grad_hess(one, y[:, k], raw[:, k:k + 1]),
                 losses.baseline(one, y[:, k], w)) for k in range(2)]
        return (losses.per_sample_losses(both, y, raw), derivatives.grad_hess(both, y, raw),
                losses.baseline(both, y, w), cols)

    total, (g, h), base, cols = values()
    np.testing.assert_allclose(total, cols[0][0] + cols[1][0], rtol=1e-6)
    for k, (_, (gk, hk), base_k) in enumerate(cols):
        assert np.array_equal(g[:, k], gk[:, 0]) and np.array_equal(h[:, k], hk[:, 0])
        assert base[k] == base_k[0]
    assert np.array_equal(losses.query_starts(np.array([3, 3, 1, 1, 1, 2])), [0, 2, 5])
