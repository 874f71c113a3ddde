"""Reference teachers: a human solution or a gold rationale stored beside the models' traces.

A reference is worth showing (how long, how redundant, how teachable is the human write-up?)
but it is not a competitor: its accuracy is 1 by construction when it carries the gold, so it
would take rank 1, push a model off the Pareto frontier, add a point to every teacher-level
correlation and solve every instance of the solver-derived workload. So by default it is left
out of ranks, frontiers, teacher-level correlations and solver pools, and shown apart.

Where the mark lives: in the ``source`` column of the ``traces`` table (schema: who wrote the
trace). A source is a reference source when it is ``champ:reference`` (the CHAMP human
solution, written by :mod:`precompute.champ`) or starts with ``reference:`` (what
``python -m precompute ingest ... --reference`` writes: ``reference:ingest:<file>``). A teacher
is a reference teacher when **every** one of its traces has a reference source, so a store made
before this mark existed is read correctly as it is (the demo's ``human`` teacher).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

import pandas as pd

if TYPE_CHECKING:
    from legival_core.store.store import Store

__all__ = [
    "CHAMP_REFERENCE_SOURCE",
    "REFERENCE_PREFIX",
    "is_reference_source",
    "keep_teachers",
    "reference_source",
    "reference_teachers",
    "store_reference_teachers",
]

#: ``source`` of the CHAMP human solution (see :mod:`precompute.champ`).
CHAMP_REFERENCE_SOURCE = "champ:reference"
#: Prefix of the ``source`` of any other trace marked as a reference.
REFERENCE_PREFIX = "reference:"


def is_reference_source(source: object) -> bool:
    """Whether a trace ``source`` marks a reference trace.

    True for ``champ:reference`` and for any source starting with ``reference:``; False for
    everything else, missing values included.

    >>> [is_reference_source(s) for s in
    ...  ("champ:reference", "reference:ingest:gold.jsonl", "champ:0-Shot", "ingest:a", None)]
    [True, True, False, False, False]
    """
    if not isinstance(source, str):
        return False
    return source == CHAMP_REFERENCE_SOURCE or source.startswith(REFERENCE_PREFIX)


def reference_source(source: str) -> str:
    """``source`` marked as a reference (unchanged when it already is one).

    >>> reference_source("ingest:gold.jsonl"), reference_source("champ:reference")
    ('reference:ingest:gold.jsonl', 'champ:reference')
    """
    return source if is_reference_source(source) else REFERENCE_PREFIX + source


def reference_teachers(traces: pd.DataFrame) -> list[str]:
    """The teachers all of whose traces have a reference ``source``, sorted.

    A teacher with one ordinary trace among reference ones is not a reference (a mixed teacher
    is a model, and leaving a model out silently would be worse than ranking a reference).

    Args:
        traces: rows with ``teacher`` and ``source`` (the ``traces`` table, or those columns).

    Returns:
        Sorted teacher names; empty when ``source`` is absent.

    >>> traces = pd.DataFrame({"teacher": ["gpt-4", "human", "human", "mixed", "mixed"],
    ...     "source": ["champ:0-Shot", "champ:reference", "champ:reference",
    ...                "reference:ingest:a.jsonl", "ingest:b.jsonl"]})
    >>> reference_teachers(traces)
    ['human']
    """
    # each distinct (teacher, source) once: a big store has 100,000 traces but few sources
    pairs = teacher_sources(traces)
    if pairs.empty:
        return []
    marked = pairs["source"].map(is_reference_source)
    every = marked.groupby(pairs["teacher"], observed=True).all()
    return sorted(str(t) for t in every[every].index)


def teacher_sources(traces: pd.DataFrame) -> pd.DataFrame:
    """The distinct ``teacher``/``source`` pairs of ``traces``: all :func:`reference_teachers`
    reads, so pairs gathered a part at a time (the metrics stage's buckets) and concatenated
    give the same answer as the whole table. Empty when either column is absent.

    >>> teacher_sources(pd.DataFrame({"teacher": ["a", "a", "b"], "source": ["x", "x", "y"]}))
      teacher source
    0       a      x
    1       b      y
    """
    if traces.empty or "source" not in traces or "teacher" not in traces:
        return pd.DataFrame()
    pairs = pd.DataFrame(
        {"teacher": traces["teacher"].astype(str), "source": traces["source"].astype(object)}
    )
    return pairs.drop_duplicates(ignore_index=True)


def store_reference_teachers(store: Store | str | os.PathLike[str]) -> list[str]:
    """:func:`reference_teachers` of a store's ``traces`` table (two columns read); a store
    without traces (e.g. the published numbers) has none.

    Args:
        store: a :class:`legival_core.store.store.Store` or the folder of one.
    """
    from legival_core.store.store import Store

    opened = store if isinstance(store, Store) else Store.open(store)
    if not opened.has("traces"):
        return []
    arrow = opened.read_arrow("traces", columns=["teacher", "source"])
    return reference_teachers(arrow.to_pandas())


def keep_teachers(
    frame: pd.DataFrame,
    references: Iterable[str],
    include: bool = False,
    column: str = "teacher",
) -> pd.DataFrame:
    """``frame`` without the rows of reference teachers, unless ``include``.

    The one filter behind every "left out by default" of the app: ranks, frontiers,
    teacher-level correlations and solver pools all call it (or take ``references`` and call
    it for you).

    >>> df = pd.DataFrame({"teacher": ["a", "human", "b"], "x": [1, 2, 3]})
    >>> keep_teachers(df, ["human"]).x.tolist(), keep_teachers(df, ["human"], True).x.tolist()
    ([1, 3], [1, 2, 3])
    """
    wanted: Sequence[str] = [str(r) for r in references]
    if include or not wanted or column not in frame.columns or frame.empty:
        return frame
    return frame[~frame[column].astype(str).isin(wanted).to_numpy()]
