"""Model files: :func:`save` and :func:`load` for every fitted model type, versioned, checked, with
no pickle and no code executed on load. See docs/io.md.

Export for serving: ``jboost.io.to_onnx`` (:func:`jboost.io.onnx_export.to_onnx`; the ``onnx``
package, ``pip install jboost[onnx]``) and ``jboost.io.to_treelite``
(:func:`jboost.io.treelite_export.to_treelite`; the ``treelite`` package, ``pip install
jboost[treelite]``), each loaded when first used so that ``import jboost.io`` needs neither
package. See docs/guide/model-serving.md.
"""

import importlib
from typing import Any

from jboost.io.loader import load
from jboost.io.reader import (FORMAT, FORMAT_VERSION, HEADER, ModelFileError, checksum,
                              predict_numpy, read, read_header)
from jboost.io.writer import save

#: The names loaded on first use, and their modules (which import optional packages).
LAZY = {"to_onnx": "jboost.io.onnx_export", "to_treelite": "jboost.io.treelite_export"}


def __getattr__(name: str) -> Any:
    if name in LAZY:
        value = getattr(importlib.import_module(LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
