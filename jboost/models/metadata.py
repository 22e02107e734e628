"""A model's static and recorded metadata: the fit's Settings, class labels (Classes,
labels_of) and feature names (FeatureNames)."""

from __future__ import annotations

from typing import Any, Mapping, Optional

import jax
import jax.numpy as jnp
import numpy as np

from jboost import checks

@jax.tree_util.register_pytree_with_keys_class
class Settings(Mapping):
    """The settings a fit was called with (``Booster.settings``; docs/models.md): a read-only
    mapping of ``arrays`` (the pytree's leaves) and ``names`` (static strings)."""

    __slots__ = ("arrays", "names")

    def __init__(self, arrays: Optional[Mapping[str, Any]] = None,
                 names: Optional[Mapping[str, str]] = None):
        object.__setattr__(self, "arrays", dict(arrays or {}))
        object.__setattr__(self, "names", {k: str(v) for k, v in (names or {}).items()})
        both = set(self.arrays) & set(self.names)
        if both:
            raise ValueError(f"Settings: {sorted(both)} given both as arrays and as names.")

    def __getitem__(self, k: str):
        return self.arrays[k] if k in self.arrays else self.names[k]

    def __iter__(self):
        return iter(sorted(self.arrays) + sorted(self.names))

    def __len__(self) -> int:
        return len(self.arrays) + len(self.names)

    def __setattr__(self, name, value):
        raise AttributeError("Settings is read-only.")

    def __repr__(self) -> str:
        return f"Settings({dict(self.items())!r})"

    def __reduce__(self):  # pickle (e.g. scikit-learn's clone checks) without __slots__ state
        return (Settings, (self.arrays, self.names))

    def tree_flatten_with_keys(self):
        keys = tuple(sorted(self.arrays))
        return ([(jax.tree_util.DictKey(k), self.arrays[k]) for k in keys],
                (keys, tuple(sorted(self.names.items()))))

    @classmethod
    def tree_unflatten(cls, aux, children):
        keys, names = aux
        return cls(dict(zip(keys, children)), dict(names))


class StaticValues:
    """A tuple of Python values (strings, numbers) carried by a model as static pytree data (a
    pytree node without leaves)."""

    def __init__(self, values):
        self.values = tuple(np.asarray(values).tolist())

    @property
    def array(self) -> np.ndarray:
        return np.asarray(self.values)

    def tree_flatten(self):
        return (), self.values

    @classmethod
    def tree_unflatten(cls, values, children):
        out = object.__new__(cls)
        out.values = values
        return out

    def __eq__(self, other):
        return type(other) is type(self) and self.values == other.values

    def __hash__(self):
        return hash((type(self).__name__, self.values))

    def __len__(self):
        return len(self.values)

    def __repr__(self):
        return f"{type(self).__name__}({list(self.values)!r})"


@jax.tree_util.register_pytree_node_class
class Classes(StaticValues):
    """The class labels of a model whose labels were mapped to ``0..K-1`` (strings, negative or
    fractional numbers): ``values[k]`` is class ``k``; ``array`` gives them as NumPy."""

    @property
    def labels(self) -> tuple:
        return self.values


@jax.tree_util.register_pytree_node_class
class FeatureNames(StaticValues):
    """The names of a model's features (a DataFrame's columns at fit time)."""


#: ``model.feature_names_in_`` of every model type: its :class:`FeatureNames` as NumPy, or ``None``.
FEATURE_NAMES_IN = property(
    lambda self: None if self.feature_names is None else self.feature_names.array,
    doc="The feature names (``feature_names`` as NumPy), or ``None``.")
#: ``model.classes_`` of every model type: its :class:`Classes` as NumPy, or ``None``.
CLASSES_ = property(
    lambda self: None if self.classes is None else self.classes.array,
    doc="The class labels (``classes`` as NumPy), or ``None``.")


def named(names) -> Optional[FeatureNames]:
    """``names`` as a model's ``feature_names`` field, ``None`` for a fit on arrays."""
    return None if names is None else FeatureNames(names)


def labels_of(model, classes_idx):
    """Class indices as the model's class labels (a NumPy array), or the indices themselves for
    a model without mapped labels."""
    classes = getattr(model, "classes", None)
    if classes is None:
        return classes_idx
    if checks.is_traced(classes_idx):
        labels = classes.array
        if labels.dtype.kind not in "iufb":
            raise TypeError("predict_class of a model with non-numeric class labels "
                            f"{list(classes.labels)[:5]} needs concrete values (call it outside "
                            "jax.jit / jax.vmap, or take the class indices from predict_proba's "
                            "argmax).")
        return jnp.asarray(labels)[classes_idx]
    return classes.array[np.asarray(classes_idx)]


class Importance(np.ndarray):
    """Feature importances as a NumPy array (batch axes in front, one value per feature last)
    that carries the model's feature names: ``names`` (a tuple, or ``None`` for a model fitted
    on arrays), :meth:`as_dict` and a printout by name. Only the array an importance function
    returns carries them: an array computed from it (sorted, sliced, scaled) is plain, so a name
    never labels another feature's value."""

    names: Optional[tuple]

    def __new__(cls, values, names=None):
        obj = np.asarray(values).view(cls)
        fits = names is not None and obj.ndim > 0 and obj.shape[-1] == len(names)
        obj.names = tuple(str(n) for n in names) if fits else None
        return obj

    def __array_finalize__(self, obj):
        self.names = None

    def __array_wrap__(self, out, context=None, return_scalar=False):
        out = np.asarray(out)  # results of NumPy functions are plain arrays
        return out[()] if return_scalar else out

    def as_dict(self) -> dict:
        """``{feature name: importance}`` (values of shape the batch axes)."""
        if self.names is None:
            raise ValueError("this model was fitted on an array without feature names: index "
                             "the importances by column position (np.asarray(importance)[j]).")
        values = np.asarray(self)
        return {n: (values[..., j].item() if values.ndim == 1 else values[..., j])
                for j, n in enumerate(self.names)}

    def __repr__(self) -> str:
        if self.names is None or self.ndim != 1:
            return repr(np.asarray(self))
        return "Importance(" + ", ".join(f"{n}={v:.4g}" for n, v in self.as_dict().items()) + ")"


def importance_of(model, values):
    """Importances ``values`` of ``model`` as an :class:`Importance` labelled with its feature
    names; traced values (under ``jit``/``vmap``) as they are."""
    if checks.is_traced(values):
        return values
    names = getattr(model, "feature_names_in_", None)
    return Importance(np.asarray(values), None if names is None else list(names))
