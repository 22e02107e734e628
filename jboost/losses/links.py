"""Links: raw scores -> predictions or class probabilities, and the link each task gets by default."""

from __future__ import annotations

import jax
import jax.numpy as jnp

# --------------------------------------------------------------------------------------------
# Links: raw score -> prediction (regression) or class probabilities (classification).
# --------------------------------------------------------------------------------------------


def identity_link(raw, **params):
    return raw


def exp_link(raw, **params):
    return jnp.exp(raw)


def sigmoid_link(raw, **params):
    p = jax.nn.sigmoid(raw)
    return jnp.stack([1.0 - p, p], axis=-1)


def adaboost_link(raw, **params):
    """P(y=1|x) = 1 / (1 + exp(-2 f)) (Friedman, Hastie, Tibshirani 2000)."""
    p = jax.nn.sigmoid(2.0 * raw)
    return jnp.stack([1.0 - p, p], axis=-1)


def softmax_link(raw, **params):
    return jax.nn.softmax(raw, axis=-1)


def samme_link(raw, **params):
    """SAMME probabilities ``p_k ∝ exp(f_k / (K - 1))`` (Zhu et al. 2009, eq. 4 inverted)."""
    k = raw.shape[-1]
    return jax.nn.softmax(raw / (k - 1), axis=-1)

# Links a custom loss gets from its task when it names none (regression and counts: identity).
TASK_LINKS = {"binary": sigmoid_link, "multiclass": softmax_link}
