"""The other half of the documentation's python blocks (test_docs_examples.py says how they
run), in a file of its own so that pytest-xdist runs the two halves on two workers."""

import pytest

import _docs_blocks

CASES = _docs_blocks.cases(_docs_blocks.share(1))


@pytest.mark.slow
@pytest.mark.parametrize("case", CASES, ids=_docs_blocks.case_id)
def test_docs_python_block_runs(docs_sessions, case):
    _docs_blocks.run_case(docs_sessions, case)
