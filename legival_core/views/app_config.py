"""Which stores the app may open, and whether it runs read-only.

Pure Python (no Streamlit) so it is testable and the rules live in one place:

- the bundled stores ``demo`` and ``published`` (under ``results/`` next to the code),
- plus any store given at launch: ``streamlit run app.py -- --store PATH [--store NAME=PATH]``
  or the ``LEGIVAL_STORE`` environment variable (``os.pathsep``-separated).

A URL only ever names a store (``?store=demo``); it can never carry a path, so a shared link
cannot make the app read outside the configured stores. ``--readonly`` (or
``LEGIVAL_READONLY=1``) is the hosting mode: no store switching by URL beyond the configured
names, and nothing written to disk.

With two or more stores given at launch the Leaderboard offers their merged board
(:mod:`legival_core.views.board_merge`); ``--merge`` (``LEGIVAL_MERGE=1``) opens it by default and
``--prefer NAME`` (``LEGIVAL_PREFER``) names the store whose row wins a (teacher, dataset) that
two of them hold. Stores graded by different grader versions are refused on one board unless
``--allow-mixed-graders`` (``LEGIVAL_ALLOW_MIXED_GRADERS=1``) says to merge them anyway.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from legival_core.rankings.selection import RANK_RESAMPLES, RESAMPLE_SEED
from legival_core.text.safe_text import markdown_literal

REPO_ROOT = Path(__file__).resolve().parent.parent.parent
BUNDLED_STORES: dict[str, Path] = {
    "demo": REPO_ROOT / "results" / "demo",
    "published": REPO_ROOT / "results" / "published",
}
_NAME_OK = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")

#: How the app shows uncertainty (issue 17): the resamples of problems behind every interval
#: and rank interval and their seed are the default view's (:mod:`legival_core.rankings
#: .selection`); here the trace count under which a leaderboard cell is marked low-n, and the
#: number of points under which a correlation coefficient is drawn faded.
LOW_N_TRACES = 20
FEW_CORRELATION_POINTS = 8


@dataclass(frozen=True)
class AppConfig:
    """The stores the app may show (name -> folder), the default one, the hosting mode, and
    how uncertainty is shown (resamples, seed, low-n and few-points thresholds)."""

    stores: dict[str, Path] = field(default_factory=dict)
    default: str = "demo"
    readonly: bool = False
    rank_resamples: int = RANK_RESAMPLES
    resample_seed: int = RESAMPLE_SEED
    low_n_traces: int = LOW_N_TRACES
    few_correlation_points: int = FEW_CORRELATION_POINTS
    #: the stores given at launch (``--store``, ``LEGIVAL_STORE``), in order: the merged board's
    launched: tuple[str, ...] = ()
    #: open the Leaderboard on the merged board of the launched stores
    merge: bool = False
    #: the launched store whose row wins a (teacher, dataset) clash on the merged board
    prefer: str | None = None
    #: merge stores whose grades were made by different grader versions
    allow_mixed_graders: bool = False

    def merge_stores(self) -> dict[str, Path]:
        """The stores of the merged board (name -> folder): those given at launch, when there
        are two or more, else none (the bundled demo and published stores are never merged:
        the published one holds the papers' averages, not a run).

        >>> AppConfig({"a": Path("a"), "b": Path("b")}, "a", launched=("a", "b")).merge_stores()
        {'a': PosixPath('a'), 'b': PosixPath('b')}
        >>> AppConfig({"a": Path("a")}, "a", launched=("a",)).merge_stores()
        {}
        """
        if len(self.launched) < 2:
            return {}
        return {name: self.stores[name] for name in self.launched}

    def resolve(self, requested: str | None) -> tuple[str, str | None]:
        """Return ``(store name, message)`` for a store name taken from a URL or a widget.

        Unknown or malformed names fall back to the default with a friendly message; the
        name is never interpreted as a path. The message is Streamlit Markdown in which the
        requested name (cut to 40 characters) shows literally.

        >>> cfg = AppConfig({"demo": Path("d"), "mine": Path("m")}, default="demo")
        >>> cfg.resolve("mine")
        ('mine', None)
        >>> cfg.resolve("../../etc/passwd")[0]
        'demo'
        >>> print(cfg.resolve(":red[x] $y$")[1].split(" here")[0])
        There is no store called \\'\\:red\\[x\\] \\$y\\$\\'
        """
        if requested is None or requested == "":
            return self.default, None
        if requested in self.stores:
            return requested, None
        return self.default, markdown_literal(
            f"There is no store called {shorten(requested)} here; showing '{self.default}' "
            f"instead. Available: {', '.join(self.stores)}."
        )

    def store_problem(self, name: str, error: BaseException) -> str:
        """The message (Streamlit Markdown) shown when the store ``name`` cannot be read.

        Outside read-only mode the local user sees the error, with the file it names; a hosted
        app (``readonly``) names the store by its configured name only, never a path.

        >>> error = OSError("/srv/stores/runs/tables/traces/part-1.arrow: truncated")
        >>> print(AppConfig({"runs": Path("/srv/stores/runs")}, "runs", True).store_problem(
        ...     "runs", error))
        The store \\'runs\\' cannot be read\\: a file of it is missing or damaged\\.
        """
        if self.readonly:
            return markdown_literal(
                f"The store '{name}' cannot be read: a file of it is missing or damaged."
            )
        return markdown_literal(f"The store '{name}' cannot be read: {error}")


def shorten(value: str, limit: int = 40) -> str:
    """``value`` quoted and cut to ``limit`` characters, for messages about URL values.

    >>> shorten("abc"), shorten("x" * 50, 10)
    ("'abc'", "'xxxxxxx...'")
    """
    return repr(value if len(value) <= limit else value[: limit - 3] + "...")


def _store_argument(value: str) -> tuple[str | None, Path]:
    name, sep, path = value.partition("=")
    if sep and _NAME_OK.match(name):
        return name, Path(path).expanduser()
    return None, Path(value).expanduser()


def _unique_name(path: Path, taken: Mapping[str, Path]) -> str:
    # a path already registered (e.g. `--store results/demo`) keeps that store's name,
    # so the selector does not list one store twice
    for name, known in taken.items():
        if known.expanduser().resolve() == path.resolve():
            return name
    base = re.sub(r"[^A-Za-z0-9_.-]+", "-", path.resolve().name or "store").strip("-") or "store"
    base = base[:48]
    name, n = base, 2
    while name in taken:
        name, n = f"{base}-{n}", n + 1
    return name


def parse_app_args(argv: Sequence[str], environ: Mapping[str, str]) -> AppConfig:
    """Build the :class:`AppConfig` from the script arguments and the environment.

    >>> cfg = parse_app_args(["--store", "runs=/data/run1", "--readonly"], {})
    >>> sorted(cfg.stores), cfg.default, cfg.readonly
    (['demo', 'published', 'runs'], 'runs', True)
    >>> cfg = parse_app_args(["--store", "a=/r/a", "--store", "b=/r/b", "--prefer", "b"], {})
    >>> cfg.launched, cfg.merge, cfg.prefer
    (('a', 'b'), False, 'b')
    >>> cfg = parse_app_args(["--store", str(BUNDLED_STORES["demo"])], {})
    >>> sorted(cfg.stores), cfg.launched
    (['demo', 'published'], ('demo',))
    """
    parser = argparse.ArgumentParser(allow_abbrev=False, prog="app.py", add_help=False)
    parser.add_argument("--store", action="append", default=[])
    parser.add_argument("--readonly", action="store_true")
    parser.add_argument("--merge", action="store_true")
    parser.add_argument("--prefer", default=None)
    parser.add_argument("--allow-mixed-graders", action="store_true")
    args, _unknown = parser.parse_known_args(list(argv))

    stores: dict[str, Path] = dict(BUNDLED_STORES)
    launched: list[str] = []
    env_stores = [s for s in environ.get("LEGIVAL_STORE", "").split(":") if s.strip()]
    for value in [*env_stores, *args.store]:
        name, path = _store_argument(value)
        name = name or _unique_name(path, stores)
        stores[name] = path
        if name not in launched:  # the same name twice: one store, the later path
            launched.append(name)

    readonly = _env_flag(environ, "LEGIVAL_READONLY") or args.readonly
    merge = _env_flag(environ, "LEGIVAL_MERGE") or args.merge
    # the command line over the environment, as for the stores' order above
    prefer = args.prefer or environ.get("LEGIVAL_PREFER", "").strip() or None
    if launched:
        default = launched[0]
    elif (BUNDLED_STORES["demo"] / "manifest.json").exists():
        default = "demo"
    else:
        default = "published"
    return AppConfig(
        stores=stores,
        default=default,
        readonly=readonly,
        launched=tuple(launched),
        merge=merge,
        prefer=prefer,
        allow_mixed_graders=(
            args.allow_mixed_graders or _env_flag(environ, "LEGIVAL_ALLOW_MIXED_GRADERS")
        ),
    )


def _env_flag(environ: Mapping[str, str], name: str) -> bool:
    return environ.get(name, "").lower() in {"1", "true", "yes"}
