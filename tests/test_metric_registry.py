"""Common tests of the one registry of metrics (issue 43 item 1), sklearn-style: every
:class:`~legival_core.metrics.registry.MetricSpec` is checked the same way (label, unit,
direction, level, store columns, docs page), every list of metric names derived from it equals
the literal it replaced, the docs' metric index is the registry's, and every teacher aggregate
the registry names gives, on worked tables, the number the project's own code stores
(``precompute/stages/metrics.teacher_table`` and
:func:`legival_core.metrics.transfer.teacher_metrics`), whatever the row order and however the
rows are split into chunks.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from legival_core.metrics import metric_catalog, registry, transfer
from legival_core.metrics.registry import (
    AGGREGATES,
    GROUPS,
    INTERVAL_METHODS,
    METRIC_SPECS,
    Level,
    MetricSpec,
    aggregate_teacher,
    metric_index_markdown,
    metrics_in,
    spec,
)
from legival_core.metrics.transfer import teacher_metrics, trace_metrics
from legival_core.oversight import oversight
from legival_core.rankings import rank_intervals, robustness_choices
from legival_core.store.schema import TABLES
from legival_core.views.leaderboard import LATEX_CORE_METRICS
from precompute.stages.metrics import teacher_table

ROOT = Path(__file__).resolve().parent.parent
SPECS = list(METRIC_SPECS.values())
IDS = list(METRIC_SPECS)

# ---------------------------------------------------------------------------------------------
# Every spec
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("s", SPECS, ids=IDS)
def test_every_spec_is_complete(s: MetricSpec) -> None:
    assert METRIC_SPECS[s.name] is s and spec(s.name) is s
    assert s.label.strip() and s.unit.strip() and s.description.strip()
    assert isinstance(s.higher_is_better, bool) and isinstance(s.share, bool)
    assert isinstance(s.level, Level)
    assert s.aggregate in AGGREGATES
    assert s.interval in INTERVAL_METHODS
    assert s.groups and s.groups <= set(GROUPS)
    assert isinstance(s.depends_on_student, bool)
    # a transfer metric (read per trace and student) depends on the student, an efficiency one not
    assert s.depends_on_student == (s.table == "trace_transfer")


@pytest.mark.parametrize("s", SPECS, ids=IDS)
def test_every_spec_reads_columns_the_store_has(s: MetricSpec) -> None:
    assert s.table in TABLES
    assert set(s.columns) <= set(TABLES[s.table].columns)
    # and its teacher value is a column of the stored teacher table, or (lift) of the teacher
    # table transfer.teacher_metrics computes
    computed = teacher_metrics(_rollouts(), profile="paper", n_boot=0).columns
    assert s.name in TABLES["teacher_metrics"].columns or s.name in computed


@pytest.mark.parametrize("s", SPECS, ids=IDS)
def test_every_spec_has_a_docs_page_in_the_site(s: MetricSpec) -> None:
    page = ROOT / "docs" / s.docs
    assert page.is_file(), page
    assert s.docs in (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    if s.anchor:  # a heading of the page, slugged as mkdocs does for plain words
        headings = [
            line.lstrip("#").strip()
            for line in page.read_text(encoding="utf-8").splitlines()
            if line.startswith("#")
        ]
        slugs = {re.sub(r"[^\w\- ]", "", h.lower()).strip().replace(" ", "-") for h in headings}
        assert s.anchor in slugs, (s.anchor, sorted(slugs))


def test_spec_of_an_unknown_metric_says_which_exist() -> None:
    with pytest.raises(KeyError, match="no metric 'speed'"):
        spec("speed")
    with pytest.raises(KeyError, match="no metric group"):
        metrics_in("fastest")


def test_every_group_has_a_metric() -> None:
    assert all(metrics_in(group) for group in GROUPS)


# ---------------------------------------------------------------------------------------------
# The derived lists equal the literals they replaced
# ---------------------------------------------------------------------------------------------

#: Two lists that stood, written out the same, in two modules each.
_EFFICIENCY_LITERAL = ("accuracy", "tokens", "redundancy", "backtracking")
_RESAMPLED_TRANSFER_LITERAL = ("fotu", "sotu", "regression_rate", "fotu_before_leak")
#: The published rank table's seven, which the longer lists begin with.
_RANKED_LITERAL = (*_EFFICIENCY_LITERAL, "fotu", "sotu", "regression_rate")

#: Each list of metric names the code kept by hand before the registry, as it was.
OLD_LITERALS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "metric_catalog.RANKED_METRICS": (
        metric_catalog.RANKED_METRICS,
        _RANKED_LITERAL,
    ),
    "metric_catalog.LEADERBOARD_METRICS": (
        metric_catalog.LEADERBOARD_METRICS,
        (*_RANKED_LITERAL, "fotu_before_leak"),
    ),
    "metric_catalog.STUDENT_METRICS": (
        metric_catalog.STUDENT_METRICS,
        ("fotu", "sotu", "regression_rate", "never_solved", "baseline", "fotu_before_leak"),
    ),
    "metric_catalog.METRICS (keys)": (
        tuple(metric_catalog.METRICS),
        (*_RANKED_LITERAL, "never_solved", "lift", "fotu_before_leak"),
    ),
    "rank_intervals.EFFICIENCY_METRICS": (
        rank_intervals.EFFICIENCY_METRICS,
        _EFFICIENCY_LITERAL,
    ),
    "rank_intervals.TRANSFER_METRICS": (
        rank_intervals.TRANSFER_METRICS,
        _RESAMPLED_TRANSFER_LITERAL,
    ),
    "robustness_choices.EFFICIENCY_COLUMNS": (
        robustness_choices.EFFICIENCY_COLUMNS,
        _EFFICIENCY_LITERAL,
    ),
    "robustness_choices.TRANSFER_COLUMNS": (
        robustness_choices.TRANSFER_COLUMNS,
        _RESAMPLED_TRANSFER_LITERAL,
    ),
    "transfer.TEACHER_QUANTITIES": (
        transfer.TEACHER_QUANTITIES,
        ("fotu", "sotu", "regression_rate", "never_solved", "baseline", "lift"),
    ),
    "transfer._MEAN_QUANTITIES": (
        transfer._MEAN_QUANTITIES,
        ("fotu", "regression_rate", "never_solved", "baseline"),
    ),
    "oversight.TRACE_LEVEL_METRICS": (oversight.TRACE_LEVEL_METRICS, ("fotu", "regression_rate")),
    "oversight.TEACHER_LEVEL_METRICS": (
        oversight.TEACHER_LEVEL_METRICS,
        ("fotu", "sotu", "regression_rate"),
    ),
    "views.leaderboard.LATEX_CORE_METRICS": (
        LATEX_CORE_METRICS,
        ("accuracy", "tokens", "fotu", "fotu_before_leak"),
    ),
    # views.leaderboard.efficiency_intervals and views.correlations (both functions)
    "efficiency_means": (metrics_in("efficiency_means"), ("tokens", "redundancy", "backtracking")),
    # pages/leaderboard.py: the transfer metrics drawn with intervals
    "transfer_intervals": (
        metrics_in("transfer_intervals"),
        ("fotu", "sotu", "regression_rate", "never_solved", "lift"),
    ),
    # precompute/stages/metrics.teacher_table: the transfer columns merged in
    "stored_transfer": (
        metrics_in("stored_transfer"),
        ("fotu", "sotu", "regression_rate", "never_solved", "baseline"),
    ),
}


@pytest.mark.parametrize("name", list(OLD_LITERALS))
def test_every_derived_list_equals_the_literal_it_replaced(name: str) -> None:
    derived, literal = OLD_LITERALS[name]
    assert tuple(derived) == literal


def test_the_pages_and_the_stage_read_the_registry_not_a_literal() -> None:
    """The lists in the pages and the stage are calls of :func:`metrics_in` (a literal put back
    would fail here)."""
    uses = [
        # the leaderboard's intervals are assembled in the view layer (one read path)
        ("legival_core/views/leaderboard.py", 'metrics_in("transfer_intervals")'),
        ("pages/transfer.py", 'metrics_in("teacher_quantities")'),
        ("precompute/stages/metrics.py", 'metrics_in("stored_transfer")'),
        ("legival_core/views/correlations.py", 'metrics_in("efficiency_means")'),
        ("legival_core/views/leaderboard.py", 'metrics_in("efficiency_means")'),
    ]
    for path, call in uses:
        text = (ROOT / path).read_text(encoding="utf-8")
        assert call in text, path
        assert '("tokens", "redundancy", "backtracking")' not in text, path


def test_the_catalog_is_the_registry_seen_through_labels() -> None:
    for name, metric in metric_catalog.METRICS.items():
        s = spec(name)
        assert (metric.label, metric.higher_is_better, metric.share, metric.description) == (
            s.label,
            s.higher_is_better,
            s.share,
            s.description,
        )
    # the old catalog's labels and directions, as they were
    assert {
        n: (m.label, m.higher_is_better, m.share) for n, m in metric_catalog.METRICS.items()
    } == {
        "accuracy": ("Accuracy", True, True),
        "tokens": ("Tokens", False, False),
        "redundancy": ("Redundancy", False, True),
        "backtracking": ("Backtracking", False, True),
        "fotu": ("FOTU", True, True),
        "sotu": ("SOTU", True, True),
        "regression_rate": ("Regression", False, True),
        "never_solved": ("Never solved", False, True),
        "lift": ("Lift", True, True),
        "fotu_before_leak": ("FOTU before leak", True, True),
    }


# ---------------------------------------------------------------------------------------------
# The docs' metric index
# ---------------------------------------------------------------------------------------------

INDEX = ROOT / "docs" / "metrics" / "index.md"


def test_the_docs_index_is_the_registrys() -> None:
    text = INDEX.read_text(encoding="utf-8")
    start = (
        "<!-- metric-index: generated by legival_core.metrics.registry.metric_index_markdown -->\n"
    )
    assert text.count(start) == 1
    body = text.split(start, 1)[1].split("<!-- /metric-index -->", 1)[0]
    assert body == metric_index_markdown()
    for s in SPECS:
        row = next(line for line in body.splitlines() if line.startswith(f"| `{s.name}` |"))
        link = s.docs.removeprefix("metrics/")
        assert f"[{s.label}]({link}" in row
        assert (INDEX.parent / link).is_file()
    assert "## How to add a metric" in text


def test_the_index_check_sees_a_missing_metric() -> None:
    fewer = {k: v for k, v in METRIC_SPECS.items() if k != "sotu"}
    assert metric_index_markdown(fewer) != metric_index_markdown()
    assert "[SOTU]" not in metric_index_markdown(fewer)


# ---------------------------------------------------------------------------------------------
# Aggregates on worked tables, against the code that stores the teacher values
# ---------------------------------------------------------------------------------------------


def _efficiency() -> pd.DataFrame:
    """Four traces of teacher T on dataset D."""
    return pd.DataFrame(
        {
            "trace_id": ["t1", "t2", "t3", "t4"],
            "teacher": "T",
            "dataset": "D",
            "problem_id": ["p1", "p2", "p3", "p4"],
            "correct": pd.array([True, False, True, True], dtype="boolean"),
            "tokens": [100, 250, 50, 400],
            "redundancy": [0.5, 0.0, math.nan, 0.25],
            "backtracking": [0.1, 0.2, 0.3, 0.2],
        }
    )


#: Worked by hand from the formula ``mean = sum(x) / #{x not NaN}``.
EFFICIENCY_EXPECTED = {
    "accuracy": (1 + 0 + 1 + 1) / 4,  # 0.75
    "tokens": (100 + 250 + 50 + 400) / 4,  # 200
    "redundancy": (0.5 + 0.0 + 0.25) / 3,  # the NaN left out: 0.25
    "backtracking": (0.1 + 0.2 + 0.3 + 0.2) / 4,  # 0.2
}


def _rollouts() -> pd.DataFrame:
    """Teacher T, two students, three traces with m = 2 steps: prefixes k = 0, 1, 2 (bins 25
    and 50 for k = 1, 2), one binary rollout each."""
    correct = {
        ("S1", "a"): [0, 1, 1],
        ("S1", "b"): [0, 0, 1],
        ("S1", "c"): [1, 0, 0],
        ("S2", "a"): [1, 1, 0],
        ("S2", "b"): [0, 1, 1],
        ("S2", "c"): [0, 0, 0],
    }
    rows = [
        {
            "teacher": "T",
            "dataset": "D",
            "student": student,
            "trace_id": trace,
            "problem_id": f"p{trace}",
            "k": k,
            "m": 2,
            "correct": value,
        }
        for (student, trace), values in correct.items()
        for k, value in enumerate(values)
    ]
    return pd.DataFrame(rows)


# Per (student, trace), paper profile, interpolated grid: f(b) = 0 or 1 at bins 25 and 50,
# f(1..24) = f(25), f(26..49) linear between them: fotu = (25 f25 + sum_{i=1..24} (f25 + (f50 -
# f25) i / 25) + f50) / 50 = (49 f25 + f50 + 12 (f50 - f25)) / 50.
#   (1, 1) -> 1;  (0, 1) -> (0 + 1 + 12) / 50 = 0.26;  (1, 0) -> (49 - 12) / 50 = 0.74;
#   (0, 0) -> 0.
# hazard = bin of the first k >= 1 solved (None: never solved); regression = drops / (K - 1).
TRACE_EXPECTED = {
    # (student, trace): (fotu, hazard_bin, regression_rate, baseline)
    ("S1", "a"): (1.0, 25, 0.0, 0.0),
    ("S1", "b"): (0.26, 50, 0.0, 0.0),
    ("S1", "c"): (0.0, None, 0.0, 1.0),
    ("S2", "a"): (0.74, 25, 1.0, 1.0),
    ("S2", "b"): (1.0, 25, 0.0, 0.0),
    ("S2", "c"): (0.0, None, 0.0, 0.0),
}
#: Teacher values: per student the mean over the three traces, then the mean over students.
TRANSFER_EXPECTED = {
    # S1 (1 + 0.26 + 0) / 3 = 0.42, S2 (0.74 + 1 + 0) / 3 = 0.58 -> 0.5
    "fotu": (0.42 + 0.58) / 2,
    # S1 0, S2 1 / 3 -> 1 / 6
    "regression_rate": (0 + 1 / 3) / 2,
    # one never-solved trace of three for each student
    "never_solved": (1 / 3 + 1 / 3) / 2,
    # S1 (0 + 0 + 1) / 3, S2 (1 + 0 + 0) / 3
    "baseline": (1 / 3 + 1 / 3) / 2,
    # lift = fotu - baseline = 0.5 - 1/3
    "lift": 0.5 - 1 / 3,
    # S1 hazards {25, 50}: H = log 2 / log 50; S2 hazards {25, 25}: H = 0 -> the mean
    "sotu": (math.log(2) / math.log(50) + 0.0) / 2,
}


def _trace_transfer() -> pd.DataFrame:
    return trace_metrics(_rollouts(), profile="paper", grid="interpolate")


def test_the_worked_trace_values_are_the_kernels() -> None:
    table = _trace_transfer().set_index(["student", "trace_id"])
    for (student, trace), (fotu, hazard, regression, baseline) in TRACE_EXPECTED.items():
        row = table.loc[(student, trace)]
        assert float(row["fotu"]) == pytest.approx(fotu)
        assert pd.isna(row["hazard_bin"]) if hazard is None else int(row["hazard_bin"]) == hazard
        assert float(row["regression_rate"]) == pytest.approx(regression)
        assert float(row["baseline"]) == pytest.approx(baseline)


@pytest.mark.parametrize("name", metrics_in("resampled_efficiency"))
def test_efficiency_aggregates_give_the_worked_and_the_stored_value(name: str) -> None:
    efficiency = _efficiency()
    stored = teacher_table(efficiency, pd.DataFrame(), "paper", "interpolate", 0)
    assert float(stored[name].iloc[0]) == pytest.approx(EFFICIENCY_EXPECTED[name])
    assert aggregate_teacher(name, efficiency) == pytest.approx(EFFICIENCY_EXPECTED[name])


@pytest.mark.parametrize("name", list(TRANSFER_EXPECTED))
def test_transfer_aggregates_give_the_worked_and_the_stored_value(name: str) -> None:
    stored = teacher_metrics(_rollouts(), profile="paper", n_boot=0, grid="interpolate")
    assert float(stored[name].iloc[0]) == pytest.approx(TRANSFER_EXPECTED[name])
    assert aggregate_teacher(name, _trace_transfer()) == pytest.approx(TRANSFER_EXPECTED[name])


def _before_leak() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "trace_id": ["a", "b", "c", "a", "b", "c"],
            "student": ["S1", "S1", "S1", "S2", "S2", "S2"],
            "teacher": "T",
            "dataset": "D",
            "fotu_before_leak": [0.2, 0.4, math.nan, 0.9, 0.5, 0.3],
        }
    )


def test_fotu_before_leak_aggregate_gives_the_worked_and_the_stored_value() -> None:
    # S1 (0.2 + 0.4) / 2 = 0.3 (the NaN left out); S2 (0.9 + 0.5 + 0.3) / 3 = 17/30
    expected = (0.3 + 1.7 / 3) / 2  # 0.4333...
    stored = teacher_table(_efficiency(), pd.DataFrame(), "paper", "interpolate", 0, _before_leak())
    assert float(stored["fotu_before_leak"].iloc[0]) == pytest.approx(expected)
    assert aggregate_teacher("fotu_before_leak", _before_leak()) == pytest.approx(expected)


def test_every_teacher_metric_has_a_worked_case() -> None:
    worked = {*EFFICIENCY_EXPECTED, *TRANSFER_EXPECTED, "fotu_before_leak"}
    assert worked == set(METRIC_SPECS)


def test_a_wrong_aggregate_fails_the_worked_case() -> None:
    """The checks can fail: the plain mean over all (trace, student) rows is not FOTU's
    teacher value when students have different numbers of traces."""
    rows = _before_leak()
    pooled = AGGREGATES["mean"].finalize(AGGREGATES["mean"].partial(rows, ("fotu_before_leak",)))
    assert pooled == pytest.approx((0.2 + 0.4 + 0.9 + 0.5 + 0.3) / 5)  # 0.46
    assert pooled != pytest.approx(aggregate_teacher("fotu_before_leak", rows))


# ---------------------------------------------------------------------------------------------
# Invariance: row order and chunking
# ---------------------------------------------------------------------------------------------


def _rows_of(name: str) -> pd.DataFrame:
    s = spec(name)
    if name == "fotu_before_leak":
        return _before_leak()
    return _efficiency() if s.table == "trace_efficiency" else _trace_transfer()


@pytest.mark.parametrize("name", IDS)
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_teacher_value_does_not_depend_on_row_order(name: str, seed: int) -> None:
    rows = _rows_of(name)
    shuffled = rows.sample(frac=1.0, random_state=seed).reset_index(drop=True)
    assert aggregate_teacher(name, shuffled) == pytest.approx(aggregate_teacher(name, rows))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_stored_teacher_values_do_not_depend_on_row_order(seed: int) -> None:
    rollouts = _rollouts()
    shuffled = rollouts.sample(frac=1.0, random_state=seed).reset_index(drop=True)
    a = teacher_metrics(rollouts, profile="paper", n_boot=0, grid="interpolate")
    b = teacher_metrics(shuffled, profile="paper", n_boot=0, grid="interpolate")
    for name in transfer.TEACHER_QUANTITIES:
        assert float(b[name].iloc[0]) == pytest.approx(float(a[name].iloc[0]))


@pytest.mark.parametrize("name", IDS)
@pytest.mark.parametrize("n_chunks", [2, 3])
@pytest.mark.parametrize("seed", [0, 1])
def test_teacher_value_merges_over_chunks(name: str, n_chunks: int, seed: int) -> None:
    s = spec(name)
    agg = AGGREGATES[s.aggregate]
    rows = _rows_of(name)
    order = np.random.default_rng(seed).permutation(len(rows))
    # cut points chosen so that a chunk may be empty
    cuts = np.sort(np.random.default_rng(seed + 10).integers(0, len(rows) + 1, n_chunks - 1))
    chunks = [rows.iloc[part] for part in np.split(order, cuts)]
    merged = agg.partial(chunks[0], s.columns)
    for chunk in chunks[1:]:
        merged = agg.merge(merged, agg.partial(chunk, s.columns))
    whole = agg.finalize(agg.partial(rows, s.columns))
    assert agg.finalize(merged) == pytest.approx(whole)
    assert whole == pytest.approx(aggregate_teacher(name, rows))


def _exactly_equal(a: object, b: object) -> bool:
    """The same partial to the bit: dict keys in order, float sums, integer counts, arrays."""
    if isinstance(a, dict) and isinstance(b, dict):
        return list(a) == list(b) and all(_exactly_equal(a[k], b[k]) for k in a)
    if isinstance(a, tuple) and isinstance(b, tuple):
        return len(a) == len(b) and all(_exactly_equal(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, np.ndarray) and isinstance(b, np.ndarray):
        return a.dtype == b.dtype and np.array_equal(a, b)
    if isinstance(a, float) and isinstance(b, float):
        return a == b or (math.isnan(a) and math.isnan(b))
    return type(a) is type(b) and a == b


@pytest.mark.parametrize("name", IDS)
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_every_grouped_partial_is_the_partial_of_each_group(name: str, seed: int) -> None:
    """``by_group`` (one pass over a bucket's rows) gives each group exactly the partial its
    own rows give, for every group with a row: the same keys in the same order, the same bits
    (rows shuffled and dealt at random into four groups)."""
    s = spec(name)
    agg = AGGREGATES[s.aggregate]
    assert agg.by_group is not None, f"{s.aggregate}: every built-in aggregate has by_group"
    rows = _rows_of(name).sample(frac=1.0, random_state=seed).reset_index(drop=True)
    group = np.random.default_rng(seed).integers(0, 4, len(rows))
    got = agg.by_group(rows, s.columns, group, 4)
    for g in np.unique(group):
        expected = agg.partial(rows[group == g], s.columns)
        assert _exactly_equal(got[g], expected), (name, g, got[g], expected)


def test_a_hazard_bin_past_the_last_is_grouped_as_its_partial_counts_it() -> None:
    rows = _trace_transfer()
    rows.loc[rows.index[0], "hazard_bin"] = 60  # np.bincount then makes the histogram longer
    agg, columns = AGGREGATES["hazard_entropy"], spec("sotu").columns
    group = np.arange(len(rows)) % 2
    got = agg.by_group(rows, columns, group, 2)
    for g in (0, 1):
        assert _exactly_equal(got[g], agg.partial(rows[group == g], columns))
    assert any(len(h) == 60 for h in got[0].values())


def test_an_empty_table_has_no_teacher_value() -> None:
    for name in IDS:
        rows = _rows_of(name).iloc[:0]
        assert math.isnan(aggregate_teacher(name, rows)), name


def test_every_aggregate_is_documented() -> None:
    text = INDEX.read_text(encoding="utf-8")
    for name, agg in AGGREGATES.items():
        assert agg.description.strip()
        assert f"`{name}`" in text, name
    assert registry.__doc__ and "How to add a metric" in registry.__doc__
