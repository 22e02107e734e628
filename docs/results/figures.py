"""Draw the figures of the documentation's results pages (docs/results/figures/*.png).

    python docs/results/figures.py [--out DIR]

Every number plotted comes from a machine-readable source, never typed here:

* ``experiments/results.json`` (the machine-made results file of ``python -m experiments.run
  --all --write-readme``): the reproductions of published numbers and the quantile coverage;
* ``benchmarks/RESULTS.md``: the tables of two of its sections (the default fit against its peers;
  the depth-wise forests against scikit-learn), parsed from the Markdown as they stand.

The PNGs are committed (about 100 dpi, each under 150 KB); rerun this script after either
source changes. It needs matplotlib only (the ``plots`` extra).
"""

from __future__ import annotations

import argparse
import io
import json
import math
import re
from pathlib import Path


HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
RESULTS_JSON = REPO / "experiments" / "results.json"
RESULTS_MD = REPO / "benchmarks" / "RESULTS.md"
#: The RESULTS.md sections the speed figures plot (headings, up to the date).
BOOSTING_SECTION = "Default fit at or below XGBoost's time per tree at 200k and 1M"
FOREST_SECTION = "Depth-wise forests by default, at or under scikit-learn's time"
DPI = 100
#: PNG metadata without the matplotlib version, so that a rerun gives the same bytes.
METADATA = {"Software": None}

COLOURS = {
    "jboost (default)": "#d62728",
    "jboost-devices": "#ff9896",
    "XGBoost hist": "#1f77b4",
    "LightGBM": "#2ca02c",
    "CatBoost": "#9467bd",
    "scikit-learn": "#7f7f7f",
    "LightGBM rf": "#2ca02c",
    "jboost (defaults)": "#d62728",
}


# ------------------------------------------------------------------------------------------
# Sources


def markdown_tables(heading: str, text: str | None = None) -> list[list[dict[str, str]]]:
    """The tables of the RESULTS.md section whose heading starts with ``heading``: each a list of
    rows keyed by the header's cells (bold marks dropped)."""
    text = RESULTS_MD.read_text() if text is None else text
    start = text.index(f"## {heading}")
    end = text.find("\n## ", start + 1)
    tables, header = [], None
    for line in text[start:end if end >= 0 else None].splitlines():
        if not line.startswith("|"):
            header = None
            continue
        cells = [c.strip().replace("**", "") for c in line.strip().strip("|").split("|")]
        if header is None:
            header = cells
            tables.append([])
        elif not set("".join(cells)) <= set("-: "):
            tables[-1].append(dict(zip(header, cells)))
    return tables


def boosting_table() -> list[dict[str, str]]:
    """The default fit and its peers: ``case`` (``100k x 50``...), ``library``, ``bin s``,
    ``ms per tree``; an empty case cell repeats the one above, and ``jboost-devices (expert...)``
    is ``jboost-devices``."""
    rows, case = [], ""
    for table in markdown_tables(BOOSTING_SECTION):
        for row in table:
            case = row["case"].split(",")[0] or case
            library = row["library"].split(" (expert")[0]
            rows.append({"case": case, "library": library, "bin s": row["bin s"],
                         "ms per tree": row["ms per tree"]})
    return rows


_RANGE = re.compile(r"([\d.]+)(?:-([\d.]+))?")


def forest_table() -> list[dict[str, str]]:
    """The forests' table, one row per (case, library): ``error`` and its unit (``%``, or AAE),
    scikit-learn's ``seconds low``/``high``, the others' time ``ratio low``/``high`` to it."""
    rows = []
    for row in markdown_tables(FOREST_SECTION)[0]:
        for library in ("scikit-learn", "LightGBM rf", "jboost (defaults)"):
            error, time = (part.strip() for part in row[library].split(","))
            low, high = _RANGE.match(time).groups()
            seconds = time.endswith(" s")
            rows.append({"case": row["case"].replace(" (AAE)", ""), "library": library,
                         "error": error.rstrip("%"), "error unit": "%" if "%" in error else "AAE",
                         "seconds low": low if seconds else "", "seconds high": (high or "") if seconds else "",
                         "ratio low": "" if seconds else low, "ratio high": "" if seconds else (high or "")})
    return rows


def published_rows(results: dict) -> list[dict]:
    """Every row of results.json with a numeric published number and a numeric result of ours,
    in the file's order of experiments, with its experiment's name."""
    rows = []
    for name, experiment in results["experiments"].items():
        for row in experiment.get("table", []):
            published, ours = row.get("published"), row.get("ours")
            if isinstance(published, (int, float)) and isinstance(ours, (int, float)) \
                    and not isinstance(published, bool) and published != 0:
                rows.append({**row, "experiment": name})
    return rows


def _short(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1].rstrip(" ,;:(") + "…"


def _quantity(row: dict) -> str:
    """The quantity without its parenthetical remarks."""
    text, depth = "", 0
    for char in row["quantity"]:
        depth += char == "("
        if not depth:
            text += char
        depth -= char == ")" and depth > 0
    return " ".join(text.split()).rstrip(" ,")


def _algorithm(row: dict) -> str:
    """The algorithm's first clause (the rest is in experiments/README.md's tables)."""
    algorithm = row["algorithm"]
    for stop in (": jboost", ", oblivious", ", Huber", ", log loss"):
        algorithm = algorithm.split(stop)[0]
    return algorithm


def _source(row: dict) -> str:
    source = row["source"]
    if source.startswith("ESL"):
        return "ESL 2nd ed."
    if source.startswith("Prokhorenkova"):
        return "Prokhorenkova et al. 2018"
    if source.startswith("Zhu, Rosset, Zou, Hastie"):
        return "Zhu et al. 2006 (preprint)"
    return "nominal level"


# ------------------------------------------------------------------------------------------
# Figures


def _pyplot():
    """matplotlib's pyplot on the Agg backend, and its NullFormatter (imported here, so that
    the sources above are readable without matplotlib)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import NullFormatter

    return plt, NullFormatter


def _save(fig, path: Path) -> Path:
    """Lay ``fig`` out and write it to ``path`` as a PNG of at most 128 colours (a third of the
    bytes of a true-colour PNG of text and lines, and no visible change); ``path``."""
    from PIL import Image

    plt, _ = _pyplot()
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=DPI, metadata=METADATA)
    plt.close(fig)
    buffer.seek(0)
    with Image.open(buffer) as image:
        image.convert("RGB").quantize(colors=128, method=Image.Quantize.FASTOCTREE).save(
            path, optimize=True)
    return path


#: The reproductions figures: each file's experiments (``None``: every other experiment). The
#: multiclass table's rows (four data sets, three methods and a peer at three iteration counts)
#: get a figure of their own, so that each stays legible and small.
REPRODUCTION_FIGURES = {"reproductions.png": None,
                        "reproductions_multiclass.png": ("multiclass_table",)}
#: The experiments with a figure of their own.
SEPARATE = tuple(e for experiments in REPRODUCTION_FIGURES.values() if experiments
                 for e in experiments)


def reproduction_groups(rows: list[dict]) -> dict[str, list[dict]]:
    """:data:`REPRODUCTION_FIGURES`' files with their rows of ``rows``: every row in exactly one."""
    return {name: [row for row in rows if (row["experiment"] in experiments if experiments
                                           else row["experiment"] not in SEPARATE)]
            for name, experiments in REPRODUCTION_FIGURES.items()}


def reproductions(results: dict, out: Path) -> list[Path]:
    """Ours / published for every row of results.json that has a published number, in the files
    of :data:`REPRODUCTION_FIGURES`."""
    return [_reproduction_figure(results, rows, out / name)
            for name, rows in reproduction_groups(published_rows(results)).items()]


def _reproduction_figure(results: dict, rows: list[dict], path: Path) -> Path:
    plt, NullFormatter = _pyplot()
    sources = {"ESL 2nd ed.": "#1f77b4", "Prokhorenkova et al. 2018": "#9467bd",
               "Zhu et al. 2006 (preprint)": "#ff7f0e", "nominal level": "#2ca02c"}
    height = 0.26 * len(rows) + 1.6
    fig, ax = plt.subplots(figsize=(11, height))
    labels = []
    previous = None
    for i, row in enumerate(rows):
        ratio = row["ours"] / row["published"]
        ax.plot([1, ratio], [i, i], color="#cccccc", lw=1, zorder=1)
        ax.scatter([ratio], [i], color=sources[_source(row)], s=22, zorder=2)
        ax.annotate(f"{row['ours']:.4g} vs {row['published']:.4g}", (ratio, i),
                    xytext=(6, 0), textcoords="offset points", va="center", fontsize=7)
        name = row["experiment"] if row["experiment"] != previous else ""
        labels.append(f"{name}  {_short(_quantity(row), 48)} · {_short(_algorithm(row), 62)}"
                      .strip())
        if previous is not None and row["experiment"] != previous:
            ax.axhline(i - 0.5, color="#eeeeee", lw=0.8)
        previous = row["experiment"]
    ax.axvline(1, color="black", lw=0.8)
    ax.set_xscale("log")
    ax.set_xlim(0.5, 3)
    ax.set_xticks([0.5, 0.67, 0.8, 0.9, 1, 1.1, 1.25, 1.5, 2, 3])
    ax.set_xticklabels(["0.5", "0.67", "0.8", "0.9", "1", "1.1", "1.25", "1.5", "2", "3"])
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels(labels, fontsize=7)
    ax.set_ylim(len(rows) - 0.5, -0.5)
    ax.set_xlabel("jboost's number / the published number (log scale; 1 = the same)")
    present = {_source(row) for row in rows}
    for source, colour in sources.items():
        if source in present:
            ax.scatter([], [], color=colour, s=22, label=source)
    ax.legend(title="published by", fontsize=7, title_fontsize=7, loc="upper left")
    shown = sorted({row["experiment"] for row in rows})
    which = (", ".join(shown) if set(shown) <= set(SEPARATE) else
             "experiments/results.json (" + ", ".join(SEPARATE) + ": its own figure)")
    ax.set_title(f"Every row of {which} with a published number (run of commit "
                 f"{results['git_commit'][:7]}, {results['date'][:10]})", fontsize=9, loc="right")
    return _save(fig, path)


def _finetune_label(algorithm: str) -> str:
    """``finetune``'s algorithm in a few words: the part that tells its rows apart."""
    label = algorithm.split(";")[0]
    return label.split(": ", 1)[1] if ": " in label else label.split(", 300 rounds")[0]


def quantile_coverage(results: dict, out: Path) -> Path:
    """Test coverage against the nominal quantile level (california_quantile_sweep, finetune)."""
    plt, NullFormatter = _pyplot()
    fig, ax = plt.subplots(figsize=(5.2, 4.6))
    sweep = [row for row in results["experiments"]["california_quantile_sweep"]["table"]
             if isinstance(row.get("published"), (int, float))]
    ax.plot([0, 1], [0, 1], color="black", lw=0.8, label="calibrated (coverage = level)")
    ax.plot([r["published"] for r in sweep], [r["ours"] for r in sweep], "o-", color="#d62728",
            ms=4, label="california_quantile_sweep: pinball loss per level,\nrate and rounds chosen by 5-fold CV")
    markers = iter("sDv^P")
    for row in results["experiments"]["finetune"]["table"]:
        if isinstance(row.get("published"), (int, float)):
            ax.plot([row["published"]], [row["ours"]], next(markers, "x"), ms=5,
                    label="finetune: " + _short(_finetune_label(row["algorithm"]), 48))
    ax.set_xlabel("nominal level alpha")
    ax.set_ylabel("test coverage (share of test rows below the quantile)")
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.legend(fontsize=6.5, loc="upper left")
    ax.set_title("California housing: quantile coverage\n(experiments/results.json, commit "
                 f"{results['git_commit'][:7]})", fontsize=9)
    return _save(fig, out / "quantile_coverage.png")


def _rows(case: str) -> float:
    """The row count of a case label such as ``100k x 50`` or ``10M x 50``."""
    count = case.split(" x ")[0]
    return float(count[:-1]) * {"k": 1e3, "M": 1e6}[count[-1]]


def boosting_speed(out: Path) -> Path:
    """Time per tree and binning time of the default fit and its peers over row counts."""
    plt, NullFormatter = _pyplot()
    table = boosting_table()
    libraries = list(dict.fromkeys(row["library"] for row in table))
    fig, axes = plt.subplots(1, 2, figsize=(10, 4.2))
    for library in libraries:
        rows = [row for row in table if row["library"] == library]
        n = [_rows(row["case"]) for row in rows]
        style = dict(color=COLOURS[library], marker="o", ms=4,
                     lw=2.2 if library == "jboost (default)" else 1.2,
                     ls="--" if library == "jboost-devices" else "-")
        axes[0].plot(n, [float(row["ms per tree"]) for row in rows], label=library, **style)
        axes[1].plot(n, [float(row["bin s"]) for row in rows], label=library, **style)
    for ax in axes:
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xticks([1e5, 2e5, 1e6, 1e7])
        ax.set_xticklabels(["100k", "200k", "1M", "10M"])
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.set_xlabel("training rows (x 50 features)")
        ax.grid(True, which="major", color="#eeeeee")
    axes[0].set_ylabel("ms per tree (depth 6, 256 bins)")
    axes[0].set_title("Training time per tree (binning apart)", fontsize=9)
    axes[1].set_ylabel("seconds")
    axes[1].set_title("Binning (jboost) / DMatrix, Dataset, Pool (peers)", fontsize=9)
    axes[0].legend(fontsize=7)
    fig.suptitle("benchmarks/bench.py, binary classification, 2 CPU cores (2 threads each), "
                 "100 rounds (10M: 20 rounds)", fontsize=9)
    return _save(fig, out / "boosting_speed.png")


def _cell(value: str) -> float | None:
    return float(value) if value else None


def forest_speed(out: Path) -> Path:
    """Depth-wise forests: time and test error relative to scikit-learn's, per case."""
    plt, NullFormatter = _pyplot()
    table = forest_table()
    cases = list(dict.fromkeys(row["case"] for row in table))
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.6), sharey=True)
    offsets = {"scikit-learn": 0.0, "LightGBM rf": 0.18, "jboost (defaults)": -0.18}
    for row in table:
        y = cases.index(row["case"]) + offsets[row["library"]]
        colour = COLOURS[row["library"]]
        base = next(r for r in table if r["case"] == row["case"] and r["library"] == "scikit-learn")
        if row["library"] == "scikit-learn":
            axes[0].annotate(f"scikit-learn {row['seconds low']}-{row['seconds high']} s",
                             (1, y), xytext=(4, 0), textcoords="offset points", va="center",
                             fontsize=7, color=colour)
        else:
            low, high = _cell(row["ratio low"]), _cell(row["ratio high"]) or _cell(row["ratio low"])
            if row["ratio high"]:
                axes[0].plot([low, high], [y, y], color=colour, lw=4, solid_capstyle="butt")
                axes[0].plot([low, high], [y, y], "|", color=colour, ms=8)
            else:
                axes[0].plot([low], [y], "o", color=colour, ms=5)
            text = f"{row['ratio low']}" + (f"-{row['ratio high']}" if row["ratio high"] else "")
            axes[0].annotate(f"{text}x", (high, y), xytext=(4, 0), textcoords="offset points",
                             va="center", fontsize=7)
        ratio = float(row["error"]) / float(base["error"])
        axes[1].barh(y, ratio, height=0.16, color=colour,
                     label=row["library"] if row["case"] == cases[0] else None)
        axes[1].annotate(f"{row['error']}{'%' if row['error unit'] == '%' else ''}", (ratio, y),
                         xytext=(3, 0), textcoords="offset points", va="center", fontsize=7)
    axes[0].axvline(1, color=COLOURS["scikit-learn"], lw=1)
    axes[0].set_xscale("log")
    axes[0].set_xlim(0.3, 30)
    axes[0].set_xticks([0.3, 0.5, 1, 2, 5, 10, 20])
    axes[0].set_xticklabels(["0.3", "0.5", "1", "2", "5", "10", "20"])
    axes[0].xaxis.set_minor_formatter(NullFormatter())
    axes[0].set_xlabel("fit time / scikit-learn's in the same run (log; jboost: range of 3 runs)")
    axes[0].set_yticks(range(len(cases)))
    axes[0].set_yticklabels(cases, fontsize=8)
    axes[0].set_ylim(len(cases) - 0.5, -0.5)
    axes[1].axvline(1, color=COLOURS["scikit-learn"], lw=1)
    ratios = [float(r["error"]) / float(b["error"]) for r in table for b in table
              if b["case"] == r["case"] and b["library"] == "scikit-learn"]
    axes[1].set_xlim(min(0.9, min(ratios) - 0.02), max(ratios) + 0.09)
    axes[1].set_xlabel("test error (California: AAE) / scikit-learn's")
    axes[1].legend(fontsize=7, loc="lower right")
    fig.suptitle("benchmarks/forest_bench.py --families depthwise --trees 500, fit_forest's "
                 "defaults, 2 CPU cores (scikit-learn n_jobs=2)", fontsize=9)
    return _save(fig, out / "forest_speed.png")


def main(argv: list[str] | None = None) -> list[Path]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=HERE / "figures",
                        help="directory of the PNGs (default: docs/results/figures)")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    results = json.loads(RESULTS_JSON.read_text())
    paths = [*reproductions(results, args.out), quantile_coverage(results, args.out),
             boosting_speed(args.out), forest_speed(args.out)]
    for path in paths:
        print(f"{path}: {math.ceil(path.stat().st_size / 1024)} KB")
    return paths


if __name__ == "__main__":
    main()
