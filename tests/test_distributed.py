"""Data spread over processes (``jboost.fit(..., rows="local")`` and
``jboost.sweep.sweep(..., rows="local")``, jboost/engine/distributed.py).

Two CPU processes of two devices each and three of one device each on localhost
(``jax.distributed`` with gloo collectives) each fit their own uneven slice of one table; every
process's model must equal the single-process fit on the concatenated rows (borders, classes,
baseline, every split and the rounds early stopping keeps bitwise; leaf values, losses and
predictions within 1e-5 / 1e-4: the histograms are sums of per-device partial sums, added in
another order than one device adds them) and the models of all processes must
be bitwise equal. Each group also sweeps its slices (2 processes: the held-out loss; 3: a named
metric with early stopping): the result must equal the single-process sweep on the concatenated
rows (folds, borders, baselines, splits, best configuration and rounds bitwise; curves and leaf
values within 1e-5, for the same reason) on every process, bitwise the same on all.
One subprocess group per process count (each process saves its models; this process compares),
plus single-process unit tests of the border merge (jboost/data/binning.py).

The groups never hang: each process writes to files (no pipe can fill and block it), the group
is polled against one deadline, the first process to fail stops the others (a dead peer leaves
the others waiting in a collective), and a coordinator port taken between picking it and
binding it is retried once with another.
"""

from __future__ import annotations

import json
import os
import pickle
import socket
import subprocess
import sys
import textwrap
import time
import warnings

import numpy as np
import pytest

from tests import _processes

import jboost
from jboost.data import binning

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

#: The sweep of each group (one compiled program per process, reused by the callback's sweep):
#: weighted borders, stratified folds of the whole table's labels, row subsampling, 2 chunks of
#: 6 models; 2 processes: the held-out loss (summed over the devices), kept trees; 3 processes:
#: a named metric (the raw scores gathered) with early stopping per fit.
SWEEP_KW = dict(grid={"learning_rate": [0.3, 1.0]}, folds=3, seeds=2, n_rounds=8, depth=2,
                n_bins=16, subsample=0.7, key=5, keep_trees=True, chunk_size=6)
SWEEPS = {2: {}, 3: dict(metric="error_rate", early_stopping_rounds=2)}
#: Bagged boosters (2 processes only): bootstrap weights of the whole table, weighted baselines,
#: row subsampling, the shared validation set's early stopping per bag, 2 chunks of 2 bags.
BAG_KW = dict(n_bags=3, n_rounds=6, depth=2, n_bins=16, learning_rate=1.0, subsample=0.7, chunk_size=2, key=4,
              early_stopping_rounds=2, monotone_constraints={1: 1}, interaction_constraints=[[0, 2], [1, 3, 4, 5]])

#: Forests (every group): depth-wise classification trees grown until pure (the default) from
#: class labels -1/1 mapped from the whole table's, integer weights, bootstrap counts of the
#: whole table, 2 chunks; the 3-process group also fits oblivious regression trees.
FOREST_KW = dict(n_trees=4, n_bins=32, key=6, chunk_size=2)
FOREST_REG_KW = dict(task="regression", tree_family="oblivious", depth=4, n_trees=3, n_bins=16, key=7,
                     monotone_constraints={1: 1}, interaction_constraints=[[0, 2], [1, 3, 4, 5]])
#: Loss-guided boosting (every group): best-first trees of up to 8 leaves, no depth bound, integer
#: weights and row subsampling (each row's draw is its table row's).
LOSSGUIDE_KW = dict(tree_family="lossguide", max_leaves=8, depth=None, n_rounds=4, learning_rate=0.5,
                    n_bins=16, subsample=0.8, key=8)
#: Constrained boosting (every group): depth-wise trees, increasing in x1 (whose truth 0.5 x1^2 is
#: not), x0 only with x2.
CONSTRAINED_KW = dict(tree_family="depthwise", depth=3, n_rounds=5, learning_rate=0.5, n_bins=16, key=9,
                      monotone_constraints=[0, 1, 0, 0, 0, 0], interaction_constraints=[[0, 2], [1, 3, 4, 5]])

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
    from test_distributed import (BAG_KW, CONSTRAINED_KW, CUTS, N, FIT_KW, FOREST_KW, FOREST_REG_KW,
                                  LOSSGUIDE_KW, SWEEP_KW, SWEEPS, table)

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
    # An argument rows='local' refuses, passed on process 0 only: every process raises (none waits
    # in a collective for the process that refused it).
    try:
        jboost.fit(X[tr], y_reg[tr], rows="local", n_rounds=2, depth=2,
                   checkpoint_dir=f"{out}/ckpt" if pid == 0 else None)
        errors["refused"] = None
    except ValueError as e:
        errors["refused"] = str(e)
    res["errors"] = errors

    import pickle, warnings
    import jboost.sweep
    sweep_kw = dict(SWEEP_KW, **SWEEPS[n])
    sw = jboost.sweep.sweep(X[tr], y_cls[tr], "binomial_deviance", sample_weight=w[tr],
                            rows="local", **sweep_kw)
    # A callback stopping the sweep on process 0 after its first chunk stops every process.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cut = jboost.sweep.sweep(X[tr], y_cls[tr], "binomial_deviance", sample_weight=w[tr],
                                 rows="local", callbacks=[lambda entry: pid == 0], **sweep_kw)
    with open(f"{out}/sweep_{pid}.pkl", "wb") as f:
        pickle.dump((sw, cut), f)
    # An explicit folds array of the wrong length on the last process: every process raises.
    try:
        bad = np.zeros(tr.stop - tr.start - (pid == n - 1), np.int64)
        jboost.sweep.sweep(X[tr], y_cls[tr], "binomial_deviance", rows="local", **dict(sweep_kw, folds=bad))
        res["sweep_error"] = None
    except ValueError as e:
        res["sweep_error"] = str(e)
    if n == 2:
        from jboost.bagging import fit_bagged_boosters
        bags = fit_bagged_boosters(X[tr], y_cls[tr], "binomial_deviance", sample_weight=w[tr],
                                   eval_set=(X[va], y_cls[va], w[va]), rows="local", **BAG_KW)
        with open(f"{out}/bags_{pid}.pkl", "wb") as f:
            pickle.dump(bags, f)
    from jboost.bagging import fit_forest
    forests = [fit_forest(X[tr], y_cls[tr], sample_weight=w[tr], rows="local", **FOREST_KW)]
    if n == 3:
        forests.append(fit_forest(X[tr], y_reg[tr], rows="local", **FOREST_REG_KW))
    with open(f"{out}/forest_{pid}.pkl", "wb") as f:
        pickle.dump(forests, f)
    lg = jboost.fit(X[tr], y_reg[tr], "squared_error", sample_weight=w[tr], rows="local", **LOSSGUIDE_KW)
    jboost.save(lg, f"{out}/lossguide_{pid}.jbm")
    constrained = jboost.fit(X[tr], y_reg[tr], sample_weight=w[tr], rows="local", **CONSTRAINED_KW)
    jboost.save(constrained, f"{out}/constrained_{pid}.jbm")
    try:  # an argument rows='local' refuses, on process 0 only: every process raises
        fit_forest(X[tr], y_cls[tr], rows="local", n_trees=2, depth=2,
                   checkpoint_dir=f"{out}/forest_ckpt" if pid == 0 else None)
        res["forest_refused"] = None
    except ValueError as e:
        res["forest_refused"] = str(e)
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


#: Seconds a group takes in all on a quiet 2-core machine (its processes run side by side;
#: minutes when other test files share the cores): the deadline is tests/_processes.py's.
QUIET_SECONDS = 20
#: What a coordinator that could not take its port writes (then the group is started again).
PORT_TAKEN = ("failed to start rpc server", "failed to add port", "address already in use")
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run_processes(n: int, out: str, deadline: float | None = None) -> list:
    """Start ``n`` worker processes on localhost; their RESULT dicts (process order). A
    coordinator port taken in the meantime (another test worker) starts the group again, once."""
    for attempt in range(2):
        try:
            return _run_group(n, out, deadline or _processes.deadline(QUIET_SECONDS), attempt)
        except _PortTaken:
            if attempt:
                raise
    raise AssertionError("unreachable")


class _PortTaken(Exception):
    pass


def _run_group(n: int, out: str, deadline: float, attempt: int) -> list:
    env = dict(os.environ, JAX_PLATFORMS="cpu",
               XLA_FLAGS=f"--xla_force_host_platform_device_count={DEVICES_PER_PROCESS[n]}",
               PYTHONPATH=os.pathsep.join(filter(None, [REPO, os.environ.get("PYTHONPATH")])))
    # Not the test run's compilation cache (conftest.py): the processes of a group compile the
    # same programs at the same moment, so none would find another's, and they would write the
    # same entries side by side.
    env.pop("JAX_COMPILATION_CACHE_DIR", None)
    port = str(_free_port())
    script = os.path.join(out, "worker.py")
    with open(script, "w") as f:
        f.write(WORKER.replace("F - pid", "%d - pid" % F))
    logs = [(os.path.join(out, f"out_{attempt}_{p}.txt"), os.path.join(out, f"err_{attempt}_{p}.txt"))
            for p in range(n)]
    procs = []
    try:
        for p, (o, e) in enumerate(logs):
            with open(o, "w") as fo, open(e, "w") as fe:  # files: never a full pipe blocking one
                procs.append(subprocess.Popen([sys.executable, script, str(p), str(n), port, out],
                                              env=env, stdout=fo, stderr=fe, cwd=out))
        end = time.monotonic() + deadline
        while any(p.poll() is None for p in procs):
            failed = [i for i, p in enumerate(procs) if p.returncode not in (None, 0)]
            if failed or time.monotonic() > end:  # a dead peer leaves the others waiting
                break
            time.sleep(0.1)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
        for p in procs:
            p.wait()

    def text(path):
        with open(path) as f:
            return f.read()

    errors = [text(e) for _, e in logs]
    if procs[0].returncode != 0 and any(m in errors[0].lower() for m in PORT_TAKEN):
        raise _PortTaken(errors[0][-2000:])
    results = []
    for i, (p, (o, _)) in enumerate(zip(procs, logs)):
        lines = [l for l in text(o).splitlines() if l.startswith("RESULT ")]
        assert p.returncode == 0 and lines, "\n".join(
            f"process {j} (exit code {q.returncode}; -9: killed after another process failed, or "
            f"at the deadline: {_processes.explain(f'a group of {n} processes', deadline)}):\n"
            f"{err[-3000:]}" for j, (q, err) in enumerate(zip(procs, errors)))
        results.append(json.loads(lines[0][len("RESULT "):]))
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
              for name in ("cls", "cut", "lossguide", "constrained")}
    for p in range(request.param):
        for name in ("sweep", "bags", "forest"):
            if os.path.exists(f"{out}/{name}_{p}.pkl"):
                with open(f"{out}/{name}_{p}.pkl", "rb") as f:
                    models.setdefault(name, []).append(pickle.load(f))
    return request.param, results, models


_SINGLE_SWEEPS = {}


def single_sweep(n: int):
    """The single-process sweep on the concatenated rows of group ``n``'s sweep."""
    if n not in _SINGLE_SWEEPS:
        import jboost.sweep
        X, _, y_cls, w = table()
        _SINGLE_SWEEPS[n] = jboost.sweep.sweep(X[:N], y_cls[:N], "binomial_deviance",
                                               sample_weight=w[:N], **dict(SWEEP_KW, **SWEEPS[n]))
    return _SINGLE_SWEEPS[n]


def _arrays(model):
    import jax
    return [np.asarray(a) for a in jax.tree_util.tree_leaves(
        (model.trees, model.borders, model.baseline, model.train_loss, model.valid_loss))]


@pytest.mark.subprocess
@pytest.mark.slow
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


@pytest.mark.subprocess
def test_models_of_all_processes_are_bitwise_equal(group):
    n, _, models = group
    for name in ("cls", "cut"):
        per_process = models[name]
        first = _arrays(per_process[0])
        for other in per_process[1:]:
            assert all(np.array_equal(a, b, equal_nan=True) for a, b in zip(first, _arrays(other))), name


@pytest.mark.subprocess
def test_a_callback_stopping_one_process_stops_all(group):
    n, _, models = group
    whole = models["cls"][0]
    assert whole.n_rounds > 4
    for cut in models["cut"]:
        assert cut.n_rounds == 4
        assert np.array_equal(np.asarray(cut.trees.leaf_values), np.asarray(whole.trees.leaf_values)[:4])


@pytest.mark.subprocess
def test_settings_differing_between_processes_are_named(group):
    n, results, _ = group
    for r in results:
        assert "depth differ between processes" in r["errors"]["depth"], r
        assert "n_features" in r["errors"]["n_features"], r
        assert "checkpoint_dir differ between processes" in r["errors"]["refused"], r
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


def _sweep_arrays(res):
    import jax
    return [np.asarray(a) for a in jax.tree_util.tree_leaves(
        (res.valid_curves, res.train_curves, res.mean_curves, res.best_rounds, res.best_scores,
         res.fold_table, res.borders, res.trees, res.baselines, res.rounds_fitted))]


@pytest.mark.subprocess
def test_sweep_equals_the_single_process_sweep(group):
    n, _, models = group
    ref = single_sweep(n)
    for mine, _ in models["sweep"][:1]:
        # Bitwise: the folds (stratified by the whole table's labels), borders, baselines, splits.
        assert np.array_equal(mine.fold_table, ref.fold_table)
        assert all(np.array_equal(mine.borders[b], ref.borders[b]) for b in ref.borders)
        assert all(np.array_equal(np.asarray(mine.baselines[g]), np.asarray(ref.baselines[g]))
                   for g in ref.baselines)
        for g in ref.trees:
            for field in ("features", "thresholds"):
                assert np.array_equal(np.asarray(getattr(mine.trees[g], field)),
                                      np.asarray(getattr(ref.trees[g], field))), (g, field)
            leaf = np.abs(np.asarray(mine.trees[g].leaf_values) - np.asarray(ref.trees[g].leaf_values))
            assert np.max(leaf) < 1e-5
        # Curves to float rounding (histograms and held-out sums summed over the devices).
        for a, b in ((mine.valid_curves, ref.valid_curves), (mine.train_curves, ref.train_curves)):
            assert np.array_equal(np.isnan(a), np.isnan(b))
            assert np.nanmax(np.abs(a - b)) < 1e-5
        assert mine.best_index == ref.best_index
        assert np.array_equal(mine.best_rounds, ref.best_rounds)
        if ref.rounds_fitted is not None:  # early stopping: each fit stopped where it does alone
            assert np.array_equal(mine.rounds_fitted, ref.rounds_fitted)
            assert ref.rounds_fitted.min() < SWEEP_KW["n_rounds"]
        assert mine.metric == ref.metric


@pytest.mark.subprocess
def test_sweep_results_of_all_processes_are_bitwise_equal(group):
    n, _, models = group
    for i in range(2):  # the sweep, the sweep a callback stopped
        first = _sweep_arrays(models["sweep"][0][i])
        for other in models["sweep"][1:]:
            assert all(np.array_equal(a, b, equal_nan=True)
                       for a, b in zip(first, _sweep_arrays(other[i])))


@pytest.mark.subprocess
def test_a_callback_stopping_one_process_stops_every_sweep(group):
    n, _, models = group
    for whole, cut in models["sweep"]:
        # The first chunk of 6 models, bitwise; the other chunk never fitted (NaN, not ranked).
        assert np.array_equal(cut.valid_curves[:6], whole.valid_curves[:6], equal_nan=True)
        assert np.all(np.isnan(cut.valid_curves[6:]))


@pytest.mark.subprocess
def test_sweep_folds_refused_on_one_process_raise_on_every_process(group):
    n, results, _ = group
    for r in results[:-1]:
        assert "process(es) [%d]" % (n - 1) in r["sweep_error"], r
    assert "folds" in results[-1]["sweep_error"] and "shape" in results[-1]["sweep_error"]


def test_local_sweep_needs_the_distributed_runtime():
    import jboost.sweep
    with pytest.raises(ValueError, match="jax.distributed.initialize"):
        jboost.sweep.sweep(np.zeros((10, 2), np.float32), np.zeros(10, np.float32), rows="local")
    with pytest.raises(ValueError, match="rows="):
        jboost.sweep.sweep(np.zeros((10, 2), np.float32), np.zeros(10, np.float32), rows="mine")


@pytest.mark.subprocess
def test_bagged_boosters_equal_the_single_process_fit(group):
    n, _, models = group
    if "bags" not in models:
        pytest.skip("bagged boosters run in the 2-process group only")
    from jboost.bagging import fit_bagged_boosters
    X, _, y_cls, w = table()
    va = slice(N, N + N_VALID)
    ref = fit_bagged_boosters(X[:N], y_cls[:N], "binomial_deviance", sample_weight=w[:N],
                              eval_set=(X[va], y_cls[va], w[va]), **BAG_KW)
    mine = models["bags"][0]
    # Bitwise: bootstrap weights of the whole table, borders, baselines, splits, stopping rounds.
    for field in ("bag_weights", "borders", "baseline", "best_round"):
        assert np.array_equal(np.asarray(getattr(mine, field)), np.asarray(getattr(ref, field))), field
    assert np.asarray(ref.best_round).min() < BAG_KW["n_rounds"] - 1  # early stopping did stop
    for field in ("features", "thresholds"):
        assert np.array_equal(np.asarray(getattr(mine.trees, field)), np.asarray(getattr(ref.trees, field)))
    # To float rounding (histograms summed over the devices).
    assert np.max(np.abs(np.asarray(mine.trees.leaf_values) - np.asarray(ref.trees.leaf_values))) < 1e-5
    for a, b in ((mine.train_loss, ref.train_loss), (mine.valid_loss, ref.valid_loss)):
        a, b = np.asarray(a), np.asarray(b)
        assert np.array_equal(np.isnan(a), np.isnan(b)) and np.nanmax(np.abs(a - b)) < 1e-5
    assert np.array_equal(np.asarray(mine.classes.array), CLASSES)
    assert np.max(np.abs(np.asarray(jboost.predict(mine, X)) - np.asarray(jboost.predict(ref, X)))) < 1e-4
    for other in models["bags"][1:]:  # bitwise the same on every process
        assert all(np.array_equal(np.asarray(a), np.asarray(b), equal_nan=True) for a, b in zip(
            jax_leaves(mine), jax_leaves(other)))


def jax_leaves(tree):
    import jax
    return jax.tree_util.tree_leaves(tree)


@pytest.mark.subprocess
def test_forest_equals_the_single_process_forest(group):
    """A forest of rows spread over processes (``fit_forest(..., rows="local")``): every bag's
    bootstrap counts drawn for the whole table, histograms, node counts and leaf sums summed
    across processes. Classification (whole counts times integer weights: exact sums) is the
    single-process forest on the concatenated rows bitwise -- borders, classes, bootstrap
    weights, every node and leaf -- and oblivious regression trees have its splits, leaf means
    to 1e-5; every process holds the same forest bitwise."""
    from jboost.bagging import fit_forest
    n, results, models = group
    X, y_reg, y_cls, w = table()
    refs = [fit_forest(X[:N], y_cls[:N], sample_weight=w[:N], **FOREST_KW)]
    if n == 3:
        refs.append(fit_forest(X[:N], y_reg[:N], **FOREST_REG_KW))
    mine = models["forest"][0]
    assert len(mine) == len(refs)
    cls, ref = mine[0], refs[0]
    assert int((np.asarray(ref.trees.gains) > 0).sum()) >= 100  # deep trees, not stumps
    assert np.array_equal(np.asarray(cls.classes.array), CLASSES)
    assert all(np.array_equal(np.asarray(a), np.asarray(b)) and np.shape(a) == np.shape(b)
               for a, b in zip(jax_leaves(cls), jax_leaves(ref)))
    if n == 3:
        reg, ref = mine[1], refs[1]
        for field in ("features", "thresholds", "missing_right"):
            assert np.array_equal(np.asarray(getattr(reg.trees, field)), np.asarray(getattr(ref.trees, field)))
        assert np.array_equal(np.asarray(reg.bag_weights), np.asarray(ref.bag_weights))
        assert np.max(np.abs(np.asarray(reg.trees.leaf_values) - np.asarray(ref.trees.leaf_values))) < 1e-5
    for other in models["forest"][1:]:  # bitwise the same on every process
        assert all(np.array_equal(np.asarray(a), np.asarray(b), equal_nan=True) for a, b in zip(
            jax_leaves(mine), jax_leaves(other)))
    for r in results:  # refused on process 0 only: every process raises, naming it
        assert "checkpoint_dir differ between processes" in r["forest_refused"], r


@pytest.mark.subprocess
def test_loss_guided_fit_equals_the_single_process_fit(group):
    """Loss-guided boosting with each process's own rows (histograms summed across processes):
    every process holds the same model bitwise, and it is the single-process fit on the
    concatenated rows up to the first split a near tie decides differently (per-process partial
    sums are added in another order): every earlier split the same, gains and leaf values to
    1e-5, and at that split both gains equal to rounding; without such a tie, the predictions
    to 1e-4."""
    import jax
    n, _, models = group
    X, y_reg, _, w = table()
    ref = jboost.fit(X[:N], y_reg[:N], "squared_error", sample_weight=w[:N], **LOSSGUIDE_KW)
    mine = models["lossguide"]
    assert mine[0].settings["tree_family"] == ref.settings["tree_family"] == "LossGuidedTrees"
    for other in mine[1:]:
        for a, b in zip(jax.tree_util.tree_leaves(mine[0].trees), jax.tree_util.tree_leaves(other.trees)):
            assert np.array_equal(np.asarray(a), np.asarray(b))
    assert_equal_up_to_a_near_tie(ref, mine[0], X)


def assert_equal_up_to_a_near_tie(ref, mine, X):
    """``mine`` (rows over processes) is ``ref`` (one process) up to the first split a near tie
    decides differently: every earlier split the same, gains and leaf values to 1e-5, and at that
    split both gains equal to rounding; without such a tie, the predictions to 1e-4."""
    import jax
    ta, tb = jax.tree_util.tree_map(np.asarray, (ref.trees, mine.trees))
    assert np.array_equal(np.asarray(ref.borders), np.asarray(mine.borders))
    rule = lambda t: np.stack([t.features, t.thresholds, t.missing_right], -1)  # noqa: E731
    differs = (rule(ta) != rule(tb)).any(-1).reshape(-1)
    assert (ta.gains > 0).sum() >= 20  # the trees really split
    first = int(np.argmax(differs)) if differs.any() else None
    ga, gb = ta.gains.reshape(-1), tb.gains.reshape(-1)
    before = slice(0, first)
    assert np.max(np.abs(ga[before] - gb[before]) / np.maximum(1, np.abs(ga[before])), initial=0) < 1e-5
    r0 = first // int(np.prod(ta.features.shape[1:])) if first is not None else ta.features.shape[0]
    assert np.max(np.abs(ta.leaf_values[:r0] - tb.leaf_values[:r0]), initial=0) < 1e-5
    if first is not None:
        assert abs(ga[first] - gb[first]) / max(1.0, abs(ga[first])) < 1e-5, (first, ga[first], gb[first])
    else:
        assert np.max(np.abs(np.asarray(jboost.predict(ref, X)) - np.asarray(jboost.predict(mine, X)))) < 1e-4


def monotone_in_x1(model, X) -> bool:
    """Every row's prediction never decreases as x1 runs over a grid through the data."""
    grid = np.linspace(-4, 4, 41, dtype=np.float32)
    rows = np.repeat(np.nan_to_num(X[:40])[:, None, :], len(grid), axis=1)
    rows[:, :, 1] = grid
    raw = np.asarray(jboost.predict(model, rows.reshape(-1, X.shape[1]))).reshape(40, len(grid), -1)
    return bool(np.all(np.diff(raw, axis=1) >= 0))


@pytest.mark.subprocess
def test_constraints_hold_with_rows_spread_over_processes(group):
    """Monotone and interaction constraints with each process's rows (``jboost.fit``, bagged
    boosters, a regression forest): the leaf bounds are summed across processes like the
    histograms, so every process holds the same model bitwise, the single-process fit up to a
    near tie (as loss-guided boosting's), and the models are monotone in x1; unconstrained, the
    same fit is not."""
    import jax
    n, _, models = group
    X, y_reg, _, w = table()
    ref = jboost.fit(X[:N], y_reg[:N], sample_weight=w[:N], **CONSTRAINED_KW)
    mine = models["constrained"]
    for other in mine[1:]:
        assert all(np.array_equal(np.asarray(a), np.asarray(b)) for a, b in zip(
            jax.tree_util.tree_leaves(mine[0].trees), jax.tree_util.tree_leaves(other.trees)))
    assert_equal_up_to_a_near_tie(ref, mine[0], X)
    assert np.asarray(mine[0].settings["monotone_constraints"]).tolist() == CONSTRAINED_KW["monotone_constraints"]
    free = jboost.fit(X[:N], y_reg[:N], sample_weight=w[:N], **dict(CONSTRAINED_KW, monotone_constraints=None))
    assert monotone_in_x1(mine[0], X) and not monotone_in_x1(free, X)
    if "bags" in models:
        assert monotone_in_x1(models["bags"][0], X)
    if n == 3:
        assert monotone_in_x1(models["forest"][0][1], X)
