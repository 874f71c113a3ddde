"""The kinds of failure the command line tells apart, each with one exit code.

A module raises one of these (often through a subclass of its own error, such as
``IngestUsageError(IngestError, UsageError)``) and :func:`precompute.cli.main` turns the kind
into the code of :data:`precompute.cli.EXIT_CODES`. Failures with kinds of their own elsewhere:
``precompute.config.ConfigError`` (3), ``legival_core.store.store.StoreError`` and
``legival_core.store.schema.SchemaError`` (4), ``precompute.stages.StageError`` (5).

>>> issubclass(InputMissingError, Exception)
True
"""

from __future__ import annotations

__all__ = ["FieldError", "InputMissingError", "InputUnusableError", "UsageError"]


class UsageError(Exception):
    """A command line that parses but makes no sense: an unknown name, a value out of range."""


class InputMissingError(Exception):
    """An input is not there: a file, a package or a dataset that cannot be reached."""


class InputUnusableError(Exception):
    """An input is there but gives nothing: the file cannot be read, or every row of it is bad."""


class FieldError(ValueError):
    """One row or record of an input does not fit; ``field`` names the offending field (None
    when the row as a whole is at fault). The readers of dataset rows, ingest rows and tool
    files each raise a subclass of their own, caught where that row is skipped or quarantined."""

    def __init__(self, field_name: str | None, message: str):
        self.field = field_name
        super().__init__(message)
