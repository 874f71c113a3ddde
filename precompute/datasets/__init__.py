"""A results store: the folder every precompute stage writes and the app reads.

Layout of a store ``<root>/``::

    manifest.json                     schema_version, created, config, provenance, per-table parts
    tables/<name>/part-<seq>-<pid>-<uid>.arrow   Arrow IPC file (Feather v2), zstd-compressed
    tables/<name>/corrupt/            parts moved aside by :meth:`Store.quarantine_part`
    corrupt/                          anything else it moved aside (a linked folder or log)
    logs/<stage>.log                  stage logs (:meth:`Store.log_path`)
    quarantine.jsonl                  input rows an ingest rejected (appended under the lock)
    .lock                             advisory lock taken by writers (``fcntl.flock``)

Rules that make the store safe to interrupt, to share between processes, and to receive:

* **Parts are immutable and appear atomically.** A part is written to ``.tmp-<host>-<pid>-<uid>``
  in its table folder and fsynced; under the lock the manifest lists it as ``pending`` with its
  checksum, the temp file is renamed to its final name, and the manifest is saved again without
  the mark (:meth:`Store._land`). A crash leaves at worst a temp file, which readers ignore and
  the next writer deletes once its owner is gone (same host, dead pid) or it is older than
  :data:`TEMP_MAX_AGE_S`, and a pending entry, which the next writer settles.
* **The manifest is the truth.** :meth:`Store.read` combines exactly the parts the manifest
  lists (a pending one once its file is there); a file the manifest does not list is never
  read and :meth:`Store.verify` reports it. A store is something people receive, and the
  manifest, with a BLAKE2b checksum per part, is the one file to compare through a trusted
  channel.
* **Nothing is opened through a link.** Files are opened with ``O_NOFOLLOW | O_NONBLOCK`` and
  checked to be regular files (a FIFO would block, a device or a link would reach outside), and
  the folders on the way are checked to be real folders; parts are memory-mapped from the
  checked descriptor. Logs, the lock, temp files and parts are only created inside the store.
* **Latest part wins.** Each part's name starts with a sequence number that a writer draws, under
  the lock, one above every part the table ever had. Reading concatenates the parts, keeps for each
  key the row of the highest-numbered part, and sorts by the key columns, so the result does not
  depend on how a stage was interrupted, resumed or sharded.
* **Writers lock, readers do not.** Writers serialise only the rename + manifest update (the heavy
  serialisation happens before, outside the lock), so shards of one stage in separate processes can
  write the same table. Readers never write, so a store on a read-only disk opens and reads.

The manifest's per-table ``rows`` counts rows *stored* in parts: a key rewritten by a later part is
counted twice until :meth:`Store.merge` compacts the table (then it is the exact row count).

Parts are memory-mapped when read; with zstd the column buffers are decompressed, so reading asks
for only the columns it needs. Part files carry their table name, row count and a "sorted by keys,
no duplicate keys" flag in the schema metadata; reading a single sorted part, or parts whose key
ranges do not overlap, needs no sort.
"""

from __future__ import annotations

from precompute.datasets.base import (
    PROBLEM_COLUMNS,
    Converter,
    DatasetError,
    DatasetLoader,
    DatasetMissingError,
    DatasetUnreadableError,
    DatasetUsageError,
    HubSource,
    RowContext,
    RowError,
)
from precompute.datasets.command import add_arguments, load_from_args
from precompute.datasets.gsm8k import count_arithmetic_ops, gsm8k_parts
from precompute.datasets.hendrycks_math import boxed_answer
from precompute.datasets.local import LOCAL_FIELDS, load_local, parse_mapping
from precompute.datasets.registry import DATASETS, get_loader, load_problems, register
from precompute.datasets.sources import LOCAL_SUFFIXES, hub_rows, hub_unreachable, iter_file_rows
from precompute.datasets.zebralogic import count_zebra_clues

__all__ = [
    "DATASETS",
    "LOCAL_FIELDS",
    "LOCAL_SUFFIXES",
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
