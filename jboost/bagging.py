"""Bagging and random forests of oblivious trees, with out-of-bag (OOB) estimates.

Bagging (Breiman 1996; ESL section 8.7) fits ``B`` learners to bootstrap samples and averages
them; a random forest (Breiman 2001; ESL Algorithm 15.1) also decorrelates the trees by making
only ``m = max_features`` randomly chosen features eligible for each split. Here:

* **Bootstrap samples are integer weights** (ESL 8.7: a bootstrap sample is a multinomial draw
  of ``n`` rows with replacement; its count vector ``c ~ Multinomial(n, 1/n)`` weights the rows),
  so every bag has the same fixed shapes and ``B`` fits are one ``vmap``. Options: Poisson(1)
  counts (Oza and Russell 2001, the online/large-n approximation) and the Bayesian bootstrap
  (Rubin 1981: weights ``n * Dirichlet(1, ..., 1)``, which has no out-of-bag rows).
* **Randomness**: bag ``b`` uses ``fold_in(key, b)`` (split into a bootstrap key and a feature
  key), so bag ``b`` is the same whatever the number of bags or the chunking.
* **Random subsets per level.** An oblivious tree applies one rule per level, so the forest's
  per-node feature sampling becomes per-level sampling: level ``d`` of each tree may only split on
  a sorted random subset of ``m`` features (``m`` is static: it sets the shape). The histogram of
  level ``d`` is built on those ``m`` gathered feature rows only -- ``(m, 2**d, n_bins, 2K)``
  instead of ``(F, 2**d, n_bins, 2K)``, ``F/m`` times less memory and work than masking (ESL's
  ``m = sqrt(p)`` on spam: 7 of 57 features). The subsets equal the sets of
  :func:`jboost.boosting.column_masks` (``by="level"``) for the same key, and the fitted tree
  equals :func:`jboost.tree.fit_tree` with those masks (tests check both).
* **Leaves.** Regression leaves hold the (bootstrap-weighted) mean: a Newton step of squared
  error with ``l2 = 0`` from a zero score. Classification trees are fitted to one-hot targets
  with squared error, so leaves hold class frequencies and the split gain
  ``sum_k G_k^2 / H`` is the weighted decrease of the Gini index (ESL 9.2.3). Two classes
  are fitted as one 0/1 output (half the gain, the same splits, half the histogram) and the
  leaves expanded to ``(1 - p, p)``. Forests combine by averaged probabilities (or means) or by
  majority vote (ESL Algorithm 15.1).
* **Memory and chunking.** The deepest level's histogram is ``m * 2**(depth-1) * n_bins * C``
  float32 per tree, ``C = 2K`` (``C = 2`` for two classes). On spam (``F = 57``) at depth 12
  with 256 bins that is 57 * 2048 * 256 * 2 * 4 B = 239 MB for bagged trees and 29 MB for a
  forest with ``m = 7``; the compiled fit's temporaries are about 5 times the deepest
  histogram per tree (measured with XLA's memory analysis, see ``_HIST_OVERHEAD``). Bags are therefore
  fitted in chunks: ``lax.map`` over chunks, each chunk a ``vmap`` over ``chunk_size`` bags
  (:func:`map_in_chunks`); :func:`chunk_size_for_budget` picks the chunk size from a memory
  budget (or pass ``chunk_size``, or use fewer ``n_bins``).
* **OOB** (ESL 15.3.1): each training row is scored only by the bags whose count for it is 0;
  the OOB error against the number of trees is one ``lax.scan`` over the bag axis that carries
  the running (cumulative) sums, so no ``(B, n, K)`` array is materialised.

The same machinery bags any jboost learner: :func:`fit_bagged_boosters` vmaps
:func:`jboost.boosting.boost` over bag keys with the bootstrap counts as sample weights.
"""

from __future__ import annotations

import functools
import math
import numbers
from typing import Callable, NamedTuple, Optional, Union

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from jboost import _batching
from jboost import binning
from jboost import boosting
from jboost import histograms
from jboost import losses as losses_lib
from jboost import splits
from jboost import tree as tree_lib

BOOTSTRAPS = ("multinomial", "poisson", "bayesian")
TASKS = ("classification", "regression")
MAX_DEPTH = 16
# Default memory budget for the arrays of the bags fitted together (one chunk).
DEFAULT_MEMORY_BUDGET = 1 << 30
# Temporary bytes of one tree's fit per byte of its deepest histogram: ``temp_size_in_bytes``
# of ``jax.jit(fit_forest_binned).lower(...).compile().memory_analysis()`` on CPU divided by
# ``chunk_size * m * 2**(depth-1) * n_bins * C * 4`` was 4.99-5.04 for depths 10-14,
# m = 7 or 57, 32 bins, chunks of 1 and 4 (spam's shapes, two classes).
_HIST_OVERHEAD = 5.0


# --------------------------------------------------------------------------------------------
# Bootstrap weights and per-bag randomness.
# --------------------------------------------------------------------------------------------


def bootstrap_weights(key, n: int, kind: str = "multinomial") -> jax.Array:
    """Weights ``(n,)`` float32 of one bootstrap replicate.

    Args:
      key: a ``jax.random`` key.
      n: number of rows (static).
      kind: ``"multinomial"``: counts of ``n`` uniform draws with replacement (the ordinary
        bootstrap, ESL 7.11 / 8.7; integer counts summing to ``n``); ``"poisson"``: independent
        Poisson(1) counts (the large-``n`` limit of a multinomial count); ``"bayesian"``:
        ``n * Dirichlet(1, ..., 1)`` (Rubin 1981; positive real weights summing to ``n``, so no
        row is out of bag).
    """
    if kind == "multinomial":
        draws = jax.random.randint(key, (n,), 0, n)
        return jax.ops.segment_sum(jnp.ones((n,), jnp.float32), draws, num_segments=n)
    if kind == "poisson":
        return jax.random.poisson(key, 1.0, (n,)).astype(jnp.float32)
    if kind == "bayesian":
        e = jax.random.exponential(key, (n,), jnp.float32)  # Dirichlet(1) = normalised Exp(1)
        return n * e / jnp.sum(e)
    raise ValueError(f"bootstrap={kind!r} must be one of {BOOTSTRAPS}.")


def bag_keys(key, bag: jax.Array):
    """``(bootstrap_key, model_key)`` of bag ``bag``: ``split(fold_in(key, bag))``."""
    k_boot, k_model = jax.random.split(jax.random.fold_in(key, bag))
    return k_boot, k_model


@functools.partial(jax.jit, static_argnames=("n_bags", "n", "kind"))
def all_bootstrap_weights(key, n_bags: int, n: int, kind: str = "multinomial") -> jax.Array:
    """``(n_bags, n)`` bootstrap weights of every bag, as the fitting functions draw them."""
    return jax.vmap(lambda b: bootstrap_weights(bag_keys(key, b)[0], n, kind))(jnp.arange(n_bags))


def feature_subsets(key, n_features: int, depth: int, max_features: int) -> jax.Array:
    """``(depth, max_features)`` int32: the sorted features eligible at each level.

    Level ``d`` takes the ``max_features`` features of smallest ``uniform(k_d, (F,))`` with
    ``k_d = split(key, depth)[d]``: the same sets as
    ``jboost.boosting.column_masks(key, F, depth, max_features / F, "level")``.
    """
    if max_features >= n_features:
        return jnp.broadcast_to(jnp.arange(n_features, dtype=jnp.int32), (depth, n_features))

    def one(k):
        u = jax.random.uniform(k, (n_features,))
        return jnp.sort(jnp.argsort(u)[:max_features]).astype(jnp.int32)

    return jax.vmap(one)(jax.random.split(key, depth))


def subsets_to_masks(subsets, n_features: int) -> jax.Array:
    """``(depth, F)`` bool masks of :func:`feature_subsets`."""
    return jnp.any(subsets[..., :, None] == jnp.arange(n_features), axis=-2)


# --------------------------------------------------------------------------------------------
# One tree on per-level feature subsets.
# --------------------------------------------------------------------------------------------


def fit_tree_on_subsets(X_binned, grad, hess, subsets, *, depth: int, n_bins: int, l2,
                        min_split_gain, min_child_weight):
    """:func:`jboost.tree.fit_tree` where level ``d`` may only split on ``subsets[d]``.

    Only the ``m`` rows ``X_binned[subsets[d]]`` enter the level's histogram, so it is
    ``(m, 2**d, n_bins, 2K)``. With sorted subsets the chosen split (including ties, which go
    to the lowest feature index) is that of ``fit_tree`` with the equivalent feature masks.

    Args:
      X_binned: ``(F, n)`` uint8 bins.
      grad, hess: ``(n, K)``, already multiplied by the sample weights.
      subsets: ``(depth, m)`` int32 sorted feature indices.
      depth, n_bins: static.
      l2, min_split_gain, min_child_weight: traced, as in ``fit_tree``.

    Returns:
      ``(tree, leaf)`` as ``fit_tree``: an :class:`~jboost.tree.ObliviousTrees` (float
      thresholds not yet filled) and the ``(n,)`` leaf of every row.
    """
    k = grad.shape[-1]
    payload = jnp.concatenate([grad, hess], axis=-1).astype(jnp.float32)
    n = X_binned.shape[1]
    leaf = jnp.zeros((n,), jnp.int32)
    feats, thrs, miss, gains = [], [], [], []
    for d in range(depth):  # static unroll: the leaf count sets the shapes
        hist = histograms.build_histogram(X_binned[subsets[d]], payload, leaf, n_leaves=2**d,
                                          n_bins=n_bins)
        split = splits.best_split(hist, l2=l2, min_split_gain=min_split_gain,
                                  min_child_weight=min_child_weight)
        feature = jnp.where(split.gain > 0, subsets[d][split.feature], 0).astype(jnp.int32)
        col = X_binned[feature].astype(jnp.int32)
        right = jnp.where(col == binning.missing_bin(n_bins), split.missing_right,
                          col > split.threshold)
        leaf = leaf + right.astype(jnp.int32) * (2**d)
        feats.append(feature)
        thrs.append(split.threshold)
        miss.append(split.missing_right)
        gains.append(split.gain)
    sums = jax.ops.segment_sum(payload, leaf, num_segments=2**depth)
    values = tree_lib.newton_leaf_values(sums[:, :k], sums[:, k:], l2, min_child_weight)
    tree = tree_lib.ObliviousTrees(
        features=jnp.stack(feats), thresholds=jnp.stack(thrs),
        borders=jnp.zeros((depth,), jnp.float32), missing_right=jnp.stack(miss),
        leaf_values=values, gains=jnp.stack(gains))
    return tree, leaf


def tree_targets(y, n_outputs: int):
    """Gradients and hessians at a zero score whose Newton leaves are means (``K = 1``) or class
    frequencies (one-hot targets, ``K >= 2``): ``g = -target``, ``h = 1``, each ``(n, K)``."""
    if n_outputs == 1:
        target = y.astype(jnp.float32)[:, None]
    else:
        target = jax.nn.one_hot(y.astype(jnp.int32), n_outputs, dtype=jnp.float32)
    return -target, jnp.ones_like(target)


# --------------------------------------------------------------------------------------------
# Forests.
# --------------------------------------------------------------------------------------------


class ForestConfig(NamedTuple):
    """Static settings of :func:`fit_forest_binned`."""

    n_trees: int
    depth: int
    n_bins: int
    n_outputs: int            # 1: regression (leaf means); K >= 2: classification (frequencies)
    max_features: int         # features eligible per level (= F: bagged trees)
    bootstrap: str = "multinomial"
    chunk_size: int = 1       # bags fitted together (one vmap) per lax.map step


class ForestHyperparams(NamedTuple):
    """Traced regularisation of the trees (defaults grow them as far as ``depth`` allows)."""

    min_child_weight: jax.Array  # minimal bootstrap-weighted row count of a child
    min_split_gain: jax.Array
    l2: jax.Array

    @classmethod
    def create(cls, min_child_weight=1.0, min_split_gain=0.0, l2=0.0) -> "ForestHyperparams":
        f = lambda v: jnp.asarray(v, jnp.float32)
        return cls(f(min_child_weight), f(min_split_gain), f(l2))


class Forest(NamedTuple):
    """A bagged ensemble of oblivious trees: a pytree of arrays.

    Attributes:
      trees: :class:`~jboost.tree.ObliviousTrees` with a leading tree (bag) axis ``(B, ...)``;
        ``leaf_values`` ``(B, 2**D, K)`` hold means (``K = 1``, regression) or class
        frequencies (``K = n_classes >= 2``, classification).
      borders: ``(F, n_bins - 1)`` bin borders of the training data.
      bag_weights: ``(B, n_train)`` bootstrap weights of every tree (0 = out of bag).
    """

    trees: tree_lib.ObliviousTrees
    borders: jax.Array
    bag_weights: jax.Array

    @property
    def n_trees(self) -> int:
        return self.trees.features.shape[0]

    @property
    def n_outputs(self) -> int:
        return self.trees.leaf_values.shape[-1]

    @property
    def is_classifier(self) -> bool:
        return self.n_outputs > 1


def chunk_size_for_budget(n_eligible: int, depth: int, n_bins: int, n_outputs: int, n_samples: int,
                          budget_bytes: int = DEFAULT_MEMORY_BUDGET) -> int:
    """Number of bags to fit together so that their arrays fit in ``budget_bytes``.

    Per tree: the deepest histogram ``n_eligible * 2**(depth-1) * n_bins * 2K * 4`` bytes
    (``K = 1`` for two classes, see :func:`fit_forest_binned`) times an overhead factor for the
    split search's temporaries (measured, see ``_HIST_OVERHEAD``), plus ``(n, 2K)`` payloads and
    ``(n,)`` weights and leaves. At least 1.
    """
    k = 1 if n_outputs == 2 else n_outputs
    hist = n_eligible * 2 ** max(depth - 1, 0) * n_bins * 2 * k * 4
    rows = n_samples * (2 * k + 4) * 4
    return max(1, int(budget_bytes // (_HIST_OVERHEAD * hist + rows)))


@functools.partial(jax.jit, static_argnames=("config",))
def fit_forest_binned(X_binned, y, w, key, hyper: ForestHyperparams, *, config: ForestConfig):
    """Fit ``config.n_trees`` bagged trees on binned data.

    Args:
      X_binned: ``(F, n)`` uint8 bins; y: ``(n,)`` targets (real, or class labels 0..K-1);
      w: ``(n,)`` sample weights (multiplied by each bag's bootstrap weights).
      key: root key; bag ``b`` uses :func:`bag_keys` ``(key, b)``.
      hyper: traced :class:`ForestHyperparams`.
      config: static :class:`ForestConfig`.

    Returns:
      ``(trees, bag_weights)``: trees with a leading ``(n_trees,)`` axis (float thresholds not
      filled) and the ``(n_trees, n)`` bootstrap weights.
    """
    n_features, n = X_binned.shape
    # Two classes: fit the 0/1 target with one output. Its gain sum_c n1_c^2/n_c - n1^2/n is
    # exactly half the one-hot gain (n0 = n - n1), so the splits are the same at half the
    # histogram size; the leaves p are expanded to (1 - p, p) below.
    k = 1 if config.n_outputs == 2 else config.n_outputs
    g, h = tree_targets(y, k)
    # Hessians are summed over the K outputs, so K * (row count) is the child's hessian mass.
    mcw = hyper.min_child_weight * k

    def one_bag(b):
        k_boot, k_feat = bag_keys(key, b)
        counts = bootstrap_weights(k_boot, n, config.bootstrap)
        wb = (w * counts)[:, None]
        subsets = feature_subsets(k_feat, n_features, config.depth, config.max_features)
        tree, _ = fit_tree_on_subsets(X_binned, g * wb, h * wb, subsets, depth=config.depth,
                                      n_bins=config.n_bins, l2=hyper.l2,
                                      min_split_gain=hyper.min_split_gain, min_child_weight=mcw)
        return tree, counts

    trees, counts = _batching.map_in_chunks(one_bag, config.n_trees, config.chunk_size)
    if config.n_outputs == 2:
        p = trees.leaf_values
        trees = trees._replace(leaf_values=jnp.concatenate([1.0 - p, p], axis=-1),
                               gains=2.0 * trees.gains)
    return trees, counts


def resolve_max_features(max_features, n_features: int) -> int:
    """``None``: all features (bagging); ``"sqrt"``/``"log2"``/``"third"``; an int; a fraction."""
    if max_features is None:
        return n_features
    if isinstance(max_features, str):
        rules = {"sqrt": lambda p: math.floor(math.sqrt(p)), "log2": lambda p: math.floor(math.log2(p)),
                 "third": lambda p: math.floor(p / 3)}
        if max_features not in rules:
            raise ValueError(f"max_features={max_features!r} must be None, 'sqrt', 'log2', 'third', "
                             "an int or a fraction in (0, 1].")
        return min(n_features, max(1, rules[max_features](n_features)))
    if isinstance(max_features, bool):
        raise TypeError("max_features must be None, a rule name, an int or a float; got a bool.")
    if isinstance(max_features, numbers.Integral):
        if not 1 <= int(max_features) <= n_features:
            raise ValueError(f"max_features={max_features} must be in [1, {n_features}] (n_features).")
        return int(max_features)
    if isinstance(max_features, numbers.Real):
        if not 0.0 < float(max_features) <= 1.0:
            raise ValueError(f"max_features={max_features} as a fraction must be in (0, 1].")
        return max(1, int(round(float(max_features) * n_features)))
    raise TypeError(f"max_features must be None, a rule name, an int or a float; got "
                    f"{type(max_features).__name__}.")


def _check_int(v, name: str, lo: int, hi: int) -> int:
    if isinstance(v, bool) or not isinstance(v, numbers.Integral):
        raise TypeError(f"{name} must be an int (it sets array shapes); got {type(v).__name__}.")
    if not lo <= int(v) <= hi:
        raise ValueError(f"{name}={v} must be in [{lo}, {hi}].")
    return int(v)


def _as_key(key):
    return jax.random.PRNGKey(int(key)) if isinstance(key, numbers.Integral) else key


def _prepare_xy(X, y, sample_weight):
    X = np.asarray(X, np.float32)
    if X.ndim != 2 or X.shape[0] == 0 or X.shape[1] == 0:
        raise ValueError(f"X must be a non-empty 2-D array (n_samples, n_features); got shape {X.shape}.")
    y = np.asarray(y, np.float32)
    if y.shape != (X.shape[0],):
        raise ValueError(f"y has shape {y.shape}; expected ({X.shape[0]},) to match X.")
    if not np.all(np.isfinite(y)):
        raise ValueError("y must be finite; found NaN or inf.")
    if sample_weight is None:
        w = np.ones_like(y)
    else:
        w = np.asarray(sample_weight, np.float32)
        if w.shape != y.shape:
            raise ValueError(f"sample_weight has shape {w.shape}; expected {y.shape}.")
        if not np.all(np.isfinite(w)) or np.any(w < 0) or not np.any(w > 0):
            raise ValueError("sample_weight must be finite, non-negative and not all zero.")
    return X, y, w


def fit_forest(
    X,
    y,
    *,
    task: str = "classification",
    n_trees: int = 100,
    depth: int = 10,
    max_features: Union[None, str, int, float] = "sqrt",
    min_child_weight=1.0,
    min_split_gain=0.0,
    l2=0.0,
    n_bins: int = 256,
    bootstrap: str = "multinomial",
    n_classes: Optional[int] = None,
    sample_weight=None,
    key=0,
    chunk_size: Optional[int] = None,
    memory_budget_bytes: int = DEFAULT_MEMORY_BUDGET,
    borders=None,
) -> Forest:
    """Random forest of oblivious trees (ESL Algorithm 15.1); bagged trees with ``max_features=None``.

    Args:
      X: ``(n, F)`` floats (NaN: missing); y: ``(n,)`` real targets or class labels 0..K-1.
      task: ``"classification"`` (leaves hold class frequencies) or ``"regression"`` (means).
      n_trees: number of bootstrap trees ``B`` (static).
      depth: levels per tree, 1..16 (static). Forests grow deep trees; 10-12 is typical here.
      max_features: features eligible per level (static, it sets the histogram shape): ``None``
        = all (bagging), ``"sqrt"`` (ESL's classification default ``floor(sqrt(p))``),
        ``"third"`` (ESL's regression default ``floor(p/3)``), ``"log2"``, an int or a fraction.
      min_child_weight: minimal (bootstrap-weighted) number of rows in each child (traced;
        ESL's minimum node size).
      min_split_gain, l2: traced; ``l2 = 0`` keeps leaves at exact means/frequencies (with
        ``l2 > 0`` two-class leaves are ``(1 - p, p)`` with ``p = n_1 / (n + l2)``).
      n_bins: bins per feature including the missing bin (static).
      bootstrap: ``"multinomial"``, ``"poisson"`` or ``"bayesian"`` (:func:`bootstrap_weights`).
      n_classes: K for classification (default ``max(y) + 1``).
      sample_weight: optional ``(n,)`` weights, multiplied by the bootstrap weights.
      key: int seed or ``jax.random`` key.
      chunk_size: bags per vmapped chunk; default from :func:`chunk_size_for_budget`.
      memory_budget_bytes: budget used for the default ``chunk_size``.
      borders: optional precomputed ``(F, n_bins - 1)`` borders.

    Returns:
      A :class:`Forest`.
    """
    if task not in TASKS:
        raise ValueError(f"task={task!r} must be one of {TASKS}.")
    if bootstrap not in BOOTSTRAPS:
        raise ValueError(f"bootstrap={bootstrap!r} must be one of {BOOTSTRAPS}.")
    X, y, w = _prepare_xy(X, y, sample_weight)
    n, n_features = X.shape
    n_trees = _check_int(n_trees, "n_trees", 1, 10**6)
    depth = _check_int(depth, "depth", 1, MAX_DEPTH)
    n_bins = _check_int(n_bins, "n_bins", 3, binning.MAX_BINS)
    if task == "classification":
        if np.any(y != np.round(y)) or np.any(y < 0):
            raise ValueError("y must hold integer class labels 0..K-1 for task='classification'.")
        k = int(y.max()) + 1 if n_classes is None else _check_int(n_classes, "n_classes", 2, 10**5)
        if k < 2:
            k = 2
        if np.any(y >= k):
            raise ValueError(f"y has labels up to {int(y.max())} but n_classes={k}.")
    else:
        k = 1
    m = resolve_max_features(max_features, n_features)
    if chunk_size is None:
        chunk_size = chunk_size_for_budget(m, depth, n_bins, k, n, memory_budget_bytes)
    chunk_size = min(_check_int(chunk_size, "chunk_size", 1, 10**6), n_trees)
    if borders is None:
        borders = binning.compute_borders(X, n_bins)
    borders = jnp.asarray(borders, jnp.float32)
    if borders.shape != (n_features, n_bins - 1):
        raise ValueError(f"borders has shape {borders.shape}; expected {(n_features, n_bins - 1)}.")
    X_binned = binning.bin_features(X, borders)
    config = ForestConfig(n_trees=n_trees, depth=depth, n_bins=n_bins, n_outputs=k, max_features=m,
                          bootstrap=bootstrap, chunk_size=chunk_size)
    hyper = ForestHyperparams.create(min_child_weight, min_split_gain, l2)
    trees, counts = fit_forest_binned(X_binned, jnp.asarray(y), jnp.asarray(w), _as_key(key), hyper,
                                      config=config)
    return Forest(trees=tree_lib.with_borders(trees, borders), borders=borders, bag_weights=counts)


def fit_bagged_trees(X, y, **kwargs) -> Forest:
    """Bagged oblivious trees (ESL 8.7): :func:`fit_forest` with every feature eligible."""
    return fit_forest(X, y, **{**kwargs, "max_features": None})


# --------------------------------------------------------------------------------------------
# Prediction.
# --------------------------------------------------------------------------------------------


def tree_outputs(trees: tree_lib.ObliviousTrees, X) -> jax.Array:
    """Leaf value of every tree for every row: trees ``(B, ...)``, ``X (n, F)`` -> ``(B, n, K)``."""
    X_t = jnp.asarray(X, jnp.float32).T
    return jax.vmap(lambda t: t.leaf_values[tree_lib.leaf_index_raw(t, X_t)])(trees)


def _first(trees, n_trees):
    if n_trees is None:
        return trees
    total = trees.features.shape[0]
    n_trees = _check_int(n_trees, "n_trees", 1, total)
    return jax.tree_util.tree_map(lambda a: a[:n_trees], trees)


def forest_predict(forest: Forest, X, n_trees: Optional[int] = None) -> jax.Array:
    """Average of the trees (ESL Algorithm 15.1): means ``(n,)`` or class probabilities ``(n, K)``."""
    trees = _first(forest.trees, n_trees)
    avg = tree_lib.predict_raw(trees, jnp.asarray(X, jnp.float32)) / trees.features.shape[0]
    return avg if forest.is_classifier else avg[:, 0]


@jax.jit
def _vote_fractions(trees, X):
    X_t = jnp.asarray(X, jnp.float32).T
    k = trees.leaf_values.shape[-1]

    def step(acc, t):
        out = t.leaf_values[tree_lib.leaf_index_raw(t, X_t)]
        return acc + jax.nn.one_hot(jnp.argmax(out, axis=-1), k, dtype=jnp.float32), None

    acc, _ = lax.scan(step, jnp.zeros((X_t.shape[1], k), jnp.float32), trees)
    return acc / trees.features.shape[0]


def forest_vote(forest: Forest, X, n_trees: Optional[int] = None) -> jax.Array:
    """Fraction of trees voting for each class ``(n, K)`` (majority vote, ESL Algorithm 15.1)."""
    if not forest.is_classifier:
        raise ValueError("forest_vote needs a classification forest (n_outputs >= 2).")
    return _vote_fractions(_first(forest.trees, n_trees), X)


def forest_predict_class(forest: Forest, X, vote: bool = False, n_trees: Optional[int] = None):
    """Class labels ``(n,)`` by averaged probabilities (default) or by majority vote."""
    p = forest_vote(forest, X, n_trees) if vote else forest_predict(forest, X, n_trees)
    return jnp.argmax(p, axis=-1)


# --------------------------------------------------------------------------------------------
# Out-of-bag estimates.
# --------------------------------------------------------------------------------------------


class OOBResult(NamedTuple):
    """Out-of-bag predictions and error curves (ESL 15.3.1).

    Attributes:
      prediction: ``(n, K)`` average of the per-bag outputs over the bags where the row is out
        of bag (NaN for a row that is never out of bag).
      votes: ``(n, K)`` fraction of those bags voting for each class (classification; NaN rows
        as above; for regression equal to ``prediction``'s shape, all NaN).
      n_oob: ``(n,)`` number of bags where the row is out of bag.
      error: ``(B,)`` after ``b + 1`` bags: misclassification rate of the averaged outputs
        (classification) or mean squared error (regression), over rows with >= 1 OOB bag so far.
      vote_error: ``(B,)`` misclassification of the majority vote (NaN for regression).
      abs_error: ``(B,)`` mean absolute error (regression; NaN for classification).
      coverage: ``(B,)`` fraction of rows with >= 1 OOB bag so far.
    """

    prediction: jax.Array
    votes: jax.Array
    n_oob: jax.Array
    error: jax.Array
    vote_error: jax.Array
    abs_error: jax.Array
    coverage: jax.Array


def oob_scan(outputs_fn: Callable, xs, bag_weights, y, classification: bool) -> OOBResult:
    """OOB predictions and error curves by one ``lax.scan`` over bags.

    Args:
      outputs_fn: ``x -> (n, K)`` the outputs of one bag for the training rows (probabilities
        or class frequencies for classification, predictions for regression).
      xs: pytree with a leading bag axis, the scanned inputs of ``outputs_fn``.
      bag_weights: ``(B, n)``; a row is out of bag for bag ``b`` iff its weight is 0.
      y: ``(n,)`` training targets (class labels 0..K-1 for classification).
      classification: static.
    """
    n = bag_weights.shape[1]
    y = jnp.asarray(y)

    def step(carry, inp):
        total, votes, count = carry
        x, wb = inp
        out = outputs_fn(x).astype(jnp.float32)
        k = out.shape[-1]
        oob = (wb == 0).astype(jnp.float32)
        total = total + oob[:, None] * out
        count = count + oob
        has = count > 0
        n_has = jnp.maximum(jnp.sum(has), 1)
        avg = total / jnp.maximum(count, 1.0)[:, None]
        nan = jnp.float32(jnp.nan)
        if classification:
            votes = votes + oob[:, None] * jax.nn.one_hot(jnp.argmax(out, -1), k, dtype=jnp.float32)
            labels = y.astype(jnp.int32)
            err = jnp.sum(has & (jnp.argmax(avg, -1) != labels)) / n_has
            verr = jnp.sum(has & (jnp.argmax(votes, -1) != labels)) / n_has
            aerr = nan
        else:
            r = jnp.where(has, avg[:, 0] - y, 0.0)
            err = jnp.sum(r * r) / n_has
            aerr = jnp.sum(jnp.abs(r)) / n_has
            verr = nan
        cov = jnp.mean(has.astype(jnp.float32))
        return (total, votes, count), (err.astype(jnp.float32), verr.astype(jnp.float32),
                                       aerr.astype(jnp.float32), cov)

    k = jax.eval_shape(outputs_fn, jax.tree_util.tree_map(lambda a: a[0], xs)).shape[-1]
    init = (jnp.zeros((n, k), jnp.float32), jnp.zeros((n, k), jnp.float32), jnp.zeros((n,), jnp.float32))
    (total, votes, count), (err, verr, aerr, cov) = lax.scan(step, init, (xs, bag_weights))
    has = (count > 0)[:, None]
    denom = jnp.maximum(count, 1.0)[:, None]
    pred = jnp.where(has, total / denom, jnp.nan)
    vote_frac = jnp.where(has & classification, votes / denom, jnp.nan)
    return OOBResult(pred, vote_frac, count.astype(jnp.int32), err, verr, aerr, cov)


@functools.partial(jax.jit, static_argnames=("classification",))
def _forest_oob(trees, bag_weights, X, y, classification: bool):
    X_t = jnp.asarray(X, jnp.float32).T
    fn = lambda t: t.leaf_values[tree_lib.leaf_index_raw(t, X_t)]
    return oob_scan(fn, trees, bag_weights, y, classification)


def forest_oob(forest: Forest, X_train, y_train) -> OOBResult:
    """OOB predictions and OOB error against the number of trees, for the forest's training data.

    ``X_train, y_train`` must be the rows the forest was fitted on, in the same order
    (``forest.bag_weights[b, i]`` is row ``i``'s bootstrap weight in tree ``b``).
    """
    X_train = jnp.asarray(X_train, jnp.float32)
    if X_train.shape[0] != forest.bag_weights.shape[1]:
        raise ValueError(f"X_train has {X_train.shape[0]} rows but the forest was fitted on "
                         f"{forest.bag_weights.shape[1]}.")
    return _forest_oob(forest.trees, forest.bag_weights, X_train, jnp.asarray(y_train, jnp.float32),
                       classification=forest.is_classifier)


def forest_staged(forest: Forest, X, y) -> OOBResult:
    """Errors of the first ``b = 1..B`` trees on any rows ``(X, y)`` (e.g. a test set).

    The OOB scan with every row out of every bag: ``error[b]`` is the error of the forest
    truncated to ``b + 1`` trees (ESL Figure 15.1's curves), ``prediction`` the full average.
    """
    X = jnp.asarray(X, jnp.float32)
    zeros = jnp.zeros((forest.n_trees, X.shape[0]), jnp.float32)
    return _forest_oob(forest.trees, zeros, X, jnp.asarray(y, jnp.float32),
                       classification=forest.is_classifier)


def oob_from_outputs(outputs, bag_weights, y, classification: bool) -> OOBResult:
    """OOB estimates from precomputed per-bag outputs ``(B, n, K)`` of any bagged learner."""
    return oob_scan(lambda o: o, jnp.asarray(outputs, jnp.float32), jnp.asarray(bag_weights), y,
                    classification)


# --------------------------------------------------------------------------------------------
# Bagging any boosted learner.
# --------------------------------------------------------------------------------------------


class BaggedBoosters(NamedTuple):
    """``B`` boosted ensembles fitted on bootstrap samples: a pytree with a leading bag axis.

    Attributes:
      trees: ObliviousTrees with leading axes ``(B, n_rounds, trees_per_round)``.
      borders: ``(F, n_bins - 1)`` shared borders.
      baseline: ``(B, K)`` each bag's constant raw score (fitted on its bootstrap weights).
      loss: the :class:`jboost.Loss` (params with a leading bag axis).
      bag_weights: ``(B, n_train)`` bootstrap weights.
      train_loss: ``(B, n_rounds)`` bootstrap-weighted training loss of each bag.
    """

    trees: tree_lib.ObliviousTrees
    borders: jax.Array
    baseline: jax.Array
    loss: losses_lib.Loss
    bag_weights: jax.Array
    train_loss: jax.Array

    @property
    def n_bags(self) -> int:
        return self.baseline.shape[0]


@functools.partial(jax.jit, static_argnames=("config", "n_bags", "bootstrap", "chunk_size"))
def bag_boost_binned(X_binned, y, w, key, hyper: boosting.Hyperparams, loss: losses_lib.Loss, *,
                     config: boosting.BoostConfig, n_bags: int, bootstrap: str, chunk_size: int):
    """``n_bags`` runs of :func:`jboost.boosting.boost`, bag ``b`` on weights ``w * c_b``.

    Bag ``b``: ``(k_boot, k_fit) = bag_keys(key, b)``; ``c_b = bootstrap_weights(k_boot)``; its
    baseline is the optimal constant on its own weights; boosting uses key ``k_fit``.
    Returns ``(BoostOutput with a leading bag axis, baselines (B, K), bag weights (B, n))``.
    """
    n_features, n = X_binned.shape
    empty_X = jnp.zeros((n_features, 0), X_binned.dtype)
    empty = jnp.zeros((0,), jnp.float32)

    def one_bag(b):
        k_boot, k_fit = bag_keys(key, b)
        counts = bootstrap_weights(k_boot, n, bootstrap)
        wb = w * counts
        init = losses_lib.baseline(loss, y, wb)
        out = boosting.boost(boosting.Data.train_only(X_binned, y, wb), k_fit, hyper, loss, init, config=config)
        return out, init, counts

    return _batching.map_in_chunks(one_bag, n_bags, chunk_size)


def fit_bagged_boosters(
    X,
    y,
    loss="squared_error",
    *,
    n_bags: int = 10,
    bootstrap: str = "multinomial",
    n_rounds: int = 100,
    depth: int = 6,
    learning_rate=0.1,
    l2=1.0,
    min_split_gain=0.0,
    min_child_weight=1.0,
    subsample=1.0,
    colsample=1.0,
    colsample_by: str = "tree",
    n_bins: int = 256,
    n_outputs: Optional[int] = None,
    per_output_trees: bool = False,
    sample_weight=None,
    key=0,
    chunk_size: int = 1,
) -> BaggedBoosters:
    """Bagging of boosted ensembles (Breiman 1996 applied to any jboost learner).

    One compiled call: ``lax.map`` (chunks of ``chunk_size`` bags, each chunk a ``vmap``) of
    :func:`jboost.boosting.boost` with the bootstrap weights as sample weights. The boosting
    arguments mean what they mean in :func:`jboost.fit`.
    """
    if bootstrap not in BOOTSTRAPS:
        raise ValueError(f"bootstrap={bootstrap!r} must be one of {BOOTSTRAPS}.")
    X, y, w = _prepare_xy(X, y, sample_weight)
    n_bags = _check_int(n_bags, "n_bags", 1, 10**6)
    chunk_size = min(_check_int(chunk_size, "chunk_size", 1, 10**6), n_bags)
    n_rounds = _check_int(n_rounds, "n_rounds", 1, 10**7)
    depth = _check_int(depth, "depth", 1, MAX_DEPTH)
    n_bins = _check_int(n_bins, "n_bins", 3, binning.MAX_BINS)
    loss_obj = losses_lib.get(loss, n_outputs=n_outputs)
    if loss_obj.n_outputs is None:
        loss_obj = loss_obj.replace(n_outputs=max(2, int(y.max()) + 1))
    losses_lib.check_labels(loss_obj, y)
    borders = jnp.asarray(binning.compute_borders(X, n_bins))
    X_binned = binning.bin_features(X, borders)
    hyper = boosting.Hyperparams.create(learning_rate, l2, min_split_gain, min_child_weight,
                                        subsample, colsample)
    config = boosting.BoostConfig(n_rounds=n_rounds, depth=depth, n_bins=n_bins,
                                  per_output_trees=bool(per_output_trees), colsample_by=colsample_by)
    out, init, counts = bag_boost_binned(X_binned, jnp.asarray(y), jnp.asarray(w), _as_key(key), hyper,
                                         loss_obj, config=config, n_bags=n_bags, bootstrap=bootstrap,
                                         chunk_size=chunk_size)
    return BaggedBoosters(trees=tree_lib.with_borders(out.trees, borders), borders=borders,
                          baseline=init, loss=out.final_loss, bag_weights=counts,
                          train_loss=out.train_loss)


def _bag_output(loss: losses_lib.Loss, X, x):
    """Output ``(n, K)`` of one bag: probabilities (classification) or link(raw) (regression)."""
    trees, baseline, params = x
    raw = baseline + tree_lib.predict_raw(trees, X)
    out = loss.link(raw if loss.n_outputs > 1 else raw[:, 0], **params)
    return out if out.ndim == 2 else out[:, None]


def bagged_outputs(model: BaggedBoosters, X) -> jax.Array:
    """Per-bag outputs ``(B, n, K)``: class probabilities, or predictions through the link."""
    X = jnp.asarray(X, jnp.float32)
    return jax.vmap(functools.partial(_bag_output, model.loss, X))(
        (model.trees, model.baseline, model.loss.params))


def bagged_predict(model: BaggedBoosters, X) -> jax.Array:
    """Bagged prediction: mean over bags of :func:`bagged_outputs` (``(n,)`` for one output)."""
    avg = jnp.mean(bagged_outputs(model, X), axis=0)
    return avg[:, 0] if avg.shape[-1] == 1 else avg


def bagged_oob(model: BaggedBoosters, X_train, y_train) -> OOBResult:
    """OOB estimates of bagged boosters (same machinery as :func:`forest_oob`)."""
    X_train = jnp.asarray(X_train, jnp.float32)
    classification = model.loss.task in ("binary", "multiclass")
    fn = functools.partial(_bag_output, model.loss, X_train)
    return oob_scan(fn, (model.trees, model.baseline, model.loss.params), model.bag_weights,
                    jnp.asarray(y_train, jnp.float32), classification)


map_in_chunks = _batching.map_in_chunks
