"""The compiled program of bagged boosters on binned data: each bag's bootstrap-weighted boost (categorical statistics, warm start, out-of-bag validation) and its chunk program."""

from __future__ import annotations

import functools
from typing import Any, NamedTuple, Optional, Tuple

import jax
import jax.numpy as jnp
import numpy as np

from jboost import _compile, checks
from jboost.bagging import bootstrap as bootstrap_lib
from jboost.data import categorical as data_categorical, categorical_stats
from jboost.engine import batching, boosting as boosting_lib, state as state_lib
from jboost.fitting import settings as settings_lib
from jboost.losses import baselines, checks as checks_lib, loss as loss_lib
from jboost.trees import oblivious


class BagCat(NamedTuple):
    """The categorical inputs of a fit of bags (:func:`bag_boost_binned`'s ``cat``): the ctr
    codes of the training ``(n, J)`` and shared validation rows ``(m, J)`` or ``None``, the
    targets ``(n, K)``, every bag's bootstrap weights ``(B, n)`` and prior ``(B, K)``, and the
    prior's weight."""

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

    trees: oblivious.ObliviousTrees
    baseline: jax.Array
    bag_weights: jax.Array
    loss_params: Any


@functools.partial(_compile.jit, static_argnames=("config", "n_bags", "bootstrap", "chunk_size", "verbose",
                                             "oob", "cat_spec"))
def bag_boost_binned(X_binned, y, w, key, hyper: boosting_lib.Hyperparams, loss: loss_lib.Loss, *,
                     config: boosting_lib.BoostConfig, n_bags: int, bootstrap: str, chunk_size: int,
                     verbose: bool = False, valid=None, oob: bool = False,
                     start: Optional[BagStart] = None, margins=None, cat: Optional[BagCat] = None,
                     cat_spec: Optional[data_categorical.CategoricalSpec] = None):
    """``n_bags`` runs of :func:`jboost.engine.boosting.boost`, bag ``b`` on weights ``w * c_b``.

    Bag ``b``: ``(k_boot, k_fit) = bag_keys(key, b)``, ``c_b = bootstrap_weights(k_boot)``, its
    baseline the optimal constant on its own weights (next to ``margins``), boosting with
    ``k_fit``. Validation: with ``oob`` its out-of-bag rows, else ``valid`` ``(X_valid, y_valid,
    w_valid)`` shared by the bags, else none. ``start`` (:class:`BagStart`) continues bags
    bitwise; ``cat`` (:class:`BagCat`, static ``cat_spec``) gives every bag its own categorical
    statistics. See docs/ensembles.md (bagged boosters).

    Returns:
      ``(BoostOutput with a leading bag axis, baselines (B, K), bag weights (B, n), categorical)``
      (``categorical``: each bag's statistics' borders and ``Categorical`` arrays, or ``None``).
    """
    one_bag = _bag_fn(X_binned, y, w, key, hyper, loss, config, n_bags, bootstrap, valid, oob, start,
                      margins, cat, cat_spec)
    return batching.map_in_chunks(one_bag, n_bags, chunk_size,
                                   progress="bagged boosters: bags" if verbose else None)


def bag_settings(settings):
    """``(bootstrap, n_bags, chunk_size, BoostConfig, Hyperparams)``: the checked settings of
    bagged boosters (``settings``: a mapping of the entry point's arguments), one pass of the
    same checks for one process's fit and a multi-process one."""
    bootstrap = checks.check_choice(settings["bootstrap"], "bootstrap", bootstrap_lib.BOOTSTRAPS)
    n_bags = checks.check_int(settings["n_bags"], "n_bags", 1, 10**6)
    chunk_size = min(checks.check_int(settings["chunk_size"], "chunk_size", 1, 10**6), n_bags)
    config, hyper = settings_lib.settings_of(settings, per_output_trees=settings["per_output_trees"])
    return bootstrap, n_bags, chunk_size, config, hyper


def _bag_fn(X_binned, y, w, key, hyper, loss, config, n_bags, bootstrap, valid, oob, start,
            margins=None, cat: Optional[BagCat] = None,
            cat_spec: Optional[data_categorical.CategoricalSpec] = None):
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
            init = baselines.baseline(loss, y, wb, margin)
        else:
            init = start.baseline[i]
        if oob:
            data = state_lib.Data(X_b, y, wb, X_b, y, jnp.where(counts == 0, w, 0.0),
                                 margin, margin)
        elif valid_b is not None:
            data = state_lib.Data(X_b, y, wb, *valid_b, margin, margin_valid)
        else:
            data = state_lib.Data.train_only(X_b, y, wb)._replace(margin=margin)
        if start is None:
            out = boosting_lib.boost(data, k_fit, hyper, loss, init, config=config)
        else:
            loss_b = loss.replace(params={k: v[i] for k, v in start.loss_params.items()})
            trees_b = jax.tree_util.tree_map(lambda a: a[i], start.trees)
            state = boosting_lib.resume(data, trees_b, init, loss_b, config)
            out = boosting_lib.boost(data, k_fit, hyper, loss_b, init, config=config, state=state,
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
        empty = categorical_stats.Categorical(spec, jnp.zeros((0, k), jnp.float32),
                                            jnp.zeros((0,), jnp.float32), prior, cat.prior_weight)
        return X_binned, valid, (jnp.zeros((0, n_bins - 1), jnp.float32), empty)
    perm_key = jax.random.fold_in(k_fit, categorical_stats.PERMUTATION_STREAM)
    _, borders, bins, sums, counts = categorical_stats.training_features(
        cat.codes, cat.targets, wb, perm_key, prior, cat.prior_weight, jnp.asarray(spec.offsets),
        n_table_rows=spec.n_table_rows, n_bins=n_bins)
    table = categorical_stats.Categorical(spec, sums, counts, prior, cat.prior_weight)
    X_b = jnp.concatenate([X_binned[:h], bins], axis=0)
    if valid is not None:
        values = categorical_stats.ctr_values(table, cat.valid_codes)
        valid = (jnp.concatenate([valid[0][:h], categorical_stats.bin_values(values, borders)], axis=0),
                 *valid[1:])
    return X_b, valid, (borders, table)



@functools.partial(_compile.jit, static_argnames=("config", "n_bags", "bootstrap", "oob", "cat_spec"))
def bags_chunk(X_binned, y, w, key, hyper, loss, valid, start, margins, cat, bags, *, config,
                n_bags, bootstrap, oob, cat_spec=None):
    """The bags ``bags`` of :func:`bag_boost_binned` (one ``vmap``: a chunk of its ``lax.map``),
    run from the host (checkpoints, callbacks); each bag's final state is dropped."""
    one_bag = _bag_fn(X_binned, y, w, key, hyper, loss, config, n_bags, bootstrap, valid, oob, start,
                      margins, cat, cat_spec)

    def one(b):
        out, init, counts, cat_out = one_bag(b)
        return out._replace(state=None), init, counts, cat_out

    return jax.vmap(one)(bags)


def categorical_inputs(plan, data, loss: loss_lib.Loss, key, n_bags: int, bootstrap: str, prior,
                        prior_weight):
    """``(BagCat, spec)`` of a fit of bags with categorical columns; every bag's bootstrap weights
    drawn on the host and its default prior computed as :func:`jboost.fit` computes it."""
    spec, t = categorical_stats.checked_targets(plan.spec, data.y, loss, prior, prior_weight)
    K = t.shape[1]
    h = spec.host_width
    counts = np.asarray(bootstrap_lib.all_bootstrap_weights(key, n_bags, t.shape[0], bootstrap))
    if prior is None:
        w = np.asarray(data.w, np.float32)
        priors = jnp.asarray(np.stack([categorical_stats.default_prior(t, w * counts[b])
                                       for b in range(n_bags)]).astype(np.float32))
    else:
        priors = jnp.broadcast_to(jnp.asarray(prior, jnp.float32), (n_bags, K))
    valid_codes = None if plan.X_valid is None else jnp.asarray(plan.X_valid[:, h:], jnp.int32)
    cat = BagCat(jnp.asarray(plan.X[:, h:], jnp.int32), valid_codes, jnp.asarray(t),
                 jnp.asarray(counts), priors, jnp.asarray(prior_weight, jnp.float32))
    return cat, spec


def bag_early_stopping(rounds, tolerance, metric, eval_set, loss: loss_lib.Loss,
                    bootstrap: str) -> Tuple[Optional[boosting_lib.EarlyStopping], bool]:
    """Check the validation and early-stopping arguments of
    :func:`jboost.bagging.fit_bagged_boosters`:
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
    return settings_lib.check_early_stopping(rounds, tolerance, metric, loss,
                                            has_validation=True), oob


def kept_rounds(out, loss: loss_lib.Loss, train, init, stopping, *, concrete: bool = True):
    """``(trees, train_loss, valid_loss)`` of fitted bags: with ``concrete`` settings no NaN bag
    (fit's FloatingPointError, naming the bag), and with early stopping the rounds up to the last
    bag's stop (later bags' rounds: zeros)."""
    n_fitted = None if stopping is None else out.n_fitted
    if concrete:
        checks_lib.check_finite_fits(out.train_loss, loss, train, init, n_fitted=n_fitted,
                                     names=lambda i: f"bag {i[0]}", what="bags")
    rounds = (out.trees, out.train_loss, out.valid_loss)
    if n_fitted is None or checks.is_traced(n_fitted):
        return rounds
    last = int(np.max(np.asarray(n_fitted)))
    return jax.tree_util.tree_map(lambda v: v[:, :last], rounds)


def check_out_of_bag_rows(key, n_bags: int, w, bootstrap: str, counts=None) -> None:
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
