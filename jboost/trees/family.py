"""The tree-family protocol (:class:`TreeFamily`) and what every family shares: bin-to-float
borders, flattening stacked trees, leaf replay on bins, the Newton leaf values with parent
fallbacks, and raw-float prediction (:func:`predict_raw`). See docs/trees.md."""

from __future__ import annotations

from typing import Protocol

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from jboost import _compile, _native
from jboost._native import newton
from jboost.trees import splits as splits_lib


class TreeFamily(Protocol):
    """What a tree family implements: **the one place to write a new family** is a pytree class
    (e.g. a ``NamedTuple`` of arrays, leading axes indexing stacked trees) with these members.

    Boosting grows it through ``grow`` (``jboost.fit(tree_family=)``), the model protocol predicts
    it through ``leaf_index_raw`` and reads ``features``/``gains`` for feature importance. See
    docs/extending.md."""

    leaf_values: jax.Array  # float32 (..., n_leaves, K)
    features: jax.Array     # int32 (..., n_rules): the feature of each rule (importance)
    gains: jax.Array        # float32 (..., n_rules): the gain of each rule (0: not split)

    @staticmethod
    def grow(X_binned, grad, hess, *, depth: int, n_bins: int, l2, min_split_gain, min_child_weight,
             feature_masks=None, feature_subsets=None, axis_name=None, missing: bool = True,
             criterion: splits_lib.SplitCriterion = splits_lib.NEWTON):
        """One tree on feature-major bins and weighted ``(n, K)`` gradients/hessians, with the
        arguments of a family's ``fit_tree`` (:func:`jboost.trees.oblivious.fit_tree`); returns
        ``(tree, leaf)``: the tree (leaf values before shrinkage, bin thresholds only) and every
        training row's leaf ``(n,)`` int32."""

    def leaf_index_raw(self, X_t) -> jax.Array:
        """``(n,)`` leaf of each row of feature-major raw floats ``X_t (F, n)`` (NaN: missing),
        for one unstacked tree."""

    def with_borders(self, borders) -> "TreeFamily":
        """The trees with float thresholds from the fit's ``(F, n_bins - 1)`` bin borders (a bin
        threshold ``t`` of feature ``f`` becomes ``borders[f, t]``); any leading axes."""

    def leaf_index_binned(self, X_binned, n_bins: int) -> jax.Array:
        """``(n,)`` leaf of each row of feature-major bins ``X_binned (F, n)`` (``n_bins - 1``:
        missing), for one unstacked tree (boosting replays trees on the validation and training
        bins)."""


def depth_of(trees) -> int:
    """The depth of a family's trees: their ``depth`` property, else ``log2`` of the leaves."""
    depth = getattr(trees, "depth", None)
    return int(depth) if depth is not None else trees.leaf_values.shape[-2].bit_length() - 1


def take_borders(borders, features, thresholds):
    """``borders[features, thresholds]`` with JAX's index rule; concrete arrays are indexed on the
    host, with no program compiled for their number."""
    if any(isinstance(a, jax.core.Tracer) for a in (borders, features, thresholds)):
        return borders[features, thresholds]
    b = np.asarray(borders)
    if 0 in b.shape:  # no borders at all: JAX's own (empty-operand) gather
        return borders[features, thresholds]
    # One flat take with an int32 row-major index: a two-array fancy index (int64 conversions,
    # where, clip) dominates the fit of deep forests' tens of millions of nodes.
    dtype = np.int32 if b.size < 2**31 else np.int64
    f, t = (_in_range(np.asarray(a), size).astype(dtype, copy=False)
            for a, size in zip((features, thresholds), b.shape))
    flat = f * dtype(b.shape[1]) + t
    return jax.device_put(np.take(b.reshape(-1), flat))


def _in_range(a: np.ndarray, size: int) -> np.ndarray:
    """JAX's index rule on the host: negative indices count from the end, the rest are clamped."""
    if a.size and (a.min() < 0 or a.max() >= size):
        return np.clip(np.where(a < 0, a.astype(np.int64) + size, a), 0, size - 1)
    return a


def leaf_index_binned(tree: TreeFamily, X_binned, n_bins: int):
    """The leaf of each row of one tree on feature-major bins ``(F, n)``: the family's own
    ``leaf_index_binned``."""
    if hasattr(tree, "leaf_index_binned"):
        return tree.leaf_index_binned(X_binned, n_bins)
    if X_binned.shape[-1] == 0:  # no rows to replay (a fit without eval_set)
        return jnp.zeros((0,), jnp.int32)
    raise TypeError(f"tree family {type(tree).__name__} has no leaf_index_binned(X_binned, "
                    "n_bins): boosting replays its trees on binned rows (eval_set=, init_model=); "
                    "add the member (jboost.trees.family.TreeFamily).")


def node_sums(leaf_sums):
    """Sums at every level from the ``(2**D, C)`` leaf sums: list ``[level 0 (1, C), ..., level D]``."""
    depth = (leaf_sums.shape[0] - 1).bit_length()
    out = [leaf_sums]
    s = leaf_sums
    for d in range(depth - 1, -1, -1):
        s = s.reshape(2, 2**d, -1).sum(axis=0)  # node j of level d = children j and j + 2**d
        out.append(s)
    return out[::-1]


def newton_leaf_values(G, H, l2, min_child_weight, value=newton.newton_value, rows=None,
                       output_sum=None):
    """Newton leaf values ``-G / (H + l2)`` of ``(2**D, K)`` leaf sums, where a node no row reaches
    or below ``min_child_weight`` keeps its parent's value (docs/trees.md, "Leaf values").
    ``value``: a criterion's node value; ``rows``: ``(2**D,)`` counts of the rows of non-zero
    payload per leaf (``None``: a hessian sum ``> 0``); ``output_sum``: the sum over outputs
    (default ``jnp.sum``)."""
    k = G.shape[-1]
    levels = node_sums(jnp.concatenate([G, H], axis=-1))
    reached = [jnp.sum(s[:, k:], axis=-1, keepdims=True) > 0 for s in levels] if rows is None else \
        [r > 0 for r in node_sums(jnp.reshape(rows, (-1, 1)))]

    def node_value(s):
        return value(s[:, :k], s[:, k:], l2)

    values = node_value(levels[0])
    for s, r in zip(levels[1:], reached[1:]):
        h_node = (jnp.sum(s[:, k:], axis=-1, keepdims=True) if output_sum is None
                  else output_sum(s[:, k:], keepdims=True))
        ok = r & (h_node >= min_child_weight)
        parent = jnp.tile(values, (2, 1))  # node c's parent is c mod 2**d
        values = jnp.where(ok, node_value(s), parent)
    return values


def with_borders(trees: TreeFamily, borders) -> TreeFamily:
    """The trees (of any family) with float thresholds from the bin ``borders``."""
    return trees.with_borders(borders)


@_compile.jit
def predict_raw(trees: TreeFamily, X):
    """Sum of the leaf values of every tree (any leading axes) for raw-float rows ``X (n, F)`` ->
    ``(n, K)``: the CPU kernel or a ``lax.scan`` over trees, bitwise the same."""
    return _predict(trees, jnp.asarray(X, jnp.float32), feature_major=False)


@_compile.jit
def predict_raw_feature_major(trees: TreeFamily, X_t):
    """:func:`predict_raw` on feature-major rows ``X_t (F, n)`` (no transposition needed)."""
    return _predict(trees, jnp.asarray(X_t, jnp.float32), feature_major=True)


def _predict(trees: TreeFamily, X, feature_major: bool):
    flat = flatten_trees(trees)
    k = flat.leaf_values.shape[-1]
    n = X.shape[1] if feature_major else X.shape[0]

    def xla():
        # Each step gathers the tree's feature rows of X_t (contiguous: the comparisons vectorise).
        X_t = X if feature_major else X.T

        def step(acc, tree):
            leaf = tree.leaf_index_raw(X_t)
            return acc + tree.leaf_values[leaf], None

        out, _ = lax.scan(step, jnp.zeros((n, k), jnp.float32), flat)
        return out

    native = getattr(flat, "predict_native", None)  # the family's compiled CPU kernel, if any
    if not _native.available() or native is None:
        return xla()
    return _native.platform_dependent(cpu=lambda: native(X, feature_major), default=xla)


def native_sum(target: str, trees: TreeFamily, X, feature_major: bool, *structure, **attrs):
    """Every tree's leaf values summed by the compiled CPU kernel ``target`` (``predict.cc``);
    ``structure``: the family's arrays after its rules, ``attrs`` its static attributes."""
    n = X.shape[1] if feature_major else X.shape[0]
    out = jax.ShapeDtypeStruct((n, trees.leaf_values.shape[-1]), jnp.float32)
    call = jax.ffi.ffi_call(target, out, vmap_method="sequential")
    return call(X, trees.features.astype(jnp.int32), trees.borders.astype(jnp.float32),
                trees.missing_right.astype(jnp.uint8), *structure, trees.leaf_values.astype(jnp.float32),
                n_threads=np.int64(_native.cpu_threads()), feature_major=feature_major, **attrs)


def flatten_trees(trees: TreeFamily) -> TreeFamily:
    """Merge all leading (tree-indexing) axes into one."""
    n_lead = trees.leaf_values.ndim - 2
    n_trees = int(np.prod(trees.leaf_values.shape[:n_lead], dtype=np.int64))
    return jax.tree_util.tree_map(lambda a: a.reshape((n_trees,) + a.shape[n_lead:]), trees)
