"""What every dataset loader shares: the errors, the records (:class:`DatasetLoader`,
:class:`HubSource`, :class:`RowContext`), the readers of one field of a source row, and
:func:`finish_frame`, which turns the converted rows into the checked problems frame.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, overload

import pandas as pd

from legival_core.store.frames import pandas_dtypes
from legival_core.store.schema import TABLES, SchemaError, validate_frame
from precompute.errors import FieldError, InputMissingError, InputUnusableError, UsageError

__all__ = [
    "PROBLEM_COLUMNS",
    "Converter",
    "DatasetError",
    "DatasetLoader",
    "DatasetMissingError",
    "DatasetUnreadableError",
    "DatasetUsageError",
    "HubSource",
    "RowContext",
    "RowError",
    "check_unicode",
    "finish_frame",
    "integer_field",
    "list_field",
    "meta_json",
    "object_field",
    "problem_row",
    "slug",
    "text_field",
]

log = logging.getLogger(__name__)

PROBLEM_COLUMNS: list[str] = TABLES["problems"].columns


class DatasetError(RuntimeError):
    """A dataset cannot be loaded. The message is one line that says what to do; the subclass
    says why (and so the exit code of ``python -m precompute datasets``)."""


class DatasetUsageError(DatasetError, UsageError):
    """A bad argument: an unknown dataset, field or workload, a value out of range (exit 2)."""


class DatasetMissingError(DatasetError, InputMissingError):
    """The file is not there, or the hub dataset cannot be reached or is gated (exit 5)."""


class DatasetUnreadableError(DatasetError, InputUnusableError):
    """The file is there but its rows cannot be read or do not make problems (exit 6)."""


class RowError(FieldError):
    """One source row does not fit; ``field`` names the offending column."""


# --- the records ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class HubSource:
    """Where a dataset lives on the Hugging Face Hub."""

    path: str
    configs: tuple[str | None, ...] = (None,)
    split: str = "test"
    gated: bool = False
    #: What to tell a user who has no access (gated datasets).
    access_hint: str = ""


@dataclass(frozen=True)
class DatasetLoader:
    """One dataset: how to load it and what it is."""

    name: str
    task: str
    description: str
    load: Callable[..., pd.DataFrame]
    hub: HubSource | None = None
    #: Where its text comes from and under which terms (shown by ``--list``).
    credit: str = ""


@dataclass
class RowContext:
    """What a converter may need beyond the row: its position and the loader options."""

    dataset: str
    task: str
    number: int
    config: str
    split: str
    seed: int = 0
    options: dict[str, Any] = field(default_factory=dict)
    counters: dict[str, int] = field(default_factory=dict)

    def next_index(self, key: str) -> int:
        """0-based running index of rows sharing ``key`` (for datasets without ids)."""
        value = self.counters.get(key, 0)
        self.counters[key] = value + 1
        return value


Converter = Callable[[Mapping[str, Any], RowContext], dict[str, Any]]


# --- one field of a source row --------------------------------------------------------------------


def check_unicode(row: Mapping[str, Any]) -> None:
    """Refuse a row holding a lone surrogate (a JSON escape such as ``"\\ud800"``) in any of
    its texts, naming the column: such text cannot be written as UTF-8, so it would fail the
    whole load at its write instead of skipping its own row."""
    for name, value in row.items():
        stack = [value]
        while stack:
            item = stack.pop()
            if isinstance(item, str):
                try:
                    item.encode("utf-8")
                except UnicodeEncodeError:
                    raise RowError(
                        str(name), "is not valid Unicode (holds a lone surrogate)"
                    ) from None
            elif isinstance(item, dict):
                stack.extend(item.values())
            elif isinstance(item, list | tuple):
                stack.extend(item)


@overload
def text_field(row: Mapping[str, Any], name: str, *, required: Literal[True] = True) -> str: ...
@overload
def text_field(row: Mapping[str, Any], name: str, *, required: bool) -> str | None: ...
def text_field(row: Mapping[str, Any], name: str, *, required: bool = True) -> str | None:
    """The text in ``row[name]`` (a number becomes its text); ``required`` refuses a missing or
    blank one, otherwise a missing one is None."""
    value = row.get(name)
    if value is None or (isinstance(value, float) and value != value):
        if required:
            raise RowError(name, "missing")
        return None
    if isinstance(value, bool):
        raise RowError(name, f"expected text, got {value!r}")
    if isinstance(value, int | float):
        return str(value)
    if not isinstance(value, str):
        raise RowError(name, f"expected text, got {type(value).__name__}")
    if required and not value.strip():
        raise RowError(name, "empty")
    return value


def integer_field(row: Mapping[str, Any], name: str, *, required: bool = True) -> int | None:
    """The whole number in ``row[name]`` (``3``, ``3.0`` or ``"3"``); ``required`` refuses a
    missing one, otherwise a missing one is None."""
    value = row.get(name)
    if value is None:
        if required:
            raise RowError(name, "missing")
        return None
    if isinstance(value, bool):
        raise RowError(name, f"expected a whole number, got {value!r}")
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str):
        try:
            return int(value.strip())
        except ValueError:
            pass
    raise RowError(name, f"expected a whole number, got {value!r}")


def _json_cell(row: Mapping[str, Any], name: str, what: str) -> Any:
    """The cell ``row[name]``, decoded first when it is text: CSV carries a list or an object
    as JSON text, the other formats as the value itself."""
    value = row.get(name)
    if not isinstance(value, str):
        return value
    try:
        return json.loads(value)
    except json.JSONDecodeError:
        raise RowError(name, f"expected {what} (JSON text in CSV cells)") from None


def list_field(row: Mapping[str, Any], name: str) -> list[Any]:
    """A list column; CSV cells carry it as JSON text."""
    value = _json_cell(row, name, "a list")
    if value is None:
        raise RowError(name, "missing")
    if hasattr(value, "tolist"):  # numpy arrays from some readers
        value = value.tolist()
    if not isinstance(value, list | tuple):
        raise RowError(name, f"expected a list, got {type(value).__name__}")
    return list(value)


def object_field(row: Mapping[str, Any], name: str) -> dict[str, Any]:
    """An object column; CSV cells carry it as JSON text."""
    value = _json_cell(row, name, "an object")
    if not isinstance(value, dict):
        raise RowError(name, f"expected an object, got {type(value).__name__}")
    return value


def slug(text: str) -> str:
    """``text`` as lower-case letters, digits and underscores, for a problem id.

    >>> slug("Counting & Probability")
    'counting_probability'
    """
    return re.sub(r"[^a-z0-9]+", "_", text.lower()).strip("_") or "x"


def meta_json(values: Mapping[str, Any]) -> str:
    """The ``meta`` column: ``values`` without the None ones, as sorted JSON.

    >>> meta_json({"level": 3, "subject": None, "index": 0})
    '{"index": 0, "level": 3}'
    """
    clean = {k: v for k, v in values.items() if v is not None}
    return json.dumps(clean, ensure_ascii=False, sort_keys=True, default=str)


# --- the problems frame ---------------------------------------------------------------------------


def problem_row(ctx: RowContext, **values: Any) -> dict[str, Any]:
    """One row of the problems table: every column None but the dataset, the task and
    ``values``."""
    row = dict.fromkeys(PROBLEM_COLUMNS)
    row.update(dataset=ctx.dataset, task=ctx.task)
    row.update(values)
    return row


def finish_frame(rows: list[dict[str, Any]], skipped: list[str], where: str) -> pd.DataFrame:
    """Build the problems frame, check it against the schema, keep the skip list."""
    frame = pd.DataFrame(rows, columns=PROBLEM_COLUMNS)
    duplicated = frame["problem_id"].duplicated(keep="first")
    for pid in frame.loc[duplicated, "problem_id"]:
        skipped.append(f"{where}: duplicate problem_id {pid!r} (first one kept)")
    frame = frame.loc[~duplicated].reset_index(drop=True)
    try:
        validate_frame("problems", frame)
    except SchemaError as err:
        raise DatasetUnreadableError(f"{where}: {err}") from None
    frame = frame.astype(pandas_dtypes("problems"))  # the dtypes Store.read gives
    frame.attrs["skipped"] = skipped
    for message in skipped[:5]:
        log.warning("skipped %s", message)
    return frame
