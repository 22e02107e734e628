"""The arrays of a boosting fit: its input :class:`Data`, the :class:`BoostState` carried from round
to round, a round's and a fit's outputs."""

from __future__ import annotations

from typing import Any, Mapping, NamedTuple, Optional

import jax
import jax.numpy as jnp

from jboost.losses import loss as loss_lib
from jboost.trees import oblivious


class Data(NamedTuple):
    """The arrays a fit runs on: training and validation bins, labels and weights (``m`` may be 0)
    and optional per-row raw-score offsets."""

    X_binned: jax.Array  # (F, n) uint8
    y: jax.Array         # (n,)
    w: jax.Array         # (n,) sample weights
    X_valid: jax.Array   # (F, m) uint8
    y_valid: jax.Array   # (m,)
    w_valid: jax.Array   # (m,)
    margin: Optional[jax.Array] = None        # (n, K) float32 per-row offsets of the raw scores
    margin_valid: Optional[jax.Array] = None  # (m, K) the validation rows' offsets

    @classmethod
    def train_only(cls, X_binned, y, w) -> "Data":
        """Training rows only (an empty validation set)."""
        f = X_binned.shape[0]
        empty = jnp.zeros((0,), jnp.float32)
        return cls(X_binned, y, w, jnp.zeros((f, 0), X_binned.dtype), empty, empty)


class BoostState(NamedTuple):
    """What one round carries to the next; the raw scores are ``base + pending`` (docs/engine.md,
    "The boosting step")."""

    base: jax.Array       # (n, K) raw scores of the training rows before ``pending``
    base_valid: jax.Array  # (m, K) the same for the validation rows (m may be 0)
    loss: loss_lib.Loss  # the loss with this round's parameters (adaptive Huber delta)
    extra: Any = ()       # the algorithm's own state
    pending: Any = 0.0    # (n, K) the last round's increment, not yet in ``base``
    pending_valid: Any = 0.0  # (m, K)

    @property
    def raw(self) -> jax.Array:
        """``(n, K)`` the current raw scores of the training rows."""
        return self.base + self.pending

    @property
    def raw_valid(self) -> jax.Array:
        """``(m, K)`` the current raw scores of the validation rows."""
        return self.base_valid + self.pending_valid


class RoundOutput(NamedTuple):
    """What one boosting round returns besides the state: its trees, losses and diagnostics."""

    trees: oblivious.ObliviousTrees  # the round's trees, leading axis trees_per_round
    train_loss: jax.Array           # weighted mean training loss after the round
    valid_loss: jax.Array           # mean validation loss after the round (NaN: none)
    info: Mapping[str, jax.Array]   # the algorithm's per-round diagnostics


class BoostOutput(NamedTuple):
    """A fit's rounds: the trees and per-round losses, the final loss, the state to continue from
    and, with early stopping, the best round and score."""

    trees: oblivious.ObliviousTrees  # leading axes (n_rounds, trees_per_round)
    train_loss: jax.Array           # (n_rounds,) weighted mean training loss after each round
    valid_loss: jax.Array           # (n_rounds,) mean validation loss after each round (NaN: none)
    final_loss: loss_lib.Loss     # the loss with its last-round parameters
    info: Mapping[str, jax.Array] = {}  # the algorithm's diagnostics, each (n_rounds,)
    extra: Any = ()                 # the algorithm's state after the last round
    state: Any = None               # the BoostState after the last round (to continue the fit)
    best_round: Any = None          # early stopping: the round of the best validation score
    n_fitted: Any = None            # early stopping: rounds fitted (the rest: zero trees, NaN losses)
    best_score: Any = None          # early stopping: the best validation score so far
