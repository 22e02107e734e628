"""Interpreting the spam model: ESL Section 10.8, Figures 10.6-10.8.

The model has ``spam``'s depth-3 settings (binomial deviance, shrinkage 0.05, ``l2 = 1``, ESL's
train/test split) at a fixed 1000 rounds (``spam`` itself chooses its round count by 10-fold CV:
1032 at 48102c7). From it:

* **relative importance** (ESL eq. 10.42-10.43; Fig. 10.6): square root of the summed squared
  improvements, the largest scaled to 100 (``jboost.inspect.importance``). In ESL's figure the
  characters ``!`` and ``$`` and the words ``hp``, ``remove`` and ``free`` lead (as we recall
  the figure, which prints no numbers: the table's published column stays empty there);
* **partial dependence of the log-odds of spam** (Fig. 10.7) on ``!``, ``remove``, ``edu`` and
  ``hp``: ESL describes the first two as increasing (more of them, more likely spam) and the
  last two as decreasing (George's work e-mail: edu addresses and his employer's name hp);
* the **two-variable partial dependence** on ``hp`` and ``!`` (Fig. 10.8); the table prints how
  much the log-odds rise over ``!``'s grid where ``hp`` is 0 and where it is frequent.

Partial dependence is Friedman's weighted tree traversal with the training e-mails' covers
(``jboost.inspect.partial_dependence``), on the log-odds scale as in ESL.

Command: ``python -m experiments.run spam_interpretation`` (about a minute on 2 CPU cores).
"""

from __future__ import annotations

import numpy as np

import jboost
from jboost import datasets
from experiments.configs import pd_grid_figure
from experiments.configs import timed

PUBLISHED_TOP5 = ("char_freq_!", "char_freq_$", "word_freq_hp", "word_freq_remove", "word_freq_free")
PD_FEATURES = (("char_freq_!", "increasing"), ("word_freq_remove", "increasing"),
               ("word_freq_edu", "decreasing"), ("word_freq_hp", "decreasing"))


def algorithm_name(config: dict) -> str:
    """The table's algorithm column: the model of ``config`` (spam's depth-3 settings at 1000 rounds)."""
    return (f"gradient boosting, binomial deviance, oblivious trees of depth {config['depth']}, "
            f"shrinkage {config['learning_rate']}, l2 {config['l2']}, {config['n_rounds']} rounds")


def get_config(smoke: bool = False) -> dict:
    return {
        "description": "ESL 10.8 Figs. 10.6-10.8: relative importance and partial dependence, spam "
                       "(spam's depth-3 settings, 1000 rounds)",
        "seed": 0,
        "depth": 3, "learning_rate": 0.05, "n_rounds": 100 if smoke else 1000, "l2": 1.0,
        "grid_resolution": 10 if smoke else 30,
        "percentiles": [0.0, 0.95],
        "top_features": 15,
    }


def run(config: dict, ctx) -> dict:
    seed = config["seed"]
    X, y, X_test, y_test = datasets.load_spam(ctx.data_dir)
    names = datasets.feature_names("spambase.csv.gz", ctx.data_dir)
    model, t_fit = timed(jboost.fit, X, y, "binomial_deviance", n_rounds=config["n_rounds"],
                         depth=config["depth"], learning_rate=config["learning_rate"],
                         l2=config["l2"], key=seed)
    error = float(np.mean(np.asarray(jboost.predict_class(model, X_test)) != y_test))
    relative = np.asarray(jboost.inspect.importance(model, "relative"))
    order = np.argsort(-relative, kind="stable")
    ranking = [(names[j], float(relative[j])) for j in order[: config["top_features"]]]
    res, pct = config["grid_resolution"], tuple(config["percentiles"])
    curves, slopes = {}, {}
    for f, _ in PD_FEATURES:
        pdp = jboost.inspect.partial_dependence(model, names.index(f), X, grid_resolution=res,
                                                percentiles=pct)
        values = np.asarray(pdp.values, np.float64)
        curves[f] = {"grid": np.asarray(pdp.grid[0]).tolist(), "values": values.tolist()}
        slopes[f] = float(values[-1] - values[0])
    pair_idx = (names.index("word_freq_hp"), names.index("char_freq_!"))
    pair = jboost.inspect.partial_dependence(model, pair_idx, X, grid_resolution=min(res, 15),
                                             percentiles=pct)
    surface = np.asarray(pair.values, np.float64)        # (hp grid, ! grid)
    lift_rare_hp = float(surface[0, -1] - surface[0, 0])  # the rise over "!" where hp = 0
    lift_many_hp = float(surface[-1, -1] - surface[-1, 0])

    plt = ctx.pyplot
    figs = {}
    if plt is not None:
        fig, ax = plt.subplots(figsize=(5, 4.5))
        jboost.plot.importance(model, feature_names=names, max_features=config["top_features"], ax=ax)
        ax.set_title(f"Spam: relative importance (ESL eq. 10.43; cf. Fig. 10.6)\n"
                     f"{algorithm_name(config)}", fontsize=8, wrap=True)
        figs["relative_importance"] = fig
        fig = pd_grid_figure(plt, curves, "partial dependence (log-odds)",
                             "Partial dependence of the log-odds of spam (cf. ESL Fig. 10.7)\n"
                             + algorithm_name(config))
        figs["partial_dependence"] = fig
        fig, ax = plt.subplots(figsize=(5.5, 4))
        jboost.plot.partial_dependence(model, pair_idx, X, grid_resolution=min(res, 15),
                                       percentiles=pct, feature_names=names, ax=ax)
        ax.set_title(f"Partial dependence of the log-odds on hp x ! (cf. ESL Fig. 10.8)\n"
                     f"{algorithm_name(config)}", fontsize=8, wrap=True)
        figs["partial_dependence_hp_bang"] = fig
    for name, fig in figs.items():
        ctx.savefig(fig, name)
    top5 = [names[j] for j in order[:5]]
    model_name = algorithm_name(config)
    pd_name = "partial dependence of the log-odds (ESL eq. 10.47, Friedman's weighted traversal)"
    importance_name = f"relative importance (ESL eq. 10.43) of {model_name}"
    table = [
        {"quantity": "test error of the interpreted model (ESL: J=5 trees)", "algorithm": model_name,
         "published": 0.045, "source": "ESL 2nd ed., Sec. 10.8", "ours": error},
        {"quantity": "top five features (cf. Fig. 10.6)", "algorithm": importance_name, "published": None,
         "source": None, "ours": ", ".join(top5)},
        {"quantity": f"of {', '.join(PUBLISHED_TOP5)} (ESL's leaders, as recalled), in our top five",
         "algorithm": importance_name, "published": None, "source": None,
         "ours": len(set(top5) & set(PUBLISHED_TOP5))},
    ] + [
        {"quantity": f"partial dependence on {f}, last - first grid point ({way})",
         "algorithm": f"{pd_name} of {model_name}", "published": "> 0" if way == "increasing" else "< 0",
         "source": "ESL 2nd ed., Fig. 10.7", "ours": slopes[f]}
        for f, way in PD_FEATURES
    ] + [
        {"quantity": "rise of the log-odds over '!' where hp = 0 vs where hp is frequent (cf. Fig. 10.8)",
         "algorithm": f"two-variable {pd_name} of {model_name}", "published": None, "source": None,
         "ours": f"{lift_rare_hp:.3f} vs {lift_many_hp:.3f}"},
    ]
    return {
        "table": table,
        "timings": {"fit_first_call_s": t_fit},
        "relative_importance": ranking,
        "partial_dependence": curves,
        "checks": {f"{f}_{way}": (slopes[f] > 0) == (way == "increasing") for f, way in PD_FEATURES},
    }
