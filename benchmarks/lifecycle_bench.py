"""What early stopping, progress and checkpoints cost, against the peers' early stopping.

    python benchmarks/lifecycle_bench.py                 # 20k x 20, depth 6, lr 0.1, patience 20
    python benchmarks/lifecycle_bench.py --rows 100000 --max-rounds 5000
    python benchmarks/lifecycle_bench.py --smoke         # CI's peer check: 2k rows, seconds

Issue 15's targets, measured with default arguments (no environment variables):

* **early stopping really stops**: ``jboost.fit(n_rounds=max_rounds, early_stopping_rounds=20)``
  that stops at round ``s`` against ``jboost.fit(n_rounds=s)`` on the same data: target <= 1.3x;
* **progress costs little**: ``verbose=10`` (host-side chunks of 10 rounds, a line per chunk) and
  ``checkpoint_dir=`` (a model file every 10 rounds) against the plain fit of ``s`` rounds:
  target <= 1.05x for progress;
* the peers in the same run (when installed): XGBoost ``early_stopping_rounds`` and LightGBM's
  ``early_stopping`` callback with ``max_rounds`` rounds, their stop round and time.

Every time is the best of ``--repeats`` runs after one warm-up run (compilation excluded: a
user's second fit of the same shapes reuses the compiled program), waiting for the result
(``jax.block_until_ready``).
"""

from __future__ import annotations

import argparse
import tempfile
import time

import jax
import numpy as np

import jboost


def data(n_rows: int, n_features: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(2 * n_rows, n_features)).astype(np.float32)
    y = X[:, 0] + np.sin(2 * X[:, 1]) + 0.5 * X[:, 2] * X[:, 3] + rng.normal(size=2 * n_rows)
    return X[:n_rows], y[:n_rows], X[n_rows:], y[n_rows:]


def best_time(fn, repeats: int):
    fn()  # warm-up: compiles
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t)
    return min(times), out


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", type=int, default=20000)
    p.add_argument("--features", type=int, default=20)
    p.add_argument("--max-rounds", type=int, default=5000)
    p.add_argument("--patience", type=int, default=20)
    p.add_argument("--learning-rate", type=float, default=0.1)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--smoke", action="store_true",
                   help="the smallest size (CI's peer check): 2000 rows, at most 100 rounds, "
                        "patience 5, one repeat, the peers too")
    args = p.parse_args(argv)
    if args.smoke:
        args.rows, args.max_rounds, args.patience, args.repeats = 2000, 100, 5, 1
    X, y, Xv, yv = data(args.rows, args.features)
    kw = dict(depth=6, learning_rate=args.learning_rate, eval_set=(Xv, yv))
    fit = lambda **extra: jax.block_until_ready(jboost.fit(X, y, **kw, **extra))

    t_es, stopped = best_time(lambda: fit(n_rounds=args.max_rounds,
                                          early_stopping_rounds=args.patience), args.repeats)
    s = stopped.n_rounds
    t_plain, _ = best_time(lambda: fit(n_rounds=s), args.repeats)
    t_verbose, _ = best_time(lambda: fit(n_rounds=s, callbacks=[lambda info: None],
                                         checkpoint_every=10), args.repeats)
    with tempfile.TemporaryDirectory() as d:
        def checkpointed():
            import shutil
            shutil.rmtree(d, ignore_errors=True)
            return fit(n_rounds=s, checkpoint_dir=d, checkpoint_every=10)
        t_ckpt, _ = best_time(checkpointed, args.repeats)
    print(f"data {args.rows} x {args.features}, depth 6, lr {args.learning_rate}, "
          f"patience {args.patience}, max {args.max_rounds} rounds; devices {jax.devices()}")
    print(f"jboost early stopping: stopped after {s} rounds (best {int(stopped.best_round)}) "
          f"in {t_es:.3f} s; a {s}-round fit {t_plain:.3f} s: ratio {t_es / t_plain:.3f} (target <= 1.3)")
    print(f"jboost chunks of 10 rounds with a callback: {t_verbose:.3f} s, ratio "
          f"{t_verbose / t_plain:.3f} (target <= 1.05); with a checkpoint every 10 rounds: "
          f"{t_ckpt:.3f} s, ratio {t_ckpt / t_plain:.3f}")
    def peer(name, fit_fn, rounds_of):
        t, m = best_time(fit_fn, args.repeats)
        print(f"{name} early stopping: stopped after {rounds_of(m)} rounds in {t:.3f} s "
              f"(jboost / {name} time: {t_es / t:.3f})")

    try:
        import xgboost as xgb
        def xgb_fit():
            m = xgb.XGBRegressor(n_estimators=args.max_rounds, max_depth=6, learning_rate=args.learning_rate,
                                 tree_method="hist", early_stopping_rounds=args.patience, n_jobs=-1)
            return m.fit(X, y, eval_set=[(Xv, yv)], verbose=False)
        peer("xgboost", xgb_fit, lambda m: m.best_iteration + args.patience + 1)
    except ImportError:
        print("xgboost not installed (pip install -e '.[bench]')")
    try:
        import lightgbm as lgb
        def lgb_fit():
            m = lgb.LGBMRegressor(n_estimators=args.max_rounds, max_depth=6, num_leaves=64,
                                  learning_rate=args.learning_rate, verbose=-1)
            return m.fit(X, y, eval_X=Xv, eval_y=yv, callbacks=[lgb.early_stopping(args.patience, verbose=False)])
        peer("lightgbm", lgb_fit, lambda m: m.best_iteration_ + args.patience)
    except ImportError:
        print("lightgbm not installed (pip install -e '.[bench]')")

if __name__ == "__main__":
    main()
