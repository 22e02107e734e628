"""The sweep entry point: every configuration of a grid cross-validated on every fold of every
seed (ESL 7.10, repeated K-fold CV), the models fitted as one vmapped program per
``(depth, n_bins)``; the checked inputs, folds, grid, groups and the :class:`SweepResult`.

See docs/sweeps.md."""

from __future__ import annotations

import itertools
import numbers
import time
import types
import warnings
from typing import Any, Callable, Mapping, NamedTuple, Optional, Sequence, Tuple, Union

import jax
import jax.numpy as jnp
import numpy as np

from jboost import checks, devices as devices_lib
from jboost.data import categorical, categorical_stats, folds as cv, labels, tabular
from jboost.engine import (boosting as boosting_lib, checkpoints as checkpoints_lib, distributed,
                           state)
from jboost.fitting import prepare, settings as settings_lib, standardise
from jboost.losses import (baselines as baselines_lib, checks as checks_lib, loss as loss_lib,
                           metrics)
from jboost.sweep import (categorical as sweep_categorical, chunks, divergence, grid as grid_lib,
                          groups,
                          metrics as metrics_lib, program as sweep_program, result as result_lib)
from jboost.sweep.grid import HYPERPARAMETERS
from jboost.sweep.result import SweepResult
from jboost.trees import family as family_lib

#: The message of the ``ValueError`` :func:`sweep` raises for ``init_model=`` (and what to do).
NO_WARM_START = (
    "sweep does not continue a model (init_model=): every configuration x fold x seed is fitted "
    "from its first round in one vmapped program. Sweep the longer n_rounds instead (a "
    "configuration with fewer rounds is the prefix of the same fit: n_rounds=[100, 200] costs one "
    "fit of 200 rounds), or continue the chosen model with jboost.fit(X, y, ..., "
    "init_model=result.refit(X, y)).")


@settings_lib.takes_settings(devices="all", verbose=False)
def sweep(X, y, loss: Union[str, loss_lib.Loss, Callable] = "squared_error", *,
          grid: Union[Mapping[str, Sequence[float]], Sequence[Mapping[str, float]], None] = None,
          folds: Union[int, Sequence[int], np.ndarray] = 5, seeds: int = 3, n_rounds, depth, n_bins,
          metric: Union[None, str, Callable] = None, greater_is_better: bool = False,
          stratified: Optional[bool] = None, repeat_folds: bool = True,
          chunk_size: Optional[int] = None, memory_budget: Optional[int] = None, devices, key,
          sample_weight, learning_rate, l2, min_split_gain, min_child_weight, subsample, colsample,
          colsample_by, per_output_trees, n_outputs, task, keep_trees: bool = False, verbose,
          early_stopping_rounds, early_stopping_tolerance, checkpoint_dir, init_model, callbacks,
          cat_features, one_hot_max_size, cat_prior, cat_prior_weight, tree_family, max_leaves,
          rows, monotone_constraints, interaction_constraints) -> SweepResult:
    """Cross-validate every configuration of a grid, all models vmapped in one compiled program.

    See docs/sweeps.md for the design, early stopping, checkpoints, categorical columns and
    multi-process sweeps.

    Args:
      X, y, loss: as :func:`jboost.fit`.
      grid: ``{name: values}`` (cartesian product) or a list of ``{name: value}`` dicts. Names:
        ``HYPERPARAMETERS``, a parameter of ``loss`` (``"loss.<p>"`` when a name is both),
        ``cat_prior`` or ``cat_prior_weight``.
      folds: the number of folds K (>= 2), or an ``(n,)`` int array of fold ids 0..K-1.
      seeds: the number of seeds S; seed ``s`` fits with key ``fold_in(key, s)``.
      n_rounds, depth, n_bins: an int or a list of ints (static; the sweep takes their product
        with the grid). One compilation per ``(depth, n_bins)``; fewer rounds are prefixes.
      metric: ``None`` (the held-out fold's mean loss), a name in ``METRICS`` or a function
        ``metric(y, raw, w) -> scalar`` (``w``: zero outside the held-out fold).
      greater_is_better: the direction of a custom metric.
      stratified: stratify the folds by class; default: True for classification losses.
      repeat_folds: a new partition per seed (True) or one partition for all seeds.
      chunk_size: models per device in one compiled call; default from :func:`model_bytes`
        against ``memory_budget`` (:func:`auto_chunk_size`).
      memory_budget: bytes per device for one chunk (default: 1 GiB on CPU, half the device
        memory on accelerators).
      devices: the devices the models are sharded over: ``"all"`` (default), ``None`` (one), a
        list of devices or a ``jax.sharding.Mesh``.
      keep_trees: also keep every fitted model (:meth:`SweepResult.models`).
      verbose: print progress per chunk.
      early_stopping_rounds: stop each fit when its held-out fold's score (``metric``) has not
        improved for this many rounds; ``None``: every fit runs its ``n_rounds``.
      checkpoint_dir: save each chunk as it finishes; a rerun of the same sweep resumes bitwise.
      callbacks: functions called after each chunk of models with a dict; ``True`` stops the
        sweep (the models not fitted get NaN curves).
      init_model: refused (:data:`NO_WARM_START`).
      cat_prior, cat_prior_weight: as :func:`jboost.fit`, or ``grid`` keys (traced).
      rows: ``"global"`` or ``"local"`` (multi-process: each process passes its own rows, and
        their fold ids when ``folds`` is an array).

    Returns:
      A :class:`SweepResult`; after a ``Ctrl-C`` (which lands within about a second: the rounds
      run as host-side calls), of the rounds fitted, with a warning (docs/sweeps.md, "Stopping a
      sweep").

    Raises:
      KeyboardInterrupt: a ``Ctrl-C`` before any configuration had a round on all its fits.
    """
    if init_model is not None:
        raise ValueError(NO_WARM_START)
    a = types.SimpleNamespace(**locals(), t_start=time.perf_counter())  # the pipeline's inputs
    s = _prepare_sweep(a)
    fits, borders_of, stats = _run_sweep(s, a)
    return _finish_sweep(s, a, fits, borders_of, stats)


# The settings every process of a rows="local" sweep compares (before any collective).
_LOCAL_SETTINGS = (
    "loss", "grid", "seeds", "n_rounds", "depth", "n_bins", "metric", "greater_is_better",
    "stratified", "repeat_folds", "chunk_size", "memory_budget", "key", "learning_rate", "l2",
    "min_split_gain", "min_child_weight", "subsample", "colsample", "colsample_by",
    "per_output_trees", "n_outputs", "task", "keep_trees", "verbose", "early_stopping_rounds",
    "early_stopping_tolerance", "monotone_constraints", "interaction_constraints")


class _Sweep(NamedTuple):
    """A sweep's inputs after the host-side checks (:func:`_prepare_sweep`)."""

    X: Any
    y: Any
    w: Any
    loss: loss_lib.Loss
    names: Any
    classes: Any
    local: Any                  # rows="local": the distributed.LocalRows, else None
    grid: Any                   # the sweep_grid.Grid of configurations
    cats: Any                   # categorical columns (sweep_categorical), or None
    cat_shared: Any
    greater: bool
    stopping: Any
    seeds: int
    chunk_size: Optional[int]
    memory_budget: Any
    devices: tuple
    fold_table: np.ndarray
    n_folds: int
    seed_keys: np.ndarray
    fixed_hyper: dict
    family: dict
    layout: grid_lib.Layout
    checkpoints: Any
    callbacks: Any
    verbose: Any


def _prepare_sweep(a) -> _Sweep:
    """The first step of :func:`sweep`: read and check the table and labels (with
    ``rows="local"``, the processes' settings compared and their rows gathered), the grid, the
    metric, early stopping, the folds and seeds' keys, and the checkpoints' fingerprint."""
    X, names, _ = tabular.tabular_input(a.X)
    local, y, sample_weight, devices, callbacks, verbose = (
        None, a.y, a.sample_weight, a.devices, a.callbacks, a.verbose)
    if settings_lib.check_setting("rows", a.rows) == "local":
        local, folds = _local_rows(X, y, a.loss, sample_weight, a.folds, devices, dict(
            {k: getattr(a, k) for k in _LOCAL_SETTINGS}, n_callbacks=len(callbacks or ()),
            checkpoint_dir=a.checkpoint_dir is not None, cat_features=a.cat_features,
            one_hot_max_size=a.one_hot_max_size, cat_prior=a.cat_prior,
            cat_prior_weight=a.cat_prior_weight, names=names))
        y, sample_weight, devices = local.y, local.sample_weight, local.mesh
        callbacks = _any_process(callbacks)
        verbose = verbose and local.is_first
    else:
        folds = a.folds
    n_table = X.shape[0] if local is None else local.n_total  # the rows of the whole table
    plan = categorical.categorical_plan(X, a.cat_features, a.one_hot_max_size)
    if plan is not None:  # the encoded rows: numeric, one-hot indicators, ctr codes
        X = plan.X
    # Class labels as users have them (strings, {-1, 1}, ...) mapped to 0..K-1, as jboost.fit.
    y, classes, _ = prepare.mapped_labels(y, None, a.loss, a.n_outputs, a.task, None,
                                          n_rows=n_table)
    X, y, w, loss_obj = _check_data(X, y, sample_weight, a.loss, a.n_outputs, a.task, n_table)
    fixed_hyper = {h: getattr(a, h) for h in HYPERPARAMETERS}
    cats = None if plan is None else sweep_categorical.categorical_columns(
        plan, X, y, loss_obj, a.cat_prior, a.cat_prior_weight)
    family = dict(tree_family=a.tree_family, max_leaves=a.max_leaves)
    grid_ = _make_grid(a.grid, loss_obj, a.n_rounds, a.depth, a.n_bins, fixed_hyper,
                       a.colsample_by, a.per_output_trees, cats, family)
    probe = _config(grid_.max_rounds, grid_.depths[0], grid_.bins[0], fixed_hyper, a.colsample_by,
                    a.per_output_trees, family=family)
    family.update({k: v for k, v in settings_lib.constraint_settings(
        a.monotone_constraints, a.interaction_constraints, probe, n_features=X.shape[1],
        names=names, spec=None if plan is None else plan.spec).items()
        if v is not None})  # (a part of the checkpoints' fingerprint)
    greater = metrics.check_metric(a.metric, loss_obj, a.greater_is_better)
    # Its score is the held-out fold's loss or metric, which the program puts in valid_loss.
    stopping = settings_lib.check_early_stopping(a.early_stopping_rounds,
                                                 a.early_stopping_tolerance, None, loss_obj,
                                                 has_validation=True)
    seeds = checks.check_int(a.seeds, "seeds", 1, 10**6)
    chunk_size = (None if a.chunk_size is None
                  else checks.check_int(a.chunk_size, "chunk_size", 1, 10**7))
    memory_budget = devices_lib.check_memory_budget(a.memory_budget)
    devices = (devices_lib.devices_of(devices) if local is None
               else tuple(local.mesh.devices.flat))
    base_key = checks.as_raw_key(a.key)
    fold_table, n_folds = _folds(y, w, folds, seeds, base_key, a.stratified, a.repeat_folds,
                                 loss_obj)
    seed_keys = np.stack([np.asarray(jax.random.fold_in(jnp.asarray(base_key), s))
                          for s in range(seeds)])
    cat_shared = None if cats is None else cats.shared(w, fold_table, n_folds)
    checkpoints = None
    if a.checkpoint_dir is not None:
        checkpoints = checkpoints_lib.ChunkCheckpoints(
            a.checkpoint_dir, groups.CHECKPOINT_KIND, groups.checkpoint_fingerprint(
                X, y, w, loss_obj, grid_, fold_table, seed_keys, a.metric, greater, stopping,
                a.keep_trees, fixed_hyper, a.colsample_by, a.per_output_trees, devices,
                None if cats is None else cats.spec, family),
            differs="data, folds, seeds, key, grid, settings, loss, metric or early stopping")
    return _Sweep(X, y, w, loss_obj, names, classes, local, grid_, cats, cat_shared, greater,
                  stopping, seeds, chunk_size, memory_budget, devices, fold_table, n_folds,
                  seed_keys, fixed_hyper, family, grid_lib.Layout.of(grid_.n_points, n_folds,
                                                                     seeds),
                  checkpoints, callbacks, verbose)


def _run_sweep(s: _Sweep, a):
    """The engine step of :func:`sweep`: the :func:`jboost.sweep.groups.run_group` of every
    ``(depth, n_bins)`` group (one binned copy of the data per ``n_bins``); returns ``(fits,
    borders per n_bins, stats)``. A callback that stopped the sweep leaves NaN curves (a
    warning says how many models were fitted)."""
    devices, local, y, w = s.devices, s.local, s.y, s.w

    def put(v):  # one device: commit the shared inputs to it; several: shard_map places them
        return jax.device_put(v, devices[0]) if len(devices) == 1 else jnp.asarray(v)

    fits, borders_of, stats, stop = {}, {}, groups.GroupStats(), []
    try:
        for b in s.grid.bins:
            if chunks.INTERRUPTED in stop:
                break
            if local is None:
                data = prepare.prepare(s.X, y, sample_weight=w, n_bins=b)  # one copy per n_bins
                missing = data.missing
            else:  # the whole table's borders (as jboost.fit's); this process's rows binned
                data = prepare.prepare(s.X, local.mine(y), sample_weight=local.mine(w), n_bins=b,
                                       borders=local.borders(s.X, local.mine(w), b))
                missing = local.any(data.missing)
            if b == s.grid.bins[0]:  # fit's warning for a custom loss with no gradient there
                checks_lib.warn_if_no_gradient(s.loss, state.Data(*data[:6]),
                                               baselines_lib.baseline(s.loss, data.y, data.w))
            borders_of[b] = np.asarray(data.borders)
            if local is None:
                shared = sweep_program.Shared(
                    put(data.X_binned), put(y), put(w), put(s.fold_table), put(s.seed_keys),
                    None if s.cat_shared is None else jax.tree_util.tree_map(put, s.cat_shared))
            else:
                shared = _local_shared(local, data, y, w, s.fold_table, s.seed_keys)
            for d in s.grid.depths:
                if chunks.INTERRUPTED in stop:
                    break
                config = _config(s.grid.max_rounds, d, b, s.fixed_hyper, a.colsample_by,
                                 a.per_output_trees, missing=missing,
                                 family=s.family)._replace(early_stopping=s.stopping)
                if local is not None:
                    config = config._replace(row_starts=local.row_starts)
                fits[(d, b)] = groups.run_group(
                    config, shared, s.grid, s.loss, s.layout, a.metric, a.keep_trees, devices,
                    s.chunk_size, s.memory_budget, stats, a.t_start if s.verbose else None,
                    s.greater, s.checkpoints, groups.group_callbacks(s.callbacks, (d, b)), stop,
                    None if s.cats is None else s.cats.layout, local)
    except KeyboardInterrupt:  # between groups or chunks: the groups fitted so far are kept
        stop.append(chunks.INTERRUPTED)
    if chunks.INTERRUPTED in stop:
        fits = _interrupted(s, fits)
    elif stop:
        fitted = sum(s.layout.n_models if f.n_models_fitted is None else f.n_models_fitted
                     for f in fits.values())
        warnings.warn(f"a callback stopped the sweep after {fitted} of "
                      f"{s.layout.n_models * len(fits)} models: the others have NaN curves and are "
                      "not ranked.", UserWarning, stacklevel=3)
    return fits, borders_of, stats


def _interrupted(s: _Sweep, fits):
    """The groups of a sweep a ``Ctrl-C`` stopped, those it did not reach with no rounds."""
    n_models, r_max = s.layout.n_models, s.grid.max_rounds
    return {(d, b): fits.get((d, b)) or chunks.not_fitted(n_models, r_max, s.stopping is not None)
            for b in s.grid.bins for d in s.grid.depths}


def _warn_interrupted(s: _Sweep, rows, done) -> None:
    """The warning of an interrupted sweep saying what its result holds (``done``: the rounds
    each row ran), or ``KeyboardInterrupt`` when no configuration has a round fitted on every
    fold and seed (nothing to rank)."""
    configs = s.grid.configs
    full = np.array([configs[c]["n_rounds"] for c in rows.config])
    saved = ("; the chunks of models finished are saved (checkpoint_dir): rerunning the same call "
             "fits only the rest" if s.checkpoints is not None else "")
    per_config = done.reshape(len(configs), -1).min(axis=1)
    if not np.any(per_config > 0):
        raise KeyboardInterrupt(f"sweep interrupted (Ctrl-C) before any configuration had a round "
                                f"fitted on all its folds and seeds{saved}.")
    ranked = int(np.sum(per_config > 0))
    warnings.warn(f"sweep interrupted (Ctrl-C): of its {done.size} fits (configuration x fold x "
                  f"seed) the result holds {int(np.sum(done >= full))} with all their rounds, "
                  f"{int(np.sum((done > 0) & (done < full)))} with their first rounds "
                  f"(SweepResult.rounds_fitted) and {int(np.sum(done == 0))} not started (NaN "
                  f"curves); {ranked} of {len(configs)} configurations are ranked, over the rounds "
                  f"all their fits ran{saved}.", UserWarning, stacklevel=4)


def _rounds_done(rows, fits, configs):
    """``(rows, done)``: ``rows`` with ``rounds_fitted`` capped by the rounds an interrupted
    sweep ran and those rounds, per row (``None``: not interrupted)."""
    if all(f.rounds_done is None for f in fits.values()):
        return rows, None
    done = np.zeros(rows.config.shape[0], np.int64)
    for i, c in enumerate(rows.config):
        cfg = configs[c]
        f, r = fits[(cfg["depth"], cfg["n_bins"])], cfg["n_rounds"]
        done[i] = r if f.rounds_done is None else min(int(f.rounds_done[rows.model[i]]), r)
    return rows._replace(rounds_fitted=done if rows.rounds_fitted is None
                         else np.minimum(rows.rounds_fitted, done)), done


def _finish_sweep(s: _Sweep, a, fits, borders_of, stats) -> SweepResult:
    """The last step of :func:`sweep`: every row's curves, the selection (the mean and
    standard error over folds and seeds, the best round and configuration), the fixed settings
    (:func:`jboost.fit`'s, for ``refit``) and, with ``keep_trees``, every model."""
    stopping, greater, grid_ = s.stopping, s.greater, s.grid
    rows = result_lib.rows(grid_.configs, grid_.n_points, s.n_folds, s.seeds,
                           {g: f.valid for g, f in fits.items()},
                           {g: f.train for g, f in fits.items()}, grid_.max_rounds,
                           n_fitted=None if stopping is None else {g: f.n_fitted for g, f in fits.items()},
                           tolerance=0.0 if stopping is None else stopping.tolerance, greater=greater)
    rows, done = _rounds_done(rows, fits, grid_.configs)  # a Ctrl-C: the rounds each fit ran
    if done is not None:
        _warn_interrupted(s, rows, done)
    sel = result_lib.select(rows.valid_curves, grid_.configs, s.n_folds * s.seeds, greater,
                            rows.rounds_fitted)
    diverged = divergence.diverged_rows(s.loss, s.y, s.w, s.fold_table, grid_, rows, a.metric,
                                        {g: f.n_models_fitted for g, f in fits.items()})
    fixed = {h: float(s.fixed_hyper[h]) for h in HYPERPARAMETERS}
    fixed.update(colsample_by=a.colsample_by, per_output_trees=bool(a.per_output_trees))
    if a.tree_family != "oblivious" or a.max_leaves is not None:  # fit's (refit, fit_kwargs)
        fixed.update(tree_family=a.tree_family, max_leaves=a.max_leaves)
    if "monotone" in s.family:  # the resolved constraints, as jboost.fit takes them
        fixed.update(monotone_constraints=s.family["monotone"])
    if "interactions" in s.family:
        fixed.update(interaction_constraints=[list(g) for g in s.family["interactions"]])
    if s.cats is not None:  # jboost.fit's categorical arguments (fit_kwargs, refit)
        fixed.update(s.cats.fit_kwargs)
    trees, baselines, model_cats, model_borders = (_kept_models(s.cats, fits, borders_of)
                                                   if a.keep_trees else (None,) * 4)
    return SweepResult(
        configs=tuple(grid_.configs), swept=grid_.swept, config=rows.config, fold=rows.fold,
        seed=rows.seed, valid_curves=rows.valid_curves, train_curves=rows.train_curves,
        mean_curves=sel.mean_curves, se_curves=sel.se_curves, best_rounds=sel.best_rounds,
        best_scores=sel.best_scores, best_ses=sel.best_ses, best_index=int(sel.best_index),
        metric=metrics_lib.metric_name(a.metric), greater_is_better=greater,
        fold_table=s.fold_table, seed_keys=s.seed_keys, sample_weight=s.w, borders=borders_of,
        loss=s.loss, fixed=fixed, trees=trees, model_of_row=rows.model,
        info=dict(stats.info(len(s.devices), a.t_start), interrupted=done is not None),
        baselines=baselines,
        early_stopping=result_lib.early_stopping_kwargs(stopping, a.metric, greater),
        rounds_fitted=rows.rounds_fitted, row_best_rounds=rows.row_best_rounds,
        feature_names=s.names, classes=s.classes, categorical=model_cats,
        model_borders=model_borders, diverged=diverged)


def _kept_models(cats, fits, borders_of):
    """``(trees, baselines, categorical, borders)`` of every group's models
    (``keep_trees=True``; the last two ``None`` without categorical columns); the groups an
    interrupted sweep did not reach have none."""
    fits = {g: f for g, f in fits.items() if f.trees is not None}
    trees, model_borders = {}, {}
    for g, f in fits.items():
        model_borders[g] = np.asarray(borders_of[g[1]])
        if cats is not None:  # the shared host rows, then each model's statistics' borders
            model_borders[g] = cats.model_borders(model_borders[g], np.asarray(f.cat.borders))
        trees[g] = _with_borders(jax.tree_util.tree_map(jnp.asarray, f.trees),
                                 jnp.asarray(model_borders[g]))
    model_cats = None
    if cats is None:
        model_borders = None
    else:
        model_cats = {g: categorical_stats.Categorical(cats.spec, *(
            np.asarray(v) for v in (f.cat.sums, f.cat.counts, f.cat.prior, f.cat.prior_weight)))
            for g, f in fits.items()}
    return trees, {g: f.baseline for g, f in fits.items()}, model_cats, model_borders


def _with_borders(trees, borders):
    """Trees ``(M, R, T, ...)`` with float thresholds from shared ``(F, n_bins - 1)`` borders or
    per-model ``(M, F, n_bins - 1)`` ones (categorical columns)."""
    if borders.ndim == 2:
        return family_lib.with_borders(trees, borders)
    return jax.vmap(family_lib.with_borders)(trees, borders)


def _check_data(X, y, sample_weight, loss, n_outputs, task, n_rows: Optional[int] = None):
    """Checked host ``X``, labels, weights (ones when none) and the resolved loss; ``y`` and the
    weights have ``n_rows`` rows (default ``X``'s; with ``rows="local"`` the whole table's)."""
    X = tabular.as_matrix(X, "X")
    n_rows = X.shape[0] if n_rows is None else n_rows
    y_given, y = y, labels.as_labels(y, n_rows)
    w = tabular.as_weights(sample_weight, n_rows)
    loss = checks_lib.resolve_loss(loss, y, n_outputs, task)
    standardise.refuse_extreme_scale(y_given, y, loss, "jboost.sweep.sweep")
    return X, y, w, loss


def _local_rows(X, y, loss, sample_weight, folds, devices, settings):
    """The checks and gathers of a multi-process sweep: ``(LocalRows, folds)``, an explicit
    ``folds`` gathered; the settings compared first, so every process raises alike."""
    explicit = not (isinstance(folds, numbers.Integral) and not isinstance(folds, bool))
    local = distributed.gather(X, y, sample_weight, None, devices,
                               dict(settings, folds="ids" if explicit else folds))
    if settings["checkpoint_dir"]:
        raise ValueError("checkpoint_dir: a sweep with rows='local' does not save checkpoints yet; "
                         "leave checkpoint_dir=None (or sweep with rows='global').")
    settings_lib.refuse_local_rows("a sweep with rows='local' does", (), settings["cat_features"],
                                   loss)

    def check_rows():
        kinds = getattr(X, "dtypes", None)
        if kinds is not None and any(getattr(d, "kind", "O") not in "biuf" for d in kinds):
            raise ValueError("X: a sweep with rows='local' does not support categorical DataFrame "
                             "columns yet: encode them as numbers (the same encoding on every "
                             "process).")
        if explicit and np.shape(folds) != (local.n_rows,):
            raise ValueError(f"folds: with rows='local' an explicit folds array holds this process's "
                             f"rows' fold ids, shape ({local.n_rows},); got shape {np.shape(folds)}.")
    local.everywhere(check_rows, ValueError)()
    if explicit:
        folds = distributed.allgather_rows(np.asarray(folds).astype(np.int64))
    return local, folds


def _local_shared(local, data, y, w, fold_table, seed_keys) -> sweep_program.Shared:
    """A multi-process sweep's shared inputs: this process's rows sharded over every process's
    devices, the seed keys and the whole table's labels, weights and folds replicated."""
    mine = slice(local.start, local.start + local.n_rows)
    rows = sweep_program.RowsShared(*(local.replicate(a) for a in (
        y, w, fold_table, local.table_positions)))
    return sweep_program.Shared(local.shard(data.X_binned, 1), local.shard(y[mine], edge=True),
                              local.shard(w[mine]), local.shard(fold_table[:, mine], 1),
                              local.replicate(seed_keys), None, rows)


def _any_process(callbacks):
    """The sweep's callbacks as one whose stop is any process's (every process stops alike)."""
    if not callbacks:
        return callbacks
    return [lambda entry: distributed.any_process(any([bool(cb(entry)) for cb in callbacks]))]


def _config(n_rounds, depth, n_bins, fixed_hyper, colsample_by, per_output_trees, *,
            missing: bool = True, family=None) -> boosting_lib.BoostConfig:
    """The static configuration of one program, checked by :func:`jboost.fitting.settings.settings`
    (``family``: the tree family's ``tree_family`` and ``max_leaves``, and the resolved
    ``monotone`` and ``interactions`` constraints when given)."""
    family = dict(family or {})
    constraints = {k: family.pop(k) for k in ("monotone", "interactions") if k in family}
    config, _ = settings_lib.settings(n_rounds=n_rounds, depth=depth, n_bins=n_bins, **fixed_hyper,
                             colsample_by=colsample_by, per_output_trees=per_output_trees,
                             **family)
    return config._replace(missing=missing, **constraints)


def _make_grid(grid, loss, n_rounds, depth, n_bins, fixed_hyper, colsample_by,
               per_output_trees, cats: Optional[sweep_categorical.CategoricalColumns] = None, family=None) -> grid_lib.Grid:
    """The configurations; every static combination and the fixed hyperparameters are checked
    (by :func:`jboost.fitting.settings.settings`) before anything is fitted."""
    for name, v in fixed_hyper.items():
        if isinstance(v, bool) or not isinstance(v, numbers.Real):
            raise TypeError(f"{name} must be a real number (sweep it through grid); got {v!r}.")
    lists = [grid_lib.static_list(v, name)
             for v, name in ((n_rounds, "n_rounds"), (depth, "depth"), (n_bins, "n_bins"))]
    resolved = {}  # each depth as the configuration takes it (loss-guided depth=None: a bound)
    for r, d, b in itertools.product(*lists):
        resolved[d] = _config(r, d, b, fixed_hyper, colsample_by, per_output_trees,
                              family=family).depth
    lists[1] = [resolved[d] for d in lists[1]]
    if len(set(lists[1])) != len(lists[1]):
        raise ValueError(f"depth={depth!r} names one depth bound twice ({lists[1]}).")
    rounds, depths, bins = ([int(v) for v in values] for values in lists)
    if cats is None:
        return grid_lib.make_grid(grid, loss, rounds, depths, bins, fixed_hyper)
    return grid_lib.make_grid(grid, loss, rounds, depths, bins, fixed_hyper, cats.fixed,
                              cats.spec.n_stats)


def _folds(y, w, folds, n_seeds, base_key, stratified, repeat, loss) -> Tuple[np.ndarray, int]:
    """``(S, n)`` fold of every row under each seed (stratified by default for classification)."""
    classification = loss.task in loss_lib.CLASSIFICATION
    if stratified is None:
        stratified = classification
    if stratified and not classification:
        raise ValueError(f"stratified=True needs class labels; loss {loss.name!r} is {loss.task!r}.")
    return cv.fold_table(y, w, folds, n_seeds, [int(base_key[0]), int(base_key[1])],
                         stratified=bool(stratified), repeat=repeat)
