"""Tests of legival_core.views: hand-worked values, hostile text, and properties."""

from __future__ import annotations

import html
import math
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from legival_core import views

PAYLOADS = [
    "<script>alert(1)</script>",
    "<img src=x onerror=alert(1)>",
    '"><svg onload=alert(1)>',
    "</div><iframe src=javascript:alert(1)>",
    "' onmouseover='alert(1)",
]


def steps_frame(texts: list[str]) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "trace_id": "t",
            "step": range(len(texts)),
            "text": texts,
            "tokens": [len(t.split()) for t in texts],
        }
    )


# --- the inspector's HTML builder ----------------------------------------------------------------


def test_trace_html_escapes_every_payload_in_text_and_student_names() -> None:
    table = views.step_table(
        steps_frame(["First step.", *PAYLOADS]),
        pd.DataFrame(
            {
                "step": range(6),
                "max_similarity": [None, 0.9, 0.2, 0.95, 0.1, 0.85],
                "matched_step": pd.array([None, 0, 0, 1, 2, 3], dtype="Int64"),
            }
        ),
        pd.DataFrame(
            {
                "labeler": ["judge:x", "lexical", "human"],
                "steps": [[2], [3], [4]],
                "valid": [True, True, True],
            }
        ),
    )
    strip = pd.DataFrame({1: [1.0], 2: [0.0]}, index=['<script>alert("s")</script>'])
    body = views.trace_html(table, anchor="lv-main", leak_k=3, strip=strip)
    for payload in PAYLOADS:
        assert payload not in body
        assert html.escape(payload) in body
    assert "<script" not in body and "<img" not in body and "<svg" not in body
    assert "<iframe" not in body and "onmouseover='" not in body
    assert html.escape('<script>alert("s")</script>') in body  # the student name, in a title
    # Only our own tags are present.
    tags = set(re.findall(r"<([a-z]+)", body))
    assert tags <= {"div", "span", "a"}


def test_trace_html_marks_redundancy_backtracking_leak_and_students() -> None:
    table = views.step_table(
        steps_frame(["a b c", "a b c again", "Wait, no.", "done"]),
        pd.DataFrame(
            {
                "step": [0, 1, 2, 3],
                "max_similarity": [None, 0.9, 0.3, 0.6],
                "matched_step": pd.array([None, 0, 1, 0], dtype="Int64"),
            }
        ),
        pd.DataFrame(
            {
                "labeler": ["judge:q", "lexical", "human:ann", "judge:bad"],
                "steps": [[3], [3], [2], [1]],
                "valid": [True, True, True, False],
            }
        ),
    )
    assert table["flag_judge"].tolist() == [False, False, True, False]  # invalid judge ignored
    assert table["flag_human"].tolist() == [False, True, False, False]
    assert table["redundant"].tolist() == [False, True, False, False]  # 0.9 > 0.8 only
    strip = views.student_strip(
        pd.DataFrame({"student": "s", "k": [0, 1, 2], "correct": [0, 0, 1]})
    )
    body = views.trace_html(table, anchor="x1", leak_k=2, strip=strip)
    # Step 2 repeats step 1 (similarity 0.90): tooltip, shade and a jump link.
    assert 'title="step 2 · similarity 0.90 to step 1 · 4 tokens"' in body
    assert 'href="#x1-s1"' in body
    # shade alpha = min(0.55, (0.9 - 0.5) * 1.1) = 0.44
    assert "rgba(230,126,34,0.44)" in body
    # the leak rule comes right after step 2
    assert body.index('id="x1-s2"') < body.index("leak point k = 2") < body.index('id="x1-s3"')
    assert body.count("lv-bt-judge") == 1 and body.count("lv-bt-lexical") == 1
    # student cells: after step 1 wrong (red), after step 2 right (green), step 3 no rollout
    assert body.count("#e74c3c") == 1 and body.count("#27ae60") == 1 and "no rollout" in body


def test_trace_html_rejects_a_hostile_anchor() -> None:
    table = views.step_table(steps_frame(["x"]))
    with pytest.raises(ValueError, match="not a simple id"):
        views.trace_html(table, anchor='a"><script>')


def test_trace_html_pages_links_only_within_the_page() -> None:
    texts = [f"step number {i}" for i in range(10)]
    sims = pd.DataFrame(
        {
            "step": range(10),
            "max_similarity": [None] + [0.9] * 9,
            "matched_step": pd.array([None] + [0] * 9, dtype="Int64"),
        }
    )
    table = views.step_table(steps_frame(texts), sims)
    page = views.step_page(10, 2, per_page=4)
    assert (page.start, page.stop, page.pages) == (4, 8, 3)
    body = views.trace_html(table, anchor="p", start=page.start, stop=page.stop)
    assert 'id="p-s5"' in body and 'id="p-s4"' not in body and 'id="p-s9"' not in body
    assert "href=" not in body and "on another page" in body  # step 1 is on page 1


@settings(max_examples=60, deadline=None)
@given(st.lists(st.text(min_size=1, max_size=40), min_size=1, max_size=6))
def test_trace_html_never_lets_markup_through(texts: list[str]) -> None:
    body = views.trace_html(views.step_table(steps_frame(texts)), anchor="h")
    for text in texts:
        assert html.escape(text) in body
    assert set(re.findall(r"<([A-Za-z]+)", body)) <= {"div", "span"}


@given(st.integers(0, 500), st.integers(1, 80))
def test_step_pages_cover_every_step_once(m: int, per_page: int) -> None:
    first = views.step_page(m, 1, per_page)
    covered = []
    for page in range(1, first.pages + 1):
        bounds = views.step_page(m, page, per_page)
        covered += range(bounds.start, bounds.stop)
    assert covered == list(range(m))
    assert views.step_page(m, 10**6, per_page).page == first.pages  # clamped


# --- leaderboard pieces ---------------------------------------------------------------------------


def test_composite_score_by_hand() -> None:
    ranks = pd.DataFrame(
        {
            "accuracy_rank": pd.array([1, 2, 3, 4], "Int64"),
            "fotu_rank": pd.array([3, 1, 2, None], "Int64"),
        }
    )
    # accuracy, n = 4: (4 - r) / 3 -> 1, 2/3, 1/3, 0; fotu, n = 3 ranked: (3 - r) / 2 -> 0, 1, 0.5
    # weights 1 and 3: row 0: (1*1 + 3*0) / 4 = 0.25; row 1: (2/3 + 3*1) / 4 = 11/12;
    # row 2: (1/3 + 3*0.5) / 4 = 11/24; row 3 has no FOTU rank: (1*0) / 1 = 0
    out = views.composite_score(ranks, {"accuracy": 1, "fotu": 3})
    np.testing.assert_allclose(out, [0.25, 11 / 12, 11 / 24, 0.0])
    with pytest.raises(ValueError, match="weight"):
        views.composite_score(ranks, {"accuracy": -1})
    assert views.composite_score(ranks, {"accuracy": 0}).isna().all()


@given(st.lists(st.integers(1, 6), min_size=2, max_size=6), st.floats(0.1, 5), st.floats(0.1, 5))
def test_composite_score_stays_in_unit_interval(ranks: list[int], w1: float, w2: float) -> None:
    frame = pd.DataFrame(
        {
            "a_rank": pd.Series(ranks).rank(method="min").astype(int),
            "b_rank": pd.Series(ranks[::-1]).rank(method="min").astype(int),
        }
    )
    out = views.composite_score(frame, {"a": w1, "b": w2})
    assert ((out >= 0) & (out <= 1)).all()


def test_with_student_replaces_only_transfer_columns() -> None:
    tm = pd.DataFrame(
        {
            "teacher": ["a", "b"],
            "dataset": "d",
            "accuracy": [0.9, 0.8],
            "fotu": [0.5, 0.4],
            "sotu": [0.3, 0.2],
        }
    )
    ps = pd.DataFrame(
        {"teacher": ["a"], "dataset": ["d"], "student": ["s"], "fotu": [0.7], "sotu": [0.6]}
    )
    out = views.with_student(tm, ps, "s")
    assert out.columns.tolist() == tm.columns.tolist()
    assert out["accuracy"].tolist() == [0.9, 0.8]
    assert out["fotu"].tolist()[0] == 0.7 and math.isnan(out["fotu"].tolist()[1])


def test_latex_table_escapes_special_characters() -> None:
    frame = pd.DataFrame({"teacher": ["a&b_c%$#{}~^\\"], "x": [1.23456]})
    text = views.latex_table(frame, caption="50% of_it")
    assert r"a\&b\_c\%\$\#\{\}\textasciitilde{}\textasciicircum{}\textbackslash{}" in text
    assert "1.235" in text and r"\caption{50\% of\_it}" in text


# --- transfer, pareto, correlations ---------------------------------------------------------------


def test_hazard_histograms_and_baseline_by_hand() -> None:
    tt = pd.DataFrame(
        {
            "teacher": ["A"] * 4 + ["B"] * 2,
            "student": ["s", "s", "t", "t", "s", "t"],
            "hazard_bin": pd.array([1, 1, None, 25, 50, None], "Int64"),
            "fotu": [1.0, 1.0, 0.0, 0.5, 0.1, np.nan],  # B/t had no prefix k >= 1: left out
            "baseline": [0.0, 1.0, 0.0, 0.0, 1.0, 1.0],
        }
    )
    h = views.hazard_histograms(tt).set_index(["teacher", "bin"])["share"]
    # A: bins 1, 1, 25 and one never solved -> 0.5 in bin 1, 0.25 in bin 25, 0.25 in bin 0
    assert (h[("A", 1)], h[("A", 25)], h[("A", 0)]) == (0.5, 0.25, 0.25)
    assert h[("B", 50)] == 1.0 and h.groupby(level=0).sum().tolist() == [1.0, 1.0]
    # baseline: student s mean (0 + 1 + 1) / 3 = 2/3, t mean (0 + 0 + 1) / 3 = 1/3 -> 0.5
    assert views.student_baseline(tt) == pytest.approx(0.5)


def test_pareto_view_uses_each_metrics_direction() -> None:
    board = pd.DataFrame(
        {
            "teacher": ["a", "b", "c", "d"],
            "tokens": [100, 200, 300, 150],
            "fotu": [0.2, 0.5, 0.6, 0.1],
            "hf_id": ["Org/A", None, "Org/C", None],
        }
    )
    out = views.pareto_view(board, "tokens", "fotu").set_index("teacher")
    # fewer tokens and more FOTU are better: d (150, 0.1) is dominated by a (100, 0.2)
    assert out["frontier"].to_dict() == {"a": True, "d": False, "b": True, "c": True}
    assert out.loc["a", "family"] == "Org" and out.loc["b", "family"] == "b"


def test_partial_matrix_matches_the_textbook_formula() -> None:
    df = pd.DataFrame(
        {"tokens": [1, 3, 2, 5, 4, 6], "fotu": [1, 2, 3, 4, 5, 6], "sotu": [2, 1, 4, 3, 6, 5]}
    )
    rho, _ = views.partial_matrix(df, ["tokens", "fotu", "sotu"])
    assert rho.columns.tolist() == ["fotu", "sotu"]

    def r(a: str, b: str) -> float:
        return float(df[a].rank().corr(df[b].rank()))

    # ρ_xy·z = (r_xy - r_xz r_yz) / sqrt((1 - r_xz²)(1 - r_yz²))
    xy, xz, yz = r("fotu", "sotu"), r("fotu", "tokens"), r("sotu", "tokens")
    expected = (xy - xz * yz) / math.sqrt((1 - xz**2) * (1 - yz**2))
    assert rho.loc["fotu", "sotu"] == pytest.approx(expected)


def test_model_level_frame_correct_only_recomputes_efficiency() -> None:
    tm = pd.DataFrame(
        {
            "teacher": ["a", "a"],
            "dataset": ["x", "y"],
            "accuracy": [0.5, 1.0],
            "tokens": [150.0, 100.0],
            "fotu": [0.4, 0.6],
        }
    )
    te = pd.DataFrame(
        {
            "teacher": "a",
            "dataset": ["x", "x", "y"],
            "correct": [True, False, True],
            "tokens": [100, 200, 100],
            "redundancy": [0.1, 0.3, 0.2],
        }
    )
    all_traces = views.model_level_frame(tm)
    assert all_traces.loc[0, "tokens"] == 125.0 and all_traces.loc[0, "accuracy"] == 0.75
    correct = views.model_level_frame(tm, te, correct_only=True)
    # correct traces: x -> 100 tokens, y -> 100; redundancy x 0.1, y 0.2 -> mean 0.15
    assert correct.loc[0, "tokens"] == 100.0 and correct.loc[0, "redundancy"] == pytest.approx(0.15)
    assert "accuracy" not in correct and correct.loc[0, "fotu"] == 0.5


def test_significance_and_labels() -> None:
    assert views.significance_stars(0.049) == "*" and views.significance_stars(0.05) == ""
    assert [views.labeler_kind(x) for x in ("judge:a", "Lexical", "human", "judges")] == [
        "judge",
        "lexical",
        "human",
        "other",
    ]


# --- efficiency -----------------------------------------------------------------------------------


def test_delta_log_terms_add_up_by_hand() -> None:
    # model: E0 = 1000 * 0.9 * 0.5 / 1000 = 0.45; E[T] = E[W] VO kappa = 10 * 50 * 2 = 1000
    model = {
        "e0": 0.45,
        "r_ctx": 0.9,
        "r_logic": 0.5,
        "mean_tokens": 1000.0,
        "mean_workload": 10.0,
        "vo": 50.0,
        "kappa": 2.0,
    }
    # reference: E0 = 1000 * 1.0 * 0.6 / 600 = 1.0; E[T] = 10 * 30 * 2 = 600
    reference = {
        "e0": 1.0,
        "r_ctx": 1.0,
        "r_logic": 0.6,
        "mean_tokens": 600.0,
        "mean_workload": 10.0,
        "vo": 30.0,
        "kappa": 2.0,
    }
    terms = views.delta_log_terms(model, reference).set_index("term")["value"]
    assert terms["Δlog r_ctx"] == pytest.approx(math.log(0.9))
    assert terms["Δlog r_logic"] == pytest.approx(math.log(0.5 / 0.6))
    assert terms["−Δlog E[W]"] == pytest.approx(0.0)
    assert terms["−Δlog VŌ"] == pytest.approx(-math.log(50 / 30))
    assert terms["−Δlog κ"] == pytest.approx(0.0)
    assert terms["rounding"] == pytest.approx(0.0, abs=1e-12)
    assert terms["Δlog E0"] == pytest.approx(math.log(0.45))  # -0.7985


def test_failure_modes_against_the_best_model() -> None:
    rows = pd.DataFrame(
        {
            "model": ["best", "wordy", "sloppy"],
            "benchmark": "b",
            "e0": [2.0, 1.0, 1.0],
            "r_ctx": [1.0, 1.0, 1.0],
            "r_logic": [1.0, 1.0, 0.5],
            "mean_tokens": [500.0, 1000.0, 500.0],
            "vo": [5.0, 10.0, 5.0],
            "kappa": [1.0, 1.0, 1.0],
        }
    )
    modes = views.failure_mode_table(rows).set_index("model")["failure_mode"]
    assert modes.to_dict() == {
        "best": "no-shortfall",
        "wordy": "verbosity-limited",
        "sloppy": "logic-limited",
    }
    board = views.e0_board(rows)
    assert board["model"].tolist() == ["best", "sloppy", "wordy"]
    assert board["e0_rank"].tolist() == [1, 2, 2]


def test_failure_modes_of_stored_rows_use_decomposes_log_ratio() -> None:
    """A model that never answers right is logic-limited on the page as in decompose."""
    rows = pd.DataFrame(
        {
            "benchmark": "b",
            "model": ["best", "never"],
            "e0": [2.0, 0.0],
            "r_ctx": [1.0, 0.5],
            "r_logic": [0.5, 0.0],
            "mean_tokens": [250.0, 250.0],
            "vo": [2.0, 2.0],
            "kappa": [1.0, 1.0],
        }
    )
    table = views.failure_mode_table(rows).set_index("model")
    # never vs best: Δlog r_logic = log 0 − log 0.5 = −inf (shortfall +inf);
    # Δlog r_ctx = log 0.5 − log 1 = −0.6931 (shortfall 0.6931); Δlog VŌ = Δlog κ = 0
    assert table.loc["never", "dlog_r_logic"] == -math.inf
    assert table.loc["never", "dlog_r_ctx"] == pytest.approx(-0.693147, abs=1e-6)
    assert table.loc["never", "failure_mode"] == "logic-limited"
    assert table.loc["best", "failure_mode"] == "no-shortfall"
    # the waterfall shows the same −inf bar and an E0 total of log 0 − log 2 = −inf
    terms = views.delta_log_terms(rows.iloc[1].to_dict(), rows.iloc[0].to_dict())
    assert terms.set_index("term").loc["Δlog r_logic", "value"] == -math.inf
    assert terms.set_index("term").loc["Δlog E0", "value"] == -math.inf


def test_decomposition_instances_from_store_tables() -> None:
    traces = pd.DataFrame(
        {
            "trace_id": ["t1", "t2", "t3"],
            "problem_id": ["p", "p", "q"],
            "dataset": "d",
            "teacher": ["a", "a", "b"],
            "sample": [0, 1, 0],
            "tokens": [10, 20, 30],
            "truncated": [False, True, None],
            "reasoning": ["x", "y", "z"],
        }
    )
    grades = pd.DataFrame({"trace_id": ["t1", "t2", "t3"], "correct": [True, False, None]})
    problems = pd.DataFrame({"problem_id": ["p", "q"], "workload": [2.0, None]})
    out = views.decomposition_instances(traces, grades, problems)
    assert out["instance_id"].tolist() == ["p", "p#1"]  # ungraded t3 dropped
    assert out["truncated"].tolist() == [False, True] and out["workload"].tolist() == [2.0, 2.0]


# --- published, store overview --------------------------------------------------------------------


def test_published_beside_matches_by_name_or_hf_id() -> None:
    from legival_core.published.published import legival_table7

    mine = pd.DataFrame(
        {
            "teacher": ["QWEN3-8B", "mine", "other"],
            "dataset": ["math", "GPQA", "MATH"],
            "fotu": [0.1, 0.2, 0.3],
            "hf_id": [None, "Qwen/QwQ-32B", "x/y"],
        }
    )
    out = views.published_beside(legival_table7(), mine, ["fotu"])
    assert out[["model", "dataset", "your_teacher"]].values.tolist() == [
        ["qwen3-8b", "MATH", "QWEN3-8B"],
        ["qwq-32b", "GPQA", "mine"],
    ]


def test_store_overview_and_provenance_from_a_manifest() -> None:
    manifest = {
        "tables": {
            "traces": {
                "rows": 3,
                "parts": [
                    {"file": "p1", "rows": 3, "bytes": 10},
                    {"file": "p2", "rows": 0, "bytes": 5},
                ],
            },
            "mystery": {"rows": 1, "parts": []},
        },
        "provenance": [{"time": "t", "stage": "<b>x</b>", "seed": 1}, "junk"],
    }
    overview = views.store_overview(manifest).set_index("table")
    assert overview.loc["traces", ["rows", "parts", "bytes"]].tolist() == [3, 2, 15]
    assert overview.loc["mystery", "description"] == "(unknown table)"
    prov = views.provenance_table(manifest)
    assert prov["stage"].tolist() == ["<b>x</b>"] and prov["details"].item() == '{"seed": 1}'


@pytest.mark.parametrize("profile", ["paper", "release"])
def test_student_metrics_read_from_transfer_curves_equal_those_from_the_rollouts(
    profile: str,
) -> None:
    """The correlations and leaderboard pages read per-student metrics from the stored
    ``transfer_curves`` instead of regrouping every rollout; on the demo store the two agree
    for every (teacher, dataset, student) cell and metric."""
    from legival_core.metrics.transfer_curves import CELL_METRICS
    from legival_core.store.store import Store

    store = Store.open(Path(__file__).resolve().parents[1] / "results" / "demo")
    keys = ["teacher", "dataset", "student"]
    stored = views.student_metrics_from_curves(store.read("transfer_curves"), profile)
    computed = (
        views.student_transfer_metrics(store.read("rollouts"), profile)
        .sort_values(keys)
        .reset_index(drop=True)
    )
    # 5 teachers x 5 datasets, one without rollouts, x 2 students
    assert len(stored) == len(computed) == 48
    assert stored[keys].equals(computed[keys])
    for column in CELL_METRICS:
        assert np.allclose(
            stored[column].astype(float),
            computed[column].astype(float),
            rtol=0,
            atol=1e-12,
            equal_nan=True,
        ), column


# --- pages that say what the data says (issue 25) ----------------------------------------------


def test_board_shows_a_constant_metric_as_tied_not_ranked() -> None:
    from legival_core.views import board as layout

    # Regression is 0 for every teacher: rank_table gives all rank 1 ("min" ties) and a change
    # of accuracy_rank - 1 = 0, -1, -2, which the old board drew as "=", "▼ 1", "▼ 2".
    tm = pd.DataFrame(
        {"teacher": ["a", "b", "c"], "dataset": "d", "accuracy": [0.9, 0.6, 0.3],
         "regression_rate": [0.0, 0.0, 0.0]}
    )  # fmt: skip
    board = views.leaderboard(tm, ["accuracy", "regression_rate"])
    assert board["regression_rate_rank"].tolist() == [1, 1, 1]
    shown = layout.uncertainty_board(board, pd.DataFrame(), ["accuracy", "regression_rate"], 20)
    assert shown["Regression rank"].tolist() == ["tied"] * 3
    assert shown["Regression Δ"].tolist() == ["tied"] * 3
    assert shown["Accuracy rank"].tolist() == ["1", "2", "3"]  # a metric that varies keeps ranks
    assert layout.verdict(board, pd.DataFrame(), "regression_rate").startswith(
        "Every ranked teacher has the same Regression"
    )


def test_board_gives_no_interval_from_one_trace() -> None:
    from legival_core.views import board as layout

    # one trace: every resample is that trace, the bootstrap says [0.0-0.0], looking certain
    assert layout.value_cell(0.0, 0.0, 0.0, 1, 1, "accuracy", 20) == (
        "0.0% · n 1 · one trace, no interval"
    )
    assert layout.value_cell(0.5, 0.0, 1.0, 2, 1, "accuracy", 1) == "50.0% [0.0–100.0] · n 2"
    board = pd.DataFrame({"teacher": ["a", "b"], "accuracy": [0.0, 0.5],
                          "accuracy_rank": [2, 1]})  # fmt: skip
    intervals = pd.DataFrame({"teacher": ["a", "b"], "metric": "accuracy", "value_lo": [0.0, 0.2],
                              "value_hi": [0.0, 0.8], "n_traces": [1, 10], "n_students": 1,
                              "rank_lo": [1, 1], "rank_hi": [2, 2]})  # fmt: skip
    detail = layout.metric_detail(board, intervals, "accuracy", 20).set_index("teacher")
    assert math.isnan(detail.loc["a", "95% lo"]) and math.isnan(detail.loc["a", "95% hi"])
    assert detail.loc["b", "95% lo"] == 0.2


def test_verdict_names_who_is_ahead_by_rank_intervals() -> None:
    from legival_core.views import board as layout

    # rank intervals a 1-1, b 2-3, c 2-4, d 4-4: a is ahead of b, c, d (1 < 2, 2, 4); b's hi 3
    # is below d's lo 4, so b is ahead of d; c (hi 4) is ahead of no one.
    board = pd.DataFrame({"teacher": list("abcd"), "fotu": [0.4, 0.3, 0.2, 0.1],
                          "fotu_rank": [1, 2, 3, 4]})  # fmt: skip
    intervals = pd.DataFrame({"teacher": list("abcd"), "metric": "fotu",
                              "rank_lo": [1, 2, 2, 4], "rank_hi": [1, 3, 4, 4]})  # fmt: skip
    assert layout.verdict(board, intervals, "fotu") == (
        "On FOTU, a is ahead of b, c and d; b is ahead of d; the others are not separated "
        "from each other."
    )
    overlapping = intervals.assign(rank_lo=1, rank_hi=4)
    assert layout.verdict(board, overlapping, "fotu").startswith("No teacher is separated on FOTU")
    # rows sorted by the chosen metric's rank, not by accuracy
    assert layout.rank_order(board.assign(fotu_rank=[3, 1, 4, 2]), "fotu").tolist() == [1, 3, 0, 2]


def test_monitor_intervals_are_wilson_and_undefined_stays_undefined() -> None:
    from legival_core.views.monitoring import monitor_intervals

    # gpt-4-turbo on the demo: one sabotaged trace, caught. Bootstrap: P = R = F1 = 1 [1, 1].
    # Wilson for 1 of 1: lo = 1 / (1 + z^2) = 1 / 4.841459 = 0.206549, hi = 1.
    # Row 2: nothing called invalid (tp = fp = 0): precision undefined, not 0.
    scores = pd.DataFrame(
        {"tp": [1, 0], "fp": [0, 0], "fn": [0, 2], "n_invalid": [1, 2],
         "precision": [1.0, float("nan")], "recall": [1.0, 0.0], "f1": [1.0, 0.0],
         "precision_lo": [1.0, np.nan], "precision_hi": [1.0, np.nan], "recall_lo": [1.0, 0.0],
         "recall_hi": [1.0, 0.0], "f1_lo": [1.0, 0.0], "f1_hi": [1.0, 0.0]}
    )  # fmt: skip
    out = monitor_intervals(scores)
    assert out.loc[0, "precision_lo"] == pytest.approx(1 / 4.841459, abs=1e-6)
    assert out.loc[0, "precision_hi"] == 1.0 and out.loc[0, "recall_n"] == 1
    assert math.isnan(out.loc[0, "f1_lo"])  # F1 from one trace: no interval
    assert math.isnan(out.loc[1, "precision"]) and out.loc[1, "precision_n"] == 0
    # recall 0 of 2: Wilson hi = z^2 / (2 + z^2) = 3.841459 / 5.841459 = 0.657620
    assert out.loc[1, "recall_hi"] == pytest.approx(3.841459 / 5.841459, abs=1e-6)
    # F1 rests on tp + fp + fn = 2 traces: its bootstrap interval is kept
    assert out.loc[1, "f1_lo"] == 0.0


def test_failure_modes_never_use_a_reference_teacher_as_the_yardstick() -> None:
    # human E0 5.8 would be "best"; without it, a (E0 0.5) is the yardstick for c (E0 0.1):
    # dlog E0 of c = log(0.1 / 0.5) = -1.609438
    d = pd.DataFrame({"benchmark": "b", "model": ["a", "human", "c"], "e0": [0.5, 5.8, 0.1],
                      "r_ctx": 1.0, "r_logic": [0.5, 1.0, 0.1],
                      "mean_tokens": [1000.0, 172.0, 1000.0]})  # fmt: skip
    with_human = views.failure_mode_table(d)
    assert set(with_human["reference"]) == {"human"}
    modes = views.failure_mode_table(d, ["human"]).set_index("model")
    assert set(modes["reference"]) == {"a"} and "human" not in modes.index
    assert modes.loc["c", "dlog_e0"] == pytest.approx(math.log(0.1 / 0.5), abs=1e-12)


def test_redundancy_all_is_the_mean_over_datasets() -> None:
    from legival_core.views.redundancy import sweep_over_datasets

    # T: 0.2 on a (1 trace) and 0.4 on b (3 traces): mean over datasets 0.3, as the
    # leaderboard averages; pooling traces would give (0.2 + 3 * 0.4) / 4 = 0.35.
    sweep = pd.DataFrame({"teacher": "T", "dataset": ["a", "b"], "threshold": 0.8,
                          "redundancy": [0.2, 0.4], "n_traces": [1, 3]})  # fmt: skip
    out = sweep_over_datasets(sweep)
    assert out["redundancy"].tolist() == pytest.approx([0.3])
    assert out["n_traces"].tolist() == [4] and out["n_datasets"].tolist() == [2]


def test_observed_coverage_counts_measured_bins_per_teacher() -> None:
    # trace a (m = 4) measured at k = 2, 4: bins ceil(50 * 2 / 4) = 25 and 50; trace b (m = 5)
    # measured at k = 5 only (bin 50), two students each (counted once); teacher U: k = 1 of
    # m = 3 -> bin ceil(50 / 3) = 17.
    rollouts = pd.DataFrame(
        {"teacher": ["T"] * 6 + ["U"], "dataset": "D", "student": ["s", "t"] * 3 + ["s"],
         "trace_id": ["a", "a", "a", "a", "b", "b", "c"], "k": [2, 2, 4, 4, 5, 5, 1],
         "m": [4, 4, 4, 4, 5, 5, 3]}
    )  # fmt: skip
    cov = views.observed_coverage(rollouts)
    seen = cov[cov["n_observed"] > 0][["teacher", "bin", "n_observed", "n_traces"]]
    assert seen.values.tolist() == [["T", 25, 1, 2], ["T", 50, 2, 2], ["U", 17, 1, 1]]
    assert len(cov) == 100  # 50 bins per teacher, measured or not
    firsts = views.first_measured_positions(rollouts).set_index("trace_id")
    assert firsts["first_x"].to_dict() == pytest.approx({"a": 0.5, "b": 1.0, "c": 1 / 3})
    assert firsts["whole_only"].to_dict() == {"a": False, "b": True, "c": False}


def test_trace_html_links_only_redundant_steps_and_marks_the_wrong_step() -> None:
    # step 2 matches step 1 at 0.9 (> tau 0.8: redundant), step 3 matches step 1 at 0.3
    steps = steps_frame(["a b", "a b again", "something else"])
    similarity = pd.DataFrame({"step": [0, 1, 2], "max_similarity": [np.nan, 0.9, 0.3],
                               "matched_step": pd.array([None, 0, 0], dtype="Int64")})  # fmt: skip
    table = views.step_table(steps, similarity, threshold=0.8)
    body = views.trace_html(table, anchor="x", wrong_steps={3: "human"})
    assert body.count('class="lv-jump"') == 1 and 'href="#x-s1"' in body
    # a step runs to the next step's tag or the end of the trace (steps are spans: the
    # inspector page's renderer draws both)
    step = r'id="x-s{}".*?(?=<span class="lv-step"|</div>)'
    wrong = re.search(step.format(3), body).group(0)
    assert "first wrong step" in wrong and "human" in wrong
    assert "first wrong step" not in re.search(step.format(2), body).group(0)


def test_trace_choices_open_on_a_correct_trace_with_rollouts() -> None:
    traces = pd.DataFrame({"trace_id": ["a", "b", "c"], "teacher": ["T", "T", "U"],
                           "dataset": "D", "problem_id": ["p", "q", "r"], "sample": 0,
                           "tokens": [10, 20, 30]})  # fmt: skip
    grades = pd.DataFrame({"trace_id": ["a", "b", "c"], "correct": [True, True, False]})
    # a has no rollouts; b has two students' (FOTU 0.2 and 0.4, mean 0.3); c is wrong
    transfer = pd.DataFrame({"trace_id": ["b", "b", "c"], "fotu": [0.2, 0.4, 0.0],
                             "leak_k": pd.array([3, 3, None], dtype="Int64")})  # fmt: skip
    out = views.trace_choices(traces, grades, transfer, pd.Series({"a": 4, "b": 6, "c": 2}))
    assert out["trace_id"].tolist()[0] == "b"
    first = out.iloc[0]
    assert first["fotu"] == pytest.approx(0.3) and first["leak_k"] == 3 and first["m"] == 6


def test_site_and_app_draw_a_trace_with_one_renderer() -> None:
    """Issue 39, item 4: the site's trace pages (views.trace_html) and the inspector page
    (views.reading.trace_markdown) were near-duplicate renderers that could drift apart. Now
    both are views.reading.render_steps and differ only in how a step's text is written."""
    from legival_core.views import reading

    steps = steps_frame(["a <b>x</b>", "a <b>x</b> again", "$y$ & \u202e end"])
    similarity = pd.DataFrame({"step": [0, 1, 2], "max_similarity": [np.nan, 0.9, 0.3],
                               "matched_step": pd.array([None, 0, 0], dtype="Int64")})  # fmt: skip
    table = views.step_table(steps, similarity, threshold=0.8)
    strip = pd.DataFrame({1: [1.0], 2: [0.0]}, index=["<s>"])
    kwargs = {"anchor": "x", "leak_k": 2, "strip": strip, "wrong_steps": {3: "<human>"}}
    site = views.trace_html(table, **kwargs)
    app = reading.trace_markdown(table, **kwargs)

    def without_text(body: str) -> str:
        body = re.sub(r'<span class="lv-text"[^>]*>.*?</span>(?= <a| <span|</span>)', "T", body)
        return body.replace(reading._STYLE, "").replace("\n\n", "")

    assert without_text(site) == without_text(app)
    assert "<b>" not in site and "&lt;b&gt;" in site and "&lt;s&gt;" in site
    assert "\u202e" not in site and "\u202e" not in app
