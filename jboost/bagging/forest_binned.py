"""The compiled forest program on binned data: one bag's bootstrap tree (ForestConfig, ForestHyperparams, targets, two-class leaves) mapped in chunks, and the CPU kernel's chunk size."""

from __future__ import annotations

import functools
from typing import NamedTuple, Optional

import jax
import jax.numpy as jnp
import numpy as np

from jboost import _compile, checks
from jboost.bagging import bootstrap as bootstrap_lib
from jboost.engine import batching, memory
from jboost.fitting import settings as settings_lib
from jboost.trees import depthwise as depthwise_lib, monotone as monotone_lib, node_table, oblivious


class ForestConfig(NamedTuple):
    """Static settings of :func:`fit_forest_binned`."""

    n_trees: int
    depth: int
    n_bins: int
    n_outputs: int            # 1: regression (leaf means); K >= 2: classification (frequencies)
    max_features: int         # features eligible per level (= F: bagged trees)
    bootstrap: str = "multinomial"
    chunk_size: int = 1       # bags fitted together (one vmap) per lax.map step
    verbose: bool = False     # a progress line per chunk of bags (map_in_chunks)
    tree_family: str = "oblivious"  # or "depthwise": each node its own split and m features
    max_nodes: Optional[int] = None  # depth-wise: histogram slots per level (None: 2**d, dense)
    interactions: Optional[tuple] = None  # feature groups (jboost.trees.interactions)
    monotone: Optional[tuple] = None  # a sign per feature (regression; jboost.trees.monotone)


class ForestHyperparams(NamedTuple):
    """Traced regularisation of the trees (defaults grow them as far as ``depth`` allows)."""

    min_child_weight: jax.Array  # minimal bootstrap-weighted row count of a child
    min_split_gain: jax.Array
    l2: jax.Array

    @classmethod
    def create(cls, min_child_weight=1.0, min_split_gain=0.0, l2=0.0) -> "ForestHyperparams":
        for name, v in (("min_child_weight", min_child_weight), ("min_split_gain", min_split_gain),
                        ("l2", l2)):
            settings_lib.check_hyperparameter(name, v)
        f = lambda v: checks.device_array(v, np.float32)  # noqa: E731 (no program compiled)
        return cls(f(min_child_weight), f(min_split_gain), f(l2))


def tree_targets(y, n_outputs: int):
    """Gradients and hessians at a zero score whose Newton leaves are means (``K = 1``) or class
    frequencies (one-hot targets, ``K >= 2``): ``g = -target``, ``h = 1``, each ``(n, K)``."""
    if n_outputs == 1:
        target = y.astype(jnp.float32)[:, None]
    else:
        target = jax.nn.one_hot(y.astype(jnp.int32), n_outputs, dtype=jnp.float32)
    return -target, jnp.ones_like(target)


@functools.partial(_compile.jit, static_argnames=("config",))
def fit_forest_binned(X_binned, y, w, key, hyper: ForestHyperparams, first_tree=0, *,
                      config: ForestConfig):
    """Fit ``config.n_trees`` bagged trees on binned data.

    Args:
      X_binned: ``(F, n)`` uint8 bins; y: ``(n,)`` real targets or class labels 0..K-1;
      w: ``(n,)`` sample weights (multiplied by each bag's bootstrap weights).
      key: root key; bag ``b`` uses :func:`~jboost.bagging.bag_keys` ``(key, b)``.
      hyper: traced :class:`ForestHyperparams`; config: static :class:`ForestConfig`.
      first_tree: the index of the first tree (traced): a continued forest equals one fit.

    Returns:
      ``(trees with a leading (n_trees,) axis, (n_trees, n) bootstrap weights)``.
    """
    one_bag = forest_bag_fn(X_binned, y, w, key, hyper, config)
    first = jnp.asarray(first_tree, jnp.int32)
    trees, counts = batching.map_in_chunks(lambda b: one_bag(first + b), config.n_trees,
                                            config.chunk_size,
                                            progress="forest: trees" if config.verbose else None)
    return two_class_leaves(trees, config), counts


def forest_bag_fn(X_binned, y, w, key, hyper: ForestHyperparams, config: ForestConfig, *,
             axis_name: Optional[str] = None, n_total: Optional[int] = None, rows=None):
    """The fit of bag ``b``: ``b -> (tree, bootstrap counts)``. Rows sharded over ``axis_name``:
    the counts drawn for the whole table of ``n_total`` rows, this device's ``rows`` weighted by
    theirs, the tree's histograms and sums ``psum``-ed."""
    n_features, n = X_binned.shape
    n_draw = n if n_total is None else n_total
    # Two classes: fit the 0/1 target with one output. Its gain sum_c n1_c^2/n_c - n1^2/n is
    # exactly half the one-hot gain (n0 = n - n1), so the splits are the same at half the
    # histogram size; the leaves p are expanded to (1 - p, p) by _two_class_leaves.
    k = 1 if config.n_outputs == 2 else config.n_outputs
    g, h = tree_targets(y, k)
    # Hessians are summed over the K outputs, so K * (row count) is the child's hessian mass.
    mcw = hyper.min_child_weight * k

    def one_bag(b):
        k_boot, k_feat = bootstrap_lib.bag_keys(key, b)
        counts = bootstrap_lib.bootstrap_weights(k_boot, n_draw, config.bootstrap)
        wb = w * (counts if rows is None else counts[rows])
        common = dict(depth=config.depth, n_bins=config.n_bins, l2=hyper.l2,
                      min_split_gain=hyper.min_split_gain, min_child_weight=mcw,
                      axis_name=axis_name, interactions=config.interactions,
                      **({} if config.monotone is None else {"monotone": config.monotone}))
        if config.tree_family == "depthwise":  # m features drawn per node (ESL Algorithm 15.1),
            # for the nodes with histograms only; the bag's weights multiplied in by the tree
            # (the kernel: row by row, the bags sharing g and h)
            tree, leaf = depthwise_lib.fit_tree(X_binned, g, h, max_nodes=config.max_nodes,
                                                feature_key=k_feat, max_features=config.max_features,
                                                row_weights=wb, **common)
        else:  # an oblivious tree applies one rule per level: m features drawn per level
            subsets = bootstrap_lib.feature_subsets(k_feat, n_features, config.depth,
                                                    config.max_features)
            tree, leaf = oblivious.fit_tree(X_binned, g * wb[:, None], h * wb[:, None],
                                            feature_subsets=subsets, **common)
        if config.monotone is not None:  # every leaf within its bounds (a monotone tree)
            lo, hi = monotone_lib.leaf_bounds(tree, leaf, g * wb[:, None], h * wb[:, None],
                                              config.monotone, hyper.l2, axis_name)
            tree = tree._replace(leaf_values=jnp.clip(tree.leaf_values, lo, hi))
        return tree, counts

    return one_bag


def two_class_leaves(trees, config: ForestConfig, xp=jnp):
    """Two classes were fitted as one output ``p``: leaves ``(1 - p, p)``, the one-hot gains.
    ``xp``: the array module, ``numpy`` for host arrays (no program compiled)."""
    if config.n_outputs != 2:
        return trees
    p = trees.leaf_values
    values = xp.concatenate([1.0 - p, p], axis=-1)
    if isinstance(trees, depthwise_lib.DepthwiseTrees):  # a table's unused leaves stay zero
        used = xp.sum(trees.level_counts, axis=-1, keepdims=True)             # (..., 1)
        slot = xp.arange(p.shape[-2], dtype=used.dtype)
        values = xp.where((slot <= used)[..., None], values, xp.zeros((), values.dtype))
    return trees._replace(leaf_values=values, gains=2.0 * trees.gains)


@functools.partial(_compile.jit, static_argnames=("config",))
def _forest_chunk(X_binned, y, w, key, hyper, bags, first, *, config: ForestConfig):
    """The bags ``first + bags`` of :func:`fit_forest_binned` (one ``vmap``; a chunk of its
    ``lax.map``)."""
    return jax.vmap(forest_bag_fn(X_binned, y, w, key, hyper, config))(bags + first)


def forest_chunk_from(X_binned, y, w, key, hyper, borders, bags, *, first: int, config: ForestConfig):
    """The bags ``first + bags`` of :func:`fit_forest_binned`, compiled (``_forest_chunk``;
    ``borders`` only fingerprints the checkpoints)."""
    return _forest_chunk(X_binned, y, w, key, hyper, bags, np.int32(first), config=config)


#: Depth-wise trees grown by the CPU kernel per chunk, at most (one kernel call whose threads
#: take whole trees; each call costs a little, so more trees per call cost less per tree).
KERNEL_CHUNK = 64
#: The default memory for the outputs of one chunk of kernel-grown trees.
KERNEL_CHUNK_BYTES = 512 << 20


def kernel_grows(X_binned, n_bins: int) -> bool:
    """Whether a depth-wise forest's trees are grown by the CPU kernel here (the default device
    is a CPU, the kernel is built, uint8 bins)."""
    return (jax.devices()[0].platform == "cpu" and depthwise_lib.kernel_available()
            and X_binned.dtype == jnp.uint8 and n_bins <= 256)


def kernel_chunk_size(depth: int, n_outputs: int, n_samples: int, n_trees: int,
                      memory_budget: Optional[int] = None, max_nodes: Optional[int] = None) -> int:
    """Default trees per chunk of a depth-wise forest grown by the CPU kernel: as many as
    :data:`KERNEL_CHUNK_BYTES` (or ``memory_budget``) holds of each tree's node table, leaf values
    and its rows' weights, at most :data:`KERNEL_CHUNK`, evened out over the chunks."""
    nodes = node_table.node_capacity(depth, n_samples, max(1, n_samples // 2) if max_nodes is None
                                    else max_nodes)
    per_tree = (nodes * memory.DEPTHWISE_RULE_BYTES + (nodes + 1) * n_outputs * 8
                + n_samples * 12)
    budget = KERNEL_CHUNK_BYTES if memory_budget is None else int(memory_budget)
    cap = max(1, min(KERNEL_CHUNK, budget // per_tree, n_trees))
    return batching.chunk_layout(n_trees, cap)[1]
