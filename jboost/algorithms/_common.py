"""What every algorithm of :mod:`jboost.algorithms` shares: the round status codes, binding an
algorithm's static settings into a :class:`jboost.boosting.Algorithm`, the host-side data
preparation and the run on the boosting scaffold, observation weights in log space, and staged
(round-by-round) evaluation of a fitted model.

Every algorithm is a ``round`` function on the scaffold of :mod:`jboost.boosting` (``boost`` is
the ``lax.scan``; the scaffold draws the round's rows and columns, adds the round's trees to the
raw scores and records the losses) and returns a :class:`jboost.Booster` whose raw score is on
the scale of the loss that the algorithm minimises in the forward-stagewise view (ESL Section
10.4; Friedman, Hastie and Tibshirani 2000). Its ``info`` holds each round's ``coef``, ``err``
and ``status`` ``(n_rounds,)`` and the final observation ``weights`` ``(n_samples,)``.
"""

from __future__ import annotations

import functools
from typing import Callable, Optional

import jax
import jax.numpy as jnp
import numpy as np

from jboost import _validation
from jboost import api
from jboost import boosting
from jboost import losses as losses_lib
from jboost import model as model_lib
from jboost import tree as tree_lib

# Round status codes (``Booster.info["status"]``).
OK = 0        # the round's weak learner was added
PERFECT = 1   # err_m == 0: added with the capped weight log((1 - err_floor) / err_floor) + log(K-1); model stops
WEAK = 2      # err_m >= 1 - 1/K (no better than chance): nothing added; model stops
STOPPED = 3   # a previous round was PERFECT or WEAK: nothing added
STATUS_NAMES = ("ok", "perfect", "weak", "stopped")


# --------------------------------------------------------------------------------------------
# Host side: the algorithm, the data, the run.
# --------------------------------------------------------------------------------------------


@functools.lru_cache(maxsize=None)
def algorithm(round_fn: Callable, init: Optional[Callable] = None, **static) -> boosting.Algorithm:
    """The :class:`jboost.boosting.Algorithm` of ``round_fn`` with its static settings bound
    (``round_fn(r, **static)``). Cached: the same settings give the same (hashable) algorithm, so
    the compiled ``boosting.boost`` is reused."""
    fn = functools.partial(round_fn, **static) if static else round_fn
    return boosting.Algorithm(fn) if init is None else boosting.Algorithm(fn, init)


def static_real(v, name: str, lo: float, hi: float, lo_open: bool = False) -> float:
    """A concrete scalar setting in ``[lo, hi]`` (a numerical guard of an algorithm, static in
    its compiled program) as a Python float."""
    if _validation.is_traced(v):
        raise TypeError(f"{name} must be a concrete number (it is a static setting of the "
                        "algorithm), not a traced value.")
    _validation.check_real(v, name, lo, hi, lo_open=lo_open)
    return float(v)


prepare = _validation.prepare_boosting  # (boosting.Data, borders) from checked, binned inputs


def prepare_classes(X, y, n_classes, *, task: str = "multiclass", **kwargs):
    """:func:`prepare` for class labels (0/1 for ``task="binary"``, 0..K-1 otherwise): K from
    ``n_classes`` or the training labels, the eval-set labels checked against that K.
    Returns ``(Data, borders, K)``."""
    found = {}

    def label_check(v, name):
        k = _validation.n_classes_of(v, n_classes if name == "y" else found["k"], name, task)
        found.setdefault("k", k)

    data, borders = prepare(X, y, label_check=label_check, **kwargs)
    return data, borders, found["k"]


def run(data: boosting.Data, borders, key, hyper: boosting.Hyperparams,
        config: boosting.BoostConfig, loss: losses_lib.Loss, init_raw=None,
        weights: Optional[Callable] = None) -> model_lib.Booster:
    """Boost on the scaffold (:func:`jboost.boosting.boost` with ``config.algorithm``) from
    ``init_raw`` (zeros by default) and wrap the result as a :class:`jboost.Booster`.

    ``weights(extra)`` gives the final observation weights from the algorithm's final state
    (AdaBoost family); without it ``info["weights"]`` holds the sample weights.
    """
    k = loss.n_outputs
    init_raw = jnp.zeros((k,), jnp.float32) if init_raw is None else init_raw
    out = boosting.boost(data, _validation.as_key(key), hyper, loss, init_raw, config=config)
    if not any(_validation.is_traced(v) for v in jax.tree_util.tree_leaves((hyper, out.train_loss))):
        api.check_finite_fit(out.train_loss, loss, data, init_raw)  # no silent NaN model
    info = dict(out.info, weights=data.w if weights is None else weights(out.extra))
    return model_lib.Booster(trees=tree_lib.with_borders(out.trees, borders), borders=borders,
                             baseline=jnp.asarray(init_raw, jnp.float32), loss=out.final_loss,
                             train_loss=out.train_loss, valid_loss=out.valid_loss, info=info)


# --------------------------------------------------------------------------------------------
# Inside a round.
# --------------------------------------------------------------------------------------------


def normalise_log_weights(log_w):
    """Log weights shifted so that the weights sum to ``n`` (ESL Alg. 10.1 renormalises; in log
    space no weight overflows however many rounds pass)."""
    n = log_w.shape[0]
    return log_w - jax.nn.logsumexp(log_w) + jnp.log(jnp.float32(n))


def init_log_weights(data: boosting.Data, loss: losses_lib.Loss):
    """The AdaBoost family's observation weights before round 0: the sample weights, in log
    space, summing to ``n``."""
    return normalise_log_weights(jnp.log(data.w))


def weighted_error(w, miss):
    """``err = sum_i w_i I(miss_i) / sum_i w_i`` (ESL Alg. 10.1, step 2(b))."""
    return jnp.sum(w * miss.astype(jnp.float32)) / jnp.sum(w)


def info(coef, err=jnp.nan, status=OK) -> dict:
    """A round's diagnostics (``Booster.info``): coefficient, weighted error (NaN: none), status."""
    return dict(coef=jnp.asarray(coef, jnp.float32), err=jnp.asarray(err, jnp.float32),
                status=jnp.asarray(status, jnp.int32))


# --------------------------------------------------------------------------------------------
# Staged evaluation of a fitted model: thin functions over jboost.staged_predict (one compiled
# scan over rounds; any other function of the raw scores goes to jboost.staged_predict directly).
# --------------------------------------------------------------------------------------------


def classify(raw):
    """Class of each row from raw scores ``(n, K)``: ``raw > 0`` for one output, else argmax."""
    if raw.shape[-1] == 1:
        return (raw[:, 0] > 0).astype(jnp.int32)
    return jnp.argmax(raw, axis=-1).astype(jnp.int32)


def _error(raw, y):
    return jnp.mean((classify(raw) != y.astype(jnp.int32)).astype(jnp.float32))


def staged_error(model: model_lib.Model, X, y):
    """Misclassification rate after each round ``(n_rounds,)`` (class as in :func:`classify`)."""
    return model_lib.staged_predict(model, X, _error, jnp.asarray(np.asarray(y, np.float32)))


def _loss(raw, loss, y):
    return jnp.mean(losses_lib.per_sample_losses(loss, y, raw))


def staged_loss(model: model_lib.Booster, X, y):
    """Mean of ``model.loss`` on ``(X, y)`` after each round ``(n_rounds,)`` (e.g. test
    deviance)."""
    return model_lib.staged_predict(model, X, _loss, model.loss,
                                    jnp.asarray(np.asarray(y, np.float32)))
