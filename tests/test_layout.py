"""The package's shape, enforced: its layers (import-linter's contract in pyproject.toml: each
layer imports only the layers below it) and the limits of ``../shared/tools/shape.py --check``
(modules of at most 700 lines, functions of at most 80 code lines, no private name of one module
used by another, no package import inside a function, no import cycle)."""

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SHAPE = REPO.parent / "shared" / "tools" / "shape.py"


@pytest.mark.subprocess
def test_layers_hold():
    """``lint-imports`` (import-linter) keeps the layer contract of pyproject.toml."""
    out = subprocess.run([sys.executable, "-c", "import sys; from importlinter.cli import lint_imports_command;"
                          " sys.exit(lint_imports_command())"],
                         cwd=REPO, capture_output=True, text=True)
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-2000:]


@pytest.mark.subprocess
@pytest.mark.skipif(not SHAPE.is_file(), reason=f"{SHAPE} (the shared shape tool) is not beside this clone")
def test_shape_within_limits():
    """Module and function sizes, private names across modules, imports inside functions and
    import cycles within the limits (``shape.py --check``; CI has ``../shared`` beside the clone)."""
    out = subprocess.run([sys.executable, str(SHAPE), "jboost", "--max-module", "700", "--max-function", "80",
                          "--check"], cwd=REPO, capture_output=True, text=True)
    assert out.returncode == 0, out.stdout[-6000:]


#: Namespaces of training: none is imported by loading a model file and predicting with it.
TRAINING = ("jboost.engine", "jboost.fitting", "jboost.sweep", "jboost.bagging", "jboost.combine",
            "jboost.algorithms", "jboost.fine_tuning", "jboost.distributions", "jboost.objectives")
_IMPORTS = """
import json, sys, time
start = time.perf_counter()
import jboost
seconds = time.perf_counter() - start
after_import = sorted(m for m in sys.modules if m.startswith(("jboost.", "jax")))
import numpy as np
model = jboost.load(sys.argv[1])
p = np.asarray(jboost.predict(model, np.zeros((3, 4), np.float32)))
print(json.dumps({"seconds": seconds, "after_import": after_import, "shape": p.shape,
                  "after_predict": sorted(m for m in sys.modules if m.startswith("jboost."))}))
"""


@pytest.mark.subprocess
def test_import_is_lazy_and_predicting_a_file_skips_training(tmp_path):
    """``import jboost`` imports no submodule and not JAX (public names load on first use, PEP
    562), and ``jboost.load`` + ``jboost.predict`` of a model file import no training namespace;
    public names still resolve to the objects their modules define."""
    import json

    import jboost
    import numpy as np
    from jboost.fitting import boost
    from jboost.models import base

    assert jboost.fit is boost.fit and jboost.predict is base.predict
    assert callable(jboost.finetune) and "finetune" in dir(jboost) and "sweep" in dir(jboost)
    with pytest.raises(AttributeError, match="no attribute 'no_such_name'"):
        jboost.no_such_name  # noqa: B018
    X = np.random.default_rng(0).normal(size=(120, 4)).astype(np.float32)
    jboost.save(jboost.fit(X, X[:, 0], n_rounds=3, depth=2, n_bins=16), tmp_path / "m.jbm")
    from tests import _processes
    out = _processes.python(_IMPORTS, quiet=10, what="loading a model file in a new process",
                            extra_args=[str(tmp_path / "m.jbm")])
    assert out.returncode == 0, out.stderr[-3000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["after_import"] == ["jboost._version"], got["after_import"]
    assert got["shape"] == [3]
    loaded = [m for m in got["after_predict"] if m.startswith(TRAINING)]
    assert loaded == [], loaded
