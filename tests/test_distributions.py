"""Distributional regression (jboost.distributions): each NLL against scipy.stats, the Fisher
information's closed forms against Monte-Carlo estimates, the natural gradient, quantiles,
intervals and CRPS, and fits end to end (the natural-gradient Normal's location trees are the
squared-error trees; a vmapped Student-t sweep over ``df`` compiles once; a model file loads
back).

Every fit uses the suite's shared shapes (``conftest.FIT_KW``) and few loss programs: the
Normal with natural gradients and one tree per parameter (also the interval and file tests),
the Student-t sweep and the negative binomial (Monte-Carlo Fisher).
"""

from __future__ import annotations

import dataclasses
import os

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import integrate
from scipy import stats

import jboost
from jboost import distributions as D
from jboost.engine import boosting as boosting_lib
from jboost.fitting import prepare
from jboost.fitting import settings
from jboost.losses import checks

ALL = (D.Normal, D.LogNormal, D.Poisson, D.NegativeBinomial, D.Gamma, D.StudentT)


def scipy_dist(dist, raw, df=3.0):
    """The scipy.stats distribution of one row's raw parameters (float64)."""
    a, b = (float(v) for v in np.asarray(raw, np.float64)[:2]) if len(raw) > 1 else (float(raw[0]), None)
    if dist is D.Normal:
        return stats.norm(a, np.exp(b))
    if dist is D.LogNormal:
        return stats.lognorm(s=np.exp(b), scale=np.exp(a))
    if dist is D.Poisson:
        return stats.poisson(np.exp(a))
    if dist is D.NegativeBinomial:
        m, r = np.exp(a), np.exp(b)
        return stats.nbinom(n=r, p=r / (r + m))
    if dist is D.Gamma:
        return stats.gamma(np.exp(a), scale=np.exp(-b))
    if dist is D.StudentT:
        return stats.t(df, a, np.exp(b))
    raise AssertionError(dist)


def rows(dist, rng, n=6):
    """``n`` raw parameter vectors and labels drawn from them (float32)."""
    raw = rng.normal(scale=0.5, size=(n, dist.n_outputs)).astype(np.float32)
    raw[:, 0] += 1.0
    y = np.array([scipy_dist(dist, r).rvs(random_state=rng) for r in raw], np.float32)
    return raw, y


@pytest.mark.slow
@pytest.mark.parametrize("dist", ALL, ids=lambda d: d.name)
def test_nll_cdf_mean_variance_and_quantiles_match_scipy(dist):
    rng = np.random.default_rng(0)
    raw, y = rows(dist, rng)
    kw = {"df": 3.0} if dist is D.StudentT else {}
    qs = jnp.asarray([0.05, 0.5, 0.95], jnp.float32)

    @jax.jit
    def compute(y, raw):
        per_row = jax.vmap(lambda v, r: (dist.nll(v, r, **kw), dist.cdf(v, r, **kw),
                                         jax.vmap(lambda q: D.quantile(dist, q, r, kw))(qs)))
        return (*per_row(y, raw), dist.mean(raw, **kw), dist.variance(raw, **kw))

    nll, cdf, quantiles, mean, var = (np.asarray(v, np.float64) for v in compute(y, raw))
    ref = [scipy_dist(dist, r) for r in raw]
    logp = [d.logpmf(v) if dist.support == "count" else d.logpdf(v) for d, v in zip(ref, y)]
    np.testing.assert_allclose(nll, -np.array(logp), rtol=2e-5, atol=2e-5)
    np.testing.assert_allclose(cdf, [d.cdf(v) for d, v in zip(ref, y)], rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(mean, [d.mean() for d in ref], rtol=1e-5)
    np.testing.assert_allclose(var, [d.var() for d in ref], rtol=1e-4)
    # Quantiles: closed forms, or bisection on the CDF (counts: the smallest count reaching q).
    np.testing.assert_allclose(quantiles, [d.ppf(np.asarray(qs, np.float64)) for d in ref], rtol=2e-4, atol=1e-4)
    assert len(dist.params(jnp.asarray(raw), **kw)) == len(dist.param_names)


def monte_carlo(dist, **changes):
    """``dist`` without its closed-form Fisher information and CRPS: the Monte-Carlo paths."""
    return dataclasses.replace(dist, name=dist.name + "_mc", fisher=None, crps=None, **changes)


@pytest.mark.parametrize("dist", ALL + (monte_carlo(D.Normal),), ids=lambda d: d.name)
def test_crps_against_its_integral(dist):
    """CRPS = int (F(x) - 1{x >= y})^2 dx: closed forms and count sums to 1e-4, the Monte-Carlo
    estimate (1000 draws) to 5%."""
    rng = np.random.default_rng(1)
    raw, y = rows(D.Normal if dist.name == "normal_mc" else dist, rng, n=3)
    kw = {"df": 3.0} if dist is D.StudentT else {}
    got = np.asarray(jax.jit(jax.vmap(lambda v, r: D.crps_one(dist, v, r, kw)))(y, raw))
    for g, r, v in zip(got, raw, y):
        d = scipy_dist(D.Normal if dist.name == "normal_mc" else dist, r)
        if dist.support == "count":
            k = np.arange(0, int(d.ppf(1 - 1e-12)) + 2)
            ref = np.sum((d.cdf(k) - (k >= v)) ** 2)
        else:
            lo = 0.0 if dist.support == "positive" else -np.inf
            ref = (integrate.quad(lambda x: d.cdf(x) ** 2, lo, v, limit=200)[0]
                   + integrate.quad(lambda x: d.sf(x) ** 2, v, np.inf, limit=200)[0])
        tol = 0.05 * ref if dist.name == "normal_mc" else 1e-4 * max(ref, 1.0)
        assert abs(g - ref) <= tol, (g, ref)


@pytest.mark.slow
@pytest.mark.parametrize("dist", [D.Normal, D.Gamma, D.StudentT], ids=lambda d: d.name)
def test_fisher_closed_forms_equal_their_monte_carlo_estimate(dist):
    """E_y[g g^T] from 40000 draws (autodiff gradients) against the closed form: within 5%,
    and -E_y[hess] (the other identity) likewise."""
    raw = jnp.asarray([0.7, -0.3][:dist.n_outputs], jnp.float32)
    kw = {"df": 3.0} if dist is D.StudentT else {}

    @jax.jit
    def estimates(key_mc, key_hess):
        mc = D.fisher_information(monte_carlo(dist), raw, kw, n_mc_samples=40000, key=key_mc)
        ys = dist.sample(key_hess, raw, 40000, **kw)
        hess = jax.vmap(lambda v: jax.hessian(lambda r: dist.nll(v, r, **kw))(raw))(ys)
        return mc, jnp.mean(hess, axis=0)

    closed = np.asarray(D.fisher_information(dist, raw, kw))
    mc, neg_hess = (np.asarray(v) for v in estimates(jax.random.key(3), jax.random.key(4)))
    scale = np.abs(closed).max()
    np.testing.assert_allclose(mc, closed, atol=0.05 * scale, rtol=0.05)
    np.testing.assert_allclose(neg_hess, closed, atol=0.05 * scale, rtol=0.05)


@pytest.mark.slow
def test_negative_binomial_monte_carlo_fisher_against_the_exact_sum():
    """No closed form: the Monte-Carlo estimate (the one fits use) against E_y[g g^T] summed over
    the support with scipy's probabilities; its log-mean entry is m r / (m + r)."""
    raw = jnp.asarray([1.2, 0.4], jnp.float32)
    d = scipy_dist(D.NegativeBinomial, raw)
    k = np.arange(0, int(d.ppf(1 - 1e-10)) + 1, dtype=np.float32)
    score = jax.vmap(lambda v: jax.grad(lambda r: D.NegativeBinomial.nll(v, r))(raw))
    g = np.asarray(score(jnp.asarray(k)), np.float64)
    exact = (g * d.pmf(k)[:, None]).T @ g
    m, r = np.exp(1.2), np.exp(0.4)
    np.testing.assert_allclose(exact[0, 0], m * r / (m + r), rtol=1e-4)
    mc = np.asarray(jax.jit(lambda key: D.fisher_information(D.NegativeBinomial, raw, n_mc_samples=40000,
                                                             key=key))(jax.random.key(0)))
    np.testing.assert_allclose(mc, exact, atol=0.01 * exact.max(), rtol=0.03)


def test_natural_gradient_of_the_normal_is_its_closed_form():
    """(loc, log scale): g = (-(y - mu)/s^2, 1 - z^2), F = diag(1/s^2, 2), so F^{-1} g =
    (mu - y, (1 - z^2)/2); jboost.grad_hess returns it with unit curvature (least squares)."""
    rng = np.random.default_rng(2)
    y = rng.normal(size=20).astype(np.float32)
    raw = rng.normal(size=(20, 2)).astype(np.float32)
    loss = D.loss(D.Normal, natural_gradient=True)
    grad_hess = jax.jit(jboost.grad_hess)
    g, h = grad_hess(loss, jnp.asarray(y), jnp.asarray(raw))
    z = (y - raw[:, 0]) * np.exp(-raw[:, 1])
    np.testing.assert_allclose(g[:, 0], raw[:, 0] - y, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(g[:, 1], 0.5 * (1 - z * z), rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(h, 1.0)
    # The loss's value is still the NLL; without natural gradients the gradient is the NLL's.
    np.testing.assert_allclose(jax.jit(jax.vmap(loss.fn))(jnp.asarray(y), jnp.asarray(raw)),
                               -stats.norm(raw[:, 0], np.exp(raw[:, 1])).logpdf(y), rtol=1e-5)
    g_plain, _ = grad_hess(D.loss(D.Normal), jnp.asarray(y), jnp.asarray(raw))
    np.testing.assert_allclose(g_plain[:, 1], 1 - z * z, rtol=1e-5, atol=1e-5)
    # Poisson (log rate): F = rate, so F^{-1} g = (rate - y) / rate.
    lam = np.exp(raw[:, :1])
    counts = rng.poisson(3.0, size=20).astype(np.float32)
    g, _ = grad_hess(D.loss(D.Poisson, natural_gradient=True), jnp.asarray(counts), jnp.asarray(raw[:, :1]))
    np.testing.assert_allclose(g[:, 0], (lam[:, 0] - counts) / lam[:, 0], rtol=1e-5, atol=1e-5)


@pytest.fixture(scope="module")
def normal_fit(regression_data, fit_kw):
    """The Normal with natural gradients, one tree per parameter per round (NGBoost's layout)."""
    X, y, Xv, yv = regression_data
    fit = lambda labels: jboost.fit(X, labels, D.loss(D.Normal, natural_gradient=True),
                                    per_output_trees=True, learning_rate=0.3, **fit_kw)
    return fit, fit(y)


def test_natural_gradient_normal_location_trees_are_the_squared_error_trees(regression_data, fit_kw, normal_fit):
    """The natural gradient of the location is the residual whatever the scale, with unit
    curvature: output 0's trees are squared-error boosting's, and its baseline the mean."""
    X, y, Xv, yv = regression_data
    _, model = normal_fit
    ls = jboost.fit(X, y, "squared_error", learning_rate=0.3, **fit_kw)
    trees = jax.tree_util.tree_map(lambda a: a[:, 0], model.trees)   # output 0's tree per round
    for field in ("features", "thresholds"):
        np.testing.assert_array_equal(getattr(trees, field), getattr(ls.trees, field)[:, 0], err_msg=field)
    params = D.predict_params(model, Xv)
    np.testing.assert_allclose(params["loc"], jboost.predict(ls, Xv), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(jboost.predict_mean(model, Xv), params["loc"])
    # The scale was learned too (the NLL fell), and the NLL metric is scipy's.
    assert np.all(np.diff(np.asarray(model.train_loss)) < 0)
    ref = -stats.norm(params["loc"], params["scale"]).logpdf(yv).mean()
    np.testing.assert_allclose(D.nll(model, Xv, yv), ref, rtol=1e-5)
    np.testing.assert_allclose(D.crps(model, Xv, yv),
                               np.mean(np.asarray(jax.vmap(D.Normal.crps)(jnp.asarray(yv), jboost.predict(model, Xv)))),
                               rtol=1e-6)


def test_intervals_cover_at_the_nominal_rate(regression_data, normal_fit):
    """Labels drawn (by scipy) from the fitted model's distributions, 200 per validation row:
    its 80% and 95% intervals cover them at those rates (within 0.01, 4 standard errors)."""
    _, _, Xv, _ = regression_data
    _, model = normal_fit
    Xbig = np.repeat(Xv, 200, axis=0)
    p = D.predict_params(model, Xbig)
    fresh = stats.norm(p["loc"], p["scale"]).rvs(random_state=np.random.default_rng(5)).astype(np.float32)
    for level in (0.8, 0.95):
        lo, hi = D.predict_interval(model, Xbig, level)
        assert np.all(np.asarray(lo) < np.asarray(hi))
        assert abs(float(np.mean((fresh >= lo) & (fresh <= hi))) - level) < 0.01, level
    with pytest.raises(ValueError, match="level"):
        D.predict_interval(model, Xv, 95)


@pytest.mark.slow
def test_student_t_df_is_traced_a_sweep_compiles_once(regression_data, fit_kw, monkeypatch):
    X, y, Xv, yv = regression_data
    counted = jax.jit(chex.assert_max_traces(boosting_lib.boost.__wrapped__, n=1), static_argnames=("config",))
    monkeypatch.setattr(boosting_lib, "boost", counted)
    fit = lambda df: jboost.fit(X, y, D.loss(D.StudentT, df=df), learning_rate=0.3, **fit_kw)
    sweep = jax.vmap(fit)(jnp.asarray([1.5, 4.0, 30.0], jnp.float32))
    again = jax.vmap(fit)(jnp.asarray([2.0, 5.0, 50.0], jnp.float32))   # no new trace
    np.testing.assert_array_equal(sweep.loss.params["df"], [1.5, 4.0, 30.0])
    assert not np.allclose(sweep.trees.leaf_values[0], sweep.trees.leaf_values[2])
    assert not np.allclose(again.trees.leaf_values[0], sweep.trees.leaf_values[0])
    # Prediction and metrics take the batch: one value per member, each member its own df.
    params = D.predict_params(sweep, Xv)
    assert params["loc"].shape == (3, Xv.shape[0])
    np.testing.assert_array_equal(params["df"][:, 0], [1.5, 4.0, 30.0])
    nlls = np.asarray(D.nll(sweep, Xv, yv))
    for i, df in enumerate((1.5, 4.0, 30.0)):
        ref = -stats.t(df, params["loc"][i], params["scale"][i]).logpdf(yv).mean()
        np.testing.assert_allclose(nlls[i], ref, rtol=1e-5)
    with pytest.raises(TypeError, match="unknown parameters"):
        D.loss(D.StudentT, nu=3.0)


def test_monte_carlo_fisher_fits_are_deterministic(regression_data, fit_kw):
    """A Fisher information without closed form is a Monte-Carlo estimate with a fixed key
    (folded with each row's label and scores): the same fit twice is bitwise the same model."""
    X, y, Xv, _ = regression_data
    dist = monte_carlo(D.Normal)
    fit = lambda: jboost.fit(X, y, D.loss(dist, natural_gradient=True, n_mc_samples=16),
                             learning_rate=0.3, **fit_kw)
    a, b = fit(), fit()
    np.testing.assert_array_equal(a.trees.leaf_values, b.trees.leaf_values)
    assert np.all(np.diff(np.asarray(a.train_loss)) < 0)
    with pytest.raises(ValueError, match="non-negative"):
        jboost.fit(X, -np.abs(y) - 1, D.loss(D.NegativeBinomial), **fit_kw)


def test_distributions_fit_is_jboost_fit_with_ngboost_layout_and_leaves_of_20_rows(regression_data, fit_kw,
                                                                                   normal_fit):
    """distributions.fit = jboost.fit with the natural-gradient loss, a tree per parameter and
    min_child_weight=MIN_LEAF_ROWS (the same compiled program: min_child_weight is traced)."""
    X, y, _, _ = regression_data
    fit, model = normal_fit
    same = D.fit(X, y, learning_rate=0.3, min_child_weight=1.0, **fit_kw)
    np.testing.assert_array_equal(same.trees.leaf_values, model.trees.leaf_values)
    default = D.fit(X, y, learning_rate=0.3, **fit_kw)
    want = jboost.fit(X, y, D.loss(D.Normal, natural_gradient=True), per_output_trees=True,
                      learning_rate=0.3, min_child_weight=D.MIN_LEAF_ROWS, **fit_kw)
    np.testing.assert_array_equal(default.trees.leaf_values, want.trees.leaf_values)
    assert not np.array_equal(default.trees.leaf_values, model.trees.leaf_values)
    with pytest.raises(ValueError, match="per_output_trees=False"):
        D.fit(X, y, line_search=True, **fit_kw)


def _ngboost_line_search(total, step_norm, tol=1e-4):
    """ngboost's NGBoost.line_search, transcribed (float64): ``total(scale)`` is the training
    loss at ``start - scale * resids``, ``step_norm`` the mean row norm of ``resids``."""
    start, scale = total(0.0), 1.0
    while True:
        loss = total(scale)
        if not np.isfinite(loss) or loss > start or scale > 256:
            break
        scale *= 2
    while True:
        loss = total(scale)
        if step_norm * scale < tol or (np.isfinite(loss) and loss < start):
            break
        scale *= 0.5
    return scale


@pytest.mark.parametrize("how", ["minimiser_at_3", "minimiser_at_100", "uphill", "zero"])
def test_line_search_scale_is_ngboosts(how):
    """D.line_search_scale against ngboost's loop on a Normal NLL: steps whose minimiser is 3 and
    100 steps away (rho = 4 and 128: the loss at 8 and 256 rises above the start), an uphill step
    (halved until its norm is below the tolerance: 2^-13) and a zero step (512)."""
    rng = np.random.default_rng(3)
    n = 50
    y = rng.normal(size=n).astype(np.float32)
    raw = np.stack([np.zeros(n), np.zeros(n)], axis=1).astype(np.float32)
    direction = np.stack([y, np.zeros(n)], axis=1).astype(np.float32)
    step = {"minimiser_at_3": direction / 3, "minimiser_at_100": direction / 100,
            "uphill": -direction, "zero": 0 * direction}[how]
    w = rng.uniform(0.5, 2.0, n).astype(np.float32)
    loss = D.loss(D.Normal, natural_gradient=True)

    def total(scale):
        f = raw.astype(np.float64) + scale * step
        with np.errstate(all="ignore"):
            return np.sum(w * -stats.norm(f[:, 0], np.exp(f[:, 1])).logpdf(y))

    want = _ngboost_line_search(total, np.sum(w * np.linalg.norm(step, axis=1)) / np.sum(w))
    got = float(jax.jit(D.line_search_scale)(loss, y, raw, step, w))
    assert got == want, (got, want)
    assert want == {"minimiser_at_3": 4.0, "minimiser_at_100": 128.0, "uphill": 2.0 ** -13,
                    "zero": 512.0}[how]


def test_line_search_round_scales_the_natural_gradient_trees(regression_data, fit_kw):
    """distributions.LINE_SEARCH on the scaffold: round 0's trees are distributions.fit's round-0
    trees times rho (its info['scale'], a power of two), the training NLL falls every round, and
    with the later rounds' rho = 2 below distributions.fit's."""

    X, y, _, _ = regression_data
    loss = checks.resolve_loss(D.loss(D.Normal, natural_gradient=True), y)
    config, hyper = settings.settings(learning_rate=0.3, l2=1.0, min_split_gain=0.0,
                                 min_child_weight=D.MIN_LEAF_ROWS, subsample=1.0, colsample=1.0,
                                 per_output_trees=True, algorithm=D.LINE_SEARCH, **fit_kw)
    data, _ = prepare.prepare_boosting(X, y, n_bins=fit_kw["n_bins"])
    init_raw = jboost.losses.baseline(loss, data.y, data.w)
    out = boosting_lib.boost(data, jax.random.key(0), hyper, loss, init_raw, config=config)
    rho = np.asarray(out.info["scale"])
    assert np.all(rho > 0) and np.all(np.log2(rho) == np.round(np.log2(rho))), rho
    assert np.all(np.diff(np.asarray(out.train_loss)) < 0)
    plain = D.fit(X, y, learning_rate=0.3, **fit_kw)   # the same round 0 before the scale
    np.testing.assert_array_equal(out.trees.features[0], plain.trees.features[0])
    np.testing.assert_allclose(out.trees.leaf_values[0], rho[0] * plain.trees.leaf_values[0], rtol=1e-6)
    assert rho.max() > 1 and out.train_loss[-1] < plain.train_loss[-1] - 0.1


@pytest.mark.parametrize("dist, bad", [(D.Poisson, 1.5), (D.NegativeBinomial, 2.25), (D.Poisson, -1.0),
                                       (D.Gamma, 0.0), (D.LogNormal, -2.0)],
                         ids=lambda v: v.name if isinstance(v, D.Distribution) else str(v))
def test_labels_outside_the_support_are_refused_or_infinitely_unlikely(regression_data, dist, bad):
    """Non-integer or negative counts, non-positive Gamma/LogNormal labels: NLL +inf (scipy's
    logpdf/logpmf -inf) with a finite gradient, in the loss jboost.fit trains on and in the
    metric; distributions.fit refuses them before fitting, naming the labels and the fix."""
    raw = jnp.full((dist.n_outputs,), 0.3, jnp.float32)
    # (Natural gradients where the Fisher information has a closed form: a Monte-Carlo one's
    # samplers cost seconds to compile, and the support check is the same code.)
    for natural in (False, True) if dist.fisher is not None else (False,):
        fn = D.loss(dist, natural_gradient=natural).fn
        value, grad = jax.jit(jax.value_and_grad(fn, argnums=1))(jnp.float32(bad), raw)
        assert float(value) == np.inf and np.all(np.isfinite(grad))
        assert np.isfinite(float(jax.jit(fn)(jnp.float32(2.0), raw)))
    assert float(D.support_nll(dist, jnp.float32(bad), raw)) == np.inf
    X, y, Xv, _ = regression_data
    labels = np.round(np.abs(y)) + 1.0
    labels[:3] = bad
    with pytest.raises(ValueError, match=f"y must hold .* for distribution '{dist.name}'; 3 of 200"):
        D.fit(X, labels, dist)
    with pytest.raises(ValueError, match="eval_set y must hold"):
        D.fit(X, np.round(np.abs(y)) + 1.0, dist, eval_set=(Xv, np.full(len(Xv), bad, np.float32)))


def test_a_distributional_model_file_loads_back(normal_fit, regression_data, tmp_path):
    X, y, Xv, yv = regression_data
    _, model = normal_fit
    path = os.fspath(tmp_path / "normal.jbm")
    jboost.save(model, path)
    with pytest.raises(ValueError, match="loss="):   # the loss is code: jboost.load says so
        jboost.load(path)
    for loaded in (D.load(path), jboost.load(path, loss=D.loss(D.Normal, natural_gradient=True))):
        np.testing.assert_array_equal(jboost.predict(loaded, Xv), jboost.predict(model, Xv))
        assert loaded.loss.name == "normal_natural" and D.distribution_of(loaded) is D.Normal
        np.testing.assert_array_equal(D.predict_params(loaded, Xv)["scale"], D.predict_params(model, Xv)["scale"])
    with pytest.raises(ValueError, match="does not match"):
        jboost.load(path, loss=D.loss(D.Normal))
    other = os.fspath(tmp_path / "ls.jbm")
    jboost.save(jboost.fit(X, y, "squared_error", learning_rate=0.3, n_rounds=6, depth=3, n_bins=32), other)
    with pytest.raises(ValueError, match="not fitted with one of jboost's distributions"):
        D.load(other)
    with pytest.raises(TypeError, match="not a distribution"):
        D.predict_params(jboost.load(other), Xv)
