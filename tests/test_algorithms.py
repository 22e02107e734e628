"""Tests of jboost.algorithms as a whole: every algorithm learns, returns a jboost.Booster that
every function of the model protocol accepts, compiles once for its shapes and static settings,
is bitwise the same when vmapped, checks its inputs through the settings layer; a new algorithm
is one round function on the boosting scaffold; the experiment configs that use them run.

The per-module tests are test_adaboost, test_additive_logistic and test_gradient_algorithms;
the shared data, settings and fits are in tests/_algorithms_data.py.
"""

import importlib
import pathlib

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jboost
from jboost import algorithms as A
from jboost.data import binning
from jboost.algorithms import adaboost

from tests._algorithms_data import (BIN, BINARY, DEPTH, N_ROUNDS, REG, REG_KW, THREE_CLASS, TRI,
                                    assert_fits_equal, binary_fit, error, raw, three_class_fit)
from jboost.engine import algorithm
from jboost.engine import boosting as boosting_lib
from jboost.engine import calls
from jboost.engine import state as state_lib
from jboost.engine import calls as calls_mod


# ------------------------------------------------------------------------------------------------
# Every algorithm learns: clearly better than the trivial classifier / the mean
# ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_algorithm_beats_the_trivial_classifier(name):
    X, y, Xt, yt = BIN
    fit = binary_fit(name)
    trivial = min(np.mean(yt), 1 - np.mean(yt))          # about 0.5
    test_err = error(fit, Xt, yt)
    assert test_err < trivial - 0.1, (name, test_err, trivial)
    # The training loss the algorithm minimises goes down.
    tl = np.asarray(fit.train_loss)
    assert tl[-1] < 0.9 * tl[0], (name, tl[0], tl[-1])
    # staged_error agrees with predict_class after the last round.
    staged = np.asarray(A.staged_error(fit, Xt, yt))
    assert staged.shape == (N_ROUNDS,)
    np.testing.assert_allclose(staged[-1], test_err, atol=1e-6)
    np.testing.assert_allclose(
        staged[-1], np.mean(np.asarray(jboost.predict_class(fit, Xt)) != yt), atol=1e-6)


@pytest.mark.parametrize("name", THREE_CLASS)
def test_three_class_algorithm_beats_the_trivial_classifier(name):
    X, y, Xt, yt = TRI
    fit = three_class_fit(name)
    assert fit.n_outputs == 3
    test_err = error(fit, Xt, yt)
    assert test_err < 2 / 3 - 0.4, (name, test_err)
    np.testing.assert_allclose(A.staged_loss(fit, Xt, yt)[-1],
                               np.mean(jboost.losses.per_sample_losses(fit.loss, jnp.asarray(yt),
                                                                       raw(fit, Xt))),
                               rtol=1e-5)


@pytest.mark.parametrize("name", THREE_CLASS)
def test_k_class_algorithms_training_loss_never_rises_at_their_published_settings(name):
    """Issue 14, item 1, for the literature's K-class algorithms at learning rate 1: SAMME and
    SAMME.R take their own steps (the exact minimiser of the exponential loss along the round's
    learner), LogitBoost FHT's Algorithm 6 (working responses, the ``(K-1)/K`` centring); none
    uses :func:`jboost.grad_hess`'s curvature, so the coupled-output fix leaves them unchanged.
    Their recorded training loss falls every round here (LogitBoost's can rise with deep trees on
    overlapping classes: ``benchmarks/multiclass_step.py --algorithms``)."""
    tl = np.asarray(three_class_fit(name).train_loss, np.float64)
    assert np.all(np.diff(tl) <= 1e-7), (name, tl)


@pytest.mark.parametrize("algo,loss", [("gradient_boost", "huber"),
                                       ("forward_stagewise", "squared_error")])
def test_regression_beats_the_mean(algo, loss):
    X, y, Xt, yt = REG
    fit = getattr(A, algo)(X, y, loss, **REG_KW)
    mse = np.mean((np.asarray(jboost.predict(fit, Xt)) - yt) ** 2)
    assert mse < 0.5 * np.var(yt), (algo, mse, np.var(yt))
    with pytest.raises(ValueError, match="predict_proba needs a classification model"):
        jboost.predict_proba(fit, Xt)


# ------------------------------------------------------------------------------------------------
# The model protocol
# ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(BINARY) + [f"{n} (3 classes)" for n in THREE_CLASS])
def test_every_protocol_function_works_on_every_algorithm(name):
    """predict, predict_proba, predict_class, feature_importance and staged_predict of each
    algorithm's Booster, against each other and the algorithm's own diagnostics."""
    if name in BINARY:
        fit, (X, y, Xt, yt), n_classes = binary_fit(name), BIN, 2
    else:
        fit, (X, y, Xt, yt), n_classes = three_class_fit(name.split()[0]), TRI, 3
    assert isinstance(fit, jboost.Booster)
    k = fit.n_outputs
    state = {"adaboost_m1": {"log_weights", "done"}, "samme": {"log_weights", "done"},
             "samme_r": {"log_weights", "done"}, "real_adaboost": {"log_weights"},
             "gentle_adaboost": {"log_weights"}}.get(name.split()[0], set())
    assert set(fit.info) == {"coef", "err", "status", "weights", "algorithm"} | state
    assert A.ALGORITHMS[int(fit.info["algorithm"])] == name.split()[0]
    for key in ("coef", "err", "status"):
        assert fit.info[key].shape == (N_ROUNDS,), key
    assert fit.info["weights"].shape == (len(y),)
    np.testing.assert_allclose(np.sum(fit.info["weights"]), len(y), rtol=1e-4)
    scores = np.asarray(jboost.predict(fit, Xt))
    assert scores.shape == ((len(yt),) if k == 1 else (len(yt), k))
    # staged_predict: every round's raw scores, the last one predict's (bitwise with one tree
    # per round; K-class LogitBoost's K trees of a round are summed before they are added).
    staged = np.asarray(jboost.staged_predict(fit, Xt))
    assert staged.shape == (N_ROUNDS, len(yt), k)
    check = (np.testing.assert_array_equal if fit.trees.features.shape[1] == 1
             else lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5))
    check(staged[-1].reshape(scores.shape), scores)
    check(staged[9].reshape(scores.shape), jboost.predict(fit, Xt, n_rounds=10))
    proba = np.asarray(jboost.predict_proba(fit, Xt))
    assert proba.shape == (len(yt), n_classes)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0, rtol=1e-5)
    labels = np.asarray(jboost.predict_class(fit, Xt))
    np.testing.assert_array_equal(labels, np.argmax(proba, axis=1))
    # The class of the largest probability is the algorithm's own decision rule on raw scores.
    np.testing.assert_array_equal(labels, np.asarray(A.classify(raw(fit, Xt))))
    importance = np.asarray(jboost.feature_importance(fit))
    assert importance.shape == (X.shape[1],)
    assert np.all(importance >= 0) and np.isclose(importance.sum(), 1.0, rtol=1e-5)
    assert importance.argmax() < (10 if n_classes == 2 else 3)    # an informative feature


# ------------------------------------------------------------------------------------------------
# A new algorithm is one round function (README: "How to extend jboost: add an algorithm")
# ------------------------------------------------------------------------------------------------


def l2boost_round(r: algorithm.Round) -> algorithm.RoundResult:
    """L2Boost (Buhlmann and Yu 2003): a least-squares tree of the residuals ``y - F`` on the
    round's weighted rows, shrunk by the learning rate."""
    w = r.data.w * r.sample
    residual = r.data.y - r.raw[:, 0]
    tree, leaf = algorithm.grow_trees(r, (-w * residual)[:, None], w[:, None])
    tree = tree._replace(leaf_values=r.learning_rate * tree.leaf_values)
    return algorithm.RoundResult(*algorithm.one_tree(tree, leaf))


def test_a_new_algorithm_is_one_round_function():
    """L2Boost written as one round function and run by boosting.boost is bitwise jboost.fit
    with squared error (whose Newton trees are least-squares trees of the residuals)."""
    X, y, _, _ = REG
    kw = dict(n_rounds=N_ROUNDS, depth=DEPTH, learning_rate=0.3, l2=1.0, min_split_gain=0.0,
              min_child_weight=1.0, subsample=0.7, colsample=1.0)
    ref = jboost.fit(X, y, "squared_error", key=5, **kw)
    config, hyper = jboost.fitting.settings.settings(n_bins=256, algorithm=algorithm.Algorithm(l2boost_round),
                                        **kw)
    X_binned = binning.bin_features(X, np.asarray(ref.borders))
    config = config._replace(missing=binning.has_missing(X_binned, 256))
    data = state_lib.Data.train_only(X_binned, jnp.asarray(y), jnp.ones(len(y), jnp.float32))
    out = boosting_lib.boost(data, jax.random.PRNGKey(5), hyper, jboost.losses.squared_error(),
                         ref.baseline, config=config)
    for field in ("features", "thresholds", "missing_right", "leaf_values", "gains"):
        np.testing.assert_array_equal(getattr(out.trees, field), getattr(ref.trees, field), field)
    np.testing.assert_array_equal(out.train_loss, ref.train_loss)


# ------------------------------------------------------------------------------------------------
# Compilation, vmap, determinism, errors
# ------------------------------------------------------------------------------------------------


def test_an_algorithm_compiles_once_for_its_shapes_and_static_settings(monkeypatch):
    """Fits that differ only in traced settings (learning rate, subsample, key) and data values
    trace the program of their rounds once (boosting.boost_rounds: one compiled program for all
    of a fit's host-side calls), and the round function twice (the program, and once for the
    shapes of the rounds' buffers, boosting.rounds_template)."""
    X, y, _, _ = BIN
    monkeypatch.setattr(adaboost, "adaboost_m1_round",
                        chex.assert_max_traces(adaboost.adaboost_m1_round, n=2))
    monkeypatch.setattr(calls_mod, "boost_rounds",
                        jax.jit(chex.assert_max_traces(calls.boost_rounds.__wrapped__, n=1),
                                static_argnames=("config",)))
    for lr, sub, key in [(1.0, 1.0, 0), (0.5, 0.8, 1), (0.3, 0.6, 2)]:
        A.adaboost_m1(X[::-1], y[::-1], n_rounds=N_ROUNDS, depth=1, learning_rate=lr,
                      subsample=sub, key=key)


@pytest.mark.slow
def test_vmap_over_hyperparameters_and_key_equals_separate_fits():
    """One vmapped fit over (learning rate, subsample, key) == separate fits, for two algorithms.

    The gradient-boosting sweep is the smoke panel of experiments/configs/shrinkage_subsampling.py
    (ESL Fig. 10.12 settings), whose compiled scan this test shares.
    """
    X, y, _, _ = BIN

    def m1(lr, sub, key):
        return A.adaboost_m1(X, y, n_rounds=N_ROUNDS, depth=1, learning_rate=lr, subsample=sub,
                             key=key)

    def gb(lr, sub, key):
        return A.gradient_boost(X, y, "binomial_deviance", n_rounds=N_ROUNDS, depth=DEPTH,
                                learning_rate=lr, subsample=sub, key=key)

    sweeps = [(m1, [0.5, 1.0], [0.6, 0.9]), (gb, [1.0, 0.1, 1.0, 0.1], [1.0, 1.0, 0.5, 0.5])]
    for fn, lrs, subs in sweeps:
        lrs, subs = jnp.array(lrs), jnp.array(subs)
        keys = jax.random.split(jax.random.PRNGKey(0), len(lrs))
        batched = jax.vmap(fn)(lrs, subs, keys)
        assert batched.batch_shape == (len(lrs),)
        for i in range(len(lrs)):
            single = fn(lrs[i], subs[i], keys[i])
            assert_fits_equal(jax.tree_util.tree_map(lambda a: a[i], batched), single,
                              loss_rtol=1e-6)


def test_fits_are_bitwise_deterministic():
    X, y, _, _ = BIN
    assert_fits_equal(A.adaboost_m1(X, y, n_rounds=N_ROUNDS, depth=1), binary_fit("adaboost_m1"))
    assert_fits_equal(A.logitboost(X, y, n_rounds=N_ROUNDS, depth=DEPTH), binary_fit("logitboost"))


def test_errors_name_the_argument():
    X, y, _, _ = BIN
    with pytest.raises(ValueError, match="y must hold binary labels"):
        A.adaboost_m1(X, y + 1, n_rounds=2)
    with pytest.raises(ValueError, match="err_floor"):
        A.adaboost_m1(X, y, n_rounds=2, err_floor=0.0)
    with pytest.raises(ValueError, match="form="):
        A.logitboost(X, y, n_rounds=2, form="three")
    with pytest.raises(ValueError, match="leaf_refit="):
        A.gradient_boost(X, y, n_rounds=2, leaf_refit="newton")
    with pytest.raises(ValueError, match="learning_rate"):
        A.samme(X, y, n_rounds=2, learning_rate=-1.0)
    with pytest.raises(TypeError, match="depth must be an int"):
        A.real_adaboost(X, y, depth=2.0)
    with pytest.raises(ValueError, match="eval_set y must hold binary labels"):
        A.gentle_adaboost(X, y, n_rounds=2, eval_set=(X, y + 1))
    with pytest.raises(TypeError, match="z_max must be a concrete number"):
        jax.vmap(lambda z: A.logitboost(X, y, n_rounds=2, z_max=z))(jnp.array([2.0, 4.0]))


# ------------------------------------------------------------------------------------------------
# Warm start: init_model= continues a model of the same algorithm
# ------------------------------------------------------------------------------------------------

# Every algorithm with the settings of the session's fits (binary_fit, three_class_fit: the same
# compiled 30-round scan serves the uninterrupted reference), with row subsampling.
WARM = sorted(BINARY) + [f"{n} (3 classes)" for n in THREE_CLASS]


def _warm_fit(name, **kw):
    if name in BINARY:
        X, y, _, _ = BIN
        kw = dict(depth=1 if name in ("adaboost_m1", "real_adaboost", "gentle_adaboost") else DEPTH,
                  **kw)
        if name in ("gradient_boost", "forward_stagewise"):
            kw["learning_rate"] = 0.5
        return BINARY[name](X, y, subsample=0.7, key=4, **kw)
    X, y, _, _ = TRI
    return getattr(A, name.split()[0])(X, y, depth=DEPTH, subsample=0.7, key=4, **kw)


@pytest.fixture(scope="module")
def warm_fits():
    """``name -> (15-round fit, its continuation by 15 rounds, the 30-round fit)``, made once."""
    cache = {}

    def get(name):
        if name not in cache:
            half = _warm_fit(name, n_rounds=N_ROUNDS // 2)
            cache[name] = (half, _warm_fit(name, n_rounds=N_ROUNDS // 2, init_model=half),
                           _warm_fit(name, n_rounds=N_ROUNDS))
        return cache[name]
    return get


@pytest.mark.parametrize("name", WARM)
def test_init_model_continues_every_algorithm_bitwise(name, warm_fits):
    """r rounds, then s more with ``init_model=`` (keys folded from the round count, the
    algorithm's state kept in ``info``) == r + s rounds in one fit: trees, losses, every ``info``
    array (the per-round diagnostics joined, the final observation weights and state) and
    predictions, bitwise."""
    half, continued, full = warm_fits(name)
    assert continued.n_rounds == full.n_rounds == N_ROUNDS
    assert set(continued.info) == set(full.info)
    # The first rounds are init_model's, unchanged.
    np.testing.assert_array_equal(continued.trees.leaf_values[:half.n_rounds],
                                  half.trees.leaf_values)
    X = (BIN if name in BINARY else TRI)[2]
    # K-class LogitBoost adds K trees per round: boosting.round_values sums them from materialised
    # leaf values in fitting and in resume alike (without it XLA contracted the fit's sum into an
    # FMA and the continued raw scores were an ulp off: this test failed).
    assert_fits_equal(continued, full)
    np.testing.assert_array_equal(jboost.predict(continued, X), jboost.predict(full, X))


def test_a_continued_model_round_trips_through_a_model_file_and_continues_again(tmp_path,
                                                                               warm_fits):
    """The state a continued fit needs (``info["log_weights"]``, ``"done"``, ``"algorithm"``) is
    in the model file: a loaded continued model equals the saved one bitwise, and a loaded model
    continues exactly as the saved one does."""
    half, continued, _ = warm_fits("adaboost_m1")
    jboost.save(continued, tmp_path / "m1.jbm")
    assert_fits_equal(jboost.load(tmp_path / "m1.jbm"), continued)
    jboost.save(half, tmp_path / "half.jbm")
    assert_fits_equal(_warm_fit("adaboost_m1", n_rounds=N_ROUNDS // 2,
                                init_model=jboost.load(tmp_path / "half.jbm")), continued)


def test_init_model_refusals_name_the_argument_and_the_fix(warm_fits):
    X, y, _, _ = BIN
    m1 = warm_fits("adaboost_m1")[0]
    kw = dict(n_rounds=2, depth=1)
    with pytest.raises(ValueError, match=r"fitted by jboost.algorithms.adaboost_m1: continue it "
                                         r"with adaboost_m1\(\.\.\., init_model=model\), not real"):
        A.real_adaboost(X, y, init_model=m1, **kw)
    with pytest.raises(ValueError, match=r"records no algorithm .*jboost.fit\(init_model="):
        A.gradient_boost(X, y, "binomial_deviance", init_model=m1._replace(info={}), **kw)
    with pytest.raises(TypeError, match="init_model must be a Booster fitted by"):
        A.adaboost_m1(X, y, init_model=object(), **kw)
    two = jax.tree_util.tree_map(lambda a: jnp.stack([a, a]), m1)
    with pytest.raises(ValueError, match=r"init_model is a batch of \(2,\) models"):
        A.adaboost_m1(X, y, init_model=two, **kw)
    with pytest.raises(ValueError, match="init_model has 10 features; X has 9"):
        A.adaboost_m1(X[:, :9], y, init_model=m1, **kw)
    with pytest.raises(ValueError,
                       match="n_bins=16 differs from init_model's \\(256\\).*pass n_bins=256"):
        A.adaboost_m1(X, y, init_model=m1, n_bins=16, **kw)
    with pytest.raises(ValueError, match="depth=2 differs .*pass depth=1"):
        A.adaboost_m1(X, y, init_model=m1, n_rounds=2, depth=2)
    with pytest.raises(ValueError, match=r"borders differ from init_model's.*omit borders="):
        A.adaboost_m1(X, y, init_model=m1, borders=np.asarray(m1.borders) + 1, **kw)
    A.adaboost_m1(X, y, init_model=m1, borders=m1.borders, n_rounds=N_ROUNDS // 2, depth=1,
                  subsample=0.7, key=4)                             # its own borders: accepted
    with pytest.raises(ValueError, match="continue on the training rows the model was fitted on"):
        A.adaboost_m1(X[:300], y[:300], init_model=m1, **kw)
    gb = warm_fits("gradient_boost")[0]
    with pytest.raises(ValueError, match="fitted with loss 'binomial_deviance' .*this fit has "
                                         "'squared_error'"):
        A.gradient_boost(X, y, "squared_error", init_model=gb, n_rounds=2, depth=DEPTH)
    # A jboost.algorithms model is not a jboost.fit model either.
    with pytest.raises(TypeError, match="init_model .*jboost.fit"):
        jboost.fit(X, y, "binomial_deviance", init_model=gb, n_rounds=2, depth=DEPTH)


# ------------------------------------------------------------------------------------------------
# Experiment configs: smoke variants run through the runner contract with a tiny context
# ------------------------------------------------------------------------------------------------


class _Ctx:
    def __init__(self, workdir):
        self.workdir = pathlib.Path(workdir)
        self.data_dir = None
        self.smoke = True
        self.logged = []
        self.pyplot = None  # the runner's contract: matplotlib's pyplot, or None (no figures here)

    def log(self, step, **metrics):
        self.logged.append((step, metrics))

    def savefig(self, fig, name):  # as the runner's: no figure without pyplot
        if fig is not None:
            fig.savefig(self.workdir / f"{name}.png")


# multiclass_table reads the real datasets (waveform, vowel, segmentation, letter): skipped, with
# the reason, where the data directory is absent (as the loaders' tests are).
_HAVE_TABLE_DATA = all((jboost.datasets.data_dir() / f).exists() for f in (
    "waveform.csv.gz", "vowel_train.csv.gz", "segmentation_train.csv.gz", "letter.csv.gz"))


@pytest.mark.parametrize("name", ["adaboost_spheres", "shrinkage_subsampling", "samme_simulation",
                                  pytest.param("multiclass_table", marks=pytest.mark.skipif(
                                      not _HAVE_TABLE_DATA, reason="multiclass_table needs the "
                                      f"benchmark CSVs, not found in {jboost.datasets.data_dir()}"))])
def test_experiment_config_smoke(name, tmp_path):
    mod = importlib.import_module(f"experiments.configs.{name}")
    config = mod.get_config(smoke=True)
    assert "seed" in config and "description" in config
    ctx = _Ctx(tmp_path)
    out = mod.run(config, ctx)
    assert out["table"], name
    for row in out["table"]:
        assert set(row) >= {"quantity", "published", "ours"}
        assert np.isfinite(row["ours"]), row
    assert ctx.logged
