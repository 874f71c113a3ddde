"""``local``: problems from any JSONL / JSON / Parquet / CSV file, its columns named by a
mapping (``--map prompt=question gold=answer``); :func:`parse_mapping` is the one parser of
``--map FIELD=COLUMN`` (``datasets`` and ``ingest`` both use it).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from precompute.datasets.base import (
    DatasetLoader,
    DatasetUsageError,
    RowError,
    check_unicode,
    finish_frame,
    list_field,
    meta_json,
    slug,
    text_field,
)
from precompute.datasets.sources import iter_file_rows

__all__ = ["LOCAL", "LOCAL_FIELDS", "load_local", "parse_mapping"]

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
    name = dataset or slug(path.stem)
    rows: list[dict[str, Any]] = []
    skipped: list[str] = []
    for number, raw in iter_file_rows(path):
        if limit is not None and len(rows) >= limit:
            break
        columns = {f: mapping.get(f, f) for f in LOCAL_FIELDS}
        try:
            check_unicode(raw)
            ident = text_field(raw, columns["problem_id"], required=False) or str(number)
            choices = None
            if raw.get(columns["choices"]) is not None:
                choices = [str(c) for c in list_field(raw, columns["choices"])]
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
                    "prompt": text_field(raw, columns["prompt"]),
                    "gold": text_field(raw, columns["gold"]),
                    "choices": choices,
                    "choice_seed": None,
                    "workload": workload,
                    "workload_kind": text_field(raw, columns["workload_kind"], required=False)
                    or ("custom" if workload is not None else None),
                    "reference_solution": text_field(
                        raw, columns["reference_solution"], required=False
                    ),
                    "meta": meta_json({**extra, "source": str(path)}),
                }
            )
        except RowError as err:
            skipped.append(f"{path}, row {number}, field '{err.field}': {err}")
    return finish_frame(rows, skipped, str(path))


LOCAL = DatasetLoader(
    "local",
    "math",
    "Any JSONL/JSON/Parquet/CSV file with a column mapping (--map prompt=question ...).",
    load_local,
)
