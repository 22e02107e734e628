"""Which fits of a sweep diverged or turned NaN: the rule of
:data:`jboost.losses.checks.DIVERGENCE_FACTOR` on each row's training curve (and on its held-out
loss curve when the metric is the loss), and a training curve that is not finite; for
``SweepResult.diverged`` and the sweep's warning. See docs/sweeps.md and docs/fitting.md
("Divergence")."""

from __future__ import annotations

import warnings
from typing import Dict, Mapping, Optional, Tuple

import jax.numpy as jnp
import numpy as np
from jax import lax

from jboost import _compile
from jboost.losses import baselines, checks, loss as loss_lib
from jboost.sweep import grid as grid_lib

Group = Tuple[int, int]  # (depth, n_bins)


@_compile.jit
def _fold_starts(loss, y, w, fold_table, folds, seeds):
    """``(B, 2, 2)``: each ``(folds[b], seeds[b])`` fit's
    :func:`jboost.losses.checks.start_and_scale` on its training rows and on its held-out rows,
    at its baseline (as the sweep's program computes it); one fit at a time (``lax.map``: the
    memory of one)."""
    def one(fs):
        f, s = fs
        held = fold_table[s] == f
        w_train, w_valid = jnp.where(held, 0.0, w), jnp.where(held, w, 0.0)
        init = baselines.baseline(loss, y, w_train)
        return jnp.stack([checks.start_and_scale(loss, y, w_train, init),
                          checks.start_and_scale(loss, y, w_valid, init)])
    return lax.map(one, (folds, seeds))


def row_starts(loss: loss_lib.Loss, y, w, fold_table, loss_values: Mapping[str, np.ndarray],
               point, fold, seed) -> np.ndarray:
    """``(n_rows, 2, 2)``: each row's start and scale of its training and held-out curves;
    ``loss_values``: each grid point's loss parameters, ``point, fold, seed``: each row's. One
    call of a compiled program per distinct set of loss parameters."""
    n_folds, n_seeds = int(np.max(fold)) + 1, int(np.shape(fold_table)[0])
    folds = jnp.asarray(np.repeat(np.arange(n_folds), n_seeds), jnp.int32)
    seeds = jnp.asarray(np.tile(np.arange(n_seeds), n_folds), jnp.int32)
    names = sorted(loss_values)
    keys = [tuple(float(loss_values[p][i]) for p in names) for i in range(int(np.max(point)) + 1)]
    table = {}
    for key in dict.fromkeys(keys):
        loss_k = (loss.replace(params={p: jnp.float32(v) for p, v in zip(names, key)}) if names
                  else loss)
        table[key] = np.asarray(_fold_starts(loss_k, jnp.asarray(y), jnp.asarray(w, jnp.float32),
                                             jnp.asarray(fold_table, jnp.int32), folds, seeds),
                                np.float64).reshape(n_folds, n_seeds, 2, 2)
    return np.stack([table[keys[p]][f, s] for p, f, s in zip(point, fold, seed)])


def diverged_rows(loss: loss_lib.Loss, y, w, fold_table, grid: grid_lib.Grid, rows, metric,
                  n_models_fitted: Optional[Mapping[Group, Optional[int]]] = None) -> np.ndarray:
    """``(n_rows,)`` bool: the sweep's rows (``rows``: :class:`jboost.sweep.result.Rows`) whose
    training curve diverged or is not finite, or (``metric`` ``None``: the held-out fold's mean
    loss) whose held-out curve diverged, over the rounds they fitted; a ``UserWarning`` names
    them by configuration (index and values), row, fold and seed.

    Args:
      loss, y, w, fold_table: the sweep's loss, labels, weights and folds.
      grid: the configurations and each grid point's loss parameters.
      n_models_fitted: per group, the models fitted before a callback stopped the sweep
        (``None``: all); the others are not fitted, not flagged.

    Warns:
      UserWarning: when any row is flagged.
    """
    n_rows, configs = rows.config.shape[0], grid.configs
    rounds = np.array([configs[c]["n_rounds"] for c in rows.config], np.int64)
    fitted = rounds if rows.rounds_fitted is None else np.minimum(rows.rounds_fitted, rounds)
    ran = np.ones(n_rows, bool)
    for i, c in enumerate(rows.config):
        stop = (n_models_fitted or {}).get((configs[c]["depth"], configs[c]["n_bins"]))
        ran[i] = stop is None or rows.model[i] < stop
    starts = row_starts(loss, y, w, fold_table, grid.loss_values, rows.config % grid.n_points,
                        rows.fold, rows.seed)
    first = {"train": checks.first_diverged(rows.train_curves, starts[:, 0, 0], starts[:, 0, 1],
                                            fitted),
             "nan": checks.first_non_finite(rows.train_curves, fitted)}
    first["valid"] = (np.full(n_rows, -1) if metric is not None else checks.first_diverged(
        rows.valid_curves, starts[:, 1, 0], starts[:, 1, 1], fitted))
    flagged = ran & ((first["train"] >= 0) | (first["valid"] >= 0) | (first["nan"] >= 0))
    if flagged.any():
        warnings.warn(_message(configs, rows, flagged, first, starts, fitted), UserWarning,
                      stacklevel=4)
    return flagged


def _message(configs, rows, flagged, first: Dict[str, np.ndarray], starts, fitted) -> str:
    """The sweep's warning: the flagged rows by configuration (at most 5 named)."""
    by_config: Dict[int, list] = {}
    for i in np.flatnonzero(flagged):
        by_config.setdefault(int(rows.config[i]), []).append(int(i))
    parts = []
    for c, flagged_rows in list(by_config.items())[:5]:
        i = flagged_rows[0]
        n_fits = int(np.sum(rows.config == c))
        if first["nan"][i] >= 0:
            r = int(first["nan"][i])
            what = (f"the training loss is not finite from round {r} on (train_curves[{i}, {r}] "
                    f"= {rows.train_curves[i, r]})")
        else:
            j = 0 if first["train"][i] >= 0 else 1
            curves = rows.train_curves if j == 0 else rows.valid_curves
            what = checks.divergence_message(
                ("training loss", "held-out loss")[j], f"{('train', 'valid')[j]}_curves[{i}]",
                np.where(np.arange(curves.shape[1]) < fitted[i], curves[i], np.nan),
                float(starts[i, j, 0]), float(starts[i, j, 1]),
                int(first[("train", "valid")[j]][i]))
        parts.append(f"configuration {c} {dict(configs[c])}: {len(flagged_rows)} of {n_fits} fits "
                     f"(rows {flagged_rows[:8]}{'...' if len(flagged_rows) > 8 else ''}); row {i} "
                     f"(fold {int(rows.fold[i])}, seed {int(rows.seed[i])}): {what}")
    more = len(by_config) - len(parts)
    return (f"sweep: {int(flagged.sum())} of {flagged.shape[0]} fits diverged or turned NaN, in "
            f"{len(by_config)} configuration(s) (SweepResult.diverged marks them): "
            + "; ".join(parts) + (f"; and {more} more configurations" if more > 0 else "")
            + ". Lower learning_rate for these configurations (or leave them out of the grid); "
            "see docs/fitting.md, 'Divergence'.")
