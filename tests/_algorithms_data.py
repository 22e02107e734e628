"""Shared data, settings and fits of the tests of jboost.algorithms (test_adaboost,
test_additive_logistic, test_gradient_algorithms, test_algorithms).

Compilation dominates the run time, so the tests share data shapes and settings (one compiled
scan serves several tests) and the binary fits are made once per session (:func:`binary_fit`).
AdaBoost.M1, Real and Gentle AdaBoost use stumps (as in ESL Figure 10.2), so the smoke variant
of experiments/configs/adaboost_spheres.py reuses their compiled scans; the smoke variants of
samme_simulation and shrinkage_subsampling likewise share shapes and settings with the
three-class fits and the vmap test.
"""

import functools

import jax
import jax.numpy as jnp
import numpy as np

import jboost
from jboost import algorithms as A
from jboost.trees import oblivious

N_ROUNDS, DEPTH = 30, 2
STUMPS = ("adaboost_m1", "real_adaboost", "gentle_adaboost")


def _nested_spheres():
    X, y = jboost.datasets.nested_spheres(400, seed=0)
    Xt, yt = jboost.datasets.nested_spheres(1000, seed=1)
    return X, y, Xt, yt


def _three_class():
    """Class = which of the first 3 of 10 Gaussian features is largest (trivial error 2/3)."""
    def draw(n, seed):
        X = np.random.default_rng(seed).standard_normal((n, 10)).astype(np.float32)
        return X, np.argmax(X[:, :3], axis=1).astype(np.float32)
    return draw(400, 0) + draw(1000, 1)


def _regression():
    # One draw split in two: make_regression's coefficients depend on the seed.
    X, y = jboost.datasets.make_regression(1400, n_features=10, n_informative=5, seed=0)
    return X[:400], y[:400], X[400:], y[400:]


BIN = _nested_spheres()
TRI = _three_class()
REG = _regression()

# Settings shared by the regression fits (one compiled scan per algorithm and loss).
REG_KW = dict(n_rounds=N_ROUNDS, depth=DEPTH, learning_rate=0.3, subsample=0.7, l2=0.0, key=5)

BINARY = {
    "adaboost_m1": lambda X, y, **kw: A.adaboost_m1(X, y, **kw),
    "real_adaboost": lambda X, y, **kw: A.real_adaboost(X, y, **kw),
    "gentle_adaboost": lambda X, y, **kw: A.gentle_adaboost(X, y, **kw),
    "logitboost": lambda X, y, **kw: A.logitboost(X, y, **kw),
    "gradient_boost": lambda X, y, **kw: A.gradient_boost(X, y, "binomial_deviance", **kw),
    "forward_stagewise": lambda X, y, **kw: A.forward_stagewise(X, y, "binomial_deviance", **kw),
}


@functools.lru_cache(maxsize=None)
def binary_fit(name: str) -> jboost.Booster:
    """The session's fit of binary algorithm ``name`` on :data:`BIN` (stumps for the AdaBoost
    family, depth 2 otherwise; learning rate 0.5 for gradient boosting and forward stagewise)."""
    X, y, _, _ = BIN
    kw = dict(n_rounds=N_ROUNDS, depth=1 if name in STUMPS else DEPTH)
    if name in ("gradient_boost", "forward_stagewise"):
        kw["learning_rate"] = 0.5
    return BINARY[name](X, y, **kw)


THREE_CLASS = ("samme", "samme_r", "logitboost")


@functools.lru_cache(maxsize=None)
def three_class_fit(name: str) -> jboost.Booster:
    """The session's fit of K-class algorithm ``name`` on :data:`TRI` (depth 2)."""
    X, y, _, _ = TRI
    return getattr(A, name)(X, y, n_rounds=N_ROUNDS, depth=DEPTH)


def leaves(model, X, round_=0, tree=0):
    """Leaf of every row in one fitted tree, via the float-threshold path."""
    t = jax.tree_util.tree_map(lambda a: a[round_, tree], model.trees)
    return np.asarray(oblivious.leaf_index_raw(t, jnp.asarray(X).T))


def raw(model, X):
    r = jboost.predict(model, X)
    return r[:, None] if r.ndim == 1 else r


def error(model, X, y):
    return float(np.mean(np.asarray(A.classify(raw(model, X))) != y))


def assert_fits_equal(a, b, loss_rtol=0.0):
    """Bitwise equal trees, coefficients, status and weights; the mean-loss records up to
    ``loss_rtol`` (under vmap XLA may reduce in another order: 1 ulp, jboost.fit alike)."""
    flat_a = jax.tree_util.tree_flatten_with_path(a)[0]
    flat_b = jax.tree_util.tree_leaves(b)
    assert len(flat_a) == len(flat_b)
    for (path, x), z in zip(flat_a, flat_b):
        name = jax.tree_util.keystr(path)
        if name.endswith(("train_loss", "valid_loss")):
            np.testing.assert_allclose(np.asarray(x), np.asarray(z), rtol=loss_rtol, err_msg=name)
        else:
            np.testing.assert_array_equal(np.asarray(x), np.asarray(z), err_msg=name)
