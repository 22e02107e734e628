"""jboost: boosting and bagging of oblivious trees in JAX, with losses as pure functions."""

from jboost import algorithms
from jboost import bagging
from jboost import binning
from jboost import combine
from jboost import datasets
from jboost import boosting
from jboost import derivatives
from jboost import distributions
from jboost import histograms
from jboost import inspect
from jboost import losses
from jboost import model
from jboost import objectives
from jboost import plot
from jboost import refit
from jboost import samplers
from jboost import splits
from jboost import sweep
from jboost import tree
from jboost.api import fit
from jboost.finetune import finetune
from jboost.model import Booster
from jboost.model import feature_importance
from jboost.model import predict
from jboost.model import predict_class
from jboost.model import predict_mean
from jboost.model import predict_proba
from jboost.model import staged_predict
from jboost.binning import bin_features
from jboost.binning import compute_borders
from jboost.boosting import BoostConfig
from jboost.boosting import Hyperparams
from jboost.derivatives import grad_hess
from jboost.losses import Loss
from jboost.sweep import SweepResult
from jboost.tree import ObliviousTrees
from jboost.depthwise import DepthwiseTrees
from jboost.io import ModelFileError
from jboost.io import load
from jboost.io import save

__version__ = "0.1.0"

__all__ = [
    "Booster", "BoostConfig", "Hyperparams", "Loss", "ObliviousTrees", "DepthwiseTrees",
    "bin_features", "compute_borders", "feature_importance", "finetune", "fit", "grad_hess",
    "predict", "predict_class", "predict_mean", "predict_proba", "staged_predict", "SweepResult",
    "ModelFileError", "load", "save",
]
