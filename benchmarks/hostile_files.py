"""A hostile-input campaign over model files (issue 46): truncated files, random byte flips,
fields edited with the checksum recomputed, decompression bombs, wrong format versions, huge
declared shapes and odd archives, each loaded as a hostile user would hand it to ``jboost.load``.

Prints the counts by outcome (refused with ModelFileError / loaded, predicting bitwise as the
saved model / loaded, predicting differently / another exception type / crash) per kind of case.
Only "refused" and "loaded, identical" are good; the edits of fields are those of
tests/test_io_hostile.py (which lists the edits it leaves out: those giving another valid model).

    PYTHONPATH=. python benchmarks/hostile_files.py [--edits 12] [--seed 0]
    PYTHONPATH=. python benchmarks/hostile_files.py --smoke      # CI's check: 4 models, seconds
"""

from __future__ import annotations

import argparse
import importlib.util
import io
import json
import os
import sys
import tempfile
import time
import warnings
import zipfile
from collections import Counter, defaultdict

import numpy as np

import jboost
from jboost import algorithms, bagging, combine
from jboost import io as jio
from jboost.io import reader as jreader

HERE = os.path.dirname(os.path.abspath(__file__))


def _edits_module():
    """tests/test_io_hostile.py (ModelFile, the edits, predictions), imported by path."""
    spec = importlib.util.spec_from_file_location(
        "test_io_hostile", os.path.join(HERE, "..", "tests", "test_io_hostile.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


#: The models of ``--smoke``: one per tree family and producer kind, and a DataFrame's (pandas).
SMOKE_MODELS = ("binary (class labels)", "depthwise", "forest", "categorical")


def models(smoke: bool = False):
    """Small models of every type and producer (``smoke``: only :data:`SMOKE_MODELS`)."""
    import optax
    import pandas as pd

    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 5)).astype(np.float32)
    X[rng.random(300) < 0.1, 2] = np.nan
    yb = (X[:, 0] + 0.3 * rng.normal(size=300) > 0).astype(np.float32)
    ym = np.digitize(X[:, 1], [-0.5, 0.5]).astype(np.float32)
    yr = (2 * X[:, 0] + X[:, 3]).astype(np.float32)
    kw = dict(n_rounds=4, depth=2, n_bins=16)
    frame = pd.DataFrame({f"x{j}": X[:, j] for j in range(4)})
    frame["c"] = pd.Categorical(np.array(list("pqrstuvwxyz" * 30))[rng.permutation(330)[:300]])

    def fine_tuned():
        return jboost.finetune(jboost.fit(X, np.array(["a", "b", "c"])[ym.astype(int)],
                                          "multinomial_deviance", **kw),
                               X, np.array(["a", "b", "c"])[ym.astype(int)], None,
                               optax.adam(0.05), n_steps=5, soft=True)

    def label_offset():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return jboost.fit(X, 1e9 + yr.astype(np.float64), **kw)

    makers = {
        "binary (class labels)": lambda: jboost.fit(X, np.where(yb > 0, "yes", "no"),
                                                    "binomial_deviance", **kw),
        "multiclass (class labels)": lambda: jboost.fit(X, np.array(["a", "b", "c"])[ym.astype(int)],
                                                        "multinomial_deviance", **kw),
        "vmapped fits": lambda: __import__("jax").vmap(lambda lr: jboost.fit(
            X, yb, "binomial_deviance", **kw, learning_rate=lr))(np.array([0.1, 0.5], np.float32)),
        "early stopped": lambda: jboost.fit(X[:200], yb[:200], "binomial_deviance",
                                            eval_set=(X[200:], yb[200:]), early_stopping_rounds=2,
                                            n_rounds=12, depth=3, n_bins=32, learning_rate=1.0),
        "multi-output": lambda: jboost.fit(X, np.stack([yr, -yr], 1), **kw),
        "multi-label": lambda: jboost.fit(X, np.stack([yb, 1 - yb], 1), "binomial_deviance", **kw),
        "depthwise": lambda: jboost.fit(X, yr, tree_family="depthwise", n_rounds=3, depth=3,
                                        n_bins=16),
        "lossguide": lambda: jboost.fit(X, yr, tree_family="lossguide", max_leaves=5, n_rounds=3,
                                        n_bins=16, depth=4),
        "adaboost": lambda: algorithms.adaboost_m1(X, yb, n_rounds=4, depth=1, n_bins=16),
        "forest": lambda: bagging.fit_forest(X, ym, n_trees=5, depth=3, n_bins=16, key=1),
        "bagged": lambda: bagging.fit_bagged_boosters(X, yb, "binomial_deviance", n_bags=3, key=2,
                                                      **kw),
        "stacked": lambda: combine.fit_stacked_boosters(
            X, ym, "multinomial_deviance",
            hypers=[dict(learning_rate=0.5), dict(learning_rate=0.1)], folds=3, n_rounds=4,
            depth=2, n_bins=8),
        "ecoc": lambda: combine.fit_ecoc_boosters(X, ym, combine.exhaustive_code(3), **kw),
        "label offset": label_offset,
        "fine-tuned": fine_tuned,
        "categorical": lambda: jboost.fit(frame, yr, one_hot_max_size=4, **kw),
    }
    out = {name: make() for name, make in makers.items() if not smoke or name in SMOKE_MODELS}
    rows = {name: (frame.iloc[:30] if name == "categorical" else X[:30]) for name in out}
    return out, rows


class Campaign:
    def __init__(self, tmp, mod):
        self.tmp, self.mod = tmp, mod
        self.counts = defaultdict(Counter)
        self.examples = defaultdict(list)
        self.n = 0

    def run(self, kind, blob_or_path, want, X, note=""):
        """Load one case; record its outcome under ``kind``."""
        self.n += 1
        path = os.path.join(self.tmp, f"case{self.n}.jbm")
        if isinstance(blob_or_path, bytes):
            with open(path, "wb") as f:
                f.write(blob_or_path)
        else:
            path = blob_or_path
        try:
            back = jboost.load(path)
        except jboost.ModelFileError:
            outcome = "refused (ModelFileError)"
        except (MemoryError, RecursionError, SystemError) as e:
            outcome = f"crash ({type(e).__name__})"
        except (ValueError, TypeError) as e:  # a clear error naming the array or field?
            named = any(t in str(e) for t in ("array .", "loss=", "tree_family="))
            outcome = (f"refused ({type(e).__name__} naming the field)" if named
                       else f"other exception ({type(e).__name__})")
            self.examples[kind].append(f"{note}: {type(e).__name__}: {str(e)[:200]}")
        except Exception as e:  # noqa: BLE001 - counted by type
            outcome = f"other exception ({type(e).__name__})"
            self.examples[kind].append(f"{note}: {type(e).__name__}: {str(e)[:200]}")
        else:
            try:
                got = self.mod.predictions(back, X)
                outcome = "loaded, identical" if self.mod.same(want, got) else "loaded, different"
            except Exception as e:  # noqa: BLE001 - loaded but cannot predict
                outcome = f"loaded, then {type(e).__name__}"
            if outcome != "loaded, identical":
                self.examples[kind].append(f"{note}: {outcome}")
        self.counts[kind][outcome] += 1

    def report(self):
        total = Counter()
        for kind, c in list(self.counts.items()) + [("all", None)]:
            if c is None:
                c = total
            else:
                total.update(c)
            counts = ", ".join(f"{k}: {v}" for k, v in sorted(c.items()))
            print(f"{kind:34s} {sum(c.values()):4d}  {counts}")
        for kind, ex in self.examples.items():  # every bad one, a few of the others
            loaded = [e for e in ex if "loaded" in e]
            for e in loaded + [e for e in ex if e not in loaded][:4]:
                print(f"  [{kind}] {e}")
        return total


def _zip(members: dict, compression=zipfile.ZIP_STORED) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression) as z:
        for n, b in members.items():
            z.writestr(n, b)
    return buf.getvalue()


def _bomb(members: dict, name: str, mb: int) -> bytes:
    """The archive with member ``name`` a deflated float32 array of ``mb`` MB of zeros (written
    in chunks: a few hundred kB)."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        for n, b in members.items():
            if n != name:
                z.writestr(n, b)
                continue
            with z.open(n, "w", force_zip64=True) as f:
                f.write(_npy_header((mb << 18,)))
                zeros = bytes(1 << 20)
                for _ in range(mb):
                    f.write(zeros)
    return buf.getvalue()


def _raw_members(path) -> dict:
    with zipfile.ZipFile(path) as z:
        return {n: z.read(n) for n in z.namelist()}


def _npy_header(shape, descr="<f4") -> bytes:
    b = io.BytesIO()
    np.lib.format.write_array_header_1_0(b, {"descr": descr, "fortran_order": False,
                                             "shape": shape})
    return b.getvalue()


def archive_cases(c: Campaign, path, want, X, rng, bombs_mb=(8, 1100)):
    """Truncations, byte flips, versions, huge shapes, bombs (a deflated member of zeros of each
    of ``bombs_mb`` MB: under the default limit, and over it) and odd archives of one file."""
    raw = open(path, "rb").read()
    for frac in rng.uniform(0.0, 1.0, 4):
        c.run("truncated", raw[: int(len(raw) * frac)], want, X, f"{frac:.2f}")
    for _ in range(4):
        b = bytearray(raw)
        for i in rng.integers(0, len(b), int(rng.integers(1, 4))):
            b[i] ^= 1 << int(rng.integers(8))
        c.run("byte flips", bytes(b), want, X)
    mf = c.mod.ModelFile(path)
    for v in (jio.FORMAT_VERSION + 1, 0, -3, "5", True, 5.0, None):
        mf2 = c.mod.ModelFile(path)
        mf2.header["format_version"] = v
        p = os.path.join(c.tmp, "v.jbm")
        mf2.write(p)
        c.run("wrong versions", open(p, "rb").read(), want, X, repr(v))
    members = _raw_members(path)
    name = sorted(n for n in members if n != jio.HEADER + ".npy")[0]
    for shape in [(10**12,), (2**31, 2**31), (10**6, 10**6, 10**6)]:
        forged = dict(members)
        forged[name] = _npy_header(shape) + b"\0" * 64
        c.run("huge declared shapes", _zip(forged), want, X, f"{name} {shape}")
        mf2 = c.mod.ModelFile(path)
        mf2.header["arrays"][name[:-4]]["shape"] = list(shape)
        p = os.path.join(c.tmp, "h.jbm")
        mf2.write(p, sync=False)
        c.run("huge declared shapes", open(p, "rb").read(), want, X, f"header {shape}")
    for mb in bombs_mb:
        c.run("compressed (bombs)", _bomb(members, name, mb), want, X, f"{name}: {mb} MB")
    c.run("compressed (bombs)", _zip(members, zipfile.ZIP_DEFLATED), want, X, "whole file deflated")
    odd = dict(members)
    odd["evil.txt"] = b"print('hi')"
    c.run("odd archives", _zip(odd), want, X, "a non-array member")
    odd = {n: b for n, b in members.items() if n != jio.HEADER + ".npy"}
    c.run("odd archives", _zip(odd), want, X, "no header")
    odd = dict(members)
    odd[jio.HEADER + ".npy"] = _npy_header((3,), "|O") + b"\0" * 24
    c.run("odd archives", _zip(odd), want, X, "object header")
    deep = json.dumps(mf.header)
    deep = deep[:-1] + ', "x": ' + "[" * 50000 + "]" * 50000 + "}"
    odd = dict(members)
    b = io.BytesIO()
    np.save(b, np.frombuffer(deep.encode(), np.uint8))
    odd[jio.HEADER + ".npy"] = b.getvalue()
    c.run("odd archives", _zip(odd), want, X, "deep JSON")


def edit_cases(c: Campaign, path, want, X, rng, n_edits: int, name: str):
    """The property test's random edits of fields, checksum recomputed."""
    for i in range(n_edits):
        mf = c.mod.ModelFile(path)
        done = None
        while done is None:
            done = c.mod.EDITS[rng.integers(len(c.mod.EDITS))](mf, rng)
        p = os.path.join(c.tmp, f"e{i}.jbm")
        mf.write(p, sync=len(done) == 2 or done[2])
        c.run("edited fields (checksum fixed)", p, want, X, f"{name}: {done[0]}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--edits", type=int, default=12, help="field edits per model")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--smoke", action="store_true",
                    help="the smallest size (CI's check): the models of SMOKE_MODELS, 2 field edits "
                         "each, the archive cases of the first (its bombs: 8 MB only)")
    args = ap.parse_args()
    mod = _edits_module()
    t0 = time.perf_counter()
    fitted, rows = models(args.smoke)
    edits = 2 if args.smoke else args.edits
    print(f"{len(fitted)} models fitted in {time.perf_counter() - t0:.0f} s; "
          f"MAX_INFLATED_BYTES = {jreader.MAX_INFLATED_BYTES}")
    rng = np.random.default_rng(args.seed)
    with tempfile.TemporaryDirectory() as tmp:
        c = Campaign(tmp, mod)
        for i, (name, m) in enumerate(fitted.items()):
            path = os.path.join(tmp, f"model{i}.jbm")
            jboost.save(m, path)
            want = mod.predictions(m, rows[name])
            edit_cases(c, path, want, rows[name], rng, edits, name)
            if i % 4 == 0:
                archive_cases(c, path, want, rows[name], rng,
                              bombs_mb=(8,) if args.smoke else (8, 1100))
        total = c.report()
    bad = sum(v for k, v in total.items() if not k.startswith(("refused", "loaded, identical")))
    print(f"{sum(total.values())} cases in {time.perf_counter() - t0:.0f} s; {bad} bad")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
