"""fit_bagged_boosters: bagging any boosted learner (Breiman 1996), a vmap of
:func:`jboost.engine.boosting.boost` over bags with bootstrap counts as sample weights, with
per-bag out-of-bag early stopping, warm start and checkpointed chunks of bags.

See docs/ensembles.md."""

from __future__ import annotations

import functools
import types
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jboost import _native, checks
from jboost.bagging import boosters_binned, local as local_lib
from jboost.data import categorical_stats, labels
from jboost.engine import batching, boosting as boosting_lib, memory, state as state_lib
from jboost.fitting import (init_model as init_model_lib, prepare, rounds as rounds_lib,
                            settings as settings_lib, standardise, tabular)
from jboost.losses import baselines, checks as checks_lib, loss as loss_lib, per_sample
from jboost.models import bagged
from jboost.trees import family

CHECKPOINT_KIND = "bags"


@settings_lib.takes_settings(verbose=False)
def fit_bagged_boosters(X, y, loss="squared_error", *, n_bags: int = 10,
                        bootstrap: str = "multinomial", n_rounds, depth, learning_rate, l2,
                        min_split_gain, min_child_weight, subsample, colsample, colsample_by,
                        n_bins, n_outputs, per_output_trees, sample_weight, key,
                        chunk_size: int = 1, verbose, eval_set, early_stopping_rounds,
                        early_stopping_tolerance, eval_metric, init_model, checkpoint_dir,
                        callbacks, base_margin, eval_base_margin, cat_features, one_hot_max_size,
                        cat_prior, cat_prior_weight, rows, tree_family,
                        max_leaves, monotone_constraints,
                        interaction_constraints) -> bagged.BaggedBoosters:
    """Bagging of boosted ensembles (Breiman 1996 applied to any jboost learner).

    One compiled call: chunks of ``chunk_size`` bags (each a ``vmap``) of
    :func:`jboost.engine.boosting.boost` with the bootstrap weights as sample weights. The
    boosting arguments mean what they mean in :func:`jboost.fit`. See docs/ensembles.md
    (bagged boosters) for early stopping, warm start, offsets, categorical columns and checkpoints.

    Args:
      X, y, loss: as :func:`jboost.fit`.
      n_bags: number of bags ``B``.
      bootstrap: ``"multinomial"``, ``"poisson"`` or ``"bayesian"``
        (:func:`~jboost.bagging.bootstrap_weights`).
      chunk_size: bags fitted together.
      verbose: print a line as each chunk of bags is fitted.
      eval_set: ``None``, ``"oob"`` (each bag's out-of-bag rows; the default with
        ``early_stopping_rounds``) or ``(X_valid, y_valid[, w_valid])`` shared by the bags.
      early_stopping_rounds: each bag stops on its own validation score and predicts with its
        own ``best_round``.
      init_model: :class:`BaggedBoosters` to continue by ``n_rounds`` more rounds in every bag.
      checkpoint_dir: save each chunk of bags as it finishes; a rerun resumes bitwise.
      callbacks: functions called after each chunk of bags with a dict; ``True`` stops the fit.

    Returns:
      A :class:`BaggedBoosters`.

    Raises:
      MemoryError: the ``chunk_size`` bags fitted together would not fit in the device's memory
        (:func:`jboost.engine.memory.check_boosting_memory`, before compiling).
      ValueError: early stopping on out-of-bag rows where a bag has none with weight.
    """
    a = types.SimpleNamespace(**locals())  # this call's arguments, for the pipeline's steps
    if settings_lib.check_setting("rows", rows) == "local":
        return local_lib.fit_local(X, y, loss, sample_weight, eval_set, _local_settings(a))
    b = _prepare_bags(a)
    return _finish_bags(b, a, *_run_bags(b, a))


# The settings every process of a rows="local" fit compares (before any collective): as given,
# or (the rest) whether given.
_LOCAL_SETTINGS = ("loss", "n_bags", "bootstrap", "n_rounds", "depth", "learning_rate", "l2",
                   "min_split_gain", "min_child_weight", "subsample", "colsample", "colsample_by",
                   "n_bins", "n_outputs", "per_output_trees", "key", "chunk_size", "verbose",
                   "early_stopping_rounds", "early_stopping_tolerance", "eval_metric",
                   "monotone_constraints", "interaction_constraints")


def _local_settings(a) -> dict:
    """The settings of a multi-process fit (:func:`jboost.bagging.local.fit_local`)."""
    return dict({k: getattr(a, k) for k in _LOCAL_SETTINGS},
                init_model=a.init_model is not None, checkpoint_dir=a.checkpoint_dir is not None,
                n_callbacks=len(a.callbacks or ()), base_margin=a.base_margin is not None,
                eval_base_margin=a.eval_base_margin is not None, cat_features=a.cat_features,
                one_hot_max_size=a.one_hot_max_size, cat_prior=a.cat_prior,
                cat_prior_weight=a.cat_prior_weight, tree_family=a.tree_family,
                max_leaves=a.max_leaves)


class _Bags(NamedTuple):
    """Bagged boosters' inputs after the host-side checks and binning (:func:`_prepare_bags`)."""

    tab: tabular.Tabular
    data: prepare.Data
    train: state_lib.Data
    valid: Any          # a shared eval_set's binned rows, or None
    config: boosting_lib.BoostConfig
    hyper: boosting_lib.Hyperparams
    loss: loss_lib.Loss
    key: Any
    bootstrap: str
    n_bags: int
    chunk_size: int
    oob: bool           # validation on each bag's out-of-bag rows
    shared: bool        # validation on a shared eval_set
    start: Any          # a continued fit's boosters_binned.BagStart, or None
    margins: Any
    cat: Any
    cat_spec: Any
    scale: standardise.LabelScale  # the labels' scale (docs/fitting.md)


def _prepare_bags(a) -> _Bags:
    """The first step of :func:`fit_bagged_boosters`: check the settings, read the table, bin
    it (a continued fit's borders), check the memory, draw the categorical statistics' inputs,
    check the out-of-bag rows and take the offsets."""
    bootstrap, n_bags, chunk_size, config, hyper = boosters_binned.bag_settings(vars(a))
    init_model = a.init_model
    if getattr(init_model, "categorical", None) is not None:
        raise ValueError("init_model has categorical columns: continuing bagged boosters with "
                         "categorical columns is not supported (each bag's statistics would have "
                         "to be replayed); fit again with more n_rounds.")
    tab = tabular.tabular(a.X, a.y, init_model=init_model, eval_set=a.eval_set, loss=a.loss,
                          n_outputs=a.n_outputs, categorical=(a.cat_features, a.one_hot_max_size))
    X, eval_set = tab.X, tab.eval_set
    if init_model is not None and (a.monotone_constraints is not None
                                   or a.interaction_constraints is not None):
        raise ValueError("continuing bagged boosters with monotone_constraints or "
                         "interaction_constraints is not supported (a BaggedBoosters does not "
                         "record them): fit again with more n_rounds.")
    config = config._replace(**settings_lib.constraint_settings(
        a.monotone_constraints, a.interaction_constraints, config, n_features=X.shape[1],
        names=None if tab.feature_names is None else list(tab.feature_names.array),
        spec=None if tab.plan is None else tab.plan.spec))
    y = labels.as_labels(tab.y, X.shape[0])
    loss_obj = checks_lib.resolve_loss(a.loss, y, a.n_outputs)
    ls = standardise.NONE if init_model is not None else standardise.label_scale(
        tab.y, y, loss_obj, None, centre=False)
    if ls.exponent:  # fit y / 2^e; the model in label units (jboost.fitting.standardise)
        y, eval_set = standardise.standardised_inputs(tab.y, eval_set, ls, X.shape[0])
        loss_obj = standardise.scaled_loss(loss_obj, ls, 1.0 / ls.scale)
    if tab.plan is not None and init_model is not None:
        raise ValueError("init_model was fitted without categorical features; this X has "
                         "categorical columns: continue on the model's numeric columns.")
    stopping, oob = boosters_binned.bag_early_stopping(
        a.early_stopping_rounds, a.early_stopping_tolerance, a.eval_metric, eval_set, loss_obj,
        bootstrap)
    shared = eval_set is not None and not oob
    borders = None if init_model is None else _check_init_bags(init_model, X, loss_obj, config,
                                                               n_bags)
    data = prepare.prepare(X, y, sample_weight=a.sample_weight, n_bins=config.n_bins,
                           weighted_borders=False, eval_set=eval_set if shared else None,
                           borders=borders,
                           label_check=lambda v, name: checks_lib.check_labels(loss_obj, v, name))
    n_features = X.shape[1]
    if tab.plan is not None:  # the trees' features: host columns, then K statistics per ctr column
        spec = tab.plan.spec
        n_features = spec.host_width + len(spec.ctr_columns) * categorical_stats.targets(
            np.asarray(y[:1]), loss_obj).shape[1]
    memory.check_boosting_memory(
        X.shape[0], n_features, config, loss_obj,
        k_from_labels=loss_obj.task == "multiclass" and a.n_outputs is None, n_models=n_bags,
        n_together=chunk_size, what="bagged boosters",
        fix="use a smaller chunk_size, depth, n_bins or n_outputs")
    key = checks.as_key(a.key)
    start = None
    if init_model is not None:
        start = boosters_binned.BagStart(init_model.trees, init_model.baseline,
                                         init_model.bag_weights, dict(init_model.loss.params))
    cat, cat_spec = None, None
    if tab.plan is not None:  # every bag's statistics from its own (host-drawn) weights
        cat, cat_spec = boosters_binned.categorical_inputs(tab.plan, data, loss_obj, key, n_bags,
                                                           bootstrap, a.cat_prior,
                                                           a.cat_prior_weight)
    if oob and stopping is not None:
        boosters_binned.check_out_of_bag_rows(key, n_bags, data.w, bootstrap,
                                              start.bag_weights if start is not None else
                                              None if cat is None else cat.counts)
    train = state_lib.Data.train_only(data.X_binned, data.y, data.w)
    if not per_sample.is_built_in(loss_obj) and not checks.is_traced(hyper.learning_rate):
        checks_lib.warn_if_no_gradient(loss_obj, train,
                                       baselines.baseline(loss_obj, data.y, data.w))
    valid = (data.X_valid, data.y_valid, data.w_valid) if shared else None
    margins = _bag_margins(a, data, eval_set, loss_obj, oob=oob, shared=shared)
    config, hyper = standardise.scaled_settings(config._replace(early_stopping=stopping), hyper,
                                                ls)
    return _Bags(tab, data, train, valid, config, hyper, loss_obj, key, bootstrap, n_bags,
                 chunk_size, oob, shared, start, margins, cat, cat_spec, ls)


def _bag_margins(a, data: prepare.Data, eval_set, loss_obj, *, oob: bool, shared: bool):
    """``(margin, margin_valid)``: the checked per-row offsets (``base_margin``,
    ``eval_base_margin``), or ``None``."""
    if a.base_margin is None and a.eval_base_margin is None:
        return None
    if oob and a.eval_base_margin is not None:
        raise ValueError("eval_base_margin is for a shared eval_set=(X_valid, y_valid); the "
                         "out-of-bag rows take base_margin's own offsets: drop eval_base_margin.")
    offsets = prepare.with_margins(state_lib.Data(*data[:6]), a.base_margin, a.eval_base_margin,
                                   eval_set if shared else None, loss_obj.n_outputs)
    return offsets.margin, offsets.margin_valid


def _run_bags(b: _Bags, a):
    """The engine step of :func:`fit_bagged_boosters`: ``(out, baselines, bag weights,
    categorical outputs, init_model)`` of every bag fitted (fewer when a callback or Ctrl-C
    stopped a concrete fit: ``init_model`` cut to them too). Under the caller's ``jax.vmap`` /
    ``jit``: one traced program; else chunks of bags as host-side calls (checkpoints)."""
    data, config, n_bags, init_model = b.data, b.config, b.n_bags, a.init_model
    if (not rounds_lib.host_fit(b.hyper, b.key, b.loss.params, b.cat)
            and a.checkpoint_dir is None and not a.callbacks):
        # Under the caller's jax.vmap / jit: one traced program (progress from inside it).
        out, init, counts, cat_out = boosters_binned.bag_boost_binned(
            data.X_binned, data.y, data.w, b.key, b.hyper, b.loss, config=config, n_bags=n_bags,
            bootstrap=b.bootstrap, chunk_size=b.chunk_size, verbose=bool(a.verbose), oob=b.oob,
            valid=b.valid, start=b.start, margins=b.margins, cat=b.cat, cat_spec=b.cat_spec)
        return out, init, counts, cat_out, init_model

    def info(c, chunk):
        first = c * chunk[1].shape[0]
        bags = [i for i in range(first, first + chunk[1].shape[0]) if i < n_bags]
        unit = b.scale.loss_unit()
        return {"bags": bags, "train_loss": np.asarray(chunk[0].train_loss)[:len(bags)] * unit,
                "valid_loss": np.asarray(chunk[0].valid_loss)[:len(bags)] * unit}

    out, init, counts, cat_out = batching.map_checkpointed(
        functools.partial(boosters_binned.bags_chunk, config=config, n_bags=n_bags,
                          bootstrap=b.bootstrap, oob=b.oob, cat_spec=b.cat_spec),
        (data.X_binned, data.y, data.w, b.key, b.hyper, b.loss, b.valid, b.start, b.margins,
         b.cat), n_bags, b.chunk_size,
        checkpoint_dir=a.checkpoint_dir, kind=CHECKPOINT_KIND,
        settings=(config, n_bags, b.bootstrap, b.oob, b.loss.name, b.loss.fn, b.loss.n_outputs,
                  _native.available(), jax.devices()[0].platform)
        + (() if b.cat_spec is None else (b.cat_spec.to_json(),)),
        differs="data, key, settings or init_model", what="chunks of bags",
        progress="bagged boosters: bags" if a.verbose else None, callbacks=a.callbacks,
        info=info, at_once=True, keep_on_interrupt=True, unit="bags")
    if init.shape[0] < n_bags:  # a callback or Ctrl-C stopped: the bags fitted so far
        n_bags = init.shape[0]
        if init_model is not None:
            init_model = init_model._replace(**{
                f: jax.tree_util.tree_map(lambda v: v[:n_bags], getattr(init_model, f))
                for f in ("trees", "train_loss", "valid_loss")})
        cat_out = jax.tree_util.tree_map(lambda v: v[:n_bags], cat_out)
    return out, init, counts, cat_out, init_model


def _finish_bags(b: _Bags, a, out, init, counts, cat_out, init_model) -> bagged.BaggedBoosters:
    """The last step of :func:`fit_bagged_boosters`: the finite-loss check of a concrete fit,
    the rounds kept (to the last bag's stop), every bag's borders, a continued fit's rounds
    first; traced settings outside their domains give NaN bags (with a warning)."""
    data = b.data
    concrete = not any(checks.is_traced(v) for v in jax.tree_util.tree_leaves(b.hyper))
    trees, train_loss, valid_loss = boosters_binned.kept_rounds(
        out, b.loss, b.train, init, b.config.early_stopping, concrete=concrete)
    valid_loss = valid_loss if b.oob or b.shared else None
    borders, categorical = data.borders, None
    if cat_out is not None:  # each bag's borders: the shared host rows, then its statistics'
        ctr_borders, categorical = cat_out
        h = b.cat_spec.host_width
        borders = jnp.concatenate([jnp.broadcast_to(
            jnp.asarray(data.borders)[:h], (ctr_borders.shape[0], h) + data.borders.shape[1:]),
            ctr_borders], axis=1)
        trees = jax.vmap(family.with_borders)(trees, borders)
    else:
        trees = family.with_borders(trees, data.borders)
    if init_model is not None:  # its rounds first, then the new ones (per bag)
        trees, train_loss, valid_loss = _joined_rounds(init_model, trees, train_loss, valid_loss)
    model = bagged.BaggedBoosters(trees=trees, borders=borders, baseline=init,
                                  loss=out.final_loss, bag_weights=counts, train_loss=train_loss,
                                  valid_loss=valid_loss, best_round=out.best_round,
                                  classes=b.tab.classes, feature_names=b.tab.feature_names,
                                  categorical=categorical)
    model = standardise.unscaled_model(model, b.scale)
    # Traced settings (the caller's vmap) outside their domains: NaN bags, and a warning.
    return settings_lib.nan_outside_domains(model, b.loss, b.hyper)


def _check_init_bags(model, X, loss: loss_lib.Loss, config: boosting_lib.BoostConfig, n_bags: int):
    """Check bagged boosters to continue (``init_model=``) against the new fit; returns the
    borders to bin with (the model's)."""
    if not isinstance(model, bagged.BaggedBoosters):
        raise TypeError(f"init_model must be BaggedBoosters fitted by bagging.fit_bagged_boosters; "
                        f"got {type(model).__name__}.")
    borders = init_model_lib.check_init_model(model, bagged.BaggedBoosters, X.shape[1], None,
                                           n_bins=config.n_bins, depth=config.depth,
                                           who="bagging.fit_bagged_boosters", config=config)
    init_model_lib.check_init_loss(model, loss)
    if model.n_bags != n_bags:
        raise ValueError(f"n_bags={n_bags} differs from init_model's {model.n_bags} bags: a continued "
                         f"fit continues every bag; pass n_bags={model.n_bags}.")
    if model.bag_weights.shape[-1] != X.shape[0]:
        raise ValueError(f"init_model was fitted on {model.bag_weights.shape[-1]} rows (its bootstrap "
                         f"weights); X has {X.shape[0]}: continue it on the rows it was fitted on.")
    per_round = model.trees.features.shape[-2]
    want = loss.n_outputs if config.per_output_trees else 1
    if per_round != want:
        raise ValueError(f"init_model has {per_round} trees per round; this fit grows {want} "
                         f"(per_output_trees={config.per_output_trees}): pass "
                         f"per_output_trees={not config.per_output_trees}.")
    if model.best_round is not None:
        raise ValueError("init_model was fitted with early stopping: its bags stopped at different "
                         "rounds (each keeps zero trees after its stop), so no longer fit continues "
                         "it. Fit it again with more n_rounds (and early_stopping_rounds), or "
                         "continue a model fitted without early stopping.")
    return borders


def _joined_rounds(model: bagged.BaggedBoosters, trees, train_loss, valid_loss):
    """``model``'s rounds followed by a continued fit's, per bag (round axis 1); a validation
    curve missing on one side is NaN there."""
    def curve(c, like):
        return jnp.full(like.shape, jnp.nan, jnp.float32) if c is None else c

    join = lambda a, b: jnp.concatenate([a, b], axis=1)  # noqa: E731
    trees = jax.tree_util.tree_map(join, model.trees, trees)
    valid = None
    if model.valid_loss is not None or valid_loss is not None:
        valid = join(curve(model.valid_loss, model.train_loss), curve(valid_loss, train_loss))
    return trees, join(model.train_loss, train_loss), valid
