"""The results pages' figures (docs/results/figures.py): the script draws every PNG, and it reads
the speed tables from benchmarks/RESULTS.md's Markdown (no copy of them to drift): every case and
library, every number parsed."""

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
RESULTS = REPO / "benchmarks" / "RESULTS.md"
SCRIPT = REPO / "docs" / "results" / "figures.py"
FIGURES = ("reproductions.png", "reproductions_multiclass.png", "quantile_coverage.png",
           "boosting_speed.png", "forest_speed.png")

sys.path.insert(0, str(SCRIPT.parent))
import figures  # noqa: E402

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


def test_the_speed_tables_are_read_from_results_md():
    """Both sections' tables are found and parsed whole: 4 row counts x 5 setups for the default
    fit (the 10M table included), 4 cases x 3 libraries for the forests, every number a float."""
    boosting = figures.boosting_table()
    assert [row["case"] for row in boosting[::5]] == ["100k x 50", "200k x 50", "1M x 50", "10M x 50"]
    assert {row["library"] for row in boosting} == {"jboost (default)", "jboost-devices",
                                                    "XGBoost hist", "LightGBM", "CatBoost"}
    assert all(float(row["bin s"]) > 0 and float(row["ms per tree"]) > 0 for row in boosting)
    forest = figures.forest_table()
    assert len(forest) == 12 and {row["error unit"] for row in forest} == {"%", "AAE"}
    for row in forest:
        float(row["error"])
        timed = row["seconds low"] if row["library"] == "scikit-learn" else row["ratio low"]
        assert float(timed) > 0, row


def test_a_markdown_table_repeats_its_case_and_drops_bold():
    text = ("## Default fit at or below XGBoost's time per tree at 200k and 1M (today)\n\n"
            "| case | library | bin s | ms per tree |\n|---|---|---|---|\n"
            "| 1k x 5 | **jboost (default)** | 0.1 | **2.0** |\n"
            "| | jboost-devices (expert: 2 XLA host devices) | 0.2 | 3.0 |\n\nprose\n\n## Next\n"
            "| case | library |\n|---|---|\n| x | y |\n")
    tables = figures.markdown_tables(figures.BOOSTING_SECTION, text)
    assert tables == [[{"case": "1k x 5", "library": "jboost (default)", "bin s": "0.1",
                        "ms per tree": "2.0"},
                       {"case": "", "library": "jboost-devices (expert: 2 XLA host devices)",
                        "bin s": "0.2", "ms per tree": "3.0"}]]


def test_the_reproductions_figure_covers_every_published_row():
    import json

    results = json.loads((REPO / "experiments" / "results.json").read_text())
    rows = figures.published_rows(results)
    numeric = sum(isinstance(row.get("published"), (int, float)) and not isinstance(row.get("ours"), str)
                  for experiment in results["experiments"].values()
                  for row in experiment.get("table", []))
    assert len(rows) == numeric > 0
    # the figures split them, each row in exactly one file, each file with rows
    groups = figures.reproduction_groups(rows)
    assert set(groups) == set(figures.REPRODUCTION_FIGURES) and all(groups.values())
    assert sorted(id(row) for group in groups.values() for row in group) == sorted(map(id, rows))
