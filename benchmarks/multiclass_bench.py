"""Multiclass: jboost and its peers side by side on letter (26 classes) and synthetic K-class data.

    pip install -e ".[bench]"
    python benchmarks/multiclass_bench.py                        # letter, synth-10/26/100, 200 rounds
    python benchmarks/multiclass_bench.py --quick                # letter and synth-26, 30 rounds
    python benchmarks/multiclass_bench.py --smoke                # CI's peer check: letter, 5 rounds
    python benchmarks/multiclass_bench.py --cases letter --libs jboost xgboost --rounds 100

Cases: ``letter`` (UCI letter recognition, 16 integer features, the standard first 16000 rows
train and last 4000 test; read from ``--data-dir``, default ``$JBOOST_DATA_DIR`` or
``../shared/data``), and ``synth-K`` for K = 10, 26, 100 (20000 train / 10000 test rows, 20
continuous features of which 10 informative: a Gaussian mixture with several centres per class,
so every feature uses all 256 bins).

Settings are the same for all: depth 6, 256 bins, learning rate 0.1, l2 1, min child weight 1,
all cores. jboost fits ``jboost.fit(X, y, "multinomial_deviance", ...)`` (one oblivious tree
with K-output leaves per round, on one device: the CPU kernel's threads); XGBoost ``hist`` with
``multi:softprob`` and LightGBM ``multiclass`` grow K depth-wise trees per round; CatBoost
``MultiClass`` grows one oblivious (SymmetricTree) tree with K-output leaves per round, as
jboost does. Every (case, library) pair runs in its own subprocess.

Reported per library: training time (jboost: its second, compiled fit, minus the binning that
fit repeats; its compile time is the first fit minus the second), ms per round (the per-tree
time: one round = one jboost / CatBoost tree, K XGBoost / LightGBM trees), the ratio of each
library's time to XGBoost's (< 1: faster than XGBoost), the same for the CPU time (user + system,
all threads) of the training: on a machine shared with other work, wall time includes waiting
for a core and CPU time does not (with --threads 1 it is the steadier figure), and test accuracy.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
CASES = ("letter", "synth-10", "synth-26", "synth-100")
LIBS = ("jboost", "xgboost", "lightgbm", "catboost")


def default_data_dir():
    return os.environ.get("JBOOST_DATA_DIR") or os.path.join(HERE, "..", "..", "shared", "data")


def make_synthetic(n_classes: int, n_train: int = 20_000, n_test: int = 10_000, n_features: int = 20,
                   n_informative: int = 10, centres_per_class: int = 3, seed: int = 0):
    """A Gaussian mixture: each class has ``centres_per_class`` random centres in the
    informative features (unit-variance noise around them); the other features are noise."""
    rng = np.random.default_rng(seed)
    n = n_train + n_test
    centres = rng.normal(scale=1.6, size=(n_classes, centres_per_class, n_informative))
    y = rng.integers(0, n_classes, size=n)
    which = rng.integers(0, centres_per_class, size=n)
    X = rng.standard_normal((n, n_features)).astype(np.float32)
    X[:, :n_informative] += centres[y, which].astype(np.float32)
    perm = rng.permutation(n_features)
    X = np.ascontiguousarray(X[:, perm])
    y = y.astype(np.int32)
    return X[:n_train], y[:n_train], X[n_train:], y[n_train:]


def load_letter(data_dir: str):
    """letter.csv.gz (a header row, 16 features, then the 0..25 target): the standard split.
    Read with numpy alone, so that the peers' runs do not import jboost."""
    path = os.path.join(data_dir, "letter.csv.gz")
    if not os.path.exists(path):
        raise FileNotFoundError(f"{path} not found: pass --data-dir or set JBOOST_DATA_DIR")
    data = np.loadtxt(path, delimiter=",", skiprows=1, dtype=np.float64)
    X, y = np.ascontiguousarray(data[:, :-1], np.float32), data[:, -1].astype(np.int32)
    return X[:16000], y[:16000], X[16000:], y[16000:]


def load_case(case: str, data_dir: str):
    if case == "letter":
        return load_letter(data_dir)
    return make_synthetic(int(case.split("-")[1]))


def cpu_seconds():
    """CPU time of this process so far (user + system, all threads)."""
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


# ------------------------------------------------------------------------------------------
# One library, one case (runs in a subprocess). Each returns (timings, (n_test, K) scores).
# ------------------------------------------------------------------------------------------


def run_jboost(Xtr, ytr, Xte, k, a):
    sys.path.insert(0, os.path.join(HERE, ".."))  # the jboost of this checkout
    # By default (as many threads as cores) jboost runs as a user gets it: no environment
    # variables. Fewer threads (an expert setup, labelled in RESULTS.md) cap the kernel's threads
    if a.threads != os.cpu_count():
        os.environ["JBOOST_NUM_THREADS"] = str(a.threads)
    if a.threads == 1:  # and XLA's own (elementwise work between the kernel calls)
        os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") +
                                   " --xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1")
    import jax
    import jboost

    borders = jboost.compute_borders(Xtr, a.n_bins)
    jax.block_until_ready(jboost.bin_features(Xtr, borders))
    t0 = time.perf_counter()
    jax.block_until_ready(jboost.bin_features(Xtr, borders))
    t_transform = time.perf_counter() - t0  # the binning that fit repeats with given borders
    kw = dict(n_rounds=a.rounds, depth=a.depth, learning_rate=a.lr, l2=1.0, min_child_weight=1.0,
              n_bins=a.n_bins, borders=borders)
    t0 = time.perf_counter()
    model = jboost.fit(Xtr, ytr, "multinomial_deviance", **kw)
    jax.block_until_ready(model.trees)
    t_first = time.perf_counter() - t0
    t0, c0 = time.perf_counter(), cpu_seconds()
    model = jboost.fit(Xtr, ytr, "multinomial_deviance", **kw)
    jax.block_until_ready(model.trees)
    t_train, c_train = time.perf_counter() - t0, cpu_seconds() - c0
    scores = np.asarray(jboost.predict(model, Xte))
    return dict(train_s=t_train - t_transform, cpu_s=c_train - t_transform,
                compile_s=t_first - t_train, native_kernel=jboost.trees.histograms._native.available()), scores


def run_xgboost(Xtr, ytr, Xte, k, a):
    import xgboost as xgb

    dtr = xgb.QuantileDMatrix(Xtr, ytr, max_bin=a.n_bins, nthread=a.threads)
    params = dict(tree_method="hist", max_depth=a.depth, eta=a.lr, max_bin=a.n_bins, nthread=a.threads,
                  reg_lambda=1.0, min_child_weight=1.0, objective="multi:softprob", num_class=k)
    t0, c0 = time.perf_counter(), cpu_seconds()
    booster = xgb.train(params, dtr, num_boost_round=a.rounds)
    t_train, c_train = time.perf_counter() - t0, cpu_seconds() - c0
    return dict(train_s=t_train, cpu_s=c_train), booster.predict(xgb.DMatrix(Xte, nthread=a.threads))


def run_lightgbm(Xtr, ytr, Xte, k, a):
    import lightgbm as lgb

    dtr = lgb.Dataset(Xtr, ytr, params=dict(max_bin=a.n_bins - 1, verbose=-1,
                                             feature_pre_filter=False)).construct()
    params = dict(objective="multiclass", num_class=k, max_depth=a.depth, num_leaves=2**a.depth,
                  learning_rate=a.lr, num_threads=a.threads, lambda_l2=1.0,
                  min_sum_hessian_in_leaf=1.0, min_data_in_leaf=1, verbose=-1, max_bin=a.n_bins - 1)
    t0, c0 = time.perf_counter(), cpu_seconds()
    booster = lgb.train(params, dtr, num_boost_round=a.rounds)
    t_train, c_train = time.perf_counter() - t0, cpu_seconds() - c0
    return dict(train_s=t_train, cpu_s=c_train), booster.predict(Xte, num_threads=a.threads)


def run_catboost(Xtr, ytr, Xte, k, a):
    import catboost as cb

    pool = cb.Pool(Xtr, ytr)
    pool.quantize(border_count=a.n_bins - 1)
    model = cb.CatBoostClassifier(
        iterations=a.rounds, depth=a.depth, learning_rate=a.lr, l2_leaf_reg=1.0,
        thread_count=a.threads, loss_function="MultiClass", grow_policy="SymmetricTree",
        border_count=a.n_bins - 1, verbose=False, boosting_type="Plain", bootstrap_type="No",
        random_strength=0.0, allow_writing_files=False)
    t0, c0 = time.perf_counter(), cpu_seconds()
    model.fit(pool)
    t_train, c_train = time.perf_counter() - t0, cpu_seconds() - c0
    return dict(train_s=t_train, cpu_s=c_train), model.predict_proba(Xte)


def child(a):
    Xtr, ytr, Xte, yte = load_case(a.case, a.data_dir)
    k = int(max(ytr.max(), yte.max())) + 1
    out, scores = globals()[f"run_{a.lib}"](Xtr, ytr, Xte, k, a)
    out["accuracy"] = float(np.mean(np.argmax(np.asarray(scores), axis=1) == yte))
    out["ms_per_tree"] = 1000.0 * out["train_s"] / a.rounds
    out["cpu_ms_per_tree"] = 1000.0 * out["cpu_s"] / a.rounds
    out.update(rounds=a.rounds, n_classes=k, n_train=len(ytr), n_features=Xtr.shape[1])
    print("RESULT " + json.dumps(out), flush=True)


# ------------------------------------------------------------------------------------------
# Driver
# ------------------------------------------------------------------------------------------


def run_one(case, lib, a):
    cmd = [sys.executable, __file__, "--child", "--case", case, "--lib", lib, "--depth", str(a.depth),
           "--n-bins", str(a.n_bins), "--lr", str(a.lr), "--threads", str(a.threads),
           "--rounds", str(a.rounds), "--data-dir", a.data_dir]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[7:])
    return {"error": (proc.stderr.strip().splitlines() or ["no output"])[-1][:200]}


def print_table(results):
    print(f"{'case':<10} {'lib':<9} {'train_s':>8} {'ms/round':>9} {'vs xgb':>7} {'cpu ms/round':>12} "
          f"{'vs xgb':>7} {'accuracy':>9} {'compile_s':>9}")
    for case, by_lib in results.items():
        xgb = by_lib.get("xgboost", {})
        for lib, r in by_lib.items():
            if "error" in r:
                print(f"{case:<10} {lib:<9} error: {r['error']}")
                continue
            ratio = f"{r['ms_per_tree'] / xgb['ms_per_tree']:.2f}" if "ms_per_tree" in xgb else "-"
            cpu_ratio = (f"{r['cpu_ms_per_tree'] / xgb['cpu_ms_per_tree']:.2f}"
                         if "cpu_ms_per_tree" in xgb else "-")
            comp = f"{r['compile_s']:.1f}" if "compile_s" in r else "-"
            print(f"{case:<10} {lib:<9} {r['train_s']:>8.2f} {r['ms_per_tree']:>9.1f} {ratio:>7} "
                  f"{r['cpu_ms_per_tree']:>12.1f} {cpu_ratio:>7} {r['accuracy']:>9.4f} {comp:>9}")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--cases", nargs="+", default=None, choices=CASES)
    p.add_argument("--libs", nargs="+", default=list(LIBS), choices=LIBS)
    p.add_argument("--quick", action="store_true", help="letter and synth-26, 30 rounds")
    p.add_argument("--smoke", action="store_true",
                   help="the smallest size (CI's peer check): letter, 5 rounds, one repeat, every "
                        "library; exit status 1 if a library fails (one not installed: as without it)")
    p.add_argument("--rounds", type=int, default=0, help="default 200 (30 with --quick, 5 with --smoke)")
    p.add_argument("--depth", type=int, default=6)
    p.add_argument("--n-bins", type=int, default=256)
    p.add_argument("--lr", type=float, default=0.1)
    p.add_argument("--threads", type=int, default=os.cpu_count())
    p.add_argument("--repeats", type=int, default=1, help="runs per pair; the median is reported")
    p.add_argument("--data-dir", default=default_data_dir(),
                   help="folder of letter.csv.gz (default: $JBOOST_DATA_DIR or ../shared/data)")
    p.add_argument("--json", default=None, help="write the results as JSON here")
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--case", default=None, help=argparse.SUPPRESS)
    p.add_argument("--lib", default=None, help=argparse.SUPPRESS)
    a = p.parse_args()
    a.rounds = a.rounds or (5 if a.smoke else 30 if a.quick else 200)
    if a.child:
        return child(a)
    if a.smoke:
        a.repeats = 1
    cases = a.cases or (["letter"] if a.smoke else ["letter", "synth-26"] if a.quick else list(CASES))
    libs = [lib for lib in LIBS if lib in a.libs]  # xgboost before the ratios are printed
    results = {}
    for case in cases:
        results[case] = {}
        for lib in libs:
            runs = [run_one(case, lib, a) for _ in range(a.repeats)]
            ok = sorted((r for r in runs if "error" not in r), key=lambda r: r["train_s"])
            results[case][lib] = ok[len(ok) // 2] if ok else runs[0]
            print(f"[{case}] {lib}: {json.dumps(results[case][lib])}", file=sys.stderr, flush=True)
    print_table(results)
    if a.json:
        with open(a.json, "w") as fh:
            json.dump({"settings": vars(a), "results": results}, fh, indent=1)
    failed = [f"{case} {lib}" for case, res in results.items() for lib, r in res.items()
              if "error" in r and not r["error"].startswith("ModuleNotFoundError")]
    if a.smoke and failed:
        print(f"smoke: failed: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
