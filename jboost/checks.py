"""Generic argument checks with no jboost dependency: ints, reals, choices, tracers (is_traced), random keys."""

from __future__ import annotations

import numbers
from typing import Any, Sequence

import jax
import jax.numpy as jnp
import numpy as np


def is_traced(v) -> bool:
    """Whether ``v`` is a JAX tracer (a value inside ``jit``/``vmap``): not checkable on the host."""
    return isinstance(v, jax.core.Tracer)


def device_array(v, dtype) -> jax.Array:
    """``v`` as a JAX array of ``dtype``, converted by NumPy and placed on the default device: no
    program is compiled (``jnp.asarray`` of host values compiles one small program per shape and
    dtype). A traced ``v`` is ``jnp.asarray(v, dtype)``; a JAX array of ``dtype`` is ``v``."""
    if is_traced(v):
        return jnp.asarray(v, dtype)
    if isinstance(v, jax.Array) and v.dtype == dtype:
        return v
    return jax.device_put(np.asarray(v, dtype))


def check_int(v, name: str, lo: int, hi: int) -> int:
    """A Python int in ``[lo, hi]`` (static settings: they set array shapes)."""
    if isinstance(v, np.generic):
        v = v.item()
    if isinstance(v, bool) or not isinstance(v, numbers.Integral):
        raise TypeError(f"{name} must be an int (it sets array shapes); got {type(v).__name__}.")
    if not lo <= int(v) <= hi:
        raise ValueError(f"{name}={v} must be in [{lo}, {hi}].")
    return int(v)


def check_real(v, name: str, lo: float, hi: float, lo_open: bool = False) -> None:
    """A concrete scalar in ``[lo, hi]`` (``(lo, hi]`` when ``lo_open``); tracers pass unchecked."""
    if is_traced(v) or v is None:
        return
    arr = np.asarray(v)
    if arr.size != 1:
        raise ValueError(f"{name} must be a scalar; got shape {arr.shape} (use jax.vmap for sweeps).")
    x = float(arr)
    bad = (x <= lo if lo_open else x < lo) or x > hi or not np.isfinite(x)
    if bad:
        left = "(" if lo_open else "["
        raise ValueError(f"{name}={x} must be in {left}{lo}, {hi}].")


def check_choice(v, name: str, choices: Sequence[Any]) -> Any:
    """``v`` must be one of ``choices``."""
    if not isinstance(v, str) and not isinstance(v, (bool, int, type(None))):
        raise TypeError(f"{name}={v!r} must be one of {tuple(choices)}.")
    if v not in choices:
        raise ValueError(f"{name}={v!r} must be one of {tuple(choices)}.")
    return v


#: Integer keys are the 64 bits of a threefry ``jax.random`` key: ``0 <= key < KEY_LIMIT``.
KEY_LIMIT = 2 ** 64


def as_key(key):
    """A ``jax.random`` key from an int seed or a key (typed ``jax.random.key``, or a legacy raw
    ``uint32[2]`` ``jax.random.PRNGKey``).

    An int seed ``k`` in ``[0, 2^64)`` is the key ``[k >> 32, k & 0xFFFFFFFF]``: the same as
    ``jax.random.PRNGKey(k)`` below ``2^31`` (and as JAX's own 64-bit seeding above), so no two
    seeds give the same key; outside that range (negative, or ``>= 2^64``: JAX would truncate
    them to 32 bits or overflow) a ``ValueError`` names ``key``.
    """
    if isinstance(key, np.generic):
        key = key.item()
    if isinstance(key, numbers.Integral) and not isinstance(key, bool):
        k = int(key)
        if not 0 <= k < KEY_LIMIT:
            raise ValueError(f"key={k} is outside [0, 2**64): an int key is the 64 bits of a "
                             "jax.random key, so a negative or larger int would be truncated and "
                             "collide with another seed. Pass an int in [0, 2**64) or a "
                             "jax.random.key.")
        words = np.array([k >> 32, k & 0xFFFFFFFF], np.uint32)
        if k < 2 ** 31 and jax.config.jax_default_prng_impl != "threefry2x32":
            return jax.random.PRNGKey(k)  # another PRNG: its own seeding
        return jax.device_put(words)  # = jax.random.PRNGKey(k): no program compiled
    if isinstance(key, (jax.Array, np.ndarray)):
        if jnp.issubdtype(key.dtype, jax.dtypes.prng_key) or (key.dtype == np.uint32 and key.shape[-1:] == (2,)):
            return key
    raise TypeError(f"key must be an int seed or a jax.random key (an int in [0, 2**64)); got "
                    f"{type(key).__name__}{'' if not hasattr(key, 'shape') else f' of shape {key.shape}'}.")


def as_raw_key(key) -> np.ndarray:
    """:func:`as_key` as a host ``uint32[2]`` array (typed keys unwrapped)."""
    key = as_key(key)
    if is_traced(key):
        raise TypeError("key must be concrete here (an int seed or a jax.random key), not traced.")
    if jnp.issubdtype(key.dtype, jax.dtypes.prng_key):
        key = jax.random.key_data(key)
    key = np.asarray(key)
    if key.shape != (2,):
        raise TypeError(f"key must be a single jax.random key; got shape {key.shape}.")
    return key
