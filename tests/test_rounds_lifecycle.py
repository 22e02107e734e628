"""The rounds of a concrete fit run as host-side calls of one compiled program
(:func:`jboost.api.run_rounds`, :func:`jboost.boosting.boost_rounds`), for :func:`jboost.fit` and
every algorithm of :mod:`jboost.algorithms`: Ctrl-C in a fit without progress or callbacks, one
compilation however the rounds are cut, bitwise the same model; the algorithms' early stopping,
progress, callbacks, checkpoints and offsets; ``eval_metric`` without early stopping."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import chex
import jax
import numpy as np
import pytest

import jboost
from jboost import api
from jboost import boosting

KW = dict(depth=2, n_bins=16)


@pytest.fixture(scope="module")
def binary():
    rng = np.random.default_rng(11)
    X = rng.normal(size=(360, 4))
    y = (X[:, 0] + 0.5 * X[:, 1] + 0.8 * rng.normal(size=360) > 0).astype(np.int32)
    return X[:260], y[:260], X[260:], y[260:]


def _same(a, b, n=None):
    """Bitwise the same rounds (trees and losses) and algorithm record."""
    for x, y in [(a.trees.leaf_values, b.trees.leaf_values), (a.trees.features, b.trees.features),
                 (a.trees.thresholds, b.trees.thresholds), (a.train_loss, b.train_loss),
                 (a.valid_loss, b.valid_loss)]:
        np.testing.assert_array_equal(np.asarray(x)[:n], np.asarray(y)[:n])


# --------------------------------------------------------------------------------------------
# Ctrl-C in a fit without verbose / callbacks / checkpoint_dir
# --------------------------------------------------------------------------------------------

_INTERRUPTED_FIT = """
import sys, time, warnings
import numpy as np
import jboost
from jboost import api
waits = [0]
wait = api._wait
def announcing_wait(x, *args):
    waits[0] += 1
    if waits[0] == 3:  # the first call (compiling) and a timed one have finished
        print("fitting", flush=True)
    return wait(x, *args)
api._wait = announcing_wait
rng = np.random.default_rng(0)
X = rng.normal(size=(400, 4)); y = X[:, 0] + rng.normal(size=400)
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    model = jboost.fit(X, y, n_rounds=200_000, depth=2, n_bins=16)
print("rounds", model.n_rounds, flush=True)
print("warning", [str(w.message) for w in caught], flush=True)
"""


def test_ctrl_c_stops_a_plain_fit_within_seconds_keeping_its_rounds(tmp_path):
    """A real SIGINT to a process in a 200k-round fit (no verbose, callbacks or checkpoint_dir):
    the fit returns within a few seconds a model of fewer rounds, with the warning."""
    script = tmp_path / "fit.py"
    script.write_text(_INTERRUPTED_FIT)
    proc = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "fitting", proc.stderr.read()
        time.sleep(0.5)
        sent = time.perf_counter()
        proc.send_signal(signal.SIGINT)
        rounds_line = proc.stdout.readline()
        returned = time.perf_counter() - sent
        warning_line = proc.stdout.readline()
        proc.wait(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 0, proc.stderr.read()
    rounds = int(rounds_line.split()[1])
    assert 0 < rounds < 200_000
    assert f"interrupted after round {rounds} of 200000" in warning_line
    assert returned < 5.0, returned


# --------------------------------------------------------------------------------------------
# One program, bitwise the same rounds however they are cut
# --------------------------------------------------------------------------------------------


def test_one_compilation_and_the_same_model_however_the_calls_are_cut(binary, monkeypatch):
    """Calls of 1, 3, 7, ... rounds, one call of every round and chunks of verbose=5 all run
    one traced program (chex raises on a second trace) and give bitwise the same model
    as one call of every round."""
    X, y, Xv, yv = binary
    counted = jax.jit(chex.assert_max_traces(boosting.boost_rounds.__wrapped__, n=1),
                      static_argnames=("config",))
    monkeypatch.setattr(boosting, "boost_rounds", counted)
    calls = []
    real = api._rounds_fn

    def counting(mesh, data, config):
        fn, d, rows = real(mesh, data, config)
        return (lambda *a, **k: calls.append(a[6]) or fn(*a, **k)), d, rows

    monkeypatch.setattr(api, "_rounds_fn", counting)
    kw = dict(n_rounds=23, eval_set=(Xv, yv), subsample=0.8, learning_rate=0.3, **KW)
    monkeypatch.setattr(api, "FIRST_CALLS", (23,))
    whole = jboost.fit(X, y, "binomial_deviance", **kw)
    assert len(calls) == 1
    monkeypatch.setattr(api, "FIRST_CALLS", (1, 3, 7, 2))
    monkeypatch.setattr(api, "CALL_SECONDS", 1e-9)  # then one round per call
    cut = jboost.fit(X, y, "binomial_deviance", **kw)
    assert len(calls) > 10
    _same(cut, whole)
    monkeypatch.setattr(api, "FIRST_CALLS", (1, 2, 4))
    monkeypatch.setattr(api, "CALL_SECONDS", 1.0)
    _same(jboost.fit(X, y, "binomial_deviance", verbose=5, **kw), whole)
