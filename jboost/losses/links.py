"""Links: raw scores -> predictions or class probabilities (each ``link(raw, **params)``, the
loss's parameters unused), and the link each task gets by default: the inverse links of the
models each loss corresponds to (ESL section 10.5; Friedman, Hastie and Tibshirani 2000; Zhu et
al. 2009).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp


def identity_link(raw, **params):
    """The identity: predictions are the raw scores (regression)."""
    return raw


def exp_link(raw, **params):
    """``exp(raw)``: the mean of a log-link model (Poisson counts)."""
    return jnp.exp(raw)


def sigmoid_link(raw, **params):
    """Binary class probabilities ``(..., 2)``: ``(1 - p, p)``, ``p = sigmoid(raw)``."""
    p = jax.nn.sigmoid(raw)
    return jnp.stack([1.0 - p, p], axis=-1)


def adaboost_link(raw, **params):
    """Binary class probabilities ``(..., 2)`` with ``P(y=1|x) = 1 / (1 + exp(-2 f))`` (AdaBoost's
    scores are half log-odds: Friedman, Hastie and Tibshirani 2000).
    """
    p = jax.nn.sigmoid(2.0 * raw)
    return jnp.stack([1.0 - p, p], axis=-1)


def softmax_link(raw, **params):
    """Class probabilities ``softmax(raw)`` over the last axis (multinomial deviance)."""
    return jax.nn.softmax(raw, axis=-1)


def samme_link(raw, **params):
    """SAMME probabilities ``p_k ∝ exp(f_k / (K - 1))`` (Zhu et al. 2009, eq. 4 inverted)."""
    k = raw.shape[-1]
    return jax.nn.softmax(raw / (k - 1), axis=-1)

#: The link a custom loss gets from its task when it names none (other tasks: the identity).
TASK_LINKS = {"binary": sigmoid_link, "multiclass": softmax_link}


def gives_probabilities(link, n_outputs: int) -> bool:
    """Whether ``link`` is one of the class-probability links above, with the number of raw
    scores it takes (1 for the binary ones, at least 2 for softmax and SAMME): then a fit need
    not check it on sample raw scores (:func:`jboost.losses.checks.check_link`)."""
    if link in (sigmoid_link, adaboost_link):
        return n_outputs == 1
    return link in (softmax_link, samme_link) and n_outputs >= 2
