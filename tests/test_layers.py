"""Which layer may import which: the pipeline never imports the app's view layer, and the
precompute package has no import cycle (commands register from the CLI, never the reverse).

Each room of ``legival_core`` (a subpackage by concept) imports only the rooms its rule
names (``ROOMS`` below, the same rule its ``__init__`` states in words), and every
module but the package's ``__init__``, the front door and its opener lives in a room.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

#: ``precompute/publish.py`` writes a static copy of the app's leaderboard, transfer and
#: Pareto pages, so it draws with the pages' own data preparation; no other job may.
VIEW_RENDERERS = {"precompute/publish.py"}
#: The notebooks' front door (``lv.open``) serves the pages' tables, so it sits above the view
#: layer; nothing in the library may import it back (checked below), which keeps it on top.
FRONT_DOOR = "legival_core/results.py"
#: ``lv.open`` itself: it imports the front door on first call (so ``import legival_core`` loads
#: no pandas) and sits above it; the package's ``__init__`` only hands it on.
OPENER = "legival_core/opener.py"


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
    assert not imports_views("from legival_core.metrics.transfer_curves import rollouts_stamp")
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
    """Only ``lv.open`` (the opener) reaches the front door: a metric or view importing it
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
    assert importers == {OPENER}


def test_the_package_only_hands_the_opener_on() -> None:
    """The package's ``__init__`` defines no function or class and imports only the opener: the
    library's ground floor never reaches up to the front door; only the opener, on top, does."""
    source = (ROOT / "legival_core" / "__init__.py").read_text(encoding="utf-8")
    body = ast.parse(source).body
    assert not [n for n in body if isinstance(n, ast.FunctionDef | ast.ClassDef)]
    assert imported_names(source) - {"__future__", "__future__.annotations"} == {
        "legival_core.opener",
        "legival_core.opener.open",
    }
    importers = {
        path.relative_to(ROOT).as_posix()
        for folder in ("legival_core", "precompute")
        for path in sorted((ROOT / folder).rglob("*.py"))
        if "legival_core.opener" in imported_names(path.read_text(encoding="utf-8"))
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


# --- The rooms of legival_core (issue 30 item 1) ---
#: Each room of ``legival_core`` and the rooms its modules may import (besides its own). The
#: room's ``__init__`` docstring says the same in words ("May import: …"). The front door
#: (``legival_core/results.py``), its opener and the package's ``__init__`` are the only modules
#: outside a room; nothing in a room imports the front door (checked above).
ROOMS: dict[str, set[str]] = {
    "store": set(),
    "text": {"store"},
    "grading": {"store"},
    "tasks": {"store", "text", "grading"},
    "stats": {"store"},
    "metrics": {"store", "text", "grading", "tasks", "stats"},
    "published": {"store", "text", "grading", "tasks", "stats", "metrics"},
    "rankings": {"store", "text", "grading", "tasks", "stats", "metrics", "published"},
    "oversight": {"store", "text", "grading", "tasks", "stats", "metrics"},
    "calibration": {"store", "text", "grading", "tasks", "stats", "metrics"},
    "views": {
        "store",
        "text",
        "grading",
        "tasks",
        "stats",
        "metrics",
        "published",
        "rankings",
        "oversight",
        "calibration",
    },
}
#: Rooms that were packages before the move and keep their re-exports.
ROOMS_WITH_REEXPORTS = {"tasks", "views"}


def _room_of(name: str) -> str | None:
    """The room a dotted name of the library falls in (None outside every room)."""
    parts = name.split(".")
    if parts[0] != "legival_core" or len(parts) < 2:
        return None
    return parts[1] if parts[1] in ROOMS else None


def test_every_module_of_the_library_lives_in_a_room() -> None:
    library = ROOT / "legival_core"
    outside = {
        path.relative_to(ROOT).as_posix()
        for path in library.rglob("*.py")
        if _room_of(".".join(path.relative_to(ROOT).with_suffix("").parts)) is None
    }
    assert outside == {"legival_core/__init__.py", OPENER, FRONT_DOOR}
    for room in ROOMS:
        assert (library / room / "__init__.py").is_file(), room


def test_every_room_says_what_lives_there_and_what_it_may_import() -> None:
    for room, allowed in ROOMS.items():
        source = (ROOT / "legival_core" / room / "__init__.py").read_text(encoding="utf-8")
        doc = ast.get_docstring(ast.parse(source)) or ""
        said = re.search(r"May\s+import:\s+([^.]*)\.", doc)
        assert said, f"legival_core/{room}/__init__.py says nothing of what it may import"
        named = {" ".join(n.split()) for n in said.group(1).split(",")} - {"no other room"}
        assert named == allowed, (room, named, allowed)


def test_a_new_room_imports_nothing_on_import() -> None:
    """A room's ``__init__`` re-exports nothing (importing one module never loads its
    neighbours, and no cycle goes through a room's ``__init__``)."""
    for room in set(ROOMS) - ROOMS_WITH_REEXPORTS:
        source = (ROOT / "legival_core" / room / "__init__.py").read_text(encoding="utf-8")
        imports = [n for n in ast.parse(source).body if isinstance(n, ast.Import | ast.ImportFrom)]
        assert all(isinstance(n, ast.ImportFrom) and n.module == "__future__" for n in imports)


def test_the_rooms_rules_have_no_cycle() -> None:
    graph = {room: set(allowed) for room, allowed in ROOMS.items()}
    assert _find_cycle(graph) is None, " -> ".join(_find_cycle(graph) or [])


def _forbidden_imports(room: str, where: str, source: str) -> list[str]:
    """The imports of one module of ``room`` (at path ``where``) that its room's rule does not
    allow: a name in another room that the rule does not list (a room has no exceptions)."""
    allowed = ROOMS[room]
    broken = []
    for name in sorted(imported_names(source)):
        target = _room_of(name)
        if target is None or target == room or target in allowed:
            continue
        broken.append(f"{where} imports {name}")
    return broken


def test_the_room_check_sees_a_forbidden_import() -> None:
    assert _room_of("legival_core.views.board") == "views"
    assert _room_of("legival_core.results") is None
    assert _room_of("numpy.linalg") is None
    metric = "legival_core/metrics/x.py"
    assert _forbidden_imports("metrics", metric, "from legival_core.views import board")
    lazy = "def f():\n    import legival_core.oversight.sabotage"
    assert _forbidden_imports("metrics", metric, lazy)
    assert not _forbidden_imports("metrics", metric, "from legival_core.stats import stats")
    assert not _forbidden_imports("metrics", metric, "from legival_core.metrics import transfer")
    assert _forbidden_imports("store", "legival_core/store/x.py", "from legival_core import text")
    store_module = "legival_core/store/x.py"
    assert _forbidden_imports("store", store_module, "from legival_core.text.safe_text import m")
    assert _forbidden_imports(
        "store", store_module, "from legival_core.metrics import page_results"
    )
    assert _forbidden_imports("store", store_module, "from legival_core.views import app_config")


def test_each_room_imports_only_the_rooms_it_may() -> None:
    """Every import of a room's module, anywhere in its source (a lazy one too), lands in its
    own room or a room its rule names."""
    broken = [
        line
        for room in ROOMS
        for path in sorted((ROOT / "legival_core" / room).rglob("*.py"))
        for line in _forbidden_imports(
            room, path.relative_to(ROOT).as_posix(), path.read_text(encoding="utf-8")
        )
    ]
    assert broken == []
