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


def test_layers_hold():
    """``lint-imports`` (import-linter) keeps the layer contract of pyproject.toml."""
    out = subprocess.run([sys.executable, "-c", "import sys; from importlinter.cli import lint_imports_command;"
                          " sys.exit(lint_imports_command())"],
                         cwd=REPO, capture_output=True, text=True)
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-2000:]


@pytest.mark.skipif(not SHAPE.is_file(), reason=f"{SHAPE} (the shared shape tool) is not beside this clone")
def test_shape_within_limits():
    """Module and function sizes, private names across modules, imports inside functions and
    import cycles within the limits (``shape.py --check``; CI has ``../shared`` beside the clone)."""
    out = subprocess.run([sys.executable, str(SHAPE), "jboost", "--max-module", "700", "--max-function", "80",
                          "--check"], cwd=REPO, capture_output=True, text=True)
    assert out.returncode == 0, out.stdout[-6000:]
