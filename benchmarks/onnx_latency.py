"""Serving latency: a jboost model exported by ``jboost.io.to_onnx`` through ONNX Runtime and by
``jboost.io.to_treelite`` through Treelite's GTIL, against ``jboost.predict`` and XGBoost's
``inplace_predict`` on a model of the same size.

    pip install -e ".[bench,onnx,treelite]"
    python benchmarks/onnx_latency.py                  # 100k x 20 training rows, 200 depth-6 trees
    python benchmarks/onnx_latency.py --batch 1000 --threads 1
    python benchmarks/onnx_latency.py --smoke          # CI's peer check: 2000 x 20, 10 trees

The same binary rows (``jboost.datasets.make_classification``) train jboost (``jboost.fit``,
oblivious trees) and XGBoost (``hist``, ``max_depth``, the same rounds, learning rate and 256
bins). Timed, each the median of ``--repeats`` calls after warm-up calls (jboost's first call,
which compiles, excluded), on one row and on a batch of ``--batch`` rows of held-out data:

* ``onnxruntime``: ``InferenceSession.run`` of the exported graph's ``raw_scores``
  (``intra_op_num_threads=--threads``, CPU);
* ``treelite gtil.predict``: ``treelite.gtil.predict(..., pred_margin=True)`` of the exported
  Treelite model (raw scores), ``nthread=--threads``;
* ``jboost.predict``: the raw scores of a NumPy batch, ``block_until_ready``;
* ``xgboost inplace_predict``: ``predict_type="margin"`` (raw scores), ``nthread=--threads``.

By default every library runs as it comes (threads that spin while they wait, ONNX Runtime's and
OpenMP's default); ``--passive`` (an expert setup, labelled so in RESULTS.md) makes them wait
passively: ``OMP_WAIT_POLICY=PASSIVE`` unless set, and ONNX Runtime's
``session.intra_op.allow_spinning=0`` (on a loaded 2-core machine, spinning threads cost XGBoost
~20 ms a single-row call and doubled ONNX Runtime's batch time).

Prints the medians, the ratios (< 1: the first is faster) and the largest differences between
ONNX Runtime's and Treelite's raw scores and jboost's on the batch. The machine is shared: say its load.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
# --passive: OpenMP's threads (XGBoost's) wait passively; read before OpenMP starts.
if "--passive" in sys.argv:
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import jax  # noqa: E402
import onnxruntime as ort  # noqa: E402
import treelite  # noqa: E402
import xgboost as xgb  # noqa: E402

import jboost  # noqa: E402
from jboost import datasets  # noqa: E402
from jboost import io as jio  # noqa: E402


def median_seconds(fn, repeats: int, warmup: int = 3) -> float:
    """The median wall time of ``fn()`` over ``repeats`` calls after ``warmup`` calls."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def fitted(X, y, args):
    """The jboost model and the XGBoost booster of the same size, trained on ``X, y``."""
    t0 = time.perf_counter()
    model = jboost.fit(X, y, "binomial_deviance", n_rounds=args.rounds, depth=args.depth,
                       n_bins=256, learning_rate=0.1)
    jax.block_until_ready(model.trees.leaf_values)
    print(f"jboost  fit {time.perf_counter() - t0:.1f}s")
    t0 = time.perf_counter()
    dtrain = xgb.QuantileDMatrix(X, y, max_bin=256, nthread=args.threads)
    booster = xgb.train(dict(tree_method="hist", max_depth=args.depth, eta=0.1, max_bin=256,
                             nthread=args.threads, objective="binary:logistic"), dtrain,
                        num_boost_round=args.rounds)
    print(f"xgboost fit {time.perf_counter() - t0:.1f}s")
    return model, booster


def predictors(model, booster, args):
    """``{name: predict(rows)}`` of the four, each returning raw scores as NumPy."""
    t0 = time.perf_counter()
    proto = jio.to_onnx(model, outputs=("raw_scores",))
    options = ort.SessionOptions()
    options.intra_op_num_threads = args.threads
    if args.passive:  # ONNX Runtime's threads wait passively too
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    session = ort.InferenceSession(proto.SerializeToString(), options,
                                   providers=["CPUExecutionProvider"])
    print(f"to_onnx + session {time.perf_counter() - t0:.2f}s, graph {proto.ByteSize() / 1e6:.2f} MB")
    t0 = time.perf_counter()
    tl = jio.to_treelite(model)
    print(f"to_treelite {time.perf_counter() - t0:.2f}s, {tl.num_tree} trees")
    booster.set_param({"nthread": args.threads})
    return {
        "onnxruntime": lambda X: session.run(["raw_scores"], {"X": X})[0],
        "treelite gtil.predict": lambda X: treelite.gtil.predict(tl, X, nthread=args.threads,
                                                                 pred_margin=True)[:, 0, 0],
        "jboost.predict": lambda X: np.asarray(jax.block_until_ready(jboost.predict(model, X))),
        "xgboost inplace_predict": lambda X: booster.inplace_predict(X, predict_type="margin"),
    }


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", type=int, default=100_000)
    p.add_argument("--features", type=int, default=20)
    p.add_argument("--rounds", type=int, default=200)
    p.add_argument("--depth", type=int, default=6)
    p.add_argument("--batch", type=int, default=10_000)
    p.add_argument("--repeats", type=int, default=200, help="timed single-row calls (batch: / 10)")
    p.add_argument("--threads", type=int, default=os.cpu_count())
    p.add_argument("--passive", action="store_true",
                   help="an expert setup: every library's threads wait without spinning")
    p.add_argument("--smoke", action="store_true",
                   help="the smallest size (CI's peer check): 2000 x 20, 10 rounds, batch 500")
    args = p.parse_args()
    if args.smoke:
        args.rows, args.rounds, args.batch, args.repeats = 2000, 10, 500, 20
    X, y = datasets.make_classification(args.rows + args.batch, args.features, 10, seed=0)
    X = np.asarray(X, np.float32)
    X_test, X, y = X[args.rows:], X[:args.rows], np.asarray(y[:args.rows], np.float32)
    print(f"rows={args.rows} features={args.features} rounds={args.rounds} depth={args.depth} "
          f"batch={args.batch} threads={args.threads} jax={jax.__version__} "
          f"onnxruntime={ort.__version__} treelite={treelite.__version__} xgboost={xgb.__version__} "
          f"OMP_WAIT_POLICY={os.environ.get('OMP_WAIT_POLICY', 'unset')} load={os.getloadavg()[0]:.2f}")
    model, booster = fitted(X, y, args)
    fns = predictors(model, booster, args)
    for name in ("onnxruntime", "treelite gtil.predict"):
        gap = np.max(np.abs(fns[name](X_test) - fns["jboost.predict"](X_test)))
        print(f"max |{name} - jboost.predict| on the batch: {gap:.2e}")
    times = {}
    for size, rows, repeats in (("1 row", X_test[:1], args.repeats),
                                (f"{args.batch} rows", X_test, max(args.repeats // 10, 5))):
        for name, fn in fns.items():
            times[size, name] = median_seconds(lambda fn=fn, rows=rows: fn(rows), repeats)
            print(f"{size:>12}  {name:<24} median {times[size, name] * 1e3:9.3f} ms")
        onnx_t = times[size, "onnxruntime"]
        print(f"{size:>12}  ratio onnxruntime / jboost.predict {onnx_t / times[size, 'jboost.predict']:.3f}, "
              f"onnxruntime / xgboost {onnx_t / times[size, 'xgboost inplace_predict']:.3f}, "
              f"jboost.predict / xgboost "
              f"{times[size, 'jboost.predict'] / times[size, 'xgboost inplace_predict']:.3f}")
        tl_t = times[size, "treelite gtil.predict"]
        print(f"{size:>12}  ratio treelite / onnxruntime {tl_t / onnx_t:.3f}, treelite / jboost.predict "
              f"{tl_t / times[size, 'jboost.predict']:.3f}")


if __name__ == "__main__":
    main()
