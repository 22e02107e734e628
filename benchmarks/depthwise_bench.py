"""Depth-wise and loss-guided boosting side by side: jboost depth-wise vs jboost oblivious vs
XGBoost (``tree_method="hist", grow_policy="depthwise"``) vs LightGBM (``num_leaves = 2**depth``,
``max_depth = depth``), same depth, rounds, learning rate, bins and cores; and loss-guided
(best-first) trees of ``--leaves`` leaves, no depth bound: jboost ``tree_family="lossguide"`` vs
XGBoost ``grow_policy="lossguide"`` vs LightGBM (``num_leaves``, ``max_depth=-1``); one table.

    python benchmarks/depthwise_bench.py                       # synthetic 200k x 50 and California
    python benchmarks/depthwise_bench.py --cases synthetic --rounds 50
    python benchmarks/depthwise_bench.py --data-dir /work/shared/data
    python benchmarks/depthwise_bench.py --threads 1    # every library on one thread
    python benchmarks/depthwise_bench.py --cases synthetic --train-rows 1000000   # 1M x 50
    python benchmarks/depthwise_bench.py --libs xgboost-lossguide jboost-lossguide lightgbm-leafwise
    python benchmarks/depthwise_bench.py --smoke    # CI's peer check: synthetic, tiny, seconds

Cases: ``synthetic``: 200k training rows x 50 Gaussian features (50k test rows) whose target has
interactions a symmetric tree cannot share between its halves (``x0`` picks which features
matter); ``california``: California housing (jboost.datasets.load_california, its 80/20 split;
skipped with a note when the data directory is missing). Default arguments, no XLA_FLAGS.

Reported per library: training time and ms per tree (jboost: the second, compiled fit; its
compile time is the first fit minus the second), test RMSE, and each time's ratio to XGBoost's
(``x xgb``: < 1 is faster than XGBoost; loss-guided rows against XGBoost's loss-guided run). Regression with squared error, 256 bins (255 + the
missing bin), ``l2 = 1``, minimum child hessian 1 (LightGBM: at least 1 row per leaf), all
cores (``os.cpu_count()``) unless ``--threads`` (then XGBoost's ``nthread``, LightGBM's
``num_threads`` and jboost's ``JBOOST_NUM_THREADS``). On a machine shared with other
work, OpenMP peers that spin-wait for busy cores can slow down by an order of magnitude: compare
``--threads 1`` and say the load (printed before and after).
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))


def synthetic(n_train=200_000, n_test=50_000, n_features=50, seed=0):
    rng = np.random.default_rng(seed)
    n = n_train + n_test
    X = rng.standard_normal((n, n_features)).astype(np.float32)
    y = (np.where(X[:, 0] > 0, 2.0 * X[:, 1] + X[:, 2] * X[:, 3], -2.0 * X[:, 4] + X[:, 5] * X[:, 6])
         + np.sin(2.0 * X[:, 7] * X[:, 8]) + 0.5 * X[:, 9] + 0.3 * rng.standard_normal(n))
    y = y.astype(np.float32)
    return X[:n_train], y[:n_train], X[n_train:], y[n_train:]


def california(data_dir):
    from jboost import datasets
    return datasets.load_california(data_dir)


def rmse(y, p):
    return float(np.sqrt(np.mean((np.asarray(p, np.float64).reshape(-1) - y) ** 2)))


def run_jboost(family, X, y, Xt, yt, a):
    import jax
    import jboost

    kw = dict(n_rounds=a.rounds, depth=a.depth, n_bins=256, learning_rate=a.learning_rate,
              l2=1.0, min_child_weight=1.0, tree_family=family)
    if family == "lossguide":
        kw.update(depth=None, max_leaves=a.leaves)
    t0 = time.perf_counter()
    jax.block_until_ready(jboost.fit(X, y, "squared_error", **kw).trees)
    first = time.perf_counter() - t0
    t0 = time.perf_counter()
    m = jboost.fit(X, y, "squared_error", **kw)
    jax.block_until_ready(m.trees)
    train = time.perf_counter() - t0
    return dict(train=train, compile=first - train, rmse=rmse(yt, jboost.predict(m, Xt)))


def run_xgboost(X, y, Xt, yt, a, policy="depthwise"):
    import xgboost as xgb

    depth = dict(max_depth=a.depth) if policy == "depthwise" else dict(max_depth=0, max_leaves=a.leaves)
    params = dict(tree_method="hist", grow_policy=policy, **depth, max_bin=255,
                  eta=a.learning_rate, reg_lambda=1.0, min_child_weight=1.0,
                  nthread=a.threads, objective="reg:squarederror")
    t0 = time.perf_counter()
    d = xgb.DMatrix(X, y, nthread=a.threads)
    prep = time.perf_counter() - t0
    t0 = time.perf_counter()
    b = xgb.train(params, d, num_boost_round=a.rounds)
    train = time.perf_counter() - t0
    return dict(train=train, prep=prep, rmse=rmse(yt, b.predict(xgb.DMatrix(Xt))))


def run_lightgbm(X, y, Xt, yt, a, leafwise=False):
    import lightgbm as lgb

    leaves = dict(num_leaves=a.leaves, max_depth=-1) if leafwise else dict(
        num_leaves=2**a.depth, max_depth=a.depth)
    params = dict(objective="regression", **leaves, max_bin=255,
                  learning_rate=a.learning_rate, lambda_l2=1.0, min_data_in_leaf=1,
                  min_sum_hessian_in_leaf=1.0, num_threads=a.threads, verbose=-1)
    d = lgb.Dataset(X, y, params=dict(max_bin=255, min_data_in_leaf=1, feature_pre_filter=False,
                                      verbose=-1)).construct()
    t0 = time.perf_counter()
    b = lgb.train(params, d, num_boost_round=a.rounds)
    train = time.perf_counter() - t0
    return dict(train=train, rmse=rmse(yt, b.predict(Xt)))


RUNNERS = {
    "jboost-depthwise": lambda *args: run_jboost("depthwise", *args),
    "jboost-oblivious": lambda *args: run_jboost("oblivious", *args),
    "xgboost-depthwise": run_xgboost,
    "lightgbm": run_lightgbm,
    "jboost-lossguide": lambda *args: run_jboost("lossguide", *args),
    "xgboost-lossguide": lambda *args: run_xgboost(*args, policy="lossguide"),
    "lightgbm-leafwise": lambda *args: run_lightgbm(*args, leafwise=True),
}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--cases", nargs="+", default=["synthetic", "california"])
    p.add_argument("--libs", nargs="+", default=list(RUNNERS), choices=list(RUNNERS))
    p.add_argument("--rounds", type=int, default=100)
    p.add_argument("--depth", type=int, default=6)
    p.add_argument("--leaves", type=int, default=31, help="loss-guided trees' leaves")
    p.add_argument("--learning-rate", type=float, default=0.1)
    p.add_argument("--data-dir", default=None)
    p.add_argument("--threads", type=int, default=None,
                   help="threads per library (default: all cores, jboost left at its default)")
    p.add_argument("--train-rows", type=int, default=200_000, help="synthetic case's training rows")
    p.add_argument("--smoke", action="store_true",
                   help="the smallest size (CI's peer check): the synthetic case, 2000 training "
                        "rows, 5 rounds, every library of --libs")
    a = p.parse_args(argv)
    if a.smoke:
        a.cases, a.rounds, a.train_rows = ["synthetic"], 5, 2000
    if a.threads is not None:  # else jboost runs as a user gets it: no environment variable
        os.environ["JBOOST_NUM_THREADS"] = str(a.threads)  # read when jboost's kernels run
    else:
        a.threads = os.cpu_count()
    with open("/proc/loadavg") as f:
        print(f"load average before: {f.read().strip()}   cores: {os.cpu_count()}")
    print(f"depth {a.depth} (loss-guided: {a.leaves} leaves), {a.rounds} rounds, learning rate {a.learning_rate}, 256 bins, l2 1, min_child_weight 1, "
          f"{a.threads} threads")
    for case in a.cases:
        try:
            X, y, Xt, yt = synthetic(n_train=a.train_rows) if case == "synthetic" else california(a.data_dir)
        except (FileNotFoundError, OSError) as e:
            print(f"{case}: skipped ({e})")
            continue
        print(f"\n{case}: {X.shape[0]} x {X.shape[1]} train, {Xt.shape[0]} test")
        # Each group (fixed depth, loss-guided) after its XGBoost run, the reference of its
        # ratios; each row printed as it comes.
        guided = lambda lib: lib.endswith(("lossguide", "leafwise"))  # noqa: E731
        libs = sorted(a.libs, key=lambda lib: (guided(lib), not lib.startswith("xgboost")))
        refs = {}
        print(f"{'library':20s} {'train s':>8s} {'ms/tree':>8s} {'x xgb':>6s} {'compile s':>9s} {'test RMSE':>9s}")
        for lib in libs:
            r = RUNNERS[lib](X, y, Xt, yt, a)
            if lib.startswith("xgboost"):
                refs[guided(lib)] = r
            ref = refs.get(guided(lib))
            ratio = f"{r['train'] / ref['train']:6.2f}" if ref else "     -"
            comp = f"{r['compile']:9.1f}" if "compile" in r else "        -"
            prep = (f"   (its DMatrix {r['prep']:.2f} s: jboost's train s include binning)"
                    if "prep" in r else "")
            print(f"{lib:20s} {r['train']:8.2f} {1e3 * r['train'] / a.rounds:8.1f} {ratio} {comp} "
                  f"{r['rmse']:9.4f}{prep}", flush=True)
    with open("/proc/loadavg") as f:
        print(f"\nload average after: {f.read().strip()}")


if __name__ == "__main__":
    main()
