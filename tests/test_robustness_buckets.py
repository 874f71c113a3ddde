"""The robustness report from the buckets' merged partials equals the whole-table report
(legival_core.rankings.robustness_partials; issue #43: the metrics stage at any scale)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from legival_core.metrics.page_results import RobustnessSelection
from legival_core.rankings import rank_intervals
from legival_core.rankings import robustness_choices as choices
from legival_core.rankings.robustness_partials import (
    TransferCell,
    _transfer_values,
    merge_robustness,
    robustness_finalize,
    robustness_partial,
)
from legival_core.rankings.selection import RANK_RESAMPLES, RESAMPLE_SEED
from legival_core.store.store import Store
from tests.demo_runs import BUCKET_COUNTS, demo_after_metrics

REPO = Path(__file__).resolve().parents[1]
DEMO = REPO / "results" / "demo"
WHOLE = ("rollouts", "similarity", "judgments", "robustness_steps", "robustness_similarity")


def _stored(store: Store, key: RobustnessSelection) -> dict[str, pd.DataFrame]:
    from legival_core.metrics.page_results import stored_frame

    table = store.read("page_results")
    out = {}
    for part in choices.REPORT_PARTS:
        frame = stored_frame(table, store.manifest, f"robustness_{part}", key)
        assert frame is not None, part
        out[part] = frame
    return out


def _same(stored: pd.DataFrame, whole: pd.DataFrame, part: str) -> None:
    assert list(stored.columns) == list(whole.columns), part
    assert len(stored) == len(whole), part
    for column in whole.columns:
        a, b = stored[column].reset_index(drop=True), whole[column].reset_index(drop=True)
        if pd.api.types.is_float_dtype(b) and column not in ("rank",):
            np.testing.assert_allclose(
                a.to_numpy(float), b.to_numpy(float), rtol=1e-12, atol=0, err_msg=f"{part}.{column}"
            )
        else:
            assert a.astype(str).tolist() == b.astype(str).tolist(), f"{part}.{column}"


@pytest.mark.slow  # the three runs of tests.demo_runs (once per test run)
def test_the_stored_report_equals_the_whole_report_for_1_7_and_64_chunks(tmp_path: Path) -> None:
    for chunks in BUCKET_COUNTS:
        run = demo_after_metrics(chunks, tmp_path / f"c{chunks}")
        whole_reads = [table for table in run.whole_reads if table in WHOLE]
        # the release teacher table and the redundancy sweep are other issues' parts
        assert "judgments" not in whole_reads and "robustness_steps" not in whole_reads
        assert whole_reads.count("rollouts") == 0, whole_reads
        store = run.store
        settings = choices.Settings.from_manifest(store.manifest)
        tables = choices.load_tables(store)
        for n_boot in (0, RANK_RESAMPLES):
            whole = choices.robustness_report(tables, settings, n_boot=n_boot, seed=RESAMPLE_SEED)
            key = RobustnessSelection(choices.settings_key(settings), n_boot, RESAMPLE_SEED)
            stored = _stored(store, key)
            for part, frame in choices.report_frames(whole).items():
                _same(stored[part], frame, f"{chunks} chunks, n_boot {n_boot}, {part}")


def test_chunk_partials_of_the_demo_tables_merge_to_the_whole_report() -> None:
    """Split the demo's tables into two halves of problems by hand: the merged partials give
    the whole report (every family, the grids' divisors included)."""
    store = Store.open(DEMO)
    tables = choices.load_tables(store)
    settings = choices.Settings.from_manifest(store.manifest)
    problems = sorted(set(tables.trace_efficiency["problem_id"].astype(str)))
    halves = [set(problems[::2]), set(problems[1::2])]
    parts = []
    for half in halves:
        ids = set(
            tables.trace_efficiency.loc[
                tables.trace_efficiency["problem_id"].astype(str).isin(half), "trace_id"
            ].astype(str)
        )

        def rows(frame: pd.DataFrame, ids: set[str] = ids) -> pd.DataFrame:
            return frame[frame["trace_id"].astype(str).isin(ids)] if len(frame) else frame

        chunk = choices.StoreTables(
            **{name: rows(getattr(tables, name)) for name in choices.TABLE_COLUMNS}
        )
        parts.append(robustness_partial(chunk, settings))
    merged = merge_robustness(parts[0], parts[1])
    report = robustness_finalize(merged, tables, tables.references)
    whole = choices.robustness_report(tables, settings)
    for part, frame in choices.report_frames(whole).items():
        _same(choices.report_frames(report)[part], frame, part)
    assert report.settings == whole.settings


def test_a_merged_transfer_cell_by_hand() -> None:
    """Two chunks of one teacher's pairs, one student: FOTU sums 0.5 + 0.25 over 2 pairs and
    1.0 over 1 -> (0.75 + 1.0) / 3; hazards in bins 1 and 2 (one each) -> entropy
    log 2 / log 50; FOTU before the leak (0.2 + 0.4) / 2 = 0.3."""
    zeros = np.zeros(50)

    def cell(fotu: list[float], hazards: list[int], before: list[float]) -> TransferCell:
        histogram = np.bincount(np.array(hazards) - 1, minlength=50).astype(float)
        return TransferCell(
            sums=np.array([sum(fotu), 0.0, 0.0, 0.0]),
            counts=np.array([len(fotu), len(fotu), len(fotu), len(fotu)]),
            hazards=histogram,
            bin_sums=zeros,
            bin_counts=zeros,
            before_sum=sum(before),
            before_n=len(before),
        )

    a = cell([0.5, 0.25], [1], [0.2])
    b = cell([1.0], [2], [0.4])
    values = _transfer_values({("T", "d", "s"): a + b}, "paper", leaks=True).iloc[0]
    assert values["fotu"] == pytest.approx((0.5 + 0.25 + 1.0) / 3, rel=1e-12)
    assert values["sotu"] == pytest.approx(np.log(2) / np.log(50), rel=1e-12)
    assert values["fotu_before_leak"] == pytest.approx((0.2 + 0.4) / 2, rel=1e-12)


@pytest.mark.slow
def test_the_default_intervals_from_drawn_resamples_equal_resampling_the_tables(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The stage hands the report its Pareto resamples (merged from the buckets) instead of
    letting it resample a million rows again: the report is the same, and resamples of another
    n_boot or seed are refused."""
    from legival_core.rankings.board_partials import board_rows, finalize_board

    store = Store.open(DEMO)
    tables = choices.load_tables(store)
    settings = choices.Settings.from_manifest(store.manifest)
    merged = robustness_partial(tables, settings)
    board = board_rows(
        tables.trace_efficiency, tables.trace_transfer, RANK_RESAMPLES, RESAMPLE_SEED
    ).resampled()
    drawn = finalize_board(board, tables.references)
    whole = choices.robustness_report(tables, settings, n_boot=RANK_RESAMPLES, seed=RESAMPLE_SEED)

    def no_resampling(*args: object, **kwargs: object) -> None:
        raise AssertionError("the report resampled the per-trace tables")

    monkeypatch.setattr(rank_intervals, "resample_teachers", no_resampling)
    no_rows = choices.StoreTables(trace_efficiency=pd.DataFrame(), references=tables.references)
    given = robustness_finalize(
        merged, no_rows, tables.references,
        n_boot=RANK_RESAMPLES, seed=RESAMPLE_SEED, resamples=drawn,
    )  # fmt: skip
    frames = choices.report_frames(given)
    for part, frame in choices.report_frames(whole).items():
        _same(frames[part], frame, part)
    with pytest.raises(ValueError, match=r"\(n_boot, seed\)"):
        robustness_finalize(
            merged, tables, tables.references, n_boot=RANK_RESAMPLES, seed=1, resamples=drawn
        )
