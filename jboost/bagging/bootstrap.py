"""Bootstrap weights, per-bag randomness and per-level feature subsets.

* **Bootstrap samples are integer weights** (ESL 8.7: a bootstrap sample is a multinomial draw
  of ``n`` rows with replacement; its count vector ``c ~ Multinomial(n, 1/n)`` weights the rows),
  so every bag has the same fixed shapes and ``B`` fits are one ``vmap``. Options: Poisson(1)
  counts (Oza and Russell 2001, the online/large-n approximation) and the Bayesian bootstrap
  (Rubin 1981: weights ``n * Dirichlet(1, ..., 1)``, which has no out-of-bag rows).
* **Randomness**: bag ``b`` uses ``fold_in(key, b)`` (split into a bootstrap key and a feature
  (or fitting) key), so bag ``b`` is the same whatever the number of bags or the chunking.
* **Random subsets per level** (a random forest's ``m = max_features``, Breiman 2001; ESL
  Algorithm 15.1): an oblivious tree applies one rule per level, so the per-node feature
  sampling becomes per-level sampling: level ``d`` may only split on a sorted random subset of
  ``m`` features (:func:`feature_subsets`; ``m`` is static: it sets the shape). The subsets are
  the sets of :func:`jboost.engine.samplers.column_masks` (``by="level"``) for the same key.
"""

from __future__ import annotations

import functools
import math
import numbers

import jax
import jax.numpy as jnp

from jboost import _compile
from jboost import checks
from jboost.trees import node_splits

BOOTSTRAPS = ("multinomial", "poisson", "bayesian")


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
    checks.check_choice(kind, "bootstrap", BOOTSTRAPS)
    raise AssertionError(kind)  # unreachable: check_choice raised


def bag_keys(key, bag: jax.Array):
    """``(bootstrap_key, model_key)`` of bag ``bag``: ``split(fold_in(key, bag))``."""
    k_boot, k_model = jax.random.split(jax.random.fold_in(key, bag))
    return k_boot, k_model


@functools.partial(_compile.jit, static_argnames=("n_bags", "n", "kind"))
def all_bootstrap_weights(key, n_bags: int, n: int, kind: str = "multinomial") -> jax.Array:
    """``(n_bags, n)`` bootstrap weights of every bag, as the fitting functions draw them."""
    return jax.vmap(lambda b: bootstrap_weights(bag_keys(key, b)[0], n, kind))(jnp.arange(n_bags))


def feature_subsets(key, n_features: int, depth: int, max_features: int) -> jax.Array:
    """``(depth, max_features)`` int32: the sorted features eligible at each level.

    Level ``d`` takes the ``max_features`` features of smallest ``uniform(k_d, (F,))`` with
    ``k_d = split(key, depth)[d]``: the same sets as
    ``jboost.engine.samplers.column_masks(key, F, depth, max_features / F, "level")``. They are the
    ``feature_subsets`` argument of :func:`jboost.trees.oblivious.fit_tree`.
    """
    if max_features >= n_features:
        return jnp.broadcast_to(jnp.arange(n_features, dtype=jnp.int32), (depth, n_features))

    def one(k):
        u = jax.random.uniform(k, (n_features,))
        return jnp.sort(jnp.argsort(u)[:max_features]).astype(jnp.int32)

    return jax.vmap(one)(jax.random.split(key, depth))


def node_feature_subsets(key, n_features: int, depth: int, max_features: int):
    """Per-node feature subsets of a depth-wise tree (ESL Algorithm 15.1: ``m`` features drawn
    at every node): a list of ``depth`` int32 arrays ``(2**d, max_features)``, row ``j`` of level
    ``d`` the sorted features eligible at node ``j`` of level ``d``
    (:func:`jboost.trees.node_splits.node_features`: a function of ``(key, d, j)``), or ``None`` when
    ``max_features >= n_features`` (every feature everywhere: bagging). As ``feature_subsets``
    of :func:`jboost.trees.depthwise.fit_tree` they give the tree of ``feature_key=key,
    max_features=m``, which draws them only for the nodes that get histograms."""
    if max_features >= n_features:
        return None
    return [node_splits.node_features(key, d, jnp.arange(1 << d), n_features, max_features)
            for d in range(depth)]


def subsets_to_masks(subsets, n_features: int) -> jax.Array:
    """``(depth, F)`` bool masks of :func:`feature_subsets`."""
    return jnp.any(subsets[..., :, None] == jnp.arange(n_features), axis=-2)


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
        return checks.check_int(max_features, "max_features", 1, n_features)
    if isinstance(max_features, numbers.Real):
        if not 0.0 < float(max_features) <= 1.0:
            raise ValueError(f"max_features={max_features} as a fraction must be in (0, 1].")
        return max(1, int(round(float(max_features) * n_features)))
    raise TypeError(f"max_features must be None, a rule name, an int or a float; got "
                    f"{type(max_features).__name__}.")
