"""SAMME vs SAMME.R on the simulation of Zhu, Zou, Rosset and Hastie (2009), as in
scikit-learn's "Multi-class AdaBoosted Decision Trees" example.

10-dimensional standard Gaussian inputs, three classes cut by the chi-square(10) quantiles of the
squared radius (``jboost.datasets.samme_gaussian``); 3000 training / 10000 test rows; depth-2
trees (ours oblivious: one split per level), 600 rounds; learning rate 1.5 for SAMME and 1 for
SAMME.R as in the scikit-learn example (which used 600 trees in older versions, 300 now).
No test error is printed in that example; its test-error axis spans 0.18-0.62, so its curves
lie above 0.18, and SAMME.R ends below SAMME. Peers on the same data: scikit-learn's SAMME with
CART depth-2 trees, and (scikit-learn >= 1.6 no longer has SAMME.R) a NumPy SAMME.R of Zhu et al.
Algorithm 4 with scikit-learn's CART depth-2 trees as the weak learner.

Run::

    python -m experiments.run samme_simulation          # full
    python -m experiments.run samme_simulation --smoke  # < 30 s
"""

from __future__ import annotations

import time

import numpy as np

import jboost
from jboost import algorithms as A


def get_config(smoke: bool = False) -> dict:
    config = dict(
        description="SAMME vs SAMME.R, Zhu et al. (2009) simulation / scikit-learn example",
        seed=0,
        n_train=3000,
        n_test=10000,
        n_rounds=600,
        depth=2,
        samme_learning_rate=1.5,
        samme_r_learning_rate=1.0,
        peers=True,
    )
    if smoke:
        # The shapes of tests/test_algorithms.py's three-class fits: their compiled scans are shared.
        config.update(n_train=400, n_test=1000, n_rounds=30, peers=False)
    return config


def _sklearn_samme(X, y, Xt, yt, config):
    try:
        from sklearn.ensemble import AdaBoostClassifier
        from sklearn.tree import DecisionTreeClassifier
    except ImportError:
        return None
    clf = AdaBoostClassifier(DecisionTreeClassifier(max_depth=config["depth"]),
                             n_estimators=config["n_rounds"],
                             learning_rate=config["samme_learning_rate"]).fit(X, y)
    return [float(np.mean(p != yt)) for p in clf.staged_predict(Xt)]


def _numpy_samme_r_cart(X, y, Xt, yt, config):
    """SAMME.R (Zhu et al. Algorithm 4) in NumPy with CART trees, as scikit-learn < 1.6 did it."""
    try:
        from sklearn.tree import DecisionTreeClassifier
    except ImportError:
        return None
    k = int(y.max()) + 1
    y, yt = y.astype(int), yt.astype(int)
    code = np.where(np.eye(k)[y] > 0, 1.0, -1.0 / (k - 1))
    w = np.full(len(y), 1.0 / len(y))
    F = np.zeros((len(yt), k))
    errs = []
    for m in range(config["n_rounds"]):
        tree = DecisionTreeClassifier(max_depth=config["depth"], random_state=m)
        tree.fit(X, y, sample_weight=w)
        log_p = np.log(np.clip(tree.predict_proba(X), np.finfo(float).eps, None))
        w = w * np.exp(-(k - 1) / k * np.sum(code * log_p, axis=1))
        w = w / w.sum()
        log_pt = np.log(np.clip(tree.predict_proba(Xt), np.finfo(float).eps, None))
        F += (k - 1) * (log_pt - log_pt.mean(axis=1, keepdims=True))
        errs.append(float(np.mean(F.argmax(axis=1) != yt)))
    return errs


def run(config: dict, ctx) -> dict:
    seed = config["seed"]
    X, y = jboost.datasets.samme_gaussian(config["n_train"], seed=seed)
    Xt, yt = jboost.datasets.samme_gaussian(config["n_test"], seed=seed + 1)
    kw = dict(n_rounds=config["n_rounds"], depth=config["depth"], key=seed)
    t0 = time.time()
    samme = A.samme(X, y, learning_rate=config["samme_learning_rate"], **kw)
    samme_err = np.asarray(A.staged_error(samme, Xt, yt))
    t1 = time.time()
    real = A.samme_r(X, y, learning_rate=config["samme_r_learning_rate"], **kw)
    real_err = np.asarray(A.staged_error(real, Xt, yt))
    t2 = time.time()
    for m in range(config["n_rounds"]):
        ctx.log(m + 1, samme_test_error=float(samme_err[m]), samme_r_test_error=float(real_err[m]),
                samme_alpha=float(samme.info["coef"][m]), samme_err=float(samme.info["err"][m]),
                samme_status=int(samme.info["status"][m]))
    peers = {}
    if config["peers"]:
        sk = _sklearn_samme(X, y, Xt, yt, config)
        if sk is not None:
            peers["sklearn_samme_cart_depth2_test_error_final"] = sk[-1]
            peers["sklearn_samme_cart_depth2_test_error_min"] = min(sk)
        nr = _numpy_samme_r_cart(X, y, Xt, yt, config)
        if nr is not None:
            peers["numpy_samme_r_cart_depth2_test_error_final"] = nr[-1]
            peers["numpy_samme_r_cart_depth2_test_error_min"] = min(nr)

    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(6, 4.5))
        rounds = np.arange(1, config["n_rounds"] + 1)
        ax.plot(rounds, samme_err, label=f"SAMME, learning rate {config['samme_learning_rate']}")
        ax.plot(rounds, real_err, label=f"SAMME.R, learning rate {config['samme_r_learning_rate']}")
        ax.set_xlabel("number of trees (boosting rounds)")
        ax.set_ylabel("test error")
        ax.set_title(f"SAMME vs SAMME.R (Zhu et al. 2009), oblivious trees of depth {config['depth']},\n"
                     f"3-class Gaussian quantiles, {config['n_train']} training / {config['n_test']} test rows",
                     fontsize=9)
        ax.legend()
        ctx.savefig(fig, "samme_vs_samme_r")
        plt.close(fig)
    except ImportError:
        print("matplotlib is not installed: no figure.")

    n, depth = config["n_rounds"], config["depth"]
    samme_name = (f"SAMME (Zhu et al. 2009 Alg. 2), oblivious trees of depth {depth}, learning rate "
                  f"{config['samme_learning_rate']}: jboost.algorithms.samme")
    real_name = (f"SAMME.R (Zhu et al. 2009 Alg. 4), oblivious trees of depth {depth}, learning rate "
                 f"{config['samme_r_learning_rate']}: jboost.algorithms.samme_r")
    table = [
        dict(quantity=f"test error after {n} rounds (sklearn example: curves above 0.18)",
             algorithm=real_name, published=None, source=None, ours=float(real_err[-1])),
        dict(quantity=f"test error after {n} rounds (sklearn example: above SAMME.R)",
             algorithm=samme_name, published=None, source=None, ours=float(samme_err[-1])),
        dict(quantity="minimal test error over rounds", algorithm=real_name, published=None, source=None,
             ours=float(real_err.min())),
        dict(quantity="minimal test error over rounds", algorithm=samme_name, published=None, source=None,
             ours=float(samme_err.min())),
        dict(quantity="rounds that added nothing (WEAK/PERFECT/STOPPED)", algorithm=samme_name,
             published=None, source=None, ours=float(np.sum(np.asarray(samme.info["status"]) != A.OK))),
    ]
    peer_names = {
        "sklearn_samme_cart_depth2_test_error_final":
            (f"peer: test error after {n} rounds", f"scikit-learn AdaBoostClassifier (SAMME), CART trees "
             f"of depth {depth}, learning rate {config['samme_learning_rate']}"),
        "numpy_samme_r_cart_depth2_test_error_final":
            (f"peer: test error after {n} rounds", f"SAMME.R in NumPy with scikit-learn CART trees of "
             f"depth {depth} (as scikit-learn < 1.6)"),
    }
    for key, (quantity, algorithm) in peer_names.items():
        if key in peers:
            table.append(dict(quantity=quantity, algorithm=algorithm, published=None, source=None,
                              ours=peers[key]))
    return dict(table=table, peers=peers, seconds_samme=t1 - t0, seconds_samme_r=t2 - t1)
