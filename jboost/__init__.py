"""jboost: boosting and bagging of oblivious trees in JAX, with losses as pure functions.

The public names are below; the namespaces follow the way data flows: :mod:`jboost.data` (tabular
input, labels, binning, categorical columns, folds) -> :mod:`jboost.losses` (losses, objectives,
distributions, derivatives) -> :mod:`jboost.trees` (tree families, histograms, splits, refits) ->
:mod:`jboost.engine` (the boosting step and scan, the host round loop, batching, memory) ->
:mod:`jboost.models` (every fitted model type and ``predict``) -> the entry points
(:func:`jboost.fit`, :mod:`jboost.sweep`, :mod:`jboost.bagging`, :mod:`jboost.combine`,
:mod:`jboost.algorithms`) -> :mod:`jboost.io`, :mod:`jboost.inspect`, :mod:`jboost.plot`.
"""

from jboost import (algorithms, bagging, combine, data, datasets, distributions, engine, inspect,
                    io, losses, models, objectives, plot, sweep, trees)
from jboost._version import __version__
from jboost.data.binning import bin_features, compute_borders
from jboost.engine.boosting import BoostConfig, Hyperparams
from jboost.finetune import finetune
from jboost.fitting.boost import fit
from jboost.io import ModelFileError, load, save
from jboost.losses.derivatives import grad_hess
from jboost.losses.loss import Loss
from jboost.models.base import (feature_importance, predict, predict_class, predict_mean,
                                predict_proba, staged_predict)
from jboost.models.booster import Booster
from jboost.sweep import SweepResult
from jboost.trees.depthwise import DepthwiseTrees
from jboost.trees.oblivious import ObliviousTrees

__all__ = [
    "Booster", "BoostConfig", "Hyperparams", "Loss", "ObliviousTrees", "DepthwiseTrees",
    "bin_features", "compute_borders", "feature_importance", "finetune", "fit", "grad_hess",
    "predict", "predict_class", "predict_mean", "predict_proba", "staged_predict", "SweepResult",
    "ModelFileError", "load", "save",
]
