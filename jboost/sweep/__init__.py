"""Hyperparameter sweeps with K-fold cross-validation, fitted as one vmapped, compiled program.

A sweep fits every configuration of a grid (cartesian product) on every fold of every seed
(ESL section 7.10: K-fold cross-validation; repeated over seeds it is repeated K-fold CV). All
those models share ONE copy of the binned data; they differ only in arrays, so they are fitted by
``jax.vmap`` of :func:`jboost.boosting.boost`:

* a fold is a pair of weight masks on the same rows: training weight 0 on the held-out fold,
  validation weight (the ``w_valid`` of ``boost``) 1 on it and 0 elsewhere, so the per-round
  validation metric only ever sees held-out rows and the shapes never change;
* every continuous hyperparameter (``learning_rate``, ``l2``, ``min_split_gain``,
  ``min_child_weight``, ``subsample``, ``colsample``) and every parameter of the loss (Huber
  ``delta``, quantile ``alpha``, or the parameter of any custom :class:`jboost.Loss` family) is a
  traced array with a leading model axis;
* static settings (``depth``, ``n_bins``) select a compiled program: one compilation per
  ``(depth, n_bins)`` combination. ``n_rounds`` costs no compilation and no fitting: boosting
  round ``m`` does not depend on later rounds (:mod:`jboost.boosting`), so a configuration with
  fewer rounds is the prefix of the largest fit of its group.

The models are fitted in chunks of a fixed size (the last one padded) by a Python loop over the
same compiled function; the chunk size comes from an estimate of the histogram and state memory
of one model (:func:`model_bytes`) against a budget. With several devices the chunk's model axis
is sharded over them (``shard_map``), each device fitting its share.

On CPU the work of a vmapped chunk is the sum of its models' work (each model has its own
histograms and split search); the CPU kernels run a chunk's models side by side on their threads
and build the first level of up to 8 models' trees in one pass over the shared bins, so a few
models per device (``DEFAULT_CPU_MODELS_PER_DEVICE``) beat one at a time. The held-out fold's
loss is read off the training raw scores (the fold's rows are predicted as the trees grow).
What the fused sweep buys on CPU is one compilation, one binning, no per-fit overhead, and the use of every core
(more so when Python is started with ``XLA_FLAGS=--xla_force_host_platform_device_count=<cores>``:
each host device fits its share of the models). Accelerators take as many models per chunk as fit.

The best round of a configuration is the round minimising its validation curve averaged over
folds and seeds (early stopping: ESL section 10.12 chooses the number of rounds on validation
data);
the best configuration is the one with the best such value, reported with its standard error
over the folds x seeds rows. (Those rows are not independent -- they share training data -- so
the standard error is the usual optimistic CV one; Bengio and Grandvalet, 2004.)

Example::

    import jboost.sweep
    result = jboost.sweep.sweep(X, y, "binomial_deviance",
                                grid={"learning_rate": [0.05, 0.1], "l2": [0.0, 1.0, 10.0]},
                                folds=5, seeds=3, n_rounds=200, depth=[4, 6])
    print(result)                      # configurations ranked, best first
    model = result.refit(X, y)         # the best configuration, at its best round count
"""

from __future__ import annotations

import collections
import dataclasses
import functools
import itertools
import math
import numbers
import time
from typing import Any, Callable, Dict, List, Mapping, NamedTuple, Optional, Sequence, Tuple, Union

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.sharding import Mesh
from jax.sharding import PartitionSpec as P

from jboost import _batching
from jboost import api
from jboost import cv
from jboost import binning
from jboost import _native
from jboost import boosting
from jboost import histograms
from jboost import losses as losses_lib
from jboost import tree as tree_lib

HYPERPARAMETERS = ("learning_rate", "l2", "min_split_gain", "min_child_weight", "subsample",
                   "colsample")
STATIC_SETTINGS = ("n_rounds", "depth", "n_bins")
# name -> (low, high, low end open): the same ranges as jboost.fit checks.
_BOUNDS = {
    "learning_rate": (0.0, np.inf, True),
    "l2": (0.0, np.inf, False),
    "min_split_gain": (0.0, np.inf, False),
    "min_child_weight": (0.0, np.inf, False),
    "subsample": (0.0, 1.0, True),
    "colsample": (0.0, 1.0, True),
}
_LOSS_PREFIX = "loss."

DEFAULT_CPU_BUDGET = _batching.DEFAULT_CPU_BUDGET
DEFAULT_CPU_MODELS_PER_DEVICE = _batching.DEFAULT_CPU_MODELS_PER_DEVICE

# Number of times the chunk program was traced, per static key; see trace_counts().
_TRACES: collections.Counter = collections.Counter()


def trace_counts() -> Dict[Any, int]:
    """How many times the compiled sweep program was traced, per static key
    ``(depth, n_bins, n_rounds_fitted, metric, n_devices)``: one per compilation."""
    return dict(_TRACES)


# --------------------------------------------------------------------------------------------
# Validation metrics evaluated on the held-out rows after every round.
# --------------------------------------------------------------------------------------------


def _weighted_mean(values, w):
    total = jnp.sum(w)
    return jnp.where(total > 0, jnp.sum(w * values) / jnp.where(total > 0, total, 1.0), jnp.nan)


def error_rate(y, raw, w, loss):
    """Weighted misclassification rate of the argmax of ``loss.link(raw)`` (classification)."""
    proba = loss.link(raw, **loss.params)
    return _weighted_mean((jnp.argmax(proba, axis=-1) != y.astype(jnp.int32)).astype(jnp.float32), w)


def squared_error(y, raw, w, loss):
    """Weighted mean squared error of ``loss.link(raw)`` (regression and counts)."""
    pred = loss.link(raw, **loss.params)
    return _weighted_mean((y - pred) ** 2, w)


def absolute_error(y, raw, w, loss):
    """Weighted mean absolute error of ``loss.link(raw)`` (regression and counts)."""
    pred = loss.link(raw, **loss.params)
    return _weighted_mean(jnp.abs(y - pred), w)


METRICS = {"error_rate": error_rate, "mse": squared_error, "mae": absolute_error}


def _squeeze(raw):
    return raw[:, 0] if raw.shape[-1] == 1 else raw


def _evaluate(metric, loss, y, raw, w):
    """``raw`` is ``(n, K)``; metrics see it as :func:`jboost.predict` returns it."""
    if isinstance(metric, str):
        return METRICS[metric](y, _squeeze(raw), w, loss)
    return jnp.asarray(metric(y, _squeeze(raw), w), jnp.float32)


def _metric_curve(metric, loss, trees, init_raw, X_binned, y, w_valid, n_bins: int):
    """The metric after every round, from the raw scores accumulated round by round."""
    raw0 = jnp.broadcast_to(init_raw.astype(jnp.float32), (y.shape[0], init_raw.shape[0]))
    take = jax.vmap(lambda t, leaf: t.leaf_values[leaf])

    def step(raw, round_trees):
        leaves = jax.vmap(lambda t: tree_lib.leaf_index_binned(t, X_binned, n_bins))(round_trees)
        raw = raw + jnp.sum(take(round_trees, leaves), axis=0)
        return raw, _evaluate(metric, loss, y, raw, w_valid)

    _, curve = lax.scan(step, raw0, trees)
    return curve


# --------------------------------------------------------------------------------------------
# Folds.
# --------------------------------------------------------------------------------------------


# --------------------------------------------------------------------------------------------
# Memory estimate and chunking.
# --------------------------------------------------------------------------------------------


# --------------------------------------------------------------------------------------------
# The compiled program: a chunk of models, vmapped.
# --------------------------------------------------------------------------------------------


class _ChunkOut(NamedTuple):
    valid: jax.Array   # (M, R) validation metric after each round
    train: jax.Array   # (M, R) training loss after each round
    trees: Optional[tree_lib.ObliviousTrees]  # (M, R, T, ...) when kept, else None


def _fit_models(X_binned, y, sample_weight, fold_table, seed_keys, hyper, loss, fold, seed, *,
                config: boosting.BoostConfig, metric, keep_trees: bool):
    """Fit the models of one chunk (leading axis of ``hyper``, ``loss``, ``fold``, ``seed``)."""

    def one(hyper_i, loss_i, f, s):
        held_out = fold_table[s] == f
        w_train = jnp.where(held_out, 0.0, sample_weight)
        w_valid = jnp.where(held_out, sample_weight, 0.0)
        init_raw = losses_lib.baseline(loss_i, y, w_train)
        data = boosting.Data.train_only(X_binned, y, w_train)

        def body(state, m):
            state, out = boosting.step(state, m, data=data, key=seed_keys[s], hyper=hyper_i,
                                       config=config)
            # No separate validation set: with the default metric, the held-out rows' loss is
            # read off the training raw scores (every row is predicted as the trees grow).
            valid = (boosting.mean_loss(state.loss, y, state.raw, w_valid) if metric is None
                     else jnp.float32(0.0))
            return state, (out.trees, out.train_loss, valid)

        state0 = boosting.init(data, loss_i, init_raw, config)
        state, (trees, train_loss, valid) = lax.scan(body, state0, jnp.arange(config.n_rounds))
        if metric is not None:
            valid = _metric_curve(metric, state.loss, trees, init_raw, X_binned, y, w_valid,
                                  config.n_bins)
        return _ChunkOut(valid, train_loss, trees if keep_trees else None)

    return jax.vmap(one)(hyper, loss, fold, seed)


@functools.lru_cache(maxsize=64)
def _program(config: boosting.BoostConfig, metric, keep_trees: bool, devices: Tuple) -> Callable:
    """The jit-compiled chunk program for one static combination (cached per combination)."""
    n_dev = len(devices)

    def body(*args):
        _TRACES[(config.depth, config.n_bins, config.n_rounds, _metric_name(metric), n_dev)] += 1
        return _fit_models(*args, config=config, metric=metric, keep_trees=keep_trees)

    if n_dev == 1:
        return jax.jit(body)
    mesh = Mesh(np.asarray(devices), ("models",))
    shared, per_model = P(), P("models")
    # check_vma=False: the core mixes per-model (varying) and shared values in one op, which is
    # what we want; every model's computation stays on its own device.
    mapped = jax.shard_map(body, mesh=mesh, in_specs=(shared,) * 5 + (per_model,) * 4,
                           out_specs=per_model, check_vma=False)
    return jax.jit(mapped)


def _metric_name(metric) -> str:
    if metric is None:
        return "loss"
    if isinstance(metric, str):
        return metric
    return getattr(metric, "__name__", "custom")


# --------------------------------------------------------------------------------------------
# The result.
# --------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class SweepResult:
    """Every fit of a sweep and what was chosen from them (host NumPy arrays; no pandas).

    Rows are configuration x fold x seed, row ``i = (config * n_folds + fold) * n_seeds + seed``.

    Attributes:
      configs: one dict per configuration: the swept values plus ``n_rounds``, ``depth``,
        ``n_bins``.
      swept: the names that vary (grid keys, then static settings given as lists).
      config, fold, seed: ``(n_rows,)`` int: each row's configuration, fold and seed index.
      valid_curves: ``(n_rows, R)`` the validation metric on the held-out fold after each round
        (``R`` the largest ``n_rounds``; NaN beyond a row's own ``n_rounds``).
      train_curves: ``(n_rows, R)`` the weighted mean training loss after each round.
      mean_curves, se_curves: ``(n_configs, R)`` mean and standard error over folds x seeds.
      best_rounds: ``(n_configs,)`` the round count (1-based) optimising the mean curve.
      best_scores, best_ses: ``(n_configs,)`` mean and standard error at that round.
      best_index: the best configuration.
      metric: the metric's name (``"loss"``: the mean loss of boost's validation set).
      greater_is_better: direction of the metric.
      fold_table: ``(n_seeds, n)`` fold of every row under each seed.
      seed_keys: ``(n_seeds, 2)`` uint32 raw ``jax.random`` key of each seed.
      sample_weight: ``(n,)`` float32 sample weights of the sweep (ones if none were given).
      borders: ``{n_bins: (F, n_bins - 1) borders}`` used to bin the data.
      loss: the resolved :class:`jboost.Loss` (its swept params are set per configuration).
      fixed: the non-swept settings passed on to :func:`jboost.fit`.
      trees: with ``keep_trees=True``, ``{(depth, n_bins): ObliviousTrees}`` with leading axes
        ``(n_models, n_rounds_fitted, trees_per_round)``; ``model_of_row`` indexes it.
      model_of_row: ``(n_rows,)`` each row's index in its group's ``trees``.
      info: timings and chunking (``n_compilations``, ``chunk_size``, ``n_chunks``,
        ``n_devices``, ``seconds``, ``first_chunk_seconds``, ``model_bytes``).
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
    loss: losses_lib.Loss
    fixed: Dict[str, Any]
    trees: Optional[Dict[Tuple[int, int], tree_lib.ObliviousTrees]]
    model_of_row: np.ndarray
    info: Dict[str, Any]

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

    def fit_kwargs(self, config: Optional[int] = None) -> Dict[str, Any]:
        """Keyword arguments of :func:`jboost.fit` for a configuration (default: the best), with
        its full ``n_rounds`` and the sweep's borders; add ``sample_weight``, ``eval_set``, ``key``
        to reproduce a row (see :meth:`fold_weights`, :meth:`row_key`)."""
        c = self.best_index if config is None else int(config)
        cfg = self.configs[c]
        kwargs = dict(self.fixed)
        loss_params = {}
        for name, value in cfg.items():
            if name in HYPERPARAMETERS or name in STATIC_SETTINGS:
                kwargs[name] = value
            else:
                loss_params[_loss_param_name(name)] = value
        kwargs["loss"] = self.loss.with_params(**loss_params) if loss_params else self.loss
        kwargs["borders"] = self.borders[cfg["n_bins"]]
        return kwargs

    def refit(self, X, y, *, config: Optional[int] = None, key=None, **overrides) -> api.Booster:
        """Fit a configuration (default: the best) on all of ``X, y`` for its best round count.

        Same API as :func:`jboost.fit`; ``key`` defaults to the key of seed 0; ``overrides`` are
        passed on (e.g. ``eval_set``, or ``n_rounds``). Borders are recomputed from ``X`` unless
        given. If the sweep had sample weights, they are used again (``X`` must then have the
        sweep's rows) unless ``sample_weight`` is given.
        """
        c = self.best_index if config is None else int(config)
        kwargs = self.fit_kwargs(c)
        kwargs.pop("borders")
        kwargs["n_rounds"] = int(self.best_rounds[c])
        kwargs["key"] = jnp.asarray(self.seed_keys[0]) if key is None else key
        if "sample_weight" not in overrides and np.any(self.sample_weight != 1.0):
            if np.shape(X)[0] != self.sample_weight.shape[0]:
                raise ValueError(f"the sweep used sample weights for {self.sample_weight.shape[0]} rows "
                                 f"but X has {np.shape(X)[0]}: pass sample_weight= to refit.")
            kwargs["sample_weight"] = self.sample_weight
        kwargs.update(overrides)
        return api.fit(X, y, **kwargs)

    def summary(self) -> List[Dict[str, Any]]:
        """One dict per configuration: its values, ``best_round``, ``mean``, ``se``, ``n``."""
        n = self.n_rows // self.n_configs
        return [{"config": c, **self.configs[c], "best_round": int(self.best_rounds[c]),
                 "mean": float(self.best_scores[c]), "se": float(self.best_ses[c]), "n": n}
                for c in range(self.n_configs)]

    def to_rows(self, curves: bool = True) -> List[Dict[str, Any]]:
        """One dict per configuration x fold x seed: the values, ``fold``, ``seed``, the row's own
        best round and score, its score at its configuration's best round, its final score, and
        (``curves=True``) the whole validation and training curves as lists."""
        out = []
        for i in range(self.n_rows):
            c = int(self.config[i])
            r = self.configs[c]["n_rounds"]
            curve = self.valid_curves[i, :r]
            own = _best_index(curve, self.greater_is_better)
            row = {"config": c, **self.configs[c], "fold": int(self.fold[i]), "seed": int(self.seed[i]),
                   "best_round": own + 1, "best": float(curve[own]),
                   "at_config_best_round": float(curve[self.best_rounds[c] - 1]),
                   "final": float(curve[-1])}
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
        cols = ["rank", *self.swept, "best_round", "mean", "se"]
        lines = []
        shown = order if max_rows is None else order[:max_rows]
        for rank, c in enumerate(shown, 1):
            cells = [str(rank)] + [_fmt(self.configs[c][k]) for k in self.swept]
            cells += [str(int(self.best_rounds[c])), f"{self.best_scores[c]:.6g}", f"{self.best_ses[c]:.3g}"]
            lines.append(cells + (["<- best"] if c == self.best_index else []))
        widths = [max(len(h), *(len(l[j]) for l in lines)) for j, h in enumerate(cols)]
        fmt_row = lambda cells: "  ".join(s.rjust(w) for s, w in zip(cells, widths)) + (
            "  " + cells[-1] if len(cells) > len(widths) else "")
        text = [head, fmt_row(cols), *(fmt_row(l) for l in lines)]
        if max_rows is not None and len(order) > max_rows:
            text.append(f"... ({len(order) - max_rows} more configurations)")
        return "\n".join(text)


def _fmt(v) -> str:
    if isinstance(v, float):
        return f"{v:.6g}"
    return str(v)


def _best_index(curve, greater_is_better: bool) -> int:
    if np.all(np.isnan(curve)):
        return len(curve) - 1
    return int(np.nanargmax(curve) if greater_is_better else np.nanargmin(curve))


def refit(result: SweepResult, X, y, **kwargs) -> api.Booster:
    """:meth:`SweepResult.refit`: the chosen configuration on all data, at its best round count."""
    return result.refit(X, y, **kwargs)


# --------------------------------------------------------------------------------------------
# Grid parsing.
# --------------------------------------------------------------------------------------------


def _loss_param_name(name: str) -> str:
    return name[len(_LOSS_PREFIX):] if name.startswith(_LOSS_PREFIX) else name


def _as_list(v, name: str) -> list:
    if isinstance(v, (str, bytes)) or v is None:
        raise TypeError(f"{name} must be a number or a list of numbers; got {v!r}.")
    arr = np.asarray(v)
    if arr.ndim == 0:
        return [arr.item()]
    if arr.ndim != 1 or arr.size == 0:
        raise ValueError(f"{name} must be a scalar or a non-empty 1-D list; got shape {arr.shape}.")
    return arr.tolist()


def _classify(name: str, loss: losses_lib.Loss) -> str:
    """``"hyper"`` or ``"loss"`` (a parameter of ``loss``); raises for anything else."""
    if name in STATIC_SETTINGS:
        raise ValueError(f"grid key {name!r} sets array shapes: pass it as the {name}= argument "
                         f"(an int or a list of ints) instead of in grid.")
    if name.startswith(_LOSS_PREFIX):
        pname = _loss_param_name(name)
        if pname not in loss.params:
            raise ValueError(f"grid key {name!r}: loss {loss.name!r} has no parameter {pname!r} "
                             f"(its parameters: {sorted(loss.params)}).")
        return "loss"
    in_hyper, in_loss = name in HYPERPARAMETERS, name in loss.params
    if in_hyper and in_loss:
        raise ValueError(f"grid key {name!r} is both a hyperparameter and a parameter of loss "
                         f"{loss.name!r}: write {_LOSS_PREFIX + name!r} for the loss parameter.")
    if in_hyper:
        return "hyper"
    if in_loss:
        return "loss"
    raise ValueError(f"grid key {name!r} is not a continuous hyperparameter {HYPERPARAMETERS} nor a "
                     f"parameter of loss {loss.name!r} ({sorted(loss.params)}).")


def _grid_points(grid, loss: losses_lib.Loss) -> Tuple[List[Dict[str, float]], Tuple[str, ...]]:
    """Grid points (dicts of continuous values) and the swept names."""
    if grid is None or (isinstance(grid, Mapping) and not grid):
        return [{}], ()
    if isinstance(grid, Mapping):
        names = tuple(grid)
        values = [_as_list(grid[k], f"grid[{k!r}]") for k in names]
        points = [dict(zip(names, combo)) for combo in itertools.product(*values)]
    elif isinstance(grid, Sequence) and all(isinstance(g, Mapping) for g in grid) and grid:
        names = tuple(grid[0])
        for i, g in enumerate(grid):
            if tuple(g) != names and set(g) != set(names):
                raise ValueError(f"grid[{i}] has keys {sorted(g)}; every configuration of a list grid "
                                 f"must have the keys of grid[0], {sorted(names)}.")
        points = [{k: g[k] for k in names} for g in grid]
    else:
        raise TypeError("grid must be a dict {name: list of values} (cartesian product) or a "
                        f"non-empty list of dicts (explicit configurations); got {type(grid).__name__}.")
    for name in names:
        kind = _classify(name, loss)
        for p in points:
            v = p[name]
            if isinstance(v, bool) or not isinstance(v, numbers.Real):
                raise TypeError(f"grid[{name!r}] values must be real numbers; got {v!r}.")
            p[name] = float(v)
            if kind == "hyper":
                lo, hi, lo_open = _BOUNDS[name]
                api._check_real(p[name], f"grid[{name!r}] value", lo, hi, lo_open=lo_open)
            elif not np.isfinite(p[name]):
                raise ValueError(f"grid[{name!r}] values must be finite; got {v!r}.")
    return points, names


def _static_list(v, name: str, lo: int, hi: int) -> List[int]:
    values = v if isinstance(v, (list, tuple, np.ndarray)) else [v]
    if len(values) == 0:
        raise ValueError(f"{name} must be an int or a non-empty list of ints.")
    out = [api._check_int(x.item() if isinstance(x, np.generic) else x, name, lo, hi) for x in values]
    if len(set(out)) != len(out):
        raise ValueError(f"{name}={list(values)} holds a value twice.")
    return out


def _as_raw_key(key) -> np.ndarray:
    if isinstance(key, numbers.Integral) and not isinstance(key, bool):
        return np.asarray(jax.random.PRNGKey(int(key)))
    key = jnp.asarray(key) if not isinstance(key, jax.Array) else key
    if jnp.issubdtype(key.dtype, jax.dtypes.prng_key):
        key = jax.random.key_data(key)
    key = np.asarray(key)
    if key.shape != (2,) or key.dtype != np.uint32:
        raise TypeError(f"key must be an int seed or a jax.random key; got shape {key.shape}, "
                        f"dtype {key.dtype}.")
    return key


def _fold_table(y, sw, folds, seeds: int, base_key, stratified, repeat_folds: bool,
                loss: losses_lib.Loss) -> Tuple[np.ndarray, int]:
    """``(S, n)`` fold of every row under each seed, and the number of folds K."""
    n = y.shape[0]
    classification = loss.task in ("binary", "multiclass")
    if isinstance(folds, numbers.Integral) and not isinstance(folds, bool):
        if stratified is None:
            stratified = classification
        if stratified and not classification:
            raise ValueError(f"stratified=True needs class labels; loss {loss.name!r} is {loss.task!r}.")
        n_folds = api._check_int(folds, "folds", 2, n)
        host_seed = [int(base_key[0]), int(base_key[1])]
        table = np.stack([fold_ids(y, n_folds, seed=host_seed + [s if repeat_folds else 0],
                                   stratified=bool(stratified)) for s in range(seeds)])
    else:
        explicit = np.asarray(folds)
        if explicit.shape != (n,) or not np.issubdtype(explicit.dtype, np.integer):
            raise ValueError(f"folds must be an int or an (n,) = ({n},) int array of fold ids; got "
                             f"{explicit.dtype} array of shape {explicit.shape}.")
        n_folds = int(explicit.max()) + 1
        if explicit.min() < 0 or n_folds < 2 or len(np.unique(explicit)) != n_folds:
            raise ValueError(f"folds ids must be 0..K-1 with every id used and K >= 2; got ids "
                             f"{np.unique(explicit)[:10].tolist()}.")
        table = np.broadcast_to(explicit.astype(np.int32), (seeds, n)).copy()
    for s in range(seeds):
        for f in range(n_folds):
            held = table[s] == f
            if not np.any(sw[held] > 0) or not np.any(sw[~held] > 0):
                raise ValueError(f"fold {f} of seed {s} leaves no positively weighted row to "
                                 "train or to validate on: use fewer folds or more samples.")
    return table, n_folds


def _select(valid_curves, configs, n_per_config: int, greater: bool):
    """Mean and standard-error curves per configuration, its best round, and the best one."""
    n_configs, r_max = len(configs), valid_curves.shape[1]
    per_config = valid_curves.reshape(n_configs, n_per_config, r_max)
    mean = per_config.mean(axis=1)
    se = (per_config.std(axis=1, ddof=1) / np.sqrt(n_per_config) if n_per_config > 1
          else np.full_like(mean, np.nan))
    best_rounds = np.array([_best_index(mc[: cfg["n_rounds"]], greater) + 1
                            for mc, cfg in zip(mean, configs)], np.int64)
    best_scores = mean[np.arange(n_configs), best_rounds - 1]
    best_ses = se[np.arange(n_configs), best_rounds - 1]
    if np.all(np.isnan(best_scores)):
        raise FloatingPointError("every configuration's validation metric is NaN.")
    return mean, se, best_rounds, best_scores, best_ses, _best_index(best_scores, greater)


# --------------------------------------------------------------------------------------------
# The sweep.
# --------------------------------------------------------------------------------------------


def sweep(
    X,
    y,
    loss: Union[str, losses_lib.Loss, Callable] = "squared_error",
    *,
    grid: Union[Mapping[str, Sequence[float]], Sequence[Mapping[str, float]], None] = None,
    folds: Union[int, Sequence[int], np.ndarray] = 5,
    seeds: int = 3,
    n_rounds: Union[int, Sequence[int]] = 100,
    depth: Union[int, Sequence[int]] = 6,
    n_bins: Union[int, Sequence[int]] = 256,
    metric: Union[None, str, Callable] = None,
    greater_is_better: bool = False,
    stratified: Optional[bool] = None,
    repeat_folds: bool = True,
    chunk_size: Optional[int] = None,
    memory_budget: Optional[int] = None,
    devices: Optional[Sequence[Any]] = None,
    key: Any = 0,
    sample_weight=None,
    learning_rate: float = 0.1,
    l2: float = 1.0,
    min_split_gain: float = 0.0,
    min_child_weight: float = 1.0,
    subsample: float = 1.0,
    colsample: float = 1.0,
    colsample_by: str = "tree",
    per_output_trees: bool = False,
    n_outputs: Optional[int] = None,
    task: Optional[str] = None,
    keep_trees: bool = False,
    verbose: bool = False,
) -> SweepResult:
    """Cross-validate every configuration of a grid, all models vmapped in one compiled program.

    Args:
      X, y, loss: as :func:`jboost.fit`.
      grid: ``{name: values}`` (cartesian product) or a list of ``{name: value}`` dicts (explicit
        configurations). Names: the continuous hyperparameters ``HYPERPARAMETERS`` or a parameter
        of ``loss`` (e.g. ``"alpha"`` of the quantile loss, ``"delta"`` of Huber; ``"loss.<p>"``
        when a name is both).
      folds: the number of folds K (>= 2), or an explicit ``(n,)`` int array of fold ids 0..K-1
        (the same partition for every seed).
      seeds: the number of seeds S. Seed ``s`` fits with key ``fold_in(key, s)`` and, when
        ``repeat_folds``, draws its own random partition (repeated K-fold CV).
      n_rounds, depth, n_bins: static settings; an int or a list of ints (the sweep takes their
        product with the grid). One compilation per ``(depth, n_bins)``; fewer rounds are prefixes.
      metric: ``None`` (the mean loss on the held-out fold: ``boost``'s validation loss), a name in
        ``METRICS`` (``"error_rate"``, ``"mse"``, ``"mae"``), or a function
        ``metric(y, raw, w) -> scalar`` (``raw`` shaped as :func:`jboost.predict` returns it,
        ``w`` the held-out weights: zero outside the fold), traced under ``vmap``.
      greater_is_better: the direction of a custom metric.
      stratified: stratify the folds by class; default: True for classification losses.
      repeat_folds: a new partition per seed (True) or one partition for all seeds.
      chunk_size: models per device in one compiled call; default from :func:`model_bytes`
        against ``memory_budget`` (see :func:`auto_chunk_size`). The last chunk is padded.
      memory_budget: bytes per device for one chunk (default: 1 GiB on CPU, half the device
        memory on accelerators).
      devices: devices sharing the model axis (default: all of ``jax.devices()``).
      key: an int seed or a ``jax.random`` key.
      sample_weight: optional ``(n,)`` non-negative weights (multiplied into both masks).
      learning_rate, l2, min_split_gain, min_child_weight, subsample, colsample: values of the
        hyperparameters not in ``grid``.
      colsample_by, per_output_trees, n_outputs, task: as :func:`jboost.fit` (not swept).
      keep_trees: also return every fitted model's trees (``SweepResult.trees``).
      verbose: print progress per chunk.

    Returns:
      A :class:`SweepResult`.
    """
    t_start = time.perf_counter()
    X = api._as_matrix(X, "X")
    n, n_features = X.shape
    y = api._as_vector(y, n, "y")
    api._check_labels_finite(y)
    sw = np.ones((n,), np.float32) if sample_weight is None else api._as_vector(sample_weight, n, "sample_weight")
    api._check_weights(sw)
    loss_obj = api._resolve_loss(loss, y, n_outputs, task)
    if colsample_by not in ("tree", "level"):
        raise ValueError(f"colsample_by={colsample_by!r} must be 'tree' or 'level'.")
    fixed_hyper = dict(learning_rate=learning_rate, l2=l2, min_split_gain=min_split_gain,
                       min_child_weight=min_child_weight, subsample=subsample, colsample=colsample)
    for name, v in fixed_hyper.items():
        lo, hi, lo_open = _BOUNDS[name]
        if isinstance(v, bool) or not isinstance(v, numbers.Real):
            raise TypeError(f"{name} must be a real number (sweep it through grid); got {v!r}.")
        api._check_real(v, name, lo, hi, lo_open=lo_open)
    points, names = _grid_points(grid, loss_obj)
    rounds_list = _static_list(n_rounds, "n_rounds", 1, 10**7)
    depth_list = _static_list(depth, "depth", 1, api.MAX_DEPTH)
    bins_list = _static_list(n_bins, "n_bins", 3, binning.MAX_BINS)
    seeds = api._check_int(seeds, "seeds", 1, 10**6)
    if chunk_size is not None:
        chunk_size = api._check_int(chunk_size, "chunk_size", 1, 10**7)
    classification = loss_obj.task in ("binary", "multiclass")
    if metric is not None and not callable(metric):
        if metric not in METRICS:
            raise ValueError(f"metric={metric!r} must be None, one of {sorted(METRICS)} or a function "
                             "metric(y, raw, w).")
        if metric == "error_rate" and not classification:
            raise ValueError(f"metric='error_rate' needs a classification loss; {loss_obj.name!r} is "
                             f"{loss_obj.task!r}.")
    if metric is not None and not isinstance(metric, str):
        try:
            hash(metric)
        except TypeError:
            raise TypeError("metric must be hashable (a function); it is static in the compiled program.")
    greater = bool(greater_is_better) if callable(metric) else False

    # Folds: (S, n) fold of every row for every seed.
    base_key = _as_raw_key(key)
    fold_table, n_folds = _fold_table(y, sw, folds, seeds, base_key, stratified, repeat_folds, loss_obj)
    seed_keys = np.stack([np.asarray(jax.random.fold_in(jnp.asarray(base_key), s)) for s in range(seeds)])

    # Configurations: static combination (outer) x grid point (inner).
    statics = list(itertools.product(rounds_list, depth_list, bins_list))
    configs = [{**p, "n_rounds": r, "depth": d, "n_bins": b} for (r, d, b) in statics for p in points]
    swept = tuple(names) + tuple(s for s, lst in zip(STATIC_SETTINGS, (rounds_list, depth_list, bins_list))
                                 if len(lst) > 1)
    n_points = len(points)
    k = loss_obj.n_outputs
    trees_per_round = k if per_output_trees else 1

    # Per grid point values of every hyperparameter and loss parameter.
    hyper_values = {h: np.array([p.get(h, fixed_hyper[h]) for p in points], np.float32) for h in HYPERPARAMETERS}
    loss_key = {_loss_param_name(name): name for name in names if name not in HYPERPARAMETERS}
    loss_values = {pname: np.array([p[loss_key[pname]] if pname in loss_key else default for p in points],
                                   np.float32)
                   for pname, default in loss_obj.params.items()}

    # Models of a (depth, n_bins) group: grid point x fold x seed, fitted to the group's largest n_rounds.
    devices = tuple(jax.devices() if devices is None else devices)
    n_dev = len(devices)
    models_per_group = n_points * n_folds * seeds
    m_point = np.repeat(np.arange(n_points), n_folds * seeds)
    m_fold = np.tile(np.repeat(np.arange(n_folds), seeds), n_points)
    m_seed = np.tile(np.arange(seeds), n_points * n_folds)
    r_max = max(rounds_list)
    # One device: commit the shared inputs to it (jit then runs there); several: shard_map places them.
    put = (lambda a: jax.device_put(a, devices[0])) if n_dev == 1 else jnp.asarray
    y_dev, sw_dev = put(y), put(sw)
    fold_dev, keys_dev = put(fold_table), put(seed_keys)

    group_valid, group_train, group_trees = {}, {}, {}
    borders_of, chunk_sizes, n_chunks_total, first_chunk_s, per_model = {}, {}, 0, {}, {}
    for b in bins_list:
        borders_of[b] = binning.compute_borders(X, b, sample_weight=None if sample_weight is None else sw)
    traces_before = sum(_TRACES.values())
    for b in bins_list:
        X_binned = put(binning.bin_features(X, borders_of[b]))  # one binned copy shared by all models
        missing = binning.has_missing(X_binned, b)
        for d in depth_list:
            config = boosting.BoostConfig(n_rounds=r_max, depth=d, n_bins=b,
                                          per_output_trees=bool(per_output_trees), colsample_by=colsample_by,
                                          missing=missing)
            fused = devices[0].platform == "cpu" and _native.available() and b <= 256
            mb = model_bytes(n, n_features, d, b, k, r_max, trees_per_round, keep_trees, fused)
            per_model[(d, b)] = mb
            size = chunk_size or auto_chunk_size(mb, math.ceil(models_per_group / n_dev), devices[0],
                                                 memory_budget)
            chunk_sizes[(d, b)] = size
            step = size * n_dev
            n_chunks = math.ceil(models_per_group / step)
            order = np.arange(n_chunks * step)
            order = np.minimum(order, models_per_group - 1)  # pad by repeating the last model
            program = _program(config, metric, bool(keep_trees), devices)
            outs = []
            for c in range(n_chunks):
                idx = order[c * step:(c + 1) * step]
                pts = m_point[idx]
                hyper = boosting.Hyperparams(*(jnp.asarray(hyper_values[h][pts]) for h in HYPERPARAMETERS))
                loss_c = loss_obj.replace(params={p: jnp.asarray(v[pts]) for p, v in loss_values.items()})
                t0 = time.perf_counter()
                out = program(X_binned, y_dev, sw_dev, fold_dev, keys_dev, hyper, loss_c,
                              jnp.asarray(m_fold[idx], jnp.int32), jnp.asarray(m_seed[idx], jnp.int32))
                if c == 0:
                    jax.block_until_ready(out)
                    first_chunk_s[(d, b)] = time.perf_counter() - t0
                outs.append(out)
                if verbose:
                    print(f"[sweep] depth={d} n_bins={b}: chunk {c + 1}/{n_chunks} "
                          f"({step} models) dispatched at {time.perf_counter() - t_start:.1f}s", flush=True)
            n_chunks_total += n_chunks
            valid = np.concatenate([np.asarray(o.valid) for o in outs])[:models_per_group]
            train = np.concatenate([np.asarray(o.train) for o in outs])[:models_per_group]
            group_valid[(d, b)], group_train[(d, b)] = valid.astype(np.float64), train.astype(np.float64)
            if keep_trees:
                trees = jax.tree_util.tree_map(lambda *a: np.concatenate([np.asarray(x) for x in a])[:models_per_group],
                                               *[o.trees for o in outs])
                group_trees[(d, b)] = tree_lib.with_borders(
                    jax.tree_util.tree_map(jnp.asarray, trees), jnp.asarray(borders_of[b]))
    n_compilations = sum(_TRACES.values()) - traces_before

    # Rows: configuration x fold x seed.
    n_configs = len(configs)
    n_rows = n_configs * n_folds * seeds
    row_config = np.repeat(np.arange(n_configs), n_folds * seeds)
    row_fold = np.tile(np.repeat(np.arange(n_folds), seeds), n_configs)
    row_seed = np.tile(np.arange(seeds), n_configs * n_folds)
    row_point = row_config % n_points
    model_of_row = (row_point * n_folds + row_fold) * seeds + row_seed
    valid_curves = np.full((n_rows, r_max), np.nan)
    train_curves = np.full((n_rows, r_max), np.nan)
    for i0 in range(0, n_rows, n_folds * seeds):
        cfg = configs[row_config[i0]]
        g, r = (cfg["depth"], cfg["n_bins"]), cfg["n_rounds"]
        rows = slice(i0, i0 + n_folds * seeds)
        valid_curves[rows, :r] = group_valid[g][model_of_row[rows], :r]
        train_curves[rows, :r] = group_train[g][model_of_row[rows], :r]

    mean_curves, se_curves, best_rounds, best_scores, best_ses, best_index = _select(
        valid_curves, configs, n_folds * seeds, greater)

    fixed = {h: float(fixed_hyper[h]) for h in HYPERPARAMETERS}
    fixed.update(colsample_by=colsample_by, per_output_trees=bool(per_output_trees))
    info = dict(n_compilations=n_compilations, chunk_size={f"depth={d},n_bins={b}": s for (d, b), s in chunk_sizes.items()},
                n_chunks=n_chunks_total, n_devices=n_dev, n_models=models_per_group * len(depth_list) * len(bins_list),
                seconds=time.perf_counter() - t_start,
                first_chunk_seconds={f"depth={d},n_bins={b}": s for (d, b), s in first_chunk_s.items()},
                model_bytes={f"depth={d},n_bins={b}": s for (d, b), s in per_model.items()})
    return SweepResult(
        configs=tuple(configs), swept=swept, config=row_config, fold=row_fold, seed=row_seed,
        valid_curves=valid_curves, train_curves=train_curves, mean_curves=mean_curves,
        se_curves=se_curves, best_rounds=best_rounds, best_scores=best_scores, best_ses=best_ses,
        best_index=int(best_index), metric=_metric_name(metric), greater_is_better=greater,
        fold_table=fold_table, seed_keys=seed_keys, sample_weight=sw, borders=borders_of,
        loss=loss_obj, fixed=fixed, trees=group_trees if keep_trees else None,
        model_of_row=model_of_row, info=info)


# Moved: folds to jboost.cv, memory estimates and chunking to jboost._batching.
fold_ids = cv.fold_ids
model_bytes = _batching.model_bytes
auto_chunk_size = _batching.auto_chunk_size
