"""Data-parallel fits over several XLA CPU devices give the model of the single-device fit.

XLA's host device count is fixed when JAX starts, so the comparison runs in ONE subprocess started
with ``--xla_force_host_platform_device_count=3``: it fits on 2 devices (``jax.devices()[:2]``)
and on 3 (``"all"``), each against the same single-device fit (compiled once for both).
"""

import json
import os
import subprocess
import sys
import textwrap

import pytest

from tests import _processes

#: Every loss on 3 devices (1001 rows: two padding rows); on 2 devices (one padding row) the plain
#: and the most involved case (the suite's time: each sharded case compiles its own programs;
#: tests/test_properties.py draws 2- and 3-device cases too).
CASES_ON = {2: ("squared_error", "multinomial_per_output"),
            3: ("squared_error", "absolute_error", "huber_adaptive", "binomial_deviance",
                "multinomial_per_output")}

SCRIPT = textwrap.dedent(
    """
    import json, sys
    import numpy as np, jax, jax.numpy as jnp
    import jboost

    assert len(jax.devices()) == 3, jax.devices()
    DEVICES = {2: jax.devices()[:2], 3: "all"}
    CASES_ON = %r
    rng = np.random.default_rng(0)
    n = 1001  # not a multiple of the device count: exercises zero-weight padding rows
    X = rng.normal(size=(n, 6)).astype(np.float32)
    X[rng.random((n, 6)) < 0.1] = np.nan
    signal = np.nan_to_num(X[:, 0]) + 0.5 * np.nan_to_num(X[:, 1]) ** 2
    y_reg = (signal + 0.1 * rng.normal(size=n)).astype(np.float32)
    y_bin = (signal > 0.5).astype(np.float32)
    y_cls = np.digitize(signal, [0.0, 1.0]).astype(np.float32)
    w = rng.integers(1, 4, n).astype(np.float32)
    cases = {
        "squared_error": (y_reg, "squared_error", {}),
        "absolute_error": (y_reg, "absolute_error", {}),
        "huber_adaptive": (y_reg, jboost.losses.huber(alpha=0.9), {}),
        "binomial_deviance": (y_bin, "binomial_deviance", {"colsample": 0.5, "colsample_by": "level"}),
        "multinomial_per_output": (y_cls, "multinomial_deviance", {"per_output_trees": True}),
    }
    out = {n_dev: {} for n_dev in DEVICES}
    multis = {}
    for name, (y, loss, extra) in cases.items():
        kw = dict(n_rounds=8, depth=3, subsample=0.7, sample_weight=w, key=3,
                  eval_set=(X[:200], y[:200]), **extra)
        single = jboost.fit(X, y, loss, **kw)
        for n_dev, devices in DEVICES.items():
            if name not in CASES_ON[n_dev]:
                continue
            multi = multis[name, n_dev] = jboost.fit(X, y, loss, devices=devices, **kw)
            out[n_dev][name] = {
                "same_features": bool(jnp.array_equal(single.trees.features, multi.trees.features)),
                "same_thresholds": bool(jnp.array_equal(single.trees.thresholds, multi.trees.thresholds)),
                "same_missing": bool(jnp.array_equal(single.trees.missing_right, multi.trees.missing_right)),
                "leaf_diff": float(jnp.max(jnp.abs(single.trees.leaf_values - multi.trees.leaf_values))),
                "train_loss_diff": float(jnp.max(jnp.abs(single.train_loss - multi.train_loss))),
                "valid_loss_diff": float(jnp.max(jnp.abs(single.valid_loss - multi.valid_loss))),
                "pred_diff": float(jnp.max(jnp.abs(jboost.predict(single, X) - jboost.predict(multi, X)))),
            }
    # Warm start, chunks (checkpoints) and per-row offsets on several devices: 6 + 2 rounds and a
    # fit in chunks of 6 and 2 rounds with a checkpoint equal the one-call 8-round sharded fit
    # (the squared-error case's) bitwise; base_margin agrees with the single-device fit. (The
    # chunks are the warm start's programs: nothing more to compile.)
    import tempfile
    base = dict(depth=3, subsample=0.7, sample_weight=w, key=3)
    margin = rng.normal(size=n)
    m_single = jboost.fit(X, y_reg, n_rounds=8, base_margin=margin, **base)
    same = lambda a, b: bool(jnp.array_equal(a.trees.leaf_values, b.trees.leaf_values)
                             and jnp.array_equal(a.train_loss, b.train_loss)
                             and jnp.array_equal(a.valid_loss, b.valid_loss))
    for n_dev, devices in DEVICES.items():
        m_multi = jboost.fit(X, y_reg, n_rounds=8, base_margin=margin, devices=devices, **base)
        kw = dict(base, devices=devices, eval_set=(X[:200], y_reg[:200]))
        whole = multis["squared_error", n_dev]
        cont = jboost.fit(X, y_reg, n_rounds=2, init_model=jboost.fit(X, y_reg, n_rounds=6, **kw), **kw)
        chunked = jboost.fit(X, y_reg, n_rounds=8, checkpoint_dir=tempfile.mkdtemp(), checkpoint_every=6, **kw)
        out[n_dev]["lifecycle"] = {
            "warm_start_bitwise": same(whole, cont), "chunked_bitwise": same(whole, chunked),
            "margin_loss_diff": float(jnp.max(jnp.abs(m_multi.train_loss - m_single.train_loss))),
            "margin_pred_diff": float(jnp.max(jnp.abs(jboost.predict(m_multi, X, base_margin=margin)
                                                      - jboost.predict(m_single, X, base_margin=margin)))),
        }
    print("RESULT " + json.dumps(out))
    """
) % (CASES_ON,)


def run_on_devices(script, n_devices):
    """The JSON a script prints after ``RESULT ``, run in a subprocess with ``n_devices`` host
    CPU devices."""
    env = dict(os.environ)
    env["XLA_FLAGS"] = f"--xla_force_host_platform_device_count={n_devices}"
    env["JAX_PLATFORMS"] = "cpu"
    # Not the test run's compilation cache (conftest.py): these programs are compiled nowhere
    # else, so writing them there gains nothing.
    env.pop("JAX_COMPILATION_CACHE_DIR", None)
    proc = _processes.python(script, quiet=60, what=f"a script on {n_devices} host devices", env=env)
    lines = [l for l in proc.stdout.splitlines() if l.startswith("RESULT ")]
    assert lines, proc.stderr[-3000:]
    return json.loads(lines[0][len("RESULT "):])


@pytest.fixture(scope="module")
def sharded_run():
    return {int(n_dev): r for n_dev, r in run_on_devices(SCRIPT, 3).items()}


@pytest.mark.subprocess
@pytest.mark.slow
@pytest.mark.parametrize("n_devices,case", [(n, c) for n in (2, 3) for c in CASES_ON[n]])
def test_sharded_fit_equals_single_device_fit(sharded_run, n_devices, case):
    r = sharded_run[n_devices][case]
    # The same trees: every split identical; leaf values equal up to float summation order.
    assert r["same_features"] and r["same_thresholds"] and r["same_missing"], r
    assert r["leaf_diff"] < 1e-5, r
    assert r["train_loss_diff"] < 1e-5, r
    assert r["valid_loss_diff"] < 1e-5, r
    assert r["pred_diff"] < 1e-4, r


@pytest.mark.subprocess
@pytest.mark.parametrize("n_devices", [2, 3])
def test_sharded_warm_start_checkpoints_and_offsets(sharded_run, n_devices):
    r = sharded_run[n_devices]["lifecycle"]
    assert r["warm_start_bitwise"] and r["chunked_bitwise"], r
    assert r["margin_loss_diff"] < 1e-5 and r["margin_pred_diff"] < 1e-4, r


def test_devices_argument_is_checked():
    import numpy as np
    import jboost

    X = np.zeros((10, 2), np.float32)
    y = np.zeros((10,), np.float32)
    with pytest.raises(ValueError, match="devices"):
        jboost.fit(X, y, n_rounds=1, depth=1, devices="some")
    with pytest.raises(ValueError, match="devices"):
        jboost.fit(X, y, n_rounds=1, depth=1, devices=[])


DEPTHWISE_SCRIPT = textwrap.dedent(
    """
    import json
    import numpy as np, jax, jax.numpy as jnp
    import jboost

    assert len(jax.devices()) == 2, jax.devices()
    rng = np.random.default_rng(1)
    n = 801  # odd: a zero-weight padding row
    X = rng.normal(size=(n, 6)).astype(np.float32)
    X[rng.random((n, 6)) < 0.1] = np.nan
    y = (np.nan_to_num(X[:, 0]) + 0.5 * np.nan_to_num(X[:, 1]) ** 2
         + 0.1 * rng.normal(size=n)).astype(np.float32)
    out = {}
    for family, loss, target in (
            ("depthwise", "squared_error", y),
            ("depthwise", "binomial_deviance", (y > 0.5).astype(np.float32)),
            ("lossguide", "squared_error", y)):
        kw = dict(n_rounds=6, depth=5, key=3, tree_family=family, subsample=0.8)
        if family == "lossguide":
            kw.update(max_leaves=20, depth=None)
        a = jboost.fit(X, target, loss, **kw)
        b = jboost.fit(X, target, loss, devices="all", **kw)
        ta, tb = jax.tree_util.tree_map(np.asarray, (a.trees, b.trees))
        # The first split (round, output, node in id order) that differs, if any.
        rule = lambda t: np.stack([t.features, t.thresholds, t.missing_right], -1)
        differs = (rule(ta) != rule(tb)).any(-1).reshape(-1)
        first = int(np.argmax(differs)) if differs.any() else None
        r0 = first // int(np.prod(ta.features.shape[1:])) if first is not None else ta.features.shape[0]
        ga, gb = ta.gains.reshape(-1), tb.gains.reshape(-1)
        before = slice(0, first)
        out[family + "/" + loss] = {
            "family": b.settings["tree_family"],
            "n_used": int((ta.gains > 0).sum()),
            "first_other_split": first,
            "rounds_before": r0,
            "tie_gap": (float(abs(ga[first] - gb[first]) / max(1.0, abs(ga[first])))
                        if first is not None else 0.0),
            "gain_rel_diff_before": float(np.max(np.abs(ga[before] - gb[before])
                                                 / np.maximum(1, np.abs(ga[before])), initial=0.0)),
            "leaf_diff_before": float(np.max(np.abs(ta.leaf_values[:r0] - tb.leaf_values[:r0]),
                                             initial=0.0)),
        }
        if first is None:
            out[family + "/" + loss]["pred_diff"] = float(jnp.max(jnp.abs(jboost.predict(a, X) - jboost.predict(b, X))))
    print("RESULT " + json.dumps(out))
    """
)


@pytest.mark.subprocess
@pytest.mark.slow
def test_sharded_depthwise_fit_equals_single_device_fit():
    """Depth-wise and loss-guided boosting (row subsampling on) with rows sharded over 2 CPU
    devices, histograms summed across them: the single-device model up to the first split that a near tie decides
    differently -- every earlier split the same, gains and leaf values to 1e-5 -- and at that
    split both gains agree to rounding (1e-5). A depth-wise node chooses among many candidate
    splits, and a tie broken by the summation order changes its subtree and the rounds after it
    (measured: a node of gains 0.2726925 and 0.27269247); oblivious trees compare exactly
    (test_sharded_fit_equals_single_device_fit)."""
    runs = run_on_devices(DEPTHWISE_SCRIPT, 2)
    assert sorted(runs) == ["depthwise/binomial_deviance", "depthwise/squared_error",
                            "lossguide/squared_error"]
    for loss, r in runs.items():
        family = {"depthwise": "DepthwiseTrees", "lossguide": "LossGuidedTrees"}[loss.split("/")[0]]
        assert r["family"] == family and r["n_used"] >= 40, (loss, r)
        assert r["tie_gap"] < 1e-5, (loss, r)
        assert r["gain_rel_diff_before"] < 1e-5 and r["leaf_diff_before"] < 1e-5, (loss, r)
        assert r["first_other_split"] is not None or r["pred_diff"] < 1e-4, (loss, r)


FOREST_SCRIPT = textwrap.dedent(
    """
    import json, tempfile
    import numpy as np, jax, jax.numpy as jnp
    import jboost
    from jboost.bagging import fit_forest

    assert len(jax.devices()) == 3, jax.devices()
    DEVICES = {2: jax.devices()[:2], 3: "all"}
    rng = np.random.default_rng(2)
    n = 601  # a multiple of neither 2 nor 3: zero-weight padding rows
    X = rng.normal(size=(n, 6)).astype(np.float32)
    X[rng.random((n, 6)) < 0.1] = np.nan
    signal = np.nan_to_num(X[:, 0]) + 0.5 * np.nan_to_num(X[:, 1]) ** 2
    y_cls = np.digitize(signal + 0.3 * rng.normal(size=n), [0.0, 1.0])  # 3 classes
    y_bin = np.where(signal > 0.5, "yes", "no")                          # mapped labels
    y_reg = (signal + 0.1 * rng.normal(size=n)).astype(np.float32)
    w = rng.integers(1, 4, n).astype(np.float32)
    leaves = lambda f: [np.asarray(a) for a in jax.tree_util.tree_leaves(f)]
    bitwise = lambda a, b: (len(leaves(a)) == len(leaves(b)) and all(
        u.shape == v.shape and np.array_equal(u, v) for u, v in zip(leaves(a), leaves(b))))
    out = {}
    cases = {  # (labels, settings): whole bootstrap counts times integer weights: exact sums
        "depthwise/multiclass": (y_cls, dict(task="classification")),
        "depthwise/binary labels, poisson": (y_bin, dict(task="classification", bootstrap="poisson")),
        "oblivious/multiclass": (y_cls, dict(task="classification", tree_family="oblivious", depth=6)),
        "depthwise/regression": (y_reg, dict(task="regression")),
    }
    for name, (y, extra) in cases.items():
        kw = dict(n_trees=5, n_bins=32, key=3, chunk_size=2, sample_weight=w, **extra)
        single = fit_forest(X, y, **kw)
        for n_dev, devices in DEVICES.items():
            if n_dev == 3 and name not in ("depthwise/multiclass", "depthwise/regression"):
                continue  # (the suite's time: each mesh compiles its own programs)
            multi = fit_forest(X, y, devices=devices, **kw)
            ta, tb = single.trees, multi.trees
            rule = lambda t: np.stack([np.asarray(t.features), np.asarray(t.thresholds),
                                       np.asarray(t.missing_right)], -1)
            fa, fb = jax.tree_util.tree_map(np.asarray, (ta, tb))
            ties, gain_diff, leaf_diff_same = [], 0.0, 0.0
            for t in range(fa.features.shape[0]):  # per tree: the first split that differs, if any
                ra, rb = rule(fa)[t], rule(fb)[t]
                m = min(len(ra), len(rb))
                differ = np.flatnonzero((ra[:m] != rb[:m]).any(-1))
                i = int(differ[0]) if len(differ) else m
                rel = lambda u, v: np.abs(u - v) / np.maximum(1.0, np.abs(u))  # noqa: E731
                gain_diff = max(gain_diff, float(np.max(rel(fa.gains[t, :i], fb.gains[t, :i]), initial=0.0)))
                if len(differ):
                    ties.append(float(rel(fa.gains[t, i], fb.gains[t, i])))
                else:
                    leaf_diff_same = max(leaf_diff_same, float(np.max(np.abs(
                        fa.leaf_values[t] - fb.leaf_values[t]))))
            out[f"{name}/{n_dev}"] = {
                "tie_gaps": ties, "gain_diff_before": gain_diff, "leaf_diff_same_trees": leaf_diff_same,
                "bitwise": bitwise(single, multi),
                "same_splits": rule(ta).shape == rule(tb).shape and bool(np.array_equal(rule(ta), rule(tb))),
                "same_bag_weights": bool(np.array_equal(single.bag_weights, multi.bag_weights)),
                "leaf_diff": float(np.max(np.abs(np.asarray(ta.leaf_values) - np.asarray(tb.leaf_values))))
                if ta.leaf_values.shape == tb.leaf_values.shape else None,
                "pred_diff": float(np.max(np.abs(np.asarray(jboost.predict(single, X))
                                                 - np.asarray(jboost.predict(multi, X))))),
                "used_nodes": int((np.asarray(ta.gains) > 0).sum()),
                "classes": None if multi.classes is None else [str(c) for c in multi.classes.labels],
            }
    # Lifecycle on 2 devices: a continued forest is one fit of all its trees; a fit stopped by a
    # callback after its first chunk resumes from its checkpoints to the uninterrupted forest.
    kw = dict(n_trees=4, n_bins=32, key=5, chunk_size=2, devices=DEVICES[2])
    whole = fit_forest(X, y_cls, **kw)
    head = fit_forest(X, y_cls, **dict(kw, n_trees=2))
    continued = fit_forest(X, y_cls, init_model=head, **dict(kw, n_trees=2))
    with tempfile.TemporaryDirectory() as d:
        stopped = fit_forest(X, y_cls, checkpoint_dir=d, callbacks=[lambda info: True], **kw)
        resumed = fit_forest(X, y_cls, checkpoint_dir=d, **kw)
    out["lifecycle"] = {"continued_bitwise": bitwise(whole, continued), "stopped_trees": stopped.n_trees,
                        "resumed_bitwise": bitwise(whole, resumed)}
    try:
        jax.vmap(lambda l2: fit_forest(X, y_cls, l2=l2, devices="all", n_trees=2).trees.gains)(
            jnp.array([0.0, 1.0]))
        out["vmap_error"] = None
    except ValueError as e:
        out["vmap_error"] = str(e)
    print("RESULT " + json.dumps(out))
    """
)


@pytest.mark.subprocess
@pytest.mark.slow
def test_sharded_forest_equals_single_device_forest():
    """A forest with its rows sharded over 2 CPU devices (``devices=``; 601 rows: a padding row
    of weight 0), and over 3 for two of the cases (two padding rows): every bag's bootstrap counts are the single-device draws, and each
    level's histograms, node counts and leaf sums are summed across the devices. Classification
    (whole bootstrap counts times integer weights: exact float sums) gives the single-device
    forest bitwise -- the depth-wise trees grown level by level in JAX (the compact path)
    against the CPU whole-tree kernel's, oblivious trees against the fused kernel's; regression
    the same splits up to a near tie that the summation order breaks the other way, leaf means
    to float rounding. A sharded forest continued, or stopped and resumed from its checkpoints,
    is the forest of one sharded fit bitwise; under jax.vmap devices= is refused, naming why.
    (One test, one subprocess: a module fixture would run once per xdist worker.)"""
    run = run_on_devices(FOREST_SCRIPT, 3)
    for case in ("depthwise/multiclass", "depthwise/binary labels, poisson", "oblivious/multiclass",
                 "depthwise/regression"):
        for n_devices in (2, 3) if case in ("depthwise/multiclass", "depthwise/regression") else (2,):
            r = run[f"{case}/{n_devices}"]
            where = (case, n_devices, r)
            assert r["used_nodes"] >= (25 if case.startswith("oblivious") else 300), where  # deep
            assert r["same_bag_weights"], where
            if case.endswith("regression"):
                # Per tree, every split up to the first that a near tie decides the other way
                # (none, or one tree in five here: gains 0.49359035 on both sides) is the same,
                # gains to 1e-4 (a gain is a difference of terms G^2 / H of up to hundreds here:
                # float32 rounding); trees without such a tie have leaf means equal to 1e-5.
                assert len(r["tie_gaps"]) <= 1 and all(g < 1e-5 for g in r["tie_gaps"]), where
                assert r["gain_diff_before"] < 1e-4 and r["leaf_diff_same_trees"] < 1e-5, where
            else:
                assert r["bitwise"] and r["same_splits"], where
            if "binary labels" in case:
                assert r["classes"] == ["no", "yes"], where
    r = run["lifecycle"]
    assert r["continued_bitwise"] and r["resumed_bitwise"] and r["stopped_trees"] == 2, r
    assert "concrete fit" in run["vmap_error"], run["vmap_error"]
