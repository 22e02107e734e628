"""The literature's boosting algorithms on the boosting scaffold: AdaBoost.M1 (ESL Algorithm
10.1), SAMME and SAMME.R (Zhu et al. 2009), Real and Gentle AdaBoost and LogitBoost (Friedman,
Hastie and Tibshirani 2000), gradient boosting (ESL 10.3) and forward stagewise modelling (ESL
10.2). Each returns a :class:`jboost.Booster`; the defaults are the published algorithms'.
See docs/algorithms.md and docs/ensembles.md.
"""

from jboost.algorithms._common import ALGORITHMS
from jboost.algorithms._common import OK
from jboost.algorithms._common import PERFECT
from jboost.algorithms._common import STATUS_NAMES
from jboost.algorithms._common import STOPPED
from jboost.algorithms._common import WEAK
from jboost.algorithms._common import classify
from jboost.algorithms._common import init_log_weights
from jboost.algorithms._common import staged_error
from jboost.algorithms._common import staged_loss
from jboost.algorithms.adaboost import adaboost_m1
from jboost.algorithms.adaboost import adaboost_m1_round
from jboost.algorithms.adaboost import discrete_alpha
from jboost.algorithms.adaboost import init_discrete
from jboost.algorithms.adaboost import samme
from jboost.algorithms.adaboost import samme_r
from jboost.algorithms.adaboost import samme_r_round
from jboost.algorithms.adaboost import samme_round
from jboost.algorithms.additive_logistic import gentle_adaboost
from jboost.algorithms.additive_logistic import gentle_adaboost_round
from jboost.losses.per_sample import logit_deviance
from jboost.algorithms.additive_logistic import logitboost
from jboost.algorithms.additive_logistic import logitboost_2_round
from jboost.algorithms.additive_logistic import logitboost_k_round
from jboost.algorithms.additive_logistic import real_adaboost
from jboost.algorithms.additive_logistic import real_adaboost_round
from jboost.algorithms.additive_logistic import working_response
from jboost.algorithms.gradient import forward_stagewise
from jboost.algorithms.gradient import gradient_boost
from jboost.algorithms.gradient import gradient_round
from jboost.algorithms.gradient import line_search_coefficient
from jboost.algorithms.gradient import stagewise_round

__all__ = [
    "ALGORITHMS", "OK", "PERFECT", "STATUS_NAMES", "STOPPED", "WEAK",
    "adaboost_m1", "adaboost_m1_round", "classify", "discrete_alpha", "forward_stagewise",
    "gentle_adaboost", "gentle_adaboost_round", "gradient_boost", "gradient_round",
    "init_discrete", "init_log_weights",
    "line_search_coefficient", "logit_deviance", "logitboost", "logitboost_2_round",
    "logitboost_k_round", "real_adaboost", "real_adaboost_round", "samme", "samme_r",
    "samme_r_round", "samme_round", "stagewise_round", "staged_error", "staged_loss",
    "working_response",
]
