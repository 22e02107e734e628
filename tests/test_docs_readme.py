"""The README's python blocks run, in order, in one namespace (as a reader pastes them into one
session): one test per block, so that a failure names its block and the suite's workers can
balance this file (two minutes of CPU) against the others. (In its own file, collected early:
pytest-xdist hands out whole files in collection order, and a long file handed out last would
end the run alone.) A block needs the names the blocks before it define: run the whole file
(``-k``/``--lf`` on one block alone fails with a NameError)."""

import re
from pathlib import Path

import pytest

from conftest import no_xla_optimisations

REPO = Path(__file__).resolve().parent.parent
README_BLOCKS = re.findall(r"^```python\n(.*?)^```", (REPO / "README.md").read_text(), flags=re.S | re.M)


@pytest.fixture(scope="module")
def readme_session():
    """The namespace every block runs in, and the blocks that failed. XLA's optimisations are off
    while the blocks run: some thirty small programs, whose compilation is the blocks' time."""
    with no_xla_optimisations():
        yield {"namespace": {"__name__": "__readme__"}, "failed": []}


def test_readme_has_python_blocks():
    assert len(README_BLOCKS) >= 3


@pytest.mark.slow
@pytest.mark.parametrize("i", range(len(README_BLOCKS)))
def test_readme_python_block_runs(readme_session, i):
    if readme_session["failed"]:  # a later block uses the names an earlier one defines
        pytest.fail(f"README.md python block {readme_session['failed'][0]} failed before this one")
    try:
        exec(compile(README_BLOCKS[i], f"README.md python block {i}", "exec"), readme_session["namespace"])
    except BaseException:
        readme_session["failed"].append(i)
        raise


@pytest.mark.slow  # it reads what the blocks above defined
def test_readme_blocks_defined_what_they_show(readme_session):
    namespace = readme_session["namespace"]
    assert not readme_session["failed"]
    assert "log_cosh" in namespace and namespace["sweep"].valid_loss.shape == (3, 50)
