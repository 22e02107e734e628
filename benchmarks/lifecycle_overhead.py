"""What the lifecycle arguments cost: a default fit against the same fit with ``verbose=``,
``callbacks=`` or ``checkpoint_dir=`` (issue 15: progress should cost <= 5% of the fit).

For ``jboost.fit``, ``bagging.fit_forest`` and ``bagging.fit_bagged_boosters`` with their default
settings (100 rounds of depth 6; 100 trees of depth 10; 10 bags of 100 rounds) on synthetic
binary data of a few sizes, every variant is fitted once to compile, then timed ``--repeats``
times round-robin (``jax.block_until_ready`` on the model; the fastest time is reported) and
printed as its ratio to the default fit. A concrete forest or bagged fit runs its chunks from the host (so ``Ctrl-C``
keeps the trees or bags so far); ``one program`` is the same fit run as one compiled program
(the way a fit under ``jax.vmap`` runs, and a concrete one ran before), for comparison. The
machine's load average is printed before and after: on a shared machine the ratios are only as
good as it is quiet.

    python benchmarks/lifecycle_overhead.py            # 2k and 20k rows x 20 features
    python benchmarks/lifecycle_overhead.py --quick    # 2k rows only, 1 repeat
    python benchmarks/lifecycle_overhead.py --smoke    # CI's check: 500 rows, 10 rounds / trees
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import shutil
import tempfile
import time

import jax
import numpy as np

import jboost
from jboost import bagging
from jboost import datasets
from jboost.fitting import rounds


def _loadavg() -> str:
    try:
        with open("/proc/loadavg") as f:
            return " ".join(f.read().split()[:3])
    except OSError:
        return "n/a"


def _noop(_info):
    return None


def _variants(fit, X, y):
    """name -> a function fitting the model with that variant's lifecycle arguments."""
    chunks = {}

    def checkpointed():
        d = tempfile.mkdtemp(prefix="jboost-bench-")  # a fresh directory: nothing to resume
        chunks.setdefault("dirs", []).append(d)
        return fit(X, y, checkpoint_dir=d)

    out = {
        "default": lambda: fit(X, y),
        "verbose": lambda: fit(X, y, verbose=True),
        "callbacks": lambda: fit(X, y, callbacks=[_noop]),
        "checkpoints": checkpointed,
    }
    return out, chunks


def _one_program(fit, X, y):
    """The fit as one compiled program (the path of a fit under ``jax.vmap`` / ``jax.jit``)
    instead of host-side chunks: :func:`jboost.fitting.rounds.host_fit` answers no."""
    host_fit = rounds.host_fit
    rounds.host_fit = lambda *values: False
    try:
        return fit(X, y)
    finally:
        rounds.host_fit = host_fit


def _time_interleaved(variants, repeats: int) -> dict:
    """Each variant timed ``repeats`` times, round-robin (variant 1, 2, ..., 1, 2, ...), so a
    change in the machine's load hits every variant alike; the fastest time of each is kept
    (the least disturbed by other work on a shared machine)."""
    times = {name: [] for name in variants}
    for _ in range(repeats):
        for name, fn in variants.items():
            start = time.perf_counter()
            with contextlib.redirect_stdout(io.StringIO()):
                jax.block_until_ready(fn())
            times[name].append(time.perf_counter() - start)
    return {name: min(t) for name, t in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="2000,20000", help="rows, comma-separated")
    parser.add_argument("--features", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="2000 rows, 1 repeat")
    parser.add_argument("--cases", default="fit,forest,bagged")
    parser.add_argument("--smoke", action="store_true",
                        help="the smallest size (CI's check): 500 rows, 1 repeat, 10 rounds / 10 "
                             "trees / 2 bags of 10 rounds instead of the defaults")
    args = parser.parse_args()
    sizes = [500] if args.smoke else [2000] if args.quick else [int(s) for s in args.sizes.split(",")]
    repeats = 1 if args.quick or args.smoke else args.repeats
    small = ({"fit": {"n_rounds": 10}, "forest": {"n_trees": 10},
              "bagged": {"n_rounds": 10, "n_bags": 2}} if args.smoke else {})  # else the defaults
    cases = {
        # jboost.fit: verbose=N prints every N rounds (a line per chunk of 10 rounds here).
        "fit": lambda X, y, verbose=False, **kw: jboost.fit(
            X, y, "binomial_deviance", verbose=10 if verbose else 0, **small.get("fit", {}), **kw),
        "forest": lambda X, y, **kw: bagging.fit_forest(X, y, **small.get("forest", {}), **kw),
        "bagged": lambda X, y, **kw: bagging.fit_bagged_boosters(X, y, "binomial_deviance",
                                                                 **small.get("bagged", {}), **kw),
    }
    chosen = [c for c in args.cases.split(",") if c]
    print(f"jax {jax.__version__}, {jax.devices()[0].platform}, {len(jax.devices())} device(s), "
          f"{os.cpu_count()} CPUs; load average before: {_loadavg()}")
    header = f"{'case':8s} {'rows':>7s} {'default s':>10s} {'verbose':>8s} {'callbacks':>9s} " \
             f"{'checkpts':>9s} {'one program':>11s}"
    print(header)
    for n in sizes:
        X, y = datasets.make_classification(n, n_features=args.features, n_informative=10, seed=0)
        X, y = np.asarray(X, np.float32), np.asarray(y, np.float32)
        for case in chosen:
            fit = cases[case]
            variants, made = _variants(fit, X, y)
            if case != "fit":  # the same fit as one program (what a concrete fit was before)
                variants["one program"] = lambda fit=fit: _one_program(fit, X, y)
            for fn in variants.values():
                with contextlib.redirect_stdout(io.StringIO()):
                    jax.block_until_ready(fn())  # compile
            seconds = _time_interleaved(variants, repeats)
            for d in made.get("dirs", []):
                shutil.rmtree(d, ignore_errors=True)
            base = seconds["default"]
            ratio = lambda k: f"{seconds[k] / base:.3f}" if k in seconds else "-"  # noqa: E731
            print(f"{case:8s} {n:7d} {base:10.3f} {ratio('verbose'):>8s} {ratio('callbacks'):>9s} "
                  f"{ratio('checkpoints'):>9s} {ratio('one program'):>11s}", flush=True)
    print(f"load average after: {_loadavg()} (ratios: time of the variant / time of the default fit; "
          f"fastest of {repeats}, timed round-robin)")


if __name__ == "__main__":
    main()
