"""Every python block of the documentation runs (README.md and the pages of docs/: the user
guide, the design notes): one test per block, in order, each page in a namespace of its own as a
reader pastes it (tests/_docs_blocks.py), so that a failure names its page and block. A block needs
the names the blocks before it on its page define: run the whole file (``-k`` on one block alone
fails with a NameError). XLA's optimisations are off while the blocks run: their time is
compiling small programs (``python tests/_docs_blocks.py PAGE.md`` times them as a reader gets
them)."""

import os

import pytest

import _docs_blocks
from conftest import no_xla_optimisations

PAGES = _docs_blocks.pages()
#: Every block that runs (a ``# not run: <reason>`` block is only shown: it needs several
#: processes, a GPU or a scheduler).
CASES = [(page, i) for page in PAGES for i, block in enumerate(_docs_blocks.blocks(page))
         if _docs_blocks.runs(block)]


def _case_id(case) -> str:
    page, i = case
    return f"{page.relative_to(_docs_blocks.REPO)}:{i}"


@pytest.fixture(scope="module")
def sessions(tmp_path_factory):
    """Each page's namespace, and the first block that failed on each page. The blocks run in a
    temporary directory (the files they write, model files and checkpoints, land there)."""
    here = os.getcwd()
    os.chdir(tmp_path_factory.mktemp("docs_examples"))
    try:
        with no_xla_optimisations():
            yield {}
    finally:
        os.chdir(here)


def test_the_readme_and_the_guide_have_examples():
    per_page = {page.relative_to(_docs_blocks.REPO).as_posix(): len(_docs_blocks.blocks(page))
                for page in PAGES}
    assert per_page["README.md"] >= 1
    guide = [name for name in per_page if name.startswith("docs/guide/")]
    assert len(guide) >= 10 and all(per_page[name] >= 1 for name in guide), per_page


def test_a_block_not_run_says_why():
    for page in PAGES:
        for block in _docs_blocks.blocks(page):
            if "not run" in block.lstrip().splitlines()[0]:
                assert not _docs_blocks.runs(block), f"{page}: '# not run: <reason>' needs a reason"


@pytest.mark.slow
@pytest.mark.parametrize("case", CASES, ids=_case_id)
def test_docs_python_block_runs(sessions, case):
    page, i = case
    session = sessions.setdefault(page, {"namespace": {"__name__": f"__docs_{page.stem}__"},
                                         "failed": None})
    if session["failed"] is not None:  # a later block uses the names an earlier one defines
        pytest.fail(f"block {session['failed']} of {page.name} failed before this one")
    try:
        _docs_blocks.run_block(_docs_blocks.blocks(page)[i], _case_id(case), session["namespace"])
    except BaseException:
        session["failed"] = i
        raise
