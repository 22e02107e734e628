"""Split conformal calibration of quantile models (``jboost.calibrate_quantiles``,
jboost/fine_tuning/calibrate.py): on random data, models and calibration sets, each level's
coverage of the calibration rows is the smallest at or above ``ceil((n + 1) a) / n``; only the
baseline moves; a multi-quantile model still never crosses; new rows of the same distribution
are covered close to the level; errors name the argument and the fix."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jboost
from jboost.fine_tuning import calibrate


def draw(seed: int, n: int):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1, 1, size=(n, 3)).astype(np.float32)
    y = (np.sin(3 * X[:, 0]) + 0.5 * np.exp(X[:, 1]) * rng.normal(size=n)).astype(np.float32)
    return X, y


def coverage(model, X, y):
    q = np.asarray(jboost.predict_mean(model, X)).reshape(len(y), -1)
    return np.mean(y[:, None] <= q, axis=0), q


@pytest.mark.parametrize("seed", range(6))
def test_each_level_reaches_its_target_on_the_calibration_rows(seed):
    rng = np.random.default_rng(seed)
    levels = np.sort(rng.choice(np.arange(0.05, 0.96, 0.05), size=int(rng.integers(1, 5)), replace=False))
    loss = (jboost.losses.quantile(float(levels[0])) if len(levels) == 1 or seed % 3 == 0
            else jboost.losses.quantiles(levels.tolist()))
    levels = levels[:1] if loss.name == "quantile" else levels
    X, y = draw(seed, 800)
    Xc, yc = draw(seed + 100, int(rng.integers(50, 600)))
    model = jboost.fit(X, y, loss, n_rounds=int(rng.integers(5, 60)), depth=int(rng.integers(2, 6)),
                       learning_rate=float(rng.choice([0.1, 0.5])), key=seed)
    w = rng.uniform(0.5, 2.0, size=len(yc)) if seed % 2 else None
    cal = jboost.calibrate_quantiles(model, Xc, yc, sample_weight=w)
    for name in ("features", "thresholds", "leaf_values"):  # only the baseline moves
        assert np.array_equal(np.asarray(getattr(cal.trees, name)), np.asarray(getattr(model.trees, name)))
    q = np.asarray(jboost.predict_mean(cal, Xc)).reshape(len(yc), -1)
    weights = np.ones(len(yc)) if w is None else w
    step = weights.max() / weights.sum()  # one row's share: coverage moves row by row
    previous = 0.0
    for k, a in enumerate(levels):
        target = calibrate.target_coverage(float(a), len(yc))
        covered = np.sum(weights * (yc <= q[:, k])) / np.sum(weights)
        assert covered >= target - 1e-12, (k, a, covered, target)
        # the smallest such coverage: within one row of the target, unless the level below
        # already covers more (a level's quantile never goes below the one under it)
        assert covered < target + step + 1e-9 or covered <= previous + step, (k, a, covered, target)
        previous = covered
    if q.shape[1] > 1:  # never crosses, on any input
        wide = np.random.default_rng(seed).uniform(-50, 50, size=(2000, 3)).astype(np.float32)
        qq = np.asarray(jboost.predict_mean(cal, wide))
        assert np.all(np.diff(qq, axis=1) >= 0)


def test_new_rows_are_covered_close_to_the_level():
    X, y = draw(0, 3000)
    Xc, yc = draw(1, 3000)
    Xt, yt = draw(2, 20000)
    levels = [0.1, 0.5, 0.9]
    model = jboost.fit(X, y, jboost.losses.quantiles(levels), n_rounds=300, depth=5, learning_rate=0.3)
    before, _ = coverage(model, Xt, yt)
    after, _ = coverage(jboost.calibrate_quantiles(model, Xc, yc), Xt, yt)
    assert np.max(np.abs(before - levels)) > 0.05  # the fitted model covers poorly on new rows
    assert np.max(np.abs(after - levels)) < 0.02


def test_the_calibrated_model_is_a_booster_like_any_other(tmp_path):
    X, y = draw(3, 500)
    model = jboost.fit(X, y, jboost.losses.quantiles([0.2, 0.8]), n_rounds=10, depth=3)
    cal = jboost.calibrate_quantiles(model, *draw(4, 300))
    jboost.save(cal, tmp_path / "cal.jbm")
    again = jboost.load(tmp_path / "cal.jbm")
    assert np.array_equal(np.asarray(jboost.predict_mean(again, X)), np.asarray(jboost.predict_mean(cal, X)))
    assert not np.array_equal(np.asarray(cal.baseline), np.asarray(model.baseline))


def test_errors_name_the_argument_and_the_fix():
    X, y = draw(5, 300)
    with pytest.raises(ValueError, match="quantile"):
        jboost.calibrate_quantiles(jboost.fit(X, y, n_rounds=2, depth=2), X, y)
    model = jboost.fit(X, y, jboost.losses.quantile(0.7), n_rounds=2, depth=2)
    with pytest.raises(ValueError, match="one label per row"):
        jboost.calibrate_quantiles(model, X, y[:10])
    with pytest.raises(ValueError, match="NaN"):
        jboost.calibrate_quantiles(model, X, np.where(np.arange(300) == 3, np.nan, y))
    batch = jax.vmap(lambda lr: jboost.fit(X, y, jboost.losses.quantile(0.7), n_rounds=2, depth=2,
                                           learning_rate=lr))(jnp.array([0.1, 0.3]))
    with pytest.raises(ValueError, match="batch"):
        jboost.calibrate_quantiles(batch, X, y)
    with pytest.raises(TypeError, match="jboost.Booster"):
        jboost.calibrate_quantiles("model", X, y)
