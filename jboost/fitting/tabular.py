"""The tabular input of an ensemble's fit, read as jboost.fit reads it (DataFrame names, class
labels, categorical plan)."""

from __future__ import annotations

from typing import Any, NamedTuple, Optional

from jboost.data import categorical as categorical_lib, tabular as tabular_lib
from jboost.fitting import prepare
from jboost.models import metadata


class Tabular(NamedTuple):
    """What :func:`tabular` read: ``X`` a float32 host matrix (encoded with categorical
    columns: ``plan``), ``y`` (class labels mapped to ``0..K-1``), ``eval_set`` likewise, and the
    model's ``feature_names`` and ``classes`` fields."""

    X: Any
    y: Any
    eval_set: Any
    feature_names: Optional[metadata.FeatureNames]
    classes: Optional[metadata.Classes]
    plan: Any = None  # categorical columns (tabular(categorical=...)): a jboost.data.categorical.Plan


def tabular(X, y, *, init_model=None, eval_set=None, loss=None, n_outputs=None, task=None,
            classify: bool = True, categorical=None, who: str = "this ensemble",
            n_rows=None) -> Tabular:
    """An ensemble's tabular input read as :func:`jboost.fit` reads it (with ``classify``, class
    labels mapped by ``loss``); ``categorical``: ``(cat_features, one_hot_max_size)``, or
    ``None`` to refuse categorical columns; ``n_rows``: the labels' rows if not ``X``'s."""
    X, names, eval_set = tabular_lib.tabular_input(X, init_model, eval_set)
    plan = None
    if categorical is None:
        categorical_lib.refuse_categorical(X, who)
    else:
        pair = eval_set if isinstance(eval_set, (tuple, list)) else None  # not "oob"
        plan = categorical_lib.categorical_plan(X, categorical[0], categorical[1], pair)
        if plan is not None:
            X = plan.X
            if plan.X_valid is not None:
                eval_set = (plan.X_valid,) + tuple(eval_set[1:])
    X = tabular_lib.as_matrix(X, "X")
    classes = None
    if classify:
        y, classes, eval_set = prepare.mapped_labels(y, eval_set, loss, n_outputs, task,
                                                         init_model,
                                                         n_rows=X.shape[0] if n_rows is None else n_rows)
    return Tabular(X, y, eval_set, metadata.named(names),
                   None if classes is None else metadata.Classes(classes), plan)
