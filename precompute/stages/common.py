"""Helpers the stages share: reading input tables, problem rows, tasks, JSON columns."""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import fields
from typing import TYPE_CHECKING, Any, TypeVar

import pandas as pd

from precompute.stages.base import StageError

if TYPE_CHECKING:
    from legival_core.store.store import Store

__all__ = [
    "cell_text",
    "chunks",
    "done_ids",
    "get_task_cached",
    "is_missing",
    "numbered_steps",
    "option_values",
    "problem_rows",
    "read_or_empty",
    "read_required",
    "require_rows",
    "require_whole_numbers",
    "shard_rows",
    "to_json",
]

T = TypeVar("T")


def read_or_empty(store: Store, table: str, columns: Sequence[str] | None = None) -> pd.DataFrame:
    """The table as a frame, or an empty frame with the schema's columns when absent."""
    if store.has(table):
        return store.read(table, columns=list(columns) if columns else None)
    from legival_core.store.schema import spec

    names = list(columns) if columns else spec(table).columns
    return pd.DataFrame({name: pd.Series(dtype=object) for name in names})


def require_rows(
    frame: pd.DataFrame, table: str, stage: str, producer: str, alternative: str | None = None
) -> None:
    """Raise :class:`StageError` when an input table is empty, naming the command that fills
    it (and ``alternative``, another command that can, when given)."""
    if frame.empty:
        other = f" (or {alternative})" if alternative else ""
        raise StageError(
            f"stage {stage!r} needs rows in table '{table}', which is empty; "
            f"run `python -m precompute {producer}`{other} first"
        )


def read_required(
    store: Store,
    table: str,
    columns: Sequence[str],
    stage: str,
    producer: str,
    alternative: str | None = None,
) -> pd.DataFrame:
    """The input table ``table`` (its ``columns``) of ``stage``; refused as
    :func:`require_rows` refuses it when it has no rows."""
    frame = read_or_empty(store, table, columns)
    require_rows(frame, table, stage, producer, alternative)
    return frame


def option_values(options_class: type, values: Mapping[str, Any], source: str) -> dict[str, Any]:
    """A stage's options as given (CLI arguments or a config table), checked against the fields
    of its options dataclass: an unknown key is refused, naming the known ones; the ones given
    as None (not set) are left out, so the defaults stand."""
    known = {f.name for f in fields(options_class)}
    unknown = sorted(set(values) - known)
    if unknown:
        raise StageError(f"{source}: unknown option(s) {unknown}; known: {sorted(known)}")
    return {k: v for k, v in values.items() if v is not None}


def require_whole_numbers(options: object, names: Iterable[str], source: str) -> None:
    """Refuse an option among ``names`` that is not a whole number >= 1 (a bool is not one)."""
    for name in names:
        value = getattr(options, name)
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise StageError(f"{source}: {name} must be a whole number >= 1, got {value!r}")


def cell_text(value: Any) -> str:
    """Model text from a table cell: missing values (None, NaN, pd.NA) become ''."""
    return value if isinstance(value, str) else ""


def done_ids(store: Store, table: str, key: str = "trace_id") -> set[str]:
    """Values of one key column already present in ``table`` (empty set if absent)."""
    if not store.has(table):
        return set()
    return {row[0] for row in store.done_keys(table, [key])}


def problem_rows(store: Store) -> dict[str, dict[str, Any]]:
    """problem_id → the problems row as a plain dict (what tasks take)."""
    frame = read_or_empty(store, "problems")
    rows: dict[str, dict[str, Any]] = {}
    for record in frame.to_dict(orient="records"):
        rows[str(record["problem_id"])] = {k: _plain(v) for k, v in record.items()}
    return rows


def _plain(value: Any) -> Any:
    """pandas/numpy scalars and missing values → plain Python (tasks read plain dicts)."""
    if value is None:
        return None
    if isinstance(value, float) and math.isnan(value):
        return None
    if value is pd.NA or value is pd.NaT:
        return None
    if hasattr(value, "tolist") and not isinstance(value, str):
        return value.tolist()
    return value


def is_missing(value: Any) -> bool:
    """None, NaN or pd.NA (list-like values are never missing)."""
    if value is None or value is pd.NA:
        return True
    return isinstance(value, float) and math.isnan(value)


@functools.lru_cache(maxsize=64)
def get_task_cached(name: str) -> Any:
    """:func:`legival_core.tasks.get_task`, with a StageError for unknown task names."""
    from legival_core.tasks import get_task

    try:
        return get_task(name)
    except KeyError as err:
        raise StageError(str(err).strip("'\"")) from None


def task_of(problem: Mapping[str, Any]) -> Any:
    name = problem.get("task")
    if not name:
        raise StageError(f"problems row {problem.get('problem_id')!r}: field 'task' is empty")
    return get_task_cached(str(name))


def shard_rows(frame: pd.DataFrame, shard: Any, column: str = "trace_id") -> pd.DataFrame:
    """The rows of ``frame`` whose ``column`` (a trace id) the shard owns."""
    if shard.is_whole or frame.empty:
        return frame
    mask = [shard.owns(str(value)) for value in frame[column]]
    return frame.loc[pd.Series(mask, index=frame.index, dtype=bool)]


def chunks(items: Sequence[T] | Iterable[T], size: int) -> Iterator[list[T]]:
    """Consecutive lists of at most ``size`` items."""
    batch: list[T] = []
    for item in items:
        batch.append(item)
        if len(batch) >= size:
            yield batch
            batch = []
    if batch:
        yield batch


def numbered_steps(steps: Sequence[str], max_chars: int) -> str:
    """Steps as a prompt lists them: ``[i] text``, one a line, numbered from 1.

    White space inside a step is folded to single spaces, and a step longer than ``max_chars``
    is cut there and marked ``[...]``, so one runaway step cannot fill the model's context.

    >>> print(numbered_steps(["First  step", "then a much longer step"], max_chars=10))
    [1] First step
    [2] then a muc [...]
    """
    lines = []
    for number, text in enumerate(steps, start=1):
        clean = " ".join(text.split())
        if len(clean) > max_chars:
            clean = clean[:max_chars] + " [...]"
        lines.append(f"[{number}] {clean}")
    return "\n".join(lines)


def to_json(value: Any) -> str:
    """Compact, key-sorted JSON (for the ``sampling`` and ``meta`` columns)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)
