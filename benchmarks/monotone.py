"""Monotone constraints (issue 44, part 1): jboost against XGBoost and LightGBM with the same
constraints, the same rounds, depth, learning rate and 256 bins, on the same rows.

    python benchmarks/monotone.py                  # both data sets, 300 rounds, depth 6
    python benchmarks/monotone.py --fits jboost-depthwise xgboost-depthwise
    python benchmarks/monotone.py --smoke          # CI's check: 5 rounds, small sets

Data: ``california`` (California housing, ``jboost.datasets.load_california``'s seeded 80/20
split; ``MedInc`` constrained increasing; ``--data-dir``, default ``$JBOOST_DATA_DIR`` or
``../shared/data``) and ``synthetic`` (``--n`` training and test rows, 5 uniform features on
``[-2, 2]``, ``y = tanh(2 x0) + x0 - 0.5 x1 + sin(3 x2) + 0.5 eps``: increasing in ``x0``,
decreasing in ``x1``, both constrained; the test error is against the noiseless truth).

Fits (``--fits``, default all), each free and constrained:

* ``jboost-oblivious``: jboost's default oblivious trees of depth ``--depth``;
* ``jboost-depthwise``: ``tree_family="depthwise"``, depth ``--depth`` (like XGBoost's);
* ``jboost-lossguide``: ``tree_family="lossguide"``, ``--leaves`` leaves (31) and depth at most
  ``--depth``;
* ``xgboost-depthwise``: ``XGBRegressor`` ``hist``, its default depth-wise growth, depth
  ``--depth``, its defaults otherwise (l2 1, minimum child hessian 1: jboost's defaults);
* ``lightgbm``: ``LGBMRegressor`` with ``num_leaves = 2**depth`` and ``max_depth = depth``, its
  defaults otherwise (l2 0, at least 20 rows a leaf): the comparison's first setting, kept;
* ``lightgbm-lossguide``: ``LGBMRegressor`` set as ``jboost-lossguide`` is: ``--leaves`` leaves,
  depth at most ``--depth``, l2 1, minimum child hessian 1, at least 1 row a leaf.

Per fit: test RMSE, the fit's wall time (jboost timed warm: its first fit at the same size
compiles, the second is timed; the first's time is printed as ``cold``), and the violations: over
200 test rows each moved along a 100-point grid of every constrained feature (past the data on
both sides), the share of rows whose prediction ever moves against the constraint (0 for an exact
method; the script fails if a constrained jboost fit has any). Figures: ``benchmarks/RESULTS.md``
("Monotone constraints").
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # this checkout

from benchmarks._data import default_data_dir  # noqa: E402
import jboost  # noqa: E402
from jboost import datasets  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))


def synthetic(n: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-2, 2, size=(2 * n, 5)).astype(np.float32)
    truth = np.tanh(2 * X[:, 0]) + X[:, 0] - 0.5 * X[:, 1] + np.sin(3 * X[:, 2])
    y = (truth + 0.5 * rng.normal(size=2 * n)).astype(np.float32)
    return X[:n], y[:n], X[n:], truth[n:].astype(np.float32), [1, -1, 0, 0, 0]


def california(data_dir):
    X, y, Xt, yt = datasets.load_california(data_dir=data_dir)
    X, Xt = np.asarray(X, np.float32), np.asarray(Xt, np.float32)
    signs = [0] * X.shape[1]
    signs[0] = 1  # MedInc, the first column
    return X, np.asarray(y, np.float32), Xt, np.asarray(yt, np.float32), signs


def violations(predict, Xt, signs, seed: int = 0) -> float:
    """The share of probe rows whose prediction moves against a constraint somewhere."""
    rng = np.random.default_rng(seed)
    base = Xt[rng.integers(0, len(Xt), size=200)]
    bad = np.zeros(len(base), bool)
    for f, s in enumerate(signs):
        if s == 0:
            continue
        lo, hi = np.nanmin(Xt[:, f]), np.nanmax(Xt[:, f])
        grid = np.linspace(lo - (hi - lo), hi + (hi - lo), 100).astype(np.float32)
        rows = np.repeat(base, len(grid), axis=0)
        rows[:, f] = np.tile(grid, len(base))
        p = np.asarray(predict(rows), np.float64).reshape(len(base), len(grid))
        bad |= np.any(s * np.diff(p, axis=1) < 0, axis=1)
    return float(bad.mean())


FITS = ("jboost-oblivious", "jboost-depthwise", "jboost-lossguide", "xgboost-depthwise",
        "lightgbm", "lightgbm-lossguide")


def fits(args):
    """name -> fit(X, y, signs or None) -> predict function."""
    import lightgbm
    import xgboost

    rounds, depth, lr, leaves = args.rounds, args.depth, args.learning_rate, args.leaves

    def jb(family):
        def fit(X, y, signs):
            import jax

            kw = dict(max_leaves=leaves) if family == "lossguide" else {}
            model = jboost.fit(X, y, n_rounds=rounds, depth=depth, learning_rate=lr,
                               tree_family=family, monotone_constraints=signs, **kw)
            jax.block_until_ready(model.trees)
            return lambda Z: jboost.predict(model, Z)
        return fit

    def xgb(X, y, signs):
        model = xgboost.XGBRegressor(n_estimators=rounds, max_depth=depth, learning_rate=lr,
                                     tree_method="hist", max_bin=256, n_jobs=os.cpu_count(),
                                     monotone_constraints=tuple(signs) if signs else None)
        model.fit(X, y)
        return model.predict

    def lgb(X, y, signs):
        model = lightgbm.LGBMRegressor(n_estimators=rounds, max_depth=depth,
                                       num_leaves=2**depth, learning_rate=lr, max_bin=255,
                                       verbose=-1, monotone_constraints=list(signs) if signs else None)
        model.fit(X, y)
        return model.predict

    def lgb_lossguide(X, y, signs):
        model = lightgbm.LGBMRegressor(n_estimators=rounds, max_depth=depth, num_leaves=leaves,
                                       learning_rate=lr, max_bin=255, reg_lambda=1.0,
                                       min_child_weight=1.0, min_child_samples=1, verbose=-1,
                                       monotone_constraints=list(signs) if signs else None)
        model.fit(X, y)
        return model.predict

    return {"jboost-oblivious": jb("oblivious"), "jboost-depthwise": jb("depthwise"),
            "jboost-lossguide": jb("lossguide"), "xgboost-depthwise": xgb, "lightgbm": lgb,
            "lightgbm-lossguide": lgb_lossguide}


def run(name, data, args, out):
    X, y, Xt, yt, signs = data
    table = fits(args)
    for lib in args.fits:
        fit = table[lib]
        row = {"data": name, "library": lib}
        for label, s in (("free", None), ("monotone", signs)):
            cold = None
            if lib.startswith("jboost") and not args.smoke:
                start = time.perf_counter()
                fit(X, y, s)  # the first fit compiles (a fit of fewer rows compiles another)
                cold = time.perf_counter() - start
            start = time.perf_counter()
            predict = fit(X, y, s)
            seconds = time.perf_counter() - start
            rmse = float(np.sqrt(np.mean((np.asarray(predict(Xt), np.float64) - yt) ** 2)))
            row[label] = dict(rmse=rmse, seconds=seconds, cold=cold,
                              violations=violations(predict, Xt, signs))
        out.append(row)
        f, m = row["free"], row["monotone"]
        cold = "" if m["cold"] is None else f"  (cold {f['cold']:.1f} / {m['cold']:.1f})"
        print(f"{name:10s} {lib:18s} RMSE free {f['rmse']:.4f} monotone {m['rmse']:.4f}  "
              f"fit s free {f['seconds']:6.2f} monotone {m['seconds']:6.2f}  "
              f"rows violating: free {f['violations']:.1%} monotone {m['violations']:.1%}{cold}",
              flush=True)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data-dir", default=default_data_dir())
    ap.add_argument("--rounds", type=int, default=300)
    ap.add_argument("--depth", type=int, default=6)
    ap.add_argument("--leaves", type=int, default=31, help="loss-guided trees' leaves")
    ap.add_argument("--learning-rate", type=float, default=0.1)
    ap.add_argument("--n", type=int, default=20000)
    ap.add_argument("--fits", nargs="+", default=list(FITS), choices=FITS)
    ap.add_argument("--smoke", action="store_true", help="5 rounds, depth 3, 7 leaves, small sets")
    args = ap.parse_args(argv)
    if args.smoke:
        args.rounds, args.depth, args.leaves, args.n = 5, 3, 7, 500
    out = []
    run("synthetic", synthetic(args.n), args, out)
    data = california(args.data_dir)
    if args.smoke:
        data = (data[0][:1000], data[1][:1000], data[2][:500], data[3][:500], data[4])
    run("california", data, args, out)
    for row in out:
        if row["library"].startswith("jboost"):
            assert row["monotone"]["violations"] == 0.0, row
    return 0


if __name__ == "__main__":
    sys.exit(main())
