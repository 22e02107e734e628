"""Bootstrap weights (multinomial, Poisson, Bayesian), per-bag keys and the random feature
subsets of a forest's trees (ESL 8.7, Algorithm 15.1). See docs/ensembles.md."""

from __future__ import annotations

import functools
import math
import numbers

import jax
import jax.numpy as jnp

from jboost import _compile, checks
from jboost.trees import node_splits

BOOTSTRAPS = ("multinomial", "poisson", "bayesian")


def bootstrap_weights(key, n: int, kind: str = "multinomial") -> jax.Array:
    """Weights ``(n,)`` float32 of one bootstrap replicate.

    Args:
      key: a ``jax.random`` key.
      n: number of rows (static).
      kind: ``"multinomial"`` (counts of ``n`` draws with replacement), ``"poisson"``
        (Poisson(1) counts) or ``"bayesian"`` (``n * Dirichlet(1, ..., 1)``: no row out of bag).
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
    """``(depth, max_features)`` int32: the sorted features eligible at each level, the sets of
    ``column_masks(key, F, depth, max_features / F, "level")``; level ``d`` takes the
    ``max_features`` smallest ``uniform(split(key, depth)[d], (F,))``."""
    if max_features >= n_features:
        return jnp.broadcast_to(jnp.arange(n_features, dtype=jnp.int32), (depth, n_features))

    def one(k):
        u = jax.random.uniform(k, (n_features,))
        return jnp.sort(jnp.argsort(u)[:max_features]).astype(jnp.int32)

    return jax.vmap(one)(jax.random.split(key, depth))


def node_feature_subsets(key, n_features: int, depth: int, max_features: int):
    """Per-node feature subsets of a depth-wise tree (ESL Algorithm 15.1): ``depth`` int32 arrays
    ``(2**d, max_features)`` (:func:`jboost.trees.node_splits.node_features`), or ``None`` when
    every feature is eligible: the ``feature_subsets`` of
    :func:`jboost.trees.depthwise.fit_tree`."""
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
