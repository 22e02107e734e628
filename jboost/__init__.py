"""jboost: boosting and bagging of oblivious trees in JAX, with losses as pure functions.

The public names are below; the namespaces follow the way data flows: :mod:`jboost.data` (tabular
input, labels, binning, categorical columns, folds) -> :mod:`jboost.losses` (losses, objectives,
distributions, derivatives) -> :mod:`jboost.trees` (tree families, histograms, splits, refits) ->
:mod:`jboost.engine` (the boosting step and scan, the host round loop, batching, memory) ->
:mod:`jboost.models` (every fitted model type and ``predict``) -> the entry points
(:func:`jboost.fit`, :mod:`jboost.sweep`, :mod:`jboost.bagging`, :mod:`jboost.combine`,
:mod:`jboost.algorithms`) -> :mod:`jboost.io`, :mod:`jboost.inspect`, :mod:`jboost.plot`;
:mod:`jboost.fine_tuning` refits a fitted model's leaves with optax (:func:`jboost.finetune`).

Importing jboost loads none of it: each name below, and each namespace, is imported when first
used (PEP 562), so ``import jboost`` is quick and ``jboost.load`` plus ``jboost.predict`` of a
model file never import the training engine.
"""

from __future__ import annotations

import importlib
import importlib.util
from typing import TYPE_CHECKING, Any

from jboost._version import __version__

#: The namespaces of ``jboost.<name>``, imported when first used.
SUBMODULES = ("algorithms", "bagging", "combine", "data", "datasets", "distributions", "engine",
              "fine_tuning", "inspect", "io", "losses", "models", "objectives", "plot", "sweep",
              "trees", "fitting")
# Any other module (jboost.sklearn, which needs scikit-learn) also loads on first use, unlisted.
#: Each public name and the module that defines it, imported when the name is first used.
PUBLIC = {
    "Booster": "jboost.models.booster", "BoostConfig": "jboost.engine.boosting",
    "Hyperparams": "jboost.engine.boosting", "Loss": "jboost.losses.loss",
    "ObliviousTrees": "jboost.trees.oblivious", "DepthwiseTrees": "jboost.trees.depthwise",
    "bin_features": "jboost.data.binning", "compute_borders": "jboost.data.binning",
    "feature_importance": "jboost.models.base", "finetune": "jboost.fine_tuning.tune",
    "calibrate_quantiles": "jboost.fine_tuning.calibrate",
    "fit": "jboost.fitting.boost", "grad_hess": "jboost.losses.derivatives",
    "predict": "jboost.models.base", "predict_class": "jboost.models.base",
    "predict_mean": "jboost.models.base", "predict_proba": "jboost.models.base",
    "staged_predict": "jboost.models.base", "SweepResult": "jboost.sweep.result",
    "ModelFileError": "jboost.io.reader", "load": "jboost.io.loader", "save": "jboost.io.writer",
}
__all__ = list(PUBLIC)


def __getattr__(name: str) -> Any:
    if name in PUBLIC:
        value = getattr(importlib.import_module(PUBLIC[name]), name)
    elif name in SUBMODULES or (not name.startswith("__")
                                and importlib.util.find_spec(f"{__name__}.{name}") is not None):
        value = importlib.import_module(f"{__name__}.{name}")  # any other module: as if imported
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__() -> list:
    return sorted(set(globals()) | set(PUBLIC) | set(SUBMODULES))


if TYPE_CHECKING:  # what static tools see: the names above, imported eagerly
    from jboost import (algorithms, bagging, combine, data, datasets, distributions, engine,
                        fine_tuning, inspect, io, losses, models, objectives, plot, sweep, trees)
    from jboost.data.binning import bin_features, compute_borders
    from jboost.engine.boosting import BoostConfig, Hyperparams
    from jboost.fine_tuning.calibrate import calibrate_quantiles
    from jboost.fine_tuning.tune import finetune
    from jboost.fitting.boost import fit
    from jboost.io.loader import load
    from jboost.io.reader import ModelFileError
    from jboost.io.writer import save
    from jboost.losses.derivatives import grad_hess
    from jboost.losses.loss import Loss
    from jboost.models.base import (feature_importance, predict, predict_class, predict_mean,
                                    predict_proba, staged_predict)
    from jboost.models.booster import Booster
    from jboost.sweep.result import SweepResult
    from jboost.trees.depthwise import DepthwiseTrees
    from jboost.trees.oblivious import ObliviousTrees
