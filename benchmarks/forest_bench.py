"""Random forests and bagged trees, side by side: jboost (both tree families) against
scikit-learn's RandomForest (``n_jobs=2``) and LightGBM's ``boosting="rf"`` when installed.

    python benchmarks/forest_bench.py                                  # every case, full size
    python benchmarks/forest_bench.py --cases spam_rf spam_bagging --trees 100
    python benchmarks/forest_bench.py --families depthwise --depth 14 --bins 64 --json out.json
    python benchmarks/forest_bench.py --smoke     # CI's peer check: spam and California, 3 trees

Cases (the issue 20 acceptance cases; the data sets' own splits from :mod:`jboost.datasets`):

* ``spam_rf``: spam (ESL split, 3065 / 1536), classification, ``m = 7`` of 57 (``"sqrt"``);
  ESL 15.2 reports 4.88%;
* ``spam_bagging``: the same with ``m = p`` (bagged trees); ESL reports 5.4%;
* ``letter_rf``: letter (16000 / 4000), 26 classes, ``m = 4`` of 16 (``"sqrt"``);
* ``california_rf``: California housing (seeded 80/20), regression, ``m = 6`` of 8, minimum
  node size 5 (ESL's regression default), test average absolute error.

Every library fits ``--trees`` trees with the same ``m``, a bootstrap of ``n`` rows, and trees
grown deep: scikit-learn's to purity (its defaults otherwise), jboost's with ``fit_forest``'s
defaults (depth-wise trees grown until their nodes are pure, 256 bins) unless ``--depth`` /
``--bins`` say otherwise, LightGBM's ``boosting="rf"`` with ``bagging_fraction=0.632``,
``feature_fraction_bynode = m / p``, ``num_leaves`` 4096, ``min_data_in_leaf`` 1 (5 for
California). Reported per case: test error (classification, averaged probabilities) or test
AAE (regression), fit wall time (jboost: its second fit of the compiled program; its first, with
compilation, in ``cold s``; and the size of its forest's arrays), and each one's error and time
over scikit-learn's. Depth-wise forests grow each tree by the CPU kernel
(:func:`jboost.trees.depthwise.kernel_available`). All in this
process, one after the other, 2 threads where settable. The machine is shared: say its load.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

CASES = {
    "spam_rf": dict(data="spam", task="classification", max_features=7, published=0.0488),
    "spam_bagging": dict(data="spam", task="classification", max_features=None, published=0.054),
    "letter_rf": dict(data="letter", task="classification", max_features=4, published=None),
    "california_rf": dict(data="california", task="regression", max_features=6, published=None,
                          min_child_weight=5.0),
}


def load(name, data_dir):
    from jboost import datasets
    if name == "spam":
        return datasets.load_spam(data_dir)
    if name == "letter":
        return datasets.load_letter(data_dir)
    return datasets.load_california(data_dir, seed=0, test_fraction=0.2)


def score(task, pred, y):
    pred, y = np.asarray(pred), np.asarray(y)
    return float(np.mean(pred != y)) if task == "classification" else float(np.mean(np.abs(pred - y)))


def run_jboost(case, X, y, Xt, yt, args, family):
    import jax
    import jboost
    from jboost import bagging
    kw = dict(task=case["task"], n_trees=args.trees, max_features=case["max_features"],
              min_child_weight=case.get("min_child_weight", 1.0), tree_family=family)
    if args.depth is not None:  # else fit_forest's default (depth-wise: grown until pure)
        kw["depth"] = args.depth
    if args.bins is not None:  # else fit_forest's default (256)
        kw["n_bins"] = args.bins
    if family == "depthwise" and args.max_nodes:
        kw["max_nodes"] = args.max_nodes
    times = []
    for rep in range(2):  # the first compiles
        t0 = time.perf_counter()
        forest = bagging.fit_forest(X, y, key=rep, **kw)
        jax.block_until_ready(forest.trees.leaf_values)
        times.append(time.perf_counter() - t0)
    pred = (jboost.predict_class(forest, Xt) if case["task"] == "classification"
            else jboost.predict(forest, Xt))
    mb = sum(a.nbytes for a in jax.tree_util.tree_leaves(forest) if hasattr(a, "nbytes")) / 2**20
    print(f"  jboost {family}: the forest's arrays hold {mb:.0f} MiB", flush=True)
    return score(case["task"], pred, yt), times[1], times[0]


def run_sklearn(case, X, y, Xt, yt, args):
    from sklearn import ensemble
    mf = case["max_features"]
    mf = 1.0 if mf is None else mf
    if case["task"] == "classification":
        m = ensemble.RandomForestClassifier(args.trees, max_features=mf, n_jobs=2, random_state=0)
    else:
        m = ensemble.RandomForestRegressor(args.trees, max_features=mf, n_jobs=2, random_state=0,
                                           min_samples_leaf=int(case.get("min_child_weight", 1)))
    t0 = time.perf_counter()
    m.fit(X, y)
    t = time.perf_counter() - t0
    return score(case["task"], m.predict(Xt), yt), t, None


def run_lightgbm(case, X, y, Xt, yt, args):
    import lightgbm as lgb
    p = X.shape[1]
    mf = case["max_features"]
    params = dict(boosting_type="rf", n_estimators=args.trees, bagging_fraction=0.632, bagging_freq=1,
                  feature_fraction_bynode=1.0 if mf is None else mf / p, num_leaves=4096,
                  min_child_samples=int(case.get("min_child_weight", 1)), min_child_weight=1e-5,
                  max_bin=(args.bins or 256) - 1, n_jobs=2, verbose=-1, random_state=0)
    if case["task"] == "classification":
        m = lgb.LGBMClassifier(**params)
    else:
        m = lgb.LGBMRegressor(**params)
    t0 = time.perf_counter()
    m.fit(X, y)
    t = time.perf_counter() - t0
    return score(case["task"], m.predict(Xt), yt), t, None


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cases", nargs="+", default=list(CASES), choices=list(CASES))
    ap.add_argument("--families", nargs="+", default=["depthwise", "oblivious"],
                    choices=["depthwise", "oblivious"])
    ap.add_argument("--trees", type=int, default=500)
    ap.add_argument("--depth", type=int, default=None,
                    help="jboost's depth (default: fit_forest's, depth-wise trees grown until pure)")
    ap.add_argument("--bins", type=int, default=None, help="jboost's and LightGBM's bins (default 256)")
    ap.add_argument("--max-nodes", type=int, default=None, help="depth-wise histogram slots per level")
    ap.add_argument("--data-dir", default=os.environ.get("JBOOST_DATA_DIR"))
    ap.add_argument("--no-lightgbm", action="store_true", help="skip LightGBM even if installed")
    ap.add_argument("--json", default=None)
    ap.add_argument("--smoke", action="store_true",
                    help="the smallest size (CI's peer check): spam_rf and california_rf "
                         "(classification, regression), 3 trees of depth 6, both families")
    args = ap.parse_args(argv)
    if args.smoke:
        args.cases, args.trees, args.depth = ["spam_rf", "california_rf"], 3, 6
    rows = []
    print(f"load: {os.getloadavg()}; trees={args.trees} depth={args.depth} bins={args.bins}", flush=True)
    for name in args.cases:
        case = CASES[name]
        X, y, Xt, yt = load(case["data"], args.data_dir)
        runs = [("sklearn", lambda: run_sklearn(case, X, y, Xt, yt, args))]
        try:
            import lightgbm  # noqa: F401
            if not args.no_lightgbm:
                runs.append(("lightgbm rf", lambda: run_lightgbm(case, X, y, Xt, yt, args)))
        except ImportError:
            pass
        runs += [(f"jboost {f}", (lambda f=f: run_jboost(case, X, y, Xt, yt, args, f)))
                 for f in args.families]
        base = None
        for lib, fn in runs:
            err, t, cold = fn()
            base = base or (err, t)
            row = dict(case=name, lib=lib, error=err, fit_s=t, cold_s=cold, error_ratio=err / base[0],
                       time_ratio=t / base[1], published=case["published"])
            rows.append(row)
            print(f"{name:14s} {lib:18s} {'error' if case['task'] == 'classification' else 'AAE':5s} "
                  f"{err:.4f} ({row['error_ratio']:.3f}x sklearn)  fit {t:7.2f}s "
                  f"({row['time_ratio']:.2f}x sklearn)" + (f"  cold {cold:.1f}s" if cold else "")
                  + (f"  published {case['published']}" if case["published"] else ""), flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return rows


if __name__ == "__main__":
    main()
