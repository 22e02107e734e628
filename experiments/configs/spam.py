"""Gradient boosting on the spam data: ESL Section 10.8 (and Section 9.1.2's split).

ESL fits gradient boosting with binomial deviance and ``J = 5`` terminal-node trees to the
spam data (3065 training / 1536 test e-mails, ESL's split) and reports 4.5% test error; an
additive model boosted with stumps (``J = 2``) gives 4.7%. The issue's target for ours is 5.0%.

Settings were fixed by reasoning before any test error was seen, not tuned on the test set:

* depth 3 (8 leaves): an oblivious tree applies one split per level to all nodes, so it is
  less flexible than a free tree with the same number of leaves; depth 3 is the oblivious
  counterpart of ESL's ``J = 5`` and lies in ESL's recommended ``4 <= J <= 8`` (Section 10.11);
* shrinkage 0.05 with 1000 rounds: Friedman (2001) recommends ``nu <= 0.1`` with many rounds;
  ``l2 = 1`` (XGBoost's default leaf penalty);
* stumps: depth 1, shrinkage 0.1, 2000 rounds (an additive model needs more rounds per unit of
  fit; one coordinate moves per round).

As a check on the fixed round count, the depth-3 model is also fit on 80% of the training set
and the number of rounds that minimises the held-out 20%'s deviance is reported, with the
test error of the full-training-set model truncated at that many rounds.

Fit time is reported twice: the first call (including XLA compilation) and a second identical
call (compiled program cached), whose model is checked to be bitwise identical.

Command: ``python -m experiments.run spam`` (about a minute on 2 CPU cores).
"""

from __future__ import annotations

import numpy as np

import jboost
from jboost import datasets
from experiments.configs import binary_error, staged_metric, timed

TARGET_ERROR = 0.05
ESL = "ESL 2nd ed., Sec. 10.8"


def algorithm_name(spec: dict) -> str:
    """The table's algorithm column for one of the config's models."""
    trees = "stumps" if spec["depth"] == 1 else f"oblivious trees of depth {spec['depth']}"
    return (f"gradient boosting, binomial deviance, {trees}, shrinkage {spec['learning_rate']}, "
            f"l2 {spec['l2']}, {spec['n_rounds']} rounds")


def get_config(smoke: bool = False) -> dict:
    scale = 10 if smoke else 1
    return {
        "description": "ESL 10.8: boosting with binomial deviance on spam (ESL split)",
        "seed": 0,
        "models": [
            {"label": "depth3", "name": "oblivious trees, depth 3", "esl": "J=5 trees, 4.5%",
             "depth": 3, "learning_rate": 0.05, "n_rounds": 1000 // scale, "l2": 1.0,
             "published": 0.045},
            {"label": "stumps", "name": "stumps (additive model)", "esl": "additive model, stumps, 4.7%",
             "depth": 1, "learning_rate": 0.1, "n_rounds": 2000 // scale, "l2": 1.0,
             "published": 0.047},
        ],
        "holdout_fraction": 0.2,
        "n_bins": 256,
        "top_features": 15,
    }


def _fit(X, y, spec, seed, eval_set=None):
    return jboost.fit(X, y, "binomial_deviance", n_rounds=spec["n_rounds"], depth=spec["depth"],
                      learning_rate=spec["learning_rate"], l2=spec["l2"], key=seed, eval_set=eval_set)


def run(config: dict, ctx) -> dict:
    seed = config["seed"]
    X, y, X_test, y_test = datasets.load_spam(ctx.data_dir)
    names = datasets.feature_names("spambase.csv.gz", ctx.data_dir)

    models, curves, table, timings, checks = {}, {}, [], {}, {}
    for spec in config["models"]:
        label = spec["label"]
        model, t_first = timed(_fit, X, y, spec, seed, (X_test, y_test))
        again, t_second = timed(_fit, X, y, spec, seed, (X_test, y_test))
        timings[f"fit_{label}_first_call_s"] = t_first
        timings[f"fit_{label}_second_call_s"] = t_second
        checks[f"{label}_second_call_bitwise_identical"] = bool(
            np.array_equal(np.asarray(model.trees.leaf_values), np.asarray(again.trees.leaf_values)))
        models[label] = model
        curves[label] = staged_metric(model, X_test, y_test, binary_error)
        table.append({"quantity": f"test error (ESL: {spec['esl']})", "algorithm": algorithm_name(spec),
                      "published": spec["published"], "source": ESL, "ours": float(curves[label][-1])})

    n_max = max(s["n_rounds"] for s in config["models"])
    for m in range(n_max):
        record = {}
        for spec in config["models"]:
            label = spec["label"]
            if m < spec["n_rounds"]:
                record[f"test_error_{label}"] = curves[label][m]
                record[f"test_deviance_{label}"] = models[label].valid_loss[m]
                record[f"train_deviance_{label}"] = models[label].train_loss[m]
        ctx.log(m + 1, **record)

    # Held-out choice of the number of rounds (never looks at the test set).
    main = config["models"][0]
    perm = np.random.default_rng(seed).permutation(len(y))
    n_hold = int(round(config["holdout_fraction"] * len(y)))
    hold, fit_rows = perm[:n_hold], perm[n_hold:]
    probe = _fit(X[fit_rows], y[fit_rows], main, seed, (X[hold], y[hold]))
    best_rounds = int(np.argmin(np.asarray(probe.valid_loss))) + 1
    table.append({"quantity": f"test error at the round count chosen by held-out deviance ({best_rounds})",
                  "algorithm": algorithm_name(main).rsplit(",", 1)[0] + f", truncated at {best_rounds} rounds",
                  "published": None, "source": None, "ours": float(curves[main["label"]][best_rounds - 1])})

    importance = np.asarray(jboost.inspect.importance(models[main["label"]], "relative"))  # ESL eq. 10.43
    order = np.argsort(-importance, kind="stable")[: config["top_features"]]
    top = [(names[j], float(importance[j] / importance[order[0]] * 100)) for j in order]

    plt = ctx.pyplot
    fig = fig_imp = None
    if plt is not None:
        fig, ax = plt.subplots(figsize=(6, 4.2))
        for spec in config["models"]:
            ax.plot(np.arange(1, spec["n_rounds"] + 1), curves[spec["label"]],
                    label=f"{spec['name']}, shrinkage {spec['learning_rate']}")
        ax.axhline(0.045, color="red", ls="-.", lw=0.8, label="ESL Sec. 10.8: J=5 trees (0.045)")
        ax.axhline(TARGET_ERROR, color="gray", ls=":", lw=0.8, label="target (0.05)")
        ax.axvline(best_rounds, color="gray", ls="--", lw=0.8, label=f"held-out choice ({best_rounds})")
        ax.set_ylim(0.03, 0.12)
        ax.set_xlabel("boosting iterations")
        ax.set_ylabel("test error")
        ax.set_title("Spam (ESL Sec. 10.8): gradient boosting, binomial deviance", fontsize=10)
        ax.legend(fontsize=8)
        fig_imp, ax = plt.subplots(figsize=(5, 5))
        ax.barh([t[0] for t in top][::-1], [t[1] for t in top][::-1], color="tab:red")
        ax.set_xlabel("relative importance (max = 100)")
        ax.set_title(f"Spam: relative importance (ESL eq. 10.43; cf. Fig. 10.6)\n"
                     f"{algorithm_name(main)}", fontsize=8, wrap=True)
    ctx.savefig(fig, "test_error_vs_iterations")
    ctx.savefig(fig_imp, "relative_importance")

    final_errors = [row["ours"] for row in table[: len(config["models"])]]
    return {
        "table": table,
        "checks": {f"depth3_test_error_le_{TARGET_ERROR}": final_errors[0] <= TARGET_ERROR, **checks},
        "timings": timings,
        "held_out_best_rounds": best_rounds,
        "top_features": top,
    }
