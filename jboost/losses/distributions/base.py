"""The Distribution type and what one row's distribution gives: its support and label check,
the NLL on the support, quantiles (closed form or bisection), the CRPS and a per-row key.

After NGBoost (Duan et al. 2020, ICML); the CRPS of Gneiting and Raftery (2007, JASA). See
``docs/distributions.md``.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Mapping, Optional, Tuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

#: The supports of a distribution: all real numbers, positive numbers, or counts ``0, 1, 2, ...``.
SUPPORTS = ("real", "positive", "count")

#: Draws per row of the Monte-Carlo CRPS (continuous distributions without a closed form).
CRPS_MC_SAMPLES = 1000
#: The most terms of a count distribution's CRPS sum (counts up to 10^7).
COUNT_CRPS_MAX_TERMS = 1e7
#: Bisection steps of the quantile function where no closed form exists (float32 converges).
PPF_BISECTIONS = 64
_PPF_WIDEN = 100   # doublings of the bracket's half widths (2^100 standard deviations)


@dataclasses.dataclass(frozen=True)
class Distribution:
    """A parametric distribution for distributional boosting: its NLL and what prediction needs.

    Every function takes the raw parameters ``raw`` with the ``K`` raw scores on the last axis and
    the traced parameters as keywords (``docs/distributions.md``, "Adding a distribution").

    Attributes:
      name: the loss's name (``"normal"``); model files record it.
      param_names: the distribution's parameters, in the order ``params`` returns them.
      raw_names: the ``K`` raw outputs (``("loc", "log_scale")``).
      nll: ``nll(y, raw, **params) -> scalar``, one sample's negative log-likelihood.
      params: ``params(raw, **params) -> tuple`` of the parameters.
      mean: ``mean(raw, **params)`` (``inf``/NaN where undefined).
      variance: ``variance(raw, **params)`` (``inf``/NaN where undefined).
      cdf: ``cdf(y, raw, **params)``: ``P(Y <= y)``.
      sample: ``sample(key, raw (K,), n, **params) -> (n,)`` draws.
      init: ``init(y, w, **params) -> (K,)``: the weighted MLE of a constant distribution when
        ``init_is_mle``, else a starting point refined by L-BFGS on the NLL.
      ppf: the closed form of the quantile function, or ``None`` (bisection).
      fisher: the closed form of the Fisher information ``(K, K)``, or ``None`` (Monte Carlo).
      crps: the closed form of the CRPS, or ``None`` (a sum for counts, else Monte Carlo).
      support: one of :data:`SUPPORTS`.
      defaults: ``((name, value), ...)`` the traced parameters and their defaults.
      domains: ``((name, Interval), ...)`` their domains.

    Raises:
      ValueError: ``support`` is not one of :data:`SUPPORTS`, or ``raw_names`` is empty.
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
        """``K``, the number of raw outputs (one per name of ``raw_names``)."""
        return len(self.raw_names)

    @property
    def task(self) -> str:
        """The loss task: ``"count"`` for a count support, ``"regression"`` otherwise."""
        return "count" if self.support == "count" else "regression"

    def __repr__(self) -> str:
        return f"Distribution({self.name!r}, raw={self.raw_names})"


# ---- Fisher information and the natural gradient -------------------------------------------


def row_key(y, raw):
    """A fixed PRNG key folded with the bits of one row's label and first raw score: deterministic,
    and different across rows and rounds.
    """
    bits = lambda v: lax.bitcast_convert_type(jnp.asarray(v, jnp.float32), jnp.uint32)
    return jax.random.fold_in(jax.random.fold_in(jax.random.key(0), bits(y)), bits(raw[0]))


# ---- Labels: the support of a distribution -------------------------------------------------

SUPPORT_LABELS = {"real": "real numbers", "positive": "positive numbers (y > 0)",
                  "count": "counts: non-negative integers 0, 1, 2, ..."}


def in_support(dist: Distribution, y):
    """``(inside, y_safe)``: whether labels are in ``dist``'s support (``None`` for a real support)
    and the labels with those outside replaced by one inside, so the NLL and its gradient stay
    finite in the branch ``jnp.where`` discards.
    """
    if dist.support == "real":
        return None, y
    if dist.support == "positive":
        inside = y > 0
        return inside, jnp.where(inside, y, 1.0)
    inside = (y >= 0) & (y == jnp.floor(y))
    return inside, jnp.where(inside, y, 0.0)


def check_labels(dist: Distribution, y, name: str = "y") -> None:
    """Check on the host that labels are inside ``dist``'s support (counts: non-negative integers;
    ``"positive"``: ``y > 0``); labels that are not numbers are left to the entry point's checks.

    Raises:
      ValueError: labels outside the support; the message names ``name``, how many, examples and
        the fix.
    """
    if dist.support == "real":
        return   # finite labels: every entry point's label check (jboost.data.labels.as_labels)
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


# ---- Quantiles and CRPS of one row ---------------------------------------------------------


def quantile(dist: Distribution, q, raw, params: Optional[Mapping] = None):
    """The ``q``-quantile(s) of ``dist`` at one row's raw scores ``(K,)``: float32, shaped like ``q``;
    ``dist.ppf`` in closed form, else bisection on the CDF (``docs/distributions.md``).
    """
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
    """``sum_{k >= 0} (F(k) - 1{k >= y})^2``, summed until ``k >= y`` and ``1 - F(k) <= 1e-7`` (at
    most :data:`COUNT_CRPS_MAX_TERMS` terms).
    """

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
    """The continuous ranked probability score ``int (F(x) - 1{x >= y})^2 dx`` of one row (lower is
    better; Gneiting and Raftery 2007), a float32 scalar.

    ``dist.crps`` in closed form, the sum over the support for counts, else the Monte-Carlo estimate
    from ``n_samples`` draws with ``key`` (``None``: :func:`row_key`; ``docs/distributions.md``).
    """
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
    """``dist.nll`` of one row, ``+inf`` where ``y`` is outside the support (as scipy's ``logpdf``
    of ``-inf``), with a finite gradient there.
    """
    inside, y = in_support(dist, y)
    value = dist.nll(y, raw, **dict(params or {}))
    return value if inside is None else jnp.where(inside, value, jnp.inf)
