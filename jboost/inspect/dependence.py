"""Partial dependence and ICE curves: Friedman's weighted tree traversal or the average over data."""

from __future__ import annotations

import functools
from typing import NamedTuple, Optional

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from jboost import _compile, checks
from jboost.data import tabular
from jboost.inspect import covers as covers_lib
from jboost.models import base as base_lib, sums
from jboost.trees import depthwise as depthwise_lib, family, node_table


class PartialDependence(NamedTuple):
    """:func:`partial_dependence`'s result.

    Attributes:
      grid: one ``(G_j,)`` float32 grid per target feature.
      values: the partial dependence on the raw-score scale: ``(G_1[, G_2][, K])``, batch axes
        in front.
      individual: with ``ice=True``, every data row's curve ``(m, G_1[, G_2][, K])``; else ``None``.
    """

    grid: tuple
    values: jax.Array
    individual: Optional[jax.Array] = None


@_compile.jit
def _pd_tree(trees, grid_rows, data, weight, targets):
    """``(G, K)``: the sum over trees of Friedman's traversal at the grid rows (covers from
    ``data``)."""
    covers = covers_lib.leaf_covers(trees, data.T, weight)
    X_t = grid_rows.T
    if isinstance(trees, depthwise_lib.DepthwiseTrees):
        def walk(args):
            tree, cover = args
            path = node_table.paths(tree)
            ratio, fpath = covers_lib.path_terms(tree, cover, path)
            in_s = jnp.any(fpath[..., None] == targets, axis=-1)              # (L, D)
            agree = jax.vmap(lambda x: covers_lib.path_agree(tree, x, path), in_axes=1)(X_t)  # (G, L, D)
            share = jnp.prod(jnp.where(in_s[None], agree.astype(jnp.float32), ratio[None]), axis=-1)
            return share @ tree.leaf_values

        return jnp.sum(lax.map(walk, (trees, covers)), axis=0)

    def one(args):
        tree, cover = args
        in_s = jnp.any(tree.features[:, None] == targets[None, :], axis=1)
        return covers_lib.walk_values(tree.leaf_values, cover, tree.leaf_index_raw(X_t), in_s)

    return jnp.sum(lax.map(one, (trees, covers)), axis=0)


@functools.partial(_compile.jit, static_argnames=("ice",))
def _pd_average(trees, grid_values, data, weight, targets, ice: bool):
    """``(G, K)`` the weighted mean over ``data`` of the trees' sum with the target columns set
    to each grid point; with ``ice``, also every row's ``(m, G, K)``."""
    def one(point):
        rows = data.at[:, targets].set(jnp.broadcast_to(point, (data.shape[0], point.shape[0])))
        raw = family.predict_raw(trees, rows)                          # (m, K)
        mean = jnp.sum(weight[:, None] * raw, axis=0) / jnp.sum(weight)
        return mean, (raw if ice else jnp.zeros((0, raw.shape[1]), raw.dtype))

    means, rows = lax.map(one, grid_values)
    return means, jnp.swapaxes(rows, 0, 1)


def _grid(column: np.ndarray, resolution: int, percentiles) -> np.ndarray:
    """scikit-learn's grid of a column (docs/inspect.md)."""
    values = np.unique(column[np.isfinite(column)])
    if values.size == 0:
        raise ValueError("a target feature has no finite value in data: no grid can be made.")
    if values.size <= resolution:
        return values.astype(np.float32)
    lo, hi = np.percentile(column[np.isfinite(column)], [100 * p for p in percentiles])
    return np.linspace(lo, hi, resolution).astype(np.float32)


def partial_dependence(model, features, data, *, grid=None, grid_resolution: int = 20,
                       percentiles=(0.05, 0.95), method: str = "tree", ice: bool = False,
                       data_weight=None, n_rounds: Optional[int] = None) -> PartialDependence:
    """Partial dependence of the raw score on one or two features (ESL eq. 10.47-10.48):
    Friedman's weighted tree traversal (``method="tree"``) or the average over ``data``
    (``"average"``, with ICE curves). See docs/inspect.md.

    Args:
      model: any fitted jboost ensemble, batch axes allowed.
      features: a feature index or name (a model fitted on a DataFrame), or a pair of them.
      data: ``(m, F)`` rows: the covers (``"tree"``) or the rows averaged over (``"average"``);
        also the source of the default grid.
      grid: optional sequence of one grid per feature; default from ``data``'s column (its
        distinct values if at most ``grid_resolution``, else equally spaced between its
        ``percentiles``).
      method: ``"tree"`` or ``"average"``.
      ice: with ``method="average"``, also every row's curve.
      data_weight: optional ``(m,)`` weights of ``data``.
      n_rounds: the model of the first ``n_rounds`` stages (as :func:`jboost.predict`).

    Returns:
      :class:`PartialDependence` ``(grid, values, individual)`` on the raw-score scale.
    """
    base_lib.check_model(model)
    sums.check_tree_sum(model)
    checks.check_choice(method, "method", ("tree", "average"))
    if ice and method != "average":
        raise ValueError("ice=True needs method='average' (the traversal has no per-row curves).")
    targets = target_features(model, features)
    names = getattr(model, "feature_names", None)
    data = tabular.predict_matrix(tabular.frame_in_order(data, None if names is None else names.values),
                                      model.n_features, name="data")
    if data.shape[0] == 0:
        raise ValueError("data has no rows: partial dependence averages over (or counts covers of) "
                         "rows; pass e.g. the training rows.")
    data = np.asarray(data, np.float32)
    weight = jnp.asarray(tabular.as_weights(data_weight, data.shape[0], "data_weight", "data"))
    if grid is None:
        grid = [_grid(data[:, j], int(grid_resolution), percentiles) for j in targets]
    else:
        if len(grid) != len(targets):
            raise ValueError(f"grid has {len(grid)} grids for {len(targets)} features.")
        grid = [np.asarray(g, np.float32).reshape(-1) for g in grid]
        if any(g.size == 0 or not np.all(np.isfinite(g)) for g in grid):
            raise ValueError("every grid must hold finite values.")
    mesh = np.stack([m.reshape(-1) for m in np.meshgrid(*grid, indexing="ij")], axis=1)  # (G, S)
    shape = tuple(g.size for g in grid)
    t = jnp.asarray(targets, jnp.int32)
    keeps = base_lib.keeps_columns(model)

    def one(m):
        trees, constant, offset = sums.tree_sum(m, n_rounds)
        covers_lib.check_trees(trees)
        if method == "tree":
            rows = np.zeros((mesh.shape[0], model.n_features), np.float32)
            rows[:, targets] = mesh
            values, each = _pd_tree(trees, jnp.asarray(rows), jnp.asarray(data), weight, t), None
        else:
            values, each = _pd_average(trees, jnp.asarray(mesh), jnp.asarray(data), weight, t, ice)
        values = base_lib.add_offset(constant + values, offset)
        values = values.reshape(shape + values.shape[-1:])
        if ice:
            each = base_lib.add_offset(constant + each, offset).reshape((data.shape[0],) + shape + each.shape[-1:])
        if values.shape[-1] == 1 and not keeps:
            values = values[..., 0]
            each = None if each is None else each[..., 0]
        return values, each

    values, each = base_lib.batched(model, one)
    return PartialDependence(tuple(jnp.asarray(g) for g in grid), values, each if ice else None)


def target_features(model, features) -> list:
    """One or two feature indices from indices or names."""
    items = list(features) if isinstance(features, (list, tuple)) else [features]
    if not 1 <= len(items) <= 2:
        raise ValueError(f"features must be one feature or a pair; got {len(items)}.")
    names = getattr(model, "feature_names", None)
    out = []
    for f in items:
        if isinstance(f, str):
            if names is None or f not in names.values:
                raise ValueError(f"feature {f!r} is not a feature name of the model"
                                 + ("" if names is None else f" ({list(names.values)[:10]})")
                                 + (" (it was fitted without names: pass column indices)" if names is None else "") + ".")
            out.append(names.values.index(f))
        else:
            out.append(checks.check_int(f, "features", 0, model.n_features - 1))
    if len(set(out)) != len(out):
        raise ValueError(f"features names the same feature twice: {items}.")
    return out
