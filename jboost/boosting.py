"""Boosting as a public ``init`` / ``step`` pair; :func:`boost` is a ``lax.scan`` of ``step``.

ESL Algorithm 10.3 with second-order (Newton) trees as in XGBoost: per round, gradients and
hessians of the loss by autodiff, a row sampler (Bernoulli weights: shapes stay fixed) and a
column sampler (per tree or per level), one oblivious tree (or K, one per output), an optional
exact leaf refit, shrinkage by the learning rate.

The scaffold (in the style of optax's ``init``/``update``):

* :func:`init` ``(data, loss, init_raw, config) -> BoostState`` -- the raw scores start at the
  baseline; the algorithm's own state (AdaBoost's observation weights, ...) starts from
  ``config.algorithm.init``;
* :func:`step` ``(state, m, data=, key=, hyper=, config=) -> (state, RoundOutput)`` -- round
  ``m``: its key ``fold_in(key, m)``, the samplers' draws, then ``config.algorithm.round`` (which
  grows the round's trees and gives their final leaf values), then the raw scores of the training
  and validation rows and the round's losses;
* :func:`boost` = ``lax.scan(step)`` over ``config.n_rounds`` rounds; with
  ``config.early_stopping`` (:class:`EarlyStopping`) a ``lax.while_loop`` over chunks of rounds
  that really stops once the validation score has not improved for ``rounds`` rounds (under
  ``vmap`` each model stops on its own: the loop runs until every model has stopped, and a stopped
  model's state no longer changes). ``state=``/``first_round=`` continue a fit (warm start).

A classical algorithm (:mod:`jboost.algorithms`) is an :class:`Algorithm`: one ``round``
function from a :class:`Round` to a :class:`RoundResult` (and an optional ``init`` of its state);
gradient boosting is :data:`NEWTON`. Samplers are plain functions (:mod:`jboost.samplers`).

Static (shape-setting) settings live in :class:`BoostConfig`; every continuous hyperparameter is
a traced array in :class:`Hyperparams`, so ``jax.vmap`` over them is one compiled program.
Randomness: round ``m`` uses ``fold_in(key, m)``, so the same key and data give bitwise the same
model, and round ``m`` does not depend on how many rounds follow.
"""

from __future__ import annotations

import functools
from typing import Any, Callable, Mapping, NamedTuple, Optional, Union

import jax
import jax.numpy as jnp
from jax import lax

from jboost import _compile
from jboost import binning
from jboost import derivatives
from jboost import losses as losses_lib
from jboost import metrics as metrics_lib
from jboost import refit
from jboost import samplers
from jboost import splits
from jboost import tree as tree_lib


class Data(NamedTuple):
    """The arrays a fit runs on: feature-major ``uint8`` bins, labels and weights of the training
    rows and of a validation set (``m`` may be 0: validation losses are then NaN), and optional
    per-row raw-score offsets (``base_margin``: known offsets such as a log exposure, added to
    every raw score the rounds start from; ``None``: none)."""

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


def _no_state(data: Data, loss: losses_lib.Loss):
    return ()


class Round(NamedTuple):
    """What an algorithm's ``round`` function sees in round ``m``."""

    m: jax.Array                 # the round index (traced int32)
    data: Data
    raw: jax.Array               # (n, K) raw scores of the training rows before this round
    loss: losses_lib.Loss        # the loss with this round's parameters
    extra: Any                   # the algorithm's own state (a pytree)
    sample: jax.Array            # (n,) the row sampler's multiplier of the sample weights
    masks: jax.Array             # (depth, F) features eligible at each level
    learning_rate: jax.Array     # this round's shrinkage (schedule applied)
    hyper: "Hyperparams"
    config: "BoostConfig"
    key: Any = None              # this round's key for estimators (Hutchinson probes)


class RoundResult(NamedTuple):
    """What an algorithm's ``round`` returns."""

    trees: tree_lib.ObliviousTrees  # the round's T trees (leading axis T), final leaf values
    leaves: jax.Array               # (T, n) the leaf of every training row in each tree
    extra: Any = ()                 # the algorithm's new state
    info: Mapping[str, jax.Array] = {}  # per-round diagnostics (scalars), stacked by the scan


class Algorithm(NamedTuple):
    """A boosting algorithm on the scaffold: ``round(Round) -> RoundResult`` and
    ``init(data, loss) -> extra`` (its state before round 0). Both must be hashable (module-level
    functions): the algorithm is part of the static :class:`BoostConfig`."""

    round: Callable[[Round], RoundResult]
    init: Callable[[Data, losses_lib.Loss], Any] = _no_state


def grow_trees(r: Round, grad, hess):
    """Grow one tree per round on weighted ``grad``, ``hess`` ``(n, K)`` with the fit's settings
    (``config.tree_family.grow``: :func:`jboost.tree.fit_tree` for oblivious trees); returns ``(tree, leaf (n,))``, the split criterion's
    leaf values (Newton: ``-G / (H + l2)``) before shrinkage."""
    c = r.config
    return c.tree_family.grow(r.data.X_binned, grad, hess, depth=c.depth, n_bins=c.n_bins,
                              l2=r.hyper.l2, min_split_gain=r.hyper.min_split_gain,
                              min_child_weight=r.hyper.min_child_weight, feature_masks=r.masks,
                              axis_name=c.axis_name, missing=c.missing, criterion=c.split_criterion,
                              **({} if c.max_leaves is None else {"max_leaves": c.max_leaves}))


def one_tree(tree: tree_lib.ObliviousTrees, leaf) -> tuple:
    """``(trees, leaves)`` with a leading trees-per-round axis of size 1."""
    return jax.tree_util.tree_map(lambda a: a[None], tree), leaf[None]


def newton_round(r: Round) -> RoundResult:
    """Gradient boosting with Newton trees (ESL Algorithm 10.3; XGBoost's second-order step):
    gradients and hessians by autodiff, one tree with vector leaves (or one tree per output,
    ESL Algorithm 10.4), the loss's exact leaf refit if it has one, shrinkage.

    A loss with ``hessian="auto"`` (a custom loss's default) decides the round from its traced
    curvature (:func:`jboost.derivatives.curvature_is_positive`; no Python branch, so a sweep
    is one program): positive for every row that moves the fit, a Newton round as above;
    otherwise the tree is grown on unit curvature
    (:func:`jboost.derivatives.first_order_curvature`: least squares on the negative gradient,
    ESL Algorithm 10.3) and its leaves are the loss's
    refit if it has one, else :func:`jboost.refit.degenerate_leaf_values` (the exact per-leaf
    minimisers of a regression loss; safeguarded first-order values for a classification loss;
    with ``per_output_trees``, output by output).

    A per-column loss (vector labels, :attr:`jboost.Loss.per_column`) refits each output's
    leaves with its column's refit (the absolute, quantile or Huber loss of that column). A batch
    objective (:attr:`jboost.Loss.batch`) takes its gradient and hessian diagonal from
    :func:`jboost.derivatives.batch_grad_hess` (weighted by the loss itself; Hutchinson probes
    from ``r.key``, the round's folded key), and the row sampler masks rows of them."""
    config, hyper = r.config, r.hyper
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
        trees = trees._replace(leaf_values=values)
    return RoundResult(trees._replace(leaf_values=trees.leaf_values * r.learning_rate), leaves)


def _column_refit(r: Round, yk, rk, w, leaf, values):
    """The leaf refit of one column of a :attr:`jboost.Loss.per_column` loss: ``(L,)`` values
    from the column's labels ``yk (n,)``, raw scores ``rk (n,)`` and Newton values ``(L,)``,
    as a one-output fit of that column refits them."""
    one = losses_lib.column_loss(r.loss)
    return refit.refit_leaf_values(one, yk, rk[:, None], w, leaf, values.shape[0],
                                   values[:, None], axis_name=r.config.axis_name,
                                   learning_rate=r.learning_rate)[:, 0]


NEWTON = Algorithm(newton_round)


class BoostConfig(NamedTuple):
    """Static settings: each distinct value is a separate compilation."""

    n_rounds: int
    depth: int
    n_bins: int
    per_output_trees: bool = False   # K trees per round (ESL Alg. 10.4) instead of vector leaves
    colsample_by: Union[str, Callable] = "tree"  # "tree", "level" or a column sampler (jboost.samplers)
    learning_rate_schedule: Optional[Callable] = None  # round -> multiplier (e.g. an optax schedule)
    axis_name: Optional[str] = None   # set by boost_sharded: rows are sharded over this mesh axis
    missing: bool = True              # False: no training row has a missing value (half the split search)
    row_sampler: Union[str, Callable] = "bernoulli"  # "bernoulli", "poisson" or a row sampler
    algorithm: Algorithm = NEWTON     # the round rule (jboost.algorithms define others)
    early_stopping: Optional["EarlyStopping"] = None  # stop on the validation score
    split_criterion: splits.SplitCriterion = splits.NEWTON  # split scores and leaf values
    tree_family: type = tree_lib.ObliviousTrees  # a tree_lib.TreeFamily: how trees grow and predict
    max_leaves: Optional[int] = None  # loss-guided trees (jboost.lossguide): the most leaves
    eval_metric: Union[None, str, Callable] = None  # a validation metric recorded per round (boost_rounds)
    # Sharded rows not in table order (a multi-process fit, jboost.distributed): the table row of
    # each shard's first row, per device of the mesh axis (its row draws are read from there).
    row_starts: Optional[tuple] = None

    @property
    def column_sampler(self) -> Callable:
        by = self.colsample_by
        return samplers.COLUMN_SAMPLERS[by] if isinstance(by, str) else by

    @property
    def row_sampler_fn(self) -> Callable:
        s = self.row_sampler
        return samplers.ROW_SAMPLERS[s] if isinstance(s, str) else s


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
    """What one round carries to the next.

    The raw scores are carried as ``base + pending``: the last round's increment (its trees'
    values at each row) is carried as its own array and added at the start of the next round.
    A loop-carried array is materialised, so every round adds the increment exactly as stored,
    as prediction and :func:`resume` add it (XLA's CPU backend would otherwise fuse the leaf
    values' last multiply into the addition, an FMA that rounds differently from program to
    program: a continued or early-stopped fit then drifted by an ulp from an uninterrupted one).
    """

    base: jax.Array       # (n, K) raw scores of the training rows before ``pending``
    base_valid: jax.Array  # (m, K) the same for the validation rows (m may be 0)
    loss: losses_lib.Loss  # the loss with this round's parameters (adaptive Huber delta)
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
    trees: tree_lib.ObliviousTrees  # the round's trees, leading axis trees_per_round
    train_loss: jax.Array           # weighted mean training loss after the round
    valid_loss: jax.Array           # mean validation loss after the round (NaN: none)
    info: Mapping[str, jax.Array]   # the algorithm's per-round diagnostics


class BoostOutput(NamedTuple):
    trees: tree_lib.ObliviousTrees  # leading axes (n_rounds, trees_per_round)
    train_loss: jax.Array           # (n_rounds,) weighted mean training loss after each round
    valid_loss: jax.Array           # (n_rounds,) mean validation loss after each round (NaN: none)
    final_loss: losses_lib.Loss     # the loss with its last-round parameters
    info: Mapping[str, jax.Array] = {}  # the algorithm's diagnostics, each (n_rounds,)
    extra: Any = ()                 # the algorithm's state after the last round
    state: Any = None               # the BoostState after the last round (to continue the fit)
    best_round: Any = None          # early stopping: the round of the best validation score
    n_fitted: Any = None            # early stopping: rounds fitted (the rest: zero trees, NaN losses)
    best_score: Any = None          # early stopping: the best validation score so far


class EarlyStopping(NamedTuple):
    """Stop when the validation score has not improved for ``rounds`` rounds (static settings).

    The score is the mean validation loss (``metric=None``), a named metric of
    :data:`jboost.metrics.METRICS` (through the loss's link) or ``metric(y, raw, w) -> scalar``
    (minimised; ``raw`` as :func:`jboost.predict` returns it, ``w`` the validation weights) after
    each round; a round
    improves on the best so far when its score is below ``best - tolerance``. Rounds run in
    chunks of ``chunk`` inside a ``lax.while_loop``: a fit that stops at round ``s`` runs fewer
    than ``s + chunk`` rounds (rounds after the stop within its chunk are masked out).
    """

    rounds: int
    tolerance: float = 0.0
    metric: Union[None, str, Callable] = None
    chunk: int = 8


def mean_loss(loss, y, raw, w, axis_name=None):
    """Weighted mean loss of the rows; NaN when they have no weight (e.g. an empty set)."""
    total = jnp.sum(w)
    s = losses_lib.total_loss(loss, y, raw, w)
    if axis_name is not None:
        total, s = lax.psum((total, s), axis_name)
    return jnp.where(total > 0, s / total, jnp.nan)


def _all_rows(x, axis_name):
    return x if axis_name is None else lax.all_gather(x, axis_name, tiled=True)


def round_learning_rate(config: BoostConfig, hyper: Hyperparams, m):
    """Shrinkage of round ``m``: ``learning_rate * schedule(m)`` (ESL Section 10.12.1)."""
    lr = hyper.learning_rate
    if config.learning_rate_schedule is not None:
        # optax's schedules mix Python floats, bools and int32 counts: standard promotion inside
        # the user's schedule, whatever the caller's setting (e.g. strict in the test suite).
        with jax.numpy_dtype_promotion("standard"):
            rate = config.learning_rate_schedule(m)
        lr = lr * jnp.asarray(rate, jnp.float32)
    return lr


def round_values(trees: tree_lib.ObliviousTrees, leaves):
    """``(n, K)`` the values of a round's trees ``(T, ...)`` at rows whose leaves are ``(T, n)``,
    summed over the trees: the increment :func:`step` adds to the raw scores (an algorithm that
    reads it, e.g. SAMME.R's weight update, gets bitwise the same values)."""
    values = jax.vmap(lambda t, leaf: t.leaf_values[leaf])
    if trees.leaf_values.shape[0] == 1:
        return values(trees, leaves)[0]
    # Several trees: a loop whose operands (the round's leaf values) are materialised buffers, so
    # XLA cannot contract the leaf values' last multiply into the sum (an FMA) in the fitting
    # program while a continued fit (resume), adding the stored values, does not: the same
    # additions in the same order in both.
    def add(t, acc):
        tree = jax.tree_util.tree_map(lambda a: a[t], trees)
        return acc + tree.leaf_values[leaves[t]]

    zero = jnp.zeros(leaves.shape[1:] + trees.leaf_values.shape[-1:], trees.leaf_values.dtype)
    return lax.fori_loop(0, trees.leaf_values.shape[0], add, zero)


def init(data: Data, loss: losses_lib.Loss, init_raw, config: BoostConfig) -> BoostState:
    """The state before round 0: every row's raw score is ``init_raw`` ``(K,)`` (plus the row's
    ``data.margin`` when given)."""
    k = init_raw.shape[0]
    raw0 = jnp.broadcast_to(init_raw.astype(jnp.float32), (data.y.shape[0], k))
    raw_valid0 = jnp.broadcast_to(init_raw.astype(jnp.float32), (data.y_valid.shape[0], k))
    if data.margin is not None:
        raw0 = data.margin + raw0
    if data.margin_valid is not None:
        raw_valid0 = data.margin_valid + raw_valid0
    return BoostState(raw0, raw_valid0, loss, config.algorithm.init(data, loss), jnp.zeros_like(raw0),
                      jnp.zeros_like(raw_valid0))


def step(state: BoostState, m, *, data: Data, key, hyper: Hyperparams, config: BoostConfig):
    """Round ``m`` of boosting: returns ``(state, RoundOutput)``.

    With ``config.axis_name`` set (inside ``shard_map``, see :func:`boost_sharded`), the training
    rows are this device's shard; histograms and sums are ``psum``-ed so every device grows the
    same trees; the validation set is replicated.
    """
    axis = config.axis_name
    y = data.y
    n = y.shape[0]
    n_features = data.X_binned.shape[0]
    w = data.w.astype(jnp.float32)
    k_rows, k_cols = jax.random.split(jax.random.fold_in(key, m))
    raw_m, raw_valid_m = state.raw, state.raw_valid  # the last round's increment added, as stored
    loss_m = state.loss
    if loss_m.adaptive_huber_alpha:
        # ESL 10.10.2: delta = alpha-quantile of |y - f_{m-1}|.
        delta = losses_lib.weighted_quantile(_all_rows(jnp.abs(y - raw_m[:, 0]), axis),
                                             _all_rows(w, axis), loss_m.params["alpha"])
        loss_m = loss_m.with_params(delta=jnp.maximum(delta, 1e-12))
    # Draws for all rows, then this shard's slice: the same rows are kept whatever the sharding
    # (threefry is partitionable, so a prefix of a longer draw equals a shorter draw).
    if axis is None:
        sample = config.row_sampler_fn(k_rows, n, hyper.subsample)
    else:
        # A multi-process fit's shards hold each process's rows then zero-weight padding rows:
        # ``row_starts`` gives the table row of each shard's first row, so every row gets the draw
        # of its row in the concatenated table (padding rows, of weight 0, take any draw).
        n_global = n * lax.psum(1, axis)
        start = (lax.axis_index(axis) * n if config.row_starts is None
                 else jnp.asarray(config.row_starts, jnp.int32)[lax.axis_index(axis)])
        sample = lax.dynamic_slice_in_dim(config.row_sampler_fn(k_rows, n_global, hyper.subsample),
                                          start, n)
    masks = config.column_sampler(k_cols, n_features, config.depth, hyper.colsample)
    lr = round_learning_rate(config, hyper, m)
    r = Round(m, data._replace(w=w), raw_m, loss_m, state.extra, sample, masks, lr, hyper, config,
              jax.random.fold_in(jax.random.fold_in(key, m), 2))
    res = config.algorithm.round(r)
    trees = res.trees
    inc = round_values(trees, res.leaves)
    leaves_valid = jax.vmap(lambda t: tree_lib.leaf_index_binned(t, data.X_valid, config.n_bins))(trees)
    inc_valid = round_values(trees, leaves_valid)
    new = BoostState(raw_m, raw_valid_m, loss_m, res.extra, inc, inc_valid)
    out = RoundOutput(trees, mean_loss(loss_m, y, new.raw, w, axis),
                      mean_loss(loss_m, data.y_valid, new.raw_valid, data.w_valid.astype(jnp.float32)),
                      dict(res.info))
    return new, out


@functools.partial(_compile.jit, static_argnames=("config",))
def boost(data: Data, key, hyper: Hyperparams, loss: losses_lib.Loss, init_raw, *,
          config: BoostConfig, state: Optional[BoostState] = None, first_round=0,
          best=None) -> BoostOutput:
    """Run ``config.n_rounds`` rounds of boosting from the constant raw score ``init_raw``:
    ``lax.scan`` of :func:`step` from :func:`init` (a ``while_loop`` of chunks with
    ``config.early_stopping``).

    Args:
      data: :class:`Data` (training bins ``(F, n)``, labels, weights; validation set, maybe empty).
      key: a ``jax.random`` key (typed or raw uint32).
      hyper: traced :class:`Hyperparams`.
      loss: a :class:`jboost.Loss` with ``n_outputs`` set.
      init_raw: ``(K,)`` the baseline raw score.
      config: static :class:`BoostConfig`.
      state: continue from this :class:`BoostState` (a warm start: the raw scores of an earlier
        fit's rounds, accumulated in the order training accumulates them) instead of :func:`init`.
      first_round: the index of the first round (traced; rounds use ``fold_in(key, m)``), so
        ``r`` rounds then ``s`` more from the state equal ``r + s`` rounds bitwise.
      best: with early stopping, ``(best_score, best_round)`` of the rounds before
        ``first_round`` (``BoostOutput.best_score``, ``best_round`` of the previous call), so a fit
        run in several calls stops where one call would.
    """
    body = functools.partial(step, data=data, key=key, hyper=hyper, config=config)
    state0 = init(data, loss, init_raw, config) if state is None else state
    rounds = jnp.asarray(first_round, jnp.int32) + jnp.arange(config.n_rounds, dtype=jnp.int32)
    if config.early_stopping is not None:
        if best is None:
            best = (jnp.float32(jnp.inf), rounds[0] - 1)
        return boost_until_stopped(body, state0, rounds, data, config.early_stopping, best)
    state, out = lax.scan(body, state0, rounds)
    return BoostOutput(out.trees, out.train_loss, out.valid_loss, state.loss, out.info, state.extra,
                       state)


def resume(data: Data, trees, init_raw, loss: losses_lib.Loss, config: BoostConfig,
           extra: Any = None) -> BoostState:
    """The :class:`BoostState` after the rounds ``trees`` (leading axes ``(rounds, T)``, final
    leaf values) of an earlier fit on the same bins: the raw scores accumulated round by round in
    the order :func:`step` accumulates them (so a continued fit equals an uninterrupted one
    bitwise), ``loss`` with its last-round parameters, and the algorithm's state ``extra`` after
    those rounds (``None``: its ``init``, right for gradient boosting, whose state is empty; an
    algorithm with a state, e.g. AdaBoost's observation weights, passes the one its fit kept)."""
    state = init(data, loss, init_raw, config)
    if extra is not None:
        state = state._replace(extra=extra)

    def one(raws, trees_m):
        raw, raw_valid = raws
        leaves = jax.vmap(lambda t: tree_lib.leaf_index_binned(t, data.X_binned, config.n_bins))(trees_m)
        leaves_valid = jax.vmap(lambda t: tree_lib.leaf_index_binned(t, data.X_valid, config.n_bins))(trees_m)
        return (raw + round_values(trees_m, leaves), raw_valid + round_values(trees_m, leaves_valid)), None

    (raw, raw_valid), _ = lax.scan(one, (state.raw, state.raw_valid), trees)
    return state._replace(base=raw, base_valid=raw_valid, pending=jnp.zeros_like(raw),
                          pending_valid=jnp.zeros_like(raw_valid))


def boost_until_stopped(body, state0: BoostState, rounds, data: Data, es: EarlyStopping,
                        best) -> BoostOutput:
    """:func:`boost` with early stopping: chunks of ``es.chunk`` rounds (a ``lax.scan``) in a
    ``lax.while_loop`` that ends when the score has not improved for ``es.rounds`` rounds.

    ``body(state, m) -> (state, RoundOutput)`` is one round (:func:`step` with its data, key and
    settings bound); ``rounds`` the ``(n_rounds,)`` round indices; ``best`` the ``(best_score,
    best_round)`` so far. The score of a round is ``RoundOutput.valid_loss`` when ``es.metric``
    is ``None`` (a caller may put any held-out loss there, as the sweep does for its held-out
    fold), else ``es.metric`` on ``data``'s validation rows."""
    n_rounds = rounds.shape[0]
    chunk = max(1, min(int(es.chunk), n_rounds))
    n_chunks = -(-n_rounds // chunk)
    _, template = jax.eval_shape(body, state0, rounds[0])
    # Rounds never fitted keep zero trees and info, and NaN losses.
    nan_losses = lambda s: jnp.full((n_chunks * chunk,) + s.shape, jnp.nan, s.dtype)
    zeros = lambda s: jnp.zeros((n_chunks * chunk,) + s.shape, s.dtype)
    buffers = RoundOutput(jax.tree_util.tree_map(zeros, template.trees), nan_losses(template.train_loss),
                          nan_losses(template.valid_loss), jax.tree_util.tree_map(zeros, template.info))
    w_valid = data.w_valid.astype(jnp.float32)

    def score(state, out):
        if es.metric is None:
            return out.valid_loss
        return metrics_lib.evaluate(es.metric, state.loss, data.y_valid, state.raw_valid,
                                    w_valid).astype(jnp.float32).reshape(())

    def one_round(carry, i):
        c, state, best, best_i, last_i, stopped = carry
        j = c * chunk + i  # position in this fit
        active = (j < n_rounds) & ~stopped
        m = rounds[jnp.minimum(j, n_rounds - 1)]  # the round's index in the whole fit
        new_state, out = body(state, m)
        s = score(new_state, out)
        better = active & (s < best - es.tolerance)  # NaN never improves
        best, best_i = jnp.where(better, s, best), jnp.where(better, m, best_i)
        last_i = jnp.where(active, j, last_i)
        stopped = stopped | (active & (m - best_i >= es.rounds)) | (j >= n_rounds - 1)
        keep = lambda new, old: jnp.where(active, new, old)
        state = jax.tree_util.tree_map(keep, new_state, state)
        blank = RoundOutput(jax.tree_util.tree_map(jnp.zeros_like, out.trees),
                            jnp.full_like(out.train_loss, jnp.nan), jnp.full_like(out.valid_loss, jnp.nan),
                            jax.tree_util.tree_map(jnp.zeros_like, out.info))
        out = jax.tree_util.tree_map(keep, out, blank)
        return (c, state, best, best_i, last_i, stopped), out

    def run_chunk(carry):
        (c, state, best, best_i, last_i, stopped), bufs = carry
        (_, state, best, best_i, last_i, stopped), outs = lax.scan(
            one_round, (c, state, best, best_i, last_i, stopped), jnp.arange(chunk))
        bufs = jax.tree_util.tree_map(
            lambda b, o: lax.dynamic_update_slice_in_dim(b, o, c * chunk, axis=0), bufs, outs)
        return (c + 1, state, best, best_i, last_i, stopped), bufs

    best_score0, best_round0 = best
    carry0 = (jnp.int32(0), state0, jnp.asarray(best_score0, jnp.float32),
              jnp.asarray(best_round0, jnp.int32), jnp.int32(-1), jnp.bool_(False))
    (_, state, best_score, best_i, last_i, _), bufs = lax.while_loop(
        lambda carry: ~carry[0][5], run_chunk, (carry0, buffers))
    bufs = jax.tree_util.tree_map(lambda b: b[:n_rounds], bufs)
    return BoostOutput(bufs.trees, bufs.train_loss, bufs.valid_loss, state.loss, bufs.info,
                       state.extra, state, best_i, last_i + 1, best_score)


# The rounds one call of :func:`boost_rounds` can fit: the size of its buffers. The program of a
# concrete fit's rounds does not depend on the fit's number of rounds (``config.n_rounds`` is
# this constant in its static settings), so fits that differ only in ``n_rounds`` share it.
ROUNDS_PER_CALL = 64


class Rounds(NamedTuple):
    """The per-round record of one call of :func:`boost_rounds`: buffers of ``config.n_rounds``
    (:data:`ROUNDS_PER_CALL`) rounds, index ``i`` holding the round at position ``start + i`` of
    the fit, where ``start`` is the input carry's ``done``. Indices past the rounds the call fitted
    hold what the input buffers held there (the caller reads the first ``done - start``)."""

    trees: tree_lib.ObliviousTrees  # leading axes (n_rounds, trees_per_round)
    train_loss: jax.Array           # (n_rounds,)
    valid_loss: jax.Array           # (n_rounds,)
    info: Mapping[str, jax.Array]   # the algorithm's diagnostics, each (n_rounds,)
    score: jax.Array                # (n_rounds,) the eval score (metric or validation loss)


class RoundsCarry(NamedTuple):
    """What :func:`boost_rounds` hands from one call to the next (host side: the previous
    call's output is the next call's input)."""

    state: BoostState   # after the last round fitted
    rounds: Rounds      # the buffers
    best: Any           # early stopping: (best_score, best_round) so far; () without
    done: jax.Array     # int32 position after the last round fitted
    stopped: jax.Array  # bool: early stopping has ended the fit


def rounds_template(data: Data, key, hyper: Hyperparams, loss: losses_lib.Loss, init_raw,
                    config: BoostConfig) -> RoundsCarry:
    """NumPy placeholders of :func:`boost_rounds`'s input for a new fit: a zero state of the
    right shapes (the program builds the real one from :func:`init`), empty buffers of
    ``config.n_rounds`` rounds (zero trees and info, NaN losses and scores), the initial early
    stopping record. Only shapes are traced (``jax.eval_shape``): nothing is compiled."""
    import numpy as np

    args = (data, key, hyper, loss, init_raw)
    leaves, treedef = jax.tree_util.tree_flatten(args)
    avals = tuple((np.shape(a), jnp.result_type(a), bool(getattr(jax.typeof(a), "weak_type", False)))
                  for a in leaves)
    state, out = _template_shapes(config, treedef, avals)
    n = config.n_rounds
    zeros = lambda s: np.zeros(s.shape, s.dtype)
    buf = lambda fill: (lambda s: np.full((n,) + tuple(s.shape), fill, s.dtype))
    state = jax.tree_util.tree_map(zeros, state)._replace(loss=loss)
    rounds = Rounds(jax.tree_util.tree_map(buf(0), out.trees), buf(np.nan)(out.train_loss),
                    buf(np.nan)(out.valid_loss), jax.tree_util.tree_map(buf(0), dict(out.info)),
                    np.full((n,), np.nan, np.float32))
    best = () if config.early_stopping is None else (np.float32(np.inf), np.int32(-1))
    return RoundsCarry(state, rounds, best, np.int32(0), np.bool_(False))


@functools.lru_cache(maxsize=256)
def _template_shapes(config: BoostConfig, treedef, avals):
    """The shapes of the state and of a round's output of a fit (``jax.eval_shape``, cached: a
    repeated fit traces nothing before its compiled program is found)."""
    specs = [jax.ShapeDtypeStruct(shape, dtype, weak_type=weak) for shape, dtype, weak in avals]
    data, key, hyper, loss, init_raw = jax.tree_util.tree_unflatten(treedef, specs)
    state = jax.eval_shape(functools.partial(init, config=config), data, loss, init_raw)
    _, out = jax.eval_shape(lambda d, k, h, st: step(st, jnp.int32(0), data=d, key=k, hyper=h,
                                                     config=config), data, key, hyper, state)
    return state, out


def eval_metric_of(config: BoostConfig):
    """The validation score recorded per round: the early-stopping metric, else
    ``config.eval_metric``; ``None``: the validation loss."""
    es = config.early_stopping
    return es.metric if es is not None and es.metric is not None else config.eval_metric


@functools.partial(_compile.jit, static_argnames=("config",))
def boost_rounds(data: Data, key, hyper: Hyperparams, init_raw, carry: RoundsCarry, first_round,
                 end, fresh, *, config: BoostConfig) -> RoundsCarry:
    """Rounds ``carry.done .. end - 1`` (positions in a fit whose first round is
    ``first_round``; at most ``config.n_rounds`` of them, the buffers' size) of boosting, as one
    call of a fit run in host-side calls: the same compiled program for every call and for
    every number of rounds (positions and counts are traced; the caller sets
    ``config.n_rounds`` to :data:`ROUNDS_PER_CALL`), so a fit can be run in chunks of any
    length, stopped between two (``Ctrl-C``) and checkpointed, and its rounds equal those of
    one call bitwise. ``fresh``: start from :func:`init` (``carry.state`` is then a placeholder
    with its shapes and ``loss``), else from ``carry.state``.

    A ``lax.while_loop`` over rounds (:func:`step`), writing round ``carry.done + i`` at index
    ``i`` of the buffers ``carry.rounds`` (:class:`Rounds`); with ``config.early_stopping`` it ends once the score has not improved for
    ``rounds`` rounds (``stopped``), as :func:`boost_until_stopped` does (each round's score:
    the validation loss, or the metric, :func:`eval_metric_of`, recorded in ``rounds.score``).
    With the training rows sharded (``config.axis_name``), see :func:`boost_rounds_sharded`."""
    return _boost_rounds(data, key, hyper, init_raw, carry, first_round, end, fresh, config=config)


def _boost_rounds(data, key, hyper, init_raw, carry, first_round, end, fresh, *, config):
    es = config.early_stopping
    metric = eval_metric_of(config)
    w_valid = data.w_valid.astype(jnp.float32)
    state = lax.cond(fresh, lambda s: init(data, s.loss, init_raw, config), lambda s: s, carry.state)
    first_round = jnp.asarray(first_round, jnp.int32)

    def score(state, out):
        if metric is None:
            return out.valid_loss.astype(jnp.float32)
        return metrics_lib.evaluate(metric, state.loss, data.y_valid, state.raw_valid,
                                    w_valid).astype(jnp.float32).reshape(())

    begin = jnp.asarray(carry.done, jnp.int32)  # the position of the buffers' index 0
    end = jnp.minimum(jnp.asarray(end, jnp.int32), begin + config.n_rounds)

    def cond(c):
        return (c.done < end) & ~c.stopped

    def body(c):
        j = c.done
        m = first_round + j
        state, out = step(c.state, m, data=data, key=key, hyper=hyper, config=config)
        s = score(state, out) if (metric is not None or es is not None) else jnp.float32(jnp.nan)
        put = lambda b, o: lax.dynamic_update_index_in_dim(b, o.astype(b.dtype), j - begin, 0)
        rounds = Rounds(jax.tree_util.tree_map(put, c.rounds.trees, out.trees),
                        put(c.rounds.train_loss, out.train_loss), put(c.rounds.valid_loss, out.valid_loss),
                        jax.tree_util.tree_map(put, c.rounds.info, dict(out.info)),
                        put(c.rounds.score, s))
        best, stopped = c.best, c.stopped
        if es is not None:
            best_score, best_i = best
            better = s < best_score - es.tolerance  # NaN never improves
            best = (jnp.where(better, s, best_score), jnp.where(better, m, best_i))
            stopped = m - best[1] >= es.rounds
        return RoundsCarry(state, rounds, best, j + 1, stopped)

    start = carry._replace(state=state, done=jnp.asarray(carry.done, jnp.int32),
                           stopped=jnp.asarray(carry.stopped, jnp.bool_))
    if es is not None:
        start = start._replace(best=(jnp.asarray(carry.best[0], jnp.float32),
                                     jnp.asarray(carry.best[1], jnp.int32)))
    return lax.while_loop(cond, body, start)


def boost_sharded(mesh, data: Data, key, hyper: Hyperparams, loss: losses_lib.Loss, init_raw, *,
                  config: BoostConfig, state: Optional[BoostState] = None, first_round=0,
                  best=None) -> BoostOutput:
    """:func:`boost` with the training rows sharded over the first axis of ``mesh``.

    Data parallelism with JAX's own machinery: rows are padded with zero-weight rows to a
    multiple of the number of devices and split across them (``shard_map``); each device builds
    the histograms of its rows and a ``psum`` over the mesh axis gives every device the global
    histograms, so all devices choose the same splits and hold the same trees. The same code
    serves several XLA CPU devices (``--xla_force_host_platform_device_count``), several GPUs,
    and several hosts after ``jax.distributed.initialize()`` (a mesh over ``jax.devices()``).
    ``state``/``first_round``/``best`` continue a fit as in :func:`boost` (the state's per-row
    raw scores are sharded with the rows); the returned ``BoostOutput.state`` holds every row.
    """
    axis = mesh.axis_names[0]
    n_dev = mesh.shape[axis]
    n = data.y.shape[0]
    pad = (-n) % n_dev
    rows = lambda a: None if a is None else jnp.pad(a, ((0, pad),) + ((0, 0),) * (a.ndim - 1))
    if pad:
        data = data._replace(X_binned=jnp.pad(data.X_binned, ((0, 0), (0, pad))),
                             y=rows(data.y), w=rows(data.w), margin=rows(data.margin))
        if state is not None:
            state = state._replace(base=rows(state.base), pending=rows(state.pending))
    fn = _sharded_boost(mesh, config._replace(axis_name=axis), data.margin is not None,
                        data.margin_valid is not None, state is not None,
                        config.early_stopping is not None and best is not None)
    args = (data, key, hyper, loss, init_raw)
    if state is not None:
        args += (state, jnp.asarray(first_round, jnp.int32))
    if config.early_stopping is not None and best is not None:
        args += (best,)
    out = fn(*args)
    if pad:
        out = out._replace(state=out.state._replace(base=out.state.base[:n],
                                                    pending=out.state.pending[:n]))
    return out


@functools.lru_cache(maxsize=64)
def _sharded_boost(mesh, config: BoostConfig, margin: bool = False, margin_valid: bool = False,
                   continued: bool = False, with_best: bool = False):
    from jax.sharding import PartitionSpec as P

    axis = config.axis_name
    rows, rep = P(axis), P()
    data_spec = Data(P(None, axis), rows, rows, rep, rep, rep, rows if margin else None,
                     rep if margin_valid else None)
    state_spec = BoostState(rows, rep, rep, rep, rows, rep)
    in_specs = (data_spec, rep, rep, rep, rep)
    if continued:
        in_specs += (state_spec, rep)
    if with_best:
        in_specs += (rep,)

    def body(data, key, hyper, loss, init_raw, *rest):
        state, first_round = (rest[0], rest[1]) if continued else (None, 0)
        best = rest[-1] if with_best else None
        return boost.__wrapped__(data, key, hyper, loss, init_raw, config=config, state=state,
                                 first_round=first_round, best=best)

    out_spec = BoostOutput(rep, rep, rep, rep, rep, rep, state_spec, rep, rep, rep)
    fn = jax.shard_map(body, mesh=mesh, in_specs=in_specs, out_specs=out_spec, check_vma=False)
    return _compile.jit(fn)


def pad_rows(data: Data, n_devices: int):
    """``(data, rows)``: ``data`` with its training rows padded with zero-weight rows to a
    multiple of ``n_devices`` (as :func:`boost_sharded` pads them), and ``rows``, which pads a
    per-row array ``(n, ...)`` likewise."""
    pad = (-data.y.shape[0]) % n_devices
    rows = lambda a: None if a is None or not pad else jnp.pad(a, ((0, pad),) + ((0, 0),) * (a.ndim - 1))
    if not pad:
        return data, lambda a: a
    return data._replace(X_binned=jnp.pad(data.X_binned, ((0, 0), (0, pad))), y=rows(data.y),
                         w=rows(data.w), margin=rows(data.margin)), rows


def boost_rounds_sharded(mesh, data: Data, key, hyper: Hyperparams, init_raw, carry: RoundsCarry,
                         first_round, end, fresh, *, config: BoostConfig) -> RoundsCarry:
    """:func:`boost_rounds` with the training rows sharded over the first axis of ``mesh``
    (``shard_map``, histograms ``psum``-ed, as :func:`boost_sharded`): ``data``'s rows and the
    carried state's per-row arrays padded to a multiple of the devices (:func:`pad_rows`)."""
    axis = mesh.axis_names[0]
    fn = _sharded_rounds(mesh, config._replace(axis_name=axis), data.margin is not None,
                         data.margin_valid is not None)
    return fn(data, key, hyper, init_raw, carry, first_round, end, fresh)


@functools.lru_cache(maxsize=64)
def _sharded_rounds(mesh, config: BoostConfig, margin: bool = False, margin_valid: bool = False):
    from jax.sharding import PartitionSpec as P

    axis = config.axis_name
    rows, rep = P(axis), P()
    data_spec = Data(P(None, axis), rows, rows, rep, rep, rep, rows if margin else None,
                     rep if margin_valid else None)
    carry_spec = RoundsCarry(BoostState(rows, rep, rep, rep, rows, rep), rep, rep, rep, rep)

    def body(data, key, hyper, init_raw, carry, first_round, end, fresh):
        return _boost_rounds(data, key, hyper, init_raw, carry, first_round, end, fresh, config=config)

    fn = jax.shard_map(body, mesh=mesh, in_specs=(data_spec, rep, rep, rep, carry_spec, rep, rep, rep),
                       out_specs=carry_spec, check_vma=False)
    return _compile.jit(fn)
