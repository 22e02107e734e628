"""jboost's trees as the node lists of ONNX-ML's ``TreeEnsembleRegressor`` (NumPy only): every
split keeps jboost's routing rule exactly, every leaf its float32 values.

jboost sends a row right when it is missing and the split's ``missing_right``, else when ``c(x) >
c(border)``, ``c`` the subnormal clamp of :func:`jboost.data.binning.clamp_subnormals_jax` (a
subnormal as the smallest normal number of its sign, ``-0`` as ``+0``). A split becomes
``BRANCH_LEQ`` on ``c(border)`` (true: left) with NaN tracking the true branch unless
``missing_right``: ``c(x) > b`` is ``x > b`` for every ``b`` in ``c``'s image but ``-tiny``, where
it is ``x >= 0``, exported as ``BRANCH_LT 0``. Oblivious trees are expanded to full binary trees
(``2**D`` leaves: the leaf index ``sum_d right_d << d``); node tables (depth-wise and loss-guided
trees) are walked from node 0 as :func:`jboost.trees.node_table.walk` walks them. See
docs/guide/model-serving.md."""

from __future__ import annotations

from typing import Dict, List, NamedTuple

import numpy as np

from jboost.trees import depthwise, lossguide, oblivious

#: The tree families exported, by class (subclasses may route otherwise: refused).
OBLIVIOUS = (oblivious.ObliviousTrees,)
NODE_TABLES = (depthwise.DepthwiseTrees, lossguide.LossGuidedTrees)

TINY = np.float32(np.finfo(np.float32).tiny)


class Nodes:
    """The ``nodes_*`` and ``target_*`` attribute lists of a ``TreeEnsembleRegressor``, filled
    tree by tree."""

    def __init__(self):
        self.nodes: Dict[str, List] = {k: [] for k in (
            "treeids", "nodeids", "featureids", "values", "modes", "truenodeids",
            "falsenodeids", "missing_value_tracks_true")}
        self.targets: Dict[str, List] = {k: [] for k in ("treeids", "nodeids", "ids", "weights")}
        self.n_trees = 0

    def split(self, tree: int, node: int, feature: int, border, missing_right: bool,
              left: int, right: int) -> None:
        """A split node: right iff missing and ``missing_right``, else ``c(x) > c(border)``."""
        mode, threshold = split_mode(border)
        for key, value in (("treeids", tree), ("nodeids", node), ("featureids", int(feature)),
                           ("values", float(threshold)), ("modes", mode), ("truenodeids", left),
                           ("falsenodeids", right),
                           ("missing_value_tracks_true", int(not missing_right))):
            self.nodes[key].append(value)

    def leaf(self, tree: int, node: int, values: np.ndarray, first_target: int) -> None:
        """A leaf node adding ``values (K,)`` to targets ``first_target ..`` (exact zeros left
        out; a leaf of zeros adds one 0 to its first target)."""
        for key, value in (("treeids", tree), ("nodeids", node), ("featureids", 0),
                           ("values", 0.0), ("modes", "LEAF"), ("truenodeids", 0),
                           ("falsenodeids", 0), ("missing_value_tracks_true", 0)):
            self.nodes[key].append(value)
        kept = np.flatnonzero(values != 0)
        if kept.size == 0:
            kept = np.zeros((1,), np.int64)
        for k in kept:
            self.targets["treeids"].append(tree)
            self.targets["nodeids"].append(node)
            self.targets["ids"].append(first_target + int(k))
            self.targets["weights"].append(float(values[k]))


def clamp(v) -> np.float32:
    """One float32 as jboost compares it: a subnormal as the smallest normal number of its sign,
    a zero as ``+0``."""
    v = np.float32(v)
    if v == 0:
        return np.float32(0)
    if abs(v) < TINY:
        return TINY if v > 0 else -TINY
    return v


def split_mode(border):
    """``(mode, threshold)`` of the ONNX node whose true branch is exactly jboost's left side for
    a non-missing ``x``: ``c(x) <= c(border)``."""
    b = clamp(border)
    if np.isnan(b):
        raise ValueError("to_onnx: a split has a NaN border, which sends no row right; the model "
                         "is corrupted (jboost.save would refuse it too).")
    if b == -TINY:  # c(x) > -tiny iff x >= 0 (x in (-tiny, 0) clamps to -tiny)
        return "BRANCH_LT", np.float32(0)
    return "BRANCH_LEQ", b


class TreeArrays(NamedTuple):
    """One family's flattened trees as NumPy arrays (leading axis: trees)."""

    features: np.ndarray
    borders: np.ndarray
    missing_right: np.ndarray
    leaf_values: np.ndarray
    children: np.ndarray  # node tables only; an empty array for oblivious trees
    depth: int


def tree_arrays(trees) -> TreeArrays:
    """The flattened trees (one leading axis) of an exported family as NumPy arrays.

    Raises:
      ValueError: the family is not one of the built-in families.
    """
    if type(trees) in OBLIVIOUS:
        children = np.zeros((0,), np.int32)
    elif type(trees) in NODE_TABLES:
        children = np.asarray(trees.children, np.int64)
    else:
        raise ValueError(f"to_onnx exports the built-in tree families (ObliviousTrees, "
                         f"DepthwiseTrees, LossGuidedTrees); this model's trees are "
                         f"{type(trees).__module__}.{type(trees).__qualname__}, whose routing "
                         "it cannot know: fit with tree_family='oblivious', 'depthwise' or "
                         "'lossguide' to export.")
    return TreeArrays(np.asarray(trees.features, np.int64), np.asarray(trees.borders, np.float32),
                      np.asarray(trees.missing_right, bool),
                      np.asarray(trees.leaf_values, np.float32), children, int(trees.depth))


def add_oblivious(nodes: Nodes, tree: int, t: TreeArrays, i: int, first_target: int) -> None:
    """Tree ``i`` of oblivious trees as a full binary tree: level ``d``'s node of prefix ``p``
    (the leaf bits of the levels above) is node ``2**d - 1 + p``; its children take prefix ``p``
    (left) and ``p + 2**d`` (right); leaf ``L`` is node ``2**D - 1 + L``."""
    depth = t.features.shape[-1]
    n_inner = (1 << depth) - 1
    for d in range(depth):
        first_child = n_inner if d + 1 == depth else (2 << d) - 1
        for p in range(1 << d):
            nodes.split(tree, (1 << d) - 1 + p, t.features[i, d], t.borders[i, d],
                        bool(t.missing_right[i, d]), first_child + p, first_child + p + (1 << d))
    for leaf in range(1 << depth):
        nodes.leaf(tree, n_inner + leaf, t.leaf_values[i, leaf], first_target)


def add_node_table(nodes: Nodes, tree: int, t: TreeArrays, i: int, first_target: int) -> None:
    """Tree ``i`` of node tables, the nodes the walk reaches from node 0 in ``max(depth, 1)``
    steps (a child ``c >= 0`` is node ``c``, ``c < 0`` leaf ``~c``), each child reference a node
    of its own.

    Raises:
      ValueError: a path does not end in a leaf within the walk's steps (an inconsistent table).
    """
    steps = max(t.depth, 1)
    stack = [(0, 0, 0)]  # (table node, ONNX node, step)
    next_id = 1
    while stack:
        node, onnx_id, step = stack.pop()
        kids = []
        for child in t.children[i, node]:
            if child >= 0 and step + 1 >= steps:
                raise ValueError(f"to_onnx: tree {i}'s node {node} has child node {child} at the "
                                 f"walk's last step (depth {t.depth}): an inconsistent node table.")
            kids.append((int(child), next_id))
            next_id += 1
        nodes.split(tree, onnx_id, t.features[i, node], t.borders[i, node],
                    bool(t.missing_right[i, node]), kids[0][1], kids[1][1])
        for child, kid_id in kids:
            if child < 0:
                nodes.leaf(tree, kid_id, t.leaf_values[i, ~child], first_target)
            else:
                stack.append((child, kid_id, step + 1))


def add_trees(nodes: Nodes, trees, first_target: int) -> None:
    """Every tree of flattened ``trees`` (one leading axis) into ``nodes``, its leaves adding to
    targets ``first_target ..``."""
    t = tree_arrays(trees)
    add = add_oblivious if type(trees) in OBLIVIOUS else add_node_table
    for i in range(t.features.shape[0]):
        add(nodes, nodes.n_trees, t, i, first_target)
        nodes.n_trees += 1
