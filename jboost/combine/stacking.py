"""fit_stacked_boosters (Wolpert 1992; ESL 8.8): per-learner settings, the vmapped cross-fits
(with early stopping) and the linear second tier on their out-of-fold raw scores. See
docs/combine.md."""

from __future__ import annotations

import functools
from typing import Any, Mapping, Sequence, Tuple

import jax
import jax.numpy as jnp
import numpy as np

from jboost import _compile, _native, checks as checks_lib
from jboost.combine import linear as linear_lib
from jboost.data import folds as cv, labels
from jboost.engine import batching, boosting as boosting_lib, memory, state as state_lib
from jboost.fitting import prepare, settings, tabular
from jboost.losses import (baselines as baselines_lib, checks, loss as loss_lib,
                           metrics as metrics_lib)
from jboost.models import ensemble, stacked
from jboost.trees import family, oblivious

# Each base learner sets these (traced) settings; unset ones take jboost.fit's defaults.
HYPERPARAMS = boosting_lib.Hyperparams._fields
HYPER_DEFAULTS = {name: settings.DEFAULTS[name] for name in HYPERPARAMS}


def _learner_settings(hypers, **static) -> Tuple[boosting_lib.BoostConfig, boosting_lib.Hyperparams]:
    """Every learner's settings checked as ``jboost.fit`` checks them: the shared static config
    and ``(M,)``-stacked Hyperparams."""
    if isinstance(hypers, Mapping) or not isinstance(hypers, Sequence) or len(hypers) == 0:
        raise ValueError("hypers must be a non-empty list of dicts, one per base learner "
                         f"(keys among {HYPERPARAMS}).")
    configs, made = [], []
    for i, h in enumerate(hypers):
        if not isinstance(h, Mapping):
            raise TypeError(f"hypers[{i}] must be a dict of settings (keys among {HYPERPARAMS}); "
                            f"got {type(h).__name__}.")
        unknown = sorted(set(h) - set(HYPERPARAMS))
        if unknown:
            raise ValueError(f"hypers[{i}] has unknown keys {unknown}; a base learner sets only "
                             f"{HYPERPARAMS} (static settings are arguments of the fit).")
        config, hyper = settings.settings(**static, **{**HYPER_DEFAULTS, **h})
        configs.append(config)
        made.append(hyper)
    if any(c != configs[0] for c in configs[1:]):
        raise ValueError("the base learners' learning_rate schedules differ; a schedule is static, "
                         "so the learners of one stacked fit share one (or give numbers).")
    return configs[0], jax.tree_util.tree_map(lambda *a: jnp.stack(a), *made)


def stack_hyperparams(hypers: Sequence[Mapping[str, Any]]) -> boosting_lib.Hyperparams:
    """``M`` dicts of :class:`jboost.Hyperparams` fields (unset ones: ``jboost.fit``'s defaults),
    each checked as ``jboost.fit`` checks them -> one Hyperparams with ``(M,)`` leaves."""
    static = {k: settings.DEFAULTS[k] for k in ("n_rounds", "depth", "n_bins")}
    return _learner_settings(hypers, **static)[1]


@functools.partial(_compile.jit, static_argnames=("config", "with_train_loss"))
def cross_fit_boosters(X_binned, y, w, key, masks, hypers: boosting_lib.Hyperparams,
                       loss: loss_lib.Loss, *, config: boosting_lib.BoostConfig,
                       with_train_loss: bool = False):
    """Every (fold, learner) boosting fit in one vmapped call: learner ``m`` of fold ``s`` with
    weights ``w * masks[s]``, ``hypers[m]`` and key ``fold_in(key, m)``.

    Returns:
      ``(trees (S, M, n_rounds, trees_per_round, ...), baselines (S, M, K))``; with
      ``with_train_loss`` also the ``(S, M, n_rounds)`` training losses.
    """
    def one(mask, hyper, k):
        wm = w * mask
        init = baselines_lib.baseline(loss, y, wm)
        out = boosting_lib.boost(state_lib.Data.train_only(X_binned, y, wm), k, hyper, loss, init, config=config)
        return (out.trees, init, out.train_loss) if with_train_loss else (out.trees, init)

    return _each_fit(one, key, masks, hypers)


def _each_fit(one, key, masks, hypers):
    """``one(mask, hyper, key)`` of every (fold, learner): learner ``m``'s key is
    ``fold_in(key, m)`` in every fold."""
    n_learners = jax.tree_util.tree_leaves(hypers)[0].shape[0]
    keys = jax.vmap(lambda m: jax.random.fold_in(key, m))(jnp.arange(n_learners))
    per_learner = jax.vmap(one, in_axes=(None, 0, 0))
    return jax.vmap(per_learner, in_axes=(0, None, None))(masks, hypers, keys)


@functools.partial(_compile.jit, static_argnames=("config",))
def cross_fit_stopped(X_binned, y, w, key, masks, hypers: boosting_lib.Hyperparams,
                      loss: loss_lib.Loss, *, config: boosting_lib.BoostConfig):
    """Every (fold, learner) fit of :func:`cross_fit_boosters`, each stopping early on the rows
    its mask holds out: ``(trees, baselines, train_loss, valid_loss, n_fitted)``, leading axes
    ``(S, M)``; ``valid_loss`` is the early-stopping score (NaN after a fit's stop)."""
    es = config.early_stopping

    def one(mask, hyper, k):
        wm, wv = w * mask, w * (1.0 - mask)
        init = baselines_lib.baseline(loss, y, wm)
        data = state_lib.Data(X_binned, y, wm, X_binned, y, wv)
        if es.metric is None:
            out = boosting_lib.boost(data, k, hyper, loss, init, config=config)
            return out.trees, init, out.train_loss, out.valid_loss, out.n_fitted

        def body(state, m):  # the round, its score (the metric) in valid_loss
            state, out = boosting_lib.step(state, m, data=data, key=k, hyper=hyper, config=config)
            score = metrics_lib.evaluate(es.metric, state.loss, y, state.raw_valid, wv)
            return state, out._replace(valid_loss=score.astype(jnp.float32).reshape(()))

        out = boosting_lib.boost_until_stopped(body, boosting_lib.init(data, loss, init, config),
                                           jnp.arange(config.n_rounds, dtype=jnp.int32), data,
                                           es._replace(metric=None), (jnp.float32(jnp.inf), jnp.int32(-1)))
        return out.trees, init, out.train_loss, out.valid_loss, out.n_fitted

    return _each_fit(one, key, masks, hypers)


def learner_best_rounds(valid_loss, n_fitted) -> jax.Array:
    """``(M,)`` each learner's best round: the minimum of its held-out score averaged over the
    folds, over the rounds all its fold fits ran (the best iteration of ``xgboost.cv``)."""
    rounds = jnp.arange(valid_loss.shape[-1])
    ran = rounds[None, :] < jnp.min(n_fitted, axis=0)[:, None]                    # (M, R)
    mean = jnp.mean(valid_loss, axis=0)                                            # (M, R)
    return jnp.argmin(jnp.where(ran & ~jnp.isnan(mean), mean, jnp.inf), axis=-1).astype(jnp.int32)


def _first_rounds_only(trees: oblivious.ObliviousTrees, best) -> oblivious.ObliviousTrees:
    """Trees ``(..., M, R, T, ...)`` with learner ``m``'s rounds after ``best[m]`` zeroed."""
    lv = trees.leaf_values
    keep = jnp.arange(lv.shape[-4])[None, :] <= best[:, None]                      # (M, R)
    keep = keep.reshape(keep.shape + (1,) * 3)
    return trees._replace(leaf_values=jnp.where(keep, lv, jnp.zeros((), lv.dtype)))


#: The message of the ``ValueError`` :func:`fit_stacked_boosters` raises for ``init_model=``.
NO_WARM_START = (
    "fit_stacked_boosters cannot continue a stacked model (init_model=): its second tier was "
    "trained on the out-of-fold scores of the fold models, which a StackedBoosters does not keep "
    "(only the all-data base learners), so continuing the base learners would leave the stacker "
    "weighting learners it was not trained on, and refitting it needs the fold models' scores "
    "after the new rounds. Fit again with the total n_rounds (every fold's and the all-data fits "
    "are one vmapped call).")


@settings.takes_settings(verbose=False)
def fit_stacked_boosters(X, y, loss="squared_error", *, hypers: Sequence[Mapping[str, Any]],
                         folds=5, n_rounds, depth, n_bins, colsample_by, per_output_trees,
                         row_sampler, sample_weight, n_outputs, task, stacker_l2=1e-3,
                         stacker_steps: int = 200, key, init_model, early_stopping_rounds,
                         early_stopping_tolerance, eval_metric, checkpoint_dir, callbacks, verbose,
                         tree_family, max_leaves) -> stacked.StackedBoosters:
    """Stacking (Wolpert 1992; ESL 8.8) of ``M`` boosters differing in traced hyperparameters,
    with a linear / logistic / softmax second tier (:func:`jboost.combine.fit_linear`) on their
    out-of-fold raw scores. See docs/combine.md.

    Args:
      hypers: ``M`` dicts of :class:`jboost.Hyperparams` fields, one per base learner; unset
        fields take ``jboost.fit``'s defaults.
      folds: the number of folds K >= 2, or ``(n,)`` int fold ids 0..K-1.
      stacker_l2: the second tier's ridge penalty; stacker_steps: its L-BFGS iterations.
      key: an int seed or a ``jax.random`` key, split into the folds' key and the fits' key.
      init_model: refused (:data:`NO_WARM_START`).
      early_stopping_rounds: each fold's fit of each learner stops on its held-out fold.
      checkpoint_dir: a directory where the fits are saved mask by mask.
      callbacks: functions called as each mask's fits finish, with a dict; returning ``True``
        stops the fit with a ``RuntimeError``.
      verbose: print a line as each mask's fits finish.
    """
    if init_model is not None:
        raise ValueError(NO_WARM_START)
    tab = tabular.tabular(X, y, loss=loss, n_outputs=n_outputs, task=task)
    X = tab.X
    n = X.shape[0]
    y = labels.as_labels(tab.y, n)
    loss_obj = checks.resolve_loss(loss, y, n_outputs, task)
    config, hyper = _learner_settings(hypers, n_rounds=n_rounds, depth=depth, n_bins=n_bins,
                                      colsample_by=colsample_by, per_output_trees=per_output_trees,
                                      row_sampler=row_sampler, tree_family=tree_family,
                                      max_leaves=max_leaves)
    stopping = settings.check_early_stopping(early_stopping_rounds, early_stopping_tolerance,
                                                eval_metric, loss_obj, has_validation=True)
    explicit = cv.check_folds(folds, n)
    checks_lib.check_real(stacker_l2, "stacker_l2", 0.0, float("inf"))
    stacker_steps = checks_lib.check_int(stacker_steps, "stacker_steps", 1, settings.MAX_ROUNDS)
    data = prepare.prepare(X, y, sample_weight=sample_weight, n_bins=config.n_bins)
    config = config._replace(missing=data.missing)
    n_folds = int(folds) if explicit is None else int(explicit.max()) + 1
    fits = (n_folds + 1) * len(hypers)  # every fold's and the all-data fit of each learner: one vmap
    memory.check_boosting_memory(
        n, X.shape[1], config, loss_obj,
        k_from_labels=loss_obj.task == "multiclass" and n_outputs is None, n_models=fits,
        n_together=fits, what=f"boosters ({n_folds} folds + 1) x {len(hypers)} learners",
        fix="use fewer folds or learners, or a smaller depth, n_bins or n_outputs")
    second = stacked.stack_task(loss_obj)
    k_folds, k_fit = jax.random.split(checks_lib.as_key(key))
    if explicit is None:
        ids = cv.fold_ids(y, n_folds, seed=[int(v) for v in checks_lib.as_raw_key(k_folds)],
                          stratified=second in loss_lib.CLASSIFICATION)
    else:
        ids = explicit
    masks = jnp.concatenate([cv.fold_masks(ids, n_folds), jnp.ones((1, n), jnp.float32)])
    best = n_fitted = None
    host = dict(checkpoint_dir=checkpoint_dir, callbacks=tuple(callbacks or ()), verbose=bool(verbose),
                n_folds=n_folds)
    if stopping is None:
        trees, baselines, train_loss = _cross_fit(data, k_fit, masks, hyper, loss_obj, config,
                                                  kind="stacking", **host)
    else:
        trees, baselines, train_loss, best, n_fitted = _fit_stopped(
            data, k_fit, masks, hyper, loss_obj, config._replace(early_stopping=stopping), **host)
    # A concrete fit: no silent NaN learner (fit's FloatingPointError, naming the fit).
    if not any(checks_lib.is_traced(v) for v in jax.tree_util.tree_leaves(hyper)):
        checks.check_finite_fits(
            train_loss, loss_obj, state_lib.Data.train_only(data.X_binned, data.y, data.w), baselines,
            n_fitted=n_fitted,
            names=lambda i: (f"learner {i[1]} (hypers[{i[1]}]) on "
                             + (f"fold {i[0]}'s training rows" if i[0] < n_folds else "all rows")),
            what="fits")
    trees = family.with_borders(trees, data.borders)
    fold_trees = jax.tree_util.tree_map(lambda a: a[:-1], trees)
    raw = ensemble.batched_raw_scores(fold_trees, baselines[:-1], jnp.asarray(X), n_lead=2)  # (S, M, n, K)
    oof = cv.out_of_fold(jnp.swapaxes(raw, 1, 2), masks[:-1])                                # (n, M, K)
    k_out = loss_obj.n_outputs if second == "multiclass" else 1
    stacker = linear_lib.fit_linear(oof.reshape(n, -1), data.y, task=second, n_outputs=k_out,
                                l2=stacker_l2, n_steps=stacker_steps, sample_weight=data.w)
    final = jax.tree_util.tree_map(lambda a: a[-1], trees)
    model = stacked.StackedBoosters(final, data.borders, baselines[-1], stacker, oof, loss_obj, best,
                            classes=tab.classes, feature_names=tab.feature_names)
    return settings.nan_outside_domains(model, loss_obj, hyper)


@functools.partial(_compile.jit, static_argnames=("config",))
def _masks_chunk(X_binned, y, w, key, masks, hypers, loss, items, *, config):
    """The fits of the masks ``masks[items]`` (padding repeats the last mask), with their
    training losses (and early stopping: :func:`cross_fit_stopped`)."""
    chunk = masks[jnp.minimum(items, masks.shape[0] - 1)]
    if config.early_stopping is not None:
        return cross_fit_stopped(X_binned, y, w, key, chunk, hypers, loss, config=config)
    return cross_fit_boosters(X_binned, y, w, key, chunk, hypers, loss, config=config,
                              with_train_loss=True)


def _cross_fit(data, key, masks, hyper, loss, config, *, kind, checkpoint_dir=None, callbacks=(),
               verbose=False, n_folds=0, first_mask=0):
    """Every mask's fits in one call, or with ``checkpoint_dir``, ``callbacks`` or ``verbose``
    mask by mask from the host (bitwise the same fits; ``masks[c]`` is the fit's mask
    ``first_mask + c``). A callback returning ``True``: a ``RuntimeError``."""
    args = (data.X_binned, data.y, data.w, key, masks, hyper, loss)
    if checkpoint_dir is None and not callbacks and not verbose:
        if config.early_stopping is not None:
            return cross_fit_stopped(*args, config=config)
        return cross_fit_boosters(*args, config=config, with_train_loss=True)

    def info(c, out):
        fold = first_mask + c
        entry = {"fold": fold if fold < n_folds else "all",
                 "learners": list(range(out[1].shape[1])), "train_loss": np.asarray(out[2])[0]}
        if config.early_stopping is not None:
            entry.update(valid_loss=np.asarray(out[3])[0], n_fitted=np.asarray(out[4])[0])
        return entry

    out = batching.map_checkpointed(
        functools.partial(_masks_chunk, config=config), args, masks.shape[0], 1,
        checkpoint_dir=checkpoint_dir, kind=kind,
        settings=(config, loss.name, loss.fn, loss.n_outputs, loss.task, _native.available(),
                  jax.devices()[0].platform),
        differs="data, folds, key, hypers or settings", what="folds' fits",
        progress="stacking: masks" if verbose else None, callbacks=callbacks, info=info,
        at_once=True)
    if out[1].shape[0] < masks.shape[0]:
        saved = (" (the fits saved in checkpoint_dir are kept: rerunning the same call fits only "
                 "the rest)" if checkpoint_dir is not None else "")
        raise RuntimeError(f"a callback stopped the stacking fit after {first_mask + out[1].shape[0]} "
                           f"of its {n_folds + 1} masks' fits: a stacked model needs every fold's fits "
                           f"and the all-data fits, so none is returned{saved}.")
    return out


def _fit_stopped(data, key, masks, hyper, loss, config, **host):
    """The fits of :func:`fit_stacked_boosters` with early stopping (docs/combine.md): the fold
    fits, each learner's best round, then the all-data fits; ``(trees (S + 1, M, R, ...),
    baselines, train_loss, best (M,), n_fitted (S + 1, M))``."""
    trees, baselines, train_loss, valid_loss, n_fitted = _cross_fit(
        data, key, masks[:-1], hyper, loss, config, kind="stacking-folds", **host)
    best = learner_best_rounds(valid_loss, n_fitted)
    rounds = config.n_rounds
    if not checks_lib.is_traced(best):
        rounds = int(np.max(np.asarray(best))) + 1
    all_trees, all_base, all_loss = _cross_fit(
        data, key, masks[-1:], hyper, loss, config._replace(n_rounds=rounds, early_stopping=None),
        kind="stacking-all", first_mask=masks.shape[0] - 1, **host)
    cut = lambda a: a[:, :, :rounds]  # noqa: E731 (the fold fits' rounds after every best round)
    trees = jax.tree_util.tree_map(lambda a, b: jnp.concatenate([cut(a), b]), trees, all_trees)
    trees = jax.vmap(lambda t: _first_rounds_only(t, best))(trees)
    n_fitted = jnp.concatenate([n_fitted, jnp.full((1,) + n_fitted.shape[1:], rounds, n_fitted.dtype)])
    return (trees, jnp.concatenate([baselines, all_base]),
            jnp.concatenate([cut(train_loss), all_loss], axis=0), best, n_fitted)
