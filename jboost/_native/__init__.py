"""jboost's compiled CPU kernels (histograms, binning, prediction), registered with XLA as FFI custom calls (``jax.ffi``).

``histogram.cc`` is built into ``_histogram*.so`` when the package is installed (``setup.py``;
an optional extension: without a C++ compiler the install still succeeds). When the library is
absent, or ``JBOOST_NATIVE=0`` is set, jboost uses its pure-JAX histogram path everywhere; on
GPU and TPU it always does. Both paths compute the same sums; see ``jboost/histograms.py``.
"""

from __future__ import annotations

import ctypes
import functools
import glob
import os

import jax

HISTOGRAM = "jboost_histogram"
SMALLER_SIBLING = "jboost_histogram_smaller_sibling"
BIN = "jboost_bin"
LEVEL = "jboost_level"
SPLIT_GAINS = "jboost_split_gains"
PREDICT = "jboost_predict"


def library_path():
    """Path of the compiled kernel library, or ``None`` when it was not built."""
    here = os.path.dirname(os.path.abspath(__file__))
    paths = sorted(glob.glob(os.path.join(here, "_histogram*.so")) +
                   glob.glob(os.path.join(here, "_histogram*.pyd")) +
                   glob.glob(os.path.join(here, "_histogram*.dylib")))
    return paths[0] if paths else None


@functools.lru_cache(maxsize=None)
def load() -> bool:
    """Load the library and register its FFI targets with XLA (once); ``False`` if not built."""
    path = library_path()
    if path is None or not hasattr(jax, "ffi"):  # a jax without jax.ffi runs pure JAX
        return False
    lib = ctypes.cdll.LoadLibrary(path)
    jax.ffi.register_ffi_target(HISTOGRAM, jax.ffi.pycapsule(lib.JboostHistogram), platform="cpu")
    jax.ffi.register_ffi_target(SMALLER_SIBLING, jax.ffi.pycapsule(lib.JboostHistogramSmallerSibling),
                                platform="cpu")
    jax.ffi.register_ffi_target(BIN, jax.ffi.pycapsule(lib.JboostBin), platform="cpu")
    jax.ffi.register_ffi_target(LEVEL, jax.ffi.pycapsule(lib.JboostLevel), platform="cpu")
    jax.ffi.register_ffi_target(SPLIT_GAINS, jax.ffi.pycapsule(lib.JboostSplitGains), platform="cpu")
    jax.ffi.register_ffi_target(PREDICT, jax.ffi.pycapsule(lib.JboostPredict), platform="cpu")
    return True


def available() -> bool:
    """Whether the CPU kernels are built, loaded and enabled (``JBOOST_NATIVE`` is not ``0``)."""
    if os.environ.get("JBOOST_NATIVE", "1").strip().lower() in ("0", "false", "no", "off"):
        return False
    return load()


def cpu_threads() -> int:
    """Cores this process may use (``JBOOST_NUM_THREADS`` overrides)."""
    env = os.environ.get("JBOOST_NUM_THREADS")
    if env:
        return max(1, int(env))
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)
