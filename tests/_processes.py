"""How long the suite waits for the processes it starts (subprocesses, process groups).

A deadline is never a speed test: it only catches a hang. So each is generous and grows with the
machine's load: :func:`deadline` of work that takes ``quiet`` seconds on a quiet 2-core machine is
``FACTOR * quiet`` (at least ``MINIMUM``), times the load per core when the machine is busier than
one runnable process per core, times ``JBOOST_TEST_DEADLINE_SCALE`` (default 1); bounds on
prompt reactions (a Ctrl-C honoured) scale the same way (:func:`scaled`). A process that
still runs past it fails its test with a message saying what was waited for, how long, and the load
(:func:`run`; test_distributed.py polls its process groups against :func:`deadline` itself).
"""

from __future__ import annotations

import os
import subprocess
import sys

#: Deadline over the quiet time (issue 45 saw a loaded 2-core machine run process groups 20x
#: slower than a quiet one).
FACTOR = 40
#: No deadline is shorter (seconds).
MINIMUM = 900
SCALE_ENV = "JBOOST_TEST_DEADLINE_SCALE"


def cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def load_per_core() -> float:
    """The 1-minute load average over the cores this process may use (0 where unknown)."""
    try:
        return os.getloadavg()[0] / cores()
    except (AttributeError, OSError):
        return 0.0


def deadline(quiet: float) -> float:
    """Seconds to wait for work taking ``quiet`` seconds on a quiet 2-core machine."""
    return scaled(max(MINIMUM, FACTOR * quiet))


def scaled(seconds: float) -> float:
    """A bound on how long something prompt may take (a Ctrl-C honoured, a file refused):
    ``seconds`` on a quiet machine, times the load per core when above 1, times
    ``JBOOST_TEST_DEADLINE_SCALE``."""
    return seconds * max(1.0, load_per_core()) * float(os.environ.get(SCALE_ENV, "1") or 1)


def explain(what: str, waited: float) -> str:
    """Why a deadline was hit, for the failure message."""
    return (f"{what} still ran after {waited:.0f} s (deadline: {FACTOR}x its quiet time, at least "
            f"{MINIMUM} s, times the load per core; load per core now {load_per_core():.1f}). "
            f"A hang, or a machine slower still: set {SCALE_ENV} to wait longer.")


def run(args, *, quiet: float, what: str, **kwargs) -> subprocess.CompletedProcess:
    """``subprocess.run(args, capture_output=True, text=True, **kwargs)`` with
    ``timeout=deadline(quiet)``; past it, an ``AssertionError`` from :func:`explain`."""
    waited = deadline(quiet)
    try:
        return subprocess.run(args, capture_output=True, text=True, timeout=waited, **kwargs)
    except subprocess.TimeoutExpired as e:
        tail = (e.stderr or b"")[-3000:]
        tail = tail.decode(errors="replace") if isinstance(tail, bytes) else tail
        raise AssertionError(explain(what, waited) + "\n" + tail) from None


def on_two_devices(code: str, *, quiet: float, what: str) -> subprocess.CompletedProcess:
    """:func:`python` of ``code`` on two host CPU devices, with the repository and ``tests/`` on
    the path (``code`` may import the test modules)."""
    here = os.path.dirname(os.path.abspath(__file__))
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=2",
               JAX_PLATFORMS="cpu", PYTHONPATH=os.pathsep.join([os.path.dirname(here), here]))
    return python(code, quiet=quiet, what=what, env=env)


def python(code: str, *, quiet: float, what: str, extra_args=(), **kwargs):
    """:func:`run` of ``python -c code``."""
    return run([sys.executable, "-c", code, *extra_args], quiet=quiet, what=what, **kwargs)
