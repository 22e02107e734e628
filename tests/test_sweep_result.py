"""Tests of jboost.sweep.result: the selection (best round, best configuration, standard error),
the rows and the text table, the refit, and the cross-validation models as one batched
:class:`jboost.Booster` that jboost.predict accepts.

The sweep is that of test_sweep.py (same shapes: its compiled program is reused).
"""

import dataclasses
import json

import jax.numpy as jnp
import numpy as np
import pytest

import jboost
import jboost.sweep as sweep_lib
from test_sweep import BINS, DEPTH, GRID_A, N, ROUNDS, _assert_same_trees, _data, _sweep_a


@pytest.fixture(scope="module")
def data():
    return _data()


@pytest.fixture(scope="module")
def res_a(data):
    return _sweep_a(*data)


def test_best_round_best_config_and_refit_match_numpy_and_a_direct_fit(res_a, data):
    X, y = data
    curves = res_a.valid_curves.reshape(4, 6, ROUNDS)
    mean = curves.mean(1)
    se = curves.std(1, ddof=1) / np.sqrt(6)
    best_rounds = mean.argmin(1) + 1
    np.testing.assert_array_equal(res_a.best_rounds, best_rounds)
    assert best_rounds.min() < ROUNDS  # learning rate 1.5 overfits: early stopping matters
    best = int(np.argmin(mean[np.arange(4), best_rounds - 1]))
    assert res_a.best_index == best
    assert res_a.best["mean"] == pytest.approx(mean[best, best_rounds[best] - 1])
    assert res_a.best["se"] == pytest.approx(se[best, best_rounds[best] - 1])
    cfg = res_a.configs[best]
    model = sweep_lib.refit(res_a, X, y)
    direct = jboost.fit(X, y, "binomial_deviance", n_rounds=int(best_rounds[best]), depth=DEPTH,
                        n_bins=BINS, learning_rate=cfg["learning_rate"], subsample=cfg["subsample"],
                        key=jnp.asarray(res_a.seed_keys[0]))
    assert isinstance(model, jboost.Booster)
    assert model.n_rounds == best_rounds[best]
    _assert_same_trees(model.trees, direct.trees, "refit")
    np.testing.assert_array_equal(np.asarray(model.baseline), np.asarray(direct.baseline))


def test_table_rows_and_text(res_a):
    rows = res_a.to_rows()
    assert len(rows) == res_a.n_rows
    r = rows[5]
    assert set(GRID_A) <= set(r) and {"fold", "seed", "best_round", "valid_curve"} <= set(r)
    assert r["valid_curve"] == res_a.valid_curves[5].tolist()
    assert r["best"] == min(r["valid_curve"])
    json.dumps(rows)
    summary = res_a.summary()
    assert [s["best_round"] for s in summary] == res_a.best_rounds.tolist()
    text = str(res_a)
    assert "<- best" in text and "learning_rate" in text and len(text.splitlines()) == 2 + 4


# --------------------------------------------------------------------------------------------
# The models: one batched Booster.
# --------------------------------------------------------------------------------------------


def _separate_fit(res, X, y, row, n_rounds=None):
    """The model of ``row`` fitted on its own by jboost.fit (its training folds, its key)."""
    w_train, _ = res.fold_weights(row)
    kwargs = res.fit_kwargs(res.config[row])
    if n_rounds is not None:
        kwargs["n_rounds"] = n_rounds
    return jboost.fit(X, y, **kwargs, sample_weight=w_train, key=res.row_key(row))


@pytest.mark.parametrize("which", ["best", "other"])
def test_models_predict_as_the_separately_fitted_models(res_a, data, which):
    X, y = data
    c = res_a.best_index if which == "best" else (res_a.best_index + 1) % res_a.n_configs
    rows = res_a.rows_of(c)
    models = res_a.models() if which == "best" else res_a.models(rows)
    assert isinstance(models, jboost.Booster)
    assert models.batch_shape == (rows.size,) == (6,) and models.n_rounds == ROUNDS
    raw = np.asarray(jboost.predict(models, X))
    proba = np.asarray(jboost.predict_proba(models, X))
    labels = np.asarray(jboost.predict_class(models, X))
    assert raw.shape == (6, N) and proba.shape == (6, N, 2) and labels.shape == (6, N)
    for j, row in enumerate(rows):
        single = _separate_fit(res_a, X, y, row)
        np.testing.assert_allclose(raw[j], np.asarray(jboost.predict(single, X)), rtol=1e-5,
                                   atol=1e-6, err_msg=f"row {row}")
        np.testing.assert_allclose(proba[j], np.asarray(jboost.predict_proba(single, X)),
                                   rtol=1e-5, atol=1e-6, err_msg=f"row {row}")
        np.testing.assert_allclose(np.asarray(models.baseline[j]), np.asarray(single.baseline),
                                   rtol=1e-6)
        np.testing.assert_allclose(np.asarray(models.train_loss[j]), np.asarray(single.train_loss),
                                   rtol=2e-6)
    np.testing.assert_array_equal(np.asarray(models.valid_loss),
                                  res_a.valid_curves[rows].astype(np.float32))


def test_models_of_any_rows_keep_the_first_rounds(data):
    X, y = data
    # Two round counts share the fits (one group): rows of the 6-round configurations read the
    # first 6 rounds of models fitted to ROUNDS.
    res = _sweep_a(X, y, n_rounds=[ROUNDS, 6])
    c = next(c for c, cfg in enumerate(res.configs) if cfg["n_rounds"] == 6 and c != res.best_index)
    rows = res.rows_of(c)
    models = res.models(rows)
    assert models.batch_shape == (6,) and models.n_rounds == 6
    raw = np.asarray(jboost.predict(models, X))
    for j in (0, 5):
        single = _separate_fit(res, X, y, rows[j])
        assert single.n_rounds == 6
        np.testing.assert_allclose(raw[j], np.asarray(jboost.predict(single, X)), rtol=1e-5,
                                   atol=1e-6, err_msg=f"row {rows[j]}")
    with pytest.raises(ValueError, match="different n_rounds"):
        res.models(range(res.n_rows))
    every = res.models(range(res.n_rows), n_rounds=5)
    assert every.batch_shape == (res.n_rows,) and every.n_rounds == 5
    raw = np.asarray(jboost.predict(every, X))
    for row in (3, res.n_rows - 7):
        single = _separate_fit(res, X, y, row, n_rounds=5)
        np.testing.assert_allclose(raw[row], np.asarray(jboost.predict(single, X)), rtol=1e-5,
                                   atol=1e-6, err_msg=f"row {row}")


def test_models_errors(res_a):
    with pytest.raises(ValueError, match="keep_trees=True"):
        dataclasses.replace(res_a, trees=None).models()
    with pytest.raises(ValueError, match="row indices"):
        res_a.models([res_a.n_rows])
    with pytest.raises(ValueError, match="n_rounds"):
        res_a.models([0], n_rounds=ROUNDS + 1)
