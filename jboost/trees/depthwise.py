"""Depth-wise ("free") trees: the :class:`DepthwiseTrees` node table and its grower
:func:`fit_tree`.

Every node holds its own rule; a fitted tree is a node table of the nodes that split and the leaves
it has. Levels grow in JAX (:mod:`jboost.trees.depthwise_levels`) or, on CPU, as one kernel call per
tree (``jboost/_native/depthwise.cc``). See docs/trees.md."""

from __future__ import annotations

import functools
from typing import NamedTuple, Optional

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from jboost import _compile, _native
from jboost.data import binning
from jboost.trees import (depthwise_levels, family, histograms, node_splits, node_table,
                          splits as splits_lib)


class DepthwiseTrees(NamedTuple):
    """One or many depth-wise trees as a **node table** (leading axes index trees): a
    :class:`jboost.trees.family.TreeFamily` whose memory follows the nodes a tree has, not ``2**D``.

    Node ``i`` sends a row to ``children[i, right]``: ``c >= 0`` is node ``c`` (always ``> i``), ``c
    < 0`` is leaf ``~c``. A tree of ``I`` splitting nodes uses nodes ``0..I-1`` and leaves ``0..I``;
    the other slots are null nodes and zero leaves. ``level_counts`` holds the splitting nodes of
    each level; its length is the depth. See docs/trees.md ("Node tables")."""

    features: jax.Array       # int32 (..., N) each node's feature
    thresholds: jax.Array     # int32 (..., N) bin thresholds: right iff bin > threshold
    borders: jax.Array        # float32 (..., N) float thresholds: right iff x > border
    missing_right: jax.Array  # bool (..., N)
    children: jax.Array       # int32 (..., N, 2) [left, right]: node c >= 0 or leaf ~c
    leaf_values: jax.Array    # float32 (..., N + 1, K)
    gains: jax.Array          # float32 (..., N) each node's split gain (0: a null node)
    level_counts: jax.Array   # int32 (..., D) splitting nodes per level

    @property
    def depth(self) -> int:
        return self.level_counts.shape[-1]

    @property
    def n_outputs(self) -> int:
        return self.leaf_values.shape[-1]

    @property
    def n_leaves(self) -> int:
        """Leaf slots ``N + 1`` (static)."""
        return self.leaf_values.shape[-2]

    # The TreeFamily members.
    @staticmethod
    def grow(X_binned, grad, hess, **settings):
        """:func:`fit_tree`."""
        return fit_tree(X_binned, grad, hess, **settings)

    def leaf_index_raw(self, X_t) -> jax.Array:
        """The leaf of each row of feature-major raw floats ``X_t (F, n)`` (NaN: missing)."""
        return node_table.walk(self.features, self.borders, self.missing_right, self.children, self.depth,
                    X_t, jnp.isnan)

    def leaf_index_binned(self, X_binned, n_bins: int) -> jax.Array:
        """The leaf of each row of feature-major bins ``X_binned (F, n)``."""
        return node_table.walk(self.features, self.thresholds, self.missing_right, self.children, self.depth,
                    X_binned, lambda col: col == binning.missing_bin(n_bins))

    def predict_native(self, X, feature_major: bool) -> jax.Array:
        """Every tree's leaf values summed by the compiled CPU kernel (``predict.cc``)."""
        return family.native_sum(_native.PREDICT_DEPTHWISE, self, X, feature_major,
                                 self.children.astype(jnp.int32), depth=np.int64(self.depth))

    def with_borders(self, borders) -> "DepthwiseTrees":
        """Fill the float thresholds from the bin thresholds: ``border = borders[f, t]``."""
        return self._replace(borders=family.take_borders(borders, self.features, self.thresholds))


def from_dense(features, thresholds, borders, missing_right, leaf_values, gains,
               capacity: Optional[int] = None) -> DepthwiseTrees:
    """Trees of the dense heap layout (``(..., 2**D - 1)`` rules, ``(..., 2**D, K)`` leaves) as
    :class:`DepthwiseTrees` tables of ``capacity`` nodes (default ``2**D - 1``), predicting
    alike."""
    features = jnp.asarray(features, jnp.int32)
    lead = features.shape[:-1]
    depth = (features.shape[-1] + 1).bit_length() - 1
    capacity = max(1, (1 << depth) - 1) if capacity is None else int(capacity)
    args = [jnp.asarray(a).reshape((-1,) + jnp.shape(a)[len(lead):]) for a in
            (features, jnp.asarray(thresholds, jnp.int32), jnp.asarray(borders, jnp.float32),
             jnp.asarray(missing_right, bool), jnp.asarray(gains, jnp.float32),
             jnp.asarray(leaf_values, jnp.float32))]
    fields, _ = jax.vmap(lambda *a: node_table.dense_table(*a, capacity))(*args)
    table = DepthwiseTrees(*fields)
    if not isinstance(table.level_counts, jax.core.Tracer) and table.level_counts.size:
        used = int(np.asarray(table.level_counts).sum(axis=-1).max())
        if used > capacity:  # the table would lose nodes
            raise ValueError(f"from_dense: capacity={capacity} is below the {used} splitting "
                             f"nodes of a tree; pass capacity >= {used} (default 2**D - 1).")
    return jax.tree_util.tree_map(lambda a: a.reshape(lead + a.shape[1:]), table)


@functools.lru_cache(maxsize=None)
def kernel_available() -> bool:
    """Whether :func:`fit_tree`'s compact path runs the CPU whole-tree kernel (built, loaded,
    ``JBOOST_NATIVE`` not ``0``)."""
    return _native.available()


def _kernel_tree(X_binned, payload, feature_key, l2, min_split_gain, min_child_weight, *,
                 depth: int, n_bins: int, max_features: int, max_nodes: int, missing: bool,
                 capacity: int, row_weights=None):
    """The compact path's tree by the CPU kernel as a table of ``capacity`` nodes: ``(tree, leaf)``,
    bitwise :func:`jboost.trees.depthwise_levels.grow_compact`'s. ``row_weights`` ``(n,)`` multiply
    ``payload`` row by row in the kernel."""
    if not _native.load():
        raise RuntimeError("jboost's depth-wise tree kernel is not built; rebuild the kernels "
                           "(`python setup.py build_ext --inplace`) or set JBOOST_NATIVE=0.")
    n = X_binned.shape[-1]
    seed = (node_splits.feature_seed(feature_key) if feature_key is not None and max_features < X_binned.shape[0]
            else jnp.zeros((2,), jnp.uint32))
    f32 = lambda v: jnp.asarray(v, jnp.float32).reshape(())  # noqa: E731
    i32 = lambda *shape: jax.ShapeDtypeStruct(shape, jnp.int32)  # noqa: E731
    out = (i32(capacity), i32(capacity), i32(capacity), jax.ShapeDtypeStruct((capacity,), jnp.float32),
           i32(capacity, 2), i32(depth), i32(n),
           jax.ShapeDtypeStruct((capacity + 1, payload.shape[-1] // 2), jnp.float32))
    call = jax.ffi.ffi_call(_native.DEPTHWISE_TREE, out, vmap_method="expand_dims")
    w = jnp.ones((n,), jnp.float32) if row_weights is None else jnp.asarray(row_weights, jnp.float32)
    features, thresholds, mr, gains, children, counts, leaf, values = call(
        X_binned, payload, w, seed, f32(l2), f32(min_split_gain), f32(min_child_weight),
        depth=np.int64(depth), n_bins=np.int64(n_bins), max_features=np.int64(max_features),
        max_nodes=np.int64(max_nodes), n_threads=np.int64(histograms.kernel_threads(None)),
        missing=bool(missing))
    tree = DepthwiseTrees(features, thresholds, jnp.zeros((capacity,), jnp.float32), mr != 0,
                          children, values, gains, counts)
    return tree, leaf


@functools.partial(_compile.jit, static_argnames=("depth", "n_bins", "axis_name", "missing", "criterion",
                                             "max_nodes", "max_features", "interactions", "monotone"))
def fit_tree(X_binned, grad, hess, *, depth: int, n_bins: int, l2, min_split_gain, min_child_weight,
             feature_masks=None, feature_subsets=None, axis_name: Optional[str] = None,
             missing: bool = True, criterion: splits_lib.SplitCriterion = splits_lib.NEWTON,
             max_nodes: Optional[int] = None, feature_key=None, max_features: Optional[int] = None,
             row_weights=None, interactions: Optional[tuple] = None,
             monotone: Optional[tuple] = None):
    """Fit one depth-wise tree of fixed depth to weighted gradients and hessians, with the arguments
    of :func:`jboost.trees.oblivious.fit_tree` and (docs/trees.md, "Depth-wise growth arguments"):

    Args:
      feature_masks: optional ``(depth, F)`` bool per level, or ``(depth, 2**(depth - 1), F)`` per
        node (node ``j`` of level ``d`` reads ``feature_masks[d, j]``).
      feature_subsets: optional sorted, distinct feature indices per level ``(depth, m)``, or per
        node: ``(depth, 2**(depth - 1), m)`` or a list of ``depth`` arrays ``(2**d, m)``.
      max_nodes: static; ``None``: the dense levels; else the compact path, at most ``min(2**d,
        max_nodes, n // 2)`` histogram slots at level ``d``.
      feature_key, max_features: a key and a static ``m``: each node's own draw of ``m`` features.
      row_weights: optional ``(n,)`` multipliers of ``grad`` and ``hess`` (a bag's weights).
      interactions: static feature groups (:mod:`jboost.trees.interactions`): each node splits on
        a feature its path allows (grown in JAX, not by the CPU kernel).
      monotone: static: one sign in ``{-1, 0, 1}`` per feature (:mod:`jboost.trees.monotone`):
        each node's candidates valued within its bounds, out-of-order ones refused (the Newton
        criterion; grown in JAX; the round clips the final leaf values to their bounds).

    Returns:
      ``(tree, leaf)``: a :class:`DepthwiseTrees` table (leaf values before shrinkage) and ``(n,)``
      the table leaf of every training row.
    """
    n_features, n = X_binned.shape
    if row_weights is not None and jnp.shape(row_weights) != (n,):
        raise ValueError(f"depthwise.fit_tree: row_weights must be ({n},), one "
                         f"weight per row; got shape {jnp.shape(row_weights)}.")
    unweighted = jnp.concatenate([grad, hess], axis=-1).astype(jnp.float32)
    payload = (unweighted if row_weights is None
               else unweighted * jnp.asarray(row_weights, jnp.float32)[:, None])
    compact = max_nodes is not None
    keyed = feature_key is not None and max_features is not None and max_features < n_features
    if feature_key is not None:
        if feature_masks is not None or feature_subsets is not None:
            raise ValueError("depthwise.fit_tree: feature_key draws each node's features; pass it "
                             "without feature_masks and feature_subsets.")
        if max_features is None:
            raise ValueError("depthwise.fit_tree: feature_key needs max_features (m per node).")
        if keyed and not compact:  # dense levels: every node's draw
            feature_subsets = [node_splits.node_features(feature_key, d, jnp.arange(1 << d), n_features,
                                                         max_features) for d in range(depth)]
            keyed = False
    subsets, masks = node_splits.node_masks(feature_masks, feature_subsets, depth, n_features)
    # Rows sharded: the bounds on slots and nodes are the whole table's (docs/trees.md).
    n_rows = n if axis_name is None else n * lax.axis_size(axis_name)
    capacity = node_table.node_capacity(depth, n_rows, max_nodes if compact else None)
    g = depthwise_levels.Grow(
        X_binned=X_binned, payload=payload, takes_part=jnp.any(payload != 0, axis=-1), depth=depth,
        n_bins=n_bins, n_rows=n_rows, l2=l2, min_split_gain=min_split_gain,
        min_child_weight=min_child_weight, missing=missing, criterion=criterion, axis_name=axis_name,
        subsets=subsets, masks=masks, feature_key=feature_key if keyed else None,
        max_features=max_features, max_nodes=max_nodes, capacity=capacity, groups=interactions,
        monotone=monotone)

    def table():  # the levels in JAX, as a node table (borders: filled in by with_borders)
        fields, leaf = (depthwise_levels.grow_compact if compact else depthwise_levels.grow_dense)(g)
        return DepthwiseTrees(*fields), leaf

    c = payload.shape[-1]
    if (compact and depth and axis_name is None and feature_masks is None and feature_subsets is None
            and interactions is None and monotone is None and criterion.kernel and c % 2 == 0 and kernel_available()):
        # the CPU kernel grows the whole tree in one call
        native = lambda: _kernel_tree(X_binned, unweighted, feature_key, l2, min_split_gain,  # noqa: E731
                                      min_child_weight, depth=depth, n_bins=n_bins,
                                      max_features=max_features if keyed else n_features,
                                      max_nodes=int(max_nodes), missing=missing, capacity=capacity,
                                      row_weights=row_weights)
        return histograms.dispatch(X_binned, n_bins, native, table, 1, c)
    return table()
