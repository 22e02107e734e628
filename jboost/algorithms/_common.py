"""What every algorithm of :mod:`jboost.algorithms` shares: the round status codes, binding an
algorithm's static settings into a :class:`jboost.boosting.Algorithm`, the host-side data
preparation and the run on the boosting scaffold (a new fit, or one continued from
``init_model=``), observation weights in log space, and staged (round-by-round) evaluation of a
fitted model.

Every algorithm is a ``round`` function on the scaffold of :mod:`jboost.boosting` (``boost`` is
the ``lax.scan``; the scaffold draws the round's rows and columns, adds the round's trees to the
raw scores and records the losses) and returns a :class:`jboost.Booster` whose raw score is on
the scale of the loss that the algorithm minimises in the forward-stagewise view (ESL Section
10.4; Friedman, Hastie and Tibshirani 2000). Its ``info`` holds each round's ``coef``, ``err``
and ``status`` ``(n_rounds,)``, the final observation ``weights`` ``(n_samples,)``, the algorithm
that fitted it (``algorithm``, an index into :data:`ALGORITHMS`) and the algorithm's exact state
after the last round under the names its entry point gives (e.g. ``log_weights``, ``done``).

Warm start (:func:`check_init_model`, then :func:`run` with ``init_model=``): the continued fit
bins with the model's borders, starts from its raw scores (:func:`jboost.boosting.resume`) and
state, and folds round ``m``'s key from ``m`` counted from the model's first round, so ``r``
rounds then ``s`` more equal ``r + s`` rounds bitwise (the big_vision ``fold_in(key, step)``
rule); the result holds every round. A new fit runs the same compiled program, from the
scaffold's initial state and round 0.

A concrete fit runs its rounds through :func:`jboost.fit`'s runner (:func:`jboost.api.run_rounds`:
host-side calls of one compiled program, so ``Ctrl-C`` returns the rounds fitted so far), with
its early stopping, progress, callbacks and checkpoints (:data:`ROUNDS_DEFAULTS`; a checkpoint is
the model, whose ``info`` holds the algorithm's state, so a rerun resumes bitwise).
"""

from __future__ import annotations

import functools
from typing import Callable, Mapping, NamedTuple, Optional, Tuple

import jax
import jax.numpy as jnp
import numpy as np

from jboost import _validation
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

# The algorithms (their entry points' names); ``Booster.info["algorithm"]`` is the index of the
# one that fitted a model, which a continued fit (``init_model=``) checks.
ALGORITHMS = ("adaboost_m1", "samme", "samme_r", "real_adaboost", "gentle_adaboost", "logitboost",
              "gradient_boost", "forward_stagewise")


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


class Table(NamedTuple):
    """What a fit read from the user's table and keeps in its model: the feature names (a
    DataFrame's columns) and the class labels mapped to ``0..K-1`` (strings, ``{-1, 1}``, ...)."""
    names: Optional[tuple] = None
    classes: Optional[np.ndarray] = None

    def kept(self, booster: model_lib.Booster) -> model_lib.Booster:
        return booster._replace(feature_names=model_lib.named(self.names),
                                classes=None if self.classes is None else model_lib.Classes(self.classes))


def read_table(X, y, eval_set, init_model: Optional[model_lib.Booster], name: str,
               config: boosting.BoostConfig, borders, labels=None, n_outputs=None, task=None):
    """The inputs of algorithm ``name`` read as :func:`jboost.fit` reads them: a DataFrame's
    columns in ``init_model``'s order and its names kept (:func:`jboost._validation.tabular_input`),
    ``init_model`` checked (:func:`check_init_model`), and, for a classification ``labels`` loss
    (a name or a loss; ``None``: labels as they are), class labels as users have them mapped to
    ``0..K-1`` (``init_model``'s classes for a continued fit). Returns
    ``(X, y, eval_set, borders, Table)``."""
    X, names, eval_set = _validation.tabular_input(X, init_model, eval_set)
    X, borders = check_init_model(init_model, name, X, config, borders)
    classes = None
    if labels is not None:
        y, classes, eval_set = _validation.mapped_labels(y, eval_set, labels, n_outputs, task,
                                                         init_model, n_rows=X.shape[0])
    return X, y, eval_set, borders, Table(names, classes)


def check_init_model(init_model: Optional[model_lib.Booster], name: str, X, config:
                     boosting.BoostConfig, borders):
    """Check ``init_model`` (a continued fit, ``init_model=``) of algorithm ``name`` (one of
    :data:`ALGORITHMS`) before the data are binned; returns ``(X, borders)``: ``X`` as a checked
    matrix and the borders to bin with (the model's). Without ``init_model``: ``(X, borders)``
    unchanged.

    The model must be one Booster (not a batch) that the same algorithm fitted (its
    ``info["algorithm"]``) on as many features, with the same ``n_bins`` and ``depth``; given
    ``borders`` must be its own. The loss and the algorithm's state are checked by :func:`run`
    once the labels have been read (they give K).
    """
    if init_model is None:
        return X, borders
    X = _validation.as_matrix(X, "X")
    if isinstance(init_model, model_lib.Booster) and not init_model.batch_shape:
        code = init_model.info.get("algorithm") if isinstance(init_model.info, Mapping) else None
        if code is None or np.shape(code) != () or not 0 <= int(code) < len(ALGORITHMS):
            raise ValueError(f"init_model records no algorithm of jboost.algorithms in its info (a "
                             f"jboost.fit model: continue it with jboost.fit(init_model=...)); "
                             f"{name}(init_model=) continues a model that {name} fitted.")
        fitted_by = ALGORITHMS[int(code)]
        if fitted_by != name:
            raise ValueError(f"init_model was fitted by jboost.algorithms.{fitted_by}: continue it "
                             f"with {fitted_by}(..., init_model=model), not {name}.")
    return X, _validation.check_init_model(init_model, model_lib.Booster, X.shape[1], borders,
                                           n_bins=config.n_bins, depth=config.depth,
                                           who=f"jboost.algorithms.{name}", config=config)


def _resumed(model: model_lib.Booster, data: boosting.Data, loss: losses_lib.Loss,
             config: boosting.BoostConfig, state: Tuple[str, ...]) -> boosting.BoostState:
    """The scaffold's state after ``model``'s rounds on ``data``: its raw scores
    (:func:`jboost.boosting.resume`) and the algorithm's state read back from ``model.info``
    under the names ``state`` (the leaves of the algorithm's ``init`` state, in order)."""
    _validation.check_init_loss(model, loss)
    template = jax.eval_shape(config.algorithm.init, data, loss)
    leaves, treedef = jax.tree_util.tree_flatten(template)
    assert len(leaves) == len(state), (state, template)  # the algorithm names its whole state
    kept = []
    for field, want in zip(state, leaves):
        if field not in model.info:
            raise ValueError(f"init_model's info has no {field!r} (the algorithm's state after "
                             "its last round); continue a model this version of jboost fitted.")
        a = jnp.asarray(model.info[field])
        if a.shape != want.shape or a.dtype != want.dtype:
            raise ValueError(f"init_model's info[{field!r}] is {a.dtype} {a.shape}; this fit needs "
                             f"{want.dtype} {want.shape}: continue on the training rows the model "
                             "was fitted on (its state is per row).")
        kept.append(a)
    extra = jax.tree_util.tree_unflatten(treedef, kept)
    return boosting.resume(data, model.trees, model.baseline, loss, config, extra)


# The keyword arguments every algorithm takes to run its rounds as jboost.fit does (run's
# ``rounds``): early stopping, progress, callbacks, checkpoints and per-row offsets.
ROUNDS_DEFAULTS = dict(early_stopping_rounds=None, early_stopping_tolerance=0.0, eval_metric=None,
                       verbose=0, callbacks=(), checkpoint_dir=None, checkpoint_every=None)


def family(tree_family, max_leaves) -> dict:
    """An algorithm's tree family settings for :func:`jboost.api.settings` (as
    :func:`jboost.fit`'s ``tree_family`` and ``max_leaves``)."""
    return dict(tree_family=tree_family, max_leaves=max_leaves)


def rounds_args(namespace: Mapping) -> dict:
    """The :data:`ROUNDS_DEFAULTS` arguments of an entry point from its ``locals()``."""
    return {k: namespace[k] for k in ROUNDS_DEFAULTS}


def margins(data: boosting.Data, name: str, base_margin, eval_base_margin, eval_set, k: int,
            offsets: bool) -> boosting.Data:
    """``data`` with per-row offsets of the raw scores (``base_margin``, ``eval_base_margin``;
    :func:`jboost.fit`'s), checked; ``offsets``: whether algorithm ``name`` can start its raw
    scores from them (else a given ``base_margin`` is refused, naming the argument)."""
    from jboost import api

    _validation.check_base_margin_supported(name, base_margin, eval_base_margin, offsets)
    return api._with_margins(data, base_margin, eval_base_margin, eval_set, k)


def run(data: boosting.Data, borders, key, hyper: boosting.Hyperparams,
        config: boosting.BoostConfig, loss: losses_lib.Loss, init_raw=None,
        weights: Optional[Callable] = None, *, name: str, state: Tuple[str, ...] = (),
        init_model: Optional[model_lib.Booster] = None,
        k_from_labels: bool = False, rounds: Optional[Mapping] = None,
        table: Table = Table()) -> model_lib.Booster:
    """Boost on the scaffold (:func:`jboost.boosting.boost` with ``config.algorithm``) from
    ``init_raw`` (zeros by default) and wrap the result as a :class:`jboost.Booster` of
    algorithm ``name`` (:data:`ALGORITHMS`; kept as ``info["algorithm"]``).

    ``weights(extra)`` gives the final observation weights from the algorithm's final state
    (AdaBoost family); without it ``info["weights"]`` holds the sample weights. ``state`` names
    the leaves of the algorithm's state (e.g. ``("log_weights", "done")``): the final state is
    kept in ``info`` under these names, exactly, so that ``init_model=`` (a model checked by
    :func:`check_init_model`, binned with its borders) continues it: ``config.n_rounds`` more
    rounds from its raw scores and state, round keys folded from its round count, so ``r``
    rounds then ``s`` more equal ``r + s`` rounds bitwise; the result holds every round.

    ``rounds``: the entry point's :data:`ROUNDS_DEFAULTS` arguments (early stopping, progress,
    callbacks, checkpoints). A concrete fit runs its rounds through :func:`jboost.fit`'s runner,
    :func:`jboost.api.run_rounds` (host-side calls of one compiled program: ``Ctrl-C``,
    progress, checkpoints of the model with its state in ``info``); under ``jax.vmap`` it is
    one program (:func:`jboost.boosting.boost`; early stopping too, each model on its own).

    Before compiling, the fit's memory estimate (:func:`jboost._validation.check_boosting_memory`)
    refuses what cannot fit (``MemoryError``; ``k_from_labels``: the message names K = max(y) + 1
    from the labels, e.g. a class label of 1e6).
    """
    from jboost import api

    rounds = dict(ROUNDS_DEFAULTS, **(rounds or {}))
    has_valid = data.y_valid.shape[0] > 0
    stopping = _validation.check_early_stopping(
        rounds["early_stopping_rounds"], rounds["early_stopping_tolerance"], None, loss,
        has_validation=has_valid)
    metric = _validation.check_eval_metric(rounds["eval_metric"], loss, has_validation=has_valid)
    if stopping is not None:
        stopping = stopping._replace(metric=metric)
    config = config._replace(early_stopping=stopping, eval_metric=metric if stopping is None else None)
    n_features, n_rows = data.X_binned.shape
    _validation.check_boosting_memory(
        n_rows, n_features, config, loss, k_from_labels=k_from_labels and loss.n_outputs > 1,
        what=f"{name} model", fix="use a smaller depth or n_bins"
        + (", or map the labels to 0..K-1" if k_from_labels and loss.n_outputs > 1 else ""))
    key = _validation.as_key(key)
    if init_model is None:
        init_raw = jnp.zeros((loss.n_outputs,), jnp.float32) if init_raw is None else init_raw
    else:
        init_raw = init_model.baseline
    init_raw = jnp.asarray(init_raw, jnp.float32)
    traced = any(_validation.is_traced(v) for v in jax.tree_util.tree_leaves((hyper, key)))
    if init_model is None and not traced:
        _validation.warn_if_no_gradient(loss, data, init_raw)  # fit's warning: nothing to learn

    def booster_of(out: boosting.BoostOutput, start: Optional[model_lib.Booster]) -> model_lib.Booster:
        info = dict(out.info, weights=data.w if weights is None else weights(out.extra),
                    algorithm=jnp.int32(ALGORITHMS.index(name)),
                    **dict(zip(state, jax.tree_util.tree_leaves(out.extra))))
        booster = model_lib.Booster(trees=tree_lib.with_borders(out.trees, borders), borders=borders,
                                    baseline=init_raw, loss=out.final_loss, train_loss=out.train_loss,
                                    valid_loss=out.valid_loss, info=info, best_round=out.best_round)
        booster = table.kept(booster)  # checkpoints (model_of) keep names and classes too
        return booster if start is None else model_lib.joined(start, booster, tuple(out.info))

    if not traced and _validation.host_rounds_possible():
        ran = api.run_rounds(data, key, hyper, loss, init_raw, config, start=init_model,
                             resume=lambda model: _resumed(model, data, loss, config, state),
                             model_of=booster_of, verbose=rounds["verbose"],
                             callbacks=rounds["callbacks"], checkpoint_dir=rounds["checkpoint_dir"],
                             checkpoint_every=rounds["checkpoint_every"])
        out, start = ran.out, ran.start
    else:
        _validation.check_concrete_rounds(rounds, f"jboost.algorithms.{name}")
        config = config._replace(eval_metric=None)
        # The same compiled program serves a new fit and a continued one (the state and the
        # first round are arguments).
        if init_model is None:
            begin, first_round = boosting.init(data, loss, init_raw, config), 0
        else:
            begin, first_round = _resumed(init_model, data, loss, config, state), init_model.n_rounds
        out = boosting.boost(data, key, hyper, loss, init_raw, config=config, state=begin,
                             first_round=first_round)
        start = init_model
    if not any(_validation.is_traced(v) for v in jax.tree_util.tree_leaves((hyper, out.train_loss))):
        _validation.check_finite_fit(out.train_loss, loss, data, init_raw)  # no silent NaN model
    return booster_of(out, start)


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
