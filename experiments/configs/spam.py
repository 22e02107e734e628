"""Gradient boosting on the spam data: ESL Section 10.8 (and Section 9.1.2's split).

ESL fits gradient boosting with binomial deviance and ``J = 5`` terminal-node trees to the
spam data (3065 training / 1536 test e-mails, ESL's split) and reports 4.5% test error; an
additive model boosted with stumps (``J = 2``) gives 4.7%. The issue's target for ours is 5.0%.

Tree size, shrinkage and ``l2`` were fixed by reasoning before any test error was seen:

* depth 3 (8 leaves): an oblivious tree applies one split per level to all nodes, so it is
  less flexible than a free tree with the same number of leaves; depth 3 is the oblivious
  counterpart of ESL's ``J = 5`` and lies in ESL's recommended ``4 <= J <= 8`` (Section 10.11);
* shrinkage 0.05: Friedman (2001) recommends ``nu <= 0.1`` with many rounds; ``l2 = 1``
  (XGBoost's default leaf penalty);
* stumps: depth 1, shrinkage 0.1 (an additive model needs more rounds per unit of fit; one
  coordinate moves per round).

**The number of rounds is chosen by 10-fold cross-validation on the training set only** (ESL
Section 7.10; Section 10.12 chooses the number of rounds on validation data): one
``jboost.sweep.sweep`` per model fits the 10 folds up to a round cap (2500 for depth 3, 5000
for stumps) and the chosen count is the round minimising the mean held-out binomial deviance
over the 10 folds. Every fold runs to the cap (no per-fold early stopping): per-fold early
stopping ends each fold ``patience`` rounds after its own best, and the CV optimum is then
taken only over the rounds every fold ran, which the earliest-stopping fold bounds (measured:
886 rounds with a patience of 500 vs 1032 with full curves). A check records whether the cap
binds (the chosen count equal to the cap).

The model is then fitted on the whole training set to the cap (its test curve is drawn) and the
reported test error is that model's after the chosen number of rounds, which is bitwise the
model refitted for exactly that many rounds (boosting round ``m`` does not depend on later
rounds; checked). The test set is used only after the choice.

Fit time is reported twice: the first call (including XLA compilation) and a second identical
call (compiled program cached), whose model is checked to be bitwise identical.

Command: ``python -m experiments.run spam`` (257 s on the 2-core CPU under a load average of
8-12, session 14; most of it the two 10-fold CV sweeps).
"""

from __future__ import annotations

import numpy as np

import jboost
import jboost.sweep
from jboost import datasets
from experiments.configs import binary_error, staged_metric, timed

TARGET_ERROR = 0.05
ESL = "ESL 2nd ed., Sec. 10.8"


def algorithm_name(spec: dict, rounds: str) -> str:
    """The table's algorithm column for one of the config's models, with how its rounds were
    chosen (``rounds``)."""
    trees = "stumps" if spec["depth"] == 1 else f"oblivious trees of depth {spec['depth']}"
    return (f"gradient boosting, binomial deviance, {trees}, shrinkage {spec['learning_rate']}, "
            f"l2 {spec['l2']}, {rounds}")


def get_config(smoke: bool = False) -> dict:
    scale = 20 if smoke else 1
    return {
        "description": "ESL 10.8: boosting with binomial deviance on spam (ESL split); rounds by 10-fold CV",
        "seed": 0,
        "models": [
            {"label": "depth3", "name": "oblivious trees, depth 3", "esl": "J=5 trees, 4.5%",
             "depth": 3, "learning_rate": 0.05, "max_rounds": 2500 // scale, "l2": 1.0,
             "published": 0.045},
            {"label": "stumps", "name": "stumps (additive model)", "esl": "additive model, stumps, 4.7%",
             "depth": 1, "learning_rate": 0.1, "max_rounds": 5000 // scale, "l2": 1.0,
             "published": 0.047},
        ],
        "cv_folds": 3 if smoke else 10,
        "n_bins": 256,
        "top_features": 15,
    }


def _fit(X, y, spec, seed, n_rounds, eval_set=None):
    return jboost.fit(X, y, "binomial_deviance", n_rounds=n_rounds, depth=spec["depth"],
                      learning_rate=spec["learning_rate"], l2=spec["l2"], key=seed,
                      eval_set=eval_set)


def _cv(X, y, spec, seed, folds, n_bins):
    """10-fold CV of one model on the training set: the round count minimising the mean held-out
    deviance over the folds, every fold fitted to ``max_rounds``."""
    return jboost.sweep.sweep(
        X, y, "binomial_deviance", grid=[{"learning_rate": spec["learning_rate"], "l2": spec["l2"]}],
        folds=folds, seeds=1, n_rounds=spec["max_rounds"], depth=spec["depth"], n_bins=n_bins, key=seed)


def run(config: dict, ctx) -> dict:
    seed = config["seed"]
    folds = config["cv_folds"]
    X, y, X_test, y_test = datasets.load_spam(ctx.data_dir)
    names = datasets.feature_names("spambase.csv.gz", ctx.data_dir)

    models, refits, curves, cv, table, timings, checks, chosen = {}, {}, {}, {}, [], {}, {}, {}
    for spec in config["models"]:
        label, cap = spec["label"], spec["max_rounds"]
        # 1. the number of rounds, by K-fold CV on the training set only
        result, t_cv = timed(_cv, X, y, spec, seed, folds, config["n_bins"])
        timings[f"cv_{label}_s"] = t_cv
        best = result.best
        b = int(best["best_round"])
        chosen[label] = b
        cv[label] = {"mean": np.asarray(result.mean_curves[0]), "se": np.asarray(result.se_curves[0])}
        checks[f"{label}_cv_round_below_cap_{cap}"] = b < cap
        # 2. the whole training set, to the cap; the test set is read only now
        model, t_first = timed(_fit, X, y, spec, seed, cap, (X_test, y_test))
        again, t_second = timed(_fit, X, y, spec, seed, cap, (X_test, y_test))
        timings[f"fit_{label}_{cap}_rounds_first_call_s"] = t_first
        timings[f"fit_{label}_{cap}_rounds_second_call_s"] = t_second
        checks[f"{label}_second_call_bitwise_identical"] = bool(
            np.array_equal(np.asarray(model.trees.leaf_values), np.asarray(again.trees.leaf_values)))
        refit = result.refit(X, y)  # exactly b rounds: the prefix of the model to the cap
        checks[f"{label}_refit_at_cv_rounds_is_prefix_of_full_fit"] = bool(np.array_equal(
            np.asarray(jboost.predict(refit, X_test)), np.asarray(jboost.predict(model, X_test, n_rounds=b))))
        models[label] = model
        refits[label] = refit
        curves[label] = staged_metric(model, X_test, y_test, binary_error)
        how = f"{b} rounds chosen by {folds}-fold CV deviance (cap {cap})"
        table.append({"quantity": f"test error (ESL: {spec['esl']})", "algorithm": algorithm_name(spec, how),
                      "published": spec["published"], "source": ESL, "ours": float(curves[label][b - 1])})
        table.append({"quantity": "number of rounds chosen by CV", "algorithm": algorithm_name(spec, how),
                      "published": None, "source": None, "ours": float(b)})
        table.append({"quantity": f"{folds}-fold CV deviance at the chosen round (mean over folds)",
                      "algorithm": algorithm_name(spec, how), "published": None, "source": None,
                      "ours": float(best["mean"])})
        table.append({"quantity": f"test error after the cap ({cap} rounds; for comparison, not a choice)",
                      "algorithm": algorithm_name(spec, f"{cap} rounds (fixed)"),
                      "published": None, "source": None, "ours": float(curves[label][-1])})

    n_max = max(s["max_rounds"] for s in config["models"])
    for m in range(n_max):
        record = {}
        for spec in config["models"]:
            label = spec["label"]
            if m < spec["max_rounds"]:
                record[f"test_error_{label}"] = curves[label][m]
                record[f"test_deviance_{label}"] = models[label].valid_loss[m]
                record[f"train_deviance_{label}"] = models[label].train_loss[m]
                record[f"cv_deviance_{label}"] = cv[label]["mean"][m]
        ctx.log(m + 1, **record)

    main = config["models"][0]
    # ESL eq. 10.43, of the model at the CV-chosen round count
    importance = np.asarray(jboost.inspect.importance(refits[main["label"]], "relative"))
    order = np.argsort(-importance, kind="stable")[: config["top_features"]]
    top = [(names[j], float(importance[j] / importance[order[0]] * 100)) for j in order]
    main_rounds = f"{chosen[main['label']]} rounds ({folds}-fold CV)"

    plt = ctx.pyplot
    fig = fig_imp = None
    if plt is not None:
        fig, (ax, ax_cv) = plt.subplots(1, 2, figsize=(11, 4.2))
        for color, spec in zip(("tab:blue", "tab:orange"), config["models"]):
            label = spec["label"]
            r = np.arange(1, spec["max_rounds"] + 1)
            ax.plot(r, curves[label], color=color, lw=1,
                    label=f"{spec['name']}, shrinkage {spec['learning_rate']}")
            ax.axvline(chosen[label], color=color, ls="--", lw=0.8,
                       label=f"{folds}-fold CV choice ({chosen[label]})")
            ax_cv.plot(r, cv[label]["mean"], color=color, lw=1, label=spec["name"])
            ax_cv.fill_between(r, cv[label]["mean"] - cv[label]["se"], cv[label]["mean"] + cv[label]["se"],
                               color=color, alpha=0.2, lw=0)
            ax_cv.axvline(chosen[label], color=color, ls="--", lw=0.8)
        ax.axhline(0.045, color="red", ls="-.", lw=0.8, label="ESL Sec. 10.8: J=5 trees (0.045)")
        ax.axhline(TARGET_ERROR, color="gray", ls=":", lw=0.8, label="target (0.05)")
        ax.set_ylim(0.03, 0.12)
        ax.set_xlabel("boosting iterations")
        ax.set_ylabel("test error")
        ax.set_title("test error of the fit on the whole training set", fontsize=9)
        ax.legend(fontsize=7)
        ax_cv.set_xlabel("boosting iterations")
        ax_cv.set_ylabel(f"{folds}-fold CV binomial deviance (mean +- se)")
        lo = min(float(np.min(c["mean"])) for c in cv.values())
        ax_cv.set_ylim(lo * 0.95, lo * 1.5)
        ax_cv.set_title("training set only: CV deviance (dashed: chosen round count)", fontsize=9)
        ax_cv.legend(fontsize=7)
        fig.suptitle("Spam (ESL Sec. 10.8): gradient boosting, binomial deviance; rounds chosen by "
                     f"{folds}-fold CV on the training set", fontsize=10)
        fig.tight_layout()
        fig_imp, ax = plt.subplots(figsize=(5, 5))
        ax.barh([t[0] for t in top][::-1], [t[1] for t in top][::-1], color="tab:red")
        ax.set_xlabel("relative importance (max = 100)")
        ax.set_title(f"Spam: relative importance (ESL eq. 10.43; cf. Fig. 10.6)\n"
                     f"{algorithm_name(main, main_rounds)}",
                     fontsize=8, wrap=True)
    ctx.savefig(fig, "test_error_vs_iterations")
    ctx.savefig(fig_imp, "relative_importance")

    return {
        "table": table,
        "checks": {f"depth3_test_error_le_{TARGET_ERROR}": table[0]["ours"] <= TARGET_ERROR, **checks},
        "timings": timings,
        "cv_rounds": chosen,
        "top_features": top,
    }
