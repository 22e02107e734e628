"""Fine-tuning a fitted Booster's leaves (and soft thresholds) with optax: re-exports finetune, objective, soft_predict, Params, Curves (the public jboost.finetune namespace).
"""

from jboost.finetune.loop import Curves
from jboost.finetune.scores import Params
from jboost.finetune.tune import finetune
from jboost.finetune.tune import objective
from jboost.finetune.tune import soft_predict
