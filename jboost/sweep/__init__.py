"""Hyperparameter sweeps with K-fold cross-validation (package docstring); re-exports sweep, SweepResult, refit, the metrics, grid names and the memory/fold helpers."""
from __future__ import annotations
import itertools
import numbers
import time
import warnings
from typing import Any, Callable, Dict, Mapping, NamedTuple, Optional, Sequence, Tuple, Union
import jax
import jax.numpy as jnp
import numpy as np
from jboost import _native
from jboost.data import folds as cv
from jboost.engine import distributed
from jboost.sweep import grid as grid_lib
from jboost.sweep import metrics as metrics_lib
from jboost.sweep import result as result_lib
from jboost.sweep.grid import HYPERPARAMETERS
from jboost.sweep.grid import STATIC_SETTINGS
from jboost.sweep.metrics import METRICS
from jboost.sweep.metrics import absolute_error
from jboost.sweep.metrics import error_rate
from jboost.sweep.metrics import squared_error
from jboost.sweep.result import SweepResult
from jboost.sweep.result import refit
from jboost.engine import memory


# Folds, memory estimates and chunk sizes, re-exported where sweep users look for them.
fold_ids = cv.fold_ids
model_bytes = memory.model_bytes
auto_chunk_size = memory.auto_chunk_size
DEFAULT_CPU_BUDGET = memory.DEFAULT_CPU_BUDGET
DEFAULT_CPU_MODELS_PER_DEVICE = memory.DEFAULT_CPU_MODELS_PER_DEVICE

__all__ = ["sweep", "SweepResult", "refit", "METRICS", "error_rate", "squared_error",
           "absolute_error", "HYPERPARAMETERS", "STATIC_SETTINGS", "fold_ids", "model_bytes",
           "auto_chunk_size", "DEFAULT_CPU_BUDGET", "DEFAULT_CPU_MODELS_PER_DEVICE"]
