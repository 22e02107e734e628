"""The results pages' figures (docs/results/figures.py): the script draws every PNG, and the
tables it plots from benchmarks/RESULTS.md (docs/results/data/*.csv) are still RESULTS.md's
numbers, cell by cell, in the section each CSV names, so the transcription cannot drift."""

import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
RESULTS = REPO / "benchmarks" / "RESULTS.md"
DATA = REPO / "docs" / "results" / "data"
SCRIPT = REPO / "docs" / "results" / "figures.py"
FIGURES = ("reproductions.png", "quantile_coverage.png", "boosting_speed.png", "forest_speed.png")

sys.path.insert(0, str(SCRIPT.parent))
import figures  # noqa: E402

_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")


def _section(heading: str) -> str:
    """The text of RESULTS.md's section under ``## heading``, up to the next heading of its
    level or above."""
    text = RESULTS.read_text()
    start = text.index(f"\n## {heading}\n")
    end = re.compile(r"^#{1,2} ", re.M).search(text, start + 4)
    return text[start: end.start() if end else len(text)]


def test_the_script_draws_every_figure(tmp_path):
    pytest.importorskip("matplotlib")
    subprocess.run([sys.executable, str(SCRIPT), "--out", str(tmp_path)], check=True,
                   cwd=tmp_path, capture_output=True)
    for name in FIGURES:
        path = tmp_path / name
        assert path.is_file() and path.stat().st_size > 1000, name
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", name


def test_the_committed_figures_are_small():
    for name in FIGURES:
        path = REPO / "docs" / "results" / "figures" / name
        assert path.is_file(), f"{name}: run python docs/results/figures.py and commit it"
        assert path.stat().st_size < 150 * 1024, name


@pytest.mark.parametrize("csv_path", sorted(DATA.glob("*.csv")), ids=lambda p: p.name)
def test_every_transcribed_number_is_in_results_md(csv_path):
    comments, rows = figures.read_csv(csv_path)
    headings = [line.split(":", 1)[1].strip() for line in comments if line.startswith("section:")]
    assert len(headings) == 1, f"{csv_path.name}: name the RESULTS.md section ('# section: ...')"
    section = _section(headings[0])
    assert rows, csv_path.name
    for row in rows:
        for column, cell in row.items():
            if not cell:
                continue
            if _NUMBER.fullmatch(cell):
                # the number as RESULTS.md prints it: not part of a longer number
                assert re.search(rf"(?<![\d.]){re.escape(cell)}(?![\d]|\.\d)", section), \
                    f"{csv_path.name}: {column}={cell} ({row}) is not in '{headings[0]}'"
            else:
                assert cell in section, \
                    f"{csv_path.name}: {column}={cell!r} is not in '{headings[0]}'"


def test_the_reproductions_figure_covers_every_published_row():
    import json

    results = json.loads((REPO / "experiments" / "results.json").read_text())
    rows = figures.published_rows(results)
    numeric = sum(isinstance(row.get("published"), (int, float)) and not isinstance(row.get("ours"), str)
                  for experiment in results["experiments"].values()
                  for row in experiment.get("table", []))
    assert len(rows) == numeric > 0
