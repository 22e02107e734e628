"""``jboost.fit``: gradient boosting of trees, from user data to a :class:`jboost.Booster`.

``fit`` checks its inputs on the host through the settings layer (clear ``ValueError`` /
``TypeError`` naming the argument), bins the features, then calls the jit-compiled
:func:`jboost.engine.boosting.boost`. Continuous hyperparameters may be JAX tracers:
``jax.vmap(lambda lr: jboost.fit(X, y, learning_rate=lr))`` fits a whole sweep in one compiled
call (X and y must then be concrete, closed-over arrays). Prediction and the model protocol are
in :mod:`jboost.models.base`.

No silent wrong answers: before compiling, ``fit`` refuses a fit whose histograms cannot fit in
the device's memory (``MemoryError``, e.g. K = max(y) + 1 classes from a label of 1e6) and warns
when a custom loss's gradient is zero at every row at the baseline (nothing would be learned);
after a concrete fit it raises ``FloatingPointError`` when the training loss is not finite,
naming the first such round and the likely causes. These checks need concrete values: under
``jax.vmap`` (traced hyperparameters or loss parameters) they are skipped.
"""

from __future__ import annotations

import functools
from typing import Any, Callable, Optional, Sequence, Union

import jax
import jax.numpy as jnp

from jboost import _compile
from jboost import checks as checks_lib
from jboost import devices as devices_lib
from jboost.data import binning
from jboost.data import categorical as categorical_lib
from jboost.data import categorical_stats
from jboost.data import labels
from jboost.data import tabular
from jboost.engine import boosting as boosting_lib
from jboost.engine import distributed
from jboost.engine import memory
from jboost.engine import rounds as rounds_lib
from jboost.engine import sharded
from jboost.engine import state as state_lib
from jboost.fitting import init_model as init_model_lib
from jboost.fitting import prepare
from jboost.fitting import settings as settings_lib
from jboost.losses import baselines
from jboost.losses import checks
from jboost.losses import loss as loss_lib
from jboost.losses import per_sample
from jboost.models import booster as booster_lib
from jboost.models import metadata
from jboost.trees import family
from jboost.trees import oblivious
from jboost.trees import splits as splits_lib


@settings_lib.takes_settings()
def fit(X, y, loss: Union[str, loss_lib.Loss, Callable] = "squared_error", *,
        n_rounds, depth, learning_rate, l2, min_split_gain, min_child_weight, subsample,
        colsample, colsample_by, n_bins, sample_weight, eval_set, key, n_outputs, task,
        per_output_trees, borders, devices, row_sampler, split_criterion, tree_family,
        max_leaves, early_stopping_rounds, early_stopping_tolerance, eval_metric, init_model,
        verbose, callbacks, checkpoint_dir, checkpoint_every, base_margin, eval_base_margin,
        cat_features, one_hot_max_size, cat_prior, cat_prior_weight, rows) -> booster_lib.Booster:
    """Fit a boosted ensemble of oblivious trees (ESL Algorithm 10.3, Newton trees).

    Args:
      X: ``(n_samples, n_features)`` numeric; NaN is a missing value. A pandas DataFrame's
        numeric, bool and nullable columns are taken (missing values as NaN) and its column
        names kept (``Booster.feature_names``): predicting from a DataFrame matches columns by
        name.
      y: ``(n_samples,)`` labels: real for regression, 0/1 for binary losses, 0..K-1 for K-class
        (other class labels -- strings, ``{-1, 1}``, any negative or fractional numbers -- are
        mapped to ``0..K-1`` in sorted order and kept in ``Booster.classes``, which
        :func:`jboost.predict_class` returns);
        or ``(n_samples, C)`` vector labels: multi-target regression (a built-in loss applies to
        each column, :func:`jboost.losses.columnwise`; a custom loss gets each row's ``(C,)``
        label), multi-label classification (``"binomial_deviance"``: C independent 0/1 labels,
        ``predict_proba`` ``(n, C)``), with one output per column (``n_outputs = C``; predictions
        ``(n, C)``); or the structured labels of a batch objective (:mod:`jboost.objectives`:
        ``(time, event)`` for Cox, ``(relevance, query id)`` for ranking).
      loss: a built-in name (``"squared_error"``, ``"absolute_error"``, ``"huber"``,
        ``"quantile"``, ``"binomial_deviance"``, ``"exponential"``, ``"multinomial_deviance"``,
        ``"samme_exponential"``, ``"poisson"``), a :class:`jboost.Loss`, or any function
        ``loss(y, raw) -> scalar`` for one sample (gradients and hessians come from autodiff),
        or a batch objective of every row (:mod:`jboost.objectives`: ``cox``, ``ranking``,
        ``batch_loss``; one device only, ``devices=None``).

    A concrete fit (not under ``jax.vmap`` / ``jax.jit``) runs its rounds as host-side calls of
    one compiled program (:func:`run_rounds`: about a quarter of a second each, or a chunk of
    ``checkpoint_every`` / ``verbose`` rounds; bitwise the same model however the rounds are
    cut), so ``Ctrl-C`` returns the rounds fitted so far within about a second, with a warning
    (during the first call, which compiles, it raises ``KeyboardInterrupt``). The fit returns
    before the device has finished (asynchronous dispatch): time it with
    ``jax.block_until_ready(model.trees)``. Under ``jax.vmap`` the fit is one traced program,
    which ``Ctrl-C`` cannot stop before it ends.

    Returns:
      A :class:`Booster`, whose ``settings`` (:class:`jboost.models.metadata.Settings`) record this call's
      settings (saved in model files by :func:`jboost.save`).

    Raises:
      MemoryError: the fit's histograms would not fit in the device's memory (checked before
        compiling; :func:`jboost.devices.check_memory`).
      FloatingPointError: the training loss of a concrete fit is NaN or infinite (the message
        names the first such round and the likely causes: the loss at the labels and baseline,
        the learning rate). Not checked under ``jax.vmap``.
    """
    X, names, eval_set = tabular.tabular_input(X, init_model, eval_set)
    local = None
    if settings_lib.check_setting("rows", rows) == "local":
        local = prepare.local_rows(X, y, loss, sample_weight, eval_set, devices, cat_features, dict(
            loss=loss, n_rounds=n_rounds, depth=depth, learning_rate=learning_rate, l2=l2,
            min_split_gain=min_split_gain, min_child_weight=min_child_weight, subsample=subsample,
            colsample=colsample, colsample_by=colsample_by, n_bins=n_bins, key=key,
            n_outputs=n_outputs, task=task, per_output_trees=per_output_trees, borders=borders,
            row_sampler=row_sampler, split_criterion=split_criterion, tree_family=tree_family,
            max_leaves=max_leaves, early_stopping_rounds=early_stopping_rounds,
            early_stopping_tolerance=early_stopping_tolerance, eval_metric=eval_metric,
            verbose=verbose, n_callbacks=len(callbacks or ()), checkpoint_every=checkpoint_every,
            one_hot_max_size=one_hot_max_size, cat_prior=cat_prior,
            cat_prior_weight=cat_prior_weight, names=names),
            init_model=init_model, checkpoint_dir=checkpoint_dir, base_margin=base_margin,
            eval_base_margin=eval_base_margin)
        X, eval_set = tabular.as_matrix(X, "X"), local.eval_set
        devices = local.mesh
    init_cat = getattr(init_model, "categorical", None)
    if init_cat is not None:  # a continued fit encodes with the model's columns and vocabularies
        plan = categorical_lib.categorical_plan_like(init_cat.spec, X, eval_set)
    else:
        plan = categorical_lib.categorical_plan(X, cat_features, one_hot_max_size, eval_set)
        if plan is not None and init_model is not None:
            raise ValueError("init_model was fitted without categorical features; this X has "
                             "categorical columns: continue on the model's numeric columns.")
    if plan is not None:  # the encoded rows: numeric, one-hot indicators, ctr codes
        X = plan.X
        if plan.X_valid is not None:
            eval_set = (plan.X_valid,) + tuple(eval_set[1:])
    X = tabular.as_matrix(X, "X")
    n_table = X.shape[0] if local is None else local.n_total  # the rows of the whole table
    y, classes, eval_set = prepare.mapped_labels(y if local is None else local.y, eval_set, loss,
                                                     n_outputs, task, init_model, n_rows=n_table)
    y_given = y
    y = labels.as_labels(y, n_table, warn=False, columns=None)
    loss_obj = checks.resolve_loss(loss, y, n_outputs, task)
    if loss_obj.batch:
        loss_obj = checks.check_batch_objective(loss_obj, eval_set, devices)
    stopping = settings_lib.check_early_stopping(
        early_stopping_rounds, early_stopping_tolerance,
        eval_metric if early_stopping_rounds is not None else None, loss_obj,
        has_validation=eval_set is not None)
    shown_metric = (None if early_stopping_rounds is not None else  # progress and callbacks only
                    settings_lib.check_eval_metric(eval_metric, loss_obj, has_validation=eval_set is not None))
    config, hyper = settings_lib.settings(n_rounds=n_rounds, depth=depth, n_bins=n_bins,
                             learning_rate=learning_rate, l2=l2, min_split_gain=min_split_gain,
                             min_child_weight=min_child_weight, subsample=subsample,
                             colsample=colsample, colsample_by=colsample_by,
                             per_output_trees=per_output_trees, row_sampler=row_sampler,
                             split_criterion=split_criterion, tree_family=tree_family,
                             max_leaves=max_leaves)
    config = config._replace(early_stopping=stopping, eval_metric=shown_metric)
    if init_model is not None:
        borders = init_model_lib.init_model_borders(init_model, X if plan is None else plan.spec.n_features,
                                    loss_obj, borders, config)
        if plan is not None:  # bin the host columns with the model's borders (codes: replaced)
            h = plan.spec.host_width
            borders = jnp.concatenate([borders[:h], jnp.full((X.shape[1] - h, borders.shape[1]),
                                                             jnp.inf, borders.dtype)], axis=0)
        offset = init_model.offset
    else:
        offset = prepare.label_offset(y_given, y, loss_obj)
    if offset is not None:  # fit y - c, computed in float64; the model adds c back
        y, eval_set = prepare.centred_inputs(y_given, eval_set, offset, n_table, eval_metric)
    if local is not None:  # the whole table's borders; this process's rows
        checks.check_labels(loss_obj, y, "y")  # every process raises alike
        y_table, y = y, local.mine(y)
        if borders is None:
            borders = local.borders(X, tabular.as_weights(sample_weight, X.shape[0]),
                                    settings_lib.check_setting("n_bins", n_bins))
    data, borders = prepare.prepare_boosting(
        X, y, sample_weight=sample_weight, eval_set=eval_set, n_bins=config.n_bins, borders=borders,
        label_check=lambda v, name: checks.check_labels(loss_obj, v, name), label_columns=True)
    missing = binning.has_missing(data.X_binned, config.n_bins)
    config = config._replace(missing=missing if local is None else local.any(missing))
    key = checks_lib.as_key(key)
    cat = None
    if plan is not None:  # the ctr columns' statistics, borders and bins (traced prior)
        data, borders, cat = prepare.categorical_data(plan, data, borders, loss_obj, key, cat_prior,
                                               cat_prior_weight, config.n_bins, init_model)
        X_shape = (X.shape[0], cat.spec.n_features)
    else:
        X_shape = X.shape
    data = prepare.with_margins(data, base_margin, eval_base_margin, eval_set, loss_obj.n_outputs)
    cause = (f"n_outputs K = {loss_obj.n_outputs} (a K-class loss takes K = max(y) + 1 from the "
             "labels' maximum)" if loss_obj.task == "multiclass" and n_outputs is None else None)
    k = loss_obj.n_outputs
    dense = loss_obj.hessian != "unit"
    need = memory.boosting_bytes(X_shape[0], X_shape[1], memory.memory_depth(config),
                                      config.n_bins, k,
                                      config.n_rounds, k if config.per_output_trees else 1, dense,
                                      devices) + memory.family_bytes(config, X_shape[0],
                                                                          X_shape[1], k)
    (devices_lib.check_memory if local is None else local.everywhere(devices_lib.check_memory))(
        need, devices=devices, cause=cause,
        detail=f"estimated for {X_shape[0]} rows, {X_shape[1]} features, "
        f"{memory.histogram_note(config)}, n_outputs={k}, "
        f"n_rounds={config.n_rounds} (histograms {memory.histogram_shape(config)}"
        f"{', per-row K x K autodiff hessians' if dense and k > 1 else ''})"
        f"{memory.sharded_memory_hint(devices)}")
    if local is not None:  # the whole table's baseline
        init_raw = _baseline(loss_obj, jnp.asarray(y_table), jnp.asarray(
            tabular.as_weights(local.sample_weight, local.n_total)), None)
    elif init_model is None:
        init_raw = _baseline(loss_obj, data.y, data.w, data.margin)
    else:
        init_raw = init_model.baseline
    concrete = not any(checks_lib.is_traced(v) for v in jax.tree_util.tree_leaves((hyper, init_raw, cat)))
    if concrete and not per_sample.is_built_in(loss_obj):
        checks.warn_if_no_gradient(loss_obj, data, init_raw)
    mesh = devices_lib.mesh_of(devices)
    data_local = data
    if local is not None:
        if not concrete or not rounds_lib.host_rounds_possible():
            raise ValueError("rows='local' needs a concrete fit (not under jax.vmap or jax.jit).")
        data = local.global_data(data)
        config = config._replace(row_starts=local.row_starts)
    recorded = settings_lib.recorded_settings(config, hyper, key, init_rounds=0 if init_model is None else init_model.n_rounds,
                                 base_margin=base_margin is not None, categorical=cat)
    args = (data, key, hyper, loss_obj, init_raw)
    labels_and_names = dict(classes=None if classes is None else metadata.Classes(classes),
                            feature_names=metadata.named(names), categorical=cat)
    chunked = bool(verbose) or bool(callbacks) or checkpoint_dir is not None
    if concrete and rounds_lib.host_rounds_possible():
        # A concrete fit runs as host-side calls of one compiled program (Ctrl-C, progress,
        # checkpoints); bitwise the same rounds however they are cut.
        ran = rounds_lib.run_rounds(data, key, hyper, loss_obj, init_raw, config, start=init_model, mesh=mesh,
                         resume=lambda model: boosting_lib.resume(
                             data, model.trees, init_raw, init_model_lib.continued_loss(model.loss, loss_obj), config),
                         model_of=lambda out, begun: _fit_model(out, begun, borders, init_raw, offset,
                                                                recorded)._replace(**labels_and_names),
                         verbose=verbose, callbacks=callbacks, checkpoint_dir=checkpoint_dir,
                         checkpoint_every=checkpoint_every, processes=local)
        out, start = ran.out, ran.start
    elif chunked:
        raise ValueError("verbose=, callbacks= and checkpoint_dir= need a concrete fit (not "
                         "under jax.vmap or jax.jit).")
    else:
        config = config._replace(eval_metric=None)  # recorded in the settings only
        start = init_model
        if init_model is not None:
            state = boosting_lib.resume(data, init_model.trees, init_raw,
                                    init_model_lib.continued_loss(init_model.loss, loss_obj), config)
            out = _booster_fn(mesh)(*args, config=config, state=state, first_round=init_model.n_rounds)
        elif mesh is None:
            out = boosting_lib.boost(*args, config=config)
        else:
            out = sharded.boost_sharded(mesh, *args, config=config)
        if stopping is not None and not checks_lib.is_traced(out.n_fitted):
            out = _first_rounds(out, int(out.n_fitted))  # a concrete fit keeps the rounds it fitted
    if concrete and not checks_lib.is_traced(out.train_loss):
        checks.check_finite_fit(out.train_loss, loss_obj, data_local, init_raw)
    booster = booster_lib.Booster(trees=family.with_borders(out.trees, borders), borders=borders,
                                baseline=init_raw, loss=out.final_loss, train_loss=out.train_loss,
                                valid_loss=out.valid_loss, best_round=out.best_round,
                                offset=None if offset is None else jnp.asarray(offset))
    booster = settings_lib.nan_outside_domains(booster, loss_obj, hyper)  # traced: NaN, warned
    booster = booster if start is None else booster_lib.joined(start, booster)
    booster = booster._replace(**labels_and_names)  # checkpoints (model_of) carry them too
    return booster._replace(settings=recorded)  # as asked (not NaN-masked), this call's


def _first_rounds(out: state_lib.BoostOutput, n: int) -> state_lib.BoostOutput:
    return out._replace(trees=jax.tree_util.tree_map(lambda a: a[:n], out.trees),
                        train_loss=out.train_loss[:n], valid_loss=out.valid_loss[:n])


def _booster_fn(mesh):
    """:func:`boosting.boost`, or :func:`boosting.boost_sharded` over ``mesh``."""
    return boosting_lib.boost if mesh is None else functools.partial(sharded.boost_sharded, mesh)


def _fit_model(out: state_lib.BoostOutput, start, borders, init_raw, offset, settings=None):
    """The :class:`Booster` of ``start``'s rounds (``None``: none) and ``out``'s, with the fit's
    ``settings`` (a checkpoint of :func:`run_rounds`)."""
    model = booster_lib.Booster(trees=family.with_borders(out.trees, borders), borders=borders,
                              baseline=init_raw, loss=out.final_loss, train_loss=out.train_loss,
                              valid_loss=out.valid_loss, best_round=out.best_round,
                              offset=None if offset is None else jnp.asarray(offset))
    model = model if start is None else booster_lib.joined(start, model)
    return model if settings is None else model._replace(settings=settings)


@_compile.jit
def _baseline(loss, y, w, margin=None):
    return baselines.baseline(loss, y, w, margin)
