"""A test that needs an optional extra skips, with the line that installs it (issue 41).

The evaluation tools (``requirements-ingest.txt``), Ray (``requirements-cluster.txt``) and
MkDocs (``requirements-docs.txt``) are extras: the full install (``requirements.txt``) lacks
them, and the tests that run them failed or errored there (13 of them: ``datasets``,
``inspect_ai``, ``zipfile_zstd``). Here the helper itself is checked, and then those tests are
run in a Python where the extras cannot be imported (a ``sitecustomize`` that refuses them, as
if they were not installed): each must skip, its reason the exact install line.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.optional import EXTRAS, MODULE_EXTRAS, install_line, requires, skip_reason

REPO = Path(__file__).resolve().parents[1]
#: The distribution that brings each module, as its extra's file names it (``datasets``
#: comes with lm-eval).
DISTRIBUTIONS = {
    "inspect_ai": "inspect-ai",
    "lm_eval": "lm-eval",
    "datasets": "lm-eval",
    "zipfile_zstd": "zipfile-zstd",
    "ray": "ray",
    "ray.data.llm": "ray",
    "mkdocs": "mkdocs",
}
#: Tests that need the ingest extra, as pytest ids (those that failed without it).
NEEDS_INGEST = [
    "tests/test_formats.py::test_a_tools_task_names_the_dataset",
    "tests/test_formats.py::test_outputs_without_a_reasoning_part_are_said_once",
    "tests/test_bring_your_traces.py",
]
BLOCKER = """
import importlib.abc, sys
BLOCKED = {"datasets", "inspect_ai", "zipfile_zstd", "lm_eval", "ray", "mkdocs"}
class Blocker(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None
sys.meta_path.insert(0, Blocker())
"""


def test_requires_skips_with_the_install_line() -> None:
    with pytest.raises(pytest.skip.Exception) as skipped:
        requires("no_such_module_legival", "ingest")
    assert str(skipped.value) == (
        "needs no_such_module_legival, an optional extra: pip install -r requirements-ingest.txt"
    )
    assert requires("json").__name__ == "json"  # present: imported, no skip


def test_each_optional_module_is_installed_by_the_extra_it_names() -> None:
    assert set(DISTRIBUTIONS) == set(MODULE_EXTRAS)
    for module, extra in MODULE_EXTRAS.items():
        file = REPO / EXTRAS[extra]
        names = {
            re.split(r"[\[<>=!~ ;]", line.strip(), maxsplit=1)[0].lower()
            for line in file.read_text(encoding="utf-8").splitlines()
            if line.strip() and not line.startswith("#")
        }
        assert DISTRIBUTIONS[module] in names, (module, file.name)
        assert skip_reason(module).endswith(install_line(extra))
        assert f"pip install -r {file.name}" == install_line(extra)


@pytest.mark.slow
def test_the_tests_that_need_the_ingest_extra_skip_without_it(tmp_path: Path) -> None:
    (tmp_path / "sitecustomize.py").write_text(BLOCKER, encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(REPO)])}
    # -n 0: these few tests in this process, not spread over workers
    command = [sys.executable, "-m", "pytest", "-q", "-rs", "-n", "0", "-p", "no:cacheprovider"]
    result = subprocess.run(
        [*command, *NEEDS_INGEST],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    summary = result.stdout.strip().splitlines()[-1]
    assert result.returncode == 0, result.stdout[-3000:]
    # Every one skipped: none failed, errored or ran (13 tests when this was written).
    assert "skipped" in summary, summary
    assert not re.search(r"failed|error|passed", summary), summary
    reasons = [line for line in result.stdout.splitlines() if line.startswith("SKIPPED")]
    assert len(reasons) >= 3
    assert all("pip install -r requirements-ingest.txt" in line for line in reasons), reasons
