"""The pure-JAX path (the CPU kernels switched off, as on GPUs and TPUs) beside the kernels, in one
process.

Whether a program calls the CPU kernels is decided by ``jboost._native.available()`` when the
program is traced. :func:`pure_jax` switches it off and runs ``fn`` under
``jax.default_device(<the default device>)``: the same device, but another key of every jit cache
(the default device is part of JAX's trace context), so each program ``fn`` runs is traced anew
without the kernels, and the programs compiled with the kernels stay cached for the rest of the
session. (``jax.clear_caches()`` instead would drop every program the session compiled, to be
compiled again by the tests after it.)

``test_native.test_pure_jax_traces_a_cached_program_anew_without_the_kernels`` checks the
mechanism. The comparisons that use this helper fail on a wrong pure-JAX path: checked with three
well-typed mutants of the branch taken when the kernels are off (same shapes, dtypes and
pytrees, so each program still compiles): the histograms and split gains with their features
reversed (``jnp.flip(., 0)`` over ``dispatch``'s result: 8 failures in test_native, test_splits
and test_properties), the bins of each row replaced by the previous row's (``jnp.roll`` in
``binning``: 4) and predictions times 1.5 (``tree.predict_raw``: 5), every failure an assertion
on values, the same tests as with the ``jax.clear_caches()`` helper this one replaced.
"""

from __future__ import annotations

import jax
import pytest

from jboost import _native
from jboost.trees import histograms


def pure_jax(fn, *args, **kwargs):
    """``fn(*args, **kwargs)`` on the pure-JAX path, its outputs ready."""
    with pytest.MonkeyPatch.context() as mp, jax.default_device(jax.devices()[0]):
        mp.setattr(_native, "available", lambda: False)
        return jax.block_until_ready(fn(*args, **kwargs))


def accelerator_paths(fn, *args, **kwargs):
    """``fn(*args, **kwargs)`` on the CPU through the branches GPUs and TPUs take (the pure-JAX
    path with :func:`jboost.trees.histograms.spread_sum`'s spread scatters), its outputs ready. Another
    trace context than :func:`pure_jax`'s (the default matmul precision, which no CPU result
    here depends on: float32 matmuls on the CPU are float32 at every precision) keeps the two
    paths' programs apart in the jit caches."""
    with pytest.MonkeyPatch.context() as mp, jax.default_device(jax.devices()[0]), \
            jax.default_matmul_precision("float32"):
        mp.setattr(_native, "available", lambda: False)
        mp.setattr(histograms, "_ACCELERATOR_PATHS", True)
        return jax.block_until_ready(fn(*args, **kwargs))
