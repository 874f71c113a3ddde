"""Resampling importance of a trace's chunks, carried onto our steps by character span.

Thought Anchors (Bogdan et al., arXiv 2506.19143) cut a trace into chunks and score each by
resampling: the *counterfactual importance* of chunk c is how much the answer's accuracy moves
when c is resampled into a different sentence. Their chunks are not our Punkt steps, so a
chunk's importance reaches a step through the characters they share:

* chunk c (span ``[a_c, b_c)`` in the reasoning) reaches step s (span ``[x_s, y_s)``) when
  they share at least half of the chunk or half of the step:
  ``o = |[a_c, b_c) ∩ [x_s, y_s)| ≥ ½ · min(b_c − a_c, y_s − x_s)`` and ``o > 0``. A chunk that
  covers two whole steps reaches both; two chunks inside one step both reach it; a chunk that
  only spills a few characters over a boundary does not reach the neighbour;
* a step's importance is that of the chunk reaching it with the largest absolute value
  (signed; NaN when none reaches it), ``n_chunks`` how many reach it;
* a chunk *maps cleanly* when its span, spaces trimmed, is exactly a run of whole steps: it
  starts where a step starts and ends where a step ends.

Reference: Bogdan, Macar, Nanda, Conmy, "Thought Anchors: Which LLM Reasoning Steps Matter?",
arXiv 2506.19143 (2025).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from legival_core.store.schema import require_columns

__all__ = ["ChunkAlignment", "align_chunks"]


@dataclass(frozen=True)
class ChunkAlignment:
    """Per-step importances of one trace and how well its chunks fit the steps.

    Attributes:
        steps: one row per step (``step``, ``importance``, ``n_chunks``, ``function_tags``).
        chunks: how many chunks the trace has; ``placed``: how many reach at least one step;
            ``clean``: how many map cleanly onto whole steps.
    """

    steps: pd.DataFrame
    chunks: int
    placed: int
    clean: int

    def summary(self) -> str:
        """One line for the inspector.

        >>> ChunkAlignment(pd.DataFrame(), 10, 9, 7).summary()
        '10 chunks: 9 placed on steps by character span, 7 of them map cleanly onto whole steps'
        """
        return (
            f"{self.chunks} chunks: {self.placed} placed on steps by character span, "
            f"{self.clean} of them map cleanly onto whole steps"
        )


def align_chunks(steps: pd.DataFrame, chunks: pd.DataFrame) -> ChunkAlignment:
    """Carry chunk importances onto steps by character span (see the module docstring).

    Args:
        steps: one trace's ``steps`` rows (``step``, ``start``, ``end``).
        chunks: its ``chunk_importance`` rows (``chunk``, ``start``, ``end``, ``importance``,
            ``function_tags``); a chunk without a span is counted but placed nowhere.

    Returns:
        A :class:`ChunkAlignment`.

    Example: steps "A. B. C." are [0,2), [3,5), [6,8); chunk 0 is "A. B." = [0,5): it shares
    2 characters with steps 0 and 1, each half of min(5, 2) = 1 or more, so it reaches both,
    and it is clean (0 starts a step, 5 ends one); chunk 1 is "C" = [6,7): 1 shared character
    ≥ ½ · min(1, 2) = 0.5, inside step 2, not clean.

    >>> steps = pd.DataFrame({"step": [0, 1, 2], "start": [0, 3, 6], "end": [2, 5, 8]})
    >>> chunks = pd.DataFrame({"chunk": [0, 1], "start": [0, 6], "end": [5, 7],
    ...                        "importance": [0.25, -0.5], "function_tags": [["plan"], None]})
    >>> a = align_chunks(steps, chunks)
    >>> a.steps["importance"].tolist(), a.steps["n_chunks"].tolist(), (a.placed, a.clean)
    ([0.25, 0.25, -0.5], [1, 1, 1], (2, 1))
    """
    require_columns(steps, ["step", "start", "end"], "steps")
    require_columns(chunks, ["chunk", "start", "end", "importance"], "chunk_importance")
    ordered = steps.sort_values("step").reset_index(drop=True)
    starts = ordered["start"].to_numpy(dtype="int64")
    ends = ordered["end"].to_numpy(dtype="int64")
    best = np.full(len(ordered), math.nan)
    counts = np.zeros(len(ordered), dtype="int64")
    tags: list[list[str]] = [[] for _ in range(len(ordered))]
    placed = clean = 0
    start_set, end_set = set(starts.tolist()), set(ends.tolist())
    for chunk in chunks.sort_values("chunk").itertuples(index=False):
        if pd.isna(chunk.start) or pd.isna(chunk.end) or not len(ordered):
            continue
        left, right = int(chunk.start), int(chunk.end)
        overlap = np.minimum(ends, right) - np.maximum(starts, left)
        reaches = (overlap > 0) & (2 * overlap >= np.minimum(right - left, ends - starts))
        if not reaches.any():
            continue
        placed += 1
        clean += bool(left in start_set and right in end_set)
        value = float(chunk.importance) if pd.notna(chunk.importance) else math.nan
        chunk_tags = getattr(chunk, "function_tags", None)
        chunk_tags = [] if not isinstance(chunk_tags, list | tuple | np.ndarray) else chunk_tags
        for target in np.flatnonzero(reaches):
            counts[target] += 1
            if math.isfinite(value) and not abs(best[target]) >= abs(value):
                best[target] = value  # NaN compares False: the first finite value goes in
            tags[target] += [str(t) for t in chunk_tags if str(t) not in tags[target]]
    frame = pd.DataFrame(
        {
            "step": ordered["step"].astype("int64"),
            "importance": best,
            "n_chunks": counts,
            "function_tags": [", ".join(t) for t in tags],
        }
    )
    return ChunkAlignment(frame, chunks=len(chunks), placed=placed, clean=clean)
