"""Tests of jboost.engine.batching's host-side chunks and their checkpoints (map_chunks,
ChunkCheckpoints, fingerprint), on plain arrays: no program is compiled here. The sweep and the
forest resume through them (killed-process tests in test_sweep.py and test_forest.py); the memory
estimates are tested with the sweep and the forest."""

import os
import re
from typing import NamedTuple, Optional

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jboost.engine import batching
from jboost.engine import checkpoints
from jboost.engine import memory



class Out(NamedTuple):
    curve: np.ndarray
    counts: np.ndarray
    trees: Optional[np.ndarray] = None  # a None field, as a sweep's ChunkOut without trees


def _chunk(c, items):
    return Out(curve=np.sin(items.astype(np.float32)), counts=(items * 3).astype(np.int32))


def _like():
    return jax.eval_shape(lambda i: Out(jnp.sin(i.astype(jnp.float32)), (i * 3).astype(jnp.int32)),
                          jnp.zeros(4, jnp.int32))


def test_map_chunks_skips_done_chunks_and_reports_each_chunk(capsys):
    """10 items in chunks of 4: chunks 0..2 (the last runs past the items); a chunk given in
    ``done`` is not run, ``on_chunk`` sees only the chunks run, progress lines say which came
    from the checkpoint."""
    calls, seen = [], []

    def fn(c, items):
        calls.append((c, items.tolist()))
        return _chunk(c, items)

    kept = Out(np.full(4, 7.0, np.float32), np.zeros(4, np.int32))
    outs = batching.map_chunks(fn, 10, 4, done={1: kept}, on_chunk=lambda c, o: seen.append(c),
                                progress="test: items")
    assert calls == [(0, [0, 1, 2, 3]), (2, [8, 9, 10, 11])] and seen == [0, 2]
    assert outs[1] is kept and len(outs) == 3
    np.testing.assert_array_equal(outs[2].counts, [24, 27, 30, 33])
    lines = capsys.readouterr().out.splitlines()
    assert [l.split()[3] for l in lines] == ["4/10", "8/10", "10/10"]
    assert "from the checkpoint" in lines[1] and "elapsed" in lines[0] and "left" in lines[2]
    assert batching.chunk_layout(10, 4) == (3, 4) and batching.chunk_layout(20, 8) == (3, 7)


@pytest.mark.parametrize("keeps", [False, True])
def test_ctrl_c_ends_map_chunks_at_the_running_chunk_saying_what_is_kept(keeps):
    """SIGINT during chunk 1 of 3 raises KeyboardInterrupt at once: chunk 2 is never run, and
    the message counts the finished chunks and says whether they were kept for a rerun."""
    import signal
    calls, seen = [], []

    def fn(c, items):
        calls.append(c)
        if c == 1:
            signal.raise_signal(signal.SIGINT)
        return _chunk(c, items)

    with pytest.raises(KeyboardInterrupt) as err:
        batching.map_chunks(fn, 10, 4, on_chunk=(lambda c, o: seen.append(c)) if keeps else None,
                             what="test chunks")
    assert calls == [0, 1] and seen == ([0] if keeps else [])
    msg = str(err.value)
    assert msg.startswith("interrupted after 1 of 3 test chunks were computed; ")
    assert ("1 of them saved" in msg) == keeps and ("pass checkpoint_dir=" in msg) == (not keeps)


def test_chunk_checkpoints_round_trip_atomically_without_pickle(tmp_path):
    store = checkpoints.ChunkCheckpoints(tmp_path / "ck", "demo", "f" * 64)
    items = np.arange(4, 8)
    out = _chunk(1, items)
    store.save("g1-", 1, out, items)
    # Whole files only: the temporary file was renamed; arrays readable without pickle.
    assert sorted(os.listdir(tmp_path / "ck")) == ["demo-g1-chunk00001.npz"]
    with np.load(store.path("g1-", 1), allow_pickle=False) as f:
        assert str(f["__fingerprint__"]) == "f" * 64
    done = store.load("g1-", 3, _like, lambda c: np.arange(4 * c, 4 * c + 4))
    assert list(done) == [1] and done[1].trees is None
    for a, b in zip(done[1], out):
        if a is not None:
            np.testing.assert_array_equal(a, b)
            assert a.dtype == b.dtype
    # Another part of the same call has no chunk yet; like() is not needed then.
    assert store.load("g2-", 3, lambda: pytest.fail("like() called"), lambda c: items) == {}
    # The same call opens the directory again; another call is refused, naming the file.
    checkpoints.ChunkCheckpoints(tmp_path / "ck", "demo", "f" * 64)
    checkpoints.ChunkCheckpoints(tmp_path / "ck", "other", "e" * 64)  # another kind's files: ignored
    with pytest.raises(ValueError, match=re.escape(str(store.path("g1-", 1)))):
        checkpoints.ChunkCheckpoints(tmp_path / "ck", "demo", "e" * 64, differs="data or keys")


def test_chunk_checkpoints_refuse_other_chunks_shapes_and_broken_files(tmp_path):
    store = checkpoints.ChunkCheckpoints(tmp_path, "demo", "a" * 64)
    store.save("", 0, _chunk(0, np.arange(4)), np.arange(4))
    with pytest.raises(ValueError, match=r"holds items \[0, 1, 2, 3\] but chunk 0 .* has \[0, 1, 2\]"):
        store.load("", 1, _like, lambda c: np.arange(3))
    store.save("", 0, _chunk(0, np.arange(5)), np.arange(4))  # 5 values where 4 are expected
    with pytest.raises(ValueError, match=r"\.curve is float32\[5\], this demo makes float32\[4\]"):
        store.load("", 1, _like, lambda c: np.arange(4))
    with open(store.path("", 0), "r+b") as fh:  # a truncated file
        fh.truncate(100)
    with pytest.raises(ValueError, match="demo-chunk00000.npz is not a readable demo checkpoint"):
        checkpoints.ChunkCheckpoints(tmp_path, "demo", "a" * 64)
    with pytest.raises(TypeError, match="checkpoint_dir must be a directory path"):
        checkpoints.ChunkCheckpoints(3, "demo", "a" * 64)


def test_fingerprint_covers_arrays_and_settings_but_no_addresses():
    key = jax.random.key(3)
    base = checkpoints.fingerprint((np.arange(3), key), ("cfg", np.sin, {"lr": 0.1}))
    # A typed key and its raw key data are the same key.
    assert base == checkpoints.fingerprint((np.arange(3), jax.random.key_data(key)),
                                         ("cfg", np.sin, {"lr": 0.1}))
    assert base != checkpoints.fingerprint((np.arange(3) + 1, key), ("cfg", np.sin, {"lr": 0.1}))
    assert base != checkpoints.fingerprint((np.arange(3).astype(np.int8), key), ("cfg", np.sin, {"lr": 0.1}))
    assert base != checkpoints.fingerprint((np.arange(3), key), ("cfg", np.cos, {"lr": 0.1}))
    assert base != checkpoints.fingerprint((np.arange(3), key), ("cfg", np.sin, {"lr": 0.2}))
    # Functions by qualified name, not by address (the same in every process).
    assert checkpoints.stable_repr(_chunk) == f"{__name__}._chunk"
    assert "0x" not in checkpoints.stable_repr((Out, [np.sin], {"f": _like}))


def test_sharded_forest_estimate_bounds_slots_by_the_whole_table():
    """Rows sharded over devices: each device holds its rows, but the JAX levels' slots are
    bounded by the whole table's rows (``table_rows``), so the per-device estimate counts the
    slot histograms of the whole table's bound: twice the slots of 300 rows for 600."""
    kw = dict(n_eligible=7, n_features=57, depth=30, n_bins=256, n_outputs=2, n_samples=300,
              n_trees=10, chunk_size=2, tree_family="depthwise", kernel=False)
    one = memory.forest_bytes(**kw)
    sharded = memory.forest_bytes(**kw, table_rows=600)
    slot_hist = 7 * 256 * 2 * 4
    assert sharded - one == 2 * memory.FOREST_HIST_OVERHEAD * 150 * slot_hist
