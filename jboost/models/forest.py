"""Forest, the random-forest model type (averaged leaf values of oblivious or depth-wise trees),
and its predict functions (tree outputs, majority vote)."""

from __future__ import annotations

from typing import Any, Callable, NamedTuple, Optional, Tuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from jboost import _compile, checks
from jboost.data import tabular as tabular_lib
from jboost.models import base, metadata, structure
from jboost.trees import depthwise as depthwise_lib, family, oblivious


@base.model_type("n_features", "depth", "feature_names_in_", "classes_")
class Forest(NamedTuple):
    """A bagged ensemble of trees: a pytree of arrays, a :class:`jboost.models.base.Model`.

    Attributes:
      trees: :class:`~jboost.trees.oblivious.ObliviousTrees` or :class:`~jboost.trees.depthwise.DepthwiseTrees`
        (:func:`tree_family_of`) with a leading tree (bag) axis ``(B, ...)``;
        ``leaf_values`` ``(B, 2**D, K)`` hold means (``K = 1``, regression) or class
        frequencies (``K = n_classes >= 2``, classification).
      borders: ``(F, n_bins - 1)`` bin borders of the training data.
      bag_weights: ``(B, n_train)`` bootstrap weights of every tree (0 = out of bag).
      classes: a classification forest's mapped class labels, as ``Booster.classes``, or ``None``.
      feature_names: the fit's feature names, as ``Booster.feature_names``, or ``None``.

    Its raw score is the average of the trees' leaf values (docs/models.md, "Model types").
    """

    trees: family.TreeFamily  # ObliviousTrees or depthwise.DepthwiseTrees
    borders: jax.Array
    bag_weights: jax.Array
    classes: Optional[metadata.Classes] = None
    feature_names: Optional[metadata.FeatureNames] = None

    @property
    def n_trees(self) -> int:
        return self.trees.features.shape[-2]

    @property
    def n_outputs(self) -> int:
        return self.trees.leaf_values.shape[-1]

    @property
    def is_classifier(self) -> bool:
        return self.n_outputs > 1

    @property
    def task(self) -> str:
        return "regression" if self.n_outputs == 1 else "binary" if self.n_outputs == 2 else "multiclass"

    @property
    def batch_shape(self) -> Tuple[int, ...]:
        return tuple(self.bag_weights.shape[:-2])

    @property
    def n_stages(self) -> int:
        return self.n_trees

    def first_trees(self, n_trees: Optional[int], name: str = "n_trees"):
        """The first ``n_trees`` trees (at least 1; all by default)."""
        if n_trees is not None:
            n_trees = checks.check_int(n_trees, name, 1, self.n_trees)
        return base.first_stages(self.trees, n_trees, self.n_trees, name)

    def raw_scores(self, X, n_stages: Optional[int] = None) -> jax.Array:
        """``(n, K)`` average of the first ``n_stages`` trees' leaf values (all by default)."""
        trees = self.first_trees(n_stages)
        return base.sum_of_trees(trees, X) / trees.features.shape[0]

    def tree_sum(self, n_stages: Optional[int] = None):
        """``(trees, zeros (K,), None)``: the first ``n_stages`` trees (all by default), their leaf
        values divided by the number of trees."""
        trees = self.first_trees(n_stages, "n_rounds")
        n_used = trees.features.shape[0]
        trees = family.flatten_trees(trees)
        trees = trees._replace(leaf_values=trees.leaf_values / n_used)
        return trees, jnp.zeros((self.n_outputs,), jnp.float32), None

    def proba_from_raw(self, raw) -> jax.Array:
        """A classification forest's raw scores are its probabilities (averaged frequencies)."""
        if not self.is_classifier:
            raise ValueError("predict_proba needs a classification forest; this one is a "
                             "'regression' forest (use jboost.predict for the averaged means).")
        return raw

    def classes_from_raw(self, raw) -> jax.Array:
        return jnp.argmax(self.proba_from_raw(raw), axis=-1)

    def staged(self, X, fn: Callable, *args) -> Any:
        """``fn(average of the first b trees, *args)`` for ``b = 1..B``: one scan over trees."""
        stages = jax.tree_util.tree_map(lambda a: a[:, None], self.trees)  # one tree per stage
        return base.staged_scan(stages, X, fn, args, _average, None)

    def check_structure(self, exact_borders: bool = True) -> None:
        """Raise ``ValueError`` naming the field unless the arrays fit each other: the trees'
        axes ``(*batch, B)`` (the bag weights'), splits on the borders' features and bins
        (:func:`jboost.models.structure.check_splits`), a classification forest's (``K >= 2``
        outputs) leaves as class frequencies and its ``K`` classes, and the feature names."""
        weights = np.shape(self.bag_weights)
        if len(weights) < 2:
            raise structure.fail("bag_weights", f"has shape {weights}; it should be (*batch, "
                                                "n_trees, n_train).")
        structure.expect("bag_weights", self.bag_weights, weights)
        structure.check_weights("bag_weights", self.bag_weights)
        batch = self.batch_shape
        lead = structure.tree_lead(self.trees, batch, ("n_trees",))
        if lead[-1] != weights[-2]:
            raise structure.fail("bag_weights", f"has shape {weights}; the forest has {lead[-1]} "
                                                f"trees, so it should be {batch + (lead[-1],)} + "
                                                "(n_train,) (one row per tree).")
        structure.check_borders(self.borders, [batch])
        structure.check_splits(self.trees, self.borders, exact_borders)
        k = self.n_outputs
        structure.expect("trees.leaf_values", self.trees.leaf_values,
                         np.shape(self.trees.leaf_values))
        if k >= 2:  # a classification forest's leaves hold class frequencies (empty ones zeros)
            values = np.asarray(self.trees.leaf_values)
            sums = values.sum(axis=-1)
            if not ((values >= 0) & (values <= 1)).all() or not (
                    (sums == 0) | (np.abs(sums - 1) <= 1e-4)).all():
                raise structure.fail("trees.leaf_values", f"of {k} classes are not class "
                                     "frequencies; each leaf of a classification forest holds K "
                                     "values in [0, 1] summing to 1 (0 for an empty slot).")
        structure.check_classes(self.classes, k if k >= 2 else None)
        structure.check_feature_names(self.feature_names, self.n_features)


def _average(acc, stage, consts):
    """A staged sum's raw scores: the mean of the first ``stage`` trees."""
    return acc / stage


def tree_family_of(model: "Forest") -> str:
    """``"depthwise"`` or ``"oblivious"``: the family of a forest's trees."""
    return "depthwise" if isinstance(model.trees, depthwise_lib.DepthwiseTrees) else "oblivious"


def tree_outputs(trees: oblivious.ObliviousTrees, X) -> jax.Array:
    """Leaf value of every tree for every row: trees ``(B, ...)``, ``X (n, F)`` -> ``(B, n, K)``."""
    X_t = jnp.asarray(X, jnp.float32).T
    return jax.vmap(lambda t: t.leaf_values[t.leaf_index_raw(X_t)])(trees)


def forest_predict(forest: Forest, X, n_trees: Optional[int] = None) -> jax.Array:
    """Alias of ``jboost.predict(forest, X, n_trees)``: the average of the (first ``n_trees``)
    trees (ESL Algorithm 15.1): means ``(n,)`` or class probabilities ``(n, K)``."""
    return base.predict(forest, X, n_trees)


@_compile.jit
def _vote_fractions(trees, X):
    X_t = jnp.asarray(X, jnp.float32).T
    k = trees.leaf_values.shape[-1]

    def step(acc, t):
        out = t.leaf_values[t.leaf_index_raw(X_t)]
        return acc + jax.nn.one_hot(jnp.argmax(out, axis=-1), k, dtype=jnp.float32), None

    acc, _ = lax.scan(step, jnp.zeros((X_t.shape[1], k), jnp.float32), trees)
    return acc / trees.features.shape[0]


def forest_vote(forest: Forest, X, n_trees: Optional[int] = None) -> jax.Array:
    """Fraction of trees voting for each class ``(n, K)`` (majority vote, ESL Algorithm 15.1)."""
    if not forest.is_classifier:
        raise ValueError("forest_vote needs a classification forest (n_outputs >= 2).")
    X = tabular_lib.predict_matrix(base.in_order(forest, X), forest.n_features)
    return _vote_fractions(forest.first_trees(n_trees), X)


def forest_predict_class(forest: Forest, X, vote: bool = False, n_trees: Optional[int] = None):
    """Class labels ``(n,)``: alias of ``jboost.predict_class(forest, X, n_trees)`` (argmax of the
    averaged probabilities), or with ``vote=True`` the majority vote of the trees (the forest's
    ``classes`` when it has them, as ``predict_class`` returns them)."""
    if vote:
        return metadata.labels_of(forest, jnp.argmax(forest_vote(forest, X, n_trees), axis=-1))
    return base.predict_class(forest, X, n_trees)
