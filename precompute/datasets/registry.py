"""The registry: :data:`DATASETS`, from a dataset's name to its :class:`DatasetLoader`, filled by
:func:`register` with one loader per module of this package, in the order ``--list`` shows.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from precompute.datasets.base import DatasetLoader, DatasetUsageError
from precompute.datasets.champ import CHAMP
from precompute.datasets.connections import CONNECTIONS
from precompute.datasets.gpqa import GPQA
from precompute.datasets.gsm8k import GSM8K
from precompute.datasets.hendrycks_math import MATH
from precompute.datasets.local import LOCAL
from precompute.datasets.lsat import LSAT
from precompute.datasets.math500 import MATH500
from precompute.datasets.proofwriter import PROOFWRITER
from precompute.datasets.zebralogic import ZEBRALOGIC

__all__ = ["DATASETS", "get_loader", "load_problems", "register"]

DATASETS: dict[str, DatasetLoader] = {}


def register(loader: DatasetLoader) -> DatasetLoader:
    """Add a loader to :data:`DATASETS` (a later one with the same name replaces it)."""
    DATASETS[loader.name] = loader
    return loader


for _loader in (
    MATH,
    MATH500,
    GPQA,
    CONNECTIONS,
    GSM8K,
    LSAT,
    PROOFWRITER,
    ZEBRALOGIC,
    CHAMP,
    LOCAL,
):
    register(_loader)


def get_loader(name: str) -> DatasetLoader:
    """The registered loader called ``name``, with a clear error for an unknown one."""
    try:
        return DATASETS[name]
    except KeyError:
        raise DatasetUsageError(
            f"unknown dataset {name!r}; known: {', '.join(sorted(DATASETS))}"
        ) from None


def load_problems(name: str, source: str | None = None, **kwargs: Any) -> pd.DataFrame:
    """``DATASETS[name].load(source, **kwargs)`` with a clear error for an unknown name."""
    return get_loader(name).load(source, **kwargs)
