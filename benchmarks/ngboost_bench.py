"""Distributional regression: jboost.distributions against NGBoost (Duan et al. 2020), side by side.

    pip install -e ".[bench]"                 # includes ngboost
    python benchmarks/ngboost_bench.py                      # 3 data sets, 500 rounds, lr 0.01
    python benchmarks/ngboost_bench.py --depths 6 3 --line-search     # the table below
    python benchmarks/ngboost_bench.py --quick               # 50 rounds
    python benchmarks/ngboost_bench.py --smoke               # CI's peer check: 2 cases, 10 rounds
    python benchmarks/ngboost_bench.py --cases diabetes --newton --json out.json
    python benchmarks/ngboost_bench.py --compilation-cache /tmp/jc   # twice: cold, then warm cache
    python benchmarks/ngboost_bench.py --cases diabetes --min-child-weight 1   # NLL 6.23

Cases: ``california`` (California housing, jboost.datasets' seeded 80/20 split; read from
``--data-dir``, default ``$JBOOST_DATA_DIR`` or ``../shared/data``), ``diabetes``
(scikit-learn's 442 rows, a seeded 80/20 split) and ``hetero`` (5000 + 5000 synthetic rows,
5 uniform features, ``y = sin(3 x0) + x1 + 0.5 exp(0.8 x2 + 0.4 x0) eps``: the noise scale varies
20-fold with the features).

Both fit a Normal distribution with the same rounds and learning rate (NGBoost's defaults, 500
and 0.01) and natural gradients, each with its defaults otherwise. NGBoost:
``NGBRegressor(Dist=Normal)``: one depth-3 CART regression tree (``friedman_mse``) per parameter
per round and its line search on the scale of each round. jboost: ``distributions.fit(X, y,
Normal, n_rounds=500, learning_rate=0.01)``, i.e. ``jboost.fit`` with the natural-gradient loss,
one oblivious tree per parameter per round (least squares on the natural gradient), its default
depth 6, ``l2=1``, 256 bins and leaves of at least 20 rows (``distributions.MIN_LEAF_ROWS``), no
line search. ``--depths`` adds other depths (3: NGBoost's 8 leaves, though an oblivious tree of
depth 3 has 3 split rules to CART's up to 7); ``--line-search`` adds rows with NGBoost's line
search (``distributions.LINE_SEARCH`` on the boosting scaffold); ``--newton`` rows with Newton
trees on the NLL instead of natural gradients.

Reported per fit: test NLL (mean; lower is better), CRPS (mean, closed form), RMSE of the mean
(in the JSON), the fit's wall time and CPU time (user + system of this process, all threads: on a shared
machine wall time includes waiting for a core, CPU time does not), jboost's cold fit (its first
call: compilation included), warm fit (the same fit again: the compiled program), ``compile``
= cold - warm, and NGBoost's time over jboost's warm (``NGB/wall``, ``NGB/cpu``) and cold
(``NGB/cold``) wall times. Every fit runs in this process, NGBoost first; NGBoost's tree learner
draws its feature order at random (its NLL varies in the third decimal from run to run).

Measured (``--depths 6 3 --line-search``; jax 0.10.2, CPU, 2 cores shared with other jobs, load
average 8-9, commit after 27ee730; RMSE in the JSON)::

    case       library        depth     NLL    CRPS wall s  cpu s cold s compile NGB/wall NGB/cold NGB/cpu
    california ngboost       CART 3  0.6708  0.2774  58.88  31.13      -       -        -        -       -
    california jboost             6  0.6359  0.2666   2.23   1.36   9.04    6.82     26.5      6.5    22.9
    california jboost+search      6  0.5783  0.2547   3.86   2.02   9.01    5.15     15.2      6.5    15.4
    california jboost             3  0.7917  0.3102   1.63   0.82   6.66    5.03     36.0      8.8    38.2
    california jboost+search      3  0.7585  0.3012   1.92   1.31   7.04    5.12     30.6      8.4    23.7
    diabetes   ngboost       CART 3  5.9445 34.1596   4.28   2.47      -       -        -        -       -
    diabetes   jboost             6  5.7989 33.7030   0.40   0.19   6.24    5.84     10.8      0.7    12.7
    diabetes   jboost+search      6  6.0121 34.0615   0.31   0.17   6.28    5.97     13.9      0.7    14.6
    diabetes   jboost             3  5.4605 31.9369   0.11   0.08   3.73    3.62     38.9      1.1    32.6
    diabetes   jboost+search      3  5.4999 32.2703   0.19   0.09   5.33    5.14     23.1      0.8    28.7
    hetero     ngboost       CART 3  0.7760  0.3273  16.62   8.65      -       -        -        -       -
    hetero     jboost             6  0.7608  0.3245   0.83   0.47   7.34    6.51     20.0      2.3    18.4
    hetero     jboost+search      6  0.7675  0.3252   1.30   0.64   7.23    5.93     12.8      2.3    13.6
    hetero     jboost             3  0.7709  0.3262   0.25   0.22   4.02    3.76     65.4      4.1    38.9
    hetero     jboost+search      3  0.7572  0.3236   0.34   0.32   6.28    5.94     49.6      2.6    27.1
    (NGBoost's line search: mean scale 1.188 California, 1.194 diabetes, 1.460 hetero)

With jboost's defaults (depth 6) the test NLL is below NGBoost's on all three sets and the
compiled fit 11-27x faster in wall time (13-23x in CPU time). Compilation included it is not
10x faster: a first fit compiles 22 programs in 5-7 s, nearly all of it the boosting program
(the distribution adds little: on another run a squared-error fit of diabetes' shapes took
3.8 s cold, this one 3.9 s), more than NGBoost's whole fit of diabetes (2.5 s CPU); the cold
fits are 0.7x (diabetes), 2.3x (hetero) and 6.5x (California) NGBoost's wall time. The warm fit
compiles nothing (0 compilations, ``jax_log_compiles``): the programs are compiled once per
shapes and static settings (refits, sweeps over traced settings and cross-validation folds of
equal size reuse them), and JAX's persistent compilation cache (``--compilation-cache``) keeps
them across processes: with it, a new process's first fit took 2.7 s (diabetes), 3.4 s
(California) and 2.5 s (hetero) wall, 1.7-2.4 s CPU, at the same load.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time

import numpy as np
from jboost import checks as checks_lib
from jboost.data import labels
from jboost.data import tabular
from jboost.engine import boosting as boosting_lib
from jboost.fitting import prepare
from jboost.fitting import settings
from jboost.losses import checks
from jboost.models import booster
from jboost.trees import family

HERE = os.path.dirname(os.path.abspath(__file__))
CASES = ("california", "diabetes", "hetero")


def default_data_dir():
    return os.environ.get("JBOOST_DATA_DIR") or os.path.join(HERE, "..", "..", "shared", "data")


def split(X, y, seed=0, test_fraction=0.2):
    perm = np.random.default_rng(seed).permutation(len(y))
    k = int(round(test_fraction * len(y)))
    te, tr = perm[:k], perm[k:]
    return X[tr], y[tr], X[te], y[te]


def load(case, data_dir):
    if case == "california":
        from jboost import datasets
        return datasets.load_california(data_dir)
    if case == "diabetes":
        from sklearn.datasets import load_diabetes
        d = load_diabetes()
        return split(d.data.astype(np.float32), d.target.astype(np.float32))
    if case == "hetero":
        rng = np.random.default_rng(0)
        X = rng.uniform(-1.0, 1.0, size=(10_000, 5))
        scale = 0.5 * np.exp(0.8 * X[:, 2] + 0.4 * X[:, 0])
        y = np.sin(3.0 * X[:, 0]) + X[:, 1] + scale * rng.normal(size=len(X))
        return split(X.astype(np.float32), y.astype(np.float32), test_fraction=0.5)
    raise ValueError(case)


def normal_scores(loc, scale, y):
    """Mean NLL, CRPS (Gneiting et al. 2005) and RMSE of Normal(loc, scale) predictions (float64)."""
    from scipy import stats
    loc, scale, y = (np.asarray(a, np.float64) for a in (loc, scale, y))
    z = (y - loc) / scale
    nll = -stats.norm.logpdf(y, loc, scale)
    crps = scale * (z * (2 * stats.norm.cdf(z) - 1) + 2 * stats.norm.pdf(z) - 1 / math.sqrt(math.pi))
    return float(nll.mean()), float(crps.mean()), float(np.sqrt(np.mean((loc - y) ** 2)))


def timed(fn):
    w, c = time.perf_counter(), time.process_time()
    out = fn()
    return out, time.perf_counter() - w, time.process_time() - c


def run_ngboost(Xtr, ytr, Xte, yte, rounds, lr):
    from ngboost import NGBRegressor
    from ngboost.distns import Normal
    model, wall, cpu = timed(lambda: NGBRegressor(Dist=Normal, n_estimators=rounds, learning_rate=lr,
                                                  verbose=False, random_state=0).fit(Xtr, ytr))
    dist = model.pred_dist(Xte)
    nll, crps, rmse = normal_scores(dist.params["loc"], dist.params["scale"], yte)
    return dict(lib="ngboost", depth="CART 3", nll=nll, crps=crps, rmse=rmse, wall=wall, cpu=cpu,
                mean_line_search_scale=float(np.mean(model.scalings)))


def fit_line_search(X, y, rounds, lr, depth):
    """distributions.fit's model, with NGBoost's line search on the scale of each round
    (distributions.LINE_SEARCH, an algorithm of the boosting scaffold; jboost.fit takes no
    algorithm, so the scaffold is called here: jboost.fitting.settings.settings + jboost.engine.boosting.boost)."""
    import jax
    from jboost import distributions, losses

    X = tabular.as_matrix(X, "X")
    y = labels.as_labels(y, X.shape[0])
    loss = checks.resolve_loss(distributions.loss(distributions.Normal, natural_gradient=True), y)
    config, hyper = settings.settings(n_rounds=rounds, depth=depth, n_bins=256, learning_rate=lr, l2=1.0,
                                 min_split_gain=0.0, min_child_weight=distributions.MIN_LEAF_ROWS,
                                 subsample=1.0, colsample=1.0, per_output_trees=True,
                                 algorithm=distributions.LINE_SEARCH)
    data, borders = prepare.prepare_boosting(X, y, n_bins=256)
    init_raw = jax.jit(losses.baseline)(loss, data.y, data.w)
    out = boosting_lib.boost(data, checks_lib.as_key(0), hyper, loss, init_raw, config=config)
    return booster.Booster(trees=family.with_borders(out.trees, borders), borders=borders, baseline=init_raw,
                         loss=out.final_loss, train_loss=out.train_loss, valid_loss=out.valid_loss)


def run_jboost(Xtr, ytr, Xte, yte, rounds, lr, depth, natural, line_search=False,
               min_child_weight=None):
    import jax
    from jboost import distributions

    def fit():
        if line_search:
            model = fit_line_search(Xtr, ytr, rounds, lr, depth)
        else:
            model = distributions.fit(Xtr, ytr, distributions.Normal, natural_gradient=natural,
                                      n_rounds=rounds, learning_rate=lr, depth=depth,
                                      min_child_weight=min_child_weight)
        jax.block_until_ready(model.trees)
        return model

    # The first fit of a program compiles it; the same fit again runs the compiled program.
    cold = timed(fit)[1:]
    model, wall, cpu = timed(fit)
    p = distributions.predict_params(model, Xte)
    nll, crps, rmse = normal_scores(p["loc"], p["scale"], yte)
    # The library's own metrics agree with the float64 ones above.
    assert abs(float(distributions.nll(model, Xte, yte)) - nll) < 1e-4 * max(1.0, abs(nll))
    lib = "jboost" + ("+search" if line_search else "" if natural else "-newton")
    return dict(lib=lib, depth=depth, nll=nll, crps=crps,
                rmse=rmse, wall=wall, cpu=cpu, cold_wall=cold[0], cold_cpu=cold[1],
                compile_wall=cold[0] - wall)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cases", nargs="+", default=list(CASES), choices=CASES)
    ap.add_argument("--depths", nargs="+", type=int, default=[6],
                    help="jboost's depths (default: jboost.fit's 6)")
    ap.add_argument("--rounds", type=int, default=500)
    ap.add_argument("--learning-rate", type=float, default=0.01)
    ap.add_argument("--newton", action="store_true", help="add jboost rows with Newton trees")
    ap.add_argument("--line-search", action="store_true",
                    help="add jboost rows with NGBoost's line search (distributions.LINE_SEARCH)")
    ap.add_argument("--min-child-weight", type=float, default=None,
                    help="jboost's min_child_weight (default: distributions.fit's)")
    ap.add_argument("--quick", action="store_true", help="50 rounds")
    ap.add_argument("--smoke", action="store_true",
                    help="the smallest size (CI's peer check): California and diabetes (a data "
                         "file, scikit-learn's), 10 rounds")
    ap.add_argument("--data-dir", default=default_data_dir())
    ap.add_argument("--json", default=None)
    ap.add_argument("--compilation-cache", default=None, metavar="DIR",
                    help="keep compiled programs in DIR instead of jboost's default cache "
                         "directory, or 'off' for none (an empty DIR: a cold cache; a second run "
                         "with the same DIR: a warm one, its first fits load the programs)")
    args = ap.parse_args(argv)
    rounds = 10 if args.smoke else 50 if args.quick else args.rounds
    if args.smoke:
        args.cases = ["california", "diabetes"]
    import jax
    if args.compilation_cache == "off":
        jax.config.update("jax_enable_compilation_cache", False)
    elif args.compilation_cache:
        jax.config.update("jax_compilation_cache_dir", args.compilation_cache)
    print(f"{rounds} rounds, learning rate {args.learning_rate}, Normal; jax {jax.__version__} on "
          f"{jax.devices()[0].platform}, {os.cpu_count()} cores; os.getloadavg() at start "
          f"{tuple(round(v, 2) for v in os.getloadavg())}", flush=True)
    rows = []
    header = (f"{'case':10} {'library':13} {'depth':>6} {'NLL':>7} {'CRPS':>7} {'wall s':>6} {'cpu s':>6} "
              f"{'cold s':>6} {'compile':>7} {'NGB/wall':>8} {'NGB/cold':>8} {'NGB/cpu':>7}")
    print(header)
    for case in args.cases:
        Xtr, ytr, Xte, yte = load(case, args.data_dir)
        ngb = run_ngboost(Xtr, ytr, Xte, yte, rounds, args.learning_rate)
        results = [ngb]
        for depth in args.depths:
            results.append(run_jboost(Xtr, ytr, Xte, yte, rounds, args.learning_rate, depth, True,
                                      min_child_weight=args.min_child_weight))
            if args.line_search:
                results.append(run_jboost(Xtr, ytr, Xte, yte, rounds, args.learning_rate, depth, True,
                                          line_search=True))
            if args.newton:
                results.append(run_jboost(Xtr, ytr, Xte, yte, rounds, args.learning_rate, depth, False))
        for r in results:
            r.update(case=case, n_train=len(ytr), n_test=len(yte))
            if r["lib"] != "ngboost":
                r.update(speedup_wall=ngb["wall"] / r["wall"], speedup_cpu=ngb["cpu"] / r["cpu"],
                         speedup_cold=ngb["wall"] / r["cold_wall"],
                         nll_minus_ngboost=r["nll"] - ngb["nll"])
            f = lambda k, fmt: format(r[k], fmt) if k in r else "-"
            print(f"{case:10} {r['lib']:13} {str(r['depth']):>6} {r['nll']:7.4f} {r['crps']:7.4f} "
                  f"{r['wall']:6.2f} {r['cpu']:6.2f} {f('cold_wall', '6.2f'):>6} "
                  f"{f('compile_wall', '7.2f'):>7} {f('speedup_wall', '8.1f'):>8} "
                  f"{f('speedup_cold', '8.1f'):>8} {f('speedup_cpu', '7.1f'):>7}", flush=True)
        print(f"{case:10} NGBoost's line search: mean scale {ngb['mean_line_search_scale']:.3f}",
              flush=True)
        rows += results
    print(f"os.getloadavg() at the end {tuple(round(v, 2) for v in os.getloadavg())}")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(rows, fh, indent=1)
    return rows


if __name__ == "__main__":
    sys.exit(0 if main() else 1)
