"""jboost's programs kept between processes (jboost/_cache.py): JAX's persistent compilation cache
in a per-user directory by default, keyed by an installation fingerprint, bounded, shareable,
movable and off-switchable. Each behaviour is checked in fresh processes, as a user meets it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from jboost import _cache, _native
from tests import _processes


#: A fresh process's first fit of a small problem, reporting the cache events JAX records.
FIT = """
import json, jax, numpy as np
events = []
jax.monitoring.register_event_listener(lambda name, **kw: events.append(name))
import jboost
from jboost import _compile
rng = np.random.default_rng(0)
X = rng.normal(size=(300, 4)).astype(np.float32)
y = (X[:, 0] + 0.3 * rng.normal(size=300) > 0).astype(np.float32)
m = jboost.fit(X, y, loss="logistic", n_rounds=5, depth=2, n_bins=16, key=0)
p = np.asarray(jboost.predict(m, X))
print(json.dumps({"dir": _compile.CACHE_DIR,
                  "hits": events.count("/jax/compilation_cache/cache_hits"),
                  "misses": events.count("/jax/compilation_cache/cache_misses"),
                  "min_seconds": jax.config.jax_persistent_cache_min_compile_time_secs,
                  "max_size": jax.config.jax_compilation_cache_max_size,
                  "pred": p.tobytes().hex()}))
"""
#: Only the import of jboost's compile layer (no program compiled).
CONFIGURE = """
import json, jax
from jboost import _compile
print(json.dumps({"dir": _compile.CACHE_DIR}))
"""


def _env(**extra) -> dict:
    """The test process's environment without the suite's own cache settings (conftest.py)."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("JAX_COMPILATION_CACHE_DIR", "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS",
                        "JAX_COMPILATION_CACHE_MAX_SIZE", _cache.ENV)}
    env.update(extra)
    return env


def _run(script: str, env: dict) -> tuple[dict, str]:
    proc = _processes.python(script, quiet=10, what="a fresh process's first fit", env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1]), proc.stderr


def _entries(path: str) -> list[Path]:
    return sorted(Path(path).glob("*-cache"))


@pytest.mark.subprocess
def test_second_process_loads_every_program_the_first_wrote(tmp_path):
    env = _env(**{_cache.ENV: str(tmp_path)})
    cold, cold_err = _run(FIT, env)
    assert cold["dir"] == str(tmp_path / _cache.fingerprint())
    assert cold["hits"] == 0 and cold["misses"] > 0
    assert cold["min_seconds"] == _cache.MIN_COMPILE_SECONDS
    assert cold["max_size"] == _cache.MAX_BYTES
    written = _entries(cold["dir"])
    assert written, "the first process wrote no program"
    warm, warm_err = _run(FIT, env)
    assert warm["dir"] == cold["dir"]
    assert warm["hits"] == len(written)        # every program written is read back
    assert warm["pred"] == cold["pred"]       # bitwise the same model
    assert "cache" not in (cold_err + warm_err).lower(), cold_err + warm_err


@pytest.mark.subprocess
def test_processes_sharing_a_cold_cache_agree(tmp_path):
    env = _env(**{_cache.ENV: str(tmp_path)})
    procs = [subprocess.Popen([sys.executable, "-c", FIT], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(3)]
    outs = [p.communicate(timeout=_processes.deadline(30)) for p in procs]
    assert all(p.returncode == 0 for p in procs), [err[-2000:] for _, err in outs]
    results = [json.loads(out.strip().splitlines()[-1]) for out, _ in outs]
    assert len({r["pred"] for r in results}) == 1
    assert not any("cache" in err.lower() for _, err in outs), [err for _, err in outs]
    warm, _ = _run(FIT, env)
    assert warm["hits"] == len(_entries(results[0]["dir"])) and warm["pred"] == results[0]["pred"]


@pytest.mark.subprocess
@pytest.mark.parametrize("value", ["off", "0", "False", " no "])
def test_off_switch(tmp_path, value):
    out, _ = _run(CONFIGURE, _env(**{_cache.ENV: value}, HOME=str(tmp_path),
                                  XDG_CACHE_HOME=str(tmp_path / "cache")))
    assert out["dir"] is None
    assert not (tmp_path / "cache").exists()


@pytest.mark.subprocess
def test_default_directory_is_the_users_cache_folder(tmp_path):
    out, _ = _run(CONFIGURE, _env(XDG_CACHE_HOME=str(tmp_path)))
    if sys.platform.startswith("linux"):
        assert out["dir"] == str(tmp_path / "jboost" / _cache.fingerprint())


@pytest.mark.subprocess
def test_users_own_jax_cache_is_kept(tmp_path):
    mine = tmp_path / "mine"
    out, _ = _run(FIT, _env(JAX_COMPILATION_CACHE_DIR=str(mine), **{_cache.ENV: str(tmp_path)}))
    assert out["dir"] == str(mine)
    assert out["min_seconds"] == 1.0 and out["max_size"] == -1   # JAX's defaults, untouched
    assert not list(tmp_path.glob("xla-*"))


@pytest.mark.subprocess
def test_unwritable_directory_warns_once_and_compiles(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    out, err = _run(FIT, _env(**{_cache.ENV: str(blocker)}))
    assert out["dir"] is None and out["hits"] == 0
    assert err.count("RuntimeWarning") == 1 and _cache.ENV in err and str(blocker) in err


def test_fingerprint_names_version_kernel_and_cpu(monkeypatch):
    base = _cache.fingerprint()
    assert base == _cache.fingerprint() and base.startswith("xla-")
    monkeypatch.setattr(_cache, "__version__", "999.0")
    assert _cache.fingerprint() != base
    monkeypatch.undo()
    monkeypatch.setattr(_cache, "_cpu_features", lambda: "another cpu")
    assert _cache.fingerprint() != base
    monkeypatch.undo()
    monkeypatch.setattr(_native, "library_path", lambda: None)
    assert _cache.fingerprint() != base


def test_prune_removes_only_stale_directories_of_other_fingerprints(tmp_path):
    old = time.time() - (_cache.STALE_DAYS + 1) * 86400
    keep, recent, stale, stale_stamped, other = (tmp_path / n for n in
                                                 ("xla-keep", "xla-recent", "xla-stale",
                                                  "xla-stamped", "not-a-cache"))
    for d in (keep, recent, stale, stale_stamped, other):
        d.mkdir()
    (stale_stamped / "last-used").touch()
    for d in (keep, stale, other):
        os.utime(d, (old, old))
    os.utime(stale_stamped / "last-used", (old, old))
    (recent / "last-used").touch()
    removed = _cache.prune(tmp_path, keep)
    assert sorted(removed) == ["xla-stale", "xla-stamped"]
    assert keep.exists() and recent.exists() and other.exists()


#: A fresh process's programs: the names of those lowered by a first fit and by a prediction.
PROGRAMS = """
import json, jax, numpy as np
from jax._src import monitoring
names = []
monitoring.register_event_duration_secs_listener(
    lambda event, duration, **kw: names.append(kw.get("fun_name"))
    if event.endswith("jaxpr_to_mlir_module_duration") else None)
import jboost
rng = np.random.default_rng(0)
X = rng.normal(size=(300, 4)).astype(np.float32)
y = (X[:, 0] > 0).astype(np.float32)
m = jboost.fit(X, y, loss="logistic", n_rounds=5, depth=2, n_bins=16, key=0)
fit = list(names)
jboost.fit(X[:250], y[:250], loss="logistic", n_rounds=5, depth=2, n_bins=16, key=3,
           learning_rate=0.3)
other_rows = names[len(fit):]
print(json.dumps({"fit": fit, "other_rows": other_rows}))
"""


@pytest.mark.subprocess
def test_a_fit_compiles_its_programs_only():
    """A first fit lowers its own programs (binning, baseline, rounds, the divergence check's
    start losses) and no small eager program per value it converts (``jnp.asarray`` of host
    arrays compiles one per shape: jax.device_put is used instead); a fit of other rows compiles
    those programs again, nothing else."""
    out, _ = _run(PROGRAMS, _env(**{_cache.ENV: "off"}))
    assert len(out["fit"]) <= 4, out["fit"]
    assert "jit(boost_rounds)" in out["fit"]
    assert sorted(out["other_rows"]) == sorted(out["fit"]), out
