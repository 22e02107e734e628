"""BaggedBoosters, the bagged-boosters model type, and its predict functions (bagged outputs, mean, probabilities)."""

from __future__ import annotations

from typing import Any, Callable, NamedTuple, Optional, Tuple

import jax
import jax.numpy as jnp
import numpy as np

from jboost.data import categorical_stats
from jboost.losses import loss as loss_lib
from jboost.models import base, metadata, structure
from jboost.trees import family, oblivious


@base.model_type("n_features", "n_inputs", "n_outputs", "n_rounds", "n_stages", "depth", "task",
                 "class_axis", "feature_names_in_", "classes_")
class BaggedBoosters(NamedTuple):
    """``B`` boosted ensembles fitted on bootstrap samples: a pytree with a leading bag axis, a
    :class:`jboost.models.base.Model`.

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
        score; ``None`` otherwise.
      classes: the mapped class labels, as ``Booster.classes``, or ``None``.
      feature_names: the fit's feature names, as ``Booster.feature_names``, or ``None``.
      categorical: ``None``, or the :class:`jboost.data.categorical_stats.Categorical` of a fit
        with categorical columns, with a leading bag axis (each bag's own statistics);
        ``borders`` are then each bag's ``(B, F, n_bins - 1)``.

    Its raw score is the mean over bags of the bags' raw scores; its stages are boosting rounds
    (docs/models.md, "Model types").
    """

    #: Per-row offsets of the raw scores (``base_margin=``) are part of its predictions.
    takes_base_margin = True

    trees: oblivious.ObliviousTrees
    borders: jax.Array
    baseline: jax.Array
    loss: loss_lib.Loss
    bag_weights: jax.Array
    train_loss: jax.Array
    valid_loss: Optional[jax.Array] = None
    best_round: Optional[jax.Array] = None
    classes: Optional[metadata.Classes] = None
    feature_names: Optional[metadata.FeatureNames] = None
    categorical: Optional[categorical_stats.Categorical] = None

    @property
    def n_bags(self) -> int:
        return self.baseline.shape[-2]

    def bag_features(self, X) -> jax.Array:
        """The trees' features of checked rows: ``X``, or with categorical columns ``(B, n, F)``,
        the rows expanded with each bag's own statistics."""
        if self.categorical is None:
            return jnp.asarray(X, jnp.float32)
        return jax.vmap(lambda cat: categorical_stats.expand(cat, X))(self.categorical)

    @property
    def batch_shape(self) -> Tuple[int, ...]:
        return tuple(self.baseline.shape[:-2])

    def best_trees(self) -> oblivious.ObliviousTrees:
        """The trees a prediction without ``n_rounds`` uses (:func:`jboost.models.base.used_rounds`)."""
        return base.used_rounds(self.trees, None, self.best_round, lead=1)

    @property
    def no_tree_sum(self) -> Optional[str]:
        """With categorical columns, why the model is not one sum of trees (each bag encodes the
        rows with its own target statistics); else ``None``."""
        if self.categorical is None:
            return None
        return ("SHAP values and partial dependence of bagged boosters with categorical "
                "columns are not defined by one sum of trees (each bag encodes the rows "
                "with its own ordered target statistics): explain a jboost.fit model, "
                "or use jboost.inspect.permutation_importance, which predicts rows as "
                "users hold them.")

    def tree_sum(self, n_stages: Optional[int] = None):
        """``(trees, mean baseline, None)``: every bag's trees of the rounds :meth:`raw_scores`
        uses, their leaf values divided by the number of bags.

        Raises:
          TypeError: the model has categorical columns (:attr:`no_tree_sum`).
        """
        if self.no_tree_sum is not None:
            raise TypeError(self.no_tree_sum)
        trees = family.flatten_trees(base.used_rounds(self.trees, n_stages, self.best_round, lead=1))
        trees = trees._replace(leaf_values=trees.leaf_values / self.n_bags)
        return trees, jnp.mean(self.baseline, axis=0), None

    def bag_raw_scores(self, X, n_stages: Optional[int] = None) -> jax.Array:
        """``(B, n, K)`` every bag's raw scores for checked rows, of the rounds a prediction uses."""
        trees = base.used_rounds(self.trees, n_stages, self.best_round, lead=1)
        if self.categorical is not None:  # each bag's own statistics
            return jax.vmap(lambda t, b0, Xb: b0 + family.predict_raw(t, Xb))(
                trees, self.baseline, self.bag_features(X))
        X = jnp.asarray(X, jnp.float32)
        return jax.vmap(lambda t, b0: b0 + family.predict_raw(t, X))(trees, self.baseline)

    def raw_scores(self, X, n_stages: Optional[int] = None) -> jax.Array:
        """``(n, K)`` mean over bags of the bags' raw scores."""
        return jnp.mean(self.bag_raw_scores(X, n_stages), axis=0)

    def proba_from_raw(self, raw) -> jax.Array:
        if self.task not in loss_lib.CLASSIFICATION:
            raise ValueError(f"predict_proba needs a classification model; {self.loss.name!r} is a "
                             f"{self.task!r} model (use jboost.predict for raw scores).")
        return self.loss.link(raw[..., 0] if self.n_outputs == 1 else raw)

    def classes_from_raw(self, raw) -> jax.Array:
        return jnp.argmax(self.proba_from_raw(raw), axis=-1)

    def staged(self, X, fn: Callable, *args) -> Any:
        """``fn(mean over bags of the raw scores after round m, *args)`` for every round."""
        rounds = jax.tree_util.tree_map(lambda a: jnp.moveaxis(a, 1, 0), self.trees)  # (R, B, ...)
        if self.categorical is not None:  # each bag's own statistics: (B, n, F) rows
            return base.staged_scan(rounds, self.bag_features(X), fn, args, _bag_mean,
                                    self.baseline, bags="own")
        return base.staged_scan(rounds, X, fn, args, _bag_mean, self.baseline, bags="shared")

    def proba(self, X, n_stages: Optional[int] = None, margin=None) -> jax.Array:
        """``(n, n_classes)`` mean over bags of each bag's class probabilities (checked rows);
        ``margin`` ``(n, K)``: raw-score offsets added to every bag's raw scores."""
        if self.task not in loss_lib.CLASSIFICATION:
            self.proba_from_raw(None)  # raises the protocol's message
        raw = self.bag_raw_scores(X, n_stages)
        if margin is not None:
            raw = raw + jnp.asarray(margin, raw.dtype)[None]
        return jnp.mean(_bag_links(self.loss, raw), axis=0)

    def check_structure(self, exact_borders: bool = True) -> None:
        """Raise ``ValueError`` naming the field unless the arrays fit each other: the trees'
        axes ``(*batch, B, n_rounds, trees_per_round)`` and outputs ``K`` (the baselines'
        ``(*batch, B, K)``), splits on the borders' features and bins (shared, or each bag's with
        categorical columns; :func:`jboost.models.structure.check_splits`), the bag weights,
        curves and ``best_round`` per bag, the loss (parameters per bag), classes and names."""
        if np.ndim(self.baseline) < 2:
            raise structure.fail("baseline", f"has shape {np.shape(self.baseline)}; it should be "
                                             "(*batch, n_bags, K).")
        batch, k = self.batch_shape, self.n_outputs
        bags = batch + (self.n_bags,)
        structure.expect("baseline", self.baseline, bags + (k,))
        lead = structure.tree_lead(self.trees, bags, ("n_rounds", "trees_per_round"))
        structure.check_outputs(self.trees, k, "baseline")
        structure.check_borders(self.borders, [batch, bags])
        structure.check_splits(self.trees, self.borders, exact_borders)
        n_train = np.shape(self.bag_weights)[-1:]
        structure.expect("bag_weights", self.bag_weights, bags + n_train, why=" (one row per bag)")
        structure.check_weights("bag_weights", self.bag_weights)
        curve = bags + (lead[-2],)
        structure.expect("train_loss", self.train_loss, curve, why=" (per bag and round)")
        structure.expect_optional("valid_loss", self.valid_loss, curve, why=" (per bag and round)")
        structure.check_best_round(self.best_round, bags, lead[-2])
        structure.check_loss("loss", self.loss, k, bags)
        structure.check_classes(self.classes, structure.n_classes_of(self.loss, k))
        structure.check_feature_names(self.feature_names, self.n_inputs)


def _bag_links(loss: loss_lib.Loss, raw):
    """``(B, n, K)`` each bag's loss link (its own parameters) of its ``(B, n, K)`` raw scores."""

    def one(r, params):
        out = loss.link(r if loss.n_outputs > 1 else r[:, 0], **params)
        return out if out.ndim == 2 else out[:, None]

    return jax.vmap(one)(raw, loss.params)


def _bag_mean(acc, stage, baseline):
    """A staged sum's raw scores: the mean over bags of the baselines plus the bags' sums."""
    return jnp.mean(baseline[:, None, :] + acc, axis=0)


def bagged_outputs(model: BaggedBoosters, X) -> jax.Array:
    """Per-bag outputs ``(B, n, K)``: each bag's loss link of its raw scores (class
    probabilities, or predictions through the link)."""
    return _bag_links(model.loss, model.bag_raw_scores(base.checked_rows(model, X)))


def bagged_predict(model: BaggedBoosters, X) -> jax.Array:
    """Bagged prediction: mean over bags of :func:`bagged_outputs` (``(n,)`` for one output):
    the mean of the bags' probabilities, or of their ``jboost.predict_mean``."""
    avg = jnp.mean(bagged_outputs(model, X), axis=0)
    return avg[:, 0] if avg.shape[-1] == 1 else avg


def bagged_predict_proba(model: BaggedBoosters, X, n_rounds: Optional[int] = None) -> jax.Array:
    """:meth:`BaggedBoosters.proba`: the mean over bags of each bag's probabilities ``(n, n_classes)``."""
    return model.proba(base.checked_rows(model, X), n_rounds)
