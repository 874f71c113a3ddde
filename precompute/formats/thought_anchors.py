"""``--format thought-anchors``: problem folders of Thought Anchors (Bogdan et al., "Thought
Anchors: Which LLM Reasoning Steps Matter?", arXiv 2506.19143), whose traces come already cut
into chunks and scored by resampling.

A problem folder holds ``problem.json`` (``problem``, ``gt_answer``, …), ``base_solution.json``
(``prompt``, ``solution``, ``full_cot``, ``answer``, ``is_correct``) and
``chunks_labeled.json`` (a list; per chunk ``chunk``, ``chunk_idx``, ``accuracy``,
``counterfactual_importance_accuracy``, ``resampling_importance_accuracy``,
``function_tags``). ``FILE`` may be one problem folder or any folder above several (their
layout: ``<model>/temperature_…/correct_base_solution/problem_<n>/``).

=========================================  =======================================================
Thought Anchors                            ingest
=========================================  =======================================================
the folder's name (``problem_330``)        ``problem_id``
``problem.json`` ``problem``               ``prompt``
``problem.json`` ``gt_answer``             ``gold``
``base_solution.json`` ``solution``        ``raw``; split on its last ``</think>`` into
                                           ``reasoning`` and ``answer``
``base_solution.json`` ``is_correct``      the tool's verdict (``tool_grades``)
``chunks_labeled.json``                    ``chunk_importance``: each chunk's text, its character
                                           span in the reasoning (found in order, white space
                                           aside; null when the text is not there), importances
                                           and tags
the folder above ``temperature_…``         the teacher (``--teacher`` overrides)
several base solutions of one problem      ``sample`` 0, 1, … in folder order
=========================================  =======================================================

The files are opened as a store opens its own (:func:`precompute.formats.base.read_plain_file`):
no symbolic link is followed and no FIFO or device read, and each file is at most
:data:`FILE_FACTOR` times ``--max-trace-mb``. Every chunk field is checked before anything is
written: a ``chunk_idx`` that is not a whole number in the store's int32 range, or repeats, or a
chunk text holding a lone surrogate, quarantines the folder.
"""

from __future__ import annotations

import bisect
import json
import os
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from precompute.formats.base import (
    FormatMissingError,
    RecordError,
    SourceRow,
    TraceFormat,
    as_list,
    as_object,
    as_verdict,
    read_plain_file,
    split_on_last_think,
    text_or_none,
    whole_number,
)

__all__ = ["ThoughtAnchorsFormat", "chunk_spans"]

CHUNKS_FILE = "chunks_labeled.json"
#: Each JSON file of a problem folder may be this many times ``--max-trace-mb`` (the chunks
#: file repeats the solution's text, cut into chunks, beside their numbers).
FILE_FACTOR = 4


def chunk_spans(reasoning: str, chunks: list[str]) -> list[tuple[int, int] | None]:
    """The character span of each chunk in ``reasoning``, searched in order (a chunk starts
    at or after the end of the previous one found); None for a chunk not there.

    A chunk is matched as it is, else with each run of white space in it standing for any run
    in the reasoning: their splitter strips chunks and may turn a line break into a space.
    Other characters must match.

    Linear in the lengths: the second search runs on the reasoning with each run of white space
    written as one space (built once per trace), with ``str.find``, whose worst case is linear
    (a regular expression ``a\\s+b\\s+…`` retried at every start was O(N·M): 0.4 MB of
    reasoning and a 40 kB chunk not in it took over a minute).

    >>> chunk_spans("First. Then two. Done.", ["First.", "Then two.", "Nope.", "Done."])
    [(0, 6), (7, 16), None, (17, 22)]
    >>> chunk_spans("One\\nline.", ["One  line."])
    [(0, 9)]
    """
    spans: list[tuple[int, int] | None] = []
    position = 0
    collapsed: _Collapsed | None = None
    for chunk in chunks:
        text = chunk.strip()
        span: tuple[int, int] | None = None
        if text:
            at = reasoning.find(text, position)
            if at >= 0:
                span = at, at + len(text)
            else:
                collapsed = collapsed or _Collapsed(reasoning)
                span = collapsed.find(" ".join(text.split()), position)
        spans.append(span)
        if span is not None:
            position = span[1]
    return spans


class _Collapsed:
    """A text with each run of white space written as one space, and the way back: the words
    (runs of other characters) with where each starts in the original and in the collapsed
    text."""

    def __init__(self, text: str):
        words = list(re.finditer(r"\S+", text))
        self.text = " ".join(w.group() for w in words)
        self.original_starts = [w.start() for w in words]
        self.lengths = [w.end() - w.start() for w in words]
        self.collapsed_starts: list[int] = []
        at = 0
        for length in self.lengths:
            self.collapsed_starts.append(at)
            at += length + 1

    def find(self, needle: str, position: int) -> tuple[int, int] | None:
        """The span in the original text of ``needle`` (words joined by single spaces), found
        at or after the original ``position``; None when it is not there."""
        if not needle:
            return None
        at = self.text.find(needle, self._collapsed(position))
        if at < 0:
            return None
        return self._original(at), self._original(at + len(needle) - 1) + 1

    def _collapsed(self, position: int) -> int:
        """The first collapsed position whose character is at or after the original
        ``position``: inside a word, the same character; in white space, the next word."""
        word = bisect.bisect_right(self.original_starts, position) - 1
        if word >= 0 and position < self.original_starts[word] + self.lengths[word]:
            return self.collapsed_starts[word] + position - self.original_starts[word]
        following = word + 1
        if following < len(self.collapsed_starts):
            return self.collapsed_starts[following]
        return len(self.text)

    def _original(self, collapsed_at: int) -> int:
        """The original position of the non-space character at ``collapsed_at``."""
        word = bisect.bisect_right(self.collapsed_starts, collapsed_at) - 1
        return self.original_starts[word] + collapsed_at - self.collapsed_starts[word]


class ThoughtAnchorsFormat(TraceFormat):
    """Thought Anchors problem folders (one trace each, with chunk importances)."""

    name = "thought-anchors"
    tool = "Thought Anchors"
    reads_files = True
    lacks = (
        "the folders hold no token count of the base solution: tokens are a tiktoken count",
        "the folders record no finish reason: whether a solution was cut is unknown",
    )

    def sniff_path(self, path: Path) -> bool:
        return path.is_dir() and next(iter(_problem_folders(path, limit=1)), None) is not None

    def read(self, path: Path) -> Iterator[SourceRow]:
        if not path.is_dir():
            raise FormatMissingError(f"{path}: a Thought Anchors folder is expected (not a file)")
        folders = list(_problem_folders(path))
        if not folders:
            raise FormatMissingError(f"{path}: no problem folder with {CHUNKS_FILE} inside")
        return self._rows(path, folders)

    def _rows(self, root: Path, folders: list[Path]) -> Iterator[SourceRow]:
        seen: dict[tuple[str | None, str], int] = {}
        limit = FILE_FACTOR * self.max_bytes
        for number, folder in enumerate(folders, start=1):
            try:
                record = {
                    "folder": folder,
                    "model": _model_of(folder, root),
                    "problem": _load(folder / "problem.json", limit),
                    "base_solution": _load(folder / "base_solution.json", limit),
                    "chunks": _load(folder / CHUNKS_FILE, limit),
                }
            except RecordError as err:
                yield SourceRow(number, None, None, f"{folder.name}: {err}", err.field)
                continue
            key = (record["model"], folder.name)
            record["sample"] = seen.get(key, 0)
            seen[key] = record["sample"] + 1
            for row in self.convert_rows(number, None, record):
                if row.error is not None:
                    row.error = f"{folder.relative_to(root) or folder.name}: {row.error}"
                yield row

    def convert(self, record: Mapping[str, Any]) -> list[dict[str, Any]]:
        problem = as_object(record["problem"], "problem.json", required=True)
        solution = as_object(record["base_solution"], "base_solution.json", required=True)
        text = text_or_none(solution.get("solution"), "base_solution.json.solution")
        if text is None:
            full = text_or_none(solution.get("full_cot"), "base_solution.json.full_cot")
            prompt = text_or_none(solution.get("prompt"), "base_solution.json.prompt") or ""
            if full is None:
                raise RecordError("base_solution.json", "no 'solution' (or 'full_cot') text")
            text = full[len(prompt) :] if full.startswith(prompt) else full
        reasoning, answer, complete = split_on_last_think(text)
        chunks = [
            _chunk(chunk, position)
            for position, chunk in enumerate(as_list(record["chunks"], CHUNKS_FILE, required=True))
        ]
        indices: dict[int, int] = {}
        for position, chunk in enumerate(chunks):
            # The store keys chunk importances by (trace, chunk): a repeated index would make
            # the write fail after the trace landed, so the record is refused here instead.
            if chunk["chunk"] in indices:
                raise RecordError(
                    f"{CHUNKS_FILE}[{position}].chunk_idx",
                    f"repeats chunk {chunk['chunk']} of chunk {indices[chunk['chunk']]}",
                )
            indices[chunk["chunk"]] = position
        spans = chunk_spans(reasoning, [c["text"] for c in chunks])
        for chunk, span in zip(chunks, spans, strict=True):
            chunk["start"] = None if span is None else span[0]
            chunk["end"] = None if span is None else span[1]
        answer_given = solution.get("answer")
        row: dict[str, Any] = {
            "problem_id": record["folder"].name,
            "sample": record.get("sample", 0),
            "prompt": text_or_none(problem.get("problem"), "problem.json.problem"),
            "gold": _gold(problem.get("gt_answer")),
            "raw": text,
            "reasoning": reasoning,
            "answer": answer,
            "complete": complete,
            "chunks": chunks,
            "tool_scorer": "thought-anchors:is_correct",
            "tool_correct": as_verdict(solution.get("is_correct")),
            "tool_answer": None
            if answer_given is None
            else text_or_none(str(answer_given), "base_solution.json.answer"),
        }
        if record.get("model"):
            row["model"] = record["model"]
        return [row]


def _chunk(chunk: Any, position: int) -> dict[str, Any]:
    """One chunk of ``chunks_labeled.json`` as a ``chunk_importance`` row (its span is added
    later); every field checked, so that what is written fits the store's schema."""
    where = f"{CHUNKS_FILE}[{position}]"
    chunk = as_object(chunk, where, required=True)
    text = text_or_none(chunk.get("chunk"), f"{where}.chunk")
    if text is None:
        raise RecordError(f"{where}.chunk", "a chunk without its 'chunk' text")
    index = chunk.get("chunk_idx")
    tags = chunk.get("function_tags")
    return {
        # A chunk without an index is the position-th (the order of the file).
        "chunk": position if index is None else whole_number(index, f"{where}.chunk_idx"),
        "start": None,
        "end": None,
        "text": text,
        "importance": _number(chunk.get("counterfactual_importance_accuracy")),
        "resampling_importance": _number(chunk.get("resampling_importance_accuracy")),
        "accuracy": _number(chunk.get("accuracy")),
        "function_tags": None
        if tags is None
        else [
            text_or_none(str(tag), f"{where}.function_tags")
            for tag in as_list(tags, f"{where}.function_tags")
        ],
    }


def _gold(value: Any) -> str | None:
    if value is None or isinstance(value, str):
        return text_or_none(value, "problem.json.gt_answer")
    if isinstance(value, int | float) and not isinstance(value, bool):
        return str(value)
    raise RecordError("problem.json.gt_answer", f"expected text, got {type(value).__name__}")


def _problem_folders(root: Path, limit: int | None = None) -> Iterator[Path]:
    """Folders under ``root`` (``root`` included) holding ``chunks_labeled.json``, sorted; the
    ``chunk_<n>`` resampling folders inside a problem are not descended into."""
    found = 0
    stack = [root]
    while stack:
        folder = stack.pop()
        try:
            children = sorted(folder.iterdir(), reverse=True)
        except OSError:
            continue
        # Present under that name, whatever it is: a link or FIFO there is refused when read,
        # so the folder is quarantined naming it instead of passed over in silence.
        if os.path.lexists(folder / CHUNKS_FILE):
            yield folder
            found += 1
            if limit is not None and found >= limit:
                return
            continue
        stack.extend(c for c in children if c.is_dir() and not c.is_symlink())


def _model_of(folder: Path, root: Path) -> str | None:
    """The model folder: the one just above ``temperature_…`` in the layout, if the path has it."""
    parts = folder.resolve().parts
    for position, part in enumerate(parts):
        if part.startswith("temperature_") and position > 0:
            return parts[position - 1]
    return None


def _load(path: Path, limit: int) -> Any:
    """One JSON file of a problem folder, read under the store's rule for what it opens (no
    symbolic link followed, no FIFO or device read: :func:`read_plain_file`) and at most
    ``limit`` bytes."""
    try:
        return json.loads(read_plain_file(path, limit).decode("utf-8"))
    except FileNotFoundError:
        raise RecordError(path.name, "missing") from None
    except RecursionError:
        raise RecordError(path.name, "nested too deeply to read") from None
    except (OSError, UnicodeDecodeError, ValueError) as err:
        if isinstance(err, RecordError):
            raise
        raise RecordError(path.name, f"unreadable ({' '.join(str(err).split())[:120]})") from None


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)
