"""Every python block of the documentation runs (README.md and the pages of docs/: the user
guide, the design notes): one test per block, in order, each page in a namespace of its own as a
reader pastes it (tests/_docs_blocks.py), so that a failure names its page and block. A block needs
the names the blocks before it on its page define: run the whole file (``-k`` on one block alone
fails with a NameError). XLA's optimisations are off while the blocks run: their time is
compiling small programs (``python tests/_docs_blocks.py PAGE.md`` times them as a reader gets
them). The pages are dealt between this file and test_docs_examples_2.py, which pytest-xdist runs
on two workers."""

import pytest

import _docs_blocks

CASES = _docs_blocks.cases(_docs_blocks.share(0))


@pytest.mark.slow
@pytest.mark.parametrize("case", CASES, ids=_docs_blocks.case_id)
def test_docs_python_block_runs(docs_sessions, case):
    _docs_blocks.run_case(docs_sessions, case)


def test_the_readme_and_the_guide_have_examples():
    every = _docs_blocks.pages()
    assert sorted(_docs_blocks.share(0) + _docs_blocks.share(1)) == sorted(every)
    per_page = {page.relative_to(_docs_blocks.REPO).as_posix(): len(_docs_blocks.blocks(page))
                for page in every}
    assert per_page["README.md"] >= 1
    guide = [name for name in per_page if name.startswith("docs/guide/")]
    assert len(guide) >= 10 and all(per_page[name] >= 1 for name in guide), per_page


def test_a_block_not_run_says_why():
    for page in _docs_blocks.pages():
        for block in _docs_blocks.blocks(page):
            if "not run" in block.lstrip().splitlines()[0]:
                assert not _docs_blocks.runs(block), f"{page}: '# not run: <reason>' needs a reason"


def test_every_script_block_has_its_launch_test():
    scripts = {(page.relative_to(_docs_blocks.REPO).as_posix(), name)
               for page in _docs_blocks.pages() for name in _docs_blocks.files(page)}
    assert scripts == set(_docs_blocks.LAUNCHED), "a '# file: NAME' block needs a launch test"
    for test in _docs_blocks.LAUNCHED.values():
        assert (_docs_blocks.REPO / test).is_file(), test
