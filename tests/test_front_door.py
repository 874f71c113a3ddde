"""The notebooks' front door (``lv.open``) gives the numbers the app's pages show.

Every page is run headless with streamlit's AppTest on the bundled demo store, once at its
first view (the front door's defaults) and once with filters that are not the defaults (a
student filter on the app tests' toy store, which has two students where the demo has one), and
what the page sends to the browser is compared with the front door's frame, value by value:

* Leaderboard: the "Rank intervals of" table of every ranked metric (value, 95% interval, n,
  rank, rank interval; numbers at full precision) against ``rank_intervals()`` formatted as the
  page formats it, and its value and rank per teacher against ``leaderboard()``'s ``<metric>``
  and ``<metric>_rank``. The main table is text (like "12.5% [4.0–30.0] · n 12") made from those
  same frames, so it is not parsed here.
* Transfer curves: the chart's line of each teacher (its y values) against ``curves()``'s
  ``mean``, its band against ``lo`` / ``hi``; the pooled summary table against
  ``transfer().summary``.
* Trace inspector: the trace table against ``traces()`` (formatted as the page formats it:
  ``display.tidy_table``), and each drawn step's tooltip (r_i, matched step, tokens), text,
  redundancy rule and backtracking markers against ``trace()``.
* Correlations: the heatmap's ρ and its n against ``correlations(value="rho" / "n")``.
* Efficiency decomposition: the E0 board table against ``decomposition()`` (tidy_table'd).

The demo store's numbers are not written here: both sides are computed, so a rebuilt demo
store keeps this test true.
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest

import legival_core as lv
from legival_core import views
from legival_core.results import Results
from legival_core.store.store import StoreError
from legival_core.text.safe_text import markdown_math
from legival_core.views import board as board_layout
from legival_core.views.display import MISSING, tidy_table
from legival_core.views.efficiency import E0_BOARD_LABELS
from tests.app_fixtures import plotly_array
from tests.app_runner import run_app_page
from tests.child_process import python_child

REPO = Path(__file__).resolve().parents[1]
DEMO = REPO / "results" / "demo"


@pytest.fixture(scope="module")
def demo() -> Results:
    return lv.open(DEMO)


@pytest.fixture(autouse=True)
def _clear_caches() -> None:
    st.cache_data.clear()
    st.cache_resource.clear()


@pytest.fixture(scope="module")
def two_students(tmp_path_factory: pytest.TempPathFactory) -> Results:
    """The app tests' toy store (tests/app_fixtures.py, derived tables by the real metric
    code): two students, where the demo store has one, so a student filter changes numbers."""
    from tests import app_fixtures

    return lv.open(app_fixtures.build_store(tmp_path_factory.mktemp("stores") / "toy").path)


def run_page(
    page: str,
    monkeypatch: pytest.MonkeyPatch,
    params: dict[str, str] | None = None,
    store: Path = DEMO,
) -> AppTest:
    """``app.py`` on ``page`` of ``store``, with the URL parameters a link would carry."""
    return run_app_page(page, monkeypatch, [store], params)


def page_of_one_student(
    r: Results,
    monkeypatch: pytest.MonkeyPatch,
    page: str,
    read: Callable[..., pd.DataFrame],
    column: str,
) -> tuple[AppTest, str]:
    """``page`` drawn for the last student of ``r`` alone, and that student; also checks that
    the front door's ``read`` (a method of ``r``) differs for that student in ``column`` from
    every student's, so a page that ignored the filter could not pass."""
    student = r.students[-1]
    at = run_page(page, monkeypatch, {"student": student}, store=r.path)
    assert not np.allclose(read(student=student)[column], read()[column])
    return at, student


def chart(at: AppTest, key: str) -> dict[str, Any]:
    specs = [json.loads(c.proto.spec) for c in at.get("plotly_chart") if key in c.proto.id]
    assert len(specs) == 1, (key, [c.proto.id for c in at.get("plotly_chart")])
    return specs[0]


def values(data: Any) -> np.ndarray:
    return plotly_array(data, dtype=object)


def select(at: AppTest, label: str) -> Any:
    return next(s for s in at.selectbox if s.label == label)


def same_table(shown: pd.DataFrame, expected: pd.DataFrame) -> None:
    """Equal cell by cell (numbers to float precision, text as text), dtypes aside: the grid's
    Arrow round trip turns Int64 into int64 and the like."""
    assert list(shown.columns) == list(expected.columns)
    pd.testing.assert_frame_equal(
        shown.reset_index(drop=True), expected.reset_index(drop=True), check_dtype=False
    )


# --- leaderboard ----------------------------------------------------------------------------------


def rank_intervals(at: AppTest) -> pd.DataFrame:
    """The leaderboard's "Rank intervals of" table (numbers, not text)."""
    return next(d.value for d in at.dataframe if "rank 95% interval" in d.value.columns)


def check_board(at: AppTest, r: Results, metrics: list[str], **selection: Any) -> None:
    """For every metric: the page's "Rank intervals of" table equals the front door's
    ``rank_intervals`` (formatted as the page formats it), and its value and rank per teacher
    equal ``leaderboard``'s."""
    board = r.leaderboard(**selection)
    by_teacher = board.set_index(board["teacher"].astype(str))
    for metric in metrics:
        select(at, "Rank intervals of").select(metric).run()
        shown = rank_intervals(at)
        detail = r.rank_intervals(metric, **selection).drop(columns=["rank (upper bound)"])

        def number(v: Any, m: str = metric) -> str:
            return board_layout.format_value(v, m)

        formats = {"value": number, "95% lo": number, "95% hi": number}
        same_table(shown, tidy_table(detail, formats=formats).data)
        shown = shown.set_index("teacher")
        assert sorted(shown.index) == sorted(by_teacher.index), metric
        mine = by_teacher.loc[shown.index]
        np.testing.assert_allclose(
            shown["value"].to_numpy(float), mine[metric].to_numpy(float), err_msg=metric
        )
        # the grid shows a missing rank (a reference teacher's) as the text "—"
        ranks = [MISSING if pd.isna(v) else str(int(v)) for v in mine[f"{metric}_rank"]]
        assert [str(v) for v in shown["rank"]] == ranks, metric


@pytest.mark.slow
def test_leaderboard_equals_the_page(demo: Results, monkeypatch: pytest.MonkeyPatch) -> None:
    at = run_page("leaderboard", monkeypatch)
    board = demo.leaderboard()
    metrics = views.ranked_metrics(board, views.LEADERBOARD_METRICS)
    assert {"accuracy", "fotu", "tokens"} <= set(metrics)
    # the table the page opens with is the front door's default metric's
    same_table(
        rank_intervals(at)[["teacher", "value"]], demo.rank_intervals()[["teacher", "value"]]
    )
    check_board(at, demo, metrics)
    # the main table lists the same teachers
    assert sorted(at.dataframe[0].value["teacher"]) == sorted(board["teacher"].astype(str))


@pytest.mark.slow
def test_leaderboard_filters_equal_the_page(demo: Results, monkeypatch: pytest.MonkeyPatch) -> None:
    """Not the defaults: one dataset, the reference teacher ranked and a composite."""
    dataset = demo.datasets[-1]
    at = run_page(
        "leaderboard",
        monkeypatch,
        {"dataset": dataset, "references": "include", "weights": "fotu:1,accuracy:2"},
    )
    selection = {"weights": {"fotu": 1, "accuracy": 2}, "include_references": True}
    board = demo.leaderboard(dataset, **selection)
    # the filters matter: one dataset's numbers are not the average over every dataset, and
    # the reference teacher has a rank only when included
    default = demo.leaderboard().set_index("teacher")
    assert not np.allclose(
        board.set_index("teacher").loc[default.index, "accuracy"], default["accuracy"]
    )
    reference = demo.reference_teachers[0]
    assert pd.isna(default.loc[reference, "accuracy_rank"])
    assert pd.notna(board.set_index("teacher").loc[reference, "accuracy_rank"])
    check_board(at, demo, ["composite", "accuracy", "fotu"], dataset=dataset, **selection)


@pytest.mark.slow
def test_leaderboard_of_one_student_equals_the_page(two_students: Results, monkeypatch) -> None:
    at, student = page_of_one_student(
        two_students, monkeypatch, "leaderboard", two_students.leaderboard, "fotu"
    )
    check_board(at, two_students, ["fotu", "sotu", "accuracy"], student=student)


def test_the_page_and_the_front_door_share_one_read_path(
    demo: Results, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One implementation (issue 44 item 1): the Leaderboard page and ``lv.open`` both make
    their rank table and intervals with :mod:`legival_core.views.board_view`, for the same
    :class:`~legival_core.rankings.selection.Selection` of the same filters. Fails when either
    side assembles its board itself again."""
    from legival_core.rankings.selection import Selection
    from legival_core.views import board_view

    calls: dict[str, list[Any]] = {"board_table": [], "selection_intervals": []}
    for name, asked in calls.items():
        real = getattr(board_view, name)

        def spy(*args: Any, _real: Any = real, _asked: list[Any] = asked) -> Any:
            _asked.append(next(a for a in args if isinstance(a, Selection)))
            return _real(*args)

        monkeypatch.setattr(board_view, name, spy)
    filters = {"dataset": demo.datasets[0], "weights": "fotu:1"}
    run_page("leaderboard", monkeypatch, filters)
    page = {name: list(asked) for name, asked in calls.items()}
    for asked in calls.values():
        asked.clear()
    fresh = lv.open(DEMO)  # nothing cached yet
    fresh.rank_intervals(dataset=demo.datasets[0], weights={"fotu": 1})
    chosen = Selection(dataset=demo.datasets[0], weights={"fotu": 1})
    assert page["board_table"] == calls["board_table"] == [chosen], "a board made elsewhere"
    assert page["selection_intervals"] == calls["selection_intervals"] == [chosen]


# --- transfer curves ------------------------------------------------------------------------------


def check_curves(at: AppTest, curves: pd.DataFrame, references: list[str]) -> None:
    data = chart(at, "curves_chart")["data"]
    # a curve with unmeasured bins (release) is drawn through its measured bins, with markers
    lines = {d["name"]: d for d in data if str(d.get("mode", "")).startswith("lines")}
    bands = {d["name"]: d for d in data if str(d.get("name", "")).endswith(" band")}
    teachers = sorted(curves["teacher"].unique())
    assert teachers
    for teacher in teachers:
        name = f"{teacher} (reference)" if teacher in references else teacher
        mine = curves[curves["teacher"] == teacher].sort_values("bin")
        mine = mine[mine["mean"].notna()]
        np.testing.assert_allclose(
            values(lines[name]["y"]).astype(float), mine["mean"], err_msg=teacher
        )
        np.testing.assert_allclose(values(lines[name]["x"]).astype(float), mine["x"])
        # the band: hi left to right, then lo back (a closed polygon), over bins with both
        mine = mine[mine["lo"].notna() & mine["hi"].notna()]
        band = values(bands[f"{name} band"]["y"]).astype(float)
        np.testing.assert_allclose(band, [*mine["hi"], *mine["lo"][::-1]], err_msg=teacher)


def test_curves_equal_the_page(demo: Results, monkeypatch: pytest.MonkeyPatch) -> None:
    at = run_page("transfer", monkeypatch)
    view = demo.transfer()
    check_curves(at, demo.curves(), demo.reference_teachers)
    pd.testing.assert_frame_equal(view.curves, demo.curves())
    # the pooled summary table (FOTU, traces pooled, …) is view.summary
    shown = at.dataframe[0].value.set_index("teacher")
    summary = view.summary.set_index("teacher").loc[shown.index]
    np.testing.assert_allclose(shown["FOTU, traces pooled"].astype(float), summary["fotu"])
    np.testing.assert_allclose(shown["SOTU, traces pooled"].astype(float), summary["sotu"])


@pytest.mark.slow
def test_curves_of_one_student_equal_the_page(two_students: Results, monkeypatch) -> None:
    at, student = page_of_one_student(
        two_students, monkeypatch, "transfer", two_students.curves, "mean"
    )
    check_curves(at, two_students.curves(student=student), two_students.reference_teachers)


@pytest.mark.slow
def test_curves_with_filters_equal_the_page(demo: Results, monkeypatch) -> None:
    dataset = demo.datasets[0]
    at = run_page("transfer", monkeypatch, {"dataset": dataset, "profile": "release"})
    curves = demo.curves(dataset, profile="release")
    default = demo.curves()
    assert len(curves) != len(default) or not np.allclose(curves["mean"], default["mean"])
    check_curves(at, curves, demo.reference_teachers)


# --- trace inspector ------------------------------------------------------------------------------

INSPECTOR_COLUMNS = ["teacher", "problem_id", "dataset", "sample", "correct", "m", "tokens",
                     "fotu", "leak_k"]  # fmt: skip
STEP = re.compile(
    r'<span class="lv-step" id="lv-main-s(\d+)" title="([^"]*)" style="[^"]*'
    r'border-left:3px solid (#[0-9a-f]+)">(.*?)</span>(?=\n\n)',
    re.S,
)
TEXT = re.compile(r'<span class="lv-text"[^>]*>(.*?)</span>', re.S)
MARKER = re.compile(r'class="lv-bt lv-bt-(\w+)"')


def check_trace(at: AppTest, steps: pd.DataFrame) -> None:
    """Every step the page draws: its tooltip (r_i to 2 decimals, the matched step, tokens),
    its text, its redundancy rule and its backtracking markers, from the front door's table."""
    # the steps are Markdown (their maths typeset), the inspector's own HTML around the text
    body = "".join(m.value for m in at.markdown if 'class="lv-trace"' in m.value)
    drawn = STEP.findall(body)
    assert len(drawn) == min(len(steps), 60)  # the first page of 60 steps
    assert next(m for m in at.metric if m.label == "Steps m").value == str(len(steps))
    flags = [c for c in steps.columns if c.startswith("flag_")]
    assert flags  # at least the lexical cues
    for (number, title, rule, inner), row in zip(drawn, steps.itertuples(), strict=False):
        tip = [f"step {row.number}"]
        if pd.notna(row.similarity):
            tip.append(f"similarity {row.similarity:.2f} to step {int(row.matched_step) + 1}")
        if pd.notna(row.tokens):
            tip.append(f"{int(row.tokens)} tokens")
        assert int(number) == row.number
        assert html.unescape(title) == " · ".join(tip)
        assert TEXT.search(inner).group(1) == markdown_math(row.text)
        assert (rule == "#e67e22") == bool(row.redundant), row.number
        marked = {f"flag_{kind}" for kind in MARKER.findall(inner)}
        assert marked == {c for c in flags if bool(getattr(row, c))}, row.number


def test_traces_and_the_first_trace_equal_the_page(demo: Results, monkeypatch) -> None:
    at = run_page("inspector", monkeypatch)
    choices = demo.traces()
    same_table(at.dataframe[0].value, tidy_table(choices.head(2000)[INSPECTOR_COLUMNS]).data)
    # the inspector opens on the first trace of its table, as trace() without an id does
    assert at.query_params["trace"] == choices["trace_id"].iloc[0]
    check_trace(at, demo.trace())


@pytest.mark.slow
def test_another_trace_equals_the_page(demo: Results, monkeypatch) -> None:
    choices = demo.traces()
    # a trace of another teacher than the first trace's, with a redundant step and a
    # backtracking flag on its first page, so the rule and the markers are checked both ways
    first = choices["teacher"].iloc[0]

    def telling(trace_id: str) -> bool:
        steps = demo.trace(trace_id).head(60)
        flags = [c for c in steps.columns if c.startswith("flag_")]
        return bool(steps["redundant"].any() and steps[flags].any().any())

    wanted = next(
        t
        for t, teacher in zip(choices["trace_id"], choices["teacher"], strict=True)
        if teacher != first and telling(t)
    )
    at = run_page("inspector", monkeypatch, {"trace": wanted})
    steps = demo.trace(wanted)
    assert not steps.equals(demo.trace())
    check_trace(at, steps)


# --- correlations ---------------------------------------------------------------------------------


def check_heatmap(at: AppTest, rho: pd.DataFrame, counts: pd.DataFrame) -> None:
    """ρ (full-strength and faded cells put together) and n of every cell."""
    strong, faded = chart(at, "correlation_heatmap")["data"][:2]
    z_strong, z_faded = (values(d["z"]).astype(float) for d in (strong, faded))
    np.testing.assert_allclose(
        np.where(np.isnan(z_strong), z_faded, z_strong), rho.to_numpy(float), equal_nan=True
    )
    n = np.array([[int(cell[1]) for cell in row] for row in strong["customdata"]])
    np.testing.assert_array_equal(n, counts.loc[rho.index, rho.columns].to_numpy())
    assert len(strong["x"]) == len(rho.columns)


def test_correlations_equal_the_page(demo: Results, monkeypatch) -> None:
    at = run_page("correlations", monkeypatch)
    check_heatmap(at, demo.correlations(), demo.correlations(value="n"))


def test_model_level_partial_correlations_equal_the_page(demo: Results, monkeypatch) -> None:
    at = run_page("correlations", monkeypatch, {"level": "model"})
    at.toggle(key="partial").set_value(True).run()
    rho = demo.correlations("model", partial=True)
    assert list(rho.columns) != list(demo.correlations().columns)  # tokens is held fixed
    check_heatmap(at, rho, demo.correlations("model", partial=True, value="n"))


# --- efficiency decomposition ---------------------------------------------------------------------


def test_decomposition_equals_the_page(demo: Results, monkeypatch) -> None:
    at = run_page("decomposition", monkeypatch)
    board = demo.decomposition()
    same_table(at.dataframe[0].value, tidy_table(board, E0_BOARD_LABELS).data)


def test_decomposition_of_another_benchmark_and_layer_equals_the_page(
    demo: Results, monkeypatch
) -> None:
    benchmark = demo.decomposition()["benchmark"].iloc[0]
    other = sorted(set(demo.table("decomposition")["benchmark"]) - {benchmark})[-1]
    at = run_page("decomposition", monkeypatch, {"dataset": other, "layer": "solver"})
    board = demo.decomposition(other, "solver")
    assert (
        not board["e0"]
        .reset_index(drop=True)
        .equals(demo.decomposition(other)["e0"].reset_index(drop=True))
    )
    same_table(at.dataframe[0].value, tidy_table(board, E0_BOARD_LABELS).data)


# --- opening -------------------------------------------------------------------------------------


def test_a_folder_that_is_not_a_store_says_so(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="no such store"):
        lv.open(tmp_path / "missing")
    with pytest.raises(StoreError, match=r"manifest\.json: not found"):
        lv.open(tmp_path)


def test_values_the_store_lacks_are_named(demo: Results) -> None:
    with pytest.raises(ValueError, match=r"dataset 'champ-nothing' is not in this store"):
        demo.leaderboard("champ-nothing")
    with pytest.raises(ValueError, match=r"trace 't-0' is not in this store"):
        demo.trace("t-0")
    with pytest.raises(ValueError, match=r"weighted metric 'speed'"):
        demo.leaderboard(weights={"speed": 1.0})
    with pytest.raises(ValueError, match="profile 'fast'"):
        demo.curves(profile="fast")


def snapshot(folder: Path) -> dict[str, tuple[int, int]]:
    return {
        str(p.relative_to(folder)): (p.stat().st_size, p.stat().st_mtime_ns)
        for p in sorted(folder.rglob("*"))
    }


def test_the_store_is_only_read(tmp_path: Path) -> None:
    import shutil

    store = Path(shutil.copytree(DEMO, tmp_path / "demo"))
    before = snapshot(store)
    r = lv.open(store)
    r.leaderboard(student=r.students[0], weights={"fotu": 1})
    r.curves(profile="release")
    r.trace()
    r.correlations("model", correct_only=True)
    r.decomposition(layer="trace")
    assert snapshot(store) == before


def test_a_rewritten_store_is_read_again(tmp_path: Path) -> None:
    """Like the app's cache, the front door's is keyed on the manifest's mtime: a stage that
    writes the store while a notebook holds it open is seen at the next call."""
    import os
    import shutil

    from legival_core.store.store import Store

    path = Path(shutil.copytree(DEMO, tmp_path / "demo"))
    r = lv.open(path)
    before = r.leaderboard().set_index("teacher")["accuracy"]
    teacher = before.idxmin()
    store = Store.open(path)
    rows = store.read("teacher_metrics")
    rows = rows[rows["teacher"] == teacher].assign(accuracy=1.0)
    store.write("teacher_metrics", rows)
    stamp = store.manifest_path.stat().st_mtime + 10  # a later mtime whatever the clock's grain
    os.utime(store.manifest_path, (stamp, stamp))
    after = r.leaderboard().set_index("teacher")["accuracy"]
    assert after[teacher] == 1.0 != before[teacher]
    assert after.drop(teacher).equals(before.drop(teacher))


def test_import_stays_cheap_and_the_app_stays_out() -> None:
    """``import legival_core`` loads no pandas; the front door never loads streamlit, plotly
    or the app's pages."""
    code = (
        "import sys, legival_core as lv\n"
        "assert 'pandas' not in sys.modules\n"
        f"r = lv.open({str(DEMO)!r})\n"
        "r.leaderboard(); r.curves(); r.trace(); r.correlations(); r.decomposition()\n"
        "print(sorted(m for m in sys.modules\n"
        "             if m.split('.')[0] in {'streamlit', 'plotly', 'pages', 'torch'}))\n"
    )
    done = python_child("-c", code, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
