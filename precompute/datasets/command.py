"""``python -m precompute datasets``: :func:`add_arguments` declares its options and
:func:`load_from_args` lists the loaders or loads one, into a store or a file.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import pandas as pd

from legival_core.store.schema import validate_frame
from precompute.datasets.base import DatasetUnreadableError, DatasetUsageError
from precompute.datasets.local import parse_mapping
from precompute.datasets.registry import DATASETS, load_problems

__all__ = ["add_arguments", "load_from_args"]


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
