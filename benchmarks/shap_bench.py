"""Exact SHAP values of every row: jboost against shap.TreeExplainer (XGBoost) and CatBoost.

    pip install -e ".[bench,explain]"
    python benchmarks/shap_bench.py                       # 100k x 50, 200 depth-6 trees, 256 bins
    python benchmarks/shap_bench.py --rows 20000          # smaller, on a loaded machine
    python benchmarks/shap_bench.py --smoke               # CI's peer check: 2000 x 20, 10 trees

The three models are trained on the same rows (binary, ``jboost.datasets.make_classification``
as in ``benchmarks/bench.py``) with the same depth, rounds, learning rate and 256 bins (CatBoost:
``SymmetricTree``, the same oblivious trees; XGBoost ``hist``, depth-wise trees), then each
explains every training row with its exact path-dependent SHAP values:

* jboost: :func:`jboost.inspect.shap_values` with ``data=`` the training rows (the covers are
  their counts), timed with ``block_until_ready``; the first call's extra time is reported as
  compile time;
* XGBoost: ``shap.TreeExplainer(booster).shap_values`` (the polynomial TreeSHAP recursion, on
  XGBoost's hessian covers) and, for reference, XGBoost's own ``predict(pred_contribs=True)``;
* CatBoost: ``get_feature_importance(type="ShapValues")`` (its oblivious-tree algorithm).

Prints each time and jboost's ratio to each peer (< 1: jboost is faster), plus each library's
local-accuracy error (values + expected value against its raw prediction).
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", type=int, default=100_000)
    p.add_argument("--features", type=int, default=50)
    p.add_argument("--rounds", type=int, default=200)
    p.add_argument("--depth", type=int, default=6)
    p.add_argument("--bins", type=int, default=256)
    p.add_argument("--libs", nargs="+", default=["jboost", "xgboost", "catboost"])
    p.add_argument("--threads", type=int, default=os.cpu_count())
    p.add_argument("--smoke", action="store_true",
                   help="the smallest size (CI's peer check): 2000 rows x 20 features, 10 rounds, "
                        "every library of --libs")
    args = p.parse_args()
    if args.smoke:
        args.rows, args.features, args.rounds = 2000, 20, 10

    import jax
    import jboost
    from jboost import datasets

    X, y = datasets.make_classification(args.rows, args.features, 20, seed=0)
    X = np.asarray(X, np.float32)
    print(f"rows={args.rows} features={args.features} rounds={args.rounds} depth={args.depth} "
          f"bins={args.bins} threads={args.threads} jax={jax.__version__} device={jax.devices()[0]}")
    times = {}

    if "jboost" in args.libs:
        t0 = time.perf_counter()
        model = jboost.fit(X, y, "binomial_deviance", n_rounds=args.rounds, depth=args.depth,
                           n_bins=args.bins, learning_rate=0.1)
        jax.block_until_ready(model.trees.leaf_values)
        print(f"jboost  fit {time.perf_counter() - t0:.1f}s")
        Xd = jax.device_put(X)
        t0 = time.perf_counter()
        sv = jboost.inspect.shap_values(model, Xd, data=Xd)
        jax.block_until_ready(sv)
        first = time.perf_counter() - t0
        t0 = time.perf_counter()
        sv = jboost.inspect.shap_values(model, Xd, data=Xd)
        jax.block_until_ready(sv)
        times["jboost"] = time.perf_counter() - t0
        err = float(np.max(np.abs(np.asarray(sv.values).sum(-1) + np.asarray(sv.expected_value)
                                  - np.asarray(jboost.predict(model, Xd)))))
        print(f"jboost  shap {times['jboost']:.2f}s (compile {first - times['jboost']:.2f}s), "
              f"local accuracy max error {err:.1e}")

    if "xgboost" in args.libs:
        import xgboost as xgb

        t0 = time.perf_counter()
        dtr = xgb.QuantileDMatrix(X, y, max_bin=args.bins, nthread=args.threads)
        booster = xgb.train(dict(tree_method="hist", max_depth=args.depth, eta=0.1, max_bin=args.bins,
                                 nthread=args.threads, objective="binary:logistic", reg_lambda=1.0,
                                 min_child_weight=1.0), dtr, num_boost_round=args.rounds)
        print(f"xgboost fit {time.perf_counter() - t0:.1f}s")
        dm = xgb.DMatrix(X, nthread=args.threads)
        t0 = time.perf_counter()
        contrib = booster.predict(dm, pred_contribs=True)
        times["xgboost pred_contribs"] = time.perf_counter() - t0
        margin = booster.predict(dm, output_margin=True)
        print(f"xgboost pred_contribs {times['xgboost pred_contribs']:.2f}s, local accuracy max error "
              f"{np.max(np.abs(contrib.sum(-1) - margin)):.1e}")
        try:
            import shap
        except ImportError:
            print("shap is not installed (pip install shap): no shap.TreeExplainer timing")
        else:
            t0 = time.perf_counter()
            explainer = shap.TreeExplainer(booster)
            values = explainer.shap_values(X)
            times["shap.TreeExplainer (xgboost)"] = time.perf_counter() - t0
            print(f"shap.TreeExplainer on xgboost {times['shap.TreeExplainer (xgboost)']:.2f}s, local "
                  f"accuracy max error {np.max(np.abs(values.sum(-1) + explainer.expected_value - margin)):.1e}")

    if "catboost" in args.libs:
        import catboost as cb

        t0 = time.perf_counter()
        pool = cb.Pool(X, y)
        pool.quantize(border_count=args.bins - 1)
        model_cb = cb.CatBoostClassifier(iterations=args.rounds, depth=args.depth, learning_rate=0.1,
                                         grow_policy="SymmetricTree", border_count=args.bins - 1,
                                         verbose=False, boosting_type="Plain", thread_count=args.threads,
                                         l2_leaf_reg=1.0, random_strength=0.0, bootstrap_type="No",
                                         allow_writing_files=False)
        model_cb.fit(pool)
        print(f"catboost fit {time.perf_counter() - t0:.1f}s")
        pool_x = cb.Pool(X)
        t0 = time.perf_counter()
        values = model_cb.get_feature_importance(data=pool_x, type="ShapValues", thread_count=args.threads)
        times["catboost ShapValues"] = time.perf_counter() - t0
        margin = model_cb.predict(pool_x, prediction_type="RawFormulaVal")
        print(f"catboost ShapValues {times['catboost ShapValues']:.2f}s, local accuracy max error "
              f"{np.max(np.abs(values.sum(-1) - margin)):.1e}")

    if "jboost" in times:
        for name, t in times.items():
            if name != "jboost":
                print(f"ratio jboost / {name}: {times['jboost'] / t:.3f}")


if __name__ == "__main__":
    main()
