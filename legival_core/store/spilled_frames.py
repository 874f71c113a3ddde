"""Frames kept in a scratch file until they are needed.

The metrics stage's buckets each hand back a few per-trace frames (the decomposition's
instances, the reward means, the first measured positions, the attribution concentration)
that are only concatenated after the last bucket. Held in memory, they piled up under every
bucket: about 230 MB a million traces, 2.3 GB of the ten-million-trace stage's peak. The
driver writes each to a file of its scratch folder as it comes (:func:`spill_frame`) and the
code that concatenates them reads them back then (:func:`held`), so they are held once, at
the concatenation, as before, and not while the buckets run.

The files are pickles, not Arrow: a frame comes back with the very dtypes, index and column
order it went in with (an Arrow round trip turns some object and extension columns into
others), so the results are the same to the bit with or without a scratch folder. They are
this process's own files in a folder only its user can open, read once and removed with it.
"""

from __future__ import annotations

import itertools
import os
import pickle
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

__all__ = ["SpilledFrame", "held", "spill_frame"]

_NAMES = itertools.count()


@dataclass(frozen=True)
class SpilledFrame:
    """A frame written to ``path`` by :func:`spill_frame`; ``rows`` is its length."""

    path: Path
    rows: int

    def load(self) -> pd.DataFrame:
        """The frame as it was written."""
        with open(self.path, "rb") as source:
            # this process's own file, in a folder only its user can open
            frame: pd.DataFrame = pickle.load(source)
        return frame

    def __len__(self) -> int:
        return self.rows


def spill_frame(frame: pd.DataFrame, folder: Path) -> SpilledFrame:
    """Write ``frame`` to a new file in ``folder`` (which must exist) and return its handle.

    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     one = spill_frame(pd.DataFrame({"a": pd.array([1, None], dtype="Int64")}), Path(tmp))
    ...     back = one.load()
    >>> len(one), back["a"].tolist(), str(back["a"].dtype)
    (2, [1, <NA>], 'Int64')
    """
    path = folder / f"frame-{os.getpid()}-{next(_NAMES)}.pickle"
    with open(path, "xb") as sink:
        pickle.dump(frame, sink, protocol=pickle.HIGHEST_PROTOCOL)
    return SpilledFrame(path, len(frame))


def held(frames: Iterable[pd.DataFrame | SpilledFrame]) -> list[pd.DataFrame]:
    """``frames`` in memory, in order: a spilled one read back from its file.

    >>> held([pd.DataFrame({"a": [1]})])[0]["a"].tolist()
    [1]
    """
    return [f.load() if isinstance(f, SpilledFrame) else f for f in frames]
