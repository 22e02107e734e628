"""The grid of a sweep: its configurations, grid points (continuous hyperparameters, loss
parameters and categorical priors: traced) times static settings (``n_rounds``, ``depth``,
``n_bins``: one compiled program per ``(depth, n_bins)``). See docs/sweeps.md."""

from __future__ import annotations

import itertools
import numbers
from typing import Any, Dict, List, Mapping, NamedTuple, Optional, Sequence, Tuple

import numpy as np
from jboost.fitting import settings
from jboost.losses import checks, loss as loss_lib


# The continuous hyperparameters of jboost.fit, in the order of boosting.Hyperparams.
HYPERPARAMETERS = settings.HYPERPARAMETERS
STATIC_SETTINGS = ("n_rounds", "depth", "n_bins")
#: The traced settings of categorical columns' target statistics (sweeps with categorical columns).
CATEGORICAL_SETTINGS = ("cat_prior", "cat_prior_weight")
LOSS_PREFIX = "loss."


def loss_param_name(name: str) -> str:
    """The loss parameter a grid key names (``"loss.alpha"`` and ``"alpha"`` name ``alpha``)."""
    return name[len(LOSS_PREFIX):] if name.startswith(LOSS_PREFIX) else name


def classify(name: str, loss: loss_lib.Loss) -> str:
    """``"hyper"`` (a continuous hyperparameter), ``"loss"`` (a parameter of ``loss``) or
    ``"categorical"`` (:data:`CATEGORICAL_SETTINGS`); raises for anything else."""
    if name in CATEGORICAL_SETTINGS:
        return "categorical"
    if name in STATIC_SETTINGS:
        raise ValueError(f"grid key {name!r} sets array shapes: pass it as the {name}= argument "
                         f"(an int or a list of ints) instead of in grid.")
    if name.startswith(LOSS_PREFIX):
        pname = loss_param_name(name)
        if pname not in loss.params:
            raise ValueError(f"grid key {name!r}: loss {loss.name!r} has no parameter {pname!r} "
                             f"(its parameters: {sorted(loss.params)}).")
        return "loss"
    in_hyper, in_loss = name in HYPERPARAMETERS, name in loss.params
    if in_hyper and in_loss:
        raise ValueError(f"grid key {name!r} is both a hyperparameter and a parameter of loss "
                         f"{loss.name!r}: write {LOSS_PREFIX + name!r} for the loss parameter.")
    if in_hyper:
        return "hyper"
    if in_loss:
        return "loss"
    raise ValueError(f"grid key {name!r} is not a continuous hyperparameter {HYPERPARAMETERS} nor a "
                     f"parameter of loss {loss.name!r} ({sorted(loss.params)}).")


def split_config(cfg: Mapping[str, Any]) -> Tuple[Dict[str, Any], Dict[str, float]]:
    """A configuration's ``jboost.fit`` keyword arguments (hyperparameters and static settings)
    and its loss parameters."""
    kwargs, loss_params = {}, {}
    for name, value in cfg.items():
        if name in HYPERPARAMETERS or name in STATIC_SETTINGS or name in CATEGORICAL_SETTINGS:
            kwargs[name] = value
        else:
            loss_params[loss_param_name(name)] = value
    return kwargs, loss_params


def _as_list(v, name: str) -> list:
    if isinstance(v, (str, bytes)) or v is None:
        raise TypeError(f"{name} must be a number or a list of numbers; got {v!r}.")
    arr = np.asarray(v)
    if arr.ndim == 0:
        return [arr.item()]
    if arr.ndim != 1 or arr.size == 0:
        raise ValueError(f"{name} must be a scalar or a non-empty 1-D list; got shape {arr.shape}.")
    return arr.tolist()


def grid_points(grid, loss: loss_lib.Loss) -> Tuple[List[Dict[str, float]], Tuple[str, ...]]:
    """Grid points (dicts of continuous values, checked) and the swept names, from ``{name:
    values}``, a list of ``{name: value}`` dicts, or ``None`` / ``{}`` (one point)."""
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
        kind = classify(name, loss)
        for p in points:
            v = p[name]
            if isinstance(v, bool) or not isinstance(v, numbers.Real):
                raise TypeError(f"grid[{name!r}] values must be real numbers; got {v!r}.")
            p[name] = float(v)
            if kind == "hyper":
                settings.check_hyperparameter(name, p[name])
            elif kind == "categorical":
                ok = np.isfinite(p[name]) and (name == "cat_prior" or p[name] > 0)
                if not ok:
                    raise ValueError(f"grid[{name!r}] value {v!r} must be a finite number"
                                     + (" > 0 (the weight of the prior)." if name != "cat_prior"
                                        else "."))
            else:
                checks.check_loss_param(loss, loss_param_name(name), p[name], f"grid[{name!r}]")
    return points, names


def static_list(v, name: str) -> list:
    """A static setting given as one value or a list of distinct values (the values themselves
    are checked by :func:`jboost.fitting.settings.settings`)."""
    values = list(v) if isinstance(v, (list, tuple, np.ndarray)) else [v]
    if not values:
        raise ValueError(f"{name} must be an int or a non-empty list of ints.")
    values = [x.item() if isinstance(x, np.generic) else x for x in values]
    if len(set(values)) != len(values):
        raise ValueError(f"{name}={values} holds a value twice.")
    return values


class Grid(NamedTuple):
    """Every configuration of a sweep: static combination (``n_rounds``, then ``depth``, then
    ``n_bins``) x grid point (inner). A ``(depth, n_bins)`` group's models are fitted to the
    largest ``n_rounds``; every ``n_rounds`` reads a prefix."""

    points: List[Dict[str, float]]        # the grid points (continuous values only)
    names: Tuple[str, ...]                # the grid keys
    rounds: List[int]                     # the n_rounds values
    depths: List[int]
    bins: List[int]
    configs: List[Dict[str, Any]]         # point values + n_rounds, depth, n_bins
    hyper_values: Dict[str, np.ndarray]   # hyperparameter -> (n_points,) float32
    loss_values: Dict[str, np.ndarray]    # loss parameter -> (n_points,) float32
    # categorical columns: "cat_prior" -> (n_points, K) float32 (NaN: the default prior, each
    # fit's weighted mean of the statistic), "cat_prior_weight" -> (n_points,) float32
    cat_values: Dict[str, np.ndarray] = {}

    @property
    def n_points(self) -> int:
        return len(self.points)

    @property
    def max_rounds(self) -> int:
        return max(self.rounds)

    @property
    def groups(self) -> List[Tuple[int, int]]:
        """The ``(depth, n_bins)`` groups, one compiled program each, in fitting order."""
        return [(d, b) for b in self.bins for d in self.depths]

    @property
    def swept(self) -> Tuple[str, ...]:
        """The names that vary: grid keys, then static settings given as lists."""
        lists = (self.rounds, self.depths, self.bins)
        return self.names + tuple(s for s, values in zip(STATIC_SETTINGS, lists) if len(values) > 1)


class Layout(NamedTuple):
    """The models of a group, grid point x fold x seed (``(n_models,)`` each): model
    ``(point * n_folds + fold) * n_seeds + seed`` (a sweep's rows likewise, by configuration)."""

    point: np.ndarray
    fold: np.ndarray
    seed: np.ndarray

    @classmethod
    def of(cls, n_points: int, n_folds: int, n_seeds: int) -> "Layout":
        return cls(np.repeat(np.arange(n_points), n_folds * n_seeds),
                   np.tile(np.repeat(np.arange(n_folds), n_seeds), n_points),
                   np.tile(np.arange(n_seeds), n_points * n_folds))

    @property
    def n_models(self) -> int:
        return int(self.point.shape[0])


def make_grid(grid, loss: loss_lib.Loss, rounds: Sequence[int], depths: Sequence[int],
              bins: Sequence[int], fixed_hyper: Mapping[str, float],
              fixed_cat: Optional[Mapping[str, Any]] = None, n_stats: int = 1) -> Grid:
    """The :class:`Grid` of ``grid`` x the static lists; ``fixed_hyper``, ``loss.params`` and
    ``fixed_cat`` (categorical columns, else ``None``: a grid naming them is refused) fill the
    values the grid does not name."""
    points, names = grid_points(grid, loss)
    cat_names = [n for n in names if n in CATEGORICAL_SETTINGS]
    if cat_names and fixed_cat is None:
        raise ValueError(f"grid key {cat_names[0]!r} sets the prior of categorical columns' target "
                         "statistics, but X has no categorical column: name them with "
                         "cat_features= (or pass a DataFrame with category or string columns), or "
                         "drop the key.")
    configs = [{**p, "n_rounds": r, "depth": d, "n_bins": b}
               for (r, d, b) in itertools.product(rounds, depths, bins) for p in points]
    hyper_values = {h: np.array([p.get(h, fixed_hyper[h]) for p in points], np.float32)
                    for h in HYPERPARAMETERS}
    loss_key = {loss_param_name(name): name for name in names
                if name not in HYPERPARAMETERS and name not in CATEGORICAL_SETTINGS}
    loss_values = {pname: np.array([p[loss_key[pname]] if pname in loss_key else default
                                    for p in points], np.float32)
                   for pname, default in loss.params.items()}
    cat_values = {}
    if fixed_cat is not None:
        base = fixed_cat.get("cat_prior")
        base = (np.full((n_stats,), np.nan, np.float32) if base is None else
                np.broadcast_to(np.asarray(base, np.float32), (n_stats,)))
        cat_values = {
            "cat_prior": np.stack([np.full((n_stats,), p["cat_prior"], np.float32)
                                   if "cat_prior" in p else base for p in points]),
            "cat_prior_weight": np.array([p.get("cat_prior_weight", fixed_cat["cat_prior_weight"])
                                          for p in points], np.float32)}
    return Grid(points, names, list(rounds), list(depths), list(bins), configs, hyper_values,
                loss_values, cat_values)
