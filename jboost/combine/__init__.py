"""Combining models: averages and simplex weights (:mod:`~jboost.combine.weights`), the linear
second tier of stacking (:mod:`~jboost.combine.linear`), stacking of boosted learners
(:mod:`~jboost.combine.stacking`, :class:`StackedBoosters`) and error-correcting output codes
(:mod:`~jboost.combine.ecoc`, :class:`ECOCBoosters`). See docs/combine.md.
"""

from jboost.models.ecoc import DECODINGS, ECOCBoosters
from jboost.combine.ecoc import check_code
from jboost.models.ecoc import decode, decode_hamming, decode_l1, ecoc_bit_scores, ecoc_predict
from jboost.combine.ecoc import (ecoc_targets, exhaustive_code, fit_ecoc_binned, fit_ecoc_boosters,
                                 min_row_distance, random_code)
from jboost.models.stacked import LINEAR_TASKS, LinearModel
from jboost.combine.linear import fit_linear
from jboost.models.stacked import linear_loss, linear_raw
from jboost.combine.stacking import HYPERPARAMS
from jboost.models.stacked import StackedBoosters
from jboost.combine.stacking import cross_fit_boosters, fit_stacked_boosters, stack_hyperparams
from jboost.models.stacked import stack_task, stacked_predict
from jboost.combine.weights import (OBJECTIVES, SimplexWeights, average, error_weights,
                                    fit_simplex_weights, weighted_average)

__all__ = [
    "DECODINGS", "ECOCBoosters", "HYPERPARAMS", "LINEAR_TASKS", "LinearModel", "OBJECTIVES",
    "SimplexWeights", "StackedBoosters", "average", "check_code", "cross_fit_boosters", "decode",
    "decode_hamming", "decode_l1", "ecoc_bit_scores", "ecoc_predict", "ecoc_targets",
    "error_weights", "exhaustive_code", "fit_ecoc_binned", "fit_ecoc_boosters", "fit_linear",
    "fit_simplex_weights", "linear_loss", "linear_raw", "min_row_distance", "random_code",
    "stack_hyperparams", "stack_task", "stacked_predict", "weighted_average",
]
