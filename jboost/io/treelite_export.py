"""Export of a fitted model for serving: :func:`to_treelite`, a `Treelite
<https://treelite.readthedocs.io>`_ model whose raw margin (``treelite.gtil.predict(...,
pred_margin=True)``) is :func:`jboost.predict`'s and whose default prediction applies the
model's link as jboost does (class probabilities, a Poisson mean), to float32 rounding
(docs/guide/model-serving.md).

The model: every tree of the model (:mod:`jboost.io.tree_walk`) with float32 thresholds and
leaves, its constant (and label offset) as the base scores, its link as the postprocessor. A
categorical column one-hot encoded becomes tests of its integer codes (``x == code``; the
missing category: ``x`` is NaN); target statistics, which need a lookup table, have no Treelite
test, and a model with them is refused (:func:`jboost.io.to_onnx` exports them). A model it
cannot reproduce exactly raises ``ValueError`` naming what and the fix."""

from __future__ import annotations

import os
from typing import List, NamedTuple, Optional

import numpy as np
import treelite
from treelite import model_builder

from jboost.io import serving, tree_walk
from jboost.losses import links
from jboost.models import base, ecoc

WHO = "to_treelite"
#: The Treelite postprocessor of each class-probability link of
#: :func:`jboost.io.serving.probability_link` (SAMME's ``softmax(f / (K - 1))`` has none).
PROBABILITY_POSTPROCESSORS = {
    "sigmoid": model_builder.PostProcessorFunc("sigmoid"),
    "adaboost": model_builder.PostProcessorFunc("sigmoid", sigmoid_alpha=2.0),
    "softmax": model_builder.PostProcessorFunc("softmax"),
    "identity": model_builder.PostProcessorFunc("identity_multiclass")}
#: The Treelite postprocessor of each other link jboost's :func:`jboost.predict_mean` applies.
MEAN_POSTPROCESSORS = {links.identity_link: "identity", links.exp_link: "exponential"}


class Layout(NamedTuple):
    """Where a model's ``K`` raw scores go in Treelite's ``(num_target, num_class)`` output:
    ``classes`` one target of ``K`` classes (multiclass), else ``K`` targets of one class."""

    k: int
    classes: bool
    task_type: str


def layout_of(k: int, link: Optional[str]) -> Layout:
    """The target / class layout of a model of ``k`` raw scores whose probability link is
    ``link`` (``None``: it has none)."""
    classes = k > 1 and link in ("softmax", "samme", "identity")
    task = ("kMultiClf" if classes else "kBinaryClf" if link in ("sigmoid", "adaboost")
            else "kRegressor")
    return Layout(k, classes, task)


def refused(what: str) -> ValueError:
    """The error of a link Treelite's postprocessors cannot express, naming the fix."""
    return ValueError(f"{WHO} cannot export {what}. Pass raw_scores=True to export the raw "
                      "scores (the identity postprocessor), and apply the link to them yourself.")


def postprocessor(model, n_groups: int, lay: Layout, raw_scores: bool) -> model_builder.PostProcessorFunc:
    """The postprocessor that turns the summed raw scores into what jboost predicts with the
    model's link: :func:`jboost.predict_proba`'s class probabilities for a classification model,
    :func:`jboost.predict_mean` for the others (the identity: raw scores).

    Raises:
      ValueError: a link Treelite has no postprocessor for (a Python function, SAMME's scaled
        softmax, a distribution's mean, the mean of several bags' probabilities).
    """
    identity = model_builder.PostProcessorFunc("identity_multiclass" if lay.classes else "identity")
    if raw_scores or isinstance(model, ecoc.ECOCBoosters):
        return identity
    if model.task in base.CLASSIFICATION:
        link, why = serving.probability_link(model)
        if link is None:
            raise refused(f"this model's class probabilities: {why}")
        if link == "samme":
            raise refused("SAMME's class probabilities, softmax(f / (K - 1)): Treelite's softmax "
                          "has no scale (jboost.io.to_onnx exports them)")
        if n_groups > 1 and link != "identity":
            raise refused(f"the class probabilities of {n_groups} bagged boosters: jboost "
                          "averages the bags' probabilities, a Treelite postprocessor applies "
                          "its link to the averaged raw scores (jboost.io.to_onnx exports them)")
        return PROBABILITY_POSTPROCESSORS[link]
    loss = getattr(model, "loss", None)
    link = links.identity_link if loss is None else getattr(loss.link, "__wrapped__", loss.link)
    if link not in MEAN_POSTPROCESSORS:
        raise refused(f"the predictions of the loss {loss.name!r}: Treelite has no postprocessor "
                      f"for its link {getattr(link, '__name__', link)!r}")
    return identity if link is links.identity_link else model_builder.PostProcessorFunc("exponential")


def features_of(model) -> Optional[List[serving.Feature]]:
    """The features the trees split on as functions of the input columns, ``None`` for a model
    without categorical columns (its features are its columns).

    Raises:
      ValueError: a column encoded by target statistics, or by string categories.
    """
    cat = getattr(model, "categorical", None)
    if cat is None:
        return None
    if cat.spec.ctr_columns:
        names = [cat.spec.input_name(j) for j in cat.spec.ctr_columns]
        raise ValueError(f"{WHO} cannot export the categorical columns {names}: they are encoded "
                         "by target statistics, a lookup table of each category's statistic that "
                         "Treelite's tests cannot express. Export with jboost.io.to_onnx (which "
                         "exports the table), or fit with a one_hot_max_size above their number "
                         "of categories (one-hot columns export).")
    return serving.host_features(cat.spec, WHO)


def goes_left(s: tree_walk.Split, indicator: int) -> bool:
    """Whether a 0/1 indicator feature goes left at split ``s``."""
    return bool(indicator <= s.threshold if s.op == "<=" else indicator < s.threshold)


def add_split(builder: model_builder.ModelBuilder, s: tree_walk.Split,
              features: Optional[List[serving.Feature]]) -> None:
    """The numerical test of split ``s`` on the input columns: the split itself on a numeric
    feature; on a one-hot indicator, ``x == code`` (true: the side of indicator 1; NaN: the side
    of 0) or, for the missing category, ``x <= inf`` (false, NaN: the side of 1); a split sending
    both indicator values one way, a test every value passes or fails."""
    column, op, threshold, default_left, left, right = (s.feature, s.op, float(s.threshold),
                                                        s.default_left, s.left, s.right)
    f = None if features is None else features[s.feature]
    if f is not None:
        column = f.column
    if f is not None and f.kind != "numeric":
        go0, go1 = (s.left if goes_left(s, i) else s.right for i in (0, 1))
        if go0 == go1:  # every value, NaN included, goes one way
            op, threshold, default_left = ("<=", np.inf, True) if go0 == s.left else ("<", -np.inf, False)
        elif f.kind == "category":
            op, threshold, default_left, left, right = "==", float(f.value), False, go1, go0
        else:
            op, threshold, default_left, left, right = "<=", np.inf, False, go0, go1
    builder.numerical_test(column, threshold, default_left=default_left, opname=op,
                           left_child_key=left, right_child_key=right)


def add_tree(builder: model_builder.ModelBuilder, nodes: List[tree_walk.Node],
             features: Optional[List[serving.Feature]], n_groups: int) -> None:
    """One tree's nodes (root first), its leaves divided by ``n_groups`` (bagged boosters: the
    mean of the bags)."""
    builder.start_tree()
    for node in nodes:
        builder.start_node(node.node)
        if isinstance(node, tree_walk.Split):
            add_split(builder, node, features)
        else:
            values = node.values if n_groups == 1 else node.values / np.float32(n_groups)
            builder.leaf(float(values[0]) if values.size == 1 else [float(v) for v in values])
        builder.end_node()
    builder.end_tree()


def base_scores(ens: serving.Ensemble) -> List[float]:
    """The ``K`` base scores: the groups' mean constant, plus the label offset."""
    scores = np.mean(ens.base.astype(np.float64), axis=0)
    if ens.offset is not None:
        scores = scores + np.asarray(ens.offset, np.float64)
    return [float(v) for v in np.broadcast_to(scores, ens.base.shape[-1:])]


def attributes(model) -> dict:
    """The model's type, task and input column names (JSON), stored with the Treelite model."""
    names = getattr(model, "feature_names", None)
    return {"jboost_model_type": type(model).__name__, "task": str(model.task),
            "feature_names": None if names is None else [str(v) for v in names.values]}


def builder_of(model, ens: serving.Ensemble, lay: Layout, post, trees: List) -> model_builder.ModelBuilder:
    """The builder of a model's ``trees`` (each a node list) in ``lay``'s layout."""
    k = lay.k
    metadata = model_builder.Metadata(
        num_feature=serving.n_inputs(model), task_type=lay.task_type, average_tree_output=False,
        num_target=1 if lay.classes else k, num_class=[k] if lay.classes else [1] * k,
        leaf_vector_shape=(1, k) if lay.classes else (k, 1))
    annotation = model_builder.TreeAnnotation(
        num_tree=len(trees), target_id=[0 if lay.classes or k == 1 else -1] * len(trees),
        class_id=[-1 if lay.classes else 0] * len(trees))
    return model_builder.ModelBuilder(
        threshold_type="float32", leaf_output_type="float32", metadata=metadata,
        tree_annotation=annotation, postprocessor=post, base_scores=base_scores(ens),
        attributes=attributes(model))


def to_treelite(model, *, raw_scores: bool = False, path=None) -> treelite.Model:
    """A Treelite model of a fitted jboost model, for serving (Treelite's GTIL, or any runtime
    that reads Treelite models; docs/guide/model-serving.md).

    It reads rows ``(n, n_inputs)`` float32 (NaN: missing; a categorical column as its integer
    category codes). ``treelite.gtil.predict(m, X, pred_margin=True)`` is :func:`jboost.predict`'s
    raw scores, ``(n, num_target, num_class)``: ``[:, 0, 0]`` for one output, ``(n, K)``
    reshaped otherwise. ``treelite.gtil.predict(m, X)`` applies the model's link: the class
    probabilities of :func:`jboost.predict_proba` (a binary model: the positive class's only,
    ``[:, 1]``), :func:`jboost.predict_mean` for a Poisson model, the raw scores for the others.
    Both equal jboost's to float32 rounding (the trees sum in another order): every split is
    exported exactly (jboost's side of a threshold, NaN direction and subnormal rule), every leaf
    value and constant bit for bit. Boosters of every tree family (and the algorithms', stacked
    and ECOC ensembles), forests and bagged boosters export.

    Args:
      model: a fitted jboost model without batch axes.
      raw_scores: export the identity postprocessor (the default prediction is the raw scores),
        for a link Treelite cannot express.
      path: optional file to write the model to as well (``treelite.Model.serialize``).

    Returns:
      The ``treelite.Model``; its ``attributes`` hold jboost's model type, task and input column
      names.

    Raises:
      ValueError: what cannot be exported exactly, naming it and the fix: a batched model, a
        custom tree family, a link Treelite has no postprocessor for (a Python function, SAMME's,
        a distribution's mean, the mean of bagged boosters' probabilities: pass
        ``raw_scores=True``), columns encoded by
        target statistics (export with :func:`jboost.io.to_onnx`), string categories, bagged
        boosters with categorical columns.
      TypeError: ``model`` is not a fitted jboost model.
    """
    serving.check_model(model, WHO)
    ens = serving.ensemble_of(model, WHO)
    features = features_of(model)
    n_groups = len(ens.groups)
    lay = layout_of(int(ens.base.shape[-1]), serving.probability_link(model)[0])
    post = postprocessor(model, n_groups, lay, raw_scores)
    trees = [t for group in ens.groups for t in tree_walk.tree_nodes(group, WHO)]
    builder = builder_of(model, ens, lay, post, trees)
    for nodes in trees:
        add_tree(builder, nodes, features, n_groups)
    result = builder.commit()
    if path is not None:
        result.serialize(os.fspath(path))
    return result
