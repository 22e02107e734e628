"""Loading a model file: the model rebuilt from its structure and the registry only (built-in
losses and tree families by name, custom ones passed to :func:`load`, older formats), then checked.

See docs/io.md for the file format.
"""

from __future__ import annotations

import os
from typing import Any, Dict, Optional

import numpy as np

from jboost.io import checks, reader, registry
from jboost.trees import depthwise as depthwise_lib


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_float_repr(v) -> bool:
    try:
        return isinstance(v, str) and np.isfinite(float(v))
    except ValueError:
        return False


#: The JSON type of each class label, by the labels' dtype kind (writer.py): floats as their
#: repr, integers, booleans and strings as themselves.
_LABEL_TYPES = {"f": _is_float_repr, "i": _is_int, "u": _is_int, "b": lambda v: isinstance(v, bool),
                "U": lambda v: isinstance(v, str), "S": lambda v: isinstance(v, str),
                "O": lambda v: isinstance(v, (str, int, bool))}

def load(path, loss=None, tree_family: Optional[type] = None):
    """Read a model written by :func:`save`: the same model type, every array bit for bit.

    Args:
      path: the model file.
      loss: the custom loss the model was fitted with, when the file records one: the function
        ``loss(y, raw)`` or the :class:`jboost.Loss` (docs/io.md); built-in losses need nothing.
      tree_family: the tree family class the model was fitted with, when it is not jboost's own.

    Raises:
      ModelFileError: the file is not a readable model file (see
        :func:`jboost.io.reader.read`), or its arrays do not fit its model type.
      ValueError: the file needs ``loss=`` or ``tree_family=`` (the message says which), or the
        one given does not match the file.
    """
    header, arrays = reader.read(path)
    reg = registry.registry()
    model_type = header.get("model_type")
    if model_type not in reg["models"]:
        raise reader.file_error(path, f"its model type {model_type!r} is not one this jboost knows "
                          f"({', '.join(sorted(reg['models']))}).")
    builder = _Builder(path, arrays, loss, tree_family, header.get("format_version"))
    try:
        model = builder.build(header.get("structure"), "")
    except RecursionError:
        raise reader.file_error(path, "its structure is nested too deeply.") from None
    if type(model) is not reg["models"][model_type]:
        raise reader.file_error(path, f"its structure is a {type(model).__name__}, its header says {model_type}.")
    if loss is not None and not builder.used_loss:
        raise ValueError(f"loss= was given, but the model in {os.fspath(path)} has only built-in "
                         "losses, which load by name: leave loss= out.")
    if tree_family is not None and not builder.used_family:
        raise ValueError(f"tree_family= was given, but the model in {os.fspath(path)} uses jboost's "
                         "own tree family: leave tree_family= out.")
    checks.check_loaded_model(path, header, model)
    return model


class _Builder:
    """Rebuilds a model from a header's structure and the arrays, from the registry only."""

    def __init__(self, path, arrays, loss, tree_family, version: int = reader.FORMAT_VERSION):
        self.path, self.arrays, self.version = path, arrays, version
        self.loss_arg, self.family_arg = loss, tree_family
        self.used_loss = self.used_family = False

    def fail(self, what: str) -> reader.ModelFileError:
        return reader.file_error(self.path, what)

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
            reg = registry.registry()
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
            return registry.registry()["FeatureNames"](names)
        if kind == "categorical_spec":
            try:
                return registry.registry()["CategoricalSpec"].from_json(node.get("spec"))
            except (TypeError, ValueError):
                raise self.fail(f"its categorical columns at {path} are invalid.") from None
        if kind == "tree_family":
            return self.custom_family(node, path)
        if kind == "loss":
            return self.loss(node, path)
        raise self.fail(f"its structure has an unknown node kind {kind!r} at {path or 'the root'}.")

    def classes(self, node, path: str):
        """A :class:`jboost.models.metadata.Classes` from its JSON labels, each of the type the
        writer gives its dtype (floats as their repr, integers, booleans or strings)."""
        labels, kind = node.get("labels"), node.get("dtype")
        if not isinstance(labels, list) or not labels or kind not in _LABEL_TYPES:
            raise self.fail(f"its class labels at {path} are invalid.")
        if not all(_LABEL_TYPES[kind](v) for v in labels):
            raise self.fail(f"its class labels at {path} are {labels[:5]}, which are not labels of "
                            f"dtype kind {kind!r} as jboost.save writes them.")
        try:
            if kind == "f":
                values = np.asarray([float(v) for v in labels], np.float64)
            elif kind in "iu":
                values = np.asarray([int(v) for v in labels])
            elif kind == "b":
                values = np.asarray([bool(v) for v in labels])
            else:
                values = np.asarray(labels)
        except (TypeError, ValueError, OverflowError):
            raise self.fail(f"its class labels at {path} are invalid.") from None
        return registry.registry()["Classes"](values)

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
        """The fields of ``cls`` from the file; a field the file lacks takes the class's default."""
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
            return registry.registry()["Settings"]({k: self.build(v, f"{path}[{k!r}]") for k, v in items.items()},
                                           names)
        except ValueError as e:
            if isinstance(e, reader.ModelFileError):
                raise
            raise self.fail(f"its settings at {path} are invalid ({e}).") from None

    def namedtuple(self, cls, node, path: str):
        fields = node.get("fields")
        if (cls is registry.registry()["families"]["DepthwiseTrees"] and self.version < 5
                and isinstance(fields, dict) and set(fields) == set(checks.RULE_DTYPES)):
            return self.dense_depthwise(cls, node, path)
        return cls(**self.fields(cls, node, path))

    def dense_depthwise(self, cls, node, path: str):
        """Depth-wise trees of a file of format 1-4 (the dense heap layout, docs/io.md), checked,
        then converted into node tables (:func:`jboost.trees.depthwise.from_dense`)."""
        dense = {f: self.build(node["fields"][f], f"{path}.{f}") for f in checks.RULE_DTYPES}
        checks.check_dtypes(self.path, dense, checks.RULE_DTYPES)
        shape = dense["features"].shape
        checks.check_same_shape(self.path, dense, ("thresholds", "borders", "missing_right", "gains"), shape)
        lv = dense["leaf_values"].shape
        n_leaves = shape[-1] + 1 if shape else 0
        if (not shape or len(lv) != len(shape) + 1 or lv[:-2] != shape[:-1] or lv[-2] != n_leaves
                or n_leaves & (n_leaves - 1)):
            raise self.fail(f"trees.leaf_values has shape {lv}; dense DepthwiseTrees (format "
                            f"{self.version}) of rule shape {shape} need {shape[:-1] + (n_leaves,)} "
                            "+ (K,), a power of 2 leaves.")
        return depthwise_lib.from_dense(**dense)

    def custom_family(self, node, path: str):
        name = node.get("class")
        if not isinstance(name, str) or not isinstance(node.get("module"), str):
            raise self.fail(f"its tree family at {path} has no class name and module.")
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
            fn = registry.registry()["callables"].get(rec)
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
        reg = registry.registry()
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
            fn_name = recs["fn"].get("custom") if isinstance(recs["fn"], dict) else None
            given_fn = getattr(given.fn if isinstance(given, Loss) else given, "__name__", None)
            if given_name != name and (fn_name is None or given_fn != fn_name):
                fitted = name if fn_name is None else f"{name!r} (function {fn_name!r})"
                raise ValueError(f"loss={given_name!r} does not match the loss the model in "
                                 f"{os.fspath(self.path)} was fitted with, {fitted}: pass that "
                                 "one.")
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
