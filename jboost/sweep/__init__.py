"""Hyperparameter sweeps with K-fold cross-validation, fitted as one vmapped, compiled program:
:func:`sweep` fits every configuration of a grid on every fold; :class:`SweepResult` holds the
curves, the selection and the models. See docs/sweeps.md."""

from jboost.data.folds import fold_ids
from jboost.engine.memory import (DEFAULT_CPU_BUDGET, DEFAULT_CPU_MODELS_PER_DEVICE,
                                  auto_chunk_size, model_bytes)
from jboost.sweep.fit import sweep
from jboost.sweep.grid import HYPERPARAMETERS, STATIC_SETTINGS
from jboost.sweep.metrics import METRICS, absolute_error, error_rate, squared_error
from jboost.sweep.result import SweepResult, refit

__all__ = ["sweep", "SweepResult", "refit", "METRICS", "error_rate", "squared_error",
           "absolute_error", "HYPERPARAMETERS", "STATIC_SETTINGS", "fold_ids", "model_bytes",
           "auto_chunk_size", "DEFAULT_CPU_BUDGET", "DEFAULT_CPU_MODELS_PER_DEVICE"]
