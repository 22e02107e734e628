"""StackedBoosters, the stacking model type, with its second tier (LinearModel) and predict function."""

from __future__ import annotations

from typing import Any, Callable, NamedTuple, Optional, Tuple

import jax
import jax.numpy as jnp
import numpy as np

from jboost import checks
from jboost.losses import loss as loss_lib, per_sample
from jboost.models import base, booster, ensemble, metadata, structure
from jboost.trees import oblivious

LINEAR_TASKS = ("regression", "binary", "multiclass")


@base.register_nested_type
class LinearModel(NamedTuple):
    """A stacker's linear model: raw scores ``Z @ coef + intercept`` of the stacking features
    ``Z`` ``(n, P)``."""
    coef: jax.Array       # (P, K)
    intercept: jax.Array  # (K,)


def linear_raw(model: LinearModel, Z) -> jax.Array:
    """Raw scores ``Z @ coef + intercept`` ``(n, K)``."""
    return jnp.asarray(Z, jnp.float32) @ model.coef + model.intercept


def linear_loss(task: str, n_outputs: int = 1) -> loss_lib.Loss:
    """The loss :func:`fit_linear` minimises for ``task``: squared error, binomial deviance or
    multinomial deviance with ``n_outputs`` classes (its ``link`` gives the prediction)."""
    checks.check_choice(task, "task", LINEAR_TASKS)
    if task == "regression":
        return per_sample.squared_error()
    if task == "binary":
        return per_sample.binomial_deviance()
    return per_sample.multinomial_deviance(int(n_outputs))


def stack_task(loss: loss_lib.Loss) -> str:
    """The second tier's task for base learners of ``loss``: ``"binary"`` and ``"multiclass"``
    stay; every other task (regression, count) is stacked by least squares: ``"regression"``."""
    return loss.task if loss.task in loss_lib.CLASSIFICATION else "regression"


@base.model_type("n_features", "n_rounds", "n_stages", "feature_names_in_", "classes_")
class StackedBoosters(NamedTuple):
    """Base boosters fitted on all rows plus a linear second tier on their raw scores: a
    :class:`jboost.models.base.Model`.

    Attributes:
      trees: ObliviousTrees with leading axes ``(M, n_rounds, trees_per_round)``.
      borders: ``(F, n_bins - 1)``.
      baseline: ``(M, K)``.
      stacker: :class:`jboost.combine.LinearModel` on the ``(n, M*K)`` raw scores.
      oof_raw: ``(n_train, M, K)`` the out-of-fold raw scores the stacker was trained on.
      base_loss: the base learners' :class:`jboost.Loss`.
      best_round: with early stopping, ``(M,)`` int32: each learner's best round (chosen on its
        folds' held-out rows; its later rounds are zero trees); ``None`` otherwise.
      classes: the mapped class labels, as ``Booster.classes``, or ``None``.
      feature_names: the fit's feature names, as ``Booster.feature_names``, or ``None``.

    Its raw scores are the stacker's linear output on the base learners' raw scores, its
    :attr:`loss` and ``task`` the second tier's (docs/models.md, "Model types").
    """

    trees: oblivious.ObliviousTrees
    borders: jax.Array
    baseline: jax.Array
    stacker: LinearModel
    oof_raw: jax.Array
    base_loss: loss_lib.Loss
    best_round: Optional[jax.Array] = None
    classes: Optional[metadata.Classes] = None
    feature_names: Optional[metadata.FeatureNames] = None

    @property
    def n_learners(self) -> int:
        return self.baseline.shape[-2]

    @property
    def task(self) -> str:
        return stack_task(self.base_loss)

    @property
    def loss(self) -> loss_lib.Loss:
        """The second tier's loss (squared error, binomial or multinomial deviance)."""
        return linear_loss(self.task, self.stacker.intercept.shape[-1])

    @property
    def batch_shape(self) -> Tuple[int, ...]:
        return tuple(self.baseline.shape[:-2])

    def as_booster(self) -> booster.Booster:
        """The stacked ensemble as one :class:`jboost.Booster` (one unbatched model): round ``r``
        holds the learners' round-``r`` trees, each learner's leaf values mapped by its block of
        the stacker's coefficients (the same function up to float rounding)."""
        coef = self.stacker.coef.reshape(self.n_learners, self.baseline.shape[-1], -1)  # (M, K, K_out)
        leaves = jnp.einsum("mrtlk,mko->mrtlo", self.trees.leaf_values, coef)
        trees = ensemble.rounds_first(self.trees._replace(leaf_values=leaves))
        baseline = self.stacker.intercept + jnp.einsum("mk,mko->o", self.baseline, coef)
        return ensemble.as_booster(trees, self.borders, baseline, self.loss, self.classes,
                                  self.feature_names)

    def raw_scores(self, X, n_stages: Optional[int] = None) -> jax.Array:
        return self.as_booster().raw_scores(X, n_stages)

    def tree_sum(self, n_stages: Optional[int] = None):
        """:meth:`as_booster`'s sum of trees."""
        return self.as_booster().tree_sum(n_stages)

    def proba_from_raw(self, raw) -> jax.Array:
        if self.task not in loss_lib.CLASSIFICATION:
            raise ValueError(f"predict_proba needs a classification model; this stacked model's "
                             f"base loss {self.base_loss.name!r} makes it a {self.task!r} model "
                             "(use jboost.predict).")
        return self.loss.link(raw[..., 0] if raw.shape[-1] == 1 else raw, **self.loss.params)

    def classes_from_raw(self, raw) -> jax.Array:
        return jnp.argmax(self.proba_from_raw(raw), axis=-1)

    def staged(self, X, fn: Callable, *args) -> Any:
        return self.as_booster().staged(X, fn, *args)

    def check_structure(self, exact_borders: bool = True) -> None:
        """Raise ``ValueError`` naming the field unless the arrays fit each other: ``M`` base
        learners of ``K`` outputs (baselines ``(*batch, M, K)``, trees ``(*batch, M, n_rounds,
        trees_per_round)``, splits on the borders' features and bins:
        :func:`jboost.models.structure.check_splits`), the stacker on their ``M * K`` raw scores
        with ``K`` outputs for a K-class task, else 1, the out-of-fold scores, ``best_round`` per
        learner, the base loss's outputs, the classes and feature names."""
        if np.ndim(self.baseline) < 2:
            raise structure.fail("baseline", f"has shape {np.shape(self.baseline)}; it should be "
                                             "(*batch, n_learners, K).")
        batch, (m, k) = self.batch_shape, self.baseline.shape[-2:]
        structure.expect("baseline", self.baseline, batch + (m, k))
        lead = structure.tree_lead(self.trees, batch + (m,), ("n_rounds", "trees_per_round"))
        structure.check_outputs(self.trees, k, "baseline")
        structure.check_borders(self.borders, [batch])
        structure.check_splits(self.trees, self.borders, exact_borders)
        structure.check_loss("base_loss", self.base_loss, k, batch)
        k_out = k if self.task == "multiclass" else 1
        why = f" (a {self.task!r} stacker of {m} learners x {k} outputs)"
        structure.expect("stacker.coef", self.stacker.coef, batch + (m * k, k_out), why=why)
        structure.expect("stacker.intercept", self.stacker.intercept, batch + (k_out,), why=why)
        n_train = np.shape(self.oof_raw)[len(batch):len(batch) + 1]
        structure.expect("oof_raw", self.oof_raw, batch + n_train + (m, k), why=why)
        structure.check_best_round(self.best_round, batch + (m,), lead[-2])
        structure.check_classes(self.classes, structure.n_classes_of(self.loss, k_out))
        structure.check_feature_names(self.feature_names, self.n_features)


def stacked_predict(model: StackedBoosters, X) -> jax.Array:
    """Alias of :func:`jboost.predict_mean`: class probabilities ``(n, n_classes)`` for
    classification, predictions ``(n,)`` otherwise (``jboost.predict`` gives the stacker's raw
    output, ``jboost.predict_proba`` the probabilities)."""
    return base.predict_mean(model, X)
