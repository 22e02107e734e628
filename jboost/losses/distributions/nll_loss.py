"""The jboost Loss of a Distribution: its NLL (optionally with NGBoost's natural gradient, Duan
et al. 2020), its mean as the link and its MLE as the baseline; :func:`distribution_of` a model.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np

from jboost.losses import baselines, loss as loss_lib
from jboost.losses.distributions import base, natural as natural_lib

# ---- The loss: a jboost.Loss of K raw outputs ----------------------------------------------


@dataclasses.dataclass(frozen=True)
class _NLL:
    """The per-sample loss of a distribution (hashable: equal distributions give one program)."""

    dist: base.Distribution
    natural: bool = False
    n_mc_samples: int = 100

    @property
    def __name__(self) -> str:  # noqa: A003 - model files name a loss's function by __name__
        return _loss_name(self.dist, self.natural)

    def __call__(self, y, raw, **params):
        raw = jnp.reshape(raw, (self.dist.n_outputs,))   # one-output losses get a scalar
        inside, y = base.in_support(self.dist, y)
        if self.natural:
            value = natural_lib.natural_nll(self.dist, self.n_mc_samples)(y, raw, params)
        else:
            value = self.dist.nll(y, raw, **params)
        return value if inside is None else jnp.where(inside, value, jnp.inf)

    def check_labels(self, y, name: str = "y") -> None:
        """:func:`check_labels` of the distribution (for a loss's label check)."""
        base.check_labels(self.dist, y, name)


@dataclasses.dataclass(frozen=True)
class _Mean:
    """The link: raw scores ``(..., K)`` (``(...,)`` for one output) -> the distribution's mean."""

    dist: base.Distribution

    def __call__(self, raw, **params):
        if self.dist.n_outputs == 1:
            raw = raw[..., None]
        return self.dist.mean(raw, **params)


@dataclasses.dataclass(frozen=True)
class _Baseline:
    """The weighted MLE of a constant distribution, ``(K,)``: closed form, or L-BFGS on the NLL
    from the distribution's starting point (moments)."""

    dist: base.Distribution
    n_steps: int = 50

    def __call__(self, y, w, n_outputs, **params):
        start = jnp.asarray(self.dist.init(y, w, **params), jnp.float32)
        if self.dist.init_is_mle:
            return start
        nll = jax.vmap(lambda yi, r: self.dist.nll(yi, r, **params), in_axes=(0, None))

        def objective(raw):
            return jnp.sum(w * nll(y, raw)) / jnp.sum(w)

        return baselines.lbfgs_minimize(objective, start, self.n_steps)


def _loss_name(dist: base.Distribution, natural: bool) -> str:
    return dist.name + ("_natural" if natural else "")


def loss(dist: base.Distribution, natural_gradient: bool = False, *, line_search: bool = False,
         n_mc_samples: int = 100, **params) -> loss_lib.Loss:
    """The :class:`jboost.Loss` of ``dist``: its per-sample NLL with ``K = dist.n_outputs`` outputs.

    Args:
      dist: a :class:`jboost.losses.distributions.base.Distribution` (``Normal``, ``LogNormal``,
        ``Poisson``, ``NegativeBinomial``, ``Gamma``, ``StudentT``, or your own).
      natural_gradient: fit each tree to NGBoost's natural gradient ``F^{-1} g`` by least squares
        instead of a Newton tree on the NLL (``docs/distributions.md``).
      line_search: refit every leaf by damped Newton iterations on its NLL
        (``leaf_refit="line_search"``; vector-leaf trees only).
      n_mc_samples: draws per row of a Monte-Carlo Fisher information (static, ``>= 2``).
      **params: the distribution's traced parameters (``df=5.0`` for ``StudentT``), defaults
        ``dist.defaults``.

    Returns:
      A :class:`jboost.Loss`: the distribution's mean as link, the MLE of a constant distribution
      as baseline, task ``"count"`` or ``"regression"``; named ``dist.name`` (``+ "_natural"``),
      which model files record.

    Raises:
      TypeError: ``dist`` is not a :class:`jboost.losses.distributions.base.Distribution`, or
        ``params`` names a parameter the distribution does not have.
      ValueError: ``n_mc_samples`` is not an integer ``>= 2``.
    """
    if not isinstance(dist, base.Distribution):
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
    return loss_lib.Loss(
        _NLL(dist, natural, int(n_mc_samples)), params={**defaults, **params},
        name=_loss_name(dist, natural), n_outputs=dist.n_outputs, task=dist.task,
        link=_Mean(dist), baseline=_Baseline(dist), hessian="unit" if natural else "autodiff",
        leaf_refit="line_search" if line_search else None, domains=dict(dist.domains))


def distribution_of(model) -> base.Distribution:
    """The :class:`jboost.losses.distributions.base.Distribution` a model (a
    :class:`jboost.Booster` of :func:`loss`) was fitted with.

    Raises:
      TypeError: the model's loss is not a distribution's (or it has no loss).
    """
    fitted = getattr(model, "loss", None)
    fn = getattr(getattr(fitted, "fn", None), "__wrapped__", getattr(fitted, "fn", None))
    if not isinstance(fn, _NLL):
        what = (f"loss {fitted.name!r}" if fitted is not None
                else f"a {type(model).__name__}, which has no loss")
        raise TypeError(f"this model was fitted with {what}, not a distribution: fit with "
                        "loss=jboost.distributions.loss(distributions.Normal) (or another "
                        "Distribution) to predict distributions.")
    return fn.dist
