"""Tests of jboost.sweep (the package: sweep(), its grid, metrics and compiled program): every
row is the model jboost.fit gives for that configuration, fold and seed; held-out labels never
reach a row's trees; chunking, one compilation per static combination, devices; early stopping
per fit (each vmapped fit stops on its own and equals its separate early-stopped fit). The result
(selection, table, refit, models) is tested in test_sweep_result.py, folds in test_cv.py.

Small data, depth 2, 16 bins: each distinct static setting costs one compilation, so the tests
share a few sweeps through module-scoped fixtures.
"""

import json
import os
import re
import subprocess
import sys
import warnings

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from tests import _processes

import jboost
import jboost.sweep as sweep_lib
from jboost.sweep import program as program_lib
from jboost.engine import checkpoints
from jboost.engine import memory
from jboost.trees import family

N, DEPTH, BINS, ROUNDS = 240, 2, 16, 12
GRID_A = {"learning_rate": [0.3, 1.5], "subsample": [0.6, 1.0]}


def _data(n=N, seed=1):
    X, y = jboost.datasets.nested_spheres(n, seed=seed)
    return X[:, :4], y


def _sweep_a(X, y, **kw):
    args = dict(grid=GRID_A, folds=3, seeds=2, n_rounds=ROUNDS, depth=DEPTH, n_bins=BINS, key=7,
                keep_trees=True, chunk_size=8)  # 3 chunks (automatic: one, see below)
    args.update(kw)
    return sweep_lib.sweep(X, y, "binomial_deviance", **args)


@pytest.fixture(scope="module")
def data():
    return _data()


@pytest.fixture(scope="module")
def res_a(data):
    return _sweep_a(*data)


ES_ROUNDS, ES_PATIENCE, ES_TOLERANCE = 40, 3, 1e-3


def _sweep_es(X, y, **kw):
    """GRID_A's sweep with early stopping: its 24 models in one chunk, fitted to 40 rounds at
    most; configurations of 40 and of 10 rounds (the latter read the first 10 rounds)."""
    args = dict(n_rounds=[ES_ROUNDS, 10], early_stopping_rounds=ES_PATIENCE,
                early_stopping_tolerance=ES_TOLERANCE, chunk_size=24)
    args.update(kw)
    return _sweep_a(X, y, **args)


@pytest.fixture(scope="module")
def res_es(data):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the NaN after each fit's stop is no diverged fit
        return _sweep_es(*data)


def _row_trees(res, i):
    cfg = res.configs[res.config[i]]
    trees = res.trees[(cfg["depth"], cfg["n_bins"])]
    return jax.tree_util.tree_map(lambda a: a[res.model_of_row[i]], trees)


def _assert_same_trees(a, b, where):
    for name in ("features", "thresholds", "missing_right", "borders"):
        np.testing.assert_array_equal(np.asarray(getattr(a, name)), np.asarray(getattr(b, name)),
                                      err_msg=f"{where}: {name}")
    np.testing.assert_allclose(np.asarray(a.leaf_values), np.asarray(b.leaf_values), rtol=1e-6,
                               atol=1e-7, err_msg=f"{where}: leaf_values")


def _check_rows_against_fits(res, X, y, rows):
    for i in rows:
        w_train, w_valid = res.fold_weights(i)
        model = jboost.fit(X, y, **res.fit_kwargs(res.config[i]), sample_weight=w_train,
                           eval_set=(X, y, w_valid), key=res.row_key(i))
        _assert_same_trees(model.trees, _row_trees(res, i), f"row {i}")
        r = res.configs[res.config[i]]["n_rounds"]
        np.testing.assert_allclose(res.valid_curves[i, :r], np.asarray(model.valid_loss), rtol=2e-6,
                                   err_msg=f"row {i} validation curve")
        np.testing.assert_allclose(res.train_curves[i, :r], np.asarray(model.train_loss), rtol=2e-6,
                                   err_msg=f"row {i} training curve")


# --------------------------------------------------------------------------------------------
# Every row is the separately fitted model.
# --------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_every_row_equals_its_separate_fit(res_a, data):
    X, y = data
    assert res_a.n_rows == 4 * 3 * 2 and res_a.n_configs == 4
    # Seeds differ (subsample < 1 draws different rows), folds differ: the rows are not copies.
    assert not np.array_equal(res_a.valid_curves[0], res_a.valid_curves[1])
    _check_rows_against_fits(res_a, X, y, range(res_a.n_rows))


@pytest.mark.slow
def test_loss_parameter_sweep_with_sample_weights_equals_separate_fits():
    X, y = jboost.datasets.make_regression(200, n_features=5, n_informative=3, seed=3)
    w = np.random.default_rng(0).uniform(0.2, 2.0, size=200).astype(np.float32)
    res = sweep_lib.sweep(X, y, "quantile", grid={"alpha": [0.1, 0.5, 0.9], "learning_rate": [0.2, 0.5]},
                          folds=2, seeds=1, n_rounds=6, depth=DEPTH, n_bins=BINS, sample_weight=w,
                          keep_trees=True, key=3)
    assert res.swept == ("alpha", "learning_rate")
    assert res.fit_kwargs(0)["loss"].params["alpha"] == pytest.approx(0.1)
    # The loss parameter reached the fits: each level's held-out pinball loss is its own.
    assert len({round(float(v), 6) for v in res.best_scores}) == res.n_configs
    _check_rows_against_fits(res, X, y, range(res.n_rows))
    # Validation weights are the sample weights on the held-out fold only.
    w_train, w_valid = res.fold_weights(0)
    held = res.fold_table[0] == res.fold[0]
    np.testing.assert_array_equal(w_valid, np.where(held, w, 0))
    np.testing.assert_array_equal(w_train, np.where(held, 0, w))
    with pytest.raises(ValueError, match="pass sample_weight"):
        res.refit(X[:50], y[:50])  # the sweep's weights are for 200 rows
    # The batched models carry each row's loss parameter (predict_mean is the loss's link).
    rows = res.rows_of(4)  # alpha 0.9, learning rate 0.2
    models = res.models(rows)
    np.testing.assert_array_equal(np.asarray(models.loss.params["alpha"]), np.float32(0.9))
    single = jboost.fit(X, y, **res.fit_kwargs(4), sample_weight=res.fold_weights(rows[1])[0],
                        key=res.row_key(rows[1]))
    np.testing.assert_allclose(np.asarray(jboost.predict_mean(models, X))[1],
                               np.asarray(jboost.predict_mean(single, X)), rtol=1e-5, atol=1e-6)


@pytest.mark.slow
def test_multiclass_per_output_trees_rows_equal_separate_fits():
    X, y = jboost.datasets.samme_gaussian(150, seed=0)
    X = X[:, :4]
    res = sweep_lib.sweep(X, y, "multinomial_deviance", grid={"l2": [0.5, 4.0]}, folds=2, seeds=1,
                          n_rounds=4, depth=DEPTH, n_bins=BINS, per_output_trees=True, keep_trees=True)
    assert res.trees[(DEPTH, BINS)].leaf_values.shape == (4, 4, 3, 2**DEPTH, 3)  # models, rounds, K trees
    _check_rows_against_fits(res, X, y, range(res.n_rows))


# --------------------------------------------------------------------------------------------
# Folds do not leak.
# --------------------------------------------------------------------------------------------


def _held_out_error(trees, X, y, w_valid, baseline, m):
    """Weighted error of sign(raw) after m rounds, computed with NumPy from the trees."""
    first = jax.tree_util.tree_map(lambda a: a[:m], trees)
    raw = baseline + np.asarray(family.predict_raw(first, X))[:, 0]
    return np.sum(w_valid * ((raw > 0) != (y > 0.5))) / np.sum(w_valid)


def _held_out_deviance(trees, X, y, w_valid, baseline, m):
    first = jax.tree_util.tree_map(lambda a: a[:m], trees)
    f = baseline + np.asarray(family.predict_raw(first, X), np.float64)[:, 0]
    dev = np.logaddexp(0.0, f) - y * f
    return np.sum(w_valid * dev) / np.sum(w_valid)


def weighted_sign_error(y, raw, w):
    """A custom metric: weighted error of the sign of the raw score."""
    return jnp.sum(w * ((raw > 0) != (y > 0.5)).astype(w.dtype)) / jnp.sum(w)


def test_validation_metric_is_computed_on_held_out_rows_only(res_a, data):
    X, y = data
    for i in (0, 7, 13, res_a.n_rows - 1):
        w_train, w_valid = res_a.fold_weights(i)
        p = np.sum(w_train * y) / np.sum(w_train)
        baseline = np.log(p / (1 - p))  # hand-computed logit baseline of the training folds
        trees = _row_trees(res_a, i)
        for m in (1, 5, ROUNDS):
            want = _held_out_deviance(trees, X, y, w_valid, baseline, m)
            np.testing.assert_allclose(res_a.valid_curves[i, m - 1], want, rtol=1e-5, err_msg=f"row {i}")


def test_held_out_labels_never_reach_the_rows_trees(res_a, data):
    X, y = data
    folds = res_a.fold_table[0]  # one explicit partition for both seeds
    base = _sweep_a(X, y, folds=folds, metric=weighted_sign_error)
    flipped = y.copy()
    flipped[folds == 0] = 1.0 - flipped[folds == 0]
    pert = _sweep_a(X, flipped, folds=folds, metric=weighted_sign_error)
    assert base.metric == "weighted_sign_error"
    for i in range(base.n_rows):
        a, b = _row_trees(base, i), _row_trees(pert, i)
        if base.fold[i] == 0:
            # Trained without fold 0: identical trees; the metric on fold 0 sees the new labels.
            _assert_same_trees(a, b, f"row {i}")
            w_train, w_valid = base.fold_weights(i)
            np.testing.assert_allclose(pert.valid_curves[i], 1.0 - base.valid_curves[i], atol=1e-6)
            p = np.sum(w_train * y) / np.sum(w_train)
            for m in (1, ROUNDS):
                want = _held_out_error(a, X, y, w_valid, np.log(p / (1 - p)), m)
                np.testing.assert_allclose(base.valid_curves[i, m - 1], want, atol=1e-6)
        else:
            # The flipped labels are training labels of the other folds: their trees change.
            assert not np.array_equal(np.asarray(a.leaf_values), np.asarray(b.leaf_values)), i


def test_builtin_metrics_match_numpy():
    rng = np.random.default_rng(0)
    y = rng.integers(0, 2, 50).astype(np.float32)
    raw = rng.standard_normal(50).astype(np.float32)
    w = rng.uniform(0, 1, 50).astype(np.float32)
    loss = jboost.losses.binomial_deviance()
    want = np.sum(w * ((raw > 0) != (y > 0.5))) / np.sum(w)
    np.testing.assert_allclose(sweep_lib.error_rate(y, raw, w, loss), want, rtol=1e-6)
    reg = jboost.losses.squared_error()
    np.testing.assert_allclose(sweep_lib.squared_error(y, raw, w, reg), np.sum(w * (y - raw) ** 2) / np.sum(w), rtol=1e-6)
    np.testing.assert_allclose(sweep_lib.absolute_error(y, raw, w, reg), np.sum(w * np.abs(y - raw)) / np.sum(w), rtol=1e-6)
    k3 = jboost.losses.multinomial_deviance(3)
    yk = rng.integers(0, 3, 50).astype(np.float32)
    rk = rng.standard_normal((50, 3)).astype(np.float32)
    np.testing.assert_allclose(sweep_lib.error_rate(yk, rk, w, k3),
                               np.sum(w * (rk.argmax(1) != yk)) / np.sum(w), rtol=1e-6)


# --------------------------------------------------------------------------------------------
# Chunking, compilation, static groups.
# --------------------------------------------------------------------------------------------


def test_cpu_chunks_widen_on_small_data():
    # 16 models per chunk, doubled while the chunk's (row, feature) cells stay within
    # CPU_CHUNK_CELLS, at most 64; shared by the devices.
    assert memory.cpu_models_per_device(1) == memory.DEFAULT_CPU_MODELS_PER_CHUNK == 16
    assert memory.cpu_models_per_device(1, 3065, 57) == 64     # spam
    assert memory.cpu_models_per_device(2, 3065, 57) == 32     # spam on 2 host devices
    assert memory.cpu_models_per_device(1, 20_000, 20) == 32   # 32 x 400k cells <= 2**24
    assert memory.cpu_models_per_device(1, 100_000, 50) == 16  # large data: the default
    assert memory.cpu_models_per_device(64, 3065, 57) == 1


@pytest.mark.slow
def test_chunked_and_unchunked_sweeps_give_the_same_table(res_a, data):
    # Automatic on CPU: the models per chunk that cpu_models_per_device gives for this data's
    # shape, shared by the devices (evened out over the chunks).
    X = data[0]
    whole = _sweep_a(*data, chunk_size=None)  # automatic: all 24 models in one vmapped call
    n_dev = whole.info["n_devices"]
    per_chunk = memory.cpu_models_per_device(n_dev, X.shape[0], X.shape[1]) * n_dev
    assert whole.info["n_chunks"] == -(-24 // per_chunk) == 1
    padded = _sweep_a(*data, chunk_size=5)  # 5 chunks, the last one padded with a repeated model
    single = _sweep_a(*data, chunk_size=1)  # one model per call
    assert res_a.info["n_chunks"] == 3 and padded.info["n_chunks"] == 5
    for other in (whole, padded, single):
        _assert_same_trees(other.trees[(DEPTH, BINS)], res_a.trees[(DEPTH, BINS)], "chunked trees")
        # The mean losses are sums over rows: the vmap width may change their rounding (1 ulp).
        np.testing.assert_allclose(other.valid_curves, res_a.valid_curves, rtol=1e-6)
        np.testing.assert_allclose(other.train_curves, res_a.train_curves, rtol=1e-6)
        np.testing.assert_array_equal(other.best_rounds, res_a.best_rounds)
        assert other.best_index == res_a.best_index
        for a, b in zip(other.to_rows(curves=False), res_a.to_rows(curves=False)):
            assert a == pytest.approx(b, rel=1e-6)


def test_auto_chunk_size_follows_the_memory_budget():
    cpu = jax.devices("cpu")[0]
    mb = sweep_lib.model_bytes(3065, 57, 6, 256, 1, 100)
    # Depth-6 histograms of spam: 57 features x 32 leaves x 256 bins x 2 channels x 4 bytes, x3.
    assert mb > 3 * 57 * 32 * 256 * 2 * 4
    assert sweep_lib.auto_chunk_size(mb, 1000, cpu, memory_budget=10 * mb, max_models=100) == 10
    assert sweep_lib.auto_chunk_size(mb, 1000, cpu, memory_budget=10 * mb + mb // 2, max_models=100) == 10
    assert sweep_lib.auto_chunk_size(mb, 1000, cpu, memory_budget=mb // 2, max_models=100) == 1
    assert sweep_lib.auto_chunk_size(100, 3, cpu, memory_budget=10**9, max_models=100) == 3
    assert sweep_lib.auto_chunk_size(100, 1000, cpu, memory_budget=10**9) == sweep_lib.DEFAULT_CPU_MODELS_PER_DEVICE
    # Evened out: 20 models at most 8 per chunk -> 3 chunks of 7 (one padded model, not four).
    assert sweep_lib.auto_chunk_size(100, 20, cpu, memory_budget=10**9, max_models=8) == 7
    assert sweep_lib.auto_chunk_size(mb, 21, cpu, memory_budget=5 * mb, max_models=100) == 5
    assert sweep_lib.auto_chunk_size(mb, 16, cpu, memory_budget=10**12, max_models=8) == 8
    assert sweep_lib.model_bytes(100, 5, 6, 256, 3, 10) > sweep_lib.model_bytes(100, 5, 6, 256, 1, 10)


def test_memory_estimate_bounds_what_xla_allocates(data):
    X, y = data
    m, depth, n_bins = 2, 4, 64
    X_binned = jboost.bin_features(X, jboost.compute_borders(X, n_bins))
    config = jboost.BoostConfig(n_rounds=ROUNDS, depth=depth, n_bins=n_bins)
    program = program_lib.chunk_program(config, None, False, tuple(jax.devices()[:1]))
    hyper = jboost.Hyperparams(*(jnp.full((m,), v, jnp.float32) for v in (0.1, 1.0, 0.0, 1.0, 1.0, 1.0)))
    args = (X_binned, jnp.asarray(y), jnp.ones(N), jnp.zeros((1, N), jnp.int32),
            jax.random.PRNGKey(0)[None], hyper, jboost.losses.binomial_deviance(),
            jnp.zeros(m, jnp.int32), jnp.zeros(m, jnp.int32))
    temp = program.lower(*args).compile().memory_analysis().temp_size_in_bytes
    fused = jboost._native.available()  # the CPU kernel: fused levels
    estimate = m * sweep_lib.model_bytes(N, X.shape[1], depth, n_bins, 1, ROUNDS, fused=fused)
    assert temp <= estimate <= 2 * temp, (temp, estimate)


def test_one_compilation_per_static_combination_and_round_prefixes(monkeypatch, capsys):
    X, y = _data(n=211, seed=4)  # a size no other test uses: nothing is cached
    kw = dict(grid={"learning_rate": [0.2, 0.6]}, folds=2, seeds=1, n_rounds=[3, 7],
              depth=[1, DEPTH], n_bins=BINS, chunk_size=1)
    # The chunk program's body may be traced twice in all (depths 1 and 2), whatever the number
    # of chunks, of round counts and of sweeps: chex raises on a third trace.
    chex.clear_trace_counter()
    monkeypatch.setattr(program_lib, "fit_chunk", chex.assert_max_traces(program_lib.fit_chunk, n=2))
    res = sweep_lib.sweep(X, y, "binomial_deviance", **kw)
    assert res.info["n_compilations"] == 2  # depths 1 and 2; n_rounds 3 and 7 share the fits
    assert res.info["n_chunks"] == 2 * 4  # 4 models per depth, one per chunk
    capsys.readouterr()
    again = sweep_lib.sweep(X, y, "binomial_deviance", verbose=True, **kw)
    assert again.info["n_compilations"] == 0
    # Progress per chunk as it ends, with the elapsed and the remaining time of its group.
    lines = [l for l in capsys.readouterr().out.splitlines() if l.startswith("[sweep] depth=")]
    assert len(lines) == 8, lines
    assert re.search(r"depth=1 n_bins=16: chunk 1/4 \(1 models\) done, [0-9.]+s elapsed, ~[0-9.]+s left", lines[0])
    assert lines[3].endswith("~0.0s left in this group")
    assert res.n_configs == 2 * 2 * 2 and res.swept == ("learning_rate", "n_rounds", "depth")
    for c, cfg in enumerate(res.configs):
        if cfg["n_rounds"] != 3:
            continue
        long = next(j for j, o in enumerate(res.configs) if o == {**cfg, "n_rounds": 7})
        rows, long_rows = res.config == c, res.config == long
        np.testing.assert_array_equal(res.valid_curves[rows, :3], res.valid_curves[long_rows, :3])
        assert np.all(np.isnan(res.valid_curves[rows, 3:]))
        assert res.best_rounds[c] <= 3
    # Depth changes the models.
    d1 = [c for c, cfg in enumerate(res.configs) if cfg["depth"] == 1 and cfg["n_rounds"] == 7][0]
    d2 = [c for c, cfg in enumerate(res.configs) if cfg["depth"] == 2 and cfg["n_rounds"] == 7
          and cfg["learning_rate"] == res.configs[d1]["learning_rate"]][0]
    assert not np.allclose(res.mean_curves[d1], res.mean_curves[d2])


# --------------------------------------------------------------------------------------------
# Early stopping per fit.
# --------------------------------------------------------------------------------------------


def weighted_sign_accuracy(y, raw, w):
    """A custom metric to maximise: weighted accuracy of the sign of the raw score."""
    return 1.0 - weighted_sign_error(y, raw, w)


def minus_weighted_sign_accuracy(y, raw, w):
    """jboost.fit's eval_metric is minimised: the same stopping as maximising the accuracy."""
    return -weighted_sign_accuracy(y, raw, w)


def _check_stopped_rows_against_fits(res, X, y, rows, curves=True, **fit_kw):
    """Each row equals jboost.fit on its training folds with its held-out fold as eval_set and
    the sweep's early stopping: the same stop and best round, the same trees and curves (up to
    float rounding: a vmapped program is another XLA program), then NaN curves and zero trees."""
    for i in rows:
        w_train, w_valid = res.fold_weights(i)
        kwargs = {**res.fit_kwargs(res.config[i], early_stopping=not fit_kw), **fit_kw}
        model = jboost.fit(X, y, **kwargs, sample_weight=w_train, eval_set=(X, y, w_valid),
                           key=res.row_key(i))
        k, r = int(res.rounds_fitted[i]), res.configs[res.config[i]]["n_rounds"]
        assert (model.n_rounds, int(model.best_round) + 1) == (k, res.row_best_rounds[i]), f"row {i}"
        trees = jax.tree_util.tree_map(np.asarray, _row_trees(res, i))  # NumPy: no compilations
        _assert_same_trees(model.trees, jax.tree_util.tree_map(lambda a: a[:k], trees), f"row {i}")
        assert not np.any(trees.leaf_values[k:r]), f"row {i}: rounds after its stop"
        if curves:
            np.testing.assert_allclose(res.valid_curves[i, :k], np.asarray(model.valid_loss),
                                       rtol=1e-4, err_msg=f"row {i} validation curve")
        np.testing.assert_allclose(res.train_curves[i, :k], np.asarray(model.train_loss), rtol=1e-4,
                                   err_msg=f"row {i} training curve")
        assert np.isnan(res.valid_curves[i, k:r]).all() and np.isnan(res.train_curves[i, k:r]).all()


def _earliest_and_latest_stops(res, configs):
    """Per configuration, its row that stopped first and its row that stopped last."""
    rows = []
    for c in configs:
        mine = res.rows_of(c)
        rows += [mine[np.argmin(res.rounds_fitted[mine])], mine[np.argmax(res.rounds_fitted[mine])]]
    return rows


def test_early_stopped_rows_equal_their_separate_early_stopped_fits(res_es, data):
    X, y = data
    assert res_es.n_rows == 48 and res_es.early_stopping == {
        "early_stopping_rounds": ES_PATIENCE, "early_stopping_tolerance": ES_TOLERANCE,
        "eval_metric": None}
    # The 40-round configurations' rows that stop first and last (each jboost.fit with a new
    # round count costs compilations; the 10-round rows are prefixes of the same fits:
    # test_models_of_one_chunk_stop_on_their_own).
    rows = _earliest_and_latest_stops(res_es, range(4))
    assert len(set(res_es.rounds_fitted[rows].tolist())) >= 4
    _check_stopped_rows_against_fits(res_es, X, y, rows)


def test_models_of_one_chunk_stop_on_their_own(res_es):
    assert res_es.info["n_chunks"] == 1  # the 24 models in one vmapped call
    long = res_es.config < 4
    fitted, best = res_es.rounds_fitted[long], res_es.row_best_rounds[long]
    assert len(set(fitted.tolist())) >= 4 and fitted.max() < ES_ROUNDS, fitted
    # Each stops ES_PATIENCE rounds after its own best round.
    np.testing.assert_array_equal(fitted, np.minimum(best + ES_PATIENCE, ES_ROUNDS))
    # A 10-round configuration reads its fits' first 10 rounds: the same stops, capped at 10,
    # and the same best rounds where they are within the first 10 rounds.
    np.testing.assert_array_equal(res_es.rounds_fitted[~long], np.minimum(fitted, 10))
    short_best = res_es.row_best_rounds[~long]
    assert np.all(short_best <= 10) and np.all(short_best[best <= 10] == best[best <= 10])
    assert np.any(fitted < 10) and np.any(fitted > 10)


def test_early_stopping_on_a_maximised_custom_metric_compiles_once(monkeypatch):
    X, y = _data(n=211, seed=4)  # a size no other early-stopped sweep uses: nothing is cached
    kw = dict(folds=2, seeds=1, n_rounds=[12, 20], depth=1, n_bins=BINS, chunk_size=2,
              metric=weighted_sign_accuracy, greater_is_better=True, early_stopping_rounds=2,
              keep_trees=True)
    # One trace and one compilation for both round counts, both chunks and a second sweep.
    chex.clear_trace_counter()
    monkeypatch.setattr(program_lib, "fit_chunk", chex.assert_max_traces(program_lib.fit_chunk, n=1))
    res = sweep_lib.sweep(X, y, "binomial_deviance", grid={"learning_rate": [0.2, 0.6]}, **kw)
    assert res.info["n_compilations"] == 1 and res.info["n_chunks"] == 2
    again = sweep_lib.sweep(X, y, "binomial_deviance", grid={"learning_rate": [0.3, 0.9]}, **kw)
    assert again.info["n_compilations"] == 0
    assert res.metric == "weighted_sign_accuracy" and res.rounds_fitted.max() < 20
    # The metric is evaluated inside each round: the held-out accuracy of the trees so far.
    long = np.flatnonzero(res.config >= 2)  # the 20-round configurations
    for i in long:
        w_train, w_valid = res.fold_weights(i)
        p = np.sum(w_train * y) / np.sum(w_train)
        for m in (1, int(res.rounds_fitted[i])):
            want = 1.0 - _held_out_error(_row_trees(res, i), X, y, w_valid, np.log(p / (1 - p)), m)
            np.testing.assert_allclose(res.valid_curves[i, m - 1], want, atol=1e-6)
    # Each fit stops (and records its best) as jboost.fit stopping on minus the accuracy.
    _check_stopped_rows_against_fits(res, X, y, long, curves=False, early_stopping_rounds=2,
                                     eval_metric=minus_weighted_sign_accuracy)
    with pytest.raises(ValueError, match="greater_is_better=True.*early_stopping=False"):
        res.fit_kwargs(0)


@pytest.mark.parametrize("kwargs", [
    dict(early_stopping_rounds=0), dict(early_stopping_rounds=2.5),
    dict(early_stopping_rounds=2, early_stopping_tolerance=-0.1),
    dict(early_stopping_rounds=2, early_stopping_tolerance=np.inf),
])
def test_early_stopping_arguments_fail_as_in_fit(data, kwargs):
    X, y = data
    with pytest.raises((ValueError, TypeError)) as in_fit:
        jboost.fit(X, y, n_rounds=2, depth=1, n_bins=BINS, eval_set=(X, y), **kwargs)
    with pytest.raises(type(in_fit.value), match="^" + re.escape(str(in_fit.value)) + "$"):
        sweep_lib.sweep(X, y, n_rounds=2, depth=1, n_bins=BINS, **kwargs)


# --------------------------------------------------------------------------------------------
# Folds.
# --------------------------------------------------------------------------------------------


def test_sweep_folds_stratified_and_repeated(res_a, data):
    _, y = data
    assert res_a.fold_table.shape == (2, N)
    assert not np.array_equal(res_a.fold_table[0], res_a.fold_table[1])
    for s in range(2):
        for c in (0, 1):
            assert np.ptp(np.bincount(res_a.fold_table[s][y == c], minlength=3)) <= 1


# --------------------------------------------------------------------------------------------
# Errors name the argument.
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("kwargs, match", [
    (dict(grid={"learning_rat": [0.1]}), "learning_rat"),
    (dict(grid={"learning_rate": [0.1, -1.0]}), "learning_rate"),
    (dict(grid={"subsample": [1.5]}), "subsample"),
    (dict(grid={"depth": [2, 3]}), "depth= argument"),
    (dict(grid={"alpha": [0.5]}), "alpha"),
    (dict(folds=1), "folds=1"),
    (dict(folds=500), "folds=500"),
    (dict(depth=[2, 2]), "depth=\\[2, 2\\] holds a value twice"),
    (dict(n_rounds=[0, 3]), "n_rounds=0"),
    (dict(metric="mse_typo"), "metric="),
    (dict(stratified=True, loss="squared_error"), "stratified"),
    (dict(metric="error_rate", loss="squared_error"), "error_rate"),
    (dict(learning_rate=0.0), "learning_rate"),
    (dict(learning_rate=[0.1, 0.2]), "sweep it through grid"),
    (dict(depth=[1, 17]), "depth=17"),
    (dict(n_bins=300), "n_bins=300"),
    (dict(devices="some"), "devices="),
    (dict(memory_budget=0), "memory_budget=0"),
    (dict(key="seven"), "key"),
    (dict(seeds=0), "seeds=0"),
    (dict(early_stopping_rounds=0), "early_stopping_rounds=0"),
    (dict(early_stopping_tolerance=0.1), "early_stopping_tolerance=0.1 needs early_stopping_rounds"),
    (dict(early_stopping_rounds=2, early_stopping_tolerance=None), "early_stopping_tolerance"),
])
def test_errors_name_the_argument(data, kwargs, match):
    X, y = data
    kwargs = dict(kwargs)
    loss = kwargs.pop("loss", "binomial_deviance")
    args = {**dict(n_rounds=2, depth=1, n_bins=BINS), **kwargs}  # kwargs may replace the statics
    with pytest.raises((ValueError, TypeError), match=match):
        sweep_lib.sweep(X, y, loss, **args)


# --------------------------------------------------------------------------------------------
# Several devices share the models.
# --------------------------------------------------------------------------------------------

_TWO_DEVICES = """
import json, sys
import jax
sys.path.insert(0, {root!r})
sys.path.insert(0, {tests!r})
import test_sweep as t
assert len(jax.devices()) == 2, jax.devices()
import numpy as np
X, y = t._data()
out = {{}}
mesh = jax.sharding.Mesh(np.array(jax.devices()), ("d",))
for name, devices in (("default", "all"), ("one", None), ("mesh", mesh)):
    kw = {{}} if name == "default" else dict(devices=devices)
    res = t._sweep_a(X, y, keep_trees=False, **kw)
    out[name] = dict(n_devices=res.info["n_devices"], curves=res.valid_curves.tolist())
print(json.dumps(out))
"""


@pytest.mark.subprocess
@pytest.mark.slow
def test_two_host_devices_shard_the_models(res_a):
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=2", JAX_PLATFORMS="cpu")
    here = os.path.dirname(os.path.abspath(__file__))
    code = _TWO_DEVICES.format(root=os.path.dirname(here), tests=here)
    out = _processes.python(code, quiet=60, what="a sweep on 2 host devices", env=env)
    assert out.returncode == 0, out.stderr[-3000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    # devices="all" by default (every device), None: one device, a Mesh: its devices.
    assert [got[k]["n_devices"] for k in ("default", "one", "mesh")] == [2, 1, 2]
    for k in ("default", "one", "mesh"):
        np.testing.assert_allclose(np.asarray(got[k]["curves"]), res_a.valid_curves, rtol=1e-6,
                                   err_msg=k)


# --------------------------------------------------------------------------------------------
# Checkpoints.
# --------------------------------------------------------------------------------------------


def _assert_same_result(a, b):
    """Every field of two SweepResults bitwise equal (NaN where NaN), but the timings."""
    import dataclasses
    for field in dataclasses.fields(a):
        x, z = getattr(a, field.name), getattr(b, field.name)
        if field.name in ("info", "loss"):
            continue
        lx, lz = jax.tree_util.tree_leaves(x), jax.tree_util.tree_leaves(z)
        assert jax.tree_util.tree_structure(x) == jax.tree_util.tree_structure(z), field.name
        for u, v in zip(lx, lz):
            u, v = np.asarray(u), np.asarray(v)
            assert u.dtype == v.dtype, field.name
            np.testing.assert_array_equal(u, v, err_msg=field.name)


_KILLED_SWEEP = """
import os, signal, sys
sys.path.insert(0, {tests!r})
from jboost.engine import checkpoints
import test_sweep as t
save = checkpoints.ChunkCheckpoints.save
def save_then_die(self, part, chunk, outputs, items):
    save(self, part, chunk, outputs, items)
    os.kill(os.getpid(), signal.SIGKILL)  # a real kill, after the first chunk's file is written
checkpoints.ChunkCheckpoints.save = save_then_die
t._sweep_a(*t._data(), checkpoint_dir=sys.argv[1])
"""


@pytest.mark.subprocess
def test_a_killed_sweep_resumes_from_its_checkpoints_bitwise(res_a, data, tmp_path):
    """A sweep killed (SIGKILL) after its first chunk of models and rerun with the same call fits
    only the other chunks and returns bitwise the result of the sweep without checkpoints (curves,
    trees, baselines, selection); another sweep in that directory is refused, naming the file."""
    import signal
    ckpt = tmp_path / "ckpt"
    code = _KILLED_SWEEP.format(tests=os.path.dirname(os.path.abspath(__file__)))
    killed = _processes.python(code, quiet=30, what="a sweep killed mid-way",
                               extra_args=[str(ckpt)])
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-3000:]
    first = ckpt / f"sweep-depth{DEPTH}-bins{BINS}-chunk00000.npz"
    assert os.listdir(ckpt) == [first.name]
    mtime = os.stat(first).st_mtime_ns
    resumed = _sweep_a(*data, checkpoint_dir=ckpt)
    assert res_a.info["n_chunks"] == resumed.info["n_chunks"] > 1 and resumed.info["n_resumed_chunks"] == 1
    _assert_same_result(resumed, res_a)
    assert os.stat(first).st_mtime_ns == mtime  # read, not fitted again
    assert len(os.listdir(ckpt)) == res_a.info["n_chunks"]
    with pytest.raises(ValueError, match="holds checkpoints of another sweep .*" + re.escape(str(first))):
        _sweep_a(*data, checkpoint_dir=ckpt, grid={"learning_rate": [0.3, 1.5], "subsample": [0.6, 0.9]})


def test_ctrl_c_keeps_a_sweeps_chunks_and_a_rerun_resumes_bitwise(res_a, data, tmp_path,
                                                                   monkeypatch):
    """Ctrl-C (SIGINT) during a checkpointed sweep, as its second chunk is about to be saved:
    the sweep returns the two chunks computed (NaN curves for the third) with a warning naming
    what is kept and saved (the first chunk); the same call then fits only the other chunks:
    bitwise the uninterrupted sweep. (More in test_sweep_interrupt.py.)"""
    import signal
    save = checkpoints.ChunkCheckpoints.save

    def interrupt_the_second_save(self, part, chunk, outputs, items):
        if chunk == 1:
            signal.raise_signal(signal.SIGINT)
        save(self, part, chunk, outputs, items)

    monkeypatch.setattr(checkpoints.ChunkCheckpoints, "save", interrupt_the_second_save)
    with pytest.warns(UserWarning, match=r"sweep interrupted \(Ctrl-C\): of its 24 fits .* "
                                         r"holds 16 with all their rounds.* 8 not started .* saved "
                                         r"\(checkpoint_dir\): rerunning the same call fits only"):
        cut = _sweep_a(*data, checkpoint_dir=tmp_path)
    kept = cut.rounds_fitted == ROUNDS
    np.testing.assert_array_equal(cut.valid_curves[kept], res_a.valid_curves[kept])
    assert np.isnan(cut.valid_curves[~kept]).all() and cut.info["interrupted"]
    monkeypatch.setattr(checkpoints.ChunkCheckpoints, "save", save)
    resumed = _sweep_a(*data, checkpoint_dir=tmp_path)
    assert resumed.info["n_resumed_chunks"] == 1
    _assert_same_result(resumed, res_a)


def test_early_stopped_sweep_checkpoints_keep_each_fits_stop(res_es, data, tmp_path):
    """The early-stopped sweep's chunk (curves NaN after each stop, rounds fitted) saved and read
    back: bitwise the sweep without checkpoints, both times."""
    saved = _sweep_es(*data, checkpoint_dir=tmp_path)
    again = _sweep_es(*data, checkpoint_dir=tmp_path)
    assert saved.info["n_resumed_chunks"] == 0 and again.info["n_resumed_chunks"] == 1
    _assert_same_result(saved, res_es)
    _assert_same_result(again, res_es)
