"""Combining models: averages and simplex weights (:mod:`~jboost.combine.weights`), the linear
second tier of stacking (:mod:`~jboost.combine.linear`), stacking of boosted learners
(:mod:`~jboost.combine.stacking`, :class:`StackedBoosters`) and error-correcting output codes
(:mod:`~jboost.combine.ecoc`, :class:`ECOCBoosters`). See docs/combine.md.
"""

from jboost.models.ecoc import DECODINGS
from jboost.models.ecoc import ECOCBoosters
from jboost.combine.ecoc import check_code
from jboost.models.ecoc import decode
from jboost.models.ecoc import decode_hamming
from jboost.models.ecoc import decode_l1
from jboost.models.ecoc import ecoc_bit_scores
from jboost.models.ecoc import ecoc_predict
from jboost.combine.ecoc import ecoc_targets
from jboost.combine.ecoc import exhaustive_code
from jboost.combine.ecoc import fit_ecoc_binned
from jboost.combine.ecoc import fit_ecoc_boosters
from jboost.combine.ecoc import min_row_distance
from jboost.combine.ecoc import random_code
from jboost.models.stacked import LINEAR_TASKS
from jboost.models.stacked import LinearModel
from jboost.combine.linear import fit_linear
from jboost.models.stacked import linear_loss
from jboost.models.stacked import linear_raw
from jboost.combine.stacking import HYPERPARAMS
from jboost.models.stacked import StackedBoosters
from jboost.combine.stacking import cross_fit_boosters
from jboost.combine.stacking import fit_stacked_boosters
from jboost.combine.stacking import stack_hyperparams
from jboost.models.stacked import stack_task
from jboost.models.stacked import stacked_predict
from jboost.combine.weights import OBJECTIVES
from jboost.combine.weights import SimplexWeights
from jboost.combine.weights import average
from jboost.combine.weights import error_weights
from jboost.combine.weights import fit_simplex_weights
from jboost.combine.weights import weighted_average

__all__ = [
    "DECODINGS", "ECOCBoosters", "HYPERPARAMS", "LINEAR_TASKS", "LinearModel", "OBJECTIVES",
    "SimplexWeights", "StackedBoosters", "average", "check_code", "cross_fit_boosters", "decode",
    "decode_hamming", "decode_l1", "ecoc_bit_scores", "ecoc_predict", "ecoc_targets",
    "error_weights", "exhaustive_code", "fit_ecoc_binned", "fit_ecoc_boosters", "fit_linear",
    "fit_simplex_weights", "linear_loss", "linear_raw", "min_row_distance", "random_code",
    "stack_hyperparams", "stack_task", "stacked_predict", "weighted_average",
]
