"""jboost: boosting and bagging of oblivious trees in JAX, with losses as pure functions.

The public names are below; the namespaces follow the way data flows: :mod:`jboost.data` (tabular
input, labels, binning, categorical columns, folds) -> :mod:`jboost.losses` (losses, objectives,
distributions, derivatives) -> :mod:`jboost.trees` (tree families, histograms, splits, refits) ->
:mod:`jboost.engine` (the boosting step and scan, the host round loop, batching, memory) ->
:mod:`jboost.models` (every fitted model type and ``predict``) -> the entry points
(:func:`jboost.fit`, :mod:`jboost.sweep`, :mod:`jboost.bagging`, :mod:`jboost.combine`,
:mod:`jboost.algorithms`) -> :mod:`jboost.io`, :mod:`jboost.inspect`, :mod:`jboost.plot`.
"""

from jboost import algorithms
from jboost import bagging
from jboost import combine
from jboost import data
from jboost import datasets
from jboost import distributions
from jboost import engine
from jboost import inspect
from jboost import io
from jboost import losses
from jboost import models
from jboost import objectives
from jboost import plot
from jboost import sweep
from jboost import trees
from jboost._version import __version__
from jboost.data.binning import bin_features
from jboost.data.binning import compute_borders
from jboost.engine.boosting import BoostConfig
from jboost.engine.boosting import Hyperparams
from jboost.finetune import finetune
from jboost.fitting.boost import fit
from jboost.io import ModelFileError
from jboost.io import load
from jboost.io import save
from jboost.losses.derivatives import grad_hess
from jboost.losses.loss import Loss
from jboost.models.base import feature_importance
from jboost.models.base import predict
from jboost.models.base import predict_class
from jboost.models.base import predict_mean
from jboost.models.base import predict_proba
from jboost.models.base import staged_predict
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
