"""Hyperparameter sweeps with K-fold cross-validation, fitted as one vmapped, compiled program:
:func:`sweep` fits every configuration of a grid on every fold; :class:`SweepResult` holds the
curves, the selection and the models. See docs/sweeps.md."""

from jboost.data.folds import fold_ids
from jboost.engine.memory import DEFAULT_CPU_BUDGET
from jboost.engine.memory import DEFAULT_CPU_MODELS_PER_DEVICE
from jboost.engine.memory import auto_chunk_size
from jboost.engine.memory import model_bytes
from jboost.sweep.fit import sweep
from jboost.sweep.grid import HYPERPARAMETERS
from jboost.sweep.grid import STATIC_SETTINGS
from jboost.sweep.metrics import METRICS
from jboost.sweep.metrics import absolute_error
from jboost.sweep.metrics import error_rate
from jboost.sweep.metrics import squared_error
from jboost.sweep.result import SweepResult
from jboost.sweep.result import refit

__all__ = ["sweep", "SweepResult", "refit", "METRICS", "error_rate", "squared_error",
           "absolute_error", "HYPERPARAMETERS", "STATIC_SETTINGS", "fold_ids", "model_bytes",
           "auto_chunk_size", "DEFAULT_CPU_BUDGET", "DEFAULT_CPU_MODELS_PER_DEVICE"]
