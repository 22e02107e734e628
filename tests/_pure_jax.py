"""The pure-JAX path (the CPU kernels switched off, as on GPUs and TPUs) beside the kernels, in one
process.

Whether a program calls the CPU kernels is decided by ``jboost._native.available()`` when the
program is traced. :func:`pure_jax` switches it off and runs ``fn`` under
``jax.default_device(<the default device>)``: the same device, but another key of every jit cache
(the default device is part of JAX's trace context), so each program ``fn`` runs is traced anew
without the kernels, and the programs compiled with the kernels stay cached for the rest of the
session. (``jax.clear_caches()`` instead would drop every program the session compiled, to be
compiled again by the tests after it.)
"""

from __future__ import annotations

import jax
import pytest

from jboost import _native


def pure_jax(fn, *args, **kwargs):
    """``fn(*args, **kwargs)`` on the pure-JAX path, its outputs ready."""
    with pytest.MonkeyPatch.context() as mp, jax.default_device(jax.devices()[0]):
        mp.setattr(_native, "available", lambda: False)
        return jax.block_until_ready(fn(*args, **kwargs))
