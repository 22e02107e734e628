"""The model lifecycle of the ensembles (issue 15): warm starts (``init_model=``) of forests,
bagged boosters and ECOC ensembles, bitwise equal to the longer fit; the refusals of stacking and
sweeps. Every fit is tiny (<= 300 rows, depth <= 3, 16 bins, a few rounds)."""

import re

import jax
import numpy as np
import pytest

from tests import _processes

import jboost
from jboost import bagging
from jboost import combine
from _bagging_data import DEPTH, clf_data, forest, noisy_classification  # noqa: F401 (fixtures)
from jboost.engine import batching
from jboost.engine import boosting as boosting_lib
from jboost.engine import checkpoints

# Plumbing tests on tiny programs: compiled without XLA's optimisations (conftest.quick_compiles).
pytestmark = pytest.mark.usefixtures("quick_compiles")

N_BINS = 16


def assert_bitwise(a, b):
    """Every array of two models (pytrees) equal bitwise, with the same dtypes and shapes."""
    la, ta = jax.tree_util.tree_flatten_with_path(a)
    lb, tb = jax.tree_util.tree_flatten_with_path(b)
    assert ta == tb
    for (path, u), (_, v) in zip(la, lb):
        u, v = np.asarray(u), np.asarray(v)
        assert u.dtype == v.dtype and u.shape == v.shape, (jax.tree_util.keystr(path), u.shape, v.shape)
        np.testing.assert_array_equal(u, v, err_msg=jax.tree_util.keystr(path))


@pytest.fixture(scope="module")
def clf():
    X, y, _ = noisy_classification(300, seed=0)
    return X, y


@pytest.fixture(scope="module")
def letters():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(240, 5)).astype(np.float32)
    y = np.digitize(X[:, 0] + X[:, 1], [-1.0, 0.0, 1.0]).astype(np.int32)
    return X, y, combine.exhaustive_code(4)


# --------------------------------------------------------------------------------------------
# Warm starts.
# --------------------------------------------------------------------------------------------

# The session's forest fixture (_bagging_data.forest: 24 trees in chunks of 8), grown 8 at a time.
FOREST = dict(depth=DEPTH, max_features=3, n_bins=N_BINS, key=3, chunk_size=8,
              tree_family="oblivious")  # the session fixture's
BAGS = dict(depth=2, n_bins=N_BINS, key=3, n_bags=3, subsample=0.8, learning_rate=0.3,
            chunk_size=3)
ECOC = dict(depth=2, n_bins=N_BINS, key=3, subsample=0.8, learning_rate=0.3)


@pytest.fixture(scope="module")
def forests(clf_data, forest):
    """The session's forest of 24 trees and a forest of its first 8 (one program grows 8 trees
    from any first tree)."""
    X, y, _, _ = clf_data
    return forest, bagging.fit_forest(X, y, n_trees=8, **FOREST)


@pytest.fixture(scope="module")
def bags(clf):
    """Bagged boosters of 10 rounds and of their first 5."""
    X, y = clf
    return (bagging.fit_bagged_boosters(X, y, "binomial_deviance", n_rounds=10, **BAGS),
            bagging.fit_bagged_boosters(X, y, "binomial_deviance", n_rounds=5, **BAGS))


@pytest.fixture(scope="module")
def ecocs(letters):
    X, y, code = letters
    return (combine.fit_ecoc_boosters(X, y, code, n_rounds=8, chunk_size=4, **ECOC),
            combine.fit_ecoc_boosters(X, y, code, n_rounds=4, **ECOC))


def test_a_continued_forest_equals_the_longer_forest_bitwise(clf_data, forests, tmp_path):
    """8 trees continued by 8 and 8 more == 24 trees: tree b's key depends only on b; the
    continued forest saves and loads bitwise."""
    X, y, _, _ = clf_data
    whole, first = forests
    more = bagging.fit_forest(X, y, n_trees=8, init_model=first, **FOREST)
    more = bagging.fit_forest(X, y, n_trees=8, init_model=more, **FOREST)
    assert more.n_trees == 24
    assert_bitwise(more, whole)
    jboost.save(more, tmp_path / "forest.jbm")
    assert_bitwise(jboost.load(tmp_path / "forest.jbm"), whole)


def test_continued_bagged_boosters_equal_the_longer_fit_bitwise(clf, bags):
    """Every bag continued by 5 rounds after 5 == 10 rounds (row subsampling: the keys of rounds
    5..9 continue the bag's), its bootstrap weights and baseline kept."""
    X, y = clf
    whole, first = bags
    more = bagging.fit_bagged_boosters(X, y, "binomial_deviance", n_rounds=5, init_model=first, **BAGS)
    assert more.n_rounds == 10
    assert_bitwise(more, whole)


def test_a_continued_ecoc_model_equals_the_longer_fit_bitwise(letters, ecocs):
    X, y, code = letters
    whole, first = ecocs
    more = combine.fit_ecoc_boosters(X, y, code, n_rounds=4, chunk_size=3, init_model=first, **ECOC)
    assert more.n_rounds == 8
    assert_bitwise(more, whole)


def test_warm_start_refusals_say_why_and_what_to_do(clf, letters, forests, bags, ecocs):
    X, y = clf
    forest, first = forests[1], bags[1]
    with pytest.raises(ValueError, match="init_model was fitted on 400 rows .* X has 300"):
        bagging.fit_forest(X, y, n_trees=2, init_model=forest, **FOREST)
    with pytest.raises(ValueError, match=r"n_bins=256 differs from init_model's \(16\)"):
        bagging.fit_forest(X, y, n_trees=2, init_model=forest, **{**FOREST, "n_bins": 256})
    with pytest.raises(ValueError, match="task='regression' differs from init_model's"):
        bagging.fit_forest(X, y, n_trees=2, task="regression", init_model=forest, **FOREST)
    with pytest.raises(TypeError, match="init_model must be a Forest"):
        bagging.fit_forest(X, y, n_trees=2, init_model=first, **FOREST)
    with pytest.raises(TypeError, match="init_model must be BaggedBoosters"):
        bagging.fit_bagged_boosters(X, y, "binomial_deviance", n_rounds=2, init_model=forest, **BAGS)
    with pytest.raises(ValueError, match="n_bags=2 differs from init_model's 3 bags"):
        bagging.fit_bagged_boosters(X, y, "binomial_deviance", n_rounds=2, init_model=first,
                                    **{**BAGS, "n_bags": 2, "chunk_size": 1})
    with pytest.raises(ValueError, match="init_model was fitted with loss 'binomial_deviance'"):
        bagging.fit_bagged_boosters(X, y, "squared_error", n_rounds=2, init_model=first, **BAGS)
    stopped = first._replace(best_round=jax.numpy.zeros(3, jax.numpy.int32))
    with pytest.raises(ValueError, match="fitted with early stopping: its bags stopped at different"):
        bagging.fit_bagged_boosters(X, y, "binomial_deviance", n_rounds=2, init_model=stopped, **BAGS)
    Xl, yl, code = letters
    ecoc = ecocs[1]
    with pytest.raises(ValueError, match="code differs from init_model's"):
        combine.fit_ecoc_boosters(Xl, yl, code[:, :5], n_rounds=2, init_model=ecoc, **ECOC)
    with pytest.raises(ValueError, match="second tier was trained on the out-of-fold scores"):
        combine.fit_stacked_boosters(X, y, "binomial_deviance", hypers=[{}], init_model=ecoc)
    with pytest.raises(ValueError, match=re.escape("init_model=result.refit(X, y)")):
        jboost.sweep.sweep(X, y, "binomial_deviance", init_model=ecoc)


# --------------------------------------------------------------------------------------------
# Early stopping of ECOC bits and of stacking's fold fits.
# --------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_each_ecoc_bit_stops_on_its_own_as_its_separate_fit(letters, tmp_path):
    """Every bit learner stops on its validation labels ``code[y_valid, l]`` as ``jboost.fit``
    with that eval_set and key ``fold_in(key, l)`` (the same trees, stop and best round here);
    predictions use each bit's best round; the model file keeps ``best_round``."""
    X, y, code = letters
    Xv, yv = X[:80] + 0.3, y[:80]
    kw = dict(depth=2, n_bins=N_BINS, learning_rate=0.5)
    model = combine.fit_ecoc_boosters(X, y, code, n_rounds=40, key=3, eval_set=(Xv, yv),
                                      early_stopping_rounds=3, **kw)
    best = np.asarray(model.best_round)
    assert best.shape == (code.shape[1],) and model.n_rounds < 40
    key = jboost.checks.as_key(3)
    for l in (int(np.argmin(best)), int(np.argmax(best))):
        alone = jboost.fit(X, code[y, l], "binomial_deviance", n_rounds=40, key=jax.random.fold_in(key, l),
                           eval_set=(Xv, code[yv, l]), early_stopping_rounds=3, **kw)
        assert int(alone.best_round) == best[l]
        np.testing.assert_allclose(model.trees.leaf_values[l, :alone.n_rounds], alone.trees.leaf_values,
                                   rtol=1e-5, atol=1e-6)
        assert not np.any(np.asarray(model.trees.leaf_values[l, alone.n_rounds:]))
    raw = np.asarray(jboost.predict(model, Xv))
    for l in range(code.shape[1]):  # bit l: its rounds 0..best_round
        first = np.asarray(jboost.predict(model, Xv, n_rounds=best[l] + 1))
        np.testing.assert_array_equal(raw[:, l], first[:, l])
    jboost.save(model, tmp_path / "ecoc.jbm")
    loaded = jboost.load(tmp_path / "ecoc.jbm")
    np.testing.assert_array_equal(loaded.best_round, model.best_round)
    np.testing.assert_array_equal(jboost.predict_class(loaded, Xv), jboost.predict_class(model, Xv))
    with pytest.raises(ValueError, match="init_model was fitted with early stopping"):
        combine.fit_ecoc_boosters(X, y, code, n_rounds=2, init_model=model, **kw)


STACK = dict(hypers=[{"learning_rate": 0.6}, {"learning_rate": 0.2, "l2": 3.0}], folds=2, n_rounds=40,
             early_stopping_rounds=3, key=1, depth=2, n_bins=N_BINS)


@pytest.fixture(scope="module")
def stack(clf):
    X, y = clf
    return combine.fit_stacked_boosters(X, y, "binomial_deviance", **STACK)


@pytest.mark.slow
def test_stacking_stops_each_fold_fit_and_uses_each_learners_best_round(clf, stack, tmp_path):
    """Fold fit (s, m) stops on its held-out fold as ``jboost.fit(sample_weight=mask,
    eval_set=(X, y, 1 - mask))``; learner m's best round is the minimum of its fold-averaged
    held-out curve; its all-data learner keeps rounds 0..best_round (later ones zero)."""
    X, y = clf
    hypers = STACK["hypers"]
    kw = dict(depth=2, n_bins=N_BINS)
    model = stack
    best = np.asarray(model.best_round)
    assert best.shape == (2,) and model.n_rounds == best.max() + 1
    lv = np.asarray(model.trees.leaf_values)
    for m in range(2):
        assert np.all(lv[m, best[m] + 1:] == 0) and np.any(lv[m, best[m]])
    jboost.save(model, tmp_path / "stack.jbm")  # best_round is kept in the model file
    assert_bitwise(jboost.load(tmp_path / "stack.jbm"), model)
    # The fold fits themselves (stopping on the error rate), against separate fits; the best
    # rounds from their curves.
    from jboost.data import folds as cv
    data = jboost.fitting.prepare.prepare(X, y, n_bins=N_BINS)
    masks = cv.fold_masks(np.asarray([0, 1] * 150), 2)
    config, hyper = jboost.combine.stacking._learner_settings(hypers, n_rounds=40, **kw)
    config = config._replace(missing=data.missing,
                             early_stopping=boosting_lib.EarlyStopping(3, metric="error_rate"))
    _, _, _, valid, n_fitted = combine.stacking.cross_fit_stopped(
        data.X_binned, data.y, data.w, jboost.checks.as_key(5), masks, hyper,
        jboost.losses.binomial_deviance(), config=config)
    mask = np.asarray(masks[1])
    alone = jboost.fit(X, y, "binomial_deviance", n_rounds=40,
                       key=jax.random.fold_in(jboost.checks.as_key(5), 0),
                       sample_weight=mask, eval_set=(X, y, 1.0 - mask), early_stopping_rounds=3,
                       eval_metric="error_rate", learning_rate=0.6, borders=data.borders, **kw)
    assert int(n_fitted[1, 0]) == alone.n_rounds
    assert int(np.argmin(valid[1, 0, :alone.n_rounds])) == int(alone.best_round)
    held_out = (1.0 - mask).astype(bool)
    wrong = (np.asarray(jboost.predict(alone, X, n_rounds=alone.n_rounds)) > 0) != (y > 0.5)
    np.testing.assert_allclose(valid[1, 0, alone.n_rounds - 1], wrong[held_out].mean(), rtol=1e-6)
    curve = np.where(np.arange(40)[None] < np.asarray(n_fitted).min(0)[:, None],
                     np.asarray(valid).mean(0), np.inf)
    np.testing.assert_array_equal(combine.stacking.learner_best_rounds(valid, n_fitted),
                                  np.argmin(curve, axis=1))


# --------------------------------------------------------------------------------------------
# Checkpoints and callbacks.
# --------------------------------------------------------------------------------------------

_KILLED_BAGS = """
import os, signal, sys
sys.path.insert(0, {tests!r})
from jboost import bagging
from jboost.engine import checkpoints
from _bagging_data import noisy_classification
save = checkpoints.ChunkCheckpoints.save
def save_then_die(self, part, chunk, outputs, items):
    save(self, part, chunk, outputs, items)
    os.kill(os.getpid(), signal.SIGKILL)  # a real kill, after the first chunk's file is written
checkpoints.ChunkCheckpoints.save = save_then_die
X, y, _ = noisy_classification(300, seed=0)
bagging.fit_bagged_boosters(X, y, "binomial_deviance", n_rounds=5, checkpoint_dir=sys.argv[1],
                            **{kw!r})
"""


@pytest.mark.subprocess
@pytest.mark.slow
def test_killed_bagged_boosters_resume_from_their_checkpoints_bitwise(clf, bags, tmp_path):
    """Bagged boosters killed (SIGKILL) after their first chunk of bags and rerun with the same
    call fit only the other chunk and end bitwise equal to the fit without checkpoints (in one
    chunk: chunking does not change the bags); callbacks see both chunks, the first read from
    the checkpoint; another fit in that directory is refused."""
    import os
    import signal
    import subprocess
    import sys
    X, y = clf
    kw = {**BAGS, "chunk_size": 2}
    ckpt = tmp_path / "ckpt"
    code = _KILLED_BAGS.format(tests=os.path.dirname(os.path.abspath(__file__)), kw=kw)
    killed = _processes.python(code, quiet=30, what="bagged boosters killed mid-way",
                               extra_args=[str(ckpt)])
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-3000:]
    assert sorted(os.listdir(ckpt)) == ["bags-chunk00000.npz"]
    seen = []
    resumed = bagging.fit_bagged_boosters(X, y, "binomial_deviance", n_rounds=5, checkpoint_dir=ckpt,
                                          callbacks=[seen.append], **kw)
    assert_bitwise(resumed, bags[1])
    assert [(e["bags"], e["done"], e["items"], e["from_checkpoint"]) for e in seen] == [
        ([0, 1], 2, 3, True), ([2], 3, 3, False)]
    np.testing.assert_array_equal(seen[1]["train_loss"], bags[1].train_loss[2:])
    assert sorted(os.listdir(ckpt)) == ["bags-chunk00000.npz", "bags-chunk00001.npz"]
    with pytest.raises(ValueError, match=re.escape(str(ckpt / "bags-chunk00000.npz"))):
        bagging.fit_bagged_boosters(X, y, "binomial_deviance", n_rounds=5, checkpoint_dir=ckpt,
                                    **{**kw, "key": 4})


def test_an_interrupted_ecoc_fit_resumes_bitwise_and_callbacks_see_each_chunk(letters, ecocs, tmp_path,
                                                                             monkeypatch):
    """Ctrl-C as the second chunk of bits is saved: KeyboardInterrupt naming the saved chunk;
    the rerun fits only the rest and equals the fit without checkpoints (one chunk) bitwise. A
    callback returning True keeps the bits fitted (and the code's first columns, warned)."""
    X, y, code = letters
    save, calls = checkpoints.ChunkCheckpoints.save, []

    def save_then_interrupt(self, part, chunk, outputs, items):
        calls.append(chunk)
        if len(calls) == 2:
            raise KeyboardInterrupt
        save(self, part, chunk, outputs, items)

    monkeypatch.setattr(checkpoints.ChunkCheckpoints, "save", save_then_interrupt)
    with pytest.raises(KeyboardInterrupt, match="1 of them saved"):
        combine.fit_ecoc_boosters(X, y, code, n_rounds=4, chunk_size=3, checkpoint_dir=tmp_path, **ECOC)
    monkeypatch.setattr(checkpoints.ChunkCheckpoints, "save", save)
    seen = []
    resumed = combine.fit_ecoc_boosters(X, y, code, n_rounds=4, chunk_size=3, checkpoint_dir=tmp_path,
                                        callbacks=[seen.append], **ECOC)
    assert_bitwise(resumed, ecocs[1])
    assert [(e["bits"], e["from_checkpoint"]) for e in seen] == [
        ([0, 1, 2], True), ([3, 4, 5], False), ([6], False)]
    with pytest.warns(UserWarning, match="after 6 of 7 bits"):
        part = combine.fit_ecoc_boosters(X, y, code, n_rounds=4, chunk_size=3,
                                         callbacks=[lambda e: e["done"] >= 6], **ECOC)
    assert_bitwise(part, ecocs[1]._replace(
        trees=jax.tree_util.tree_map(lambda a: a[:6], ecocs[1].trees), baseline=ecocs[1].baseline[:6],
        code=ecocs[1].code[:, :6]))


def test_forest_and_sweep_callbacks_report_each_chunk_and_stop(clf, clf_data, forests):
    """A forest's callback gets each chunk's trees; returning True keeps the trees fitted
    (bitwise the first trees of the forest). A sweep's callback gets each chunk's curves;
    returning True leaves the other models NaN (warned, not ranked)."""
    X, y, _, _ = clf_data
    seen = []
    stopped = bagging.fit_forest(X, y, n_trees=24, callbacks=[seen.append, lambda e: e["done"] >= 16],
                                 **FOREST)
    assert_bitwise(stopped, jax.tree_util.tree_map(lambda a: a[:16], forests[0])._replace(
        borders=forests[0].borders))
    assert [(e["trees"], e["done"], e["items"]) for e in seen] == [
        (list(range(8)), 8, 24), (list(range(8, 16)), 16, 24)]
    assert all(e["elapsed"] >= 0 for e in seen)
    X, y = clf
    seen = []
    kw = dict(grid={"learning_rate": [0.1, 0.5, 0.9]}, folds=2, seeds=1, n_rounds=3, depth=2,
              n_bins=N_BINS, chunk_size=4, devices=None)
    with pytest.warns(UserWarning, match="stopped the sweep after 4 of 6 models"):
        part = jboost.sweep.sweep(X, y, "binomial_deviance", callbacks=[seen.append, lambda e: True], **kw)
    assert [(e["group"], e["models"], e["done"], e["items"]) for e in seen] == [
        ("depth=2,n_bins=16", [0, 1, 2, 3], 4, 6)]
    np.testing.assert_array_equal(seen[0]["valid_curves"], part.valid_curves[:4])
    assert np.isfinite(part.valid_curves[:4]).all() and np.isnan(part.valid_curves[4:]).all()


def test_an_interrupted_early_stopped_stacking_resumes_bitwise(clf, stack, tmp_path, monkeypatch):
    """Ctrl-C as the second fold's fits are saved: the rerun fits the second fold and the
    all-data learners only, and equals the stacking fit without checkpoints bitwise."""
    import os
    X, y = clf
    save, calls = checkpoints.ChunkCheckpoints.save, []

    def save_then_interrupt(self, part, chunk, outputs, items):
        calls.append(chunk)
        if len(calls) == 2:
            raise KeyboardInterrupt
        save(self, part, chunk, outputs, items)

    monkeypatch.setattr(checkpoints.ChunkCheckpoints, "save", save_then_interrupt)
    with pytest.raises(KeyboardInterrupt, match="1 of them saved"):
        combine.fit_stacked_boosters(X, y, "binomial_deviance", checkpoint_dir=tmp_path, **STACK)
    monkeypatch.setattr(checkpoints.ChunkCheckpoints, "save", save)
    assert sorted(os.listdir(tmp_path)) == ["stacking-folds-chunk00000.npz"]
    resumed = combine.fit_stacked_boosters(X, y, "binomial_deviance", checkpoint_dir=tmp_path, **STACK)
    assert_bitwise(resumed, stack)
    assert sorted(os.listdir(tmp_path)) == ["stacking-all-chunk00000.npz", "stacking-folds-chunk00000.npz",
                                            "stacking-folds-chunk00001.npz"]


# --------------------------------------------------------------------------------------------
# Offsets.
# --------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_bagged_boosters_start_each_bag_from_the_rows_offsets(letters):
    """A Poisson bag with ``base_margin=log(exposure)`` is the separate ``jboost.fit`` with those
    offsets, its bootstrap weights and its key (bitwise here); ECOC refuses offsets, saying why."""
    from jboost.bagging import bootstrap
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 4)).astype(np.float32)
    exposure = np.exp(rng.uniform(0, 2, size=200))
    y = rng.poisson(exposure * np.exp(0.5 * X[:, 0])).astype(np.float32)
    kw = dict(depth=2, n_bins=N_BINS, learning_rate=0.3, n_rounds=4)
    model = bagging.fit_bagged_boosters(X, y, "poisson", base_margin=np.log(exposure), n_bags=2, key=3,
                                        **kw)
    _, k_fit = bootstrap.bag_keys(jboost.checks.as_key(3), 1)
    alone = jboost.fit(X, y, "poisson", sample_weight=model.bag_weights[1], base_margin=np.log(exposure),
                       key=k_fit, borders=model.borders, **kw)
    np.testing.assert_allclose(model.baseline[1], alone.baseline, rtol=1e-6)
    np.testing.assert_allclose(model.trees.leaf_values[1], alone.trees.leaf_values, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(model.train_loss[1], alone.train_loss, rtol=1e-6)
    # Predictions take the rows' offsets as jboost.fit's models do: every bag adds them.
    margin = np.log(exposure).astype(np.float32)
    with_offsets = np.asarray(jboost.predict(model, X, base_margin=margin))
    np.testing.assert_allclose(with_offsets, np.asarray(jboost.predict(model, X)) + margin, rtol=1e-6)
    np.testing.assert_allclose(np.asarray(jboost.predict_mean(model, X, base_margin=margin)),
                               np.exp(with_offsets), rtol=1e-5)
    Xl, yl, code = letters
    with pytest.raises(ValueError, match="fit_ecoc_boosters takes no base_margin"):
        combine.fit_ecoc_boosters(Xl, yl, code, base_margin=np.zeros(len(yl)))
    with pytest.raises(ValueError, match="eval_base_margin is for a shared eval_set"):
        bagging.fit_bagged_boosters(X, y, "poisson", base_margin=np.log(exposure), n_bags=2,
                                    early_stopping_rounds=2, eval_base_margin=np.zeros(5), **kw)


# --------------------------------------------------------------------------------------------
# Ctrl-C without checkpoints; stacking's callbacks and progress lines.
# --------------------------------------------------------------------------------------------


def _interrupt_waiting_for_chunk(monkeypatch, n: int):
    """Send SIGINT (a real signal, what Ctrl-C sends) while the host waits for the ``n``-th chunk
    of a fit (:func:`jboost.engine.batching.wait`)."""
    import signal
    wait, calls = batching.wait, []

    def interrupting(out, *args, **kwargs):
        calls.append(len(calls))
        if len(calls) == n:
            signal.raise_signal(signal.SIGINT)
        return wait(out, *args, **kwargs)

    monkeypatch.setattr(batching, "wait", interrupting)
    return calls


def _first_bags(model, n: int):
    """Bagged boosters' first ``n`` bags (every per-bag field; the shared borders kept)."""
    return jax.tree_util.tree_map(lambda a: a[:n], model)._replace(borders=model.borders)


def test_ctrl_c_returns_the_trees_and_bags_fitted_so_far(clf_data, clf, forests, bags, monkeypatch):
    """A default forest or bagged fit (no checkpoint_dir, no callbacks) interrupted while its
    third chunk runs returns, with a warning, bitwise the first chunks' trees or bags; so does a
    KeyboardInterrupt raised in a callback; one before the first chunk has finished raises."""
    X, y, _, _ = clf_data
    _interrupt_waiting_for_chunk(monkeypatch, 2)
    with pytest.warns(UserWarning, match=r"interrupted \(Ctrl-C\) after 1 of 3 chunks of trees: the "
                                         r"model holds the 8 of 24 trees fitted so far\."):
        part = bagging.fit_forest(X, y, n_trees=24, **FOREST)
    assert_bitwise(part, forests[1])

    def interrupt_after_16(entry):
        if entry["done"] >= 16:
            raise KeyboardInterrupt

    monkeypatch.undo()
    with pytest.warns(UserWarning, match="the model holds the 16 of 24 trees"):
        part = bagging.fit_forest(X, y, n_trees=24, callbacks=[interrupt_after_16], **FOREST)
    assert_bitwise(part, jax.tree_util.tree_map(lambda a: a[:16], forests[0])._replace(
        borders=forests[0].borders))
    _interrupt_waiting_for_chunk(monkeypatch, 1)
    with pytest.raises(KeyboardInterrupt, match="interrupted after 0 of 3 chunks of trees"):
        bagging.fit_forest(X, y, n_trees=24, **FOREST)
    X, y = clf
    _interrupt_waiting_for_chunk(monkeypatch, 3)
    with pytest.warns(UserWarning, match="after 2 of 3 chunks of bags: the model holds the 2 of 3 bags"):
        part = bagging.fit_bagged_boosters(X, y, "binomial_deviance", n_rounds=5,
                                           **{**BAGS, "chunk_size": 1})
    assert part.n_bags == 2
    assert_bitwise(part, _first_bags(bags[1], 2))


def test_ctrl_c_stops_an_ecoc_fit_at_once_with_no_partial_model(letters, monkeypatch):
    """ECOC: no model of a part of the code (it would decode with a part of it): the
    KeyboardInterrupt says so, and what was computed."""
    X, y, code = letters
    _interrupt_waiting_for_chunk(monkeypatch, 2)
    with pytest.raises(KeyboardInterrupt, match=r"interrupted after 1 of 3 chunks of bits were "
                                                r"computed; .* No model is returned"):
        combine.fit_ecoc_boosters(X, y, code, n_rounds=4, chunk_size=3, **ECOC)


def test_waiting_for_a_chunk_lets_ctrl_c_land_at_once():
    """The host polls a running chunk (``is_ready``), so SIGINT lands within milliseconds,
    however long the chunk runs (``jax.block_until_ready`` would hold it until the end)."""
    import signal
    import threading
    import time
    from jboost.engine import batching

    prompt = _processes.scaled(2.0)

    class Running:  # a computation that ends long after `prompt` (the test must not hang if it fails)
        def __init__(self):
            self.end = time.perf_counter() + 10 * prompt

        def is_ready(self):
            return time.perf_counter() > self.end

    # A process started in the background by a shell without job control (`cmd &`) inherits SIGINT
    # ignored, and Python then installs no KeyboardInterrupt handler: the test installs Python's
    # own for its duration (an interactive Ctrl-C has it).
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        timer = threading.Timer(0.2, signal.pthread_kill, (threading.main_thread().ident, signal.SIGINT))
        start = time.perf_counter()
        timer.start()
        with pytest.raises(KeyboardInterrupt):
            batching.wait([np.zeros(3), Running()])
        assert time.perf_counter() - start < prompt
    finally:
        timer.cancel()
        signal.signal(signal.SIGINT, previous)
    ready = [np.ones(2), jax.numpy.ones(2)]
    assert batching.wait(ready) is ready


def test_stacking_reports_each_masks_fits_to_callbacks_and_progress_lines(clf, stack, capsys):
    """callbacks= and verbose= run the fits mask by mask from the host: bitwise the one-call
    model; a callback sees each fold's fits (their curves) and the all-data fits; a callback
    returning True stops with an error (a stacked model needs every fit)."""
    X, y = clf
    seen = []
    model = combine.fit_stacked_boosters(X, y, "binomial_deviance", callbacks=[seen.append],
                                         verbose=True, **STACK)
    assert_bitwise(model, stack)
    assert [(e["fold"], e["learners"], e["done"], e["items"]) for e in seen] == [
        (0, [0, 1], 1, 2), (1, [0, 1], 2, 2), ("all", [0, 1], 1, 1)]
    assert seen[0]["valid_loss"].shape == (2, 40) and seen[1]["n_fitted"].shape == (2,)
    assert seen[2]["train_loss"].shape == (2, model.n_rounds)
    lines = [l for l in capsys.readouterr().out.splitlines() if l.startswith("[jboost] stacking")]
    assert [l.split()[3] for l in lines] == ["1/2", "2/2", "1/1"]
    with pytest.raises(RuntimeError, match="a callback stopped the stacking fit after 1 of its 3 "
                                           "masks' fits"):
        combine.fit_stacked_boosters(X, y, "binomial_deviance", callbacks=[lambda e: True], **STACK)
