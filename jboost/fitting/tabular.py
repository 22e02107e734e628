"""The tabular input of an ensemble's fit, read as jboost.fit reads it (DataFrame names, class labels, categorical plan)."""

from __future__ import annotations

from typing import Any, NamedTuple, Optional

from jboost.data import categorical as categorical_lib
from jboost.data import tabular as tabular_lib
from jboost.fitting import prepare
from jboost.models import metadata


class Tabular(NamedTuple):
    """What :func:`tabular` read: ``X`` a float32 ``(n, F)`` host matrix (a DataFrame's columns
    in ``init_model``'s order), ``y`` the labels (class labels mapped to ``0..K-1``), ``eval_set``
    (its X ordered and labels mapped likewise), and the model's ``feature_names`` and
    ``classes`` fields (:class:`jboost.models.metadata.FeatureNames`, :class:`jboost.models.metadata.Classes`, or
    ``None``); with categorical columns, ``X`` is their encoded matrix and ``plan`` the
    :class:`jboost.data.categorical.Plan` (the ``eval_set``'s X encoded too)."""

    X: Any
    y: Any
    eval_set: Any
    feature_names: Optional[metadata.FeatureNames]
    classes: Optional[metadata.Classes]
    plan: Any = None  # categorical columns (tabular(categorical=...)): a jboost.data.categorical.Plan


def tabular(X, y, *, init_model=None, eval_set=None, loss=None, n_outputs=None, task=None,
            classify: bool = True, categorical=None, who: str = "this ensemble",
            n_rows=None) -> Tabular:
    """The tabular input of an ensemble's fit, read as :func:`jboost.fit` reads it: a
    DataFrame's feature names (:func:`jboost.data.tabular.tabular_input`: columns ordered by
    ``init_model``'s names, the ``eval_set``'s too), then, for a classification fit
    (``classify``), class labels as users have them (strings, ``{-1, 1}``, ...) mapped to
    ``0..K-1`` by ``loss`` (a name, :class:`jboost.Loss` or function, with ``n_outputs`` and
    ``task``) through :func:`jboost.fitting.prepare.class_labels` (``eval_set``'s labels, and a
    continued fit's, with the training or ``init_model``'s classes; a model of class indices is
    not continued with labels it would map). The same function as :func:`jboost.fit`'s.
    ``n_rows``: the labels' rows when ``y`` is not ``X``'s (a multi-process fit's whole table).

    ``categorical``: ``(cat_features, one_hot_max_size)`` for an entry point that encodes
    categorical columns (:func:`jboost.data.categorical.categorical_plan`); ``None``: a DataFrame's
    categorical columns are refused, naming ``who`` and the fix (:func:`refuse_categorical`)."""
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
        # (a continued fit of class indices refuses mapped labels there: no silent relabelling)
        y, classes, eval_set = prepare.mapped_labels(y, eval_set, loss, n_outputs, task,
                                                         init_model,
                                                         n_rows=X.shape[0] if n_rows is None else n_rows)
    return Tabular(X, y, eval_set, metadata.named(names),
                   None if classes is None else metadata.Classes(classes), plan)
