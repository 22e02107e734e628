"""Export of a fitted model for serving: :func:`to_onnx`, an ONNX graph whose ``raw_scores``
output is :func:`jboost.predict`'s and whose ``probabilities`` output is
:func:`jboost.predict_proba`'s, to float32 rounding (docs/guide/model-serving.md).

The graph: the input ``X`` ``(n, n_inputs)`` float32 (NaN: missing), categorical columns encoded
as the model encodes them (:mod:`jboost.io.onnx_features`), one ONNX-ML ``TreeEnsembleRegressor``
of every tree (:mod:`jboost.io.onnx_trees`) with the model's constant as its base values, then
plain operators: the mean over bags, the label offset, the link. A model it cannot reproduce
exactly raises ``ValueError`` naming what and the fix."""

from __future__ import annotations

import json
import os
from typing import Optional, Sequence, Tuple

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from jboost._version import __version__
from jboost.io import onnx_features, onnx_trees, serving
from jboost.models import base, ecoc

#: The ONNX-ML operator set the graph imports (``TreeEnsembleRegressor`` and ``LabelEncoder``
#: as of version 2; ONNX Runtime runs them all).
ML_OPSET = 3
#: The default (and the lowest) operator set of the plain operators.
DEFAULT_OPSET = 17
MIN_OPSET = 13
#: The outputs a graph may have.
OUTPUTS = ("raw_scores", "probabilities")


class Graph:
    """The nodes and constants of a graph under construction, with fresh value names."""

    def __init__(self, opset: int):
        self.opset, self.nodes, self.inits, self.count = opset, [], [], 0

    def name(self, what: str) -> str:
        self.count += 1
        return f"{what}_{self.count}"

    def const(self, value, dtype=np.float32) -> str:
        name = self.name("const")
        self.inits.append(numpy_helper.from_array(np.asarray(value, dtype), name))
        return name

    def op(self, op_type: str, inputs: Sequence[str], domain: str = "", out: Optional[str] = None,
           **attrs) -> str:
        out = out or self.name(op_type.lower())
        self.nodes.append(helper.make_node(op_type, list(inputs), [out], domain=domain, **attrs))
        return out

    def reduce_mean(self, x: str, axis: int, out: Optional[str] = None) -> str:
        """``ReduceMean`` over one axis, dropped (its axes an input from opset 18)."""
        if self.opset >= 18:
            return self.op("ReduceMean", [x, self.const([axis], np.int64)], out=out, keepdims=0)
        return self.op("ReduceMean", [x], out=out, axes=[axis], keepdims=0)


def apply_link(g: Graph, raw: str, link: str, keeps: bool, n_outputs: int, dtype) -> str:
    """Class probabilities ``(n, G, C)`` of raw scores ``(n, G, K)`` by plain operators, as
    :mod:`jboost.losses.links` computes them."""
    if link == "identity":
        return raw
    if link in ("softmax", "samme"):
        x = raw if link == "softmax" else g.op("Div", [raw, g.const(n_outputs - 1, dtype)])
        return g.op("Softmax", [x], axis=-1)
    x = raw if link == "sigmoid" else g.op("Mul", [raw, g.const(2.0, dtype)])
    p = g.op("Sigmoid", [x])
    if keeps:  # multi-label: P(label k = 1), (n, C)
        return p
    return g.op("Concat", [g.op("Sub", [g.const(1.0, dtype), p]), p], axis=-1)


def checked_outputs(model, outputs) -> Tuple[Tuple[str, ...], Optional[str]]:
    """``(outputs, probability link)``: the outputs asked for (default: both for a model with
    class probabilities, else ``raw_scores``).

    Raises:
      ValueError: an unknown output, or ``probabilities`` of a model without exportable ones.
    """
    link, why = serving.probability_link(model)
    if outputs is None:
        if link is None and model.task in base.CLASSIFICATION and not isinstance(
                model, ecoc.ECOCBoosters):
            raise ValueError(f"to_onnx cannot export this model's class probabilities: {why}. "
                             "Pass outputs=('raw_scores',) to export the raw scores, and apply "
                             "the link to them yourself.")
        outputs = ("raw_scores", "probabilities") if link is not None else ("raw_scores",)
    outputs = (outputs,) if isinstance(outputs, str) else tuple(outputs)
    unknown = [o for o in outputs if o not in OUTPUTS]
    if unknown or not outputs or len(set(outputs)) != len(outputs):
        raise ValueError(f"outputs={outputs!r}: give distinct names among {OUTPUTS}.")
    if "probabilities" in outputs and link is None:
        raise ValueError(f"outputs asks for 'probabilities', but {why}: pass "
                         "outputs=('raw_scores',).")
    return outputs, link


def tree_ensemble(g: Graph, features: str, ens: serving.Ensemble) -> str:
    """The ``TreeEnsembleRegressor`` of every group's trees: ``(n, G * K)`` scores, group ``i``
    in targets ``i * K ..``, each plus its constant."""
    k = ens.base.shape[-1]
    nodes = onnx_trees.Nodes()
    for i, trees in enumerate(ens.groups):
        onnx_trees.add_trees(nodes, trees, i * k)
    attrs = {f"nodes_{key}": v for key, v in nodes.nodes.items()}
    attrs.update({f"target_{key}": v for key, v in nodes.targets.items()})
    return g.op("TreeEnsembleRegressor", [features], domain="ai.onnx.ml",
                n_targets=int(ens.base.size), base_values=[float(v) for v in ens.base.ravel()],
                aggregate_function="SUM", post_transform="NONE", **attrs)


def to_onnx(model, *, outputs: Optional[Sequence[str]] = None, opset: int = DEFAULT_OPSET,
            path=None) -> onnx.ModelProto:
    """An ONNX model of a fitted jboost model, for serving (ONNX Runtime; docs/guide/model-serving.md).

    The graph takes ``X`` ``(n, n_inputs)`` float32 (NaN: missing; a categorical column as its
    integer category codes) and returns ``raw_scores``, :func:`jboost.predict`'s ``(n,)`` or
    ``(n, K)``, and ``probabilities``, :func:`jboost.predict_proba`'s ``(n, n_classes)``, equal
    to float32 rounding (the trees sum in another order). Every split is exported exactly
    (jboost's side of a threshold, NaN direction and subnormal rule), every leaf value, constant
    and category table bit for bit. Boosters of every tree family (and the algorithms', stacked
    and ECOC ensembles), forests and bagged boosters export. ``X``'s columns are the model's
    input columns in its order (a DataFrame's: ``feature_names_in_``, also in the graph's
    metadata ``feature_names``, JSON; with the model type and task).

    Args:
      model: a fitted jboost model without batch axes.
      outputs: ``"raw_scores"`` and/or ``"probabilities"``; default: both for classification
        models, ``raw_scores`` for the others (and ECOC ensembles).
      opset: the ONNX operator set of the plain operators (13 or later).
      path: optional file to write the model to as well.

    Returns:
      The ``onnx.ModelProto`` (checked by ``onnx.checker``).

    Raises:
      ValueError: what cannot be exported exactly, naming it and the fix: a batched model, a
        custom tree family, a link that is a Python function (export ``outputs=("raw_scores",)``),
        string categories, bagged boosters with categorical columns, an unknown output.
      TypeError: ``model`` is not a fitted jboost model.
    """
    serving.check_model(model, "to_onnx")
    if not MIN_OPSET <= int(opset) <= onnx.defs.onnx_opset_version():
        raise ValueError(f"opset={opset}: give an ONNX operator set from {MIN_OPSET} to "
                         f"{onnx.defs.onnx_opset_version()} (this onnx's newest).")
    outputs, link = checked_outputs(model, outputs)
    ens = serving.ensemble_of(model, "to_onnx")
    g = Graph(int(opset))
    features = onnx_features.encoded_features(g, getattr(model, "categorical", None), "X")
    k = ens.base.shape[-1]
    scores = g.op("Reshape", [tree_ensemble(g, features, ens),
                              g.const([-1, len(ens.groups), k], np.int64)])
    dtype = np.float32
    if ens.offset is not None:  # added last, in the offset's dtype (jboost.models.base.add_offset)
        dtype = ens.offset.dtype
        scores = g.op("Add", [g.op("Cast", [scores], to=helper.np_dtype_to_tensor_dtype(dtype)),
                              g.const(ens.offset, dtype)])
    keeps = base.keeps_columns(model)
    results = []
    if "raw_scores" in outputs:
        squeeze = k == 1 and not keeps
        raw = g.reduce_mean(scores, 1, out=None if squeeze else "raw_scores")
        if squeeze:
            g.op("Squeeze", [raw, g.const([1], np.int64)], out="raw_scores")
        results.append(("raw_scores", dtype, ["n"] if squeeze else ["n", k]))
    if "probabilities" in outputs:
        proba = apply_link(g, scores, link, keeps, k, dtype)
        g.reduce_mean(proba, 1, out="probabilities")
        results.append(("probabilities", dtype, ["n", None]))
    proto = assembled(g, model, results, serving.n_inputs(model))
    if path is not None:
        onnx.save_model(proto, os.fspath(path))
    return proto


def assembled(g: Graph, model, results, n_inputs: int) -> onnx.ModelProto:
    """The checked ``ModelProto`` of the graph's nodes, input ``X`` and ``results``."""
    outs = [helper.make_tensor_value_info(name, helper.np_dtype_to_tensor_dtype(np.dtype(dtype)),
                                          shape) for name, dtype, shape in results]
    graph = helper.make_graph(g.nodes, "jboost", [helper.make_tensor_value_info(
        "X", TensorProto.FLOAT, ["n", n_inputs])], outs, initializer=g.inits)
    proto = helper.make_model(graph, producer_name="jboost", producer_version=__version__,
                              opset_imports=[helper.make_opsetid("", g.opset),
                                             helper.make_opsetid("ai.onnx.ml", ML_OPSET)])
    if g.opset <= 17:  # IR version 8 (opset 17's): readable by ONNX Runtime releases of 2022 on
        proto.ir_version = min(proto.ir_version, 8)
    names = getattr(model, "feature_names", None)
    onnx.helper.set_model_props(proto, {
        "jboost_model_type": type(model).__name__, "task": str(model.task),
        "feature_names": json.dumps(None if names is None else [str(v) for v in names.values])})
    onnx.checker.check_model(proto)
    return proto

