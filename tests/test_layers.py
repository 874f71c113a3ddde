"""Which layer may import which: the pipeline never imports the app's view layer."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

#: ``precompute/publish.py`` writes a static copy of the app's leaderboard, transfer and
#: Pareto pages, so it draws with the pages' own data preparation; no other job may.
VIEW_RENDERERS = {"precompute/publish.py"}
#: The notebooks' front door (``lv.open``) serves the pages' tables, so it sits above the view
#: layer; nothing in the library may import it back (checked below), which keeps it on top.
FRONT_DOOR = "legival_core/results.py"


def imports_views(source: str) -> bool:
    """Whether a module's source imports ``legival_core.views`` (or anything inside it)."""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module, *(f"{node.module}.{alias.name}" for alias in node.names)]
        else:
            continue
        if any(n == "legival_core.views" or n.startswith("legival_core.views.") for n in names):
            return True
    return False


def test_the_import_check_sees_every_spelling() -> None:
    assert imports_views("from legival_core.views import rollouts_stamp")
    assert imports_views("def f():\n    from legival_core.views.transfer import transfer_view")
    assert imports_views("from legival_core import views")
    assert imports_views("import legival_core.views as v")
    assert not imports_views("from legival_core.transfer_curves import rollouts_stamp")
    assert not imports_views("from legival_core import viewsets, transfer")


def test_no_pipeline_module_imports_the_view_layer() -> None:
    importers = {
        path.relative_to(ROOT).as_posix()
        for path in sorted((ROOT / "precompute").rglob("*.py"))
        if imports_views(path.read_text(encoding="utf-8"))
    }
    assert importers - VIEW_RENDERERS == set()


def test_the_library_outside_views_does_not_import_the_view_layer() -> None:
    library = ROOT / "legival_core"
    importers = {
        path.relative_to(ROOT).as_posix()
        for path in sorted(library.rglob("*.py"))
        if library / "views" not in path.parents and imports_views(path.read_text("utf-8"))
    }
    assert importers - {FRONT_DOOR} == set()


def imports_front_door(source: str) -> bool:
    """Whether a module's source imports ``legival_core.results`` (the front door)."""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module, *(f"{node.module}.{alias.name}" for alias in node.names)]
        else:
            continue
        if "legival_core.results" in names:
            return True
    return False


def test_nothing_below_the_front_door_imports_it() -> None:
    """Only the package's ``lv.open`` reaches the front door: a metric or view importing it
    would make a cycle through the view layer."""
    assert imports_front_door("from legival_core import results")
    assert imports_front_door("def f():\n    from legival_core.results import Results")
    assert not imports_front_door("from legival_core import resultsets")
    importers = {
        path.relative_to(ROOT).as_posix()
        for folder in ("legival_core", "precompute")
        for path in sorted((ROOT / folder).rglob("*.py"))
        if imports_front_door(path.read_text(encoding="utf-8"))
    }
    assert importers == {"legival_core/__init__.py"}
