"""Forward-stagewise gradient boosting of oblivious trees as one ``lax.scan`` over rounds.

ESL Algorithm 10.3 with second-order (Newton) trees as in XGBoost: per round, gradients and
hessians of the loss by autodiff, optional row subsampling (Bernoulli weights: shapes stay
fixed) and column subsampling (per tree or per level), one oblivious tree (or K, one per
output), an optional exact leaf refit, shrinkage by the learning rate.

Static (shape-setting) settings live in :class:`BoostConfig`; every continuous hyperparameter is
a traced array in :class:`Hyperparams`, so ``jax.vmap`` over them is one compiled program.
Randomness: round ``m`` uses ``fold_in(key, m)``, so the same key and data give bitwise the same
model, and round ``m`` does not depend on how many rounds follow.
"""

from __future__ import annotations

import functools
from typing import Callable, NamedTuple, Optional

import jax
import jax.numpy as jnp
from jax import lax

from jboost import derivatives
from jboost import losses as losses_lib
from jboost import refit
from jboost import tree as tree_lib


class BoostConfig(NamedTuple):
    """Static settings: each distinct value is a separate compilation."""

    n_rounds: int
    depth: int
    n_bins: int
    per_output_trees: bool = False   # K trees per round (ESL Alg. 10.4) instead of vector leaves
    colsample_by: str = "tree"        # "tree" or "level"
    learning_rate_schedule: Optional[Callable] = None  # round -> multiplier (e.g. an optax schedule)
    axis_name: Optional[str] = None   # set by boost_sharded: rows are sharded over this mesh axis
    missing: bool = True              # False: no training row has a missing value (half the split search)


class Hyperparams(NamedTuple):
    """Continuous hyperparameters: traced, so they can be vmapped over."""

    learning_rate: jax.Array
    l2: jax.Array
    min_split_gain: jax.Array
    min_child_weight: jax.Array
    subsample: jax.Array
    colsample: jax.Array

    @classmethod
    def create(cls, learning_rate=0.1, l2=1.0, min_split_gain=0.0, min_child_weight=1.0,
               subsample=1.0, colsample=1.0) -> "Hyperparams":
        f = lambda v: jnp.asarray(v, jnp.float32)
        return cls(f(learning_rate), f(l2), f(min_split_gain), f(min_child_weight), f(subsample),
                   f(colsample))


class BoostState(NamedTuple):
    """What one round carries to the next."""

    raw: jax.Array        # (n, K) current raw scores of the training rows
    raw_valid: jax.Array  # (m, K) current raw scores of the validation rows (m may be 0)
    loss: losses_lib.Loss  # the loss with this round's parameters (adaptive Huber delta)


class BoostOutput(NamedTuple):
    trees: tree_lib.ObliviousTrees  # leading axes (n_rounds, trees_per_round)
    train_loss: jax.Array           # (n_rounds,) weighted mean training loss after each round
    valid_loss: jax.Array           # (n_rounds,) mean validation loss after each round (NaN: none)
    final_loss: losses_lib.Loss     # the loss with its last-round parameters


def feature_mask(key, n_features: int, rate):
    """Exactly ``clip(round(rate * F), 1, F)`` randomly chosen features (traced ``rate``)."""
    n_keep = jnp.clip(jnp.round(rate * n_features), 1, n_features).astype(jnp.int32)
    rank = jnp.argsort(jnp.argsort(jax.random.uniform(key, (n_features,)))).astype(jnp.int32)
    return rank < n_keep


def column_masks(key, n_features: int, depth: int, rate, by: str):
    """``(depth, F)`` eligible features per level: one draw per tree or one per level."""
    if by == "tree":
        return jnp.broadcast_to(feature_mask(key, n_features, rate), (depth, n_features))
    if by == "level":
        return jax.vmap(lambda k: feature_mask(k, n_features, rate))(jax.random.split(key, depth))
    raise ValueError(f"colsample_by={by!r} must be 'tree' or 'level'.")


def _mean_loss(loss, y, raw, w, axis_name=None):
    total = jnp.sum(w)
    s = jnp.sum(w * losses_lib.per_sample_losses(loss, y, raw))
    if axis_name is not None:
        total, s = lax.psum((total, s), axis_name)
    return jnp.where(total > 0, s / total, jnp.nan)


def _all_rows(x, axis_name):
    return x if axis_name is None else lax.all_gather(x, axis_name, tiled=True)


def _fit_round_trees(config: BoostConfig, hyper: Hyperparams, loss, X_binned, y, raw, w, g, h, masks):
    """Fit this round's tree(s); returns trees with a leading ``trees_per_round`` axis,
    unshrunk leaf values, and each training row's leaf per tree ``(T, n)``."""
    fit = functools.partial(tree_lib.fit_tree, X_binned, depth=config.depth, n_bins=config.n_bins,
                            l2=hyper.l2, min_split_gain=hyper.min_split_gain,
                            min_child_weight=hyper.min_child_weight, feature_masks=masks,
                            axis_name=config.axis_name, missing=config.missing)
    gw, hw = g * w[:, None], h * w[:, None]
    n_leaves = 2**config.depth
    if not config.per_output_trees:
        tree, leaf = fit(gw, hw)
        values = refit.refit_leaf_values(loss, y, raw, w, leaf, n_leaves, tree.leaf_values,
                                         axis_name=config.axis_name)
        tree = tree._replace(leaf_values=values)
        return jax.tree_util.tree_map(lambda a: a[None], tree), leaf[None]
    k = g.shape[-1]
    trees, leaves = jax.vmap(lambda gk, hk: fit(gk[:, None], hk[:, None]), in_axes=(1, 1))(gw, hw)
    # Output k's tree moves only raw score k: embed its scalar leaves as one-hot vectors.
    values = trees.leaf_values[:, :, 0:1] * jnp.eye(k, dtype=jnp.float32)[:, None, :]
    return trees._replace(leaf_values=values), leaves


@functools.partial(jax.jit, static_argnames=("config",))
def boost(X_binned, y, w, key, hyper: Hyperparams, loss: losses_lib.Loss, init_raw,
          X_valid_binned, y_valid, w_valid, holdout_weight=None, *, config: BoostConfig) -> BoostOutput:
    """Run ``config.n_rounds`` rounds of boosting from the constant raw score ``init_raw``.

    Args:
      X_binned: ``(F, n)`` uint8 training bins; y, w: ``(n,)`` labels and sample weights.
      key: a ``jax.random`` key (typed or raw uint32).
      hyper: traced :class:`Hyperparams`.
      loss: a :class:`jboost.Loss` with ``n_outputs`` set.
      init_raw: ``(K,)`` the baseline raw score.
      X_valid_binned, y_valid, w_valid: validation set, ``(F, m)``, ``(m,)``, ``(m,)``; ``m`` may
        be 0 (validation losses are then NaN).
      holdout_weight: optional ``(n,)`` weights of training rows held out of the fit (zero
        training weight), e.g. a cross-validation fold: the validation loss is then their weighted
        mean loss under the training raw scores, which already hold their predictions (no second
        pass over the rows); the validation set must be empty.
      config: static :class:`BoostConfig`.

    With ``config.axis_name`` set (inside ``shard_map``, see :func:`boost_sharded`), the training
    rows are this device's shard; histograms and sums are ``psum``-ed so every device grows the
    same trees; the validation set is replicated.
    """
    axis = config.axis_name
    n = y.shape[0]
    if holdout_weight is not None and y_valid.shape[0]:
        raise ValueError("boost: holdout_weight reports held-out training rows; the validation set "
                         f"must then be empty (got {y_valid.shape[0]} rows).")
    n_global = n if axis is None else n * lax.psum(1, axis)
    row0 = 0 if axis is None else lax.axis_index(axis) * n
    k = init_raw.shape[0]
    n_features = X_binned.shape[0]
    raw0 = jnp.broadcast_to(init_raw.astype(jnp.float32), (n, k))
    raw_valid0 = jnp.broadcast_to(init_raw.astype(jnp.float32), (y_valid.shape[0], k))
    w = w.astype(jnp.float32)
    w_valid = w_valid.astype(jnp.float32)

    def step(state: BoostState, m):
        key_m = jax.random.fold_in(key, m)
        k_rows, k_cols = jax.random.split(key_m)
        loss_m = state.loss
        if loss_m.adaptive_huber_alpha:
            # ESL 10.10.2: delta = alpha-quantile of |y - f_{m-1}|.
            delta = losses_lib.weighted_quantile(_all_rows(jnp.abs(y - state.raw[:, 0]), axis),
                                                 _all_rows(w, axis), loss_m.params["alpha"])
            loss_m = loss_m.with_params(delta=jnp.maximum(delta, 1e-12))
        g, h = derivatives.grad_hess(loss_m, y, state.raw)
        # Draws for all rows, then this shard's slice: the same rows are kept whatever the sharding
        # (threefry is partitionable, so a prefix of a longer draw equals a shorter draw).
        def subsampled(w):
            u = lax.dynamic_slice_in_dim(jax.random.uniform(k_rows, (n_global,)), row0, n)
            return w * (u < hyper.subsample).astype(w.dtype)

        # No draws at all when every row is kept (the common case; a cond, so under vmap over
        # subsample rates both branches run and the result is the same).
        w_m = lax.cond(hyper.subsample < 1.0, subsampled, lambda w: w, w)
        # Every feature when colsample = 1 (no draws; the drawn mask would keep all of them).
        masks = lax.cond(hyper.colsample < 1.0,
                         lambda k: column_masks(k, n_features, config.depth, hyper.colsample,
                                                config.colsample_by),
                         lambda k: jnp.ones((config.depth, n_features), bool), k_cols)
        trees, leaves = _fit_round_trees(config, hyper, loss_m, X_binned, y, state.raw, w_m, g, h, masks)
        lr = hyper.learning_rate
        if config.learning_rate_schedule is not None:
            lr = lr * config.learning_rate_schedule(m)
        trees = trees._replace(leaf_values=trees.leaf_values * lr)
        take = jax.vmap(lambda t, leaf: t.leaf_values[leaf])
        raw = state.raw + jnp.sum(take(trees, leaves), axis=0)
        leaves_valid = jax.vmap(lambda t: tree_lib.leaf_index_binned(t, X_valid_binned, config.n_bins))(trees)
        raw_valid = state.raw_valid + jnp.sum(take(trees, leaves_valid), axis=0)
        if holdout_weight is None:
            valid_loss = _mean_loss(loss_m, y_valid, raw_valid, w_valid)
        else:
            valid_loss = _mean_loss(loss_m, y, raw, holdout_weight.astype(jnp.float32), axis)
        out = (trees, _mean_loss(loss_m, y, raw, w, axis), valid_loss)
        return BoostState(raw, raw_valid, loss_m), out

    state0 = BoostState(raw0, raw_valid0, loss)
    state, (trees, train_loss, valid_loss) = lax.scan(step, state0, jnp.arange(config.n_rounds))
    return BoostOutput(trees, train_loss, valid_loss, state.loss)


def boost_sharded(mesh, X_binned, y, w, key, hyper: Hyperparams, loss: losses_lib.Loss, init_raw,
                  X_valid_binned, y_valid, w_valid, *, config: BoostConfig) -> BoostOutput:
    """:func:`boost` with the training rows sharded over the first axis of ``mesh``.

    Data parallelism with JAX's own machinery: rows are padded with zero-weight rows to a
    multiple of the number of devices and split across them (``shard_map``); each device builds
    the histograms of its rows and a ``psum`` over the mesh axis gives every device the global
    histograms, so all devices choose the same splits and hold the same trees. The same code
    serves several XLA CPU devices (``--xla_force_host_platform_device_count``), several GPUs,
    and several hosts after ``jax.distributed.initialize()`` (a mesh over ``jax.devices()``).
    """
    axis = mesh.axis_names[0]
    n_dev = mesh.shape[axis]
    n = y.shape[0]
    pad = (-n) % n_dev
    if pad:
        X_binned = jnp.pad(X_binned, ((0, 0), (0, pad)))
        y = jnp.pad(y, (0, pad))
        w = jnp.pad(w, (0, pad))
    fn = _sharded_boost(mesh, config._replace(axis_name=axis))
    return fn(X_binned, y, w, key, hyper, loss, init_raw, X_valid_binned, y_valid, w_valid)


@functools.lru_cache(maxsize=64)
def _sharded_boost(mesh, config: BoostConfig):
    from jax.sharding import PartitionSpec as P

    axis = config.axis_name
    rows, rep = P(axis), P()
    fn = jax.shard_map(
        functools.partial(boost.__wrapped__, config=config),
        mesh=mesh,
        in_specs=(P(None, axis), rows, rows, rep, rep, rep, rep, rep, rep, rep),
        out_specs=rep,
        check_vma=False,
    )
    return jax.jit(fn)
