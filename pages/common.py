"""Streamlit glue shared by the pages: the configured stores, cached reads, URL-bound widgets.

Everything a person would share (store, dataset, teacher, student, metric, trace) is kept in
``st.query_params`` so a copied URL reopens the same view. Values coming from a URL are checked
against the options on screen; an unknown value gives a short message, never an error.

Reads and derived views are cached with ``st.cache_data`` keyed on the store's path and the
modification time of its manifest, so a store rewritten by a pipeline run is picked up at the
next rerun while an unchanged one costs nothing.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd
import streamlit as st

from legival_core.rankings.selection import Selection
from legival_core.store.safe_export import csv_frame
from legival_core.text.safe_text import markdown_literal
from legival_core.views.app_config import AppConfig, parse_app_args, shorten

if TYPE_CHECKING:
    from legival_core.metrics.page_results import ResultKey
    from legival_core.rankings.rank_intervals import TeacherResamples

_CONFIG_KEY = "_legival_config"
_LOG = logging.getLogger("legival.app")
#: Characters kept in a download's file name (the name may hold a teacher or sabotage kind).
_FILE_NAME_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")
ALL = "All"
#: How the bundled stores are made, for the message shown when one is missing.
BUILD_HINTS = {
    "demo": "python -m precompute demo",
    "published": "python -m precompute published",
}
#: The small calibration store that ships with the app (planted traces, for Metric validity).
CALIBRATION_STORE = Path(__file__).resolve().parents[1] / "results" / "calibration"
CALIBRATION_COMMAND = "python -m precompute calibrate --store results/calibration --size small"


def set_config(config: AppConfig) -> None:
    st.session_state[_CONFIG_KEY] = config


def get_config() -> AppConfig:
    config = st.session_state.get(_CONFIG_KEY)
    if config is None:  # a page run on its own (tests): bundled stores only
        config = parse_app_args([], os.environ)
        set_config(config)
    return config


def forwarded_query_params() -> dict[str, list[str]]:
    """The query parameters as given, a repeated one with every value (``to_dict`` keeps only
    the last: ``?columns=tokens&columns=fotu`` lost its tokens on the way), for a page that
    forwards to another (``st.switch_page(..., query_params=...)``)."""
    return {key: st.query_params.get_all(key) for key in st.query_params}


def store_chooser() -> None:
    """Sidebar selector of the configured stores, bound to ``?store=``."""
    config = get_config()
    names = list(config.stores)
    requested = st.query_params.get("store")
    current = st.session_state.get("store_select")
    if requested is not None and requested != st.session_state.get("_store_url"):
        # A new URL decides; afterwards the widget does (and a URL without ?store= keeps the
        # current choice, e.g. after moving to another page).
        current, message = config.resolve(requested)
        if message:
            st.sidebar.info(message)
    elif current not in names:
        current = config.default
    # Assigned on every run: a widget on another page is a new widget, and this carries the
    # choice over to it.
    st.session_state["store_select"] = current
    chosen = st.sidebar.selectbox(
        "Results store",
        names,
        key="store_select",
        help="The bundled demo, the papers' published numbers, or a store given at launch.",
    )
    st.query_params["store"] = chosen  # always in the URL, so a shared link names its store
    st.session_state["_store_url"] = st.query_params.get("store")
    st.session_state["store_name"] = chosen
    if config.readonly:
        st.sidebar.caption("Read-only mode: nothing is written to disk.")


def current_store_name() -> str:
    config = get_config()
    name = st.session_state.get("store_name")
    if name not in config.stores:
        name, _ = config.resolve(st.query_params.get("store"))
    return name


def store_label() -> str:
    """The current store's name, escaped for Streamlit Markdown (messages, headings)."""
    return markdown_literal(current_store_name())


def current_store_path() -> Path:
    return get_config().stores[current_store_name()]


def manifest_stamp(path: Path) -> float:
    manifest = path / "manifest.json"
    try:
        return manifest.stat().st_mtime
    except OSError:
        return 0.0


def store_key() -> tuple[str, float]:
    """(path, manifest mtime): the cache key of everything read from the current store."""
    path = current_store_path()
    return str(path), manifest_stamp(path)


# Tables are cached as shared resources, not copies: ``st.cache_data`` would pickle a
# multi-million-row frame on every hit. Callers get a copy-on-write copy (load_table).
@st.cache_resource(show_spinner=False, max_entries=32)
def _read_table(
    path: str,
    stamp: float,
    table: str,
    columns: tuple[str, ...] | None,
    categorical: tuple[str, ...] = (),
) -> pd.DataFrame:
    from legival_core.store.store import Store
    from legival_core.views import arrow_to_frame

    store = Store.open(path)
    if not store.has(table):
        return pd.DataFrame()
    if categorical:
        arrow = store.read_arrow(table, columns=list(columns) if columns else None)
        return arrow_to_frame(arrow, categorical)
    return store.read(table, columns=list(columns) if columns else None)


def load_table(
    table: str, columns: Sequence[str] | None = None, categorical: Sequence[str] = ()
) -> pd.DataFrame:
    """A table of the current store (cached until the store's manifest changes); empty if absent.

    ``categorical`` names string columns to load as categoricals (big tables group faster).
    The frame's data is shared between reruns and sessions; each call gets its own
    copy-on-write copy, so a caller that changes it leaves the cache as it was.
    """
    path, stamp = store_key()
    frame = _read_table(path, stamp, table, tuple(columns) if columns else None, tuple(categorical))
    return _own_copy(frame)


def _own_copy(frame: pd.DataFrame) -> pd.DataFrame:
    """A shallow copy of a shared cached ``frame``: with pandas' copy-on-write (always on since
    pandas 3) it costs microseconds, and whatever the caller does to it (set values, add or
    drop columns, sort in place) leaves the cached frame as it was."""
    return frame.copy(deep=False)


#: Which rollout columns to load as categoricals.
from legival_core.metrics.transfer import ROLLOUT_CATEGORIES  # noqa: E402


def load_rollouts() -> pd.DataFrame:
    """The rollouts table with the columns transfer metrics need (ids as categoricals)."""
    from legival_core.metrics.transfer import ROLLOUT_COLUMNS

    return load_table("rollouts", list(ROLLOUT_COLUMNS), ROLLOUT_CATEGORIES)


@st.cache_data(show_spinner=False, max_entries=16)
def _distinct(path: str, stamp: float, table: str, column: str) -> list[str]:
    import pyarrow.compute as pc

    from legival_core.store.store import Store

    store = Store.open(path)
    if not store.has(table):
        return []
    values = pc.unique(store.read_arrow(table, columns=[column]).column(column))
    return sorted(str(v) for v in values.to_pylist() if v is not None)


def distinct(table: str, column: str) -> list[str]:
    """Sorted distinct values of one column (read with Arrow: cheap even on big tables)."""
    return _distinct(*store_key(), table, column)


@st.cache_data(show_spinner=False, max_entries=8)
def _read_manifest(path: str, stamp: float) -> dict[str, Any]:
    from legival_core.store.store import Store

    return dict(Store.open(path).manifest)


def load_manifest() -> dict[str, Any]:
    return _read_manifest(*store_key())


@st.cache_data(show_spinner=False, max_entries=8)
def _grader_status(path: str, stamp: float) -> Any:
    from legival_core.grading.stamps import grader_status
    from legival_core.store.store import Store

    return grader_status(Store.open(path))


def grader_status() -> Any:
    """Which grader graded the current store (:class:`legival_core.grading.stamps.GraderStatus`),
    or None when it holds no grades."""
    return _grader_status(*store_key())


def student_metrics(profile: str) -> pd.DataFrame:
    """Transfer metrics per (teacher, dataset, student) (the library's
    :func:`legival_core.views.board_view.student_metrics`, as ``lv.open`` reads them): from
    the stored ``transfer_curves`` when they were computed from the current rollouts, every
    rollout regrouped otherwise (seconds on millions of rollouts)."""
    from legival_core.views import board_view

    return board_view.student_metrics(fresh_curves(), load_rollouts, profile)


def fresh_curves() -> pd.DataFrame | None:
    """The store's ``transfer_curves`` table if it was computed from the current rollouts."""
    from legival_core import views

    if not has_table("transfer_curves"):
        return None
    return views.fresh_transfer_curves(load_table("transfer_curves"), load_manifest())


def bundled_calibration_report() -> pd.DataFrame | None:
    """The ``calibration_report`` of :data:`CALIBRATION_STORE`, or None when it is not built."""
    path = CALIBRATION_STORE
    if not (path / "manifest.json").exists():
        return None
    frame = _read_table(str(path), manifest_stamp(path), "calibration_report", None)
    return frame if len(frame) else None


@st.cache_data(show_spinner=False, max_entries=8)
def _leak_headline(
    path: str, stamp: float, references: tuple[str, ...], per_teacher: str
) -> str | None:
    from legival_core.metrics.leak_summary import leak_headline
    from legival_core.store.store import Store
    from legival_core.views.transfer import store_leak_table

    store = Store.open(path)
    stored = _read_table(path, stamp, "page_results", None) if store.has("page_results") else None
    table = store_leak_table(store, stored, _read_manifest(path, stamp))
    # The same sentence as the published site's (legival_core.metrics.leak_summary).
    return None if table is None else leak_headline(table, references, per_teacher)


def leak_headline(per_teacher: str = "on the Transfer curves page") -> str | None:
    """One sentence on how much of the store's FOTU comes after the answer leak (first solves
    at or after the leak, teachers whose FOTU before the leak is 0), for every page where FOTU
    is the headline; None when the store has no leak points. ``per_teacher`` says where the
    per-teacher table is (the Transfer curves page itself says "below")."""
    return _leak_headline(*store_key(), tuple(reference_teachers()), per_teacher)


def has_table(table: str) -> bool:
    """Whether the current store has rows in ``table`` (from the cached manifest)."""
    entry = (load_manifest().get("tables") or {}).get(table) or {}
    return bool(entry.get("rows"))


def stored_result(name: str, key: ResultKey) -> pd.DataFrame | None:
    """The result ``name`` for ``key`` as the metrics stage stored it in ``page_results``,
    or None when it stored no such selection or the store's inputs were written since
    (:func:`legival_core.metrics.page_results.stored_frame`): the caller then computes it."""
    from legival_core.metrics.page_results import stored_frame

    if not has_table("page_results"):
        return None
    return stored_frame(load_table("page_results"), load_manifest(), name, key)


def stored_parts(
    prefix: str, parts: Sequence[str], key: ResultKey
) -> dict[str, pd.DataFrame] | None:
    """Each of ``parts`` as stored under ``{prefix}_{part}`` for ``key``, or None unless every
    one is stored and current: a result made of several frames is read whole or computed."""
    frames = {part: stored_result(f"{prefix}_{part}", key) for part in parts}
    if any(frame is None for frame in frames.values()):
        return None
    return frames  # type: ignore[return-value]


def _stored_first(
    name: str, compute: Callable[[ResultKey], pd.DataFrame]
) -> Callable[[ResultKey], pd.DataFrame]:
    """``compute`` behind the stored row ``name`` (:func:`derived`'s ``stored``)."""

    def read_or_compute(key: ResultKey) -> pd.DataFrame:
        frame = stored_result(name, key)
        return compute(key) if frame is None else frame

    return read_or_compute


@st.cache_data(show_spinner=False, max_entries=16)
def _references(path: str, stamp: float) -> list[str]:
    from legival_core.published.references import store_reference_teachers

    return store_reference_teachers(path)


def reference_teachers() -> list[str]:
    """The current store's reference teachers (:mod:`legival_core.published.references`), cached."""
    return _references(*store_key())


#: URL value of ``?references=`` when reference teachers are included.
INCLUDE_REFERENCES = "include"


def include_references() -> bool:
    """The sidebar switch "Include reference teachers", bound to ``?references=include``.

    Off by default: reference teachers (a human solution, a gold rationale) are shown apart
    and left out of ranks, frontiers, teacher-level correlations and solver pools. One switch
    for every page: its value is kept in the session and the URL as the pages change. Shown
    only when the store has a reference teacher (else False).
    """
    references = reference_teachers()
    if not references:
        return False
    key = "include_references"
    current = bool(st.session_state.get(key, st.session_state.get(f"_{key}", False)))
    wanted = st.query_params.get("references")
    if wanted is not None and wanted != st.session_state.get(f"_{key}_url"):
        current = wanted == INCLUDE_REFERENCES
    st.session_state[key] = current
    value = st.sidebar.toggle(
        "Include reference teachers",
        key=key,
        help="Reference teachers of this store: "
        + markdown_literal(", ".join(references))
        + ". Off: they are shown apart (no rank, never on the frontier, no point in "
        "teacher-level correlations, not in the solver pool). On: ranked like any model.",
    )
    st.session_state[f"_{key}"] = value
    st.query_params["references"] = INCLUDE_REFERENCES if value else "exclude"
    st.session_state[f"_{key}_url"] = st.query_params.get("references")
    return bool(value)


#: The sidebar's labels of the two ways to average a teacher over datasets
#: (:mod:`legival_core.stats.support`), in ``?support=`` order.
SUPPORT_LABELS = {
    "common": "Datasets every teacher covers",
    "all": "Every dataset (teachers missing one unranked)",
}


def support_choice() -> str:
    """The sidebar choice "Average teachers over", bound to ``?support=`` (``common``, the
    default, or ``all``): which datasets a teacher-level value is the mean over
    (:mod:`legival_core.stats.support`). One choice for every page, kept in the session and the
    URL as the pages change."""
    from legival_core.stats.support import SUPPORTS

    key = "support"
    wanted = st.query_params.get("support")
    if wanted in SUPPORTS and wanted != st.session_state.get(f"_{key}_url"):
        st.session_state[key] = wanted
    current = st.session_state.get(key, st.session_state.get(f"_{key}", SUPPORTS[0]))
    st.session_state[key] = current if current in SUPPORTS else SUPPORTS[0]
    value = st.sidebar.radio(
        "Average teachers over",
        list(SUPPORTS),
        key=key,
        format_func=SUPPORT_LABELS.__getitem__,
        help="A teacher-level value is a mean over datasets. By default every teacher is "
        "averaged over the same datasets: those on which every compared teacher has a value "
        "(a correct trace, for FOTU). The other choice averages each over every dataset it "
        "has and leaves unranked those that miss one.",
    )
    st.session_state[f"_{key}"] = value
    if value == SUPPORTS[0]:
        if key in st.query_params:
            del st.query_params[key]
    else:
        st.query_params[key] = value
    st.session_state[f"_{key}_url"] = st.query_params.get(key)
    return str(value)


@st.cache_data(show_spinner=False, max_entries=64)
def _derived(path: str, stamp: float, name: str, args: tuple[Any, ...]) -> Any:
    return _DERIVED[name](*args)


# Few entries: each may be a million-row frame (two per store state on the inspector).
@st.cache_resource(show_spinner=False, max_entries=8)
def _shared_derived(path: str, stamp: float, name: str, args: tuple[Any, ...]) -> pd.DataFrame:
    frame = _DERIVED[name](*args)
    if not isinstance(frame, pd.DataFrame):
        raise TypeError(f"derived({name!r}, shared=True) returned {type(frame)}, not a DataFrame")
    return frame


_DERIVED: dict[str, Callable[..., Any]] = {}


def derived(
    name: str, *, shared: bool = False, stored: bool = False
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Register a page computation whose result is cached per store state and arguments.

    The decorated function receives plain (hashable) arguments and reads tables with
    :func:`load_table`; calling it goes through ``st.cache_data`` keyed on the store path,
    the manifest mtime, the function name and the arguments.

    ``shared`` (for a big DataFrame, e.g. the inspector's million-row trace list): cached with
    ``st.cache_resource`` instead, one frame for every session, and each call gets a shallow
    copy-on-write copy of it (:func:`_own_copy`). ``st.cache_data`` pickles its value when it
    stores it and unpickles it on every hit: 1.6 s of a cold inspector and most of each rerun
    at a million traces.

    ``stored`` (a result the metrics stage stores for the default selection): the function
    takes one :class:`~legival_core.metrics.page_results.ResultKey` and runs only when
    ``page_results`` holds no current row ``name`` for it (:func:`stored_result`).
    """

    def register(function: Callable[..., Any]) -> Callable[..., Any]:
        _DERIVED[name] = _stored_first(name, function) if stored else function

        def cached(*args: Any) -> Any:
            if shared:
                return _own_copy(_shared_derived(*store_key(), name, tuple(args)))
            return _derived(*store_key(), name, tuple(args))

        cached.__doc__ = function.__doc__
        return cached

    return register


class PageReads:
    """The current store as the Leaderboard's read path reads it
    (:class:`legival_core.views.board_view.BoardSource`), through the pages' cached reads."""

    def table(self, table: str) -> pd.DataFrame:
        return load_table(table)

    def has_table(self, table: str) -> bool:
        return has_table(table)

    @property
    def reference_teachers(self) -> list[str]:
        return reference_teachers()

    @property
    def profile(self) -> str:
        from legival_core.views import metrics_profile

        return metrics_profile(load_manifest())

    def student_metrics(self, profile: str) -> pd.DataFrame:
        return _student_metrics(profile)

    def stored_result(self, name: str, key: ResultKey) -> pd.DataFrame | None:
        return stored_result(name, key)


PAGE_READS = PageReads()


# The Leaderboard's numbers: the library's read path (legival_core.views.board_view, the one
# lv.open(...) calls), each call cached here per store state and selection.
@derived("student_metrics")
def _student_metrics(profile: str) -> pd.DataFrame:
    return student_metrics(profile)


@derived("board_rows")
def board_rows(dataset: str | None, student: str | None) -> tuple[pd.DataFrame, list[str]]:
    """The ``teacher_metrics`` rows of the selection and the metrics they rank
    (:func:`legival_core.views.board_view.board_rows`)."""
    from legival_core.views import board_view

    return board_view.board_rows(PAGE_READS, dataset, student)


@derived("board")
def board_table(chosen: Selection) -> pd.DataFrame:
    """The rank table of a selection (:func:`legival_core.views.board_view.board_table`)."""
    from legival_core.views import board_view

    rows, metrics = board_rows(chosen.dataset, chosen.student)
    return board_view.board_table(PAGE_READS, rows, metrics, chosen)


@derived("resamples")
def board_resamples(chosen: Selection) -> TeacherResamples | None:
    """A selection's paired resamples
    (:func:`legival_core.views.board_view.selection_resamples`), cached apart from the
    weights' results so a new composite reuses them."""
    from legival_core.views import board_view

    _rows, metrics = board_rows(chosen.dataset, chosen.student)
    return board_view.selection_resamples(PAGE_READS, chosen, metrics)


@derived("uncertainty")
def board_intervals(chosen: Selection) -> pd.DataFrame:
    """A selection's value and rank intervals
    (:func:`legival_core.views.board_view.selection_intervals`); empty without resamples."""
    from legival_core.views import board_view

    return board_view.selection_intervals(
        PAGE_READS, chosen, board_table(chosen), partial(board_resamples, chosen.unweighted())
    )


def _leave_pages_directory_mode() -> None:
    """Make sure ``app.py`` and its explicit ``st.navigation`` run, not the old folder mode.

    Streamlit (1.67) runs an app that has a ``pages/`` folder beside its main script in the old
    multipage mode (every file a page, the main script skipped) until some run calls
    ``st.navigation``. A first request that deep-links to a page therefore lands here without
    ``app.py`` having run; switching the mode off and rerunning puts ``app.py`` in charge, and
    with it :func:`run_page`, which turns store errors into messages. Checked at every page
    start: Streamlit's AppTest switches the old mode back on before each of its runs.
    """
    from streamlit.runtime.pages_manager import PagesManager

    if PagesManager.uses_pages_directory:
        PagesManager.uses_pages_directory = False
        st.rerun()


def page_setup(page: str, *, needs_store: bool = True) -> None:
    """Start a page: the store chooser in the sidebar, the page's widget namespace, and (with
    ``needs_store``) a polite stop when the current store cannot be opened.

    Pages draw the chooser themselves (not ``app.py``), so a page run on its own behaves the
    same as under ``st.navigation``.
    """
    _leave_pages_directory_mode()
    st.session_state["_page"] = page
    store_chooser()
    if needs_store:
        _stop_without_store()


def store_or_stop() -> None:
    """Start a page (older name of :func:`page_setup`; the page is named after its file)."""
    import inspect

    page_setup(Path(inspect.stack()[1].filename).stem)


def _stop_without_store() -> None:
    """Stop the page with a friendly message when the current store cannot be opened."""
    from legival_core.store.store import Store, StoreError

    name = current_store_name()
    path = current_store_path()
    try:
        Store.open(path)
    except (StoreError, OSError) as error:
        hint = BUILD_HINTS.get(name)
        if hint and not path.exists():
            st.info(
                f"The bundled store '{markdown_literal(name)}' has not been built yet. Build it "
                f"with `{hint}`, or pick another store in the sidebar."
            )
        else:
            st.warning(get_config().store_problem(name, error))
        st.stop()


def table_or_problem(table: str) -> pd.DataFrame | None:
    """:func:`load_table`, or ``None`` with the store's problem shown when it cannot be read
    (for a page that has more to show than this store, like the published numbers)."""
    from legival_core.store.store import StoreError

    try:
        return load_table(table)
    except (StoreError, OSError) as error:
        st.warning(get_config().store_problem(current_store_name(), error))
        return None


def run_page(page: Any) -> None:
    """Run one page of ``st.navigation``; a store that fails while the page reads it (a damaged
    part, a manifest rewritten mid-run) ends the page with a short message instead of an
    uncaught error.

    In read-only (hosting) mode any other error ends the page with a generic message too: the
    traceback goes to the server's log, never to a visitor's screen.
    """
    from legival_core.store.store import StoreError

    try:
        page.run()
    except (StoreError, OSError) as error:
        st.warning(get_config().store_problem(current_store_name(), error))
    except Exception:
        if not get_config().readonly:
            raise
        _LOG.exception("page %s failed", st.session_state.get("_page"))
        st.error("This page could not be drawn for this store. The details are in the server log.")


def need_tables(*tables: str, what: str = "This page") -> None:
    """Stop politely when the current store lacks one of ``tables``."""
    missing = [t for t in tables if not has_table(t)]
    if missing:
        st.info(
            f"{what} needs the table(s) {', '.join(missing)}, which the store "
            f"'{store_label()}' does not have. Pick another store in the sidebar, or run "
            "the precompute stages that write them (`python -m precompute run ...`)."
        )
        st.stop()


def _widget_place(param: str, key: str | None, where: Any) -> tuple[str, Any]:
    """The key of the widget kept in ``?param=`` and where it is drawn (the page unless
    ``where`` says). Keys are per page: the same parameter on two pages is two widgets."""
    return key or f"qp_{st.session_state.get('_page', 'app')}_{param}", where or st


def url_select(
    label: str,
    options: Sequence[Any],
    param: str,
    *,
    default: Any = None,
    where: Any = None,
    help: str | None = None,
    format_func: Callable[[Any], str] = str,
    key: str | None = None,
) -> Any:
    """A selectbox whose value lives in ``?param=``; unknown URL values fall back politely.

    The URL decides on a first visit and whenever it names a value other than the one the
    widget showed last; afterwards the widget decides and writes its value back to the URL.
    """
    options = list(options)
    if not options:
        return None
    key, where = _widget_place(param, key, where)
    as_text = [str(o) for o in options]
    fallback = options[options.index(default) if default in options else 0]
    _sync_from_url(
        param,
        key,
        where,
        lambda wanted: (
            (True, options[as_text.index(wanted)]) if wanted in as_text else (False, None)
        ),
        lambda state: state in options,
        fallback,
        lambda wanted: (
            f"{label}: {shorten(wanted)} is not available here; showing {format_func(fallback)}."
        ),
    )
    value = where.selectbox(label, options, key=key, help=help, format_func=format_func)
    _write_to_url(param, key, str(value))
    return value


def _sync_from_url(
    param: str,
    key: str,
    where: Any,
    parse: Callable[[str], tuple[bool, Any]],
    valid: Callable[[Any], bool],
    fallback: Any,
    unknown_note: Callable[[str], str],
) -> None:
    """Set the state of the widget ``key`` that :func:`url_select` and :func:`url_toggle` keep in
    ``?param=``: the URL decides on a first visit and whenever it names a value other than the
    one the widget showed last (an unparsable one falls back with a short note); afterwards the
    widget's own state stands, or ``fallback`` when it is not ``valid``."""
    wanted = st.query_params.get(param)
    state = st.session_state.get(key)
    if wanted is not None and wanted != st.session_state.get(f"_{key}_url"):
        known, parsed = parse(wanted)
        if not known:
            where.info(markdown_literal(unknown_note(wanted)))
        state = parsed if known else fallback
    elif not valid(state):
        state = fallback
    st.session_state[key] = state


def _write_to_url(param: str, key: str, text: str) -> None:
    """Write a URL-kept widget's value back to ``?param=`` and remember it as the one shown."""
    st.query_params[param] = text
    st.session_state[f"_{key}_url"] = text


#: How :func:`url_toggle` writes a switch in the URL.
TOGGLE_ON, TOGGLE_OFF = "on", "off"


def url_toggle(
    label: str,
    param: str,
    *,
    default: bool = False,
    where: Any = None,
    help: str | None = None,
    key: str | None = None,
) -> bool:
    """A toggle whose value lives in ``?param=on`` / ``?param=off``, as :func:`url_select` keeps
    a selectbox: the URL decides on a first visit and whenever it names a value other than the
    one the widget showed last; afterwards the widget decides and writes its value back. Any
    other URL value falls back to ``default`` with a short message."""
    key, where = _widget_place(param, key, where)
    _sync_from_url(
        param,
        key,
        where,
        lambda wanted: (wanted in (TOGGLE_ON, TOGGLE_OFF), wanted == TOGGLE_ON),
        lambda state: isinstance(state, bool),
        default,
        lambda wanted: (
            f"{label}: {shorten(wanted)} is not a choice here (on or off); showing "
            f"{TOGGLE_ON if default else TOGGLE_OFF}."
        ),
    )
    value = bool(where.toggle(label, key=key, help=help))
    _write_to_url(param, key, TOGGLE_ON if value else TOGGLE_OFF)
    return value


def url_text(
    label: str,
    param: str,
    *,
    where: Any = None,
    help: str | None = None,
    key: str | None = None,
    max_chars: int = 200,
    placeholder: str | None = None,
) -> str:
    """A text box whose value lives in ``?param=`` (absent when empty), kept as
    :func:`url_select` keeps a selectbox; a URL value longer than ``max_chars`` is cut to it
    with a short message."""
    key, where = _widget_place(param, key, where)
    _sync_from_url(
        param,
        key,
        where,
        lambda wanted: (len(wanted) <= max_chars, wanted[:max_chars]),
        lambda state: isinstance(state, str),
        "",
        lambda wanted: f"{label}: the text in the address is cut to {max_chars} characters.",
    )
    value = str(
        where.text_input(label, key=key, help=help, max_chars=max_chars, placeholder=placeholder)
    )
    if value:
        _write_to_url(param, key, value)
    else:
        st.query_params.pop(param, None)
        st.session_state[f"_{key}_url"] = None
    return value


def url_multiselect(
    label: str,
    options: Sequence[Any],
    param: str,
    *,
    default: Sequence[Any] | None = None,
    where: Any = None,
    help: str | None = None,
    format_func: Callable[[Any], str] = str,
    key: str | None = None,
) -> list[Any]:
    """A multiselect whose values live in ``?param=a&param=b`` (one repeated parameter, so a
    value may hold any character); ``?param=`` with no value keeps an empty choice. Unknown
    URL values are dropped with a short message, as :func:`url_select` does."""
    options = list(options)
    key, where = _widget_place(param, key, where)
    as_text = [str(o) for o in options]
    fallback = [o for o in (options if default is None else default) if o in options]
    wanted = (
        [w for w in st.query_params.get_all(param) if w != ""] if param in st.query_params else None
    )
    state = st.session_state.get(key)
    if wanted is not None and tuple(st.query_params.get_all(param)) != st.session_state.get(
        f"_{key}_url"
    ):
        unknown = [w for w in wanted if w not in as_text]
        if unknown:
            where.info(
                markdown_literal(
                    f"{label}: {shorten(', '.join(unknown))} is not available here; left out."
                )
            )
        state = [options[as_text.index(w)] for w in wanted if w in as_text]
    elif state is None or any(v not in options for v in state):
        state = [v for v in (state or fallback) if v in options] if state else fallback
    st.session_state[key] = state
    value = where.multiselect(label, options, key=key, help=help, format_func=format_func)
    written = [str(v) for v in value] or [""]
    st.query_params[param] = written
    st.session_state[f"_{key}_url"] = tuple(written)
    return list(value)


def csv_bytes(frame: pd.DataFrame) -> bytes:
    """``frame`` as the app's CSV export (no live formulas in a spreadsheet)."""
    return csv_frame(frame).to_csv(index=False).encode()


def download_csv(frame: pd.DataFrame | bytes, name: str, label: str = "Download CSV") -> None:
    """Every table has a CSV export (``frame`` may be its :func:`csv_bytes`, made once).

    A frame's CSV is written when the button is clicked (Streamlit calls ``data`` then), not
    on every run of the page: a big table's CSV costs more than drawing the page."""
    st.download_button(
        label,
        frame if isinstance(frame, bytes) else partial(csv_bytes, frame),
        file_name=f"{_FILE_NAME_UNSAFE.sub('_', name)[:80]}.csv",
        mime="text/csv",
        key=f"csv_{name}",
        on_click="ignore",
    )


def table(
    frame: pd.DataFrame | Any,
    name: str,
    *,
    labels: dict[str, str] | None = None,
    formats: dict[str, Callable[[Any], str]] | None = None,
    **kwargs: Any,
) -> None:
    """A dataframe with its CSV export underneath.

    A plain frame is shown tidy (:func:`legival_core.views.display.tidy_table`: labelled headers,
    fixed decimals or %, an em dash for missing values) and exported with its field names and
    full precision; ``frame`` may also be a pandas Styler the page has formatted itself.
    """
    from legival_core.views.display import tidy_table

    if isinstance(frame, pd.DataFrame):
        data, shown = frame, tidy_table(frame, labels, formats)
    else:
        data, shown = frame.data, frame
    st.dataframe(shown, hide_index=True, **kwargs)
    download_csv(data, name)


def tokens_caption() -> str:
    """What the leaderboard's Tokens column and the efficiency decomposition page's E[T]
    count, from the store's provenance (escaped: teacher names come from the store)."""
    from legival_core.store.provenance import token_sources

    sources = token_sources(load_manifest())
    return markdown_literal(
        f"Tokens: {sources.lengths}. "
        f"E[T] on the Efficiency decomposition page: {sources.e_t_label()}."
    )


def backtracking_note() -> str:
    """Which labeler gave the store's Backtracking numbers and how well it finds hand-labelled
    backtracking (legival_core.metrics.label_quality), escaped for Markdown: shown beside every
    Backtracking column and chart."""
    from legival_core.metrics.label_quality import store_quality_note

    return markdown_literal(store_quality_note(load_manifest()))


def metric_label(name: str) -> str:
    from legival_core.views import METRICS

    metric = METRICS.get(name)
    return metric.label if metric else name
