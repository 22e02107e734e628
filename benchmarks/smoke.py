"""CI's peer check (issue 47): every benchmark script at its smallest size, each in its own process.

    python -m benchmarks.smoke [--data-dir DIR] [--timeout S] [--verbose] [NAME ...]

Runs ``python benchmarks/<name>.py --smoke`` for every script of :data:`SCRIPTS` (or the NAMEs
given), one after the other, and prints one line per script: its name, ``ok`` / ``FAILED`` /
``TIMEOUT`` and its seconds; a failed script's stderr tail (and stdout tail) follows. ``--smoke``
is each script's smallest size that still runs every peer it compares, so a peer's new release
that breaks the comparison (an API change, a dtype it now refuses) fails here the day it is
installed. Before the scripts it checks that every peer of the ``bench`` extra imports
(:data:`PEERS`) and prints their versions. The exit status is 1 if a peer does not import or a
script fails or runs past ``--timeout`` (default 600 s each), 2 for an unknown NAME.

Each script runs with this checkout first on ``PYTHONPATH``, in a temporary working directory
(nothing it writes there, e.g. CatBoost's ``catboost_info``, lands in the clone), with
``JBOOST_DATA_DIR`` set to ``--data-dir`` (given as an absolute path; scripts that take
``--data-dir`` get it too) and ``OMP_WAIT_POLICY=PASSIVE`` unless set: the check is that the peers
run, not how fast, and on a loaded 2-core machine spinning OpenMP threads made a 5-round fit of a
few thousand rows take seconds.

:data:`SCRIPTS` must name every ``benchmarks/*.py`` script, modules named ``_*`` aside
(tests/test_experiments.py checks it), so a new benchmark cannot be left out of CI.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import importlib.metadata
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent

#: Every benchmark script (``benchmarks/<name>.py``) -> whether it takes ``--data-dir``.
SCRIPTS: dict[str, bool] = {
    "adult_categorical": True,
    "bench": False,
    "constraint_memory": True,
    "custom_losses": True,
    "depthwise_bench": True,
    "distributed_memory": False,
    "forest_bench": True,
    "hostile_files": False,
    "interactions": True,
    "interactive": False,
    "lifecycle_bench": False,
    "lifecycle_overhead": False,
    "multiclass_bench": True,
    "multiclass_step": False,
    "monotone": True,
    "multi_quantile": True,
    "ngboost_bench": True,
    "onnx_latency": False,
    "shap_bench": False,
    "survival_ranking": False,
    "sweep_bench": True,
}

#: The peers of the ``bench`` extra (pyproject.toml): distribution -> module imported.
PEERS: dict[str, str] = {
    "xgboost": "xgboost",
    "lightgbm": "lightgbm",
    "catboost": "catboost",
    "scikit-learn": "sklearn",
    "ngboost": "ngboost",
    "scikit-survival": "sksurv",
    "onnx": "onnx",
    "onnxruntime": "onnxruntime",
    "treelite": "treelite",
}

TAIL_LINES = 40


@dataclasses.dataclass
class Result:
    name: str
    status: str  # "ok", "FAILED" or "TIMEOUT"
    seconds: float
    returncode: int | None
    stdout: str
    stderr: str


def check_peers(peers: dict[str, str] = PEERS) -> dict[str, str]:
    """``{distribution: version}`` of every peer, or ``"NOT IMPORTABLE: <error>"``."""
    out = {}
    for dist, module in peers.items():
        try:
            importlib.import_module(module)
        except Exception as err:  # noqa: BLE001 -- an import that raises anything is a failure
            out[dist] = f"NOT IMPORTABLE: {type(err).__name__}: {err}"
            continue
        try:
            out[dist] = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            out[dist] = "unknown version"
    return out


def script_env(data_dir: str | None) -> dict[str, str]:
    """The scripts' environment: this checkout first on ``PYTHONPATH``, ``JBOOST_DATA_DIR`` and
    ``OMP_WAIT_POLICY`` (module docstring)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO)] + [p for p in [env.get("PYTHONPATH")] if p])
    if data_dir is not None:
        env["JBOOST_DATA_DIR"] = data_dir
    env.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    return env


def run_script(name: str, *, data_dir: str | None = None, timeout: float = 600.0,
               scripts_dir: Path = HERE, takes_data_dir: bool | None = None) -> Result:
    """Run ``<scripts_dir>/<name>.py --smoke`` in its own process and temporary directory."""
    cmd = [sys.executable, str(scripts_dir / f"{name}.py"), "--smoke"]
    takes = SCRIPTS.get(name, False) if takes_data_dir is None else takes_data_dir
    if data_dir is not None and takes:
        cmd += ["--data-dir", data_dir]
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix=f"jboost-smoke-{name}-") as cwd:
        try:
            proc = subprocess.run(cmd, cwd=cwd, env=script_env(data_dir), capture_output=True,
                                  text=True, timeout=timeout, check=False)
        except subprocess.TimeoutExpired as err:
            return Result(name, "TIMEOUT", time.perf_counter() - t0, None, _text(err.stdout),
                          _text(err.stderr))
    status = "ok" if proc.returncode == 0 else "FAILED"
    return Result(name, status, time.perf_counter() - t0, proc.returncode, proc.stdout, proc.stderr)


def _text(out) -> str:
    """A timed-out process's captured output (bytes, or None) as text."""
    return out.decode(errors="replace") if isinstance(out, bytes) else (out or "")


def _tail(text: str, n: int = TAIL_LINES) -> str:
    lines = text.rstrip().splitlines()
    return "\n".join(("    " + line) for line in lines[-n:]) if lines else "    (empty)"


def report(result: Result, verbose: bool = False) -> None:
    print(f"{result.name:<20} {result.status:<8} {result.seconds:7.1f} s", flush=True)
    if verbose and result.status == "ok":
        print(_tail(result.stdout, 10 ** 6), flush=True)
    if result.status != "ok":
        code = "" if result.returncode is None else f", exit status {result.returncode}"
        print(f"  {result.name}{code}; stderr (last {TAIL_LINES} lines):\n{_tail(result.stderr)}")
        print(f"  stdout (last 10 lines):\n{_tail(result.stdout, 10)}", flush=True)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.smoke",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("names", nargs="*", metavar="NAME",
                        help="scripts to run (default: all): " + ", ".join(SCRIPTS))
    parser.add_argument("--data-dir", default=None,
                        help="the shared data sets (default: each script's own search: "
                             "$JBOOST_DATA_DIR, then ../shared/data)")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds per script")
    parser.add_argument("--verbose", "-v", action="store_true", help="print each script's output")
    args = parser.parse_args(argv)
    unknown = [n for n in args.names if n not in SCRIPTS]
    if unknown:
        print(f"error: unknown script(s) {', '.join(unknown)}; known: {', '.join(SCRIPTS)}",
              file=sys.stderr)
        return 2
    data_dir = str(Path(args.data_dir).resolve()) if args.data_dir is not None else None
    peers = check_peers()
    missing = [d for d, v in peers.items() if v.startswith("NOT IMPORTABLE")]
    print("peers: " + ", ".join(f"{d} {v}" for d, v in peers.items()), flush=True)
    t0 = time.perf_counter()
    results: list[Result] = []
    for name in args.names or list(SCRIPTS):
        results.append(run_script(name, data_dir=data_dir, timeout=args.timeout))
        report(results[-1], args.verbose)
    bad = [r.name for r in results if r.status != "ok"]
    print(f"{len(results) - len(bad)} of {len(results)} benchmark scripts ran (--smoke) in "
          f"{time.perf_counter() - t0:.0f} s" + (f"; failed: {', '.join(bad)}" if bad else "")
          + (f"; peers not importable: {', '.join(missing)}" if missing else ""), flush=True)
    return 1 if bad or missing else 0


if __name__ == "__main__":
    sys.exit(main())
