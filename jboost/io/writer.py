"""Writing a model file: walking a model's pytree into a JSON structure and arrays, and save."""

from __future__ import annotations

import contextlib
import io
import json
import os
import threading
import uuid
from typing import Any, Dict, Mapping, Optional, Sequence

import numpy as np

from jboost._version import __version__
from jboost.io import reader, registry

def _is_namedtuple(x) -> bool:
    return isinstance(x, tuple) and hasattr(type(x), "_fields")


def _is_tree_family(x) -> bool:
    return _is_namedtuple(x) and hasattr(x, "leaf_index_raw") and hasattr(x, "leaf_values")


def _callable_record(f, what: str) -> Any:
    """A known jboost function by its qualified name; a user's function as ``{"custom": name}``."""
    if f is None:
        return None
    f_inner = getattr(f, "__wrapped__", f)  # a loss pinned by _validation (PinnedFn)
    name = registry.recorded_name(f_inner)
    if registry.registry()["callables"].get(name) is f_inner:
        return name
    return {"custom": str(getattr(f_inner, "__name__", what))}


class _Writer:
    """Walks a model, recording its static structure (JSON) and its arrays by key path."""

    def __init__(self):
        self.arrays: Dict[str, np.ndarray] = {}
        self.values: set = set()  # paths of Python numbers (stored in the header)
        self.classes = False  # whether the model holds class labels or feature names (version 3)
        self.categorical = False  # whether it holds categorical features (version 4)
        self.depthwise = False  # whether it holds depth-wise trees, node tables (version 5)

    def array(self, x, path: str):
        import jax
        if isinstance(x, jax.core.Tracer):
            raise TypeError(f"jboost.save needs a concrete model; {path or 'the model'} is a traced "
                            "value (save outside jax.jit / jax.vmap).")
        a = np.asarray(x)
        if a.dtype.name not in reader.DTYPES:
            raise TypeError(f"jboost.save cannot store {path} of dtype {a.dtype}; a model file holds "
                            f"arrays of {', '.join(reader.DTYPES)}.")
        self.arrays[path] = np.array(a, order="C", copy=True)  # (ascontiguousarray makes 0-d 1-d)
        return {"kind": "array", "path": path}

    def node(self, x, path: str):
        import jax
        reg = registry.registry()
        if x is None:
            return {"kind": "none"}
        if isinstance(x, (bool, int, float)):  # a Python number in a field: a pytree leaf
            self.values.add(path)
            return {"kind": "value", "value": x if isinstance(x, (bool, int)) else repr(x),
                    "type": type(x).__name__}
        if isinstance(x, reg["Loss"]):
            return self.loss(x, path)
        if isinstance(x, (jax.Array, np.ndarray, np.generic)):
            return self.array(x, path)
        if isinstance(x, reg["FeatureNames"]):  # static names: JSON strings in the header
            self.classes = True
            return {"kind": "feature_names", "names": [str(v) for v in x.values]}
        if isinstance(x, reg["CategoricalSpec"]):  # column kinds and vocabularies: JSON
            self.categorical = True
            return {"kind": "categorical_spec", "spec": x.to_json()}
        if isinstance(x, reg["Classes"]):  # static labels: JSON values in the header
            self.classes = True
            return {"kind": "classes", "labels": [v if isinstance(v, (str, bool, int)) else repr(float(v))
                                                  for v in x.labels],
                    "dtype": x.array.dtype.kind}
        if isinstance(x, reg["Settings"]):  # arrays by key path; names (static) in the header
            return {"kind": "settings",
                    "items": {k: self.array(x.arrays[k], f"{path}[{k!r}]") for k in sorted(x.arrays)},
                    "names": {k: str(v) for k, v in sorted(x.names.items())}}
        if _is_namedtuple(x):
            cls = type(x)
            fields = {f: self.node(getattr(x, f), f"{path}.{f}") for f in cls._fields}
            if cls.__name__ == "DepthwiseTrees" and reg["families"].get(cls.__name__) is cls:
                self.depthwise = True
            for kind in ("models", "nested", "families"):
                if reg[kind].get(cls.__name__) is cls:
                    return {"kind": "namedtuple", "type": cls.__name__, "fields": fields}
            if _is_tree_family(x):
                return {"kind": "tree_family", "class": cls.__name__, "module": cls.__module__,
                        "fields": fields}
            raise TypeError(f"jboost.save does not know {path or 'the model'} of type "
                            f"{registry.qualified_name(cls)}: a model file holds {sorted(reg['models'])} "
                            "(and tree families with leaf_index_raw).")
        if isinstance(x, Mapping):
            keys = list(x.keys())
            if not all(isinstance(k, str) for k in keys):
                raise TypeError(f"jboost.save needs string keys in {path}; got {keys}.")
            return {"kind": "dict",
                    "items": {k: self.node(x[k], f"{path}[{k!r}]") for k in sorted(keys)}}
        raise TypeError(f"jboost.save cannot store {path or 'the model'} of type "
                        f"{type(x).__name__}: a model file holds arrays, dicts of arrays, losses "
                        "and the known model classes.")

    def loss(self, loss, path: str):
        domains = {k: [repr(float(v.lo)), repr(float(v.hi)), bool(v.lo_open), bool(v.hi_open)]
                   for k, v in loss.domains.items()}
        params = {k: self.node(loss.params[k], f"{path}.params[{k!r}]") for k in sorted(loss.params)}
        return {"kind": "loss", "name": str(loss.name),
                "fn": _callable_record(loss.fn, "fn"), "link": _callable_record(loss.link, "link"),
                "baseline": _callable_record(loss.baseline, "baseline"),
                "n_outputs": None if loss.n_outputs is None else int(loss.n_outputs),
                "task": loss.task, "hessian": loss.hessian, "leaf_refit": loss.leaf_refit,
                "adaptive_huber_alpha": bool(loss.adaptive_huber_alpha), "domains": domains,
                "params": params,
                "label_columns": None if loss.label_columns is None else int(loss.label_columns),
                "per_column": bool(loss.per_column), "batch": bool(loss.batch),
                "hessian_diag": (loss.hessian_diag if not callable(loss.hessian_diag) else
                                 {"callable": _callable_record(loss.hessian_diag, "hessian_diag")}),
                "max_group": None if loss.max_group is None else int(loss.max_group),
                "n_probes": int(loss.n_probes)}


def save(model, path, *, feature_names: Optional[Sequence[str]] = None,
         metadata: Optional[Dict[str, Any]] = None) -> None:
    """Write a fitted model to ``path`` (a ``.npz`` model file; docs/io.md).

    Args:
      model: any fitted model of a registered model type (batch axes allowed).
      path: the file to write (written whole to a temporary file, then renamed into place).
      feature_names: optional ``n_features`` names, kept in the header
        (:func:`jboost.io.reader.read_header`); default: the model's own, if any.
      metadata: optional JSON-serialisable dict kept in the header.

    Raises:
      TypeError: ``model`` is not a known model type, or holds something a file cannot store
        (a traced value, an object array).
      ValueError: the model's arrays are inconsistent (its ``check_structure``: the file would
        not load), or ``feature_names`` has the wrong length.
    """
    import jax

    reg = registry.registry()
    name = type(model).__name__
    if reg["models"].get(name) is not type(model):
        raise TypeError(f"jboost.save takes a fitted model ({', '.join(sorted(reg['models']))}); "
                        f"got {registry.qualified_name(type(model))}.")
    writer = _Writer()
    structure = writer.node(model, "")
    # Every leaf of the model's pytree must be in the file: a model class that gained a field
    # this module does not walk would otherwise lose it silently.
    leaves = {jax.tree_util.keystr(p) for p, _ in jax.tree_util.tree_flatten_with_path(model)[0]}
    if leaves != set(writer.arrays) | writer.values:
        raise TypeError(f"jboost.save walked the arrays {sorted(writer.arrays)} but the {name} "
                        f"pytree has {sorted(leaves)}: io.py does not know this model's layout.")
    moved_borders = _checked_structure(model)
    own = getattr(model, "feature_names", None)
    if feature_names is None and own is not None:
        feature_names = list(own.values)
    if feature_names is not None:
        feature_names = [str(f) for f in feature_names]
        n_inputs = getattr(model, "n_inputs", model.n_features)  # columns given (categorical)
        if len(feature_names) != n_inputs:
            raise ValueError(f"feature_names has {len(feature_names)} names; the model has "
                             f"{n_inputs} {'input columns' if n_inputs != model.n_features else 'features'}.")
    if metadata is not None:
        try:
            metadata = json.loads(json.dumps(metadata))
        except (TypeError, ValueError) as e:
            raise TypeError(f"metadata must be JSON-serialisable: {e}") from None
    header = {
        "format": reader.FORMAT,
        "format_version": (reader.FORMAT_VERSION if writer.depthwise else 4 if writer.categorical
                           else 3 if writer.classes else 2),
        "jboost_version": __version__,
        "model_type": name, "n_features": int(model.n_features),
        "batch_shape": [int(s) for s in model.batch_shape], "n_stages": int(model.n_stages),
        "task": str(model.task), "feature_names": feature_names, "metadata": metadata,
        "settings": _settings_summary(getattr(model, "settings", None), reg["Settings"]),
        "structure": structure, "moved_borders": moved_borders,
        "arrays": {k: {"dtype": a.dtype.name, "shape": list(a.shape)} for k, a in writer.arrays.items()},
    }
    header["checksum"] = reader.checksum(header, writer.arrays)
    members = dict(writer.arrays)
    members[reader.HEADER] = np.frombuffer(json.dumps(header, sort_keys=True).encode(), np.uint8)
    buf = io.BytesIO()
    np.savez(buf, **members)
    _write_atomically(os.fspath(path), buf.getvalue())


def _checked_structure(model) -> bool:
    """Whether some split's float border is not the bin border its threshold names (a
    fine-tuned model's moved thresholds: the header's ``moved_borders``, which the loader reads to
    check the borders exactly or within their bins), after the model type's structure checks
    (``check_structure``: a model that would not load is not written)."""
    check = getattr(model, "check_structure", None)
    if check is None:
        return False
    try:
        check(exact_borders=True)
        return False
    except ValueError:
        pass
    try:
        check(exact_borders=False)
    except ValueError as e:
        raise ValueError(f"jboost.save cannot write this {type(model).__name__}: its arrays are "
                         f"inconsistent ({e}), so the file would not load.") from None
    return True


def _write_atomically(path: str, data: bytes) -> None:
    """Write ``data`` to a temporary file of its own beside ``path`` (the same file system; a name
    unique to this writer -- process, thread and a random part -- created exclusively, so that
    several threads or processes saving to one path never share one; the umask's mode), then
    rename it into place: a reader sees the old file or one new file, whole."""
    tmp = f"{path}.{os.getpid()}.{threading.get_ident()}.{uuid.uuid4().hex[:12]}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o666)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _settings_summary(settings, settings_cls) -> Optional[Dict[str, Any]]:
    """A model's :class:`jboost.models.metadata.Settings` as readable JSON values; ``None`` for a
    model without them."""
    if not isinstance(settings, settings_cls) or not len(settings):
        return None
    out: Dict[str, Any] = {k: _readable(np.asarray(v)) for k, v in settings.arrays.items()}
    out.update(settings.names)
    return dict(sorted(out.items()))


def _readable(a: np.ndarray) -> Any:
    """``a.tolist()``, with floats written as their shortest decimal of ``a``'s precision
    (float32 ``0.3`` reads ``0.3``, not ``0.30000001192092896``; it converts back exactly)."""
    if a.dtype.kind != "f":
        return a.tolist()
    return np.array([float(str(v)) for v in a.ravel()], np.float64).reshape(a.shape).tolist()
