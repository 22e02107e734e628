"""The classes and functions a model file may name: model types, tree families, metadata pytrees and the built-in loss functions."""

from __future__ import annotations

from typing import Any, Dict

from jboost.data import categorical as categorical_lib
from jboost.losses import (baselines, links, loss as loss_lib, multi_quantile,
                           objectives as objectives_lib, per_sample)
from jboost.models import base as model_base  # importing jboost.models registers every model type
from jboost.models import metadata as metadata_lib
from jboost.trees import registry as tree_registry


_REGISTRY_CACHE: Dict[str, Any] = {}


def qualified_name(obj) -> str:
    """``module.qualname`` of a function or class (``?`` for parts it lacks)."""
    return f"{getattr(obj, '__module__', '?')}.{getattr(obj, '__qualname__', getattr(obj, '__name__', '?'))}"


#: The modules the built-in loss functions were defined in when model files started naming them,
#: which files keep naming (docs/io.md).
RECORDED_MODULES = {"jboost.losses.per_sample": "jboost.losses", "jboost.losses.links": "jboost.losses",
                    "jboost.losses.baselines": "jboost.losses", "jboost.losses.objectives": "jboost.objectives"}
RECORDED_NAMES = {"jboost.losses.per_sample._logit_deviance_fn":
                  "jboost.losses.per_sample._logit_deviance_fn"}


def recorded_name(f) -> str:
    """The name a model file gives the built-in function ``f`` (see :data:`RECORDED_MODULES`)."""
    name = qualified_name(f)
    if name in RECORDED_NAMES:
        return RECORDED_NAMES[name]
    module = getattr(f, "__module__", "?")
    return RECORDED_MODULES.get(module, module) + name[len(module):]


def registry() -> Dict[str, Any]:
    """The known classes and functions: ``models`` and ``nested`` (the registered model types and
    pytrees inside models), ``families`` (the built-in tree families), ``callables`` (every
    function of a built-in loss by its recorded name), ``losses`` (each built-in loss by its
    function: its task, link and kind), ``Loss`` and the metadata classes."""
    if _REGISTRY_CACHE:  # the model types as registered now (a type may register later)
        _REGISTRY_CACHE.update(models=model_base.model_types(), nested=model_base.nested_types())
        return _REGISTRY_CACHE

    # Every function of a built-in loss (the per-sample function, its link and its baseline),
    # read off the constructors, plus the links and baselines a Loss may name.
    built_in = [per_sample.squared_error(), per_sample.absolute_error(), per_sample.huber(),
                per_sample.huber(alpha=0.9), per_sample.quantile(), per_sample.binomial_deviance(),
                per_sample.exponential(), per_sample.multinomial_deviance(),
                per_sample.samme_exponential(), per_sample.poisson(),
                per_sample.logit_deviance(), multi_quantile.quantiles(), objectives_lib.cox("breslow"),
                objectives_lib.cox("efron"), objectives_lib.ranking("softmax"),
                objectives_lib.ranking("lambdarank")]
    fns = [f for loss in built_in for f in (loss.fn, loss.link, loss.baseline)]
    fns += [loss.hessian_diag for loss in built_in if callable(loss.hessian_diag)]
    fns += [links.identity_link, links.exp_link, links.sigmoid_link,
            links.adaboost_link, links.softmax_link, links.samme_link,
            baselines.mean_baseline, baselines.median_baseline, baselines.quantile_baseline,
            baselines.huber_baseline, baselines.logit_baseline, baselines.half_logit_baseline,
            baselines.log_freq_baseline, baselines.samme_baseline, baselines.log_mean_baseline]
    _REGISTRY_CACHE.update(
        models=model_base.model_types(),
        families={cls.__name__: cls for cls in tree_registry.TREE_FAMILIES.values()},
        nested=model_base.nested_types(),
        CategoricalSpec=categorical_lib.CategoricalSpec,
        Settings=metadata_lib.Settings,
        Classes=metadata_lib.Classes,
        FeatureNames=metadata_lib.FeatureNames,
        callables={recorded_name(f): f for f in fns if f is not None},
        losses={loss.fn: loss for loss in built_in},
        Loss=loss_lib.Loss,
    )
    return _REGISTRY_CACHE
