"""Finding traces: metric filters, sorting and a bounded full-text search over the trace list
of the inspector and of ``lv.open(path).traces(...)`` (issue 42, item 2).

A :class:`TraceQuery` says what to keep; :func:`filter_traces` applies its metric filters and
sort to the trace list (:func:`trace_metrics`: the inspector's
:func:`legival_core.metrics.trace_list.trace_choices` plus the stored per-trace metrics), and
:func:`search_text` then looks for its text in the reasoning and answers of the traces left,
in that order, reading them from the store in batches by trace id.

The search is bounded, so that a page (or a hostile URL) cannot hold a server: it stops after
:data:`SEARCH_CHARS` characters of text or :data:`SEARCH_SECONDS` seconds of regex matching,
whichever comes first, and says how many traces it searched. A plain search is a
case-insensitive substring test. A regex is at most :data:`PATTERN_CHARS` characters, is
compiled with the ``regex`` package (a requirement of the library; NLTK and tiktoken need it
too) and runs with that package's time limit, so a catastrophic pattern such as ``(a+)+$``
costs at most the time left, not forever.
"""

from __future__ import annotations

import dataclasses
import math
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

if TYPE_CHECKING:
    from legival_core.store.store import Store

__all__ = [
    "FILTER_METRICS",
    "LEAK_CHOICES",
    "PATTERN_CHARS",
    "SEARCH_CHARS",
    "SEARCH_FIELDS",
    "SEARCH_SECONDS",
    "SearchResult",
    "TraceQuery",
    "filter_traces",
    "find_traces",
    "parse_range",
    "parse_where",
    "search_text",
    "trace_metrics",
]

#: The columns a threshold may be set on, with what each is.
FILTER_METRICS: dict[str, str] = {
    "m": "steps",
    "tokens": "tokens of the reasoning",
    "fotu": "FOTU (mean over students)",
    "fotu_before_leak": "FOTU before the answer leak",
    "leak_k": "answer leak step",
    "redundancy": "share of redundant steps (r_i > τ)",
    "backtracking": "share of steps flagged as backtracking",
    "backtracks": "steps flagged as backtracking",
    "top_share": "top-10% share of the transfer attribution",
}
#: The answer-leak filter: every trace, those whose prefix states the answer at some step,
#: those that never do, those the students solve before the leak (FOTU before it above 0),
#: and those they solve only after it (FOTU above 0, none before the leak).
LEAK_CHOICES = ("any", "leaks", "no-leak", "solved-before", "only-after")
#: Where the text is looked for.
SEARCH_FIELDS = ("both", "reasoning", "answer")
#: At most this many characters of text are searched per query.
SEARCH_CHARS = 40_000_000
#: At most this many seconds of regex matching per query.
SEARCH_SECONDS = 4.0
#: The longest regex accepted.
PATTERN_CHARS = 200
#: Traces read from the store per batch while searching.
BATCH = 2_000

_TEXT_COLUMNS: dict[str, tuple[str, ...]] = {
    "reasoning": ("reasoning",),
    "answer": ("answer_text",),
}
_TEXT_COLUMNS["both"] = ("reasoning", "answer_text")


@dataclass(frozen=True)
class TraceQuery:
    """What to keep of the trace list, and in what order.

    ``ranges`` maps a :data:`FILTER_METRICS` column to ``(low, high)`` (inclusive, None: open);
    a trace whose value is missing is dropped by any range on that column. ``correct`` and
    ``rollouts`` keep only traces with that value when not None. ``text`` (substring, case
    insensitive; or a regex with ``regex``) is searched in ``field``. ``sort`` names a column
    of the list.
    """

    text: str = ""
    regex: bool = False
    field: str = "both"
    correct: bool | None = None
    rollouts: bool | None = None
    leak: str = "any"
    ranges: Mapping[str, tuple[float | None, float | None]] = dataclasses.field(
        default_factory=dict
    )
    sort: str | None = None
    descending: bool = False

    def __post_init__(self) -> None:
        if self.field not in SEARCH_FIELDS:
            raise ValueError(f"search field {self.field!r}: one of {', '.join(SEARCH_FIELDS)}")
        if self.leak not in LEAK_CHOICES:
            raise ValueError(f"leak filter {self.leak!r}: one of {', '.join(LEAK_CHOICES)}")
        unknown = sorted(set(self.ranges) - set(FILTER_METRICS))
        if unknown:
            raise ValueError(
                f"no threshold on {unknown[0]!r}: the metrics are {', '.join(FILTER_METRICS)}"
            )
        if self.regex and len(self.text) > PATTERN_CHARS:
            raise ValueError(f"a regex of {len(self.text)} characters: at most {PATTERN_CHARS}")


def parse_range(text: str) -> tuple[float | None, float | None]:
    """A threshold as written in a URL or a box: ``0.3..`` (at least 0.3), ``..2``, ``1..5``,
    ``>=2``, ``>0.3``, ``<=5``, ``<1``, ``=0`` or a bare number (equal). Strict bounds are
    kept inclusive (``>0.3`` is read as ``0.3..`` with the next float above 0.3).

    >>> parse_range("0.3.."), parse_range("..2"), parse_range(">=2"), parse_range("=0")
    ((0.3, None), (None, 2.0), (2.0, None), (0.0, 0.0))
    >>> parse_range("abc")
    Traceback (most recent call last):
    ...
    ValueError: threshold 'abc': write 0.3.., ..2, 1..5, >=2, <1 or a number
    """
    value = text.strip().replace(" ", "")
    try:
        if ".." in value:
            low, high = value.split("..", 1)
            return (float(low) if low else None, float(high) if high else None)
        for sign in (">=", "<=", ">", "<", "="):
            if value.startswith(sign):
                number = float(value[len(sign) :])
                return {
                    ">=": (number, None),
                    "<=": (None, number),
                    ">": (math.nextafter(number, math.inf), None),
                    "<": (None, math.nextafter(number, -math.inf)),
                    "=": (number, number),
                }[sign]
        number = float(value)
        return (number, number)
    except ValueError:
        raise ValueError(
            f"threshold {text[:40]!r}: write 0.3.., ..2, 1..5, >=2, <1 or a number"
        ) from None


_CONDITION = re.compile(r"\s*([a-z_]+)\s*((?:>=|<=|>|<|=)\s*[^,]+|\s+[^,]+)\s*")


def parse_where(text: str) -> dict[str, tuple[float | None, float | None]]:
    """Thresholds as one line, comma-separated: ``redundancy>0.3, backtracks>=2, fotu=0``
    (a column of :data:`FILTER_METRICS`, then :func:`parse_range`'s forms; ``m 3..10`` too).

    >>> parse_where("redundancy>=0.3, backtracks >= 2, m 3..10")
    {'redundancy': (0.3, None), 'backtracks': (2.0, None), 'm': (3.0, 10.0)}
    >>> parse_where("colour>1")
    Traceback (most recent call last):
    ...
    ValueError: no threshold on 'colour': the metrics are m, tokens, fotu, fotu_before_leak, \
leak_k, redundancy, backtracking, backtracks, top_share
    """
    out: dict[str, tuple[float | None, float | None]] = {}
    for part in (p for p in text.split(",") if p.strip()):
        match = _CONDITION.fullmatch(part)
        if match is None:
            raise ValueError(
                f"threshold {part.strip()[:40]!r}: write a metric then >, >=, <, <=, = or a "
                "range, e.g. redundancy>0.3"
            )
        name, bound = match.group(1), match.group(2)
        if name not in FILTER_METRICS:
            raise ValueError(
                f"no threshold on {name!r}: the metrics are {', '.join(FILTER_METRICS)}"
            )
        out[name] = parse_range(bound)
    return out


def trace_metrics(choices: pd.DataFrame, store: Store) -> pd.DataFrame:
    """The trace list with the stored per-trace metrics beside it: ``redundancy``,
    ``backtracking`` and ``backtracks`` (``trace_efficiency``), ``fotu_before_leak`` (mean over
    students, ``trace_transfer``) and ``top_share`` (the transfer attribution's,
    :func:`legival_core.views.reading.stored_trace_concentration`). Missing tables give NaN."""
    from legival_core.views.reading import stored_trace_concentration

    out = choices.copy()
    ids = out["trace_id"].astype(str)
    efficiency = (
        store.read("trace_efficiency", columns=["trace_id", "steps", "redundancy", "backtracking"])
        if store.has("trace_efficiency")
        else pd.DataFrame(columns=["trace_id", "steps", "redundancy", "backtracking"])
    ).drop_duplicates("trace_id")
    efficiency = efficiency.set_index(efficiency["trace_id"].astype(str))
    out["redundancy"] = ids.map(efficiency["redundancy"]).astype("float64")
    out["backtracking"] = ids.map(efficiency["backtracking"]).astype("float64")
    counts = (efficiency["backtracking"] * efficiency["steps"]).astype("float64").round()
    out["backtracks"] = ids.map(counts).astype("float64")
    if store.has("trace_transfer"):
        transfer = store.read("trace_transfer", columns=["trace_id", "fotu_before_leak"])
        before = transfer.groupby(transfer["trace_id"].astype(str))["fotu_before_leak"].mean()
        out["fotu_before_leak"] = ids.map(before).astype("float64")
    else:
        out["fotu_before_leak"] = np.nan
    shares = stored_trace_concentration(store)
    if len(shares):
        share = shares.set_index(shares["trace_id"].astype(str))["top_share"]
        out["top_share"] = ids.map(share).astype("float64")
    else:
        out["top_share"] = np.nan
    return out


def filter_traces(traces: pd.DataFrame, query: TraceQuery) -> pd.DataFrame:
    """The rows of :func:`trace_metrics` that ``query``'s metric filters keep, sorted by its
    ``sort`` (stable; missing values last). The text is not looked at here."""
    keep = np.ones(len(traces), dtype=bool)
    for column, (low, high) in query.ranges.items():
        values = pd.to_numeric(traces[column], errors="coerce").astype("float64").to_numpy()
        inside = np.isfinite(values)
        if low is not None:
            inside &= values >= low
        if high is not None:
            inside &= values <= high
        keep &= inside
    for column, wanted in (("correct", query.correct), ("rollouts", query.rollouts)):
        if wanted is not None:
            keep &= traces[column].fillna(not wanted).astype(bool).to_numpy() == wanted
    keep &= _leak_mask(traces, query.leak)
    out = traces[keep]
    if query.sort is not None:
        if query.sort not in out:
            raise ValueError(f"cannot sort by {query.sort!r}: not a column of the trace list")
        out = out.sort_values(
            query.sort, ascending=not query.descending, kind="stable", na_position="last"
        )
    return out.reset_index(drop=True)


def _leak_mask(traces: pd.DataFrame, leak: str) -> np.ndarray:
    """Which traces the answer-leak filter keeps (:data:`LEAK_CHOICES`)."""
    leaks = traces["leak_k"].notna().to_numpy()
    fotu = pd.to_numeric(traces["fotu"], errors="coerce").fillna(0).to_numpy()
    before = (
        pd.to_numeric(traces["fotu_before_leak"], errors="coerce").fillna(0).to_numpy()
        if "fotu_before_leak" in traces
        else np.zeros(len(traces))
    )
    return {
        "any": np.ones(len(traces), dtype=bool),
        "leaks": leaks,
        "no-leak": ~leaks,
        "solved-before": before > 0,
        "only-after": leaks & (fotu > 0) & (before <= 0),
    }[leak]


@dataclass(frozen=True)
class SearchResult:
    """The traces whose text matched, in the order searched, and how far the search got:
    ``searched`` of ``candidates`` traces, ``complete`` False when a bound stopped it
    (``stopped_by`` says which)."""

    trace_ids: list[str]
    searched: int
    candidates: int
    stopped_by: str | None

    @property
    def complete(self) -> bool:
        return self.stopped_by is None

    def summary(self) -> str:
        """One line for the page: how many matched, how many were searched, why it stopped."""
        found = f"{len(self.trace_ids):,} traces match"
        if self.complete:
            return f"{found} (all {self.candidates:,} searched)."
        return (
            f"{found} in the first {self.searched:,} of {self.candidates:,} traces searched: "
            f"the search stopped at its {self.stopped_by}. Narrow it with the filters."
        )


class _Substring:
    """A case-insensitive substring test with a regex pattern's ``search`` call (no time limit
    needed: it is linear in the text)."""

    def __init__(self, text: str) -> None:
        self.wanted = text.casefold()

    def search(self, text: str, timeout: float | None = None) -> bool | None:
        return True if self.wanted in text.casefold() else None


def _matcher(query: TraceQuery) -> Any:
    """What the query's text is looked for with: a plain substring test, or a regex compiled
    with the ``regex`` package (case-insensitive; its ``search`` takes a time limit). The
    hosted app's lighter requirements may lack that package: a regex search then says so."""
    if not query.regex:
        return _Substring(query.text)
    try:
        import regex
    except ImportError:
        raise ValueError(
            "a regex search needs the regex package (pip install regex); a plain search works"
        ) from None
    try:
        return regex.compile(query.text, regex.IGNORECASE | regex.V0)
    except regex.error as error:
        raise ValueError(f"regex {query.text[:60]!r} does not compile: {error}") from None


def search_text(store: Store, trace_ids: list[str], query: TraceQuery) -> SearchResult:
    """The traces among ``trace_ids`` (in that order) whose ``query.field`` text holds
    ``query.text``, within :data:`SEARCH_CHARS` characters and :data:`SEARCH_SECONDS` seconds.
    An empty text keeps every trace."""
    if not query.text:
        return SearchResult(list(trace_ids), len(trace_ids), len(trace_ids), None)
    pattern = _matcher(query)
    columns = [c for c in _TEXT_COLUMNS[query.field]]
    deadline = time.monotonic() + SEARCH_SECONDS
    budget = SEARCH_CHARS
    found: list[str] = []
    searched = 0
    for start in range(0, len(trace_ids), BATCH):
        batch = trace_ids[start : start + BATCH]
        rows = store.read("traces", columns=["trace_id", *columns], filters={"trace_id": batch})
        texts = rows.set_index(rows["trace_id"].astype(str))
        for trace_id in batch:
            if trace_id not in texts.index:
                searched += 1
                continue
            text = "\n".join(
                str(texts.at[trace_id, c]) for c in columns if pd.notna(texts.at[trace_id, c])
            )
            if len(text) > budget:
                return SearchResult(found, searched, len(trace_ids), "character budget")
            budget -= len(text)
            left = deadline - time.monotonic()
            if left <= 0:
                return SearchResult(found, searched, len(trace_ids), "time limit")
            try:
                hit = pattern.search(text, timeout=left) is not None
            except TimeoutError:
                return SearchResult(found, searched, len(trace_ids), "time limit")
            searched += 1
            if hit:
                found.append(trace_id)
    return SearchResult(found, searched, len(trace_ids), None)


def find_traces(
    traces: pd.DataFrame, store: Store, query: TraceQuery
) -> tuple[pd.DataFrame, SearchResult]:
    """:func:`filter_traces`, then :func:`search_text` over the rows it kept: the rows whose
    text matched (in the filtered order) and the search's account."""
    kept = filter_traces(traces, query)
    result = search_text(store, kept["trace_id"].astype(str).tolist(), query)
    if query.text:
        kept = kept[kept["trace_id"].astype(str).isin(set(result.trace_ids))]
    return kept.reset_index(drop=True), result
