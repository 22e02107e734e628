"""Distributional regression: a model predicts a whole distribution per row, not a number.

A :class:`Distribution` is a negative log-likelihood for ONE sample, written in a few lines of
JAX on its raw parameters (the ``K`` raw scores of a row: e.g. Normal ``(loc, log scale)``),
with the transforms that turn raw scores into the distribution's parameters (``exp`` for
scales and rates), and what prediction needs around it: the mean, the CDF and quantiles (for
intervals), draws, the Fisher information, the CRPS. :func:`loss` makes it a
:class:`jboost.Loss` with ``K = n_outputs`` raw outputs, fitted by :func:`jboost.fit` like any
loss (one tree with vector leaves per round, or ``per_output_trees=True``); the fitted model is
an ordinary :class:`jboost.Booster` and every function of the model protocol applies
(``jboost.predict`` gives the raw scores ``(n, K)``, ``jboost.predict_mean`` the distribution's
mean). This module adds :func:`fit` (:func:`jboost.fit` with NGBoost's layout and a label
check), :func:`predict_params`, :func:`predict_interval`, and the metrics :func:`nll` and
:func:`crps`.

The distributions (raw outputs in brackets; scales, rates, shapes and sizes are ``exp`` of
theirs):

* ``Normal`` ``(loc, log scale)``: closed-form Fisher information, CRPS, quantiles, MLE baseline.
* ``LogNormal`` ``(mu, log sigma)`` of ``log y`` (``y > 0``): the same, CRPS of Baran and Lerch
  (2015).
* ``Poisson`` ``(log rate,)``, task ``"count"``: closed-form Fisher information.
* ``NegativeBinomial`` ``(log mean, log size)``, task ``"count"``, ``var = mean + mean^2 /
  size``: no closed-form Fisher information (Monte Carlo).
* ``Gamma`` ``(log shape, log rate)`` (``y > 0``): closed-form Fisher information, CRPS of
  Scheuerer and Moller (2015).
* ``StudentT`` ``(loc, log scale)`` with ``df`` a traced loss parameter (default 3: not learned,
  vmappable): closed-form Fisher information, CRPS for ``df > 1``.

Count distributions' CRPS is the sum over the support; quantiles without a closed form are found
by bisection on the CDF (:func:`quantile`); the MLE baseline without a closed form is L-BFGS on
the NLL from the moments.

**Natural gradient** (NGBoost: Duan, Avati, Ding, Thai, Basu, Ng and Schuler 2020, "NGBoost:
Natural Gradient Boosting for Probabilistic Prediction", ICML; Amari 1998). With
``loss(dist, natural_gradient=True)`` each tree is fitted to the natural gradient
``F(theta)^{-1} g`` of every row, ``g`` the gradient of the NLL in the raw parameters ``theta``
and ``F(theta) = E_y[g g^T] = -E_y[hess]`` the Fisher information of the distribution in the
same parameterisation, by least squares (``hessian="unit"``, NGBoost's base learners): the step
is invariant to how the distribution is parameterised. ``F`` is the distribution's closed form
where one is known (Normal in ``(loc, log scale)``: ``diag(1 / scale^2, 2)``), else a
Monte-Carlo estimate ``(1/M) sum_j g(y_j) g(y_j)^T`` from ``M = n_mc_samples`` draws ``y_j`` of
the row's distribution (NGBoost's estimate, M = 100 by default), taken with a fixed key folded
with the bits of the row's label and raw scores, so fits stay deterministic. It is carried to
:func:`jboost.derivatives.grad_hess` as the derivative of the loss (a ``jax.custom_jvp`` whose
value is the NLL and whose first derivative is ``F^{-1} g``): the training and validation losses
stay the NLL, nothing else in jboost changes. The second derivative of such a loss (used only by
a Newton leaf refit, ``line_search=True``) is the derivative of ``F^{-1} g`` with ``F`` held
fixed, ``F^{-1} H``, the identity in expectation: the per-leaf Newton iterations then solve
``sum_i F_i^{-1} g_i = 0`` over the leaf (backtracking on the leaf's true NLL, so it never
rises), a per-leaf version of NGBoost's line search on the scale of each round.

Without ``natural_gradient`` the trees are Newton trees on the NLL (autodiff gradient and
curvature, as every jboost loss). Their curvature is on the labels' scale (``1/sigma^2`` for the
Normal's location), and so are ``l2`` and ``min_child_weight``: with labels of large spread
(sigma ~ 60 on diabetes) the defaults leave few splits. Natural gradients with their unit
curvature are free of that scale (``min_child_weight`` then counts rows).

**Labels.** Counts (``Poisson``, ``NegativeBinomial``) must be non-negative integers, ``Gamma``
and ``LogNormal`` labels positive. :func:`fit` checks them first (:func:`check_labels`: a
``ValueError`` naming the labels and the fix); through :func:`jboost.fit` the NLL of a label
outside the support is ``+inf`` (:func:`support_nll`, scipy's ``logpdf`` of ``-inf``), so the
fit stops with a ``FloatingPointError`` instead of fitting a non-integer count silently.

**The step of a round.** NGBoost scales each round's step by a line search on the training
NLL (Duan et al. 2020, Algorithm 1; :func:`line_search_scale`: the largest power of two, up to
512, whose whole step lowers it) before the learning rate. jboost's fits take the step as the
trees give it, times the learning rate: on ``benchmarks/ngboost_bench.py``'s three sets NGBoost's
mean scale was 1.19 (California, diabetes) and 1.46 (heteroscedastic), so its steps are 20-50%
longer, which helped jboost's depth-6 trees on California (test NLL 0.578 against 0.636) and
hurt on diabetes (6.01 against 5.80: faster overfitting of 354 rows). It is available as
:data:`LINE_SEARCH`, an algorithm of the boosting scaffold (``jboost.api.settings(...,
algorithm=LINE_SEARCH)`` and :func:`jboost.boosting.boost`; :func:`jboost.fit` takes no
algorithm), not a default. Where NGBoost's test NLL was better (depth-3 oblivious trees on
California: 0.792 against 0.671) the cause was the trees, not the step: an oblivious tree of
depth 3 has 3 split rules where NGBoost's depth-3 CART has up to 7, and 500 rounds at learning
rate 0.01 underfit it; jboost's default depth 6 fits it (0.636), and :func:`fit`'s leaves of at
least 20 rows keep depth 6 from overfitting the scale on small sets (diabetes: 6.23 with leaves
of 1 row, 5.80 with 20; NGBoost 5.94).

Known limits. With a Monte-Carlo Fisher information a natural-gradient fit needs NGBoost's
small learning rate (0.01): where a row's distribution has nearly all its mass at one value (a
negative binomial whose size tends to 0), the ``M`` draws miss the rare values, the estimate is
nearly singular and the natural gradient huge; the fit then stops with a ``FloatingPointError``
(a negative binomial on 300 rows diverged at learning rate 0.05 and trained at 0.01).
``line_search=True`` (vector-leaf trees) starts each leaf's search from the better of the
tree's value and 0, so such a leaf falls back to 0 instead of raising its NLL.

**Parameters.** A distribution's continuous parameters (Student-t ``df``) are loss parameters:
traced, so ``jax.vmap`` over them is one compilation; ``loss(StudentT, df=5.0)`` sets one.

**Saving.** A distributional model saves with :func:`jboost.save` like any model; its loss is
code, so :func:`load` here (or ``jboost.load(path, loss=distributions.loss(Normal))``) reads it
back: the file records the loss's name (``"normal"``, ``"normal_natural"``), from which
:func:`load` rebuilds it.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from typing import Any, Callable, Mapping, Optional, Tuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.scipy import special

from jboost import _compile
from jboost import _validation
from jboost import boosting
from jboost import losses as losses_lib
from jboost import model as model_lib

_HALF_LOG_2PI = 0.5 * math.log(2.0 * math.pi)
_INV_SQRT_PI = 1.0 / math.sqrt(math.pi)
_SQRT_HALF = math.sqrt(0.5)

SUPPORTS = ("real", "positive", "count")

# Draws per row of the Monte-Carlo CRPS (continuous distributions without a closed form).
CRPS_MC_SAMPLES = 1000
# The most terms of a count distribution's CRPS sum (counts up to 10^7).
COUNT_CRPS_MAX_TERMS = 1e7
# Bisection steps of the quantile function where no closed form exists (float32 converges).
PPF_BISECTIONS = 64
_PPF_WIDEN = 100   # doublings of the bracket's half widths (2^100 standard deviations)


@dataclasses.dataclass(frozen=True)
class Distribution:
    """A parametric distribution for distributional boosting: its NLL and what prediction needs.

    Every function takes the raw parameters ``raw`` with the ``K`` raw scores on the last axis
    (``raw[..., k]``; one sample: ``(K,)``) and the distribution's traced parameters as keywords.

    Attributes:
      name: the loss's name (``"normal"``); model files record it.
      param_names: the distribution's parameters, in the order :attr:`params` returns them.
      raw_names: the ``K`` raw outputs (``("loc", "log_scale")``).
      nll: ``nll(y, raw, **params) -> scalar`` for one sample: the negative log-likelihood
        (log-density or log-mass, all constants included).
      params: ``params(raw, **params) -> tuple`` of arrays ``raw.shape[:-1]``: the parameters.
      mean, variance: ``f(raw, **params) -> raw.shape[:-1]`` (``inf``/NaN where undefined).
      cdf: ``cdf(y, raw, **params)``: ``P(Y <= y)``.
      sample: ``sample(key, raw (K,), n, **params) -> (n,)`` draws (Monte-Carlo Fisher and CRPS).
      init: ``init(y, w, **params) -> (K,)``: the weighted MLE of a constant distribution when
        ``init_is_mle``, else a starting point (moments) refined by L-BFGS on the NLL.
      ppf: the quantile function ``ppf(q, raw, **params)`` in closed form, or ``None``:
        bisection on the CDF (:func:`quantile`).
      fisher: ``fisher(raw (K,), **params) -> (K, K)`` the Fisher information in the raw
        parameterisation in closed form, or ``None``: a Monte-Carlo estimate from draws.
      crps: ``crps(y, raw, **params)`` in closed form, or ``None``: Monte Carlo (:func:`crps`).
      support: ``"real"``, ``"positive"`` (``y > 0``) or ``"count"`` (``y = 0, 1, 2, ...``).
      defaults: ``((name, value), ...)`` the traced parameters and their default values.
      domains: ``((name, Interval), ...)`` their domains (checked as every loss parameter's).
    """

    name: str
    param_names: Tuple[str, ...]
    raw_names: Tuple[str, ...]
    nll: Callable
    params: Callable
    mean: Callable
    variance: Callable
    cdf: Callable
    sample: Callable
    init: Callable
    init_is_mle: bool = True
    ppf: Optional[Callable] = None
    fisher: Optional[Callable] = None
    crps: Optional[Callable] = None
    support: str = "real"
    defaults: Tuple[Tuple[str, float], ...] = ()
    domains: Tuple[Tuple[str, Any], ...] = ()

    def __post_init__(self):
        if self.support not in SUPPORTS:
            raise ValueError(f"support={self.support!r} must be one of {SUPPORTS}.")
        if len(self.raw_names) < 1:
            raise ValueError("a distribution needs at least one raw output (raw_names).")

    @property
    def n_outputs(self) -> int:
        return len(self.raw_names)

    @property
    def task(self) -> str:
        return "count" if self.support == "count" else "regression"

    def __repr__(self) -> str:
        return f"Distribution({self.name!r}, raw={self.raw_names})"


# --------------------------------------------------------------------------------------------
# The distributions: each NLL in a few lines, on raw[..., k].
# --------------------------------------------------------------------------------------------


def _wmean(y, w):
    return jnp.sum(w * y) / jnp.sum(w)


def _log_var(y, w, m):
    v = jnp.sum(w * (y - m) ** 2) / jnp.sum(w)
    return jnp.log(jnp.maximum(v, 1e-30))


def _normal_nll(y, raw):
    z = (y - raw[..., 0]) * jnp.exp(-raw[..., 1])
    return 0.5 * z * z + raw[..., 1] + _HALF_LOG_2PI


def _loc_scale(raw, **params):
    return raw[..., 0], jnp.exp(raw[..., 1])


def _normal_mean(raw):
    return raw[..., 0]


def _normal_variance(raw):
    return jnp.exp(2.0 * raw[..., 1])


def _normal_cdf(y, raw):
    return special.ndtr((y - raw[..., 0]) * jnp.exp(-raw[..., 1]))


def _normal_ppf(q, raw):
    return raw[..., 0] + jnp.exp(raw[..., 1]) * special.ndtri(q)


def _normal_sample(key, raw, n):
    return raw[0] + jnp.exp(raw[1]) * jax.random.normal(key, (n,), jnp.float32)


def _normal_init(y, w):
    m = _wmean(y, w)
    return jnp.stack([m, 0.5 * _log_var(y, w, m)])


def _normal_fisher(raw):
    """``diag(1 / scale^2, 2)`` in ``(loc, log scale)``."""
    return jnp.diag(jnp.stack([jnp.exp(-2.0 * raw[1]), jnp.full_like(raw[1], 2.0)]))


def _normal_crps(y, raw):
    """``scale (z (2 Phi(z) - 1) + 2 phi(z) - 1/sqrt(pi))`` (Gneiting, Raftery, Westveld and
    Goldman 2005, eq. 5)."""
    scale = jnp.exp(raw[..., 1])
    z = (y - raw[..., 0]) / scale
    pdf = jnp.exp(-0.5 * z * z - _HALF_LOG_2PI)
    return scale * (z * (2.0 * special.ndtr(z) - 1.0) + 2.0 * pdf - _INV_SQRT_PI)


Normal = Distribution(
    "normal", ("loc", "scale"), ("loc", "log_scale"), _normal_nll, _loc_scale, _normal_mean,
    _normal_variance, _normal_cdf, _normal_sample, _normal_init, ppf=_normal_ppf,
    fisher=_normal_fisher, crps=_normal_crps)


def _lognormal_nll(y, raw):
    log_y = jnp.log(y)
    return _normal_nll(log_y, raw) + log_y


def _lognormal_mean(raw):
    return jnp.exp(raw[..., 0] + 0.5 * jnp.exp(2.0 * raw[..., 1]))


def _lognormal_variance(raw):
    s2 = jnp.exp(2.0 * raw[..., 1])
    return jnp.expm1(s2) * jnp.exp(2.0 * raw[..., 0] + s2)


def _lognormal_cdf(y, raw):
    return jnp.where(y > 0, _normal_cdf(jnp.log(jnp.maximum(y, 1e-38)), raw), 0.0)


def _lognormal_ppf(q, raw):
    return jnp.exp(_normal_ppf(q, raw))


def _lognormal_sample(key, raw, n):
    return jnp.exp(_normal_sample(key, raw, n))


def _lognormal_init(y, w):
    return _normal_init(jnp.log(y), w)


def _lognormal_crps(y, raw):
    """``y (2 Phi(z) - 1) - 2 e^{mu + s^2/2} (Phi(z - s) + Phi(s / sqrt 2) - 1)``,
    ``z = (log y - mu) / s`` (Baran and Lerch 2015, eq. 5)."""
    mu, s = raw[..., 0], jnp.exp(raw[..., 1])
    z = (jnp.log(y) - mu) / s
    return (y * (2.0 * special.ndtr(z) - 1.0)
            - 2.0 * jnp.exp(mu + 0.5 * s * s) * (special.ndtr(z - s) + special.ndtr(s * _SQRT_HALF) - 1.0))


LogNormal = Distribution(
    "lognormal", ("mu", "sigma"), ("mu", "log_sigma"), _lognormal_nll, _loc_scale, _lognormal_mean,
    _lognormal_variance, _lognormal_cdf, _lognormal_sample, _lognormal_init, ppf=_lognormal_ppf,
    fisher=_normal_fisher, crps=_lognormal_crps, support="positive")


def _poisson_nll(y, raw):
    return losses_lib.safe_exp(raw[..., 0]) - y * raw[..., 0] + special.gammaln(y + 1.0)


def _rate(raw, **params):
    return (jnp.exp(raw[..., 0]),)


def _poisson_mean(raw):
    return jnp.exp(raw[..., 0])


def _poisson_cdf(y, raw):
    k = jnp.floor(y)
    return jnp.where(k >= 0, special.gammaincc(jnp.maximum(k, 0.0) + 1.0, jnp.exp(raw[..., 0])), 0.0)


def _poisson_sample(key, raw, n):
    return jax.random.poisson(key, jnp.exp(raw[0]), (n,)).astype(jnp.float32)


def _poisson_init(y, w):
    return jnp.log(jnp.maximum(_wmean(y, w), 1e-12))[None]


def _poisson_fisher(raw):
    """``rate`` in ``log rate``."""
    return jnp.exp(raw)[:, None]


Poisson = Distribution(
    "poisson", ("rate",), ("log_rate",), _poisson_nll, _rate, _poisson_mean, _poisson_mean,
    _poisson_cdf, _poisson_sample, _poisson_init, fisher=_poisson_fisher, support="count")


def _nbinom_nll(y, raw):
    """``-log [Gamma(y + r) / (Gamma(r) y!) (r / (r + m))^r (m / (r + m))^y]``, mean ``m``, size ``r``."""
    log_m, log_r = raw[..., 0], raw[..., 1]
    r = jnp.exp(log_r)
    return (special.gammaln(r) + special.gammaln(y + 1.0) - special.gammaln(y + r)
            + r * jax.nn.softplus(log_m - log_r) + y * jax.nn.softplus(log_r - log_m))


def _mean_size(raw, **params):
    return jnp.exp(raw[..., 0]), jnp.exp(raw[..., 1])


def _nbinom_variance(raw):
    m, r = _mean_size(raw)
    return m + m * m / r


def _nbinom_cdf(y, raw):
    m, r = _mean_size(raw)
    k = jnp.floor(y)
    return jnp.where(k >= 0, special.betainc(r, jnp.maximum(k, 0.0) + 1.0, r / (r + m)), 0.0)


def _nbinom_sample(key, raw, n):
    k1, k2 = jax.random.split(key)
    m, r = jnp.exp(raw[0]), jnp.exp(raw[1])
    lam = jax.random.gamma(k1, r, (n,), jnp.float32) * (m / r)
    return jax.random.poisson(k2, lam, (n,)).astype(jnp.float32)


def _nbinom_init(y, w):
    """Moments: ``size = m^2 / (v - m)`` (a large size, nearly Poisson, when ``v <= m``)."""
    m = jnp.maximum(_wmean(y, w), 1e-12)
    v = jnp.sum(w * (y - m) ** 2) / jnp.sum(w)
    r = jnp.where(v > m * 1.001, m * m / jnp.maximum(v - m, 1e-12), 1e3)
    return jnp.stack([jnp.log(m), jnp.log(r)])


NegativeBinomial = Distribution(
    "negative_binomial", ("mean", "size"), ("log_mean", "log_size"), _nbinom_nll, _mean_size,
    _poisson_mean, _nbinom_variance, _nbinom_cdf, _nbinom_sample, _nbinom_init, init_is_mle=False,
    support="count")


def _gamma_nll(y, raw):
    log_a, log_b = raw[..., 0], raw[..., 1]
    a = jnp.exp(log_a)
    return special.gammaln(a) - a * log_b - (a - 1.0) * jnp.log(y) + jnp.exp(log_b) * y


def _shape_rate(raw, **params):
    return jnp.exp(raw[..., 0]), jnp.exp(raw[..., 1])


def _gamma_mean(raw):
    return jnp.exp(raw[..., 0] - raw[..., 1])


def _gamma_variance(raw):
    return jnp.exp(raw[..., 0] - 2.0 * raw[..., 1])


def _gamma_cdf(y, raw):
    a, b = _shape_rate(raw)
    return special.gammainc(a, b * jnp.maximum(y, 0.0))


def _gamma_sample(key, raw, n):
    return jax.random.gamma(key, jnp.exp(raw[0]), (n,), jnp.float32) * jnp.exp(-raw[1])


def _gamma_init(y, w):
    """Moments: ``shape = m^2 / v``, ``rate = m / v``."""
    m = _wmean(y, w)
    log_v = _log_var(y, w, m)
    return jnp.stack([2.0 * jnp.log(m) - log_v, jnp.log(m) - log_v])


def _gamma_fisher(raw):
    """``[[a^2 psi'(a), -a], [-a, a]]`` in ``(log shape a, log rate)``."""
    a = jnp.exp(raw[0])
    return jnp.stack([jnp.stack([a * a * special.polygamma(1, a), -a]), jnp.stack([-a, a])])


def _gamma_crps(y, raw):
    """``y (2 F_a(by) - 1) - (a/b) (2 F_{a+1}(by) - 1) - 1 / (b B(1/2, a))``, ``F_a`` the
    regularised incomplete gamma function (Scheuerer and Moller 2015, eq. 8)."""
    a, b = _shape_rate(raw)
    by = b * jnp.maximum(y, 0.0)
    log_beta = special.gammaln(0.5) + special.gammaln(a) - special.gammaln(a + 0.5)
    return (y * (2.0 * special.gammainc(a, by) - 1.0) - a / b * (2.0 * special.gammainc(a + 1.0, by) - 1.0)
            - jnp.exp(-log_beta) / b)


Gamma = Distribution(
    "gamma", ("shape", "rate"), ("log_shape", "log_rate"), _gamma_nll, _shape_rate, _gamma_mean,
    _gamma_variance, _gamma_cdf, _gamma_sample, _gamma_init, init_is_mle=False,
    fisher=_gamma_fisher, crps=_gamma_crps, support="positive")


def _t_log_norm(df):
    return (special.gammaln(0.5 * (df + 1.0)) - special.gammaln(0.5 * df)
            - 0.5 * jnp.log(df * math.pi))


def _t_nll(y, raw, df):
    z = (y - raw[..., 0]) * jnp.exp(-raw[..., 1])
    return raw[..., 1] - _t_log_norm(df) + 0.5 * (df + 1.0) * jnp.log1p(z * z / df)


def _t_params(raw, df):
    loc, scale = _loc_scale(raw)
    return loc, scale, jnp.broadcast_to(df, loc.shape)


def _t_mean(raw, df):
    return jnp.where(df > 1.0, raw[..., 0], jnp.nan)


def _t_variance(raw, df):
    return jnp.where(df > 2.0, jnp.exp(2.0 * raw[..., 1]) * df / jnp.where(df > 2.0, df - 2.0, 1.0),
                     jnp.inf)


def _t_std_cdf(z, df):
    """``P(T <= z)``: ``P(T > |z|)`` from ``I_{df/(df+z^2)}(df/2, 1/2) / 2`` in the tails and
    ``1/2 - I_{z^2/(df+z^2)}(1/2, df/2) / 2`` near 0 (each accurate in float32 where used)."""
    z2 = z * z
    tail = 0.5 * special.betainc(0.5 * df, 0.5, df / (df + z2))
    centre = 0.5 - 0.5 * special.betainc(0.5, 0.5 * df, z2 / (df + z2))
    upper = jnp.where(z2 < df, centre, tail)
    return jnp.where(z > 0, 1.0 - upper, upper)


def _t_cdf(y, raw, df):
    return _t_std_cdf((y - raw[..., 0]) * jnp.exp(-raw[..., 1]), df)


def _t_sample(key, raw, n, df):
    return raw[0] + jnp.exp(raw[1]) * jax.random.t(key, df, (n,), jnp.float32)


def _t_init(y, w, df):
    """The weighted median and the log of the median absolute deviation."""
    med = losses_lib.weighted_quantile(y, w, 0.5)
    mad = losses_lib.weighted_quantile(jnp.abs(y - med), w, 0.5)
    return jnp.stack([med, jnp.log(jnp.maximum(mad, 1e-12))])


def _t_fisher(raw, df):
    """``diag((df + 1) / ((df + 3) scale^2), 2 df / (df + 3))`` in ``(loc, log scale)``."""
    return jnp.diag(jnp.stack([(df + 1.0) / (df + 3.0) * jnp.exp(-2.0 * raw[1]),
                               2.0 * df / (df + 3.0)]))


def _t_crps(y, raw, df):
    """``scale [z (2 F(z) - 1) + 2 f(z) (df + z^2) / (df - 1)
    - 2 sqrt(df) B(1/2, df - 1/2) / ((df - 1) B(1/2, df/2)^2)]`` for ``df > 1`` (Jordan,
    Krueger and Lerch 2019, scoringRules), ``inf`` for ``df <= 1`` (no finite mean)."""
    scale = jnp.exp(raw[..., 1])
    z = (y - raw[..., 0]) / scale
    pdf = jnp.exp(_t_log_norm(df) - 0.5 * (df + 1.0) * jnp.log1p(z * z / df))
    lbeta = lambda a, b: special.gammaln(a) + special.gammaln(b) - special.gammaln(a + b)
    d1 = jnp.where(df > 1.0, df - 1.0, 1.0)
    const = 2.0 * jnp.sqrt(df) * jnp.exp(lbeta(0.5, df - 0.5) - 2.0 * lbeta(0.5, 0.5 * df)) / d1
    value = scale * (z * (2.0 * _t_std_cdf(z, df) - 1.0) + 2.0 * pdf * (df + z * z) / d1 - const)
    return jnp.where(df > 1.0, value, jnp.inf)


StudentT = Distribution(
    "student_t", ("loc", "scale", "df"), ("loc", "log_scale"), _t_nll, _t_params, _t_mean,
    _t_variance, _t_cdf, _t_sample, _t_init, init_is_mle=False, fisher=_t_fisher, crps=_t_crps,
    defaults=(("df", 3.0),), domains=(("df", losses_lib.POSITIVE),))

DISTRIBUTIONS = {d.name: d for d in (Normal, LogNormal, Poisson, NegativeBinomial, Gamma, StudentT)}


# --------------------------------------------------------------------------------------------
# Fisher information and the natural gradient.
# --------------------------------------------------------------------------------------------


def _row_key(y, raw):
    """A fixed key folded with the bits of one row's label and first raw score: deterministic,
    different across rows and rounds."""
    bits = lambda v: lax.bitcast_convert_type(jnp.asarray(v, jnp.float32), jnp.uint32)
    return jax.random.fold_in(jax.random.fold_in(jax.random.key(0), bits(y)), bits(raw[0]))


def fisher_information(dist: Distribution, raw, params: Optional[Mapping] = None,
                       n_mc_samples: int = 100, key=None):
    """``(K, K)`` the Fisher information of ``dist`` at one row's raw parameters ``raw (K,)``.

    The closed form ``dist.fisher`` where there is one; otherwise the Monte-Carlo estimate
    ``(1/M) sum_j g_j g_j^T`` of ``E_y[g g^T]``, ``g_j = d nll(y_j, raw) / d raw`` by autodiff at
    ``M = n_mc_samples`` draws ``y_j ~ dist(raw)`` taken with ``key`` (default: a fixed key folded
    with the bits of ``raw``), plus ``1e-6 tr / K`` on the diagonal (an estimate of rank below
    K stays invertible).
    """
    params = dict(params or {})
    raw = jnp.asarray(raw, jnp.float32)
    if dist.fisher is not None:
        return dist.fisher(raw, **params)
    if key is None:
        key = _row_key(0.0, raw)
    ys = dist.sample(key, lax.stop_gradient(raw), n_mc_samples, **params)
    g = jax.vmap(lambda yi: jax.grad(lambda r: dist.nll(yi, r, **params))(raw))(ys)
    f = g.T @ g / n_mc_samples
    k = raw.shape[0]
    return f + (1e-6 * jnp.trace(f) / k) * jnp.eye(k, dtype=f.dtype)


def natural_gradient(dist: Distribution, y, raw, params: Optional[Mapping] = None,
                     n_mc_samples: int = 100):
    """``F(raw)^{-1} g`` for one row (NGBoost's natural gradient, Duan et al. 2020, eq. 6): the
    gradient ``g`` of the NLL in the raw parameters premultiplied by the inverse Fisher
    information (:func:`fisher_information`; Monte Carlo with the row's key ``(y, raw)`` where
    no closed form exists). ``F`` is held fixed under differentiation (``stop_gradient``)."""
    params = dict(params or {})
    raw = jnp.asarray(raw, jnp.float32)
    g = jax.grad(lambda r: dist.nll(y, r, **params))(raw)
    return _solve_fisher(dist, y, raw, g, params, n_mc_samples)


def _spd_solve(f, g):
    """``f^{-1} g`` for a small symmetric positive-definite ``f (K, K)``: an unrolled Cholesky
    solve (elementwise ops: vmapped over rows it stays fused, where a batched LAPACK solve of
    2x2 systems cost 6x the whole gradient on CPU); ``jnp.linalg.solve`` beyond K = 4."""
    k = g.shape[0]
    if k > 4:
        return jnp.linalg.solve(f, g)
    low = [[None] * k for _ in range(k)]
    for i in range(k):
        for j in range(i + 1):
            acc = f[i, j] - sum((low[i][m] * low[j][m] for m in range(j)), jnp.zeros_like(f[i, j]))
            low[i][j] = jnp.sqrt(acc) if i == j else acc / low[j][j]
    z = []
    for i in range(k):       # L z = g
        z.append((g[i] - sum((low[i][m] * z[m] for m in range(i)), jnp.zeros_like(g[i]))) / low[i][i])
    x = [None] * k
    for i in reversed(range(k)):   # L^T x = z
        x[i] = (z[i] - sum((low[m][i] * x[m] for m in range(i + 1, k)), jnp.zeros_like(g[i]))) / low[i][i]
    return jnp.stack(x)


def _solve_fisher(dist, y, raw, g, params, n_mc_samples):
    f = fisher_information(dist, raw, params, n_mc_samples, key=_row_key(y, lax.stop_gradient(raw)))
    return _spd_solve(lax.stop_gradient(f), g)


@functools.lru_cache(maxsize=None)
def _natural_nll(dist: Distribution, n_mc_samples: int):
    """``nll(y, raw, params)`` whose derivative in ``raw`` is the natural gradient: a
    ``jax.custom_jvp`` whose tangent is ``<F^{-1} g, d raw>`` (plus the true derivatives in ``y``
    and the parameters). One function per distribution (cached), so jit caches hit."""

    def value(y, raw, params):
        return dist.nll(y, raw, **params)

    fn = jax.custom_jvp(value)

    @fn.defjvp
    def _jvp(primals, tangents):
        y, raw, params = primals
        t_y, t_raw, t_params = tangents
        out, (g_y, g_raw, g_params) = jax.value_and_grad(value, argnums=(0, 1, 2))(y, raw, params)
        nat = _solve_fisher(dist, y, raw, g_raw, params, n_mc_samples)
        tangent = jnp.dot(nat, t_raw) + g_y * t_y
        for k in g_params:
            tangent = tangent + jnp.sum(g_params[k] * t_params[k])
        return out, tangent

    return fn


# --------------------------------------------------------------------------------------------
# NGBoost's line search on the scale of a round (an algorithm of the boosting scaffold).
# --------------------------------------------------------------------------------------------

# ngboost's NGBoost.line_search: scales 1, 2, 4, ... up to 512, then halved; a step whose mean
# row norm is below LINE_SEARCH_TOL is taken as it is.
LINE_SEARCH_MAX_SCALE = 256.0
LINE_SEARCH_TOL = 1e-4
_LINE_SEARCH_HALVINGS = 64


def line_search_scale(loss: losses_lib.Loss, y, raw, step, w, axis_name=None):
    """NGBoost's scaling factor ``rho`` of a round (Duan et al. 2020, Algorithm 1: ``rho =
    argmin_rho sum_i S(theta_i + rho f(x_i), y_i)``), found as the ``ngboost`` package finds it
    (``NGBoost.line_search``): ``rho = 1, 2, 4, ...`` doubles while the weighted training loss
    at ``raw + rho step`` is finite and not above its value at ``raw`` (up to 512), then halves
    until it is finite and below it (or the step's weighted mean row norm ``rho |step_i|`` is
    below :data:`LINE_SEARCH_TOL`). So ``rho`` is a power of two at which the whole unshrunk
    step lowers the loss, up to twice its minimiser along the step; 0 if no halving (at most 64)
    finds one. Both loops are ``lax.while_loop``s (under ``jax.vmap`` each model its own).

    Args:
      y: ``(n,)``; raw, step: ``(n, K)`` (the round's trees' values before shrinkage); w: ``(n,)``.
      axis_name: rows sharded over this mesh axis: the sums are ``psum``-ed.
    """
    def sums(v):
        out = jnp.sum(v, axis=-1)
        return out if axis_name is None else lax.psum(out, axis_name)

    def total(rho):
        return sums(w * losses_lib.per_sample_losses(loss, y, raw + rho * step))

    start = total(jnp.float32(0.0))
    norm, weight = sums(jnp.stack([w * jnp.linalg.norm(step, axis=-1), w]))
    norm = norm / jnp.where(weight > 0, weight, 1.0)

    def up(c):
        rho, _ = c
        value = total(rho)
        stop = ~jnp.isfinite(value) | (value > start) | (rho > LINE_SEARCH_MAX_SCALE)
        return jnp.where(stop, rho, 2.0 * rho), stop

    rho, _ = lax.while_loop(lambda c: ~c[1], up, (jnp.float32(1.0), jnp.bool_(False)))

    def down(c):
        i, rho, _ = c
        value = total(rho)
        ok = (norm * rho < LINE_SEARCH_TOL) | (jnp.isfinite(value) & (value < start))
        return i + 1, jnp.where(ok, rho, 0.5 * rho), ok

    _, rho, ok = lax.while_loop(lambda c: ~c[2] & (c[0] < _LINE_SEARCH_HALVINGS), down,
                                (jnp.int32(0), rho, jnp.bool_(False)))
    return jnp.where(ok, rho, 0.0)


def line_search_round(r: boosting.Round) -> boosting.RoundResult:
    """A round of :func:`jboost.boosting.newton_round` (for a natural-gradient loss: trees fitted
    by least squares to ``F^{-1} g``) whose whole step is scaled by NGBoost's line search
    (:func:`line_search_scale`) before the shrinkage: ``learning_rate * rho * trees``, as
    ``ngboost`` updates its parameters. ``info["scale"]`` records ``rho`` per round."""
    unit = r._replace(learning_rate=jnp.ones_like(r.learning_rate))
    res = boosting.newton_round(unit)
    step = boosting.round_values(res.trees, res.leaves)
    rho = line_search_scale(r.loss, r.data.y, r.raw, step, r.data.w * r.sample,
                            r.config.axis_name)
    trees = res.trees._replace(leaf_values=res.trees.leaf_values * (r.learning_rate * rho))
    return boosting.RoundResult(trees, res.leaves, info={"scale": rho})


#: NGBoost's per-round line search as an algorithm of the scaffold: ``jboost.api.settings(...,
#: algorithm=LINE_SEARCH)`` and :func:`jboost.boosting.boost` (module docstring: not a default).
LINE_SEARCH = boosting.Algorithm(line_search_round)


# --------------------------------------------------------------------------------------------
# Labels: the support of a distribution.
# --------------------------------------------------------------------------------------------

SUPPORT_LABELS = {"real": "real numbers", "positive": "positive numbers (y > 0)",
                  "count": "counts: non-negative integers 0, 1, 2, ..."}


def _in_support(dist: Distribution, y):
    """``(inside, y_safe)``: whether the label ``y`` is in ``dist``'s support (``None`` for a
    real support: every finite label) and ``y`` replaced by a label inside it where it is not
    (so the NLL and its gradient stay finite in the branch ``jnp.where`` discards)."""
    if dist.support == "real":
        return None, y
    if dist.support == "positive":
        inside = y > 0
        return inside, jnp.where(inside, y, 1.0)
    inside = (y >= 0) & (y == jnp.floor(y))
    return inside, jnp.where(inside, y, 0.0)


def check_labels(dist: Distribution, y, name: str = "y") -> None:
    """Raise ``ValueError`` naming ``name`` when labels are outside ``dist``'s support: counts
    (``Poisson``, ``NegativeBinomial``) must be non-negative integers, ``Gamma`` and
    ``LogNormal`` labels positive. (Their NLL is ``+inf`` there: :func:`support_nll`.)"""
    if dist.support == "real":
        return   # finite labels: every entry point's label check (_validation.as_labels)
    try:
        y = np.asarray(y, np.float64)
    except (TypeError, ValueError):
        return   # not numbers: every entry point's label check says so
    bad = ~(y > 0) if dist.support == "positive" else ~((y >= 0) & (y == np.floor(y)))
    if bad.any():
        fix = ("drop or shift the non-positive labels, or use a distribution on the real line "
               "(Normal, StudentT)" if dist.support == "positive" else
               "round them if they are counts stored as floats, or use a continuous distribution "
               "(Gamma or LogNormal for positive values)")
        raise ValueError(f"{name} must hold {SUPPORT_LABELS[dist.support]} for distribution "
                         f"{dist.name!r}; {int(bad.sum())} of {y.size} labels are not, e.g. "
                         f"{np.unique(y[bad])[:5].tolist()}: {fix}.")


# --------------------------------------------------------------------------------------------
# The loss: a jboost.Loss of K raw outputs.
# --------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class _NLL:
    """The per-sample loss of a distribution (hashable: equal distributions give one program)."""

    dist: Distribution
    natural: bool = False
    n_mc_samples: int = 100

    @property
    def __name__(self) -> str:  # noqa: A003 - model files name a loss's function by __name__
        return _loss_name(self.dist, self.natural)

    def __call__(self, y, raw, **params):
        raw = jnp.reshape(raw, (self.dist.n_outputs,))   # one-output losses get a scalar
        inside, y = _in_support(self.dist, y)
        if self.natural:
            value = _natural_nll(self.dist, self.n_mc_samples)(y, raw, params)
        else:
            value = self.dist.nll(y, raw, **params)
        return value if inside is None else jnp.where(inside, value, jnp.inf)

    def check_labels(self, y, name: str = "y") -> None:
        """:func:`check_labels` of the distribution (for a loss's label check)."""
        check_labels(self.dist, y, name)


@dataclasses.dataclass(frozen=True)
class _Mean:
    """The link: raw scores ``(..., K)`` (``(...,)`` for one output) -> the distribution's mean."""

    dist: Distribution

    def __call__(self, raw, **params):
        if self.dist.n_outputs == 1:
            raw = raw[..., None]
        return self.dist.mean(raw, **params)


@dataclasses.dataclass(frozen=True)
class _Baseline:
    """The weighted MLE of a constant distribution, ``(K,)``: closed form, or L-BFGS on the NLL
    from the distribution's starting point (moments)."""

    dist: Distribution
    n_steps: int = 50

    def __call__(self, y, w, n_outputs, **params):
        start = jnp.asarray(self.dist.init(y, w, **params), jnp.float32)
        if self.dist.init_is_mle:
            return start
        nll = jax.vmap(lambda yi, r: self.dist.nll(yi, r, **params), in_axes=(0, None))

        def objective(raw):
            return jnp.sum(w * nll(y, raw)) / jnp.sum(w)

        return losses_lib.lbfgs_minimize(objective, start, self.n_steps)


def _loss_name(dist: Distribution, natural: bool) -> str:
    return dist.name + ("_natural" if natural else "")


def loss(dist: Distribution, natural_gradient: bool = False, *, line_search: bool = False,
         n_mc_samples: int = 100, **params) -> losses_lib.Loss:
    """The :class:`jboost.Loss` of ``dist``: its per-sample NLL with ``K = dist.n_outputs`` raw
    outputs, for :func:`jboost.fit`.

    Args:
      dist: a :class:`Distribution` (``Normal``, ``LogNormal``, ``Poisson``,
        ``NegativeBinomial``, ``Gamma``, ``StudentT``, or your own).
      natural_gradient: fit each tree to the natural gradient ``F^{-1} g`` by least squares
        (NGBoost; module docstring) instead of a Newton tree on the NLL.
      line_search: refit every leaf by damped Newton iterations on the leaf (``leaf_refit=
        "line_search"``, :func:`jboost.refit.line_search_leaf_values`; backtracking on the
        leaf's NLL). With ``natural_gradient`` the iterations solve ``sum_i F_i^{-1} g_i = 0``
        (module docstring). Applies to vector-leaf trees (not ``per_output_trees``).
      n_mc_samples: draws per row of the Monte-Carlo Fisher information (distributions without
        a closed form, with ``natural_gradient``; static).
      **params: the distribution's traced parameters (``df=5.0`` for ``StudentT``), defaults
        ``dist.defaults``; may be tracers (a ``jax.vmap`` sweep is one compilation).

    The loss's link is the distribution's mean (:func:`jboost.predict_mean`), its baseline the
    MLE of a constant distribution, its task ``"count"`` for count distributions (labels
    ``>= 0`` checked) and ``"regression"`` otherwise. A model file records the loss by name
    (``dist.name``, ``+ "_natural"``); :func:`load` rebuilds it.
    """
    if not isinstance(dist, Distribution):
        raise TypeError(f"dist must be a jboost.distributions.Distribution (e.g. "
                        f"distributions.Normal); got {type(dist).__name__}.")
    defaults = dict(dist.defaults)
    unknown = sorted(set(params) - set(defaults))
    if unknown:
        raise TypeError(f"loss({dist.name}) got unknown parameters {unknown}; its parameters are "
                        f"{sorted(defaults) or 'none'}.")
    if not isinstance(n_mc_samples, (int, np.integer)) or isinstance(n_mc_samples, bool) or n_mc_samples < 2:
        raise ValueError(f"n_mc_samples={n_mc_samples!r} must be an integer >= 2.")
    natural = bool(natural_gradient)
    return losses_lib.Loss(
        _NLL(dist, natural, int(n_mc_samples)), params={**defaults, **params},
        name=_loss_name(dist, natural), n_outputs=dist.n_outputs, task=dist.task,
        link=_Mean(dist), baseline=_Baseline(dist), hessian="unit" if natural else "autodiff",
        leaf_refit="line_search" if line_search else None, domains=dict(dist.domains))


# Least rows per leaf of fit()'s natural-gradient trees (min_child_weight on unit curvature):
# LightGBM's default min_data_in_leaf.
MIN_LEAF_ROWS = 20.0


def fit(X, y, dist: Distribution = Normal, *, natural_gradient: bool = True,
        line_search: bool = False, n_mc_samples: int = 100,
        dist_params: Optional[Mapping[str, Any]] = None, per_output_trees: bool = True,
        min_child_weight: Any = None, eval_set=None, **kwargs):
    """Fit a distributional model: :func:`jboost.fit` with ``dist``'s loss and the defaults of
    NGBoost's layout; returns a :class:`jboost.Booster` (read it with :func:`predict_params`,
    :func:`predict_interval`, :func:`nll`, :func:`crps`).

    The labels of ``y`` (and of ``eval_set``) are checked against ``dist``'s support first
    (:func:`check_labels`: counts must be non-negative integers, ``Gamma`` and ``LogNormal``
    labels positive). Then ``jboost.fit(X, y, loss(dist, natural_gradient, ...),
    per_output_trees=per_output_trees, min_child_weight=..., eval_set=eval_set, **kwargs)``:
    every other argument (``n_rounds``, ``learning_rate``, ``depth``, ``l2``, ``eval_set``,
    early stopping, ``init_model``, ...) is :func:`jboost.fit`'s, with its defaults.

    Defaults that differ from :func:`jboost.fit`'s, and why:

    * ``natural_gradient=True`` (NGBoost, Duan et al. 2020; module docstring): the trees are
      least-squares fits to ``F^{-1} g``, free of the labels' scale.
    * ``per_output_trees=True``: one tree per raw parameter per round (NGBoost's layout, ESL
      Algorithm 10.4), each with its own splits. A vector-leaf tree splits on the summed gain of
      all parameters, dominated by the location's (in the labels' units) where the labels
      spread widely.
    * ``min_child_weight=MIN_LEAF_ROWS`` (20) with natural gradients: their curvature is 1 per
      row, so it is the least number of rows in a leaf (LightGBM's default ``min_data_in_leaf``).
      Each tree of the scale estimates a variance from the residuals of its leaves' rows, which
      needs more rows than a mean: with 1 (:func:`jboost.fit`'s default) depth-6 trees on 354
      training rows (diabetes, ``benchmarks/ngboost_bench.py``) left a few rows per leaf and
      overfitted the scale (test NLL 6.23, against 5.80 with 20 and 5.94 for NGBoost). Without
      natural gradients the curvature is on the labels' scale and the default is
      :func:`jboost.fit`'s (1).

    Args:
      X, y: as :func:`jboost.fit`; ``y`` in ``dist``'s support.
      dist: a :class:`Distribution` (default ``Normal``).
      natural_gradient, line_search, n_mc_samples: :func:`loss`'s. ``line_search`` (per-leaf
        Newton refits) applies to vector-leaf trees: pass ``per_output_trees=False`` with it.
      dist_params: the distribution's traced parameters (``{"df": 5.0}`` for ``StudentT``).
      per_output_trees, min_child_weight: as above (``None``: the default described).
      eval_set, **kwargs: :func:`jboost.fit`'s.
    """
    from jboost import api

    if not isinstance(dist, Distribution):
        raise TypeError(f"dist must be a jboost.distributions.Distribution (e.g. "
                        f"distributions.Normal); got {type(dist).__name__}.")
    if min_child_weight is None:
        min_child_weight = MIN_LEAF_ROWS if natural_gradient else 1.0
    fitted = loss(dist, natural_gradient, line_search=line_search, n_mc_samples=n_mc_samples,
                  **dict(dist_params or {}))
    return api.fit(X, y, fitted, per_output_trees=per_output_trees,
                   min_child_weight=min_child_weight, eval_set=eval_set, **kwargs)


def distribution_of(model) -> Distribution:
    """The :class:`Distribution` a model was fitted with (``TypeError`` for any other loss)."""
    fitted = getattr(model, "loss", None)
    fn = getattr(getattr(fitted, "fn", None), "__wrapped__", getattr(fitted, "fn", None))
    if not isinstance(fn, _NLL):
        what = (f"loss {fitted.name!r}" if fitted is not None
                else f"a {type(model).__name__}, which has no loss")
        raise TypeError(f"this model was fitted with {what}, not a distribution: fit with "
                        "loss=jboost.distributions.loss(distributions.Normal) (or another "
                        "Distribution) to predict distributions.")
    return fn.dist


def load(path, tree_family: Optional[type] = None):
    """:func:`jboost.load` for a model fitted with a distribution's loss: the file records the
    loss's name, from which the loss is rebuilt (its parameters are the file's)."""
    from jboost import io as io_lib

    names = set()

    def walk(node):
        if isinstance(node, dict):
            if node.get("kind") == "loss" and isinstance(node.get("name"), str):
                names.add(node["name"])
            for v in node.values():
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)

    walk(io_lib.read_header(path))
    found = [n for n in names if n.removesuffix("_natural") in DISTRIBUTIONS]
    if len(found) != 1:
        raise ValueError(f"the model in {path} was not fitted with one of jboost's distributions "
                         f"({sorted(DISTRIBUTIONS)}); its losses: {sorted(names)}. Load it with "
                         "jboost.load(path, loss=...).")
    name = found[0]
    dist = DISTRIBUTIONS[name.removesuffix("_natural")]
    return io_lib.load(path, loss=loss(dist, natural_gradient=name.endswith("_natural")),
                       tree_family=tree_family)


# --------------------------------------------------------------------------------------------
# Quantiles and CRPS of one row.
# --------------------------------------------------------------------------------------------


def quantile(dist: Distribution, q, raw, params: Optional[Mapping] = None):
    """The ``q``-quantile of ``dist`` at one row's ``raw (K,)``: ``dist.ppf`` in closed form, or
    else bisection on the CDF (:data:`PPF_BISECTIONS` steps, float32-exact): the bracket starts
    at the mean +- one standard deviation (0 +- 1 where they are not finite) and doubles until it
    holds the quantile; counts bisect over the integers (the smallest ``k`` with
    ``cdf(k) >= q``)."""
    params = dict(params or {})
    raw = jnp.asarray(raw, jnp.float32)
    q = jnp.asarray(q, jnp.float32)
    if dist.ppf is not None:
        return dist.ppf(q, raw, **params)
    cdf = lambda x: dist.cdf(x, raw, **params)
    mean, var = dist.mean(raw, **params), dist.variance(raw, **params)
    c = jnp.where(jnp.isfinite(mean), mean, 0.0)
    s = jnp.where(jnp.isfinite(var) & (var > 0), jnp.sqrt(jnp.where(var > 0, var, 1.0)), 1.0)
    count = dist.support == "count"

    def bracket(wl, wh):
        lo, hi = c - wl, c + wh
        if count:
            return jnp.minimum(jnp.floor(lo), -1.0), jnp.ceil(hi)
        return (jnp.zeros_like(lo) if dist.support == "positive" else lo), hi

    def step(i, state):
        # One loop (one copy of the CDF in the program): _PPF_WIDEN steps double the half
        # widths until [c - wl, c + wh] holds the quantile, then PPF_BISECTIONS halve it.
        wl, wh, lo, hi = state
        widening = i < _PPF_WIDEN
        mid = 0.5 * (lo + hi)
        if count:
            mid = jnp.floor(mid)
        f = cdf(jnp.where(widening, jnp.stack([c - wl, c + wh]), jnp.stack([mid, mid])))
        wl = jnp.where(widening & (f[0] > q), 2.0 * wl, wl)
        wh = jnp.where(widening & (f[1] < q), 2.0 * wh, wh)
        below = f[0] < q
        new_lo, new_hi = bracket(wl, wh)
        lo = jnp.where(widening, new_lo, jnp.where(below, mid, lo))
        hi = jnp.where(widening, new_hi, jnp.where(below, hi, mid))
        return wl, wh, lo, hi

    lo, hi = bracket(s, s)
    _, _, _, hi = lax.fori_loop(0, _PPF_WIDEN + PPF_BISECTIONS, step, (s, s, lo, hi))
    return hi


def _count_crps(dist, y, raw, params):
    """``sum_{k >= 0} (F(k) - 1{k >= y})^2``, summed until ``k >= y`` and ``1 - F(k) <= 1e-7``
    (at most :data:`COUNT_CRPS_MAX_TERMS` terms)."""

    def cond(state):
        k, _, f = state
        return ((k <= y) | (f < 1.0 - 1e-7)) & (k < COUNT_CRPS_MAX_TERMS)

    def body(state):
        k, total, _ = state
        f = dist.cdf(k, raw, **params)
        return k + 1.0, total + (f - jnp.where(k >= y, 1.0, 0.0)) ** 2, f

    zero = jnp.zeros((), jnp.float32)
    return lax.while_loop(cond, body, (zero, zero, zero))[1]


def crps_one(dist: Distribution, y, raw, params: Optional[Mapping] = None, key=None,
             n_samples: int = CRPS_MC_SAMPLES):
    """The continuous ranked probability score ``int (F(x) - 1{x >= y})^2 dx`` of one row (lower
    is better; Gneiting and Raftery 2007): ``dist.crps`` in closed form; for counts the sum
    ``sum_k (F(k) - 1{k >= y})^2`` over the support (until the CDF is 1 to float32); or else
    the Monte-Carlo estimate ``E|X - y| - E|X - X'| / 2`` from ``n_samples`` draws with ``key`` (the pairwise
    term unbiased, from the sorted draws)."""
    params = dict(params or {})
    raw = jnp.asarray(raw, jnp.float32)
    if dist.crps is not None:
        return dist.crps(y, raw, **params)
    if dist.support == "count":
        return _count_crps(dist, y, raw, params)
    if key is None:
        key = _row_key(y, raw)
    x = jnp.sort(dist.sample(key, raw, n_samples, **params))
    m = n_samples
    pairs = jnp.sum((2.0 * jnp.arange(m, dtype=jnp.float32) - (m - 1)) * x) * (2.0 / (m * (m - 1)))
    return jnp.mean(jnp.abs(x - y)) - 0.5 * pairs


# --------------------------------------------------------------------------------------------
# Prediction and metrics for fitted models (the one model protocol's raw scores).
# --------------------------------------------------------------------------------------------


def _raw_and_params(model, X, n_rounds, base_margin):
    dist = distribution_of(model)
    raw = jnp.asarray(model_lib.predict(model, X, n_rounds=n_rounds, base_margin=base_margin))
    if dist.n_outputs == 1:
        raw = raw[..., None]
    return dist, raw, dict(model.loss.params)


def _per_model(model, fn, raw, params, *args):
    """``fn(raw (n, K), params, *args)`` for each model of a batch (vmapped over batch axes)."""
    f = fn
    for _ in model.batch_shape:
        f = jax.vmap(f, in_axes=(0, 0) + (None,) * len(args))
    return f(raw, params, *args)


@functools.partial(_compile.jit, static_argnames=("dist",))
def _params_rows(dist, raw, params):
    return dist.params(raw, **params)


@functools.partial(_compile.jit, static_argnames=("dist",))
def _quantile_rows(dist, raw, params, q):
    return jax.vmap(lambda r: quantile(dist, q, r, params))(raw)


def support_nll(dist: Distribution, y, raw, params: Optional[Mapping] = None):
    """``dist.nll`` of one row, ``+inf`` where ``y`` is outside the support (a density or mass
    of 0, as ``scipy.stats``' ``logpdf``/``logpmf`` of ``-inf``: a count that is negative or not
    an integer, a non-positive label of a positive distribution), with a finite gradient there
    (the NLL is evaluated at a label inside the support). A fit on such labels stops with a
    ``FloatingPointError`` instead of a silent wrong answer; :func:`check_labels` says so first."""
    inside, y = _in_support(dist, y)
    value = dist.nll(y, raw, **dict(params or {}))
    return value if inside is None else jnp.where(inside, value, jnp.inf)


@functools.partial(_compile.jit, static_argnames=("dist",))
def _nll_rows(dist, raw, params, y):
    return jax.vmap(lambda yi, r: support_nll(dist, yi, r, params))(y, raw)


@functools.partial(_compile.jit, static_argnames=("dist",))
def _crps_rows(dist, raw, params, y):
    keys = jax.random.split(jax.random.key(0), y.shape[0])
    return jax.vmap(lambda yi, r, k: crps_one(dist, yi, r, params, k))(y, raw, keys)


def predict_params(model, X, n_rounds: Optional[int] = None, base_margin=None) -> dict:
    """The distribution's parameters per row: ``{name: (n,)}`` (``Normal``: ``loc``, ``scale``;
    with the model's batch axes in front for a vmapped sweep)."""
    dist, raw, params = _raw_and_params(model, X, n_rounds, base_margin)
    values = _per_model(model, functools.partial(_params_rows, dist), raw, params)
    return dict(zip(dist.param_names, values))


def predict_quantile(model, X, q, n_rounds: Optional[int] = None, base_margin=None):
    """The ``q``-quantile of each row's predicted distribution, ``(n,)`` (:func:`quantile`)."""
    if not losses_lib.PROBABILITY.contains(q):
        raise ValueError(f"q={q!r} must be in (0, 1).")
    dist, raw, params = _raw_and_params(model, X, n_rounds, base_margin)
    return _per_model(model, functools.partial(_quantile_rows, dist), raw, params,
                      jnp.float32(q))


def predict_interval(model, X, level: float = 0.9, n_rounds: Optional[int] = None,
                     base_margin=None):
    """Central prediction intervals ``(lower, upper)``, each ``(n,)``: the ``(1 - level)/2`` and
    ``(1 + level)/2`` quantiles of each row's predicted distribution (for counts, the
    smallest counts whose CDF reaches them)."""
    if not losses_lib.PROBABILITY.contains(level):
        raise ValueError(f"level={level!r} must be in (0, 1), e.g. 0.9 for 90% intervals.")
    level = float(level)
    return (predict_quantile(model, X, 0.5 * (1.0 - level), n_rounds, base_margin),
            predict_quantile(model, X, 0.5 * (1.0 + level), n_rounds, base_margin))


def _weighted_mean(values, sample_weight, n):
    w = (np.ones(n, np.float32) if sample_weight is None
         else _validation.as_weights(sample_weight, n))
    w = jnp.asarray(w)
    return jnp.sum(values * w, axis=-1) / jnp.sum(w)


def _labels(y, n):
    return jnp.asarray(_validation.as_labels(y, n))


def nll(model, X, y, sample_weight=None, n_rounds: Optional[int] = None, base_margin=None):
    """Mean negative log-likelihood of the labels ``y`` under each row's predicted distribution
    (weighted by ``sample_weight``; one value per model of a batch)."""
    dist, raw, params = _raw_and_params(model, X, n_rounds, base_margin)
    y = _labels(y, raw.shape[-2])
    values = _per_model(model, functools.partial(_nll_rows, dist), raw, params, y)
    return _weighted_mean(values, sample_weight, y.shape[0])


def crps(model, X, y, sample_weight=None, n_rounds: Optional[int] = None, base_margin=None):
    """Mean CRPS of the labels ``y`` under each row's predicted distribution (:func:`crps_one`:
    closed form, or Monte Carlo with :data:`CRPS_MC_SAMPLES` draws per row and a fixed key)."""
    dist, raw, params = _raw_and_params(model, X, n_rounds, base_margin)
    y = _labels(y, raw.shape[-2])
    values = _per_model(model, functools.partial(_crps_rows, dist), raw, params, y)
    return _weighted_mean(values, sample_weight, y.shape[0])
