"""jboost's trees as the node lists of ONNX-ML's ``TreeEnsembleRegressor`` (NumPy only), from
the format-neutral node lists of :mod:`jboost.io.tree_walk`: a split's test ``x <= t`` becomes
``BRANCH_LEQ`` and ``x < t`` ``BRANCH_LT`` (true: left), its missing direction
``nodes_missing_value_tracks_true``; a leaf's float32 values its targets' weights. See
docs/guide/model-serving.md."""

from __future__ import annotations

from typing import Dict, List

import numpy as np

from jboost.io import tree_walk

#: The ONNX branch mode of each test of :class:`jboost.io.tree_walk.Split`.
MODES = {"<=": "BRANCH_LEQ", "<": "BRANCH_LT"}


class Nodes:
    """The ``nodes_*`` and ``target_*`` attribute lists of a ``TreeEnsembleRegressor``, filled
    tree by tree."""

    def __init__(self):
        self.nodes: Dict[str, List] = {k: [] for k in (
            "treeids", "nodeids", "featureids", "values", "modes", "truenodeids",
            "falsenodeids", "missing_value_tracks_true")}
        self.targets: Dict[str, List] = {k: [] for k in ("treeids", "nodeids", "ids", "weights")}
        self.n_trees = 0

    def split(self, tree: int, s: tree_walk.Split) -> None:
        """A split node: true (left) iff ``x op threshold``, or missing and ``default_left``."""
        for key, value in (("treeids", tree), ("nodeids", s.node), ("featureids", s.feature),
                           ("values", float(s.threshold)), ("modes", MODES[s.op]),
                           ("truenodeids", s.left), ("falsenodeids", s.right),
                           ("missing_value_tracks_true", int(s.default_left))):
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


def add_trees(nodes: Nodes, trees, first_target: int) -> None:
    """Every tree of flattened ``trees`` (one leading axis) into ``nodes``, its leaves adding to
    targets ``first_target ..``.

    Raises:
      ValueError: a custom tree family, a NaN border or an inconsistent node table.
    """
    for tree in tree_walk.tree_nodes(trees, "to_onnx"):
        for node in tree:
            if isinstance(node, tree_walk.Split):
                nodes.split(nodes.n_trees, node)
            else:
                nodes.leaf(nodes.n_trees, node.node, node.values, first_target)
        nodes.n_trees += 1
