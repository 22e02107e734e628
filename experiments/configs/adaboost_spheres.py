"""ESL Figure 10.2: AdaBoost.M1 with stumps on the nested-spheres problem (ESL eq. 10.2).

``X ~ N(0, I_10)``, ``y = 1`` iff ``sum_j X_j^2 > chi2_10(0.5)``; 2000 training and 10000 test
rows; 400 rounds of discrete AdaBoost.M1 (ESL Algorithm 10.1) with stumps. ESL reports the test
error of a single stump (45.8%), of a single 244-node classification tree (24.7%) and of
AdaBoost after 400 rounds (5.8%). Our single tree is an oblivious tree of depth ``tree_depth``
(2**8 = 256 leaves, the nearest power of two), grown by the same weak learner (one round of
AdaBoost.M1). Real AdaBoost (FHT Algorithm 2) with stumps is run beside it for reference.

Run::

    python -m experiments.run adaboost_spheres            # full (about a minute on 2 cores)
    python -m experiments.run adaboost_spheres --smoke    # < 30 s
"""

from __future__ import annotations

import time

import numpy as np

import jboost
from jboost import algorithms as A

ESL = "ESL 2nd ed., Sec. 10.1 / Fig. 10.2"
M1 = "discrete AdaBoost.M1 (ESL Alg. 10.1), stumps: jboost.algorithms.adaboost_m1"
REAL = "Real AdaBoost (FHT 2000 Alg. 2), stumps: jboost.algorithms.real_adaboost"


def get_config(smoke: bool = False) -> dict:
    config = dict(
        description="ESL Fig. 10.2: AdaBoost.M1 with stumps on nested spheres (eq. 10.2)",
        seed=0,
        n_train=2000,
        n_test=10000,
        n_rounds=400,
        tree_depth=8,
        peers=True,
    )
    if smoke:
        # The shapes of tests/test_algorithms.py's stump fits: their compiled scans are shared.
        config.update(n_train=400, n_test=1000, n_rounds=30, tree_depth=4, peers=False)
    return config


def _sklearn_stumps(X, y, Xt, yt, n_rounds):
    """scikit-learn's AdaBoost (SAMME = AdaBoost.M1 for two classes) with CART stumps."""
    try:
        from sklearn.ensemble import AdaBoostClassifier
        from sklearn.tree import DecisionTreeClassifier
    except ImportError:
        return None
    clf = AdaBoostClassifier(DecisionTreeClassifier(max_depth=1), n_estimators=n_rounds,
                             learning_rate=1.0).fit(X, y)
    return [float(np.mean(p != yt)) for p in clf.staged_predict(Xt)]


def run(config: dict, ctx) -> dict:
    seed = config["seed"]
    X, y = jboost.datasets.nested_spheres(config["n_train"], seed=seed)
    Xt, yt = jboost.datasets.nested_spheres(config["n_test"], seed=seed + 1)

    t0 = time.time()
    m1 = A.adaboost_m1(X, y, n_rounds=config["n_rounds"], depth=1, key=seed)
    test_err = np.asarray(A.staged_error(m1, Xt, yt))
    train_err = np.asarray(A.staged_error(m1, X, y))
    seconds_m1 = time.time() - t0
    real = A.real_adaboost(X, y, n_rounds=config["n_rounds"], depth=1, key=seed)
    real_err = np.asarray(A.staged_error(real, Xt, yt))
    tree = A.adaboost_m1(X, y, n_rounds=1, depth=config["tree_depth"], key=seed)
    tree_err = float(A.staged_error(tree, Xt, yt)[0])
    status = np.asarray(m1.info["status"])

    for m in range(config["n_rounds"]):
        ctx.log(m + 1, adaboost_test_error=float(test_err[m]), adaboost_train_error=float(train_err[m]),
                real_adaboost_test_error=float(real_err[m]), alpha=float(m1.info["coef"][m]),
                err=float(m1.info["err"][m]), status=int(status[m]))

    peers = {}
    if config["peers"]:
        sk = _sklearn_stumps(X, y, Xt, yt, config["n_rounds"])
        if sk is not None:
            peers["sklearn_adaboost_stumps_test_error_final"] = sk[-1]
            peers["sklearn_adaboost_stumps_test_error_first"] = sk[0]

    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(6, 4.5))
        rounds = np.arange(1, config["n_rounds"] + 1)
        ax.plot(rounds, test_err, color="tab:orange", label=f"{M1} ({test_err[-1]:.3f})")
        ax.plot(rounds, real_err, color="tab:green", lw=0.8, label=f"{REAL} ({real_err[-1]:.3f})")
        if config["n_rounds"] == 400:
            ax.plot([400], [0.058], "k*", ms=9, label="ESL Fig. 10.2: AdaBoost.M1, stumps, 400 it. (0.058)")
        ax.axhline(test_err[0], ls="--", color="gray", label=f"single stump ({test_err[0]:.3f})")
        ax.axhline(tree_err, ls=":", color="black",
                   label=f"single oblivious tree, depth {config['tree_depth']}, one AdaBoost.M1 round "
                         f"({tree_err:.3f})")
        ax.set_xlabel("boosting iterations")
        ax.set_ylabel("test error")
        ax.set_ylim(0, 0.5)
        ax.set_title(f"Nested spheres (ESL eq. 10.2, setting of Fig. 10.2), stumps, no shrinkage:\n"
                     f"discrete AdaBoost.M1 and Real AdaBoost, {config['n_train']} training / "
                     f"{config['n_test']} test rows", fontsize=9)
        # Below the axes: inside, the legend covered the low end of the curves.
        ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.14), fontsize=8)
        ctx.savefig(fig, "fig_10_2_test_error")
        plt.close(fig)
    except ImportError:
        print("matplotlib is not installed: no figure.")

    n, depth = config["n_rounds"], config["tree_depth"]
    published_m1 = 0.058 if n == 400 else None
    table = [
        dict(quantity="single stump: test error", algorithm=f"{M1} (round 1)", published=0.458,
             source=ESL, ours=float(test_err[0])),
        dict(quantity="single tree: test error (ESL: a 244-node CART tree)",
             algorithm=f"one oblivious tree of depth {depth} ({2**depth} leaves), one AdaBoost.M1 round",
             published=0.247, source=ESL, ours=tree_err),
        dict(quantity=f"test error after {n} rounds", algorithm=M1, published=published_m1,
             source=ESL if published_m1 is not None else None, ours=float(test_err[-1])),
        dict(quantity="minimal test error over rounds (chosen on the test set)", algorithm=M1,
             published=None, source=None, ours=float(test_err.min())),
        dict(quantity=f"test error after {n} rounds", algorithm=REAL, published=None, source=None,
             ours=float(real_err[-1])),
        dict(quantity="rounds that did not add a stump (WEAK/PERFECT/STOPPED)", algorithm=M1,
             published=None, source=None, ours=float(np.sum(status != A.OK))),
    ]
    if "sklearn_adaboost_stumps_test_error_final" in peers:
        table.append(dict(quantity=f"peer: test error after {n} rounds",
                          algorithm="scikit-learn AdaBoostClassifier (SAMME = AdaBoost.M1 for 2 classes), "
                                    "CART stumps",
                          published=None, source=None, ours=peers["sklearn_adaboost_stumps_test_error_final"]))
    return dict(table=table, peers=peers, seconds_adaboost=seconds_m1)
