"""The Distribution type and what one row's distribution gives: its support and label check, the NLL on the support, quantiles (closed form or bisection), CRPS (closed form, count sum, Monte Carlo), a per-row key.

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
:func:`jboost.losses.derivatives.grad_hess` as the derivative of the loss (a ``jax.custom_jvp`` whose
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
:data:`LINE_SEARCH`, an algorithm of the boosting scaffold (``jboost.fitting.settings.settings(...,
algorithm=LINE_SEARCH)`` and :func:`jboost.engine.boosting.boost`; :func:`jboost.fit` takes no
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
from typing import Any, Callable, Mapping, Optional, Tuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

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
# Fisher information and the natural gradient.
# --------------------------------------------------------------------------------------------


def row_key(y, raw):
    """A fixed key folded with the bits of one row's label and first raw score: deterministic,
    different across rows and rounds."""
    bits = lambda v: lax.bitcast_convert_type(jnp.asarray(v, jnp.float32), jnp.uint32)
    return jax.random.fold_in(jax.random.fold_in(jax.random.key(0), bits(y)), bits(raw[0]))


# --------------------------------------------------------------------------------------------
# Labels: the support of a distribution.
# --------------------------------------------------------------------------------------------

SUPPORT_LABELS = {"real": "real numbers", "positive": "positive numbers (y > 0)",
                  "count": "counts: non-negative integers 0, 1, 2, ..."}


def in_support(dist: Distribution, y):
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
        key = row_key(y, raw)
    x = jnp.sort(dist.sample(key, raw, n_samples, **params))
    m = n_samples
    pairs = jnp.sum((2.0 * jnp.arange(m, dtype=jnp.float32) - (m - 1)) * x) * (2.0 / (m * (m - 1)))
    return jnp.mean(jnp.abs(x - y)) - 0.5 * pairs


def support_nll(dist: Distribution, y, raw, params: Optional[Mapping] = None):
    """``dist.nll`` of one row, ``+inf`` where ``y`` is outside the support (a density or mass
    of 0, as ``scipy.stats``' ``logpdf``/``logpmf`` of ``-inf``: a count that is negative or not
    an integer, a non-positive label of a positive distribution), with a finite gradient there
    (the NLL is evaluated at a label inside the support). A fit on such labels stops with a
    ``FloatingPointError`` instead of a silent wrong answer; :func:`check_labels` says so first."""
    inside, y = in_support(dist, y)
    value = dist.nll(y, raw, **dict(params or {}))
    return value if inside is None else jnp.where(inside, value, jnp.inf)
