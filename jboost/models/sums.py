"""Every fitted model as a constant plus a sum of trees (the view SHAP, partial dependence and tree plots read)."""

from __future__ import annotations

from typing import Optional

import jax
import jax.numpy as jnp

from jboost import checks
from jboost.models import base as base_lib
from jboost.models import booster
from jboost.models.bagged import BaggedBoosters
from jboost.models.ecoc import ECOCBoosters
from jboost.models.forest import Forest
from jboost.trees import family

# --------------------------------------------------------------------------------------------
# Every model as a constant plus a sum of trees.
# --------------------------------------------------------------------------------------------


def _zero_after(trees, keep_rounds):
    """Trees with zero leaf values in the rounds (axis 0) where ``keep_rounds`` is False."""
    lv = trees.leaf_values
    keep = keep_rounds.reshape(keep_rounds.shape + (1,) * (lv.ndim - keep_rounds.ndim))
    return trees._replace(leaf_values=jnp.where(keep, lv, jnp.zeros((), lv.dtype)))


def refuse_bagged_categorical(model) -> None:
    """Bagged boosters with categorical columns: each bag encodes the rows with its own ordered
    target statistics, so no one feature matrix feeds all their trees."""
    if isinstance(model, BaggedBoosters) and getattr(model, "categorical", None) is not None:
        raise TypeError("SHAP values and partial dependence of bagged boosters with categorical "
                        "columns are not defined by one sum of trees (each bag encodes the rows "
                        "with its own ordered target statistics): explain a jboost.fit model, "
                        "or use jboost.inspect.permutation_importance, which predicts rows as "
                        "users hold them.")


def tree_sum(model, n_rounds: Optional[int] = None):
    """One unbatched model as ``(trees, constant, offset)``: its raw scores are
    ``offset + constant + sum_t trees[t].leaf_values[leaf_t(x)]`` (``offset`` may be ``None``).

    ``trees`` are :class:`jboost.ObliviousTrees` with one leading tree axis and leaf values
    ``(T, 2**D, K)`` in the model's output units (a forest's and bagged boosters' averages, an
    ECOC bit's one-hot column, a stacked model's mapped leaves); the stages are those
    :func:`jboost.predict` uses (``n_rounds``, else every round, or up to ``best_round``).
    """
    if hasattr(model, "as_booster") and not isinstance(model, booster.Booster):  # stacked
        return tree_sum(model.as_booster(), n_rounds)
    if isinstance(model, booster.Booster):
        trees = model.trees
        if n_rounds is None and model.best_round is not None:
            if checks.is_traced(model.best_round):
                trees = _zero_after(trees, jnp.arange(model.n_rounds) <= model.best_round)
            else:
                n_rounds = int(model.best_round) + 1
        trees = base_lib.first_stages(trees, n_rounds, model.n_rounds)
        return family.flatten_trees(trees), model.baseline, model.offset
    if isinstance(model, Forest):
        if n_rounds is not None:
            n_rounds = checks.check_int(n_rounds, "n_rounds", 1, model.n_trees)
        trees = base_lib.first_stages(model.trees, n_rounds, model.n_trees)
        n_used = trees.features.shape[0]
        trees = family.flatten_trees(trees)
        trees = trees._replace(leaf_values=trees.leaf_values / n_used)
        return trees, jnp.zeros((model.n_outputs,), jnp.float32), None
    if isinstance(model, BaggedBoosters):
        refuse_bagged_categorical(model)
        if n_rounds is not None:
            n_rounds = checks.check_int(n_rounds, "n_rounds", 0, model.n_rounds)
            trees = jax.tree_util.tree_map(lambda a: a[:, :n_rounds], model.trees)
        else:
            trees = model.best_trees()
        trees = family.flatten_trees(trees)
        trees = trees._replace(leaf_values=trees.leaf_values / model.n_bags)
        return trees, jnp.mean(model.baseline, axis=0), None
    if isinstance(model, ECOCBoosters):
        trees = model.trees  # (L, R, 1, ...) one-output learners, one per bit
        if n_rounds is not None:
            m = checks.check_int(n_rounds, "n_rounds", 0, model.n_rounds)
            trees = jax.tree_util.tree_map(lambda a: a[:, :m], trees)
        n_bits = model.n_bits
        onehot = jnp.eye(n_bits, dtype=jnp.float32)[:, None, None, None, :]  # (L, 1, 1, 1, L)
        trees = trees._replace(leaf_values=trees.leaf_values * onehot)
        return family.flatten_trees(trees), model.baseline[:, 0], None
    raise TypeError(f"jboost.inspect explains Boosters, Forests, BaggedBoosters, ECOCBoosters and "
                    f"StackedBoosters; got {type(model).__name__}.")
