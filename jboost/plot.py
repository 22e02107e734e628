"""Plots of fitted models with matplotlib (the optional ``plots`` extra): importance, partial
dependence (ESL Figures 10.14-10.16), SHAP, learning curves and tree diagrams. See docs/plot.md.
"""

from __future__ import annotations

from typing import Optional, Sequence

import numpy as np

from jboost import inspect as inspect_lib  # its importance() (the name shadows the module)
from jboost.inspect import dependence, shap
from jboost.models import sums
from jboost.trees import depthwise as depthwise_lib, oblivious


def _pyplot():
    try:
        import matplotlib.pyplot as plt
    except ImportError:  # pragma: no cover - the message is the point
        raise ImportError("jboost.plot needs matplotlib: pip install 'jboost[plots]' (or "
                          "matplotlib).") from None
    return plt


def _axes(ax, figsize=(6.0, 4.0)):
    return ax if ax is not None else _pyplot().subplots(figsize=figsize)[1]


def _names(model, n_features: int, feature_names: Optional[Sequence[str]]):
    if feature_names is not None:
        names = [str(f) for f in feature_names]
        if len(names) != n_features:
            raise ValueError(f"feature_names has {len(names)} names; the model has {n_features} features.")
        return names
    own = getattr(model, "feature_names", None)
    return list(own.values) if own is not None else [f"x{j}" for j in range(n_features)]


def _one_model(model, what: str):
    if tuple(getattr(model, "batch_shape", ())):
        raise ValueError(f"{what} plots one model; this one has batch axes {model.batch_shape}: index "
                         "it first (jax.tree_util.tree_map(lambda a: a[i], model)).")


def importance(model, kind: str = "relative", *, max_features: int = 20,
               feature_names: Optional[Sequence[str]] = None, ax=None):
    """Horizontal bars of :func:`jboost.inspect.importance` (ESL Figure 10.6 / 10.14 for
    ``"relative"``), the most important feature on top, at most ``max_features``."""
    _one_model(model, "importance")
    imp = np.asarray(inspect_lib.importance(model, kind))
    names = _names(model, imp.shape[-1], feature_names)
    order = np.argsort(imp)[::-1][:max_features][::-1]
    ax = _axes(ax, (6.0, 0.3 * len(order) + 1.2))
    ax.barh(np.arange(len(order)), imp[order], color="tab:red" if kind == "relative" else "tab:blue")
    ax.set_yticks(np.arange(len(order)))
    ax.set_yticklabels([names[j] for j in order])
    ax.set_xlabel({"relative": "relative importance (ESL eq. 10.43; max 100)", "gain": "summed split gain",
                   "split_count": "number of splits"}.get(kind, kind))
    return ax


def partial_dependence(model, features, data, *, method: str = "tree", ice: bool = False,
                       grid_resolution: int = 20, output: int = 0,
                       feature_names: Optional[Sequence[str]] = None, ax=None, **kwargs):
    """Partial dependence in one variable (a line; ``ice``: every row's curve) or two (contours;
    ESL Figures 10.15-10.16). Other keyword arguments go to
    :func:`jboost.inspect.partial_dependence`."""
    _one_model(model, "partial dependence")
    pdp = dependence.partial_dependence(model, features, data, method="average" if ice else method,
                                         ice=ice, grid_resolution=grid_resolution, **kwargs)
    targets = dependence.target_features(model, features)
    names = _names(model, model.n_features, feature_names)
    values = np.asarray(pdp.values)
    if values.ndim == len(targets) + 1:
        values = values[..., output]
    ax = _axes(ax)
    if len(targets) == 1:
        grid = np.asarray(pdp.grid[0])
        if ice:
            curves = np.asarray(pdp.individual)
            curves = curves[..., output] if curves.ndim == 3 else curves
            ax.plot(grid, curves[: min(len(curves), 200)].T, color="0.8", lw=0.5)
        ax.plot(grid, values, color="tab:green", lw=2)
        column = np.asarray(data, np.float64)[:, targets[0]] if not hasattr(data, "columns") else \
            np.asarray(data.iloc[:, targets[0]], np.float64)
        deciles = np.nanpercentile(column, np.arange(10, 100, 10))
        lo = ax.get_ylim()[0]
        ax.plot(deciles, np.full_like(deciles, lo), "|", color="k", ms=10)
        ax.set_xlabel(names[targets[0]])
        ax.set_ylabel("partial dependence (raw score)")
    else:
        g1, g2 = (np.asarray(g) for g in pdp.grid)
        cs = ax.contourf(g1, g2, values.T, levels=12, cmap="viridis")
        ax.figure.colorbar(cs, ax=ax, label="partial dependence (raw score)")
        ax.set_xlabel(names[targets[0]])
        ax.set_ylabel(names[targets[1]])
    return ax


def shap_summary(model, X, *, data=None, max_features: int = 20, output: int = 0,
                 feature_names: Optional[Sequence[str]] = None, key: int = 0, ax=None):
    """SHAP beeswarm: one row per feature (by mean ``|SHAP|``), each explained row a dot at its
    SHAP value coloured by the feature's value (docs/plot.md)."""
    _one_model(model, "SHAP summary")
    values = np.asarray(shap.shap_values(model, X, data=data).values)
    values = values[..., output] if values.ndim == 3 else values
    Xa = np.asarray(X.to_numpy(np.float64, na_value=np.nan) if hasattr(X, "to_numpy") else X, np.float64)
    names = _names(model, values.shape[1], feature_names)
    order = np.argsort(np.mean(np.abs(values), axis=0))[::-1][:max_features][::-1]
    ax = _axes(ax, (6.5, 0.35 * len(order) + 1.4))
    rng = np.random.default_rng(key)
    for row, j in enumerate(order):
        col = Xa[:, j]
        lo, hi = np.nanpercentile(col, 5) if np.isfinite(col).any() else 0, \
            np.nanpercentile(col, 95) if np.isfinite(col).any() else 1
        scaled = np.clip((col - lo) / (hi - lo if hi > lo else 1.0), 0, 1)
        colours = np.where(np.isfinite(col)[:, None], _pyplot().cm.coolwarm(np.nan_to_num(scaled))[:, :3],
                           np.array([[0.6, 0.6, 0.6]]))
        ax.scatter(values[:, j], row + 0.3 * rng.uniform(-1, 1, len(col)), c=colours, s=6, lw=0)
    ax.axvline(0, color="0.5", lw=0.8)
    ax.set_yticks(np.arange(len(order)))
    ax.set_yticklabels([names[j] for j in order])
    ax.set_xlabel("SHAP value (impact on the raw score)")
    return ax


def shap_dependence(model, feature, X, *, data=None, output: int = 0,
                    feature_names: Optional[Sequence[str]] = None, ax=None):
    """SHAP dependence plot: a feature's value against its SHAP value, one dot per row."""
    _one_model(model, "SHAP dependence")
    j = dependence.target_features(model, feature)[0]
    values = np.asarray(shap.shap_values(model, X, data=data).values)
    values = values[..., output] if values.ndim == 3 else values
    Xa = np.asarray(X.to_numpy(np.float64, na_value=np.nan) if hasattr(X, "to_numpy") else X, np.float64)
    ax = _axes(ax)
    ax.scatter(Xa[:, j], values[:, j], s=6, color="tab:purple")
    ax.axhline(0, color="0.5", lw=0.8)
    ax.set_xlabel(_names(model, values.shape[1], feature_names)[j])
    ax.set_ylabel("SHAP value")
    return ax


def learning_curves(model, *, ax=None):
    """A Booster's training loss and (with an ``eval_set``) validation loss per round, the best
    round (early stopping) marked."""
    _one_model(model, "learning-curve")
    train = np.asarray(model.train_loss)
    valid = None if getattr(model, "valid_loss", None) is None else np.asarray(model.valid_loss)
    ax = _axes(ax)
    rounds = np.arange(1, train.shape[-1] + 1)
    ax.plot(rounds, train, label="training loss")
    if valid is not None and np.isfinite(valid).any():
        ax.plot(rounds, valid, label="validation loss")
    best = getattr(model, "best_round", None)
    if best is not None:
        b = int(np.asarray(best)) + 1
        ax.axvline(b, color="k", ls="--", lw=0.8, label=f"best round ({b})")
    ax.set_xlabel("round")
    ax.set_ylabel("mean loss")
    ax.legend()
    return ax


def tree(model, index: int = 0, *, output: int = 0, feature_names: Optional[Sequence[str]] = None,
         ax=None):
    """One oblivious or depth-wise tree as a diagram (docs/plot.md); ``index`` counts trees in
    the order :func:`jboost.predict` adds them, ``output`` picks the leaf values' output."""
    _one_model(model, "tree")
    trees, _, _ = sums.tree_sum(model)
    if not isinstance(trees, (oblivious.ObliviousTrees, depthwise_lib.DepthwiseTrees)):
        raise TypeError("jboost.plot.tree draws oblivious and depth-wise trees; this model's trees "
                        f"are {type(trees).__name__}.")
    n = trees.features.shape[0]
    if not 0 <= index < n:
        raise ValueError(f"index={index} must be in [0, {n - 1}] (the model has {n} trees).")
    if isinstance(trees, depthwise_lib.DepthwiseTrees):
        return _depthwise_tree(model, trees, index, output, feature_names, ax)
    feats = np.asarray(trees.features[index])
    borders = np.asarray(trees.borders[index])
    missing = np.asarray(trees.missing_right[index])
    leaves = np.asarray(trees.leaf_values[index])[:, output]
    names = _names(model, model.n_features, feature_names)
    depth = len(feats)
    ax = _axes(ax, (max(6.0, 0.45 * 2**depth), 1.0 + 0.6 * depth))
    for l in range(depth):
        y = depth - l
        ax.text(0.5 * (2**depth - 1), y, f"level {l}: {names[feats[l]]} <= {borders[l]:.4g}"
                f"   (missing -> {'right' if missing[l] else 'left'})", ha="center", va="center",
                bbox=dict(boxstyle="round", fc="w", ec="0.5"))
    return _leaf_cells(ax, leaves, depth, [format(i, f"0{depth}b")[::-1] for i in range(2**depth)],
                       "leaf (its path: bit l = right at level l)")


def _leaf_cells(ax, leaves, depth: int, labels, xlabel: str):
    """The bottom row of a tree diagram: each leaf value a cell coloured by its sign and size."""
    norm = np.max(np.abs(leaves)) or 1.0
    cmap = _pyplot().cm.coolwarm
    for i, v in enumerate(leaves):
        ax.add_patch(_pyplot().Rectangle((i - 0.45, -0.4), 0.9, 0.8,
                                         color=cmap(0.5 + 0.5 * v / norm)))
        ax.text(i, 0, f"{v:.3g}", ha="center", va="center", fontsize=7,
                rotation=90 if depth > 3 else 0)
    ax.set_xlim(-1, len(leaves))
    ax.set_ylim(-0.8, depth + 0.8)
    ax.set_xticks(range(len(leaves)))
    ax.set_xticklabels(labels, fontsize=6, rotation=90)
    ax.set_yticks([])
    ax.set_xlabel(xlabel)
    return ax


def _depthwise_tree(model, trees, index, output, feature_names, ax):
    """A depth-wise tree (:class:`jboost.trees.depthwise.DepthwiseTrees`): each splitting node's
    rule above its two children, the reachable leaves as coloured cells left to right, labelled
    with their leaf ids (docs/plot.md)."""
    feats = np.asarray(trees.features[index])
    borders = np.asarray(trees.borders[index])
    missing = np.asarray(trees.missing_right[index])
    gains = np.asarray(trees.gains[index])
    children = np.asarray(trees.children[index])
    values = np.asarray(trees.leaf_values[index])[:, output]
    names = _names(model, model.n_features, feature_names)

    def settle(c):  # a node that does not split sends its rows left
        while c >= 0 and gains[c] <= 0:
            c = int(children[c, 0])
        return c

    order, rules = [], []  # leaves left to right; (node, level, x, children) of splitting nodes

    def place(c, level):  # ``(x, is a leaf)`` of node or leaf c: leaves at 0, 1, ...; a node
        c = settle(c)     # midway above its children
        if c < 0:
            order.append(~c)
            return float(len(order) - 1), True
        kids = [place(int(children[c, b]), level + 1) for b in (0, 1)]
        x = 0.5 * (kids[0][0] + kids[1][0])
        rules.append((c, level, x, kids))
        return x, False

    place(0, 0)
    depth = max([level + 1 for _, level, _, _ in rules], default=0)
    n = len(order)
    ax = _axes(ax, (max(6.0, 0.45 * n), 1.9 + 0.9 * max(depth - 1, 0)))
    for c, level, x, kids in sorted(rules, key=lambda r: (r[1], r[2])):  # root first, left first
        y = depth - level
        for xc, leaf in kids:  # a child node one level down, a child leaf's cell in the bottom row
            ax.plot([x, xc], [y, 0.4 if leaf else y - 1], color="0.6", lw=0.6)
        ax.text(x, y, f"{names[feats[c]]} <= {borders[c]:.3g}\n(NaN {'R' if missing[c] else 'L'})",
                ha="center", va="center", fontsize=6, bbox=dict(boxstyle="round", fc="w", ec="0.5"))
    return _leaf_cells(ax, values[np.asarray(order, np.int64)], depth,
                       [str(leaf) for leaf in order], "leaf")
