"""Interpreting the California housing model: ESL Section 10.14.1, Figures 10.14-10.16.

The model is ``california_huber``'s (Huber loss with adaptive delta, shrinkage 0.1, 800 rounds
of depth-3 oblivious trees, the seeded 80/20 split). From it:

* **relative importance** (ESL eq. 10.42-10.43; Fig. 10.14): the square root of each feature's
  summed squared improvements, scaled so the largest is 100 (``jboost.inspect.importance``);
  ESL reads median income first, with the location (longitude, latitude) and average
  occupancy next (as we recall the figure, which prints no numbers: only "MedInc first" is
  compared in the table);
* **partial dependence** (ESL eq. 10.47; Fig. 10.15) on MedInc, AveOccup, HouseAge and AveRooms,
  by Friedman's weighted tree traversal with the training rows' covers
  (``jboost.inspect.partial_dependence``), on ESL's scale (the fitted function, centred); ESL
  describes MedInc's as monotone increasing and AveOccup's as decreasing (house values fall
  as occupancy rises), HouseAge's as weak;
* the **two-variable partial dependence** on HouseAge and AveOccup (Fig. 10.16), whose
  interaction ESL notes: for average occupancy above about 2, house value barely depends on age.

Command: ``python -m experiments.run california_interpretation`` (about a minute on 2 CPU cores).
"""

from __future__ import annotations

import numpy as np

import jboost
from experiments.configs import california_huber
from experiments.configs import pd_grid_figure

PD_FEATURES = ("MedInc", "AveOccup", "HouseAge", "AveRooms")


def get_config(smoke: bool = False) -> dict:
    return {
        "description": "ESL 10.14.1 Figs. 10.14-10.16: relative importance and partial dependence, "
                       "California housing (california_huber's model)",
        "seed": 0,
        "test_fraction": 0.2,
        "huber_alpha": 0.9,
        "learning_rate": 0.1,
        "n_rounds": 80 if smoke else 800,
        "depth": 3,
        "l2": 0.0,
        "grid_resolution": 10 if smoke else 40,
    }


def _slope(values) -> float:
    """The sign-bearing change of a partial dependence curve from its first to its last point."""
    v = np.asarray(values, np.float64)
    return float(v[-1] - v[0])


def run(config: dict, ctx) -> dict:
    X, y, X_test, y_test, names, model, t_fit = california_huber.fit_model(config, ctx)
    relative = np.asarray(jboost.inspect.importance(model, "relative"))
    ranking = [(names[j], float(relative[j])) for j in np.argsort(-relative, kind="stable")]
    res = config["grid_resolution"]
    curves = {}
    for f in PD_FEATURES:
        pdp = jboost.inspect.partial_dependence(model, names.index(f), X, grid_resolution=res)
        values = np.asarray(pdp.values, np.float64)
        curves[f] = {"grid": np.asarray(pdp.grid[0]).tolist(), "values": (values - values.mean()).tolist()}
    pair = jboost.inspect.partial_dependence(model, (names.index("HouseAge"), names.index("AveOccup")), X,
                                             grid_resolution=min(res, 20))
    surface = np.asarray(pair.values, np.float64)

    plt = ctx.pyplot
    figs = {}
    if plt is not None:
        fig, ax = plt.subplots(figsize=(5, 3.5))
        jboost.plot.importance(model, feature_names=names, ax=ax)
        ax.set_title(f"California housing: relative importance (ESL eq. 10.43; cf. Fig. 10.14)\n"
                     f"{california_huber.algorithm_name(config)}", fontsize=8, wrap=True)
        figs["relative_importance"] = fig
        rugs = {f: np.percentile(X[:, names.index(f)], np.arange(10, 100, 10)) for f in PD_FEATURES}
        fig = pd_grid_figure(plt, curves, "partial dependence",
                             "Partial dependence of house value (cf. ESL Fig. 10.15)\n"
                             + california_huber.algorithm_name(config), rugs)
        figs["partial_dependence"] = fig
        fig, ax = plt.subplots(figsize=(5.5, 4))
        jboost.plot.partial_dependence(model, (names.index("HouseAge"), names.index("AveOccup")), X,
                                       grid_resolution=min(res, 20), feature_names=names, ax=ax)
        ax.set_title(f"Partial dependence on HouseAge x AveOccup (cf. ESL Fig. 10.16)\n"
                     f"{california_huber.algorithm_name(config)}", fontsize=8, wrap=True)
        figs["partial_dependence_houseage_aveoccup"] = fig
    for name, fig in figs.items():
        ctx.savefig(fig, name)
    order = [r[0] for r in ranking]
    model_name = california_huber.algorithm_name(config)
    pd_name = "partial dependence (ESL eq. 10.47, Friedman's weighted traversal)"
    # ESL Fig. 10.16: above an occupancy of about 2 the dependence on age is weak; below, strong.
    occ = np.asarray(pair.grid[1])
    age_range_low = float(np.ptp(surface[:, occ < 2].mean(axis=1))) if np.any(occ < 2) else float("nan")
    age_range_high = float(np.ptp(surface[:, occ >= 3].mean(axis=1))) if np.any(occ >= 3) else float("nan")
    table = [
        {"quantity": "most important feature", "algorithm": f"relative importance (ESL eq. 10.43) of {model_name}",
         "published": "MedInc", "source": "ESL 2nd ed., Fig. 10.14", "ours": order[0]},
        {"quantity": "next three (ESL's text, as recalled: longitude, latitude, average occupancy)",
         "algorithm": f"relative importance (ESL eq. 10.43) of {model_name}", "published": None,
         "source": None, "ours": ", ".join(order[1:4])},
        {"quantity": "partial dependence on MedInc, last - first grid point (increasing)",
         "algorithm": f"{pd_name} of {model_name}", "published": "> 0", "source": "ESL 2nd ed., Fig. 10.15",
         "ours": _slope(curves["MedInc"]["values"])},
        {"quantity": "partial dependence on AveOccup, last - first grid point (decreasing)",
         "algorithm": f"{pd_name} of {model_name}", "published": "< 0", "source": "ESL 2nd ed., Fig. 10.15",
         "ours": _slope(curves["AveOccup"]["values"])},
        {"quantity": "range over HouseAge at AveOccup < 2 vs >= 3 (strong vs weak dependence on age)",
         "algorithm": f"two-variable {pd_name} of {model_name}", "published": "first > second",
         "source": "ESL 2nd ed., Fig. 10.16", "ours": f"{age_range_low:.3f} vs {age_range_high:.3f}"},
    ]
    return {
        "table": table,
        "timings": {"fit_first_call_s": t_fit},
        "relative_importance": ranking,
        "partial_dependence": curves,
        "checks": {"medinc_first": order[0] == "MedInc",
                   "medinc_increasing": _slope(curves["MedInc"]["values"]) > 0,
                   "aveoccup_decreasing": _slope(curves["AveOccup"]["values"]) < 0},
    }
