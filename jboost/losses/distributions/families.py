"""The built-in distributions (Normal, LogNormal, Poisson, NegativeBinomial, Gamma, StudentT):
each NLL, transforms, moments, CDF, draws, Fisher information and CRPS, and the DISTRIBUTIONS
registry by name.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
from jax.scipy import special

from jboost.losses import baselines, loss as loss_lib, per_sample
from jboost.losses.distributions import base

_HALF_LOG_2PI = 0.5 * math.log(2.0 * math.pi)
_INV_SQRT_PI = 1.0 / math.sqrt(math.pi)
_SQRT_HALF = math.sqrt(0.5)


# ---- The distributions: each NLL in a few lines, on raw[..., k] ----------------------------


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


Normal = base.Distribution(
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


LogNormal = base.Distribution(
    "lognormal", ("mu", "sigma"), ("mu", "log_sigma"), _lognormal_nll, _loc_scale, _lognormal_mean,
    _lognormal_variance, _lognormal_cdf, _lognormal_sample, _lognormal_init, ppf=_lognormal_ppf,
    fisher=_normal_fisher, crps=_lognormal_crps, support="positive")


def _poisson_nll(y, raw):
    return per_sample.safe_exp(raw[..., 0]) - y * raw[..., 0] + special.gammaln(y + 1.0)


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


Poisson = base.Distribution(
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


NegativeBinomial = base.Distribution(
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


Gamma = base.Distribution(
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
    med = baselines.weighted_quantile(y, w, 0.5)
    mad = baselines.weighted_quantile(jnp.abs(y - med), w, 0.5)
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


StudentT = base.Distribution(
    "student_t", ("loc", "scale", "df"), ("loc", "log_scale"), _t_nll, _t_params, _t_mean,
    _t_variance, _t_cdf, _t_sample, _t_init, init_is_mle=False, fisher=_t_fisher, crps=_t_crps,
    defaults=(("df", 3.0),), domains=(("df", loss_lib.POSITIVE),))

DISTRIBUTIONS = {d.name: d for d in (Normal, LogNormal, Poisson, NegativeBinomial, Gamma, StudentT)}
