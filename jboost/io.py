"""Model files: :func:`save` and :func:`load` for every fitted model type, versioned, checked,
with no pickle and no code executed on load.

A model file is a NumPy ``.npz`` archive (a zip of ``.npy`` arrays, written by ``np.savez`` and
read by ``np.load(..., allow_pickle=False)``, so an object array in a file is refused rather than
unpickled). It holds

* every array of the model, named by its pytree key path (``jax.tree_util.keystr``:
  ``.trees.leaf_values``, ``.loss.params['alpha']``, ``.info['coef']``), bit for bit;
* one JSON header (the uint8 member ``__header__``): the format name and version
  (:data:`FORMAT_VERSION`), the jboost version, the model type (a name from the registry of the
  known model classes: ``Booster``, ``Forest``, ``BaggedBoosters``, ``StackedBoosters``,
  ``ECOCBoosters``), the static part of the model and of its nested pytrees (field names; for
  each :class:`jboost.Loss` its name, ``n_outputs``, ``task``, ``hessian``, ``leaf_refit``,
  domains, the names of its function, link and baseline, and its label columns, per-column and
  batch-objective settings (``label_columns``, ``per_column``, ``batch``, ``hessian_diag``,
  ``max_group``, ``n_probes``; absent in older files: their defaults); the tree family's class), the
  dtype and shape of every array, the model's ``n_features``, ``batch_shape``, ``n_stages`` and
  ``task``, optional ``feature_names`` and user ``metadata``, the fit's ``settings`` (a
  Booster's :class:`jboost.model.Settings` as JSON values: ``{"learning_rate": 0.3, "depth":
  3, "key": [0, 7], "colsample_by": "level", ...}``, lists for a batch of models; ``None`` for
  models without them), and a SHA-256 checksum over the header and every array's bytes,
  verified on load.

The model is rebuilt from the registry (``Booster(**fields)``), never from a pickled treedef.
Built-in losses (those of :mod:`jboost.losses`, by name with their saved parameters, and the
classical algorithms' losses) and the built-in tree family load by themselves. A custom loss
function, link or baseline, or a custom tree family, is code, which a model file does not hold:
it is recorded by name and must be passed to :func:`load` (``loss=``, ``tree_family=``); the
error says exactly what to pass.

A file that is truncated, corrupted, edited, of an unknown model type or of a newer format
raises :class:`ModelFileError` (a ``ValueError``) naming the problem; the arrays of a file whose
checksum matched are also checked against the model's structure (dtypes, shapes, feature
indices) before the model is returned.

**Without jax.** This module imports only the standard library and NumPy at import time (jax and
the rest of jboost are imported inside :func:`save` and :func:`load`), so the file can be copied
alone to a machine with NumPy only: :func:`read` checks and reads a model file into NumPy arrays
and :func:`predict_numpy` predicts the raw scores of a ``Booster`` of oblivious trees from it,
equal bit for bit to :func:`jboost.predict` (float32 sums in the same order) in the tests.

References: the oblivious-tree layout (CatBoost's model export: per level a feature and a
border, ``2**D`` leaf values; Prokhorenkova et al. 2018) is what :func:`predict_numpy` applies.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
from typing import Any, Dict, Mapping, Optional, Sequence

import numpy as np

FORMAT = "jboost-model"
FORMAT_VERSION = 5
# Format versions: 1, the first; 2 adds Booster.settings (a "settings" node: arrays and names)
# and the header's "settings" summary; 3 adds Booster.classes (a "classes" node: the class labels
# of a model fitted on mapped labels, in the header as JSON values, no arrays) and
# Booster.feature_names (a "feature_names" node). Every version up
# to FORMAT_VERSION loads (a version-1 Booster gets settings {}, a version-2 one classes None,
# the fields' defaults). A model without classes is written as version 2, which the jboost
# versions before classes existed read as well; one with classes as version 3, which they
# refuse (rather than predict class indices for labels, or match columns by position).
# 4 adds Booster.categorical (a "Categorical" namedtuple: the final target statistics' arrays, and
# a "categorical_spec" node: column kinds and vocabularies as JSON); only a model with
# categorical features is written as version 4 (older jboost versions refuse it rather than
# read string columns by position).
# 5 changes DepthwiseTrees into a node table (fields children and level_counts; N node slots, N + 1
# leaves, jboost.depthwise); a model with depth-wise trees is written as version 5 (older jboost
# versions refuse it rather than read a table as a heap). A file of versions 1-4 holds depth-wise
# trees in the dense heap layout (2**D - 1 rules, 2**D leaves, no children or level_counts): it
# loads, converted by jboost.depthwise.from_dense (the same predictions).
HEADER = "__header__"

# The dtypes a model file may hold (no object, string or structured arrays).
_DTYPES = ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
           "float16", "float32", "float64")


class ModelFileError(ValueError):
    """A model file that cannot be read: not a jboost model file, truncated, corrupted, edited
    (checksum), of an unknown model type, of a newer format version, or with arrays that do
    not fit the model's structure."""


# --------------------------------------------------------------------------------------------
# The registry of known classes and functions (built lazily: importing jax is deferred).
# --------------------------------------------------------------------------------------------

_REGISTRY_CACHE: Dict[str, Any] = {}


def _qualified(obj) -> str:
    return f"{getattr(obj, '__module__', '?')}.{getattr(obj, '__qualname__', getattr(obj, '__name__', '?'))}"


def _registry() -> Dict[str, Any]:
    """The known classes and functions: ``models`` (the model types by name), ``families`` (the
    built-in tree families), ``nested`` (other pytrees inside models), ``callables`` (every
    function of a built-in loss by qualified name) and ``Loss``."""
    if _REGISTRY_CACHE:
        return _REGISTRY_CACHE
    from jboost import categorical
    from jboost import depthwise
    from jboost import _validation
    from jboost import losses as losses_lib
    from jboost import model as model_lib
    from jboost import objectives
    from jboost import tree as tree_lib
    from jboost.algorithms import additive_logistic
    from jboost.bagging import boosters
    from jboost.bagging import forest
    from jboost.combine import ecoc
    from jboost.combine import linear
    from jboost.combine import stacking

    models = {"Booster": model_lib.Booster, "Forest": forest.Forest,
              "BaggedBoosters": boosters.BaggedBoosters,
              "StackedBoosters": stacking.StackedBoosters, "ECOCBoosters": ecoc.ECOCBoosters}
    # Every function of a built-in loss (the per-sample function, its link and its baseline),
    # read off the constructors, plus the links and baselines a Loss may name.
    built_in = [losses_lib.squared_error(), losses_lib.absolute_error(), losses_lib.huber(),
                losses_lib.huber(alpha=0.9), losses_lib.quantile(), losses_lib.binomial_deviance(),
                losses_lib.exponential(), losses_lib.multinomial_deviance(),
                losses_lib.samme_exponential(), losses_lib.poisson(),
                additive_logistic.logit_deviance(), objectives.cox("breslow"),
                objectives.cox("efron"), objectives.ranking("softmax"),
                objectives.ranking("lambdarank")]
    fns = [f for loss in built_in for f in (loss.fn, loss.link, loss.baseline)]
    fns += [loss.hessian_diag for loss in built_in if callable(loss.hessian_diag)]
    fns += [losses_lib.identity_link, losses_lib.exp_link, losses_lib.sigmoid_link,
            losses_lib.adaboost_link, losses_lib.softmax_link, losses_lib.samme_link,
            losses_lib.mean_baseline, losses_lib.median_baseline, losses_lib.quantile_baseline,
            losses_lib.huber_baseline, losses_lib.logit_baseline, losses_lib.half_logit_baseline,
            losses_lib.log_freq_baseline, losses_lib.samme_baseline, losses_lib.log_mean_baseline]
    _REGISTRY_CACHE.update(
        models=models,
        families={cls.__name__: cls for cls in _validation.TREE_FAMILIES.values()},
        nested={"LinearModel": linear.LinearModel, "Categorical": categorical.Categorical},
        CategoricalSpec=categorical.CategoricalSpec,
        Settings=model_lib.Settings,
        Classes=model_lib.Classes,
        FeatureNames=model_lib.FeatureNames,
        callables={_qualified(f): f for f in fns if f is not None},
        Loss=losses_lib.Loss,
    )
    return _REGISTRY_CACHE


# --------------------------------------------------------------------------------------------
# Saving.
# --------------------------------------------------------------------------------------------


def _is_namedtuple(x) -> bool:
    return isinstance(x, tuple) and hasattr(type(x), "_fields")


def _is_tree_family(x) -> bool:
    return _is_namedtuple(x) and hasattr(x, "leaf_index_raw") and hasattr(x, "leaf_values")


def _callable_record(f, what: str) -> Any:
    """A known jboost function by its qualified name; a user's function as ``{"custom": name}``."""
    if f is None:
        return None
    f_inner = getattr(f, "__wrapped__", f)  # a loss pinned by _validation (PinnedFn)
    name = _qualified(f_inner)
    if _registry()["callables"].get(name) is f_inner:
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
        if a.dtype.name not in _DTYPES:
            raise TypeError(f"jboost.save cannot store {path} of dtype {a.dtype}; a model file holds "
                            f"arrays of {', '.join(_DTYPES)}.")
        self.arrays[path] = np.array(a, order="C", copy=True)  # (ascontiguousarray makes 0-d 1-d)
        return {"kind": "array", "path": path}

    def node(self, x, path: str):
        import jax
        reg = _registry()
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
                            f"{_qualified(cls)}: a model file holds {sorted(reg['models'])} "
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


def checksum(header: Dict[str, Any], arrays: Dict[str, np.ndarray]) -> str:
    """SHA-256 over the header (without its checksum, canonical JSON) and every array's name,
    dtype, shape and bytes, in name order."""
    h = hashlib.sha256()
    body = {k: v for k, v in header.items() if k != "checksum"}
    h.update(json.dumps(body, sort_keys=True, separators=(",", ":")).encode())
    for name in sorted(arrays):
        a = arrays[name]
        h.update(json.dumps([name, a.dtype.str, list(a.shape)]).encode())
        h.update(a.tobytes(order="C"))
    return "sha256:" + h.hexdigest()


def save(model, path, *, feature_names: Optional[Sequence[str]] = None,
         metadata: Optional[Dict[str, Any]] = None) -> None:
    """Write a fitted model to ``path`` (a ``.npz`` model file; see the module docstring).

    Args:
      model: any fitted model of the model protocol: a :class:`jboost.Booster` (from
        :func:`jboost.fit`, any algorithm, ``jax.vmap`` of them, or a sweep's ``models()``), a
        ``Forest``, ``BaggedBoosters``, ``StackedBoosters`` or ``ECOCBoosters``.
      path: the file to write (written whole to a temporary file, then renamed into place).
      feature_names: optional ``n_features`` names, kept in the header (:func:`read_header`);
        default: the model's own (``Booster.feature_names``, from a DataFrame), if any.
      metadata: optional JSON-serialisable dict kept in the header (e.g. the fit's settings).

    Raises:
      TypeError: ``model`` is not a known model type, or holds something a file cannot store
        (a traced value, an object array).
    """
    import jax
    import jboost

    reg = _registry()
    name = type(model).__name__
    if reg["models"].get(name) is not type(model):
        raise TypeError(f"jboost.save takes a fitted model ({', '.join(sorted(reg['models']))}); "
                        f"got {_qualified(type(model))}.")
    writer = _Writer()
    structure = writer.node(model, "")
    # Every leaf of the model's pytree must be in the file: a model class that gained a field
    # this module does not walk would otherwise lose it silently.
    leaves = {jax.tree_util.keystr(p) for p, _ in jax.tree_util.tree_flatten_with_path(model)[0]}
    if leaves != set(writer.arrays) | writer.values:
        raise TypeError(f"jboost.save walked the arrays {sorted(writer.arrays)} but the {name} "
                        f"pytree has {sorted(leaves)}: io.py does not know this model's layout.")
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
        "format": FORMAT,
        "format_version": (FORMAT_VERSION if writer.depthwise else 4 if writer.categorical
                           else 3 if writer.classes else 2),
        "jboost_version": jboost.__version__,
        "model_type": name, "n_features": int(model.n_features),
        "batch_shape": [int(s) for s in model.batch_shape], "n_stages": int(model.n_stages),
        "task": str(model.task), "feature_names": feature_names, "metadata": metadata,
        "settings": _settings_summary(getattr(model, "settings", None), reg["Settings"]),
        "structure": structure,
        "arrays": {k: {"dtype": a.dtype.name, "shape": list(a.shape)} for k, a in writer.arrays.items()},
    }
    header["checksum"] = checksum(header, writer.arrays)
    members = dict(writer.arrays)
    members[HEADER] = np.frombuffer(json.dumps(header, sort_keys=True).encode(), np.uint8)
    buf = io.BytesIO()
    np.savez(buf, **members)
    path = os.fspath(path)
    tmp = f"{path}.{os.getpid()}.tmp"  # beside the target (same file system), the umask's mode
    try:
        with open(tmp, "wb") as f:
            f.write(buf.getvalue())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def _settings_summary(settings, settings_cls) -> Optional[Dict[str, Any]]:
    """A model's :class:`jboost.model.Settings` as readable JSON values (numbers, booleans, lists
    for arrays with axes, strings for names); ``None`` for a model without them."""
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


# --------------------------------------------------------------------------------------------
# Reading (NumPy only).
# --------------------------------------------------------------------------------------------


def _fail(path, what: str) -> ModelFileError:
    return ModelFileError(f"{os.fspath(path)!s} is not a readable jboost model file: {what}")


def read(path):
    """Check a model file and read it with NumPy only: ``(header, arrays)``, the header dict and
    ``{key path: np.ndarray}``.

    Checks: a zip/npz archive, a JSON header of this format, a format version this jboost reads,
    no object arrays (``allow_pickle=False``), exactly the arrays the header lists with their
    dtypes and shapes, and the checksum. Raises :class:`ModelFileError` otherwise (and
    ``FileNotFoundError`` for a missing file).
    """
    with open(path, "rb") as f:
        data = f.read()
    if not data:
        raise _fail(path, "the file is empty.")
    if not data.startswith(b"PK"):
        raise _fail(path, "it is not a zip (.npz) archive.")
    try:
        npz = np.load(io.BytesIO(data), allow_pickle=False)
        names = set(npz.files)
    except Exception as e:  # noqa: BLE001 - any parse failure of untrusted bytes is a bad file
        raise _fail(path, f"the archive cannot be opened ({type(e).__name__}: {e}); the file is "
                          "truncated or corrupted.") from None
    with npz:
        if HEADER not in names:
            raise _fail(path, f"it has no {HEADER!r} member (not written by jboost.save).")
        header = _read_header(path, npz)
        listed = header["arrays"]
        missing = sorted(set(listed) - names)
        extra = sorted(names - set(listed) - {HEADER})
        if missing:
            raise _fail(path, f"the arrays {missing} listed in its header are missing.")
        if extra:
            raise _fail(path, f"it holds arrays {extra} that its header does not list.")
        arrays = {}
        for name, spec in listed.items():
            a = _member(path, npz, name)
            if a.dtype.name not in _DTYPES or a.dtype.name != spec.get("dtype") \
                    or list(a.shape) != spec.get("shape"):
                raise _fail(path, f"array {name!r} is {a.dtype.name} {list(a.shape)}; its header says "
                                  f"{spec.get('dtype')} {spec.get('shape')}.")
            arrays[name] = a
    if checksum(header, arrays) != header.get("checksum"):
        raise _fail(path, "its checksum does not match its contents: the file was corrupted or "
                          "edited after jboost.save wrote it.")
    return header, arrays


def _member(path, npz, name: str) -> np.ndarray:
    _check_member_size(path, npz, name)
    try:
        return npz[name]
    except ValueError as e:
        if "pickle" in str(e):
            raise _fail(path, f"array {name!r} is an object array, which would need pickle to read; "
                              "model files never hold one (refused, nothing was executed).") from None
        raise _fail(path, f"array {name!r} cannot be read ({e}).") from None
    except Exception as e:  # noqa: BLE001 - truncated or corrupted member bytes
        raise _fail(path, f"array {name!r} cannot be read ({type(e).__name__}: {e}); the file is "
                          "truncated or corrupted.") from None


def _check_member_size(path, npz, name: str) -> None:
    """The member's own ``.npy`` header (read before its data) declares a shape whose bytes the
    member holds: a forged header declaring a huge array is refused before anything is allocated."""
    try:
        info = npz.zip.getinfo(name + ".npy")
        with npz.zip.open(info) as f:
            version = np.lib.format.read_magic(f)
            read_header = (np.lib.format.read_array_header_1_0 if version == (1, 0)
                           else np.lib.format.read_array_header_2_0)
            shape, _, dtype = read_header(f, max_header_size=10000)
    except Exception as e:  # noqa: BLE001 - a corrupted member header
        raise _fail(path, f"array {name!r} cannot be read ({type(e).__name__}: {e}); the file is "
                          "truncated or corrupted.") from None
    n_bytes = int(np.prod(shape, dtype=np.float64)) * max(dtype.itemsize, 1)
    if n_bytes > info.file_size:
        raise _fail(path, f"array {name!r} declares shape {shape} ({n_bytes} bytes) but its member "
                          f"holds {info.file_size} bytes: truncated or forged.")


def _read_header(path, npz) -> Dict[str, Any]:
    raw = _member(path, npz, HEADER)
    if raw.dtype != np.uint8 or raw.ndim != 1:
        raise _fail(path, f"its header is a {raw.dtype} array of shape {raw.shape}, not JSON bytes.")
    try:
        header = json.loads(raw.tobytes().decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as e:
        raise _fail(path, f"its header is not valid JSON ({type(e).__name__}: {e}).") from None
    if not isinstance(header, dict) or header.get("format") != FORMAT:
        raise _fail(path, f"its header does not name the format {FORMAT!r}.")
    version = header.get("format_version")
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise _fail(path, f"its format version {version!r} is not a positive integer.")
    if version > FORMAT_VERSION:
        raise ModelFileError(
            f"{os.fspath(path)} was written by a newer jboost ({header.get('jboost_version')!r}) in "
            f"model file format version {version}; this jboost reads format versions up to "
            f"{FORMAT_VERSION}: upgrade jboost to load it.")
    arrays = header.get("arrays")
    if not isinstance(arrays, dict) or not all(
            isinstance(v, dict) and isinstance(v.get("shape"), list) for v in arrays.values()):
        raise _fail(path, "its header has no valid 'arrays' table.")
    return header


def read_header(path) -> Dict[str, Any]:
    """The checked header of a model file (model type, versions, ``n_features``, ``task``,
    ``feature_names``, ``metadata``, ...), NumPy only."""
    return read(path)[0]


def _frame_in_order(X, names):
    """A pandas DataFrame's columns in the order of the file's ``feature_names`` (matched by
    name, as :func:`jboost.predict` does; NumPy only); a missing or unexpected column is refused
    by name. A DataFrame for a model without names, and arrays, are taken by position."""
    if not (type(X).__module__.startswith("pandas") and hasattr(X, "columns")) or names is None:
        return X
    have = [str(c) for c in X.columns]
    missing = [n for n in names if n not in have]
    extra = [n for n in have if n not in set(names)]
    if missing or extra:
        raise ValueError(f"X's columns do not match the model's features: missing {missing[:10]}, "
                         f"unexpected {extra[:10]} (the model was fitted on {list(names)[:10]}).")
    return X.iloc[:, [have.index(n) for n in names]].to_numpy(dtype=np.float32, na_value=np.nan)


def predict_numpy(path_or_read, X) -> np.ndarray:
    """Raw scores of a ``Booster`` of oblivious trees from a model file, with NumPy only (no jax):
    ``(n,)`` for one output, ``(n, K)`` otherwise, as :func:`jboost.predict`.

    ``path_or_read`` is a path or the ``(header, arrays)`` of :func:`read`. Each tree's leaf is
    ``sum_d [x_{f_d} > border_d] << d`` (NaN: the level's missing direction); the trees' leaf
    values are added in float32 from zero in tree order and the baseline last: the order of
    jboost's prediction, so the result is bitwise :func:`jboost.predict`'s on CPU in the tests
    (subnormal inputs and borders compare as 0, as on XLA's CPU; a subnormal partial sum of
    leaf values, which XLA's CPU would flush to 0, is kept).
    Batched Boosters (``jax.vmap`` of fits, sweeps) get a leading batch axis. A DataFrame's
    columns are matched by the file's ``feature_names`` when it has them.
    """
    header, arrays = read(path_or_read) if not isinstance(path_or_read, tuple) else path_or_read
    fam = header["structure"].get("fields", {}).get("trees", {})
    if header["model_type"] != "Booster" or fam.get("type") != "ObliviousTrees":
        raise ValueError(f"predict_numpy reads Boosters of oblivious trees; this file holds a "
                         f"{header['model_type']} (use jboost.load and jboost.predict).")
    if header["structure"].get("fields", {}).get("categorical", {}).get("kind", "none") != "none":
        raise ValueError("predict_numpy reads models of numeric features; this one was fitted with "
                         "categorical features, whose encoding needs jboost: use jboost.load and "
                         "jboost.predict.")
    X = np.asarray(_frame_in_order(X, header.get("feature_names")), np.float32)
    if X.ndim != 2 or X.shape[1] != header["n_features"]:
        raise ValueError(f"X must be (n, {header['n_features']}); got shape {X.shape}.")
    # XLA's CPU compares subnormal floats as 0 (flush to zero): so do we.
    tiny = np.finfo(np.float32).tiny
    X = np.where(np.abs(X) < tiny, np.float32(0.0), X)
    feats = arrays[".trees.features"]
    borders = arrays[".trees.borders"]
    borders = np.where(np.abs(borders) < tiny, np.float32(0.0), borders)
    miss = arrays[".trees.missing_right"]
    leaves = arrays[".trees.leaf_values"]
    baseline = arrays[".baseline"]
    batch = tuple(header["batch_shape"])
    m = int(np.prod(batch, dtype=np.int64))
    depth = feats.shape[-1]
    feats = feats.reshape((m, -1, depth))
    borders = borders.reshape((m, -1, depth))
    miss = miss.reshape((m, -1, depth))
    leaves = leaves.reshape((m, -1) + leaves.shape[-2:])
    baseline = baseline.reshape((m, -1))
    # A model with early stopping predicts with its rounds 0..best_round (all trees of a round).
    n_trees = np.full((m,), feats.shape[1], np.int64)
    if arrays.get(".best_round") is not None:
        per_round = arrays[".trees.features"].shape[-2]
        n_trees = (arrays[".best_round"].reshape(m).astype(np.int64) + 1) * per_round
    out = np.empty((m, X.shape[0], baseline.shape[-1]), np.float32)
    weights = (1 << np.arange(depth)).astype(np.int64)
    for i in range(m):
        acc = np.zeros((X.shape[0], baseline.shape[-1]), np.float32)
        for t in range(int(min(n_trees[i], feats.shape[1]))):
            cols = X[:, feats[i, t]]                                     # (n, D)
            right = np.where(np.isnan(cols), miss[i, t], cols > borders[i, t])
            acc = acc + leaves[i, t][right.astype(np.int64) @ weights]
        out[i] = baseline[i] + acc
    if arrays.get(".offset") is not None:  # a label offset (Booster.offset), added last as predict does
        out = out + arrays[".offset"].reshape((m, 1, -1))
    out = out.reshape(batch + out.shape[1:])
    loss = header["structure"].get("fields", {}).get("loss", {})
    keeps = loss.get("label_columns") is not None and not loss.get("batch", False)
    return out[..., 0] if out.shape[-1] == 1 and not keeps else out


# --------------------------------------------------------------------------------------------
# Loading.
# --------------------------------------------------------------------------------------------


def load(path, loss=None, tree_family: Optional[type] = None):
    """Read a model written by :func:`save`: the same model type, every array bit for bit.

    Args:
      path: the model file.
      loss: the custom loss the model was fitted with, when the file records one (a custom loss
        function, link or baseline is code, which a file does not hold): the function
        ``loss(y, raw)`` or the :class:`jboost.Loss` (needed when its link or baseline is
        custom). Its parameters are the file's. Built-in losses need nothing.
      tree_family: the tree family class the model was fitted with, when it is not jboost's
        own (``jboost.fit(tree_family=...)``).

    Raises:
      ModelFileError: the file is not a readable model file (see :func:`read`), or its arrays
        do not fit its model type.
      ValueError: the file needs ``loss=`` or ``tree_family=`` (the message says which), or the
        one given does not match the file.
    """
    header, arrays = read(path)
    reg = _registry()
    model_type = header.get("model_type")
    if model_type not in reg["models"]:
        raise _fail(path, f"its model type {model_type!r} is not one this jboost knows "
                          f"({', '.join(sorted(reg['models']))}).")
    builder = _Builder(path, arrays, loss, tree_family, header.get("format_version"))
    try:
        model = builder.build(header.get("structure"), "")
    except RecursionError:
        raise _fail(path, "its structure is nested too deeply.") from None
    if type(model) is not reg["models"][model_type]:
        raise _fail(path, f"its structure is a {type(model).__name__}, its header says {model_type}.")
    if loss is not None and not builder.used_loss:
        raise ValueError(f"loss= was given, but the model in {os.fspath(path)} has only built-in "
                         "losses, which load by name: leave loss= out.")
    if tree_family is not None and not builder.used_family:
        raise ValueError(f"tree_family= was given, but the model in {os.fspath(path)} uses jboost's "
                         "own tree family: leave tree_family= out.")
    _check_model(path, header, model)
    return model


#: The fields of oblivious trees, and of depth-wise trees in the dense heap layout (format
#: versions 1-4), with their dtypes.
_RULE_DTYPES = {"features": "int32", "thresholds": "int32", "borders": "float32",
                "missing_right": "bool", "leaf_values": "float32", "gains": "float32"}


def _check_dtypes(path, fam, want) -> None:
    """Every field of ``fam`` (a NamedTuple or a dict) named in ``want`` has its dtype."""
    for f, dt in want.items():
        a = fam[f] if isinstance(fam, dict) else getattr(fam, f)
        if a.dtype != np.dtype(dt):
            raise _fail(path, f"trees.{f} is {a.dtype}, not {dt}.")


def _check_same_shape(path, fam, names, shape) -> None:
    for f in names:
        a = fam[f] if isinstance(fam, dict) else getattr(fam, f)
        if a.shape != shape:
            raise _fail(path, f"trees.{f} has shape {a.shape}; trees.features has {shape}.")


def _check_node_table(path, fam) -> None:
    """Depth-wise trees' node tables (:class:`jboost.depthwise.DepthwiseTrees`): dtypes, shapes
    (``N`` node slots, ``children (..., N, 2)``, ``N + 1`` leaf slots, ``level_counts (...,
    D)``) and children that name nodes after their parent or leaves in range, so that the walk
    reads only the table (a hostile file's indices would otherwise be clamped silently)."""
    _check_dtypes(path, fam, {**_RULE_DTYPES, "children": "int32", "level_counts": "int32"})
    shape = fam.features.shape
    if len(shape) < 2 or shape[-1] < 1:
        raise _fail(path, f"trees.features has shape {shape}; DepthwiseTrees need leading tree "
                          "axes and at least one node slot.")
    _check_same_shape(path, fam, ("thresholds", "borders", "missing_right", "gains"), shape)
    n_nodes, lead = shape[-1], shape[:-1]
    if fam.children.shape != shape + (2,):
        raise _fail(path, f"trees.children has shape {fam.children.shape}; DepthwiseTrees of "
                          f"{n_nodes} node slots need {shape + (2,)}.")
    lv = fam.leaf_values.shape
    if len(lv) != len(shape) + 1 or lv[:-2] != lead or lv[-2] != n_nodes + 1:
        raise _fail(path, f"trees.leaf_values has shape {lv}; DepthwiseTrees of {n_nodes} node "
                          f"slots need {lead + (n_nodes + 1,)} + (K,).")
    lc = fam.level_counts.shape
    if len(lc) != len(shape) or lc[:-1] != lead:
        raise _fail(path, f"trees.level_counts has shape {lc}; DepthwiseTrees of rule shape "
                          f"{shape} need {lead} + (depth,).")
    children = np.asarray(fam.children)
    parent = np.arange(n_nodes).reshape((n_nodes, 1))
    bad = np.where(children >= 0, (children <= parent) | (children >= n_nodes), children < -(n_nodes + 1))
    if bad.any():
        at = tuple(int(i) for i in np.argwhere(bad)[0])
        raise _fail(path, f"trees.children{list(at)} = {int(children[at])}: a child must be a "
                          f"node after its parent (< {n_nodes}) or a leaf ~l with l <= {n_nodes}.")
    # Every node a row can reach lies above level D (the walk takes D steps, then reads a leaf).
    depth = lc[-1]
    flat = children.reshape((-1, n_nodes, 2))
    rows = np.arange(flat.shape[0])[:, None]
    frontier = np.zeros((flat.shape[0], n_nodes), bool)
    frontier[:, 0] = True
    for _ in range(max(depth, 1)):
        kids = np.where(frontier[..., None] & (flat >= 0), flat, n_nodes).reshape(flat.shape[0], -1)
        frontier = np.zeros((flat.shape[0], n_nodes + 1), bool)
        frontier[rows, kids] = True
        frontier = frontier[:, :n_nodes]
    if frontier.any():
        raise _fail(path, f"trees.children lead below level {max(depth, 1)}: the trees have depth "
                          f"{depth} (trees.level_counts has shape {lc}).")
    counts = np.asarray(fam.level_counts)
    if counts.size and (counts.min() < 0 or counts.sum(axis=-1).max() > n_nodes):
        raise _fail(path, f"trees.level_counts has entries in [{counts.min()}, {counts.max()}] "
                          f"summing to at most {counts.sum(axis=-1).max()}; the trees have "
                          f"{n_nodes} node slots.")


def _check_model(path, header, model) -> None:
    """The model's arrays fit its type: oblivious trees' and depth-wise node tables' dtypes,
    shapes and feature indices (and the tables' children), the protocol's properties against the
    header, and one abstract prediction (shapes only)."""
    import jax
    import jax.numpy as jnp

    fam = model.trees
    if type(fam).__name__ == "ObliviousTrees":
        _check_dtypes(path, fam, _RULE_DTYPES)
        shape = fam.features.shape
        _check_same_shape(path, fam, ("thresholds", "borders", "missing_right", "gains"), shape)
        lv = fam.leaf_values.shape
        n_leaves = 2 ** shape[-1] if shape else 0  # a rule per level, 2^D leaves
        if not shape or len(lv) != len(shape) + 1 or lv[:-2] != shape[:-1] or lv[-2] != n_leaves:
            raise _fail(path, f"trees.leaf_values has shape {lv}; ObliviousTrees of rule shape "
                              f"{shape} need {shape[:-1] + (n_leaves,)} + (K,), a power of 2 leaves.")
    elif type(fam).__name__ == "DepthwiseTrees":
        _check_node_table(path, fam)
    try:
        props = (int(model.n_features), [int(s) for s in model.batch_shape], int(model.n_stages),
                 str(model.task))
    except Exception as e:  # noqa: BLE001 - inconsistent arrays of a hostile file
        raise _fail(path, f"its arrays do not form a {type(model).__name__} ({e}).") from None
    said = tuple(header.get(k) for k in ("n_features", "batch_shape", "n_stages", "task"))
    if props != said:
        raise _fail(path, f"its arrays give (n_features, batch_shape, n_stages, task) = {props}; "
                          f"its header says {said}.")
    features = np.asarray(fam.features)
    if features.size and (features.min() < 0 or features.max() >= model.n_features):
        raise _fail(path, f"its trees split on feature indices in [{features.min()}, "
                          f"{features.max()}]; the model has {model.n_features} features.")

    width = model.n_features
    cat = getattr(model, "categorical", None)
    if cat is not None:  # the tables fit the columns' vocabularies; the trees the encoded features
        # the leading axes of the tables: the batch's, and bagged boosters' bag axis
        spec, lead = cat.spec, tuple(np.shape(model.baseline)[:-1])
        want = {"sums": lead + (spec.n_table_rows, spec.n_stats), "counts": lead + (spec.n_table_rows,),
                "prior": lead + (spec.n_stats,), "prior_weight": lead}
        for f, shape in want.items():
            a = getattr(cat, f)
            if tuple(a.shape) != shape or a.dtype != np.dtype("float32"):
                raise _fail(path, f"categorical.{f} is {a.dtype} {tuple(a.shape)}; its columns need "
                                  f"float32 {shape}.")
        if spec.n_features != model.n_features:
            raise _fail(path, f"its categorical columns encode {spec.n_features} features; its trees "
                              f"have {model.n_features}.")
        width = spec.encoded_width

    def one(m, X):
        return m.raw_scores(X)

    fn = one
    for _ in model.batch_shape:
        fn = jax.vmap(fn, in_axes=(0, None))
    try:
        jax.eval_shape(fn, model, jax.ShapeDtypeStruct((1, width), jnp.float32))
    except Exception as e:  # noqa: BLE001 - shapes that cannot predict
        raise _fail(path, f"its arrays have shapes a {type(model).__name__} cannot predict with "
                          f"({type(e).__name__}: {e}).") from None


class _Builder:
    """Rebuilds a model from a header's structure and the arrays, from the registry only."""

    def __init__(self, path, arrays, loss, tree_family, version: int = FORMAT_VERSION):
        self.path, self.arrays, self.version = path, arrays, version
        self.loss_arg, self.family_arg = loss, tree_family
        self.used_loss = self.used_family = False

    def fail(self, what: str) -> ModelFileError:
        return _fail(self.path, what)

    def build(self, node, path: str):
        if not isinstance(node, dict):
            raise self.fail(f"its structure at {path or 'the root'} is not an object.")
        kind = node.get("kind")
        if kind == "array":
            return self.array(node, path)
        if kind == "none":
            return None
        if kind == "value":
            v, t = node.get("value"), node.get("type")
            if t == "bool" and isinstance(v, bool):
                return v
            if t == "int" and isinstance(v, int) and not isinstance(v, bool):
                return v
            if t == "float" and isinstance(v, str):
                try:
                    return float(v)
                except ValueError:
                    pass
            raise self.fail(f"its value at {path} is invalid ({t!r}: {v!r}).")
        if kind == "dict":
            items = node.get("items")
            if not isinstance(items, dict):
                raise self.fail(f"its dict at {path} has no items.")
            return {k: self.build(v, f"{path}[{k!r}]") for k, v in items.items()}
        if kind == "namedtuple":
            reg = _registry()
            name = node.get("type")
            cls = reg["models"].get(name) or reg["nested"].get(name) or reg["families"].get(name)
            if cls is None:
                raise self.fail(f"its structure names the type {name!r} at {path or 'the root'}, "
                                "which this jboost does not know.")
            return self.namedtuple(cls, node, path)
        if kind == "settings":
            return self.settings(node, path)
        if kind == "classes":
            return self.classes(node, path)
        if kind == "feature_names":
            names = node.get("names")
            if not isinstance(names, list) or not names or not all(isinstance(v, str) for v in names):
                raise self.fail(f"its feature names at {path} are invalid.")
            return _registry()["FeatureNames"](names)
        if kind == "categorical_spec":
            try:
                return _registry()["CategoricalSpec"].from_json(node.get("spec"))
            except (TypeError, ValueError):
                raise self.fail(f"its categorical columns at {path} are invalid.") from None
        if kind == "tree_family":
            return self.custom_family(node, path)
        if kind == "loss":
            return self.loss(node, path)
        raise self.fail(f"its structure has an unknown node kind {kind!r} at {path or 'the root'}.")

    def classes(self, node, path: str):
        """A :class:`jboost.model.Classes` from its JSON labels (floats as their repr)."""
        labels, kind = node.get("labels"), node.get("dtype")
        if not isinstance(labels, list) or not labels or kind not in ("U", "S", "O", "i", "u", "f", "b"):
            raise self.fail(f"its class labels at {path} are invalid.")
        try:
            if kind == "f":
                values = np.asarray([float(v) for v in labels], np.float64)
            elif kind in "iu":
                values = np.asarray([int(v) for v in labels])
            elif kind == "b":
                values = np.asarray([bool(v) for v in labels])
            else:
                if not all(isinstance(v, (str, int, bool)) for v in labels):
                    raise ValueError(labels)
                values = np.asarray(labels)
        except (TypeError, ValueError, OverflowError):
            raise self.fail(f"its class labels at {path} are invalid.") from None
        return _registry()["Classes"](values)

    def array(self, node, path: str):
        import jax
        import jax.numpy as jnp
        if node.get("path") != path or path not in self.arrays:
            raise self.fail(f"its structure names the array {node.get('path')!r} at {path}.")
        a = self.arrays[path]
        if a.dtype.itemsize == 8 and a.dtype.kind in "iuf" and not jax.config.jax_enable_x64:
            raise ValueError(f"{os.fspath(self.path)}: array {path} is {a.dtype} (saved with "
                             "jax_enable_x64); enable it to load the model exactly.")
        return jnp.asarray(a)

    def fields(self, cls, node, path: str) -> Dict[str, Any]:
        """The fields of ``cls`` from the file; a field the file lacks takes the class's default
        (a file written before the field existed), an unknown one is an error."""
        fields = node.get("fields")
        names = set(fields) if isinstance(fields, dict) else set()
        defaults = getattr(cls, "_field_defaults", {})
        unknown = sorted(names - set(cls._fields))
        lacking = [f for f in cls._fields if f not in names and f not in defaults]
        if not isinstance(fields, dict) or unknown or lacking:
            raise self.fail(f"its {cls.__name__} at {path or 'the root'} has the fields "
                            f"{sorted(names)}; this jboost's {cls.__name__} has {list(cls._fields)} "
                            f"(unknown: {unknown}, missing: {lacking}; a file of another jboost "
                            "version, or edited).")
        return {f: self.build(fields[f], f"{path}.{f}") for f in cls._fields if f in names}

    def settings(self, node, path: str):
        items, names = node.get("items"), node.get("names")
        if not isinstance(items, dict) or not isinstance(names, dict) or not all(
                isinstance(k, str) and isinstance(v, str) for k, v in names.items()):
            raise self.fail(f"its settings at {path} need items and names (strings).")
        try:
            return _registry()["Settings"]({k: self.build(v, f"{path}[{k!r}]") for k, v in items.items()},
                                           names)
        except ValueError as e:
            if isinstance(e, ModelFileError):
                raise
            raise self.fail(f"its settings at {path} are invalid ({e}).") from None

    def namedtuple(self, cls, node, path: str):
        fields = node.get("fields")
        if (cls is _registry()["families"]["DepthwiseTrees"] and self.version < 5
                and isinstance(fields, dict) and set(fields) == set(_RULE_DTYPES)):
            return self.dense_depthwise(cls, node, path)
        return cls(**self.fields(cls, node, path))

    def dense_depthwise(self, cls, node, path: str):
        """Depth-wise trees of a file of format 1-4: the dense heap layout (``(..., 2**D - 1)``
        rules, rule ``2**d - 1 + j`` heap node ``j`` of level ``d``, ``(..., 2**D, K)`` leaves),
        checked, then converted into node tables (:func:`jboost.depthwise.from_dense`)."""
        from jboost import depthwise
        dense = {f: self.build(node["fields"][f], f"{path}.{f}") for f in _RULE_DTYPES}
        _check_dtypes(self.path, dense, _RULE_DTYPES)
        shape = dense["features"].shape
        _check_same_shape(self.path, dense, ("thresholds", "borders", "missing_right", "gains"), shape)
        lv = dense["leaf_values"].shape
        n_leaves = shape[-1] + 1 if shape else 0
        if (not shape or len(lv) != len(shape) + 1 or lv[:-2] != shape[:-1] or lv[-2] != n_leaves
                or n_leaves & (n_leaves - 1)):
            raise self.fail(f"trees.leaf_values has shape {lv}; dense DepthwiseTrees (format "
                            f"{self.version}) of rule shape {shape} need {shape[:-1] + (n_leaves,)} "
                            "+ (K,), a power of 2 leaves.")
        return depthwise.from_dense(**dense)

    def custom_family(self, node, path: str):
        name = node.get("class")
        fam = self.family_arg
        if fam is None:
            raise ValueError(
                f"the model in {os.fspath(self.path)} was fitted with the custom tree family "
                f"{name!r} (module {node.get('module')!r}), which a model file does not hold (it "
                f"is code): pass the class, jboost.load(path, tree_family={name}).")
        if getattr(fam, "__name__", None) != name or not hasattr(fam, "_fields"):
            raise ValueError(f"tree_family={getattr(fam, '__name__', fam)!r} does not match the file's "
                             f"tree family {name!r} (a NamedTuple class of that name).")
        self.used_family = True
        return self.namedtuple(fam, node, path)

    def callable(self, rec, what: str, supplied, loss_name: str):
        if rec is None:
            return None
        if isinstance(rec, str):
            fn = _registry()["callables"].get(rec)
            if fn is None:
                raise self.fail(f"its loss {loss_name!r} names the function {rec!r} as its {what}, "
                                "which this jboost does not have.")
            return fn
        if not (isinstance(rec, dict) and isinstance(rec.get("custom"), str)):
            raise self.fail(f"its loss {loss_name!r} has an invalid {what} record {rec!r}.")
        if supplied is None:
            raise ValueError(self.missing_loss(loss_name, what, rec["custom"]))
        return supplied

    def missing_loss(self, loss_name: str, what: str, fn_name: str) -> str:
        if what == "fn":
            return (f"the model in {os.fspath(self.path)} was fitted with the custom loss "
                    f"{loss_name!r} (function {fn_name!r}), which a model file does not hold (it is "
                    f"code): pass it, jboost.load(path, loss={fn_name}) with the function "
                    f"{fn_name}(y, raw) (or the jboost.Loss you fitted with).")
        return (f"the model in {os.fspath(self.path)} was fitted with the loss {loss_name!r} whose "
                f"{what} is the custom function {fn_name!r} (code, which a model file does not "
                f"hold): pass the jboost.Loss you fitted with, jboost.load(path, "
                f"loss=jboost.Loss(fn, {what}={fn_name}, ...)).")

    def loss(self, node, path: str):
        reg = _registry()
        Loss = reg["Loss"]
        name = node.get("name")
        if not isinstance(name, str):
            raise self.fail(f"its loss at {path} has no name.")
        recs = {w: node.get(w) for w in ("fn", "link", "baseline")}
        custom = [w for w, r in recs.items() if isinstance(r, dict)]
        given = self.loss_arg
        supplied = {"fn": None, "link": None, "baseline": None}
        if custom and given is not None:
            given_name = given.name if isinstance(given, Loss) else getattr(given, "__name__", None)
            if given_name != name:
                raise ValueError(f"loss={given_name!r} does not match the loss the model in "
                                 f"{os.fspath(self.path)} was fitted with, {name!r}: pass that one.")
            if isinstance(given, Loss):
                supplied = {"fn": given.fn, "link": given.link, "baseline": given.baseline,
                            "hessian_diag": given.hessian_diag}
                if given.task != node.get("task"):
                    raise ValueError(f"loss={name!r} has task {given.task!r}; the model was fitted "
                                     f"with task {node.get('task')!r}.")
            elif callable(given):
                supplied["fn"] = given
            else:
                raise TypeError(f"loss must be a function loss(y, raw) or a jboost.Loss; got "
                                f"{type(given).__name__}.")
            self.used_loss = True
        params_node = node.get("params")
        domains = node.get("domains")
        if not isinstance(params_node, dict) or not isinstance(domains, dict):
            raise self.fail(f"its loss {name!r} has no params or domains.")
        if isinstance(given, Loss) and custom and set(given.params) != set(params_node):
            raise ValueError(f"loss={name!r} has the parameters {sorted(given.params)}; the model "
                             f"was fitted with {sorted(params_node)}.")
        fns = {w: self.callable(recs[w], w, supplied[w], name) for w in recs}
        if fns["fn"] is None:
            raise self.fail(f"its loss {name!r} has no function.")
        params = {k: self.build(v, f"{path}.params[{k!r}]") for k, v in params_node.items()}
        diag = node.get("hessian_diag")
        if isinstance(diag, dict):  # a batch objective's diagonal function (format 1: optional)
            diag = self.callable(diag.get("callable"), "hessian_diag", supplied.get("hessian_diag"),
                                 name)
        try:
            doms = {k: (float(v[0]), float(v[1]), bool(v[2]), bool(v[3])) for k, v in domains.items()}
            return Loss(fns["fn"], params=params, name=name, n_outputs=node.get("n_outputs"),
                        task=node.get("task"), link=fns["link"], baseline=fns["baseline"],
                        hessian=node.get("hessian"), leaf_refit=node.get("leaf_refit"),
                        adaptive_huber_alpha=bool(node.get("adaptive_huber_alpha")), domains=doms,
                        label_columns=node.get("label_columns"),
                        per_column=bool(node.get("per_column", False)),
                        batch=bool(node.get("batch", False)), hessian_diag=diag,
                        max_group=node.get("max_group"), n_probes=int(node.get("n_probes", 32)))
        except (TypeError, ValueError, IndexError) as e:
            raise self.fail(f"its loss {name!r} is invalid ({e}).") from None
