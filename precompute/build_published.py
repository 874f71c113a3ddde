"""Build the bundled store of published reference numbers.

    python -m precompute published [--out results/published]

Reads the two CSVs shipped in ``legival_core/data/published/`` and writes a results store with
``teacher_metrics`` (Legi-Val Table 7; shares as fractions, tokens as tokens) and
``decomposition`` (Kaiser et al.'s CogniLoad rows, workload layer "native"). The manifest's
provenance names both papers, the files and their SHA-256. An existing store at ``--out`` is
replaced as a whole: the new one is built beside it and swapped in. A folder at ``--out`` that
is not a store, or a built store that fails :meth:`Store.verify`, is a store problem (exit 4 of
``precompute.cli``).
"""

from __future__ import annotations

import argparse
import shutil
import uuid
from pathlib import Path

from legival_core.published import published
from legival_core.store.layout import MANIFEST_NAME
from legival_core.store.store import Store, StoreError
from precompute.errors import InputUnusableError

STAGE = "published"


def _provenance(paper: str, file: str, units: str) -> dict[str, object]:
    """A table's provenance in the manifest: the paper, the bundled file its rows are read
    from with that file's SHA-256 (named once, so the digest is always the named file's), and
    the units of its numbers."""
    return {
        "source": published.PUBLISHED_SOURCES[paper],
        "from_file": file,
        "sha256": published.published_file_digests()[file],
        "units": units,
    }


def build(out: str | Path) -> Store:
    """Build the published store at ``out`` (replacing a store that is there) and return it."""
    target = Path(out)
    is_store = (target / MANIFEST_NAME).is_file()
    if target.exists() and not is_store and (not target.is_dir() or any(target.iterdir())):
        raise StoreError(f"{target}: exists and is not a results store; not replacing it")
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = target.parent / f".tmp-build-{uuid.uuid4().hex}"
    try:
        store = Store.create(
            staging,
            config={
                "kind": "published reference numbers",
                "note": "numbers copied from the papers' tables; nothing here was recomputed",
            },
        )
        store.write("teacher_metrics", published.table7_teacher_metrics_frame(), stage=STAGE)
        store.write("decomposition", published.cogniload_decomposition_frame(), stage=STAGE)
        store.record_stage(
            STAGE,
            tables={
                "teacher_metrics": _provenance(
                    "legival",
                    published.TABLE7_FILE,
                    "accuracy, redundancy, backtracking, fotu, sotu, regression_rate: "
                    "published percentages / 100; tokens: mean generated tokens per trace; "
                    "teacher: the paper's short model name (hf_id holds the Hugging Face id)",
                ),
                "decomposition": _provenance(
                    "kaiser",
                    published.COGNILOAD_FILE,
                    "e0: correct answers per 1,000 output tokens (published 100*E0 / 100); "
                    "accuracy, r_ctx, r_logic: published percentages / 100; vo, kappa: "
                    "native-workload overhead and coupling as published (layer = 'native')",
                ),
            },
        )
        if target.exists():
            retired = target.parent / f".tmp-old-{uuid.uuid4().hex}"
            target.rename(retired)
            staging.rename(target)
            shutil.rmtree(retired)
        else:
            staging.rename(target)
    finally:
        if staging.exists():
            shutil.rmtree(staging)
    # The lock file is recreated by the next writer; leaving it out keeps the bundle to data only.
    (target / ".lock").unlink(missing_ok=True)
    return Store.open(target)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``python -m precompute published`` (the CLI builds its parser from these)."""
    parser.add_argument(
        "--out", default="results/published", help="store folder (default: results/published)"
    )


def build_from_args(args: argparse.Namespace) -> Store:
    """Build the store :func:`add_arguments` names, check it, print one line per table.

    Raises :class:`StoreError` when ``--out`` holds something else or the built store has
    problems, and :class:`precompute.errors.InputUnusableError` when a bundled CSV is damaged.
    """
    try:
        store = build(args.out)
    except published.PublishedDataError as err:  # a damaged bundled CSV: an unusable input
        raise InputUnusableError(str(err)) from None
    problems = store.verify()
    if problems:
        raise StoreError(f"the built store {store.path} has problems: {'; '.join(problems)}")
    for name in store.tables():
        print(f"{store.path}: {name}: {len(store.read(name))} rows")
    return store
