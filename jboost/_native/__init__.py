"""jboost's compiled CPU kernels, registered with XLA as FFI custom calls (``jax.ffi``): every
binding is here. Without the library (or ``JBOOST_NATIVE=0``) jboost runs pure JAX, as it always
does on GPU and TPU. See docs/native.md."""

from __future__ import annotations

import ctypes
import functools
import glob
import os
import warnings

import jax

HISTOGRAM = "jboost_histogram"
SMALLER_SIBLING = "jboost_histogram_smaller_sibling"
BIN = "jboost_bin"
LEVEL = "jboost_level"
SPLIT_GAINS = "jboost_split_gains"
PREDICT = "jboost_predict"
PREDICT_DEPTHWISE = "jboost_predict_depthwise"  # depth-wise node tables (predict.cc)
DEPTHWISE_TREE = "jboost_depthwise_tree"  # one whole depth-wise tree per call (depthwise.cc)
SELF_TEST = "jboost_self_test"  # throws C++ exceptions on request: the FFI boundary's test
#: The library's exported handler of each FFI target.
SYMBOLS = {HISTOGRAM: "JboostHistogram", SMALLER_SIBLING: "JboostHistogramSmallerSibling",
           BIN: "JboostBin", LEVEL: "JboostLevel", SPLIT_GAINS: "JboostSplitGains",
           PREDICT: "JboostPredict", PREDICT_DEPTHWISE: "JboostPredictDepthwise",
           SELF_TEST: "JboostSelfTest", DEPTHWISE_TREE: "JboostDepthwiseTree"}

#: The kernels' interface version, bumped with the library's (abi.cc: kAbiVersion).
ABI_VERSION = 4


#: The kernels index rows, and one feature's histogram cells, with 32-bit ints (docs/native.md).
MAX_INDEX = 2**31 - 1


def indexable(n_rows: int, n_leaves: int, n_bins: int, channels: int) -> bool:
    """Whether the kernels can index a call of these (static) sizes; see :data:`MAX_INDEX`."""
    return n_rows <= MAX_INDEX and n_leaves * n_bins * channels <= MAX_INDEX


def check_indexable(n_rows: int, n_leaves: int, n_bins: int, channels: int) -> None:
    """``ValueError`` naming the cause when the kernels cannot index a call of these sizes."""
    if n_rows > MAX_INDEX:
        raise ValueError(f"jboost's CPU kernel indexes rows with 32-bit ints: {n_rows} rows is more "
                         f"than {MAX_INDEX} (shard the rows over devices, or use the pure-JAX path)")
    if n_leaves * n_bins * channels > MAX_INDEX:
        raise ValueError(f"jboost's CPU kernel indexes one feature's histogram cells with 32-bit "
                         f"ints: {n_leaves} leaves x {n_bins} bins x {channels} channels (2 per "
                         f"output) is more than {MAX_INDEX}; use fewer outputs, leaves or bins")


def library_path():
    """Path of the compiled kernel library, or ``None`` when it was not built."""
    here = os.path.dirname(os.path.abspath(__file__))
    paths = sorted(glob.glob(os.path.join(here, "_kernels*.so")) +
                   glob.glob(os.path.join(here, "_kernels*.pyd")) +
                   glob.glob(os.path.join(here, "_kernels*.dylib")))
    return paths[0] if paths else None


def abi_matches(lib, path: str = "the jboost kernel library") -> bool:
    """Whether a loaded library exports ``JboostAbiVersion() == ABI_VERSION``; if not, a warning
    says to rebuild."""
    try:
        version_fn = lib.JboostAbiVersion
    except AttributeError:
        version = None
    else:
        version_fn.restype = ctypes.c_int
        version_fn.argtypes = []
        version = int(version_fn())
    if version == ABI_VERSION:
        return True
    warnings.warn(
        f"{path} is stale (kernel ABI version {version}, this jboost needs {ABI_VERSION}): jboost "
        "runs its pure-JAX path instead. Rebuild the kernel: `pip install -e .` (or "
        "`python setup.py build_ext --inplace`) in the jboost source folder.",
        RuntimeWarning, stacklevel=3)
    return False


@functools.lru_cache(maxsize=None)
def load() -> bool:
    """Load the library and register its FFI targets with XLA (once); ``False`` if not built,
    or if it is stale (see :func:`abi_matches`: a warning, and pure JAX)."""
    path = library_path()
    if path is None or not hasattr(jax, "ffi"):  # a jax without jax.ffi runs pure JAX
        return False
    lib = ctypes.cdll.LoadLibrary(path)
    if not abi_matches(lib, path):
        return False
    for target, symbol in SYMBOLS.items():
        jax.ffi.register_ffi_target(target, jax.ffi.pycapsule(getattr(lib, symbol)), platform="cpu")
    return True


@functools.lru_cache(maxsize=None)
def cpu_only() -> bool:
    """Whether the CPU is the only backend this process can compile for (no GPU or TPU
    initialised): then :func:`platform_dependent` traces the CPU branch alone."""
    try:
        from jax._src import xla_bridge
        return set(xla_bridge.backends()) <= {"cpu"}
    except Exception:  # a jax without this private helper: keep both branches
        return False


def platform_dependent(*args, cpu, default):
    """``jax.lax.platform_dependent(*args, cpu=cpu, default=default)``; in a CPU-only process only
    ``cpu`` is traced."""
    if cpu_only():
        return cpu(*args)
    return jax.lax.platform_dependent(*args, cpu=cpu, default=default)


def available() -> bool:
    """Whether the CPU kernels are built, loaded and enabled (``JBOOST_NATIVE`` is not ``0``)."""
    if os.environ.get("JBOOST_NATIVE", "1").strip().lower() in ("0", "false", "no", "off"):
        return False
    return load()


def cpu_threads() -> int:
    """Cores this process may use: ``JBOOST_NUM_THREADS`` when set (a positive integer, else a
    ``ValueError``), else the CPUs this process may run on."""
    env = os.environ.get("JBOOST_NUM_THREADS", "").strip()
    if env:
        try:
            n = int(env)
        except ValueError:
            n = 0
        if n < 1:
            raise ValueError(
                f"JBOOST_NUM_THREADS={env!r} must be a positive integer (the number of threads of "
                f"jboost's CPU kernels); set it to e.g. JBOOST_NUM_THREADS=2, or unset it to use "
                f"the {_affinity()} CPUs this process may run on.")
        return n
    return _affinity()


def _affinity() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)
