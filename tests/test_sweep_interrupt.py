"""Tests of a sweep's rounds as host-side calls (jboost.sweep.chunks): the calls' sizes never
change a sweep's results (bitwise), and a Ctrl-C lands within a call: the sweep returns within
seconds what it fitted (the chunks finished, the rounds of the chunk being fitted), with a
warning, or raises KeyboardInterrupt when no configuration has a round on all its fits.

Small data, depth 2, 16 bins, as test_sweep.py; the timed test sizes its rounds from the pace it
measures so that the uninterrupted sweep would take more than 20 s.
"""

import dataclasses
import os
import signal
import threading
import time
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from tests import _processes

import jboost
import jboost.sweep as sweep_lib
from jboost.sweep import chunks, program as program_lib

N, DEPTH, BINS, ROUNDS = 240, 2, 16, 12
GRID = {"learning_rate": [0.3, 1.5], "subsample": [0.6, 1.0]}


def weighted_sign_accuracy(y, raw, w):
    """A custom metric to maximise (computed from the trees after each call's rounds)."""
    return 1.0 - jnp.sum(w * ((raw > 0) != (y > 0.5)).astype(w.dtype)) / jnp.sum(w)


def _data(n=N, seed=1):
    X, y = jboost.datasets.nested_spheres(n, seed=seed)
    return X[:, :4], y


def _sweep(X, y, **kw):
    args = dict(grid=GRID, folds=3, seeds=2, n_rounds=ROUNDS, depth=DEPTH, n_bins=BINS, key=7,
                keep_trees=True, chunk_size=8)  # 24 models: 3 chunks
    args.update(kw)
    return sweep_lib.sweep(X, y, "binomial_deviance", **args)


def _assert_same(a, b):
    """Every field of two SweepResults bitwise equal (NaN where NaN), but the timings."""
    for field in dataclasses.fields(a):
        if field.name in ("info", "loss"):
            continue
        x, z = getattr(a, field.name), getattr(b, field.name)
        assert jax.tree_util.tree_structure(x) == jax.tree_util.tree_structure(z), field.name
        for u, v in zip(jax.tree_util.tree_leaves(x), jax.tree_util.tree_leaves(z)):
            u, v = np.asarray(u), np.asarray(v)
            assert u.dtype == v.dtype, field.name
            np.testing.assert_array_equal(u, v, err_msg=field.name)


def _calls_of(monkeypatch, rounds):
    """Every call of a sweep's program fits ``rounds`` rounds (its last one fewer)."""
    monkeypatch.setattr(chunks, "ROUNDS_PER_CALL", rounds)
    monkeypatch.setattr(chunks, "FIRST_CALLS", (rounds,))
    monkeypatch.setattr(chunks, "CALL_SECONDS", 1e9)


@pytest.mark.slow
@pytest.mark.parametrize("kw", [
    {},  # the held-out loss in every round, trees kept
    dict(n_rounds=[20, 9], early_stopping_rounds=2, chunk_size=24),  # each fit stops on its own
    dict(metric=weighted_sign_accuracy, greater_is_better=True, keep_trees=False),  # from trees
], ids=["loss", "early_stopping", "custom_metric"])
def test_the_calls_sizes_do_not_change_a_sweep(monkeypatch, kw):
    """Calls of 5 rounds (each chunk's rounds in several calls, its carry handed on) and of 2
    give bitwise the sweep of one call per chunk, every field."""
    X, y = _data()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # configurations whose learning rate diverges
        _calls_of(monkeypatch, 10**6)
        whole = _sweep(X, y, **kw)
        for rounds in (5, 2):
            _calls_of(monkeypatch, rounds)
            _assert_same(_sweep(X, y, **kw), whole)
    assert whole.info["interrupted"] is False


def _interrupt_at_call(monkeypatch, k):
    """A ``KeyboardInterrupt`` as the sweep waits for its program's ``k``-th call (as a Ctrl-C
    there lands)."""
    calls = []
    wait = chunks.batching.wait

    def interrupted_wait(out, *args):
        calls.append(1)
        if len(calls) == k:
            raise KeyboardInterrupt
        return wait(out, *args)

    monkeypatch.setattr(chunks.batching, "wait", interrupted_wait)


def test_ctrl_c_keeps_the_chunks_finished_and_the_rounds_of_the_chunk_being_fitted(monkeypatch):
    """Calls of 3 rounds, 4 per chunk: a Ctrl-C in the 6th call keeps chunk 0 whole and the first
    3 rounds of chunk 1 (bitwise those of the uninterrupted sweep), chunk 2 NaN; a warning says
    so, ``rounds_fitted`` holds each row's rounds and the ranking uses the rounds fitted."""
    X, y = _data()
    _calls_of(monkeypatch, 3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        whole = _sweep(X, y)
    _interrupt_at_call(monkeypatch, 6)
    with pytest.warns(UserWarning, match=r"sweep interrupted \(Ctrl-C\): of its 24 fits .* holds "
                                         r"8 with all their rounds, 8 with their first rounds "
                                         r"\(SweepResult.rounds_fitted\) and 8 not started"):
        cut = _sweep(X, y)
    assert cut.info["interrupted"] is True
    done = cut.rounds_fitted[np.argsort(cut.model_of_row)]  # per model
    np.testing.assert_array_equal(done, [ROUNDS] * 8 + [3] * 8 + [0] * 8)
    for i in range(cut.n_rows):
        r = cut.rounds_fitted[i]
        np.testing.assert_array_equal(cut.valid_curves[i, :r], whole.valid_curves[i, :r])
        np.testing.assert_array_equal(cut.train_curves[i, :r], whole.train_curves[i, :r])
        assert np.isnan(cut.valid_curves[i, r:]).all() and np.isnan(cut.train_curves[i, r:]).all()
    trees = cut.trees[(DEPTH, BINS)]
    full = whole.trees[(DEPTH, BINS)]
    for a, b in zip(jax.tree_util.tree_leaves(trees), jax.tree_util.tree_leaves(full)):
        np.testing.assert_array_equal(np.asarray(a)[:8], np.asarray(b)[:8])
        np.testing.assert_array_equal(np.asarray(a)[8:16, :3], np.asarray(b)[8:16, :3])
    # Chunk 0 holds configuration 0 and a third of configuration 1 (8 models, 6 per
    # configuration), chunk 1 the rest of configuration 1 and two thirds of configuration 2:
    # configurations 0 and 1 are ranked (over 12 and 3 rounds), 2 and 3 have a fit not started.
    assert cut.best_rounds[0] == whole.best_rounds[0] and cut.best_rounds[1] <= 3
    assert np.isnan(cut.best_scores[2:]).all() and cut.best_index in (0, 1)
    assert cut.to_rows()[8]["final"] == cut.valid_curves[8, 2]  # row 8: model 8, 3 rounds


def test_ctrl_c_before_any_configuration_has_a_round_raises(monkeypatch):
    """A Ctrl-C in the first call: no round fitted, ``KeyboardInterrupt`` (as a fit's)."""
    X, y = _data()
    _calls_of(monkeypatch, 3)
    _interrupt_at_call(monkeypatch, 1)
    with pytest.raises(KeyboardInterrupt, match="before any configuration had a round"):
        _sweep(X, y)


def test_ctrl_c_between_groups_keeps_the_groups_fitted(monkeypatch):
    """A Ctrl-C in the second group's first call keeps the first group (depth 1) whole; the
    second group (depth 2) has no rounds and no trees."""
    X, y = _data()
    _calls_of(monkeypatch, 4)
    _interrupt_at_call(monkeypatch, 7)  # 2 chunks of 3 calls, then the second group's first call
    with pytest.warns(UserWarning, match=r"holds 12 with all their rounds, 0 with their first "
                                         r"rounds .* and 12 not started"):
        cut = _sweep(X, y, grid={"learning_rate": [0.3, 1.5]}, depth=[1, 2], chunk_size=6)
    assert set(cut.trees) == {(1, BINS)}
    depth1 = np.array([cut.configs[c]["depth"] == 1 for c in cut.config])
    assert (cut.rounds_fitted[depth1] == ROUNDS).all() and (cut.rounds_fitted[~depth1] == 0).all()
    assert cut.models(np.flatnonzero(depth1)[:2]).batch_shape == (2,)
    with pytest.raises(ValueError, match="interrupted .* depth=2, n_bins=16"):
        cut.models(np.flatnonzero(~depth1)[:1])


@pytest.mark.slow
def test_sigint_stops_a_long_sweep_within_seconds(monkeypatch):
    """SIGINT from a timer thread, a second after a long sweep's calls have started (once its
    program is compiled): the sweep returns within seconds (the uninterrupted sweep would take
    more than 20 s), with the rounds fitted so far, the first rounds of the same sweep."""
    X, y = _data(n=2000, seed=3)
    kw = dict(grid={"learning_rate": [0.05, 0.1]}, folds=2, seeds=2, depth=4, n_bins=32, key=1,
              keep_trees=False, chunk_size=8)
    n_rounds = 60_000
    starts, sent = [], []
    call = program_lib.BlockProgram.__call__

    def timed_call(self, *args):
        starts.append((time.perf_counter(), int(args[-2]), int(args[-1])))
        if len(starts) == 4:  # compiled, the pace measured: SIGINT a second from now
            def interrupt():
                time.sleep(1.0)
                sent.append(time.perf_counter())
                os.kill(os.getpid(), signal.SIGINT)
            threading.Thread(target=interrupt, daemon=True).start()
        return call(self, *args)

    monkeypatch.setattr(program_lib.BlockProgram, "__call__", timed_call)
    with pytest.warns(UserWarning, match=r"sweep interrupted \(Ctrl-C\)"):
        cut = sweep_lib.sweep(X, y, "binomial_deviance", n_rounds=n_rounds, **kw)
    returned = time.perf_counter()
    assert sent, "the sweep ended before the signal"
    assert returned - sent[0] < _processes.scaled(10.0), returned - sent[0]
    # The pace of the calls after the first (compiling): the whole sweep would take > 20 s.
    (t1, a1, _), (t_last, a_last, _) = starts[1], starts[-1]
    per_round = (t_last - t1) / max(a_last - a1, 1)
    assert per_round * n_rounds > 20.0, per_round
    done = int(cut.rounds_fitted.min())
    assert 0 < done == int(cut.rounds_fitted.max()) < n_rounds
    assert np.isfinite(cut.valid_curves[:, :done]).all()
    assert np.isnan(cut.valid_curves[:, done:]).all() and cut.best_rounds.max() <= done
    monkeypatch.setattr(program_lib.BlockProgram, "__call__", call)
    first = sweep_lib.sweep(X, y, "binomial_deviance", n_rounds=min(done, 200), **kw)
    np.testing.assert_array_equal(cut.valid_curves[:, :min(done, 200)], first.valid_curves)
