"""The package as pip sees it (issue 16, item 3): pyproject.toml declares what requirements.txt
installs, an extra for the cluster requirements, the ``legival`` command, and a wheel that holds
only the project's two packages."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest
from packaging.requirements import Requirement

REPO = Path(__file__).resolve().parents[1]


def _pyproject() -> dict:
    return tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))


def _requirement_lines(path: Path) -> list[str]:
    """The requirement lines of a pip requirements file, comments and blanks left out."""
    lines = (line.split("#", 1)[0].strip() for line in path.read_text("utf-8").splitlines())
    # A line's own pip options (llama-cpp-python's build settings) are not part of the
    # requirement pyproject declares.
    return [line.split(" --", 1)[0].strip() for line in lines if line]


def _normalised(lines: list[str]) -> list[str]:
    """Each requirement in one spelling (name lower-cased, extras and specifiers sorted)."""
    return sorted(str(Requirement(line)).lower() for line in lines)


def test_dependencies_and_the_dev_extra_are_exactly_requirements_txt() -> None:
    project = _pyproject()["project"]
    declared = project["dependencies"] + project["optional-dependencies"]["dev"]
    assert _normalised(declared) == _normalised(_requirement_lines(REPO / "requirements.txt"))
    # No line twice: one place to change a pin in each file.
    assert len(set(_normalised(declared))) == len(declared)


def test_the_cluster_extra_is_requirements_cluster_txt() -> None:
    extras = _pyproject()["project"]["optional-dependencies"]
    wanted = _requirement_lines(REPO / "requirements-cluster.txt")
    assert _normalised(extras["cluster"]) == _normalised(wanted)


def test_the_legival_command_is_the_precompute_cli() -> None:
    project = _pyproject()["project"]
    assert project["name"] == "legival"
    assert project["scripts"] == {"legival": "precompute.cli:main"}
    from precompute import cli

    assert callable(cli.main)


@pytest.mark.slow
def test_the_wheel_holds_only_legival_core_and_precompute(tmp_path: Path) -> None:
    """Build a wheel (no network, no install) from a copy of the tree that also has a stray
    top-level package, and list it: only the two named packages and the metadata go in."""
    source = tmp_path / "src"
    source.mkdir()
    shutil.copy(REPO / "pyproject.toml", source)
    for package in ("legival_core", "precompute", "tests", "bench", "pages"):
        shutil.copytree(
            REPO / package, source / package, ignore=shutil.ignore_patterns("__pycache__")
        )
    (source / "precompute_extras").mkdir()  # a name the old "precompute*" pattern matched
    (source / "precompute_extras" / "__init__.py").write_text("", encoding="utf-8")
    out = tmp_path / "wheel"
    result = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
         "-w", str(out), str(source)],
        capture_output=True,
        text=True,
        timeout=300,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    (wheel,) = out.glob("legival-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        entry_points = next(n for n in names if n.endswith(".dist-info/entry_points.txt"))
        scripts = archive.read(entry_points).decode()
    top_level = {name.split("/", 1)[0] for name in names}
    assert {t for t in top_level if not t.endswith(".dist-info")} == {"legival_core", "precompute"}
    assert "legival = precompute.cli:main" in scripts
    assert "legival_core/data/published/legival_table7_published.csv" in names
    # the measured precision and recall the app shows beside every Backtracking column
    assert "legival_core/data/label_quality.json" in names


def test_the_ingest_extra_is_requirements_ingest_txt_and_ci_installs_it() -> None:
    extras = _pyproject()["project"]["optional-dependencies"]
    wanted = _requirement_lines(REPO / "requirements-ingest.txt")
    assert _normalised(extras["ingest"]) == _normalised(wanted)
    assert "pip install -q -r requirements-ingest.txt" in (REPO / ".ci" / "run").read_text("utf-8")


def test_the_docs_extra_is_requirements_docs_txt_and_ci_builds_the_site_strictly() -> None:
    extras = _pyproject()["project"]["optional-dependencies"]
    wanted = _requirement_lines(REPO / "requirements-docs.txt")
    assert _normalised(extras["docs"]) == _normalised(wanted)
    assert all("==" in line for line in wanted)  # the site's build is pinned exactly
    ci = (REPO / ".ci" / "run").read_text("utf-8")
    assert "pip install -q -r requirements-docs.txt" in ci
    # The strict build runs before the suite, into a throwaway folder (never a committed site).
    build = 'mkdocs build --strict --site-dir "$(mktemp -d)"'
    assert build in ci and ci.index(build) < ci.index('bash -c "$readme_test"')
    assert "site/" in (REPO / ".gitignore").read_text("utf-8").split()
