"""What the exporters for serving (:func:`jboost.io.to_onnx`, :func:`jboost.io.to_treelite`)
share, free of their packages: a checked model as groups of summed trees, its class-probability
link, and the features its trees split on as functions of its input columns (numeric columns and
one-hot indicators of integer category codes). Each error names the exporter (``who``) and the
fix. See docs/guide/model-serving.md."""

from __future__ import annotations

from typing import List, NamedTuple, Optional, Tuple

import jax
import numpy as np

from jboost.losses import links
from jboost.models import bagged, base, ecoc, forest, sums
from jboost.trees import family

#: The links exported, by function: each a class-probability link of ``(n, G, K)`` raw scores.
PROBABILITY_LINKS = {links.sigmoid_link: "sigmoid", links.adaboost_link: "adaboost",
                     links.softmax_link: "softmax", links.samme_link: "samme"}
#: The largest integer category code float32 holds exactly (with every integer below it).
MAX_EXACT_CODE = 1 << 24


class Ensemble(NamedTuple):
    """A model as ``G`` groups of trees summed into ``K`` outputs each: ``groups`` the flattened
    trees of each group, ``base`` ``(G, K)`` their constants, ``offset`` the label offset (or
    ``None``). Its raw scores are the mean over groups, plus the offset."""

    groups: List
    base: np.ndarray
    offset: Optional[np.ndarray]


def check_model(model, who: str) -> None:
    """Raise ``ValueError`` unless ``model`` is one fitted jboost model (no batch axes)."""
    base.check_model(model)
    if model.batch_shape:
        raise ValueError(f"{who} exports one model; this one has batch axes "
                         f"{model.batch_shape}: export each, e.g. "
                         "jax.tree_util.tree_map(lambda a: a[i], model).")


def ensemble_of(model, who: str) -> Ensemble:
    """The trees of a (checked, unbatched) model: each bag of bagged boosters a group (its
    probabilities are the mean of the bags'), every other model one sum of trees
    (:func:`jboost.models.sums.tree_sum`).

    Raises:
      ValueError: bagged boosters with categorical columns (each bag encodes its own way).
    """
    if isinstance(model, bagged.BaggedBoosters):
        if model.categorical is not None:
            raise ValueError(f"{who} cannot export bagged boosters with categorical columns: "
                             "each bag encodes the rows with its own target statistics. Export "
                             "a jboost.fit model, or encode the columns as numbers before "
                             "jboost.bagging.fit_bagged_boosters.")
        trees = model.best_trees()  # (B, R, T, ...)
        groups = [family.flatten_trees(jax.tree_util.tree_map(lambda a, b=b: a[b], trees))
                  for b in range(model.n_bags)]
        return Ensemble(groups, np.asarray(model.baseline, np.float32), None)
    try:
        sums.check_tree_sum(model)
        trees, constant, offset = sums.tree_sum(model)
    except TypeError as e:
        raise ValueError(f"{who} cannot export this {type(model).__name__}: {e}") from None
    offset = None if offset is None else np.asarray(offset)
    return Ensemble([trees], np.asarray(constant, np.float32)[None], offset)


def probability_link(model) -> Tuple[Optional[str], str]:
    """``(link name, why not)``: the link of the model's class probabilities as exported
    (``"identity"`` for a classification forest), or ``None`` and the reason it has none."""
    if isinstance(model, ecoc.ECOCBoosters):
        return None, ("ECOCBoosters have no class probabilities (jboost.predict_proba refuses "
                      "them; their classes are the nearest codeword)")
    if isinstance(model, forest.Forest):
        return (("identity", "") if model.is_classifier else
                (None, "a regression forest has no class probabilities"))
    if model.task not in base.CLASSIFICATION:
        return None, f"a {model.task!r} model has no class probabilities"
    link = getattr(model.loss.link, "__wrapped__", model.loss.link)
    if link not in PROBABILITY_LINKS:
        return None, (f"its loss {model.loss.name!r} has the link "
                      f"{getattr(link, '__name__', link)!r}, a Python function that an exported "
                      "model cannot express")
    return PROBABILITY_LINKS[link], ""


def n_inputs(model) -> int:
    """Columns of the rows the model predicts (before categorical columns are encoded)."""
    return int(getattr(model, "n_inputs", model.n_features))


def checked_vocab(spec, j: int, who: str) -> np.ndarray:
    """Column ``j``'s categories as float32, exactly.

    Raises:
      ValueError: string categories, or integer codes float32 does not hold exactly.
    """
    name = spec.input_name(j)
    if spec.vocab_type[j] != "int":
        raise ValueError(f"{who} cannot export the categorical column {name!r}: its categories "
                         "are strings, and the exported model reads float32 columns. Fit on "
                         "integer category codes (e.g. df[c].cat.codes, -1 as NaN) to export "
                         "the model.")
    vocab = np.asarray(spec.vocab[j], np.int64)
    if vocab.size and np.abs(vocab).max() > MAX_EXACT_CODE:
        raise ValueError(f"{who} cannot export the categorical column {name!r}: its category "
                         f"codes reach {int(np.abs(vocab).max())}, beyond the {MAX_EXACT_CODE} "
                         "float32 holds exactly. Fit on smaller codes (e.g. 0..V-1).")
    return vocab.astype(np.float32)


class Feature(NamedTuple):
    """A host feature the trees split on, as a function of input column ``column``: ``kind``
    ``"numeric"`` (the column itself), ``"category"`` (1 where the column equals ``value``, else
    0; NaN: 0) or ``"missing"`` (1 where the column is NaN, else 0)."""

    column: int
    kind: str
    value: np.float32


def host_features(spec, who: str) -> List[Feature]:
    """The host features of a categorical spec in the trees' order (numeric columns and one-hot
    indicators, column by column; the target-statistics features follow them), as
    :func:`jboost.data.categorical.encode` computes them.

    Raises:
      ValueError: a one-hot column of string categories, or of codes float32 cannot hold.
    """
    out = []
    zero = np.float32(0)
    for j, kind in enumerate(spec.kinds):
        if kind == "numeric":
            out.append(Feature(j, "numeric", zero))
        elif kind == "one_hot":
            out += [Feature(j, "category", v) for v in checked_vocab(spec, j, who)]
            if spec.missing[j]:
                out.append(Feature(j, "missing", zero))
    return out
