"""Numbers at the edges of float32: regression fits invariant to the labels' scale and shift
(jboost.fitting.standardise), and integer keys that never collide (jboost.checks.as_key).

Every fit here shares one shape and one set of static settings, so the file compiles a few
programs and then only runs them."""

from __future__ import annotations

import warnings

import jax
import numpy as np
import pytest

import jboost
from jboost.fitting import standardise
from jboost.losses import per_sample

N = 300
KW = dict(n_rounds=8, depth=2, learning_rate=0.3)


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(N, 3)).astype(np.float32)
    y = np.sin(2 * X[:, 0]) + 0.5 * X[:, 1] + 0.1 * rng.normal(size=N)
    return X, y


def _predict(model, X):
    return np.asarray(jboost.predict(model, X), np.float64)


def _fit(X, y, loss="squared_error", **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no warning on any scale or shift, but float32's own:
        warnings.filterwarnings("ignore", "y has a large offset")  # predictions near the offset
        warnings.filterwarnings("ignore", r"the labels' scale .* beyond float32")  # gains, curves
        return jboost.fit(X, y, loss, **{**KW, **kw})


def test_power_of_two_scales_give_bitwise_the_scaled_model(data):
    """Labels times 2^e, for 50 random e over float32's normal range: the model is bitwise the
    unit-scale model times 2^e (leaf values, baseline, predictions, losses)."""
    X, y = data
    y32 = y.astype(np.float32)
    unit = _fit(X, y32)
    for e in np.random.default_rng(1).integers(-118, 120, size=50):
        s = np.float32(2.0 ** int(e))
        m = _fit(X, y32 * s)
        np.testing.assert_array_equal(np.asarray(m.trees.leaf_values),
                                      np.asarray(unit.trees.leaf_values) * s, err_msg=f"2^{e}")
        np.testing.assert_array_equal(np.asarray(m.baseline), np.asarray(unit.baseline) * s)
        np.testing.assert_array_equal(np.asarray(m.trees.features), np.asarray(unit.trees.features))
        np.testing.assert_array_equal(np.asarray(jboost.predict(m, X)),
                                      np.asarray(jboost.predict(unit, X)) * s)


@pytest.mark.slow
@pytest.mark.parametrize("loss", ["squared_error", "absolute_error", "huber", "quantile"])
def test_random_scales_and_shifts_give_the_same_model_up_to_rounding(data, loss):
    """fit(y * s + t) predicts fit(y) * s + t up to rounding, for 50 random powers of ten s in
    [1e-30, 1e30] and shifts t up to 1e6 s (labels in float64), for each built-in loss of the
    residual (Huber's delta in label units: scaled with the labels)."""
    X, y = data
    rng = np.random.default_rng(2)
    unit = _fit(X, y, _loss(loss, 1.0))
    p_unit = _predict(unit, X)
    for _ in range(50):
        s = 10.0 ** int(rng.integers(-30, 31))
        t = float(rng.choice([0.0, 1.0, -1.0])) * s * 10.0 ** float(rng.uniform(-2, 6))
        m = _fit(X, y * s + t, _loss(loss, s))
        p = _predict(m, X)
        tol = 1e-4 * s * np.std(y) + 2 * np.spacing(np.float32(abs(t) + 4 * s))
        np.testing.assert_allclose(p, p_unit * s + t, rtol=0, atol=tol,
                                   err_msg=f"{loss}: scale {s:g}, shift {t:g}")


def _loss(name, s):
    return per_sample.huber(delta=0.5 * s) if name == "huber" else name


def test_tiny_and_huge_labels_fit_a_model_not_a_constant(data):
    """Labels of scale 1e-25 (underflowing squared gradients before) and 1e20 (overflowing
    losses before) give the unit-scale model, scaled."""
    X, y = data
    p_unit = _predict(_fit(X, y.astype(np.float32)), X)
    for s in (1e-25, 1e-35, 1e20, 1e30):
        p = _predict(_fit(X, (y * s).astype(np.float32)), X)
        assert np.std(p) > 0.5 * s * np.std(p_unit)
        np.testing.assert_allclose(p / s, p_unit, atol=1e-4 * np.std(y), err_msg=f"{s:g}")


def test_predictions_near_a_large_offset_are_exact_to_the_float32_grid(data):
    """Constant labels 1e9 (exact in float32) are predicted exactly; labels on the float32 grid
    near 1e9 are predicted within half the grid's spacing of the fit of the centred labels."""
    X, y = data
    m = _fit(X, np.full(N, 1e9, np.float32))
    np.testing.assert_array_equal(np.asarray(jboost.predict(m, X)), np.float32(1e9))
    k = np.round(20 * y)
    for base in (1e9, -3e8, 7e7):
        spacing = abs(float(np.spacing(np.float32(base))))
        labels = (np.float32(base) + np.float32(spacing) * k).astype(np.float32)
        p = _predict(_fit(X, labels), X)
        ref = _predict(_fit(X, (k * spacing).astype(np.float32)), X) + base
        assert np.max(np.abs(p - ref)) <= spacing / 2, base


def test_settings_in_label_units_follow_the_labels(data):
    """min_split_gain (squared label units), Huber's delta and the early-stopping tolerance mean
    the same at every scale: fit(y * s, setting * s^k) == fit(y, setting) * s."""
    X, y = data
    Xv, yv = X[:60], y[:60]
    base = dict(min_split_gain=0.3, early_stopping_rounds=2, early_stopping_tolerance=1e-3)
    unit = _fit(X, y, eval_set=(Xv, yv), n_rounds=30, **base)
    for s in (2.0 ** -50, 2.0 ** 40):  # losses (s^2) stay normal floats
        m = _fit(X, y * s, eval_set=(Xv, yv * s), n_rounds=30, min_split_gain=0.3 * s * s,
                 early_stopping_rounds=2, early_stopping_tolerance=1e-3 * s * s)
        assert m.n_rounds == unit.n_rounds and m.best_round == unit.best_round
        np.testing.assert_allclose(_predict(m, X) / s, _predict(unit, X), rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(np.asarray(m.train_loss) / (s * s),
                                   np.asarray(unit.train_loss), rtol=1e-6)


def test_huber_delta_is_recorded_in_label_units(data):
    X, y = data
    s = 2.0 ** -60
    m = _fit(X, y * s, per_sample.huber(delta=0.5 * s))
    assert float(m.loss.params["delta"]) == 0.5 * s


def test_callbacks_and_custom_metrics_see_label_units(data):
    """A callback's losses equal the model's; a custom metric sees labels and raw scores in label
    units (its values those of the model's predictions)."""
    X, y = data
    s = 2.0 ** -50
    seen, scores = [], []

    def mse_unit(yt, raw, w):
        return jax.numpy.mean((yt - raw.reshape(-1)) ** 2) / (s * s)

    def callback(info):
        seen.extend(np.asarray(info["train_loss"]).tolist())
        scores.extend(np.asarray(info["valid_metric"]).tolist())

    Xv, yv = X[:50], y[:50] * s
    m = jboost.fit(X, y * s, "squared_error", eval_set=(Xv, yv), eval_metric=mse_unit,
                   callbacks=[callback], **KW)
    np.testing.assert_allclose(seen, np.asarray(m.train_loss), rtol=1e-6)
    host = np.mean((_predict(m, Xv) - yv) ** 2) / (s * s)
    np.testing.assert_allclose(scores[-1], host, rtol=1e-4)
    unit = jboost.fit(X, y, "squared_error", eval_set=(X[:50], y[:50]), **KW)
    np.testing.assert_allclose(np.asarray(m.valid_loss) / (s * s), np.asarray(unit.valid_loss),
                               rtol=1e-5)


def test_a_checkpointed_standardised_fit_resumes_bitwise(data, tmp_path):
    X, y = data
    labels = (y * 1e-20).astype(np.float32)

    def crash(info):
        if info["round"] >= 6:
            raise RuntimeError("killed")

    kw = dict(checkpoint_dir=tmp_path, checkpoint_every=3)
    with pytest.raises(RuntimeError, match="killed"):
        jboost.fit(X, labels, "squared_error", callbacks=[crash], **{**KW, "n_rounds": 12}, **kw)
    resumed = jboost.fit(X, labels, "squared_error", **{**KW, "n_rounds": 12}, **kw)
    whole = jboost.fit(X, labels, "squared_error", **{**KW, "n_rounds": 12})
    np.testing.assert_array_equal(np.asarray(resumed.trees.leaf_values),
                                  np.asarray(whole.trees.leaf_values))
    np.testing.assert_array_equal(np.asarray(jboost.predict(resumed, X)),
                                  np.asarray(jboost.predict(whole, X)))


def test_label_scale_rule():
    """The documented rule: the power of two nearest the centred labels' standard deviation;
    the offset when the median exceeds CENTRE_RATIO standard deviations; none for
    classification and custom losses."""
    sq = per_sample.squared_error()
    y = np.array([1.0, 2.0, 3.0, 4.0]) * 1e-10
    ls = standardise.label_scale(y, y.astype(np.float32), sq, None)
    assert ls.offset is None and ls.exponent == int(np.round(np.log2(np.std(y))))
    const = np.full(5, 1e9)
    ls = standardise.label_scale(const, const.astype(np.float32), sq, None)
    assert float(ls.offset) == 1e9 and ls.exponent == 0
    zeros = np.zeros(5)
    assert standardise.label_scale(zeros, zeros.astype(np.float32), sq, None).exponent == 0
    custom = jboost.Loss(lambda yt, f: (yt - f[0]) ** 2)
    assert standardise.label_scale(y, y.astype(np.float32), custom, None) == standardise.NONE
    logistic = per_sample.binomial_deviance()
    assert standardise.label_scale(y, y.astype(np.float32), logistic, None) == standardise.NONE


# ---- Keys ----


def test_int_keys_beyond_32_bits_do_not_collide(data):
    """key=2**32 + 5 is not key=5 (it was, truncated); every key below 2**31 is JAX's PRNGKey."""
    X, y = data
    kw = dict(KW, subsample=0.5)
    fits = {k: _predict(_fit(X, y, key=k, **kw), X) for k in (5, 2 ** 32 + 5, 2 ** 63 + 5)}
    assert not np.array_equal(fits[5], fits[2 ** 32 + 5])
    assert not np.array_equal(fits[2 ** 32 + 5], fits[2 ** 63 + 5])
    np.testing.assert_array_equal(fits[5], _predict(_fit(X, y, key=jax.random.PRNGKey(5), **kw), X))
    np.testing.assert_array_equal(fits[5], _predict(_fit(X, y, key=jax.random.key(5), **kw), X))
    for k in np.random.default_rng(3).integers(0, 2 ** 31, size=20):
        np.testing.assert_array_equal(np.asarray(jboost.checks.as_key(int(k))),
                                      np.asarray(jax.random.PRNGKey(int(k))))
    seen = {tuple(np.asarray(jboost.checks.as_key(k)).tolist())
            for k in (0, 1, 2 ** 31, 2 ** 32 - 1, 2 ** 32, 2 ** 32 + 1, 2 ** 64 - 1)}
    assert len(seen) == 7


@pytest.mark.parametrize("key", [2 ** 64, 2 ** 70, -1, -(2 ** 40)])
def test_int_keys_outside_64_bits_are_refused_naming_key(data, key):
    X, y = data
    with pytest.raises(ValueError, match=r"key=.* is outside \[0, 2\*\*64\)"):
        jboost.fit(X, y, "squared_error", key=key, **KW)
    with pytest.raises(ValueError, match="key="):
        jboost.checks.as_key(key)


@pytest.mark.parametrize("scale", [1e-25, 1e20])
def test_sweeps_refuse_extreme_label_scales(data, scale):
    """Sweeps do not standardise: labels of an extreme scale are refused naming y and the fix
    (before: a silently constant sweep, or a FloatingPointError)."""
    X, y = data
    ys = (y * scale).astype(np.float32)
    with pytest.raises(ValueError, match="y has a spread of about 2\\^.*Fit y / "):
        jboost.sweep.sweep(X, ys, "squared_error", grid={"learning_rate": [0.1, 0.3]},
                           n_rounds=3, folds=2)


def test_bagged_boosters_standardise_their_labels(data):
    """Bagged boosters scale their labels as fit does: 2^e times the labels gives bitwise 2^e
    times the model, and labels of scale 1e-25 (a constant model before) or 1e20 (a
    FloatingPointError before) the unit model scaled."""
    X, y = data
    kw = dict(n_bags=2, n_rounds=5, depth=2, eval_set=(X[:50], y[:50].astype(np.float32)))
    unit = jboost.bagging.fit_bagged_boosters(X, y.astype(np.float32), "squared_error", **kw)
    s = np.float32(2.0 ** -90)
    m = jboost.bagging.fit_bagged_boosters(X, y.astype(np.float32) * s, "squared_error",
                                           **{**kw, "eval_set": (X[:50], kw["eval_set"][1] * s)})
    np.testing.assert_array_equal(np.asarray(jboost.predict(m, X)),
                                  np.asarray(jboost.predict(unit, X)) * s)
    np.testing.assert_array_equal(np.asarray(m.trees.leaf_values),
                                  np.asarray(unit.trees.leaf_values) * s)
    plain = dict(n_bags=2, n_rounds=5, depth=2)
    p_plain = _predict(jboost.bagging.fit_bagged_boosters(X, y.astype(np.float32),
                                                          "squared_error", **plain), X)
    for scale in (1e-25, 1e20):
        m = jboost.bagging.fit_bagged_boosters(X, (y * scale).astype(np.float32),
                                               "squared_error", **plain)
        np.testing.assert_allclose(_predict(m, X) / scale, p_plain, atol=1e-4)


def test_gains_and_curves_beyond_float32_in_label_units_are_named(data):
    """Labels of scale 1e25: split gains and squared-error loss curves in label units (1e50)
    exceed float32, and a warning says so (they are inf; the predictions are the unit model's
    scaled); at scale 1e5 they fit and nothing is said."""
    X, y = data
    unit = _fit(X, y)
    with pytest.warns(UserWarning, match=r"split gains and training loss curve beyond float32"):
        big = jboost.fit(X, y * 1e25, "squared_error", **KW)
    assert np.isinf(np.asarray(big.train_loss)).all()
    np.testing.assert_allclose(_predict(big, X), _predict(unit, X) * 1e25, rtol=1e-5)
    ok = _fit(X, y * 1e5)  # warnings are errors there
    assert np.isfinite(np.asarray(ok.trees.gains)).all()
