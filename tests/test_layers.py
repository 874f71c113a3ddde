"""Which layer may import which: the pipeline never imports the app's view layer, and the
precompute package has no import cycle (commands register from the CLI, never the reverse)."""

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


def imported_names(source: str) -> set[str]:
    """Every dotted name a module's source imports, anywhere (a function's lazy import too):
    ``import a.b`` gives ``a.b``; ``from a import b`` gives ``a`` and ``a.b`` (``b`` may be a
    submodule)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names |= {node.module, *(f"{node.module}.{alias.name}" for alias in node.names)}
    return names


def imports_views(source: str) -> bool:
    """Whether a module's source imports ``legival_core.views`` (or anything inside it)."""
    return any(
        n == "legival_core.views" or n.startswith("legival_core.views.")
        for n in imported_names(source)
    )


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


def _precompute_imports() -> dict[str, set[str]]:
    """Module -> the ``precompute`` modules it imports anywhere in its source (a function's
    lazy import counts too: it is a dependency all the same, only deferred)."""
    graph: dict[str, set[str]] = {}
    for path in sorted((ROOT / "precompute").rglob("*.py")):
        parts = path.relative_to(ROOT).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        if name == "precompute.__main__":
            continue  # the entry point runs the CLI; nothing imports it
        targets = imported_names(path.read_text(encoding="utf-8"))
        graph[name] = {t for t in targets if t.startswith("precompute") and t != name}
    # A submodule's import of its own package's __init__ (stages/problems reading
    # stages.base through the package) is not a loop of its own; drop the edges up.
    for name, targets in graph.items():
        graph[name] = {t for t in targets if t in graph and not name.startswith(f"{t}.")}
    return graph


def _find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle of ``graph`` as a list of modules (first == last), or None."""
    state: dict[str, int] = {}  # 1 on the current path, 2 finished
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return [*path[path.index(nxt) :], nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        path.pop()
        state[node] = 2
        return None

    for start in sorted(graph):
        if start not in state and (found := visit(start)):
            return found
    return None


def test_the_cycle_finder_finds_a_loop_and_passes_a_chain() -> None:
    assert _find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _find_cycle({"a": {"b"}, "b": {"c"}, "c": set()}) is None


def test_precompute_has_no_import_cycle_and_commands_register_from_the_cli() -> None:
    """The CLI imports the commands' modules (lazily); no module imports the CLI back."""
    graph = _precompute_imports()
    assert "precompute.cli" in graph and "precompute.datasets" in graph
    assert _find_cycle(graph) is None, " -> ".join(_find_cycle(graph) or [])
    assert not [m for m, targets in graph.items() if "precompute.cli" in targets]
