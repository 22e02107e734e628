"""What the ensembles share: the tabular input of every ensemble's fit (a DataFrame's feature
names, class labels as users have them), whether a fit may run from the host, raw scores of
ensembles batched over leading (learner, fold) axes, and a sum of trees viewed as one
:class:`jboost.Booster`."""

from __future__ import annotations

from typing import Any, NamedTuple, Optional

import jax
import jax.numpy as jnp

from jboost import _validation
from jboost import losses as losses_lib
from jboost import model as model_lib
from jboost import tree as tree_lib


class Tabular(NamedTuple):
    """What :func:`tabular` read: ``X`` a float32 ``(n, F)`` host matrix (a DataFrame's columns
    in ``init_model``'s order), ``y`` the labels (class labels mapped to ``0..K-1``), ``eval_set``
    (its X ordered and labels mapped likewise), and the model's ``feature_names`` and
    ``classes`` fields (:class:`jboost.model.FeatureNames`, :class:`jboost.model.Classes`, or
    ``None``); with categorical columns, ``X`` is their encoded matrix and ``plan`` the
    :class:`jboost.categorical.Plan` (the ``eval_set``'s X encoded too)."""

    X: Any
    y: Any
    eval_set: Any
    feature_names: Optional[model_lib.FeatureNames]
    classes: Optional[model_lib.Classes]
    plan: Any = None  # categorical columns (tabular(categorical=...)): a jboost.categorical.Plan


# The entry points that encode categorical columns (named by the refusal of the others).
CATEGORICAL_ENTRY_POINTS = ("jboost.fit, jboost.sweep.sweep or jboost.bagging.fit_bagged_boosters "
                            "(their cat_features=)")


def refuse_categorical(X, who: str, name: str = "X") -> None:
    """A ``TypeError`` when ``X`` is a DataFrame with categorical (category, object or string)
    columns and the entry point ``who`` takes numeric columns only: it names the columns and the
    fix (the entry points that encode them, or an encoding by hand)."""
    from jboost import categorical  # noqa: PLC0415
    if not categorical._is_frame(X):
        return
    cats = [str(c) for c, d in zip(X.columns, X.dtypes) if categorical._categorical_dtype(d)]
    if cats:
        raise TypeError(f"{name} has categorical columns {cats[:8]}{'...' if len(cats) > 8 else ''}, "
                        f"but {who} takes numeric columns only (it has no cat_features=): fit with "
                        f"{CATEGORICAL_ENTRY_POINTS}, which encode them (one-hot or ordered target "
                        "statistics), or encode them as numbers yourself (df[c].cat.codes with -1 "
                        "replaced by NaN, or pandas.get_dummies), or drop them.")


def tabular(X, y, *, init_model=None, eval_set=None, loss=None, n_outputs=None, task=None,
            classify: bool = True, categorical=None, who: str = "this ensemble",
            n_rows=None) -> Tabular:
    """The tabular input of an ensemble's fit, read as :func:`jboost.fit` reads it: a
    DataFrame's feature names (:func:`jboost._validation.tabular_input`: columns ordered by
    ``init_model``'s names, the ``eval_set``'s too), then, for a classification fit
    (``classify``), class labels as users have them (strings, ``{-1, 1}``, ...) mapped to
    ``0..K-1`` by ``loss`` (a name, :class:`jboost.Loss` or function, with ``n_outputs`` and
    ``task``) through :func:`jboost._validation.class_labels` (``eval_set``'s labels, and a
    continued fit's, with the training or ``init_model``'s classes; a model of class indices is
    not continued with labels it would map). The same function as :func:`jboost.fit`'s.
    ``n_rows``: the labels' rows when ``y`` is not ``X``'s (a multi-process fit's whole table).

    ``categorical``: ``(cat_features, one_hot_max_size)`` for an entry point that encodes
    categorical columns (:func:`jboost._validation.categorical_plan`); ``None``: a DataFrame's
    categorical columns are refused, naming ``who`` and the fix (:func:`refuse_categorical`)."""
    X, names, eval_set = _validation.tabular_input(X, init_model, eval_set)
    plan = None
    if categorical is None:
        refuse_categorical(X, who)
    else:
        pair = eval_set if isinstance(eval_set, (tuple, list)) else None  # not "oob"
        plan = _validation.categorical_plan(X, categorical[0], categorical[1], pair)
        if plan is not None:
            X = plan.X
            if plan.X_valid is not None:
                eval_set = (plan.X_valid,) + tuple(eval_set[1:])
    X = _validation.as_matrix(X, "X")
    classes = None
    if classify:
        # (a continued fit of class indices refuses mapped labels there: no silent relabelling)
        y, classes, eval_set = _validation.mapped_labels(y, eval_set, loss, n_outputs, task,
                                                         init_model,
                                                         n_rows=X.shape[0] if n_rows is None else n_rows)
    return Tabular(X, y, eval_set, model_lib.named(names),
                   None if classes is None else model_lib.Classes(classes), plan)


def host_fit(*values) -> bool:
    """Whether a fit may run its chunks as host-side calls (``Ctrl-C``, progress, callbacks,
    checkpoints): outside every JAX transformation, with no traced value among ``values`` (the
    caller's ``jax.vmap`` over a hyperparameter makes it one traced program)."""
    return _validation.host_rounds_possible() and not any(
        _validation.is_traced(v) for v in jax.tree_util.tree_leaves(values))


def batched_raw_scores(trees: tree_lib.ObliviousTrees, baselines, X, n_lead: int) -> jax.Array:
    """Raw scores of ensembles batched over ``n_lead`` leading axes: ``(*lead, n, K)``.

    Ensemble ``i`` is ``baselines[i] + jboost.tree.predict_raw(trees[i], X)`` (its trees summed
    from 0 in order, the baseline added last: the order of :func:`jboost.predict`).
    """
    fn = lambda t, b: b + tree_lib.predict_raw(t, X)
    for _ in range(n_lead):
        fn = jax.vmap(fn)
    return fn(trees, baselines)


def rounds_first(trees: tree_lib.ObliviousTrees) -> tree_lib.ObliviousTrees:
    """``(P, n_rounds, T, ...)`` trees of ``P`` ensembles -> ``(n_rounds, P * T, ...)``: round
    ``r`` holds every ensemble's round-``r`` trees, ensemble by ensemble."""

    def one(a):
        a = jnp.swapaxes(a, 0, 1)
        return a.reshape((a.shape[0], a.shape[1] * a.shape[2]) + a.shape[3:])

    return jax.tree_util.tree_map(one, trees)


def as_booster(trees: tree_lib.ObliviousTrees, borders, baseline, loss: losses_lib.Loss,
               classes: Optional[model_lib.Classes] = None,
               feature_names: Optional[model_lib.FeatureNames] = None) -> model_lib.Booster:
    """A sum of trees with leading axes ``(n_rounds, trees_per_round)`` as a
    :class:`jboost.Booster` (for its prediction and staged scan; no training curves: NaN), with
    the ensemble's ``classes`` and ``feature_names`` (so that its own predictions match a
    DataFrame's columns by name and return the class labels)."""
    nan = jnp.full((trees.features.shape[0],), jnp.nan, jnp.float32)
    return model_lib.Booster(trees=trees, borders=borders, baseline=baseline, loss=loss,
                             train_loss=nan, valid_loss=nan, classes=classes,
                             feature_names=feature_names)
