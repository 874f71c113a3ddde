"""The example notebook runs on the demo store, and its two copies hold the same cells.

``examples/explore_a_store.ipynb`` is what a reader opens; ``examples/explore_a_store.py`` is
the same notebook as a jupytext "percent" script, which runs without Jupyter. The script is
run here with ``runpy`` (offline, on the bundled demo store), and every cell of the notebook,
code and Markdown, must equal the script's cell at the same place, so the two never drift.
Outputs are not stored in the notebook (nothing to go stale when the demo store is rebuilt).
"""

from __future__ import annotations

import json
import os
import runpy
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "examples" / "explore_a_store.py"
NOTEBOOK = REPO / "examples" / "explore_a_store.ipynb"


def percent_cells(text: str) -> list[tuple[str, str]]:
    """(cell type, source) of each cell of a jupytext "percent" script: a cell starts at a
    ``# %%`` line (``# %% [markdown]`` for Markdown, whose lines lose their ``# ``); the
    leading ``# ---`` header (jupytext's metadata) and blank lines around a cell are dropped.

    >>> percent_cells("# ---\\n# x: 1\\n# ---\\n\\n# %% [markdown]\\n# # Title\\n#\\n# text\\n"
    ...               "\\n# %%\\nx = 1\\n\\nx\\n")
    [('markdown', '# Title\\n\\ntext'), ('code', 'x = 1\\n\\nx')]
    """
    lines = text.splitlines()
    if lines and lines[0] == "# ---":
        end = lines.index("# ---", 1)
        lines = lines[end + 1 :]
    cells: list[tuple[str, list[str]]] = []
    for line in lines:
        if line.startswith("# %%"):
            kind = "markdown" if "[markdown]" in line else "code"
            cells.append((kind, []))
        elif cells:
            cells[-1][1].append(line)
        elif line.strip():
            raise ValueError(f"{line!r}: text before the first '# %%' cell")
    out = []
    for kind, body in cells:
        if kind == "markdown":
            body = [line[2:] if line.startswith("# ") else line.lstrip("#") for line in body]
        out.append((kind, "\n".join(body).strip("\n")))
    return out


def notebook_cells(notebook: dict) -> list[tuple[str, str]]:
    return [(cell["cell_type"], "".join(cell["source"])) for cell in notebook["cells"]]


def test_the_notebook_holds_the_scripts_cells() -> None:
    notebook = json.loads(NOTEBOOK.read_text(encoding="utf-8"))
    script = percent_cells(SCRIPT.read_text(encoding="utf-8"))
    assert notebook_cells(notebook) == script
    assert notebook["nbformat"] == 4 and notebook["metadata"]["kernelspec"]["language"] == "python"
    ids = [cell["id"] for cell in notebook["cells"]]
    assert len(set(ids)) == len(ids)  # nbformat 4.5: every cell has its own id
    assert sum(kind == "code" for kind, _ in script) >= 8
    # saved without outputs, so a rebuilt demo store leaves nothing stale in it
    assert all(not c.get("outputs") for c in notebook["cells"] if c["cell_type"] == "code")


def test_the_cell_reader_sees_a_changed_cell() -> None:
    """The comparison can fail: one changed line makes the cells differ."""
    text = SCRIPT.read_text(encoding="utf-8")
    changed = text.replace("r.decomposition()", "r.decomposition('x')")
    notebook = json.loads(NOTEBOOK.read_text(encoding="utf-8"))
    assert changed != text
    assert notebook_cells(notebook) != percent_cells(changed)


def test_the_example_runs_on_the_demo_store(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO)  # as a notebook opened at the repository root
    names = runpy.run_path(str(SCRIPT), run_name="__main__")
    for name in ("board", "one", "curves", "steps"):
        assert isinstance(names[name], pd.DataFrame) and len(names[name]), name
    assert names["r"].path == REPO / "results" / "demo"


#: A kernel's way with a notebook: every code cell, in order, in one namespace.
_KERNEL = """
import json, sys
notebook = json.load(open(sys.argv[1], encoding="utf-8"))
names = {"__name__": "__main__"}
for number, cell in enumerate(notebook["cells"]):
    if cell["cell_type"] == "code":
        exec(compile("".join(cell["source"]), f"<cell {number}>", "exec"), names)
print(len(names["board"]), names["r"].path)
"""


@pytest.mark.slow
def test_the_notebook_runs_with_its_kernel_in_examples() -> None:
    """Jupyter starts a notebook's kernel in the notebook's folder, and ``jupyter nbconvert
    --execute`` too: there ``legival_core`` was not importable and the first cell failed. The
    cells run here as a kernel runs them, in a fresh Python whose working folder is
    examples/ and whose path does not hold the repository (nbconvert and ipykernel are not
    dependencies of the project)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    result = subprocess.run(
        [sys.executable, "-c", _KERNEL, NOTEBOOK.name],
        cwd=NOTEBOOK.parent,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    rows, path = result.stdout.split()
    assert int(rows) > 0 and Path(path) == REPO / "results" / "demo"
