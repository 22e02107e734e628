"""Non-crossing multi-quantile regression (issue 44, part 3): one jboost model for K levels
against one jboost model per level, XGBoost's multi-quantile model and LightGBM per level.

    python benchmarks/multi_quantile.py                       # both data sets, 500 rounds
    python benchmarks/multi_quantile.py --quick               # 100 rounds
    python benchmarks/multi_quantile.py --smoke               # CI's check: 5 rounds, small sets
    python benchmarks/multi_quantile.py --levels 0.1 0.3 0.5 0.7 0.9 --json out.json

Fits, each on the same training rows, with the same rounds (``--rounds``, 500), depth
(``--depth``, 6), learning rate (``--learning-rate``, 0.1) and 256 histogram bins:

* ``jboost multi``: ``jboost.fit(X, y, jboost.losses.quantiles(levels))``, one model of K
  outputs whose quantiles cannot cross (``docs/guide/multi-quantile.md``);
* ``jboost single``: ``jboost.losses.quantile(a)``, one model per level;
* ``xgboost multi``: ``XGBRegressor(objective="reg:quantileerror", quantile_alpha=levels)``,
  one model, one tree per level per round (``tree_method="hist"``, ``max_depth``);
* ``lightgbm single``: ``LGBMRegressor(objective="quantile", alpha=a)`` per level
  (``max_depth`` and ``num_leaves = 2^depth``);
* ``jboost calibrated``: ``jboost multi`` fitted on 80% of the training rows (``--calibrate``,
  the share held out; a seeded split) and calibrated on the other 20% by
  ``jboost.calibrate_quantiles`` (split conformal: each level's baseline entry shifted until the
  held-out coverage reaches ``ceil((n + 1) a) / n``; the quantiles still cannot cross).

jboost's trees are oblivious (one split rule per level), XGBoost's depth-wise, LightGBM's
leaf-wise within the depth: the same depth is not the same trees. Reported per fit and level:
test coverage ``mean(y <= q_a(x))`` and mean pinball loss (and its ratio to jboost's single-level
model); per fit: the share of test rows where any adjacent pair of quantiles crosses
(``q_{k+1} < q_k``) and the fit's wall time (jboost's first fit compiles: ``jboost multi`` is
timed twice, cold and warm; the single-level jboost models after the first reuse its program).
The acceptance lines check ``jboost multi`` and ``jboost calibrated``: zero crossings, ``|coverage - a| <= 0.02`` and
pinball within 2% of the single-level model for each level.

Data: ``california`` (California housing, ``jboost.datasets.load_california``'s seeded 80/20
split, 16512 / 4128 rows; ``--data-dir``, default ``$JBOOST_DATA_DIR`` or ``../shared/data``)
and ``hetero`` (``--hetero-n`` = 20000 training + 20000 test rows, 5 uniform features,
``y = sin(3 x0) + x1 + 0.5 exp(0.8 x2 + 0.4 x0) eps``, ``eps`` standard normal: the noise scale
varies 20-fold with the features). Figures: ``benchmarks/RESULTS.md`` ("Non-crossing
multi-quantile regression").
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # this checkout

from benchmarks._data import default_data_dir  # noqa: E402
import jboost  # noqa: E402
from jboost import datasets  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))


def hetero(n_train: int, n_test: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1.0, 1.0, size=(n_train + n_test, 5))
    scale = 0.5 * np.exp(0.8 * X[:, 2] + 0.4 * X[:, 0])
    y = np.sin(3.0 * X[:, 0]) + X[:, 1] + scale * rng.normal(size=len(X))
    X, y = X.astype(np.float32), y.astype(np.float32)
    return X[:n_train], y[:n_train], X[n_train:], y[n_train:]


def load(case: str, data_dir, hetero_n: int):
    if case == "california":
        return datasets.load_california(data_dir or default_data_dir())
    if case == "hetero":
        return hetero(hetero_n, hetero_n)
    raise ValueError(f"unknown case {case!r}: california or hetero")


def pinball(y, q, a) -> float:
    r = np.asarray(y, np.float64) - np.asarray(q, np.float64)
    return float(np.mean(np.maximum(a * r, (a - 1.0) * r)))


def crossings(Q) -> float:
    """The share of rows where some adjacent pair of quantiles crosses (``q_{k+1} < q_k``)."""
    Q = np.asarray(Q)
    return float(np.mean(np.any(np.diff(Q, axis=1) < 0, axis=1))) if Q.shape[1] > 1 else 0.0


def timed(fn):
    t0 = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t0


def jboost_multi(Xtr, ytr, Xte, levels, s):
    fit = lambda: jboost.fit(Xtr, ytr, jboost.losses.quantiles(levels), n_rounds=s["rounds"],
                             depth=s["depth"], learning_rate=s["lr"], n_bins=256, key=0)
    model, cold = timed(fit)
    extra = {"cold_s": cold}
    if s["warm"]:
        model, warm = timed(fit)
        extra["warm_s"] = warm
    return np.asarray(jboost.predict_mean(model, Xte)), extra.get("warm_s", cold), extra


def jboost_single(Xtr, ytr, Xte, levels, s):
    cols, total = [], 0.0
    for a in levels:
        model, sec = timed(lambda: jboost.fit(Xtr, ytr, jboost.losses.quantile(a),
                                              n_rounds=s["rounds"], depth=s["depth"],
                                              learning_rate=s["lr"], n_bins=256, key=0))
        cols.append(np.asarray(jboost.predict(model, Xte)))
        total += sec
    return np.stack(cols, axis=1), total, {}


def xgboost_multi(Xtr, ytr, Xte, levels, s):
    import xgboost as xgb
    model = xgb.XGBRegressor(objective="reg:quantileerror", quantile_alpha=np.asarray(levels),
                             n_estimators=s["rounds"], max_depth=s["depth"],
                             learning_rate=s["lr"], tree_method="hist", max_bin=256,
                             random_state=0)
    _, sec = timed(lambda: model.fit(Xtr, ytr))
    return np.asarray(model.predict(Xte)).reshape(len(Xte), len(levels)), sec, {}


def lightgbm_single(Xtr, ytr, Xte, levels, s):
    import lightgbm as lgb
    cols, total = [], 0.0
    for a in levels:
        model = lgb.LGBMRegressor(objective="quantile", alpha=a, n_estimators=s["rounds"],
                                  max_depth=s["depth"], num_leaves=2 ** s["depth"],
                                  learning_rate=s["lr"], max_bin=256, random_state=0,
                                  verbose=-1)
        _, sec = timed(lambda: model.fit(Xtr, ytr))
        cols.append(np.asarray(model.predict(Xte)))
        total += sec
    return np.stack(cols, axis=1), total, {}


def jboost_calibrated(Xtr, ytr, Xte, levels, s):
    """``jboost multi`` fitted on ``1 - calibrate`` of the training rows (a seeded split) and
    calibrated on the rest (``jboost.calibrate_quantiles``, split conformal)."""
    order = np.random.default_rng(0).permutation(len(ytr))
    cut = int(round(len(ytr) * (1.0 - s["calibrate"])))
    fit, cal = order[:cut], order[cut:]

    def run():
        model = jboost.fit(Xtr[fit], ytr[fit], jboost.losses.quantiles(levels),
                           n_rounds=s["rounds"], depth=s["depth"], learning_rate=s["lr"],
                           n_bins=256, key=0)
        return jboost.calibrate_quantiles(model, Xtr[cal], ytr[cal])

    model, sec = timed(run)
    return np.asarray(jboost.predict_mean(model, Xte)), sec, {}


METHODS = {"jboost multi": jboost_multi, "jboost single": jboost_single,
           "xgboost multi": xgboost_multi, "lightgbm single": lightgbm_single,
           "jboost calibrated": jboost_calibrated}


def run_case(case, levels, s, data_dir):
    Xtr, ytr, Xte, yte = load(case, data_dir, s["hetero_n"])
    rows = []
    for name, fn in METHODS.items():
        if name == "jboost calibrated" and not s["calibrate"]:
            continue
        Q, sec, extra = fn(Xtr, ytr, Xte, levels, s)
        rows.append({"case": case, "method": name, "seconds": sec, **extra,
                     "crossings": crossings(Q),
                     "coverage": [float(np.mean(yte <= Q[:, k])) for k in range(len(levels))],
                     "pinball": [pinball(yte, Q[:, k], a) for k, a in enumerate(levels)]})
    single = next(r for r in rows if r["method"] == "jboost single")
    for r in rows:
        r["ratio"] = [p / b for p, b in zip(r["pinball"], single["pinball"])]
        print(format_row(r, levels), flush=True)
    return rows


def format_row(r, levels) -> str:
    per = "  ".join(f"{a:g}: cov {c:.3f} pin {p:.4f} ({q:.3f})"
                    for a, c, p, q in zip(levels, r["coverage"], r["pinball"], r["ratio"]))
    cold = f" (cold {r['cold_s']:.1f})" if "warm_s" in r else ""
    return (f"{r['case']:<10} {r['method']:<15} {per}  crossings {r['crossings']:.2%}  "
            f"{r['seconds']:.1f} s{cold}")


def acceptance(rows, levels):
    out = []
    for r in rows:
        if r["method"] not in ("jboost multi", "jboost calibrated"):
            continue
        gap = max(abs(c - a) for c, a in zip(r["coverage"], levels))
        worst = max(r["ratio"])
        out.append(f"{r['case']:<10} {r['method']}: crossings {r['crossings']:.2%} "
                   f"{'PASS' if r['crossings'] == 0 else 'FAIL'}; max |coverage - level| "
                   f"{gap:.3f} {'PASS' if gap <= 0.02 else 'FAIL'}; max pinball / single "
                   f"{worst:.4f} {'PASS' if worst <= 1.02 else 'FAIL'}")
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cases", nargs="+", default=["california", "hetero"])
    ap.add_argument("--levels", nargs="+", type=float, default=[0.05, 0.5, 0.95])
    ap.add_argument("--rounds", type=int, default=500)
    ap.add_argument("--depth", type=int, default=6)
    ap.add_argument("--learning-rate", type=float, default=0.1)
    ap.add_argument("--hetero-n", type=int, default=20000, help="hetero's training (= test) rows")
    ap.add_argument("--quick", action="store_true", help="100 rounds")
    ap.add_argument("--smoke", action="store_true",
                    help="CI's check: hetero only, 2000 rows, 5 rounds, depth 3, no warm refit")
    ap.add_argument("--data-dir", default=None)
    ap.add_argument("--json", default=None, help="write the rows and acceptance lines here")
    ap.add_argument("--calibrate", type=float, default=0.2,
                    help="the share of training rows held out to calibrate 'jboost calibrated' "
                         "(0: no such fit)")
    args = ap.parse_args(argv)
    s = {"rounds": 100 if args.quick else args.rounds, "depth": args.depth,
         "lr": args.learning_rate, "hetero_n": args.hetero_n, "warm": not args.smoke,
         "calibrate": args.calibrate}
    if args.smoke:
        args.cases = ["hetero"]
        s.update(rounds=5, depth=3, hetero_n=2000)
    levels = sorted(args.levels)
    print(f"levels {levels}; rounds {s['rounds']}, depth {s['depth']}, learning rate {s['lr']}, "
          "256 bins", flush=True)
    rows = [r for case in args.cases for r in run_case(case, levels, s, args.data_dir)]
    lines = acceptance(rows, levels)
    print("\nacceptance (issue 44 part 3):")
    for line in lines:
        print("  " + line)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"levels": levels, "settings": s, "rows": rows, "acceptance": lines}, fh,
                      indent=1)


if __name__ == "__main__":
    main()
