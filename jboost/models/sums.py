"""Every fitted model as a constant plus a sum of trees (the view SHAP, partial dependence and
tree plots read), through the model protocol's ``tree_sum``."""

from __future__ import annotations

from typing import Optional


def check_tree_sum(model) -> None:
    """Raise ``TypeError`` with the model's ``no_tree_sum`` message when it is not one sum of
    trees (bagged boosters with categorical columns)."""
    why = getattr(model, "no_tree_sum", None)
    if why is not None:
        raise TypeError(why)


def tree_sum(model, n_rounds: Optional[int] = None):
    """One unbatched model as ``(trees, constant, offset)``: its raw scores are
    ``offset + constant + sum_t trees[t].leaf_values[leaf_t(x)]`` over the stages
    :func:`jboost.predict` uses (``offset`` may be ``None``; docs/models.md).

    Raises:
      TypeError: the model has no ``tree_sum``, or is not one sum of trees.
    """
    if not hasattr(model, "tree_sum"):
        raise TypeError(f"jboost.inspect explains Boosters, Forests, BaggedBoosters, ECOCBoosters and "
                        f"StackedBoosters; got {type(model).__name__}.")
    return model.tree_sum(n_rounds)
