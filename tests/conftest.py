"""Shared fixtures of the test suite.

The suite runs with strict dtype promotion and derandomised Hypothesis (below).

Every distinct array shape or static setting is one more XLA compilation (seconds each on a
2-core CPU), so the end-to-end tests share ONE set of shapes: ``N`` training rows, ``F``
features, ``N_VALID`` validation rows, and the fit settings in :data:`FIT_KW`. Data sets are
session-scoped, seeded and read-only (a test that wants to change one must copy it).
"""

from __future__ import annotations

import atexit
import contextlib
import gc
import os
import shutil
import signal
import tempfile

import hypothesis
import jax
import numpy as np
import pytest
from jboost.data import binning
from jboost.trees import family
from jboost.trees import oblivious

# --------------------------------------------------------------------------------------------
# One compilation cache for the whole test run: JAX's persistent compilation cache in a directory
# shared by every process of the run (pytest-xdist's workers inherit it from the process that
# made it, and so do the subprocesses tests start: test_sharding, test_io's new process, the
# distributed groups, test_properties' three-device pytest). Compilation is most of the suite's
# CPU time (test_model.py: 43 CPU s cold, 13 s with its programs cached), and the same programs
# are compiled by both workers (files sharing conftest's shapes land on either), again after
# ``jax.clear_caches()`` (``_bounded_mappings``, ``no_xla_optimisations``) and again in every
# subprocess. A cache entry is keyed by the program's HLO, the compile options (so programs
# compiled without XLA's optimisations are never mixed with optimised ones), the XLA flags, the
# devices and the jaxlib version: a hit is the executable a fresh compilation would give.
# The directory is removed when the process that made it exits; set JBOOST_TEST_COMPILATION_CACHE
# to a directory of your own to keep the cache between runs (then nothing is removed), or to
# ``off`` for jboost's default instead (its per-user cache, jboost/_cache.py, which the tests
# of tests/test_compile_cache.py exercise in processes of their own).
_CACHE_ENV = "JBOOST_TEST_COMPILATION_CACHE"


def _share_compilations() -> str | None:
    path = os.environ.get(_CACHE_ENV)
    if path == "off":
        return None
    if not path:
        path = tempfile.mkdtemp(prefix="jboost-tests-xla-cache-")
        os.environ[_CACHE_ENV] = path
        atexit.register(shutil.rmtree, path, ignore_errors=True)
    os.environ["JAX_COMPILATION_CACHE_DIR"] = path            # for the subprocesses
    os.environ["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"] = "0"
    jax.config.update("jax_compilation_cache_dir", path)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    jax.config.update("jax_compilation_cache_max_size", -1)  # unbounded: a temporary directory
    _write_cache_entries_atomically()
    return path


def _write_cache_entries_atomically():
    """JAX writes a cache entry in place (``LRUCache.put`` without a size limit): another worker
    reading it meanwhile would read part of it (a warning, then a compilation). Here an entry is
    written to a temporary file and renamed. (Where this JAX's cache has another layout, its
    own ``put`` is kept.)"""
    try:
        from jax._src import lru_cache
        put, suffix = lru_cache.LRUCache.put, lru_cache._CACHE_SUFFIX
    except (ImportError, AttributeError):
        return
    if getattr(put, "_jboost_atomic", False):
        return

    def put_atomically(self, key, value):
        path = getattr(self, "path", None)
        if getattr(self, "eviction_enabled", True) or not key or path is None:
            return put(self, key, value)
        target = path / f"{key}{suffix}"
        if target.exists():
            return
        partial = path / f".{key}.{os.getpid()}.partial"
        partial.write_bytes(value)
        os.replace(partial, target)

    put_atomically._jboost_atomic = True
    lru_cache.LRUCache.put = put_atomically


COMPILATION_CACHE = _share_compilations()

# Several tests send themselves SIGINT (what Ctrl-C sends) and expect KeyboardInterrupt. A process
# started in the background by a shell without job control (`pytest &`, `nohup ... &`) inherits
# SIGINT *ignored*, and Python then leaves it ignored: those tests would wait for a signal that
# never lands. Here (in the main process and in every xdist worker, which load this file) an
# ignored SIGINT gets Python's usual handler back, as in a foreground run (CI's).
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

# As equinox's test suite: sloppy dtype promotion raises (an int meeting a float, a float32 meeting
# a float64) instead of silently widening or narrowing. A test that must mix dtypes on purpose
# (e.g. an optax schedule, which promotes internally) says so with
# ``jax.numpy_dtype_promotion("standard")``.
jax.config.update("jax_numpy_dtype_promotion", "strict")

# Property-based tests are derandomised: the same examples on every run and machine.
hypothesis.settings.register_profile("jboost", derandomize=True, deadline=None, print_blob=True)
hypothesis.settings.load_profile("jboost")

# Every program XLA compiles for the CPU holds a few memory mappings of its machine code until
# it is dropped from JAX's caches, and Linux caps a process's mappings (vm.max_map_count, 65530 by
# default): past it, mmap fails inside XLA's compiler and the process dies of a segmentation
# fault. The whole suite compiles thousands of programs (a CI run died at 68%, in test_oob, with
# 58k mappings; another died at 88% inside XLA, loading a program from the compilation cache,
# while this check ran only between modules: one module of many tests adds tens of thousands), so
# after each test that leaves more than MAX_MAPPINGS the compiled programs are dropped
# (``jax.clear_caches``). One test adds at most about 2,600 (a logged run of the whole suite).
MAX_MAPPINGS = 30_000
_MAPS = "/proc/self/maps"


def n_mappings() -> int:
    """The process's memory mappings (0 where ``/proc`` does not exist)."""
    if not os.path.exists(_MAPS):
        return 0
    with open(_MAPS, "rb") as f:
        return f.read().count(b"\n")


@pytest.fixture(autouse=True)
def _bounded_mappings():
    yield
    if n_mappings() > MAX_MAPPINGS:
        jax.clear_caches()
        gc.collect()


@pytest.fixture(scope="module")
def quick_compiles():
    """XLA's optimisations off while a module runs (``pytestmark =
    pytest.mark.usefixtures("quick_compiles")``): for modules about plumbing (inputs, names and
    lifecycle) whose programs are tiny, compilation is most of their time and takes
    about a quarter less CPU time without the optimisations (test_ensemble_tabular: 109 -> 85 CPU s).
    The flag is restored after and the module's programs dropped, so no later test reuses a
    program compiled without optimisations. Modules that check numerical properties users rely
    on (vmapped == separate fits, kernel == pure JAX, sharded == single device) keep the
    optimised programs users run, and so do modules that compare with another process
    (test_io's loading in a new process): programs compiled without the optimisations may round
    differently (a stacked ensemble's predictions did)."""
    with no_xla_optimisations():
        yield


@contextlib.contextmanager
def no_xla_optimisations():
    """:func:`quick_compiles` for a block of one test (e.g. code run from the README)."""
    previous = jax.config.values["jax_disable_most_optimizations"]
    jax.config.update("jax_disable_most_optimizations", True)
    try:
        yield
    finally:
        jax.config.update("jax_disable_most_optimizations", previous)
        jax.clear_caches()


@pytest.fixture(scope="module")
def docs_sessions(tmp_path_factory):
    """The documentation's examples (tests/test_docs_examples*.py): each page's namespace and
    first failed block. The blocks run in a temporary directory (the files they write land
    there), without XLA's optimisations (their time is compiling small programs)."""
    here = os.getcwd()
    os.chdir(tmp_path_factory.mktemp("docs_examples"))
    try:
        with no_xla_optimisations():
            yield {}
    finally:
        os.chdir(here)


#: At most this many test worker processes (pytest-xdist, ``-n auto``): each holds its own JAX
#: caches (a few GiB at the suite's peak), and the suite is compile-bound, so a worker per
#: available core up to this count.
MAX_WORKERS = 4


def pytest_xdist_auto_num_workers(config):
    """``-n auto``: one worker per core this process may use, at most :data:`MAX_WORKERS`."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(1, min(cores, MAX_WORKERS))


#: The files of more than a minute and a half of CPU each, longest first (CPU seconds measured
#: alone on a 2-core machine, 2026-11: about 125-140, 136, 115-125, 120, 100, 100). They run
#: first: pytest-xdist (``--dist loadfile --no-loadscope-reorder``, pyproject.toml) hands out
#: whole files in collection order, so a long file handed out last would run alone at the end
#: while the other workers idle. (xdist's default order, most tests first, put the few-test
#: long files -- test_properties: 5 tests, test_sharding: 10, test_io: 11 -- among the last.)
#: A file not listed keeps its place.
LONG_FILES_FIRST = ("test_sharding.py", "test_docs_examples.py", "test_docs_examples_2.py",
                    "test_properties.py",
                    "test_experiments.py", "test_io.py", "test_distributed.py")


#: The markers ``--fast`` leaves out (pyproject.toml registers them).
FAST_LEAVES_OUT = ("slow", "subprocess")


def pytest_addoption(parser):
    parser.addoption("--fast", action="store_true",
                     help="the everyday tier: leave out the tests marked slow or subprocess "
                          "(python -m pytest runs every test, as CI does)")


def pytest_collection_modifyitems(config, items):
    if config.getoption("--fast"):
        left_out = [i for i in items if any(i.get_closest_marker(m) for m in FAST_LEAVES_OUT)]
        if left_out:
            config.hook.pytest_deselected(items=left_out)
            dropped = {i.nodeid for i in left_out}
            items[:] = [i for i in items if i.nodeid not in dropped]
    rank = {name: i for i, name in enumerate(LONG_FILES_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # stable: the rest as collected


N = 200          # training rows of every end-to-end fit
N_VALID = 100    # validation rows
F = 5            # features
N_CLASSES = 3
# Static fit settings shared by the end-to-end tests (so that jit caches hit across files).
FIT_KW = dict(n_rounds=6, depth=3, n_bins=32)


def _frozen(*arrays):
    for a in arrays:
        a.setflags(write=False)
    return arrays


def _features(rng, n):
    return rng.normal(size=(n, F)).astype(np.float32)


def _regression_target(rng, X):
    # A step, a linear and a quadratic term plus a little noise: trees of depth 3 have work to do.
    f = 2.0 * (X[:, 0] > 0) + X[:, 1] + 0.5 * X[:, 2] ** 2
    return (f + 0.1 * rng.normal(size=X.shape[0])).astype(np.float32)


@pytest.fixture(scope="session")
def fit_kw():
    """The static settings every shared end-to-end fit uses (a fresh copy per test)."""
    return dict(FIT_KW)


@pytest.fixture(scope="session")
def regression_data():
    """``(X, y, X_valid, y_valid)``: float32, ``(N, F)``, ``(N,)``, ``(N_VALID, F)``, ``(N_VALID,)``."""
    rng = np.random.default_rng(0)
    X, Xv = _features(rng, N), _features(rng, N_VALID)
    return _frozen(X, _regression_target(rng, X), Xv, _regression_target(rng, Xv))


@pytest.fixture(scope="session")
def binary_data():
    """Labels 0/1 from a noisy linear rule: ``(X, y, X_valid, y_valid)``."""
    rng = np.random.default_rng(1)
    X, Xv = _features(rng, N), _features(rng, N_VALID)

    def label(X):
        score = X[:, 0] + 0.7 * X[:, 1] - 0.5 * X[:, 3] + 0.3 * rng.normal(size=X.shape[0])
        return (score > 0).astype(np.float32)

    return _frozen(X, label(X), Xv, label(Xv))


@pytest.fixture(scope="session")
def multiclass_data():
    """Labels 0..N_CLASSES-1 from the argmax of three noisy linear scores."""
    rng = np.random.default_rng(2)
    X, Xv = _features(rng, N), _features(rng, N_VALID)
    w = rng.normal(size=(F, N_CLASSES))

    def label(X):
        scores = X @ w + 0.3 * rng.normal(size=(X.shape[0], N_CLASSES))
        return np.argmax(scores, axis=1).astype(np.float32)

    return _frozen(X, label(X), Xv, label(Xv))


def trees_equal(a, b) -> bool:
    """Bitwise equality of two pytrees of arrays (same structure, shapes, dtypes and values)."""
    la, lb = jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b)
    if jax.tree_util.tree_structure(a) != jax.tree_util.tree_structure(b):
        return False
    return all(
        np.shape(x) == np.shape(y) and np.asarray(x).dtype == np.asarray(y).dtype
        and np.array_equal(np.asarray(x), np.asarray(y))
        for x, y in zip(la, lb)
    )


@pytest.fixture(scope="session")
def assert_trees_equal():
    """``assert_trees_equal(a, b)``: fails naming the first differing field of two ObliviousTrees."""

    def check(a, b):
        fields = getattr(a, "_fields", None)
        if fields is None:
            assert trees_equal(a, b)
            return
        for name in fields:
            x, y = np.asarray(getattr(a, name)), np.asarray(getattr(b, name))
            assert x.shape == y.shape, f"{name}: shapes {x.shape} != {y.shape}"
            np.testing.assert_array_equal(x, y, err_msg=f"field {name!r} differs")

    return check


# --------------------------------------------------------------------------------------------
# Random oblivious trees and the NumPy definition of their prediction (jboost.trees.family.predict_raw),
# shared by the prediction tests of test_tree.py (any backend) and test_native.py (the kernel).


def _random_trees(rng, n_trees, depth, n_features, k, lead=(), decimals=None):

    shape = tuple(lead) + (n_trees,)
    borders = rng.normal(size=shape + (depth,))
    return oblivious.ObliviousTrees(
        features=jax.numpy.asarray(rng.integers(0, n_features, shape + (depth,)), np.int32),
        thresholds=jax.numpy.zeros(shape + (depth,), np.int32),
        borders=jax.numpy.asarray(borders if decimals is None else borders.round(decimals), np.float32),
        missing_right=jax.numpy.asarray(rng.uniform(size=shape + (depth,)) < 0.5),
        leaf_values=jax.numpy.asarray(rng.normal(size=shape + (2**depth, k)), np.float32),
        gains=jax.numpy.ones(shape + (depth,), np.float32))


def _predict_reference(trees, X):
    """``(n, K)`` float64: every tree's leaf ``sum_d right_d << d`` (NaN follows missing_right;
    subnormal values and borders compare as the smallest normal number of their sign), leaf values
    summed over trees."""

    flat = jax.tree_util.tree_map(np.asarray, family.flatten_trees(trees))
    X = binning.clamp_subnormals(X)
    n, depth = X.shape[0], flat.features.shape[-1]
    out = np.zeros((n, flat.leaf_values.shape[-1]))
    for t in range(flat.features.shape[0]):
        leaf = np.zeros(n, np.int64)
        for d in range(depth):
            x = X[:, flat.features[t, d]]
            b = float(binning.clamp_subnormals(flat.borders[t, d]))
            right = np.where(np.isnan(x), bool(flat.missing_right[t, d]), x > b)
            leaf += right.astype(np.int64) << d
        out += flat.leaf_values[t][leaf]
    return out


@pytest.fixture(scope="session")
def random_trees():
    """``random_trees(rng, n_trees, depth, n_features, k, lead=(), decimals=None)``: an
    :class:`jboost.trees.oblivious.ObliviousTrees` stack of shape ``lead + (n_trees,)``."""
    return _random_trees


@pytest.fixture(scope="session")
def predict_reference():
    """``predict_reference(trees, X)``: the NumPy definition of ``tree.predict_raw``."""
    return _predict_reference
