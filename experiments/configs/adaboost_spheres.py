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
        ax.plot(rounds, test_err, color="tab:orange", label="AdaBoost.M1, stumps")
        ax.plot(rounds, real_err, color="tab:green", lw=0.8, label="Real AdaBoost, stumps")
        ax.axhline(test_err[0], ls="--", color="gray", label=f"single stump ({test_err[0]:.3f})")
        ax.axhline(tree_err, ls=":", color="black",
                   label=f"single oblivious tree, {2**config['tree_depth']} leaves ({tree_err:.3f})")
        ax.set_xlabel("Boosting Iterations")
        ax.set_ylabel("Test Error")
        ax.set_ylim(0, 0.5)
        ax.set_title("ESL Figure 10.2 (nested spheres)")
        ax.legend()
        ctx.savefig(fig, "fig_10_2_test_error")
        plt.close(fig)
    except ImportError:
        print("matplotlib is not installed: no figure.")

    table = [
        dict(quantity="single stump test error", published=0.458, ours=float(test_err[0])),
        dict(quantity=f"single tree test error (ESL: 244-node CART; ours: oblivious, "
                      f"{2**config['tree_depth']} leaves)", published=0.247, ours=tree_err),
        dict(quantity=f"AdaBoost.M1 stumps test error after {config['n_rounds']} rounds",
             published=0.058, ours=float(test_err[-1])),
        dict(quantity="AdaBoost.M1 stumps minimal test error over rounds", published=None,
             ours=float(test_err.min())),
        dict(quantity=f"Real AdaBoost stumps test error after {config['n_rounds']} rounds",
             published=None, ours=float(real_err[-1])),
        dict(quantity="rounds that did not add a stump (WEAK/PERFECT/STOPPED)", published=None,
             ours=float(np.sum(status != A.OK))),
    ]
    return dict(table=table, peers=peers, seconds_adaboost=seconds_m1)
