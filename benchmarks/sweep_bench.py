"""Wall time of a cross-validated grid: one fused jboost sweep vs separate fits vs peer loops.

The grid is 64 configurations (learning_rate x l2 x subsample, 4 values each) x 5 folds, depth 6,
256 bins, binomial deviance with the held-out log loss after every round, on spam (3065 x 57)
and on synthetic 100k x 50 data (``jboost.datasets.make_classification``). Methods:

* ``jboost fused``: :func:`jboost.sweep.sweep` (all configurations x folds in one compiled
  program per static setting; ``--devices N`` host devices share the models);
* ``jboost fused (1 dev)``: the same on one device (one core's worth of XLA CPU);
* ``jboost separate``: ``jboost.fit`` once per configuration x fold on the fold's training rows
  with its held-out rows as ``eval_set``, timed on a sample of ``--sample`` fits after one
  warm-up (compile) fit and extrapolated; with several devices also ``devices="all"`` (each
  fit's rows sharded over them);
* ``xgboost`` / ``catboost``: the same grid in a Python loop (depth 6; CatBoost's trees are
  oblivious; same rounds, 256 bins, Bernoulli row subsampling, 2 threads), fold matrices built
  once outside the timing, timed on the same sample of fits and extrapolated.

Every extrapolated figure is marked as such. Run from the repository root::

    python benchmarks/sweep_bench.py --quick           # minutes: few rounds, a sub-grid
    python benchmarks/sweep_bench.py                   # the full grid (long: see --fused-configs)
"""

from __future__ import annotations

import argparse
import os
import sys
import time


def _parse():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="few rounds and a sub-grid (minutes)")
    p.add_argument("--datasets", default="spam,synthetic", help="comma-separated: spam, synthetic")
    p.add_argument("--devices", type=int, default=2, help="XLA host devices for the fused sweep")
    p.add_argument("--sample", type=int, default=None, help="separate/peer fits actually timed")
    p.add_argument("--fused-configs", type=int, default=None,
                   help="configurations the fused sweep runs (x all folds); the rest is extrapolated")
    p.add_argument("--rounds", type=int, default=None)
    p.add_argument("--n-synthetic", type=int, default=100_000)
    p.add_argument("--data-dir", default=None)
    p.add_argument("--gpu", action="store_true",
                   help="peers on the GPU (XGBoost device='cuda', CatBoost task_type='GPU'); jboost "
                        "uses JAX's default device")
    p.add_argument("--skip", default="", help="comma-separated methods to skip: separate,xgboost,catboost")
    return p.parse_args()


ARGS = _parse()
if ARGS.devices > 1 and not ARGS.gpu:  # must be set before jax is imported
    os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") +
                               f" --xla_force_host_platform_device_count={ARGS.devices}")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import itertools  # noqa: E402

import jax  # noqa: E402
import numpy as np  # noqa: E402

import jboost  # noqa: E402
import jboost.sweep as sweep_lib  # noqa: E402

FULL_GRID = {"learning_rate": [0.05, 0.1, 0.2, 0.4], "l2": [0.0, 1.0, 4.0, 16.0],
             "subsample": [0.5, 0.7, 0.85, 1.0]}
N_FOLDS, DEPTH, N_BINS = 5, 6, 256


def _load():
    return float(open("/proc/loadavg").read().split()[0])


def _configs():
    names = list(FULL_GRID)
    return [dict(zip(names, v)) for v in itertools.product(*FULL_GRID.values())]


def _sample_pairs(n_configs, n_sample):
    """(config, fold) pairs spread over the grid."""
    pairs = [(c, f) for c in range(n_configs) for f in range(N_FOLDS)]
    idx = np.unique(np.linspace(0, len(pairs) - 1, n_sample).round().astype(int))
    return [pairs[i] for i in idx]


def _time_fused(X, y, configs, rounds, devices):
    t0 = time.perf_counter()
    res = sweep_lib.sweep(X, y, "binomial_deviance", grid=configs, folds=N_FOLDS, seeds=1,
                          n_rounds=rounds, depth=DEPTH, n_bins=N_BINS, key=0, devices=devices)
    wall = time.perf_counter() - t0
    first = list(res.info["first_chunk_seconds"].values())[0]
    return wall, first, res


def _time_separate(X, y, configs, folds, pairs, rounds, devices=None):
    """What a user would write: fit on the training rows, validate on the held-out rows
    (``devices="all"``: each fit's rows sharded over the devices, jboost.fit's data parallelism)."""
    def one(c, f):
        cfg = configs[c]
        held = folds == f
        m = jboost.fit(X[~held], y[~held], "binomial_deviance", n_rounds=rounds, depth=DEPTH,
                       n_bins=N_BINS, learning_rate=cfg["learning_rate"], l2=cfg["l2"],
                       subsample=cfg["subsample"], eval_set=(X[held], y[held]), key=0,
                       devices=devices)
        jax.block_until_ready(m.valid_loss)

    t0 = time.perf_counter()
    one(*pairs[0])  # compile (folds of equal size share one compiled program)
    compile_s = time.perf_counter() - t0
    times = []
    for c, f in pairs:
        t0 = time.perf_counter()
        one(c, f)
        times.append(time.perf_counter() - t0)
    return compile_s, times


def _time_xgboost(X, y, configs, folds, pairs, rounds):
    import xgboost as xgb

    mats = {}
    for f in range(N_FOLDS):
        held = folds == f
        mats[f] = (xgb.DMatrix(X[~held], label=y[~held]), xgb.DMatrix(X[held], label=y[held]))
    times = []
    for c, f in pairs:
        cfg = configs[c]
        params = dict(objective="binary:logistic", eval_metric="logloss", tree_method="hist",
                      max_depth=DEPTH, max_bin=N_BINS, eta=cfg["learning_rate"], reg_lambda=cfg["l2"],
                      subsample=cfg["subsample"], min_child_weight=1.0, nthread=2, seed=0,
                      **(dict(device="cuda") if ARGS.gpu else {}))
        dtr, dva = mats[f]
        t0 = time.perf_counter()
        xgb.train(params, dtr, rounds, evals=[(dva, "valid")], verbose_eval=False)
        times.append(time.perf_counter() - t0)
    return times


def _time_catboost(X, y, configs, folds, pairs, rounds):
    import catboost as cb

    pools = {}
    for f in range(N_FOLDS):
        held = folds == f
        pools[f] = (cb.Pool(X[~held], y[~held]), cb.Pool(X[held], y[held]))
    times = []
    for c, f in pairs:
        cfg = configs[c]
        model = cb.CatBoostClassifier(
            iterations=rounds, depth=DEPTH, learning_rate=cfg["learning_rate"],
            l2_leaf_reg=max(cfg["l2"], 1e-6), bootstrap_type="Bernoulli", subsample=cfg["subsample"],
            border_count=N_BINS - 1, thread_count=2, loss_function="Logloss", grow_policy="SymmetricTree",
            random_seed=0, verbose=False, allow_writing_files=False,
            **(dict(task_type="GPU") if ARGS.gpu else {}))
        tr, va = pools[f]
        t0 = time.perf_counter()
        model.fit(tr, eval_set=va, use_best_model=False)
        times.append(time.perf_counter() - t0)
    return times


def _row(table, dataset, method, n_models, seconds, note):
    table.append(dict(dataset=dataset, method=method, models=n_models, seconds=seconds, note=note))


def _print(table):
    fused = {}
    for r in table:  # the first fused row of a dataset (all devices) is the reference
        if r["method"].startswith("jboost fused"):
            fused.setdefault(r["dataset"], r["seconds"])
    head = f"{'dataset':<10} {'method':<28} {'models':>6} {'wall s':>9} {'x fused':>8}  note"
    print("\n" + head + "\n" + "-" * len(head))
    for r in table:
        ratio = r["seconds"] / fused[r["dataset"]] if r["dataset"] in fused else float("nan")
        print(f"{r['dataset']:<10} {r['method']:<28} {r['models']:>6} {r['seconds']:>9.1f} "
              f"{ratio:>8.2f}  {r['note']}")
    print("x fused: the method's wall time divided by the fused sweep's (> 1: the fused sweep is faster).")


def main():
    quick = ARGS.quick
    skip = set(filter(None, ARGS.skip.split(",")))
    configs = _configs()
    n_total = len(configs) * N_FOLDS
    table = []
    print(f"jax {jax.__version__}, devices {jax.devices()}, load average at start {_load():.2f} "
          f"(2 cores; the machine is shared: figures are noisy)")
    for name in ARGS.datasets.split(","):
        if name == "spam":
            X, y, _, _ = jboost.datasets.load_spam(ARGS.data_dir)
            rounds = ARGS.rounds or (20 if quick else 100)
            n_fused = ARGS.fused_configs or (8 if quick else 64)
        elif name == "synthetic":
            X, y = jboost.datasets.make_classification(ARGS.n_synthetic, n_features=50, seed=0)
            rounds = ARGS.rounds or (5 if quick else 100)
            n_fused = ARGS.fused_configs or (4 if quick else 8)
        else:
            raise ValueError(f"--datasets: unknown dataset {name!r} (spam, synthetic).")
        n_sample = ARGS.sample or (3 if quick else 5)
        # A spread-out sub-grid for the fused run; its per-model time is extrapolated to 64 x 5.
        sub = [configs[i] for i in np.linspace(0, len(configs) - 1, n_fused).round().astype(int)]
        print(f"\n== {name}: {X.shape[0]} x {X.shape[1]}, {rounds} rounds, depth {DEPTH}; fused on "
              f"{len(sub)} of {len(configs)} configurations x {N_FOLDS} folds; load {_load():.2f}", flush=True)
        n_run = len(sub) * N_FOLDS
        device_sets = ["all"] + ([None] if len(jax.devices()) > 1 else [])  # every device, one
        for devs in device_sets:
            wall, first, res = _time_fused(X, y, sub, rounds, devs)
            n_dev = res.info["n_devices"]
            per_chunk = n_run // res.info["n_chunks"]  # models per chunk, all devices
            steady = (wall - first) / max(n_run - per_chunk, 1)  # seconds per model after compile
            est = wall if len(sub) == len(configs) else first + steady * (n_total - per_chunk)
            note = (f"chunk {list(res.info['chunk_size'].values())[0]}/device, first chunk incl. "
                    f"compile {first:.1f}s, then {steady:.2f}s/model")
            if len(sub) != len(configs):
                note += f"; ran {n_run} models in {wall:.1f}s, EXTRAPOLATED to {n_total}"
            _row(table, name, f"jboost fused ({n_dev} dev)", n_total, est, note)
            print(f"fused on {n_dev} device(s): {wall:.1f}s for {n_run} models; best {res.best}; "
                  f"load {_load():.2f}", flush=True)
        folds = res.fold_table[0]
        pairs = _sample_pairs(len(configs), n_sample)
        separate = [(None, "jboost separate fits")]
        if len(jax.devices()) > 1:
            separate.append(("all", f"jboost separate ({len(jax.devices())} dev)"))
        for devs, label in ([] if "separate" in skip else separate):
            compile_s, times = _time_separate(X, y, configs, folds, pairs, rounds, devs)
            est = compile_s + np.mean(times) * n_total
            _row(table, name, label, n_total, est,
                 f"EXTRAPOLATED from {len(times)} fits: {np.mean(times):.2f}s/fit "
                 f"(min {np.min(times):.2f}, max {np.max(times):.2f}) + compile {compile_s:.1f}s once"
                 + ("; rows sharded over the devices" if devs else ""))
            print(f"{label}: {times}; load {_load():.2f}", flush=True)
        for peer, fn in (("xgboost", _time_xgboost), ("catboost", _time_catboost)):
            if peer in skip:
                continue
            times = fn(X, y, configs, folds, pairs, rounds)
            _row(table, name, f"{peer} loop", n_total, np.mean(times) * n_total,
                 f"EXTRAPOLATED from {len(times)} fits: {np.mean(times):.3f}s/fit "
                 f"(min {np.min(times):.3f}, max {np.max(times):.3f}), 2 threads")
            print(f"{peer}: {times}; load {_load():.2f}", flush=True)
    _print(table)
    print(f"load average at end {_load():.2f}")


if __name__ == "__main__":
    main()
