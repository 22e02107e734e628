"""The documentation's multi-process script runs as the page launches it: the ``# file: train.py``
block of docs/guide/devices-and-hosts.md is saved as ``train.py`` and the page's launch loop (its
first bash block: three local CPU processes with gloo collectives) runs it. Process 0's model file
must be the single-process fit of the processes' rows concatenated in process order: the same
borders and splits bitwise, predictions to float rounding (``psum`` adds per-process partial sums
in another order).
"""

from __future__ import annotations

import os
import re
import sys

import numpy as np
import pytest

import _docs_blocks
from tests import _processes

import jboost
from jboost import datasets

PAGE = _docs_blocks.REPO / "docs" / "guide" / "devices-and-hosts.md"
#: Seconds the three processes take on a quiet 2-core machine (side by side).
QUIET_SECONDS = 30
#: What a coordinator that could not take its port writes (then the launch is tried again).
PORT_TAKEN = ("failed to start rpc server", "failed to add port", "address already in use")


def launch_command() -> str:
    """The page's first bash block: the local launch loop."""
    bash = re.findall(r"^```bash\n(.*?)^```", PAGE.read_text(), flags=re.S | re.M)
    assert bash and "python train.py" in bash[0] and "localhost:" in bash[0], bash[:1]
    return bash[0]


def launch(tmp_path) -> tuple[str, str]:
    """Save train.py and run the page's launch loop in ``tmp_path`` (a free coordinator port,
    this interpreter); its stdout and stderr."""
    (tmp_path / "train.py").write_text(_docs_blocks.files(PAGE)["train.py"])
    env = dict(os.environ, JAX_PLATFORMS="cpu",
               PYTHONPATH=os.pathsep.join(filter(None, [str(_docs_blocks.REPO),
                                                        os.environ.get("PYTHONPATH")])))
    env.pop("JAX_COMPILATION_CACHE_DIR", None)  # the processes compile the same programs at once
    env.pop("XLA_FLAGS", None)
    for attempt in range(2):
        with __import__("socket").socket() as s:
            s.bind(("localhost", 0))
            port = s.getsockname()[1]
        command = (launch_command().replace("python train.py", f"{sys.executable} train.py")
                   .replace("localhost:12355", f"localhost:{port}"))
        out = _processes.run(["bash", "-c", command], quiet=QUIET_SECONDS,
                             what="the docs' three train.py processes", cwd=tmp_path, env=env)
        if attempt == 0 and any(m in out.stderr.lower() for m in PORT_TAKEN):
            continue
        return out.stdout, out.stderr
    raise AssertionError("unreachable")


@pytest.mark.slow
def test_the_pages_train_script_runs_on_three_processes(tmp_path):
    stdout, stderr = launch(tmp_path)
    assert "validation loss after 50 rounds" in stdout, stderr[-3000:]
    model = jboost.load(str(tmp_path / "model.jbm"))
    X, y = datasets.nested_spheres(3000, seed=0)
    Xv, yv = datasets.nested_spheres(3000, seed=1)
    order = np.concatenate([np.arange(3000)[p::3] for p in range(3)])  # process order
    vorder = np.concatenate([np.arange(3000)[p::3] for p in range(3)])
    single = jboost.fit(X[order], y[order], "binomial_deviance", n_rounds=50, depth=4,
                        eval_set=(Xv[vorder], yv[vorder]))
    assert np.array_equal(model.borders, single.borders)
    assert np.array_equal(model.trees.features, single.trees.features)
    assert np.array_equal(model.trees.thresholds, single.trees.thresholds)
    np.testing.assert_allclose(jboost.predict(model, X), jboost.predict(single, X), atol=1e-4)
    np.testing.assert_allclose(model.valid_loss, single.valid_loss, atol=1e-5)
