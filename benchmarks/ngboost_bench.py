"""Distributional regression: jboost.distributions against NGBoost (Duan et al. 2020), side by side.

    pip install -e ".[bench]"                 # includes ngboost
    python benchmarks/ngboost_bench.py                       # 3 data sets, 500 rounds, lr 0.01
    python benchmarks/ngboost_bench.py --quick               # 50 rounds (a smoke run)
    python benchmarks/ngboost_bench.py --cases diabetes --depths 3 --json out.json
    python benchmarks/ngboost_bench.py --depths 6 --l2 0 5 --newton

Cases: ``california`` (California housing, jboost.datasets' seeded 80/20 split; read from
``--data-dir``, default ``$JBOOST_DATA_DIR`` or ``../shared/data``), ``diabetes``
(scikit-learn's 442 rows, a seeded 80/20 split) and ``hetero`` (5000 + 5000 synthetic rows,
5 uniform features, ``y = sin(3 x0) + x1 + 0.5 exp(0.8 x2 + 0.4 x0) eps``: the noise scale varies
20-fold with the features).

Both fit a Normal distribution with NGBoost's defaults: 500 rounds, learning rate 0.01, natural
gradients, one tree per parameter per round. NGBoost: ``NGBRegressor(Dist=Normal)``, its
default base learner (a depth-3 CART regression tree, ``friedman_mse``) and its line search on
the scale of each round. jboost: ``jboost.fit(X, y, distributions.loss(Normal,
natural_gradient=True), per_output_trees=True, l2=0)`` -- one oblivious tree per parameter per
round fitted by least squares to the natural gradient (NGBoost's base learner fit), no line
search, 256 bins. An oblivious tree of depth d has d split rules and 2^d leaves; NGBoost's
depth-3 CART has up to 7 split rules and 8 leaves: depth 3 matches the leaves (``--depths``
default runs 3 and 6, CatBoost's and jboost's default depth). ``--l2`` (default 0, least-squares
leaves as NGBoost's trees) shrinks the leaves, ``sum(natural gradients) / (rows + l2)``.
``--newton`` adds ``jboost-newton``: Newton
trees on the NLL instead of natural gradients, with jboost's default ``l2=1`` and
``min_child_weight=1``, which are on the hessian's scale ``1/sigma^2``, so the labels' units
matter (on diabetes, sigma ~ 60: few splits); natural gradients are free of that scale.

Reported per fit: test NLL (mean; lower is better), CRPS (mean, closed form), RMSE of the mean,
the NLL's difference to NGBoost's (JSON), the fit's wall time and CPU time (user + system of
this process, all threads: on a shared machine wall time includes waiting for a core, CPU time
does not), jboost's cold fit (first call: compilation included; "-" where the row above compiled
the same program) and warm fit (the same fit again, compiled), and the ratio of NGBoost's time
to jboost's. Every fit runs in this process, NGBoost first.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time

import numpy as np

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
    algorithm, so the scaffold is called here: jboost.api.settings + jboost.boosting.boost)."""
    import jax
    from jboost import _validation, api, boosting, distributions, losses, model, tree

    X = _validation.as_matrix(X, "X")
    y = _validation.as_labels(y, X.shape[0])
    loss = _validation.resolve_loss(distributions.loss(distributions.Normal, natural_gradient=True), y)
    config, hyper = api.settings(n_rounds=rounds, depth=depth, n_bins=256, learning_rate=lr, l2=1.0,
                                 min_split_gain=0.0, min_child_weight=distributions.MIN_LEAF_ROWS,
                                 subsample=1.0, colsample=1.0, per_output_trees=True,
                                 algorithm=distributions.LINE_SEARCH)
    data, borders = _validation.prepare_boosting(X, y, n_bins=256)
    init_raw = jax.jit(losses.baseline)(loss, data.y, data.w)
    out = boosting.boost(data, _validation.as_key(0), hyper, loss, init_raw, config=config)
    return model.Booster(trees=tree.with_borders(out.trees, borders), borders=borders, baseline=init_raw,
                         loss=out.final_loss, train_loss=out.train_loss, valid_loss=out.valid_loss)


def run_jboost(Xtr, ytr, Xte, yte, rounds, lr, depth, natural, line_search=False):
    import jax
    from jboost import distributions

    def fit():
        if line_search:
            model = fit_line_search(Xtr, ytr, rounds, lr, depth)
        else:
            model = distributions.fit(Xtr, ytr, distributions.Normal, natural_gradient=natural,
                                      n_rounds=rounds, learning_rate=lr, depth=depth)
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
    ap.add_argument("--quick", action="store_true", help="50 rounds")
    ap.add_argument("--data-dir", default=default_data_dir())
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    rounds = 50 if args.quick else args.rounds
    import jax
    print(f"{rounds} rounds, learning rate {args.learning_rate}, Normal; jax {jax.__version__} on "
          f"{jax.devices()[0].platform}, {os.cpu_count()} cores; os.getloadavg() at start "
          f"{tuple(round(v, 2) for v in os.getloadavg())}", flush=True)
    rows = []
    header = (f"{'case':11} {'library':14} {'depth':>6} {'NLL':>8} {'CRPS':>8} {'RMSE':>8} "
              f"{'wall s':>7} {'cpu s':>7} {'cold s':>7} {'compile':>7} {'NGB/wall':>8} "
              f"{'NGB/cold':>8} {'NGB/cpu':>8}")
    print(header)
    for case in args.cases:
        Xtr, ytr, Xte, yte = load(case, args.data_dir)
        ngb = run_ngboost(Xtr, ytr, Xte, yte, rounds, args.learning_rate)
        results = [ngb]
        for depth in args.depths:
            results.append(run_jboost(Xtr, ytr, Xte, yte, rounds, args.learning_rate, depth, True))
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
            print(f"{case:11} {r['lib']:14} {str(r['depth']):>6} {r['nll']:8.4f} {r['crps']:8.4f} "
                  f"{r['rmse']:8.4f} {r['wall']:7.2f} {r['cpu']:7.2f} {f('cold_wall', '7.2f'):>7} "
                  f"{f('compile_wall', '7.2f'):>7} {f('speedup_wall', '8.1f'):>8} "
                  f"{f('speedup_cold', '8.1f'):>8} {f('speedup_cpu', '8.1f'):>8}", flush=True)
        print(f"{case:11} NGBoost's line search: mean scale {ngb['mean_line_search_scale']:.3f}",
              flush=True)
        rows += results
    print(f"os.getloadavg() at the end {tuple(round(v, 2) for v in os.getloadavg())}")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(rows, fh, indent=1)
    return rows


if __name__ == "__main__":
    sys.exit(0 if main() else 1)
