"""``jboost.fit``: gradient boosting of trees, from user data to a :class:`jboost.Booster`, in
three steps: :func:`prepare_fit`, :func:`run_fit` and :func:`finish_fit`. See docs/fitting.md."""

from __future__ import annotations

import functools
import types
from typing import Any, Callable, NamedTuple, Union

import jax
import jax.numpy as jnp

from jboost import _compile, checks as checks_lib, devices as devices_lib
from jboost.data import binning, categorical as categorical_lib, labels, rows as rows_lib, tabular
from jboost.engine import boosting as boosting_lib, calls, memory, sharded, state as state_lib
from jboost.fitting import (init_model as init_model_lib, prepare, rounds as rounds_lib,
                            settings as settings_lib, standardise)
from jboost.losses import baselines, checks, loss as loss_lib, per_sample
from jboost.models import booster as booster_lib, metadata
from jboost.trees import family


@settings_lib.takes_settings()
def fit(X, y, loss: Union[str, loss_lib.Loss, Callable] = "squared_error", *,
        n_rounds, depth, learning_rate, l2, min_split_gain, min_child_weight, subsample,
        colsample, colsample_by, n_bins, sample_weight, eval_set, key, n_outputs, task,
        per_output_trees, borders, devices, row_sampler, split_criterion, tree_family,
        max_leaves, early_stopping_rounds, early_stopping_tolerance, eval_metric, init_model,
        verbose, callbacks, checkpoint_dir, checkpoint_every, base_margin, eval_base_margin,
        cat_features, one_hot_max_size, cat_prior, cat_prior_weight, rows,
        monotone_constraints, interaction_constraints) -> booster_lib.Booster:
    """Fit a boosted ensemble of trees (ESL Algorithm 10.3, Newton trees).

    Args:
      X: ``(n_samples, n_features)`` numeric (NaN missing), or a pandas DataFrame (its column
        names kept).
      y: ``(n_samples,)`` labels (real, 0/1, 0..K-1, or class labels mapped to ``0..K-1``),
        ``(n_samples, C)`` vector labels, or a batch objective's labels (docs/fitting.md).
      loss: a built-in name (``"squared_error"``, ``"binomial_deviance"``,
        ``"multinomial_deviance"``, ... :mod:`jboost.losses`), a :class:`jboost.Loss`, a
        per-sample ``loss(y, raw) -> scalar`` (autodiff derivatives), or a batch objective.

    Returns:
      A :class:`Booster`; its ``settings`` record this call's settings.

    Raises:
      MemoryError: the fit's histograms would not fit in the device's memory.
      FloatingPointError: the training loss of a concrete fit is NaN or infinite.
    """
    a = types.SimpleNamespace(**locals())  # this call's arguments, for the pipeline's steps
    p = prepare_fit(a)
    out, start = run_fit(p, a)
    return finish_fit(p, out, start)


class Prepared(NamedTuple):
    """A fit's inputs after :func:`prepare_fit`: what the engine runs on and the model keeps."""

    data: state_lib.Data        # the rows the rounds run on (rows="local": every process's)
    data_local: state_lib.Data  # this process's rows (the finite-loss check's)
    borders: Any
    config: boosting_lib.BoostConfig
    hyper: boosting_lib.Hyperparams
    loss: loss_lib.Loss
    key: Any
    init_raw: Any               # the baseline (traced under vmap)
    scale: standardise.LabelScale  # the labels' offset and scale (docs/fitting.md)
    recorded: metadata.Settings
    fields: dict                # the model's classes, feature names and categorical columns
    concrete: bool              # no traced setting: host-side rounds, the finite-loss check
    mesh: Any
    local: Any                  # rows="local": the distributed.LocalRows, else None


class _Table(NamedTuple):
    """The tabular input read (:func:`_read_table`)."""

    X: Any
    y: Any              # mapped to class codes where it holds class labels
    eval_set: Any
    classes: Any
    names: Any
    plan: Any           # categorical columns: a jboost.data.categorical.Plan
    local: Any
    devices: Any


def prepare_fit(a) -> Prepared:
    """The first step of :func:`fit` (``a``: the call's arguments): the table, labels and
    settings read and checked, the features binned, the memory checked, the baseline."""
    t = _read_table(a)
    X, eval_set, local, devices = t.X, t.eval_set, t.local, t.devices
    n_table = X.shape[0] if local is None else local.n_total  # the rows of the whole table
    y = labels.as_labels(t.y, n_table, warn=False, columns=None)
    loss_obj = checks.resolve_loss(a.loss, y, a.n_outputs, a.task)
    if loss_obj.batch:
        loss_obj = checks.check_batch_objective(loss_obj, eval_set, devices)
    config, hyper = _fit_settings(a, loss_obj, has_validation=eval_set is not None)
    config = config._replace(**settings_lib.constraint_settings(
        a.monotone_constraints, a.interaction_constraints, config, n_features=X.shape[1],
        names=t.names, spec=None if t.plan is None else t.plan.spec,
        init_model=a.init_model))
    borders, init_model = a.borders, a.init_model
    if init_model is not None:
        borders = init_model_lib.init_model_borders(
            init_model, X if t.plan is None else t.plan.spec.n_features, loss_obj, borders, config)
        if t.plan is not None:  # bin the host columns with the model's borders (codes: replaced)
            h = t.plan.spec.host_width
            borders = jnp.concatenate([borders[:h], jnp.full((X.shape[1] - h, borders.shape[1]),
                                                             jnp.inf, borders.dtype)], axis=0)
        ls = standardise.NONE._replace(offset=init_model.offset)
    else:
        ls = standardise.label_scale(t.y, y, loss_obj, standardise.label_offset(t.y, y, loss_obj))
    if ls.offset is not None or ls.exponent:  # fit (y - c) / 2^e, computed in float64
        y, eval_set = standardise.standardised_inputs(t.y, eval_set, ls, n_table, a.eval_metric)
        loss_obj = standardise.scaled_loss(loss_obj, ls, 1.0 / ls.scale)
    y_table = y
    if local is not None:  # the whole table's borders; this process's rows
        checks.check_labels(loss_obj, y, "y")  # every process raises alike
        y = local.mine(y)
        if borders is None:
            borders = local.borders(X, tabular.as_weights(a.sample_weight, X.shape[0]),
                                    settings_lib.check_setting("n_bins", a.n_bins))
    data, borders = prepare.prepare_boosting(
        X, y, sample_weight=a.sample_weight, eval_set=eval_set, n_bins=config.n_bins,
        borders=borders, label_check=lambda v, name: checks.check_labels(loss_obj, v, name),
        label_columns=True)
    missing = binning.has_missing(data.X_binned, config.n_bins)
    config = config._replace(missing=missing if local is None else local.any(missing))
    key = checks_lib.as_key(a.key)
    cat = None
    if t.plan is not None:  # the ctr columns' statistics, borders and bins (traced prior)
        data, borders, cat = prepare.categorical_data(t.plan, data, borders, loss_obj, key,
                                                      a.cat_prior, a.cat_prior_weight,
                                                      config.n_bins, init_model)
    data = prepare.with_margins(data, a.base_margin, a.eval_base_margin, eval_set,
                                loss_obj.n_outputs)
    n_features = X.shape[1] if cat is None else cat.spec.n_features
    if local is None and not loss_obj.batch:  # nearby row counts share one program
        data = prepare.padded_rows(data, rows_lib.bucket(data.y.shape[0]))
    _check_fit_memory(config, loss_obj, (X.shape[0], n_features), devices,
                      k_from_labels=loss_obj.task == "multiclass" and a.n_outputs is None,
                      local=local)
    p = _with_baseline(a, data, borders, config, hyper, loss_obj, key, ls, cat, local, y_table,
                       devices, fields=dict(
                           classes=None if t.classes is None else metadata.Classes(t.classes),
                           feature_names=metadata.named(t.names), categorical=cat))
    config, hyper = standardise.scaled_settings(p.config, p.hyper, ls)  # recorded as given
    return p._replace(config=config, hyper=hyper)


def _read_table(a) -> _Table:
    """``X`` (categorical columns encoded), the labels mapped to class codes, the ``eval_set``
    likewise; with ``rows="local"``, the processes' settings compared and their rows gathered."""
    X, names, eval_set = tabular.tabular_input(a.X, a.init_model, a.eval_set)
    local, devices, y = None, a.devices, a.y
    if settings_lib.check_setting("rows", a.rows) == "local":
        shared = {k: getattr(a, k) for k in _LOCAL_SETTINGS}
        local = prepare.local_rows(X, y, a.loss, a.sample_weight, eval_set, devices,
                                   a.cat_features, dict(
                                       shared, n_callbacks=len(a.callbacks or ()), names=names),
                                   init_model=a.init_model, checkpoint_dir=a.checkpoint_dir,
                                   base_margin=a.base_margin, eval_base_margin=a.eval_base_margin)
        X, eval_set, devices, y = tabular.as_matrix(X, "X"), local.eval_set, local.mesh, local.y
    init_cat = getattr(a.init_model, "categorical", None)
    if init_cat is not None:  # a continued fit encodes with the model's columns and vocabularies
        plan = categorical_lib.categorical_plan_like(init_cat.spec, X, eval_set)
    else:
        plan = categorical_lib.categorical_plan(X, a.cat_features, a.one_hot_max_size, eval_set)
        if plan is not None and a.init_model is not None:
            raise ValueError("init_model was fitted without categorical features; this X has "
                             "categorical columns: continue on the model's numeric columns.")
    if plan is not None:  # the encoded rows: numeric, one-hot indicators, ctr codes
        X = plan.X
        if plan.X_valid is not None:
            eval_set = (plan.X_valid,) + tuple(eval_set[1:])
    X = tabular.as_matrix(X, "X")
    y, classes, eval_set = prepare.mapped_labels(
        y, eval_set, a.loss, a.n_outputs, a.task, a.init_model,
        n_rows=X.shape[0] if local is None else local.n_total)
    return _Table(X, y, eval_set, classes, names, plan, local, devices)


# The settings every process of a rows="local" fit must share (compared before any collective).
_LOCAL_SETTINGS = (
    "loss", "n_rounds", "depth", "learning_rate", "l2", "min_split_gain", "min_child_weight",
    "subsample", "colsample", "colsample_by", "n_bins", "key", "n_outputs", "task",
    "per_output_trees", "borders", "row_sampler", "split_criterion", "tree_family", "max_leaves",
    "early_stopping_rounds", "early_stopping_tolerance", "eval_metric", "verbose",
    "checkpoint_every", "one_hot_max_size", "cat_prior", "cat_prior_weight",
    "monotone_constraints", "interaction_constraints")


def _fit_settings(a, loss_obj: loss_lib.Loss, *, has_validation: bool):
    """``(BoostConfig, Hyperparams)`` of the call's settings, with its early stopping (or the
    metric shown without it)."""
    stopping, shown_metric = settings_lib.early_stopping(
        a.early_stopping_rounds, a.early_stopping_tolerance, a.eval_metric, loss_obj,
        has_validation=has_validation)
    config, hyper = settings_lib.settings_of(
        vars(a), per_output_trees=a.per_output_trees, row_sampler=a.row_sampler,
        split_criterion=a.split_criterion)
    return config._replace(early_stopping=stopping, eval_metric=shown_metric), hyper


def _check_fit_memory(config, loss_obj, shape, devices, *, k_from_labels: bool, local) -> None:
    """:func:`jboost.devices.check_memory` of one fit's peak (:func:`jboost.engine.memory.
    fit_peak_bytes`: its family's histograms, per-row state and hessians, trees), before
    compiling."""
    k = loss_obj.n_outputs
    cause = (f"K = max(y) + 1 = {k} classes, from the labels' maximum (the n_outputs of a K-class "
             "loss)" if k_from_labels else None)
    dense = memory.dense_hessian(loss_obj, k)
    need = memory.fit_peak_bytes(config, shape[0], shape[1], k, dense_hessian=dense,
                                 devices=devices)
    (devices_lib.check_memory if local is None else local.everywhere(devices_lib.check_memory))(
        need, devices=devices, cause=cause,
        detail=f"estimated for {shape[0]} rows, {shape[1]} features, "
        f"{memory.histogram_note(config)}, n_outputs={k}, "
        f"n_rounds={config.n_rounds} (histograms {memory.histogram_shape(config)}"
        f"{', per-row K x K autodiff hessians' if dense else ''}); "
        f"{memory.memory_fix(config, k, dense)}{memory.sharded_memory_hint(devices)}")


def _with_baseline(a, data, borders, config, hyper, loss_obj, key, ls, cat, local, y_table,
                   devices, *, fields) -> Prepared:
    """The :class:`Prepared` fit: its baseline, the custom-gradient check, the mesh and the
    recorded settings."""
    init_model = a.init_model
    if local is not None:  # the whole table's baseline
        init_raw = _baseline(loss_obj, jnp.asarray(y_table), jnp.asarray(
            tabular.as_weights(local.sample_weight, local.n_total)), None)
    elif init_model is None:
        init_raw = _baseline(loss_obj, data.y, data.w, data.margin)
    else:
        init_raw = init_model.baseline
    concrete = not any(checks_lib.is_traced(v)
                       for v in jax.tree_util.tree_leaves((hyper, init_raw, cat)))
    if concrete and not per_sample.is_built_in(loss_obj):
        checks.warn_if_no_gradient(loss_obj, data, init_raw)
    data_local = data
    if local is not None:
        if not concrete or not rounds_lib.host_rounds_possible():
            raise ValueError("rows='local' needs a concrete fit (not under jax.vmap or jax.jit).")
        data = local.global_data(data)
        config = config._replace(row_starts=local.row_starts)
    recorded = settings_lib.recorded_settings(
        config, hyper, key, init_rounds=0 if init_model is None else init_model.n_rounds,
        base_margin=a.base_margin is not None, categorical=cat)
    return Prepared(data, data_local, borders, config, hyper, loss_obj, key, init_raw, ls,
                    recorded, fields, concrete, devices_lib.mesh_of(devices), local)


def run_fit(p: Prepared, a):
    """The engine step of :func:`fit`: ``(BoostOutput, start)`` (``start`` the continued model
    or ``None``), by :func:`jboost.fitting.rounds.run_rounds` for a concrete fit, else as one
    traced program."""
    data, config, init_model = p.data, p.config, a.init_model
    args = (data, p.key, p.hyper, p.loss, p.init_raw)
    if p.concrete and rounds_lib.host_rounds_possible():
        ran = rounds_lib.run_rounds(
            *args, config, start=init_model, mesh=p.mesh,
            resume=lambda model: _resumed(data, model, p, config),
            model_of=lambda out, begun: _fit_model(out, begun, p.borders, p.init_raw, p.scale,
                                                   p.recorded)._replace(**p.fields),
            verbose=a.verbose, callbacks=a.callbacks, checkpoint_dir=a.checkpoint_dir,
            checkpoint_every=a.checkpoint_every, processes=p.local,
            units=(p.scale.loss_unit(), p.scale.metric_unit(calls.eval_metric_of(config))))
        return ran.out, ran.start
    if bool(a.verbose) or bool(a.callbacks) or a.checkpoint_dir is not None:
        raise ValueError("verbose=, callbacks= and checkpoint_dir= need a concrete fit (not "
                         "under jax.vmap or jax.jit).")
    config = config._replace(eval_metric=None)  # recorded in the settings only
    start = {}
    if init_model is not None:
        start = dict(state=boosting_lib.resume(
            data, init_model.trees, p.init_raw,
            init_model_lib.continued_loss(init_model.loss, p.loss), config),
            first_round=init_model.n_rounds)
    out = _booster_fn(p.mesh)(*args, config=config, **start)
    if config.early_stopping is not None and not checks_lib.is_traced(out.n_fitted):
        out = _first_rounds(out, int(out.n_fitted))  # a concrete fit keeps the rounds it fitted
    return out, init_model


def finish_fit(p: Prepared, out: state_lib.BoostOutput, start) -> booster_lib.Booster:
    """The last step of :func:`fit`: the :class:`Booster` of ``start``'s rounds and ``out``'s
    (NaN for traced settings outside their domains), after the finite-loss and divergence
    checks."""
    if p.concrete and not checks_lib.is_traced(out.train_loss):
        checks.check_finite_fit(out.train_loss, p.loss, p.data_local, p.init_raw)
    out = out._replace(train_loss=checks.warn_if_diverged(  # traced: a callback, per vmap member
        out.train_loss, out.valid_loss, p.loss, p.data_local, p.init_raw, n_fitted=out.n_fitted,
        learning_rate=p.hyper.learning_rate if p.config.learning_rate_schedule is None else None,
        checked=None if p.concrete else settings_lib.in_domains(p.loss, p.hyper)))
    booster = _fit_model(out, None, p.borders, p.init_raw, p.scale)
    booster = settings_lib.nan_outside_domains(booster, p.loss, p.hyper)  # traced: NaN, warned
    booster = booster if start is None else booster_lib.joined(start, booster)
    booster = booster._replace(**p.fields)  # checkpoints (model_of) carry them too
    return booster._replace(settings=p.recorded)  # as asked (not NaN-masked), this call's


def _resumed(data, model, p: Prepared, config):
    """The state of a fit resumed from ``model`` (a checkpoint, in label units)."""
    model = standardise.unscaled_model(model, p.scale, 1.0 / p.scale.scale)
    return boosting_lib.resume(data, model.trees, p.init_raw,
                               init_model_lib.continued_loss(model.loss, p.loss), config)


def _first_rounds(out: state_lib.BoostOutput, n: int) -> state_lib.BoostOutput:
    return out._replace(trees=jax.tree_util.tree_map(lambda a: a[:n], out.trees),
                        train_loss=out.train_loss[:n], valid_loss=out.valid_loss[:n])


def _booster_fn(mesh):
    """:func:`boosting.boost`, or :func:`boosting.boost_sharded` over ``mesh``."""
    return boosting_lib.boost if mesh is None else functools.partial(sharded.boost_sharded, mesh)


def _fit_model(out: state_lib.BoostOutput, start, borders, init_raw, ls, settings=None):
    """The :class:`Booster` of ``start``'s rounds (``None``: none) and ``out``'s (in label units:
    ``ls`` the fit's :class:`jboost.fitting.standardise.LabelScale`)."""
    model = booster_lib.Booster(trees=family.with_borders(out.trees, borders), borders=borders,
                              baseline=init_raw, loss=out.final_loss, train_loss=out.train_loss,
                              valid_loss=out.valid_loss, best_round=out.best_round,
                              offset=None if ls.offset is None else jnp.asarray(ls.offset))
    model = standardise.unscaled_model(model, ls)
    model = model if start is None else booster_lib.joined(start, model)
    return model if settings is None else model._replace(settings=settings)


@_compile.jit
def _baseline(loss, y, w, margin=None):
    return baselines.baseline(loss, y, w, margin)
