"""The robustness partial's transfer setups from one shared sort of the rollouts equal each
setup collapsed on its own (issue 43: the metrics stage sorted a bucket's rollouts once per
setup). Equal means bit for bit: the stage's report must not move."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from legival_core.metrics.transfer import PROFILES, _collapse, get_profile
from legival_core.metrics.transfer_prefixes import _collapse_sorted, _Prefixes, _sort_rows
from legival_core.rankings.robustness_choices import Settings, _grid_interval
from legival_core.rankings.robustness_partials import TransferCell, transfer_setups


def _rollouts() -> pd.DataFrame:
    """Two teachers, two students, prefixes every 2 steps of m = 6 or 8, rows shuffled, some
    prefixes sampled twice (partial credit too), and one trace whose only rows are k = 2 and
    k = 6 of m = 8: a grid of step 4 keeps none of its rows, so that pair disappears."""
    rows = []
    rng = np.random.default_rng(7)
    traces = [
        ("T1", "D", "t1", 6),
        ("T1", "D", "t2", 8),
        ("T2", "D", "t3", 6),
        ("T2", "E", "t4", 8),
    ]
    for teacher, dataset, trace, m in traces:
        for student in ("s1", "s2"):
            for k in range(0, m + 1, 2):
                for _sample in range(1 + (k == 2) + (trace == "t2" and k == 4)):
                    correct = float(rng.choice([0.0, 0.25, 1.0]))
                    rows.append((teacher, dataset, student, trace, f"p{trace}", k, m, correct))
    for k in (2, 6):  # t5: only inner prefixes that a step-4 grid drops
        rows.append(("T2", "E", "s1", "t5", "pt5", k, 8, 1.0))
    columns = ["teacher", "dataset", "student", "trace_id", "problem_id", "k", "m", "correct"]
    frame = pd.DataFrame(rows, columns=columns)
    return frame.iloc[rng.permutation(len(frame))].reset_index(drop=True)


def _same_prefixes(a: _Prefixes, b: _Prefixes) -> None:
    pd.testing.assert_frame_equal(a.pairs, b.pairs, check_exact=True)
    for name in ("pair", "k", "y", "solved", "scored", "bin"):
        left, right = getattr(a, name), getattr(b, name)
        assert left.dtype == right.dtype and np.array_equal(left, right), name


def _same_cell(a: TransferCell, b: TransferCell) -> None:
    for name in ("sums", "counts", "hazards", "bin_sums", "bin_counts"):
        left, right = getattr(a, name), getattr(b, name)
        assert np.array_equal(left, right), name
    assert (a.before_sum, a.before_n) == (b.before_sum, b.before_n)


@pytest.mark.parametrize("profile", sorted(PROFILES))
@pytest.mark.parametrize("step", [None, 4, 6])
def test_a_collapse_of_the_shared_sort_is_the_collapse_of_the_rows(
    profile: str, step: int | None
) -> None:
    rollouts = _rollouts()
    k, m = rollouts["k"].to_numpy(), rollouts["m"].to_numpy()
    keep = None if step is None else (k == 0) | (k == m) | (k % step == 0)
    sorted_rows = _sort_rows(rollouts)
    assert sorted_rows is not None
    shared = _collapse_sorted(sorted_rows, get_profile(profile), keep)
    alone = _collapse(rollouts if keep is None else rollouts[keep], get_profile(profile))
    _same_prefixes(shared, alone)
    # a setup that keeps all 9 pairs (4 traces x 2 students, t5 x s1) reads the sort's one frame
    assert (shared.pairs is sorted_rows.pairs) == (len(shared.pairs) == 9)
    if step == 4:  # t5's rows are k = 2 and 6 of 8: none is kept, its pair is gone
        assert "t5" not in set(shared.pairs["trace_id"])
        assert "t5" in set(_collapse(rollouts, get_profile(profile)).pairs["trace_id"])


@pytest.mark.parametrize("profile", sorted(PROFILES))
def test_every_setup_from_the_shared_sort_equals_the_setup_alone(profile: str) -> None:
    rollouts = _rollouts()
    leaks = pd.DataFrame(
        {"trace_id": ["t1", "t2", "t4"], "leak_k": pd.array([4, None, 6], "Int64")}
    )
    settings = Settings(profile=profile)
    gcd = _grid_interval(rollouts)
    assert gcd == 2  # inner prefixes 2, 4, 6: the coarser grids are 4 and 6
    shared = transfer_setups(rollouts, settings, leaks, gcd, True, _sort_rows(rollouts))
    alone = transfer_setups(rollouts, settings, leaks, gcd, True, None)
    other = next(name for name in PROFILES if name != profile)
    # every divisor d of 2 gives 2d and 3d: steps 2, 3, 4, 6
    assert list(shared) == ["default", f"profile:{other}", 2, 3, 4, 6] == list(alone)
    for key, cells in alone.items():
        assert list(shared[key]) == list(cells)
        for cell_key, cell in cells.items():
            _same_cell(shared[key][cell_key], cell)
    # the leaks reached the cells: t1 (leaks at k = 4) and t2 (never leaks) count, t3 (not in
    # the leaks table) does not
    assert shared["default"][("T1", "D", "s1")].before_n == 2
    assert shared["default"][("T2", "D", "s1")].before_n == 0
