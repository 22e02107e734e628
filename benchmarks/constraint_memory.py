"""Memory of constrained fits (issue 44): the peak resident memory of one ``jboost.fit`` per
process, free and with monotone constraints, interaction constraints or both, for each tree
family, on California housing (or, without ``--data-dir``, a synthetic table of the same shape).

Each fit runs in a fresh Python process so its peak (``resource.getrusage``'s ``ru_maxrss``) is
its own; the process's peak after reading the data and before fitting is reported beside it
(the JAX runtime and the table), and the difference is the fit's. Constraints add per-node state
to the growers: ``(F,)`` used features per oblivious level, ``(nodes, F)`` used features and
``(nodes, 2)`` bounds per depth-wise level or loss-guided tree, against ``(nodes, F, bins, 2)``
histograms, so their cost should be small; this run measures it.

Run::

    python benchmarks/constraint_memory.py --data-dir ../shared/data [--rounds 100]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

#: One fit: prints the peak RSS (MB) before and after fitting, as JSON.
CHILD = """
import json, resource, sys
import numpy as np
import jboost
from jboost import datasets
args = json.loads(sys.argv[1])
if args["data_dir"]:
    X, y, _, _ = datasets.load_california(data_dir=args["data_dir"])
else:
    rng = np.random.default_rng(0)
    X = rng.normal(size=(16512, 8)).astype(np.float32)
    y = (X[:, 0] + np.sin(X[:, 1]) * X[:, 2] + 0.3 * rng.normal(size=len(X))).astype(np.float32)
peak = lambda: resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
before = peak()
kw = dict(n_rounds=args["rounds"], depth=6, learning_rate=0.1, tree_family=args["family"], key=0)
if args["family"] == "lossguide":
    kw.update(max_leaves=31, depth=None)
if args["monotone"]:
    kw["monotone_constraints"] = [1] + [0] * (X.shape[1] - 1)
if args["interactions"]:
    kw["interaction_constraints"] = [[0, 1, 2], list(range(3, X.shape[1]))]
model = jboost.fit(X, y, **kw)
np.asarray(jboost.predict(model, X[:10]))
print("RESULT " + json.dumps(dict(before=before, after=peak())))
"""

CASES = (("free", False, False), ("monotone", True, False), ("interactions", False, True),
         ("both", True, True))


def measure(family: str, monotone: bool, interactions: bool, rounds: int, data_dir) -> dict:
    """The child's peak RSS before and after its fit (MB)."""
    args = dict(family=family, monotone=monotone, interactions=interactions, rounds=rounds,
                data_dir=data_dir)
    out = subprocess.run([sys.executable, "-c", CHILD, json.dumps(args)], capture_output=True,
                         text=True, cwd=ROOT, check=True)
    line = [t for t in out.stdout.splitlines() if t.startswith("RESULT ")][-1]
    return json.loads(line[len("RESULT "):])


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data-dir", default=None, help="California housing from here (default: a synthetic table)")
    ap.add_argument("--rounds", type=int, default=100)
    ap.add_argument("--families", nargs="+", default=["oblivious", "depthwise", "lossguide"])
    ap.add_argument("--smoke", action="store_true", help="5 rounds, oblivious and depth-wise only")
    a = ap.parse_args(argv)
    if a.smoke:
        a.rounds, a.families = 5, ["oblivious", "depthwise"]
    print(f"peak RSS (MB) of one fit per process, {a.rounds} rounds, "
          f"{'California housing' if a.data_dir else 'synthetic 16512 x 8'}")
    print("| family | constraints | before fit | after fit | fit's increase | vs free |")
    print("|---|---|---:|---:|---:|---:|")
    for family in a.families:
        free = None
        for name, monotone, interactions in CASES:
            r = measure(family, monotone, interactions, a.rounds, a.data_dir)
            grew = r["after"] - r["before"]
            free = grew if free is None else free
            print(f"| {family} | {name} | {r['before']:.0f} | {r['after']:.0f} | {grew:.0f} | "
                  f"{grew - free:+.0f} |", flush=True)


if __name__ == "__main__":
    main()
