"""The round protocol of boosting algorithms (Round, RoundResult, Algorithm) and gradient (Newton) boosting's round, NEWTON."""

from __future__ import annotations

from typing import Any, Callable, Mapping, NamedTuple

import jax
import jax.numpy as jnp

from jboost.engine import state as state_lib
from jboost.losses import derivatives, loss as loss_lib
from jboost.trees import monotone, oblivious, refit


def _no_state(data: state_lib.Data, loss: loss_lib.Loss):
    return ()


class Round(NamedTuple):
    """What an algorithm's ``round`` function sees in round ``m``."""

    m: jax.Array                 # the round index (traced int32)
    data: state_lib.Data
    raw: jax.Array               # (n, K) raw scores of the training rows before this round
    loss: loss_lib.Loss        # the loss with this round's parameters
    extra: Any                   # the algorithm's own state (a pytree)
    sample: jax.Array            # (n,) the row sampler's multiplier of the sample weights
    masks: jax.Array             # (depth, F) features eligible at each level
    learning_rate: jax.Array     # this round's shrinkage (schedule applied)
    hyper: Any                   # the round's traced settings (jboost.engine.boosting.Hyperparams)
    config: Any                  # the static settings (jboost.engine.boosting.BoostConfig)
    key: Any = None              # this round's key for estimators (Hutchinson probes)


class RoundResult(NamedTuple):
    """What an algorithm's ``round`` returns."""

    trees: oblivious.ObliviousTrees  # the round's T trees (leading axis T), final leaf values
    leaves: jax.Array               # (T, n) the leaf of every training row in each tree
    extra: Any = ()                 # the algorithm's new state
    info: Mapping[str, jax.Array] = {}  # per-round diagnostics (scalars), stacked by the scan


class Algorithm(NamedTuple):
    """A boosting algorithm on the scaffold: ``round(Round) -> RoundResult`` and
    ``init(data, loss) -> extra`` (its state before round 0). Both must be hashable (module-level
    functions): the algorithm is part of the static :class:`BoostConfig`."""

    round: Callable[[Round], RoundResult]
    init: Callable[[state_lib.Data, loss_lib.Loss], Any] = _no_state


def grow_trees(r: Round, grad, hess):
    """Grow one tree on weighted ``grad``, ``hess`` ``(n, K)`` with the fit's settings
    (``config.tree_family.grow``): ``(tree, leaf (n,))``, leaf values before shrinkage."""
    c = r.config
    return c.tree_family.grow(r.data.X_binned, grad, hess, depth=c.depth, n_bins=c.n_bins,
                              l2=r.hyper.l2, min_split_gain=r.hyper.min_split_gain,
                              min_child_weight=r.hyper.min_child_weight, feature_masks=r.masks,
                              axis_name=c.axis_name, missing=c.missing, criterion=c.split_criterion,
                              **({} if c.max_leaves is None else {"max_leaves": c.max_leaves}),
                              **({} if c.monotone is None else {"monotone": c.monotone}),
                              **({} if c.interactions is None else {"interactions": c.interactions}))


def one_tree(tree: oblivious.ObliviousTrees, leaf) -> tuple:
    """``(trees, leaves)`` with a leading trees-per-round axis of size 1."""
    return jax.tree_util.tree_map(lambda a: a[None], tree), leaf[None]


def newton_round(r: Round) -> RoundResult:
    """Gradient boosting with Newton trees (ESL Algorithms 10.3 and 10.4; XGBoost's second-order
    step), with the loss's leaf refit and shrinkage (docs/engine.md, "The Newton round")."""
    config = r.config
    y, w = r.data.y, r.data.w * r.sample
    loss = r.loss
    degenerate = None  # traced: this round's curvature is not positive everywhere ("auto")
    if loss.batch:
        # One function of every row: its gradient and hessian diagonal are weighted by the loss
        # itself; the row sampler masks rows (the loss is not recomputed on the sample).
        g, h = derivatives.batch_grad_hess(loss, y, r.raw, r.data.w, r.key)
        gw, hw = g * r.sample[:, None], h * r.sample[:, None]
    else:
        # The learning-rate-aware curvature: the classical diagonal where shrinkage makes it
        # safe, the Gershgorin majorant for coupled outputs at large rates (derivatives.grad_hess).
        g, h = derivatives.grad_hess(loss, y, r.raw, learning_rate=r.learning_rate)
        if loss.hessian == "auto":
            degenerate = ~derivatives.curvature_is_positive(g, h, w, axis_name=config.axis_name)
            h = jnp.where(degenerate, derivatives.first_order_curvature(g, loss.task), h)
        gw, hw = g * w[:, None], h * w[:, None]

    def degenerate_values(leaf, values):
        return jnp.where(degenerate, refit.degenerate_leaf_values(
            loss, y, r.raw, w, leaf, values.shape[-2], values, learning_rate=r.learning_rate,
            active=degenerate, axis_name=config.axis_name), values)

    if not config.per_output_trees:
        tree, leaf = grow_trees(r, gw, hw)
        n_leaves = tree.leaf_values.shape[-2]  # the family's leaf slots (2**D for oblivious trees)
        if loss.per_column and loss.leaf_refit is not None:  # each column's refit
            values = jax.vmap(lambda yk, rk, vk: _column_refit(r, yk, rk, w, leaf, vk),
                              in_axes=(1, 1, 1), out_axes=1)(y, r.raw, tree.leaf_values)
        elif degenerate is None or loss.leaf_refit is not None:
            values = refit.refit_leaf_values(loss, y, r.raw, w, leaf, n_leaves, tree.leaf_values,
                                             axis_name=config.axis_name,
                                             learning_rate=r.learning_rate)
        else:
            values = degenerate_values(leaf, tree.leaf_values)
        trees, leaves = one_tree(tree._replace(leaf_values=values), leaf)
        if config.monotone is not None:  # after any refit: every leaf within its bounds
            lo, hi = monotone.leaf_bounds(tree, leaf, gw, hw, config.monotone, r.hyper.l2,
                                          config.axis_name)
            trees = trees._replace(leaf_values=jnp.clip(values, lo, hi)[None])
    else:
        k = g.shape[-1]
        if loss.leaf_refit is not None and not loss.per_column and k > 1:
            raise ValueError(f"per_output_trees=True cannot refit the leaves of loss {loss.name!r} "
                             f"(leaf_refit={loss.leaf_refit!r}): the refit moves a leaf's {k} "
                             "outputs together, a tree per output moves one. Pass "
                             "per_output_trees=False (vector leaves, refitted), or a loss without "
                             "leaf_refit.")
        trees, leaves = jax.vmap(lambda gk, hk: grow_trees(r, gk[:, None], hk[:, None]),
                                 in_axes=(1, 1))(gw, hw)
        scalar = trees.leaf_values[:, :, 0]  # (K, L)
        n_leaves = scalar.shape[-1]
        if loss.per_column and loss.leaf_refit is not None:  # tree k: column k's refit
            scalar = jax.vmap(lambda yk, rk, leaf, vk: _column_refit(r, yk, rk, w, leaf, vk),
                              in_axes=(1, 1, 0, 0))(y, r.raw, leaves, scalar)
        elif loss.leaf_refit is not None:  # one output
            scalar = refit.refit_leaf_values(loss, y, r.raw, w, leaves[0], n_leaves, scalar.T,
                                             axis_name=config.axis_name,
                                             learning_rate=r.learning_rate).T
        # Output k's tree moves only raw score k: embed its scalar leaves as one-hot vectors.
        values = scalar[:, :, None] * jnp.eye(k, dtype=jnp.float32)[:, None, :]
        if degenerate is not None and loss.leaf_refit is None:
            values = jax.vmap(degenerate_values)(leaves, values)
        if config.monotone is not None:  # tree k's output k within the bounds of its sums
            lo, hi = jax.vmap(lambda t, leaf, gk, hk: monotone.leaf_bounds(
                t, leaf, gk[:, None], hk[:, None], config.monotone, r.hyper.l2, config.axis_name),
                in_axes=(0, 0, 1, 1))(trees, leaves, gw, hw)
            values = jnp.where(jnp.eye(k, dtype=bool)[:, None, :], jnp.clip(values, lo, hi), values)
        trees = trees._replace(leaf_values=values)
    return RoundResult(trees._replace(leaf_values=trees.leaf_values * r.learning_rate), leaves)


def _column_refit(r: Round, yk, rk, w, leaf, values):
    """The leaf refit of one column of a per-column loss, as a one-output fit of that column refits
    its ``(L,)`` Newton values."""
    one = loss_lib.column_loss(r.loss)
    return refit.refit_leaf_values(one, yk, rk[:, None], w, leaf, values.shape[0],
                                   values[:, None], axis_name=r.config.axis_name,
                                   learning_rate=r.learning_rate)[:, 0]


NEWTON = Algorithm(newton_round)
