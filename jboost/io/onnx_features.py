"""The features a model's trees split on, as ONNX operators on its input columns: numeric columns
as they are, a categorical column (integer category codes as float32) as its one-hot indicators
(``Equal``, ``IsNaN``) or its target statistics (``LabelEncoder`` from each category to its
statistic, computed by :func:`jboost.data.categorical_stats.ctr_values` itself): the encoding of
:func:`jboost.data.categorical.encode` and :func:`jboost.data.categorical_stats.expand`."""

from __future__ import annotations

from typing import List

import numpy as np
from onnx import TensorProto

from jboost.data import categorical_stats
from jboost.io import serving

def column(g, x: str, j: int) -> str:
    """Column ``j`` of ``x`` as ``(n, 1)``."""
    return g.op("Gather", [x, g.const([j], np.int64)], axis=1)


def indicator(g, test: str) -> str:
    """A bool ``(n, 1)`` as float32 0/1."""
    return g.op("Cast", [test], to=TensorProto.FLOAT)


def host_features(g, spec, x: str) -> List[str]:
    """``(n, 1)`` pieces of the host features (:func:`jboost.io.serving.host_features`): numeric
    columns, one-hot indicators (a category's value ``==``; the missing category: NaN; an unseen
    value: all 0)."""
    columns, pieces = {}, []
    for f in serving.host_features(spec, "to_onnx"):
        if f.column not in columns:
            columns[f.column] = column(g, x, f.column)
        col = columns[f.column]
        if f.kind == "numeric":
            pieces.append(col)
        elif f.kind == "category":
            pieces.append(indicator(g, g.op("Equal", [col, g.const([f.value])])))
        else:
            pieces.append(indicator(g, g.op("IsNaN", [col])))
    return pieces


def ctr_table(cat) -> np.ndarray:
    """``(V_max + 2, J * K)`` the statistics jboost gives each ctr column's categories (rows
    ``0..V_j - 1``), a missing value (row ``V_j``) and an unseen one (row ``V_j + 1``)."""
    spec = cat.spec
    sizes = [len(spec.vocab[j]) for j in spec.ctr_columns]
    codes = np.full((max(sizes) + 2, len(sizes)), -1, np.int32)
    for i, (j, size) in enumerate(zip(spec.ctr_columns, sizes)):
        codes[:size, i] = np.arange(size)
        codes[size, i] = size if spec.missing[j] else -1
    return np.asarray(categorical_stats.ctr_values(cat, codes), np.float32)


def ctr_features(g, cat, x: str) -> List[str]:
    """``(n, 1)`` pieces of the ctr columns' statistics, column by column, ``K`` each."""
    spec = cat.spec
    table = ctr_table(cat)
    k_stats = spec.n_stats
    pieces = []
    for i, j in enumerate(spec.ctr_columns):
        vocab = serving.checked_vocab(spec, j, "to_onnx")
        if not vocab.size:
            raise ValueError(f"to_onnx: the ctr column {spec.input_name(j)!r} has no categories.")
        col = column(g, x, j)
        missing = g.op("IsNaN", [col])
        size = vocab.size
        for k in range(k_stats):
            values = table[:, i * k_stats + k]
            looked_up = g.op("LabelEncoder", [col], domain="ai.onnx.ml",
                             keys_floats=[float(v) for v in vocab],
                             values_floats=[float(v) for v in values[:size]],
                             default_float=float(values[size + 1]))
            pieces.append(g.op("Where", [missing, g.const([values[size]]), looked_up]))
    return pieces


def encoded_features(g, cat, x: str) -> str:
    """The name of the ``(n, n_features)`` features the trees split on: ``x`` itself for a model
    without categorical columns (``cat`` ``None``)."""
    if cat is None:
        return x
    pieces = host_features(g, cat.spec, x)
    if cat.spec.ctr_columns:
        pieces += ctr_features(g, cat, x)
    return g.op("Concat", pieces, axis=1)
