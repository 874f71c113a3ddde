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

The package has one module per loader (``gsm8k``, ``hendrycks_math`` for ``math``, ``math500``,
``gpqa``, ``connections``, ``lsat``, ``proofwriter``, ``zebralogic``, ``champ``, ``local``), what
they share in ``base`` (errors, the record types, field readers, the checked frame) and
``sources`` (file and Hub rows), the registry in ``registry`` and the command in ``command``.
The names other code uses (the registry, the errors it catches, the command, the field parsers
the tests check) are importable from here too.
"""

from __future__ import annotations

from precompute.datasets.base import DatasetError, DatasetUnreadableError, HubSource
from precompute.datasets.command import add_arguments, load_from_args
from precompute.datasets.gsm8k import count_arithmetic_ops, gsm8k_parts
from precompute.datasets.hendrycks_math import boxed_answer
from precompute.datasets.local import load_local, parse_mapping
from precompute.datasets.registry import DATASETS, load_problems
from precompute.datasets.sources import hub_rows
from precompute.datasets.zebralogic import count_zebra_clues

#: The names callers take from the package itself (the stages, ``ingest``, the command line);
#: every other public name is imported from the module that defines it.
__all__ = [
    "DATASETS",
    "DatasetError",
    "DatasetUnreadableError",
    "HubSource",
    "add_arguments",
    "boxed_answer",
    "count_arithmetic_ops",
    "count_zebra_clues",
    "gsm8k_parts",
    "hub_rows",
    "load_from_args",
    "load_local",
    "load_problems",
    "parse_mapping",
]
