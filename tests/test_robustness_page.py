"""The Robustness page (AppTest), the leaderboard's ⇅ marker, the snapshot's section, and the
account of the demo store in docs/robustness.md, each checked against legival_core on the same
store."""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd
import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest

from legival_core.rankings.robustness_choices import Settings, load_tables, robustness_report
from legival_core.store.store import Store
from legival_core.views import robustness as robustness_view
from legival_core.views.app_config import BUNDLED_STORES, RANK_RESAMPLES, RESAMPLE_SEED
from tests import app_fixtures
from tests.app_runner import run_app_page

# Slow: each test computes a robustness report (resampled rankings) or runs a page on one.
pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[1]
DEMO = BUNDLED_STORES["demo"]


@pytest.fixture(scope="module")
def toy_store(tmp_path_factory: pytest.TempPathFactory) -> Store:
    return app_fixtures.build_store(tmp_path_factory.mktemp("stores") / "toy")


@pytest.fixture(autouse=True)
def _clear_caches() -> None:
    st.cache_data.clear()
    st.cache_resource.clear()


def _report(store: Store | Path, n_boot: int = RANK_RESAMPLES):
    opened = store if isinstance(store, Store) else Store.open(store)
    return robustness_report(
        load_tables(opened),
        Settings.from_manifest(opened.manifest),
        n_boot=n_boot,
        seed=RESAMPLE_SEED,
    )


def run_page(
    page: str, monkeypatch: pytest.MonkeyPatch, store: Path, params: dict[str, str] | None = None
) -> AppTest:
    return run_app_page(page, monkeypatch, [store], params)


def _frame(at: AppTest, column: str) -> pd.DataFrame:
    return next(d.value for d in at.dataframe if column in d.value.columns)


def test_page_shows_the_report_of_the_store(toy_store: Store, monkeypatch) -> None:
    at = run_page("robustness", monkeypatch, toy_store.path)
    report = _report(toy_store)
    # The toy store records no primary labeler: the one whose labels give the stored
    # backtracking column is the judge, so the lexical detector is the alternative.
    assert report.settings.labeler == "judge:toy-judge"
    assert "labeler:lexical" in set(report.summary["choice"])
    survival = _frame(at, "verdict")
    pd.testing.assert_frame_equal(
        survival.reset_index(drop=True), robustness_view.survival_table(report), check_dtype=False
    )
    first = report.summary["metric"].iloc[0]
    matrix = _frame(at, "τ_b")
    expected = robustness_view.choice_matrix(report, first)
    assert matrix["choice"].tolist() == expected["choice"].tolist()
    assert matrix["τ_b"].tolist() == expected["τ_b"].tolist()
    assert matrix["flips"].tolist() == expected["flips"].tolist()
    # Two students, two labelers, no reference and no side tables: only those missing (the
    # toy store was cut by Punkt, so the other two segmenters).
    unavailable = _frame(at, "reason")
    assert unavailable["choice"].tolist() == [
        "reference teachers ranked too",
        "steps cut by math (the maths-aware segmenter)",
        "steps cut by lines (Punkt and every line break)",
    ]


def test_metric_and_choice_come_from_the_url(toy_store: Store, monkeypatch) -> None:
    report = _report(toy_store)
    flipped = report.summary[report.summary["flips"] > 0]
    assert len(flipped), "the toy store should flip some pair under some choice"
    metric, choice = flipped.iloc[0]["metric"], flipped.iloc[0]["choice"]
    at = run_page("robustness", monkeypatch, toy_store.path, {"metric": metric, "choice": choice})
    pairs = _frame(at, "flipped with")
    expected = robustness_view.side_by_side(report, metric, choice)
    assert pairs["teacher"].tolist() == expected["teacher"].tolist()
    assert pairs["flipped with"].tolist() == expected["flipped with"].tolist()
    flips = report.flips[(report.flips.metric == metric) & (report.flips.choice == choice)]
    swapped = set(flips["above"]) | set(flips["below"])
    # Exactly the teachers of a flipped pair name a partner.
    assert {t for t, w in zip(pairs["teacher"], pairs["flipped with"], strict=True) if w} == swapped
    assert at.query_params["metric"] == metric and at.query_params["choice"] == choice


def test_leaderboard_marks_ranks_that_flip(toy_store: Store, monkeypatch) -> None:
    at = run_page("leaderboard", monkeypatch, toy_store.path)
    report = _report(toy_store, n_boot=0)
    # every shown metric's rank column, not only the sorted one's (the first screen's)
    next(t for t in at.toggle if t.label == "Rank and Δ of every column").set_value(True)
    # The board shows a few columns by default; "More columns" adds every metric's rank.
    more = next(m for m in at.multiselect if m.label == "More columns")
    from pages.common import metric_label

    offered = set(more.options)  # the chooser's labels: every metric but the chosen one
    more.set_value(
        [m for m in dict.fromkeys(report.summary["metric"]) if metric_label(m) in offered]
    )
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    board = at.dataframe[0].value.set_index("teacher")
    marked_any = False
    for metric in dict.fromkeys(report.summary["metric"]):
        label = robustness_view.METRICS[metric].label
        if f"{label} rank" not in board:
            continue
        changing = report.changing_teachers(metric)
        for teacher, cell in board[f"{label} rank"].items():
            assert cell.endswith(robustness_view.CHANGE_MARK) == (teacher in changing), (
                metric,
                cell,
            )
            marked_any |= teacher in changing
    assert marked_any
    links = at.get("page_link")
    assert links and "Robustness" in links[0].proto.label
    # a page link's label does not wrap: the explanation is a caption, the link short
    assert len(links[0].proto.label) <= 60, links[0].proto.label
    assert any("flips under some analysis choice" in c.value for c in at.caption)


def test_demo_page_compares_the_labelers_and_the_segmenters(monkeypatch) -> None:
    """Issue 38: the demo holds both offline labelers and the other segmenters' side tables,
    so every choice is computed (no "unavailable" table) and a verdict names what it compared."""
    at = run_page("robustness", monkeypatch, DEMO)
    assert not [d for d in at.dataframe if "reason" in d.value.columns]
    survival = _frame(at, "verdict").set_index("metric")
    # Redundancy and backtracking each have the alternatives of their own choices compared:
    # the segmenters (paper's Punkt and lines) and the other labeler.
    assert survival.loc["Redundancy", "choices compared"] >= 3
    assert survival.loc["Backtracking", "choices compared"] >= 3
    verdicts = " ".join(survival["verdict"])
    assert "backtracking labeler lexical" in survival.loc["Backtracking", "verdict"]
    assert "steps cut by lines" in survival.loc["Redundancy", "verdict"]
    assert "student" in verdicts  # each student alone is compared too


def test_a_table_that_does_not_fit_gives_a_message(tmp_path: Path, monkeypatch) -> None:
    from legival_core.store.schema import trace_id_for
    from tests.test_robustness import build_hand_store

    store = build_hand_store(tmp_path / "bad")
    # A similarity row for step 20 of a 9-step trace: the steps of that trace have a gap.
    row = {"trace_id": trace_id_for("A", "p1"), "step": 20, "max_similarity": 0.5}
    store.write("similarity", pd.DataFrame([row]), stage="hand-edit")
    at = run_page("robustness", monkeypatch, store.path)
    text = " ".join(w.value for w in at.warning)
    assert "cannot be made for this store" in text
    assert "similarity" in text and "step" in text
    # The leaderboard still draws, without marks, saying why.
    board = run_page("leaderboard", monkeypatch, store.path)
    assert any("No robustness marks" in c.value for c in board.caption)


def test_snapshot_has_the_robustness_section(toy_store: Store, tmp_path: Path) -> None:
    import html

    from precompute.publish import PublishOptions, publish

    publish(toy_store.path, tmp_path / "site", PublishOptions(n_boot=200))
    page = (tmp_path / "site" / "index.html").read_text(encoding="utf-8")
    report = _report(toy_store, n_boot=200)
    for verdict in robustness_view.survival_table(report)["verdict"]:
        assert html.escape(verdict) in page
    # The rank table marks, as the app's leaderboard does, every rank that flips under some
    # choice with ⇅, and a line under it links to the section.
    assert '<h2 id="robustness">Robustness to analysis choices</h2>' in page
    assert '<a href="#robustness">' in page.split('id="rank-table"')[0].rsplit("<h2", 1)[1]
    markup = page.split('id="rank-table"', 1)[1].split("</table>", 1)[0]
    header = [html.unescape(h) for h in re.findall(r"<th>(.*?)</th>", markup)]
    rows = [
        [html.unescape(re.sub(r"<[^>]+>", "", c)) for c in re.findall(r"<td[^>]*>(.*?)</td>", r)]
        for r in re.findall(r"<tr>(.*?)</tr>", markup.split("<tbody>", 1)[1])
    ]
    table = pd.DataFrame(rows, columns=header).set_index("teacher")
    marked = 0
    for metric in dict.fromkeys(report.summary["metric"]):
        column = f"{robustness_view.METRICS[metric].label} rank"
        if column not in table:
            continue
        changing = report.changing_teachers(metric)
        for teacher, cell in table[column].items():
            assert str(cell).endswith(robustness_view.CHANGE_MARK) == (teacher in changing)
            marked += teacher in changing
    assert marked
    # Every choice that flips a pair has its two rankings side by side, as the page shows
    # them for a chosen choice (folded), with the choices' labels, not their keys.
    labels = dict(zip(report.summary["choice"], report.summary["label"], strict=True))
    flipping = report.flips[["metric", "choice"]].drop_duplicates()
    assert len(flipping)
    for metric, choice in flipping.itertuples(index=False):
        title = (
            f"Side by side: {robustness_view.METRICS[metric].label}, the default and "
            f"{labels[choice]}"
        )
        assert f"<summary>{html.escape(title)}</summary>" in page, title
        pairs = robustness_view.side_by_side(report, metric, choice)
        folded = page.split(f"<summary>{html.escape(title)}</summary>", 1)[1].split("</details>")[0]
        for teacher, partners in zip(pairs["teacher"], pairs["flipped with"], strict=True):
            if partners:
                assert html.escape(partners) in folded, (title, teacher)
    assert f"<td>{html.escape(choice)}</td>" not in page  # a key such as threshold:0.85
    # the LaTeX table is the plain board (ASCII only, no mark)
    assert (tmp_path / "site" / "leaderboard.tex").read_text(encoding="utf-8").isascii()


def _docs_rows() -> dict[str, list[str]]:
    """The table of the demo's robustness verdicts in docs/robustness.md: metric -> its cells."""
    text = (REPO / "docs" / "robustness.md").read_text(encoding="utf-8")
    section = text.split("<!-- robustness-demo-table -->")[1]
    rows = {}
    for line in section.strip().splitlines():
        if not line.startswith("|"):
            break
        cells = [c.strip() for c in line.strip("|").split("|")]
        if cells[0] and not re.fullmatch(r"[-: ]+", cells[0]) and cells[0] != "metric":
            rows[cells[0]] = cells[1:]
    return rows


def test_the_docs_report_what_the_demo_report_finds() -> None:
    survival = robustness_view.survival_table(_report(DEMO))
    documented = _docs_rows()
    assert sorted(documented) == sorted(survival["metric"])
    for row in survival.itertuples(index=False):
        *counts, verdict = documented[row.metric]
        assert [int(c) for c in counts] == list(row[1:6]), row.metric
        assert verdict == row.verdict
