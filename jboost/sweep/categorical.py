"""A sweep's categorical columns: the host part (spec with n_stats, codes, targets, per-fold default priors, model borders) and the in-program part (layout, shared inputs, each model's ordered statistics and bins)."""

from __future__ import annotations

from typing import Any, Dict, NamedTuple, Tuple

import jax
import jax.numpy as jnp
import numpy as np

from jboost.data import categorical, categorical_stats


class CategoricalColumns(NamedTuple):
    """A sweep's categorical columns: the static spec (with ``n_stats``), the program's layout,
    the ctr columns' codes and the statistics' targets, the fixed settings."""

    spec: categorical.CategoricalSpec
    layout: CatLayout
    codes: np.ndarray      # (n, J) int32
    targets: np.ndarray    # (n, K) float32
    fixed: Dict[str, Any]  # cat_prior (None, a number or (K,)), cat_prior_weight
    mask: Tuple[bool, ...]  # which input columns are categorical (jboost.fit's cat_features)

    @property
    def fit_kwargs(self) -> Dict[str, Any]:
        return dict(cat_features=list(self.mask), one_hot_max_size=self.spec.one_hot_max_size,
                    **self.fixed)

    def shared(self, w, fold_table, n_folds: int) -> CatShared:
        """The program's shared categorical inputs; the default prior of every (seed, fold) is
        computed as :func:`jboost.fit` computes it for ``sample_weight=`` the fold's mask (the
        weighted mean of the targets, float64 on the host, then float32)."""
        t = self.targets
        priors = np.zeros((fold_table.shape[0], n_folds, t.shape[1]), np.float32)
        for s, f in np.ndindex(priors.shape[:2]):
            priors[s, f] = categorical_stats.default_prior(t, np.where(fold_table[s] == f, 0.0, w))
        return CatShared(self.codes, self.targets, priors,
                                     np.asarray(self.spec.offsets, np.int32))

    def model_borders(self, host_borders, ctr_borders):
        """``(M, F, n_bins - 1)``: the shared host rows' borders, then each model's ctr rows'."""
        h = self.spec.host_width
        m = ctr_borders.shape[0]
        return np.concatenate([np.broadcast_to(host_borders[:h], (m,) + host_borders[:h].shape),
                               ctr_borders], axis=1).astype(np.float32)


def categorical_columns(plan, X, y, loss, prior, prior_weight) -> CategoricalColumns:
    """The checked categorical part of a sweep: the statistics' targets of the labels (as
    :func:`jboost.fit`), the spec with their count, the fixed prior and its weight."""
    spec, t = categorical_stats.checked_targets(plan.spec, y, loss, prior, prior_weight)
    h = spec.host_width
    codes = np.asarray(X[:, h:], np.int32)
    mask = [k != "numeric" for k in spec.kinds]  # the categorical columns, as a boolean mask
    fixed = dict(cat_prior=prior, cat_prior_weight=prior_weight)
    return CategoricalColumns(spec, CatLayout(h, spec.n_table_rows), codes, t, fixed,
                        tuple(mask))


class CatLayout(NamedTuple):
    """The static layout of a sweep's categorical columns (part of the program's key): the
    shared host-binned rows, then the ctr columns' ``n_table_rows`` categories."""

    host_width: int
    n_table_rows: int


class CatShared(NamedTuple):
    """The categorical inputs every model of a group shares (device arrays)."""

    codes: jax.Array    # (n, J) int32 category codes of the ctr columns (every row >= 0)
    targets: jax.Array  # (n, K) float32 the statistics' values (jboost.data.categorical_stats.targets)
    priors: jax.Array   # (S, n_folds, K) float32 the default prior of each (seed, fold): the
    #                     weighted mean of the targets over its training rows, as jboost.fit's
    offsets: jax.Array  # (J,) int32 each ctr column's first row in the tables


class CatPoint(NamedTuple):
    """Each model's categorical settings (leading model axis; traced)."""

    prior: jax.Array         # (M, K) float32; NaN: the default (its (seed, fold)'s prior)
    prior_weight: jax.Array  # (M,) float32


class CatOut(NamedTuple):
    """What a model with categorical columns keeps (leading model axis): the borders of its
    statistics ``(M, J*K, n_bins - 1)`` and its :class:`jboost.data.categorical_stats.Categorical` arrays."""

    borders: jax.Array       # (M, J*K, n_bins - 1)
    sums: jax.Array          # (M, V, K)
    counts: jax.Array        # (M, V)
    prior: jax.Array         # (M, K)
    prior_weight: jax.Array  # (M,)


def model_bins(X_binned, cat: CatShared, w_train, key, prior, prior_weight, *,
               layout: CatLayout, n_bins: int):
    """One model's bins ``(host_width + J*K, n)``, the shared host bins then its ordered target
    statistics from ``w_train`` and ``key``, and its :class:`CatOut` row: what :func:`jboost.fit`
    computes for ``sample_weight=w_train``, ``key=key``."""
    if cat.codes.shape[1] == 0:  # one-hot columns only: the host bins are every model's
        k = cat.targets.shape[1]
        return X_binned, CatOut(jnp.zeros((0, n_bins - 1), jnp.float32), jnp.zeros((0, k), jnp.float32),
                                jnp.zeros((0,), jnp.float32), prior, prior_weight)
    perm_key = jax.random.fold_in(key, categorical_stats.PERMUTATION_STREAM)
    _, borders, bins, sums, counts = categorical_stats.training_features(
        cat.codes, cat.targets, w_train, perm_key, prior, prior_weight, cat.offsets,
        n_table_rows=layout.n_table_rows, n_bins=n_bins)
    X = jnp.concatenate([X_binned[:layout.host_width], bins], axis=0)
    return X, CatOut(borders, sums, counts, prior, prior_weight)
