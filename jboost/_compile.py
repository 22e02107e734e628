"""How jboost's programs are compiled: :func:`jit`, ``jax.jit`` with XLA options for the CPU
(:data:`CPU_COMPILER_OPTIONS`: XLA's classic loop emitters, which compile jboost's many small
fusions faster). ``XLA_FLAGS`` is read, never written; other backends and programs nested in the
user's own ``jax.jit``/``jax.vmap`` get no options. See docs/compile.md.
"""

from __future__ import annotations

import functools
import os
from typing import Any, Callable, Optional

import jax

from jboost import _cache

try:  # whether a JAX trace is active (jit, vmap, eval_shape): nested programs take no options
    from jax._src.core import trace_state_clean as _trace_state_clean
except ImportError:  # JAX moved it: no options, XLA's defaults
    _trace_state_clean = None

CPU_COMPILER_OPTIONS = {"xla_cpu_use_fusion_emitters": False}

#: Where jboost's compiled programs are kept between processes (``None``: not kept); see
#: :mod:`jboost._cache`.
CACHE_DIR = _cache.configure()


def cpu_options() -> dict:
    """The options of :data:`CPU_COMPILER_OPTIONS` that the user's ``XLA_FLAGS`` leaves unset.

    Returns:
      A dict of XLA option names and values.
    """
    flags = os.environ.get("XLA_FLAGS", "")
    return {k: v for k, v in CPU_COMPILER_OPTIONS.items() if f"--{k}" not in flags}


class Jitted:
    """A ``jax.jit`` of ``fun`` with :func:`cpu_options` when the default backend is the CPU,
    without them elsewhere; calls and attributes (``lower``, ``eval_shape``,
    ``_cache_size``...) go to the one that applies. ``__wrapped__`` is ``fun``.

    Args:
      fun: the function to compile.
      kwargs: ``jax.jit``'s keyword arguments (``static_argnames``, ``donate_argnums``, ...).
    """

    def __init__(self, fun: Callable, kwargs: dict):
        self._fun, self._kwargs = fun, kwargs
        self._plain = jax.jit(fun, **kwargs)
        self._options: Optional[dict] = None
        self._cpu = None
        self._flags: Optional[str] = None  # the XLA_FLAGS that _top (the top-level jit) is for
        self._top = self._plain
        functools.update_wrapper(self, fun)

    def _pick(self):
        if not top_level():
            return self._plain  # JAX takes compiler options on top-level programs only
        flags = os.environ.get("XLA_FLAGS", "")
        if flags != self._flags:  # once per XLA_FLAGS value: calls stay cheap
            options = cpu_options() if _on_cpu() else {}
            if options and options != self._options:
                self._cpu = jax.jit(self._fun, **self._kwargs, compiler_options=options)
                self._options = options
            self._top, self._flags = (self._cpu if options else self._plain), flags
        return self._top

    def __call__(self, *args, **kwargs):
        return self._pick()(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return getattr(self._pick(), name)

    def __get__(self, obj, objtype=None):  # a method: bind like a function
        return self if obj is None else functools.partial(self, obj)


def top_level() -> bool:
    """Whether no JAX trace is active (a call here is a program of its own, not part of an
    enclosing ``jit``, ``vmap`` or ``eval_shape``)."""
    return _trace_state_clean is not None and bool(_trace_state_clean())


@functools.lru_cache(maxsize=None)
def _on_cpu() -> bool:
    """Whether JAX's default backend is the CPU (asked once, at the first top-level call: it is
    fixed once JAX has initialised it)."""
    return jax.default_backend() == "cpu"


def jit(fun: Optional[Callable] = None, /, **kwargs):
    """``jax.jit(fun, **kwargs)`` (also as ``@jit`` or ``functools.partial(jit, ...)``), with
    jboost's CPU compiler options (:class:`Jitted`).

    Args:
      fun: the function to compile; ``None``: return a decorator.
      **kwargs: ``jax.jit``'s keyword arguments.

    Returns:
      A :class:`Jitted`, or a decorator that makes one.
    """
    if fun is None:
        return lambda f: Jitted(f, kwargs)
    return Jitted(fun, kwargs)
