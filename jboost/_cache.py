"""jboost's compiled programs kept between processes: JAX's persistent compilation cache, on by
default (docs/compile.md).

When jboost first compiles (the import of :mod:`jboost._compile`), :func:`configure` points JAX's
persistent compilation cache at a per-user directory, unless the user has configured that cache
(``jax_compilation_cache_dir`` set, by ``JAX_COMPILATION_CACHE_DIR`` or ``jax.config.update``) or
turned jboost's off (``JBOOST_CACHE_DIR=off``). The directory is

    <JBOOST_CACHE_DIR, or the user cache folder / "jboost"> / xla-<fingerprint>

where the fingerprint (:func:`fingerprint`) names jboost's version, jax's and jaxlib's versions, the
compiled kernel library (its path, size, modification time and ABI version) and the CPU's
instruction set: an upgrade, a rebuilt kernel or another machine sharing the home folder gets a
directory of its own, so a stale or
foreign program is never loaded. Each directory is bounded (:data:`MAX_BYTES`, least recently used
entries evicted by JAX under a file lock, so processes may share it); directories of other
fingerprints unused for :data:`STALE_DAYS` days are removed.

The setting is JAX's and so process-wide: once jboost is imported and has compiled, the user's own
JAX programs that take longer than ``jax_persistent_cache_min_compile_time_secs`` to compile are
kept there too.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import platform
import shutil
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Optional

import jax
import jaxlib

from jboost import _native
from jboost._version import __version__

#: The environment variable that moves jboost's cache (a folder) or turns it off (``off``, ``0``,
#: ``false``, ``no``).
ENV = "JBOOST_CACHE_DIR"
OFF = ("0", "off", "false", "no", "none")
#: The bound of one cache directory, in bytes (unless ``jax_compilation_cache_max_size`` is set).
MAX_BYTES = 1 << 30
#: Programs that compile faster than this are not written (unless the user set JAX's
#: ``jax_persistent_cache_min_compile_time_secs``): a fit's small programs load faster than they
#: compile, the smallest ones (a few milliseconds) do not.
MIN_COMPILE_SECONDS = 0.02
#: Directories of other fingerprints not used for this many days are removed.
STALE_DAYS = 30
_STAMP = "last-used"
_JAX_DEFAULT_MIN_SECONDS = 1.0


def default_root() -> Path:
    """The folder holding jboost's cache directories when ``JBOOST_CACHE_DIR`` is unset: the
    user's cache folder (``XDG_CACHE_HOME`` or ``~/.cache`` on Linux, ``~/Library/Caches`` on
    macOS, ``LOCALAPPDATA`` on Windows) / ``jboost``."""
    if sys.platform == "win32":
        base = Path(os.environ.get("LOCALAPPDATA") or Path.home() / "AppData" / "Local")
    elif sys.platform == "darwin":
        base = Path.home() / "Library" / "Caches"
    else:
        base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "jboost"


def _cpu_features() -> str:
    """The CPU's model and instruction-set flags (Linux: ``/proc/cpuinfo``), else its name."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            lines = [ln for ln in f if ln.startswith(("model name", "flags", "Features"))]
        return "".join(sorted(set(lines)))
    except OSError:
        return f"{platform.machine()} {platform.processor()}"


def _library_identity(path: Optional[str]) -> str:
    """The kernel library's path, size, modification time and ABI version: a rebuilt or
    replaced library is another identity (its bytes are not read: a few milliseconds saved on
    every process's first fit)."""
    if path is None:
        return "no-kernel"
    st = os.stat(path)
    return f"{os.path.realpath(path)} {st.st_size} {st.st_mtime_ns} abi{_native.ABI_VERSION}"


def fingerprint() -> str:
    """The name of this installation's cache directory: ``xla-`` and a digest of jboost's version,
    jax's and jaxlib's versions, the kernel library's identity (path, size, modification time,
    ABI version) and the CPU's instruction set."""
    parts = [__version__, jax.__version__, jaxlib.__version__,
             _library_identity(_native.library_path()), _cpu_features()]
    return "xla-" + hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]


def _usable(path: Path) -> Optional[str]:
    """``None`` when ``path`` can be created and written, else why not."""
    try:
        path.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=path, prefix=".probe-"):
            pass
        (path / _STAMP).touch()
    except OSError as e:
        return f"{type(e).__name__}: {e}"
    return None


def prune(root: Path, keep: Path, days: float = STALE_DAYS) -> list[str]:
    """Remove the directories under ``root`` named like a cache (``xla-*``) other than ``keep``
    whose last use is older than ``days`` days.

    Returns:
      The names removed.
    """
    removed = []
    limit = time.time() - days * 86400
    try:
        entries = list(root.glob("xla-*"))
    except OSError:
        return removed
    for d in entries:
        if d == keep or not d.is_dir():
            continue
        stamp = d / _STAMP
        try:
            used = (stamp if stamp.exists() else d).stat().st_mtime
        except OSError:
            continue
        if used < limit:
            shutil.rmtree(d, ignore_errors=True)
            removed.append(d.name)
    return removed


def directory() -> Optional[str]:
    """The persistent compilation cache directory this process uses (jboost's or the user's own),
    or ``None`` when programs are not kept between processes."""
    if not jax.config.jax_enable_compilation_cache:
        return None
    return jax.config.jax_compilation_cache_dir


def configure() -> Optional[str]:
    """Turn on JAX's persistent compilation cache in jboost's directory (see the module's
    docstring), unless the user configured it or set ``JBOOST_CACHE_DIR=off``. Called once, when
    :mod:`jboost._compile` is imported; calling it again changes nothing.

    Returns:
      The directory in use, or ``None``. A directory that cannot be written gives one
      ``RuntimeWarning`` naming it and ``JBOOST_CACHE_DIR``, and no cache.
    """
    if jax.config.jax_compilation_cache_dir is not None:
        return directory()  # the user's own (or already configured): theirs to set
    env = os.environ.get(ENV, "").strip()
    if env.lower() in OFF:
        return None
    if importlib.util.find_spec("filelock") is None:  # a dependency: JAX bounds the cache with it
        warnings.warn(f"jboost's compilation cache needs the filelock package (pip install "
                      f"filelock): each process compiles its programs again.", RuntimeWarning,
                      stacklevel=2)
        return None
    root = Path(env).expanduser() if env else default_root()
    path = root / fingerprint()
    problem = _usable(path)
    if problem is not None:
        warnings.warn(f"jboost keeps its compiled programs in {path}, which cannot be written "
                      f"({problem}): each process compiles them again. Set {ENV} to a writable "
                      f"folder, or {ENV}=off to silence this.", RuntimeWarning, stacklevel=2)
        return None
    jax.config.update("jax_compilation_cache_dir", str(path))
    if jax.config.jax_compilation_cache_max_size == -1:
        jax.config.update("jax_compilation_cache_max_size", MAX_BYTES)
    if (jax.config.jax_persistent_cache_min_compile_time_secs == _JAX_DEFAULT_MIN_SECONDS
            and "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS" not in os.environ):
        jax.config.update("jax_persistent_cache_min_compile_time_secs", MIN_COMPILE_SECONDS)
    prune(root, path)
    return directory()
