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
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, ClassVar

from precompute.formats.base import (
    FormatMissingError,
    RecordError,
    SourceRow,
    TraceFormat,
    as_verdict,
    split_on_last_think,
)

__all__ = ["ThoughtAnchorsFormat", "chunk_spans"]

CHUNKS_FILE = "chunks_labeled.json"


def chunk_spans(reasoning: str, chunks: list[str]) -> list[tuple[int, int] | None]:
    """The character span of each chunk in ``reasoning``, searched in order (a chunk starts
    at or after the end of the previous one found); None for a chunk not there.

    A chunk is matched as it is, else with each run of white space in it standing for any run
    in the reasoning: their splitter strips chunks and may turn a line break into a space.
    Other characters must match.

    >>> chunk_spans("First. Then two. Done.", ["First.", "Then two.", "Nope.", "Done."])
    [(0, 6), (7, 16), None, (17, 22)]
    >>> chunk_spans("One\\nline.", ["One  line."])
    [(0, 9)]
    """
    spans: list[tuple[int, int] | None] = []
    position = 0
    for chunk in chunks:
        span = _find_chunk(reasoning, chunk.strip(), position)
        spans.append(span)
        if span is not None:
            position = span[1]
    return spans


def _find_chunk(reasoning: str, text: str, position: int) -> tuple[int, int] | None:
    if not text:
        return None
    at = reasoning.find(text, position)
    if at >= 0:
        return at, at + len(text)
    pattern = r"\s+".join(re.escape(word) for word in text.split())
    match = re.compile(pattern).search(reasoning, position)
    return None if match is None else match.span()


class ThoughtAnchorsFormat(TraceFormat):
    """Thought Anchors problem folders (one trace each, with chunk importances)."""

    name: ClassVar[str] = "thought-anchors"
    tool: ClassVar[str] = "Thought Anchors"
    reads_files: ClassVar[bool] = True
    lacks: ClassVar[tuple[str, ...]] = (
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
        for number, folder in enumerate(folders, start=1):
            try:
                record = {
                    "folder": folder,
                    "model": _model_of(folder, root),
                    "problem": _load(folder / "problem.json"),
                    "base_solution": _load(folder / "base_solution.json"),
                    "chunks": _load(folder / CHUNKS_FILE),
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
        problem, solution = record["problem"], record["base_solution"]
        if not isinstance(problem, dict) or not isinstance(solution, dict):
            raise RecordError(
                "problem.json", "expected JSON objects in problem.json and base_solution.json"
            )
        text = solution.get("solution")
        if not isinstance(text, str):
            full, prompt = solution.get("full_cot"), solution.get("prompt") or ""
            if not isinstance(full, str):
                raise RecordError("base_solution.json", "no 'solution' (or 'full_cot') text")
            text = full[len(prompt) :] if full.startswith(prompt) else full
        reasoning, answer, complete = split_on_last_think(text)
        chunks = record["chunks"]
        if not isinstance(chunks, list):
            raise RecordError(CHUNKS_FILE, "expected a list of chunks")
        texts = [c.get("chunk") if isinstance(c, dict) else None for c in chunks]
        if any(not isinstance(t, str) for t in texts):
            raise RecordError(CHUNKS_FILE, "a chunk without its 'chunk' text")
        spans = chunk_spans(reasoning, texts)
        stored = []
        for position, (chunk, span) in enumerate(zip(chunks, spans, strict=True)):
            tags = chunk.get("function_tags")
            stored.append(
                {
                    "chunk": int(chunk.get("chunk_idx", position)),
                    "start": None if span is None else span[0],
                    "end": None if span is None else span[1],
                    "text": chunk["chunk"],
                    "importance": _number(chunk.get("counterfactual_importance_accuracy")),
                    "resampling_importance": _number(chunk.get("resampling_importance_accuracy")),
                    "accuracy": _number(chunk.get("accuracy")),
                    "function_tags": [str(t) for t in tags] if isinstance(tags, list) else None,
                }
            )
        row: dict[str, Any] = {
            "problem_id": record["folder"].name,
            "sample": record.get("sample", 0),
            "prompt": problem.get("problem"),
            "gold": problem.get("gt_answer"),
            "raw": text,
            "reasoning": reasoning,
            "answer": answer,
            "complete": complete,
            "chunks": stored,
            "tool_scorer": "thought-anchors:is_correct",
            "tool_correct": as_verdict(solution.get("is_correct")),
            "tool_answer": None if solution.get("answer") is None else str(solution["answer"]),
        }
        if record.get("model"):
            row["model"] = record["model"]
        return [row]


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
        if (folder / CHUNKS_FILE).is_file():
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


def _load(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise RecordError(path.name, "missing") from None
    except (OSError, UnicodeDecodeError, ValueError) as err:
        raise RecordError(path.name, f"unreadable ({' '.join(str(err).split())[:120]})") from None


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)
