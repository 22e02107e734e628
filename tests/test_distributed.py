"""Data spread over processes (``jboost.fit(..., rows="local")``, jboost/distributed.py).

Two CPU processes of two devices each and three of one device each on localhost
(``jax.distributed`` with gloo collectives) each fit their own uneven slice of one table; every
process's model must equal the single-process fit on the concatenated rows (borders, classes,
baseline, every split and the rounds early stopping keeps bitwise; leaf values, losses and
predictions within 1e-5 / 1e-4: the histograms are sums of per-device partial sums, added in
another order than one device adds them) and the models of all processes must
be bitwise equal.
One subprocess group per process count (each process saves its models; this process compares),
plus single-process unit tests of the border merge (jboost/binning.py).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import jboost
from jboost import binning

N, F, N_VALID = 600, 6, 120
#: Uneven slices of the table per process count (training rows, validation rows).
CUTS = {2: ([0, 250, 600], [0, 20, 120]), 3: ([0, 150, 410, 600], [0, 50, 50, 120])}
CLASSES = np.array([-1.0, 1.0])  # not indices 0..K-1: mapped from the whole table's labels


def table():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(N + N_VALID, F)).astype(np.float32)
    X[rng.random(X.shape) < 0.1] = np.nan
    X[:, 5] = np.round(X[:, 5])  # few distinct values: exact borders of one bin per value
    signal = np.nan_to_num(X[:, 0]) + 0.5 * np.nan_to_num(X[:, 1]) ** 2
    y_reg = (signal + 0.1 * rng.normal(size=len(X))).astype(np.float32)
    y_cls = CLASSES[(signal + 0.5 * rng.normal(size=len(X)) > 0.5).astype(int)]
    w = rng.integers(1, 4, len(X)).astype(np.float32)
    return X, y_reg, y_cls, w


#: The fit every process group runs (and this process on the whole table): one compiled program
#: per process (seconds on 2 cores) exercising weighted borders, class labels mapped from the whole
#: table's, its baseline, row subsampling (each row's draw is its table row's), column sampling,
#: gathered validation rows and early stopping.
FIT_KW = dict(n_rounds=10, depth=3, learning_rate=0.3, subsample=0.7, colsample=0.5,
              colsample_by="level", early_stopping_rounds=3, key=3)

WORKER = textwrap.dedent(
    """
    import json, sys
    import jax
    pid, n, port, out = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    jax.config.update("jax_numpy_dtype_promotion", "strict")
    jax.distributed.initialize(coordinator_address="localhost:" + port, num_processes=n,
                               process_id=pid, initialization_timeout=60)
    import numpy as np
    import jboost
    sys.path.insert(0, %r)
    from test_distributed import CUTS, N, FIT_KW, table

    X, y_reg, y_cls, w = table()
    (c, v) = CUTS[n]
    tr = slice(c[pid], c[pid + 1])
    va = slice(N + v[pid], N + v[pid + 1])
    res = {}
    kw = dict(sample_weight=w[tr], eval_set=(X[va], y_cls[va], w[va]), rows="local", **FIT_KW)
    cls = jboost.fit(X[tr], y_cls[tr], "binomial_deviance", **kw)
    jboost.save(cls, f"{out}/cls_{pid}.jbm")
    # A callback asking to stop on process 0 only stops every process (the same compiled program:
    # the first 4 rounds, bitwise).
    stop = lambda info: pid == 0 and info["round"] >= 4
    cut = jboost.fit(X[tr], y_cls[tr], "binomial_deviance", callbacks=[stop], **kw)
    jboost.save(cut, f"{out}/cut_{pid}.jbm")
    # Settings or shapes that differ between processes: the same error on every process.
    errors = {}
    for name, kw in (("depth", dict(depth=3 + pid)), ("n_features", dict(n_features=F - pid))):
        nf = kw.pop("n_features", X.shape[1])
        try:
            jboost.fit(X[tr, :nf], y_reg[tr], rows="local", n_rounds=2, **dict(dict(depth=2), **kw))
            errors[name] = None
        except ValueError as e:
            errors[name] = str(e)
    # Rows one process refuses (a short y on the last process): every process raises.
    try:
        jboost.fit(X[tr], y_reg[tr][: None if pid < n - 1 else -1], rows="local", n_rounds=2, depth=2)
        errors["rows"] = None
    except ValueError as e:
        errors["rows"] = str(e)
    res["errors"] = errors
    print("RESULT " + json.dumps(res), flush=True)
    """
) % (os.path.dirname(os.path.abspath(__file__)),)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("localhost", 0))
        return s.getsockname()[1]


#: CPU devices per process: 2 processes of 2 devices each (rows sharded over 4 devices, two per
#: process), 3 processes of one device each.
DEVICES_PER_PROCESS = {2: 2, 3: 1}


def run_processes(n: int, out: str) -> list:
    """Start ``n`` worker processes on localhost; their RESULT dicts (process order)."""
    env = dict(os.environ, JAX_PLATFORMS="cpu",
               XLA_FLAGS=f"--xla_force_host_platform_device_count={DEVICES_PER_PROCESS[n]}")
    port = str(_free_port())
    script = os.path.join(out, "worker.py")
    with open(script, "w") as f:
        f.write(WORKER.replace("F - pid", "%d - pid" % F))
    procs = [subprocess.Popen([sys.executable, script, str(p), str(n), port, out], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for p in range(n)]
    results = []
    try:
        for p in procs:
            stdout, stderr = p.communicate(timeout=300)
            lines = [l for l in stdout.splitlines() if l.startswith("RESULT ")]
            assert p.returncode == 0 and lines, stderr[-3000:]
            results.append(json.loads(lines[0][len("RESULT "):]))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    return results


@pytest.fixture(scope="module")
def single():
    """The single-process fits on the concatenated rows."""
    X, y_reg, y_cls, w = table()
    va = slice(N, N + N_VALID)
    return jboost.fit(X[:N], y_cls[:N], "binomial_deviance", sample_weight=w[:N],
                      eval_set=(X[va], y_cls[va], w[va]), **FIT_KW)


@pytest.fixture(scope="module", params=[2, 3])
def group(request, tmp_path_factory):
    out = str(tmp_path_factory.mktemp(f"processes{request.param}"))
    results = run_processes(request.param, out)
    models = {name: [jboost.load(f"{out}/{name}_{p}.jbm") for p in range(request.param)]
              for name in ("cls", "cut")}
    return request.param, results, models


def _arrays(model):
    import jax
    return [np.asarray(a) for a in jax.tree_util.tree_leaves(
        (model.trees, model.borders, model.baseline, model.train_loss, model.valid_loss))]


def test_every_process_holds_the_single_process_model(group, single):
    n, _, models = group
    X = table()[0]
    ref = single
    for mine in models["cls"][:1]:
        name = "cls"
        # Bitwise: borders, baseline, classes, every split, the rounds fitted (early stopping).
        assert np.array_equal(np.asarray(mine.borders), np.asarray(ref.borders)), name
        assert np.array_equal(np.asarray(mine.baseline), np.asarray(ref.baseline)), name
        assert mine.n_rounds == ref.n_rounds and mine.best_round == ref.best_round, name
        assert np.array_equal(np.asarray(mine.trees.features), np.asarray(ref.trees.features)), name
        assert np.array_equal(np.asarray(mine.trees.thresholds), np.asarray(ref.trees.thresholds)), name
        # To float rounding: per-process partial histogram sums are added in another order.
        leaf_diff = np.abs(np.asarray(mine.trees.leaf_values) - np.asarray(ref.trees.leaf_values))
        assert np.max(leaf_diff) < 1e-5, name
        assert np.max(np.abs(np.asarray(mine.train_loss) - np.asarray(ref.train_loss))) < 1e-5, name
        assert np.max(np.abs(np.asarray(mine.valid_loss) - np.asarray(ref.valid_loss))) < 1e-5, name
        assert np.max(np.abs(np.asarray(jboost.predict(mine, X)) - np.asarray(jboost.predict(ref, X)))) < 1e-4
    assert np.array_equal(np.asarray(models["cls"][0].classes.array), CLASSES)


def test_models_of_all_processes_are_bitwise_equal(group):
    n, _, models = group
    for name, per_process in models.items():
        first = _arrays(per_process[0])
        for other in per_process[1:]:
            assert all(np.array_equal(a, b, equal_nan=True) for a, b in zip(first, _arrays(other))), name


def test_a_callback_stopping_one_process_stops_all(group):
    n, _, models = group
    whole = models["cls"][0]
    assert whole.n_rounds > 4
    for cut in models["cut"]:
        assert cut.n_rounds == 4
        assert np.array_equal(np.asarray(cut.trees.leaf_values), np.asarray(whole.trees.leaf_values)[:4])


def test_settings_differing_between_processes_are_named(group):
    n, results, _ = group
    for r in results:
        assert "depth differ between processes" in r["errors"]["depth"], r
        assert "n_features" in r["errors"]["n_features"], r
    for r in results[:-1]:
        assert f"process(es) [{n - 1}] refused their rows" in r["errors"]["rows"], r
    assert "y has" in results[-1]["errors"]["rows"], results[-1]


def test_local_rows_need_the_distributed_runtime():
    X, y = np.zeros((10, 2), np.float32), np.zeros((10,), np.float32)
    with pytest.raises(ValueError, match="jax.distributed.initialize"):
        jboost.fit(X, y, n_rounds=1, depth=1, rows="local")
    with pytest.raises(ValueError, match="rows="):
        jboost.fit(X, y, n_rounds=1, depth=1, rows="mine")


@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("max_rows", [None, 250])
def test_merged_border_samples_equal_the_borders_of_the_concatenation(weighted, max_rows):
    X, _, _, w = table()
    X = X[:N]
    w = w[:N] if weighted else None
    starts = [0, 150, 150, 410, N]  # uneven blocks, one of them empty
    parts = [binning.local_border_sample(X[a:b], None if w is None else w[a:b], a, N,
                                         max_rows=max_rows, seed=5)
             for a, b in zip(starts, starts[1:])]
    if max_rows is not None:  # the parts are the whole table's subsample, at most max_rows rows
        assert sum(len(p[0]) for p in parts) == max_rows
    merged = binning.merge_border_samples([p[0] for p in parts], 32,
                                          None if w is None else [p[1] for p in parts])
    whole = binning.compute_borders(X, 32, w, max_rows=max_rows, seed=5)
    assert np.array_equal(merged, whole)
    # A different seed's sample gives other borders: the parts really are the seeded subsample.
    if max_rows is not None:
        assert not np.array_equal(merged, binning.compute_borders(X, 32, w, max_rows=max_rows, seed=6))


def test_local_border_sample_checks_its_block():
    with pytest.raises(ValueError, match="n_total"):
        binning.local_border_sample(np.zeros((5, 2), np.float32), None, 8, 10)
