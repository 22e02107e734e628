"""The notebooks (``notebooks/*.ipynb``) executed without Jupyter: their code cells run in order in
one namespace, each cell's printed text and matplotlib figures captured as Jupyter outputs.

The notebooks are committed executed, so that they can be read (numbers and figures) without
running them. ``python -m tests._notebooks`` rewrites their outputs from the code as it is;
``tests/test_experiments.py`` executes every notebook and checks that its committed outputs are
the ones the code gives (:func:`same_outputs`: the printed lines with their numbers masked, the
number of figures per cell), so a change that alters a notebook's results fails until they are
rewritten.
"""

from __future__ import annotations

import base64
import contextlib
import io
import json
import re
import sys
from pathlib import Path
from typing import Callable, Optional

NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"
#: Figures are stored at this resolution (small files; enough to read a plot).
DPI = 60
_NUMBER = re.compile(r"[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?")


def _figures() -> list:
    """PNG outputs of the open matplotlib figures (then closed); none without matplotlib."""
    plt = sys.modules.get("matplotlib.pyplot")
    if plt is None:
        return []
    out = []
    for num in plt.get_fignums():
        buf = io.BytesIO()
        plt.figure(num).savefig(buf, format="png", dpi=DPI, bbox_inches="tight")
        out.append({"output_type": "display_data", "metadata": {},
                    "data": {"image/png": base64.b64encode(buf.getvalue()).decode("ascii"),
                             "text/plain": [f"<Figure {num}>"]}})
    plt.close("all")
    return out


def execute(nb: dict, name: str, wrap: Optional[Callable] = None) -> tuple[dict, list]:
    """Run the code cells of ``nb`` in order; ``(namespace, outputs per code cell)``. ``wrap``: a
    context manager factory the cells run inside (e.g. XLA's optimisations off)."""
    namespace = {"__name__": "__notebook__"}
    outputs = []
    with (wrap() if wrap is not None else contextlib.nullcontext()):
        for i, cell in enumerate(c for c in nb["cells"] if c["cell_type"] == "code"):
            text = io.StringIO()
            with contextlib.redirect_stdout(text):
                exec(compile("".join(cell["source"]), f"{name} code cell {i}", "exec"), namespace)
            cell_out = []
            if text.getvalue():
                cell_out.append({"output_type": "stream", "name": "stdout",
                                 "text": text.getvalue().splitlines(keepends=True)})
            outputs.append(cell_out + _figures())
    return namespace, outputs


def _shape(outputs: list) -> list:
    """What :func:`same_outputs` compares: per cell, the output kinds and the printed text with
    every number masked (the last digits may differ between machines)."""
    return [[(o["output_type"], _NUMBER.sub("#", "".join(o.get("text", []))))
             for o in cell] for cell in outputs]


def same_outputs(nb: dict, outputs: list) -> Optional[str]:
    """``None`` when the committed outputs of ``nb`` are ``outputs`` (see :func:`_shape`), else
    the first code cell that differs and how."""
    committed = [c.get("outputs", []) for c in nb["cells"] if c["cell_type"] == "code"]
    for i, (old, new) in enumerate(zip(_shape(committed), _shape(outputs))):
        if old != new:
            return f"code cell {i}: committed {old!r}, executed {new!r}"
    return None


def write(path: Path) -> None:
    """Execute the notebook at ``path`` and store its outputs and execution counts in it."""
    nb = json.loads(path.read_text())
    _, outputs = execute(nb, path.name)
    code = [c for c in nb["cells"] if c["cell_type"] == "code"]
    for count, (cell, out) in enumerate(zip(code, outputs), start=1):
        cell["outputs"], cell["execution_count"] = out, count
    path.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    import matplotlib
    matplotlib.use("Agg")
    for p in sorted(NOTEBOOKS.glob("*.ipynb")) if len(sys.argv) < 2 else map(Path, sys.argv[1:]):
        write(p)
        print(f"executed {p}")
