"""Shared defaults, limits and domains of the fit settings; host and traced (NaN-masking) domain checks; early stopping and eval_metric settings."""

from __future__ import annotations

import functools
import warnings
from typing import Optional

import jax
import jax.numpy as jnp
import numpy as np

from jboost import checks
from jboost.data import binning
from jboost.data import categorical_stats
from jboost.engine import algorithm as algorithm_lib
from jboost.engine import boosting as boosting_lib
from jboost.engine import samplers
from jboost.losses import loss as loss_lib
from jboost.losses import metrics
from jboost.losses import metrics as metrics_lib
from jboost.models import metadata
from jboost.trees import lossguide
from jboost.trees import oblivious
from jboost.trees import registry
from jboost.trees import splits as splits_lib

MAX_DEPTH = 16
#: Depth-wise forests' trees (node tables grown by the CPU kernel over their non-empty nodes).
MAX_DEPTHWISE_DEPTH = 30
MAX_ROUNDS = 10**7

# Shared defaults of the boosting entry points (fit, sweep, bagged boosters, stacking, ECOC).
# The classical algorithms (jboost.algorithms) and forests differ where their docstrings say why
# (the published algorithms use stumps or small trees and no L2 penalty; forests grow deep,
# unpenalised trees).
DEFAULTS = dict(n_rounds=100, depth=6, learning_rate=0.1, l2=1.0, min_split_gain=0.0,
                min_child_weight=1.0, subsample=1.0, colsample=1.0, colsample_by="tree",
                n_bins=256)

# name -> (low, high, low end open): the domain of every continuous hyperparameter.
BOUNDS = {
    "learning_rate": (0.0, np.inf, True),
    "l2": (0.0, np.inf, False),
    "min_split_gain": (0.0, np.inf, False),
    "min_child_weight": (0.0, np.inf, False),
    "subsample": (0.0, 1.0, True),
    "colsample": (0.0, 1.0, True),
}


def check_early_stopping(rounds, tolerance, metric, loss, *, has_validation: bool,
                         needs: str = "eval_set=(X_valid, y_valid)"):
    """The static :class:`jboost.engine.boosting.EarlyStopping` of ``early_stopping_rounds``,
    ``early_stopping_tolerance`` and ``eval_metric`` (``None`` without ``rounds``), for every
    entry point that stops early (``fit``, bagged boosters, the sweep); ``needs`` names the
    validation rows the entry point lacks when ``has_validation`` is false."""
    if tolerance is None or isinstance(tolerance, bool):
        raise TypeError(f"early_stopping_tolerance must be a real number >= 0; got {tolerance!r}.")
    checks.check_real(tolerance, "early_stopping_tolerance", 0.0, np.inf)
    if rounds is None:
        if metric is not None:
            raise ValueError("eval_metric is the early-stopping score: pass early_stopping_rounds too.")
        if float(tolerance) != 0.0:
            raise ValueError(f"early_stopping_tolerance={tolerance} needs early_stopping_rounds: "
                             "pass early_stopping_rounds= too (or drop the tolerance).")
        return None
    rounds = checks.check_int(rounds, "early_stopping_rounds", 1, MAX_ROUNDS)
    if not has_validation:
        raise ValueError(f"early_stopping_rounds needs {needs}: the rounds stop on its score.")
    metrics.check_metric(metric, loss, name="eval_metric")
    return boosting_lib.EarlyStopping(rounds=rounds, tolerance=float(tolerance), metric=metric)


def check_hyperparameter(name: str, v) -> None:
    """``v`` within the domain :data:`BOUNDS` of hyperparameter ``name``."""
    lo, hi, lo_open = BOUNDS[name]
    checks.check_real(v, name, lo, hi, lo_open=lo_open)


def _traced_contains(domain, x) -> jax.Array:
    """Traced :meth:`jboost.losses.Interval.contains`: every element of ``x`` finite and inside
    ``domain`` (``None``: finite only)."""
    x = jnp.asarray(x, jnp.float32)
    ok = jnp.isfinite(x)
    if domain is not None:
        ok &= (x > domain.lo) if domain.lo_open else (x >= domain.lo)
        ok &= (x < domain.hi) if domain.hi_open else (x <= domain.hi)
    return jnp.all(ok)


def _hyper_domains() -> dict:
    return {name: loss_lib.Interval(lo, hi, lo_open, False) for name, (lo, hi, lo_open) in BOUNDS.items()}


def in_domains(loss: Optional[loss_lib.Loss], hyper=None) -> jax.Array:
    """A traced boolean: every parameter of ``loss`` is finite and inside its declared domain
    (:attr:`jboost.Loss.domains`, none without ``loss``) and every continuous hyperparameter of
    ``hyper`` (a :class:`jboost.engine.boosting.Hyperparams` or a forest's, optional: the fields named
    in :data:`BOUNDS`) inside its bounds. The check that values traced under ``jax.vmap`` or
    ``jit`` get in place of the host's (:func:`check_loss_param`, :func:`check_hyperparameter`)."""
    ok = jnp.asarray(True)
    for name, value in ({} if loss is None else loss.params).items():
        ok &= _traced_contains(loss.domains.get(name), value)
    if hyper is not None:
        for name, domain in _hyper_domains().items():
            if getattr(hyper, name, None) is not None:
                ok &= _traced_contains(domain, getattr(hyper, name))
    return ok


def _report_outside(ok, params, hyper, *, loss_name: str, domains) -> None:
    """Host side of :func:`nan_outside_domains` (a ``jax.debug.callback``, one model's values)."""
    if bool(np.asarray(ok)):
        return
    bad = []
    for name, value in params.items():
        domain = domains.get(name)
        arr = np.asarray(value, np.float64)
        if not np.all(domain.contains(arr) if domain is not None else np.isfinite(arr)):
            bad.append(f"loss {loss_name!r} parameter {name}={arr.ravel()[0]:g} is not in "
                       f"{domain if domain is not None else '(-inf, inf)'}")
    for name, domain in _hyper_domains().items():
        if hyper is not None and name in hyper and not np.all(domain.contains(np.asarray(hyper[name]))):
            bad.append(f"{name}={float(np.asarray(hyper[name]).ravel()[0]):g} is not in {domain}")
    warnings.warn(f"{'; '.join(bad) or 'a traced setting is outside its domain'}: this fit's "
                  "results are NaN (a traced value, e.g. under "
                  "jax.vmap, is checked when the program runs instead of refused on the host); "
                  "use values inside the domain.", UserWarning, stacklevel=2)


def nan_outside_domains(values, loss: Optional[loss_lib.Loss], hyper=None, *, warn: bool = True):
    """``values`` (any pytree: a fit's outputs, its loss curves) with every floating leaf NaN
    when a traced parameter of ``loss`` or hyperparameter of ``hyper`` is outside its domain
    (:func:`in_domains`), so that a bad setting of a vmapped fit is a NaN row, never ranked; with
    ``warn``, a ``UserWarning`` names the value when the program runs (``jax.debug.callback``,
    once per model under ``vmap``). Concrete values were checked on the host already (errors):
    without a traced value ``values`` is returned as it is."""
    params = {} if loss is None else dict(loss.params)
    if not any(checks.is_traced(leaf) for leaf in jax.tree_util.tree_leaves((params, hyper))):
        return values
    ok = in_domains(loss, hyper)
    if warn:
        hyper_dict = None if hyper is None else {name: getattr(hyper, name) for name in BOUNDS
                                                 if getattr(hyper, name, None) is not None}
        jax.debug.callback(functools.partial(
            _report_outside, loss_name=None if loss is None else loss.name,
            domains=loss_lib.Domains() if loss is None else loss.domains), ok, params, hyper_dict)

    def mask(a):
        if isinstance(a, jax.Array) or isinstance(a, np.ndarray):
            if jnp.issubdtype(a.dtype, jnp.floating):
                return jnp.where(ok, a, jnp.nan).astype(a.dtype)
        return a

    return jax.tree_util.tree_map(mask, values)


def check_eval_metric(metric, loss: loss_lib.Loss, *, has_validation: bool,
                      needs: str = "eval_set=(X_valid, y_valid)"):
    """``eval_metric`` given without ``early_stopping_rounds``: a validation metric computed
    after every round for the progress lines, the callbacks and the model's settings only
    (``None`` stays ``None``). It needs the validation rows (``needs``) and is checked as an
    early-stopping metric is (:func:`check_metric`)."""
    if metric is None:
        return None
    if not has_validation:
        raise ValueError(f"eval_metric={getattr(metric, '__name__', metric)!r} is computed on the "
                         f"validation rows: pass {needs}.")
    metrics.check_metric(metric, loss, name="eval_metric")
    return metric


def recorded_settings(config: boosting_lib.BoostConfig, hyper: boosting_lib.Hyperparams, key, *,
                      init_rounds: int = 0, base_margin: bool = False,
                      categorical: Optional[categorical_stats.Categorical] = None) -> metadata.Settings:
    """The :class:`jboost.models.metadata.Settings` of a fit (``Booster.settings``, its docstring lists
    them): the traced hyperparameters as the fit used them (float32; tracers under ``jax.vmap``,
    so the batch's settings get the model axis), the static counts and flags as int32 / bool
    arrays, the key's raw uint32 data, and the samplers', criterion's, tree family's and
    early-stopping metric's names."""
    arrays = dict(hyper._asdict())
    names = {"colsample_by": _name(config.colsample_by), "row_sampler": _name(config.row_sampler),
             "split_criterion": str(config.split_criterion.name),
             "tree_family": config.tree_family.__name__}
    if config.max_leaves is not None:
        arrays["max_leaves"] = jnp.int32(config.max_leaves)
    if config.learning_rate_schedule is not None:  # the traced rate is then 1 (a multiplier)
        del arrays["learning_rate"]
        names["learning_rate_schedule"] = _name(config.learning_rate_schedule)
    key = jax.random.key_data(key) if jnp.issubdtype(key.dtype, jax.dtypes.prng_key) else key
    arrays.update(n_rounds=jnp.int32(config.n_rounds), init_rounds=jnp.int32(init_rounds),
                  depth=jnp.int32(config.depth), n_bins=jnp.int32(config.n_bins),
                  per_output_trees=jnp.bool_(config.per_output_trees),
                  base_margin=jnp.bool_(base_margin), key=jnp.asarray(key, jnp.uint32))
    if categorical is not None:  # the prior as used (traced), the one-hot threshold
        arrays.update(cat_prior=categorical.prior, cat_prior_weight=categorical.prior_weight,
                      one_hot_max_size=jnp.int32(categorical.spec.one_hot_max_size))
    es = config.early_stopping
    if es is not None:
        arrays.update(early_stopping_rounds=jnp.int32(es.rounds),
                      early_stopping_tolerance=jnp.float32(es.tolerance))
        names["eval_metric"] = metrics_lib.metric_name(es.metric)
    elif config.eval_metric is not None:  # shown and given to callbacks, not a stopping score
        names["eval_metric"] = metrics_lib.metric_name(config.eval_metric)
    return metadata.Settings(arrays, names)


def _name(x) -> str:
    """A setting's name: the string itself, or a function's ``__name__``."""
    return x if isinstance(x, str) else str(getattr(x, "__name__", type(x).__name__))


def settings(*, n_rounds, depth, n_bins, learning_rate, l2, min_split_gain, min_child_weight,
             subsample, colsample, colsample_by="tree", per_output_trees=False,
             row_sampler="bernoulli", algorithm: Optional[algorithm_lib.Algorithm] = None,
             split_criterion: splits_lib.SplitCriterion = splits_lib.NEWTON,
             tree_family: type = oblivious.ObliviousTrees, max_leaves: Optional[int] = None):
    """Check the boosting settings; returns ``(BoostConfig (static), Hyperparams (traced))``.

    The one place every boosting entry point (``fit``, the algorithms, sweeps, bagged boosters,
    stacking, ECOC) turns its keyword arguments into a configuration. ``learning_rate`` may be a
    callable ``round -> rate`` (e.g. an optax schedule): it is then the static
    ``learning_rate_schedule`` and the traced rate is 1. Loss-guided trees
    (``tree_family="lossguide"``) take ``max_leaves`` (default
    :data:`jboost.trees.lossguide.DEFAULT_MAX_LEAVES`) and ``depth`` as their depth bound, up to
    :data:`jboost.fitting.settings.MAX_DEPTHWISE_DEPTH`; ``depth=None`` there is no bound but
    ``max_leaves`` itself (``max_leaves - 1``, at most that maximum).
    """
    n_rounds = checks.check_int(n_rounds, "n_rounds", 1, MAX_ROUNDS)
    families = registry.TREE_FAMILIES
    if isinstance(tree_family, str):  # the built-in families by name
        if tree_family not in families:
            raise ValueError(f"tree_family must be \"oblivious\", \"depthwise\", \"lossguide\" or "
                             f"a class implementing jboost.trees.family.TreeFamily; got {tree_family!r}.")
        tree_family = families[tree_family]
    if tree_family is families["lossguide"]:
        max_leaves = checks.check_int(
            lossguide.DEFAULT_MAX_LEAVES if max_leaves is None else max_leaves, "max_leaves", 2,
            lossguide.MAX_LEAVES)
        if depth is None:  # no bound but the leaves: a chain of max_leaves - 1 splits
            depth = min(max_leaves - 1, MAX_DEPTHWISE_DEPTH)
        depth = checks.check_int(depth, "depth", 1, MAX_DEPTHWISE_DEPTH)
    else:
        if max_leaves is not None:
            raise ValueError(f"max_leaves={max_leaves!r} bounds loss-guided trees only: pass "
                             "tree_family=\"lossguide\" with it, or leave max_leaves out (the "
                             "other families grow every level to depth).")
        if depth is None:
            raise ValueError("depth=None (no depth bound) is for loss-guided trees "
                             "(tree_family=\"lossguide\", bounded by max_leaves); pass an integer "
                             f"depth in [1, {MAX_DEPTH}].")
        depth = checks.check_int(depth, "depth", 1, MAX_DEPTH)
    n_bins = checks.check_int(n_bins, "n_bins", 3, binning.MAX_BINS)
    schedule = None
    if callable(learning_rate):
        schedule, learning_rate = learning_rate, 1.0
    values = dict(learning_rate=learning_rate, l2=l2, min_split_gain=min_split_gain,
                  min_child_weight=min_child_weight, subsample=subsample, colsample=colsample)
    for name, v in values.items():
        check_hyperparameter(name, v)
    if not callable(colsample_by):
        checks.check_choice(colsample_by, "colsample_by", tuple(samplers.COLUMN_SAMPLERS))
    if not callable(row_sampler):
        checks.check_choice(row_sampler, "row_sampler", tuple(samplers.ROW_SAMPLERS))
    if not isinstance(split_criterion, splits_lib.SplitCriterion):
        raise TypeError(f"split_criterion must be a jboost.trees.splits.SplitCriterion(score, value), got "
                        f"{type(split_criterion).__name__}: write score(G, H, l2) and value(G, H, l2) "
                        "and pass SplitCriterion(score, value).")
    missing = [m for m in ("grow", "leaf_index_raw", "leaf_index_binned", "with_borders")
               if not isinstance(tree_family, type) or not callable(getattr(tree_family, m, None))]
    if missing:
        raise TypeError(f"tree_family must be \"oblivious\", \"depthwise\", \"lossguide\" or a "
                        f"class implementing jboost.trees.family.TreeFamily; {tree_family!r} lacks "
                        f"{', '.join(missing)}.")
    config = boosting_lib.BoostConfig(n_rounds=n_rounds, depth=depth, n_bins=n_bins,
                                  per_output_trees=bool(per_output_trees), colsample_by=colsample_by,
                                  learning_rate_schedule=schedule, row_sampler=row_sampler,
                                  algorithm=algorithm or algorithm_lib.NEWTON,
                                  split_criterion=split_criterion, tree_family=tree_family,
                                  max_leaves=max_leaves)
    return config, boosting_lib.Hyperparams.create(**values)
