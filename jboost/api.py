"""``fit``: gradient boosting of oblivious trees, from user data to a :class:`jboost.Booster`.

``fit`` checks its inputs on the host through the settings layer (clear ``ValueError`` /
``TypeError`` naming the argument), bins the features, then calls the jit-compiled
:func:`jboost.boosting.boost`. Continuous hyperparameters may be JAX tracers:
``jax.vmap(lambda lr: jboost.fit(X, y, learning_rate=lr))`` fits a whole sweep in one compiled
call (X and y must then be concrete, closed-over arrays). Prediction and the model protocol are
in :mod:`jboost.model`.

No silent wrong answers: before compiling, ``fit`` refuses a fit whose histograms cannot fit in
the device's memory (``MemoryError``, e.g. K = max(y) + 1 classes from a label of 1e6) and warns
when a custom loss's gradient is zero at every row at the baseline (nothing would be learned);
after a concrete fit it raises ``FloatingPointError`` when the training loss is not finite,
naming the first such round and the likely causes. These checks need concrete values: under
``jax.vmap`` (traced hyperparameters or loss parameters) they are skipped.
"""

from __future__ import annotations

import functools
import time
import warnings
from typing import Any, Callable, NamedTuple, Optional, Sequence, Union

import jax
import jax.numpy as jnp
import numpy as np

from jboost import _compile
from jboost import _batching
from jboost import _validation
from jboost import binning
from jboost import boosting
from jboost import categorical
from jboost import distributed
from jboost import losses as losses_lib
from jboost import lossguide
from jboost import metrics as metrics_lib
from jboost import model as model_lib
from jboost import samplers
from jboost import splits
from jboost import tree as tree_lib

# Re-exported for compatibility: the model protocol lives in jboost.model.
Booster = model_lib.Booster
predict = model_lib.predict
predict_proba = model_lib.predict_proba
predict_class = model_lib.predict_class
predict_mean = model_lib.predict_mean
feature_importance = model_lib.feature_importance


def fit(
    X,
    y,
    loss: Union[str, losses_lib.Loss, Callable] = "squared_error",
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
    split_criterion: splits.SplitCriterion = splits.NEWTON,
    tree_family: type = tree_lib.ObliviousTrees,
    max_leaves: Optional[int] = None,
    early_stopping_rounds: Optional[int] = None,
    early_stopping_tolerance: float = 0.0,
    eval_metric: Union[None, str, Callable] = None,
    init_model: Optional[model_lib.Booster] = None,
    verbose: int = 0,
    callbacks: Sequence[Callable] = (),
    checkpoint_dir=None,
    checkpoint_every: Optional[int] = None,
    base_margin=None,
    eval_base_margin=None,
    cat_features=None,
    one_hot_max_size: int = categorical.ONE_HOT_MAX_SIZE,
    cat_prior: Any = None,
    cat_prior_weight: Any = categorical.PRIOR_WEIGHT,
    rows: str = "global",
) -> model_lib.Booster:
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
      min_child_weight: minimal hessian sum of a child (traced; see :mod:`jboost.splits`).
      subsample: probability that a row takes part in a round (Bernoulli weights; traced).
      colsample: fraction of features eligible per tree or per level (traced).
      colsample_by: ``"tree"``, ``"level"`` or a column sampler function (:mod:`jboost.samplers`).
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
        are summed across devices with ``psum`` (:func:`jboost.boosting.boost_sharded`).
        ``None`` (default): one device.
      row_sampler: ``"bernoulli"`` (each row kept with probability ``subsample``), ``"poisson"``
        (Poisson(``subsample``) counts: a bootstrap per round) or a function (:mod:`jboost.samplers`).
      split_criterion: how splits are scored and leaves valued, a
        :class:`jboost.splits.SplitCriterion` (static); default the regularised Newton criterion.
      tree_family: the class of trees to grow (static): ``"oblivious"`` (the default,
        :class:`jboost.tree.ObliviousTrees`), ``"depthwise"`` (:class:`jboost.depthwise.DepthwiseTrees`),
        ``"lossguide"`` (best-first: the leaf of largest gain splits next,
        :class:`jboost.lossguide.LossGuidedTrees`; its trees are depth-wise node tables) or any
        :class:`jboost.tree.TreeFamily` class.
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
        ``"mae"`` (:data:`jboost.metrics.METRICS`, through the loss's link) or ``metric(y, raw, w) -> scalar``
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
      cat_features: the categorical columns (:mod:`jboost.categorical`): ``None`` (a
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
        (:mod:`jboost.distributed`, after ``jax.distributed.initialize()``): every process calls
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
      A :class:`Booster`, whose ``settings`` (:class:`jboost.model.Settings`) record this call's
      settings (saved in model files by :func:`jboost.save`).

    Raises:
      MemoryError: the fit's histograms would not fit in the device's memory (checked before
        compiling; :func:`jboost._validation.check_memory`).
      FloatingPointError: the training loss of a concrete fit is NaN or infinite (the message
        names the first such round and the likely causes: the loss at the labels and baseline,
        the learning rate). Not checked under ``jax.vmap``.
    """
    X, names, eval_set = _validation.tabular_input(X, init_model, eval_set)
    local = None
    if _validation.check_choice(rows, "rows", distributed.ROWS) == "local":
        local = _local_rows(X, y, loss, sample_weight, eval_set, devices, cat_features, dict(
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
        X, eval_set = _validation.as_matrix(X, "X"), local.eval_set
        devices = local.mesh
    init_cat = getattr(init_model, "categorical", None)
    if init_cat is not None:  # a continued fit encodes with the model's columns and vocabularies
        plan = _validation.categorical_plan_like(init_cat.spec, X, eval_set)
    else:
        plan = _validation.categorical_plan(X, cat_features, one_hot_max_size, eval_set)
        if plan is not None and init_model is not None:
            raise ValueError("init_model was fitted without categorical features; this X has "
                             "categorical columns: continue on the model's numeric columns.")
    if plan is not None:  # the encoded rows: numeric, one-hot indicators, ctr codes
        X = plan.X
        if plan.X_valid is not None:
            eval_set = (plan.X_valid,) + tuple(eval_set[1:])
    X = _validation.as_matrix(X, "X")
    n_table = X.shape[0] if local is None else local.n_total  # the rows of the whole table
    y, classes, eval_set = _validation.mapped_labels(y if local is None else local.y, eval_set, loss,
                                                     n_outputs, task, init_model, n_rows=n_table)
    y_given = y
    y = _validation.as_labels(y, n_table, warn=False, columns=None)
    loss_obj = _validation.resolve_loss(loss, y, n_outputs, task)
    if loss_obj.batch:
        loss_obj = _validation.check_batch_objective(loss_obj, eval_set, devices)
    stopping = _validation.check_early_stopping(
        early_stopping_rounds, early_stopping_tolerance,
        eval_metric if early_stopping_rounds is not None else None, loss_obj,
        has_validation=eval_set is not None)
    shown_metric = (None if early_stopping_rounds is not None else  # progress and callbacks only
                    _validation.check_eval_metric(eval_metric, loss_obj, has_validation=eval_set is not None))
    config, hyper = settings(n_rounds=n_rounds, depth=depth, n_bins=n_bins,
                             learning_rate=learning_rate, l2=l2, min_split_gain=min_split_gain,
                             min_child_weight=min_child_weight, subsample=subsample,
                             colsample=colsample, colsample_by=colsample_by,
                             per_output_trees=per_output_trees, row_sampler=row_sampler,
                             split_criterion=split_criterion, tree_family=tree_family,
                             max_leaves=max_leaves)
    config = config._replace(early_stopping=stopping, eval_metric=shown_metric)
    if init_model is not None:
        borders = _check_init_model(init_model, X if plan is None else plan.spec.n_features,
                                    loss_obj, borders, config)
        if plan is not None:  # bin the host columns with the model's borders (codes: replaced)
            h = plan.spec.host_width
            borders = jnp.concatenate([borders[:h], jnp.full((X.shape[1] - h, borders.shape[1]),
                                                             jnp.inf, borders.dtype)], axis=0)
        offset = init_model.offset
    else:
        offset = _validation.label_offset(y_given, y, loss_obj)
    if offset is not None:  # fit y - c, computed in float64; the model adds c back
        y, eval_set = _centred(y_given, eval_set, offset, n_table, eval_metric)
    if local is not None:  # the whole table's borders; this process's rows
        losses_lib.check_labels(loss_obj, y, "y")  # every process raises alike
        y_table, y = y, local.mine(y)
        if borders is None:
            borders = local.borders(X, _validation.as_weights(sample_weight, X.shape[0]),
                                    _validation.check_int(n_bins, "n_bins", 3, binning.MAX_BINS))
    data, borders = _validation.prepare_boosting(
        X, y, sample_weight=sample_weight, eval_set=eval_set, n_bins=config.n_bins, borders=borders,
        label_check=lambda v, name: losses_lib.check_labels(loss_obj, v, name), label_columns=True)
    missing = binning.has_missing(data.X_binned, config.n_bins)
    config = config._replace(missing=missing if local is None else local.any(missing))
    key = _validation.as_key(key)
    cat = None
    if plan is not None:  # the ctr columns' statistics, borders and bins (traced prior)
        data, borders, cat = _categorical_data(plan, data, borders, loss_obj, key, cat_prior,
                                               cat_prior_weight, config.n_bins, init_model)
        X_shape = (X.shape[0], cat.spec.n_features)
    else:
        X_shape = X.shape
    data = _with_margins(data, base_margin, eval_base_margin, eval_set, loss_obj.n_outputs)
    cause = (f"n_outputs K = {loss_obj.n_outputs} (a K-class loss takes K = max(y) + 1 from the "
             "labels' maximum)" if loss_obj.task == "multiclass" and n_outputs is None else None)
    k = loss_obj.n_outputs
    dense = loss_obj.hessian != "unit"
    need = _validation.boosting_bytes(X_shape[0], X_shape[1], _validation.memory_depth(config),
                                      config.n_bins, k,
                                      config.n_rounds, k if config.per_output_trees else 1, dense,
                                      devices) + _validation.family_bytes(config, X_shape[0],
                                                                          X_shape[1], k)
    (_validation.check_memory if local is None else local.everywhere(_validation.check_memory))(
        need, devices=devices, cause=cause,
        detail=f"estimated for {X_shape[0]} rows, {X_shape[1]} features, "
        f"{_validation.histogram_note(config)}, n_outputs={k}, "
        f"n_rounds={config.n_rounds} (histograms {_validation.histogram_shape(config)}"
        f"{', per-row K x K autodiff hessians' if dense and k > 1 else ''})"
        f"{_validation.sharded_memory_hint(devices)}")
    if local is not None:  # the whole table's baseline
        init_raw = _baseline(loss_obj, jnp.asarray(y_table), jnp.asarray(
            _validation.as_weights(local.sample_weight, local.n_total)), None)
    elif init_model is None:
        init_raw = _baseline(loss_obj, data.y, data.w, data.margin)
    else:
        init_raw = init_model.baseline
    concrete = not any(_validation.is_traced(v) for v in jax.tree_util.tree_leaves((hyper, init_raw, cat)))
    if concrete and not losses_lib.is_built_in(loss_obj):
        _validation.warn_if_no_gradient(loss_obj, data, init_raw)
    mesh = _validation.mesh_of(devices)
    data_local = data
    if local is not None:
        if not concrete or not _validation.host_rounds_possible():
            raise ValueError("rows='local' needs a concrete fit (not under jax.vmap or jax.jit).")
        data = local.global_data(data)
        config = config._replace(row_starts=local.row_starts)
    recorded = recorded_settings(config, hyper, key, init_rounds=0 if init_model is None else init_model.n_rounds,
                                 base_margin=base_margin is not None, categorical=cat)
    args = (data, key, hyper, loss_obj, init_raw)
    labels_and_names = dict(classes=None if classes is None else model_lib.Classes(classes),
                            feature_names=model_lib.named(names), categorical=cat)
    chunked = bool(verbose) or bool(callbacks) or checkpoint_dir is not None
    if concrete and _validation.host_rounds_possible():
        # A concrete fit runs as host-side calls of one compiled program (Ctrl-C, progress,
        # checkpoints); bitwise the same rounds however they are cut.
        ran = run_rounds(data, key, hyper, loss_obj, init_raw, config, start=init_model, mesh=mesh,
                         resume=lambda model: boosting.resume(
                             data, model.trees, init_raw, _continued_loss(model.loss, loss_obj), config),
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
            state = boosting.resume(data, init_model.trees, init_raw,
                                    _continued_loss(init_model.loss, loss_obj), config)
            out = _booster_fn(mesh)(*args, config=config, state=state, first_round=init_model.n_rounds)
        elif mesh is None:
            out = boosting.boost(*args, config=config)
        else:
            out = boosting.boost_sharded(mesh, *args, config=config)
        if stopping is not None and not _validation.is_traced(out.n_fitted):
            out = _first_rounds(out, int(out.n_fitted))  # a concrete fit keeps the rounds it fitted
    if concrete and not _validation.is_traced(out.train_loss):
        _validation.check_finite_fit(out.train_loss, loss_obj, data_local, init_raw)
    booster = model_lib.Booster(trees=tree_lib.with_borders(out.trees, borders), borders=borders,
                                baseline=init_raw, loss=out.final_loss, train_loss=out.train_loss,
                                valid_loss=out.valid_loss, best_round=out.best_round,
                                offset=None if offset is None else jnp.asarray(offset))
    booster = _validation.nan_outside_domains(booster, loss_obj, hyper)  # traced: NaN, warned
    booster = booster if start is None else model_lib.joined(start, booster)
    booster = booster._replace(**labels_and_names)  # checkpoints (model_of) carry them too
    return booster._replace(settings=recorded)  # as asked (not NaN-masked), this call's


def _categorical_data(plan, data: boosting.Data, borders, loss, key, prior, prior_weight,
                      n_bins: int, init_model=None):
    """``(data, borders, Categorical)``: the host-binned columns of ``plan``'s encoded rows
    followed by the ctr columns' ordered target statistics (:func:`jboost.categorical.training_features`,
    from the permutation of ``fold_in(key, PERMUTATION_STREAM)``; traced prior and weight),
    their borders and bins; the eval set's rows get the statistics of every training row.
    A continued fit (``init_model``) takes the model's prior, its weight and its borders, so the
    same rows and key give the statistics and bins its trees were fitted on."""
    spec = plan.spec
    init_cat = getattr(init_model, "categorical", None)
    if init_cat is not None:
        prior, prior_weight = init_cat.prior, init_cat.prior_weight
    if loss.batch:
        raise ValueError(f"categorical features need a loss of one label per row; {loss.name!r} is "
                         "an objective of the whole batch (Cox, ranking): encode the categorical "
                         "columns as numbers first.")
    t = categorical.targets(np.asarray(data.y), loss)
    spec = categorical.CategoricalSpec(spec.names, spec.kinds, spec.vocab, spec.vocab_type,
                                       spec.missing, t.shape[1], spec.one_hot_max_size)
    w = np.asarray(data.w, np.float32)
    if prior is None:  # the weighted mean of the statistic over the training rows
        prior = (t * w[:, None]).sum(0, dtype=np.float64) / max(float(w.sum(dtype=np.float64)), 1e-30)
    categorical.check_settings(spec.one_hot_max_size, prior, prior_weight)
    prior = jnp.broadcast_to(jnp.asarray(prior, jnp.float32), (t.shape[1],))
    prior_weight = jnp.asarray(prior_weight, jnp.float32)
    h, J = spec.host_width, len(spec.ctr_columns)
    if J == 0:  # one-hot columns only
        empty = jnp.zeros((0, t.shape[1]), jnp.float32)
        return data, borders, categorical.Categorical(spec, empty, jnp.zeros((0,), jnp.float32),
                                                      prior, prior_weight)
    codes = np.asarray(plan.X[:, h:], np.int32)
    perm_key = jax.random.fold_in(key, categorical.PERMUTATION_STREAM)
    values, ctr_borders, bins, sums, counts = categorical.training_features(
        jnp.asarray(codes), jnp.asarray(t), jnp.asarray(w), perm_key, prior, prior_weight,
        jnp.asarray(spec.offsets), n_table_rows=spec.n_table_rows, n_bins=n_bins)
    if init_cat is not None:  # the model's borders of the statistics
        if init_cat.spec.n_stats != spec.n_stats:
            raise ValueError(f"init_model's categorical columns have {init_cat.spec.n_stats} "
                             f"statistics each; this fit's labels give {spec.n_stats}.")
        ctr_borders = jnp.asarray(init_model.borders)[h:]
        bins = categorical.bin_values(values, ctr_borders)
    cat = categorical.Categorical(spec, sums, counts, prior, prior_weight)
    X_binned = jnp.concatenate([jnp.asarray(data.X_binned)[:h], bins], axis=0)
    X_valid = data.X_valid
    if X_valid.shape[1]:
        valid_values = categorical.ctr_values(cat, plan.X_valid[:, h:])
        X_valid = jnp.concatenate([jnp.asarray(X_valid)[:h],
                                   categorical.bin_values(valid_values, ctr_borders)], axis=0)
    else:
        X_valid = jnp.zeros((spec.n_features, 0), X_binned.dtype)
    borders = jnp.concatenate([jnp.asarray(borders)[:h], ctr_borders], axis=0)
    return data._replace(X_binned=X_binned, X_valid=X_valid), borders, cat


def recorded_settings(config: boosting.BoostConfig, hyper: boosting.Hyperparams, key, *,
                      init_rounds: int = 0, base_margin: bool = False,
                      categorical: Optional[categorical.Categorical] = None) -> model_lib.Settings:
    """The :class:`jboost.model.Settings` of a fit (``Booster.settings``, its docstring lists
    them): the traced hyperparameters as the fit used them (float32; tracers under ``jax.vmap``,
    so the batch's settings get the model axis), the static counts and flags as int32 / bool
    arrays, the key's raw uint32 data, and the samplers', criterion's, tree family's and
    early-stopping metric's names."""
    arrays = dict(hyper._asdict())
    names = {"colsample_by": _name(config.colsample_by), "row_sampler": _name(config.row_sampler),
             "split_criterion": str(config.split_criterion.name),
             "tree_family": config.tree_family.__name__}
    if config.max_leaves is not None:
        arrays["max_leaves"] = jnp.int32(config.max_leaves)
    if config.learning_rate_schedule is not None:  # the traced rate is then 1 (a multiplier)
        del arrays["learning_rate"]
        names["learning_rate_schedule"] = _name(config.learning_rate_schedule)
    key = jax.random.key_data(key) if jnp.issubdtype(key.dtype, jax.dtypes.prng_key) else key
    arrays.update(n_rounds=jnp.int32(config.n_rounds), init_rounds=jnp.int32(init_rounds),
                  depth=jnp.int32(config.depth), n_bins=jnp.int32(config.n_bins),
                  per_output_trees=jnp.bool_(config.per_output_trees),
                  base_margin=jnp.bool_(base_margin), key=jnp.asarray(key, jnp.uint32))
    if categorical is not None:  # the prior as used (traced), the one-hot threshold
        arrays.update(cat_prior=categorical.prior, cat_prior_weight=categorical.prior_weight,
                      one_hot_max_size=jnp.int32(categorical.spec.one_hot_max_size))
    es = config.early_stopping
    if es is not None:
        arrays.update(early_stopping_rounds=jnp.int32(es.rounds),
                      early_stopping_tolerance=jnp.float32(es.tolerance))
        names["eval_metric"] = metrics_lib.metric_name(es.metric)
    elif config.eval_metric is not None:  # shown and given to callbacks, not a stopping score
        names["eval_metric"] = metrics_lib.metric_name(config.eval_metric)
    return model_lib.Settings(arrays, names)


def _name(x) -> str:
    """A setting's name: the string itself, or a function's ``__name__``."""
    return x if isinstance(x, str) else str(getattr(x, "__name__", type(x).__name__))


def _centred(y, eval_set, offset, n: int, eval_metric):
    """The labels of ``y`` and of ``eval_set`` minus the label offset, computed in float64
    (:func:`jboost._validation.label_offset`)."""
    if callable(eval_metric):
        warnings.warn("eval_metric sees the labels and raw scores minus the label offset "
                      f"Booster.offset = {np.asarray(offset).tolist()} (a metric of the residual is unchanged; "
                      "one of the labels' scale, such as a relative error, is not).", UserWarning,
                      stacklevel=3)
    y = _validation.centred_labels(y, offset, n)
    if eval_set is not None and isinstance(eval_set, (tuple, list)) and len(eval_set) in (2, 3):
        Xv = _validation.as_matrix(eval_set[0], "eval_set X")
        yv = _validation.centred_labels(eval_set[1], offset, Xv.shape[0], "eval_set y", "eval_set X")
        eval_set = (Xv, yv) + tuple(eval_set[2:])
    return y, eval_set


def _first_rounds(out: boosting.BoostOutput, n: int) -> boosting.BoostOutput:
    return out._replace(trees=jax.tree_util.tree_map(lambda a: a[:n], out.trees),
                        train_loss=out.train_loss[:n], valid_loss=out.valid_loss[:n])


CHECKPOINT_FILE = "checkpoint.jbm"


def _fingerprint(args, config, n_total: int) -> str:
    """What a checkpoint must match to be continued: the data (bins, labels, weights, validation
    set, offsets), the key, the hyperparameters, the static settings and the loss."""
    data, key, hyper, loss, init_raw = args
    return _batching.fingerprint((data, key, hyper, loss.params, init_raw),
                                 (config._replace(n_rounds=n_total), loss.name, loss.n_outputs))


def _booster_fn(mesh):
    """:func:`boosting.boost`, or :func:`boosting.boost_sharded` over ``mesh``."""
    return boosting.boost if mesh is None else functools.partial(boosting.boost_sharded, mesh)


class RoundsOutput(NamedTuple):
    """What :func:`run_rounds` returns: ``out`` the :class:`jboost.boosting.BoostOutput` of the
    rounds this call fitted (``best_round``/``n_fitted``/``best_score`` set with early
    stopping), ``start`` the model they continue (``init_model``, or the checkpoint the call
    resumed from; ``None``: none), ``score`` their per-round validation score
    (:func:`jboost.boosting.eval_metric_of`; the validation loss without a metric)."""

    out: boosting.BoostOutput
    start: Optional[model_lib.Booster]
    score: jax.Array


# Host-side calls of a concrete fit: seconds a call should take once the pace is known (so Ctrl-C
# lands within about that), and the rounds of the first calls, which measure it.
CALL_SECONDS = 0.25
FIRST_CALLS = (1, 2, 4)


def run_rounds(data: boosting.Data, key, hyper: boosting.Hyperparams, loss: losses_lib.Loss,
               init_raw, config: boosting.BoostConfig, *, start: Optional[model_lib.Booster] = None,
               resume: Callable, model_of: Callable, verbose: int = 0, callbacks: Sequence[Callable] = (),
               checkpoint_dir=None, checkpoint_every: Optional[int] = None, mesh=None,
               processes=None) -> RoundsOutput:
    """The rounds of a concrete fit (:func:`jboost.fit`, every algorithm of
    :mod:`jboost.algorithms`): ``config.n_rounds`` rounds after ``start``'s as host-side calls of
    one compiled program, :func:`jboost.boosting.boost_rounds` (the state, the buffers of the
    rounds and the early-stopping record carried from call to call, so the rounds equal one
    call's bitwise, however they are cut).

    The program does not depend on ``config.n_rounds``: a call fits at most
    :data:`jboost.boosting.ROUNDS_PER_CALL` rounds into buffers of that size, copied to the host
    after it (fits that differ only in their number of rounds compile nothing new). Without
    ``verbose``, ``callbacks`` or ``checkpoint_dir`` the calls are timed: 1, 2 and 4 rounds,
    then about :data:`CALL_SECONDS` each at the pace measured; otherwise the progress, callbacks
    and checkpoint come after chunks of ``checkpoint_every`` (else ``verbose``, else a twentieth
    of the rounds) rounds, in calls that never span two chunks. The next
    call is dispatched before the last one is waited for (the device never idles), and the wait
    polls ``is_ready()``, so ``Ctrl-C`` lands within about a call: the rounds fitted so far are
    returned with a warning (a ``KeyboardInterrupt`` before the first call has finished is
    raised). After every call: a progress line every ``verbose`` rounds (round, training and
    validation losses, the eval metric, the best round, elapsed and remaining time,
    :func:`time_left`), the ``callbacks`` (a dict: ``round``, ``rounds``, per-round
    ``train_loss``, ``valid_loss``, ``elapsed``; with an eval metric its name ``metric`` and
    values ``valid_metric``; a callback returning ``True`` stops the fit), and a checkpoint
    (``checkpoint_dir/checkpoint.jbm``, a model file of ``model_of(out, start)``, rewritten; a
    rerun of the same fit continues from it: ``resume(model)`` is the
    :class:`jboost.boosting.BoostState` after a model's rounds).

    ``resume(model) -> BoostState`` and ``model_of(BoostOutput, start) -> Booster`` are the
    caller's: a fit's (:func:`jboost.boosting.resume`) or an algorithm's (its state in
    ``Booster.info``). ``mesh``: the training rows sharded over its first axis
    (:func:`jboost.boosting.boost_rounds_sharded`). ``processes``: a multi-process fit's
    :class:`jboost.distributed.LocalRows` (``rows="local"``): the calls are of fixed length on
    every process (the same programs everywhere), a callback's stop is any process's, progress
    lines are printed by process 0, and the output holds process-local arrays."""
    import os

    from jboost import io as io_lib

    base = 0 if start is None else start.n_rounds
    total = base + config.n_rounds
    fixed = bool(verbose) or bool(callbacks) or checkpoint_dir is not None or processes is not None
    chunk = int(checkpoint_every or verbose or max(1, -(-config.n_rounds // 20))) if fixed else None
    if processes is not None and not processes.is_first:
        verbose = 0  # chunks as process 0's; its progress lines only
    path = None if checkpoint_dir is None else os.path.join(os.fspath(checkpoint_dir), CHECKPOINT_FILE)
    fingerprint, best = None, None
    if path is not None:
        os.makedirs(os.fspath(checkpoint_dir), exist_ok=True)
        fingerprint = _fingerprint((data, key, hyper, loss, init_raw), config, total)
        if os.path.exists(path):
            header = io_lib.read_header(path)
            meta = header.get("metadata") or {}
            if meta.get("fingerprint") != fingerprint:
                raise ValueError(f"checkpoint_dir={checkpoint_dir!r} holds a checkpoint of another fit "
                                 "(different data, key or settings): use another directory or "
                                 f"delete {path}.")
            start = io_lib.load(path, loss=None if losses_lib.is_built_in(loss) else loss)
            if config.early_stopping is not None and meta.get("best_round") is not None:
                best = (np.float32(meta["best_score"]), np.int32(meta["best_round"]))
    done = 0 if start is None else start.n_rounds  # rounds of the whole fit so far
    first = done - base  # this call's first position in the buffers
    if first >= config.n_rounds:
        raise ValueError(f"nothing left to fit: the model already holds {done} of {total} rounds.")
    n_rows = data.y.shape[0]
    # One program for every number of rounds: calls of at most ROUNDS_PER_CALL rounds, each
    # writing its rounds from index 0 of buffers of that size (copied to the host after it).
    capacity = boosting.ROUNDS_PER_CALL
    call_config = config._replace(n_rounds=capacity)
    call, data_run, rows = _rounds_fn(mesh, data, call_config)
    carry = boosting.rounds_template(data_run, key, hyper, loss, init_raw, call_config)
    fresh = start is None
    if not fresh:
        state = resume(start)
        carry = carry._replace(state=state._replace(base=rows(state.base), pending=rows(state.pending)),
                               done=np.int32(first))
    if config.early_stopping is not None:
        best = best if best is not None else (np.float32(np.inf), np.int32(done - 1))
        carry = carry._replace(best=best, stopped=np.bool_(
            first > 0 and done - 1 - int(best[1]) >= config.early_stopping.rounds))
    if processes is not None:  # sharded as the calls' outputs: one compiled program
        carry = processes.place_carry(carry)
    metric = boosting.eval_metric_of(config)
    metric_name = None if metric is None else metrics_lib.metric_name(metric)
    t0 = _clock()  # the progress lines' clock; the pace of the calls is timed by perf_counter
    last_t, chunk_seconds, chunk_rounds = t0, [], []
    queue, dispatched, pos = [], first, first  # calls in flight; positions dispatched, fitted
    latest, pace, last_done = None, None, None  # the last finished call; seconds per round
    fitted = _HostRounds(first)  # the rounds fitted so far, on the host
    reported = first  # fixed calls: the position up to which progress and callbacks have run

    def size(i, at):
        if fixed:  # up to the end of the chunk ``at`` is in (a call never spans two chunks)
            return min(capacity, chunk - (at - first) % chunk)
        if pace is None:
            return min(capacity, FIRST_CALLS[min(i, len(FIRST_CALLS) - 1)])
        return min(capacity, max(1, int(CALL_SECONDS / max(pace, 1e-9))))

    n_calls, stop = 0, False
    try:
        while True:
            while len(queue) < 2 and dispatched < config.n_rounds and not stop:
                end = min(config.n_rounds, dispatched + size(n_calls, dispatched))
                prev = queue[-1][0] if queue else (latest if latest is not None else carry)
                out = call(data_run, key, hyper, init_raw, prev, np.int32(base), np.int32(end),
                           np.bool_(fresh and n_calls == 0))
                queue.append((out, time.perf_counter(), end))
                dispatched, n_calls = end, n_calls + 1
            if not queue:
                break
            out, sent, asked_end = queue.pop(0)
            _wait(out.done)
            finished = time.perf_counter()
            reached = int(out.done)
            if reached != asked_end and not bool(out.stopped):  # never a fit silently cut short
                raise RuntimeError(f"internal error: a call of the rounds ended at position "
                                   f"{reached}, not {asked_end}; please report it.")
            if last_done is not None and reached > pos:  # the first call's time includes compiling
                pace = (finished - max(sent, last_done)) / (reached - pos)
            fitted.add(out.rounds if processes is None else processes.localize(out.rounds),
                       reached - pos)
            # The commit: one statement of plain stores (no call, so no Ctrl-C inside it). Until
            # it runs, ``pos`` and ``latest`` are the previous call's; a Ctrl-C before it cuts
            # ``fitted`` back to ``pos`` below, so the rounds, the state and the warning agree.
            pos, latest, last_done = reached, out, finished
            stop = bool(out.stopped) or pos >= config.n_rounds
            chunk_done = fixed and pos > reported and (stop or (pos - first) % chunk == 0)
            if chunk_done:
                now = _clock()
                chunk_seconds.append(now - last_t)
                chunk_rounds.append(pos - reported)
                last_t = now
                asked = _after_call(fitted, out.best, reported, pos, base, total, t0, now, stop,
                                    chunk_seconds, chunk_rounds, metric_name, verbose, callbacks)
                reported = pos
                stop = (asked if processes is None else processes.any(asked)) or stop
                if path is not None:
                    meta = {"fingerprint": fingerprint}
                    if config.early_stopping is not None:
                        meta.update(best_round=int(out.best[1]), best_score=float(out.best[0]))
                    io_lib.save(model_of(_rounds_output(out, fitted, config, n_rows), start), path,
                                metadata=meta)
            if stop:
                break
    except KeyboardInterrupt:
        if latest is None or pos == first:
            raise
        fitted.cut(pos)  # rounds added by a call whose commit the Ctrl-C stopped
        warnings.warn(f"interrupted after round {base + pos} of {total}: the model holds the rounds "
                      "fitted so far.", UserWarning, stacklevel=3)
    if processes is not None:  # replicated results as this process's arrays
        latest = processes.localize(latest)
    return RoundsOutput(_rounds_output(latest, fitted, config, n_rows), start,
                        jax.device_put(fitted.rounds().score))


class _HostRounds:
    """The rounds of a fit's calls (:class:`jboost.boosting.Rounds` buffers, each call's first
    ``count`` indices) joined on the host: NumPy copies, so that neither the joining nor a
    slice compiles a program for the fit's number of rounds. ``first``: the position of the
    first round added."""

    def __init__(self, first: int):
        self.first, self.parts, self._joined = first, [], None

    def add(self, rounds: boosting.Rounds, count: int) -> None:
        if count > 0:
            self.parts.append(jax.tree_util.tree_map(lambda b: np.asarray(b)[:count], rounds))
            self._joined = None

    def cut(self, end: int) -> None:
        """Keep positions ``first..end - 1`` only."""
        joined = self.rounds(None, end)
        self.parts, self._joined = [joined], joined

    def rounds(self, lo: Optional[int] = None, hi: Optional[int] = None) -> boosting.Rounds:
        """Positions ``lo..hi - 1`` of the fit (default: all added), joined."""
        if self._joined is None:
            self._joined = jax.tree_util.tree_map(lambda *p: np.concatenate(p, axis=0), *self.parts)
            self.parts = [self._joined]
        lo = 0 if lo is None else lo - self.first
        hi = None if hi is None else hi - self.first
        return jax.tree_util.tree_map(lambda a: a[lo:hi], self._joined)


def _wait(x, longest: float = 0.005):
    """Block until ``x`` is computed, polling ``is_ready()`` with short sleeps (so a ``Ctrl-C``
    lands at once; ``block_until_ready`` would hold it until the computation ends)."""
    pause = 1e-4
    while not x.is_ready():
        time.sleep(pause)
        pause = min(2 * pause, longest)


def _rounds_output(carry: boosting.RoundsCarry, fitted: _HostRounds, config,
                   n_rows: int) -> boosting.BoostOutput:
    """The :class:`jboost.boosting.BoostOutput` of the rounds ``fitted`` after the last call
    ``carry`` (its state cut to the ``n_rows`` training rows: a sharded fit pads them)."""
    r = jax.tree_util.tree_map(jax.device_put, fitted.rounds())  # (jnp.asarray would compile)
    state = carry.state
    if state.base.shape[0] != n_rows:
        state = state._replace(base=state.base[:n_rows], pending=state.pending[:n_rows])
    out = boosting.BoostOutput(r.trees, r.train_loss, r.valid_loss, state.loss, dict(r.info),
                               state.extra, state)
    if config.early_stopping is not None:
        out = out._replace(best_round=carry.best[1], n_fitted=r.train_loss.shape[0],
                           best_score=carry.best[0])
    return out


def _after_call(fitted: _HostRounds, best, a, b, base, total, t0, now, stopped, chunk_seconds,
                chunk_rounds, metric_name, verbose, callbacks) -> bool:
    """A progress line and the callbacks after the calls that fitted positions ``a..b - 1``
    (``best``: the early-stopping record after them); whether a callback asked to stop."""
    r = fitted.rounds(a, b)
    train, valid = r.train_loss, r.valid_loss
    scores = None if metric_name is None else r.score
    done, elapsed = base + b, now - t0
    best = None if isinstance(best, tuple) and not best else best
    if verbose:
        left = 0.0 if stopped else time_left(chunk_seconds, chunk_rounds, total - done)
        best_txt = "" if best is None else f"  best round {int(best[1])}"
        print(f"[jboost] round {done}/{total}  train loss {train[-1]:.6g}"
              + ("" if np.isnan(valid[-1]) else f"  valid loss {valid[-1]:.6g}")
              + ("" if scores is None else f"  valid {metric_name} {scores[-1]:.6g}") + best_txt
              + f"  {elapsed:.1f}s elapsed, ~{left:.1f}s left", flush=True)
    stop = False
    for callback in callbacks or ():
        info = {"round": done, "rounds": list(range(base + a, done)), "train_loss": train,
                "valid_loss": valid, "elapsed": elapsed}
        if scores is not None:
            info.update(metric=metric_name, valid_metric=scores)
        if callback(info):
            stop = True
    return stop


def _rounds_fn(mesh, data: boosting.Data, config):
    """``(call, data, rows)``: :func:`boosting.boost_rounds` with ``config`` and its data, or its
    sharded form over ``mesh`` with the training rows padded once to a multiple of the devices
    (``rows`` pads a per-row array of the state likewise)."""
    if mesh is None:
        return functools.partial(boosting.boost_rounds, config=config), data, lambda a: a
    padded, rows = boosting.pad_rows(data, mesh.shape[mesh.axis_names[0]])
    return functools.partial(boosting.boost_rounds_sharded, mesh, config=config), padded, rows


_clock = time.perf_counter  # the progress lines' clock (a test replaces it)


def time_left(chunk_seconds: Sequence[float], chunk_rounds: Sequence[int], rounds_left: int) -> float:
    """Seconds the ``rounds_left`` remaining rounds should take, at the pace of the chunks run
    so far (their durations ``chunk_seconds``, rounds ``chunk_rounds``): the first chunk's time
    includes compiling the program (seconds, where a chunk then takes milliseconds), so once a
    second chunk has run the pace is that of the chunks after the first; after one chunk, the
    first's (an overestimate, refined from the next line on)."""
    seconds, rounds = list(chunk_seconds), list(chunk_rounds)
    if len(seconds) > 1:
        seconds, rounds = seconds[1:], rounds[1:]
    return float(sum(seconds)) / max(int(sum(rounds)), 1) * rounds_left


def _fit_model(out: boosting.BoostOutput, start, borders, init_raw, offset, settings=None):
    """The :class:`Booster` of ``start``'s rounds (``None``: none) and ``out``'s, with the fit's
    ``settings`` (a checkpoint of :func:`run_rounds`)."""
    model = model_lib.Booster(trees=tree_lib.with_borders(out.trees, borders), borders=borders,
                              baseline=init_raw, loss=out.final_loss, train_loss=out.train_loss,
                              valid_loss=out.valid_loss, best_round=out.best_round,
                              offset=None if offset is None else jnp.asarray(offset))
    model = model if start is None else model_lib.joined(start, model)
    return model if settings is None else model._replace(settings=settings)


def _continued_loss(model_loss, loss):
    """The loss a continued fit starts from: the model's (its last-round parameters), with a batch
    objective's static ``max_group`` taken from this fit's labels (its query groups)."""
    return model_loss.replace(max_group=loss.max_group) if loss.batch else model_loss


def _check_init_model(model, X, loss, borders, config):
    """Check ``init_model`` against the new fit (``X``: its rows, or the number of features
    its trees split on); returns the borders to bin with (the model's)."""
    if isinstance(model, model_lib.Booster) and model.info:
        raise TypeError("init_model must be a Booster from jboost.fit (gradient boosting); this "
                        "one has an algorithm's state: continue it with its algorithm "
                        "(jboost.algorithms.<name>(..., init_model=model)).")
    borders = _validation.check_init_model(model, model_lib.Booster,
                                           X if isinstance(X, int) else X.shape[1], borders,
                                           n_bins=config.n_bins, depth=config.depth,
                                           config=config)
    _validation.check_init_loss(model, loss)
    return borders


def settings(*, n_rounds, depth, n_bins, learning_rate, l2, min_split_gain, min_child_weight,
             subsample, colsample, colsample_by="tree", per_output_trees=False,
             row_sampler="bernoulli", algorithm: Optional[boosting.Algorithm] = None,
             split_criterion: splits.SplitCriterion = splits.NEWTON,
             tree_family: type = tree_lib.ObliviousTrees, max_leaves: Optional[int] = None):
    """Check the boosting settings; returns ``(BoostConfig (static), Hyperparams (traced))``.

    The one place every boosting entry point (``fit``, the algorithms, sweeps, bagged boosters,
    stacking, ECOC) turns its keyword arguments into a configuration. ``learning_rate`` may be a
    callable ``round -> rate`` (e.g. an optax schedule): it is then the static
    ``learning_rate_schedule`` and the traced rate is 1. Loss-guided trees
    (``tree_family="lossguide"``) take ``max_leaves`` (default
    :data:`jboost.lossguide.DEFAULT_MAX_LEAVES`) and ``depth`` as their depth bound, up to
    :data:`jboost._validation.MAX_DEPTHWISE_DEPTH`; ``depth=None`` there is no bound but
    ``max_leaves`` itself (``max_leaves - 1``, at most that maximum).
    """
    n_rounds = _validation.check_int(n_rounds, "n_rounds", 1, _validation.MAX_ROUNDS)
    families = _validation.TREE_FAMILIES
    if isinstance(tree_family, str):  # the built-in families by name
        if tree_family not in families:
            raise ValueError(f"tree_family must be \"oblivious\", \"depthwise\", \"lossguide\" or "
                             f"a class implementing jboost.tree.TreeFamily; got {tree_family!r}.")
        tree_family = families[tree_family]
    if tree_family is families["lossguide"]:
        max_leaves = _validation.check_int(
            lossguide.DEFAULT_MAX_LEAVES if max_leaves is None else max_leaves, "max_leaves", 2,
            lossguide.MAX_LEAVES)
        if depth is None:  # no bound but the leaves: a chain of max_leaves - 1 splits
            depth = min(max_leaves - 1, _validation.MAX_DEPTHWISE_DEPTH)
        depth = _validation.check_int(depth, "depth", 1, _validation.MAX_DEPTHWISE_DEPTH)
    else:
        if max_leaves is not None:
            raise ValueError(f"max_leaves={max_leaves!r} bounds loss-guided trees only: pass "
                             "tree_family=\"lossguide\" with it, or leave max_leaves out (the "
                             "other families grow every level to depth).")
        if depth is None:
            raise ValueError("depth=None (no depth bound) is for loss-guided trees "
                             "(tree_family=\"lossguide\", bounded by max_leaves); pass an integer "
                             f"depth in [1, {_validation.MAX_DEPTH}].")
        depth = _validation.check_int(depth, "depth", 1, _validation.MAX_DEPTH)
    n_bins = _validation.check_int(n_bins, "n_bins", 3, binning.MAX_BINS)
    schedule = None
    if callable(learning_rate):
        schedule, learning_rate = learning_rate, 1.0
    values = dict(learning_rate=learning_rate, l2=l2, min_split_gain=min_split_gain,
                  min_child_weight=min_child_weight, subsample=subsample, colsample=colsample)
    for name, v in values.items():
        _validation.check_hyperparameter(name, v)
    if not callable(colsample_by):
        _validation.check_choice(colsample_by, "colsample_by", tuple(samplers.COLUMN_SAMPLERS))
    if not callable(row_sampler):
        _validation.check_choice(row_sampler, "row_sampler", tuple(samplers.ROW_SAMPLERS))
    if not isinstance(split_criterion, splits.SplitCriterion):
        raise TypeError(f"split_criterion must be a jboost.splits.SplitCriterion(score, value), got "
                        f"{type(split_criterion).__name__}: write score(G, H, l2) and value(G, H, l2) "
                        "and pass SplitCriterion(score, value).")
    missing = [m for m in ("grow", "leaf_index_raw", "leaf_index_binned", "with_borders")
               if not isinstance(tree_family, type) or not callable(getattr(tree_family, m, None))]
    if missing:
        raise TypeError(f"tree_family must be \"oblivious\", \"depthwise\", \"lossguide\" or a "
                        f"class implementing jboost.tree.TreeFamily; {tree_family!r} lacks "
                        f"{', '.join(missing)}.")
    config = boosting.BoostConfig(n_rounds=n_rounds, depth=depth, n_bins=n_bins,
                                  per_output_trees=bool(per_output_trees), colsample_by=colsample_by,
                                  learning_rate_schedule=schedule, row_sampler=row_sampler,
                                  algorithm=algorithm or boosting.NEWTON,
                                  split_criterion=split_criterion, tree_family=tree_family,
                                  max_leaves=max_leaves)
    return config, boosting.Hyperparams.create(**values)


@_compile.jit
def _baseline(loss, y, w, margin=None):
    return losses_lib.baseline(loss, y, w, margin)


def _with_margins(data: boosting.Data, base_margin, eval_base_margin, eval_set, k: int):
    """``data`` with the checked per-row offsets of the training and validation rows."""
    if base_margin is None and eval_base_margin is None:
        return data
    if base_margin is None:
        raise ValueError("eval_base_margin is given without base_margin: pass the training rows' "
                         "offsets too (or neither).")
    if eval_set is None and eval_base_margin is not None:
        raise ValueError("eval_base_margin is given without eval_set.")
    if eval_set is not None and eval_base_margin is None:
        raise ValueError("base_margin is given with an eval_set: pass eval_base_margin (the "
                         "offsets of eval_set's rows), or the validation scores would leave "
                         "them out.")
    n, m = data.y.shape[0], data.y_valid.shape[0]
    margin = _validation.as_margin(base_margin, n, k)
    margin_valid = (None if eval_set is None else
                    _validation.as_margin(eval_base_margin, m, k, "eval_base_margin", "eval_set X"))
    return data._replace(margin=jnp.asarray(margin),
                         margin_valid=None if margin_valid is None else jnp.asarray(margin_valid))


def _local_rows(X, y, loss, sample_weight, eval_set, devices, cat_features, settings, **refused):
    """The checks and gathers of a multi-process fit (``rows="local"``,
    :func:`jboost.distributed.gather`); refuses what it does not support.

    The refusals come after the settings (what is refused included) are compared across processes,
    so a process that passes an argument the others do not makes every process raise instead of
    leaving the others waiting in a collective."""
    has_cats = cat_features is not None and not (np.ndim(cat_features) == 1 and len(cat_features) == 0)
    local = distributed.gather(X, y, sample_weight, eval_set, devices, dict(
        settings, cat_features=has_cats, **{k: v is not None for k, v in refused.items()}))
    # The settings are the same on every process from here: every process raises alike.
    given = [k for k, v in refused.items() if v is not None]
    if given:
        raise ValueError(f"rows='local' does not support {', '.join(k + '=' for k in given)} yet: "
                         "fit with rows='global' (every process passing the whole table) for them.")
    if has_cats:
        raise ValueError("rows='local' does not support cat_features yet: encode the categorical "
                         "columns as numbers (the same encoding on every process).")
    if isinstance(loss, losses_lib.Loss) and loss.batch:
        raise ValueError(f"loss: rows='local' does not support batch objectives ({loss.name!r}).")
    return local
