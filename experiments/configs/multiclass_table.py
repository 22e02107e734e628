"""Multi-class benchmark table: SAMME, SAMME.R, multinomial gradient boosting and LogitBoost on
waveform, vowel, segmentation and letter (the data sets of Zhu, Zou, Rosset and Hastie 2009 and,
in part, Friedman, Hastie and Tibshirani 2000).

Splits are ``jboost.datasets``' standard ones: waveform 300 train / 4700 test, vowel 528 / 462,
segmentation 210 / 2100, letter 16000 / 4000. All four algorithms grow oblivious trees of the
same depth per data set for the same number of rounds:

* SAMME and SAMME.R (Zhu et al. Algorithms 2 and 4), learning rate 1;
* K-class LogitBoost (FHT Algorithm 6), learning rate 1, ``z`` clipped at 4;
* multinomial-deviance gradient boosting with Newton trees and vector leaves
  (``jboost.fit(..., "multinomial_deviance")``), learning rate 0.1.

Reported: test error after the last round, and the minimum over rounds (optimistic: chosen on the
test set). Letter is kept affordable with fewer rounds.

**Published column.** Zhu et al. (2009, Sec. 4, real data) and Friedman, Hastie and Tibshirani
(2000) report test errors on these data sets, with CART trees of other sizes; ESL's vowel table
(Table 12.3) has LDA, QDA, CART, FDA and neural networks, not boosting. The papers' tables could
not be read from any source available to this project (session 14 searched the stored copies of
the SAMME paper: only its first page was reachable), so no number is transcribed and the column
stays empty: a number from memory is worse than none.

**Vowel: SAMME.R vs SAMME (the "overfitting").** With the reference scikit-learn (<= 1.5) SAMME.R
formulas (leaf class proportions clipped at float64 eps, ``h = (K-1)(log p - mean log p)``,
``w <- w exp(-(K-1)/K y^T log p)``) run on CART trees of the same depth (``_samme_r_reference``,
written here from those formulas), SAMME.R on vowel reaches the same test error as ours; and
scikit-learn's SAMME (``AdaBoostClassifier``, CART trees of the same depth) gives the lower error
quoted in the issue. The rows ``vowel: reference ...`` and the paired comparison of our SAMME and
SAMME.R (test points only one of them gets right) are recorded so the explanation is rerun with
the table: the SAMME.R/SAMME gap on vowel is a property of SAMME.R on 528 training points with
11 classes (leaves with few points give extreme log-proportions), not of our implementation, and
the gap to scikit-learn's SAMME is the tree family (oblivious vs CART trees of the same depth).

Run::

    python -m experiments.run multiclass_table          # full (letter dominates)
    python -m experiments.run multiclass_table --smoke  # < 30 s
"""

from __future__ import annotations

import time

import numpy as np

import jboost
from jboost import algorithms as A
from experiments.configs import multiclass_error, staged_metric

DATASETS = {
    # name: (loader, depth, n_rounds)
    "waveform": ("load_waveform", 3, 600),
    "vowel": ("load_vowel", 4, 600),
    "segmentation": ("load_segmentation", 3, 600),
    "letter": ("load_letter", 6, 200),
}
ALGORITHMS = ("samme", "samme_r", "logitboost", "multinomial_gb")
SHORT = {"samme": "SAMME", "samme_r": "SAMME.R", "logitboost": "K-class LogitBoost",
         "multinomial_gb": "multinomial-deviance GB"}
NAMES = {
    "samme": "SAMME (Zhu et al. 2009 Alg. 2), learning rate 1",
    "samme_r": "SAMME.R (Zhu et al. 2009 Alg. 4), learning rate 1",
    "logitboost": "K-class LogitBoost (FHT 2000 Alg. 6), learning rate 1, z clipped at 4",
    "multinomial_gb": "gradient boosting, multinomial deviance, Newton trees with vector leaves",
}


def get_config(smoke: bool = False) -> dict:
    config = dict(
        description="SAMME / SAMME.R / LogitBoost / multinomial GB on waveform, vowel, "
                    "segmentation, letter",
        seed=0,
        datasets={k: dict(depth=v[1], n_rounds=v[2]) for k, v in DATASETS.items()},
        gb_learning_rate=0.1,
    )
    config["reference"] = ["vowel"]  # the reference SAMME.R / scikit-learn SAMME comparison
    if smoke:
        config.update(datasets={"segmentation": dict(depth=2, n_rounds=10)}, reference=["segmentation"])
    return config


def _samme_r_reference(X, y, Xt, yt, k, depth, n_rounds, seed):
    """SAMME.R as scikit-learn (<= 1.5) computed it (``AdaBoostClassifier(algorithm="SAMME.R")``,
    learning rate 1): CART trees (``DecisionTreeClassifier(max_depth=depth)``) fitted to the
    weights, leaf class proportions clipped below at float64 eps, ``h = (K-1)(log p - mean_k
    log p)`` summed over rounds, ``w <- w exp(-(K-1)/K y_coded^T log p)`` renormalised (``y_coded``
    1 for the class, ``-1/(K-1)`` otherwise). NumPy on the host; returns the test error after each
    round, or None without scikit-learn."""
    try:
        from sklearn.tree import DecisionTreeClassifier
    except ImportError:
        return None
    X, Xt = np.asarray(X, np.float64), np.asarray(Xt, np.float64)
    y, yt = np.asarray(y).astype(int), np.asarray(yt).astype(int)
    eps = np.finfo(np.float64).eps
    w = np.full(len(y), 1.0 / len(y))
    y_coded = np.full((len(y), k), -1.0 / (k - 1))
    y_coded[np.arange(len(y)), y] = 1.0
    f_test = np.zeros((len(yt), k))
    errors = []
    for _ in range(n_rounds):
        tree = DecisionTreeClassifier(max_depth=depth, random_state=seed).fit(X, y, sample_weight=w)

        def log_p(Z):
            p = np.zeros((len(Z), k))
            p[:, tree.classes_] = tree.predict_proba(Z)
            return np.log(np.clip(p, eps, None))

        lp_test = log_p(Xt)
        f_test += (k - 1) * (lp_test - lp_test.mean(axis=1, keepdims=True))
        w = w * np.exp(-(k - 1) / k * np.sum(y_coded * log_p(X), axis=1))
        w /= w.sum()
        errors.append(float(np.mean(f_test.argmax(axis=1) != yt)))
    return np.asarray(errors)


def _sklearn_samme(X, y, Xt, yt, depth, n_rounds, seed):
    """scikit-learn's ``AdaBoostClassifier`` (SAMME) with CART trees of ``max_depth=depth``,
    learning rate 1: the test error after each round (None without scikit-learn)."""
    try:
        from sklearn.ensemble import AdaBoostClassifier
        from sklearn.tree import DecisionTreeClassifier
    except ImportError:
        return None
    clf = AdaBoostClassifier(DecisionTreeClassifier(max_depth=depth), n_estimators=n_rounds,
                             learning_rate=1.0, random_state=seed).fit(np.asarray(X, np.float64), y)
    return np.asarray([np.mean(p != yt) for p in clf.staged_predict(np.asarray(Xt, np.float64))])


def _fit(name, X, y, depth, n_rounds, seed, gb_lr, k):
    if name == "multinomial_gb":
        return jboost.fit(X, y, "multinomial_deviance", n_rounds=n_rounds, depth=depth,
                          learning_rate=gb_lr, key=seed, n_outputs=k)
    fn = {"samme": A.samme, "samme_r": A.samme_r, "logitboost": A.logitboost}[name]
    return fn(X, y, n_classes=k, n_rounds=n_rounds, depth=depth, key=seed)


def run(config: dict, ctx) -> dict:
    seed = config["seed"]
    table, seconds, step, curves, paired = [], {}, 0, {}, {}
    for ds, settings in config["datasets"].items():
        X, y, Xt, yt = getattr(jboost.datasets, DATASETS[ds][0])(data_dir=ctx.data_dir)
        k = int(max(y.max(), yt.max())) + 1
        right = {}
        for algo in ALGORITHMS:
            t0 = time.time()
            model = _fit(algo, X, y, settings["depth"], settings["n_rounds"], seed,
                         config["gb_learning_rate"], k)
            err = np.asarray(staged_metric(model, Xt, yt, multiclass_error), np.float64)
            right[algo] = np.asarray(jboost.predict_class(model, Xt)) == np.asarray(yt)
            curves[(ds, algo)] = err
            seconds[f"{ds}/{algo}"] = time.time() - t0
            step += 1
            ctx.log(step, dataset=ds, algorithm=algo, test_error_final=float(err[-1]),
                    test_error_min=float(err.min()), round_of_min=int(err.argmin()) + 1,
                    seconds=seconds[f"{ds}/{algo}"])
            rounds, depth = settings["n_rounds"], settings["depth"]
            lr = f", learning rate {config['gb_learning_rate']}" if algo == "multinomial_gb" else ""
            algorithm = f"{NAMES[algo]}, oblivious trees of depth {depth}{lr}"
            table.append(dict(quantity=f"{ds}: test error after {rounds} rounds", algorithm=algorithm,
                              published=None, source=None, ours=float(err[-1])))
            table.append(dict(quantity=f"{ds}: min test error over rounds (chosen on the test set)",
                              algorithm=algorithm, published=None, source=None, ours=float(err.min())))
        if ds in config.get("reference", ()):
            table += _reference_rows(ds, settings, X, y, Xt, yt, k, seed, right, paired, seconds)

    plt = ctx.pyplot
    fig = None
    if plt is not None:
        names = list(config["datasets"])
        fig, axes = plt.subplots(1, len(names), figsize=(4.2 * len(names), 3.8), squeeze=False)
        for ax, ds in zip(axes[0], names):
            settings = config["datasets"][ds]
            for algo in ALGORITHMS:
                c = curves[(ds, algo)]
                ax.plot(np.arange(1, len(c) + 1), c, lw=1, label=f"{SHORT[algo]} ({c[-1]:.3f})")
            ax.set_title(f"{ds}: oblivious trees of depth {settings['depth']}", fontsize=9)
            ax.set_xlabel("boosting rounds")
            ax.set_ylabel("test error")
            ax.legend(fontsize=7)
        fig.suptitle("Multi-class boosting: SAMME, SAMME.R (learning rate 1), K-class LogitBoost (rate 1), "
                     f"multinomial-deviance gradient boosting (rate {config['gb_learning_rate']})", fontsize=9)
        fig.tight_layout()
    ctx.savefig(fig, "test_error_vs_rounds")
    return dict(table=table, seconds=seconds, samme_vs_samme_r_paired=paired)


def _reference_rows(ds, settings, X, y, Xt, yt, k, seed, right, paired, seconds):
    """Rows explaining SAMME.R vs SAMME on ``ds``: the paired comparison of our two fits on the
    test points, SAMME.R by scikit-learn's formulas on CART trees, scikit-learn's SAMME."""
    depth, rounds = settings["depth"], settings["n_rounds"]
    only_samme = int(np.sum(right["samme"] & ~right["samme_r"]))
    only_samme_r = int(np.sum(right["samme_r"] & ~right["samme"]))
    n_test = int(len(yt))
    paired[ds] = dict(n_test=n_test, only_samme_right=only_samme, only_samme_r_right=only_samme_r,
                      # the difference of the two error rates and its paired standard error
                      difference=(only_samme - only_samme_r) / n_test,
                      se=float(np.sqrt(only_samme + only_samme_r - (only_samme - only_samme_r) ** 2 / n_test)
                               / n_test))
    ours = f"oblivious trees of depth {depth}, {rounds} rounds, learning rate 1"
    rows = [dict(quantity=f"{ds}: SAMME.R error minus SAMME error, paired on the test points (after {rounds} rounds)",
                 algorithm=f"SAMME.R vs SAMME (Zhu et al. 2009 Algs. 4 and 2), {ours}",
                 published=None, source=None, ours=paired[ds]["difference"]),
            dict(quantity=f"{ds}: standard error of that paired difference",
                 algorithm=f"SAMME.R vs SAMME (Zhu et al. 2009 Algs. 4 and 2), {ours}",
                 published=None, source=None, ours=paired[ds]["se"])]
    t0 = time.time()
    ref = _samme_r_reference(X, y, Xt, yt, k, depth, rounds, seed)
    sk = _sklearn_samme(X, y, Xt, yt, depth, rounds, seed)
    seconds[f"{ds}/reference"] = time.time() - t0
    cart = f"CART trees of max_depth {depth}, {rounds} rounds, learning rate 1"
    for curve, name in ((ref, f"reference: SAMME.R by scikit-learn's (<= 1.5) formulas (float64-eps clip), {cart}"),
                        (sk, f"reference: scikit-learn AdaBoostClassifier (SAMME), {cart}")):
        if curve is not None:
            rows += [dict(quantity=f"{ds}: test error after {rounds} rounds", algorithm=name,
                          published=None, source=None, ours=float(curve[-1])),
                     dict(quantity=f"{ds}: min test error over rounds (chosen on the test set)",
                          algorithm=name, published=None, source=None, ours=float(curve.min()))]
    return rows
