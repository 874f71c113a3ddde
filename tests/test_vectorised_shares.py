"""The vectorised per-trace shares the metrics stage and the robustness report use
(``trace_redundancy``, ``labeler_backtracking``) against the one-trace definitions
(``redundancy_share``, ``backtracking_share``) they replace loops over, on random traces, and
on cases worked by hand."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from legival_core.metrics.efficiency import (
    backtracking_share,
    labeler_backtracking,
    redundancy_share,
)
from legival_core.metrics.redundancy_sweep_view import trace_redundancy


def test_trace_redundancy_by_hand() -> None:
    sims = pd.DataFrame(
        {
            "trace_id": ["b", "b", "b", "b", "a", "a", "c"],
            "step": [0, 1, 2, 3, 0, 1, 0],
            "max_similarity": [None, 0.81, 0.8, 0.95, None, 0.2, None],
        }
    )
    shares = trace_redundancy(sims, 0.8).to_dict()
    # b: r = 0.81 and 0.95 exceed 0.8 (0.8 does not) → 2 / (4 − 1); a: 0 / 1; c: m = 1 → 0
    assert shares == {"a": 0.0, "b": 2 / 3, "c": 0.0}


def test_labeler_backtracking_by_hand() -> None:
    judgments = pd.DataFrame(
        {
            "trace_id": ["a", "a", "b", "b", "c", "d"],
            "labeler": ["cues", "lexical", "cues", "cues", "cues", "cues"],
            "valid": [True, True, True, True, True, None],
            "steps": [[1, 2, 2, 7], [1], [3], [1, 4], None, [1]],
        }
    )
    steps = pd.Series({"a": 4, "b": 4, "c": 2, "d": 3})
    shares = labeler_backtracking(judgments, "cues", steps).to_dict()
    # a: steps 1, 2 of 4 (2 repeated, 7 outside 1..4 dropped) → 2 / 4; b: its last judgment,
    # steps 1 and 4 → 2 / 4; c: nothing flagged → 0 / 2; d: not valid → left out
    assert shares == {"a": 0.5, "b": 0.5, "c": 0.0}
    with pytest.raises(ValueError, match="integers"):
        labeler_backtracking(judgments.assign(steps=[[1.5]] * 6), "cues", steps)


@pytest.mark.parametrize("seed", range(5))
def test_vectorised_shares_equal_the_one_trace_definitions(seed: int) -> None:
    rng = np.random.default_rng(seed)
    rows, judged = [], []
    lengths = {f"t{i}": int(rng.integers(1, 12)) for i in range(300)}
    for trace, m in lengths.items():
        for step in range(m):
            value = math.nan if step == 0 else float(rng.uniform(0, 1))
            rows.append((trace, step, value))
        flagged = rng.integers(-1, m + 3, size=int(rng.integers(0, 6))).tolist()
        judged.append((trace, "cues", bool(rng.random() < 0.9), flagged))
    sims = pd.DataFrame(rows, columns=["trace_id", "step", "max_similarity"]).sample(
        frac=1.0, random_state=seed
    )
    tau = float(rng.choice([0.5, 0.8, 0.85]))
    got = trace_redundancy(sims, tau)
    for trace in lengths:
        ordered = sims[sims["trace_id"] == trace].sort_values("step")["max_similarity"]
        assert got[trace] == redundancy_share(ordered.to_numpy(), tau), trace
    judgments = pd.DataFrame(judged, columns=["trace_id", "labeler", "valid", "steps"])
    steps = pd.Series(lengths)
    shares = labeler_backtracking(judgments, "cues", steps)
    valid = judgments[judgments["valid"]]
    assert sorted(shares.index) == sorted(valid["trace_id"])
    for trace, flagged in zip(valid["trace_id"], valid["steps"], strict=True):
        assert shares[trace] == backtracking_share(flagged, lengths[trace], on_invalid="drop")
