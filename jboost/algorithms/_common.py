"""What every algorithm of :mod:`jboost.algorithms` shares: round status codes, static settings,
data preparation and the run on the boosting scaffold (:mod:`jboost.engine.boosting`) through
:func:`jboost.fit`'s round runner. See docs/algorithms.md."""

from __future__ import annotations

import functools
from typing import Callable, Mapping, NamedTuple, Optional, Tuple

import jax
import jax.numpy as jnp
import numpy as np

from jboost import checks
from jboost.data import labels as labels_lib, tabular
from jboost.engine import (algorithm as algorithm_lib, boosting as boosting_lib, memory,
                           state as state_lib)
from jboost.fitting import (init_model as init_model_lib, prepare as prepare_lib,
                            rounds as rounds_lib, settings)
from jboost.losses import checks as checks_lib, loss as loss_lib, per_sample
from jboost.models import base, booster as booster_lib, metadata
from jboost.trees import family as family_lib


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


@functools.lru_cache(maxsize=None)
def algorithm(round_fn: Callable, init: Optional[Callable] = None, **static) -> algorithm_lib.Algorithm:
    """The :class:`jboost.engine.algorithm.Algorithm` of ``round_fn`` with its static settings bound.
    Cached: the same settings give the same (hashable) algorithm, so no new compile."""
    fn = functools.partial(round_fn, **static) if static else round_fn
    return algorithm_lib.Algorithm(fn) if init is None else algorithm_lib.Algorithm(fn, init)


def static_real(v, name: str, lo: float, hi: float, lo_open: bool = False) -> float:
    """A concrete scalar setting in ``[lo, hi]`` (an algorithm's static guard) as a float."""
    if checks.is_traced(v):
        raise TypeError(f"{name} must be a concrete number (it is a static setting of the "
                        "algorithm), not a traced value.")
    checks.check_real(v, name, lo, hi, lo_open=lo_open)
    return float(v)


prepare = prepare_lib.prepare_boosting  # (boosting.Data, borders) from checked, binned inputs


def prepare_classes(X, y, n_classes, *, task: str = "multiclass", **kwargs):
    """:func:`prepare` for class labels (0/1 for ``task="binary"``, 0..K-1 otherwise), K from
    ``n_classes`` or the training labels. Returns ``(Data, borders, K)``."""
    found = {}

    def label_check(v, name):
        k = labels_lib.n_classes_of(v, n_classes if name == "y" else found["k"], name, task)
        found.setdefault("k", k)

    data, borders = prepare(X, y, label_check=label_check, **kwargs)
    return data, borders, found["k"]


class Table(NamedTuple):
    """What a fit keeps of the user's table: a DataFrame's feature names and the class labels."""
    names: Optional[tuple] = None
    classes: Optional[np.ndarray] = None

    def kept(self, booster: booster_lib.Booster) -> booster_lib.Booster:
        return booster._replace(feature_names=metadata.named(self.names),
                                classes=None if self.classes is None else metadata.Classes(self.classes))


def read_table(X, y, eval_set, init_model: Optional[booster_lib.Booster], name: str,
               config: boosting_lib.BoostConfig, borders, labels=None, n_outputs=None, task=None):
    """The inputs of algorithm ``name`` read as :func:`jboost.fit` reads them (a DataFrame's
    columns, ``init_model`` checked, class labels of a classification ``labels`` loss mapped to
    ``0..K-1``). Returns ``(X, y, eval_set, borders, Table)``."""
    X, names, eval_set = tabular.tabular_input(X, init_model, eval_set)
    X, borders = check_init_model(init_model, name, X, config, borders)
    classes = None
    if labels is not None:
        y, classes, eval_set = prepare_lib.mapped_labels(y, eval_set, labels, n_outputs, task,
                                                         init_model, n_rows=X.shape[0])
    return X, y, eval_set, borders, Table(names, classes)


def check_init_model(init_model: Optional[booster_lib.Booster], name: str, X, config:
                     boosting_lib.BoostConfig, borders):
    """Check ``init_model`` of algorithm ``name`` before the data are binned: one Booster that
    the same algorithm fitted, on as many features, with the same ``n_bins`` and ``depth``.
    Returns ``(X, borders)``: ``X`` checked and the borders to bin with (the model's)."""
    if init_model is None:
        return X, borders
    X = tabular.as_matrix(X, "X")
    if isinstance(init_model, booster_lib.Booster) and not init_model.batch_shape:
        code = init_model.info.get("algorithm") if isinstance(init_model.info, Mapping) else None
        if code is None or np.shape(code) != () or not 0 <= int(code) < len(ALGORITHMS):
            raise ValueError(f"init_model records no algorithm of jboost.algorithms in its info (a "
                             f"jboost.fit model: continue it with jboost.fit(init_model=...)); "
                             f"{name}(init_model=) continues a model that {name} fitted.")
        fitted_by = ALGORITHMS[int(code)]
        if fitted_by != name:
            raise ValueError(f"init_model was fitted by jboost.algorithms.{fitted_by}: continue it "
                             f"with {fitted_by}(..., init_model=model), not {name}.")
    return X, init_model_lib.check_init_model(init_model, booster_lib.Booster, X.shape[1], borders,
                                           n_bins=config.n_bins, depth=config.depth,
                                           who=f"jboost.algorithms.{name}", config=config)


def _resumed(model: booster_lib.Booster, data: state_lib.Data, loss: loss_lib.Loss,
             config: boosting_lib.BoostConfig, state: Tuple[str, ...]) -> state_lib.BoostState:
    """The scaffold's state after ``model``'s rounds on ``data``: its raw scores and the
    algorithm's state read back from ``model.info`` under the names ``state``."""
    init_model_lib.check_init_loss(model, loss)
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
    return boosting_lib.resume(data, model.trees, model.baseline, loss, config, extra)


# The keyword arguments every algorithm takes to run its rounds as jboost.fit does (run's
# ``rounds``): early stopping, progress, callbacks and checkpoints.
ROUNDS_DEFAULTS = {name: settings.SETTINGS[name].default for name in (
    "early_stopping_rounds", "early_stopping_tolerance", "eval_metric", "verbose", "callbacks",
    "checkpoint_dir", "checkpoint_every")}


def rounds_args(namespace: Mapping) -> dict:
    """The :data:`ROUNDS_DEFAULTS` arguments of an entry point from its ``locals()``."""
    return {k: namespace[k] for k in ROUNDS_DEFAULTS}


def read_classes(args: Mapping, name: str, config: boosting_lib.BoostConfig, *, binary: bool):
    """The class labels of the call ``args`` (the entry point's ``locals()``) of algorithm
    ``name`` read (:func:`read_table`) and prepared (:func:`prepare_classes`): 0/1 when
    ``binary``, else ``0..K-1``. Returns ``(Data, borders, K, eval_set, Table)``."""
    X, y, eval_set, borders, table = read_table(
        args["X"], args["y"], args["eval_set"], args["init_model"], name, config, args["borders"],
        labels="binomial_deviance" if binary else "multinomial_deviance")
    data, borders, k = prepare_classes(
        X, y, None if binary else args["n_classes"], task="binary" if binary else "multiclass",
        sample_weight=args["sample_weight"], eval_set=eval_set, n_bins=args["n_bins"],
        borders=borders)
    return data, borders, k, eval_set, table


def fit_reweighted(args: Mapping, name: str, round_fn: Callable, init: Callable, *, binary: bool,
                   weights: Callable, state: Tuple[str, ...], **static) -> booster_lib.Booster:
    """The fit of the call ``args`` (``locals()``) of an AdaBoost-family algorithm: the exponential
    loss (SAMME's unless ``binary``), no ``base_margin``; ``static``: guards in ``(0, 0.5]``."""
    given = [k for k in ("base_margin", "eval_base_margin") if args[k] is not None]
    if given:  # the rows are reweighted from the votes, which an offset would not enter
        raise ValueError(f"{given[0]} is not supported by jboost.algorithms.{name}: its rounds "
                         "reweight the rows from the weak learners' votes, which an offset of the "
                         "raw scores would not enter. Use jboost.fit, gradient_boost, "
                         "forward_stagewise or logitboost for per-row offsets.")
    static = {k: static_real(v, k, 0.0, 0.5, lo_open=True) for k, v in static.items()}
    config, hyper = settings.settings_of(args, algorithm=algorithm(round_fn, init, **static))
    data, borders, k, _, table = read_classes(args, name, config, binary=binary)
    loss = per_sample.exponential() if binary else per_sample.samme_exponential(k)
    return run(data, borders, args["key"], hyper, config, loss, weights=weights, name=name,
               state=state, init_model=args["init_model"],
               k_from_labels=not binary and args["n_classes"] is None, rounds=rounds_args(args),
               table=table)


def run(data: state_lib.Data, borders, key, hyper: boosting_lib.Hyperparams,
        config: boosting_lib.BoostConfig, loss: loss_lib.Loss, init_raw=None,
        weights: Optional[Callable] = None, *, name: str, state: Tuple[str, ...] = (),
        init_model: Optional[booster_lib.Booster] = None,
        k_from_labels: bool = False, rounds: Optional[Mapping] = None,
        table: Table = Table()) -> booster_lib.Booster:
    """Boost with ``config.algorithm`` from ``init_raw`` (zeros by default) into a Booster of
    algorithm ``name``: ``weights(extra)`` its final observation weights, ``state`` the names of
    its state in ``info``, ``rounds`` the :data:`ROUNDS_DEFAULTS` arguments (docs/algorithms.md)."""
    rounds = dict(ROUNDS_DEFAULTS, **(rounds or {}))
    stopping, shown = settings.early_stopping(
        rounds["early_stopping_rounds"], rounds["early_stopping_tolerance"], rounds["eval_metric"],
        loss, has_validation=data.y_valid.shape[0] > 0)
    config = config._replace(early_stopping=stopping, eval_metric=shown)
    n_features, n_rows = data.X_binned.shape
    memory.check_boosting_memory(
        n_rows, n_features, config, loss, k_from_labels=k_from_labels and loss.n_outputs > 1,
        what=f"{name} model", fix="use a smaller depth or n_bins"
        + (", or map the labels to 0..K-1" if k_from_labels and loss.n_outputs > 1 else ""))
    key = checks.as_key(key)
    if init_model is None:
        init_raw = jnp.zeros((loss.n_outputs,), jnp.float32) if init_raw is None else init_raw
    else:
        init_raw = init_model.baseline
    init_raw = jnp.asarray(init_raw, jnp.float32)
    traced = any(checks.is_traced(v) for v in jax.tree_util.tree_leaves((hyper, key)))
    if init_model is None and not traced:
        checks_lib.warn_if_no_gradient(loss, data, init_raw)  # fit's warning: nothing to learn

    def booster_of(out: state_lib.BoostOutput, start: Optional[booster_lib.Booster]) -> booster_lib.Booster:
        info = dict(out.info, weights=data.w if weights is None else weights(out.extra),
                    algorithm=jnp.int32(ALGORITHMS.index(name)),
                    **dict(zip(state, jax.tree_util.tree_leaves(out.extra))))
        booster = booster_lib.Booster(trees=family_lib.with_borders(out.trees, borders), borders=borders,
                                    baseline=init_raw, loss=out.final_loss, train_loss=out.train_loss,
                                    valid_loss=out.valid_loss, info=info, best_round=out.best_round)
        booster = table.kept(booster)  # checkpoints (model_of) keep names and classes too
        return booster if start is None else booster_lib.joined(start, booster, tuple(out.info))

    if not traced and rounds_lib.host_rounds_possible():
        ran = rounds_lib.run_rounds(data, key, hyper, loss, init_raw, config, start=init_model,
                             resume=lambda model: _resumed(model, data, loss, config, state),
                             model_of=booster_of, verbose=rounds["verbose"],
                             callbacks=rounds["callbacks"], checkpoint_dir=rounds["checkpoint_dir"],
                             checkpoint_every=rounds["checkpoint_every"])
        out, start = ran.out, ran.start
    else:
        rounds_lib.check_concrete_rounds(rounds, f"jboost.algorithms.{name}")
        config = config._replace(eval_metric=None)
        if init_model is None:
            begin, first_round = boosting_lib.init(data, loss, init_raw, config), 0
        else:
            begin, first_round = _resumed(init_model, data, loss, config, state), init_model.n_rounds
        out = boosting_lib.boost(data, key, hyper, loss, init_raw, config=config, state=begin,
                             first_round=first_round)
        start = init_model
    if not any(checks.is_traced(v) for v in jax.tree_util.tree_leaves((hyper, out.train_loss))):
        checks_lib.check_finite_fit(out.train_loss, loss, data, init_raw)  # no silent NaN model
    if weights is None:  # gradient steps (the AdaBoost family's exponential loss may spike and
        # recover by design: SAMME.R's rose 27x at round 7 of a fit ending at 0.007 of its start)
        out = out._replace(train_loss=checks_lib.warn_if_diverged(
            out.train_loss, out.valid_loss, loss, data, init_raw, n_fitted=out.n_fitted,
            learning_rate=hyper.learning_rate))
    return booster_of(out, start)


def normalise_log_weights(log_w):
    """Log weights shifted so that the weights sum to ``n`` (ESL Alg. 10.1 renormalises; in log
    space no weight overflows however many rounds pass)."""
    n = log_w.shape[0]
    return log_w - jax.nn.logsumexp(log_w) + jnp.log(jnp.float32(n))


def init_log_weights(data: state_lib.Data, loss: loss_lib.Loss):
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


def classify(raw):
    """Class of each row from raw scores ``(n, K)``: ``raw > 0`` for one output, else argmax."""
    if raw.shape[-1] == 1:
        return (raw[:, 0] > 0).astype(jnp.int32)
    return jnp.argmax(raw, axis=-1).astype(jnp.int32)


def _error(raw, y):
    return jnp.mean((classify(raw) != y.astype(jnp.int32)).astype(jnp.float32))


def staged_error(model: base.Model, X, y):
    """Misclassification rate after each round ``(n_rounds,)`` (class as in :func:`classify`)."""
    return base.staged_predict(model, X, _error, jnp.asarray(np.asarray(y, np.float32)))


def _loss(raw, loss, y):
    return jnp.mean(loss_lib.per_sample_losses(loss, y, raw))


def staged_loss(model: booster_lib.Booster, X, y):
    """Mean of ``model.loss`` on ``(X, y)`` after each round ``(n_rounds,)`` (e.g. test
    deviance)."""
    return base.staged_predict(model, X, _loss, model.loss,
                                    jnp.asarray(np.asarray(y, np.float32)))
