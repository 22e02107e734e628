"""Per-sample losses ``loss(y, raw) -> scalar``: the built-in losses, their constructors and names.

The losses of Friedman (2001) and ESL (Hastie, Tibshirani and Friedman 2009, Table 10.2):
squared, absolute, Huber and quantile error, the binomial and multinomial deviances, AdaBoost's
exponential loss (Friedman, Hastie and Tibshirani 2000) and its K-class SAMME form (Zhu, Zou,
Rosset and Hastie 2009), and the Poisson deviance. Each ``*_fn`` takes one sample's label ``y``
and raw score ``f`` (``(K,)`` for K-class losses) and returns a scalar.
"""

from __future__ import annotations

from typing import Optional

import jax
import jax.numpy as jnp

from jboost.losses import baselines, links, loss as loss_lib


def _logit_deviance_fn(y, f):
    """Binomial deviance of ``p = 1 / (1 + e^{-2f})``: ``log(1 + e^{2f}) - 2 y f`` (FHT eq. 21)."""
    return jax.nn.softplus(2.0 * f) - 2.0 * y * f


def logit_deviance() -> loss_lib.Loss:
    """The loss two-class LogitBoost minimises, ``log(1 + e^{2F}) - 2 y F`` on the half-log-odds
    scale, labels 0/1 (Friedman, Hastie and Tibshirani 2000, eq. 21): AdaBoost's link and the
    half-logit baseline.
    """
    return loss_lib.Loss(_logit_deviance_fn, name="logit_deviance", task="binary",
                           link=links.adaboost_link, baseline=baselines.half_logit_baseline)

# Beyond this exponent, exponentials continue as their second-order Taylor expansion: values,
# gradients and hessians stay finite and positive (no overflow at large margins).
_EXP_CLIP = 30.0


def safe_exp(z):
    """``exp(z)`` for ``z <= 30``; beyond, its second-order Taylor continuation (C2, finite and
    increasing), so exponential losses and their derivatives stay finite at large margins.
    """
    c = jnp.minimum(z, _EXP_CLIP)
    d = jnp.maximum(z - _EXP_CLIP, 0.0)
    return jnp.exp(c) * (1.0 + d + 0.5 * d * d)


# Per-sample loss functions (module level, so they are hashable static metadata).


def squared_error_fn(y, f):
    """Half squared error ``(y - f)^2 / 2`` (ESL Table 10.2)."""
    return 0.5 * (y - f) ** 2


def absolute_error_fn(y, f):
    """Absolute error ``|y - f|`` (least absolute deviation; ESL Table 10.2)."""
    return jnp.abs(y - f)


def huber_fn(y, f, delta):
    """Huber loss (ESL 10.23): ``r^2/2`` for ``|r| <= delta``, else ``delta (|r| - delta/2)``."""
    r = jnp.abs(y - f)
    delta = jnp.asarray(delta, r.dtype)
    return jnp.where(r <= delta, 0.5 * r * r, delta * (r - 0.5 * delta))


def quantile_fn(y, f, alpha):
    """Pinball loss at level ``alpha`` of ``r = y - f``: ``max(alpha r, (alpha - 1) r)``, minimised
    by the ``alpha``-quantile (Koenker and Bassett 1978).
    """
    r = y - f
    alpha = jnp.asarray(alpha, r.dtype)
    return jnp.maximum(alpha * r, (alpha - 1.0) * r)


def binomial_deviance_fn(y, f):
    """Binomial deviance (log loss) with ``p = sigmoid(f)``: ``log(1 + e^f) - y f``."""
    return jax.nn.softplus(f) - y * f


def exponential_fn(y, f):
    """AdaBoost's exponential loss ``exp(-y' f)`` with ``y' = 2y - 1`` (ESL eq. 10.8)."""
    return safe_exp(-(2.0 * y - 1.0) * f)


def multinomial_deviance_fn(y, f):
    """Multinomial deviance ``logsumexp(f) - f[y]`` of a class ``y`` (ESL eq. 10.22)."""
    return jax.nn.logsumexp(f) - jnp.take(f, y.astype(jnp.int32))


def multinomial_curvatures(f):
    """``(diagonal, majorant)``, each ``(K,)``: the multinomial deviance's hessian
    ``diag(p) - p p^T`` (``p = softmax(f)``, whatever the label) has diagonal ``p (1 - p)`` and
    Gershgorin majorant ``p_k (1 - p_k) + sum_{j != k} p_k p_j = 2 p (1 - p)`` (XGBoost's
    ``multi:softprob`` hessian), in ``O(K)``."""
    p = jax.nn.softmax(f)
    diag = p * (1.0 - p)
    return diag, 2.0 * diag


def samme_exponential_fn(y, f):
    """K-class exponential loss ``exp(-y.f / K)``, ``y_k = 1`` for the true class and ``-1/(K-1)``
    otherwise (SAMME coding, Zhu, Zou, Rosset and Hastie 2009).
    """
    k = f.shape[-1]
    code = jnp.where(jnp.arange(k, dtype=jnp.int32) == y.astype(jnp.int32), 1.0, -1.0 / (k - 1)).astype(f.dtype)
    return safe_exp(-jnp.dot(code, f) / k)


def poisson_fn(y, f):
    """Poisson deviance up to a constant, log link: ``exp(f) - y f``."""
    return safe_exp(f) - y * f


# ---- Constructors of the built-in losses ---------------------------------------------------


def squared_error() -> loss_lib.Loss:
    """Least-squares regression (ESL Table 10.2): identity link, the weighted mean as baseline,
    Newton trees.
    """
    return loss_lib.Loss(squared_error_fn, name="squared_error", baseline=baselines.mean_baseline, hessian="autodiff")


def absolute_error() -> loss_lib.Loss:
    """Least absolute deviation regression (Friedman 2001, Algorithm 3): least-squares trees on the
    gradient's sign, leaves refitted to the weighted median of their residuals.
    """
    return loss_lib.Loss(absolute_error_fn, name="absolute_error", baseline=baselines.median_baseline,
                hessian="unit", leaf_refit="quantile")


def huber(delta=1.0, alpha=None) -> loss_lib.Loss:
    """Huber loss with a fixed ``delta``, or ESL's adaptive delta when ``alpha`` is given.

    Least-squares trees with Huber leaf refits (Friedman 2001, Algorithm 4); the baseline is Huber's
    M-estimate for a fixed delta, the weighted median with the adaptive one.

    Args:
      delta: the transition point, ``> 0`` (traced); with ``alpha``, its value before the first
        round.
      alpha: ``None``, or the level in ``(0, 1)`` of the adaptive delta: the alpha-quantile of the
        absolute residuals, recomputed every round (ESL section 10.10.2).

    Returns:
      A regression :class:`jboost.Loss`.
    """
    params = {"delta": delta}
    domains = {"delta": loss_lib.POSITIVE}
    if alpha is not None:
        params["alpha"] = alpha
        domains["alpha"] = loss_lib.PROBABILITY
    return loss_lib.Loss(huber_fn if alpha is None else _huber_adaptive_fn, params=params, name="huber",
                baseline=baselines.huber_baseline if alpha is None else baselines.median_baseline, hessian="unit",
                leaf_refit="huber", adaptive_huber_alpha=alpha is not None, domains=domains)


def _huber_adaptive_fn(y, f, delta, alpha):
    return huber_fn(y, f, delta)


def quantile(alpha=0.5) -> loss_lib.Loss:
    """Quantile regression by the pinball loss (Koenker and Bassett 1978; Friedman 2001):
    least-squares trees, leaves refitted to the weighted ``alpha``-quantile of their residuals.

    Args:
      alpha: the quantile level in ``(0, 1)`` (traced).

    Returns:
      A regression :class:`jboost.Loss`.
    """
    return loss_lib.Loss(quantile_fn, params={"alpha": alpha}, name="quantile", baseline=baselines.quantile_baseline,
                hessian="unit", leaf_refit="quantile", domains={"alpha": loss_lib.PROBABILITY})


def binomial_deviance() -> loss_lib.Loss:
    """Logistic regression by the binomial deviance (ESL Table 10.2; Friedman 2001, Algorithm 5),
    labels 0/1, sigmoid link, the log-odds of the positive frequency as baseline.
    """
    return loss_lib.Loss(binomial_deviance_fn, name="binomial_deviance", task="binary",
                link=links.sigmoid_link, baseline=baselines.logit_baseline, hessian="autodiff")


def exponential() -> loss_lib.Loss:
    """AdaBoost's exponential loss (Friedman, Hastie and Tibshirani 2000; ESL eq. 10.8), labels 0/1,
    probabilities ``1 / (1 + exp(-2f))``, the half log-odds as baseline.
    """
    return loss_lib.Loss(exponential_fn, name="exponential", task="binary", link=links.adaboost_link,
                baseline=baselines.half_logit_baseline, hessian="autodiff")


def multinomial_deviance(n_classes=None) -> loss_lib.Loss:
    """K-class logistic regression by the multinomial deviance (ESL eq. 10.22; Friedman 2001,
    Algorithm 6), softmax link, centred log class frequencies as baseline.

    Args:
      n_classes: ``K``, or ``None`` (set from the labels at fit time).

    Returns:
      A multiclass :class:`jboost.Loss`.
    """
    return loss_lib.Loss(multinomial_deviance_fn, name="multinomial_deviance", n_outputs=n_classes,
                task="multiclass", link=links.softmax_link, baseline=baselines.log_freq_baseline, hessian="autodiff")


def samme_exponential(n_classes=None) -> loss_lib.Loss:
    """The K-class exponential loss of SAMME (Zhu, Zou, Rosset and Hastie 2009), probabilities
    ``p_k ∝ exp(f_k / (K - 1))``.

    Args:
      n_classes: ``K``, or ``None`` (set from the labels at fit time).

    Returns:
      A multiclass :class:`jboost.Loss`.
    """
    return loss_lib.Loss(samme_exponential_fn, name="samme_exponential", n_outputs=n_classes,
                task="multiclass", link=links.samme_link, baseline=baselines.samme_baseline, hessian="autodiff")


def poisson() -> loss_lib.Loss:
    """Poisson regression of counts (the Poisson deviance with a log link): predictions ``exp(f)``,
    the log of the weighted mean as baseline.
    """
    return loss_lib.Loss(poisson_fn, name="poisson", task="count", link=links.exp_link,
                baseline=baselines.log_mean_baseline, hessian="autodiff")


#: The per-sample functions of the built-in losses (custom losses get the host-side sanity checks
#: of :func:`jboost.fit` that these pass by construction, e.g. a gradient not zero everywhere).
BUILT_IN_FNS = frozenset({squared_error_fn, absolute_error_fn, huber_fn, _huber_adaptive_fn,
                          quantile_fn, binomial_deviance_fn, exponential_fn,
                          multinomial_deviance_fn, samme_exponential_fn, poisson_fn})


def is_built_in(loss: loss_lib.Loss) -> bool:
    """Whether ``loss`` computes one of jboost's built-in losses (:data:`BUILT_IN_FNS`)."""
    return loss.fn in BUILT_IN_FNS


# Built-in losses of the residual y - f alone: fitting y - c from the baseline of y - c and
# adding c back to the raw scores gives the same model (their baselines -- mean, median,
# quantile, Huber's M-estimate -- move with the labels too).
SHIFT_EQUIVARIANT_FNS = frozenset({squared_error_fn, absolute_error_fn, huber_fn,
                                   _huber_adaptive_fn, quantile_fn})


#: ``(degree, gradient degree, parameters in label units)`` of the built-in losses of the
#: residual: scaling the labels and raw scores by ``s`` (and those parameters with them) scales
#: the loss by ``s^degree`` and its gradient by ``s^(gradient degree)`` (the hessians of the
#: squared error and of the unit-hessian losses do not change); used by
#: :mod:`jboost.fitting.standardise`.
SCALE_DEGREES = {
    squared_error_fn: (2, 1, ()),
    huber_fn: (2, 1, ("delta",)),
    _huber_adaptive_fn: (2, 1, ("delta",)),
    absolute_error_fn: (1, 0, ()),
    quantile_fn: (1, 0, ()),
}


def shifts_with_labels(loss: loss_lib.Loss) -> bool:
    """Whether ``loss(y + c, f + c) == loss(y, f)`` for every ``c`` (a built-in loss of the
    residual), so a fit may subtract a label offset in float64 and add it back to the raw scores
    (:func:`jboost.fitting.standardise.label_offset`).
    """
    return loss.fn in SHIFT_EQUIVARIANT_FNS


_REGISTRY = {
    "squared_error": squared_error,
    "absolute_error": absolute_error,
    "huber": huber,
    "quantile": quantile,
    "binomial_deviance": binomial_deviance,
    "logistic": binomial_deviance,
    "exponential": exponential,
    "multinomial_deviance": multinomial_deviance,
    "softmax": multinomial_deviance,
    "samme_exponential": samme_exponential,
    "poisson": poisson,
}


def get(loss, n_outputs: Optional[int] = None, task: Optional[str] = None) -> loss_lib.Loss:
    """Resolve a loss given as a name, a :class:`jboost.Loss` or a per-sample function.

    Args:
      loss: a built-in loss's name (``"squared_error"``, ``"logistic"``, ...), a
        :class:`jboost.Loss`, or a per-sample function.
      n_outputs: ``K``; when given, the resolved loss has ``K`` outputs.
      task: the task of a plain function (default ``"regression"``).

    Returns:
      A :class:`jboost.Loss`.

    Raises:
      ValueError: ``loss`` is a name that is not a built-in loss.
      TypeError: ``loss`` is neither a name, a :class:`jboost.Loss` nor a function.
    """
    if isinstance(loss, loss_lib.Loss):
        out = loss
    elif isinstance(loss, str):
        if loss not in _REGISTRY:
            raise ValueError(f"loss={loss!r} is not a built-in loss; choose one of {sorted(_REGISTRY)}"
                             " or pass a function loss(y, raw).")
        out = _REGISTRY[loss]()
    elif callable(loss):
        # The link is the task's (Loss.link's default); a K-class task needs n_outputs (checked
        # in jboost.losses.checks.resolve_loss, which says to pass it).
        out = loss_lib.Loss(loss, name=getattr(loss, "__name__", "custom"), n_outputs=n_outputs or 1,
                   task=task or "regression")
    else:
        raise TypeError(f"loss must be a name, a jboost.Loss or a function loss(y, raw); got {type(loss).__name__}.")
    if n_outputs is not None and out.n_outputs != n_outputs:
        out = out.replace(n_outputs=int(n_outputs))
    return out
