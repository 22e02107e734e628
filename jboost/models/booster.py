"""Booster: the fitted boosted ensemble (a pytree of arrays) and the joining of a continued fit."""

from __future__ import annotations

from typing import Any, Callable, Mapping, NamedTuple, Optional, Tuple

import jax
import jax.numpy as jnp
import numpy as np

from jboost.data import categorical_stats
from jboost.losses import loss as loss_lib
from jboost.models import base, metadata, structure
from jboost.trees import family, oblivious


def _boosted_raw(acc, stage, consts):
    """A staged sum's raw scores: the baseline added last, then the label offset."""
    baseline, offset = consts
    return base.add_offset(baseline + acc, offset)


@base.model_type("n_features", "n_inputs", "n_outputs", "n_rounds", "n_stages", "depth", "task",
                 "class_axis", "feature_names_in_", "classes_")
class Booster(NamedTuple):
    """A fitted boosted ensemble: a pytree of arrays (the :class:`jboost.models.base.Model` of
    ``fit`` and of every algorithm of :mod:`jboost.algorithms`).

    Attributes:
      trees: :class:`jboost.ObliviousTrees` with leading axes ``(n_rounds, trees_per_round)``;
        leaf values already include the learning rate (and each round's coefficient).
      borders: ``(n_features, n_bins - 1)`` float32 bin borders (``+inf`` padded).
      baseline: ``(K,)`` the constant raw score the rounds start from.
      loss: the :class:`jboost.Loss` (with its final parameters); ``predict_proba`` is its link.
      train_loss: ``(n_rounds,)`` weighted mean training loss after each round.
      valid_loss: ``(n_rounds,)`` mean loss on ``eval_set`` after each round (NaN without one).
      info: the algorithm's per-round diagnostics (each ``(n_rounds,)``), final observation
        ``weights`` and state (what ``init_model=`` continues from); empty for :func:`jboost.fit`.
      best_round: with early stopping, ``()`` int32: the round of the best validation score,
        the last one predictions use unless ``n_rounds`` says otherwise; else ``None``.
      offset: ``None``, or ``()`` (``(C,)`` for vector labels) the label offset ``c`` that
        :func:`jboost.fit` subtracted from labels whose offset float32 could not hold: the raw
        scores are ``c + (baseline + trees)``.
      settings: the :class:`jboost.models.metadata.Settings` :func:`jboost.fit` was called with
        (docs/models.md); ``{}`` for the classical algorithms and for models built from parts.
      feature_names: the fit's feature names (a DataFrame's columns; a
        :class:`jboost.models.metadata.FeatureNames`), or ``None``: prediction from a DataFrame
        then matches its columns by name.
      classes: the fit's class labels when they were mapped to ``0..K-1`` (a
        :class:`jboost.models.metadata.Classes`): :func:`predict_class` returns them,
        ``predict_proba``'s columns follow their order; else ``None``.
      categorical: ``None``, or the :class:`jboost.data.categorical_stats.Categorical` of a fit
        with categorical columns, which prediction encodes the rows with.

    ``jax.vmap(jboost.fit)`` gives a Booster with a leading model axis (``batch_shape == (M,)``).
    """

    #: Per-row offsets of the raw scores (``base_margin=``) are part of its predictions.
    takes_base_margin = True
    #: Its raw score is the baseline plus the sum of its trees: ``jboost.finetune`` tunes them.
    fine_tunable = True

    trees: oblivious.ObliviousTrees
    borders: jax.Array
    baseline: jax.Array
    loss: loss_lib.Loss
    train_loss: jax.Array
    valid_loss: jax.Array
    info: Mapping[str, jax.Array] = {}
    best_round: Optional[jax.Array] = None
    offset: Optional[jax.Array] = None
    settings: Mapping[str, Any] = {}
    classes: Optional[metadata.Classes] = None
    feature_names: Optional[metadata.FeatureNames] = None
    categorical: Optional[categorical_stats.Categorical] = None

    def features(self, X):
        """The trees' features of checked rows: with categorical columns, the encoded rows
        expanded with their statistics (:func:`jboost.data.categorical_stats.expand`)."""
        return X if self.categorical is None else categorical_stats.expand(self.categorical, X)

    @property
    def batch_shape(self) -> Tuple[int, ...]:
        return tuple(self.baseline.shape[:-1])

    def raw_scores(self, X, n_stages: Optional[int] = None) -> jax.Array:
        trees = base.used_rounds(self.trees, n_stages, self.best_round)
        return base.add_offset(self.baseline + base.sum_of_trees(trees, self.features(X)),
                               self.offset)

    def tree_sum(self, n_stages: Optional[int] = None):
        """``(trees, baseline, offset)``: the trees of the rounds
        :meth:`jboost.models.base.Model.raw_scores` uses."""
        trees = base.used_rounds(self.trees, n_stages, self.best_round)
        return family.flatten_trees(trees), self.baseline, self.offset

    def proba_from_raw(self, raw) -> jax.Array:
        base.require_classification(self, "predict_proba")
        if loss_lib.keeps_columns(self.loss):  # multi-label: P(label k = 1), (n, C)
            return self.loss.link(raw, **self.loss.params)[..., 1]
        return self.loss.link(raw[..., 0] if self.n_outputs == 1 else raw, **self.loss.params)

    def classes_from_raw(self, raw) -> jax.Array:
        if loss_lib.keeps_columns(self.loss):  # multi-label: each label's argmax, (n, C)
            base.require_classification(self, "predict_class")
            return jnp.argmax(self.loss.link(raw, **self.loss.params), axis=-1)
        return jnp.argmax(self.proba_from_raw(raw), axis=-1)

    def staged(self, X, fn: Callable, *args) -> Any:
        return base.staged_scan(self.trees, self.features(X), fn, args, _boosted_raw,
                                (self.baseline, self.offset))

    def check_structure(self, exact_borders: bool = True) -> None:
        """Raise ``ValueError`` naming the field unless the arrays fit each other: the trees'
        axes ``(*batch, n_rounds, trees_per_round)`` and outputs ``K`` (the baseline's), splits
        on the borders' features and bins (:func:`jboost.models.structure.check_splits`), the
        curves, ``best_round``, ``offset``, the loss's outputs, the classes and feature names."""
        batch, k = self.batch_shape, self.n_outputs
        structure.expect("baseline", self.baseline, batch + (k,))
        lead = structure.tree_lead(self.trees, batch, ("n_rounds", "trees_per_round"))
        structure.check_outputs(self.trees, k, "baseline")
        structure.check_borders(self.borders, [batch])
        structure.check_splits(self.trees, self.borders, exact_borders)
        curve = batch + (lead[-2],)
        structure.expect("train_loss", self.train_loss, curve, why=" (one per round)")
        structure.expect("valid_loss", self.valid_loss, curve, why=" (one per round)")
        structure.check_best_round(self.best_round, batch, lead[-2])
        if self.offset is not None and np.shape(self.offset) not in (batch, batch + (k,)):
            raise structure.fail("offset", f"has shape {np.shape(self.offset)}; it should be "
                                           f"{batch} or {batch + (k,)} (one per output).")
        structure.expect_optional("offset", self.offset, np.shape(self.offset),
                                  ("float32", "float64"))
        structure.check_loss("loss", self.loss, k, batch)
        structure.check_classes(self.classes, structure.n_classes_of(self.loss, k))
        structure.check_feature_names(self.feature_names, self.n_inputs)


base.register_nested_type(categorical_stats.Categorical)


def joined(first: Booster, then: Booster, per_round_info=()) -> Booster:
    """``first``'s rounds followed by ``then``'s (a continued fit, ``init_model=``; the per-round
    ``info`` entries ``per_round_info`` concatenated, the rest ``then``'s: docs/models.md)."""
    def rounds(m):
        return m.trees, m.train_loss, m.valid_loss, {k: m.info[k] for k in per_round_info}

    trees, train_loss, valid_loss, info = jax.tree_util.tree_map(
        lambda a, b: jnp.concatenate([a, b], axis=0), rounds(first), rounds(then))
    return then._replace(trees=trees, train_loss=train_loss, valid_loss=valid_loss,
                         info={**then.info, **info})
