"""The rounds of a concrete fit run as host-side calls of one compiled program
(:func:`jboost.fitting.rounds.run_rounds`, :func:`jboost.engine.calls.boost_rounds`), for :func:`jboost.fit` and
every algorithm of :mod:`jboost.algorithms`: Ctrl-C in a fit without progress or callbacks, one
compilation however the rounds are cut, bitwise the same model; the algorithms' early stopping,
progress, callbacks, checkpoints and offsets; ``eval_metric`` without early stopping."""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import time

import chex
import jax
import numpy as np
import pytest

from tests import _processes

import jboost
from jboost.engine import calls as calls_lib
from jboost.fitting import rounds as rounds_lib

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
from jboost.fitting import rounds
waits = [0]
wait = rounds._wait
def announcing_wait(x, *args):
    waits[0] += 1
    if waits[0] == 3:  # the first call (compiling) and a timed one have finished
        print("fitting", flush=True)
    return wait(x, *args)
rounds._wait = announcing_wait
rng = np.random.default_rng(0)
X = rng.normal(size=(400, 4)); y = X[:, 0] + rng.normal(size=400)
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    model = jboost.fit(X, y, n_rounds=200_000, depth=2, n_bins=16)
print("rounds", model.n_rounds, flush=True)
print("warning", [str(w.message) for w in caught], flush=True)
"""


@pytest.mark.subprocess
@pytest.mark.slow
def test_ctrl_c_stops_a_plain_fit_within_seconds_keeping_its_rounds(tmp_path):
    """A real SIGINT to a process in a 200k-round fit (no verbose, callbacks or checkpoint_dir):
    the fit returns within a few seconds a model of fewer rounds, with the warning."""
    script = tmp_path / "fit.py"
    script.write_text(_INTERRUPTED_FIT)
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # the jboost under test
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")])))
    proc = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env)
    try:
        assert proc.stdout.readline().strip() == "fitting", proc.stderr.read()
        time.sleep(0.5)
        sent = time.perf_counter()
        proc.send_signal(signal.SIGINT)
        # Python drops a KeyboardInterrupt raised while it runs a finaliser ("Exception ignored
        # in ..."), so a first Ctrl-C can be lost (a loaded CI run once fitted all 200k rounds):
        # one more after 10 s of silence, as a user would press it again.
        if not select.select([proc.stdout], [], [], 10.0)[0]:
            sent = time.perf_counter()
            proc.send_signal(signal.SIGINT)
        rounds_line = proc.stdout.readline()
        returned = time.perf_counter() - sent
        warning_line = proc.stdout.readline()
        proc.wait(timeout=_processes.deadline(5))
    finally:
        proc.kill()
    stderr = proc.stderr.read()
    assert proc.returncode == 0, stderr
    rounds = int(rounds_line.split()[1])
    assert 0 < rounds < 200_000, (rounds_line, warning_line, returned, stderr)
    assert f"interrupted after round {rounds} of 200000" in warning_line
    assert returned < _processes.scaled(5.0), returned


def test_ctrl_c_between_a_calls_rounds_and_its_commit_keeps_the_model_consistent(binary,
                                                                               monkeypatch):
    """A Ctrl-C that lands after a call's rounds were copied to the host but before the fit
    recorded the call (the window a CI run once hit: model of 19207 rounds, warning "19271")
    returns the rounds of the calls before it: the warning's round, the model's rounds, losses and
    predictions all those of a fit of exactly that many rounds."""
    X, y, Xv, yv = binary
    monkeypatch.setattr(rounds_lib, "FIRST_CALLS", (2, 3, 5))
    monkeypatch.setattr(rounds_lib, "CALL_SECONDS", 1e9)
    real_add, adds = rounds_lib._HostRounds.add, [0]

    def add_then_interrupt(self, rounds, count):
        real_add(self, rounds, count)
        adds[0] += 1
        if adds[0] == 3:
            raise KeyboardInterrupt

    monkeypatch.setattr(rounds_lib._HostRounds, "add", add_then_interrupt)
    kw = dict(eval_set=(Xv, yv), learning_rate=0.3, **KW)
    with pytest.warns(UserWarning, match="interrupted after round 5 of 40:"):
        cut = jboost.fit(X, y, "binomial_deviance", n_rounds=40, **kw)
    monkeypatch.setattr(rounds_lib._HostRounds, "add", real_add)
    five = jboost.fit(X, y, "binomial_deviance", n_rounds=5, **kw)
    assert cut.n_rounds == 5
    _same(cut, five)
    np.testing.assert_array_equal(jboost.predict(cut, Xv), jboost.predict(five, Xv))


# --------------------------------------------------------------------------------------------
# One program, bitwise the same rounds however they are cut
# --------------------------------------------------------------------------------------------


def test_one_compilation_and_the_same_model_however_the_calls_are_cut(binary, monkeypatch):
    """Calls of 1, 3, 7, ... rounds, one call of every round and chunks of verbose=5 all run
    one traced program (chex raises on a second trace) and give bitwise the same model
    as one call of every round."""
    X, y, Xv, yv = binary
    # The body of boosting.boost_rounds, run when it is traced (this test's settings are its own:
    # no program of them is cached).
    monkeypatch.setattr(calls_lib, "rounds_body", chex.assert_max_traces(calls_lib.rounds_body, n=1))
    calls = []
    real = rounds_lib._rounds_fn

    def counting(mesh, data, config):
        fn, d, rows = real(mesh, data, config)
        return (lambda *a, **k: calls.append(a[6]) or fn(*a, **k)), d, rows

    monkeypatch.setattr(rounds_lib, "_rounds_fn", counting)
    kw = dict(n_rounds=23, eval_set=(Xv, yv), subsample=0.8, learning_rate=0.3, **KW)
    monkeypatch.setattr(rounds_lib, "FIRST_CALLS", (23,))
    whole = jboost.fit(X, y, "binomial_deviance", **kw)
    assert len(calls) == 1
    monkeypatch.setattr(rounds_lib, "FIRST_CALLS", (1, 3, 7, 2))
    monkeypatch.setattr(rounds_lib, "CALL_SECONDS", 1e-9)  # then one round per call
    cut = jboost.fit(X, y, "binomial_deviance", **kw)
    assert len(calls) > 10
    _same(cut, whole)
    monkeypatch.setattr(rounds_lib, "FIRST_CALLS", (1, 2, 4))
    monkeypatch.setattr(rounds_lib, "CALL_SECONDS", 1.0)
    _same(jboost.fit(X, y, "binomial_deviance", verbose=5, **kw), whole)


def test_one_program_for_every_number_of_rounds(binary, monkeypatch):
    """Fits that differ only in ``n_rounds`` (fewer, as many and more than the rounds one call
    holds, boosting.ROUNDS_PER_CALL) trace one program; a call never fits more rounds than its
    buffers hold; the first rounds of a long fit are bitwise a short fit's; chunks longer than a
    call (checkpoint_every=100) still report and call back once per chunk, with the same model."""
    X, y, Xv, yv = binary
    cap = calls_lib.ROUNDS_PER_CALL
    monkeypatch.setattr(calls_lib, "rounds_body", chex.assert_max_traces(calls_lib.rounds_body, n=1))
    sizes = []
    real = rounds_lib._rounds_fn

    def counting(mesh, data, config):
        assert config.n_rounds == cap  # the program's static settings hold the buffers' size
        fn, d, rows = real(mesh, data, config)

        def call(*a, **k):
            out = fn(*a, **k)
            sizes.append(int(out.done) - int(a[4].done))
            return out
        return call, d, rows

    monkeypatch.setattr(rounds_lib, "_rounds_fn", counting)
    kw = dict(eval_set=(Xv, yv), subsample=0.7, learning_rate=0.2, depth=3, n_bins=16)
    long_n = 2 * cap + 22
    monkeypatch.setattr(rounds_lib, "FIRST_CALLS", (long_n,))  # asks for every round in one call
    monkeypatch.setattr(rounds_lib, "CALL_SECONDS", 1e9)
    fits = {n: jboost.fit(X, y, "binomial_deviance", n_rounds=n, **kw) for n in (5, cap, long_n)}
    assert max(sizes) == cap and sum(sizes) == 5 + cap + long_n
    for n, model in fits.items():
        assert model.n_rounds == n and model.train_loss.shape == (n,)
        assert np.isfinite(np.asarray(model.train_loss)).all()
        _same(model, fits[long_n], n)
    seen = []
    chunked = jboost.fit(X, y, "binomial_deviance", n_rounds=long_n, checkpoint_every=100,
                         callbacks=[lambda info: seen.append((info["rounds"][0], info["round"],
                                                              len(info["train_loss"])))], **kw)
    assert seen == [(0, 100, 100), (100, long_n, long_n - 100)]
    _same(chunked, fits[long_n])


# --------------------------------------------------------------------------------------------
# The algorithms on the same runner
# --------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_an_algorithm_stops_early_and_reports_progress(binary, capsys):
    """adaboost_m1 with early stopping on the validation loss: it really stops (fewer rounds,
    best_round the argmin of the validation losses within patience of the end); progress lines
    and callbacks carry its rounds; the model predicts with its best round by default."""
    X, y, Xv, yv = binary
    seen = []
    m = jboost.algorithms.adaboost_m1(X, y, n_rounds=300, eval_set=(Xv, yv), early_stopping_rounds=4,
                                      verbose=3, callbacks=[seen.append], **KW)
    assert m.n_rounds < 300 and m.n_rounds - 1 - int(m.best_round) == 4
    assert int(m.best_round) == int(np.argmin(np.asarray(m.valid_loss)))
    assert seen[-1]["round"] == m.n_rounds and np.isfinite(seen[-1]["valid_loss"]).all()
    lines = [l for l in capsys.readouterr().out.splitlines() if l.startswith("[jboost] round ")]
    assert len(lines) == len(seen) == -(-m.n_rounds // 3) and "best round" in lines[-1]
    np.testing.assert_array_equal(jboost.predict(m, Xv), jboost.predict(m, Xv, n_rounds=int(m.best_round) + 1))
    # The same rounds as a fit without early stopping (bitwise): the runner cuts, never changes.
    whole = jboost.algorithms.adaboost_m1(X, y, n_rounds=m.n_rounds, eval_set=(Xv, yv), **KW)
    _same(m, whole)
    np.testing.assert_array_equal(m.info["log_weights"], whole.info["log_weights"])


@pytest.mark.slow
def test_a_crashed_algorithm_fit_resumes_from_its_checkpoint_bitwise(binary, tmp_path):
    """samme_r (state: log weights) with checkpoint_dir: a run that dies after round 10 (its
    checkpoint then holds 8 rounds, every 4) is rerun and ends bitwise the uninterrupted fit,
    its state included; another fit in the directory is refused."""
    X, y, Xv, yv = binary
    kw = dict(n_rounds=14, eval_set=(Xv, yv), subsample=0.8, learning_rate=0.5, **KW)

    def crash(info):
        if info["round"] >= 10:
            raise RuntimeError("killed")

    with pytest.raises(RuntimeError, match="killed"):
        jboost.algorithms.samme_r(X, y, checkpoint_dir=tmp_path, checkpoint_every=4,
                                  callbacks=[crash], **kw)
    assert jboost.load(tmp_path / "checkpoint.jbm").n_rounds == 8
    resumed = jboost.algorithms.samme_r(X, y, checkpoint_dir=tmp_path, checkpoint_every=4, **kw)
    whole = jboost.algorithms.samme_r(X, y, **kw)
    assert resumed.n_rounds == 14
    _same(resumed, whole)
    for field in ("log_weights", "coef", "err", "status"):
        np.testing.assert_array_equal(resumed.info[field], whole.info[field])
    with pytest.raises(ValueError, match="holds a checkpoint of another fit"):
        jboost.algorithms.samme_r(X, 1 - y, checkpoint_dir=tmp_path, checkpoint_every=4, **kw)


@pytest.mark.slow
def test_offsets_for_gradient_algorithms_and_their_refusal_elsewhere(binary):
    """gradient_boost with a constant base_margin c: the baseline moves by -c and the model,
    given the offsets, predicts as the fit without them; the AdaBoost family refuses
    base_margin, naming it."""
    X, y, Xv, yv = binary
    rng = np.random.default_rng(2)
    target = X[:, 0] + 0.3 * rng.normal(size=len(X))
    kw = dict(n_rounds=6, **KW)
    plain = jboost.algorithms.gradient_boost(X, target, **kw)
    shifted = jboost.algorithms.gradient_boost(X, target, base_margin=np.full(len(X), 2.0), **kw)
    np.testing.assert_allclose(shifted.baseline, plain.baseline - 2.0, atol=1e-5)
    np.testing.assert_allclose(jboost.predict(shifted, Xv, base_margin=np.full(len(Xv), 2.0)),
                               jboost.predict(plain, Xv), atol=1e-5)
    with pytest.raises(ValueError, match="base_margin is not supported by jboost.algorithms.adaboost_m1"):
        jboost.algorithms.adaboost_m1(X, y, n_rounds=2, base_margin=np.zeros(len(X)), **KW)
    with pytest.raises(ValueError, match="pass eval_base_margin"):
        jboost.algorithms.logitboost(X, y, n_rounds=2, base_margin=np.zeros(len(X)),
                                     eval_set=(Xv, yv), **KW)


# --------------------------------------------------------------------------------------------
# eval_metric without early stopping
# --------------------------------------------------------------------------------------------


def test_eval_metric_without_early_stopping_is_shown_and_recorded(binary, capsys):
    """eval_metric alone: every round is fitted (no best round), the progress lines and the
    callbacks carry the metric (the error rate of the staged predictions), and the settings
    name it; without eval_set it is refused naming eval_set."""
    X, y, Xv, yv = binary
    seen = []
    m = jboost.fit(X, y, "binomial_deviance", n_rounds=6, eval_set=(Xv, yv), eval_metric="error_rate",
                   verbose=3, callbacks=[seen.append], **KW)
    assert m.n_rounds == 6 and m.best_round is None and m.settings["eval_metric"] == "error_rate"
    curve = np.concatenate([info["valid_metric"] for info in seen])
    staged = np.asarray(jboost.staged_predict(m, Xv))[..., 0]
    np.testing.assert_allclose(curve, np.mean((staged > 0) != yv, axis=1), rtol=1e-6)
    assert all(info["metric"] == "error_rate" for info in seen)
    assert "valid error_rate" in capsys.readouterr().out
    with pytest.raises(ValueError, match="eval_metric='mse' is computed on the validation rows: pass eval_set"):
        jboost.algorithms.gradient_boost(X, y.astype(float), n_rounds=2, eval_metric="mse", **KW)
