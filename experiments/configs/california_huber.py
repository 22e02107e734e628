"""California housing with Huber loss: ESL Section 10.14.1 (Figures 10.13 and 10.14).

ESL fits gradient boosting with the Huber loss (ESL eq. 10.23) whose ``delta`` is the
0.9-quantile of the current absolute residuals (M-regression, Friedman 2001, Section 4.4;
``jboost.losses.huber(alpha=0.9)``), shrinkage ``nu = 0.1``, 800 iterations and 6-terminal-node
trees, to the 20,640 block groups split at random 80/20. It reports a test average absolute error
of about 0.31 and ``R^2 = 0.84``, and the relative importance of the predictors (Fig. 10.14):
median income first.

Ours: the same loss, shrinkage and iterations; oblivious trees of depth 3 (8 leaves: an
oblivious tree is less flexible than a free 6-leaf tree, so depth 3 rather than 2; fixed
before seeing test numbers); ``l2 = 0`` (ESL uses no leaf penalty); a seeded random 80/20 split
(:func:`jboost.datasets.load_california`). Leaves are refit to the Huber-optimal values
(ESL Algorithm 10.3 step 2(c)) by the loss's ``leaf_refit="huber"``.

Command: ``python -m experiments.run california_huber`` (under a minute on 2 CPU cores).
"""

from __future__ import annotations

import numpy as np

import jboost
from jboost import datasets
from jboost import losses
from experiments.configs import mean_absolute_error, r_squared, staged_metric, timed

PUBLISHED = {"aae": 0.31, "r2": 0.84}
ESL = "ESL 2nd ed., Sec. 10.14.1"


def algorithm_name(config: dict) -> str:
    """The table's algorithm column: the Huber model of ``config``."""
    return (f"gradient boosting, Huber loss (delta = {config['huber_alpha']}-quantile of |residuals|, "
            f"ESL Alg. 10.3 leaf refit), oblivious trees of depth {config['depth']}, shrinkage "
            f"{config['learning_rate']}, {config['n_rounds']} rounds")


def get_config(smoke: bool = False) -> dict:
    return {
        "description": "ESL 10.14.1: California housing, Huber loss (adaptive delta), shrinkage 0.1",
        "seed": 0,
        "test_fraction": 0.2,
        "huber_alpha": 0.9,
        "learning_rate": 0.1,
        "n_rounds": 80 if smoke else 800,
        "depth": 3,
        "l2": 0.0,
    }


def fit_model(config: dict, ctx):
    """The data (seeded split), feature names and the Huber model of ``config``, and the fit's
    time: ``(X, y, X_test, y_test, names, model, seconds)`` (also california_interpretation's)."""
    X, y, X_test, y_test = datasets.load_california(ctx.data_dir, seed=config["seed"],
                                                    test_fraction=config["test_fraction"])
    names = datasets.feature_names("california_housing.csv.gz", ctx.data_dir)
    model, t_fit = timed(jboost.fit, X, y, losses.huber(alpha=config["huber_alpha"]),
                         n_rounds=config["n_rounds"], depth=config["depth"],
                         learning_rate=config["learning_rate"], l2=config["l2"], key=config["seed"])
    return X, y, X_test, y_test, names, model, t_fit


def run(config: dict, ctx) -> dict:
    seed = config["seed"]
    X, y, X_test, y_test, names, model, t_fit = fit_model(config, ctx)

    train_aae = staged_metric(model, X, y, mean_absolute_error)
    test_aae = staged_metric(model, X_test, y_test, mean_absolute_error)
    for m in range(config["n_rounds"]):
        ctx.log(m + 1, train_aae=train_aae[m], test_aae=test_aae[m], train_huber=model.train_loss[m])
    pred = np.asarray(jboost.predict(model, X_test))
    aae = float(np.mean(np.abs(np.asarray(y_test, np.float64) - pred)))
    r2 = r_squared(y_test, pred)

    relative = np.asarray(jboost.inspect.importance(model, "relative"))  # ESL eq. 10.43: sqrt scale
    ranking = [(names[j], float(relative[j])) for j in np.argsort(-relative, kind="stable")]

    plt = ctx.pyplot
    fig = fig_imp = None
    if plt is not None:
        fig, ax = plt.subplots(figsize=(6, 4.2))
        rounds = np.arange(1, config["n_rounds"] + 1)
        ax.plot(rounds, train_aae, label="train")
        ax.plot(rounds, test_aae, label="test")
        ax.axhline(PUBLISHED["aae"], color="red", ls="-.", lw=0.8, label="ESL test (0.31)")
        ax.set_ylim(0, 1.0)
        ax.set_xlabel("boosting iterations")
        ax.set_ylabel("average absolute error")
        ax.set_title(f"California housing (cf. ESL Fig. 10.13): {algorithm_name(config)}", fontsize=8, wrap=True)
        ax.legend(fontsize=8)
        fig_imp, ax = plt.subplots(figsize=(5, 3.5))
        ax.barh([r[0] for r in ranking][::-1], [r[1] for r in ranking][::-1], color="tab:red")
        ax.set_xlabel("relative importance (max = 100)")
        ax.set_title(f"California housing: relative importance (ESL eq. 10.43; cf. Fig. 10.14)\n"
                     f"{algorithm_name(config)}", fontsize=8, wrap=True)
    ctx.savefig(fig, "aae_vs_iterations")
    ctx.savefig(fig_imp, "relative_importance")

    n = config["n_rounds"]
    algorithm = algorithm_name(config)
    table = [
        {"quantity": f"test average absolute error, {n} it.", "algorithm": algorithm,
         "published": PUBLISHED["aae"], "source": ESL, "ours": aae},
        {"quantity": f"test R^2, {n} it.", "algorithm": algorithm, "published": PUBLISHED["r2"],
         "source": ESL, "ours": r2},
        {"quantity": "rank of MedInc in relative importance (ESL eq. 10.43)", "algorithm": algorithm,
         "published": 1, "source": "ESL 2nd ed., Fig. 10.14",
         "ours": 1 + [r[0] for r in ranking].index("MedInc")},
    ]
    return {
        "table": table,
        "timings": {"fit_first_call_s": t_fit},
        "relative_importance": ranking,
        "train_aae": float(train_aae[-1]),
        "final_huber_delta": float(np.asarray(model.loss.params["delta"])),
    }
