"""Exporting a results store's tables to Parquet or CSV, and reading such a file back.

CSV keeps nulls apart from empty strings (empty field vs ``""``), writes list columns as JSON
arrays, binary columns (the stored page results' payloads) as base64 text, and quotes a cell a
spreadsheet would run as a formula (``safe_export``); :func:`read_exported` undoes each.
"""

from __future__ import annotations

import base64
import binascii
import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Literal, Protocol

import pyarrow as pa

from legival_core.store import schema
from legival_core.store.errors import StoreError
from legival_core.store.file_safety import fsync_file, temp_name
from legival_core.store.safe_export import csv_arrow, csv_uncell

__all__ = ["TableSource", "export_tables", "read_exported"]


class TableSource(Protocol):
    """What an export reads: a :class:`~legival_core.store.store.Store` is one."""

    def tables(self) -> list[str]: ...

    def read_arrow(self, table: str) -> pa.Table: ...


def export_tables(
    source: TableSource,
    out_dir: str | os.PathLike[str],
    fmt: Literal["parquet", "csv"] = "parquet",
    tables: Sequence[str] | None = None,
) -> list[Path]:
    """Write one ``<table>.parquet`` or ``<table>.csv`` per table of ``source`` (default: every
    table it has), as :meth:`Store.export <legival_core.store.store.Store.export>` describes."""
    if fmt not in ("parquet", "csv"):
        raise ValueError(f"export format must be 'parquet' or 'csv', not {fmt!r}")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name in tables if tables is not None else source.tables():
        data = source.read_arrow(name)
        target = out / f"{name}.{fmt}"
        temp = out / temp_name(f".{fmt}")
        try:
            if fmt == "parquet":
                import pyarrow.parquet as pq

                pq.write_table(data, temp, compression="zstd")
            else:
                import pyarrow.csv as pacsv

                # Quoted where a spreadsheet would run a cell (safe_export.csv_cell).
                pacsv.write_csv(csv_arrow(_binary_to_base64(_lists_to_json(data))), temp)
            fsync_file(temp)
            os.replace(temp, target)
        finally:
            temp.unlink(missing_ok=True)
        written.append(target)
    return written


def _is_list(dtype: pa.DataType) -> bool:
    return pa.types.is_list(dtype) or pa.types.is_large_list(dtype)


def _is_binary(dtype: pa.DataType) -> bool:
    return pa.types.is_binary(dtype) or pa.types.is_large_binary(dtype)


def _binary_to_base64(table: pa.Table) -> pa.Table:
    """Binary columns as base64 text: CSV holds text, and raw bytes are rarely UTF-8.

    >>> t = pa.table({"b": pa.array([b"\\xff\\x00", None], pa.large_binary())})
    >>> _binary_to_base64(t).column("b").to_pylist()
    ['/wA=', None]
    """
    for i, field in enumerate(table.schema):
        if _is_binary(field.type):
            values = [
                None if v is None else base64.b64encode(v).decode("ascii")
                for v in table.column(i).to_pylist()
            ]
            table = table.set_column(
                i, pa.field(field.name, pa.string()), pa.array(values, pa.string())
            )
    return table


def _lists_to_json(table: pa.Table) -> pa.Table:
    for i, field in enumerate(table.schema):
        if _is_list(field.type):
            values = [None if v is None else json.dumps(v) for v in table.column(i).to_pylist()]
            table = table.set_column(
                i, pa.field(field.name, pa.string()), pa.array(values, pa.string())
            )
    return table


def read_exported(path: str | os.PathLike[str], table: str | None = None) -> pa.Table:
    """Read a file written by :meth:`Store.export` back into its table's schema.

    ``table`` defaults to the file's stem (``rollouts.csv`` -> ``rollouts``). Errors name the file,
    and the row and field where a value does not fit.
    """
    import pyarrow.csv as pacsv
    import pyarrow.parquet as pq

    source = Path(path)
    name = table or source.stem
    spec = schema.spec(name)
    try:
        if source.suffix == ".parquet":
            data = pq.read_table(source)
        elif source.suffix == ".csv":
            # Types for columns absent from the file are ignored by the CSV reader.
            column_types = {
                f.name: pa.string() if _is_list(f.type) or _is_binary(f.type) else f.type
                for f in spec.schema
            }
            data = pacsv.read_csv(
                source,
                parse_options=pacsv.ParseOptions(newlines_in_values=True),
                convert_options=pacsv.ConvertOptions(
                    column_types=column_types,
                    strings_can_be_null=True,
                    quoted_strings_can_be_null=False,
                    null_values=[""],
                ),
            )
            for i, field in enumerate(data.schema):
                # undo export's formula quoting (in long texts too: reasoning, completions)
                if pa.types.is_string(field.type) or pa.types.is_large_string(field.type):
                    unquoted = [csv_uncell(v) for v in data.column(i).to_pylist()]
                    data = data.set_column(i, field, pa.array(unquoted, type=field.type))
                spec_field = spec.schema.field(field.name) if field.name in spec.columns else None
                if spec_field is not None and _is_binary(spec_field.type):
                    decoded = []
                    for row, text in enumerate(data.column(i).to_pylist()):
                        try:
                            decoded.append(
                                None if text is None else base64.b64decode(text, validate=True)
                            )
                        except (binascii.Error, ValueError):
                            raise StoreError(
                                f"{source}: row {row}, field '{field.name}': not base64 text"
                            ) from None
                    data = data.set_column(i, spec_field, pa.array(decoded, type=spec_field.type))
                if spec_field is not None and _is_list(spec_field.type):
                    texts = data.column(i).to_pylist()
                    parsed = []
                    for row, text in enumerate(texts):
                        try:
                            parsed.append(None if text is None else json.loads(text))
                        except json.JSONDecodeError:
                            raise StoreError(
                                f"{source}: row {row}, field '{field.name}': not a JSON list"
                            ) from None
                    data = data.set_column(i, spec_field, pa.array(parsed, type=spec_field.type))
        else:
            raise StoreError(f"{source}: unknown export format (expected .parquet or .csv)")
    except (pa.ArrowException, OSError) as exc:
        raise StoreError(f"{source}: cannot be read ({exc})") from None
    try:
        return schema.validate_frame(name, data)
    except schema.SchemaError as exc:
        raise StoreError(f"{source}: {exc}") from None
