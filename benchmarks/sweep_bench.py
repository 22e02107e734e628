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

Timing: the fused sweep runs once to compile (its first chunk's extra time is the compile
figure), the separate fits once to compile; then ``--repeats`` warm repeats run every method
once each, in turn, and each method's time per model is the median of its repeats. (On a shared
machine another tenant can take a core for seconds: methods timed at different moments differed
by up to 1.5x for the same work, the multi-threaded fused sweep most, while in turn they see the
same machine.) A method's total is its compile time plus the median time per model times the
320 models. Every extrapolated figure is marked as such. Run from the repository root::

    python benchmarks/sweep_bench.py --quick           # minutes: few rounds, a sub-grid
    python benchmarks/sweep_bench.py --smoke           # CI's peer check: spam, 5 rounds, 1 device
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
    p.add_argument("--repeats", type=int, default=None,
                   help="warm repeats, every method once per repeat in turn (default 3; --quick 1)")
    p.add_argument("--n-synthetic", type=int, default=100_000)
    p.add_argument("--data-dir", default=None)
    p.add_argument("--gpu", action="store_true",
                   help="peers on the GPU (XGBoost device='cuda', CatBoost task_type='GPU'); jboost "
                        "uses JAX's default device")
    p.add_argument("--skip", default="", help="comma-separated methods to skip: separate,xgboost,catboost")
    p.add_argument("--smoke", action="store_true",
                   help="the smallest size (CI's peer check): spam, 5 rounds, 1 device, 2 "
                        "configurations fused, 1 fit sampled, 1 repeat, every method")
    args = p.parse_args()
    if args.smoke:
        args.quick, args.datasets, args.rounds, args.devices = True, "spam", 5, 1
        args.fused_configs, args.sample, args.repeats = 2, 1, 1
    return args


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


def _time_separate(X, y, configs, folds, pairs, rounds, devices=None, warm=False):
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

    compile_s = 0.0
    if not warm:
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
        n_repeats = ARGS.repeats or (1 if quick else 3)
        # A spread-out sub-grid for the fused run; its per-model time is extrapolated to 64 x 5.
        sub = [configs[i] for i in np.linspace(0, len(configs) - 1, n_fused).round().astype(int)]
        print(f"\n== {name}: {X.shape[0]} x {X.shape[1]}, {rounds} rounds, depth {DEPTH}; fused on "
              f"{len(sub)} of {len(configs)} configurations x {N_FOLDS} folds; load {_load():.2f}", flush=True)
        n_run = len(sub) * N_FOLDS
        device_sets = ["all"] + ([None] if len(jax.devices()) > 1 else [])  # every device, one
        folds, fused_runs = None, []
        for devs in device_sets:
            wall, first, res = _time_fused(X, y, sub, rounds, devs)
            n_dev = res.info["n_devices"]
            per_chunk = n_run // res.info["n_chunks"]  # models per chunk, all devices
            chunk = list(res.info["chunk_size"].values())[0]
            fused_runs.append((devs, n_dev, wall, first, per_chunk, chunk))
            folds = res.fold_table[0]
            print(f"fused on {n_dev} device(s), first call (compiles): {wall:.1f}s for {n_run} "
                  f"models; best {res.best}; load {_load():.2f}", flush=True)
        pairs = _sample_pairs(len(configs), n_sample)
        separate = [(None, "jboost separate fits")]
        if len(jax.devices()) > 1:
            separate.append(("all", f"jboost separate ({len(jax.devices())} dev)"))
        separate = [s for s in separate if "separate" not in skip]
        peers = [(p, fn) for p, fn in (("xgboost", _time_xgboost), ("catboost", _time_catboost))
                 if p not in skip]
        compiles = {}  # the first fit's extra time over the same fit warm (as the fused sweep's)
        for devs, label in separate:
            first_s, again = _time_separate(X, y, configs, folds, pairs[:1], rounds, devs)
            compiles[label] = max(first_s - again[0], 0.0)
        # Warm repeats, every method once per repeat in turn: a noisy shared machine (other
        # tenants take one core for seconds) then slows every method alike, not the one that
        # happened to run at the time; each figure is the median of the repeats.
        per_model = {}  # method -> [seconds per model or fit, one per repeat]
        for rep in range(n_repeats):
            for devs, n_dev, *_ in fused_runs:
                t0 = time.perf_counter()
                sweep_lib.sweep(X, y, "binomial_deviance", grid=sub, folds=N_FOLDS, seeds=1,
                                n_rounds=rounds, depth=DEPTH, n_bins=N_BINS, key=0, devices=devs)
                per_model.setdefault(f"jboost fused ({n_dev} dev)", []).append(
                    (time.perf_counter() - t0) / n_run)
            for devs, label in separate:
                per_model.setdefault(label, []).append(
                    np.mean(_time_separate(X, y, configs, folds, pairs, rounds, devs, warm=True)[1]))
            for peer, fn in peers:
                per_model.setdefault(f"{peer} loop", []).append(np.mean(fn(X, y, configs, folds, pairs, rounds)))
            line = ", ".join(f"{k} {v[-1]:.3f}" for k, v in per_model.items())
            print(f"repeat {rep + 1}/{n_repeats}, s per model: {line}; load {_load():.2f}", flush=True)
        spread = lambda v: f"median of {len(v)} warm repeats {np.median(v):.3f}s (min {np.min(v):.3f}, max {np.max(v):.3f})"
        for devs, n_dev, wall, first, per_chunk, chunk in fused_runs:
            v = per_model[f"jboost fused ({n_dev} dev)"]
            steady = float(np.median(v))
            compile_s = max(first - steady * per_chunk, 0.0)  # the first chunk's extra time
            _row(table, name, f"jboost fused ({n_dev} dev)", n_total, compile_s + steady * n_total,
                 f"chunk {chunk}/device; compile {compile_s:.1f}s "
                 f"once + {n_total} x {spread(v)}/model" +
                 ("" if len(sub) == len(configs) else f"; {n_run} models run, EXTRAPOLATED to {n_total}"))
        for devs, label in separate:
            v = per_model[label]
            _row(table, name, label, n_total, compiles[label] + float(np.median(v)) * n_total,
                 f"compile {compiles[label]:.1f}s once + {n_total} x {spread(v)}/fit of "
                 f"{len(pairs)} timed, EXTRAPOLATED" + ("; rows sharded over the devices" if devs else ""))
        for peer, _ in peers:
            v = per_model[f"{peer} loop"]
            _row(table, name, f"{peer} loop", n_total, float(np.median(v)) * n_total,
                 f"{n_total} x {spread(v)}/fit of {len(pairs)} timed, EXTRAPOLATED, 2 threads")
    _print(table)
    print(f"load average at end {_load():.2f}")


if __name__ == "__main__":
    main()
