"""The literature's boosting algorithms on the shared oblivious-tree builder.

Every algorithm is one jit-compiled ``lax.scan`` over rounds that grows its trees with
:func:`jboost.tree.fit_tree`; continuous settings and the key may be traced (``jax.vmap`` over
a sweep is one compiled program); each returns a :class:`Fitted` whose ``model`` is a
:class:`jboost.Booster` (use ``jboost.predict`` / ``predict_proba`` / ``predict_class``).

* :func:`adaboost_m1` — discrete AdaBoost.M1, ESL Algorithm 10.1.
* :func:`samme`, :func:`samme_r` — multi-class AdaBoost, Zhu, Zou, Rosset and Hastie (2009).
* :func:`real_adaboost`, :func:`gentle_adaboost`, :func:`logitboost` — Friedman, Hastie and
  Tibshirani (2000), Algorithms 2, 4, 3 and 6.
* :func:`gradient_boost` — gradient tree boosting with per-leaf line search, ESL Algorithm 10.3.
* :func:`forward_stagewise` — forward stagewise additive modelling, ESL Algorithm 10.2.

Shrinkage everywhere accepts a number or an optax schedule ``round -> rate``.
:func:`staged_error`, :func:`staged_loss` and :func:`staged_metric` evaluate a model after
every round in one scan.
"""

from jboost.algorithms._common import Fitted
from jboost.algorithms._common import OK
from jboost.algorithms._common import PERFECT
from jboost.algorithms._common import STATUS_NAMES
from jboost.algorithms._common import STOPPED
from jboost.algorithms._common import WEAK
from jboost.algorithms._common import classify
from jboost.algorithms._common import staged_error
from jboost.algorithms._common import staged_loss
from jboost.algorithms._common import staged_metric
from jboost.algorithms.adaboost import adaboost_m1
from jboost.algorithms.adaboost import discrete_alpha
from jboost.algorithms.adaboost import samme
from jboost.algorithms.adaboost import samme_r
from jboost.algorithms.additive_logistic import gentle_adaboost
from jboost.algorithms.additive_logistic import logit_deviance
from jboost.algorithms.additive_logistic import logitboost
from jboost.algorithms.additive_logistic import real_adaboost
from jboost.algorithms.additive_logistic import working_response
from jboost.algorithms.gradient import forward_stagewise
from jboost.algorithms.gradient import gradient_boost
from jboost.algorithms.gradient import line_search_coefficient

__all__ = [
    "Fitted", "OK", "PERFECT", "STATUS_NAMES", "STOPPED", "WEAK",
    "adaboost_m1", "classify", "discrete_alpha", "forward_stagewise", "gentle_adaboost",
    "gradient_boost", "line_search_coefficient", "logit_deviance", "logitboost", "real_adaboost",
    "samme", "samme_r", "staged_error", "staged_loss", "staged_metric", "working_response",
]
