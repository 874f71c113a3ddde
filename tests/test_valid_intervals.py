"""Intervals that are valid or absent (issue 39, item 2).

A bootstrap that collapses (every trace scores the same, say 0% backtracking) gives every one of
its resamples the same value, so two teachers at 0% share rank 1 in every resample and their rank
interval read "1 (1)": certain first place, while the Wilson intervals the pages show beside
them run to several percent and overlap the others'. Such ranks are now resolved by the overlap
of the shown intervals.
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from legival_core.rankings.rank_intervals import MetricResamples, rank_intervals
from legival_core.results import Results
from legival_core.store.store import Store
from legival_core.views.app_config import BUNDLED_STORES


@pytest.fixture(scope="module")
def results() -> Results:
    if not (BUNDLED_STORES["demo"] / "manifest.json").exists():
        pytest.fail("the bundled demo store is missing (python -m precompute demo builds it)")
    with warnings.catch_warnings():  # the demo's grader-version warning is not under test
        warnings.simplefilter("ignore")
        return Results(Store.open(BUNDLED_STORES["demo"]))


def _rank_span(cell: str) -> tuple[int, int]:
    low, _, high = str(cell).partition("–")
    return int(low), int(high or low)


def test_two_teachers_at_zero_share_no_certain_rank_hand_built() -> None:
    """a and b score 0 on all 20 traces (their bootstrap is [0, 0] in every resample; the
    Wilson interval of 0 of 20 is [0, 16.1%]); c sits at 5% with an interval [1%, 10%] inside
    theirs. Before: a and b got rank interval 1–1 (certain first), c 3–3."""
    zeros = np.zeros(200)
    c = np.linspace(0.01, 0.10, 200)
    res = MetricResamples(
        ("a", "b", "c"),
        np.array([0.0, 0.0, 0.05]),
        np.column_stack([zeros, zeros, c]),
        np.array([20, 20, 20]),
        np.array([1, 1, 1]),
    )
    table = rank_intervals(res, higher_is_better=False, share=True).set_index("teacher")
    # Wilson: every shown interval overlaps every other, so each could take any of the 3 ranks
    assert table["rank"].tolist() == [1, 1, 3]
    assert table["rank_lo"].tolist() == [1, 1, 1]
    assert table["rank_hi"].tolist() == [3, 3, 3]
    assert table["rank_ub"].tolist() == [1, 1, 1]
    assert table.loc["a", "not_separated"] == "b, c"


def test_a_collapsed_teacher_clear_of_the_others_keeps_its_certain_rank() -> None:
    """The overlap rule only widens what the shown intervals leave open: a at 0 of 200
    (Wilson [0, 1.9%]) against b and c near 50% is surely first."""
    b = np.linspace(0.40, 0.60, 100)
    res = MetricResamples(
        ("a", "b", "c"),
        np.array([0.0, 0.5, 0.52]),
        np.column_stack([np.zeros(100), b, b + 0.02]),
        np.array([200, 200, 200]),
        np.array([1, 1, 1]),
    )
    table = rank_intervals(res, higher_is_better=False, share=True).set_index("teacher")
    assert (table.loc["a", ["rank_lo", "rank_hi"]].tolist()) == [1, 1]
    # b beats c on every resample (paired): the bootstrap's order between them stands
    assert table.loc["b", ["rank_lo", "rank_hi"]].tolist() == [2, 2]
    assert table.loc["c", ["rank_lo", "rank_hi"]].tolist() == [3, 3]


def test_teachers_tied_in_every_resample_are_not_given_a_certain_rank() -> None:
    """b and c score the same on every problem: each resample ranks both 2nd, yet nothing says
    which is ahead. Before: both 2–2."""
    res = MetricResamples(
        ("a", "b", "c"),
        np.array([0.9, 0.5, 0.5]),
        np.array([[0.8, 0.4, 0.4], [0.95, 0.6, 0.6], [0.9, 0.5, 0.5]]),
        np.array([3, 3, 3]),
        np.array([1, 1, 1]),
    )
    table = rank_intervals(res, higher_is_better=True).set_index("teacher")
    assert table.loc["a", ["rank_lo", "rank_hi"]].tolist() == [1, 1]
    assert table.loc["b", ["rank_lo", "rank_hi"]].tolist() == [2, 3]
    assert table.loc["c", ["rank_lo", "rank_hi"]].tolist() == [2, 3]


def test_demo_backtracking_at_zero_is_not_certain_first(results: Results) -> None:
    """On the demo gpt-3.5 and palm-2-medium have 0 backtracking on all 50 traces; their Wilson
    intervals (0 of 50: up to 7.1%) hold gpt-4's and gpt-4-turbo's values. Before: "1–1"."""
    detail = results.rank_intervals("backtracking").set_index("teacher")
    ranked = detail[detail["rank"].notna()]
    zero = ranked[ranked["value"] == 0]
    assert set(zero.index) == {"gpt-3.5", "palm-2-medium"}
    for teacher, row in zero.iterrows():
        low, high = _rank_span(row["rank 95% interval"])
        assert high > low, (teacher, row["rank 95% interval"])
        # every other ranked value lies inside this teacher's shown (Wilson) interval
        inside = ranked["value"].between(row["95% lo"] - 1e-9, row["95% hi"])
        assert inside.all()
        assert (low, high) == (1, len(ranked))


def test_demo_regression_zero_pair_per_dataset_is_not_certain(results: Results) -> None:
    """The issue's case: gpt-3.5 and gpt-4 at 0.0% Regression on one dataset, with intervals to
    tens of percent, showed the rank interval "1 (1)"."""
    seen = 0
    for dataset in results.datasets:
        detail = results.rank_intervals("regression_rate", dataset=dataset)
        spans = detail["rank 95% interval"].astype(str)
        ranked = detail[detail["rank"].notna() & spans.str[0].str.isdigit()]
        for _, row in ranked.iterrows():
            low, high = _rank_span(row["rank 95% interval"])
            others = ranked[ranked["teacher"] != row["teacher"]]
            if row["value"] == 0 and (others["value"] == 0).any():
                seen += 1
                assert high > low, (dataset, row["teacher"], row["rank 95% interval"])
    assert seen, "the demo has two teachers at 0% regression on some dataset"


def test_rank_interval_always_holds_the_point_rank() -> None:
    """Widening never drops the rank shown beside the interval."""
    rng = np.random.default_rng(3)
    for _ in range(30):
        reps = np.round(rng.random((50, 4)) * 3) / 3  # coarse values: many ties
        res = MetricResamples(
            tuple("abcd"), reps.mean(axis=0).round(1), reps, np.full(4, 10), np.ones(4, int)
        )
        table = rank_intervals(res, higher_is_better=True, share=True)
        frame = pd.DataFrame(table)
        assert (frame["rank_lo"] <= frame["rank_hi"]).all()
        assert (frame["rank_lo"] >= 1).all() and (frame["rank_hi"] <= 4).all()
        # teachers tied in every resample never keep a one-rank interval
        values = np.vstack([res.point, reps]).round(9)
        for t in range(4):
            for u in range(t + 1, 4):
                if (values[:, t] == values[:, u]).all():
                    assert frame["rank_hi"][t] > frame["rank_lo"][t]


# --- SOTU: a bias-corrected interval that holds its estimate ---------------------------------


def _uniform_hazards(m: int, copies: int) -> pd.DataFrame:
    """One teacher whose traces first succeed in each of m hazard bins equally often: the
    sample is exactly uniform over m outcomes, so SOTU = log m / log 50."""
    n = m * copies
    return pd.DataFrame(
        {
            "trace_id": [f"t{i}" for i in range(n)],
            "teacher": "uniform",
            "dataset": "d",
            "student": "s",
            "problem_id": [f"p{i}" for i in range(n)],
            "hazard_bin": [1 + (i % m) * (50 // m) for i in range(n)],
        }
    )


@pytest.mark.parametrize("m", [2, 5, 10])
def test_sotu_interval_of_a_known_entropy_holds_it(m: int) -> None:
    """A uniform distribution has the largest entropy there is over its m outcomes, so no
    resample can exceed it: the plain percentile interval ends at (or below) the true value.
    Before: hi <= truth; now the truth lies strictly inside."""
    from legival_core.rankings.rank_intervals import interval_table, resample_teachers

    res = resample_teachers(None, _uniform_hazards(m, 20), ["sotu"], n_boot=1000, seed=0)
    row = interval_table(res, {"sotu": True}).iloc[0]
    truth = np.log(m) / np.log(50)
    assert row["value"] == pytest.approx(truth)
    assert row["value_lo"] < truth < row["value_hi"], (row["value_lo"], truth, row["value_hi"])
    assert row["value_lo"] >= 0.0 and row["value_hi"] <= 1.0


def test_transfer_table_sotu_interval_of_a_known_entropy_holds_it() -> None:
    """The transfer page's per-teacher SOTU interval (teacher_metrics): 10 traces solved at
    the first of two prefixes and 10 at the second, a uniform hazard over 2 bins, SOTU
    log 2 / log 50. Before: the percentile interval's top was the estimate itself."""
    from legival_core.metrics.transfer import teacher_metrics

    rows = []
    for i in range(20):
        solved_at = 1 if i % 2 == 0 else 2
        for k in (0, 1, 2):
            rows.append(
                {"teacher": "T", "dataset": "D", "student": "S", "trace_id": f"t{i}",
                 "problem_id": f"p{i}", "k": k, "m": 2, "correct": int(k >= solved_at)}
            )  # fmt: skip
    row = teacher_metrics(pd.DataFrame(rows), n_boot=1000, seed=0).iloc[0]
    truth = np.log(2) / np.log(50)
    assert row["sotu"] == pytest.approx(truth)
    assert row["sotu_lo"] < truth < row["sotu_hi"]


def test_demo_sotu_estimates_lie_inside_their_intervals(results: Results) -> None:
    """Before: gpt-3.5's SOTU 0.211 over [0.000, 0.205], the human's 0.188 near the top."""
    detail = results.rank_intervals("sotu")
    shown = detail.dropna(subset=["95% lo", "95% hi"])
    assert len(shown) >= 4
    inside = (shown["95% lo"] <= shown["value"]) & (shown["value"] <= shown["95% hi"])
    assert inside.all(), shown[["teacher", "value", "95% lo", "95% hi"]]


@settings(max_examples=200, deadline=None)
@given(
    draws=st.lists(st.floats(0.0, 1.0), min_size=1, max_size=60),
    estimate=st.floats(0.0, 1.0),
    alpha=st.floats(0.01, 0.5),
)
def test_bias_corrected_interval_always_holds_the_estimate(
    draws: list[float], estimate: float, alpha: float
) -> None:
    from legival_core.stats.stats import bias_corrected_interval

    lo, hi = bias_corrected_interval(np.array(draws), estimate, alpha, (0.0, 1.0))
    assert 0.0 <= lo <= estimate <= hi <= 1.0


# --- the efficiency decomposition page: E0 board, waterfall, audits -------------------------

PALM = "palm-2-medium"
#: Field names the decomposition page used to show as headers or cells (issue 39).
RAW_NAMES = {
    "e0 rank", "n instances", "mean tokens", "mean workload", "dlog vo", "dlog e0",
    "n models", "rho", "rho p05", "rho p95", "top1 solver", "top1 share", "n covered",
    "effective solvers", "leave_top_k", "leave top k", "leave_self_out", "held_out_pools",
}  # fmt: skip


@pytest.fixture(scope="module")
def demo_store() -> Store:
    return Store.open(BUNDLED_STORES["demo"])


def _decomposition_page(monkeypatch: pytest.MonkeyPatch, demo: Store, **params: str) -> object:
    import streamlit

    from tests.app_runner import run_app_page

    streamlit.cache_data.clear()
    return run_app_page("decomposition", monkeypatch, [demo.path], params, timeout=300)


def test_e0_board_shows_problem_bootstrap_intervals_and_n_up_front(
    monkeypatch: pytest.MonkeyPatch, demo_store: Store
) -> None:
    """Before: the E0 board ranked models from 10 problems with no interval, and its n column
    (the last of twelve) was cut off at the right."""
    from legival_core.views.efficiency import E0_BOARD_LABELS

    decomposition = demo_store.read("decomposition")
    benchmark = "champ-combinatorics"
    at = _decomposition_page(monkeypatch, demo_store, dataset=benchmark)
    board = next(f.value for f in at.dataframe if E0_BOARD_LABELS["e0"] in f.value.columns)
    columns = list(board.columns)
    lo, hi, n = (E0_BOARD_LABELS[c] for c in ("e0_lo", "e0_hi", "n_instances"))
    assert columns.index(n) <= 6, columns  # on the first screen, beside E0
    stored = decomposition[
        (decomposition["benchmark"] == benchmark) & (decomposition["layer"] == "native")
    ].set_index("model")
    for row in board.itertuples(index=False):
        cells = dict(zip(columns, row, strict=True))
        model = str(cells["model"])
        assert int(cells[n]) == int(stored.loc[model, "n_instances"])
        e0 = float(stored.loc[model, "e0"])
        low, high = float(cells[lo]), float(cells[hi])
        assert low <= e0 + 1e-9 and e0 <= high + 1e-9, (model, low, e0, high)
    assert (board[hi].astype(float) > board[lo].astype(float)).any()
    headers = {str(c) for f in at.dataframe for c in f.value.columns}
    assert not headers & RAW_NAMES, headers & RAW_NAMES


def test_waterfall_has_intervals_and_its_csv_says_no_correct_answer(
    monkeypatch: pytest.MonkeyPatch, demo_store: Store
) -> None:
    """Before: the waterfall had no interval and no n, and its CSV wrote −∞ as "-inf" for a
    model with no correct answer (palm-2-medium on champ-combinatorics)."""
    import json

    from legival_core.views.efficiency import NO_CORRECT_ANSWER, waterfall_csv

    at = _decomposition_page(
        monkeypatch, demo_store, dataset="champ-combinatorics", teacher="gpt-4"
    )
    chart = next(c for c in at.get("plotly_chart") if "waterfall_chart" in c.proto.id)
    spec = json.loads(chart.proto.spec)
    bars = [t for t in spec["data"] if t.get("error_y", {}).get("visible")]
    assert bars, "the waterfall draws its 95% intervals"
    assert any("problems both models answered" in c.value for c in at.caption)
    terms = pd.DataFrame(
        {"term": ["Δlog r_ctx", "Δlog E0"], "value": [0.1, float("-inf")],
         "measure": ["relative", "total"], "lo": [0.0, float("-inf")], "hi": [0.2, 0.0]}
    )  # fmt: skip
    out = waterfall_csv(terms)
    assert out["value"].tolist() == [0.1, NO_CORRECT_ANSWER]
    assert "inf" not in out.to_csv(index=False).lower()


def test_workload_audit_rows_without_data_say_why_or_are_left_out(
    monkeypatch: pytest.MonkeyPatch, demo_store: Store
) -> None:
    """Before: leave-top-k rows for k = 3 and k = 5 on a pool of 4 models listed ρ "—" and
    coverage 0.000 with nothing said."""
    from legival_core.views.efficiency import AUDIT_LABELS

    at = _decomposition_page(monkeypatch, demo_store, dataset="champ-combinatorics")
    audits = next(f.value for f in at.dataframe if AUDIT_LABELS["why"] in f.value.columns)
    rho, why = AUDIT_LABELS["rho"], AUDIT_LABELS["why"]
    k, n_models = AUDIT_LABELS["k"], AUDIT_LABELS["n_models"]
    no_rho = audits[audits[rho].map(lambda v: pd.isna(v) or v == "—")]
    assert len(no_rho), "the demo has an audit with no ρ"
    assert no_rho[why].map(lambda v: isinstance(v, str) and len(v) > 10).all(), no_rho
    numeric_k = pd.to_numeric(audits[k], errors="coerce")
    assert not (numeric_k >= pd.to_numeric(audits[n_models], errors="coerce")).any()
    captions = [c.value.replace("\\", "") for c in at.caption]  # Markdown escapes removed
    assert any("Left out" in c and "k = 5" in c for c in captions), captions
    cells = " ".join(str(v) for v in audits.to_numpy().ravel())
    assert "leave_top_k" not in cells and "held_out_pools" not in cells


@pytest.mark.slow
@pytest.mark.parametrize(
    ("page", "raw"),
    [
        ("rewards", {"fotu datasets", "sotu datasets", "score datasets"}),
        ("inspector", {"top share se"}),
    ],
)
def test_page_headers_are_readable_names(
    monkeypatch: pytest.MonkeyPatch, demo_store: Store, page: str, raw: set[str]
) -> None:
    """Before: the Rewards page headed its coverage columns "fotu datasets", "regression rate
    datasets", and the Inspector a standard error "top share se"."""
    import streamlit

    from tests.app_runner import run_app_page

    streamlit.cache_data.clear()
    at = run_app_page(page, monkeypatch, [demo_store.path], {}, timeout=300)
    headers = {str(c) for f in at.dataframe for c in f.value.columns}
    assert not headers & raw, headers & raw
    assert not any(h.endswith((" datasets", " se")) and h.islower() for h in headers), headers
