"""Every fitted model as a constant plus a sum of trees (the view SHAP, partial dependence and tree plots read), through the model protocol's ``tree_sum``."""

from __future__ import annotations

from typing import Optional

# --------------------------------------------------------------------------------------------
# Every model as a constant plus a sum of trees.
# --------------------------------------------------------------------------------------------


def check_tree_sum(model) -> None:
    """Raise the model's reason (its optional ``no_tree_sum`` message, e.g. bagged boosters with
    categorical columns: each bag encodes the rows with its own ordered target statistics, so no
    one feature matrix feeds all their trees) when it is not one sum of trees.

    Raises:
      TypeError: the model says it is not one sum of trees.
    """
    why = getattr(model, "no_tree_sum", None)
    if why is not None:
        raise TypeError(why)


def tree_sum(model, n_rounds: Optional[int] = None):
    """One unbatched model as ``(trees, constant, offset)``: its raw scores are
    ``offset + constant + sum_t trees[t].leaf_values[leaf_t(x)]`` (``offset`` may be ``None``).

    ``trees`` are :class:`jboost.ObliviousTrees` (or the model's tree family) with one leading
    tree axis and leaf values ``(T, leaves, K)`` in the model's output units (a forest's and
    bagged boosters' averages, an ECOC bit's one-hot column, a stacked model's mapped leaves);
    the stages are those :func:`jboost.predict` uses (``n_rounds``, else every round, or up to
    ``best_round``): the model's own :meth:`jboost.models.base.Model.tree_sum`.

    Raises:
      TypeError: the model has no ``tree_sum``, or is not one sum of trees
        (:func:`check_tree_sum`).
    """
    if not hasattr(model, "tree_sum"):
        raise TypeError(f"jboost.inspect explains Boosters, Forests, BaggedBoosters, ECOCBoosters and "
                        f"StackedBoosters; got {type(model).__name__}.")
    return model.tree_sum(n_rounds)
