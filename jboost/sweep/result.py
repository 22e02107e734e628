"""The result of a sweep: every fit's curves, the selection of the best round and configuration
(ESL 10.12; the mean over folds x seeds and its standard error), the text table, and the models.

See docs/sweeps.md (selection, early stopping per fit)."""

from __future__ import annotations

import dataclasses
import warnings
from typing import Any, Dict, List, Mapping, NamedTuple, Optional, Sequence, Tuple

import jax
import jax.numpy as jnp
import numpy as np

from jboost import checks
from jboost.fitting import boost
from jboost.losses import loss as loss_lib
from jboost.models import booster, metadata
from jboost.sweep import grid as grid_lib
from jboost.trees import oblivious

Group = Tuple[int, int]  # (depth, n_bins): one compiled program


@dataclasses.dataclass(frozen=True)
class SweepResult:
    """Every fit of a sweep and what was chosen from them (host NumPy arrays).

    Rows are configuration x fold x seed, row ``i = (config * n_folds + fold) * n_seeds + seed``.

    Attributes:
      configs: one dict per configuration: the swept values, ``n_rounds``, ``depth``, ``n_bins``.
      swept: the names that vary (grid keys, then static settings given as lists).
      config: ``(n_rows,)`` int: each row's configuration index.
      fold: ``(n_rows,)`` int: each row's fold index.
      seed: ``(n_rows,)`` int: each row's seed index.
      valid_curves: ``(n_rows, R)`` the metric on the held-out fold after each round (NaN beyond
        a row's ``n_rounds`` and, with early stopping, its ``rounds_fitted``).
      train_curves: ``(n_rows, R)`` the weighted mean training loss after each round.
      mean_curves: ``(n_configs, R)`` mean over folds x seeds.
      se_curves: ``(n_configs, R)`` standard error over folds x seeds.
      best_rounds: ``(n_configs,)`` the round count (1-based) optimising the mean curve.
      best_scores: ``(n_configs,)`` mean at that round.
      best_ses: ``(n_configs,)`` standard error at that round.
      best_index: the best configuration.
      metric: the metric's name (``"loss"``: the mean loss on the held-out fold).
      greater_is_better: direction of the metric.
      fold_table: ``(n_seeds, n)`` fold of every row under each seed.
      seed_keys: ``(n_seeds, 2)`` uint32 raw ``jax.random`` key of each seed.
      sample_weight: ``(n,)`` float32 sample weights (ones if none were given).
      borders: ``{n_bins: (F, n_bins - 1) borders}`` used to bin the data.
      loss: the resolved :class:`jboost.Loss` (its swept params are set per configuration).
      fixed: the non-swept settings passed on to :func:`jboost.fit`.
      trees: with ``keep_trees``, ``{(depth, n_bins): trees (n_models, R, T, ...)}`` (not the
        groups an interrupted sweep did not reach).
      model_of_row: ``(n_rows,)`` each row's index in its group's ``trees``.
      info: chunking, compilations and timings (``n_compilations``, ``chunk_size``, ``n_chunks``,
        ``n_resumed_chunks``, ``n_devices``, ``seconds``, ``first_chunk_seconds``, ``model_bytes``)
        and ``interrupted`` (a ``Ctrl-C`` stopped the sweep: docs/sweeps.md).
      baselines: with ``keep_trees``, ``{(depth, n_bins): (n_models, K)}`` each model's baseline.
      early_stopping: the :func:`jboost.fit` arguments of a row's early stopping, or ``None``.
      rounds_fitted: with early stopping or after a ``Ctrl-C``, ``(n_rows,)`` the rounds each
        row fitted (its curves are NaN after them).
      row_best_rounds: with early stopping, ``(n_rows,)`` each row's own best round count
        (1-based, as :func:`jboost.fit`'s ``best_round + 1``; 0: no finite score).
      feature_names: the columns of a DataFrame ``X``, else ``None``.
      classes: the class labels mapped to ``0..K-1``, else ``None``.
      categorical: with categorical columns and ``keep_trees``, ``{(depth, n_bins): Categorical}``
        with a leading model axis: each model's statistics (``borders`` are then the host rows').
      model_borders: ``{(depth, n_bins): (n_models, F, n_bins - 1)}`` each model's borders (with
        categorical columns, else ``None``).
      diverged: ``(n_rows,)`` bool, the fits whose training loss diverged (rose above
        ``start + (DIVERGENCE_FACTOR - 1) x`` its scale, docs/fitting.md "Divergence") or is
        not finite, or whose held-out loss diverged (metric ``"loss"``); a ``UserWarning``
        names them (configuration index and values, row, fold, seed). ``None``: not checked.
        :attr:`diverged_configs` lists their configurations.
    """

    configs: Tuple[Dict[str, Any], ...]
    swept: Tuple[str, ...]
    config: np.ndarray
    fold: np.ndarray
    seed: np.ndarray
    valid_curves: np.ndarray
    train_curves: np.ndarray
    mean_curves: np.ndarray
    se_curves: np.ndarray
    best_rounds: np.ndarray
    best_scores: np.ndarray
    best_ses: np.ndarray
    best_index: int
    metric: str
    greater_is_better: bool
    fold_table: np.ndarray
    seed_keys: np.ndarray
    sample_weight: np.ndarray
    borders: Dict[int, np.ndarray]
    loss: loss_lib.Loss
    fixed: Dict[str, Any]
    trees: Optional[Dict[Group, oblivious.ObliviousTrees]]
    model_of_row: np.ndarray
    info: Dict[str, Any]
    baselines: Optional[Dict[Group, np.ndarray]] = None
    early_stopping: Optional[Dict[str, Any]] = None
    rounds_fitted: Optional[np.ndarray] = None
    row_best_rounds: Optional[np.ndarray] = None
    feature_names: Optional[Tuple[str, ...]] = None
    classes: Optional[np.ndarray] = None
    categorical: Optional[Dict[Group, Any]] = None
    model_borders: Optional[Dict[Group, np.ndarray]] = None
    diverged: Optional[np.ndarray] = None

    @property
    def n_rows(self) -> int:
        return int(self.config.shape[0])

    @property
    def n_configs(self) -> int:
        return len(self.configs)

    @property
    def n_folds(self) -> int:
        return int(self.fold.max()) + 1

    @property
    def n_seeds(self) -> int:
        return int(self.seed_keys.shape[0])

    @property
    def diverged_configs(self) -> List[int]:
        """The configurations with a fit that diverged or turned NaN (``diverged``)."""
        if self.diverged is None:
            return []
        return sorted({int(c) for c in self.config[np.asarray(self.diverged, bool)]})

    @property
    def best(self) -> Dict[str, Any]:
        """The best configuration: its values, ``best_round``, ``mean`` and ``se``."""
        c = self.best_index
        return {**self.configs[c], "config": c, "best_round": int(self.best_rounds[c]),
                "mean": float(self.best_scores[c]), "se": float(self.best_ses[c])}

    def row_key(self, row: int):
        """The ``jax.random`` key of a row's fit (that of its seed)."""
        return jnp.asarray(self.seed_keys[self.seed[row]])

    def fold_weights(self, row: int) -> Tuple[np.ndarray, np.ndarray]:
        """``(w_train, w_valid)`` of a row: sample weights with the held-out fold zeroed, and
        sample weights on the held-out fold only."""
        held_out = self.fold_table[self.seed[row]] == self.fold[row]
        w = self.sample_weight
        return (np.where(held_out, 0.0, w).astype(np.float32),
                np.where(held_out, w, 0.0).astype(np.float32))

    def fit_kwargs(self, config: Optional[int] = None, *, early_stopping: bool = True) -> Dict[str, Any]:
        """Keyword arguments of :func:`jboost.fit` for a configuration (default: the best), with
        its full ``n_rounds``, the sweep's borders and (``early_stopping=True``) its early
        stopping if it had one; add ``sample_weight``, ``eval_set``, ``key`` to reproduce a row
        (see :meth:`fold_weights`, :meth:`row_key`)."""
        c = self.best_index if config is None else int(config)
        cfg = self.configs[c]
        values, loss_params = grid_lib.split_config(cfg)
        kwargs = {**self.fixed, **values}
        kwargs["loss"] = self.loss.with_params(**loss_params) if loss_params else self.loss
        kwargs["borders"] = self.borders[cfg["n_bins"]]
        if early_stopping and self.early_stopping is not None:
            if self.early_stopping["eval_metric"] is _MAXIMISED:
                es = self.early_stopping
                raise ValueError(
                    f"this sweep stopped its fits on the custom metric {self.metric!r} with "
                    "greater_is_better=True, and jboost.fit's eval_metric is minimised: take "
                    "fit_kwargs(config, early_stopping=False) and add eval_metric= a module-level "
                    "function returning minus the metric, early_stopping_rounds="
                    f"{es['early_stopping_rounds']}, early_stopping_tolerance="
                    f"{es['early_stopping_tolerance']}.")
            kwargs.update(self.early_stopping)
        return kwargs

    def refit(self, X, y, *, config: Optional[int] = None, key=None, **overrides) -> booster.Booster:
        """Fit a configuration (default: the best) on all of ``X, y`` for its best round count,
        with :func:`jboost.fit`'s API (no early stopping).

        ``key`` defaults to the key of seed 0; ``overrides`` are passed on (e.g. ``eval_set``,
        ``n_rounds``). Borders are recomputed from ``X`` unless given; the sweep's categorical
        settings and sample weights (``X`` must then have the sweep's rows) are passed on."""
        c = self.best_index if config is None else int(config)
        kwargs = self.fit_kwargs(c, early_stopping=False)  # the chosen round count, all the rows
        kwargs.pop("borders")
        kwargs["n_rounds"] = int(self.best_rounds[c])
        kwargs["key"] = jnp.asarray(self.seed_keys[0]) if key is None else key
        if "sample_weight" not in overrides and np.any(self.sample_weight != 1.0):
            if overrides.get("rows") == "local":  # the sweep's weights are the whole table's
                raise ValueError("the sweep used sample weights: with rows='local' pass this "
                                 "process's rows' weights to refit as sample_weight=.")
            if np.shape(X)[0] != self.sample_weight.shape[0]:
                raise ValueError(f"the sweep used sample weights for {self.sample_weight.shape[0]} rows "
                                 f"but X has {np.shape(X)[0]}: pass sample_weight= to refit.")
            kwargs["sample_weight"] = self.sample_weight
        kwargs.update(overrides)
        return boost.fit(X, y, **kwargs)

    def rows_of(self, config: Optional[int] = None) -> np.ndarray:
        """The rows (fold x seed fits) of a configuration (default: the best)."""
        c = self.best_index if config is None else int(config)
        return np.flatnonzero(self.config == c)

    def models(self, rows: Optional[Sequence[int]] = None, *,
               n_rounds: Optional[int] = None) -> booster.Booster:
        """The cross-validation models of ``rows`` as one batched :class:`jboost.Booster`
        (``batch_shape == (len(rows),)``), each fitted on its training folds; needs ``keep_trees``.

        ``rows`` (default: the best configuration's) must share ``(depth, n_bins)``; ``n_rounds``
        (default: the rows' round count, which they must then share) keeps the first rounds.
        ``valid_loss`` is the held-out fold's mean loss (NaN unless the metric is the loss); with
        early stopping ``best_round`` is the configuration's chosen round (docs/sweeps.md)."""
        if self.trees is None:
            raise ValueError("the sweep kept no trees: run it with keep_trees=True to get its models "
                             "(or refit a configuration with SweepResult.refit).")
        rows = self.rows_of() if rows is None else np.asarray(rows, np.int64).reshape(-1)
        if rows.size == 0 or rows.min() < 0 or rows.max() >= self.n_rows:
            raise ValueError(f"rows must be a non-empty list of row indices in [0, {self.n_rows}).")
        cfgs = [self.configs[c] for c in self.config[rows]]
        groups = {(cfg["depth"], cfg["n_bins"]) for cfg in cfgs}
        if len(groups) != 1:
            raise ValueError(f"rows span the (depth, n_bins) groups {sorted(groups)}: their trees have "
                             "different shapes; take the rows of one group.")
        group = groups.pop()
        if group not in self.trees:
            raise ValueError(f"the sweep was interrupted (Ctrl-C) before it fitted the group "
                             f"depth={group[0]}, n_bins={group[1]}: these rows have no trees.")
        counts = {cfg["n_rounds"] for cfg in cfgs}
        if n_rounds is None:
            if len(counts) != 1:
                raise ValueError(f"rows have different n_rounds {sorted(counts)}: pass n_rounds= "
                                 f"(at most {min(counts)}).")
            n_rounds = min(counts)
        n_rounds = checks.check_int(n_rounds, "n_rounds", 1, min(counts))
        models = self.model_of_row[rows]
        trees = jax.tree_util.tree_map(lambda a: a[models, :n_rounds], self.trees[group])
        m = rows.size
        loss_params = {}
        for name, default in self.loss.params.items():
            loss_params[name] = jnp.asarray(
                [grid_lib.split_config(cfg)[1].get(name, default) for cfg in cfgs], jnp.float32)
        valid = (self.valid_curves[rows, :n_rounds] if self.metric == "loss"
                 else np.full((m, n_rounds), np.nan))
        cat = None
        if self.categorical is not None:  # each model's own statistics and their borders
            borders = self.model_borders[group][models]
            full = self.categorical[group]
            cat = full._replace(**{f: jnp.asarray(np.asarray(getattr(full, f))[models])
                                   for f in ("sums", "counts", "prior", "prior_weight")})
        else:
            borders = np.broadcast_to(self.borders[group[1]], (m,) + self.borders[group[1]].shape)
        best_round = None
        if self.early_stopping is not None:
            chosen = np.minimum(self.best_rounds[self.config[rows]], n_rounds) - 1
            best_round = jnp.asarray(chosen, jnp.int32)
        return booster.Booster(
            trees=trees, borders=jnp.asarray(borders),
            baseline=jnp.asarray(self.baselines[group][models]),
            loss=self.loss.replace(params=loss_params),
            train_loss=jnp.asarray(self.train_curves[rows, :n_rounds], jnp.float32),
            valid_loss=jnp.asarray(valid, jnp.float32), best_round=best_round,
            classes=None if self.classes is None else metadata.Classes(self.classes),
            feature_names=metadata.named(self.feature_names), categorical=cat)

    def summary(self) -> List[Dict[str, Any]]:
        """One dict per configuration: its values, ``best_round``, ``mean``, ``se``, ``n``."""
        n = self.n_rows // self.n_configs
        return [{"config": c, **self.configs[c], "best_round": int(self.best_rounds[c]),
                 "mean": float(self.best_scores[c]), "se": float(self.best_ses[c]), "n": n}
                for c in range(self.n_configs)]

    def to_rows(self, curves: bool = True) -> List[Dict[str, Any]]:
        """One dict per configuration x fold x seed: the values, ``fold``, ``seed``, the row's own
        best round and score, its score at its configuration's best round, its final score (with
        early stopping: at its last fitted round, and ``rounds_fitted``), and (``curves=True``)
        the whole validation and training curves as lists."""
        out = []
        for i in range(self.n_rows):
            c = int(self.config[i])
            r = self.configs[c]["n_rounds"]
            curve = self.valid_curves[i, :r]
            if self.row_best_rounds is None:  # (rounds_fitted: an interrupted sweep's)
                own = _best_index(curve, self.greater_is_better)
                last = r - 1 if self.rounds_fitted is None else int(self.rounds_fitted[i]) - 1
            else:
                own, last = int(self.row_best_rounds[i]) - 1, int(self.rounds_fitted[i]) - 1
            row = {"config": c, **self.configs[c], "fold": int(self.fold[i]), "seed": int(self.seed[i]),
                   "best_round": own + 1, "best": float(curve[own]) if own >= 0 else float("nan"),
                   "at_config_best_round": float(curve[self.best_rounds[c] - 1]),
                   "final": float(curve[last])}
            if self.rounds_fitted is not None:
                row["rounds_fitted"] = last + 1
            if curves:
                row["valid_curve"] = curve.tolist()
                row["train_curve"] = self.train_curves[i, :r].tolist()
            out.append(row)
        return out

    def __str__(self) -> str:
        return self.format(max_rows=20)

    def format(self, max_rows: Optional[int] = 20) -> str:
        """The configurations ranked best first, as an aligned text table."""
        order = np.argsort(self.best_scores * (-1.0 if self.greater_is_better else 1.0), kind="stable")
        n_fs = self.n_rows // self.n_configs
        direction = "higher" if self.greater_is_better else "lower"
        head = (f"Sweep of {self.loss.name}: {self.n_configs} configurations x {self.n_folds} folds x "
                f"{self.n_seeds} seeds = {self.n_rows} fits; metric {self.metric} on held-out folds "
                f"({direction} is better), mean +- se over {n_fs} fits at each configuration's best round")
        if self.early_stopping is not None:
            head += (f"; each fit stopped after {self.early_stopping['early_stopping_rounds']} rounds "
                     "without improvement")
        cols = ["rank", *self.swept, "best_round", "mean", "se"]
        lines = []
        shown = order if max_rows is None else order[:max_rows]
        for rank, c in enumerate(shown, 1):
            cells = [str(rank)] + [f"{v:.6g}" if isinstance(v, float) else str(v)
                                   for v in (self.configs[c][k] for k in self.swept)]
            cells += [str(int(self.best_rounds[c])), f"{self.best_scores[c]:.6g}", f"{self.best_ses[c]:.3g}"]
            lines.append(cells + (["<- best"] if c == self.best_index else []))
        widths = [max(len(h), *(len(l[j]) for l in lines)) for j, h in enumerate(cols)]
        fmt_row = lambda cells: "  ".join(s.rjust(w) for s, w in zip(cells, widths)) + (
            "  " + cells[-1] if len(cells) > len(widths) else "")
        text = [head, fmt_row(cols), *(fmt_row(l) for l in lines)]
        if max_rows is not None and len(order) > max_rows:
            text.append(f"... ({len(order) - max_rows} more configurations)")
        return "\n".join(text)


def _best_index(curve, greater_is_better: bool) -> int:
    if np.all(np.isnan(curve)):
        return len(curve) - 1
    return int(np.nanargmax(curve) if greater_is_better else np.nanargmin(curve))


# fit_kwargs' marker of a greater-is-better custom metric: fit's eval_metric cannot express it.
_MAXIMISED = "<greater-is-better custom metric>"


def early_stopping_kwargs(early_stopping, metric, greater: bool) -> Optional[Dict[str, Any]]:
    """The :func:`jboost.fit` arguments of a sweep's early stopping (``SweepResult.early_stopping``)
    from its :class:`jboost.engine.boosting.EarlyStopping` and metric; ``None`` without one."""
    if early_stopping is None:
        return None
    return {"early_stopping_rounds": early_stopping.rounds,
            "early_stopping_tolerance": early_stopping.tolerance,
            "eval_metric": _MAXIMISED if greater else metric}


def stopping_best(curves: np.ndarray, tolerance: float, greater: bool) -> np.ndarray:
    """``(rows,)`` each curve's best round count (1-based; 0 if no round has a finite score) under
    :class:`jboost.engine.boosting.EarlyStopping`'s rule: a round improves on the best so far when its
    score is below ``best - tolerance`` (above ``best + tolerance`` when greater is better),
    compared in float32 as the program compares them; NaN never improves."""
    score = np.asarray(curves, np.float32)
    if greater:
        score = -score
    best = np.full(score.shape[0], np.inf, np.float32)
    best_i = np.full(score.shape[0], -1, np.int64)
    tol = np.float32(tolerance)
    with np.errstate(invalid="ignore"):
        for j in range(score.shape[1]):
            better = score[:, j] < best - tol
            best = np.where(better, score[:, j], best)
            best_i = np.where(better, j, best_i)
    return best_i + 1


def refit(result: SweepResult, X, y, **kwargs) -> booster.Booster:
    """:meth:`SweepResult.refit`: the chosen configuration on all data, at its best round count."""
    return result.refit(X, y, **kwargs)


class Rows(NamedTuple):
    """The rows of a sweep, configuration x fold x seed (``(n_rows,)`` each): row
    ``i = (config * n_folds + fold) * n_seeds + seed``."""

    config: np.ndarray
    fold: np.ndarray
    seed: np.ndarray
    model: np.ndarray         # the row's model in its group's fits
    valid_curves: np.ndarray  # (n_rows, R) NaN beyond the row's n_rounds
    train_curves: np.ndarray
    rounds_fitted: Optional[np.ndarray] = None    # early stopping: (n_rows,)
    row_best_rounds: Optional[np.ndarray] = None  # early stopping: (n_rows,) 1-based


def rows(configs: Sequence[Mapping[str, Any]], n_points: int, n_folds: int, n_seeds: int,
         valid: Mapping[Group, np.ndarray], train: Mapping[Group, np.ndarray], r_max: int, *,
         n_fitted: Optional[Mapping[Group, np.ndarray]] = None, tolerance: float = 0.0,
         greater: bool = False) -> Rows:
    """Each row's curves, read from its group's fits (``(n_models, R)`` per group) up to its
    configuration's ``n_rounds``; with early stopping (``n_fitted``) a row's rounds fitted and its
    best round over its first ``n_rounds`` (:func:`stopping_best`), as a separate fit records
    them."""
    per_config = n_folds * n_seeds
    row_config, row_fold, row_seed = grid_lib.Layout.of(len(configs), n_folds, n_seeds)
    n_rows = row_config.shape[0]
    row_point = row_config % n_points
    model_of_row = (row_point * n_folds + row_fold) * n_seeds + row_seed
    valid_curves = np.full((n_rows, r_max), np.nan)
    train_curves = np.full((n_rows, r_max), np.nan)
    fitted = best = None
    if n_fitted is not None:
        fitted = np.zeros(n_rows, np.int64)
        best = np.zeros(n_rows, np.int64)
    for i0 in range(0, n_rows, per_config):
        cfg = configs[row_config[i0]]
        g, r = (cfg["depth"], cfg["n_bins"]), cfg["n_rounds"]
        sel = slice(i0, i0 + per_config)
        valid_curves[sel, :r] = valid[g][model_of_row[sel], :r]
        train_curves[sel, :r] = train[g][model_of_row[sel], :r]
        if n_fitted is not None:
            fitted[sel] = np.minimum(n_fitted[g][model_of_row[sel]], r)
            best[sel] = stopping_best(valid_curves[sel, :r], tolerance, greater)
    return Rows(row_config, row_fold, row_seed, model_of_row, valid_curves, train_curves, fitted,
                best)


class Selection(NamedTuple):
    """Mean and standard-error curves per configuration, its best round, and the best one."""

    mean_curves: np.ndarray
    se_curves: np.ndarray
    best_rounds: np.ndarray
    best_scores: np.ndarray
    best_ses: np.ndarray
    best_index: int


def select(valid_curves, configs, n_per_config: int, greater: bool,
           rounds_fitted: Optional[np.ndarray] = None) -> Selection:
    """Each configuration's curve averaged over its ``n_per_config`` rows, the round optimising
    it and the best configuration. Only finite means are ranked (a ``UserWarning`` names the
    configurations with non-finite rounds); with ``rounds_fitted`` (early stopping) the rounds
    every row of a configuration fitted."""
    n_configs, r_max = len(configs), valid_curves.shape[1]
    per_config = valid_curves.reshape(n_configs, n_per_config, r_max)
    with np.errstate(invalid="ignore"):   # inf - inf in a diverged configuration's spread
        mean = per_config.mean(axis=1)
        se = (per_config.std(axis=1, ddof=1) / np.sqrt(n_per_config) if n_per_config > 1
              else np.full_like(mean, np.nan))
    ranked = np.where(np.isfinite(mean), mean, np.nan)
    common = [cfg["n_rounds"] for cfg in configs]
    if rounds_fitted is not None:
        common = rounds_fitted.reshape(n_configs, n_per_config).min(axis=1).tolist()
    _warn_non_finite(ranked, configs, common)
    best_rounds = np.array([_best_index(mc[: cfg["n_rounds"]], greater) + 1
                            for mc, cfg in zip(ranked, configs)], np.int64)
    best_scores = ranked[np.arange(n_configs), best_rounds - 1]
    best_ses = se[np.arange(n_configs), best_rounds - 1]
    if np.all(np.isnan(best_scores)):
        raise FloatingPointError("every configuration's validation metric is NaN or infinite.")
    return Selection(mean, se, best_rounds, best_scores, best_ses, _best_index(best_scores, greater))


def _warn_non_finite(ranked, configs, n_rounds: Sequence[int]) -> None:
    """A ``UserWarning`` naming the configurations whose mean validation curve is not finite at
    every one of their first ``n_rounds[c]`` rounds (at most 5 named)."""
    never, some = [], []
    for c, (curve, cfg) in enumerate(zip(ranked, configs)):
        finite = np.isfinite(curve[: max(int(n_rounds[c]), 1)])
        if not finite.all():
            (some if finite.any() else never).append(c)
    if not never and not some:
        return

    def name(cs):
        shown = ", ".join(f"{c} {dict(configs[c])}" for c in cs[:5])
        return shown + (f" and {len(cs) - 5} more" if len(cs) > 5 else "")

    parts = []
    if never:
        parts.append(f"configurations {name(never)} have no finite validation metric and are not "
                     "ranked (best score NaN)")
    if some:
        parts.append(f"configurations {name(some)} have a validation metric that is NaN or "
                     "infinite at some rounds (a fold's fit diverged: e.g. a learning rate too "
                     "large); they are ranked by their finite rounds only")
    warnings.warn("sweep: " + "; ".join(parts) + ". See SweepResult.valid_curves.", UserWarning,
                  stacklevel=3)
