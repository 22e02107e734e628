"""ESL Figures 10.11 and 10.12: shrinkage and subsampling in gradient boosting (binomial deviance).

Nested-spheres data (ESL eq. 10.2), 2000 training / 10000 test rows. Gradient tree boosting
(ESL Algorithm 10.3, per-leaf line search on the binomial deviance) with

* Figure 10.11: stumps and depth-3 oblivious trees (8 leaves; ESL used 6-node trees), with no
  shrinkage (``nu = 1``) and ``nu = 0.1``;
* Figure 10.12: depth-2 oblivious trees (4 leaves: ESL's "4-node trees"), no shrinkage,
  ``nu = 0.1``, subsample ``eta = 0.5``, and both.

Each depth is one ``jax.vmap`` over the (learning rate, subsample, key) settings: one compiled
scan fits all curves of a panel. Deviance is reported as ESL does, ``-2 x`` mean log-likelihood
(``2 x`` jboost's ``binomial_deviance``), and test misclassification error.
ESL shows the curves only (no numbers are printed in the book), so ``published`` is empty; the
claims checked are qualitative: shrinkage lowers the best test deviance and error, and
subsampling with shrinkage does best for the 4-node trees.

Run::

    python -m experiments.run shrinkage_subsampling          # full
    python -m experiments.run shrinkage_subsampling --smoke  # < 30 s
"""

from __future__ import annotations

import time

import jax
import jax.numpy as jnp
import numpy as np

import jboost
from jboost import algorithms as A

PANEL_TITLES = {
    "fig10_11_stumps": "ESL Fig. 10.11 setting: stumps, with and without shrinkage",
    "fig10_11_depth3": "ESL Fig. 10.11 setting: oblivious trees of depth 3 (8 leaves; ESL: 6-node "
                       "trees), with and without shrinkage",
    "fig10_12_depth2": "ESL Fig. 10.12 setting: oblivious trees of depth 2 (4 leaves), shrinkage "
                       "and subsampling",
}
GB = "gradient boosting (ESL Alg. 10.3), binomial deviance: jboost.algorithms.gradient_boost"

PANELS = {
    # name: (depth, [(label, learning_rate, subsample), ...])
    "fig10_11_stumps": (1, [("no shrinkage", 1.0, 1.0), ("shrinkage 0.1", 0.1, 1.0)]),
    "fig10_11_depth3": (3, [("no shrinkage", 1.0, 1.0), ("shrinkage 0.1", 0.1, 1.0)]),
    "fig10_12_depth2": (2, [("no shrinkage", 1.0, 1.0), ("shrink=0.1", 0.1, 1.0),
                            ("sample=0.5", 1.0, 0.5), ("shrink=0.1, sample=0.5", 0.1, 0.5)]),
}


def get_config(smoke: bool = False) -> dict:
    config = dict(
        description="ESL Figs. 10.11/10.12: shrinkage and subsampling, gradient boosting, "
                    "binomial deviance, nested spheres",
        seed=0,
        n_train=2000,
        n_test=10000,
        n_rounds=2000,
        panels=sorted(PANELS),
    )
    if smoke:
        # The shapes of tests/test_algorithms.py's vmap test: its compiled scan is shared.
        config.update(n_train=400, n_test=1000, n_rounds=30, panels=["fig10_12_depth2"])
    return config


def run(config: dict, ctx) -> dict:
    seed = config["seed"]
    X, y = jboost.datasets.nested_spheres(config["n_train"], seed=seed)
    Xt, yt = jboost.datasets.nested_spheres(config["n_test"], seed=seed + 1)
    n_rounds = config["n_rounds"]
    curves, seconds = {}, {}
    for panel in config["panels"]:
        depth, settings = PANELS[panel]
        lrs = jnp.array([s[1] for s in settings], jnp.float32)
        subs = jnp.array([s[2] for s in settings], jnp.float32)
        keys = jax.random.split(jax.random.PRNGKey(seed), len(settings))   # one stream per curve
        t0 = time.time()
        fits = jax.vmap(lambda lr, sub, key: A.gradient_boost(
            X, y, "binomial_deviance", n_rounds=n_rounds, depth=depth, learning_rate=lr,
            subsample=sub, key=key))(lrs, subs, keys)
        jax.block_until_ready(fits)
        seconds[panel] = time.time() - t0
        for i, (label, _, _) in enumerate(settings):
            model = jax.tree_util.tree_map(lambda a: a[i], fits)
            dev = 2.0 * np.asarray(A.staged_loss(model, Xt, yt))
            err = np.asarray(A.staged_error(model, Xt, yt))
            curves[(panel, label)] = (dev, err)
            for m in range(0, n_rounds, 10):
                ctx.log(m + 1, panel=panel, setting=label, test_deviance=float(dev[m]),
                        test_error=float(err[m]))

    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        for panel in config["panels"]:
            fig, axes = plt.subplots(1, 2, figsize=(10, 4))
            for (p, label), (dev, err) in curves.items():
                if p != panel:
                    continue
                rounds = np.arange(1, n_rounds + 1)
                axes[0].plot(rounds, dev, label=label)
                axes[1].plot(rounds, err, label=label)
            axes[0].set_ylabel("Test Set Deviance")
            axes[1].set_ylabel("Test Set Misclassification Error")
            for ax in axes:
                ax.set_xlabel("Boosting Iterations")
                ax.legend()
            fig.suptitle(f"{PANEL_TITLES[panel]}\n{GB}; nested spheres, {config['n_train']} training / "
                         f"{config['n_test']} test rows", fontsize=9)
            ctx.savefig(fig, panel)
            plt.close(fig)
    except ImportError:
        print("matplotlib is not installed: no figures.")

    table = []
    for (panel, label), (dev, err) in curves.items():
        depth = PANELS[panel][0]
        trees = "stumps" if depth == 1 else f"oblivious trees of depth {depth}"
        algorithm = f"gradient boosting (ESL Alg. 10.3), binomial deviance, {trees}, {label}"
        where = f"{panel.split('_depth')[0].split('_stumps')[0].replace('fig10_', 'Fig. 10.')} setting"
        table.append(dict(quantity=f"{where}: min test deviance", algorithm=algorithm, published=None,
                          source=None, ours=float(dev.min())))
        table.append(dict(quantity=f"{where}: min test error", algorithm=algorithm, published=None,
                          source=None, ours=float(err.min())))
        table.append(dict(quantity=f"{where}: test error after {n_rounds} rounds", algorithm=algorithm,
                          published=None, source=None, ours=float(err[-1])))
    return dict(table=table, seconds_per_panel=seconds)
