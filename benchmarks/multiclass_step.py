"""The Newton step for coupled outputs: training-loss trajectories of the multinomial deviance.

    python benchmarks/multiclass_step.py                      # K = 3, 12; lr 0.1, 0.3, 1; 30 rounds
    python benchmarks/multiclass_step.py --ks 3 --lrs 1 --rounds 10
    python benchmarks/multiclass_step.py --data mixture       # an easier, well separated case
    python benchmarks/multiclass_step.py --algorithms         # also SAMME, SAMME.R, LogitBoost, GB
    python benchmarks/multiclass_step.py --smoke              # CI's peer check: K = 3, lr 1, 5 rounds

Issue 14, item 1: with the diagonal of the hessian as the Newton curvature, the multinomial
deviance diverged at learning rate 1 (5000 x 20, depth 6, K = 3: 0.563 -> 0.774 -> 3.558). This
script measures, on synthetic data of that size, the mean training deviance after each round of:

* ``jboost/autodiff``: :func:`jboost.fit` with the default curvature, the Gershgorin majorant
  ``H_kk + sum_{j != k} |H_kj|`` of the autodiff hessian (``2 p (1 - p)`` for the softmax);
* ``jboost/diagonal``: the classical diagonal ``H_kk = p (1 - p)`` (``Loss.hessian="diagonal"``;
  jboost before issue 14);
* ``jboost/lightgbm``: the diagonal times LightGBM's ``K / (K - 1)`` (Friedman 2001, Algorithm 6's
  ``(K - 1)/K`` on the leaf value), run exactly as the diagonal fit with learning rate, ``l2`` and
  ``min_child_weight`` divided by ``c = K / (K - 1)`` (the leaf value ``-G / (c H + l2)`` is
  ``(1/c) (-G / (H + l2 / c))``; split gains scale by ``1/c``, so the splits are the same);
* ``jboost/lr-aware``: the curvature ``max(H_kk, lr * majorant)`` (the shrunk step never exceeds
  the majorised Newton step; the classical step wherever shrinkage already makes it safe, i.e.
  ``lr <= 1/2`` for the softmax), emulated the same way: the diagonal fit for ``lr <= 1/2``, else
  the majorant fit at learning rate 1 with ``l2`` and ``min_child_weight`` divided by ``lr``;
* ``xgboost``: XGBoost ``multi:softprob`` (``hist``, depth-wise trees of depth 6, one per class
  and round; its hessian is ``2 p (1 - p)``), ``mlogloss`` on the training set.

Data (``--data``): ``ordinal`` (the issue's kind of case: K ordered classes cut at the quantiles
of ``x0 + x1 / 2``, 10% of labels redrawn at random, 18 noise features; leaves mix neighbouring
classes) or ``mixture`` (a Gaussian mixture, 3 centres per class in 10 features: well separated).
jboost grows one oblivious tree with K-vector leaves per round, or one per output with
``--per-output`` (both are run by default). Shared settings: depth 6, 256 bins, l2 1, min child
weight 1. Printed: the trajectory (a few rounds), the final loss, the largest increase from one
round to the next, and the ratio of each final loss to XGBoost's (its trees are depth-wise, not
oblivious: the ratio mixes the tree kind with the step). No timing.
"""

from __future__ import annotations

import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # this checkout

import jboost  # noqa: E402
from jboost import algorithms as A  # noqa: E402
from jboost import losses  # noqa: E402


def make_data(kind="ordinal", n=5000, p=20, k=3, seed=0):
    """``ordinal`` or ``mixture`` data (module docstring): float32 ``(n, p)``, labels ``(n,)``."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, p)).astype(np.float32)
    if kind == "ordinal":
        s = X[:, 0] + 0.5 * X[:, 1]
        y = np.digitize(s, np.quantile(s, np.linspace(0, 1, k + 1)[1:-1]))
        flip = rng.random(n) < 0.1
        y[flip] = rng.integers(0, k, flip.sum())
    else:
        centres = rng.normal(scale=1.5, size=(k, 3, 10))
        y = rng.integers(0, k, n)
        X[:, :10] += centres[y, rng.integers(0, 3, n)]
    return X, y.astype(np.float32)


def jboost_curve(X, y, k, lr, rounds, per_output, kind):
    # Fit with curvature c * h (h the diagonal or the majorant) as a fit with curvature h and
    # learning rate, l2 and min_child_weight divided by c: lr -G/(c H + l2) = (lr/c) -G/(H + l2/c).
    hessian, c = "diagonal", 1.0
    if kind == "autodiff":
        hessian = "autodiff"
    elif kind == "lightgbm":
        c = k / (k - 1.0)
    elif kind == "lr-aware" and lr > 0.5:          # max(p(1-p), lr 2p(1-p)) = lr * majorant
        hessian, c = "autodiff", lr
    loss = losses.multinomial_deviance(k).replace(hessian=hessian)
    model = jboost.fit(X, y, loss, n_rounds=rounds, depth=6, learning_rate=lr / c, l2=1.0 / c,
                       min_child_weight=1.0 / c, n_outputs=k, per_output_trees=per_output)
    return np.asarray(model.train_loss, np.float64)


def xgboost_curve(X, y, k, lr, rounds):
    import xgboost as xgb

    d = xgb.DMatrix(X, label=y)
    params = dict(objective="multi:softprob", num_class=k, eta=lr, max_depth=6, reg_lambda=1.0,
                  min_child_weight=1.0, tree_method="hist", max_bin=256, eval_metric="mlogloss",
                  nthread=2, verbosity=0)
    res = {}
    xgb.train(params, d, rounds, evals=[(d, "train")], evals_result=res, verbose_eval=False)
    return np.asarray(res["train"]["mlogloss"], np.float64)


def summary(name, curve, ref=None):
    shown = " ".join(f"{v:.3g}" for v in curve[:4]) + " ... " + f"{curve[-1]:.4g}"
    rise = float(np.max(np.diff(curve))) if curve.size > 1 else 0.0
    ratio = "" if ref is None else f"  final/xgb {curve[-1] / ref:7.3g}"
    print(f"    {name:24s} {shown:44s} max rise {rise:+9.3g}{ratio}", flush=True)


def algorithms_section(X, y, k, rounds):
    """The literature's algorithms at their usual settings, each with the loss it records."""
    print(f"  K={k}: algorithms at their published settings (learning rate 1), their own loss")
    fits = {
        "samme (depth 6)": lambda: A.samme(X, y, n_classes=k, n_rounds=rounds, depth=6),
        "samme_r (depth 6)": lambda: A.samme_r(X, y, n_classes=k, n_rounds=rounds, depth=6),
        "logitboost (depth 6)": lambda: A.logitboost(X, y, n_classes=k, n_rounds=rounds, depth=6),
        "gradient_boost lr 1": lambda: A.gradient_boost(X, y, "multinomial_deviance",
                                                        n_outputs=k, n_rounds=rounds, depth=6,
                                                        learning_rate=1.0),
    }
    for name, fit in fits.items():
        try:
            model = fit()
        except TypeError as e:  # an algorithm's signature differs: say so, run the rest
            print(f"    {name}: skipped ({e})")
            continue
        summary(f"{name} [{model.loss.name}]", np.asarray(model.train_loss, np.float64))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ks", type=int, nargs="+", default=[3, 12])
    ap.add_argument("--lrs", type=float, nargs="+", default=[0.1, 0.3, 1.0])
    ap.add_argument("--rounds", type=int, default=30)
    ap.add_argument("--kinds", nargs="+", default=["autodiff", "diagonal", "lightgbm", "lr-aware"])
    ap.add_argument("--data", choices=["ordinal", "mixture"], default="ordinal")
    ap.add_argument("--per-output", choices=["both", "no", "yes"], default="both")
    ap.add_argument("--no-xgboost", action="store_true")
    ap.add_argument("--algorithms", action="store_true",
                    help="also SAMME, SAMME.R, LogitBoost and gradient_boost at learning rate 1")
    ap.add_argument("--smoke", action="store_true",
                    help="the smallest size (CI's peer check): K = 3, learning rate 1, 5 rounds, "
                         "every kind and XGBoost")
    args = ap.parse_args()
    if args.smoke:
        args.ks, args.lrs, args.rounds = [3], [1.0], 5
    per_output = {"both": (False, True), "no": (False,), "yes": (True,)}[args.per_output]
    for k in args.ks:
        X, y = make_data(args.data, k=k)
        print(f"K={k} ({args.data}): {X.shape[0]} x {X.shape[1]}, depth 6, {args.rounds} rounds; mean training "
              "deviance after rounds 1, 2, 3, 4 ... last", flush=True)
        for lr in args.lrs:
            ref = None
            if not args.no_xgboost:
                curve = xgboost_curve(X, y, k, lr, args.rounds)
                ref = curve[-1]
                print(f"  lr {lr:g}")
                summary("xgboost softprob", curve)
            else:
                print(f"  lr {lr:g}")
            for po in per_output:
                for kind in args.kinds:
                    if kind == "lr-aware" and lr <= 0.5:
                        print(f"    jboost/lr-aware{' per-output' if po else ''}: = jboost/diagonal"
                              " (lr <= 1/2)")
                        continue
                    curve = jboost_curve(X, y, k, lr, args.rounds, po, kind)
                    summary(f"jboost/{kind}{' per-output' if po else ''}", curve, ref)
        if args.algorithms:
            algorithms_section(X, y, k, args.rounds)


if __name__ == "__main__":
    main()
