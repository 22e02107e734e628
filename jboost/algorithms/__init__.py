"""The literature's boosting algorithms on the boosting scaffold: AdaBoost.M1 (ESL Algorithm
10.1), SAMME and SAMME.R (Zhu et al. 2009), Real and Gentle AdaBoost and LogitBoost (Friedman,
Hastie and Tibshirani 2000), gradient boosting (ESL 10.3) and forward stagewise modelling (ESL
10.2). Each returns a :class:`jboost.Booster`; the defaults are the published algorithms'.
See docs/algorithms.md and docs/ensembles.md.
"""

from jboost.algorithms._common import (ALGORITHMS, OK, PERFECT, STATUS_NAMES, STOPPED, WEAK,
                                       classify, init_log_weights, staged_error, staged_loss)
from jboost.algorithms.adaboost import (adaboost_m1, adaboost_m1_round, discrete_alpha,
                                        init_discrete, samme, samme_r, samme_r_round, samme_round)
from jboost.algorithms.additive_logistic import gentle_adaboost, gentle_adaboost_round
from jboost.losses.per_sample import logit_deviance
from jboost.algorithms.additive_logistic import (logitboost, logitboost_2_round, logitboost_k_round,
                                                 real_adaboost, real_adaboost_round,
                                                 working_response)
from jboost.algorithms.gradient import (forward_stagewise, gradient_boost, gradient_round,
                                        line_search_coefficient, stagewise_round)

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
