"""Benchmark loaders: every dataset becomes rows of the store's ``problems`` table.

:data:`DATASETS` is the registry. Each entry's ``load(source=None, *, limit=None, ...)``
returns a :class:`pandas.DataFrame` with exactly the columns of
``legival_core.store.schema.TABLES["problems"]`` (problem_id, dataset, task, prompt, gold, choices,
choice_seed, workload, workload_kind, reference_solution, meta).

Where the rows come from
    * ``source=None``: the Hugging Face Hub, through ``datasets.load_dataset`` (the
      ``datasets`` package is optional; without it the loader says how to install it). With
      no network the call fails at once with a one-line :class:`DatasetError`.
    * ``source=<path>``: a local JSONL / JSON / Parquet / CSV file whose rows have the same
      columns as the hub rows. This is how the tests (and offline users) run every loader.
    * ``champ`` reads the JSON shipped inside the ``champ-dataset`` package (no network).
    * ``local`` reads any JSONL / Parquet / CSV with a column mapping
      (``--map prompt=question gold=answer``).

Rows that cannot become a problem (no gold answer, a field of the wrong type) are skipped and
listed, with file, row and field, in ``frame.attrs["skipped"]``; the CLI prints them.

Command line::

    python -m precompute datasets --list
    python -m precompute datasets gsm8k [SOURCE] [--limit N] [--store DIR | --out FILE]
    python -m precompute datasets local FILE --map prompt=question gold=answer --store DIR

Its exit codes are those of every ``python -m precompute`` command (``precompute.cli``): 0
loaded, 2 a bad argument, 5 the file or hub dataset is not there, 6 it cannot be read or gives
no problem, 4 the store cannot take the rows.
"""

from __future__ import annotations

import argparse
import csv
import json
import logging
import os
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from legival_core.store.frames import pandas_dtypes
from legival_core.store.schema import TABLES, SchemaError, validate_frame
from legival_core.tasks.gpqa import choice_seed_for, shuffle_choices
from precompute.errors import InputMissingError, InputUnusableError, UsageError

__all__ = [
    "DATASETS",
    "PROBLEM_COLUMNS",
    "DatasetError",
    "DatasetLoader",
    "DatasetMissingError",
    "DatasetUnreadableError",
    "DatasetUsageError",
    "HubSource",
    "RowError",
    "add_arguments",
    "boxed_answer",
    "count_arithmetic_ops",
    "count_zebra_clues",
    "get_loader",
    "gsm8k_parts",
    "hub_rows",
    "hub_unreachable",
    "iter_file_rows",
    "load_from_args",
    "load_local",
    "load_problems",
    "parse_mapping",
    "register",
]

log = logging.getLogger(__name__)

PROBLEM_COLUMNS: list[str] = TABLES["problems"].columns
LOCAL_SUFFIXES = (".jsonl", ".ndjson", ".json", ".parquet", ".pq", ".csv", ".tsv")
_LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"


class DatasetError(RuntimeError):
    """A dataset cannot be loaded. The message is one line that says what to do; the subclass
    says why (and so the exit code of ``python -m precompute datasets``)."""


class DatasetUsageError(DatasetError, UsageError):
    """A bad argument: an unknown dataset, field or workload, a value out of range (exit 2)."""


class DatasetMissingError(DatasetError, InputMissingError):
    """The file is not there, or the hub dataset cannot be reached or is gated (exit 5)."""


class DatasetUnreadableError(DatasetError, InputUnusableError):
    """The file is there but its rows cannot be read or do not make problems (exit 6)."""


class RowError(ValueError):
    """One source row does not fit; ``field`` names the offending column."""

    def __init__(self, field_name: str | None, message: str):
        self.field = field_name
        super().__init__(message)


# --- reading rows -------------------------------------------------------------------------------


@dataclass(frozen=True)
class HubSource:
    """Where a dataset lives on the Hugging Face Hub."""

    path: str
    configs: tuple[str | None, ...] = (None,)
    split: str = "test"
    gated: bool = False
    #: What to tell a user who has no access (gated datasets).
    access_hint: str = ""


def _is_local(source: str | os.PathLike[str]) -> bool:
    path = Path(source)
    return path.exists() or path.suffix.lower() in LOCAL_SUFFIXES


def iter_file_rows(path: str | os.PathLike[str]) -> Iterator[tuple[int, dict[str, Any]]]:
    """Yield ``(row_number, row)`` from a local JSONL, JSON, Parquet or CSV file.

    Row numbers are 1-based: the line number for JSONL, the data row (header not counted)
    for CSV and Parquet, the array position for a JSON array. Raises :class:`DatasetError`
    for a missing or unreadable file and :class:`RowError`-carrying ``DatasetError`` for a
    line that is not a JSON object (loaders need every row; lenient reading is
    :mod:`precompute.ingest`'s job).
    """
    file = Path(path)
    if not file.is_file():
        raise DatasetMissingError(f"{file}: no such file")
    suffix = file.suffix.lower()
    try:
        if suffix in (".jsonl", ".ndjson"):
            yield from _jsonl_rows(file)
        elif suffix == ".json":
            yield from _json_rows(file)
        elif suffix in (".parquet", ".pq"):
            import pyarrow.parquet as pq

            for number, row in enumerate(pq.read_table(file).to_pylist(), start=1):
                yield number, row
        elif suffix in (".csv", ".tsv"):
            delimiter = "\t" if suffix == ".tsv" else ","
            with file.open(newline="", encoding="utf-8") as handle:
                for number, row in enumerate(csv.DictReader(handle, delimiter=delimiter), 1):
                    yield number, {k: (None if v == "" else v) for k, v in row.items()}
        else:
            raise DatasetUnreadableError(
                f"{file}: unknown file type {suffix!r} (use one of {', '.join(LOCAL_SUFFIXES)})"
            )
    except DatasetError:
        raise
    except (OSError, UnicodeDecodeError, csv.Error, ValueError) as err:
        raise DatasetUnreadableError(f"{file}: cannot read ({type(err).__name__}: {err})") from None
    except Exception as err:  # pyarrow raises its own error types for corrupt Parquet
        raise DatasetUnreadableError(f"{file}: cannot read ({type(err).__name__}: {err})") from None


def _jsonl_rows(file: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    with file.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as err:
                raise DatasetUnreadableError(
                    f"{file}, line {number}: invalid JSON ({err.msg})"
                ) from None
            if not isinstance(row, dict):
                raise DatasetUnreadableError(f"{file}, line {number}: expected a JSON object")
            yield number, row


def _json_rows(file: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    text = file.read_text(encoding="utf-8")
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        # Some hubs ship JSON lines under a .json name.
        yield from _jsonl_rows(file)
        return
    if isinstance(data, dict):
        lists = [v for v in data.values() if isinstance(v, list)]
        if len(lists) != 1:
            raise DatasetUnreadableError(
                f"{file}: expected a JSON array of rows (or one list inside)"
            )
        data = lists[0]
    if not isinstance(data, list):
        raise DatasetUnreadableError(f"{file}: expected a JSON array of rows")
    for number, row in enumerate(data, start=1):
        if not isinstance(row, dict):
            raise DatasetUnreadableError(f"{file}, item {number}: expected a JSON object")
        yield number, row


def _token_present() -> bool:
    if os.environ.get("HF_TOKEN") or os.environ.get("HUGGING_FACE_HUB_TOKEN"):
        return True
    try:
        from huggingface_hub import get_token

        return bool(get_token())
    except Exception:  # no huggingface_hub, or an unreadable token file: treat as no token
        return False


_OFFLINE_FLAGS = ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE")


def _offline_requested() -> bool:
    flags = (os.environ.get(v, "").strip().lower() for v in _OFFLINE_FLAGS)
    return any(flag in ("1", "true", "yes", "on") for flag in flags)


def hub_unreachable(timeout_s: float = 3.0) -> str | None:
    """Why the Hub cannot be reached (``None`` when a TCP connection opens within
    ``timeout_s``). Checked before ``load_dataset``, whose retries take about half a minute."""
    import socket
    from urllib.parse import urlparse

    endpoint = urlparse(os.environ.get("HF_ENDPOINT", "https://huggingface.co"))
    host = endpoint.hostname or "huggingface.co"
    port = endpoint.port or (80 if endpoint.scheme == "http" else 443)
    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            return None
    except OSError as err:
        return f"{host}:{port}: {err.strerror or type(err).__name__}"


def _offline_error(name: str, hub: HubSource, detail: str) -> DatasetError:
    gated = f"; it is also gated: {hub.access_hint}" if hub.gated else ""
    return DatasetMissingError(
        f"cannot load {name}: the Hugging Face Hub is not reachable ({detail}) and the dataset "
        "is not in the local cache (if it is, set HF_HUB_OFFLINE=1); pass a local file of the "
        f"same rows instead{gated}"
    )


def _hub_failure(hub: HubSource, config: str | None, err: BaseException) -> DatasetError:
    """Turn whatever ``datasets``/``huggingface_hub`` raised into one clear line."""
    name = hub.path + (f" ({config})" if config else "")
    kind = type(err).__name__
    text = " ".join(str(err).split())[:300]
    lowered = f"{kind} {text}".lower()
    auth_words = ("gated", "401", "403", "unauthorized", "authenticat", "access to")
    offline_words = (
        "offline",
        "connection",
        "couldn't reach",
        "could not reach",
        "localentrynotfound",
        "timeout",
        "timed out",
        "name resolution",
        "max retries",
        "network",
    )
    if hub.gated and any(w in lowered for w in auth_words):
        return DatasetMissingError(f"{name} is gated on the Hugging Face Hub: {hub.access_hint}")
    if any(w in lowered for w in offline_words):
        return _offline_error(name, hub, f"offline mode or no network; {kind}")
    return DatasetMissingError(f"cannot load {name} from the Hugging Face Hub: {kind}: {text}")


def hub_rows(
    hub: HubSource,
    *,
    config: str | None = None,
    split: str | None = None,
    limit: int | None = None,
) -> Iterator[tuple[str, int, dict[str, Any]]]:
    """Yield ``(config, row_number, row)`` from the Hub via ``datasets.load_dataset``.

    ``config=None`` walks every config listed in ``hub.configs``. Any failure (package
    missing, offline, gated, unknown name) becomes a one-line :class:`DatasetError`.
    """
    if not _offline_requested():
        # Fail fast: without a network the hub client retries for about half a minute.
        reason = hub_unreachable()
        if reason is not None:
            raise _offline_error(hub.path, hub, reason)
        if hub.gated and not _token_present():
            raise DatasetMissingError(
                f"{hub.path} is gated on the Hugging Face Hub: {hub.access_hint}"
            )
    try:
        import datasets as hf_datasets
    except ImportError:
        raise DatasetMissingError(
            f"loading {hub.path} from the Hugging Face Hub needs the 'datasets' package: "
            "pip install datasets (or pass a local JSONL/Parquet/CSV file of the same rows)"
        ) from None
    configs = (config,) if config is not None else hub.configs
    remaining = limit
    for name in configs:
        try:
            data = hf_datasets.load_dataset(hub.path, name, split=split or hub.split)
        except Exception as err:  # the hub stack raises many unrelated types; classify them
            raise _hub_failure(hub, name, err) from None
        for number, row in enumerate(data, start=1):
            if remaining is not None and remaining <= 0:
                return
            yield name or "", number, dict(row)
            if remaining is not None:
                remaining -= 1


# --- field helpers ------------------------------------------------------------------------------


def _check_unicode(row: Mapping[str, Any]) -> None:
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


def _text(row: Mapping[str, Any], name: str, *, required: bool = True) -> str | None:
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


def _integer(row: Mapping[str, Any], name: str, *, required: bool = True) -> int | None:
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


def _sequence(row: Mapping[str, Any], name: str) -> list[Any]:
    """A list column; CSV cells carry it as JSON text."""
    value = _json_cell(row, name, "a list")
    if value is None:
        raise RowError(name, "missing")
    if hasattr(value, "tolist"):  # numpy arrays from some readers
        value = value.tolist()
    if not isinstance(value, list | tuple):
        raise RowError(name, f"expected a list, got {type(value).__name__}")
    return list(value)


def _mapping(row: Mapping[str, Any], name: str) -> dict[str, Any]:
    """An object column; CSV cells carry it as JSON text."""
    value = _json_cell(row, name, "an object")
    if not isinstance(value, dict):
        raise RowError(name, f"expected an object, got {type(value).__name__}")
    return value


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", text.lower()).strip("_") or "x"


def _meta(values: Mapping[str, Any]) -> str:
    clean = {k: v for k, v in values.items() if v is not None}
    return json.dumps(clean, ensure_ascii=False, sort_keys=True, default=str)


def boxed_answer(solution: str) -> str | None:
    r"""Content of the last closed ``\boxed{...}`` (or ``\fbox{...}``) of a reference solution:
    the gold answer of a MATH-style problem. The same extractor as a model's box
    (:func:`legival_core.grading.boxes.last_boxed`), so gold and answer are read alike: escaped
    braces never count, a box nested in another is part of it, an unclosed box is no box.

    >>> boxed_answer(r"so $x = \boxed{\frac{1}{2}}$.")
    '\\frac{1}{2}'
    >>> boxed_answer(r"first \boxed{1}, then \boxed{2}")
    '2'
    >>> boxed_answer("no box") is None
    True
    """
    from legival_core.grading.boxes import last_boxed

    return last_boxed(solution)


_CALC = re.compile(r"<<([^<>]*?)=([^<>]*?)>>")


def count_arithmetic_ops(expression: str) -> int:
    """Number of binary arithmetic operators (+ - * / ** and ×, ÷) in an expression.

    A minus sign with no operand before it (at the start, after an operator or after an
    opening parenthesis) is a sign, not an operation.

    >>> count_arithmetic_ops("48/2")
    1
    >>> count_arithmetic_ops("48+24+10")
    2
    >>> count_arithmetic_ops("-3*(-2)")
    1
    >>> count_arithmetic_ops("2**3")
    1
    """
    operations = 0
    previous = "start"
    index = 0
    while index < len(expression):
        char = expression[index]
        if char.isspace():
            index += 1
            continue
        if char in "+-*/×÷":
            step = 2 if expression.startswith("**", index) else 1
            if previous in ("operand", ")"):
                operations += 1
            previous = "operator"
            index += step
            continue
        previous = "(" if char == "(" else ")" if char == ")" else "operand"
        index += 1
    return operations


def gsm8k_parts(answer: str) -> tuple[str, list[str], int, int]:
    """Split a GSM8K answer into (gold, solution lines, calculator annotations, operations).

    The gold is the text after ``####``. Solution lines are the non-empty lines before it
    with the ``<<expr=value>>`` calculator annotations removed; operations counts binary
    operators in the annotations' left-hand sides (:func:`count_arithmetic_ops`).

    >>> gold, lines, calls, ops = gsm8k_parts(
    ...     "She has 3*4 = <<3*4=12>>12.\\nThen 12+5+1 = <<12+5+1=18>>18.\\n#### 18")
    >>> gold, len(lines), calls, ops
    ('18', 2, 2, 3)
    """
    if "####" not in answer:
        raise RowError("answer", "no '####' marker before the final answer")
    body, _, tail = answer.rpartition("####")
    gold = tail.strip()
    if not gold:
        raise RowError("answer", "empty final answer after '####'")
    annotations = _CALC.findall(body)
    operations = sum(count_arithmetic_ops(lhs) for lhs, _ in annotations)
    lines = [_CALC.sub("", line).strip() for line in body.splitlines()]
    return gold, [line for line in lines if line], len(annotations), operations


def count_zebra_clues(puzzle: str) -> int | None:
    """Number of numbered clues after the ``Clues`` heading of a ZebraLogic puzzle.

    >>> count_zebra_clues("Houses...\\n\\n## Clues:\\n1. A is left of B.\\n2. C is in house 2.\\n")
    2
    >>> count_zebra_clues("no clue section") is None
    True
    """
    match = re.search(r"^\s*#*\s*clues\s*:?\s*$", puzzle, flags=re.IGNORECASE | re.MULTILINE)
    if match is None:
        return None
    clues = re.findall(r"^\s*\d+\s*[.)]\s+\S", puzzle[match.end() :], flags=re.MULTILINE)
    return len(clues) or None


# --- converters: one hub row -> one problem dict --------------------------------------------------


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


def _problem(ctx: RowContext, **values: Any) -> dict[str, Any]:
    row = dict.fromkeys(PROBLEM_COLUMNS)
    row.update(dataset=ctx.dataset, task=ctx.task)
    row.update(values)
    return row


def _math_full(row: Mapping[str, Any], ctx: RowContext) -> dict[str, Any]:
    solution = _text(row, "solution")
    assert solution is not None
    gold = boxed_answer(solution)
    if gold is None:
        raise RowError("solution", "no \\boxed{...} answer in the solution")
    subject = _text(row, "type", required=False) or ctx.config or "unknown"
    index = ctx.next_index(subject)
    return _problem(
        ctx,
        problem_id=f"{ctx.dataset}/{ctx.split}/{_slug(subject)}/{index}",
        prompt=_text(row, "problem"),
        gold=gold,
        reference_solution=solution,
        meta=_meta({"subject": subject, "level": row.get("level"), "index": index}),
    )


def _math500(row: Mapping[str, Any], ctx: RowContext) -> dict[str, Any]:
    unique_id = _text(row, "unique_id")
    assert unique_id is not None
    stem = unique_id.removesuffix(".json")
    return _problem(
        ctx,
        problem_id=f"{ctx.dataset}/{stem}",
        prompt=_text(row, "problem"),
        gold=_text(row, "answer"),
        reference_solution=_text(row, "solution", required=False),
        meta=_meta({"subject": row.get("subject"), "level": row.get("level")}),
    )


def _gpqa(row: Mapping[str, Any], ctx: RowContext) -> dict[str, Any]:
    record = _text(row, "Record ID")
    assert record is not None
    correct = (_text(row, "Correct Answer") or "").strip()
    wrong = [(_text(row, f"Incorrect Answer {i}") or "").strip() for i in (1, 2, 3)]
    pid = f"{ctx.dataset}/{record}"
    # The task family owns the shuffle convention; we record the seed it used.
    choice_seed = choice_seed_for(pid, ctx.seed)
    shuffled, gold_letter = shuffle_choices(correct, wrong, choice_seed)
    return _problem(
        ctx,
        problem_id=pid,
        prompt=(_text(row, "Question") or "").strip(),
        gold=gold_letter,
        choices=shuffled,
        choice_seed=choice_seed,
        reference_solution=_text(row, "Explanation", required=False),
        meta=_meta(
            {
                "correct_answer": correct,
                "subdomain": row.get("Subdomain"),
                "domain": row.get("High-level domain"),
                "run_seed": ctx.seed,
                "config": ctx.config or None,
            }
        ),
    )


def _connections(row: Mapping[str, Any], ctx: RowContext) -> dict[str, Any]:
    words = [str(w) for w in _sequence(row, "words")]
    groups = _sequence(row, "answers")
    gold_groups: list[list[str]] = []
    categories: list[str] = []
    for number, group in enumerate(groups, start=1):
        if not isinstance(group, dict) or not isinstance(group.get("words"), list | tuple):
            raise RowError("answers", f"group {number} has no word list")
        gold_groups.append([str(w) for w in group["words"]])
        categories.append(str(group.get("answerDescription", "")))
    if len(words) != 16 or len(gold_groups) != 4 or any(len(g) != 4 for g in gold_groups):
        raise RowError("answers", "expected 16 words in 4 groups of 4")
    if sorted(w.casefold() for g in gold_groups for w in g) != sorted(w.casefold() for w in words):
        raise RowError("answers", "the groups do not use exactly the puzzle's 16 words")
    contest = _text(row, "contest", required=False) or ""
    number_match = re.search(r"#\s*(\d+)", contest)
    key = number_match.group(1) if number_match else _text(row, "date", required=False)
    return _problem(
        ctx,
        problem_id=f"{ctx.dataset}/{key or ctx.number}",
        prompt=", ".join(words),
        gold=json.dumps(gold_groups, ensure_ascii=False),
        meta=_meta(
            {
                "words": words,
                "categories": categories,
                "date": row.get("date"),
                "contest": contest or None,
                "difficulty": row.get("difficulty"),
            }
        ),
    )


def _gsm8k(row: Mapping[str, Any], ctx: RowContext) -> dict[str, Any]:
    answer = _text(row, "answer")
    assert answer is not None
    gold, lines, calls, operations = gsm8k_parts(answer)
    kind = ctx.options.get("workload", "gold_steps")
    native = {"gold_steps": len(lines), "arith_ops": operations}
    if kind not in native:
        raise DatasetUsageError(
            f"gsm8k: unknown workload {kind!r} (choose gold_steps or arith_ops)"
        )
    workload = native[kind]
    return _problem(
        ctx,
        problem_id=f"{ctx.dataset}/{ctx.split}/{ctx.number - 1}",
        prompt=_text(row, "question"),
        gold=gold,
        workload=float(workload) if workload > 0 else None,
        workload_kind=kind if workload > 0 else None,
        reference_solution="\n".join(lines),
        meta=_meta({"gold_steps": len(lines), "arith_ops": operations, "calc_calls": calls}),
    )


def _lsat(row: Mapping[str, Any], ctx: RowContext) -> dict[str, Any]:
    options = [str(o) for o in _sequence(row, "answers")]
    label = _integer(row, "label")
    assert label is not None
    if not 0 <= label < len(options):
        raise RowError("label", f"{label} is not an index into {len(options)} options")
    ident = _text(row, "id_string", required=False) or str(ctx.number)
    context = (_text(row, "context") or "").strip()
    question = (_text(row, "question") or "").strip()
    return _problem(
        ctx,
        problem_id=f"{ctx.dataset}/{ctx.split}/{ident}",
        prompt=f"{context}\n\n{question}",
        gold=_LETTERS[label],
        choices=options,
        meta=_meta({"id_string": ident}),
    )


_PROOFWRITER_INSTRUCTIONS = (
    "Using only the facts and rules above, decide whether the statement is True, False or "
    "Unknown. Reason step by step, then end with a line 'Answer: True', 'Answer: False' or "
    "'Answer: Unknown'."
)


def _proofwriter(row: Mapping[str, Any], ctx: RowContext) -> dict[str, Any]:
    ident = _text(row, "id")
    depth = _integer(row, "QDep")
    assert depth is not None
    config = _text(row, "config", required=False)
    theory = (_text(row, "theory") or "").strip()
    question = (_text(row, "question") or "").strip()
    # W must be > 0 for the overhead VO = T / W; depth-0 questions (a fact look-up) get no
    # native workload [choice] rather than an invented offset.
    return _problem(
        ctx,
        problem_id=f"{ctx.dataset}/{config + '/' if config else ''}{ident}",
        prompt=f"{theory}\n\nQuestion: {question}",
        gold=_text(row, "answer"),
        workload=float(depth) if depth > 0 else None,
        workload_kind="proof_depth" if depth > 0 else None,
        reference_solution=_text(row, "allProofs", required=False),
        meta=_meta(
            {
                "proof_depth": depth,
                "max_depth": row.get("maxD"),
                "facts": row.get("NFact"),
                "rules": row.get("NRule"),
                "config": config,
                "instructions": _PROOFWRITER_INSTRUCTIONS,
            }
        ),
    )


def _zebralogic(row: Mapping[str, Any], ctx: RowContext) -> dict[str, Any]:
    puzzle = _text(row, "puzzle")
    assert puzzle is not None
    solution = _mapping(row, "solution")
    if not isinstance(solution.get("header"), list | tuple) or not isinstance(
        solution.get("rows"), list | tuple
    ):
        raise RowError("solution", "expected an object with 'header' and 'rows'")
    gold = {
        "header": [str(h) for h in solution["header"]],
        "rows": [[str(cell) for cell in r] for r in solution["rows"]],
    }
    clues = count_zebra_clues(puzzle)
    return _problem(
        ctx,
        problem_id=f"{ctx.dataset}/{_text(row, 'id')}",
        prompt=puzzle,
        gold=json.dumps(gold, ensure_ascii=False),
        workload=float(clues) if clues else None,
        workload_kind="clues" if clues else None,
        meta=_meta({"size": row.get("size"), "clues": clues}),
    )


# --- the registry -------------------------------------------------------------------------------


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


DATASETS: dict[str, DatasetLoader] = {}


def _finish(rows: list[dict[str, Any]], skipped: list[str], where: str) -> pd.DataFrame:
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


def _hub_format_loader(
    name: str, task: str, convert: Converter, hub: HubSource
) -> Callable[..., pd.DataFrame]:
    def load(
        source: str | os.PathLike[str] | None = None,
        *,
        limit: int | None = None,
        split: str | None = None,
        config: str | None = None,
        seed: int = 0,
        **options: Any,
    ) -> pd.DataFrame:
        if limit is not None and limit < 0:
            raise DatasetUsageError(f"{name}: limit must be >= 0, got {limit}")
        chosen_split = split or hub.split
        if source is not None and _is_local(source):
            where = str(source)
            stream: Iterator[tuple[str, int, dict[str, Any]]] = (
                (config or "", number, row) for number, row in iter_file_rows(source)
            )
        else:
            hub_here = hub if source is None else HubSource(str(source), (None,), hub.split)
            where = f"hub:{hub_here.path}"
            stream = hub_rows(hub_here, config=config, split=chosen_split, limit=None)
        rows: list[dict[str, Any]] = []
        skipped: list[str] = []
        counters: dict[str, int] = {}
        for cfg, number, raw in stream:
            if limit is not None and len(rows) >= limit:
                break
            ctx = RowContext(name, task, number, cfg, chosen_split, seed, options, counters)
            try:
                _check_unicode(raw)
                problem = convert(raw, ctx)
            except RowError as err:
                at = f"{where}{f' [{cfg}]' if cfg else ''}, row {number}"
                skipped.append(f"{at}, field '{err.field}': {err}")
                continue
            problem["meta"] = _add_source(problem["meta"], where, cfg, chosen_split)
            rows.append(problem)
        return _finish(rows, skipped, where)

    load.__name__ = f"load_{name}"
    load.__doc__ = (
        f"Load {name} problems from the Hub ({hub.path}) or from a local file of its rows."
    )
    return load


def _add_source(meta: str | None, where: str, config: str, split: str) -> str:
    values = json.loads(meta) if meta else {}
    values.setdefault("source", where)
    if config:
        values.setdefault("hub_config", config)
    values.setdefault("split", split)
    return _meta(values)


def register(loader: DatasetLoader) -> DatasetLoader:
    """Add a loader to :data:`DATASETS` (a later one with the same name replaces it)."""
    DATASETS[loader.name] = loader
    return loader


def _register_hub(
    name: str, task: str, convert: Converter, hub: HubSource, description: str, credit: str
) -> None:
    load = _hub_format_loader(name, task, convert, hub)
    register(DatasetLoader(name, task, description, load, hub, credit))


_MATH_SUBJECTS = (
    "algebra",
    "counting_and_probability",
    "geometry",
    "intermediate_algebra",
    "number_theory",
    "prealgebra",
    "precalculus",
)

_register_hub(
    "math",
    "math",
    _math_full,
    HubSource("EleutherAI/hendrycks_math", _MATH_SUBJECTS, "test"),
    "MATH (Hendrycks et al.), all 7 subjects; gold = last \\boxed{} of the solution.",
    "MATH, MIT licence",
)
_register_hub(
    "math500",
    "math",
    _math500,
    HubSource("HuggingFaceH4/MATH-500", (None,), "test"),
    "MATH-500 subset of MATH with extracted answers.",
    "MATH, MIT licence",
)
_register_hub(
    "gpqa",
    "gpqa",
    _gpqa,
    HubSource(
        "Idavidrein/gpqa",
        ("gpqa_main",),
        "train",
        gated=True,
        access_hint=(
            "log in at https://huggingface.co, accept the terms on "
            "https://huggingface.co/datasets/Idavidrein/gpqa, create a read token at "
            "https://huggingface.co/settings/tokens and export HF_TOKEN=<token> "
            "(or pass a local CSV with the same columns)"
        ),
    ),
    "GPQA (main, 448 questions); the four options shuffled with a recorded per-problem seed.",
    "GPQA, CC BY 4.0; do not republish the questions in plain text",
)
_register_hub(
    "connections",
    "connections",
    _connections,
    HubSource("tm21cy/NYT-Connections", (None,), "train"),
    "NYT Connections (652 puzzles): 16 words into 4 groups of 4; gold = JSON list of groups.",
    "tm21cy/NYT-Connections, CC BY 4.0",
)
_register_hub(
    "gsm8k",
    "gsm8k",
    _gsm8k,
    HubSource("openai/gsm8k", ("main",), "test"),
    "GSM8K; gold after '####'; workload = gold solution lines (or arith_ops).",
    "GSM8K, MIT licence",
)
_register_hub(
    "lsat",
    "gpqa",  # lettered multiple choice; the gpqa family reads the letters from the choices
    _lsat,
    HubSource("tasksource/lsat-ar", (None,), "test"),
    "AR-LSAT analytical reasoning, five options A-E.",
    "AR-LSAT (Zhong et al.), MIT licence",
)
_register_hub(
    "proofwriter",
    "jsonl",  # exact match of True/False/Unknown; the answer format is in meta.instructions
    _proofwriter,
    HubSource("tasksource/proofwriter", (None,), "test"),
    "ProofWriter True/False/Unknown questions; workload = proof depth QDep (>0).",
    "ProofWriter (Tafjord et al.), CC BY 4.0",
)
_register_hub(
    "zebralogic",
    "zebralogic",
    _zebralogic,
    HubSource("allenai/ZebraLogicBench", ("grid_mode",), "test"),
    "ZebraLogic grid puzzles; gold = solution grid JSON; workload = number of clues.",
    "ZebraLogic (Lin et al.), see the dataset card",
)


def _load_champ(
    source: str | os.PathLike[str] | None = None, *, limit: int | None = None, **_: Any
) -> pd.DataFrame:
    from precompute.champ import champ_problems

    if source is not None:
        raise DatasetUsageError(
            "champ: loads from the installed 'champ-dataset' package; no source"
        )
    return champ_problems(limit=limit)


register(
    DatasetLoader(
        "champ",
        "champ",
        "CHAMP: 270 competition problems, gold answers, human step-by-step solutions "
        "(workload = gold solution steps), from the champ-dataset package (offline).",
        _load_champ,
        credit="CHAMP (Mao, Kim, Zhou 2024), MIT licence",
    )
)


# --- local files with a column mapping ----------------------------------------------------------

#: Fields of the problems table a ``--map`` may fill (``problem_id`` defaults to the row number).
LOCAL_FIELDS = ("problem_id", "prompt", "gold", "choices", "workload", "workload_kind",
                "reference_solution")  # fmt: skip


def parse_mapping(items: Sequence[str] | None) -> dict[str, str]:
    """``["prompt=question", "gold=answer"]`` -> ``{"prompt": "question", "gold": "answer"}``.

    The one parser of ``--map FIELD=COLUMN`` options (``datasets`` and ``ingest``). A field
    mapped twice is refused rather than letting the last one win silently.

    >>> parse_mapping(["prompt=question", "gold=answer"])
    {'prompt': 'question', 'gold': 'answer'}
    """
    mapping: dict[str, str] = {}
    for item in items or ():
        target, sep, column = item.partition("=")
        if not sep or not target.strip() or not column.strip():
            raise DatasetUsageError(f"--map expects FIELD=COLUMN, got {item!r}")
        if target.strip() in mapping:
            raise DatasetUsageError(
                f"--map gives field {target.strip()!r} twice "
                f"({mapping[target.strip()]!r} and {column.strip()!r}); give it once"
            )
        mapping[target.strip()] = column.strip()
    return mapping


def load_local(
    source: str | os.PathLike[str] | None = None,
    *,
    mapping: Mapping[str, str] | None = None,
    dataset: str | None = None,
    task: str = "math",
    limit: int | None = None,
    **_: Any,
) -> pd.DataFrame:
    """Problems from any JSONL/JSON/Parquet/CSV file, columns renamed by ``mapping``.

    ``mapping`` maps a problems field to a column of the file (``{"prompt": "question"}``);
    unmapped fields are looked up under their own name. Columns not used go into ``meta``.
    ``problem_id`` becomes ``<dataset>/<id>`` (the row number when there is no id column).
    """
    if source is None:
        raise DatasetUsageError("local: give the file to load (JSONL, JSON, Parquet or CSV)")
    mapping = dict(mapping or {})
    unknown = sorted(set(mapping) - set(LOCAL_FIELDS))
    if unknown:
        raise DatasetUsageError(
            f"local: cannot map {unknown}; fields are {', '.join(LOCAL_FIELDS)}"
        )
    path = Path(source)
    name = dataset or _slug(path.stem)
    rows: list[dict[str, Any]] = []
    skipped: list[str] = []
    for number, raw in iter_file_rows(path):
        if limit is not None and len(rows) >= limit:
            break
        columns = {f: mapping.get(f, f) for f in LOCAL_FIELDS}
        try:
            _check_unicode(raw)
            ident = _text(raw, columns["problem_id"], required=False) or str(number)
            choices = None
            if raw.get(columns["choices"]) is not None:
                choices = [str(c) for c in _sequence(raw, columns["choices"])]
            workload = raw.get(columns["workload"])
            if workload is not None:
                try:
                    workload = float(workload)
                except (TypeError, ValueError):
                    raise RowError(columns["workload"], f"not a number: {workload!r}") from None
                if not workload > 0:
                    raise RowError(columns["workload"], f"workload must be > 0, got {workload}")
            used = set(columns.values())
            extra = {k: v for k, v in raw.items() if k not in used}
            rows.append(
                {
                    "problem_id": ident if ident.startswith(f"{name}/") else f"{name}/{ident}",
                    "dataset": name,
                    "task": task,
                    "prompt": _text(raw, columns["prompt"]),
                    "gold": _text(raw, columns["gold"]),
                    "choices": choices,
                    "choice_seed": None,
                    "workload": workload,
                    "workload_kind": _text(raw, columns["workload_kind"], required=False)
                    or ("custom" if workload is not None else None),
                    "reference_solution": _text(raw, columns["reference_solution"], required=False),
                    "meta": _meta({**extra, "source": str(path)}),
                }
            )
        except RowError as err:
            skipped.append(f"{path}, row {number}, field '{err.field}': {err}")
    return _finish(rows, skipped, str(path))


register(
    DatasetLoader(
        "local",
        "math",
        "Any JSONL/JSON/Parquet/CSV file with a column mapping (--map prompt=question ...).",
        load_local,
    )
)


def get_loader(name: str) -> DatasetLoader:
    """The registered loader called ``name``, with a clear error for an unknown one."""
    try:
        return DATASETS[name]
    except KeyError:
        raise DatasetUsageError(
            f"unknown dataset {name!r}; known: {', '.join(sorted(DATASETS))}"
        ) from None


def load_problems(name: str, source: str | None = None, **kwargs: Any) -> pd.DataFrame:
    """``DATASETS[name].load(source, **kwargs)`` with a clear error for an unknown name."""
    return get_loader(name).load(source, **kwargs)


# --- command line -------------------------------------------------------------------------------


def _write_out(frame: pd.DataFrame, out: Path) -> None:
    suffix = out.suffix.lower()
    out.parent.mkdir(parents=True, exist_ok=True)
    if suffix in (".parquet", ".pq"):
        import pyarrow.parquet as pq

        pq.write_table(validate_frame("problems", frame), out)
    elif suffix == ".csv":
        frame.to_csv(out, index=False)
    elif suffix in (".jsonl", ".ndjson"):
        frame.to_json(out, orient="records", lines=True, force_ascii=False)
    else:
        raise DatasetUsageError(f"--out: use .parquet, .csv or .jsonl, not {suffix!r}")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``python -m precompute datasets`` (the CLI builds its parser from these)."""
    parser.add_argument("name", nargs="?", help="dataset name (see --list)")
    parser.add_argument("source", nargs="?", help="local file of hub-format rows (optional)")
    parser.add_argument("--list", action="store_true", help="list the datasets and exit")
    parser.add_argument("--limit", type=int, default=None)
    parser.add_argument("--split", default=None)
    parser.add_argument("--config", default=None)
    parser.add_argument("--seed", type=int, default=0, help="GPQA option-shuffle seed")
    parser.add_argument("--map", nargs="*", default=None, metavar="FIELD=COLUMN")
    parser.add_argument("--dataset", default=None, help="dataset name for 'local'")
    parser.add_argument("--task", default=None, help="task family for 'local'")
    parser.add_argument("--store", default=None, help="write the problems into this store")
    parser.add_argument("--out", default=None, help="write to .parquet/.csv/.jsonl")


def load_from_args(args: argparse.Namespace) -> pd.DataFrame | None:
    """Do what :func:`add_arguments` parsed: list the loaders, or load one and write it out.

    Returns the loaded frame (None for ``--list``). Raises :class:`DatasetUnreadableError`
    when the loader gives no problem at all, so that the command line exits with 6.
    """
    if args.list or not args.name:
        for loader in DATASETS.values():
            hub = f" [hub: {loader.hub.path}]" if loader.hub else ""
            print(f"{loader.name:12s} {loader.description}{hub}")
        return None
    kwargs: dict[str, Any] = {"limit": args.limit}
    if args.name == "local":
        kwargs.update(mapping=parse_mapping(args.map), dataset=args.dataset)
        if args.task:
            kwargs["task"] = args.task
    else:
        kwargs.update(split=args.split, config=args.config, seed=args.seed)
        if args.name == "champ":
            kwargs = {"limit": args.limit}
    frame = load_problems(args.name, args.source, **kwargs)
    skipped = frame.attrs.get("skipped", [])
    print(f"{args.name}: {len(frame)} problems loaded, {len(skipped)} rows skipped")
    for message in skipped[:5]:
        print(f"  skipped {message}")
    if not len(frame):
        raise DatasetUnreadableError(f"{args.name}: no problem could be loaded")
    if args.out:
        _write_out(frame, Path(args.out))
        print(f"wrote {args.out}")
    if args.store:
        from legival_core.store.store import Store

        store = Store.create(args.store)
        store.write("problems", frame, stage=f"datasets.{args.name}")
        print(f"wrote {len(frame)} problems to {args.store}")
    return frame
