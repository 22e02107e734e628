"""jboost's trees as format-neutral node lists, for the exporters (:mod:`jboost.io.onnx_trees`,
:mod:`jboost.io.treelite_export`; NumPy only): every split keeps jboost's routing rule exactly,
every leaf its float32 values.

jboost sends a row right when it is missing and the split's ``missing_right``, else when ``c(x) >
c(border)``, ``c`` the subnormal clamp of :func:`jboost.data.binning.clamp_subnormals_jax` (a
subnormal as the smallest normal number of its sign, ``-0`` as ``+0``). A split becomes the test
``x <= c(border)`` (true: left) with NaN going left unless ``missing_right``: ``c(x) > b`` is
``x > b`` for every ``b`` in ``c``'s image but ``-tiny``, where it is ``x >= 0``, exported as the
test ``x < 0``. Oblivious trees are expanded to full binary trees (``2**D`` leaves: the leaf index
``sum_d right_d << d``); node tables (depth-wise and loss-guided trees) are walked from node 0 as
:func:`jboost.trees.node_table.walk` walks them. See docs/guide/model-serving.md."""

from __future__ import annotations

from typing import Iterator, List, NamedTuple, Union

import numpy as np

from jboost.trees import depthwise, lossguide, oblivious

#: The tree families exported, by class (subclasses may route otherwise: refused).
OBLIVIOUS = (oblivious.ObliviousTrees,)
NODE_TABLES = (depthwise.DepthwiseTrees, lossguide.LossGuidedTrees)

TINY = np.float32(np.finfo(np.float32).tiny)


class Split(NamedTuple):
    """A split node ``node`` of one tree: a non-missing ``x = X[:, feature]`` goes to node
    ``left`` when ``x op threshold`` (``op`` ``"<="`` or ``"<"``), else to node ``right``; a
    missing one to ``left`` when ``default_left``."""

    node: int
    feature: int
    op: str
    threshold: np.float32
    default_left: bool
    left: int
    right: int


class Leaf(NamedTuple):
    """A leaf node ``node`` of one tree, adding ``values`` ``(K,)`` float32 to the raw scores."""

    node: int
    values: np.ndarray


Node = Union[Split, Leaf]


def clamp(v) -> np.float32:
    """One float32 as jboost compares it: a subnormal as the smallest normal number of its sign,
    a zero as ``+0``."""
    v = np.float32(v)
    if v == 0:
        return np.float32(0)
    if abs(v) < TINY:
        return TINY if v > 0 else -TINY
    return v


def split_test(border):
    """``(op, threshold)`` of the test whose true side is exactly jboost's left side for a
    non-missing ``x``: ``c(x) <= c(border)``.

    Raises:
      ValueError: a NaN border (a corrupted model).
    """
    b = clamp(border)
    if np.isnan(b):
        raise ValueError("A split has a NaN border, which sends no row right; the model is "
                         "corrupted and cannot be exported (jboost.save would refuse it too).")
    if b == -TINY:  # c(x) > -tiny iff x >= 0 (x in (-tiny, 0) clamps to -tiny)
        return "<", np.float32(0)
    return "<=", b


def split(node: int, feature, border, missing_right, left: int, right: int) -> Split:
    """The :class:`Split` of a jboost split: right iff missing and ``missing_right``, else
    ``c(x) > c(border)``."""
    op, threshold = split_test(border)
    return Split(node, int(feature), op, threshold, not bool(missing_right), left, right)


class TreeArrays(NamedTuple):
    """One family's flattened trees as NumPy arrays (leading axis: trees)."""

    features: np.ndarray
    borders: np.ndarray
    missing_right: np.ndarray
    leaf_values: np.ndarray
    children: np.ndarray  # node tables only; an empty array for oblivious trees
    depth: int


def tree_arrays(trees, who: str) -> TreeArrays:
    """The flattened trees (one leading axis) of an exported family as NumPy arrays (``who``:
    the exporter, for the error).

    Raises:
      ValueError: the family is not one of the built-in families.
    """
    if type(trees) in OBLIVIOUS:
        children = np.zeros((0,), np.int32)
    elif type(trees) in NODE_TABLES:
        children = np.asarray(trees.children, np.int64)
    else:
        raise ValueError(f"{who} exports the built-in tree families (ObliviousTrees, "
                         f"DepthwiseTrees, LossGuidedTrees); this model's trees are "
                         f"{type(trees).__module__}.{type(trees).__qualname__}, whose routing "
                         f"it cannot know: fit with tree_family='oblivious', 'depthwise' or "
                         "'lossguide' to export.")
    return TreeArrays(np.asarray(trees.features, np.int64), np.asarray(trees.borders, np.float32),
                      np.asarray(trees.missing_right, bool),
                      np.asarray(trees.leaf_values, np.float32), children, int(trees.depth))


def oblivious_nodes(t: TreeArrays, i: int) -> Iterator[Node]:
    """Tree ``i`` of oblivious trees as a full binary tree: level ``d``'s node of prefix ``p``
    (the leaf bits of the levels above) is node ``2**d - 1 + p``; its children take prefix ``p``
    (left) and ``p + 2**d`` (right); leaf ``L`` is node ``2**D - 1 + L``."""
    depth = t.features.shape[-1]
    n_inner = (1 << depth) - 1
    for d in range(depth):
        first_child = n_inner if d + 1 == depth else (2 << d) - 1
        for p in range(1 << d):
            yield split((1 << d) - 1 + p, t.features[i, d], t.borders[i, d], t.missing_right[i, d],
                        first_child + p, first_child + p + (1 << d))
    for leaf in range(1 << depth):
        yield Leaf(n_inner + leaf, t.leaf_values[i, leaf])


def table_nodes(t: TreeArrays, i: int) -> Iterator[Node]:
    """Tree ``i`` of node tables, the nodes the walk reaches from node 0 in ``max(depth, 1)``
    steps (a child ``c >= 0`` is node ``c``, ``c < 0`` leaf ``~c``), each child reference a node
    of its own (node 0 the root).

    Raises:
      ValueError: a path does not end in a leaf within the walk's steps (an inconsistent table).
    """
    steps = max(t.depth, 1)
    stack = [(0, 0, 0)]  # (table node, exported node, step)
    next_id = 1
    while stack:
        node, out_id, step = stack.pop()
        kids = []
        for child in t.children[i, node]:
            if child >= 0 and step + 1 >= steps:
                raise ValueError(f"Tree {i}'s node {node} has child node {child} at the walk's "
                                 f"last step (depth {t.depth}): an inconsistent node table, which "
                                 "cannot be exported.")
            kids.append((int(child), next_id))
            next_id += 1
        yield split(out_id, t.features[i, node], t.borders[i, node], t.missing_right[i, node],
                    kids[0][1], kids[1][1])
        for child, kid_id in kids:
            if child < 0:
                yield Leaf(kid_id, t.leaf_values[i, ~child])
            else:
                stack.append((child, kid_id, step + 1))


def tree_nodes(trees, who: str) -> Iterator[List[Node]]:
    """The node list of every tree of flattened ``trees`` (one leading axis), in order, each
    starting with its root (``who``: the exporter, for the errors).

    Raises:
      ValueError: a custom tree family, a NaN border or an inconsistent node table.
    """
    t = tree_arrays(trees, who)
    nodes = oblivious_nodes if type(trees) in OBLIVIOUS else table_nodes
    for i in range(t.features.shape[0]):
        yield list(nodes(t, i))
