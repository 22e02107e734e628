"""Bagging any boosted learner (Breiman 1996 applied to jboost's boosting).

:func:`fit_bagged_boosters` vmaps :func:`jboost.boosting.boost` over bag keys with the bootstrap
counts (:mod:`jboost.bagging.bootstrap`) as sample weights: one compiled call, chunked like a
forest. The result, :class:`BaggedBoosters`, implements :class:`jboost.model.Model`.

**Early stopping per bag.** With ``early_stopping_rounds`` every bag stops on its own validation
score (:class:`jboost.boosting.EarlyStopping`, the ``while_loop`` of chunks of rounds of
:func:`jboost.boosting.boost_until_stopped`; a chunk of bags fitted together runs until its last
bag has stopped, and a stopped bag's state no longer changes). The default validation set is each
bag's own out-of-bag rows (ESL 15.3.1; Breiman 1996b, "Out-of-bag estimation"): the training rows
that bag's bootstrap sample left out, weighted ``sample_weight * [count == 0]``. They are the
training bins with per-bag weights, so every bag has the same shapes (one ``vmap``), and no row
is set aside from training. ``eval_set=(X_valid, y_valid[, w_valid])`` is one validation set shared
by all bags instead. Bag ``b`` is the separate ``jboost.fit`` on its bootstrap weights with that
validation set up to float rounding (the numerical contract; in the tests the same trees, stop
round and best round). The model records each bag's ``best_round`` (``(B,)``, as
``Booster.best_round``) and predicts with each bag's rounds ``0..best_round`` by default; the
rounds a bag fitted after its best round are kept, not zeroed, so ``n_rounds=m`` and
:func:`jboost.staged_predict` still show them (the validation curve past the best round), as
for a :class:`jboost.Booster`.

**Categorical columns** (``cat_features=``, ``one_hot_max_size=``, ``cat_prior=``,
``cat_prior_weight=``: as :func:`jboost.fit`, :mod:`jboost.categorical`). The columns' kinds and
vocabularies are read once from all of ``X``; numeric columns and one-hot indicators are binned
once and shared. Each bag computes its ordered target statistics inside the program from its own
bootstrap weights (its out-of-bag rows have weight 0: they are encoded like prediction rows, so
their labels never reach the bag's statistics, and its out-of-bag score does not leak), with the
permutation of its fitting key ``k_fit`` folded as :func:`jboost.fit` folds it: bag ``b`` is the
separate ``jboost.fit(X, y, sample_weight=model.bag_weights[b] * sample_weight, key=k_fit_b,
borders=<the bag's host borders>, cat_features=...)``. The bootstrap weights are drawn on the host
first (:func:`jboost.bagging.all_bootstrap_weights`, the same draws) so that each bag's default
prior (the weighted mean of the statistic) is computed as :func:`jboost.fit` computes it. The
model keeps every bag's statistics (``BaggedBoosters.categorical``, a leading bag axis) and
borders (``(B, F, n_bins - 1)``), and predicts from rows as users hold them.

**Lifecycle.** ``init_model=`` continues every bag (its bootstrap weights and baseline kept, its
raw scores replayed by :func:`jboost.boosting.resume`, rounds continuing its keys): bitwise the
longer fit. ``checkpoint_dir=`` and ``callbacks=`` run the chunks of bags from the host
(:func:`jboost._batching.map_checkpointed`). ``base_margin=`` offsets every bag's rows.
"""

from __future__ import annotations

import functools
from typing import Any, Callable, NamedTuple, Optional, Sequence, Tuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from jboost import _compile
from jboost import _batching
from jboost import _native
from jboost import _validation
from jboost import api
from jboost import boosting
from jboost import categorical as categorical_lib
from jboost import distributed
from jboost import losses as losses_lib
from jboost import model as model_lib
from jboost import tree as tree_lib
from jboost.bagging import bootstrap as bootstrap_lib
from jboost.bagging import oob as oob_lib
from jboost.combine import _common


class BaggedBoosters(NamedTuple):
    """``B`` boosted ensembles fitted on bootstrap samples: a pytree with a leading bag axis, a
    :class:`jboost.model.Model`.

    Attributes:
      trees: ObliviousTrees with leading axes ``(B, n_rounds, trees_per_round)``.
      borders: ``(F, n_bins - 1)`` shared borders.
      baseline: ``(B, K)`` each bag's constant raw score (fitted on its bootstrap weights).
      loss: the :class:`jboost.Loss` (params with a leading bag axis).
      bag_weights: ``(B, n_train)`` bootstrap weights.
      train_loss: ``(B, n_rounds)`` bootstrap-weighted training loss of each bag.
      valid_loss: ``(B, n_rounds)`` each bag's mean validation loss after each round (its
        out-of-bag rows, or the shared ``eval_set``); ``None`` without a validation set.
      best_round: with early stopping, ``(B,)`` int32: each bag's round of its best validation
        score; ``None`` otherwise. A bag that stopped before the last round has zero trees and
        NaN losses in its rounds after the stop.
      classes: the class labels when they were mapped to ``0..K-1`` (strings, negative or
        fractional numbers; a :class:`jboost.model.Classes`, as ``Booster.classes``):
        :func:`jboost.predict_class` returns them and the columns of the probabilities follow
        their order; ``None`` when the labels were class indices already.
      feature_names: the fit's feature names (a DataFrame's columns; a
        :class:`jboost.model.FeatureNames`, as ``Booster.feature_names``), or ``None``:
        prediction from a DataFrame then matches its columns by name.
      categorical: ``None``, or a fit with categorical columns' :class:`jboost.categorical.Categorical`
        with a leading bag axis (each bag's final statistics, from its bootstrap weights, and
        prior): prediction encodes the rows with the spec and each bag expands them with its own
        statistics. ``borders`` are then each bag's ``(B, F, n_bins - 1)``.

    As a model: its raw score (:func:`jboost.predict`) is the mean over bags of the bags' raw
    scores, its stages are the boosting rounds (``n_rounds=m``: every bag's first ``m`` rounds),
    and :func:`jboost.predict_proba` / :func:`jboost.predict_class` are the loss's link of that
    mean raw score (and its argmax). Bagging's usual combination of probability estimates, the
    mean over bags of each bag's probabilities, is :meth:`proba` (:func:`bagged_predict_proba`).
    With ``best_round`` every prediction without ``n_rounds`` (``predict``, ``predict_proba``,
    ``predict_class``, :func:`bagged_predict`, :func:`bagged_oob`) uses each bag's rounds
    ``0..best_round``; ``n_rounds=m`` and the stages of :func:`jboost.staged_predict` are every
    bag's first ``m`` rounds, as for a :class:`jboost.Booster` with ``best_round``.
    """

    trees: tree_lib.ObliviousTrees
    borders: jax.Array
    baseline: jax.Array
    loss: losses_lib.Loss
    bag_weights: jax.Array
    train_loss: jax.Array
    valid_loss: Optional[jax.Array] = None
    best_round: Optional[jax.Array] = None
    classes: Optional[model_lib.Classes] = None
    feature_names: Optional[model_lib.FeatureNames] = None
    categorical: Optional[categorical_lib.Categorical] = None

    feature_names_in_ = model_lib.FEATURE_NAMES_IN  # the protocol's NumPy views of its names
    classes_ = model_lib.CLASSES_  # and class labels (one definition for every model type)

    @property
    def n_bags(self) -> int:
        return self.baseline.shape[-2]

    @property
    def n_outputs(self) -> int:
        return self.baseline.shape[-1]

    @property
    def n_rounds(self) -> int:
        return self.trees.features.shape[-3]

    @property
    def depth(self) -> int:
        return tree_lib.depth_of(self.trees)

    # The model protocol (jboost.model.Model).

    @property
    def n_features(self) -> int:
        return self.borders.shape[-2]

    @property
    def n_inputs(self) -> int:
        """Columns of the rows to predict (:attr:`n_features` without categorical columns)."""
        return self.n_features if self.categorical is None else self.categorical.spec.n_inputs

    def bag_features(self, X) -> jax.Array:
        """The trees' features of checked rows for every bag: ``X`` itself without categorical
        columns; with them ``(B, n, n_features)``, the encoded rows expanded with each bag's own
        statistics (:func:`jboost.categorical.expand`)."""
        if self.categorical is None:
            return jnp.asarray(X, jnp.float32)
        return jax.vmap(lambda cat: categorical_lib.expand(cat, X))(self.categorical)

    @property
    def task(self) -> str:
        return self.loss.task

    @property
    def batch_shape(self) -> Tuple[int, ...]:
        return tuple(self.baseline.shape[:-2])

    @property
    def n_stages(self) -> int:
        return self.n_rounds

    def best_trees(self) -> tree_lib.ObliviousTrees:
        """The trees a prediction without ``n_rounds`` uses: with ``best_round``, bag ``b``'s
        rounds after its ``best_round[b]`` get zero leaf values (and the rounds after the last
        bag's best round are dropped when ``best_round`` is concrete); else every round."""
        trees, best = self.trees, self.best_round
        if best is None:
            return trees
        if not _validation.is_traced(best):
            last = int(np.max(np.asarray(best), initial=-1)) + 1
            trees = jax.tree_util.tree_map(lambda a: a[:, :last], trees)
        lv = trees.leaf_values
        keep = jnp.arange(lv.shape[1])[None, :] <= jnp.asarray(best)[:, None]  # (B, rounds)
        return trees._replace(leaf_values=jnp.where(
            keep.reshape(keep.shape + (1,) * (lv.ndim - 2)), lv, jnp.zeros((), lv.dtype)))

    def bag_raw_scores(self, X, n_stages: Optional[int] = None) -> jax.Array:
        """``(B, n, K)`` every bag's raw scores for checked rows: its first ``n_stages`` rounds,
        or (``None``) :meth:`best_trees`."""
        if n_stages is not None:
            n_stages = _validation.check_int(n_stages, "n_rounds", 0, self.n_rounds)
            trees = jax.tree_util.tree_map(lambda a: a[:, :n_stages], self.trees)
        else:
            trees = self.best_trees()
        if self.categorical is not None:  # each bag's own statistics
            return jax.vmap(lambda t, b0, Xb: b0 + tree_lib.predict_raw(t, Xb))(
                trees, self.baseline, self.bag_features(X))
        X = jnp.asarray(X, jnp.float32)
        return jax.vmap(lambda t, b0: b0 + tree_lib.predict_raw(t, X))(trees, self.baseline)

    def raw_scores(self, X, n_stages: Optional[int] = None) -> jax.Array:
        """``(n, K)`` mean over bags of the bags' raw scores."""
        return jnp.mean(self.bag_raw_scores(X, n_stages), axis=0)

    def proba_from_raw(self, raw) -> jax.Array:
        if self.task not in _validation.CLASSIFICATION:
            raise ValueError(f"predict_proba needs a classification model; {self.loss.name!r} is a "
                             f"{self.task!r} model (use jboost.predict for raw scores).")
        return self.loss.link(raw[..., 0] if self.n_outputs == 1 else raw)

    def classes_from_raw(self, raw) -> jax.Array:
        return jnp.argmax(self.proba_from_raw(raw), axis=-1)

    def staged(self, X, fn: Callable, *args) -> Any:
        """``fn(mean over bags of the raw scores after round m, *args)`` for every round: one
        scan over rounds carrying the ``(B, n, K)`` sums."""
        if self.categorical is not None:  # each bag's own statistics: (B, n, F) rows
            return _staged_bagged(self.trees, self.baseline, self.bag_features(X), fn, args,
                                  per_bag=True)
        return _staged_bagged(self.trees, self.baseline, X, fn, args)

    def proba(self, X, n_stages: Optional[int] = None, margin=None) -> jax.Array:
        """``(n, n_classes)`` mean over bags of each bag's class probabilities (checked rows);
        ``margin`` ``(n, K)``: the rows' raw-score offsets (``base_margin``), added to every
        bag's raw scores before its link."""
        if self.task not in _validation.CLASSIFICATION:
            self.proba_from_raw(None)  # raises the protocol's message
        raw = self.bag_raw_scores(X, n_stages)
        if margin is not None:
            raw = raw + jnp.asarray(margin, raw.dtype)[None]
        return jnp.mean(_bag_links(self.loss, raw), axis=0)


def _bag_links(loss: losses_lib.Loss, raw):
    """``(B, n, K)`` each bag's loss link (its own parameters) of its ``(B, n, K)`` raw scores."""

    def one(r, params):
        out = loss.link(r if loss.n_outputs > 1 else r[:, 0], **params)
        return out if out.ndim == 2 else out[:, None]

    return jax.vmap(one)(raw, loss.params)


@functools.partial(_compile.jit, static_argnames=("fn", "per_bag"))
def _staged_bagged(trees, baseline, X, fn, args, per_bag: bool = False):
    """The staged scan of bagged boosters; ``per_bag``: ``X`` is ``(B, n, F)``, each bag's own
    rows (categorical columns: its own statistics)."""
    X = jnp.asarray(X, jnp.float32)
    X_t = jnp.swapaxes(X, -1, -2)
    rounds = jax.tree_util.tree_map(lambda a: jnp.moveaxis(a, 1, 0), trees)  # (R, B, T, ...)

    def step(acc, trees_r):
        # Summed from 0 and the baseline added last: the order of raw_scores(n_stages=m).
        if per_bag:
            acc = jax.vmap(lambda a, t, x: model_lib.add_round(a, t, x))(acc, trees_r, X_t)
        else:
            acc = jax.vmap(lambda a, t: model_lib.add_round(a, t, X_t))(acc, trees_r)  # tree by tree
        return acc, fn(jnp.mean(baseline[:, None, :] + acc, axis=0), *args)

    acc0 = jnp.zeros((baseline.shape[0], X_t.shape[-1], baseline.shape[-1]), jnp.float32)
    _, out = lax.scan(step, acc0, rounds)
    return out


class BagCat(NamedTuple):
    """The categorical inputs of a fit of bags (:func:`bag_boost_binned`'s ``cat``; the spec
    is its static ``cat_spec``): the ctr columns' codes of the training rows ``(n, J)`` int32
    and of the shared validation rows ``(m, J)`` (``None``: none), the statistics' targets
    ``(n, K)``, the bootstrap weights of every bag ``(B, n)`` (drawn on the host), each bag's
    prior ``(B, K)`` and the prior's weight ``()``."""

    codes: jax.Array
    valid_codes: Optional[jax.Array]
    targets: jax.Array
    counts: jax.Array
    priors: jax.Array
    prior_weight: jax.Array


class BagStart(NamedTuple):
    """The bags a fit continues (``fit_bagged_boosters(init_model=)``): each bag's rounds so far
    ``(B, R, T, ...)``, baseline ``(B, K)``, bootstrap weights ``(B, n)`` and loss parameters
    ``{name: (B,)}`` after its last round."""

    trees: tree_lib.ObliviousTrees
    baseline: jax.Array
    bag_weights: jax.Array
    loss_params: Any


@functools.partial(_compile.jit, static_argnames=("config", "n_bags", "bootstrap", "chunk_size", "verbose",
                                             "oob", "cat_spec"))
def bag_boost_binned(X_binned, y, w, key, hyper: boosting.Hyperparams, loss: losses_lib.Loss, *,
                     config: boosting.BoostConfig, n_bags: int, bootstrap: str, chunk_size: int,
                     verbose: bool = False, valid=None, oob: bool = False,
                     start: Optional[BagStart] = None, margins=None, cat: Optional[BagCat] = None,
                     cat_spec: Optional[categorical_lib.CategoricalSpec] = None):
    """``n_bags`` runs of :func:`jboost.boosting.boost`, bag ``b`` on weights ``w * c_b``.

    Bag ``b``: ``(k_boot, k_fit) = bag_keys(key, b)``; ``c_b = bootstrap_weights(k_boot)``; its
    baseline is the optimal constant on its own weights; boosting uses key ``k_fit``. Its
    validation set (``BoostOutput.valid_loss``, and the score of ``config.early_stopping``):
    ``oob``: its out-of-bag rows (the training bins, weights ``w * [c_b == 0]``); else ``valid``
    ``(X_valid (F, m) bins, y_valid, w_valid)`` shared by the bags; else none.
    Returns ``(BoostOutput with a leading bag axis, baselines (B, K), bag weights (B, n))``; with
    early stopping each bag stops on its own (``best_round``, ``n_fitted`` per bag) and its
    ``state`` is dropped.

    ``start``: continue these bags (:class:`BagStart`, a warm start): bag ``b`` keeps its
    bootstrap weights and baseline, its raw scores are replayed from its trees
    (:func:`jboost.boosting.resume`) and its rounds continue from round ``R`` (keys
    ``fold_in(k_fit, m)``), so ``R`` rounds then ``n_rounds`` more equal ``R + n_rounds``
    rounds bitwise.

    ``margins``: ``(margin (n, K), margin_valid (m, K) or None)`` per-row raw-score offsets of
    the training and shared validation rows (``base_margin``; the out-of-bag rows take the
    training rows' own): each bag's rounds start from them plus its baseline, the optimal
    constant next to them.

    ``cat`` (:class:`BagCat`) with its static ``cat_spec``: categorical columns; ``X_binned``
    holds the spec's host rows (then the ctr codes' rows, unused), and every bag computes its
    ordered target statistics from its weights ``w * counts[b]`` with the permutation of
    ``fold_in(k_fit, PERMUTATION_STREAM)`` (:func:`jboost.categorical.training_features`), as
    :func:`jboost.fit` does. The output gains a fourth entry, each bag's statistics' borders and
    :class:`jboost.categorical.Categorical` arrays (``None`` without categorical columns).
    """
    one_bag = _bag_fn(X_binned, y, w, key, hyper, loss, config, n_bags, bootstrap, valid, oob, start,
                      margins, cat, cat_spec)
    return _batching.map_in_chunks(one_bag, n_bags, chunk_size,
                                   progress="bagged boosters: bags" if verbose else None)


def _bag_fn(X_binned, y, w, key, hyper, loss, config, n_bags, bootstrap, valid, oob, start,
            margins=None, cat: Optional[BagCat] = None,
            cat_spec: Optional[categorical_lib.CategoricalSpec] = None):
    """The fit of bag ``b`` of :func:`bag_boost_binned`: ``b -> (BoostOutput, baseline, counts,
    categorical)`` (``categorical``: ``(ctr borders, Categorical)`` of the bag, or ``None``)."""
    n = X_binned.shape[1]

    def one_bag(b):
        X_b, valid_b = X_binned, valid
        k_boot, k_fit = bootstrap_lib.bag_keys(key, b)
        i = jnp.minimum(b, n_bags - 1)  # the padding of the last chunk repeats the last bag
        if start is not None:
            counts = start.bag_weights[i]
        elif cat is not None:  # drawn on the host (its default prior computed there)
            counts = cat.counts[i]
        else:
            counts = bootstrap_lib.bootstrap_weights(k_boot, n, bootstrap)
        wb = w * counts
        cat_out = None
        if cat is not None:
            X_b, valid_b, cat_out = _bag_categorical(X_binned, valid, cat, cat_spec, wb, k_fit,
                                                     cat.priors[i], config.n_bins)
        margin, margin_valid = (None, None) if margins is None else margins
        if start is None:
            init = losses_lib.baseline(loss, y, wb, margin)
        else:
            init = start.baseline[i]
        if oob:
            data = boosting.Data(X_b, y, wb, X_b, y, jnp.where(counts == 0, w, 0.0),
                                 margin, margin)
        elif valid_b is not None:
            data = boosting.Data(X_b, y, wb, *valid_b, margin, margin_valid)
        else:
            data = boosting.Data.train_only(X_b, y, wb)._replace(margin=margin)
        if start is None:
            out = boosting.boost(data, k_fit, hyper, loss, init, config=config)
        else:
            loss_b = loss.replace(params={k: v[i] for k, v in start.loss_params.items()})
            trees_b = jax.tree_util.tree_map(lambda a: a[i], start.trees)
            state = boosting.resume(data, trees_b, init, loss_b, config)
            out = boosting.boost(data, k_fit, hyper, loss_b, init, config=config, state=state,
                                 first_round=start.trees.features.shape[1])
        if config.early_stopping is not None:
            out = out._replace(state=None)  # (n, K) raw scores per bag that nothing reads
        return out, init, counts, cat_out

    return one_bag


def _bag_categorical(X_binned, valid, cat: BagCat, spec, wb, k_fit, prior, n_bins: int):
    """One bag's bins with its ordered target statistics: ``(X_binned, valid, (ctr borders,
    Categorical))``, the host rows then its statistics' bins, and the shared validation rows'
    (the statistics of all the bag's training rows, as :func:`jboost.fit` encodes an eval set)."""
    h = spec.host_width
    if not spec.ctr_columns:  # one-hot columns only: the host bins are every bag's
        k = cat.targets.shape[1]
        empty = categorical_lib.Categorical(spec, jnp.zeros((0, k), jnp.float32),
                                            jnp.zeros((0,), jnp.float32), prior, cat.prior_weight)
        return X_binned, valid, (jnp.zeros((0, n_bins - 1), jnp.float32), empty)
    perm_key = jax.random.fold_in(k_fit, categorical_lib.PERMUTATION_STREAM)
    _, borders, bins, sums, counts = categorical_lib.training_features(
        cat.codes, cat.targets, wb, perm_key, prior, cat.prior_weight, jnp.asarray(spec.offsets),
        n_table_rows=spec.n_table_rows, n_bins=n_bins)
    table = categorical_lib.Categorical(spec, sums, counts, prior, cat.prior_weight)
    X_b = jnp.concatenate([X_binned[:h], bins], axis=0)
    if valid is not None:
        values = categorical_lib.ctr_values(table, cat.valid_codes)
        valid = (jnp.concatenate([valid[0][:h], categorical_lib.bin_values(values, borders)], axis=0),
                 *valid[1:])
    return X_b, valid, (borders, table)



@functools.partial(_compile.jit, static_argnames=("config", "n_bags", "bootstrap", "oob", "cat_spec"))
def _bags_chunk(X_binned, y, w, key, hyper, loss, valid, start, margins, cat, bags, *, config,
                n_bags, bootstrap, oob, cat_spec=None):
    """The bags ``bags`` of :func:`bag_boost_binned` (one ``vmap``: a chunk of its ``lax.map``),
    run from the host (checkpoints, callbacks); each bag's final state is dropped."""
    one_bag = _bag_fn(X_binned, y, w, key, hyper, loss, config, n_bags, bootstrap, valid, oob, start,
                      margins, cat, cat_spec)

    def one(b):
        out, init, counts, cat_out = one_bag(b)
        return out._replace(state=None), init, counts, cat_out

    return jax.vmap(one)(bags)


CHECKPOINT_KIND = "bags"


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
    verbose: bool = False,
    eval_set=None,
    early_stopping_rounds: Optional[int] = None,
    early_stopping_tolerance: float = 0.0,
    eval_metric=None,
    init_model: Optional[BaggedBoosters] = None,
    checkpoint_dir=None,
    callbacks: Sequence[Callable] = (),
    base_margin=None,
    eval_base_margin=None,
    cat_features=None,
    one_hot_max_size: int = categorical_lib.ONE_HOT_MAX_SIZE,
    cat_prior=None,
    cat_prior_weight=categorical_lib.PRIOR_WEIGHT,
    rows: str = "global",
    tree_family="oblivious",
    max_leaves: Optional[int] = None,
) -> BaggedBoosters:
    """Bagging of boosted ensembles (Breiman 1996 applied to any jboost learner).

    One compiled call: ``lax.map`` (chunks of ``chunk_size`` bags, each chunk a ``vmap``) of
    :func:`jboost.boosting.boost` with the bootstrap weights as sample weights. The boosting
    arguments mean what they mean in :func:`jboost.fit` (checked by :func:`jboost.api.settings`;
    the same defaults; ``tree_family`` and ``max_leaves`` pick every bag's trees). The bin borders are the unweighted quantiles of ``X``, shared by the bags.
    ``verbose``: print a line (bags done, elapsed and remaining time) as each chunk of bags is
    fitted, while the program runs (not under ``jax.vmap``).

    Validation and early stopping (the arguments of :func:`jboost.fit`, with its messages):

    * ``eval_set``: ``None`` (none; with ``early_stopping_rounds``, ``"oob"``), ``"oob"``: each
      bag's out-of-bag rows (``sample_weight`` where its bootstrap count is 0; a bootstrap that
      leaves rows out: ``"multinomial"`` or ``"poisson"``), or ``(X_valid, y_valid)`` /
      ``(X_valid, y_valid, w_valid)`` shared by every bag. Each bag's mean validation loss after
      every round is ``BaggedBoosters.valid_loss``.
    * ``early_stopping_rounds``: each bag stops when its validation score has not improved (by
      more than ``early_stopping_tolerance``) for this many rounds; ``eval_metric`` is the score
      (``None``: the loss; ``"error_rate"``, ``"mse"``, ``"mae"`` or ``metric(y, raw, w)``). The
      fit really stops: a chunk of bags runs until its last bag has stopped. Each bag's
      ``best_round`` is recorded and predictions use it; a concrete fit keeps the rounds up to
      the last bag's stop.

    Warm start: ``init_model`` (a :class:`BaggedBoosters`) is continued by ``n_rounds`` more
    rounds in every bag, on the same rows (its bootstrap weights and baselines), binned with its
    borders (the same ``n_bins``, ``depth``, loss, ``n_bags`` and trees per round). Round ``m``
    of bag ``b`` uses ``fold_in(k_fit_b, m)``, so ``r`` rounds then ``s`` more with the same key
    and settings equal ``r + s`` rounds bitwise; early stopping may stop the new rounds. A model
    fitted with early stopping is refused (its bags stopped at different rounds, so no longer
    fit continues it): fit it again with more ``n_rounds``.

    Offsets: ``base_margin`` ``(n,)`` or ``(n, K)`` (and ``eval_base_margin`` for a shared
    ``eval_set``) are per-row offsets of the raw scores, as in :func:`jboost.fit`: every bag's
    rows start from their offset plus the bag's baseline (the optimal constant next to the
    offsets on its bootstrap weights); out-of-bag validation rows keep their own offsets. The
    model does not store them: add the rows' offsets to ``jboost.predict(model, X)`` (the mean
    over bags of ``offset + bag raw score`` is ``offset + predict``), and pass them again to a
    continued fit.

    Tabular input, as in :func:`jboost.fit`: a pandas DataFrame ``X`` keeps its column names
    (``BaggedBoosters.feature_names``; prediction from a DataFrame matches columns by name, a
    continued fit orders its columns by the model's), and class labels other than ``0..K-1``
    (strings, ``{-1, 1}``, ...) for a classification loss are mapped to ``0..K-1`` in sorted
    order and kept (``BaggedBoosters.classes``, which :func:`jboost.predict_class` returns; the
    ``eval_set``'s labels are mapped with them).

    Categorical columns: ``cat_features``, ``one_hot_max_size``, ``cat_prior`` and
    ``cat_prior_weight`` as in :func:`jboost.fit` (the module's docstring): each bag computes its
    ordered target statistics from its own bootstrap weights (out-of-bag rows: weight 0, no
    leakage into its out-of-bag score) and equals the separate weighted ``jboost.fit``; the model
    predicts from rows as users hold them. ``cat_prior_weight`` may be traced (a ``jax.vmap``
    over it). A continued fit (``init_model``) of such a model is refused.

    Checkpoints, callbacks and ``Ctrl-C``: a concrete fit (not under ``jax.vmap`` / ``jax.jit``)
    runs its chunks of bags as host-side calls of one compiled chunk program
    (:func:`jboost._batching.map_checkpointed`; bitwise the bags of one program), so ``Ctrl-C``
    stops it at once and returns the bags of the chunks finished so far, with a warning (a
    ``KeyboardInterrupt`` before the first chunk has finished; the running chunk ends in the
    background).
    ``checkpoint_dir``: each chunk of bags is saved as it finishes (``bags-chunk*.npz``); a rerun
    of the same fit (data, key, settings, ``chunk_size``) fits only the chunks not saved yet and
    gives bitwise the model of an uninterrupted fit (a killed fit resumes; another fit's files
    are refused). ``callbacks``: functions called after each chunk with a dict (``bags``: the
    bags of the chunk, ``done``/``items``: bags finished / ``n_bags``, ``train_loss`` and
    ``valid_loss`` ``(bags, rounds)``, ``elapsed``, ``chunk``/``chunks``, ``from_checkpoint``);
    returning ``True`` stops: the model keeps the bags fitted so far (fewer bags).

    Raises:
      MemoryError: the ``chunk_size`` bags fitted together (and every bag's trees) would not fit
        in the device's memory (:func:`jboost._validation.check_boosting_memory`, before compiling).
      ValueError: early stopping on out-of-bag rows where a bag has none with weight (a tiny
        data set, or ``sample_weight`` zero on its out-of-bag rows), before fitting.
    """
    if _validation.check_choice(rows, "rows", distributed.ROWS) == "local":
        return _fit_local(X, y, loss, sample_weight, eval_set, dict(
            loss=loss, n_bags=n_bags, bootstrap=bootstrap, n_rounds=n_rounds, depth=depth,
            learning_rate=learning_rate, l2=l2, min_split_gain=min_split_gain,
            min_child_weight=min_child_weight, subsample=subsample, colsample=colsample,
            colsample_by=colsample_by, n_bins=n_bins, n_outputs=n_outputs,
            per_output_trees=per_output_trees, key=key, chunk_size=chunk_size, verbose=verbose,
            early_stopping_rounds=early_stopping_rounds,
            early_stopping_tolerance=early_stopping_tolerance, eval_metric=eval_metric,
            init_model=init_model is not None, checkpoint_dir=checkpoint_dir is not None,
            n_callbacks=len(callbacks or ()), base_margin=base_margin is not None,
            eval_base_margin=eval_base_margin is not None, cat_features=cat_features,
            one_hot_max_size=one_hot_max_size, cat_prior=cat_prior,
            cat_prior_weight=cat_prior_weight, tree_family=tree_family, max_leaves=max_leaves))
    bootstrap = _validation.check_choice(bootstrap, "bootstrap", bootstrap_lib.BOOTSTRAPS)
    n_bags = _validation.check_int(n_bags, "n_bags", 1, 10**6)
    chunk_size = min(_validation.check_int(chunk_size, "chunk_size", 1, 10**6), n_bags)
    config, hyper = api.settings(n_rounds=n_rounds, depth=depth, n_bins=n_bins,
                                 learning_rate=learning_rate, l2=l2, min_split_gain=min_split_gain,
                                 min_child_weight=min_child_weight, subsample=subsample,
                                 colsample=colsample, colsample_by=colsample_by,
                                 per_output_trees=per_output_trees, tree_family=tree_family,
                                 max_leaves=max_leaves)
    if getattr(init_model, "categorical", None) is not None:
        raise ValueError("init_model has categorical columns: continuing bagged boosters with "
                         "categorical columns is not supported (each bag's statistics would have "
                         "to be replayed); fit again with more n_rounds.")
    tab = _common.tabular(X, y, init_model=init_model, eval_set=eval_set, loss=loss,
                          n_outputs=n_outputs, categorical=(cat_features, one_hot_max_size))
    X, eval_set = tab.X, tab.eval_set
    y = _validation.as_labels(tab.y, X.shape[0])
    loss_obj = _validation.resolve_loss(loss, y, n_outputs)
    if tab.plan is not None and init_model is not None:
        raise ValueError("init_model was fitted without categorical features; this X has "
                         "categorical columns: continue on the model's numeric columns.")
    stopping, oob = _early_stopping(early_stopping_rounds, early_stopping_tolerance, eval_metric,
                                    eval_set, loss_obj, bootstrap)
    shared = eval_set is not None and not oob
    borders = None if init_model is None else _check_init_bags(init_model, X, loss_obj, config,
                                                               n_bags)
    data = _validation.prepare(X, y, sample_weight=sample_weight, n_bins=config.n_bins,
                               weighted_borders=False, eval_set=eval_set if shared else None,
                               borders=borders,
                               label_check=lambda v, name: losses_lib.check_labels(loss_obj, v, name))
    n_features = X.shape[1]
    if tab.plan is not None:  # the trees' features: host columns, then K statistics per ctr column
        spec = tab.plan.spec
        n_features = spec.host_width + len(spec.ctr_columns) * categorical_lib.targets(
            np.asarray(y[:1]), loss_obj).shape[1]
    _validation.check_boosting_memory(
        X.shape[0], n_features, config, loss_obj,
        k_from_labels=loss_obj.task == "multiclass" and n_outputs is None, n_models=n_bags,
        n_together=chunk_size, what="bagged boosters",
        fix="use a smaller chunk_size, depth, n_bins or n_outputs")
    key = _validation.as_key(key)
    start = None
    if init_model is not None:
        start = BagStart(init_model.trees, init_model.baseline, init_model.bag_weights,
                         dict(init_model.loss.params))
    cat, cat_spec = None, None
    if tab.plan is not None:  # every bag's statistics from its own (host-drawn) weights
        cat, cat_spec = _categorical_inputs(tab.plan, data, loss_obj, key, n_bags, bootstrap,
                                            cat_prior, cat_prior_weight)
    if oob and stopping is not None:
        _check_out_of_bag_rows(key, n_bags, data.w, bootstrap,
                               start.bag_weights if start is not None else
                               None if cat is None else cat.counts)
    train = boosting.Data.train_only(data.X_binned, data.y, data.w)
    if not losses_lib.is_built_in(loss_obj) and not _validation.is_traced(hyper.learning_rate):
        _validation.warn_if_no_gradient(loss_obj, train, losses_lib.baseline(loss_obj, data.y, data.w))
    valid = (data.X_valid, data.y_valid, data.w_valid) if shared else None
    config = config._replace(early_stopping=stopping)
    margins = None
    if base_margin is not None or eval_base_margin is not None:
        if oob and eval_base_margin is not None:
            raise ValueError("eval_base_margin is for a shared eval_set=(X_valid, y_valid); the "
                             "out-of-bag rows take base_margin's own offsets: drop eval_base_margin.")
        offsets = api._with_margins(boosting.Data(*data[:6]), base_margin, eval_base_margin,
                                    eval_set if shared else None, loss_obj.n_outputs)
        margins = (offsets.margin, offsets.margin_valid)
    if not _common.host_fit(hyper, key, loss_obj.params, cat) and checkpoint_dir is None and not callbacks:
        # Under the caller's jax.vmap / jit: one traced program (progress from inside it).
        out, init, counts, cat_out = bag_boost_binned(
            data.X_binned, data.y, data.w, key, hyper, loss_obj, config=config, n_bags=n_bags,
            bootstrap=bootstrap, chunk_size=chunk_size, verbose=bool(verbose), oob=oob, valid=valid,
            start=start, margins=margins, cat=cat, cat_spec=cat_spec)
    else:
        def info(c, chunk):
            first = c * chunk[1].shape[0]
            bags = [b for b in range(first, first + chunk[1].shape[0]) if b < n_bags]
            return {"bags": bags, "train_loss": np.asarray(chunk[0].train_loss)[:len(bags)],
                    "valid_loss": np.asarray(chunk[0].valid_loss)[:len(bags)]}

        out, init, counts, cat_out = _batching.map_checkpointed(
            functools.partial(_bags_chunk, config=config, n_bags=n_bags, bootstrap=bootstrap, oob=oob,
                              cat_spec=cat_spec),
            (data.X_binned, data.y, data.w, key, hyper, loss_obj, valid, start, margins, cat), n_bags,
            chunk_size,
            checkpoint_dir=checkpoint_dir, kind=CHECKPOINT_KIND,
            settings=(config, n_bags, bootstrap, oob, loss_obj.name, loss_obj.fn, loss_obj.n_outputs,
                      _native.available(), jax.devices()[0].platform)
            + (() if cat_spec is None else (cat_spec.to_json(),)),
            differs="data, key, settings or init_model", what="chunks of bags",
            progress="bagged boosters: bags" if verbose else None, callbacks=callbacks, info=info,
            at_once=True, keep_on_interrupt=True, unit="bags")
        if init.shape[0] < n_bags:  # a callback or Ctrl-C stopped: the bags fitted so far
            n_bags = init.shape[0]
            if init_model is not None:
                init_model = init_model._replace(**{
                    f: jax.tree_util.tree_map(lambda a: a[:n_bags], getattr(init_model, f))
                    for f in ("trees", "train_loss", "valid_loss")})
            cat_out = jax.tree_util.tree_map(lambda a: a[:n_bags], cat_out)
    trees, train_loss, valid_loss = out.trees, out.train_loss, out.valid_loss
    # A concrete fit: no silent NaN bag (fit's FloatingPointError, naming the bag).
    if not any(_validation.is_traced(v) for v in jax.tree_util.tree_leaves(hyper)):
        _validation.check_finite_fits(train_loss, loss_obj, train, init,
                                      n_fitted=None if stopping is None else out.n_fitted,
                                      names=lambda i: f"bag {i[0]}", what="bags")
    if stopping is not None and not _validation.is_traced(out.n_fitted):
        # A concrete fit keeps the rounds up to the last bag's stop (later bags' rounds: zeros).
        last = int(np.max(np.asarray(out.n_fitted)))
        trees, train_loss, valid_loss = jax.tree_util.tree_map(
            lambda a: a[:, :last], (trees, train_loss, valid_loss))
    valid_loss = valid_loss if oob or shared else None
    borders, categorical = data.borders, None
    if cat_out is not None:  # each bag's borders: the shared host rows, then its statistics'
        ctr_borders, categorical = cat_out
        h = cat_spec.host_width
        borders = jnp.concatenate([jnp.broadcast_to(jnp.asarray(data.borders)[:h],
                                                    (ctr_borders.shape[0], h) + data.borders.shape[1:]),
                                   ctr_borders], axis=1)
        trees = jax.vmap(tree_lib.with_borders)(trees, borders)
    else:
        trees = tree_lib.with_borders(trees, data.borders)
    if init_model is not None:  # its rounds first, then the new ones (per bag)
        trees, train_loss, valid_loss = _joined_rounds(init_model, trees, train_loss, valid_loss)
    model = BaggedBoosters(trees=trees, borders=borders,
                           baseline=init, loss=out.final_loss, bag_weights=counts,
                           train_loss=train_loss, valid_loss=valid_loss,
                           best_round=out.best_round, classes=tab.classes,
                           feature_names=tab.feature_names, categorical=categorical)
    # Traced settings (the caller's vmap) outside their domains: NaN bags, and a warning.
    return _validation.nan_outside_domains(model, loss_obj, hyper)


def _fit_local(X, y, loss, sample_weight, eval_set, settings: dict) -> BaggedBoosters:
    """:func:`fit_bagged_boosters` of rows spread over processes (``rows="local"``,
    :mod:`jboost.distributed`): every process passes its own rows (and validation rows) and gets
    the bags of the processes' rows concatenated in process order. The borders (unweighted, as a
    single-process fit's), labels, classes and every bag's bootstrap weights and baseline are the
    whole table's (the weights drawn on the host for all rows, :func:`all_bootstrap_weights`: the
    draws of a single-process fit; each process keeps its rows' part for training); the bags
    are fitted chunk by chunk, every device fitting every bag of a chunk on its rows
    (:func:`_local_bags_program`). Bag ``b`` equals the single-process fit's bag ``b``: weights,
    baseline, splits and stopping round bitwise, leaf values and losses up to float rounding
    (histograms summed over the devices)."""
    s = settings
    oob_asked = isinstance(eval_set, str)
    names = _validation.feature_names_of(X)
    local = distributed.gather(X, y, sample_weight, None if oob_asked else eval_set, None,
                               dict(s, eval_set="oob" if oob_asked else eval_set is None, names=names))
    refused = [k for k in ("init_model", "checkpoint_dir", "base_margin", "eval_base_margin") if s[k]]
    if s["n_callbacks"]:
        refused.append("callbacks")
    if refused:
        raise ValueError(f"bagged boosters with rows='local' do not support "
                         f"{', '.join(k + '=' for k in refused)} yet: fit with rows='global' (every "
                         "process passing the whole table) for them.")
    cat = s["cat_features"]
    if cat is not None and not (np.ndim(cat) == 1 and len(cat) == 0):
        raise ValueError("cat_features: bagged boosters with rows='local' do not support categorical "
                         "columns yet: encode them as numbers (the same encoding on every process).")
    if oob_asked or (eval_set is None and s["early_stopping_rounds"] is not None):
        raise ValueError("eval_set: bagged boosters with rows='local' score no out-of-bag rows yet "
                         "(eval_set='oob', or early stopping without an eval_set): pass "
                         "eval_set=(X_valid, y_valid[, w_valid]) with each process's validation rows.")
    if isinstance(loss, losses_lib.Loss) and loss.batch:
        raise ValueError(f"loss: rows='local' does not support batch objectives ({loss.name!r}).")
    bootstrap = _validation.check_choice(s["bootstrap"], "bootstrap", bootstrap_lib.BOOTSTRAPS)
    n_bags = _validation.check_int(s["n_bags"], "n_bags", 1, 10**6)
    chunk_size = min(_validation.check_int(s["chunk_size"], "chunk_size", 1, 10**6), n_bags)
    config, hyper = api.settings(**{k: s[k] for k in (
        "n_rounds", "depth", "n_bins", "learning_rate", "l2", "min_split_gain", "min_child_weight",
        "subsample", "colsample", "colsample_by", "per_output_trees", "tree_family", "max_leaves")})
    if not _common.host_fit(hyper, s["key"]):
        raise ValueError("rows='local' needs a concrete fit (not under jax.vmap or jax.jit).")
    n = local.n_total
    y_all, classes, eval_set = _validation.mapped_labels(local.y, local.eval_set, loss,
                                                         s["n_outputs"], None, None, n_rows=n)
    y_all = _validation.as_labels(y_all, n)
    loss_obj = _validation.resolve_loss(loss, y_all, s["n_outputs"])
    stopping, _ = _early_stopping(s["early_stopping_rounds"], s["early_stopping_tolerance"],
                                  s["eval_metric"], eval_set, loss_obj, bootstrap)
    losses_lib.check_labels(loss_obj, y_all, "y")  # every process raises alike
    w_all = _validation.as_weights(local.sample_weight, n)
    X = _validation.as_matrix(X, "X")
    borders = local.borders(X, None, config.n_bins)  # unweighted, as the single-process fit's
    data = _validation.prepare(X, local.mine(y_all), sample_weight=local.mine(w_all),
                               n_bins=config.n_bins, weighted_borders=False, eval_set=eval_set,
                               borders=borders,
                               label_check=lambda v, name: losses_lib.check_labels(loss_obj, v, name))
    local.everywhere(_validation.check_boosting_memory, MemoryError)(
        local.n_local // (len(local.mesh.devices.flat) // jax.process_count()), X.shape[1], config,
        loss_obj, k_from_labels=loss_obj.task == "multiclass" and s["n_outputs"] is None,
        n_models=n_bags, n_together=chunk_size, what="bagged boosters",
        fix="use a smaller chunk_size, depth, n_bins or n_outputs")
    key = _validation.as_key(s["key"])
    counts = np.asarray(bootstrap_lib.all_bootstrap_weights(key, n_bags, n, bootstrap))
    config = config._replace(early_stopping=stopping, row_starts=local.row_starts)
    valid = None if eval_set is None else tuple(
        local.replicate(a) for a in (data.X_valid, data.y_valid, data.w_valid))
    mine = slice(local.start, local.start + local.n_rows)
    args = (local.shard(data.X_binned, 1), local.shard(data.y, edge=True), local.shard(data.w),
            local.shard(counts[:, mine], 1), key, hyper, loss_obj, valid,
            local.replicate(y_all), local.replicate(w_all), local.replicate(counts))
    program = _local_bags_program(local.mesh, config, n_bags)
    outs = []
    for c in range(-(-n_bags // chunk_size)):
        bags = np.arange(c * chunk_size, (c + 1) * chunk_size, dtype=np.int32)
        outs.append(local.localize(program(*args, bags)))
        if s["verbose"] and local.is_first:
            print(f"bagged boosters: bags {min((c + 1) * chunk_size, n_bags)}/{n_bags}", flush=True)
    out, init = jax.tree_util.tree_map(lambda *a: np.concatenate(a)[:n_bags], *outs)
    train_loss, valid_loss, trees = out.train_loss, out.valid_loss, out.trees
    _validation.check_finite_fits(train_loss, loss_obj, boosting.Data.train_only(
        data.X_binned, data.y, data.w), init, n_fitted=None if stopping is None else out.n_fitted,
        names=lambda i: f"bag {i[0]}", what="bags")
    if stopping is not None:  # the rounds up to the last bag's stop, as a single-process fit
        last = int(np.max(out.n_fitted))
        trees, train_loss, valid_loss = jax.tree_util.tree_map(
            lambda a: a[:, :last], (trees, train_loss, valid_loss))
    trees = tree_lib.with_borders(jax.tree_util.tree_map(jnp.asarray, trees), data.borders)
    return BaggedBoosters(
        trees=trees, borders=data.borders, baseline=jnp.asarray(init),
        loss=jax.tree_util.tree_map(jnp.asarray, out.final_loss), bag_weights=jnp.asarray(counts),
        train_loss=jnp.asarray(train_loss),
        valid_loss=None if eval_set is None else jnp.asarray(valid_loss),
        best_round=None if out.best_round is None else jnp.asarray(out.best_round),
        classes=None if classes is None else model_lib.Classes(classes),
        feature_names=model_lib.named(names), categorical=None)


@functools.lru_cache(maxsize=16)
def _local_bags_program(mesh, config: boosting.BoostConfig, n_bags: int):
    """The compiled chunk of bags of :func:`_fit_local`: ``program(X_binned, y, w, counts, key,
    hyper, loss, valid, y_all, w_all, counts_all, bags)`` with this process's training arrays and
    bootstrap weights ``(B, n)`` sharded over the rows of the one-axis ``mesh``, the shared
    validation rows and the whole table's labels, weights and bootstrap weights replicated.
    Bag ``b``: ``k_fit = bag_keys(key, b)[1]``, baseline on the whole table's weights
    ``w_all * counts_all[b]``, :func:`jboost.boosting.boost` on its rows (histograms ``psum``-ed;
    ``config.row_starts`` gives every row its draw in the whole table). Outputs replicated."""
    from jax.sharding import PartitionSpec as P

    axis = mesh.axis_names[0]
    config = config._replace(axis_name=axis)

    def body(X_binned, y, w, counts, key, hyper, loss, valid, y_all, w_all, counts_all, bags):
        def one(b):
            i = jnp.minimum(b, n_bags - 1)  # the padding of the last chunk repeats the last bag
            _, k_fit = bootstrap_lib.bag_keys(key, b)
            init = losses_lib.baseline(loss, y_all, w_all * counts_all[i])
            if valid is None:
                data = boosting.Data.train_only(X_binned, y, w * counts[i])
            else:
                data = boosting.Data(X_binned, y, w * counts[i], *valid)
            out = boosting.boost.__wrapped__(data, k_fit, hyper, loss, init, config=config)
            return out._replace(state=None), init
        return jax.vmap(one)(bags)

    row, rep = P(axis), P()
    fn = jax.shard_map(body, mesh=mesh, in_specs=(P(None, axis), row, row, P(None, axis))
                       + (rep,) * 8, out_specs=rep, check_vma=False)
    return _compile.jit(fn)


def _categorical_inputs(plan, data, loss: losses_lib.Loss, key, n_bags: int, bootstrap: str, prior,
                        prior_weight):
    """``(BagCat, spec)`` of a fit of bags with categorical columns: the ctr columns' codes, the
    statistics' targets (:func:`jboost.categorical.targets`), every bag's bootstrap weights drawn
    on the host (:func:`jboost.bagging.all_bootstrap_weights`: the draws of the program) and its
    prior: ``prior``, or (``None``) the weighted mean of the targets over the bag's weights
    ``sample_weight * counts``, computed as :func:`jboost.fit` computes it (float64 on the host,
    then float32)."""
    if loss.batch:
        raise ValueError(f"categorical features need a loss of one label per row; {loss.name!r} is "
                         "an objective of the whole batch (Cox, ranking): encode the categorical "
                         "columns as numbers first.")
    spec = plan.spec
    t = categorical_lib.targets(np.asarray(data.y), loss)
    K = t.shape[1]
    spec = categorical_lib.CategoricalSpec(spec.names, spec.kinds, spec.vocab, spec.vocab_type,
                                           spec.missing, K, spec.one_hot_max_size)
    categorical_lib.check_settings(spec.one_hot_max_size, prior, prior_weight)
    h = spec.host_width
    n = t.shape[0]
    counts = np.asarray(bootstrap_lib.all_bootstrap_weights(key, n_bags, n, bootstrap))
    w = np.asarray(data.w, np.float32)
    if prior is None:
        priors = np.zeros((n_bags, K), np.float32)
        for b in range(n_bags):
            wb = (w * counts[b]).astype(np.float32)
            priors[b] = (t * wb[:, None]).sum(0, dtype=np.float64) / max(float(wb.sum(dtype=np.float64)), 1e-30)
        priors = jnp.asarray(priors)
    else:
        if not _validation.is_traced(prior) and np.asarray(prior).size not in (1, K):
            raise ValueError(f"cat_prior has {np.asarray(prior).size} values; the statistics have {K} "
                             f"(one per class or label column): give one number or {K}.")
        priors = jnp.broadcast_to(jnp.asarray(prior, jnp.float32), (n_bags, K))
    valid_codes = None if plan.X_valid is None else jnp.asarray(plan.X_valid[:, h:], jnp.int32)
    cat = BagCat(jnp.asarray(plan.X[:, h:], jnp.int32), valid_codes, jnp.asarray(t),
                 jnp.asarray(counts), priors, jnp.asarray(prior_weight, jnp.float32))
    return cat, spec


def _early_stopping(rounds, tolerance, metric, eval_set, loss: losses_lib.Loss,
                    bootstrap: str) -> Tuple[Optional[boosting.EarlyStopping], bool]:
    """Check the validation and early-stopping arguments of :func:`fit_bagged_boosters`:
    ``(the static EarlyStopping or None, whether the validation rows are the out-of-bag rows)``.
    The arguments shared with :func:`jboost.fit` get its messages."""
    if isinstance(eval_set, str) and eval_set != "oob":
        raise ValueError(f"eval_set={eval_set!r} must be 'oob' (each bag's out-of-bag rows), a tuple "
                         "(X_valid, y_valid) or (X_valid, y_valid, w_valid), or None.")
    oob = eval_set == "oob" if isinstance(eval_set, str) else (eval_set is None and rounds is not None)
    if oob and bootstrap == "bayesian":
        raise ValueError("early stopping and eval_set='oob' score each bag on its out-of-bag rows, "
                         "but bootstrap='bayesian' weights every row (none is out of bag): use "
                         "bootstrap='multinomial' or 'poisson', or pass eval_set=(X_valid, y_valid).")
    return _validation.check_early_stopping(rounds, tolerance, metric, loss,
                                            has_validation=True), oob


def _check_init_bags(model, X, loss: losses_lib.Loss, config: boosting.BoostConfig, n_bags: int):
    """Check bagged boosters to continue (``init_model=``) against the new fit; returns the
    borders to bin with (the model's)."""
    if not isinstance(model, BaggedBoosters):
        raise TypeError(f"init_model must be BaggedBoosters fitted by bagging.fit_bagged_boosters; "
                        f"got {type(model).__name__}.")
    borders = _validation.check_init_model(model, BaggedBoosters, X.shape[1], None,
                                           n_bins=config.n_bins, depth=config.depth,
                                           who="bagging.fit_bagged_boosters", config=config)
    _validation.check_init_loss(model, loss)
    if model.n_bags != n_bags:
        raise ValueError(f"n_bags={n_bags} differs from init_model's {model.n_bags} bags: a continued "
                         f"fit continues every bag; pass n_bags={model.n_bags}.")
    if model.bag_weights.shape[-1] != X.shape[0]:
        raise ValueError(f"init_model was fitted on {model.bag_weights.shape[-1]} rows (its bootstrap "
                         f"weights); X has {X.shape[0]}: continue it on the rows it was fitted on.")
    per_round = model.trees.features.shape[-2]
    want = loss.n_outputs if config.per_output_trees else 1
    if per_round != want:
        raise ValueError(f"init_model has {per_round} trees per round; this fit grows {want} "
                         f"(per_output_trees={config.per_output_trees}): pass "
                         f"per_output_trees={not config.per_output_trees}.")
    if model.best_round is not None:
        raise ValueError("init_model was fitted with early stopping: its bags stopped at different "
                         "rounds (each keeps zero trees after its stop), so no longer fit continues "
                         "it. Fit it again with more n_rounds (and early_stopping_rounds), or "
                         "continue a model fitted without early stopping.")
    return borders


def _joined_rounds(model: BaggedBoosters, trees, train_loss, valid_loss):
    """``model``'s rounds followed by a continued fit's, per bag (round axis 1); a validation
    curve missing on one side is NaN there."""
    def curve(c, like):
        return jnp.full(like.shape, jnp.nan, jnp.float32) if c is None else c

    join = lambda a, b: jnp.concatenate([a, b], axis=1)  # noqa: E731
    trees = jax.tree_util.tree_map(join, model.trees, trees)
    valid = None
    if model.valid_loss is not None or valid_loss is not None:
        valid = join(curve(model.valid_loss, model.train_loss), curve(valid_loss, train_loss))
    return trees, join(model.train_loss, train_loss), valid


def _check_out_of_bag_rows(key, n_bags: int, w, bootstrap: str, counts=None) -> None:
    """Every bag has out-of-bag rows with weight (its early-stopping score), else a ValueError
    before fitting (the bags' bootstrap weights drawn as the fit draws them, or ``counts``)."""
    if counts is None:
        counts = bootstrap_lib.all_bootstrap_weights(key, n_bags, int(w.shape[0]), bootstrap)
    counts = np.asarray(counts)
    oob_weight = np.where(counts == 0, np.asarray(w)[None, :], 0.0).sum(axis=1)
    empty = np.flatnonzero(~(oob_weight > 0))
    if empty.size:
        raise ValueError(f"early stopping scores each bag on its out-of-bag rows, but bag {int(empty[0])} "
                         f"({empty.size} of {n_bags} bags) has no out-of-bag row with a positive "
                         f"sample_weight among the {w.shape[0]} rows: pass eval_set=(X_valid, y_valid), "
                         "or fit on more rows.")


# --------------------------------------------------------------------------------------------
# Prediction and OOB: the module's own names.
# --------------------------------------------------------------------------------------------


def bagged_outputs(model: BaggedBoosters, X) -> jax.Array:
    """Per-bag outputs ``(B, n, K)``: each bag's loss link of its raw scores (class
    probabilities, or predictions through the link)."""
    return _bag_links(model.loss, model.bag_raw_scores(model_lib._rows(model, X)))


def bagged_predict(model: BaggedBoosters, X) -> jax.Array:
    """Bagged prediction: mean over bags of :func:`bagged_outputs` (``(n,)`` for one output).

    For classification it is :func:`bagged_predict_proba`; for regression the mean over bags of
    each bag's ``jboost.predict_mean`` (for an identity link, ``jboost.predict(model, X)``).
    """
    avg = jnp.mean(bagged_outputs(model, X), axis=0)
    return avg[:, 0] if avg.shape[-1] == 1 else avg


def bagged_predict_proba(model: BaggedBoosters, X, n_rounds: Optional[int] = None) -> jax.Array:
    """:meth:`BaggedBoosters.proba`: the mean over bags of each bag's probabilities ``(n, n_classes)``."""
    return model.proba(model_lib._rows(model, X), n_rounds)


def bagged_oob(model: BaggedBoosters, X_train, y_train) -> oob_lib.OOBResult:
    """OOB estimates of bagged boosters (same machinery as :func:`jboost.bagging.forest_oob`), each
    bag with its rounds ``0..best_round`` (:meth:`BaggedBoosters.best_trees`).

    With early stopping on the out-of-bag rows (the default), each bag's best round was chosen on
    the very rows it is scored on here, so this estimate is optimistic (a selection bias, small
    for one integer per bag): use a held-out set for an honest error."""
    if model.categorical is None:
        X_train, y_train = oob_lib.rows_and_labels(model, X_train, y_train, "X_train", "y_train")
    else:  # rows as users hold them, encoded by the model's vocabularies; labels mapped likewise
        X_train = jnp.asarray(model_lib._rows(model, X_train, "X_train"), jnp.float32)
        if model.classes is not None:
            y_train = _validation.class_codes(_validation.series_values(y_train),
                                              model.classes.array, "y_train")
        y_train = jnp.asarray(_validation.as_labels(y_train, X_train.shape[0], "y_train", "X_train"),
                              jnp.float32)
    classification = model.task in _validation.CLASSIFICATION

    def outputs(x):
        trees, baseline, params, cat = x
        rows = X_train if cat is None else categorical_lib.expand(cat, X_train)  # its statistics
        raw = baseline + tree_lib.predict_raw(trees, rows)
        out = model.loss.link(raw if model.n_outputs > 1 else raw[:, 0], **params)
        return out if out.ndim == 2 else out[:, None]

    return oob_lib.oob_scan(outputs, (model.best_trees(), model.baseline, model.loss.params,
                                      model.categorical), model.bag_weights,
                            jnp.asarray(y_train), classification)
