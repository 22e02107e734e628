"""The literature's boosting algorithms on the boosting scaffold.

Every algorithm is a ``round`` function on :mod:`jboost.engine.boosting`'s scaffold (an
:class:`jboost.engine.algorithm.Algorithm` in the static ``BoostConfig``): the scaffold's
``lax.scan`` draws each round's rows and columns, the round function grows its trees with the
shared builder (:func:`jboost.engine.algorithm.grow_trees`) and gives their final leaf values, its own
state (e.g. AdaBoost's observation weights) and its diagnostics, and the scaffold adds the trees
to the raw scores and records the losses. Continuous settings and the key may be traced
(``jax.vmap`` over a sweep is one compiled program; the same shapes and static settings compile
once). Each entry point returns a :class:`jboost.Booster`, so ``jboost.predict`` (raw scores),
``predict_proba``, ``predict_class``, ``feature_importance`` and ``staged_predict`` work on it;
its ``info`` holds the per-round ``coef``, ``err`` and ``status`` ``(n_rounds,)``, the final
observation ``weights`` ``(n_samples,)`` (AdaBoost family; the sample weights otherwise), the
algorithm that fitted it (``algorithm``, an index into :data:`ALGORITHMS`) and the algorithm's
exact state after the last round (the AdaBoost family's ``log_weights`` ``(n_samples,)``, and
``done`` ``()`` where a round can stop the model).

Warm start: every entry point takes ``init_model=``, a Booster the same algorithm fitted, and
boosts ``n_rounds`` more rounds on the same data and binning (the model's borders; ``n_bins``
and ``depth`` as the model's), from its raw scores and state, with round keys folded from its
round count: ``r`` rounds, then ``s`` more with the same settings, equal ``r + s`` rounds bitwise
(trees, losses, ``info``, predictions; K-class LogitBoost, whose K trees per round overlap, to
float rounding for now). The result holds every round; a model that stopped (status PERFECT or
WEAK) continues stopped. A model of another algorithm, of ``jboost.fit`` or a batch of models is
refused, as are other features, ``n_bins``, ``depth``, loss or borders; the AdaBoost family's
state is per training row, so it continues on the rows it was fitted on.

Lifecycle: every entry point takes ``early_stopping_rounds``, ``early_stopping_tolerance``,
``eval_metric``, ``verbose``, ``callbacks``, ``checkpoint_dir`` and ``checkpoint_every`` as
:func:`jboost.fit` does, on the same round runner (:func:`jboost.fitting.rounds.run_rounds`): stop once the
``eval_set`` score (its loss, or ``eval_metric``) has not improved for ``early_stopping_rounds``
rounds (the model records ``best_round``, which predictions use), progress lines every
``verbose`` rounds, ``callbacks`` after each chunk of rounds, a checkpoint (the model, the
algorithm's state in its ``info``) that a rerun of the same call continues to the bitwise model.
``eval_metric`` alone is shown and given to callbacks. ``Ctrl-C`` during a concrete fit returns
the rounds fitted so far, with a warning.

* :func:`adaboost_m1` — discrete AdaBoost.M1, ESL Algorithm 10.1.
* :func:`samme`, :func:`samme_r` — multi-class AdaBoost, Zhu, Zou, Rosset and Hastie (2009).
* :func:`real_adaboost`, :func:`gentle_adaboost`, :func:`logitboost` — Friedman, Hastie and
  Tibshirani (2000), Algorithms 2, 4, 3 and 6.
* :func:`gradient_boost` — gradient tree boosting with per-leaf line search, ESL Algorithm 10.3.
* :func:`forward_stagewise` — forward stagewise additive modelling, ESL Algorithm 10.2.

The round functions (:func:`adaboost_m1_round`, ...; with :func:`init_discrete` and
:func:`init_log_weights`, the initial state of the reweighting algorithms) are public, so a
round can be read, tested or reused: ``boosting.Algorithm(adaboost_m1_round, init_discrete)``
passed as ``algorithm=`` to :func:`jboost.fitting.settings.settings` runs AdaBoost.M1 through
:func:`jboost.engine.boosting.boost`. A new algorithm is one such function (README, "How to extend
jboost").

Their defaults (small trees, ``l2 = 0``, ``min_child_weight = 0``, ``learning_rate = 1`` for the
AdaBoost family and LogitBoost) are the published algorithms', not :func:`jboost.fit`'s; each
docstring says which. Shrinkage everywhere accepts a number or an optax schedule ``round ->
rate``. :func:`staged_error` and :func:`staged_loss` evaluate a model after every round (thin
functions over :func:`jboost.staged_predict`).
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
