"""Where does ESL's 5.8% for AdaBoost stumps on nested spheres come from? (ESL Fig. 10.2, issue 21)

ESL Section 10.1 (Figure 10.2, data of eq. 10.2): ``X ~ N(0, I_10)``, ``y = 1`` iff
``sum_j X_j^2 > chi2_10(0.5)``, 2000 training and 10,000 test rows; "AdaBoost.M1" (Algorithm
10.1) with stumps reaches 5.8% test error after 400 iterations. jboost's discrete AdaBoost.M1
gets about 12% on one draw, as does scikit-learn's. This config separates the candidate causes,
each on ``n_draws`` independent draws of the data (draw ``d``: training seed ``2d``, test seed
``2d + 1``; draw 0 is the data of ``nested_spheres`` and ``adaboost_spheres``):

* **how the stump is fitted** in discrete AdaBoost.M1 (``G_m(x) in {-1, +1}``, ESL Algorithm
  10.1 step 2(a) leaves the "classifier" open):

  - ``m1_jboost``: jboost's ``algorithms.adaboost_m1``: the split minimising the weighted
    squared error of ``y in {-1, +1}`` (the weighted Gini criterion), each side voting its
    weighted majority; 256 histogram bins per feature;
  - ``m1_lsq_exact``: the same criterion on exact thresholds (midpoints of sorted values, no
    binning), NumPy;
  - ``m1_error_exact``: the split minimising the weighted misclassification error
    ``err_m`` itself (the choice Algorithm 10.1's ``err_m`` suggests), exact thresholds, NumPy;
  - ``m1_sklearn``: scikit-learn's ``AdaBoostClassifier`` (SAMME, which is AdaBoost.M1 for two
    classes) with CART stumps (Gini), a peer check;

* **which algorithm the curve is**: Real AdaBoost (FHT 2000 Algorithm 2:
  ``algorithms.real_adaboost``) and Gentle AdaBoost (FHT Algorithm 4:
  ``algorithms.gentle_adaboost``), both with stumps; they differ from discrete AdaBoost only
  in the stump's output (a real number per side instead of ``+-alpha_m``);

* **the number of rounds**: draw 0's discrete AdaBoost.M1 (jboost's) run on to
  ``long_rounds`` rounds;

* **the data draw and the test set**: every figure is reported as the mean, standard deviation,
  minimum and maximum over the draws; draw 0's models are also scored on a fresh 100,000-row
  test set (seed 1001), so the sampling error of a 10,000-row test set can be seen.

The training error of each algorithm is reported too (at round 250 and 400), since ESL Figure
10.3 plots the training error of the same AdaBoost run.

Command: ``python -m experiments.run fig10_2_study`` (five draws x five fits of 400 stumps; about
a minute on 2 CPU cores); ``--smoke``: two draws, 500 training rows, 40 rounds.
"""

from __future__ import annotations

import numpy as np

from jboost import algorithms as A
from jboost import datasets

ESL = "ESL 2nd ed., Sec. 10.1 / Fig. 10.2"
ALGORITHMS = {
    # label: (algorithm column of the table, how the stump is fitted)
    "m1_jboost": "discrete AdaBoost.M1 (ESL Alg. 10.1), stumps by weighted least squares "
                 "(Gini), 256 bins: jboost.algorithms.adaboost_m1",
    "m1_lsq_exact": "discrete AdaBoost.M1 (ESL Alg. 10.1), stumps by weighted least squares "
                    "(Gini), exact thresholds: NumPy",
    "m1_error_exact": "discrete AdaBoost.M1 (ESL Alg. 10.1), stumps by minimal weighted error, "
                      "exact thresholds: NumPy",
    "m1_sklearn": "discrete AdaBoost.M1 = SAMME for 2 classes, CART stumps (Gini): "
                  "scikit-learn AdaBoostClassifier",
    "real": "Real AdaBoost (FHT 2000 Alg. 2), stumps: jboost.algorithms.real_adaboost",
    "gentle": "Gentle AdaBoost (FHT 2000 Alg. 4), stumps: jboost.algorithms.gentle_adaboost",
}


def get_config(smoke: bool = False) -> dict:
    return {
        "description": "ESL Fig. 10.2 gap: discrete AdaBoost.M1 with stumps fitted by weighted "
                       "error vs least squares, Real and Gentle AdaBoost, over draws of the data",
        "seed": 0,
        "n_draws": 2 if smoke else 5,
        "n_train": 500 if smoke else 2000,
        "n_test": 2000 if smoke else 10000,
        "n_test_large": 10000 if smoke else 100000,
        "n_rounds": 40 if smoke else 400,
        "train_error_round": 25 if smoke else 250,
        "long_rounds": [80] if smoke else [1000, 2000, 4000],   # discrete AdaBoost.M1, draw 0
        "algorithms": list(ALGORITHMS),
    }


# --------------------------------------------------------------------------------------------
# Discrete AdaBoost.M1 with exact stumps (NumPy reference; one pass over the rounds)
# --------------------------------------------------------------------------------------------


def _best_stump(Xs, ys, ws, valid, criterion: str):
    """The best stump on presorted columns: ``(feature, cut index, vote of the right side)``.

    ``Xs, ys, ws``: ``(n, F)`` feature values sorted per column, and the labels (``+-1``) and
    weights in that order; ``valid (n - 1, F)``: a cut between sorted rows ``i`` and ``i + 1``
    exists (the values differ). ``criterion``: ``"error"`` (weighted misclassification of the
    majority vote on each side) or ``"lsq"`` (weighted squared error of the side means, i.e.
    the weighted Gini index for two classes). All cuts of all features at once (cumulative sums).
    """
    wp, wn = ws * (ys > 0), ws * (ys < 0)
    lp, ln = np.cumsum(wp, 0)[:-1], np.cumsum(wn, 0)[:-1]       # left of cut i: rows 0..i
    tp, tn = wp.sum(0), wn.sum(0)
    rp, rn = tp - lp, tn - ln
    if criterion == "error":
        loss = np.minimum(lp, ln) + np.minimum(rp, rn)
    else:  # weighted least squares of y in {-1, +1} with side means: W - (sum w y)^2 / W per side
        lw, rw = lp + ln, rp + rn
        with np.errstate(divide="ignore", invalid="ignore"):
            loss = -(np.where(lw > 0, (lp - ln) ** 2 / lw, 0.0) + np.where(rw > 0, (rp - rn) ** 2 / rw, 0.0))
    loss = np.where(valid, loss, np.inf)
    i, f = np.unravel_index(np.argmin(loss), loss.shape)
    threshold = 0.5 * (Xs[i, f] + Xs[i + 1, f])
    left_vote = 1.0 if lp[i, f] >= ln[i, f] else -1.0
    right_vote = 1.0 if rp[i, f] >= rn[i, f] else -1.0
    return int(f), float(threshold), left_vote, right_vote


def adaboost_m1_exact(X, y, X_eval: dict, n_rounds: int, criterion: str):
    """Discrete AdaBoost.M1 (ESL Algorithm 10.1) with exact-threshold stumps, in float64.

    Returns ``{name: (n_rounds,) error after each round}`` for every ``(X, y)`` of ``X_eval``
    (class ``+1`` iff ``sum_m alpha_m G_m(x) > 0``). A round with ``err_m >= 1/2`` or
    ``err_m == 0`` stops the model (as :func:`jboost.algorithms.adaboost_m1`).
    """
    X = np.asarray(X, np.float64)
    ypm = np.where(np.asarray(y) > 0.5, 1.0, -1.0)
    order = np.argsort(X, axis=0, kind="stable")
    Xs = np.take_along_axis(X, order, 0)
    ys = ypm[order]
    valid = Xs[1:] > Xs[:-1]
    w = np.full(len(ypm), 1.0 / len(ypm))
    scores = {k: np.zeros(len(v[1])) for k, v in X_eval.items()}
    errors = {k: np.empty(n_rounds) for k in X_eval}
    stopped = False
    for m in range(n_rounds):
        if not stopped:
            f, t, vl, vr = _best_stump(Xs, ys, w[order], valid, criterion)
            g = np.where(X[:, f] > t, vr, vl)
            err = float(np.sum(w * (g != ypm)) / np.sum(w))
            if 0.0 < err < 0.5:
                alpha = np.log((1.0 - err) / err)
                w = w * np.exp(alpha * (g != ypm))
                w = w / w.sum()
                for k, (Xe, _) in X_eval.items():
                    scores[k] += alpha * np.where(np.asarray(Xe, np.float64)[:, f] > t, vr, vl)
            else:
                stopped = True
        for k, (_, ye) in X_eval.items():
            errors[k][m] = np.mean((scores[k] > 0) != (np.asarray(ye) > 0.5))
    return errors


def _sklearn_m1(X, y, X_eval: dict, n_rounds: int):
    try:
        from sklearn.ensemble import AdaBoostClassifier
        from sklearn.tree import DecisionTreeClassifier
    except ImportError:
        return None
    clf = AdaBoostClassifier(DecisionTreeClassifier(max_depth=1), n_estimators=n_rounds,
                             learning_rate=1.0, random_state=0).fit(X, y)
    out = {}
    for k, (Xe, ye) in X_eval.items():
        errs = np.array([np.mean(p != ye) for p in clf.staged_predict(Xe)], np.float64)
        # scikit-learn stops early when a stump is perfect or no better than chance: hold the last.
        out[k] = np.concatenate([errs, np.full(n_rounds - len(errs), errs[-1])])
    return out


def _fit_all(label, X, y, X_eval: dict, n_rounds: int, seed: int):
    """``{name: (n_rounds,) error curve}`` of algorithm ``label`` on each evaluation set."""
    if label == "m1_lsq_exact":
        return adaboost_m1_exact(X, y, X_eval, n_rounds, "lsq")
    if label == "m1_error_exact":
        return adaboost_m1_exact(X, y, X_eval, n_rounds, "error")
    if label == "m1_sklearn":
        return _sklearn_m1(X, y, X_eval, n_rounds)
    fit = {"m1_jboost": A.adaboost_m1, "real": A.real_adaboost, "gentle": A.gentle_adaboost}[label]
    model = fit(X, y, n_rounds=n_rounds, depth=1, key=seed)
    return {k: np.asarray(A.staged_error(model, Xe, ye), np.float64) for k, (Xe, ye) in X_eval.items()}


def _stats(values) -> dict:
    v = np.asarray(values, np.float64)
    return {"mean": float(v.mean()), "sd": float(v.std(ddof=1)) if len(v) > 1 else 0.0,
            "min": float(v.min()), "max": float(v.max()), "values": v.tolist()}


def run(config: dict, ctx) -> dict:
    n_rounds, r_train = config["n_rounds"], config["train_error_round"]
    labels = [a for a in config["algorithms"]]
    curves = {a: [] for a in labels}        # per draw: test error curve (n_rounds,)
    train_curves = {a: [] for a in labels}
    large = {}
    for d in range(config["n_draws"]):
        X, y = datasets.nested_spheres(config["n_train"], seed=2 * d)
        Xt, yt = datasets.nested_spheres(config["n_test"], seed=2 * d + 1)
        evals = {"test": (Xt, yt), "train": (X, y)}
        if d == 0:
            evals["test_large"] = datasets.nested_spheres(config["n_test_large"], seed=1001)
        for a in labels:
            out = _fit_all(a, X, y, evals, n_rounds, config["seed"])
            if out is None:  # scikit-learn missing
                continue
            curves[a].append(out["test"])
            train_curves[a].append(out["train"])
            if d == 0:
                large[a] = float(out["test_large"][-1])
    labels = [a for a in labels if curves[a]]
    # Is discrete AdaBoost.M1 only slower? Draw 0 for longer (jboost's, one fit of the longest).
    X, y = datasets.nested_spheres(config["n_train"], seed=0)
    Xt, yt = datasets.nested_spheres(config["n_test"], seed=1)
    long_model = A.adaboost_m1(X, y, n_rounds=max(config["long_rounds"]), depth=1, key=config["seed"])
    long_test = np.asarray(A.staged_error(long_model, Xt, yt), np.float64)
    long_train = np.asarray(A.staged_error(long_model, X, y), np.float64)
    for m in range(n_rounds):
        ctx.log(m + 1, **{f"test_error_{a}_draw{d}": curves[a][d][m]
                          for a in labels for d in range(len(curves[a]))})

    summary = {a: {"test_final": _stats([c[-1] for c in curves[a]]),
                   "test_min_over_rounds": _stats([c.min() for c in curves[a]]),
                   "train_at_r": _stats([c[r_train - 1] for c in train_curves[a]]),
                   "train_final": _stats([c[-1] for c in train_curves[a]]),
                   "draw0_test_large_final": large[a]} for a in labels}

    plt = ctx.pyplot
    fig = None
    if plt is not None:
        fig, ax = plt.subplots(figsize=(7.5, 4.8))
        rounds = np.arange(1, n_rounds + 1)
        colours = {"m1_jboost": "tab:orange", "m1_lsq_exact": "tab:brown", "m1_error_exact": "tab:red",
                   "m1_sklearn": "tab:pink", "real": "tab:green", "gentle": "tab:blue"}
        short = {"m1_jboost": "AdaBoost.M1, LSQ stumps, 256 bins (jboost)",
                 "m1_lsq_exact": "AdaBoost.M1, LSQ stumps, exact (NumPy)",
                 "m1_error_exact": "AdaBoost.M1, min-error stumps, exact (NumPy)",
                 "m1_sklearn": "AdaBoost.M1 (SAMME), CART stumps (scikit-learn)",
                 "real": "Real AdaBoost, stumps (jboost)", "gentle": "Gentle AdaBoost, stumps (jboost)"}
        for a in labels:
            c = np.stack(curves[a])
            ax.plot(rounds, c.mean(0), color=colours[a],
                    label=f"{short[a]}: {summary[a]['test_final']['mean']:.3f}")
            ax.fill_between(rounds, c.min(0), c.max(0), color=colours[a], alpha=0.15, lw=0)
        if n_rounds == 400:
            ax.plot([400], [0.058], "k*", ms=10, label="ESL Fig. 10.2: AdaBoost.M1, 400 it. (0.058)")
        ax.set_ylim(0, 0.5)
        ax.set_xlabel("boosting iterations (stumps)")
        ax.set_ylabel("test error (mean over draws; band: min-max)")
        ax.set_title(f"Nested spheres (ESL eq. 10.2), {config['n_draws']} draws of "
                     f"{config['n_train']} training / {config['n_test']} test rows")
        ax.legend(fontsize=7)
    ctx.savefig(fig, "test_error_by_algorithm")

    n_d = config["n_draws"]
    table = []
    for a in labels:
        s = summary[a]
        published = 0.058 if (a.startswith("m1_") and n_rounds == 400) else None
        table.append({"quantity": f"test error after {n_rounds} it., mean over {n_d} draws "
                                  f"(sd {s['test_final']['sd']:.4f}, range {s['test_final']['min']:.4f}-"
                                  f"{s['test_final']['max']:.4f})",
                      "algorithm": ALGORITHMS[a], "published": published,
                      "source": ESL if published is not None else None, "ours": s["test_final"]["mean"]})
    for a in labels:
        s = summary[a]["test_min_over_rounds"]
        table.append({"quantity": f"minimal test error over the {n_rounds} it. (chosen on the test set), "
                                  f"mean over {n_d} draws (range {s['min']:.4f}-{s['max']:.4f})",
                      "algorithm": ALGORITHMS[a], "published": None, "source": None, "ours": s["mean"]})
    for a in labels:
        s = summary[a]
        table.append({"quantity": f"draw 0: test error after {n_rounds} it. on {config['n_test_large']:,} "
                                  f"fresh test rows (vs {s['test_final']['values'][0]:.4f} on {config['n_test']:,})",
                      "algorithm": ALGORITHMS[a], "published": None, "source": None,
                      "ours": s["draw0_test_large_final"]})
    for a in labels:
        s = summary[a]
        table.append({"quantity": f"training error after {r_train} it. (after {n_rounds}: "
                                  f"{s['train_final']['mean']:.4f}), mean over {n_d} draws",
                      "algorithm": ALGORITHMS[a], "published": None, "source": None,
                      "ours": s["train_at_r"]["mean"]})
    for r in config["long_rounds"]:
        table.append({"quantity": f"draw 0: test error after {r} it. (training error {long_train[r - 1]:.4f})",
                      "algorithm": ALGORITHMS["m1_jboost"], "published": None, "source": None,
                      "ours": float(long_test[r - 1])})
    return {"table": table, "summary": summary,
            "long_run": {"rounds": config["long_rounds"], "test_error": [float(long_test[r - 1]) for r in config["long_rounds"]],
                         "train_error": [float(long_train[r - 1]) for r in config["long_rounds"]]}}
