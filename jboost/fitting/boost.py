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


def fit(
    X,
    y,
    loss: Union[str, loss_lib.Loss, Callable] = "squared_error",
    *,
    n_rounds: int = 100,
    depth: int = 6,
    learning_rate: Any = 0.1,
    l2: Any = 1.0,
    min_split_gain: Any = 0.0,
    min_child_weight: Any = 1.0,
    subsample: Any = 1.0,
    colsample: Any = 1.0,
    colsample_by: str = "tree",
    n_bins: int = 256,
    sample_weight=None,
    eval_set=None,
    key: Any = 0,
    n_outputs: Optional[int] = None,
    task: Optional[str] = None,
    per_output_trees: bool = False,
    borders=None,
    devices=None,
    row_sampler: Any = "bernoulli",
    split_criterion: splits_lib.SplitCriterion = splits_lib.NEWTON,
    tree_family: type = oblivious.ObliviousTrees,
    max_leaves: Optional[int] = None,
    early_stopping_rounds: Optional[int] = None,
    early_stopping_tolerance: float = 0.0,
    eval_metric: Union[None, str, Callable] = None,
    init_model: Optional[booster_lib.Booster] = None,
    verbose: int = 0,
    callbacks: Sequence[Callable] = (),
    checkpoint_dir=None,
    checkpoint_every: Optional[int] = None,
    base_margin=None,
    eval_base_margin=None,
    cat_features=None,
    one_hot_max_size: int = categorical_lib.ONE_HOT_MAX_SIZE,
    cat_prior: Any = None,
    cat_prior_weight: Any = categorical_stats.PRIOR_WEIGHT,
    rows: str = "global",
) -> booster_lib.Booster:
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
      n_rounds: boosting rounds (static).
      depth: levels per oblivious tree, 1..16 (static; 2**depth leaves).
      learning_rate: shrinkage (traced), or a callable ``round -> rate`` such as an optax schedule.
      l2: L2 penalty on leaf values, the lambda of ``-G / (H + lambda)`` (traced).
      min_split_gain: a level is split only if its gain exceeds this (traced).
      min_child_weight: minimal hessian sum of a child (traced; see :mod:`jboost.trees.splits`).
      subsample: probability that a row takes part in a round (Bernoulli weights; traced).
      colsample: fraction of features eligible per tree or per level (traced).
      colsample_by: ``"tree"``, ``"level"`` or a column sampler function (:mod:`jboost.engine.samplers`).
      n_bins: bins per feature including the missing bin, 3..256 (static).
      sample_weight: optional non-negative ``(n_samples,)`` weights.
      eval_set: optional ``(X_valid, y_valid)`` or ``(X_valid, y_valid, w_valid)``; its mean loss
        after every round is returned in ``Booster.valid_loss``.
      key: an int seed or a ``jax.random`` key. Same key, data, settings and device: bitwise the
        same model (a vmapped or sharded fit equals it up to float rounding: README, numerical contract).
      n_outputs: number of raw outputs K for a custom loss (built-ins know theirs; K-class losses
        infer K from the labels).
      task: for a custom loss: ``"regression"``, ``"binary"``, ``"multiclass"`` or ``"count"``.
      per_output_trees: with K outputs, fit K separate trees per round (ESL Algorithm 10.4)
        instead of one tree with vector leaves.
      borders: precomputed ``(n_features, n_bins - 1)`` borders (from :func:`jboost.compute_borders`)
        to reuse a binning.
      devices: data-parallel training: ``"all"`` (every device of ``jax.devices()``), a list of
        devices, or a ``jax.sharding.Mesh`` whose first axis the rows are sharded over; histograms
        are summed across devices with ``psum`` (:func:`jboost.engine.sharded.boost_sharded`).
        ``None`` (default): one device.
      row_sampler: ``"bernoulli"`` (each row kept with probability ``subsample``), ``"poisson"``
        (Poisson(``subsample``) counts: a bootstrap per round) or a function (:mod:`jboost.engine.samplers`).
      split_criterion: how splits are scored and leaves valued, a
        :class:`jboost.trees.splits.SplitCriterion` (static); default the regularised Newton criterion.
      tree_family: the class of trees to grow (static): ``"oblivious"`` (the default,
        :class:`jboost.trees.oblivious.ObliviousTrees`), ``"depthwise"`` (:class:`jboost.trees.depthwise.DepthwiseTrees`),
        ``"lossguide"`` (best-first: the leaf of largest gain splits next,
        :class:`jboost.trees.lossguide.LossGuidedTrees`; its trees are depth-wise node tables) or any
        :class:`jboost.trees.family.TreeFamily` class.
      max_leaves: loss-guided trees only (static): the most leaves of a tree (default 31,
        LightGBM's ``num_leaves``); ``depth`` is then a depth bound (up to 30) and
        ``depth=None`` leaves only ``max_leaves`` to bound the trees.
      early_stopping_rounds: stop when the ``eval_set`` score has not improved (by more than
        ``early_stopping_tolerance``) for this many rounds; the fit really stops (a concrete fit
        after that round, :func:`run_rounds`; under ``jax.vmap`` the rounds run in chunks of 8
        inside a ``while_loop``). The Booster then holds the rounds fitted and
        ``best_round``, which predictions use by default. Under ``jax.vmap`` each model stops on
        its own; its rounds after the stop are zero trees with NaN losses.
      early_stopping_tolerance: the least decrease of the score that counts as an improvement.
      eval_metric: the early-stopping score (without ``early_stopping_rounds``: a validation
        metric shown by ``verbose``, given to ``callbacks`` and named in the settings, nothing
        more; it needs ``eval_set``): ``None`` (the loss), ``"error_rate"``, ``"mse"``,
        ``"mae"`` (:data:`jboost.losses.metrics.METRICS`, through the loss's link) or ``metric(y, raw, w) -> scalar``
        (minimised; ``raw`` as :func:`jboost.predict` returns it). A module-level function: it is
        static in the compiled program.
      init_model: continue boosting this :class:`Booster` (a warm start, :func:`jboost.fit`'s
        gradient boosting): ``n_rounds`` more rounds on the same data and binning (its borders),
        keys folded from its round count, so ``r`` rounds then ``s`` more with the same settings
        equal ``r + s`` rounds bitwise. The result holds every round.
      verbose: print the round, the training and validation losses (and the ``eval_metric``),
        the best round and the elapsed and remaining time every ``verbose`` rounds while the fit
        runs; the remaining time is estimated from the chunks after the first (whose time
        includes compiling the program).
      callbacks: functions called on the host after every chunk of rounds with a dict (``round``,
        ``rounds``, per-round ``train_loss`` and ``valid_loss``, ``elapsed`` seconds; with an
        ``eval_metric``, its name ``metric`` and per-round values ``valid_metric``); a callback
        returning ``True`` stops the fit (the rounds fitted are kept).
      checkpoint_dir: a directory where the model so far is saved (``checkpoint.jbm``, a model
        file) every ``checkpoint_every`` rounds; rerunning the same fit (same data, key and
        settings) continues from it and ends with bitwise the model of an uninterrupted fit.
      checkpoint_every: rounds between checkpoints (default: ``verbose``, else a twentieth of
        ``n_rounds``).
      base_margin: per-row offsets of the raw scores, ``(n_samples,)`` or ``(n_samples, K)``
        (XGBoost's ``base_margin``, LightGBM's ``init_score``; e.g. ``log(exposure)`` for a
        Poisson rate): every training row's raw score starts from its offset plus the baseline,
        which is then the optimal constant next to the offsets (the intercept of a model with
        offsets, found numerically). The model does not store them: pass the rows' offsets to
        :func:`jboost.predict` (``base_margin=``) and its siblings, and again to a continued fit.
      eval_base_margin: the offsets of ``eval_set``'s rows (required with ``base_margin`` and
        an ``eval_set``).
      cat_features: the categorical columns (:mod:`jboost.data.categorical`): ``None`` (a
        DataFrame's ``category``, ``object`` and string columns; none of an array's), or
        column names / indices / a boolean mask (strings, or integer codes
        in numeric columns). ``[]``: none. Prediction encodes them with the model's tables
        (unseen and missing categories: the prior, never an error).
      one_hot_max_size: columns with at most this many categories (missing counted) become
        0/1 indicators (splits ``x == c``); larger ones get CatBoost's ordered target
        statistics (static).
      cat_prior: the prior ``p`` of the target statistics, a number or ``(K,)`` (traced);
        default the training rows' weighted mean of the statistic (the positive rate).
      cat_prior_weight: its weight ``a > 0`` in ``(sum + a p) / (count + a)`` (traced).
      rows: ``"global"`` (default): ``X``, ``y``, ``sample_weight`` and ``eval_set`` are the whole
        data (on every process of a multi-process run). ``"local"``: the multi-process mode
        (:mod:`jboost.engine.distributed`, after ``jax.distributed.initialize()``): every process calls
        ``fit`` with the same settings and only its own rows (and validation rows); the model,
        returned on every process, is the fit of the processes' rows concatenated in process
        order (the same borders, classes, baseline and splits; leaf values up to float rounding).
        ``devices``: ``None`` / ``"all"`` (every process's devices) or a one-axis mesh whose
        devices come process by process. Not with ``init_model``, ``checkpoint_dir``,
        ``base_margin``, categorical columns, batch objectives or traced settings.

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
    if checks_lib.check_choice(rows, "rows", distributed.ROWS) == "local":
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
                                    checks_lib.check_int(n_bins, "n_bins", 3, binning.MAX_BINS))
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
