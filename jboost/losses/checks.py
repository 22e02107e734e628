"""Loss checks: resolving a loss against the labels, parameter domains, output shape and link,
and the diagnosis of non-finite fits.

Every entry point validates through these functions, so one mistake gets one message everywhere;
traced values are checked only when concrete. The vocabulary and the rules are in
``docs/losses.md`` ("What every entry point checks").
"""

from __future__ import annotations

import functools
import warnings
from typing import Optional

import jax
import jax.numpy as jnp
import numpy as np

from jboost import _compile, checks, devices as devices_lib
from jboost.data import labels
from jboost.losses import baselines, derivatives, links, loss as loss_lib, per_sample, purity


def resolve_loss(loss, y: np.ndarray, n_outputs: Optional[int] = None,
                 task: Optional[str] = None) -> loss_lib.Loss:
    """The :class:`jboost.Loss` for ``loss`` (name, Loss or function), checked against labels ``y``.

    K-class losses take K from the labels (class 0 absent: a ``UserWarning``; K checked against
    memory). Also checked: parameter domains, one scalar per sample, the link, the labels; the
    function is pinned by the purity rule (:func:`jboost.losses.purity.pin_globals`;
    ``docs/losses.md``).
    """
    if task is not None:
        checks.check_choice(task, "task", loss_lib.TASKS)
    if n_outputs is not None:
        n_outputs = checks.check_int(n_outputs, "n_outputs", 1, 1 << 20)
    resolved = per_sample.get(loss, n_outputs=n_outputs, task=task)
    if np.ndim(y) == 2 and resolved.task == "multiclass":
        raise ValueError(f"y has shape {np.shape(y)}: loss {resolved.name!r} takes one column of "
                         "class labels 0..K-1. For several independent 0/1 labels (multi-label) "
                         "use 'binomial_deviance' with y of shape (n, C).")
    if resolved.n_outputs is None:
        if resolved.task != "multiclass":
            raise ValueError(f"n_outputs must be given for loss {resolved.name!r}.")
        if np.any(y != np.round(y)) or np.any(y < 0):
            raise ValueError(f"y must hold integer class labels 0..K-1 for loss {resolved.name!r}.")
        k = int(y.max()) + 1
        if k < 2:
            raise ValueError(f"y holds a single class; loss {resolved.name!r} needs at least 2.")
        if k > 1 << 20:
            raise ValueError(f"y has maximum {y.max()}: K = max(y) + 1 = {k} classes (from the "
                             f"labels' maximum) is more than {1 << 20}; map the labels to 0..K-1.")
        labels.warn_class_zero_absent(y, "y")
        devices_lib.check_memory(devices_lib.fit_bytes(y.shape[0], 1, 1, 3, k, dense_hessian=resolved.hessian != "unit"),
                     cause=f"K = max(y) + 1 = {k} classes, from the labels' maximum",
                     detail=f"{y.shape[0]} rows x K raw scores, gradients, hessians"
                     f"{' and K x K autodiff hessians' if resolved.hessian != 'unit' else ''} "
                     "(a lower bound: one feature, depth 1, 3 bins)")
        resolved = resolved.replace(n_outputs=k)
    elif resolved.task == "multiclass" and resolved.n_outputs < 2:
        raise ValueError(f"loss {resolved.name!r} has task='multiclass' but n_outputs="
                         f"{resolved.n_outputs}: pass n_outputs=K, the number of classes (raw "
                         "scores per row), to jboost.Loss or to fit.")
    if np.ndim(y) == 2:
        resolved = _with_label_columns(resolved, y, n_outputs)
    elif resolved.batch:
        raise ValueError(f"loss {resolved.name!r} is a {resolved.task} objective: y must be "
                         f"(n, 2) structured labels ({_STRUCTURE.get(resolved.task, 'see its docstring')}); "
                         f"got shape {np.shape(y)}.")
    check_loss_params(resolved)
    resolved = purity.pin_globals(resolved)
    check_loss_output(resolved)
    check_link(resolved)
    check_labels(resolved, y)
    if task is None and callable(loss) and not isinstance(loss, loss_lib.Loss):
        warn_if_binary_labels(resolved, y)
    return resolved


def warn_if_binary_labels(loss: loss_lib.Loss, y) -> None:
    """A ``UserWarning`` when a custom loss given as a bare function (task: regression, by
    default) is fitted on labels that are all 0 or 1, both present: the model would be a
    regression of them, which a user fitting, say, a focal loss does not expect."""
    y = np.asarray(y)
    if loss.task != "regression" or y.ndim != 1 or not y.size:
        return
    if np.isin(y, (0, 1)).all() and 0 < np.count_nonzero(y) < y.size:
        warnings.warn(
            f"loss {loss.name!r} was given no task and y holds only 0 and 1: this fits a "
            "regression of the 0/1 labels (predict gives raw scores; predict_proba refuses). For a "
            f"binary classifier pass task='binary' (jboost.fit(..., task='binary') or "
            f"jboost.Loss({loss.name}, task='binary'): raw scores are log-odds, probabilities "
            "their sigmoid); to fit a regression and silence this, pass task='regression'.",
            UserWarning, stacklevel=4)


def check_batch_objective(loss: loss_lib.Loss, eval_set, devices) -> loss_lib.Loss:
    """A batch objective's loss to fit: all rows on one device (``devices=None``), and a
    group-structured one's ``max_group`` covering the ``eval_set``'s query groups too.
    """
    if devices is not None:
        raise ValueError(f"devices={devices!r}: loss {loss.name!r} is a batch objective (one function "
                         "of every row: risk sets, query groups), which needs all rows on one device; "
                         "fit with devices=None.")
    if loss.max_group is not None and isinstance(eval_set, (tuple, list)) and len(eval_set) >= 2:
        yv = np.asarray(eval_set[1])
        if yv.ndim == 2 and yv.shape[1] >= 2 and yv.shape[0] > 0:
            query_starts(yv[:, 1], "eval_set y")
            loss = loss.replace(max_group=max(loss.max_group, max_group_size(yv[:, 1])))
    return loss


_STRUCTURE = {"survival": "time > 0, event 0/1", "ranking": "relevance >= 0, query id"}


def _with_label_columns(loss: loss_lib.Loss, y: np.ndarray, n_outputs) -> loss_lib.Loss:
    """``loss`` for vector labels ``y (n, C)``: a batch objective reads its structured columns, a
    built-in scalar loss is applied per column, a custom loss gets each row's ``(C,)`` label.
    """
    c = int(y.shape[1])
    own = getattr(loss.fn, "check_labels", None)  # a loss of one label per row refuses (n, C) here
    if callable(own) and not loss.batch:
        own(y, "y")
    if loss.batch:
        if loss.hessian_diag == "groups" or loss.task == "ranking":
            loss = loss.replace(max_group=max_group_size(y[:, 1]) if y.shape[1] >= 2 else 1)
        return loss.replace(label_columns=c)
    if loss.adaptive_huber_alpha:
        raise ValueError(f"y has shape {y.shape}: the adaptive Huber loss (huber(alpha=)) takes one "
                         "label column; use a fixed delta (jboost.losses.huber(delta)) or fit one "
                         "model per column.")
    given = n_outputs if n_outputs is not None else (loss.n_outputs if loss.n_outputs not in (None, 1)
                                                      else None)
    if given is not None and int(given) != c:
        raise ValueError(f"n_outputs={given} disagrees with y's {c} columns: with y of shape "
                         f"(n, C) every column is one output (n_outputs = C = {c}); pass "
                         f"n_outputs={c} or leave it out.")
    if loss.per_column or per_sample.is_built_in(loss):
        if loss.label_columns is not None and loss.label_columns != c:
            raise ValueError(f"loss {loss.name!r} was made for {loss.label_columns} label columns; "
                             f"y has {c}.")
        return loss_lib.columnwise(loss, c)
    return loss.replace(label_columns=c, n_outputs=c)


def max_group_size(qid) -> int:
    """The largest query group's number of rows (contiguous ids, :func:`jboost.losses.query_starts`)."""
    qid = np.asarray(qid)
    if qid.size == 0:
        return 1
    starts = query_starts(qid)
    return int(np.max(np.diff(np.r_[starts, qid.shape[0]])))


def check_loss_param(loss: loss_lib.Loss, name: str, value, label: Optional[str] = None) -> None:
    """A concrete value of parameter ``name`` must be finite and inside the loss's declared domain;
    tracers pass. ``label`` names where the value came from (e.g. a sweep's grid key).
    """
    if checks.is_traced(value) or value is None:
        return
    where = f"{label}: " if label else ""
    arr = np.asarray(value, np.float64)
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{where}loss {loss.name!r} parameter {name} must be finite; got "
                         f"{arr.ravel()[~np.isfinite(arr.ravel())][0]}.")
    domain = loss.domains.get(name)
    if domain is not None:
        bad = ~domain.contains(arr)
        if bad.any():
            raise ValueError(f"{where}loss {loss.name!r} parameter {name}={arr.ravel()[bad.ravel()][0]:g} "
                             f"must be in {domain}.")


def check_loss_params(loss: loss_lib.Loss) -> None:
    """Every concrete parameter of ``loss`` inside its declared domain."""
    for name, value in loss.params.items():
        check_loss_param(loss, name, value)


# ---- After a concrete fit: no silent NaN model, no silent all-zero model -------------------


@_compile.jit
def _at_baseline(loss, y, w, init_raw, margin=None):
    """At the baseline: whether any weighted row has a non-zero gradient, and how many rows' loss
    and gradient are not finite.
    """
    raw = jnp.broadcast_to(init_raw, (y.shape[0], init_raw.shape[-1]))
    if margin is not None:
        raw = margin + raw
    used = w > 0
    if loss.batch:  # one value of the whole batch: 1 if it is not finite
        value, g = jax.value_and_grad(lambda r: loss_lib.total_loss(loss, y, r, w))(raw)
        bad_loss = jnp.sum(~jnp.isfinite(value))
    else:
        g, _ = derivatives.grad_hess(loss, y, raw)
        bad_loss = jnp.sum(~jnp.isfinite(loss_lib.per_sample_losses(loss, y, raw)) & used)
    bad_grad = jnp.sum(~jnp.all(jnp.isfinite(g), axis=-1) & used)
    return jnp.any((g != 0) & used[:, None]), bad_loss, bad_grad


def check_finite_fit(train_loss, loss, data, init_raw) -> None:
    """Raise ``FloatingPointError`` when a concrete fit's training loss curve is not finite, naming
    the first such round and the likely cause.
    """
    curve = np.asarray(train_loss)
    finite = np.isfinite(curve)
    if finite.all():
        return
    first = int(np.argmax(~finite.reshape(-1, curve.shape[-1]).all(axis=0)))
    base = np.asarray(init_raw)
    _, bad_loss, bad_grad = (np.asarray(v) for v in _at_baseline(loss, data.y, data.w, init_raw, data.margin))
    n = int(np.sum(np.asarray(data.w) > 0))
    if not np.all(np.isfinite(base)):
        cause = (f"the baseline (optimal constant raw score) of loss {loss.name!r} is "
                 f"{base.tolist()}: check the labels and the loss's baseline")
    elif bad_loss.max() > 0 or bad_grad.max() > 0:
        cause = (f"loss {loss.name!r} at the labels and the baseline is not finite for "
                 f"{int(bad_loss.max())} of {n} rows (its gradient for {int(bad_grad.max())}): "
                 "check the loss function for these labels (a too large learning_rate is the "
                 "other possible cause)")
    else:
        cause = (f"loss {loss.name!r} is finite at the baseline, so the rounds diverged: "
                 "learning_rate too large, or the loss overflows at large raw scores")
        y = np.asarray(data.y, np.float64)
        scale = float(np.max(np.abs(y - np.median(y)))) if y.size else 0.0
        if loss.task == "regression" and scale > 1e15:
            cause += (f"; here the labels spread {scale:.3g} from their median, and float32 "
                      f"(max {float(np.finfo(np.float32).max):.3g}) overflows on their squares: "
                      "divide y by a scale (e.g. its standard deviation) and multiply the "
                      "predictions back")
    raise FloatingPointError(f"the training loss is not finite from round {first} on "
                             f"(Booster.train_loss[{first}] = {curve.reshape(-1, curve.shape[-1])[:, first].tolist()[:3]}); "
                             f"likely cause: {cause}.")


def warn_if_no_gradient(loss: loss_lib.Loss, data, init_raw) -> None:
    """Warn (``UserWarning``) when a custom loss's gradient is zero at every row at the baseline
    ``init_raw``; skipped for built-in losses and traced values (``data``: ``y``, ``w``, ``margin``).
    """
    if per_sample.is_built_in(loss) or any(checks.is_traced(v) for v in jax.tree_util.tree_leaves(
            (init_raw, loss.params))):
        return
    moves, _, _ = _at_baseline(loss, data.y, data.w, init_raw, data.margin)
    if not bool(moves):
        warnings.warn(f"the gradient of loss {loss.name!r} is zero at every row at the baseline "
                      f"{np.asarray(init_raw).tolist()}: nothing will be learned (is the loss "
                      "piecewise constant, e.g. jnp.round, or does it stop gradients?).",
                      UserWarning, stacklevel=2)


def check_finite_fits(train_loss, loss: loss_lib.Loss, data, baselines, *, n_fitted=None,
                      names=None, what: str = "models") -> None:
    """:func:`check_finite_fit` for a batch of concrete fits (``train_loss (..., n_rounds)``,
    ``baselines (..., K)``), then :func:`warn_diverged_fits`; skipped when traced.

    Args:
      n_fitted: the rounds each model fitted before it stopped early (later rounds unchecked).
      names: ``names(index)`` names the first bad model (``"bag 1"``).
      what: the batch's models in the message (``"bags"``).
    """
    if any(checks.is_traced(v) for v in jax.tree_util.tree_leaves((train_loss, baselines, n_fitted,
                                                             loss.params))):
        return
    curve = np.asarray(train_loss)
    lead = curve.shape[:-1]
    curves = curve.reshape(-1, curve.shape[-1])
    finite = np.isfinite(curves)
    if n_fitted is not None:
        finite |= np.arange(curves.shape[-1])[None, :] >= np.asarray(n_fitted).reshape(-1, 1)
    bad = np.flatnonzero(~finite.all(axis=1))
    if not bad.size:  # finite: a warning for the diverged ones
        warn_diverged_fits(train_loss, loss, data, baselines, n_fitted=n_fitted, names=names,
                           what=what)
        return
    i = int(bad[0])
    base = np.asarray(baselines).reshape(curves.shape[0], -1)[i]
    try:
        fitted = curves[i] if n_fitted is None else curves[i][:int(np.asarray(n_fitted).reshape(-1)[i])]
        check_finite_fit(fitted, loss, data, jnp.asarray(base, jnp.float32))
    except FloatingPointError as e:
        where = names(np.unravel_index(i, lead)) if names is not None else f"model {i}"
        raise FloatingPointError(f"{where} ({bad.size} of {curves.shape[0]} {what} not finite): "
                                 f"{e}") from None


# ---- Divergence: a loss that rises by orders of magnitude over its start -------------------

DIVERGENCE_FACTOR = 10.0
"""A loss curve has diverged when some round's mean loss ``L_t`` exceeds its start by this factor:
``L_t > L_0 + (DIVERGENCE_FACTOR - 1) * S``. ``L_0`` is the weighted mean loss at the baseline
(before the first round; ``Booster.train_loss[0]`` is after it) and ``S`` the weighted mean of
the per-sample losses' absolute values there (a batch objective's ``|L_0|``), at least
:data:`DIVERGENCE_FLOOR`. For a non-negative loss ``S = L_0``: ``L_t > 10 * L_0``; a loss that
can be negative (a negative log-likelihood) must rise by 9 times its rows' mean absolute loss.
See docs/fitting.md ("Divergence")."""

DIVERGENCE_FLOOR = 1e-12
"""The smallest scale ``S`` of :data:`DIVERGENCE_FACTOR`'s rule: a start at (nearly) zero loss
(constant labels fitted exactly) does not flag float32 rounding."""


def start_and_scale(loss: loss_lib.Loss, y, w, init_raw, margin=None) -> jax.Array:
    """``(2,)`` float32: the start ``L_0`` and scale ``S`` (before the floor) of
    :data:`DIVERGENCE_FACTOR`'s rule on rows ``y, w`` at the baseline ``init_raw (K,)`` (plus
    the rows' ``margin (n, K)``); NaN when no row has weight. Traceable.
    """
    raw = jnp.broadcast_to(jnp.asarray(init_raw, jnp.float32), (y.shape[0], init_raw.shape[-1]))
    if margin is not None:
        raw = margin + raw
    w = w.astype(jnp.float32)
    if loss.adaptive_huber_alpha:  # the first round's delta, as the engine's step computes it
        delta = baselines.weighted_quantile(jnp.abs(y - raw[:, 0]), w, loss.params["alpha"])
        loss = loss.with_params(delta=jnp.maximum(delta, 1e-12))
    if loss.batch:
        total = loss_lib.total_loss(loss, y, raw, w)
        size = jnp.abs(total)
    else:
        per_row = jnp.where(w > 0, loss_lib.per_sample_losses(loss, y, raw), 0.0)
        total, size = jnp.sum(w * per_row), jnp.sum(w * jnp.abs(per_row))
    weight = jnp.sum(w)
    return jnp.where(weight > 0, jnp.stack([total, size]) / weight, jnp.nan)


@_compile.jit
def _starts(loss, rows, init_raw):
    """``(2, 2)``: :func:`start_and_scale` of the training rows and of the validation rows
    (NaN: none); ``rows``: ``(y, w, margin, y_valid, w_valid, margin_valid)``."""
    y, w, margin, y_valid, w_valid, margin_valid = rows
    train = start_and_scale(loss, y, w, init_raw, margin)
    if y_valid.shape[0] == 0:
        return jnp.stack([train, jnp.full((2,), jnp.nan, jnp.float32)])
    return jnp.stack([train, start_and_scale(loss, y_valid, w_valid, init_raw, margin_valid)])


@_compile.jit
def _train_starts(loss, y, w, margin, baselines_):
    """``(B, 2)``: :func:`start_and_scale` of the rows at each of ``baselines_ (B, K)``."""
    return jax.lax.map(lambda b: start_and_scale(loss, y, w, b, margin), baselines_)


def _padded(y, w, margin, batch: bool):
    """``(y, w, margin)`` padded to a power-of-two row count (weight 0, the first row repeated),
    so that one compiled :func:`_starts` serves tables of many sizes; as given for a batch
    objective (a function of every row), no rows, or arrays not all on this host."""
    n = int(np.shape(y)[0])
    if batch or n == 0 or not all(getattr(a, "is_fully_addressable", True)
                                  for a in (y, w, margin) if a is not None):
        return y, w, margin
    extra = max(64, 1 << (n - 1).bit_length()) - n

    def pad(a, fill=None):
        a = np.asarray(a)
        more = np.repeat(a[:1], extra, axis=0) if fill is None else np.full((extra,) + a.shape[1:],
                                                                           fill, a.dtype)
        return np.concatenate([a, more])

    return pad(y), pad(w, 0), None if margin is None else pad(margin)


def divergence_thresholds(starts, scales) -> np.ndarray:
    """The losses above which curves starting at ``starts`` with scales ``scales`` have
    diverged: ``start + (DIVERGENCE_FACTOR - 1) * max(scale, DIVERGENCE_FLOOR)`` (NaN: never)."""
    scales = np.maximum(np.asarray(scales, np.float64), DIVERGENCE_FLOOR)
    return np.asarray(starts, np.float64) + (DIVERGENCE_FACTOR - 1.0) * scales


def _fitted(curves, n_fitted):
    """``curves (..., R)`` as float64, rounds from ``n_fitted (...)`` on NaN (not fitted)."""
    curves = np.array(curves, np.float64)
    if n_fitted is not None:
        late = np.arange(curves.shape[-1]) >= np.asarray(n_fitted)[..., None]
        curves[np.broadcast_to(late, curves.shape)] = np.nan
    return curves


def first_diverged(curves, starts, scales, n_fitted=None) -> np.ndarray:
    """``(...)`` int: the first round of each curve ``(..., R)`` above its
    :func:`divergence_thresholds`, -1 where none. NaN rounds (and with ``n_fitted (...)`` the
    rounds from it on) never count; NaN starts never diverge."""
    curves = _fitted(curves, n_fitted)
    if curves.shape[-1] == 0:  # no round (a fit whose checkpoint held every round)
        return np.full(curves.shape[:-1], -1)
    with np.errstate(invalid="ignore"):
        above = curves > divergence_thresholds(starts, scales)[..., None]
    return np.where(above.any(axis=-1), np.argmax(above, axis=-1), -1)


def first_non_finite(curves, n_fitted=None) -> np.ndarray:
    """``(...)`` int: the first round of each curve ``(..., R)`` that is NaN or infinite, -1
    where none (with ``n_fitted (...)``: among the rounds fitted)."""
    curves = np.asarray(curves, np.float64)
    bad = ~np.isfinite(curves)
    if n_fitted is not None:
        bad &= np.arange(curves.shape[-1]) < np.asarray(n_fitted)[..., None]
    return np.where(bad.any(axis=-1), np.argmax(bad, axis=-1), -1)


def divergence_message(name: str, ref: str, curve, start: float, scale: float, first: int) -> str:
    """A curve's divergence in words: ``name`` (``"training loss"``) and ``ref`` (where to read it:
    ``"train_loss"``), its start, the ``first`` round above the threshold, its peak and last
    values."""
    curve = np.asarray(curve, np.float64).reshape(-1)
    finite = np.flatnonzero(np.isfinite(curve))
    peak = int(finite[np.argmax(curve[finite])])
    last = int(finite[-1])
    return (f"the {name} diverged: it rose from {start:.4g} at the baseline to {curve[first]:.4g} "
            f"at round {first} ({ref}[{first}]), above the divergence threshold "
            f"{float(divergence_thresholds(start, scale)):.4g} = start + "
            f"{DIVERGENCE_FACTOR - 1:g} x {max(scale, DIVERGENCE_FLOOR):.4g} (DIVERGENCE_FACTOR = "
            f"{DIVERGENCE_FACTOR:g}; {max(scale, DIVERGENCE_FLOOR):.4g}: the mean absolute loss "
            f"at the baseline); peak {curve[peak]:.4g} at round {peak}, last {curve[last]:.4g} at "
            f"round {last}")


def _diverged_text(train, valid, starts, n_fitted=None) -> str:
    """The divergence of a fit's training and validation curves in words ('' when neither);
    ``starts (2, 2)``: :func:`start_and_scale` of each."""
    parts = []
    for name, ref, curve, (start, scale) in (("training loss", "train_loss", train, starts[0]),
                                             ("validation loss", "valid_loss", valid, starts[1])):
        if curve is None:
            continue
        curve = _fitted(np.asarray(curve).reshape(-1), n_fitted)
        first = int(first_diverged(curve, start, scale))
        if first >= 0:
            parts.append(divergence_message(name, ref, curve, float(start), float(scale), first))
    return "; ".join(parts)


def _fix(learning_rate=None) -> str:
    """What to change when a fit diverged."""
    lr = learning_rate is not None and np.isfinite(float(np.asarray(learning_rate)))
    here = f" (here learning_rate={float(np.asarray(learning_rate)):g})" if lr else ""
    return (f". The model is finite but useless: lower learning_rate{here}; a validation loss "
            "that diverges alone also calls for fewer rounds (early_stopping_rounds). See "
            "docs/fitting.md, 'Divergence' (to silence: warnings.filterwarnings('ignore', "
            "message='.*diverged')).")


def warn_if_diverged(train_loss, valid_loss, loss: loss_lib.Loss, data, init_raw, *,
                     n_fitted=None, learning_rate=None, checked=None):
    """Warn when a fit's training loss, or its validation loss, diverged
    (:data:`DIVERGENCE_FACTOR`'s rule).

    A concrete fit is checked here; a traced one (the caller's ``jax.vmap`` / ``jax.jit``) by a
    callback when its program runs, which names each ``vmap`` member by its index and also warns
    for a member whose training loss is not finite (a concrete fit raises, see
    :func:`check_finite_fit`).

    Args:
      train_loss, valid_loss: ``(R,)`` the fit's curves (``valid_loss`` NaN: no validation rows).
      loss: the fit's loss (its parameters as at the first round).
      data: the rows fitted: ``y``, ``w``, ``margin`` and ``y_valid``, ``w_valid``,
        ``margin_valid``.
      init_raw: ``(K,)`` the baseline.
      n_fitted: with early stopping, the rounds fitted (the later ones are not checked).
      learning_rate: the fit's learning rate, named in the warning.
      checked: traced, ``False`` for a member not to check (its results NaN, warned elsewhere).

    Returns:
      ``train_loss``; traced, tied to the callback (so that the program runs it).

    Warns:
      UserWarning: naming the curve, its start, the round it crossed the threshold, its peak and
        last values, and ``learning_rate``.
    """
    rows = (data.y, data.w, data.margin, data.y_valid, data.w_valid, data.margin_valid)
    if not any(checks.is_traced(v) for v in jax.tree_util.tree_leaves(
            (train_loss, valid_loss, init_raw, loss.params, learning_rate, n_fitted, checked))):
        rows = (_padded(*rows[:3], loss.batch) + _padded(*rows[3:], loss.batch))
        starts = np.asarray(_starts(loss, rows, jnp.asarray(init_raw, jnp.float32)), np.float64)
        text = _diverged_text(train_loss, valid_loss, starts, n_fitted)
        if text:
            warnings.warn(text[0].upper() + text[1:] + _fix(learning_rate), UserWarning,
                          stacklevel=3)
        return train_loss
    n_rounds = np.shape(train_loss)[-1]
    args = (train_loss, valid_loss, _starts(loss, rows, init_raw),
            jnp.float32(jnp.nan) if learning_rate is None else learning_rate,
            jnp.int32(n_rounds) if n_fitted is None else n_fitted,
            jnp.bool_(True) if checked is None else checked, dict(loss.params))
    tie = jax.pure_callback(functools.partial(_report_members, loss_name=loss.name),
                            jax.ShapeDtypeStruct((), jnp.float32), *args,
                            vmap_method="broadcast_all")
    return train_loss + tie


def _report_members(train, valid, starts, learning_rate, n_fitted, checked, params, *,
                    loss_name: str):
    """Host side of a traced :func:`warn_if_diverged` (a ``jax.pure_callback`` seeing every
    ``vmap`` member at once: leading axes on every argument); zeros, one per member."""
    train = np.asarray(train, np.float64)
    lead = train.shape[:-1]
    for idx in np.ndindex(*lead):
        if not bool(np.asarray(checked)[idx]):
            continue
        where = (f"jax.vmap member {idx[0] if len(idx) == 1 else idx}" if lead
                 else "this traced fit")
        values = [f"learning_rate={float(np.asarray(learning_rate)[idx]):g}"] if np.isfinite(
            np.asarray(learning_rate)[idx]) else []
        values += [f"loss {loss_name!r} {k}={np.asarray(v)[idx].tolist()}"
                   for k, v in params.items()]
        where += f" ({', '.join(values)})" if values else ""
        fitted = int(np.asarray(n_fitted)[idx])
        bad = int(first_non_finite(train[idx], fitted))
        if bad >= 0:
            warnings.warn(f"{where}: the training loss is not finite from round {bad} on "
                          f"(train_loss[{bad}] = {train[idx][bad]}): this member's model is not "
                          "finite (the same fit with concrete settings raises FloatingPointError "
                          "with a diagnosis). Likely cause: learning_rate too large, or a loss "
                          "parameter that makes the loss NaN at these labels.", UserWarning,
                          stacklevel=2)
            continue
        text = _diverged_text(train[idx], np.asarray(valid)[idx], np.asarray(starts)[idx], fitted)
        if text:
            warnings.warn(f"{where}: {text}{_fix()}", UserWarning, stacklevel=2)
    return np.zeros(lead, np.float32)


def warn_diverged_fits(train_loss, loss: loss_lib.Loss, data, baselines_, *, n_fitted=None,
                       names=None, what: str = "models") -> None:
    """:func:`warn_if_diverged` for a batch of concrete fits (``train_loss (..., R)``, each fit's
    baseline ``baselines_ (..., K)``) on the rows of ``data``, one warning naming the first
    diverged fit and how many did; skipped when traced.

    Args:
      n_fitted: ``(...)`` the rounds each fit fitted before it stopped early.
      names: ``names(index)`` names a fit (``"bag 1"``); default ``"model i"``.
      what: the batch's fits in the message (``"bags"``).

    Warns:
      UserWarning: as :func:`warn_if_diverged` (a fit's start: its loss at its baseline over
        ``data``'s rows with their weights).
    """
    if any(checks.is_traced(v) for v in jax.tree_util.tree_leaves((train_loss, baselines_, n_fitted,
                                                                   loss.params))):
        return
    curves = np.asarray(train_loss, np.float64)
    lead = curves.shape[:-1]
    curves = curves.reshape(-1, curves.shape[-1])
    base = jnp.asarray(np.asarray(baselines_).reshape(curves.shape[0], -1), jnp.float32)
    starts = np.asarray(_train_starts(loss, *_padded(data.y, data.w, data.margin, loss.batch),
                                      base), np.float64)
    fitted = None if n_fitted is None else np.asarray(n_fitted).reshape(-1)
    first = first_diverged(curves, starts[:, 0], starts[:, 1], fitted)
    bad = np.flatnonzero(first >= 0)
    if not bad.size:
        return
    i = int(bad[0])
    name = (lambda j: f"model {j}") if names is None else (
        lambda j: names(np.unravel_index(j, lead)))
    others = ", ".join(name(int(j)) for j in bad[1:4]) + (", ..." if bad.size > 4 else "")
    text = divergence_message("training loss", "train_loss", _fitted(
        curves[i], None if fitted is None else fitted[i]), float(starts[i, 0]),
        float(starts[i, 1]), int(first[i]))
    warnings.warn(f"{name(i)} ({bad.size} of {curves.shape[0]} {what} diverged"
                  f"{'; also ' + others if others else ''}): {text}{_fix()}", UserWarning,
                  stacklevel=3)


def check_loss_output(loss: loss_lib.Loss) -> None:
    """``loss(y, raw)`` must return one scalar per sample (checked abstractly by ``jax.eval_shape``)."""
    k = loss.n_outputs
    if k is None or any(checks.is_traced(v) for v in jax.tree_util.tree_leaves(loss.params)):
        return
    c = loss.label_columns
    if loss.batch:
        n0 = 4
        raw_shape = (n0,) if k == 1 else (n0, k)
        out = jax.eval_shape(lambda y, raw, w: loss_lib.batch_value(loss, y, raw, w),
                             jax.ShapeDtypeStruct((n0, c or 2), jnp.float32),
                             jax.ShapeDtypeStruct((n0, k), jnp.float32),
                             jax.ShapeDtypeStruct((n0,), jnp.float32))
        if getattr(out, "shape", None) != ():
            raise ValueError(f"a batch objective must return one scalar (the weighted sum over the "
                             f"rows); loss {loss.name!r} called with y ({n0}, {c}), raw {raw_shape} "
                             f"and w ({n0},) returned shape {getattr(out, 'shape', None)}.")
        return
    f = loss_lib.vector_fn(loss)
    out = jax.eval_shape(f, jax.ShapeDtypeStruct(() if c is None else (c,), jnp.float32),
                         jax.ShapeDtypeStruct((k,), jnp.float32), loss.params)
    shape = getattr(out, "shape", None)
    if shape != ():
        raw = "a scalar raw score" if k == 1 else f"raw scores of shape ({k},)"
        label = "one label" if c is None else f"a label vector of shape ({c},) (y has {c} columns)"
        hint = ("" if c is None else ": sum over the columns (jnp.sum), or apply a loss of a "
                f"scalar label to each column, jboost.losses.columnwise(jboost.Loss(fn), {c})")
        raise ValueError(f"the loss must return a scalar per sample; loss {loss.name!r} called "
                         f"with {label} and {raw} returned shape {shape}{hint}.")


def check_link(loss: loss_lib.Loss) -> None:
    """A classification loss's ``link`` must give ``(n, n_classes)`` class probabilities (in [0, 1],
    rows summing to 1); checked on a few raw scores in [-2, 2] when the parameters are concrete.
    """
    k = loss.n_outputs
    if (loss.task not in loss_lib.CLASSIFICATION or k is None or loss.batch or loss.label_columns is not None
            or links.gives_probabilities(loss.link, k)  # jboost's own links: known to be right
            or any(checks.is_traced(v) for v in jax.tree_util.tree_leaves(loss.params))):
        return
    n0 = 3
    raw = jnp.linspace(-2.0, 2.0, n0 * k, dtype=jnp.float32).reshape(n0, k)
    raw = raw[:, 0] if k == 1 else raw
    n_classes = 2 if k == 1 else k
    name = getattr(loss.link, "__name__", repr(loss.link))
    fix = ("a link returning (n, n_classes) probabilities, e.g. jboost.losses.sigmoid_link for one "
           "raw score per row, softmax_link for K; or leave link= out (the task's link)")
    try:
        out = np.asarray(loss.link(raw, **loss.params), np.float64)
    except Exception as e:  # noqa: BLE001 - any failure of the user's link on valid raw scores
        raise ValueError(f"link={name} of loss {loss.name!r} (task {loss.task!r}) failed on raw "
                         f"scores of shape {raw.shape}: {type(e).__name__}: {e}. Pass {fix}.") from e
    if out.shape != (n0, n_classes):
        raise ValueError(f"link={name} of loss {loss.name!r} (task {loss.task!r}, {k} raw score(s) "
                         f"per row) returned shape {out.shape} for raw scores of shape {raw.shape}; "
                         f"predict_proba needs (n, {n_classes}) class probabilities. Pass {fix}.")
    if not (np.all(np.isfinite(out)) and np.all(out >= 0) and np.all(out <= 1)
            and np.allclose(out.sum(axis=-1), 1.0, atol=1e-4)):
        raise ValueError(f"link={name} of loss {loss.name!r} (task {loss.task!r}) must return class "
                         f"probabilities (in [0, 1], each row summing to 1); for raw scores in "
                         f"[-2, 2] it returned values in [{out.min():.3g}, {out.max():.3g}] with row "
                         f"sums in [{out.sum(-1).min():.3g}, {out.sum(-1).max():.3g}]. Pass {fix}.")


def query_starts(qid: np.ndarray, name: str = "y") -> np.ndarray:
    """The first row of each query group of the ids ``qid (n,)``, whose rows must be contiguous;
    raises ``ValueError`` naming ``name`` otherwise.
    """
    qid = np.asarray(qid)
    if np.any(qid != np.round(qid)) or np.any(np.abs(qid) >= 2**24):
        raise ValueError(f"{name}[:, 1] (query ids) must be integers below 2**24 = 16777216 in "
                         "absolute value (labels are float32, which merges larger ids); renumber "
                         f"them: {name}[:, 1] = np.unique(qid, return_inverse=True)[1].")
    starts = np.flatnonzero(np.r_[True, qid[1:] != qid[:-1]])
    if len(np.unique(qid)) != len(starts):
        raise ValueError(f"{name}[:, 1] (query ids) must be contiguous: every query's rows "
                         "together, one run each; sort the rows by query id first (order = "
                         f"np.argsort({name}[:, 1], kind='stable'); X, y = X[order], y[order]).")
    return starts


def check_labels(loss: loss_lib.Loss, y: np.ndarray, name: str = "y") -> None:
    """Raise ``ValueError`` naming the labels when they are not what ``loss`` expects (the loss
    function's own ``check_labels`` first).
    """
    check = getattr(loss.fn, "check_labels", None)  # a loss function's own domain of labels
    if callable(check):
        check(y, name)
    if loss.task == "binary":
        bad = ~np.isin(y, (0, 1))
        if bad.any():
            raise ValueError(f"{name} must hold binary labels 0/1 for loss {loss.name!r}; got values "
                             f"such as {np.unique(y[bad])[:5].tolist()}.")
    elif loss.task == "multiclass":
        k = loss.n_outputs
        if np.any(y != np.round(y)) or np.any(y < 0) or (k is not None and np.any(y >= k)):
            raise ValueError(f"{name} must hold integer class labels in [0, {k}) for loss "
                             f"{loss.name!r}; got values in [{y.min()}, {y.max()}].")
    elif loss.task == "count":
        if np.any(y < 0):
            raise ValueError(f"{name} must be non-negative for loss {loss.name!r}; got min {y.min()}.")
    elif loss.task == "survival":
        if y.ndim != 2 or y.shape[1] != 2:
            raise ValueError(f"{name} must be (n, 2) survival labels (time, event) for loss "
                             f"{loss.name!r}; got shape {y.shape}.")
        if np.any(y[:, 0] <= 0):
            raise ValueError(f"{name}[:, 0] (survival times) must be > 0 for loss {loss.name!r}; "
                             f"got min {y[:, 0].min()}.")
        bad = ~np.isin(y[:, 1], (0, 1))
        if bad.any():
            raise ValueError(f"{name}[:, 1] (events) must be 0 (censored) or 1 (event) for loss "
                             f"{loss.name!r}; got values such as {np.unique(y[bad, 1])[:5].tolist()}.")
    elif loss.task == "ranking":
        if y.ndim != 2 or y.shape[1] != 2:
            raise ValueError(f"{name} must be (n, 2) ranking labels (relevance, query id) for loss "
                             f"{loss.name!r}; got shape {y.shape}.")
        if np.any(y[:, 0] < 0):
            raise ValueError(f"{name}[:, 0] (relevance grades) must be >= 0 for loss "
                             f"{loss.name!r}; got min {y[:, 0].min()}.")
        query_starts(y[:, 1], name)
