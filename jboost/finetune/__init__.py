"""Fine-tuning a fitted Booster's leaves (and soft thresholds) with optax: the public
``jboost.finetune`` namespace (finetune, objective, soft_predict, Params, Curves)."""

from jboost.finetune.loop import Curves
from jboost.finetune.scores import Params
from jboost.finetune.tune import finetune, objective, soft_predict
