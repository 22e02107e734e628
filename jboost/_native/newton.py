"""The regularised Newton score ``G^2/(H+l2)`` and leaf value ``-G/(H+l2)``: the formulas the CPU
and Pallas kernels compute (no jboost dependency)."""

from __future__ import annotations

import jax.numpy as jnp


def newton_score(G, H, l2):
    """The Newton score ``G^2 / (H + l2)`` of a node per output (0 where ``H + l2 <= 0``)."""
    denom = H + l2
    ok = denom > 0
    # G * (G / denom) rather than G**2 / denom: stays finite for very large G (exponential loss).
    return jnp.where(ok, G * (G / jnp.where(ok, denom, 1.0)), 0.0)


def newton_value(G, H, l2):
    """The Newton leaf value ``-G / (H + l2)`` per output (0 where ``H + l2 <= 0``)."""
    denom = H + l2
    return jnp.where(denom > 0, -G / jnp.where(denom > 0, denom, 1.0), 0.0)
