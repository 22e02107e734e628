"""No silent wrong answers (issue 14): one table of bad inputs, each row an entry point (``fit``,
the classical algorithms, forests, sweeps, ``predict``), a bad input, and the error type and
message it must raise (or the warning it must give).

Almost every row fails on the host before anything is compiled. Rows that warn are combined
with a later host-side error (``n_bins=2``, checked after the labels) so that they do not fit a
model either; the few checks that need a fitted model (a non-finite training loss, a zero
gradient, degenerate class balance, a custom binary loss's link, predicting 0 rows) share the
settings of ``conftest.FIT_KW`` and its ``N x F`` data.
"""

from __future__ import annotations

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jboost
from jboost import algorithms
from jboost import _native
from jboost import bagging
from jboost import combine
from jboost import distributions
from jboost import losses
from jboost import sweep as sweep_lib

from conftest import F, FIT_KW, N
from jboost import devices
from jboost.data import labels as labels_lib
from jboost.engine import memory
from jboost.losses import checks

# Plumbing tests on tiny programs: compiled without XLA's optimisations (conftest.quick_compiles).
pytestmark = pytest.mark.usefixtures("quick_compiles")

RNG = np.random.default_rng(14)
X20 = RNG.normal(size=(20, 3)).astype(np.float32)
Y20 = RNG.normal(size=20).astype(np.float32)
B20 = (np.arange(20) % 2).astype(np.float32)          # binary labels
C20 = (np.arange(20) % 3).astype(np.float32)          # class labels 0..2
BIG20 = np.where(np.arange(20) % 2 == 0, 0.0, 1e6).astype(np.float32)   # K = 1e6 + 1 classes
SHIFTED20 = (np.arange(20) % 3 + 1).astype(np.float32)                  # labels 1..3, class 0 absent


def _borders(n_bins=8, f=3):
    return np.tile(np.linspace(-1.0, 1.0, n_bins - 1, dtype=np.float32), (f, 1))


UNSORTED = _borders()
UNSORTED[1, [2, 3]] = UNSORTED[1, [3, 2]]
WITH_NAN = _borders()
WITH_NAN[2, 4] = np.nan


def _vector_loss(y, f):
    return jnp.stack([f - y, y - f]) ** 2                 # (2,) per sample: wrong


def _two_outputs(y, f):
    return jnp.sum((f - y) ** 2)


def _softmaxless(y, f):
    return jax.nn.logsumexp(f) - jnp.take(f, y.astype(jnp.int32))


# Entry points: every one takes (X, y, **kwargs) with small static settings.
ENTRY = {
    "fit": lambda X, y, **kw: jboost.fit(X, y, **{"n_rounds": 2, "depth": 2, **kw}),
    "gradient_boost": lambda X, y, **kw: algorithms.gradient_boost(X, y, **{"n_rounds": 2, "depth": 2, **kw}),
    "adaboost_m1": lambda X, y, **kw: algorithms.adaboost_m1(X, y, **{"n_rounds": 2, **kw}),
    "samme": lambda X, y, **kw: algorithms.samme(X, y, **{"n_rounds": 2, **kw}),
    "samme_r": lambda X, y, **kw: algorithms.samme_r(X, y, **{"n_rounds": 2, **kw}),
    "logitboost": lambda X, y, **kw: algorithms.logitboost(X, y, **{"n_rounds": 2, **kw}),
    "bin_features": lambda X, y, borders, **kw: jboost.bin_features(X, borders),
    "fit_forest": lambda X, y, **kw: bagging.fit_forest(X, y, **{"n_trees": 2, "depth": 2, **kw}),
    "forward_stagewise": lambda X, y, **kw: algorithms.forward_stagewise(X, y, **{"n_rounds": 2, "depth": 2, **kw}),
    "sweep": lambda X, y, **kw: sweep_lib.sweep(X, y, **{"n_rounds": 2, "depth": 2, "folds": 2,
                                                         "seeds": 1, **kw}),
    "bagged_boosters": lambda X, y, **kw: bagging.fit_bagged_boosters(
        X, y, **{"n_bags": 2, "n_rounds": 2, "depth": 2, **kw}),
    "stacking": lambda X, y, **kw: combine.fit_stacked_boosters(
        X, y, **{"hypers": [{}], "folds": 2, "n_rounds": 2, "depth": 2, **kw}),
    "ecoc": lambda X, y, **kw: combine.fit_ecoc_boosters(
        X, y, np.eye(3), **{"n_rounds": 2, "depth": 2, **kw}),
}

# (entry point, X, y, kwargs, error type, message regex). Existing checks first, then issue 14.
ERRORS = [
    # Existing checks: lengths, finiteness, types, settings, labels.
    # Early stopping: one check for every entry point that stops early; an eval set with no weight.
    *[(e, X20, Y20, {"early_stopping_tolerance": 0.1}, ValueError,
       "early_stopping_tolerance=0.1 needs early_stopping_rounds")
      for e in ("fit", "sweep", "bagged_boosters")],
    *[(e, X20, Y20, {"early_stopping_rounds": 0, "eval_set": (X20, Y20)}, ValueError,
       "early_stopping_rounds")
      for e in ("fit", "bagged_boosters")],
    ("fit", X20, Y20, {"eval_set": (X20, Y20, np.zeros(20))}, ValueError,
     "eval_set weights must have a positive sum"),
    *[(e, X20, Y20[:19], {}, ValueError, "y has 19 samples but X has 20")
      for e in ("fit", "gradient_boost", "adaboost_m1", "fit_forest", "sweep")],
    *[(e, X20, np.where(np.arange(20) == 3, np.nan, Y20), {}, ValueError, "y must be finite")
      for e in ("fit", "gradient_boost", "fit_forest", "sweep")],
    *[(e, X20.astype(np.complex64), B20, {}, TypeError, "X must be real; got a complex array")
      for e in ("fit", "gradient_boost", "adaboost_m1", "fit_forest", "sweep")],
    *[(e, X20, B20, {"sample_weight": -np.ones(20)}, ValueError, "sample_weight must be non-negative")
      for e in ("fit", "gradient_boost", "adaboost_m1", "fit_forest", "sweep")],
    *[(e, X20, B20, {"depth": 0}, ValueError, r"depth=0 must be in \[1, 16\]")
      for e in ("fit", "gradient_boost", "adaboost_m1", "sweep")],
    ("fit_forest", X20, B20, {"depth": 0}, ValueError, r"depth=0 must be in \[1, 30\]"),  # depth-wise
    ("fit_forest", X20, B20, {"depth": 0, "tree_family": "oblivious"}, ValueError,
     r"depth=0 must be in \[1, 16\]"),
    ("fit", X20, Y20, {"learning_rate": 0.0}, ValueError, r"learning_rate=0.0 must be in \(0.0, inf\]"),
    ("sweep", X20, Y20, {"grid": {"learning_rate": [0.1, -1.0]}}, ValueError, r"learning_rate=-1.0 must be in"),
    ("adaboost_m1", X20, C20, {}, ValueError, "y must hold binary labels 0/1"),
    ("fit", X20, C20, {"loss": "binomial_deviance"}, ValueError, "y must hold binary labels 0/1"),
    # Fractional labels are class labels mapped to 0..K-1 (as jboost.fit's); K must agree.
    ("fit_forest", X20, C20 + 0.5, {"n_classes": 2}, ValueError, "n_classes=2 but y holds 3 classes"),
    # 4. Loss parameters outside their declared domains; the sweep's grid values too.
    *[(e, X20, Y20, {"loss": losses.quantile(1.5)}, ValueError,
       r"loss 'quantile' parameter alpha=1.5 must be in \(0, 1\)")
      for e in ("fit", "gradient_boost", "sweep")],
    ("fit", X20, Y20, {"loss": losses.quantile(0.0)}, ValueError, r"alpha=0 must be in \(0, 1\)"),
    *[(e, X20, Y20, {"loss": losses.huber(delta=0.0)}, ValueError,
       r"loss 'huber' parameter delta=0 must be in \(0, inf\)")
      for e in ("fit", "gradient_boost", "sweep")],
    ("fit", X20, Y20, {"loss": losses.huber(delta=-1.0)}, ValueError, r"delta=-1 must be in \(0, inf\)"),
    ("fit", X20, Y20, {"loss": losses.huber(alpha=1.5)}, ValueError, r"parameter alpha=1.5 must be in \(0, 1\)"),
    ("fit", X20, Y20, {"loss": losses.huber(delta=np.nan)}, ValueError, "parameter delta must be finite"),
    ("sweep", X20, Y20, {"loss": "quantile", "grid": {"alpha": [0.5, 1.5]}}, ValueError,
     r"grid\['alpha'\]: loss 'quantile' parameter alpha=1.5 must be in \(0, 1\)"),
    ("sweep", X20, Y20, {"loss": "huber", "grid": {"loss.delta": [1.0, 0.0]}}, ValueError,
     r"grid\['loss.delta'\]: loss 'huber' parameter delta=0 must be in \(0, inf\)"),
    # 7. User-supplied borders: unsorted or NaN.
    *[(e, X20, B20, {"borders": bad, "n_bins": 8}, ValueError, match)
      for e in ("fit", "gradient_boost", "adaboost_m1", "fit_forest", "bin_features")
      for bad, match in ((UNSORTED, "borders must be non-decreasing along each feature .*feature 1"),
                         (WITH_NAN, "borders must not contain NaN; found NaN for feature 2"))],
    # 12. A class label of 1e6: K = 1e6 + 1 classes would need terabytes; refused before compiling.
    *[(e, X20, BIG20, {"loss": "multinomial_deviance"}, MemoryError,
       r"K = max\(y\) \+ 1 = 1000001 classes, from the labels' maximum")
      for e in ("fit", "gradient_boost", "sweep", "bagged_boosters", "stacking")],
    # The classical K-class algorithms (samme: std::bad_alloc in the kernel; logitboost hung).
    *[(e, X20, BIG20, {}, MemoryError,
       r"K = max\(y\) \+ 1 = 1000001 classes, from the labels' maximum.*map the labels to 0\.\.K-1")
      for e in ("samme", "samme_r", "logitboost")],
    # Forests: K = 1e6 + 1 leaf values per leaf of every tree (and the histograms of each).
    *[("fit_forest", X20, BIG20, kw, MemoryError,
       r"K = max\(y\) \+ 1 = 1000001 classes, from the labels' maximum; .*depth=10.*map the labels")
      for kw in ({"depth": 10, "tree_family": "oblivious"},
                 {"depth": 10, "task": "multiclass", "max_features": None, "tree_family": "oblivious"})],
    ("fit_forest", X20, Y20, {"task": "regression", "depth": 16, "n_trees": 10**6,
                              "tree_family": "oblivious"}, MemoryError,
     r"estimated for 1000000 trees"),
    # Requests whose histograms or trees cannot fit, whatever the labels.
    *[(e, X20, C20, {"loss": "multinomial_deviance", "n_outputs": 4000, "depth": 16}, MemoryError,
       r"needs about .* GiB but the device has .*depth=16, n_bins=256, n_outputs=4000")
      for e in ("bagged_boosters", "stacking", "sweep")],
    ("ecoc", X20, C20, {"depth": 16, "n_rounds": 10**5}, MemoryError,
     r"estimated for 3 ECOC bit learners.*n_rounds=100000.*a code with fewer bits"),
    # 13. Clear messages: a loss returning a vector; a custom K-class loss without n_outputs.
    *[(e, X20, Y20, {"loss": _vector_loss}, ValueError,
       r"the loss must return a scalar per sample; .* returned shape \(2,\)")
      for e in ("fit", "gradient_boost", "sweep")],
    ("fit", X20, Y20, {"loss": _vector_loss, "n_outputs": 3}, ValueError,
     r"must return a scalar per sample; .*raw scores of shape \(3,\) returned shape \(2, 3\)"),
    *[(e, X20, C20, {"loss": _softmaxless, "task": "multiclass"}, ValueError,
       r"task='multiclass' but n_outputs=1: pass n_outputs=K")
      for e in ("fit", "gradient_boost", "sweep")],
    ("fit", X20, C20, {"loss": losses.Loss(_softmaxless, task="multiclass")}, ValueError,
     "pass n_outputs=K, the number of classes"),
    # A classification loss's explicit link must give predict_proba's (n, n_classes)
    # probabilities (identity_link on a binary loss: (n,) values, argmax over the rows).
    *[(e, X20, B20, {"loss": losses.Loss(losses.binomial_deviance_fn, task="binary",
                                         link=losses.identity_link)}, ValueError,
       r"link=identity_link of loss 'custom' \(task 'binary'.* returned shape \(3,\).*"
       r"predict_proba needs \(n, 2\) class probabilities")
      for e in ("fit", "gradient_boost", "sweep", "bagged_boosters", "stacking")],
    ("fit", X20, C20, {"loss": losses.Loss(losses.multinomial_deviance_fn, task="multiclass",
                                           n_outputs=3, link=losses.sigmoid_link)}, ValueError,
     r"link=sigmoid_link .*returned shape \(3, 3, 2\).*predict_proba needs \(n, 3\)"),
    ("fit", X20, B20, {"loss": losses.Loss(losses.binomial_deviance_fn, task="binary",
                                           link=lambda r: jnp.stack([r, r], axis=-1))}, ValueError,
     r"link=<lambda> .*must return class probabilities \(in \[0, 1\], each row summing to 1\)"),
    # Issue 16: labels outside a distribution's support, refused before compiling (a loss
    # function's own check_labels); a coupled leaf refit with a tree per output.
    ("fit", X20, np.abs(Y20) + 0.5, {"loss": distributions.loss(distributions.Poisson)}, ValueError,
     r"y must hold counts: non-negative integers .* for distribution 'poisson'"),
    ("fit", X20, -np.abs(Y20), {"loss": distributions.loss(distributions.Gamma, natural_gradient=True)},
     ValueError, r"y must hold positive numbers \(y > 0\) for distribution 'gamma'"),
    ("fit", X20, Y20, {"loss": losses.Loss(_two_outputs, n_outputs=2, leaf_refit="exact"),
                       "per_output_trees": True}, ValueError,
     r"per_output_trees=True cannot refit the leaves of loss 'custom' \(leaf_refit='exact'\)"),
]


def _id(row):
    entry, _, _, kwargs, error, match = row
    return f"{entry}-{error.__name__}-{match[:40]}"


@pytest.mark.parametrize("entry,X,y,kwargs,error,match", ERRORS, ids=[_id(r) for r in ERRORS])
def test_bad_input_raises(entry, X, y, kwargs, error, match):
    with pytest.raises(error, match=match):
        ENTRY[entry](X, y, **kwargs)


# 8. Class labels 1..K (class 0 absent) with a K-class loss warn. Negative sample weights
# (checked after the labels; the sweep: n_bins=2) stop each call before it compiles anything.
NEGATIVE = {"sample_weight": -np.ones(20)}
WARNINGS = [
    ("fit", {"loss": "multinomial_deviance", **NEGATIVE}),
    ("fit", {"loss": "samme_exponential", **NEGATIVE}),
    ("gradient_boost", {"loss": "multinomial_deviance", **NEGATIVE}),
    ("samme", NEGATIVE),
    ("logitboost", NEGATIVE),
    ("fit_forest", NEGATIVE),
    ("sweep", {"loss": "multinomial_deviance", "n_bins": 2}),
]


@pytest.mark.parametrize("entry,kwargs", WARNINGS, ids=[w[0] + "-" + str(w[1].get("loss", "")) for w in WARNINGS])
def test_labels_without_class_zero_warn(entry, kwargs):
    with pytest.warns(UserWarning, match=r"(?i)class labels 1\.\.3 with class 0 absent.*map the labels to 0\.\.K-1"):
        with pytest.raises(ValueError, match=r"n_bins=2 must be in \[3, |sample_weight must be non-negative"):
            ENTRY[entry](X20, SHIFTED20, **kwargs)


def test_labels_from_zero_and_given_classes_do_not_warn():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        checks.resolve_loss("multinomial_deviance", C20)
        checks.resolve_loss("multinomial_deviance", SHIFTED20, n_outputs=4)
        assert labels_lib.n_classes_of(C20) == 3
        assert labels_lib.n_classes_of(SHIFTED20, n_classes=4) == 4


def test_sharded_deep_fits_are_refused_with_an_estimate():
    # 11. Sharded over devices, every device builds each level's full F x 2^d x n_bins x 2K
    # histograms (for their psum): depth 16 on 20k x 200 needs ~40 GB per device, refused before
    # compiling with the way out; on one device the kernel's deep levels need a fraction of it.
    one = memory.boosting_bytes(20000, 200, 16, 256, 1, 10)
    sharded = memory.boosting_bytes(20000, 200, 16, 256, 1, 10, devices=[jax.devices()[0]])
    assert one < (1 << 30) < (30 << 30) < sharded
    cpu = jax.devices("cpu")[0]
    assert (memory.boosting_bytes(20000, 20, 12, 256, 1, 10, devices=[cpu, cpu])
            == 2 * memory.boosting_bytes(10000, 20, 12, 256, 1, 10, devices=[cpu]))
    X = np.zeros((20000, 200), np.float32)
    with pytest.raises(MemoryError, match=r"sharded over devices, every device builds .*devices=None"):
        jboost.fit(X, np.zeros(20000), depth=16, n_rounds=10, devices=[jax.devices()[0]])


def test_memory_estimate_refuses_only_impossible_fits():
    # fit's own estimate (features x 2^(depth-1) x n_bins x 2K) refuses what the K-only bound of
    # resolve_loss lets through; ordinary settings pass.
    limit = devices.memory_limit()
    assert memory.boosting_bytes(200, 5, 6, 256, 1, 100) < 1 << 24 < limit
    assert memory.boosting_bytes(20, 3, 16, 256, 4000, 2, dense_hessian=True) > 1 << 40
    assert devices.fit_bytes(10**6, 5000, 16, 256, 30, dense_hessian=True) > 1 << 40
    with pytest.raises(MemoryError, match=r"needs about .* GiB but the device has .*n_outputs=200000"):
        jboost.fit(X20, C20, "multinomial_deviance", n_outputs=200000, depth=16, n_bins=256,
                   n_rounds=2)
    # The custom K-output loss that tried to allocate 2.4 TB before the estimate existed.
    with pytest.raises(MemoryError, match=r"depth=16, n_bins=256, n_outputs=4000"):
        jboost.fit(X20, C20, lambda y, f: jnp.sum((f - y) ** 2), n_outputs=4000, depth=16,
                   n_bins=256, n_rounds=2)


def test_random_code_refuses_impossible_scoring():
    # 200 candidates x 1000 classes x 2000^2 column pairs: refused before anything is drawn.
    with pytest.raises(MemoryError, match=r"random_code needs about .* GiB .*its 200 candidate "
                       r"codes are scored at once; .*use fewer n_candidates or n_bits"):
        combine.random_code(0, 1000, 2000)


# --------------------------------------------------------------------------------------------
# Checks that need a fitted model (shared shapes: conftest.FIT_KW on N x F data).
# --------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(5)
    X = rng.normal(size=(N, F)).astype(np.float32)
    return X, (X[:, 0] > 0).astype(np.float32)


def _nan_everywhere(y, f):
    return jnp.nan * f


def _nan_for_positives(y, f):
    return jnp.where(y > 0.5, jnp.nan, (y - f) ** 2)


NON_FINITE = [
    (_nan_everywhere, {}, r"not finite from round 0 on .*baseline .* is \[nan\]"),
    (_nan_for_positives, {}, r"round 0 on .*not finite for \d+ of 200 rows"),
    ("squared_error", {"learning_rate": 1e30}, r"round 0 on .*learning_rate too large"),
]


@pytest.mark.parametrize("loss,kwargs,match", NON_FINITE)
@pytest.mark.filterwarnings("ignore:the gradient of loss")
def test_non_finite_training_loss_raises(data, loss, kwargs, match):
    X, y = data
    with pytest.raises(FloatingPointError, match=match):
        jboost.fit(X, y, loss, **FIT_KW, **kwargs)


@pytest.mark.parametrize("entry,loss,kwargs,match", [
    ("bagged_boosters", "squared_error", {"learning_rate": 1e30},
     r"bag 0 \(2 of 2 bags not finite\): .*round 0 on .*learning_rate too large"),
    ("stacking", "squared_error", {"hypers": [{"learning_rate": 1e30}]},
     r"learner 0 \(hypers\[0\]\) on fold 0's training rows .*round 0 on .*learning_rate too large"),
    ("bagged_boosters", _nan_for_positives, {}, r"bag 0 .*round 0 on .*not finite for \d+ of 200 rows"),
])
@pytest.mark.filterwarnings("ignore:the gradient of loss")
def test_non_finite_training_loss_raises_in_every_boosting_entry(data, entry, loss, kwargs, match):
    # Issue 14: learning_rate=1e30 or a loss NaN for some rows gave bagged boosters and stacking
    # -inf or NaN predictions with no word: fit's FloatingPointError (the same helper), naming
    # the bag or the (fold, learner) fit. Stacking's learning rate is a learner's hyperparameter.
    X, y = data
    with pytest.raises(FloatingPointError, match=match):
        ENTRY[entry](X, y, loss=loss, n_bins=32, **kwargs)


@pytest.mark.parametrize("entry", ["fit", "bagged_boosters"])
def test_labels_whose_squares_overflow_float32_are_fitted_scaled(data, entry):
    # Issue 14: labels at scale 3e18 (squares up to ~1e38, float32's max 3.4e38) overflowed the
    # training loss (a FloatingPointError naming the fix). Issue 40: fit and bagged boosters fit
    # y / 2^e (jboost.fitting.standardise), so the model is that of the unit-scale labels, scaled.
    X, _ = data
    unit = X[:, 0] + 0.3 * np.cos(7 * X[:, 1])
    pred = np.asarray(jboost.predict(ENTRY[entry](X, 3e18 * unit, n_bins=32), X), np.float64)
    ref = np.asarray(jboost.predict(ENTRY[entry](X, unit, n_bins=32), X), np.float64)
    np.testing.assert_allclose(pred / 3e18, ref, rtol=0, atol=1e-4 * np.std(unit))


def test_forest_of_huge_regression_labels_is_the_forest_of_the_scaled_labels(data):
    # Issue 14: labels at scale >= 1e18 overflowed the split gains G^2 / H in float32: a
    # near-constant forest (R^2 0.004; at 1e19 a constant). The forest is fitted on y / 2^e
    # (exact), so its trees are those of y, its leaves scaled: bitwise for a power of two.
    X, _ = data
    y = (X[:, 0] + 0.3 * np.cos(7 * X[:, 1])).astype(np.float32)
    kw = dict(task="regression", n_trees=2, depth=3, n_bins=32)
    ref = bagging.fit_forest(X, y, **kw)
    big = bagging.fit_forest(X, y * np.float32(2.0 ** 64), **kw)
    np.testing.assert_array_equal(big.trees.features, ref.trees.features)
    np.testing.assert_array_equal(big.trees.leaf_values, ref.trees.leaf_values * np.float32(2.0 ** 64))
    for scale in (1e18, 1e19):
        pred = np.asarray(jboost.predict(bagging.fit_forest(X, scale * y, **kw), X), np.float64) / scale
        r2 = 1 - np.mean((pred - y) ** 2) / np.var(y)
        assert r2 > 0.5, (scale, r2)


def test_gradient_boost_line_search_does_not_raise_the_loss():
    # Issue 14: ESL Alg. 10.3's leaf line search started from the tree's mean pseudo-residual,
    # 200 times the step for 100 (y - f)^2, and its 5 clipped Newton steps (max_step=1) could not
    # come back: the training loss rose 3.6e4 -> 1.7e12 in 4 rounds. It now starts from the
    # better of that value and 0 and never ends above 0: the loss falls as jboost.fit's does.
    X, y = X20, Y20
    scaled = algorithms.gradient_boost(X, y, lambda t, f: 100.0 * (t - f) ** 2, n_rounds=4, depth=2)
    curve = np.asarray(scaled.train_loss)
    assert np.all(np.diff(curve) < 0), curve


def test_checks_after_the_fit_are_skipped_under_vmap(data):
    # Traced hyperparameters: no host check (documented); the NaN rows are the caller's to read.
    X, y = data
    curves = jax.vmap(lambda lr: jboost.fit(X, y, **FIT_KW, learning_rate=lr).train_loss)(
        jnp.asarray([0.1, 1e30], jnp.float32))
    assert np.isfinite(np.asarray(curves[0])).all() and not np.isfinite(np.asarray(curves[1])).all()


def test_traced_loss_parameter_outside_its_domain_gives_a_nan_booster(data):
    # 4. jax.vmap(jboost.fit) over a loss parameter: the quantile level 1.5 cannot be refused on
    # the host; its Booster is NaN (train loss, baseline, predictions) and a warning names it.
    X, y = data
    with pytest.warns(UserWarning, match="alpha=1.5 is not in .*: this fit's results are NaN"):
        models = jax.block_until_ready(jax.vmap(lambda a: jboost.fit(X, y, jboost.losses.quantile(a), **FIT_KW))(
            jnp.asarray([0.5, 1.5], jnp.float32)))
    raw = np.asarray(jax.vmap(lambda m: jboost.predict(m, X))(models))
    assert np.isfinite(raw[0]).all() and np.isnan(raw[1]).all()
    assert np.isfinite(np.asarray(models.train_loss[0])).all() and np.isnan(np.asarray(models.train_loss[1])).all()


@pytest.mark.parametrize("entry,name,values", [
    ("fit_forest", "min_child_weight", [1.0, -1.0]),
    ("bagged_boosters", "learning_rate", [0.1, -1.0]),
])
def test_traced_settings_outside_their_domains_give_nan_models(data, entry, name, values):
    # 4. Under the caller's vmap a bad value cannot be refused on the host: its model is NaN
    # (never ranked) and a warning names the value when the program runs.
    X, y = data
    with pytest.warns(UserWarning, match=f"{name}=-1 is not in .*: this fit's results are NaN"):
        models = jax.block_until_ready(jax.vmap(lambda v: ENTRY[entry](X, y, **{name: v}))(
            jnp.asarray(values, jnp.float32)))
    proba = np.asarray(jax.vmap(lambda m: jboost.predict(m, X))(models))
    assert np.isfinite(proba[0]).all() and np.isnan(proba[1]).all()


def test_zero_gradient_loss_warns(data):
    X, y = data
    with pytest.warns(UserWarning, match="gradient of loss '_rounded' is zero at every row at the "
                                         "baseline.*nothing will be learned"):
        jboost.fit(X, y, _rounded, **FIT_KW)


class _Stop(Exception):
    pass


def _stop(*args, **kwargs):
    raise _Stop


# What each entry point compiles after its checks: replaced by _stop (no fit, no compile).
FITTERS = {"gradient_boost": (jboost.fitting.rounds, "run_rounds"),
           "forward_stagewise": (jboost.fitting.rounds, "run_rounds"),
           "bagged_boosters": (jboost.engine.batching, "map_checkpointed"),
           "sweep": (jboost.sweep.groups, "run_group")}


@pytest.mark.parametrize("entry", list(FITTERS))
def test_zero_gradient_loss_warns_in_every_boosting_entry(data, entry, monkeypatch):
    # Issue 14: the other entry points that take a loss returned all-zero models with no word:
    # fit's warning (the same helper), given before the fit (stopped there: nothing compiled).
    X, y = data
    monkeypatch.setattr(*FITTERS[entry], _stop)
    with pytest.warns(UserWarning, match="gradient of loss '_rounded' is zero at every row at the "
                                         "baseline.*nothing will be learned"):
        with pytest.raises(_Stop):
            ENTRY[entry](X, y, loss=_rounded, n_bins=32)


def _rounded(y, f):
    return jnp.round(f - y) ** 2


@pytest.mark.parametrize("loss", ["binomial_deviance", "exponential"])
@pytest.mark.parametrize("label", [0.0, 1.0])
def test_single_class_binary_labels_give_finite_models(data, loss, label):
    X, _ = data
    y = np.full(N, label, np.float32)
    model = jboost.fit(X, y, loss, **FIT_KW)
    for values in (model.baseline, model.train_loss, jboost.predict(model, X),
                   jboost.predict_proba(model, X)):
        assert np.isfinite(np.asarray(values)).all()
    assert (np.asarray(jboost.predict_class(model, X)) == label).all()


# The binary entry points (the all-0 and the all-1 labels share one compiled program).
BINARY_ENTRIES = {"bagged_boosters": {"loss": "binomial_deviance"},
                  "gradient_boost": {"loss": "binomial_deviance"}, "adaboost_m1": {},
                  "real_adaboost": {}, "stacking": {"loss": "binomial_deviance"}}
ENTRY["real_adaboost"] = lambda X, y, **kw: algorithms.real_adaboost(X, y, **{"n_rounds": 2, **kw})


@pytest.mark.slow
@pytest.mark.parametrize("entry", list(BINARY_ENTRIES))
@pytest.mark.parametrize("label", [0.0, 1.0])
def test_single_class_binary_labels_give_finite_models_in_every_boosting_entry(data, entry, label):
    # Issue 14: all-1 binary labels gave fit an infinite baseline (NaN losses): every binary
    # entry point gives a finite model that predicts the one class.
    X, _ = data
    y = np.full(N, label, np.float32)
    model = ENTRY[entry](X, y, n_bins=32, **BINARY_ENTRIES[entry])
    for values in (jboost.predict(model, X), jboost.predict_proba(model, X)):
        assert np.isfinite(np.asarray(values)).all()
    assert (np.asarray(jboost.predict_class(model, X)) == label).all()


@pytest.mark.parametrize("entry", ["samme", "samme_r", "logitboost", "fit_forest"])
def test_k_class_entries_refuse_labels_of_one_class_zero(data, entry):
    # K = max(y) + 1 = 1 class from all-0 labels: a clear refusal before anything compiles
    # (all-1 labels are K = 2 with class 0 absent: warned, and a finite model).
    X, _ = data
    kw = {"task": "classification"} if entry == "fit_forest" else {}
    with pytest.raises(ValueError, match=r"y holds a single class \(0\); pass n_classes or labels of "
                                         r"at least 2 classes"):
        ENTRY[entry](X, np.zeros(N, np.float32), n_bins=32, **kw)


def test_binary_baseline_clip_is_inactive_on_ordinary_labels():
    # The old formula (clip to [1e-12, 1 - 1e-12], which is 1.0 in float32) bitwise, for every
    # frequency below 1.
    rng = np.random.default_rng(0)
    old = jax.jit(lambda y, w: jnp.log(jnp.clip(jnp.sum(w * y) / jnp.sum(w), 1e-12, 1.0 - 1e-12)
                                       / (1.0 - jnp.clip(jnp.sum(w * y) / jnp.sum(w), 1e-12, 1.0 - 1e-12))))
    new = jax.jit(lambda y, w: losses.logit_baseline(y, w, 1)[0])
    for n, p in [(10, 0.5), (1000, 0.001), (1000, 0.999), (100000, 0.99999), (7, 0.0)]:
        y = (rng.random(n) < p).astype(np.float32)
        y[0] = 1.0 if p > 0 else 0.0
        w = rng.random(n).astype(np.float32)
        assert np.asarray(new(y, w)).tobytes() == np.asarray(old(y, w)).tobytes(), (n, p)
    assert np.isinf(np.asarray(old(np.ones(4, np.float32), np.ones(4, np.float32))))


def test_absent_class_gives_finite_multiclass_baselines():
    y = np.array([0, 2, 2, 0], np.float32)  # class 1 absent
    w = np.ones(4, np.float32)
    for loss in (losses.multinomial_deviance(3), losses.samme_exponential(3)):
        assert np.isfinite(np.asarray(losses.baseline(loss, y, w))).all()


def test_custom_binary_loss_gets_the_sigmoid_link(data):
    X, y = data
    loss = losses.Loss(losses.binomial_deviance_fn, task="binary", name="my_logloss")
    assert loss.link is losses.sigmoid_link
    assert losses.Loss(losses.multinomial_deviance_fn, task="multiclass", n_outputs=3).link is losses.softmax_link
    assert losses.Loss(losses.squared_error_fn).link is losses.identity_link
    model = jboost.fit(X, y, loss, **FIT_KW)
    proba = np.asarray(jboost.predict_proba(model, X))
    assert proba.shape == (N, 2)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0, rtol=1e-6)
    assert np.mean(np.asarray(jboost.predict_class(model, X)) == y) > 0.9


def test_predicting_zero_rows_gives_empty_arrays(data):
    X, y = data
    model = jboost.fit(X, y, "binomial_deviance", **FIT_KW)
    forest = bagging.fit_forest(X, y, n_trees=2, depth=2, n_bins=16)
    empty = np.zeros((0, F), np.float32)
    for m in (model, forest):
        assert np.asarray(jboost.predict(m, empty)).shape[0] == 0
        assert np.asarray(jboost.predict_proba(m, empty)).shape == (0, 2)
        assert np.asarray(jboost.predict_class(m, empty)).shape == (0,)
    for m in (model, forest):   # item 8: predictions check the number of columns
        with pytest.raises(ValueError, match=f"X has 3 features, but the model was fitted on {F}"):
            jboost.predict(m, X[:, :3])
        with pytest.raises(TypeError, match="X must be real; got a complex array"):
            jboost.predict(m, X.astype(np.complex64))


# 13. JBOOST_NUM_THREADS must be a positive integer: the kernels' thread count (read when a
# kernel's program is traced: binning, and predict's program). So that the program is traced
# here whatever ran before in the session, every case uses a row count no other test uses (the
# entry fails at binning, before a model is compiled).
THREADS = ["abc", "0", "-1", "1.5"]
THREAD_ENTRIES = ["predict", "fit", "fit_forest", "sweep"]


@pytest.mark.skipif(not _native.available(), reason="JBOOST_NUM_THREADS is read by the CPU kernels only")
@pytest.mark.parametrize("value", THREADS)
@pytest.mark.parametrize("entry", THREAD_ENTRIES)
def test_bad_thread_count_names_the_variable(monkeypatch, entry, value, data):
    X, y = data
    if entry == "predict":
        model = jboost.fit(X, y, "binomial_deviance", **FIT_KW)
    rows = N - 1 - len(THREADS) * THREAD_ENTRIES.index(entry) - THREADS.index(value)
    monkeypatch.setenv("JBOOST_NUM_THREADS", value)
    with pytest.raises(ValueError, match=f"JBOOST_NUM_THREADS='{value}' must be a positive integer .*"
                                         "set it to e.g. JBOOST_NUM_THREADS=2, or unset it"):
        if entry == "predict":
            jboost.predict(model, jnp.asarray(X[:rows]))
        else:
            ENTRY[entry](X[:rows], y[:rows])
    monkeypatch.setenv("JBOOST_NUM_THREADS", " 1 ")
    assert _native.cpu_threads() == 1
    monkeypatch.delenv("JBOOST_NUM_THREADS")
    assert _native.cpu_threads() >= 1


@pytest.mark.filterwarnings("ignore:the gradient of loss")  # true: 1e9 + y rounds to 1e9 in float32
def test_float64_labels_that_float32_cannot_tell_apart_warn():
    # 3. jboost computes in float32: 1e9 + N(0, 1) given as float64 collapses to a few values.
    # A custom loss warns with the fix (fit y - c, add c back in float64); labels that float32
    # holds well (any scale, small offsets, 0/1, integers) do not warn.
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 3))
    y = X[:, 0] + rng.normal(size=300)
    with pytest.warns(UserWarning, match=r"y loses precision in float32.*Fit y - c \(e.g. c = 1e\+09\)"):
        jboost.fit(X, 1e9 + y, lambda t, f: (t - f) ** 2, n_rounds=2, depth=2)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for labels in (y, 1e6 * y, 1e3 + y, (y > 0).astype(np.float64), np.round(10 * y).astype(np.int64)):
            jboost.fit(X, labels, n_rounds=2, depth=2)
    centred = jboost.fit(X, y, n_rounds=30, depth=2)  # the fix works: the offset is exact in float64
    err = np.sqrt(np.mean((1e9 + np.asarray(jboost.predict(centred, X), np.float64) - (1e9 + y)) ** 2))
    assert err < 1.0


@pytest.mark.slow
@pytest.mark.parametrize("loss", ["squared_error", "quantile"])
def test_losses_of_the_residual_remove_a_large_label_offset(loss):
    # 3. For a loss of the residual fit subtracts the labels' median in float64 and the model
    # adds it back (Booster.offset): the trees are those of y - c. In float32 the predictions near
    # 1e9 are still rounded to +-32 (warned); with jax_enable_x64 they are float64 and exact.
    rng = np.random.default_rng(1)
    X = rng.normal(size=(300, 3))
    y = X[:, 0] + 0.1 * rng.normal(size=300)
    with pytest.warns(UserWarning, match=r"y has a large offset \(median 1e\+09.*rounded to \+-32.*jax_enable_x64"):
        m = jboost.fit(X, 1e9 + y, loss, n_rounds=20, depth=3)
    c = float(m.offset)
    assert m.offset.dtype == jnp.float32 and c == np.float32(np.median(1e9 + y))
    ref = jboost.fit(X, (1e9 + y) - c, loss, n_rounds=20, depth=3)  # the user's own centring
    assert ref.offset is None
    np.testing.assert_array_equal(m.trees.leaf_values, ref.trees.leaf_values)
    np.testing.assert_array_equal(m.train_loss, ref.train_loss)
    np.testing.assert_array_equal(jboost.predict(m, X), jboost.predict(ref, X) + m.offset)
    if loss == "squared_error":  # a warm start keeps the offset: 10 + 10 rounds == 20 bitwise
        with pytest.warns(UserWarning, match="large offset"):
            half = jboost.fit(X, 1e9 + y, loss, n_rounds=10, depth=3)
        both = jboost.fit(X, 1e9 + y, loss, n_rounds=10, depth=3, init_model=half)
        np.testing.assert_array_equal(both.trees.leaf_values, m.trees.leaf_values)
        np.testing.assert_array_equal(jboost.predict(both, X), jboost.predict(m, X))
        with jax.enable_x64(True), jax.numpy_dtype_promotion("standard"):  # a user's defaults
            m64 = jboost.fit(X, 1e9 + y, loss, n_rounds=20, depth=3, eval_set=(X, 1e9 + y))
            p = np.asarray(jboost.predict(m64, X))
        assert p.dtype == np.float64 and m64.offset.dtype == np.float64
        np.testing.assert_allclose(m64.valid_loss, m64.train_loss, rtol=1e-6)  # eval labels centred too
        rmse = np.sqrt(np.mean((p - (1e9 + y)) ** 2))
        rmse_ref = np.sqrt(np.mean((np.asarray(jboost.predict(ref, X), np.float64) - ((1e9 + y) - c)) ** 2))
        assert rmse < 0.5 and abs(rmse - rmse_ref) < 1e-4, (rmse, rmse_ref)  # was 1152 before the offset


def test_float64_features_that_float32_merges_warn():
    # 3. A float64 feature 1e9 + N(0, 1) collapses to a few float32 values (spacing 64): warned
    # with the fix; timestamps-like offsets that bins still resolve, small values and float32
    # input do not warn.
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 3))
    y = X[:, 0] + rng.normal(size=300)
    shifted = X.copy()
    shifted[:, 1] += 1e9
    with pytest.warns(UserWarning, match=r"X loses precision in float32.*1 column\(s\) \(first: column 1"):
        jboost.fit(shifted, y, n_rounds=2, depth=2)
    stamps = X.copy()
    stamps[:, 2] = 1.7e9 + 1e6 * X[:, 2]  # seconds over weeks: float32 spacing 128 s, bins resolve it
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for ok in (X, stamps, X.astype(np.float32), np.round(100 * X).astype(np.int64)):
            jboost.fit(ok, y, n_rounds=2, depth=2)
