"""The python blocks of the documentation's Markdown pages (README.md and docs/), as a reader
pastes them: each page's blocks run in order in one namespace of their own, so every page is
self-contained. A block whose first line is ``# file: NAME ...`` is a whole script a reader saves
as NAME and launches as the page says (several processes): :data:`LAUNCHED` names the test that
launches it so (tests/test_docs_launch.py). A block whose first line is ``# not run: <reason>``
is shown, not run (it needs a GPU or a scheduler); the reason is required.

``python tests/_docs_blocks.py PAGE.md [PAGE.md ...]`` runs pages' blocks the way a reader does
(jboost's defaults, XLA's optimisations on), each page in a fresh Python process as a reader
pastes it into a new session, and prints each block's wall time: the examples are meant to
answer in under 10 s each on a quiet 2-core machine.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
NOT_RUN = re.compile(r"#\s*not run:\s*\S")
FILE = re.compile(r"#\s*file:\s*(\S+)")
#: The scripts of ``# file: NAME`` blocks, by page and name, and the test that launches each.
LAUNCHED = {("docs/guide/devices-and-hosts.md", "train.py"): "tests/test_docs_launch.py"}
_BLOCK = re.compile(r"^```python\n(.*?)^```", flags=re.S | re.M)


def pages() -> list[Path]:
    """Every Markdown page with examples: the README and docs/ (not the generated API pages or
    a build's output)."""
    docs = sorted(p for p in (REPO / "docs").rglob("*.md")
                  if not {"_build", "api"} & set(p.relative_to(REPO / "docs").parts[:-1]))
    return [REPO / "README.md", *docs]


def blocks(page: Path) -> list[str]:
    """A page's python blocks, in order (``# not run:`` blocks included)."""
    return _BLOCK.findall(page.read_text())


def _first_line(block: str) -> str:
    return block.lstrip().splitlines()[0] if block.strip() else ""


def runs(block: str) -> bool:
    """Whether the suite runs this block in its page's namespace (not a ``# not run: <reason>``
    block, nor a ``# file: NAME`` script, which its launch test runs)."""
    first = _first_line(block)
    return not (NOT_RUN.match(first) or FILE.match(first))


def files(page: Path) -> dict[str, str]:
    """A page's ``# file: NAME`` scripts, by NAME."""
    found = {}
    for block in blocks(page):
        match = FILE.match(_first_line(block))
        if match:
            found[match.group(1)] = block
    return found


def share(part: int, parts: int = 2) -> list[Path]:
    """The pages of one of ``parts`` test files (pytest-xdist runs each file on one worker): pages
    dealt greedily by their number of blocks, so that the files take about the same time."""
    loads = [0] * parts
    chosen: list[list[Path]] = [[] for _ in range(parts)]
    for page in sorted(pages(), key=lambda p: -sum(map(runs, blocks(p)))):
        lightest = loads.index(min(loads))
        chosen[lightest].append(page)
        loads[lightest] += sum(map(runs, blocks(page)))
    return sorted(chosen[part])


def run_block(block: str, name: str, namespace: dict) -> None:
    """Execute one block in a page's namespace."""
    exec(compile(block, name, "exec"), namespace)


def cases(chosen: list[Path]) -> list[tuple[Path, int]]:
    """Every block of these pages that runs, as ``(page, index)`` (a ``# not run: <reason>``
    block is only shown: it needs several processes, a GPU or a scheduler)."""
    return [(page, i) for page in chosen for i, block in enumerate(blocks(page)) if runs(block)]


def case_id(case: tuple[Path, int]) -> str:
    page, i = case
    return f"{page.relative_to(REPO)}:{i}"


def run_case(sessions: dict, case: tuple[Path, int]) -> None:
    """Run one block in its page's namespace (``sessions[page]``); a block after a failed one
    fails at once, naming the block that failed."""
    page, i = case
    session = sessions.setdefault(page, {"namespace": {"__name__": f"__docs_{page.stem}__"},
                                         "failed": None})
    if session["failed"] is not None:  # a later block uses the names an earlier one defines
        raise AssertionError(f"block {session['failed']} of {page.name} failed before this one")
    try:
        run_block(blocks(page)[i], case_id(case), session["namespace"])
    except BaseException:
        session["failed"] = i
        raise


def main(argv: list[str]) -> int:
    """Time each page's blocks in a fresh process of its own (a reader's new session)."""
    if len(argv) != 1:
        slowest = (0.0, "")
        for page in [Path(arg).resolve() for arg in argv] or pages():
            out = subprocess.run([sys.executable, __file__, str(page)], capture_output=True,
                                 text=True)
            print(out.stdout, end="", flush=True)
            if out.returncode:
                print(out.stderr, file=sys.stderr)
                return out.returncode
            took, name = out.stdout.rsplit("slowest: ", 1)[1].rsplit(" (", 1)[::-1]
            slowest = max(slowest, (float(took.split(" s)")[0]), name))
        print(f"slowest: {slowest[1]} ({slowest[0]:.1f} s)")
        return 0
    page = Path(argv[0]).resolve()
    slowest = (0.0, "")
    os.chdir(tempfile.mkdtemp(prefix="jboost-docs-"))  # the files the blocks write land there
    namespace = {"__name__": f"__docs_{page.stem}__"}
    for i, block in enumerate(blocks(page)):
        name = f"{page.relative_to(REPO)} python block {i}"
        if not runs(block):
            print(f"{name}: {_first_line(block).lstrip('# ')}")
            continue
        start, cpu = time.perf_counter(), time.process_time()
        run_block(block, name, namespace)
        took = time.perf_counter() - start
        slowest = max(slowest, (took, name))
        print(f"{name}: {took:.1f} s ({time.process_time() - cpu:.1f} s of CPU)", flush=True)
    print(f"slowest: {slowest[1]} ({slowest[0]:.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
