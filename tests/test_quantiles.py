"""Non-crossing multi-quantile regression (issue 44, part 3): ``jboost.losses.quantiles``.

* The map from raw scores to quantiles is non-decreasing in the level for any finite raw scores
  (property test, extreme values included), so no model's quantiles cross on any input: random
  models with random levels, predicted on rows far outside the training range and on NaNs.
* The baseline is the inverse map of the weighted sample quantiles (tied ones floored).
* On a heteroscedastic synthetic set the one model's quantiles are as good as separate
  ``jboost.losses.quantile(a)`` models: test pinball loss within 3% of each, coverage within
  0.03 of theirs.
* Bad levels are refused with the argument and the fix; vector labels are refused.
* The levels are a traced parameter: a ``jax.vmap`` over sets of levels is the separate fits,
  and levels that are not increasing give a NaN member, not a wrong model.
* A model file round trip (``jboost.save`` / ``jboost.load``) without ``loss=``.
"""

from __future__ import annotations

import os

import hypothesis
import hypothesis.extra.numpy as hnp
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import strategies as st

import jboost
from jboost import losses
from jboost.losses import multi_quantile

FIT = dict(n_rounds=30, depth=3, learning_rate=0.3)


def crossed_rows(Q) -> int:
    """The rows where some quantile is below the one of the level before it."""
    Q = np.asarray(Q)
    return int(np.sum(np.any(np.diff(Q, axis=-1) < 0, axis=-1)))


def assert_no_crossings(Q):
    Q = np.asarray(Q)
    assert np.all(np.isfinite(Q)), "quantiles must be finite"
    assert crossed_rows(Q) == 0, f"{crossed_rows(Q)} rows cross"


def hetero(n: int, seed: int):
    """``y = sin(3 x0) + x1 + 0.5 exp(0.8 x2 + 0.4 x0) eps``: the spread varies 20-fold."""
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1.0, 1.0, size=(n, 5))
    y = np.sin(3 * X[:, 0]) + X[:, 1] + 0.5 * np.exp(0.8 * X[:, 2] + 0.4 * X[:, 0]) * rng.normal(size=n)
    return X.astype(np.float32), y.astype(np.float32)


def pinball(y, q, a) -> float:
    r = np.asarray(y, np.float64) - np.asarray(q, np.float64)
    return float(np.mean(np.maximum(a * r, (a - 1) * r)))


# ---- The map: non-crossing by construction ---------------------------------------------------

EXTREME = st.one_of(st.floats(-2.0 ** 100, 2.0 ** 100, allow_nan=False, allow_infinity=False, width=32),
                    st.sampled_from([0.0, -1e30, 1e30, -88.0, 88.0, -1e-30, 1e-30, 3e38, -3e38]))


LINK = jax.jit(multi_quantile.noncrossing_link)


@hypothesis.settings(max_examples=200, deadline=None)
@hypothesis.given(k=st.integers(1, 6), data=st.data())
def test_the_link_never_crosses_for_any_raw_scores(k, data):
    raw = data.draw(hnp.arrays(np.float32, (16, k), elements=EXTREME))
    q = np.asarray(LINK(jnp.asarray(raw)))
    assert q.shape == raw.shape
    assert not np.any(np.isnan(q))
    finite = np.all(np.isfinite(q), axis=-1)   # an overflow to +inf keeps the order too
    assert crossed_rows(q[finite]) == 0
    np.testing.assert_allclose(q[:, 0], raw[:, 0], rtol=0, atol=np.finfo(np.float32).tiny)  # subnormals flush


def test_the_crossing_check_sees_crossings_of_an_unconstrained_map():
    """The mutant the link guards against: raw scores used as quantiles do cross."""
    raw = np.random.default_rng(0).normal(size=(1000, 3)).astype(np.float32)
    assert crossed_rows(raw) > 500
    with pytest.raises(AssertionError, match="rows cross"):
        assert_no_crossings(raw)
    assert_no_crossings(multi_quantile.noncrossing_link(raw))


def test_the_inverse_map_recovers_increasing_quantiles():
    q = jnp.array([[-3.0, -2.5, 0.0, 10.0], [1.0, 1.001, 1.002, 50.0]], jnp.float32)
    back = multi_quantile.noncrossing_link(multi_quantile.noncrossing_inverse(q))
    np.testing.assert_allclose(np.asarray(back), np.asarray(q), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("k, seed", [(2, 0), (5, 1)])
def test_random_models_never_cross_on_any_input(k, seed):
    """Eight models per case in one vmapped fit: random levels, learning rates and map scales,
    labels of a random scale; predicted on the training rows, new rows, rows 1e6 and 1e30 times outside the
    training range and rows with NaNs."""
    rng = np.random.default_rng(seed)
    levels = np.stack([np.sort(rng.choice(np.arange(1, 100), size=k, replace=False)) / 100.0
                       for _ in range(8)]).astype(np.float32)
    rates = rng.uniform(0.1, 1.0, size=8).astype(np.float32)
    scales = (10.0 ** rng.uniform(-3, 3, size=8)).astype(np.float32)      # the map's bend, traced
    X, y = hetero(400, seed)
    y = y * np.float32(10.0 ** rng.uniform(-2, 3))
    models = jax.vmap(lambda lv, lr, s: jboost.fit(X, y, losses.quantiles(lv, scale=s), n_rounds=20,
                                                   depth=3, learning_rate=lr, key=seed))(
        levels, rates, scales)
    Xt = rng.uniform(-1, 1, size=(300, 5)).astype(np.float32)
    far = np.concatenate([Xt * 1e6, -Xt * 1e30, np.full((5, 5), np.nan, np.float32),
                          np.where(rng.random((100, 5)) < 0.5, np.nan, Xt[:100])]).astype(np.float32)
    for rows in (X, Xt, far):
        Q = np.asarray(jboost.predict_mean(models, rows))
        assert Q.shape == (8, rows.shape[0], k)
        assert_no_crossings(Q)


def test_the_map_is_scale_equivariant_and_its_default_scale_is_one():
    raw = jnp.asarray(np.random.default_rng(1).normal(size=(50, 4)), jnp.float32)
    for c in (1e-3, 0.5, 1e3):
        np.testing.assert_allclose(np.asarray(multi_quantile.noncrossing_link(c * raw, scale=c)),
                                   c * np.asarray(multi_quantile.noncrossing_link(raw)),
                                   rtol=1e-5, atol=1e-6 * c)
    assert float(losses.quantiles().params["scale"]) == 1.0
    for bad in (0.0, -1.0):   # a scale no constructor would take (an edited model file): NaN
        q = np.asarray(multi_quantile.noncrossing_link(raw, scale=bad))
        assert np.all(q[:, 0] == np.asarray(raw[:, 0])) and np.all(np.isnan(q[:, 1:]))
    q = jnp.array([[0.0, 1e-4, 3e-4]], jnp.float32)
    back = multi_quantile.noncrossing_link(multi_quantile.noncrossing_inverse(q, scale=1e-4),
                                           scale=1e-4)
    np.testing.assert_allclose(np.asarray(back), np.asarray(q), rtol=1e-4, atol=1e-9)


def test_the_one_level_loss_is_the_pinball_loss():
    y, raw = jnp.float32(1.3), jnp.array([0.4], jnp.float32)
    assert float(losses.quantiles_fn(y, raw, jnp.array([0.8], jnp.float32))) == pytest.approx(
        float(losses.quantile_fn(y, raw[0], 0.8)))


# ---- Baseline ------------------------------------------------------------------------------


def test_the_baseline_is_the_sample_quantiles_mapped_back():
    _, y = hetero(2001, 0)
    w = np.ones_like(y)
    levels = np.array([0.1, 0.5, 0.9], np.float32)
    raw = losses.quantiles_baseline(jnp.asarray(y), jnp.asarray(w), 3, jnp.asarray(levels))
    q = np.asarray(multi_quantile.noncrossing_link(raw))
    want = [np.sort(y)[int(np.ceil(a * len(y))) - 1] for a in levels]   # inverted CDF
    np.testing.assert_allclose(q, want, rtol=1e-5, atol=1e-5)


def test_tied_sample_quantiles_get_a_floored_increment():
    y = jnp.array([0.0] * 90 + [1.0] * 10, jnp.float32)             # 0.1- and 0.5-quantiles tie
    raw = losses.quantiles_baseline(y, jnp.ones_like(y), 3, jnp.array([0.1, 0.5, 0.95]))
    q = np.asarray(multi_quantile.noncrossing_link(raw))
    assert np.all(np.isfinite(np.asarray(raw)))
    assert q[0] == 0.0 and 0 < q[1] - q[0] <= 1e-3 and q[2] == pytest.approx(1.0, abs=2e-3)


# ---- As good as one model per level ---------------------------------------------------------


def test_as_good_as_single_level_models_on_heteroscedastic_data():
    X, y = hetero(10000, 1)
    Xtr, ytr, Xte, yte = X[:5000], y[:5000], X[5000:], y[5000:]
    levels = (0.05, 0.5, 0.95)
    kw = dict(n_rounds=300, depth=4, learning_rate=0.1)
    Q = np.asarray(jboost.predict_mean(jboost.fit(Xtr, ytr, losses.quantiles(levels), **kw), Xte))
    assert_no_crossings(Q)
    for k, a in enumerate(levels):
        single = np.asarray(jboost.predict(jboost.fit(Xtr, ytr, losses.quantile(a), **kw), Xte))
        assert pinball(yte, Q[:, k], a) <= 1.03 * pinball(yte, single, a), a
        assert abs(np.mean(yte <= Q[:, k]) - np.mean(yte <= single)) <= 0.03, a
        assert abs(np.mean(yte <= Q[:, k]) - a) <= 0.03, a


# ---- Errors ------------------------------------------------------------------------------


@pytest.mark.parametrize("levels, match", [
    ([], "non-empty 1-D"), ([[0.1, 0.5]], "non-empty 1-D"), (0.5, "non-empty 1-D"),
    ([0.0, 0.5], r"in \(0, 1\)"), ([0.5, 1.0], r"in \(0, 1\)"), ([0.1, float("nan")], r"in \(0, 1\)"),
    ([0.5, 0.5], "strictly increasing"), ([0.9, 0.1], r"strictly increasing.*\[0.1, 0.9\]"),
])
def test_bad_levels_are_refused_naming_the_argument_and_the_fix(levels, match):
    with pytest.raises(ValueError, match=match) as err:
        losses.quantiles(levels)
    assert "levels" in str(err.value)


@pytest.mark.parametrize("scale", [0.0, -1.0, float("nan"), float("inf"), [1.0]])
def test_a_bad_scale_is_refused(scale):
    with pytest.raises(ValueError, match=r"scale=.* must be a finite number > 0"):
        losses.quantiles([0.1, 0.9], scale=scale)


def test_vector_labels_are_refused():
    X, y = hetero(100, 0)
    with pytest.raises(ValueError, match=r"y must have shape \(n,\)"):
        jboost.fit(X, np.stack([y, y], axis=1), losses.quantiles([0.1, 0.9]), n_rounds=2)


# ---- Traced levels, model files ---------------------------------------------------------------


def test_levels_are_traced_a_vmap_over_them_is_the_separate_fits():
    X, y = hetero(400, 2)
    sets = jnp.array([[0.1, 0.5, 0.9], [0.25, 0.5, 0.75]], jnp.float32)
    sweep = jax.vmap(lambda lv: jboost.fit(X, y, losses.quantiles(lv), **FIT))(sets)
    Q = np.asarray(jboost.predict_mean(sweep, X))
    assert Q.shape == (2, 400, 3)
    for i in range(2):
        one = jboost.fit(X, y, losses.quantiles(np.asarray(sets[i])), **FIT)
        np.testing.assert_allclose(Q[i], np.asarray(jboost.predict_mean(one, X)), rtol=1e-4,
                                   atol=1e-4)
        assert_no_crossings(Q[i])


def test_traced_levels_that_do_not_increase_give_a_nan_member():
    X, y = hetero(400, 2)
    sets = jnp.array([[0.1, 0.5, 0.9], [0.5, 0.2, 0.8]], jnp.float32)
    with pytest.warns(UserWarning, match="jax.vmap member 1"):
        sweep = jax.vmap(lambda lv: jboost.fit(X, y, losses.quantiles(lv), **FIT))(sets)
    curves = np.asarray(sweep.train_loss)
    assert np.all(np.isfinite(curves[0])) and np.all(np.isnan(curves[1]))


def test_a_model_file_round_trip_needs_no_loss(tmp_path):
    X, y = hetero(400, 3)
    model = jboost.fit(X, y, losses.quantiles([0.05, 0.5, 0.95]), **FIT)
    path = os.fspath(tmp_path / "quantiles.jbm")
    jboost.save(model, path)
    again = jboost.load(path)
    assert again.loss.fn is losses.quantiles_fn and again.loss.link is losses.noncrossing_link
    np.testing.assert_array_equal(np.asarray(again.loss.params["levels"]),
                                  np.float32([0.05, 0.5, 0.95]))
    np.testing.assert_array_equal(np.asarray(jboost.predict_mean(again, X)),
                                  np.asarray(jboost.predict_mean(model, X)))


def test_the_scikit_learn_score_of_a_quantile_loss_is_the_mean_d2_pinball_score():
    # R^2 would score a quantile fit against the mean; D^2 pinball scores what the loss fits
    pytest.importorskip("sklearn")
    from sklearn.metrics import d2_pinball_score, r2_score

    from jboost.sklearn import JBoostRegressor

    rng = np.random.default_rng(5)
    X = rng.normal(size=(400, 3)).astype(np.float32)
    y = (X[:, 0] + (1 + np.abs(X[:, 1])) * rng.normal(size=400)).astype(np.float32)
    w = rng.uniform(0.5, 2, size=400)
    levels = [0.1, 0.5, 0.9]
    multi = JBoostRegressor(loss=jboost.losses.quantiles(levels), n_rounds=15, depth=3).fit(X, y)
    q = multi.predict(X)
    assert q.shape == (400, 3)
    expected = np.mean([d2_pinball_score(y, q[:, k], alpha=a, sample_weight=w) for k, a in enumerate(levels)])
    assert multi.score(X, y, sample_weight=w) == pytest.approx(expected, rel=1e-6)
    one = JBoostRegressor(loss=jboost.losses.quantile(0.9), n_rounds=15, depth=3).fit(X, y)
    assert one.score(X, y) == pytest.approx(d2_pinball_score(y, one.predict(X), alpha=0.9), rel=1e-6)
    assert one.score(X, y) != pytest.approx(r2_score(y, one.predict(X)))
    mean = JBoostRegressor(n_rounds=15, depth=3).fit(X, y)
    assert mean.score(X, y) == pytest.approx(r2_score(y, mean.predict(X)), rel=1e-6)
