"""The purity rule of custom losses: PinnedFn pins the Python values a loss reads from globals
and closure cells, so that ``jax.jit``'s cache (keyed on the static loss function) tells a
changed value from an unchanged one; see ``docs/losses.md``."""

from __future__ import annotations

import numbers
import warnings
import weakref
from typing import Callable

import jax
import numpy as np

from jboost import checks
from jboost.losses import loss as loss_lib, per_sample

# ---- The purity rule: a loss that reads Python numbers from globals or closure cells -------

# Arrays read by a loss are pinned by value up to this many elements (larger ones are not
# compared: copying them at every fit would cost more than it protects).
PIN_MAX_SIZE = 1 << 16
# Functions of these packages are not searched for the values they read (their constants do not
# change between fits).
_LIBRARIES = ("jax", "jaxlib", "numpy", "jboost", "optax", "chex", "scipy", "equinox")


class PinnedFn:
    """A user's loss function with the values of the Python numbers and small arrays it reads from
    globals and closure cells (:func:`pin_globals`); equal only to a ``PinnedFn`` of the same
    function and values, so jit's cache tells a changed value from an unchanged one.

    Args:
      fn: the user's loss function.
      values: the pinned values, ``((name, comparable value), ...)``.
    """

    __slots__ = ("fn", "values", "__weakref__")

    def __init__(self, fn: Callable, values: tuple):
        self.fn = fn
        self.values = values   # ((name, (type name, value) or ("array", dtype, shape, bytes)), ...)

    def __call__(self, *args, **kwargs):
        return self.fn(*args, **kwargs)

    @property
    def __name__(self) -> str:  # noqa: A003 - callables are named by __name__
        return getattr(self.fn, "__name__", "custom")

    @property
    def __wrapped__(self) -> Callable:
        return self.fn

    def __eq__(self, other) -> bool:
        return isinstance(other, PinnedFn) and self.fn is other.fn and self.values == other.values

    def __hash__(self) -> int:
        return hash((id(self.fn), self.values))

    def __repr__(self) -> str:
        return f"PinnedFn({self.fn!r}, {', '.join(v[0] for v in self.values)})"


def _pinnable(v):
    """The comparable value of a Python number or string, a NumPy scalar or a small concrete array;
    ``None`` otherwise.
    """
    if isinstance(v, np.generic):
        return (type(v).__name__, v.dtype.str, v.tobytes())
    if isinstance(v, (bool, numbers.Number, str)):
        return (type(v).__name__, v)
    if isinstance(v, jax.Array) and not checks.is_traced(v) and v.size <= PIN_MAX_SIZE:
        try:
            v = np.asarray(v)
        except Exception:  # noqa: BLE001 - a deleted or non-addressable array: not pinned
            return None
    if isinstance(v, np.ndarray) and v.dtype != object and v.size <= PIN_MAX_SIZE:
        return ("array", v.dtype.str, v.shape, v.tobytes())
    return None


def _read_values(fn: Callable, prefix: str, out: dict, seen: set, depth: int = 0) -> None:
    """The pinnable values ``fn`` reads: its globals (the names of its code and nested code),
    its closure cells, and those of the user functions it calls through them (3 levels)."""
    code = getattr(fn, "__code__", None)
    if code is None or id(fn) in seen or depth > 3:
        return
    seen.add(id(fn))
    names, stack = set(), [code]
    while stack:
        c = stack.pop()
        names.update(c.co_names)
        stack.extend(k for k in c.co_consts if hasattr(k, "co_names"))
    found = []
    g = getattr(fn, "__globals__", {})
    found += [(n, g[n], "global") for n in sorted(names) if n in g]
    for n, cell in zip(code.co_freevars, getattr(fn, "__closure__", None) or ()):
        try:
            found.append((n, cell.cell_contents, "closure variable"))
        except ValueError:  # an empty cell
            pass
    for name, v, kind in found:
        pinned = _pinnable(v)
        if pinned is not None:
            shown = np.array(v) if isinstance(v, np.ndarray) else v   # a copy: arrays mutate
            out.setdefault(f"{prefix}{name}", (kind, pinned, shown))
        elif (callable(v) and hasattr(v, "__code__")
              and not str(getattr(v, "__module__", "") or "").split(".")[0] in _LIBRARIES):
            _read_values(v, f"{prefix}{name}.", out, seen, depth + 1)


# The values each user loss function read at its last resolution (to say what changed).
_LAST_VALUES: "weakref.WeakKeyDictionary[Callable, dict]" = weakref.WeakKeyDictionary()


def pin_globals(loss: loss_lib.Loss) -> loss_lib.Loss:
    """``loss`` with its user function wrapped in a :class:`PinnedFn` of the values it reads
    (``docs/losses.md``, "The purity rule"); built-in losses and functions that read none are
    returned unchanged.

    Args:
      loss: a resolved :class:`jboost.Loss`.

    Returns:
      ``loss``, or a copy whose ``fn`` is a :class:`PinnedFn`.

    Warns:
      UserWarning: a value the function reads changed since its last fit.
    """
    if not isinstance(loss.fn, PinnedFn) and per_sample.is_built_in(loss):
        return loss
    fn = loss.fn.fn if isinstance(loss.fn, PinnedFn) else loss.fn
    values: dict = {}
    _read_values(fn, "", values, set())
    if not values:
        return loss.replace(fn=fn) if fn is not loss.fn else loss
    try:
        last = _LAST_VALUES.get(fn)
        _LAST_VALUES[fn] = values
    except TypeError:  # not weak-referenceable: no report, still pinned
        last = None
    if last is not None:
        changed = [(name, last[name][2], kind_now[2], kind_now[0]) for name, kind_now in values.items()
                   if name in last and last[name][1] != kind_now[1]]
        if changed:
            what = "; ".join(f"the {kind} {name} ({_short(old)} -> {_short(new)})"
                             for name, old, new, kind in changed)
            first = changed[0][0].split(".")[-1]
            warnings.warn(
                f"loss {loss.name!r} reads {what}, which changed since its last fit: a compiled "
                "program keeps the values its loss read when it was traced, so jboost compiles "
                "this fit anew for the new value. Pass such a value as a loss parameter instead, "
                f"traced (no recompilation; a sweep can vary it): jboost.Loss(fn, params="
                f"{{'{first}': value}}) with fn(y, raw, {first}).", UserWarning, stacklevel=4)
    key = tuple((name, kind_now[1]) for name, kind_now in sorted(values.items()))
    return loss.replace(fn=PinnedFn(fn, key))


def _short(v) -> str:
    text = repr(v.tolist() if isinstance(v, (np.ndarray, jax.Array)) else v)
    return text if len(text) <= 40 else text[:37] + "..."
