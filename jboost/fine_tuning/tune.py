"""``finetune``: every leaf value of a fitted Booster refitted jointly with optax (Friedman and
Popescu 2003), with ``soft=True`` sigmoid splits whose thresholds move too (soft decision trees,
NODE). See docs/finetune.md and docs/models.md."""

from __future__ import annotations

from typing import Any, Callable, Optional, Union

import jax
import jax.numpy as jnp
import numpy as np
import optax

from jboost import checks
from jboost.data import labels, tabular
from jboost.fine_tuning import loop, scores
from jboost.fitting import prepare, settings
from jboost.losses import checks as checks_lib, loss as loss_lib, per_sample
from jboost.models import base, booster
from jboost.trees import family, oblivious


def _check_model(model, soft: bool) -> booster.Booster:
    """The Booster to fine-tune: one model, cut to the rounds its predictions use."""
    if not getattr(model, "fine_tunable", False):
        has_leaves = hasattr(getattr(model, "trees", None), "leaf_values")
        why = ("its raw score is not the baseline plus the sum of its trees' leaf values, so "
               "there is no leaf-value objective to fine-tune" if has_leaves else
               "it has no trees with leaf values")
        raise TypeError(f"model must be a jboost.Booster (from jboost.fit or jboost.algorithms); "
                        f"got {type(model).__name__}: {why}. Fine-tune each Booster of an "
                        "ensemble of Boosters on its own.")
    if model.batch_shape:
        raise ValueError(f"model is a batch of {model.batch_shape} models (jax.vmap): fine-tune one "
                         "model (index it: jax.tree_util.tree_map(lambda a: a[i], model)), or "
                         "jax.vmap finetune itself over a continuous setting.")
    if checks.is_traced(model.trees.leaf_values):
        raise TypeError("model must be concrete here (its trees are traced): jax.vmap finetune over "
                        "its continuous settings (learning rate, temperature, l2, loss "
                        "parameters), not over models.")
    if soft and not isinstance(model.trees, oblivious.ObliviousTrees):
        raise TypeError(f"soft=True needs oblivious trees (jboost.ObliviousTrees: a feature and a "
                        f"border per level); this model's trees are {type(model.trees).__name__}: "
                        "use soft=False (its leaf values are fine-tuned on its own leaf indices).")
    if model.best_round is not None:
        model = model._replace(trees=base.first_stages(model.trees, int(model.best_round) + 1,
                                                            model.n_rounds), best_round=None,
                               train_loss=model.train_loss[: int(model.best_round) + 1],
                               valid_loss=model.valid_loss[: int(model.best_round) + 1])
    return model


def _resolve_loss(loss, model: booster.Booster, y: np.ndarray) -> loss_lib.Loss:
    """The fine-tuning loss (``None``: the model's), checked against the labels and K."""
    if loss is None:
        want = model.loss.label_columns  # a batch objective's structure: its check_labels
        if not model.loss.batch and ((y.ndim == 2) != (want is not None)
                                     or (want is not None and y.shape[1] != want)):
            shape = f"({y.shape[0]},)" if want is None else f"({y.shape[0]}, {want})"
            raise ValueError(f"y has shape {y.shape} but the model's loss {model.loss.name!r} takes "
                             f"labels of shape {shape}, as it was fitted: pass labels of that shape, "
                             "or the loss for these labels (loss=).")
        checks_lib.check_labels(model.loss, y)
        return model.loss
    if model.offset is not None:  # before the label checks: they would see the centred labels
        given = loss if isinstance(loss, loss_lib.Loss) else per_sample.get(loss)
        _check_offset_loss(model, given)
    declared = (loss.n_outputs if isinstance(loss, loss_lib.Loss) else
                per_sample.get(loss).n_outputs if isinstance(loss, str) else None)
    resolved = checks_lib.resolve_loss(loss, y, n_outputs=model.n_outputs if declared is None else None)
    if resolved.n_outputs != model.n_outputs:
        raise ValueError(f"loss {resolved.name!r} has {resolved.n_outputs} raw output(s) per row but "
                         f"the model has {model.n_outputs}: fine-tuning keeps the trees' leaves; fit "
                         f"a model with the loss's K = {resolved.n_outputs} outputs instead.")
    return resolved


def _check_offset_loss(model: booster.Booster, loss: loss_lib.Loss) -> None:
    if not per_sample.shifts_with_labels(loss):
        raise ValueError(f"the model has a label offset (Booster.offset = {np.asarray(model.offset).tolist()}, "
                         f"subtracted from labels float32 could not hold); loss {loss.name!r} is "
                         "not a loss of the residual y - f, so it cannot be fine-tuned on the centred "
                         "labels: use squared_error, absolute_error, huber or quantile, or fit y on "
                         "a scale float32 holds.")


def _labels(y, model: booster.Booster, n: int, name: str = "y", x_name: str = "X",
            columns: Optional[int] = None, warn: bool = True) -> np.ndarray:
    """Checked float32 labels (``columns`` as :func:`jboost.data.labels.as_labels`'s), centred by
    the model's label offset in float64 (as ``fit`` did)."""
    classes = getattr(model, "classes", None)
    if classes is not None:  # labels as the model was fitted on (strings, {-1, 1}, ...)
        y = labels.class_codes(tabular.series_values(y), classes.array, name)
    checked = labels.as_labels(y, n, name, x_name, warn=warn and model.offset is None,
                                    columns=columns)
    if model.offset is None:
        return checked
    if checked.ndim != np.ndim(model.offset) + 1:  # one offset per label column
        raise ValueError(f"{name} has shape {checked.shape} but the model's label offset is for "
                         f"labels of shape ({n},{'' if np.ndim(model.offset) == 0 else f' {np.size(model.offset)}'}): "
                         "pass labels of the shape the model was fitted on.")
    return labels.centred_labels(y, np.asarray(model.offset), n, name, x_name)


def _matrix(X, model, name: str = "X") -> np.ndarray:
    names = getattr(model, "feature_names", None)  # a DataFrame's columns matched by name
    X = tabular.as_matrix(tabular.frame_in_order(X, None if names is None else names.values,
                                                         name), name)
    tabular.predict_matrix(X, model.n_features, name)  # the feature count's one message
    return X


def _rows(model, X, y, sample_weight, base_margin, soft: bool, names=("X", "y", "sample_weight",
                                                                       "base_margin"),
          columns: Optional[int] = None, warn: bool = True) -> scores.Rows:
    x_name, y_name, w_name, m_name = names
    X = _matrix(X, model, x_name)
    n = X.shape[0]
    y = _labels(y, model, n, y_name, x_name, columns, warn)
    w = tabular.as_weights(sample_weight, n, w_name, x_name)
    margin = tabular.as_margin(base_margin, n, model.n_outputs, m_name, x_name)
    flat = family.flatten_trees(model.trees)
    return scores.Rows(jnp.asarray(y), jnp.asarray(w), None if margin is None else jnp.asarray(margin),
                 None if soft else scores.leaf_indices(flat, X), jnp.asarray(X.T) if soft else None)


def _check_temperature(temperature):
    if callable(temperature):
        return jnp.float32(1.0), temperature
    if temperature is None or isinstance(temperature, bool):
        raise TypeError(f"temperature must be a positive number or a schedule step -> temperature "
                        f"(e.g. optax.exponential_decay); got {temperature!r}.")
    checks.check_real(temperature, "temperature", 0.0, np.inf, lo_open=True)
    return jnp.asarray(temperature, jnp.float32), None


def _check_optimizer(optimizer) -> None:
    if not (callable(getattr(optimizer, "init", None)) and callable(getattr(optimizer, "update", None))):
        raise TypeError(f"optimizer must be an optax GradientTransformation (e.g. optax.adam(1e-3), "
                        f"optax.sgd(0.1), optax.lbfgs()); got {type(optimizer).__name__}"
                        f"{f' {optimizer!r}' if isinstance(optimizer, (int, float)) else ''}.")
    try:
        hash(optimizer)
    except TypeError:
        raise TypeError("optimizer must be hashable (an optax GradientTransformation is): it is "
                        "static in the compiled loop.") from None


def objective(model: booster.Booster, X, y, loss=None, *, sample_weight=None, base_margin=None,
              soft: bool = False, temperature: Any = 0.1, l2: Any = 0.0):
    """The fine-tuning objective as a pure function and its starting point: ``(fn, params)``,
    ``fn(params: Params) -> scalar`` (docs/finetune.md) and the model's own
    :class:`~jboost.fine_tuning.scores.Params`. Arguments as :func:`finetune`."""
    model = _check_model(model, soft)
    y_np = _labels(y, model, _matrix(X, model).shape[0])
    loss = _resolve_loss(loss, model, y_np)
    temp, schedule = _check_temperature(temperature)
    if schedule is not None:
        raise TypeError("objective takes one temperature (a number), not a schedule.")
    checks.check_real(l2, "l2", 0.0, np.inf)
    rows = _rows(model, X, y, sample_weight, base_margin, soft, warn=False)  # warned above
    st = scores.soft_structure(model) if soft else None
    params0 = scores.initial_params(model, st)
    l2 = jnp.asarray(l2, jnp.float32)

    def fn(params: scores.Params):
        return scores.penalised_loss(params, rows, loss, st, temp, l2, params0.leaf_values)[0]

    return fn, params0


def soft_predict(model: booster.Booster, X, temperature: Any, base_margin=None) -> jax.Array:
    """Raw scores of the model with sigmoid splits at ``temperature`` (``soft=True``'s model),
    shaped as :func:`jboost.predict`'s, which it tends to as ``temperature -> 0``."""
    model = _check_model(model, soft=True)
    X = _matrix(X, model)
    temp, schedule = _check_temperature(temperature)
    if schedule is not None:
        raise TypeError("soft_predict takes one temperature (a number), not a schedule.")
    st = scores.soft_structure(model)
    raw = scores.soft_scores(scores.initial_params(model, st), st, jnp.asarray(X.T), temp)
    margin = tabular.as_margin(base_margin, X.shape[0], model.n_outputs)
    if margin is not None:
        raw = raw + margin
    raw = base.add_offset(raw, model.offset)
    return loss_lib.as_predicted(raw, model.loss)


def finetune(model: booster.Booster, X, y, loss: Union[None, str, loss_lib.Loss, Callable],
             optimizer: optax.GradientTransformation, *, n_steps: int, sample_weight=None,
             base_margin=None, eval_set=None, eval_base_margin=None, key: Any = None,
             batch_size: Optional[int] = None, soft: bool = False, temperature: Any = None,
             l2: Any = 0.0, restore_best: bool = False, return_curves: bool = False):
    """Refit every leaf value and the baseline (``soft=True``: the thresholds too) of a fitted
    :class:`jboost.Booster` jointly with an optax optimizer: ``n_steps`` steps on
    ``jboost.fine_tuning.tune.objective`` in one ``lax.scan`` (post-processing by regression on the
    base learners, Friedman and Popescu 2003). See docs/finetune.md.

    Args:
      model: one :class:`jboost.Booster`. X, y: the rows and labels, as :func:`jboost.fit`'s.
      loss: ``None`` (the model's own), a built-in name, a :class:`jboost.Loss` or
        ``loss(y, raw)``, with the model's K raw outputs.
      optimizer: an optax ``GradientTransformation`` (static). n_steps: steps (static).
      sample_weight, base_margin, eval_base_margin: as :func:`jboost.fit`'s.
      eval_set: optional ``(X_valid, y_valid[, w_valid])``, monitored after every step.
      key: a seed or ``jax.random`` key for ``batch_size``'s draws (default 0).
      batch_size: ``None`` (all rows every step) or the rows drawn per step (static).
      soft: sigmoid splits whose thresholds move too (oblivious trees only).
      temperature: ``soft=True``'s temperature in units of each feature's scale (traced;
        ``None``: 0.1), or a schedule ``step -> temperature`` (static).
      l2: penalty ``l2 / 2 * sum (v - v_fitted)**2`` on the change of the leaf values (traced).
      restore_best: with ``eval_set``, return the step of lowest ``eval_set`` loss.
      return_curves: return ``(model, curves)``.

    Returns:
      A :class:`jboost.Booster` of hard trees with the tuned parameters and ``loss``; with
      ``return_curves`` also the curves (``jboost.fine_tuning.loop.Curves``).

    Raises:
      TypeError: an argument of the wrong type (the message names it).
      ValueError: an argument with an invalid value (the message names it).
      FloatingPointError: the training loss of a concrete fine-tuning became NaN or infinite.
    """
    soft = bool(soft)
    model = _check_model(model, soft)
    n_steps = checks.check_int(n_steps, "n_steps", 1, settings.MAX_ROUNDS)
    X_np = _matrix(X, model)
    n = X_np.shape[0]
    loss_obj = _resolve_loss(loss, model, _labels(y, model, n))
    _check_optimizer(optimizer)
    if temperature is not None and not soft:
        raise ValueError(f"temperature={temperature!r} applies to soft splits only: pass soft=True "
                         "with it, or leave it out.")
    temperature = 0.1 if temperature is None else temperature
    temp, schedule = _check_temperature(temperature)
    checks.check_real(l2, "l2", 0.0, np.inf)
    if loss_obj.batch:
        loss_obj = checks_lib.check_batch_objective(loss_obj, eval_set, None)
    if batch_size is not None:
        batch_size = checks.check_int(batch_size, "batch_size", 1, max(n, 1))
        if loss_obj.batch:
            raise ValueError(f"batch_size={batch_size}: loss {loss_obj.name!r} is a batch objective "
                             "(one function of every row: risk sets, query groups), which rows drawn "
                             "at random would break; use batch_size=None.")
    if restore_best and eval_set is None:
        raise ValueError("restore_best needs eval_set=(X_valid, y_valid): the best step is the one "
                         "of the lowest eval_set loss.")
    prepare.check_margins(base_margin, eval_base_margin, eval_set)
    rows = _rows(model, X_np, y, sample_weight, base_margin, soft, warn=False)  # warned above
    valid = None
    if eval_set is not None:
        if not isinstance(eval_set, (tuple, list)) or len(eval_set) not in (2, 3):
            raise TypeError("eval_set must be a tuple (X_valid, y_valid) or (X_valid, y_valid, w_valid).")
        valid = _rows(model, eval_set[0], eval_set[1], None if len(eval_set) == 2 else eval_set[2],
                      eval_base_margin, soft,
                      names=("eval_set X", "eval_set y", "eval_set weights", "eval_base_margin"),
                      columns=rows.y.shape[1] if rows.y.ndim == 2 else 0)
        checks_lib.check_labels(loss_obj, np.asarray(valid.y), "eval_set y")
    key = checks.as_key(0 if key is None else key)
    st = scores.soft_structure(model) if soft else None
    params0 = scores.initial_params(model, st)
    params, curves = loop.run_steps(params0, rows, valid, loss_obj, st, temp, jnp.asarray(l2, jnp.float32), key,
                          optimizer=optimizer, n_steps=n_steps, batch_size=batch_size,
                          schedule=schedule, restore_best=bool(restore_best))
    if not checks.is_traced(curves.train_loss):  # a concrete fine-tuning (not under vmap)
        loop.check_finite_curve(curves.train_loss)
    tuned = _model(model, params, st, loss_obj, rows, valid, X_np, eval_set)
    bad = ~((temp > 0) & (jnp.asarray(l2, jnp.float32) >= 0))  # traced settings out of domain
    if checks.is_traced(bad):
        tuned, curves = jax.tree_util.tree_map(
            lambda a: jnp.where(bad, jnp.nan, a) if jnp.issubdtype(a.dtype, jnp.floating) else a,
            (tuned, curves))
    tuned = settings.nan_outside_domains(tuned, loss_obj)  # traced loss parameters
    return (tuned, curves) if return_curves else tuned


def _model(model: booster.Booster, params: scores.Params, st, loss, rows: scores.Rows, valid, X_np,
           eval_set) -> booster.Booster:
    """The returned Booster: tuned leaves (thresholds), baseline, loss and per-round losses."""
    trees = model.trees
    lead = trees.leaf_values.shape[:-2]
    trees = trees._replace(leaf_values=params.leaf_values.reshape(trees.leaf_values.shape))
    if st is not None:
        borders = scores.moved_borders(params, st)
        # The nearest bin at or above a moved border: the smallest t with borders[f, t] >= it.
        bins = jnp.sum(model.borders[st.features] < borders[..., None], axis=-1).astype(jnp.int32)
        bins = jnp.minimum(bins, model.borders.shape[-1] - 1)
        thresholds = jnp.where(st.movable, bins, family.flatten_trees(trees).thresholds)
        trees = trees._replace(borders=borders.reshape(lead + borders.shape[-1:]),
                               thresholds=thresholds.reshape(lead + thresholds.shape[-1:]))
    # settings={}: the fitted settings no longer describe the tuned leaf values.
    tuned = model._replace(trees=trees, baseline=params.baseline, loss=loss, info={},
                           best_round=None, settings={})
    plain = tuned._replace(offset=None)  # the losses of the centred labels, in float32
    train = plain.staged(X_np, scores.round_loss, rows.y, rows.w, rows.margin, loss)
    if valid is None:
        valid_curve = jnp.full_like(train, jnp.nan)
    else:
        valid_curve = plain.staged(_matrix(eval_set[0], model, "eval_set X"), scores.round_loss,
                                   valid.y, valid.w, valid.margin, loss)
    return tuned._replace(train_loss=train, valid_loss=valid_curve)
