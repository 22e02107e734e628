"""Fine-tuning a fitted Booster's leaves (and soft thresholds) with optax: the public
``jboost.fine_tuning`` namespace (finetune, objective, soft_predict, Params, Curves), and a
quantile model's split conformal calibration (calibrate_quantiles)."""

from jboost.fine_tuning.calibrate import calibrate_quantiles
from jboost.fine_tuning.loop import Curves
from jboost.fine_tuning.scores import Params
from jboost.fine_tuning.tune import finetune, objective, soft_predict
