"""Which layer may import which: the pipeline never imports the app's view layer."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

#: ``precompute/publish.py`` writes a static copy of the app's leaderboard, transfer and
#: Pareto pages, so it draws with the pages' own data preparation; no other job may.
VIEW_RENDERERS = {"precompute/publish.py"}


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
    assert importers == set()
