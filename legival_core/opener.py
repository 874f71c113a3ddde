"""``lv.open``, kept light: the notebooks' way in, which hands over to the front door.

The package's ``__init__`` only hands :func:`open` on. This module imports the front door
(:mod:`legival_core.results`, which loads pandas, pyarrow and the view layer) when :func:`open`
is first called, so ``import legival_core`` stays as cheap as it was. It sits on top of the
library, above the front door: only the package's ``__init__`` imports it
(``tests/test_layers.py``).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from legival_core.results import Results

__all__ = ["open"]


def open(path: str | os.PathLike[str]) -> Results:
    """Open the results store at ``path`` read-only: :func:`legival_core.results.open`.

    Imported on first call, so ``import legival_core`` stays as cheap as it was (no pandas).
    """
    from legival_core import results

    return results.open(path, stacklevel=3)  # the warning points at the caller's line
