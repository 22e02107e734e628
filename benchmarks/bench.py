"""Train jboost and its peers side by side on the same data and settings; print one table.

    pip install -e ".[bench]"
    python benchmarks/bench.py --quick                 # one small case, a minute or two
    python benchmarks/bench.py --smoke                 # CI's peer check: tiny case, seconds
    python benchmarks/bench.py                         # 100k and 1M binary, 1M regression
    python benchmarks/bench.py --cases binary-100k --libs jboost xgboost --json out.json
    python benchmarks/bench.py --gpu --cases binary-1m --libs jboost xgboost catboost   # on a GPU

Every (case, library) pair runs in its own subprocess, so peak memory (max RSS) is that
library's alone and no library's threads or caches leak into another's timing. Settings are the
same for all: depth 6 (CatBoost SymmetricTree: the same oblivious trees; the others grow
depth-wise trees of depth 6), 256 bins, learning rate 0.1, 200 rounds, all cores.

jboost runs twice: ``jboost``, what a user gets by default (no environment variable, default
arguments: one XLA device, the kernel's threads on every core), whose ratios to the peers are
the table's; and ``jboost-devices``, the expert setup (one XLA host device per core through
``XLA_FLAGS`` set for that subprocess only, ``devices="all"``), reported on its own line.

With ``--gpu`` the peers train on the GPU too (XGBoost ``device="cuda"``, CatBoost
``task_type="GPU"``) and jboost runs on JAX's default device (the GPU, pure-JAX path); LightGBM and
scikit-learn stay on the CPU.

Reported per library: binning time (data -> bins), compile time (jboost only: first fit minus
the second), training time and ms per tree (the second, compiled fit for jboost), memory
(``data_rss_mb``: the process's RSS once the data are made, before the library runs;
``peak_rss_mb``: its peak RSS from then on, data included: Linux resets the peak after the data
generation, whose temporaries would otherwise be the peak of every library at 1M rows),
test logloss and AUC (or RMSE), prediction time for the test rows, and jboost's time ratio to
each peer (< 1 means jboost is faster).
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
from jboost import checks as checks_lib
from jboost.engine import boosting as boosting_lib
from jboost.engine import state
from jboost.losses import checks

CASES = {
    "binary-100k": dict(task="binary", n_train=100_000, n_test=1_000_000, n_features=50),
    "binary-200k": dict(task="binary", n_train=200_000, n_test=1_000_000, n_features=50),
    "binary-1m": dict(task="binary", n_train=1_000_000, n_test=1_000_000, n_features=50),
    "regression-1m": dict(task="regression", n_train=1_000_000, n_test=1_000_000, n_features=50),
    # Scale: 10M training rows (about 2 GB of float32 features; run it alone, e.g. --rounds 50).
    "binary-10m": dict(task="binary", n_train=10_000_000, n_test=1_000_000, n_features=50),
    "quick": dict(task="binary", n_train=20_000, n_test=100_000, n_features=50),
    # --smoke (CI's peer check, python -m benchmarks.smoke): every peer's API; no timing meant.
    "smoke": {"task": "binary", "n_train": 2_000, "n_test": 2_000, "n_features": 20},
}
#: Rounds of a case when --rounds is not given (200 otherwise).
CASE_ROUNDS = {"quick": 20, "smoke": 5}
LIBS = ("jboost", "jboost-devices", "xgboost", "lightgbm", "catboost", "sklearn")  # module docstring


def make_data(case: dict, seed: int = 0):
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
    from jboost import datasets

    n = case["n_train"] + case["n_test"]
    if case["task"] == "binary":
        X, y = datasets.make_classification(n, case["n_features"], 20, seed=seed)
    else:
        X, y = datasets.make_regression(n, case["n_features"], 20, seed=seed)
    nt = case["n_train"]
    return X[:nt], y[:nt], X[nt:], y[nt:]


def auc(y, p):
    order = np.argsort(p, kind="stable")
    ranks = np.empty(len(p), np.float64)
    ranks[order] = np.arange(1, len(p) + 1)
    pos = y == 1
    n_pos, n_neg = pos.sum(), (~pos).sum()
    return float((ranks[pos].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


def metrics(task, y, pred):
    if task == "binary":
        p = np.clip(pred, 1e-7, 1 - 1e-7)
        return {"logloss": float(-np.mean(y * np.log(p) + (1 - y) * np.log(1 - p))), "auc": auc(y, pred)}
    return {"rmse": float(np.sqrt(np.mean((y - pred) ** 2)))}


# ------------------------------------------------------------------------------------------
# One library, one case (runs in a subprocess)
# ------------------------------------------------------------------------------------------


GPU = False  # --gpu: the peers train on the GPU (set in child())


def run_jboost(case, Xtr, ytr, Xte, rounds, depth, n_bins, lr, threads):
    import jax
    import jboost

    loss = "binomial_deviance" if case["task"] == "binary" else "squared_error"
    devices = "all" if len(jax.devices()) > 1 else None
    jax.block_until_ready(jboost.bin_features(Xtr[:1000], jboost.compute_borders(Xtr[:1000], n_bins)))
    t0 = time.perf_counter()
    borders = jboost.compute_borders(Xtr, n_bins)
    jax.block_until_ready(jboost.bin_features(Xtr, borders))
    t_bin = time.perf_counter() - t0
    t0 = time.perf_counter()
    jax.block_until_ready(jboost.bin_features(Xtr, borders))
    t_transform = time.perf_counter() - t0  # the binning that fit repeats with given borders
    kw = dict(n_rounds=rounds, depth=depth, learning_rate=lr, l2=1.0, min_child_weight=1.0,
              n_bins=n_bins, borders=borders, devices=devices)
    t0 = time.perf_counter()
    model = jboost.fit(Xtr, ytr, loss, **kw)
    jax.block_until_ready(model.trees)
    t_first = time.perf_counter() - t0
    t0 = time.perf_counter()
    model = jboost.fit(Xtr, ytr, loss, **kw)
    jax.block_until_ready(model.trees)
    t_train = time.perf_counter() - t0
    # fit bins X with the given borders: subtract that from the training time.
    t_train_only = t_train - t_transform
    def predict():
        pred = (jboost.predict_proba(model, Xte)[:, 1] if case["task"] == "binary" else jboost.predict(model, Xte))
        return np.asarray(jax.block_until_ready(pred))

    predict()  # compiles the function timed below for these rows' bucket sizes
    t0 = time.perf_counter()
    pred = predict()
    t_pred = time.perf_counter() - t0
    out = dict(bin_s=t_bin, compile_s=t_first - t_train, train_s=t_train_only, predict_s=t_pred,
               devices=len(jax.devices()), native_kernel=jboost.trees.histograms._native.available())
    if devices is None:
        out.update(_jboost_memory(Xtr, ytr, loss, borders, rounds, depth, n_bins, lr))
    return out, pred


def _jboost_memory(Xtr, ytr, loss, borders, rounds, depth, n_bins, lr):
    """XLA's own account of the training program's memory (single device): its arguments (the
    binned data, labels, weights), its outputs (the trees) and its temporaries (histograms,
    gradients, scores), beside the size of the binned data and of one level's histograms."""
    import jax.numpy as jnp
    import jboost

    Xb = jboost.bin_features(Xtr, borders)
    y = jnp.asarray(ytr, jnp.float32)
    w = jnp.ones_like(y)
    loss_obj = checks.resolve_loss(loss, np.asarray(ytr))
    config = boosting_lib.BoostConfig(n_rounds=rounds, depth=depth, n_bins=n_bins)
    hyper = boosting_lib.Hyperparams.create(learning_rate=lr, l2=1.0, min_child_weight=1.0)
    args = (state.Data.train_only(Xb, y, w), checks_lib.as_key(0), hyper, loss_obj,
            jboost.losses.baseline(loss_obj, y, w))
    ma = boosting_lib.boost.lower(*args, config=config).compile().memory_analysis()
    if ma is None:
        return {}
    hist_mb = Xb.shape[0] * 2 ** (depth - 1) * n_bins * 2 * 4 / 1e6
    return dict(binned_mb=Xb.nbytes / 1e6, hist_mb=hist_mb,
                xla_args_mb=ma.argument_size_in_bytes / 1e6,
                xla_temp_mb=ma.temp_size_in_bytes / 1e6,
                xla_out_mb=ma.output_size_in_bytes / 1e6)


def run_xgboost(case, Xtr, ytr, Xte, rounds, depth, n_bins, lr, threads):
    import xgboost as xgb

    t0 = time.perf_counter()
    dtr = xgb.QuantileDMatrix(Xtr, ytr, max_bin=n_bins, nthread=threads)
    t_bin = time.perf_counter() - t0
    params = dict(tree_method="hist", max_depth=depth, eta=lr, max_bin=n_bins, nthread=threads,
                  reg_lambda=1.0, min_child_weight=1.0,
                  objective="binary:logistic" if case["task"] == "binary" else "reg:squarederror")
    if GPU:
        params["device"] = "cuda"
    t0 = time.perf_counter()
    booster = xgb.train(params, dtr, num_boost_round=rounds)
    t_train = time.perf_counter() - t0
    dte = xgb.DMatrix(Xte, nthread=threads)
    t0 = time.perf_counter()
    pred = booster.predict(dte)
    t_pred = time.perf_counter() - t0
    return dict(bin_s=t_bin, train_s=t_train, predict_s=t_pred), pred


def run_lightgbm(case, Xtr, ytr, Xte, rounds, depth, n_bins, lr, threads):
    import lightgbm as lgb

    t0 = time.perf_counter()
    dtr = lgb.Dataset(Xtr, ytr, params=dict(max_bin=n_bins - 1, verbose=-1,
                                             feature_pre_filter=False)).construct()
    t_bin = time.perf_counter() - t0
    params = dict(objective="binary" if case["task"] == "binary" else "regression", max_depth=depth,
                  num_leaves=2**depth, learning_rate=lr, num_threads=threads, lambda_l2=1.0,
                  min_sum_hessian_in_leaf=1.0, min_data_in_leaf=1, verbose=-1, max_bin=n_bins - 1)
    t0 = time.perf_counter()
    booster = lgb.train(params, dtr, num_boost_round=rounds)
    t_train = time.perf_counter() - t0
    t0 = time.perf_counter()
    pred = booster.predict(Xte, num_threads=threads)
    t_pred = time.perf_counter() - t0
    return dict(bin_s=t_bin, train_s=t_train, predict_s=t_pred), pred


def run_catboost(case, Xtr, ytr, Xte, rounds, depth, n_bins, lr, threads):
    import catboost as cb

    t0 = time.perf_counter()
    pool = cb.Pool(Xtr, ytr)
    pool.quantize(border_count=n_bins - 1)
    t_bin = time.perf_counter() - t0
    model = (cb.CatBoostClassifier if case["task"] == "binary" else cb.CatBoostRegressor)(
        iterations=rounds, depth=depth, learning_rate=lr, l2_leaf_reg=1.0, thread_count=threads,
        grow_policy="SymmetricTree", border_count=n_bins - 1, verbose=False, boosting_type="Plain",
        bootstrap_type="No", random_strength=0.0, allow_writing_files=False,
        **(dict(task_type="GPU") if GPU else {}))
    t0 = time.perf_counter()
    model.fit(pool)
    t_train = time.perf_counter() - t0
    t0 = time.perf_counter()
    pred = model.predict_proba(Xte)[:, 1] if case["task"] == "binary" else model.predict(Xte)
    t_pred = time.perf_counter() - t0
    return dict(bin_s=t_bin, train_s=t_train, predict_s=t_pred), pred


def run_sklearn(case, Xtr, ytr, Xte, rounds, depth, n_bins, lr, threads):
    from sklearn.ensemble import HistGradientBoostingClassifier, HistGradientBoostingRegressor

    cls = HistGradientBoostingClassifier if case["task"] == "binary" else HistGradientBoostingRegressor
    model = cls(max_iter=rounds, max_depth=depth, max_leaf_nodes=2**depth, learning_rate=lr,
                max_bins=n_bins - 1, l2_regularization=1.0, min_samples_leaf=1,
                early_stopping=False)
    t0 = time.perf_counter()
    model.fit(Xtr, ytr)
    t_train = time.perf_counter() - t0
    t0 = time.perf_counter()
    pred = model.predict_proba(Xte)[:, 1] if case["task"] == "binary" else model.predict(Xte)
    t_pred = time.perf_counter() - t0
    return dict(bin_s=float("nan"), train_s=t_train, predict_s=t_pred), pred


def _status_mb(field: str):
    """``field`` (e.g. ``VmRSS``, ``VmHWM``) of ``/proc/self/status`` in MB, or None."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) / 1024.0
    except OSError:
        pass
    return None


def _reset_peak_rss() -> bool:
    """Resets the process's peak RSS (Linux: ``5`` into ``/proc/self/clear_refs``), so that
    ``VmHWM`` read later is the peak since the data were made: the data (held throughout) plus
    the library's own memory, not the data generator's temporaries (which at 1M rows peaked
    above every library's training). False where that is not possible (then the lifetime
    ``ru_maxrss`` is reported)."""
    import gc
    gc.collect()
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def child(args):
    global GPU
    GPU = args.gpu
    case = CASES[args.case]
    rounds = args.rounds or CASE_ROUNDS.get(args.case, 200)
    Xtr, ytr, Xte, yte = make_data(case)
    peak_reset = _reset_peak_rss()  # the generator's temporaries are not the library's memory
    data_mb = _status_mb("VmRSS")
    fn = globals()[f"run_{args.lib}"]
    out, pred = fn(case, Xtr, ytr, Xte, rounds, args.depth, args.n_bins, args.lr, args.threads)
    out.update(metrics(case["task"], yte, np.asarray(pred, np.float64)))
    out["ms_per_tree"] = 1000.0 * out["train_s"] / rounds
    out["rounds"] = rounds
    hwm = _status_mb("VmHWM")
    out["peak_rss_mb"] = hwm if peak_reset and hwm is not None else \
        resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    out["data_rss_mb"] = data_mb
    print("RESULT " + json.dumps(out), flush=True)


# ------------------------------------------------------------------------------------------
# Driver
# ------------------------------------------------------------------------------------------


def run_one(case, lib, args):
    env = dict(os.environ)
    if lib == "jboost-devices":
        env["XLA_FLAGS"] = (env.get("XLA_FLAGS", "") +
                            f" --xla_force_host_platform_device_count={args.jax_devices}").strip()
        lib = "jboost"
    cmd = [sys.executable, __file__, "--child", "--case", case, "--lib", lib, "--depth", str(args.depth),
           "--n-bins", str(args.n_bins), "--lr", str(args.lr), "--threads", str(args.threads)]
    if args.gpu:
        cmd += ["--gpu"]
    if args.rounds:
        cmd += ["--rounds", str(args.rounds)]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[7:])
    return {"error": (proc.stderr.strip().splitlines() or ["no output"])[-1][:200]}


def fmt(v, nd=3):
    if v is None or (isinstance(v, float) and not np.isfinite(v)):
        return "-"
    return f"{v:.{nd}f}" if isinstance(v, float) else str(v)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--cases", nargs="+", default=None, choices=sorted(CASES))
    p.add_argument("--libs", nargs="+", default=None, choices=LIBS, help="default: all")
    p.add_argument("--quick", action="store_true", help="one small case (20k rows, 20 rounds)")
    p.add_argument("--smoke", action="store_true",
                   help="the smallest size (CI's peer check): the smoke case (2k rows, 5 rounds), "
                        "one repeat, jboost and every peer (not jboost-devices unless --libs names "
                        "it); exit status 1 if a library fails (one not installed: as without it)")
    p.add_argument("--rounds", type=int, default=0)
    p.add_argument("--depth", type=int, default=6)
    p.add_argument("--n-bins", type=int, default=256)
    p.add_argument("--lr", type=float, default=0.1)
    p.add_argument("--threads", type=int, default=os.cpu_count())
    p.add_argument("--jax-devices", type=int, default=os.cpu_count(),
                   help="XLA host devices of the expert row jboost-devices (rows sharded across "
                        "them; default: one per core); the jboost row is always the default setup")
    p.add_argument("--gpu", action="store_true",
                   help="peers on the GPU (XGBoost device='cuda', CatBoost task_type='GPU'); jboost "
                        "uses JAX's default device")
    p.add_argument("--repeats", type=int, default=1, help="runs per pair; the median is reported")
    p.add_argument("--json", default=None, help="write the results as JSON here")
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--case", default=None, help=argparse.SUPPRESS)
    p.add_argument("--lib", default=None, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        return child(args)
    if args.libs is None:  # --smoke: each library is a process; the expert row's is spared
        args.libs = [lib for lib in LIBS if not (args.smoke and lib == "jboost-devices")]
    if args.smoke:
        args.repeats = 1
    cases = args.cases or (["smoke"] if args.smoke else ["quick"] if args.quick
                           else ["binary-100k", "binary-1m", "regression-1m"])
    results = {}
    for case in cases:
        results[case] = {}
        for lib in args.libs:
            runs = [run_one(case, lib, args) for _ in range(args.repeats)]
            ok = [r for r in runs if "error" not in r]
            if not ok:
                results[case][lib] = runs[0]
            else:
                ok.sort(key=lambda r: r["train_s"])
                results[case][lib] = ok[len(ok) // 2]
            print(f"[{case}] {lib}: {json.dumps(results[case][lib])}", file=sys.stderr, flush=True)
    print_table(results)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"settings": vars(args), "results": results}, fh, indent=1)
    failed = [f"{case} {lib}" for case, res in results.items() for lib, r in res.items()
              if "error" in r and not r["error"].startswith("ModuleNotFoundError")]
    if args.smoke and failed:
        print(f"smoke: failed: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


def print_table(results):
    cols = ["lib", "bin_s", "compile_s", "train_s", "ms_per_tree", "predict_s", "data_rss_mb",
            "peak_rss_mb", "logloss", "auc", "rmse", "jboost/peer"]
    for case, res in results.items():
        print(f"\n## {case}")
        print(" | ".join(cols))
        print(" | ".join("---" for _ in cols))
        jb = res.get("jboost", {})
        for lib, r in res.items():
            if "error" in r:
                print(f"{lib} | error: {r['error']}")
                continue
            ratio = (jb["train_s"] / r["train_s"]) if ("train_s" in jb and not lib.startswith("jboost")) else None
            row = [lib] + [fmt(r.get(c), 1 if c in ("ms_per_tree", "peak_rss_mb", "data_rss_mb") else 3) for c in cols[1:-1]]
            row.append(fmt(ratio, 2))
            print(" | ".join(row))
        expert = res.get("jboost-devices", {})
        if "train_s" in expert:
            er = {lib: expert["train_s"] / r["train_s"] for lib, r in res.items()
                  if not lib.startswith("jboost") and "train_s" in r}
            to_default = (f" to the default jboost {expert['train_s'] / jb['train_s']:.2f};"
                          if "train_s" in jb else "")
            print(f"expert setup (jboost-devices) training time ratio{to_default} to the peers: "
                  + ", ".join(f"{k} {v:.2f}" for k, v in er.items()))
        if "train_s" in jb:
            pr = {lib: jb["predict_s"] / r["predict_s"] for lib, r in res.items()
                  if not lib.startswith("jboost") and "predict_s" in r}
            print("prediction time ratio jboost/peer: " + ", ".join(f"{k} {v:.2f}" for k, v in pr.items()))
        if "xla_temp_mb" in jb:
            print(f"jboost training program (XLA memory analysis): arguments {jb['xla_args_mb']:.1f} MB "
                  f"(binned data {jb['binned_mb']:.1f} MB), temporaries {jb['xla_temp_mb']:.1f} MB, "
                  f"outputs {jb['xla_out_mb']:.1f} MB; one deepest-level histogram {jb['hist_mb']:.1f} MB")


if __name__ == "__main__":
    sys.exit(main())
