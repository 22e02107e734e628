"""Tests of jboost.sweep.result: the selection (best round, best configuration, standard error),
the rows and the text table, the refit, and the cross-validation models as one batched
:class:`jboost.Booster` that jboost.predict accepts; with early stopping per fit, the selection
on the rounds every fit ran, each row's stopping record, and the models' best rounds.

The sweeps are those of test_sweep.py (same shapes: their compiled programs are reused).
"""

import dataclasses
import json
import warnings

import jax.numpy as jnp
import numpy as np
import pytest

import jboost
import jboost.sweep as sweep_lib
from test_sweep import (BINS, DEPTH, ES_PATIENCE, GRID_A, N, ROUNDS, _assert_same_trees, _data,
                        _sweep_a, _sweep_es)
from jboost.fitting import prepare
from jboost.fitting import settings
from jboost.sweep import program


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


def test_non_finite_means_are_never_ranked_and_are_named():
    # Config 0 finite; 1 NaN everywhere (a setting outside its domain under vmap); 2 diverges to
    # -inf at round 2 (below every finite value) and is otherwise worse than 0.
    configs = [{"alpha": a, "n_rounds": 3, "depth": 2, "n_bins": 8} for a in (0.5, 1.5, 0.9)]
    curves = np.array([[3.0, 2.0, 1.0], [3.0, 2.0, 1.0],
                       [np.nan] * 3, [np.nan] * 3,
                       [5.0, -np.inf, 4.0], [5.0, 1.0, 4.0]])
    with pytest.warns(UserWarning, match=r"configurations 1 \{'alpha': 1.5.*no finite validation metric "
                      r"and are not ranked.*configurations 2 \{'alpha': 0.9.*ranked by their finite "
                      r"rounds only"):
        sel = sweep_lib.result.select(curves, configs, 2, greater=False)
    assert sel.best_index == 0 and np.isnan(sel.best_scores[1])
    assert sel.best_rounds.tolist() == [3, 3, 3] and sel.best_scores[2] == 4.0
    with pytest.warns(UserWarning, match="configurations 2"):   # the direction does not matter
        assert sweep_lib.result.select(-curves, configs, 2, greater=True).best_index == 0


def test_program_gives_nan_curves_outside_the_domains(data):
    # The sweep refuses bad grid values on the host; its program does not rank them either.
    import functools
    import jax
    from jboost import losses
    X, y = data
    prepared = prepare.prepare(X, y, n_bins=BINS)
    config, _ = settings.settings(n_rounds=2, depth=DEPTH, n_bins=BINS, **{
        k: 1.0 for k in ("l2", "min_child_weight", "subsample", "colsample")},
        learning_rate=0.1, min_split_gain=0.0, colsample_by="tree")
    hyper = jboost.engine.boosting.Hyperparams.create(learning_rate=jnp.asarray([0.1, 0.1, -0.1]),
                                               l2=jnp.ones(3), min_split_gain=jnp.zeros(3),
                                               min_child_weight=jnp.ones(3), subsample=jnp.ones(3),
                                               colsample=jnp.ones(3))
    loss = losses.quantile(0.5).replace(params={"alpha": jnp.asarray([0.5, 1.5, 0.5])})
    fit = jax.jit(functools.partial(program.fit_chunk, config=config, metric=None,
                                    keep_trees=False))
    out = fit(prepared.X_binned, prepared.y, prepared.w, (jnp.arange(N) % 2)[None].astype(jnp.int32),
              jnp.zeros((1, 2), jnp.uint32), hyper, loss, jnp.asarray([1, 1, 1]), jnp.zeros(3, jnp.int32))
    finite = [bool(np.isfinite(np.asarray(c)).all()) for c in (out.valid, out.train)]
    assert finite == [False, False]
    for curves in (out.valid, out.train):
        assert np.isfinite(np.asarray(curves[0])).all() and np.isnan(np.asarray(curves[1:])).all()


# --------------------------------------------------------------------------------------------
# Early stopping per fit.
# --------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def res_es(data):
    return _sweep_es(*data)


def test_early_stopped_selection_is_the_mean_curve_over_the_rounds_every_fit_ran(res_es):
    n_per = 6  # 3 folds x 2 seeds
    curves = res_es.valid_curves.reshape(res_es.n_configs, n_per, -1)
    fitted = res_es.rounds_fitted.reshape(res_es.n_configs, n_per)
    common = fitted.min(axis=1)
    assert np.all(common < fitted.max(axis=1))  # the fits of a configuration stop apart
    for c in range(res_es.n_configs):
        mean = curves[c, :, :common[c]].mean(axis=0)  # finite: every fit ran these rounds
        assert np.isfinite(mean).all() and np.isnan(res_es.mean_curves[c, common[c]:]).all()
        assert res_es.best_rounds[c] == np.argmin(mean) + 1
        assert res_es.best_scores[c] == pytest.approx(mean.min())
    assert res_es.best_index == int(np.argmin(res_es.best_scores))
    # The NaN after each fit's stop is not a diverged fit: no warning. The same curves without
    # the stops are warned about.
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        sweep_lib.result.select(res_es.valid_curves, res_es.configs, n_per, False,
                                res_es.rounds_fitted)
    with pytest.warns(UserWarning, match="NaN or infinite at some rounds"):
        sweep_lib.result.select(res_es.valid_curves, res_es.configs, n_per, False)


def test_early_stopped_rows_models_and_refit_use_the_chosen_round(res_es, data, monkeypatch):
    X, y = data
    rows = res_es.to_rows()
    for i in (0, 13, 40):
        k = res_es.rounds_fitted[i]
        assert rows[i]["rounds_fitted"] == k and rows[i]["best_round"] == res_es.row_best_rounds[i]
        assert rows[i]["final"] == res_es.valid_curves[i, k - 1]
        assert rows[i]["best"] == res_es.valid_curves[i, res_es.row_best_rounds[i] - 1]
    json.dumps(rows)
    assert f"each fit stopped after {ES_PATIENCE} rounds without improvement" in str(res_es)
    # The fold models predict with their configuration's chosen round count.
    c = res_es.best_index
    models = res_es.models()
    chosen = int(res_es.best_rounds[c])
    np.testing.assert_array_equal(np.asarray(models.best_round), chosen - 1)
    np.testing.assert_array_equal(np.asarray(jboost.predict(models, X)),
                                  np.asarray(jboost.predict(models, X, n_rounds=chosen)))
    assert not np.allclose(np.asarray(jboost.predict(models, X)),
                           np.asarray(jboost.predict(models._replace(best_round=None), X)))
    short = res_es.models(n_rounds=2)
    np.testing.assert_array_equal(np.asarray(short.best_round), min(chosen, 2) - 1)
    # refit: the chosen round count on all the rows, without early stopping.
    seen = {}
    monkeypatch.setattr(jboost.fitting.boost, "fit", lambda X, y, **kw: seen.update(kw))
    res_es.refit(X, y)
    assert seen["n_rounds"] == chosen and "early_stopping_rounds" not in seen


def test_stopping_best_follows_the_early_stopping_rule():
    nan = np.nan
    curves = np.array([[1.0, 0.95, 0.94, 0.8, nan],
                       [nan, nan, 2.0, 2.0, 1.0],
                       [nan, nan, nan, nan, nan]])
    # A round improves when below the best so far minus the tolerance; NaN never improves.
    np.testing.assert_array_equal(sweep_lib.result.stopping_best(curves, 0.0, False), [4, 5, 0])
    np.testing.assert_array_equal(sweep_lib.result.stopping_best(curves, 0.02, False), [4, 5, 0])
    np.testing.assert_array_equal(sweep_lib.result.stopping_best(curves, 0.1, False), [4, 5, 0])
    np.testing.assert_array_equal(sweep_lib.result.stopping_best(curves, 0.21, False), [1, 5, 0])
    np.testing.assert_array_equal(sweep_lib.result.stopping_best(curves[:, :4], 0.02, False), [4, 3, 0])
    np.testing.assert_array_equal(sweep_lib.result.stopping_best(-curves, 0.0, True), [4, 5, 0])
    np.testing.assert_array_equal(sweep_lib.result.stopping_best(curves, 0.0, True), [1, 3, 0])
