"""Model files (jboost/io/): every model type round-trips bit for bit, in this process and in a
new one; custom losses and tree families are supplied at load; corrupted, truncated, edited,
wrong-type and future-version files raise ModelFileError and execute nothing; the NumPy-only
reader equals jboost.predict without importing jax."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import textwrap
import zipfile

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from tests import _processes

import jboost
from jboost import algorithms
from jboost import bagging
from jboost import combine
from jboost import io as jio
from jboost.losses import per_sample
from jboost.trees import depthwise as depthwise_lib

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
KW = dict(n_rounds=4, depth=2, n_bins=16)


def log_cosh(y, f):
    """A custom loss (the README's)."""
    r = y - f
    return jnp.logaddexp(r, -r) - jnp.log(2.0)


class MyTrees(jboost.ObliviousTrees):
    """A custom tree family (a subclass of the oblivious trees: another class to supply)."""


@pytest.fixture(scope="module")
def data(binary_data, multiclass_data, regression_data):
    """conftest's shared data sets and shapes (so jit caches are shared with the other tests)."""
    X, yb, Xv, ybv = binary_data
    Xm, ym = multiclass_data[:2]
    Xr, yr = regression_data[:2]
    return X, yb, Xv, ybv, Xm, ym, Xr, yr


@pytest.fixture(scope="module")
def models(data, fit_kw):
    """One fitted model of every type (and of every Booster source), fitted once."""
    X, yb, _, _, Xm, ym, Xr, yr = data
    out = {}
    # The first three are test_model.py's fits (their programs are compiled once per session).
    out["fit_binary"] = jboost.fit(X, yb, "binomial_deviance", **fit_kw, learning_rate=0.3)
    out["fit_multiclass"] = jboost.fit(Xm, ym, "multinomial_deviance", **fit_kw, learning_rate=0.3)
    out["vmap_fits"] = jax.vmap(lambda lr: jboost.fit(X, yb, "binomial_deviance", **fit_kw,
                                                      learning_rate=lr))(jnp.array([0.1, 0.5]))
    X_es, y_es, Xv, yv = data[0], data[1], data[2], data[3]
    out["early_stopped"] = jboost.fit(X_es, y_es, "binomial_deviance", eval_set=(Xv, yv),
                                      early_stopping_rounds=2, n_rounds=12, depth=3, n_bins=32,
                                      learning_rate=1.0)
    with pytest.warns(UserWarning, match="large offset"):  # Booster.offset: labels minus 1e9
        out["label_offset"] = jboost.fit(Xr, 1e9 + yr.astype(np.float64), **fit_kw)
    assert out["label_offset"].offset is not None
    out["adaboost_m1"] = algorithms.adaboost_m1(X, yb, n_rounds=4, depth=1, n_bins=16)
    out["forest"] = bagging.fit_forest(Xm, ym, n_trees=5, depth=3, n_bins=16, key=1)
    out["bagged"] = bagging.fit_bagged_boosters(X, yb, "binomial_deviance", n_bags=3, key=2, **KW)
    # test_stacking.py's multiclass stack (the same programs).
    out["stacked"] = combine.fit_stacked_boosters(
        Xm, ym, "multinomial_deviance", hypers=[dict(learning_rate=0.5), dict(learning_rate=0.1)],
        folds=3, n_rounds=4, depth=2, n_bins=8)
    out["ecoc"] = combine.fit_ecoc_boosters(Xm, ym, combine.exhaustive_code(3), **KW)
    res = jboost.sweep.sweep(Xr, yr, "quantile", grid={"alpha": [0.3, 0.7]}, folds=2, seeds=1,
                             keep_trees=True, devices=None, **KW)
    out["sweep_models"] = res.models()
    return out


def _run_python(script: str, tmp_path, result: str, quiet: float):
    """Run ``script`` in a new Python process in ``tmp_path``; the ``.npz`` it wrote. The process
    compiles its own programs, as a user's new process does (not the test run's compilation
    cache, conftest.py: its hits are this process's programs)."""
    env = {k: v for k, v in os.environ.items() if k != "JAX_COMPILATION_CACHE_DIR"}
    proc = _processes.python(script, quiet=quiet, what="a new process loading model files",
                             cwd=str(tmp_path), env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return np.load(tmp_path / result)


def _predictions(model, X, full=True):
    """The predictions of the protocol that the model supports (raw scores, classes,
    probabilities, staged raw scores, importance; ``full=False``: the raw scores and the
    probabilities, or the classes of ECOC), as host arrays."""
    if not full:
        out = {"predict": jboost.predict(model, X)}
        if isinstance(model, combine.ECOCBoosters):
            out["class"] = jboost.predict_class(model, X)
        elif model.task in ("binary", "multiclass"):
            out["proba"] = jboost.predict_proba(model, X)
        return {k: np.asarray(v) for k, v in out.items()}
    out = {"predict": jboost.predict(model, X)}
    if model.task in ("binary", "multiclass"):
        out["class"] = jboost.predict_class(model, X)
        if not isinstance(model, combine.ECOCBoosters):
            out["proba"] = jboost.predict_proba(model, X)
    one = model if not model.batch_shape else jax.tree_util.tree_map(lambda a: a[-1], model)
    out["staged"] = jboost.staged_predict(one, X)
    out["importance"] = jboost.feature_importance(model)
    return {k: np.asarray(v) for k, v in out.items()}


def _saved(model, tmp_path, name="model.jbm"):
    jboost.save(model, tmp_path / name)
    return tmp_path / name


def _assert_bitwise(a: dict, b: dict, what: str):
    assert a.keys() == b.keys(), what
    for k in a:
        assert a[k].dtype == b[k].dtype and a[k].shape == b[k].shape, (what, k)
        assert a[k].tobytes() == b[k].tobytes(), f"{what}: {k} differs after loading"


def _assert_same_model(m, m2):
    assert type(m2) is type(m)
    l1, t1 = jax.tree_util.tree_flatten_with_path(m)
    l2, t2 = jax.tree_util.tree_flatten_with_path(m2)
    assert t1 == t2  # the same structure and static fields (losses compare by their functions)
    for (p, a), (_, b) in zip(l1, l2):
        a, b = np.asarray(a), np.asarray(b)
        assert a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes(), p


@pytest.mark.slow
def test_every_model_type_round_trips_bitwise(models, data, tmp_path):
    X = data[0][:50]
    kinds = {type(m).__name__ for m in models.values()}
    assert kinds == {"Booster", "Forest", "BaggedBoosters", "StackedBoosters", "ECOCBoosters"}
    es = models["early_stopped"]
    assert es.best_round is not None and int(es.best_round) < es.n_rounds - 1
    assert int(jboost.load(_saved(es, tmp_path)).best_round) == int(es.best_round)
    assert models["sweep_models"].batch_shape == (2,) and models["vmap_fits"].batch_shape == (2,)
    for name, m in models.items():
        path = tmp_path / f"{name}.jbm"
        jboost.save(m, path)
        m2 = jboost.load(path)
        _assert_same_model(m, m2)
        _assert_bitwise(_predictions(m, X), _predictions(m2, X), name)
    info = jboost.load(tmp_path / "adaboost_m1.jbm").info
    assert set(info) == set(models["adaboost_m1"].info) and "coef" in info
    header = jio.read_header(tmp_path / "fit_binary.jbm")
    assert header["model_type"] == "Booster" and header["format_version"] == 2  # 3 only with classes
    assert header["jboost_version"] == jboost.__version__ and header["n_features"] == 5
    assert header["structure"]["fields"]["loss"]["name"] == "binomial_deviance"


@pytest.mark.subprocess
@pytest.mark.slow
def test_round_trip_in_a_new_process(models, data, tmp_path):
    """Every model type, loaded by a fresh Python process, predicts bitwise what it predicted
    here (nothing of this process -- jit caches, loss objects -- is involved)."""
    X = data[0][:50]
    np.save(tmp_path / "X.npy", X)
    here = {}
    for name, m in models.items():
        jboost.save(m, tmp_path / f"{name}.jbm")
        here[name] = _predictions(m, X, full=False)
    script = textwrap.dedent(f"""
        import sys, numpy as np, jax
        sys.path.insert(0, {REPO!r})
        sys.path.insert(0, {os.path.dirname(os.path.abspath(__file__))!r})
        import jboost
        from test_io import _predictions
        X = np.load({str(tmp_path / 'X.npy')!r})
        out = {{}}
        for name in {sorted(models)!r}:
            m = jboost.load({str(tmp_path)!r} + "/" + name + ".jbm")
            for k, v in _predictions(m, X, full=False).items():
                out[name + "/" + k] = v
        np.savez({str(tmp_path / 'there.npz')!r}, **out)
    """)
    there = _run_python(script, tmp_path, "there.npz", quiet=30)
    for name in models:
        got = {k.split("/", 1)[1]: there[k] for k in there.files if k.startswith(name + "/")}
        _assert_bitwise(here[name], got, f"{name} in a new process")


def test_a_custom_loss_is_supplied_at_load(models, data, fit_kw, tmp_path):
    Xr, yr = data[6], data[7]
    m = jboost.fit(Xr, yr, log_cosh, **fit_kw)
    jboost.save(m, tmp_path / "m.jbm")
    with pytest.raises(ValueError, match=r"custom loss 'log_cosh'.*jboost.load\(path, loss=log_cosh\)"):
        jboost.load(tmp_path / "m.jbm")
    m2 = jboost.load(tmp_path / "m.jbm", loss=log_cosh)
    assert m2.loss.fn is log_cosh and m2.loss.name == "log_cosh"
    _assert_bitwise(_predictions(m, Xr), _predictions(m2, Xr), "custom loss")
    m3 = jboost.load(tmp_path / "m.jbm", loss=jboost.Loss(log_cosh, name="log_cosh"))
    assert m3.loss.fn is log_cosh

    def other(y, f):
        return (y - f) ** 2

    with pytest.raises(ValueError, match="'other' does not match .* 'log_cosh'"):
        jboost.load(tmp_path / "m.jbm", loss=other)
    # A custom link is code too: the function alone is not enough, the Loss with it is.
    mb = models["fit_binary"]
    custom_link = mb.loss.replace(name="bd", link=lambda raw: jnp.stack([1 - jax.nn.sigmoid(raw),
                                                                          jax.nn.sigmoid(raw)], -1))
    mb = mb._replace(loss=custom_link)
    jboost.save(mb, tmp_path / "b.jbm")
    with pytest.raises(ValueError, match="link is the custom function '<lambda>'"):
        jboost.load(tmp_path / "b.jbm")
    def bd(y, f):
        return jboost.losses.binomial_deviance_fn(y, f)

    with pytest.raises(ValueError, match=r"link is the custom function '<lambda>'.*jboost.Loss\(fn, link="):
        jboost.load(tmp_path / "b.jbm", loss=bd)
    _assert_same_model(mb, jboost.load(tmp_path / "b.jbm", loss=custom_link))
    # A built-in loss takes no loss= (it would be ignored: refused instead).
    jboost.save(models["fit_multiclass"], tmp_path / "s.jbm")
    with pytest.raises(ValueError, match="only built-in losses"):
        jboost.load(tmp_path / "s.jbm", loss=log_cosh)


def test_every_built_in_loss_loads_by_name(models, tmp_path):
    """Every loss of jboost.losses and of the classical algorithms (their functions, links,
    baselines, parameters and static fields) is rebuilt from its record alone."""

    one, three = models["fit_binary"], models["fit_multiclass"]
    L = jboost.losses
    cases = [(one, L.squared_error()), (one, L.absolute_error()), (one, L.huber(delta=2.5)),
             (one, L.huber(alpha=0.8)), (one, L.quantile(0.3)), (one, L.exponential()),
             (one, L.poisson()), (one, per_sample.logit_deviance()),
             (three, L.multinomial_deviance(3)), (three, L.samme_exponential(3))]
    for i, (m, loss) in enumerate(cases):
        m = m._replace(loss=loss)
        jboost.save(m, tmp_path / f"{i}.jbm")
        back = jboost.load(tmp_path / f"{i}.jbm")
        _assert_same_model(m, back)
        assert back.loss.fn is loss.fn and back.loss.link is loss.link, loss.name


def test_a_custom_tree_family_is_supplied_at_load(models, data, tmp_path):
    m = models["fit_binary"]
    mine = m._replace(trees=MyTrees(*m.trees))
    jboost.save(mine, tmp_path / "t.jbm")
    with pytest.raises(ValueError, match=r"custom tree family 'MyTrees'.*tree_family=MyTrees"):
        jboost.load(tmp_path / "t.jbm")
    back = jboost.load(tmp_path / "t.jbm", tree_family=MyTrees)
    assert type(back.trees) is MyTrees
    _assert_bitwise(_predictions(mine, data[0]), _predictions(back, data[0]), "tree family")
    with pytest.raises(ValueError, match="does not match the file's tree family 'MyTrees'"):
        jboost.load(tmp_path / "t.jbm", tree_family=jboost.ObliviousTrees)


def test_save_refuses_what_it_cannot_store(models, tmp_path):
    with pytest.raises(TypeError, match="takes a fitted model"):
        jboost.save({"trees": 1}, tmp_path / "x.jbm")
    with pytest.raises(TypeError, match="traced"):
        jax.jit(lambda m: jboost.save(m, tmp_path / "x.jbm") or 0.0)(models["fit_binary"])
    with pytest.raises(ValueError, match="feature_names has 2 names; the model has 5"):
        jboost.save(models["fit_binary"], tmp_path / "x.jbm", feature_names=["a", "b"])
    jboost.save(models["fit_binary"], tmp_path / "x.jbm", feature_names=list("abcde"),
                metadata={"seed": 0})
    header = jio.read_header(tmp_path / "x.jbm")
    assert header["feature_names"] == list("abcde") and header["metadata"] == {"seed": 0}
    assert not [p for p in os.listdir(tmp_path) if p.endswith(".tmp")]


# --------------------------------------------------------------------------------------------
# Damaged files.
# --------------------------------------------------------------------------------------------


def _members(path):
    with zipfile.ZipFile(path) as z:
        return {n[:-4]: np.load(io.BytesIO(z.read(n)), allow_pickle=False) for n in z.namelist()}


def _write(path, members, header=None, rehash=True):
    """Rewrite a model file with changed members/header; ``rehash``: a checksum that matches
    (as a deliberate forger would write), so the checks after the checksum are exercised."""
    members = dict(members)
    if header is not None:
        arrays = {k: v for k, v in members.items() if k != jio.HEADER}
        if rehash:
            header["checksum"] = jio.checksum(header, arrays)
        members[jio.HEADER] = np.frombuffer(json.dumps(header).encode(), np.uint8)
    buf = io.BytesIO()
    np.savez(buf, **members)
    path.write_bytes(buf.getvalue())


class _Trap:
    """Unpickling this would create a marker file (code execution)."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (open, (self.marker, "w"))


def test_damaged_files_raise_model_file_errors_and_execute_nothing(models, tmp_path):
    good = tmp_path / "good.jbm"
    jboost.save(models["fit_multiclass"], good)
    raw = good.read_bytes()
    members = _members(good)
    header = json.loads(members[jio.HEADER].tobytes())
    marker = tmp_path / "EXECUTED"

    def hdr(**changes):
        return {**json.loads(members[jio.HEADER].tobytes()), **changes}

    def obj_array():
        a = np.empty((1,), object)
        a[0] = _Trap(str(marker))
        return a

    leaf = ".trees.leaf_values"
    cases = {}
    cases["empty file"] = (b"", "empty")
    cases["not a zip"] = (b"{\"format\": \"jboost-model\"}\n" * 20, "not a zip")
    cases["truncated"] = (raw[: len(raw) // 2], "truncated or corrupted")
    flipped = bytearray(raw)
    at = raw.index(members[leaf].tobytes()) + 7
    flipped[at] ^= 0x40
    cases["flipped byte in an array"] = (bytes(flipped), "truncated or corrupted")

    def made(name, mem, head=None, rehash=True):
        p = tmp_path / f"{name}.jbm"
        _write(p, mem, head, rehash)
        return p.read_bytes()

    cases["tampered header"] = (made("t1", members, hdr(task="regression"), rehash=False), "checksum")
    bumped = dict(members)
    bumped[leaf] = members[leaf] + np.float32(1.0)
    cases["edited array, zip CRC rewritten"] = (made("t2", bumped), "checksum")
    cases["wrong model type"] = (made("t3", members, hdr(model_type="Pickled")), "model type 'Pickled'")
    future = jio.FORMAT_VERSION + 1
    cases["future format version"] = (made("t4", members, hdr(format_version=future)),
                                      f"format version {future}; this jboost reads .* up to "
                                      f"{jio.FORMAT_VERSION}: upgrade")
    dropped = {k: v for k, v in members.items() if k != leaf}
    cases["missing array"] = (made("t5", dropped, hdr()), "missing")
    pickled = dict(members)
    pickled[".baseline"] = obj_array()
    cases["pickled object array"] = (made("t6", pickled), "object array")
    header_obj = dict(members)
    header_obj[jio.HEADER] = obj_array()
    cases["pickled header"] = (made("t7", header_obj), "object array")
    wrong = dict(members)
    wrong[leaf] = members[leaf][..., :3, :]                 # 3 leaves for depth-2 trees
    h = hdr()
    h["arrays"][leaf]["shape"] = list(wrong[leaf].shape)
    cases["wrong shapes"] = (made("t8", wrong, h), "leaf_values has shape")
    out_of_range = dict(members)
    out_of_range[".trees.features"] = members[".trees.features"] + np.int32(40)
    cases["feature index out of range"] = (made("t9", out_of_range, hdr()), "feature indices")
    retyped = dict(members)
    retyped[".trees.features"] = members[".trees.features"].astype(np.float32)
    h = hdr()
    h["arrays"][".trees.features"]["dtype"] = "float32"
    cases["wrong dtype"] = (made("t10", retyped, h), "trees.features is float32")
    deep = dict(members)
    deep[jio.HEADER] = np.frombuffer(b"[" * 100000 + b"]" * 100000, np.uint8)
    cases["header nested too deeply"] = (made("t15", deep), "not valid JSON")
    garbage = dict(members)
    garbage[jio.HEADER] = np.frombuffer(b"{not json", np.uint8)
    cases["header not JSON"] = (made("t11", garbage), "not valid JSON")
    h = hdr()
    h["structure"]["fields"]["trees"]["type"] = "os.system"
    cases["unknown nested type"] = (made("t12", members, h), "type 'os.system'")
    h = hdr()
    h["structure"]["fields"]["loss"]["fn"] = "os.system"
    cases["unknown loss function"] = (made("t13", members, h), "'os.system'")
    extra = dict(members)
    extra["payload"] = np.zeros(3, np.float32)
    cases["unlisted array"] = (made("t14", extra), "does not list")
    npy = io.BytesIO()
    np.lib.format.write_array_header_1_0(npy, {"descr": "<f4", "fortran_order": False,
                                               "shape": (10**12,)})
    forged = io.BytesIO()
    with zipfile.ZipFile(good) as src, zipfile.ZipFile(forged, "w") as dst:
        for n in src.namelist():
            dst.writestr(n, npy.getvalue() + b"\0" * 16 if n == ".baseline.npy" else src.read(n))
    cases["huge declared shape"] = (forged.getvalue(), r"declares shape \(1000000000000,\)")
    assert header["checksum"].startswith("sha256:")

    assert len(cases) >= 10
    for name, (blob, message) in cases.items():
        p = tmp_path / "case.jbm"
        p.write_bytes(blob)
        with pytest.raises(jboost.ModelFileError, match=message) as err:
            jboost.load(p)
        assert isinstance(err.value, ValueError), name
        assert not marker.exists(), f"{name}: loading executed code"
    with pytest.raises(FileNotFoundError):
        jboost.load(tmp_path / "absent.jbm")


# --------------------------------------------------------------------------------------------
# The NumPy-only reader.
# --------------------------------------------------------------------------------------------


@pytest.mark.subprocess
def test_numpy_reader_predicts_without_jax(models, data, tmp_path):
    """jboost/io/reader.py copied alone, in a process where importing jax fails, predicts Boosters of
    oblivious trees bitwise as jboost.predict (one output, K outputs, a batch of models)."""
    X = data[0]
    np.save(tmp_path / "X.npy", X)
    names = ["fit_binary", "fit_multiclass", "adaboost_m1", "vmap_fits", "sweep_models",
             "early_stopped", "label_offset"]
    for name in names:
        jboost.save(models[name], tmp_path / f"{name}.jbm")
    script = textwrap.dedent(f"""
        import sys, importlib.util, numpy as np
        sys.modules["jax"] = None          # any import of jax now fails
        spec = importlib.util.spec_from_file_location("reader", {os.path.join(REPO, 'jboost', 'io', 'reader.py')!r})
        reader = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(reader)
        X = np.load({str(tmp_path / 'X.npy')!r})
        out = {{n: reader.predict_numpy({str(tmp_path)!r} + "/" + n + ".jbm", X) for n in {names!r}}}
        assert not any(m == "jax" or m.startswith("jax.") for m in sys.modules if sys.modules[m] is not None)
        np.savez({str(tmp_path / 'numpy.npz')!r}, **out)
    """)
    got = _run_python(script, tmp_path, "numpy.npz", quiet=10)
    for name in names:
        want = np.asarray(jboost.predict(models[name], X))
        assert got[name].dtype == want.dtype and got[name].shape == want.shape, name
        assert got[name].tobytes() == want.tobytes(), f"{name}: NumPy reader differs"
    with pytest.raises(ValueError, match="reads Boosters of oblivious trees"):
        jboost.save(models["forest"], tmp_path / "f.jbm")
        jio.predict_numpy(tmp_path / "f.jbm", X)


# --------------------------------------------------------------------------------------------
# The fit's settings (Booster.settings, the header's "settings").
# --------------------------------------------------------------------------------------------


def test_a_fits_settings_are_saved_and_loaded_bitwise(models, data, tmp_path):
    """Every setting of jboost.fit is recorded in the Booster (arrays bitwise as the fit used
    them, names static), written to the file's header as readable values, and loaded back; the
    predictions do not change."""
    X, yb, Xv, ybv = data[:4]
    m = jboost.fit(X, yb, "binomial_deviance", n_rounds=6, depth=2, n_bins=16, learning_rate=0.3,
                   l2=2.5, min_split_gain=0.01, min_child_weight=0.5, subsample=0.8, colsample=0.6,
                   colsample_by="level", row_sampler="poisson", key=7, eval_set=(Xv, ybv),
                   early_stopping_rounds=2, early_stopping_tolerance=0.001,
                   eval_metric="error_rate")
    f32, i32 = np.float32, np.int32
    want = {"learning_rate": f32(0.3), "l2": f32(2.5), "min_split_gain": f32(0.01),
            "min_child_weight": f32(0.5), "subsample": f32(0.8), "colsample": f32(0.6),
            "n_rounds": i32(6), "init_rounds": i32(0), "depth": i32(2), "n_bins": i32(16),
            "per_output_trees": np.bool_(False), "base_margin": np.bool_(False),
            "key": np.asarray(jax.random.PRNGKey(7)), "early_stopping_rounds": i32(2),
            "early_stopping_tolerance": f32(0.001)}
    names = {"colsample_by": "level", "row_sampler": "poisson", "eval_metric": "error_rate",
             "split_criterion": "newton", "tree_family": "ObliviousTrees"}
    assert isinstance(m.settings, jboost.models.metadata.Settings)
    assert set(m.settings.arrays) == set(want) and m.settings.names == names
    for k, v in want.items():
        got = np.asarray(m.settings[k])
        assert got.dtype == v.dtype and got.tobytes() == v.tobytes(), k
    path = _saved(m, tmp_path)
    header = jio.read_header(path)
    readable = {k: np.asarray(v).tolist() for k, v in want.items()}
    readable.update(learning_rate=0.3, min_split_gain=0.01, subsample=0.8, colsample=0.6,
                    early_stopping_tolerance=0.001, **names)  # float32's shortest decimals
    assert header["settings"] == readable
    back = jboost.load(path)
    _assert_same_model(m, back)  # the settings' arrays bitwise, their names in the treedef
    assert back.settings.names == names and back.settings["colsample_by"] == "level"
    _assert_bitwise(_predictions(m, X), _predictions(back, X), "with settings")
    # A model without settings (a classical algorithm's) writes None.
    assert models["adaboost_m1"].settings == {}
    jboost.save(models["adaboost_m1"], tmp_path / "a.jbm")
    assert jio.read_header(tmp_path / "a.jbm")["settings"] is None


def test_a_vmapped_fits_settings_have_the_model_axis(models, tmp_path):
    batch = models["vmap_fits"]  # jax.vmap over learning_rate [0.1, 0.5]
    s = batch.settings
    assert np.asarray(s["learning_rate"]).tobytes() == np.float32([0.1, 0.5]).tobytes()
    assert np.asarray(s["depth"]).dtype == np.int32 and np.asarray(s["depth"]).tolist() == [3, 3]
    assert np.asarray(s["key"]).shape == (2, 2) and s["row_sampler"] == "bernoulli"
    assert all(np.shape(v)[:1] == (2,) for v in s.arrays.values())
    path = _saved(batch, tmp_path)
    assert jio.read_header(path)["settings"]["learning_rate"] == [0.1, 0.5]
    back = jboost.load(path)
    _assert_same_model(batch, back)
    one = jax.tree_util.tree_map(lambda a: a[1], back)  # one model of the batch: its own settings
    assert float(one.settings["learning_rate"]) == np.float32(0.5) and one.settings["depth"].shape == ()


def test_a_format_1_file_without_settings_still_loads(models, data, tmp_path):
    """A file written before format version 2 (no Booster.settings, no header "settings") loads,
    with settings {} (the field's default), and predicts as before."""
    m = models["fit_binary"]
    members = _members(_saved(m, tmp_path))
    header = json.loads(members[jio.HEADER].tobytes())
    old = {k: v for k, v in members.items() if not k.startswith(".settings")}
    del header["settings"], header["structure"]["fields"]["settings"]
    header["arrays"] = {k: v for k, v in header["arrays"].items() if not k.startswith(".settings")}
    header["format_version"] = 1
    _write(tmp_path / "v1.jbm", old, header)
    back = jboost.load(tmp_path / "v1.jbm")
    assert back.settings == {} and jio.read_header(tmp_path / "v1.jbm")["format_version"] == 1
    _assert_same_model(m._replace(settings={}), back)
    _assert_bitwise(_predictions(m, data[0]), _predictions(back, data[0]), "format 1")


# --------------------------------------------------------------------------------------------
# Depth-wise trees: node tables (format version 5) and the dense heap layout of older files.
# --------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def depthwise_models(data):
    """A multiclass Booster of depth-wise trees (tables of 2**D - 1 slots) and a regression
    forest of depth 6 grown on 24 rows (compact tables of fewer slots)."""
    X, _, _, _, Xm, ym, Xr, yr = data
    booster = jboost.fit(Xm, ym, "multinomial_deviance", n_rounds=3, depth=3, n_bins=16,
                         tree_family="depthwise", learning_rate=0.5)
    forest = bagging.fit_forest(Xr[:24], yr[:24], task="regression", n_trees=3, depth=6,
                                max_features=2, n_bins=16, key=3, tree_family="depthwise")
    assert forest.trees.features.shape[-1] < 2**6 - 1
    return {"booster": booster, "forest": forest}


def _as_dense(trees, n_bins):
    """Node tables as the dense heap layout of format versions 1-4 (NumPy): rule ``2**d - 1 + j``
    is heap node ``j`` of level ``d`` (children ``j``, ``j + 2**d``); below a leaf of depth
    ``d < D`` null rules (gain 0, feature 0, threshold ``n_bins - 2``, border inf, missing
    left), the leaf's value at its all-left dense leaf ``j`` and a value no row reaches (1e4 +
    index) at the others."""
    t = {f: np.asarray(getattr(trees, f)) for f in trees._fields}
    lead, depth = t["features"].shape[:-1], t["level_counts"].shape[-1]
    k = t["leaf_values"].shape[-1]
    flat = {f: a.reshape((-1,) + a.shape[len(lead):]) for f, a in t.items()}
    n_trees, n_rules = flat["features"].shape[0], 2**depth - 1
    out = {"features": np.zeros((n_trees, n_rules), np.int32),
           "thresholds": np.full((n_trees, n_rules), n_bins - 2, np.int32),
           "borders": np.full((n_trees, n_rules), np.inf, np.float32),
           "missing_right": np.zeros((n_trees, n_rules), bool),
           "gains": np.zeros((n_trees, n_rules), np.float32),
           "leaf_values": 1e4 + np.arange(n_trees * 2**depth * k,
                                          dtype=np.float32).reshape(n_trees, 2**depth, k)}
    for i in range(n_trees):
        def fill(c, d, j):
            while c >= 0 and flat["gains"][i, c] <= 0:  # a root that does not split
                c = flat["children"][i, c, 0]
            if c < 0:
                out["leaf_values"][i, j] = flat["leaf_values"][i, ~c]
                return
            r = 2**d - 1 + j
            for f in ("features", "thresholds", "borders", "missing_right", "gains"):
                out[f][i, r] = flat[f][i, c]
            fill(flat["children"][i, c, 0], d + 1, j)
            fill(flat["children"][i, c, 1], d + 1, j + 2**d)
        fill(0, 0, 0)
    return {f: a.reshape(lead + a.shape[1:]) for f, a in out.items()}


def _dense_predict(dense, X):
    """The dense layout's walk (the trees' sum over all leading axes, NumPy): ``leaf = sum_d
    right_d << d``, rule ``2**d - 1 + leaf``."""
    feats = dense["features"].reshape(-1, dense["features"].shape[-1])
    depth = (feats.shape[1] + 1).bit_length() - 1
    get = lambda f: dense[f].reshape((feats.shape[0],) + dense[f].shape[-1 - (f == "leaf_values"):])  # noqa: E731
    out = np.zeros((X.shape[0], dense["leaf_values"].shape[-1]), np.float64)
    for i in range(feats.shape[0]):
        leaf = np.zeros(X.shape[0], np.int64)
        for d in range(depth):
            r = 2**d - 1 + leaf
            col = X[np.arange(X.shape[0]), get("features")[i, r]]
            right = np.where(np.isnan(col), get("missing_right")[i, r], col > get("borders")[i, r])
            leaf = leaf + (right.astype(np.int64) << d)
        out += get("leaf_values")[i, leaf]
    return out


def _old_file(model, tmp_path, name):
    """``model`` saved, then rewritten as a format-2 file of the dense layout (what jboost wrote
    before node tables): no children or level_counts, dense rules and leaves."""
    members = _members(_saved(model, tmp_path, f"{name}-new.jbm"))
    header = json.loads(members[jio.HEADER].tobytes())
    dense = _as_dense(model.trees, n_bins=16)
    old = {k: v for k, v in members.items() if k not in (".trees.children", ".trees.level_counts")}
    for f, a in dense.items():
        old[f".trees.{f}"] = a
    fields = header["structure"]["fields"]["trees"]["fields"]
    del fields["children"], fields["level_counts"]
    header["arrays"] = {k: {"dtype": old[k].dtype.name, "shape": list(old[k].shape)}
                        for k in old if k != jio.HEADER}
    header["format_version"] = 2
    _write(tmp_path / f"{name}-old.jbm", old, header)
    return tmp_path / f"{name}-old.jbm", dense


@pytest.mark.slow
def test_depthwise_tables_round_trip_and_old_dense_files_load(depthwise_models, data, tmp_path):
    """A model of depth-wise node tables round-trips bitwise as format version 5; a file of the
    dense heap layout (format 2, as jboost wrote them before) loads as node tables
    (depthwise.from_dense) that predict bitwise what the model predicted, and explain the same."""
    from jboost import inspect as ji
    X = data[4][:60]
    X = np.where(np.arange(X.size).reshape(X.shape) % 11 == 0, np.nan, X).astype(np.float32)
    for name, m in depthwise_models.items():
        path = _saved(m, tmp_path, f"{name}.jbm")
        assert jio.read_header(path)["format_version"] == 5
        back = jboost.load(path)
        _assert_same_model(m, back)
        _assert_bitwise(_predictions(m, X, full=False), _predictions(back, X, full=False), name)

        old_path, dense = _old_file(m, tmp_path, name)
        # The hand-made dense trees are the old layout of these trees: its walk predicts the same.
        scale = 1.0 / m.n_trees if name == "forest" else 1.0
        want = np.asarray(jboost.predict(m, X)).reshape(X.shape[0], -1)
        base = 0.0 if name == "forest" else np.asarray(m.baseline)
        np.testing.assert_allclose(_dense_predict(dense, X) * scale + base, want, rtol=1e-5, atol=1e-5)
        header = jio.read_header(old_path)
        assert header["format_version"] == 2 and ".trees.children" not in header["arrays"]
        old = jboost.load(old_path)
        assert isinstance(old.trees, depthwise_lib.DepthwiseTrees)
        assert old.trees.children.shape == old.trees.features.shape + (2,)
        assert old.trees.features.shape[-1] == 2**old.trees.depth - 1 == dense["features"].shape[-1]
        _assert_bitwise(_predictions(m, X, full=False), _predictions(old, X, full=False), f"old {name}")
        np.testing.assert_array_equal(np.asarray(jboost.feature_importance(old)),
                                      np.asarray(jboost.feature_importance(m)))
        np.testing.assert_allclose(np.asarray(ji.shap_values(old, X[:8], data=X).values),
                                   np.asarray(ji.shap_values(m, X[:8], data=X).values), atol=1e-5)
        # Saved again, the converted model is a format-5 file of node tables.
        again = _saved(old, tmp_path, f"{name}-again.jbm")
        assert jio.read_header(again)["format_version"] == 5
        _assert_same_model(old, jboost.load(again))


def test_damaged_depthwise_files_raise_model_file_errors(depthwise_models, tmp_path):
    good = _saved(depthwise_models["booster"], tmp_path, "dw.jbm")
    members = _members(good)

    def hdr():
        return json.loads(members[jio.HEADER].tobytes())

    def case(name, changes, header=None):
        mem = {**members, **changes}
        h = hdr() if header is None else header
        for k, v in changes.items():
            h["arrays"][k] = {"dtype": v.dtype.name, "shape": list(v.shape)}
        _write(tmp_path / f"{name}.jbm", mem, h)
        return tmp_path / f"{name}.jbm"

    kids = members[".trees.children"]
    cases = {}
    cycle = kids.copy()
    cycle[0, 0, 1, 0] = 0  # node 1's left child: the root
    cases["child before its parent"] = (case("c1", {".trees.children": cycle}), r"children\[0, 0, 1, 0\] = 0")
    far = kids.copy()
    far[0, 0, 0, 1] = -(kids.shape[-2] + 2)  # leaf N + 1 of N + 1 leaf slots
    cases["leaf out of range"] = (case("c2", {".trees.children": far}), "a leaf ~l with l <= 7")
    cases["children shape"] = (case("c3", {".trees.children": kids[..., :1]}), "trees.children has shape")
    cases["children dtype"] = (case("c4", {".trees.children": kids.astype(np.int16)}), "children is int16")
    lv = members[".trees.leaf_values"]
    cases["leaf slots"] = (case("c5", {".trees.leaf_values": lv[..., :-1, :]}), "7 node slots need")
    cases["level_counts dtype"] = (case("c6", {".trees.level_counts": members[".trees.level_counts"].astype(
        np.float32)}), "level_counts is float32")
    shallow = case("c7", {".trees.level_counts": members[".trees.level_counts"][..., :1]})
    cases["deeper than level_counts"] = (shallow, "lead below level 1")
    h = hdr()
    del h["structure"]["fields"]["trees"]["fields"]["children"]
    del h["arrays"][".trees.children"]
    no_kids = {k: v for k, v in members.items() if k != ".trees.children"}
    _write(tmp_path / "c8.jbm", no_kids, h)
    cases["version 5 without children"] = (tmp_path / "c8.jbm", r"missing: \['children'\]")
    old_path, _ = _old_file(depthwise_models["booster"], tmp_path, "dw")
    old = _members(old_path)
    h = json.loads(old[jio.HEADER].tobytes())
    old[".trees.leaf_values"] = old[".trees.leaf_values"][..., :6, :]
    h["arrays"][".trees.leaf_values"]["shape"] = list(old[".trees.leaf_values"].shape)
    _write(tmp_path / "c9.jbm", old, h)
    cases["old file, dense leaves not 2**D"] = (tmp_path / "c9.jbm", "a power of 2 leaves")
    for name, (path, message) in cases.items():
        with pytest.raises(jboost.ModelFileError, match=message):
            jboost.load(path)
