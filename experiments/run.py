"""Run one experiment config and record everything needed to reproduce its numbers.

Usage::

    python -m experiments.run <name> [--smoke] [--workdir DIR] [--data-dir DIR]

``<name>`` is a module of :mod:`experiments.configs` defining

* ``get_config(smoke: bool) -> dict``: JSON-serialisable, with keys ``"seed"`` and
  ``"description"``;
* ``run(config: dict, ctx: Context) -> dict``: returns at least ``"table"``, a list of rows
  ``{"quantity": str, "published": float | None, "ours": float}``.

The runner writes into the workdir (default ``runs/<name>`` or ``runs/<name>-smoke``):

* ``config.json``: the config plus the git commit, ``jax.__version__``, the seed and the command;
* ``metrics.jsonl``: one JSON line per ``ctx.log(step, **metrics)`` call;
* ``results.json``: what ``run`` returned (plus the run's wall time);
* ``*.png``: the figures passed to ``ctx.savefig``;

and prints the table, published numbers beside ours. jboost is bitwise deterministic on CPU and
every config is seeded, so the same command gives the same numbers (timings aside). This layout
follows big_vision's config + workdir convention.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import json
import math
import os
import pkgutil
import platform
import shlex
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, List, Optional

import jax
import numpy as np

import jboost
from experiments import configs as configs_pkg

REPO_ROOT = Path(__file__).resolve().parent.parent
REQUIRED_CONFIG_KEYS = ("seed", "description")


def available_experiments() -> List[str]:
    """Names of the config modules in :mod:`experiments.configs` (sorted)."""
    return sorted(m.name for m in pkgutil.iter_modules(configs_pkg.__path__)
                  if not m.name.startswith("_"))


def default_workdir(name: str, smoke: bool) -> Path:
    """``runs/<name>`` or ``runs/<name>-smoke`` (relative to the working directory)."""
    return Path("runs") / (name + ("-smoke" if smoke else ""))


def git_commit() -> str:
    """``git rev-parse HEAD`` of the repository, or ``"unknown"`` outside a git checkout."""
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO_ROOT, capture_output=True,
                             text=True, timeout=10, check=True)
        return out.stdout.strip() or "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def git_dirty() -> Optional[bool]:
    """Whether tracked or untracked files differ from the commit (``None`` if unknown)."""
    try:
        out = subprocess.run(["git", "status", "--porcelain", "--untracked-files=normal"],
                             cwd=REPO_ROOT, capture_output=True, text=True, timeout=10, check=True)
        return bool(out.stdout.strip())
    except (OSError, subprocess.SubprocessError):
        return None


def to_jsonable(value: Any) -> Any:
    """NumPy / JAX scalars and arrays to plain Python (floats, ints, bools, lists)."""
    if isinstance(value, dict):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_jsonable(v) for v in value]
    if isinstance(value, (str, bool, int)) or value is None:
        return value
    if isinstance(value, float):
        return value
    if isinstance(value, Path):
        return str(value)
    arr = np.asarray(value)
    if arr.ndim == 0:
        return arr.item()
    return arr.tolist()


def _dump(obj: Any, path: Path) -> None:
    path.write_text(json.dumps(to_jsonable(obj), indent=2, sort_keys=False, allow_nan=True) + "\n")


@dataclasses.dataclass
class Context:
    """What a config's ``run`` gets: where to write, where the data is, how to log and plot."""

    workdir: Path
    data_dir: Optional[Path]
    smoke: bool

    def __post_init__(self):
        self.workdir = Path(self.workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.metrics_path = self.workdir / "metrics.jsonl"
        self.metrics_path.write_text("")  # a rerun into the same workdir starts a fresh log
        self.figures: List[str] = []

    def log(self, step: int, **metrics) -> None:
        """Append ``{"step": step, **metrics}`` as one JSON line to ``metrics.jsonl``."""
        record = {"step": int(step), **to_jsonable(metrics)}
        with self.metrics_path.open("a") as fh:
            fh.write(json.dumps(record, allow_nan=True) + "\n")

    @property
    def pyplot(self):
        """``matplotlib.pyplot`` with the non-interactive Agg backend, or ``None`` if missing."""
        try:
            import matplotlib
        except ImportError:
            return None
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        return plt

    def savefig(self, fig, name: str) -> Optional[Path]:
        """Save ``fig`` as ``<workdir>/<name>.png`` and close it; a printed note if there is no
        matplotlib (or ``fig`` is ``None`` because the config could not make one)."""
        if fig is None or self.pyplot is None:
            print(f"note: matplotlib is not installed; figure {name!r} not written "
                  "(pip install -e '.[plots]').")
            return None
        path = self.workdir / (name if name.endswith(".png") else f"{name}.png")
        fig.savefig(path, dpi=110, bbox_inches="tight")
        self.pyplot.close(fig)
        self.figures.append(path.name)
        return path


def _fmt(x: Any) -> str:
    if x is None:
        return "-"
    if isinstance(x, bool):
        return str(x)
    if isinstance(x, (int, float, np.floating, np.integer)):
        x = float(x)
        if math.isnan(x):
            return "nan"
        return f"{x:.4g}" if abs(x) >= 1e-3 or x == 0 else f"{x:.3e}"
    return str(x)


def format_table(rows: List[dict]) -> str:
    """The results table as aligned text: ``quantity | published | ours``."""
    header = ("quantity", "published", "ours")
    body = [(str(r["quantity"]), _fmt(r.get("published")), _fmt(r["ours"])) for r in rows]
    widths = [max(len(h), *(len(b[i]) for b in body)) if body else len(h) for i, h in enumerate(header)]
    line = lambda cells: " | ".join(c.ljust(w) if i == 0 else c.rjust(w)
                                    for i, (c, w) in enumerate(zip(cells, widths)))
    sep = "-+-".join("-" * w for w in widths)
    return "\n".join([line(header), sep] + [line(b) for b in body])


def check_table(table: Any, name: str) -> None:
    """Raise ``ValueError`` unless ``table`` is a list of ``{quantity, published, ours}`` rows."""
    if not isinstance(table, list) or not table:
        raise ValueError(f"experiment {name!r}: run() must return a non-empty list under 'table'.")
    for row in table:
        if not isinstance(row, dict) or not {"quantity", "published", "ours"} <= set(row):
            raise ValueError(f"experiment {name!r}: each table row needs keys quantity, published, "
                             f"ours; got {row!r}.")


def load_config_module(name: str):
    """Import ``experiments.configs.<name>``; ``ValueError`` listing the choices if unknown."""
    names = available_experiments()
    if name not in names:
        raise ValueError(f"unknown experiment {name!r}; available experiments: {', '.join(names)}.")
    return importlib.import_module(f"{configs_pkg.__name__}.{name}")


def run_experiment(name: str, *, smoke: bool = False, workdir: Optional[os.PathLike] = None,
                   data_dir: Optional[os.PathLike] = None, command: Optional[str] = None) -> dict:
    """Run experiment ``name``; writes config.json, metrics.jsonl, results.json and figures.

    Returns the results dict (with ``"table"``).
    """
    module = load_config_module(name)
    config = module.get_config(smoke)
    missing = [k for k in REQUIRED_CONFIG_KEYS if k not in config]
    if missing:
        raise ValueError(f"experiment {name!r}: get_config() must define {missing}.")
    json.dumps(config)  # the config must be JSON-serialisable as it is
    workdir = Path(workdir) if workdir is not None else default_workdir(name, smoke)
    ctx = Context(workdir=workdir, data_dir=Path(data_dir) if data_dir is not None else None, smoke=smoke)
    commit = git_commit()
    meta = {
        "experiment": name,
        "seed": config["seed"],
        "description": config["description"],
        "smoke": smoke,
        "command": command or f"python -m experiments.run {name}" + (" --smoke" if smoke else ""),
        "git_commit": commit,
        "git_dirty": git_dirty() if commit != "unknown" else None,
        "jax_version": jax.__version__,
        "jboost_version": jboost.__version__,
        "python_version": platform.python_version(),
        "platform": platform.platform(),
        "jax_backend": jax.default_backend(),
        "data_dir": str(ctx.data_dir) if ctx.data_dir is not None else None,
        "config": config,
    }
    _dump(meta, ctx.workdir / "config.json")

    t0 = time.perf_counter()
    results = module.run(config, ctx)
    wall = time.perf_counter() - t0
    check_table(results.get("table") if isinstance(results, dict) else None, name)
    results = {"experiment": name, **results, "wall_time_s": wall, "figures": list(ctx.figures)}
    _dump(results, ctx.workdir / "results.json")
    return results


def print_results(name: str, results: dict, workdir: Path) -> None:
    print(f"\n== {name} ==")
    print(format_table(results["table"]))
    for key in ("checks", "timings"):
        if results.get(key):
            print(f"{key}: " + ", ".join(f"{k}={_fmt(v)}" for k, v in results[key].items()))
    print(f"wall time: {results['wall_time_s']:.1f} s; outputs in {workdir}")


def main(argv: Optional[List[str]] = None) -> int:
    """Command-line entry point; returns the exit status (0 ok, 1 missing data, 2 bad usage)."""
    parser = argparse.ArgumentParser(
        prog="python -m experiments.run",
        description="Run a jboost experiment and print its results beside the published numbers.",
        epilog="experiments: " + ", ".join(available_experiments()))
    parser.add_argument("name", help="experiment config name (a module of experiments/configs)")
    parser.add_argument("--smoke", action="store_true", help="a quick, small variant (seconds)")
    parser.add_argument("--workdir", default=None, help="output directory (default runs/<name>[-smoke])")
    parser.add_argument("--data-dir", default=None,
                        help="directory of the dataset CSVs (default: $JBOOST_DATA_DIR, then ../shared/data)")
    args = parser.parse_args(argv)
    argv_list = sys.argv[1:] if argv is None else list(argv)
    command = "python -m experiments.run " + shlex.join(argv_list)
    if args.name not in available_experiments():
        print(f"error: unknown experiment {args.name!r}. Available experiments: "
              f"{', '.join(available_experiments())}.", file=sys.stderr)
        return 2
    workdir = Path(args.workdir) if args.workdir else default_workdir(args.name, args.smoke)
    try:
        results = run_experiment(args.name, smoke=args.smoke, workdir=workdir, data_dir=args.data_dir,
                                 command=command)
    except FileNotFoundError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    print_results(args.name, results, workdir)
    return 0


if __name__ == "__main__":
    sys.exit(main())
