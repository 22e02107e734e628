"""Hostile model files (issue 46): a file edited by hand with its checksum recomputed (as anyone
editing a file can) is refused with a ModelFileError naming the field, or predicts exactly as
the unedited model; a small compressed member that would expand past the limit is refused
before it is decompressed; several threads saving to one path never collide.

The property test parses the file format itself (``ModelFile``: the ``.npz`` members and the
JSON header, the checksum recomputed as ``jboost.save`` computes it) and makes random edits of
the structure, the header and the arrays. Edits that give another *valid* model are not made,
since no loader can tell them from a file saved so: the values of free parameters (leaf values,
baselines, offsets, stacker coefficients, loss parameters, missing-value directions; a code bit
of ECOC flipped between 0 and 1; another ``best_round`` within the rounds), class labels renamed
in order, optional fields removed, and node kinds turned into ``"none"``. Everything else --
shapes, dtypes, class lists, feature indices, thresholds, float borders, bin borders, children,
level counts, output counts, tasks, links, type names, numbers of the header -- must be refused
or change nothing.
"""

from __future__ import annotations

import io
import json
import os
import re
import threading
import time
import tracemalloc
import warnings
import zipfile
from collections import Counter

import jax
import numpy as np
import pytest

from tests import _processes

import jboost
from jboost import bagging, combine
from jboost import io as jio
from jboost.io import reader as jreader
from jboost.losses import loss as loss_lib

KW = dict(n_rounds=4, depth=2, n_bins=16)  # test_io.py's (its programs are compiled once)
EDITS_PER_MODEL = 22


# --------------------------------------------------------------------------------------------
# The file format, parsed by hand.
# --------------------------------------------------------------------------------------------


class ModelFile:
    """A model file as its arrays (by key path) and its JSON header, written back as a forger
    would: the header's array table (unless ``sync=False``) and checksum recomputed."""

    def __init__(self, path):
        with zipfile.ZipFile(path) as z:
            members = {n[:-4]: np.load(io.BytesIO(z.read(n)), allow_pickle=False)
                       for n in z.namelist()}
        self.header = json.loads(members.pop(jio.HEADER).tobytes())
        self.arrays = members

    def write(self, path, sync: bool = True):
        if sync:
            self.header["arrays"] = {k: {"dtype": a.dtype.name, "shape": list(a.shape)}
                                     for k, a in self.arrays.items()}
        self.header["checksum"] = jreader.checksum(self.header, self.arrays)
        members = dict(self.arrays)
        members[jio.HEADER] = np.frombuffer(json.dumps(self.header).encode(), np.uint8)
        buf = io.BytesIO()
        np.savez(buf, **members)
        with open(path, "wb") as f:
            f.write(buf.getvalue())


# --------------------------------------------------------------------------------------------
# Random edits: each returns (what it did, the field's name) or None where it does not apply.
# --------------------------------------------------------------------------------------------

#: Valid alternatives of enumerated header strings (an edit picks another one of them).
VOCABULARY = {
    "task": list(loss_lib.TASKS), "hessian": list(loss_lib.HESSIANS),
    "leaf_refit": [v for v in loss_lib.LEAF_REFITS if v], "dtype": ["U", "i", "u", "f", "b", "O"],
    "kind": ["array", "value", "dict", "namedtuple", "settings", "classes", "feature_names",
             "categorical_spec", "tree_family", "loss"],
}


def _vocabulary(key):
    reg = jio.registry.registry()
    if key in ("fn", "link", "baseline"):
        return sorted(reg["callables"])
    if key in ("type", "model_type"):
        return sorted(reg["models"]) + sorted(reg["nested"]) + sorted(reg["families"])
    return VOCABULARY.get(key)


def _json_leaves(node, path=()):
    """``(path, value)`` of every scalar of the header, but the checksum, the array table and the
    class labels (renaming labels in order is a valid relabelling: edit_classes edits them)."""
    if isinstance(node, dict):
        if node.get("kind") == "classes":
            yield path + ("dtype",), node.get("dtype")
            return
        for k, v in node.items():
            if path == () and k in ("checksum", "arrays"):
                continue
            yield from _json_leaves(v, path + (k,))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from _json_leaves(v, path + (i,))
    else:
        yield path, node


def _set(root, path, value):
    for k in path[:-1]:
        root = root[k]
    root[path[-1]] = value


def _new_value(rng, key, v):
    vocab = _vocabulary(key) if isinstance(key, str) else None
    if isinstance(v, bool):
        return not v
    if isinstance(v, int):
        return int(rng.choice([v + 1, v - 1, 0, -1, 2 * v + 1, 10**6]))
    if isinstance(v, float):
        return float(rng.choice([v + 1.0, -v, 0.0]))
    if v is None:
        return [0, 1, 2, "x", True][rng.integers(5)]
    if vocab and v in vocab and len(vocab) > 1:
        return str(rng.choice([c for c in vocab if c != v]))
    return str(v) + "_edited"


def edit_json(mf, rng):
    leaves = list(_json_leaves(mf.header))
    path, v = leaves[rng.integers(len(leaves))]
    key = next((k for k in reversed(path) if isinstance(k, str)), "")
    new = _new_value(rng, key, v)
    _set(mf.header, path, new)
    return f"header{list(path)}: {v!r} -> {new!r}", key


def edit_array_table(mf, rng):
    name = sorted(mf.arrays)[rng.integers(len(mf.arrays))]
    spec = mf.header["arrays"][name]
    if rng.random() < 0.5:
        spec["shape"] = spec["shape"] + [1]
    else:
        spec["dtype"] = "float64" if spec["dtype"] != "float64" else "float32"
    return f"header arrays[{name}] -> {spec}", name, False


#: The arrays whose values are structure (indices, bins, borders, counts, code bits) or do not
#: enter a prediction (gains, curves, bag weights); free parameters are left alone (module doc).
VALUE_ARRAYS = (".trees.features", ".trees.thresholds", ".trees.borders", ".borders",
                ".trees.children", ".trees.level_counts", ".code", ".trees.gains", ".train_loss",
                ".valid_loss", ".bag_weights")


def edit_array_value(mf, rng):
    names = [n for n in VALUE_ARRAYS if n in mf.arrays and mf.arrays[n].size]
    name = names[rng.integers(len(names))]
    a = mf.arrays[name].copy()
    i = tuple(int(rng.integers(s)) for s in a.shape)
    old = a[i]
    if name == ".code":
        new = rng.choice([2, -1])            # 0 <-> 1 would be another valid code
    elif a.dtype.kind in "iu":
        new = rng.choice([old + 1, old - 1, -1, a.max() + 1, rng.integers(a.min(), a.max() + 1)])
    else:
        flat = a.reshape(-1)
        new = rng.choice([old * np.float32(1.01) + np.float32(0.01), np.nan, np.inf, -np.inf,
                          flat[rng.integers(flat.size)]])
    a[i] = new
    mf.arrays[name] = a
    return f"{name}{list(i)}: {old!r} -> {a[i]!r}", name.split(".")[-1]


def edit_array_shape(mf, rng):
    name = sorted(mf.arrays)[rng.integers(len(mf.arrays))]
    a = mf.arrays[name]
    op = rng.integers(4)
    if op == 0 and a.ndim:
        axis = int(rng.integers(a.ndim))
        b = np.delete(a, -1, axis=axis) if a.shape[axis] > 1 else a[None]
    elif op == 1 and a.ndim:
        axis = int(rng.integers(a.ndim))
        b = np.concatenate([a, np.take(a, [-1], axis=axis)], axis=axis)
    elif op == 2 and a.ndim and a.shape[0] >= 1:
        b = a[0]
    else:
        b = a[None]
    mf.arrays[name] = np.ascontiguousarray(b)
    return f"{name}: shape {a.shape} -> {b.shape}", name.split(".")[-1].split("'")[0]


def edit_array_dtype(mf, rng):
    name = sorted(mf.arrays)[rng.integers(len(mf.arrays))]
    a = mf.arrays[name]
    choices = {"i": ["int16", "int64", "float32", "uint8"], "u": ["int32", "float32"],
               "f": ["float16", "float64", "int32"], "b": ["uint8", "int32"]}[a.dtype.kind]
    dtype = str(rng.choice([c for c in choices if c != a.dtype.name]))
    with np.errstate(invalid="ignore"):  # NaN to an integer dtype: whatever the cast gives
        mf.arrays[name] = a.astype(dtype)
    return f"{name}: {a.dtype} -> {dtype}", name.split(".")[-1].split("'")[0]


def _node_of_kind(node, kind):
    if isinstance(node, dict):
        if node.get("kind") == kind:
            return node
        for v in node.values():
            found = _node_of_kind(v, kind)
            if found is not None:
                return found
    return None


def edit_classes(mf, rng):
    node = _node_of_kind(mf.header["structure"], "classes")
    if node is None:
        return None
    labels = list(node["labels"])
    op = int(rng.integers(5))
    if op == 0:
        labels = labels + [labels[-1] + "z" if isinstance(labels[-1], str) else labels[-1] + 1]
    elif op == 1:
        labels = labels[:-1] if len(labels) > 1 else labels + labels
    elif op == 2:
        labels = labels + [labels[0]]
    elif op == 3:
        labels = labels[::-1]
    else:
        labels = [0, 1, 2][:len(labels)] if isinstance(labels[0], str) else [str(v) for v in labels]
    before, node["labels"] = node["labels"], labels
    return f"classes {before} -> {labels}", "classes"


def edit_n_outputs(mf, rng):
    node = _node_of_kind(mf.header["structure"], "loss")
    if node is None:
        return None
    old = node.get("n_outputs")
    node["n_outputs"] = [None, 0, (old or 1) + 1, max((old or 1) - 1, 1), 2][rng.integers(5)]
    return f"loss n_outputs {old} -> {node['n_outputs']}", "n_outputs"


EDITS = (edit_json, edit_json, edit_json, edit_array_table, edit_array_value, edit_array_value,
         edit_array_value, edit_array_value, edit_array_shape, edit_array_shape, edit_array_dtype,
         edit_classes, edit_n_outputs)


# --------------------------------------------------------------------------------------------
# Models and their predictions.
# --------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def models(binary_data, multiclass_data, regression_data):
    """One model of each type (Boosters of oblivious trees: binary and multiclass with class
    labels, regression with a label offset; a depth-wise Booster; a Forest; BaggedBoosters;
    ECOCBoosters), with test_io.py's settings."""
    X, yb = binary_data[:2]
    Xm, ym = multiclass_data[:2]
    Xr, yr = regression_data[:2]
    out = {}
    out["binary"] = jboost.fit(X, np.where(yb > 0, "yes", "no"), "binomial_deviance", **KW)
    out["multiclass"] = jboost.fit(Xm, np.array(["a", "b", "c"])[ym.astype(int)],
                                   "multinomial_deviance", **KW)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the large label offset's warning
        out["offset"] = jboost.fit(Xr, 1e9 + yr.astype(np.float64), **KW)
    assert out["offset"].offset is not None
    out["depthwise"] = jboost.fit(Xr, yr, tree_family="depthwise", n_rounds=3, depth=3, n_bins=16)
    out["forest"] = bagging.fit_forest(Xm, ym, n_trees=5, depth=3, n_bins=16, key=1)
    out["bagged"] = bagging.fit_bagged_boosters(X, yb, "binomial_deviance", n_bags=3, key=2, **KW)
    out["ecoc"] = combine.fit_ecoc_boosters(Xm, ym, combine.exhaustive_code(3), **KW)
    return out


@pytest.fixture(scope="module")
def rows(binary_data):
    """Rows to predict, with missing values."""
    X = np.array(binary_data[0][:40])
    X[::5, 1] = np.nan
    return X


def predictions(model, X):
    """Raw scores, and for classifiers class labels (and probabilities, but of ECOC)."""
    out = {"predict": jboost.predict(model, X)}
    if model.task in ("binary", "multiclass"):
        out["class"] = jboost.predict_class(model, X)
        if not isinstance(model, combine.ECOCBoosters):
            out["proba"] = jboost.predict_proba(model, X)
    return {k: np.asarray(v) for k, v in out.items()}


def same(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(
        a[k].dtype == b[k].dtype and a[k].shape == b[k].shape and a[k].tobytes() == b[k].tobytes()
        for k in a)


# --------------------------------------------------------------------------------------------
# Tests.
# --------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_a_binary_model_edited_to_three_classes_is_refused(models, tmp_path):
    """The issue's case: the class list of a binary model edited to three labels (checksum
    recomputed) used to load and predict two probability columns for three labels."""
    path = tmp_path / "binary.jbm"
    jboost.save(models["binary"], path)
    mf = ModelFile(path)
    assert jreader.checksum(mf.header, mf.arrays) == mf.header["checksum"]  # the writer's checksum
    node = mf.header["structure"]["fields"]["classes"]
    assert node["labels"] == ["no", "yes"]
    node["labels"] = ["maybe", "no", "yes"]
    mf.write(tmp_path / "three.jbm")
    with pytest.raises(jboost.ModelFileError, match=r"classes holds 3 labels.*should hold 2"):
        jboost.load(tmp_path / "three.jbm")


def test_random_edits_are_refused_or_change_nothing(models, rows, tmp_path):
    """Random edits of valid files (checksum recomputed): each is refused with a ModelFileError
    (or a ValueError/TypeError naming the field), or the model predicts bitwise as before."""
    rng = np.random.default_rng(46)
    outcomes, failures = Counter(), []
    for name, model in models.items():
        path = tmp_path / f"{name}.jbm"
        jboost.save(model, path)
        want = predictions(model, rows)
        for i in range(EDITS_PER_MODEL):
            mf = ModelFile(path)
            done = None
            while done is None:
                done = EDITS[rng.integers(len(EDITS))](mf, rng)
            what, field, sync = done if len(done) == 3 else done + (True,)
            edited = tmp_path / f"{name}-{i}.jbm"
            mf.write(edited, sync=sync)
            try:
                back = jboost.load(edited)
            except jboost.ModelFileError:
                outcomes["refused"] += 1
                continue
            except (ValueError, TypeError) as e:
                outcomes["refused (ValueError/TypeError)"] += 1
                if field not in str(e):
                    failures.append(f"{name}: {what}: {type(e).__name__} not naming {field!r}: {e}")
                continue
            try:
                ok = same(want, predictions(back, rows))
            except Exception as e:  # noqa: BLE001 - a loaded model that cannot predict
                failures.append(f"{name}: {what}: loaded, then {type(e).__name__}: {e}")
                continue
            outcomes["loaded, identical" if ok else "loaded, different"] += 1
            if not ok:
                failures.append(f"{name}: {what}: loaded with different predictions")
    total = sum(outcomes.values())
    print(f"{total} edits: {dict(outcomes)}")
    assert not failures, "\n".join(failures[:20])
    assert total >= 100 and outcomes["refused"] >= total // 2, outcomes


def _bomb(path, good, member: str, n_bytes: int):
    """``good``'s archive with ``member`` replaced by a deflated float32 array of ``n_bytes``
    zero bytes (listed in the header with its shape): a few hundred kB on disk."""
    shape = (n_bytes // 4,)
    header = ModelFile(good).header
    header["arrays"][member] = {"dtype": "float32", "shape": list(shape)}
    with zipfile.ZipFile(good) as src, zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as dst:
        for n in src.namelist():
            if n == jio.HEADER + ".npy":
                npy = io.BytesIO()
                np.save(npy, np.frombuffer(json.dumps(header).encode(), np.uint8))
                dst.writestr(n, npy.getvalue())
            elif n == member + ".npy":
                with dst.open(n, "w", force_zip64=True) as f:
                    np.lib.format.write_array_header_1_0(
                        f, {"descr": "<f4", "fortran_order": False, "shape": shape})
                    zeros = bytes(1 << 20)
                    for _ in range(n_bytes >> 20):
                        f.write(zeros)
            else:
                dst.writestr(n, src.read(n))


def test_a_compressed_member_past_the_limit_is_refused_before_decompressing(models, tmp_path,
                                                                            monkeypatch):
    """A small file whose deflated member expands to 512 MB, over the limit (lowered here to
    64 MB), is refused at once, without the memory of its contents (the member-size check used
    to read the uncompressed size after the fact: 4.3 GB for a 2 MB file)."""
    good = tmp_path / "good.jbm"
    jboost.save(models["binary"], good)
    bomb = tmp_path / "bomb.jbm"
    _bomb(bomb, good, ".train_loss", 512 << 20)
    assert os.path.getsize(bomb) < 2 << 20
    monkeypatch.setattr(jreader, "MAX_INFLATED_BYTES", 64 << 20, raising=False)
    tracemalloc.start()
    start = time.perf_counter()
    try:
        jboost.load(bomb)
        error = None
    except Exception as e:  # noqa: BLE001 - checked below, after the memory
        error = e
    finally:
        seconds = time.perf_counter() - start
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    assert seconds < _processes.scaled(10) and peak < 200 << 20, f"{seconds:.1f} s, peak {peak >> 20} MB, {error!r}"
    assert isinstance(error, jboost.ModelFileError), error
    assert re.search(r"train_loss.*expand to 53\d{7} bytes.*MAX_INFLATED_BYTES",
                     str(error)), error
    # Under the limit a compressed file (one zipped again) still loads, bitwise.
    recompressed = tmp_path / "deflated.jbm"
    with zipfile.ZipFile(good) as src, \
            zipfile.ZipFile(recompressed, "w", zipfile.ZIP_DEFLATED) as dst:
        for n in src.namelist():
            dst.writestr(n, src.read(n))
    assert same(predictions(models["binary"], np.zeros((3, 5), np.float32)),
                predictions(jboost.load(recompressed), np.zeros((3, 5), np.float32)))


def test_eight_threads_saving_to_one_path(models, tmp_path):
    """Eight threads saving different models to one path at once: no error (each writer has a
    temporary file of its own), no temporary file left, and the file is one of the models."""
    base = models["binary"]
    variants = [base._replace(baseline=base.baseline + np.float32(i)) for i in range(8)]
    path = tmp_path / "shared.jbm"
    for _ in range(3):
        barrier, errors = threading.Barrier(len(variants)), []

        def save(m):
            barrier.wait()
            try:
                jboost.save(m, path)
            except Exception as e:  # noqa: BLE001 - collected and reported
                errors.append(e)

        threads = [threading.Thread(target=save, args=(m,)) for m in variants]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors, errors
        assert sorted(os.listdir(tmp_path)) == ["shared.jbm"]
        back = jboost.load(path)
        matches = [i for i, m in enumerate(variants)
                   if np.asarray(m.baseline).tobytes() == np.asarray(back.baseline).tobytes()]
        assert len(matches) == 1
        leaves = jax.tree_util.tree_leaves
        for a, b in zip(leaves(variants[matches[0]]), leaves(back)):
            assert np.asarray(a).tobytes() == np.asarray(b).tobytes()
