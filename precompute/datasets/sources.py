"""Where a loader's rows come from: a local JSONL / JSON / Parquet / CSV file
(:func:`iter_file_rows`) or the Hugging Face Hub (:func:`hub_rows`, which fails at once, in one
line, when the Hub cannot be reached); :func:`hub_loader` makes the loader of a hub dataset from
the function that converts one of its rows. Whether the Hub answers is asked of
:func:`precompute.backends.hub.hub_unreachable`, the check the model loads make too.
"""

from __future__ import annotations

import csv
import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pandas as pd

from precompute.backends.hub import hub_unreachable
from precompute.datasets.base import (
    Converter,
    DatasetError,
    DatasetLoader,
    DatasetMissingError,
    DatasetUnreadableError,
    DatasetUsageError,
    HubSource,
    RowContext,
    RowError,
    check_unicode,
    finish_frame,
    meta_json,
)

__all__ = ["LOCAL_SUFFIXES", "hub_loader", "hub_rows", "hub_unreachable", "iter_file_rows"]

LOCAL_SUFFIXES = (".jsonl", ".ndjson", ".json", ".parquet", ".pq", ".csv", ".tsv")


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


def hub_loader(
    name: str, task: str, convert: Converter, hub: HubSource, description: str, credit: str
) -> DatasetLoader:
    """The loader of a dataset on the Hub whose rows ``convert`` turns into problems, one at a
    time. Its ``load`` reads the rows from a local file of the same rows when ``source`` is
    one, else from the Hub (``hub``, or the hub dataset ``source`` names); a row that does not
    fit is skipped and listed, the others go through :func:`~precompute.datasets.base.finish_frame`.
    """
    load = _hub_load_function(name, task, convert, hub)
    return DatasetLoader(name, task, description, load, hub, credit)


def _hub_load_function(
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
                check_unicode(raw)
                problem = convert(raw, ctx)
            except RowError as err:
                at = f"{where}{f' [{cfg}]' if cfg else ''}, row {number}"
                skipped.append(f"{at}, field '{err.field}': {err}")
                continue
            problem["meta"] = _add_source(problem["meta"], where, cfg, chosen_split)
            rows.append(problem)
        return finish_frame(rows, skipped, where)

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
    return meta_json(values)
