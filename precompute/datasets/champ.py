"""``champ``: CHAMP (Mao, Kim, Zhou 2024), 270 competition problems with gold answers and
human step-by-step solutions, read from the installed ``champ-dataset`` package (no network;
:mod:`precompute.champ` does the reading).
"""

from __future__ import annotations

import os
from typing import Any

import pandas as pd

from precompute.datasets.base import DatasetLoader, DatasetUsageError

__all__ = ["CHAMP"]


def _load_champ(
    source: str | os.PathLike[str] | None = None, *, limit: int | None = None, **_: Any
) -> pd.DataFrame:
    from precompute.champ import champ_problems

    if source is not None:
        raise DatasetUsageError(
            "champ: loads from the installed 'champ-dataset' package; no source"
        )
    return champ_problems(limit=limit)


CHAMP = DatasetLoader(
    "champ",
    "champ",
    "CHAMP: 270 competition problems, gold answers, human step-by-step solutions "
    "(workload = gold solution steps), from the champ-dataset package (offline).",
    _load_champ,
    credit="CHAMP (Mao, Kim, Zhou 2024), MIT licence",
)
