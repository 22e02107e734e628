"""What a researcher waits for when a script or notebook starts again: import, first fit and second
fit in a fresh process, jboost (with its compilation cache cold, warm and off) beside XGBoost and
LightGBM, in one run on one machine.

    python benchmarks/interactive.py                  # 1,000 x 10 binary, 100 rounds, 5 repeats
    python benchmarks/interactive.py --rows 100000 --features 50 --json out.json
    python benchmarks/interactive.py --libs jboost    # without the peers
    python benchmarks/interactive.py --smoke          # CI's peer check: 10 rounds, 1 repeat

Each measurement is a new Python process (``--repeats`` of them; the median is printed):

* ``import``: ``import jboost`` (``xgboost``, ``lightgbm``), numpy already imported; jboost
  loads nothing then, so ``+ jax`` is the ``import jax`` that its first use needs, timed apart;
* ``first fit``: the first fit after the import and a prediction of ten rows, everything the
  library loads or compiles on first use included (for jboost: its modules and programs);
* ``second fit``: the same fit on other labels of the same shape (programs compiled);
* ``total``: import (+ jax) + first fit, what a script waits before its first result.

jboost runs in three modes: ``cold`` (an empty cache directory: every program compiled, and
written), ``warm`` (the directory the cold run filled: programs loaded), ``off``
(``JBOOST_CACHE_DIR=off``: every process compiles, as before the cache). Every library fits
with its defaults and ``n_rounds``/``n_estimators`` rounds (binary logistic loss). The goals of
the "Interactive speed" issue are printed with the ratios: import <= 1 s, warm first fit <= 2x
XGBoost's first fit, cold first fit <= 2 s (the default size).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

CHILD = r"""
import json, sys, time
import numpy as np
lib, rows, features, rounds = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
rng = np.random.default_rng(0)
X = rng.normal(size=(rows, features)).astype(np.float32)
noise = rng.normal(size=(2, rows))
Y = [(X[:, 0] + X[:, 1] * X[:, 2] + 0.5 * e > 0).astype(np.float32) for e in noise]
t0 = time.perf_counter()
if lib == "jboost":
    import jboost
    def fit(y):
        m = jboost.fit(X, y, loss="logistic", n_rounds=rounds, key=0)
        return np.asarray(jboost.predict_proba(m, X[:10]))
elif lib == "xgboost":
    import xgboost
    def fit(y):
        m = xgboost.XGBClassifier(n_estimators=rounds).fit(X, y)
        return m.predict_proba(X[:10])
elif lib == "lightgbm":
    import lightgbm
    def fit(y):
        m = lightgbm.LGBMClassifier(n_estimators=rounds, verbose=-1).fit(X, y)
        return m.predict_proba(X[:10])
t1 = time.perf_counter()
if lib == "jboost":  # jboost imports JAX on first use: timed apart, as part of the import
    import jax
t1b = time.perf_counter()
fit(Y[0])
t2 = time.perf_counter()
fit(Y[1])
t3 = time.perf_counter()
print(json.dumps({"import": t1 - t0, "jax": t1b - t1, "first": t2 - t1b, "second": t3 - t2}))
"""
GOAL_IMPORT_S = 1.0
GOAL_WARM_OVER_XGBOOST = 2.0
GOAL_COLD_S = 2.0


def measure(lib: str, args, env: dict) -> dict:
    proc = subprocess.run([sys.executable, "-c", CHILD, lib, str(args.rows), str(args.features),
                           str(args.rounds)], env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"{lib} failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def median_of(runs: list) -> dict:
    out = {k: statistics.median(r[k] for r in runs) for k in ("import", "jax", "first", "second")}
    out["total"] = out["import"] + out["jax"] + out["first"]
    return out


def run(args) -> dict:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("JAX_COMPILATION_CACHE",
                                                                    "JBOOST_CACHE"))}
    results = {}
    if "jboost" in args.libs:
        cold, warm, off = [], [], []
        for _ in range(args.repeats):
            with tempfile.TemporaryDirectory(prefix="jboost-interactive-") as d:
                env = dict(base, JBOOST_CACHE_DIR=d)
                cold.append(measure("jboost", args, env))
                warm.append(measure("jboost", args, env))
            off.append(measure("jboost", args, dict(base, JBOOST_CACHE_DIR="off")))
        results["jboost cold"], results["jboost warm"] = median_of(cold), median_of(warm)
        results["jboost off"] = median_of(off)
    for lib in ("xgboost", "lightgbm"):
        if lib in args.libs:
            results[lib] = median_of([measure(lib, args, base) for _ in range(args.repeats)])
    return results


def report(results: dict, args) -> None:
    print(f"{args.rows} x {args.features}, binary, {args.rounds} rounds; median of "
          f"{args.repeats} fresh processes each (seconds)")
    print(f"{'library':<14}{'import':>8}{'+ jax':>7}{'first fit':>11}{'second fit':>12}"
          f"{'total':>8}")
    for name, r in results.items():
        jax_s = f"{r['jax']:>7.3f}" if name.startswith("jboost") else f"{'-':>7}"
        print(f"{name:<14}{r['import']:>8.3f}{jax_s}{r['first']:>11.3f}{r['second']:>12.3f}"
              f"{r['total']:>8.3f}")
    if "jboost warm" not in results:
        return
    print()
    imp = results["jboost warm"]["import"] + results["jboost warm"]["jax"]
    print(f"goal: import <= {GOAL_IMPORT_S:g} s: {imp:.3f} s with JAX's import "
          f"({'met' if imp <= GOAL_IMPORT_S else 'NOT met'}; import jboost alone "
          f"{results['jboost warm']['import']:.3f} s)")
    cold = results["jboost cold"]["first"]
    print(f"goal: cold first fit <= {GOAL_COLD_S:g} s: {cold:.3f} s "
          f"({'met' if cold <= GOAL_COLD_S else 'NOT met'})")
    for peer in ("xgboost", "lightgbm"):
        if peer in results:
            ratio = results["jboost warm"]["first"] / results[peer]["first"]
            total = results["jboost warm"]["total"] / results[peer]["total"]
            goal = (f" (goal <= {GOAL_WARM_OVER_XGBOOST:g}: "
                    f"{'met' if ratio <= GOAL_WARM_OVER_XGBOOST else 'NOT met'})"
                    if peer == "xgboost" else "")
            print(f"jboost warm / {peer}: first fit {ratio:.2f}x{goal}; "
                  f"import + first fit {total:.2f}x")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=1000)
    ap.add_argument("--features", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=100)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--libs", nargs="+", default=["jboost", "xgboost", "lightgbm"],
                    choices=["jboost", "xgboost", "lightgbm"])
    ap.add_argument("--json", default=None, help="also write the medians (and settings) here")
    ap.add_argument("--smoke", action="store_true",
                    help="the smallest size (CI's peer check): 10 rounds, one repeat, every "
                         "library of --libs")
    args = ap.parse_args(argv)
    if args.smoke:
        args.rounds, args.repeats = 10, 1
    results = run(args)
    report(results, args)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"settings": vars(args), "results": results}, f, indent=2)


if __name__ == "__main__":
    main()
