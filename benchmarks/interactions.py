"""Interaction constraints: jboost against XGBoost and LightGBM with the same feature groups, the
same rounds, depth (or leaves), learning rate, l2 and 256 bins, on the same rows.

    python benchmarks/interactions.py              # both data sets, 300 rounds, depth 6
    python benchmarks/interactions.py --smoke      # CI's check: 5 rounds, depth 3, small sets
    python benchmarks/interactions.py --fits jboost-depthwise xgboost-depthwise

Data: ``synthetic`` (``--n`` training and test rows, 8 uniform features on ``[-2, 2]``, ``y =
x0 x1 + sin(2 x2) x3 + 0.5 x3 x4 + 0.25 x4^2 + tanh(2 x5) + 0.5 eps``: ``x6``, ``x7`` are noise;
groups ``[[0, 1], [2, 3, 4], [5], [6], [7]]``, the truth's own; the test error is against the
noiseless truth) and ``california`` (California housing, ``jboost.datasets.load_california``'s
seeded 80/20 split; ``--data-dir``, default ``$JBOOST_DATA_DIR`` or ``../shared/data``; groups
location ``[Latitude, Longitude]`` and the other six columns ``[MedInc, HouseAge, AveRooms,
AveBedrms, Population, AveOccup]``; the test error is against the test labels). Every feature is
in a group (singletons written out), so XGBoost's and jboost's rule (a path's split features: one
feature, or a subset of one group) is LightGBM's too: they differ on features in no group, which
LightGBM drops.

Fits (``--fits``, default all), each free and constrained: jboost ``depthwise``, ``lossguide``
(31 leaves, depth at most 6) and ``oblivious`` trees; XGBoost ``hist`` ``depthwise`` (depth 6)
and ``lossguide`` (``max_leaves=31, max_depth=6``; the groups go as the JSON string ``"[[0,
1], ...]"``: XGBoost 3.2's Python package reads a list of lists as feature names); LightGBM
(leaf-wise, ``num_leaves=31, max_depth=6``). ``--rounds`` (300), depth 6, learning rate 0.1,
256 bins (the peers' ``max_bin=255`` and a missing bin), l2 1, minimum child hessian 1 (LightGBM
also ``min_data_in_leaf=1``), ``os.cpu_count()`` threads.

Per fit: test RMSE; the fit's wall time (the peers' include building their DMatrix / Dataset, as
jboost's includes its binning; jboost timed warm: a first fit compiles, or loads JAX's
persistent compilation cache, the second is timed; on a shared machine run with
``OMP_WAIT_POLICY=PASSIVE``, or spinning OpenMP threads make the peers' times meaningless);
**breaking trees**: the trees that have a root-to-leaf path whose split features are neither one
feature nor a subset of one group, read from each library's trees (jboost's node tables or
oblivious levels, XGBoost's JSON dump, LightGBM's ``dump_model()``); and **cross-group probes**:
over 200 test rows and every pair ``(a, b)`` of features of different groups, the share whose
mixed difference ``f(a', b') - f(a', b) - f(a, b') + f(a, b)`` (``a'``, ``b'`` from other test
rows) exceeds ``1e-4 std(y)``: a model that obeys disjoint groups is a sum of one function per
group, whose mixed differences are 0 but for rounding. A correct constrained fit shows 0 and 0%;
the free fits show how far an unconstrained model is from it. The script fails if a constrained
jboost fit breaks the constraint. Figures: ``benchmarks/RESULTS.md`` ("Interaction constraints").
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # this checkout

from benchmarks._data import default_data_dir  # noqa: E402
import jboost  # noqa: E402
from jboost import datasets  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
THREADS = os.cpu_count() or 1
CALIFORNIA_COLUMNS = ["MedInc", "HouseAge", "AveRooms", "AveBedrms", "Population", "AveOccup",
                      "Latitude", "Longitude"]
CALIFORNIA_GROUPS = [["Latitude", "Longitude"],
                     ["MedInc", "HouseAge", "AveRooms", "AveBedrms", "Population", "AveOccup"]]


def load_average() -> str:
    try:
        with open("/proc/loadavg") as fh:
            return " ".join(fh.read().split()[:3])
    except OSError:
        return "unknown"


def synthetic(n: int, seed: int = 0):
    """``(X, y, Xt, truth_t, groups)``: 8 features, three additive parts with interactions."""
    rng = np.random.default_rng(seed)
    X = rng.uniform(-2, 2, size=(2 * n, 8)).astype(np.float32)
    x = X.astype(np.float64)
    truth = (x[:, 0] * x[:, 1]                                                      # f(x0, x1)
             + np.sin(2 * x[:, 2]) * x[:, 3] + 0.5 * x[:, 3] * x[:, 4] + 0.25 * x[:, 4] ** 2  # g
             + np.tanh(2 * x[:, 5]))                                                # h(x5)
    y = (truth + 0.5 * rng.normal(size=2 * n)).astype(np.float32)
    groups = [[0, 1], [2, 3, 4], [5], [6], [7]]
    return X[:n], y[:n], X[n:], truth[n:].astype(np.float32), groups


def california(data_dir):
    """``(X, y, Xt, yt, groups)``: location against the other six columns (indices)."""
    X, y, Xt, yt = datasets.load_california(data_dir=data_dir)
    groups = [[CALIFORNIA_COLUMNS.index(c) for c in g] for g in CALIFORNIA_GROUPS]
    return (np.asarray(X, np.float32), np.asarray(y, np.float32), np.asarray(Xt, np.float32),
            np.asarray(yt, np.float32), groups)


# ---- Which trees break the groups ---------------------------------------------------------------

def allowed(path: frozenset, groups) -> bool:
    """XGBoost's rule for a root-to-leaf path's split features: one feature, or inside a group."""
    return len(path) <= 1 or any(path <= set(g) for g in groups)


def breaking_trees(tree_paths, groups) -> int:
    """The trees (each a list of its leaves' path feature sets) with a path that
    :func:`allowed` refuses."""
    return sum(not all(allowed(p, groups) for p in paths) for paths in tree_paths)


def jboost_paths(model):
    """Every tree's leaf path feature sets, from a jboost Booster's stacked trees: node tables
    (depth-wise, loss-guided: splitting nodes ``0..sum(level_counts)-1``, or any node of nonzero
    gain) or oblivious levels (a level of gain 0 is a null split that uses no feature)."""
    trees = model.trees
    features = np.asarray(trees.features)
    gains = np.asarray(trees.gains)
    if hasattr(trees, "children"):  # DepthwiseTrees node tables: (..., N), children (..., N, 2)
        n_nodes = features.shape[-1]
        features, gains = features.reshape(-1, n_nodes), gains.reshape(-1, n_nodes)
        children = np.asarray(trees.children).reshape(-1, n_nodes, 2)
        counts = np.asarray(trees.level_counts)
        used = counts.reshape(-1, counts.shape[-1]).sum(axis=1)
        out = []
        for t in range(features.shape[0]):
            paths, stack = [], [(0, frozenset())]
            while stack:
                i, u = stack.pop()
                if i < used[t] or gains[t, i] != 0:
                    u = u | {int(features[t, i])}
                for c in children[t, i]:
                    if c >= 0:
                        assert c > i, "a node table's child comes after its parent"
                        stack.append((int(c), u))
                    else:
                        paths.append(u)
            out.append(paths)
        return out
    depth = features.shape[-1]  # ObliviousTrees: one feature per level, one path per tree
    features, gains = features.reshape(-1, depth), gains.reshape(-1, depth)
    return [[frozenset(int(f) for f, g in zip(fs, gs) if g != 0)]
            for fs, gs in zip(features, gains)]


def xgboost_paths(booster):
    """Every tree's leaf path feature sets from XGBoost's JSON dump."""
    names = booster.feature_names
    index = {n: i for i, n in enumerate(names)} if names else {}

    def feature(name):
        return index[name] if name in index else int(re.fullmatch(r"f(\d+)", name).group(1))

    def walk(node, u, paths):
        if "leaf" in node:
            paths.append(u)
            return
        u = u | {feature(node["split"])}
        for child in node["children"]:
            walk(child, u, paths)

    out = []
    for text in booster.get_dump(dump_format="json"):
        paths = []
        walk(json.loads(text), frozenset(), paths)
        out.append(paths)
    return out


def lightgbm_paths(booster):
    """Every tree's leaf path feature sets from LightGBM's ``dump_model()``."""
    def walk(node, u, paths):
        if "split_feature" not in node:
            paths.append(u)
            return
        u = u | {int(node["split_feature"])}
        walk(node["left_child"], u, paths)
        walk(node["right_child"], u, paths)

    out = []
    for tree in booster.dump_model()["tree_info"]:
        paths = []
        walk(tree["tree_structure"], frozenset(), paths)
        out.append(paths)
    return out


def cross_group_probes(predict, Xt, groups, scale: float, n_rows: int = 200, seed: int = 0):
    """The share of (row, cross-group pair) probes whose mixed difference exceeds ``1e-4 scale``."""
    rng = np.random.default_rng(seed)
    group_of = {f: k for k, g in enumerate(groups) for f in g}
    pairs = [(a, b) for a in range(Xt.shape[1]) for b in range(a + 1, Xt.shape[1])
             if group_of.get(a, -1 - a) != group_of.get(b, -1 - b)]
    base = Xt[rng.integers(0, len(Xt), size=n_rows)]
    other = Xt[rng.integers(0, len(Xt), size=(len(pairs), n_rows))]  # where a', b' come from
    blocks = [base]
    for p, (a, b) in enumerate(pairs):
        va, vb, vab = base.copy(), base.copy(), base.copy()
        va[:, a] = vab[:, a] = other[p, :, a]
        vb[:, b] = vab[:, b] = other[p, :, b]
        blocks += [va, vb, vab]
    pred = np.asarray(predict(np.concatenate(blocks)), np.float64).reshape(len(blocks), n_rows)
    f0, rest = pred[0], pred[1:].reshape(len(pairs), 3, n_rows)
    mixed = rest[:, 2] - rest[:, 0] - rest[:, 1] + f0
    return float(np.mean(np.abs(mixed) > 1e-4 * scale))


# ---- The fits --------------------------------------------------------------------------------

def fits(args):
    """name -> fit(X, y, groups or None) -> (predict, tree paths)."""
    import lightgbm
    import xgboost

    def jb(family):
        def fit(X, y, groups):
            import jax

            kw = dict(n_rounds=args.rounds, depth=args.depth, learning_rate=args.learning_rate,
                      l2=1.0, min_child_weight=1.0, n_bins=256, tree_family=family)
            if family == "lossguide":
                kw["max_leaves"] = args.leaves
            if groups is not None:
                kw["interaction_constraints"] = groups
            model = jboost.fit(X, y, **kw)
            jax.block_until_ready(model.trees)
            return (lambda Z: jboost.predict(model, Z)), (lambda: jboost_paths(model))
        return fit

    def xgb(policy):
        def fit(X, y, groups):
            size = (dict(max_depth=args.depth) if policy == "depthwise" else
                    dict(max_depth=args.depth, max_leaves=args.leaves))
            params = dict(objective="reg:squarederror", tree_method="hist", grow_policy=policy,
                          max_bin=255, eta=args.learning_rate, reg_lambda=1.0,
                          min_child_weight=1.0, nthread=THREADS, **size)
            if groups is not None:  # XGBoost 3.2 reads a list of lists as feature names
                params["interaction_constraints"] = json.dumps(groups)
            booster = xgboost.train(params, xgboost.DMatrix(X, y, nthread=THREADS),
                                    num_boost_round=args.rounds)
            return (lambda Z: booster.inplace_predict(Z)), (lambda: xgboost_paths(booster))
        return fit

    def lgb(X, y, groups):
        params = dict(objective="regression", num_leaves=args.leaves, max_depth=args.depth,
                      learning_rate=args.learning_rate, lambda_l2=1.0, min_data_in_leaf=1,
                      min_sum_hessian_in_leaf=1.0, max_bin=255, num_threads=THREADS, verbose=-1)
        if groups is not None:
            params["interaction_constraints"] = groups
        data = lightgbm.Dataset(X, y, params=dict(max_bin=255, min_data_in_leaf=1,
                                                  feature_pre_filter=False, verbose=-1))
        booster = lightgbm.train(params, data, num_boost_round=args.rounds)
        return ((lambda Z: booster.predict(Z, num_threads=THREADS)),
                (lambda: lightgbm_paths(booster)))

    return {"jboost-depthwise": jb("depthwise"), "jboost-lossguide": jb("lossguide"),
            "jboost-oblivious": jb("oblivious"), "xgboost-depthwise": xgb("depthwise"),
            "xgboost-lossguide": xgb("lossguide"), "lightgbm": lgb}


FITS = ("jboost-depthwise", "jboost-lossguide", "jboost-oblivious", "xgboost-depthwise",
        "xgboost-lossguide", "lightgbm")


def run(name, data, args, out):
    X, y, Xt, yt, groups = data
    scale = float(np.std(y))
    table = fits(args)
    for lib in args.fits:
        fit = table[lib]
        row = {"data": name, "library": lib}
        for label, g in (("free", None), ("constrained", groups)):
            cold = None
            if lib.startswith("jboost") and not args.smoke:
                start = time.perf_counter()
                fit(X, y, g)  # the first fit compiles; the second is timed
                cold = time.perf_counter() - start
            start = time.perf_counter()
            predict, paths = fit(X, y, g)
            seconds = time.perf_counter() - start
            rmse = float(np.sqrt(np.mean((np.asarray(predict(Xt), np.float64) - yt) ** 2)))
            tree_paths = paths()
            row[label] = dict(rmse=rmse, seconds=seconds, cold=cold, trees=len(tree_paths),
                              breaking=breaking_trees(tree_paths, groups),
                              probes=cross_group_probes(predict, Xt, groups, scale))
        out.append(row)
        f, c = row["free"], row["constrained"]
        cold = "" if c["cold"] is None else f" (cold {f['cold']:.1f} / {c['cold']:.1f})"
        print(f"{name:10s} {lib:17s} RMSE free {f['rmse']:.4f} constrained {c['rmse']:.4f}  "
              f"fit s free {f['seconds']:6.2f} constrained {c['seconds']:6.2f}{cold}  "
              f"breaking trees free {f['breaking']}/{f['trees']} constrained "
              f"{c['breaking']}/{c['trees']}  cross-group probes free {f['probes']:.1%} "
              f"constrained {c['probes']:.1%}", flush=True)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data-dir", default=default_data_dir())
    ap.add_argument("--rounds", type=int, default=300)
    ap.add_argument("--depth", type=int, default=6)
    ap.add_argument("--leaves", type=int, default=31, help="loss-guided and LightGBM trees")
    ap.add_argument("--learning-rate", type=float, default=0.1)
    ap.add_argument("--n", type=int, default=20000, help="synthetic training (and test) rows")
    ap.add_argument("--data", nargs="+", default=["synthetic", "california"],
                    choices=["synthetic", "california"])
    ap.add_argument("--fits", nargs="+", default=list(FITS), choices=FITS)
    ap.add_argument("--smoke", action="store_true", help="5 rounds, depth 3, 7 leaves, small sets")
    args = ap.parse_args(argv)
    if args.smoke:
        args.rounds, args.depth, args.leaves, args.n = 5, 3, 7, 500
    print(f"{args.rounds} rounds, depth {args.depth} (loss-guided and LightGBM: {args.leaves} "
          f"leaves, depth at most {args.depth}), learning rate {args.learning_rate}, 256 bins, "
          f"l2 1, {THREADS} threads; load average {load_average()}", flush=True)
    out = []
    for name in args.data:
        if name == "synthetic":
            data = synthetic(args.n)
        else:
            data = california(args.data_dir)
            if args.smoke:
                data = (data[0][:1000], data[1][:1000], data[2][:500], data[3][:500], data[4])
        run(name, data, args, out)
    bad = [r for r in out if r["constrained"]["breaking"] or r["constrained"]["probes"]]
    for r in bad:
        print(f"CONSTRAINT BROKEN: {r['data']} {r['library']}: {r['constrained']}", flush=True)
    print(f"load average at the end {load_average()}", flush=True)
    assert not [r for r in bad if r["library"].startswith("jboost")], "jboost broke its groups"
    return 0


if __name__ == "__main__":
    sys.exit(main())
