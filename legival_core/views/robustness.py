"""The Robustness page's tables, the leaderboard's marker and the snapshot's section, laid out
from a :class:`legival_core.rankings.robustness_choices.RobustnessReport`.

Pure pandas: cells are text or numbers, never markup (the page and the snapshot escape them).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import pandas as pd

from legival_core.metrics.metric_catalog import METRICS
from legival_core.rankings.robustness import REAL_FLIP, WITHIN_NOISE
from legival_core.rankings.robustness_choices import DEFAULT_CHOICE, RobustnessReport

__all__ = [
    "CHANGE_MARK",
    "SECTION_ANCHOR",
    "choice_matrix",
    "choice_options",
    "flip_table",
    "mark_changing_ranks",
    "robustness_section",
    "side_by_side",
    "survival_table",
]

#: Appended to a leaderboard rank that changes order under some alternative choice.
CHANGE_MARK = "⇅"
#: The html id of the snapshot's robustness section, where the rank table's marks link to.
SECTION_ANCHOR = "robustness"


def _number(value: object, digits: int = 3) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    return f"{float(value):.{digits}f}"  # type: ignore[arg-type]


def choice_matrix(report: RobustnessReport, metric: str) -> pd.DataFrame:
    """One metric's alternatives: choice, τ_b, ρ, teachers compared, flips, real flips,
    pairs tied, note.

    τ_b and ρ are "–" when undefined (fewer than two teachers, or every teacher tied).

    >>> from legival_core.rankings.robustness_choices import Settings
    >>> summary = pd.DataFrame({"metric": ["fotu"], "family": ["grid"], "choice": ["grid:6"],
    ...     "label": ["prefixes every 6 steps"], "tau_b": [0.6667], "rho": [0.8],
    ...     "n_teachers": [4], "flips": [1], "real_flips": [0], "ties": [0], "note": [""]})
    >>> empty = pd.DataFrame()
    >>> report = RobustnessReport(summary, empty, empty, empty, Settings())
    >>> [str(v) for v in choice_matrix(report, "fotu").iloc[0]]
    ['prefixes every 6 steps', '0.667', '0.800', '4', '1', '0', '0', '']
    """
    rows = report.summary[report.summary["metric"] == metric]
    return pd.DataFrame(
        {
            "choice": rows["label"].astype(str).to_numpy(),
            "τ_b": [_number(v) for v in rows["tau_b"]],
            "ρ": [_number(v) for v in rows["rho"]],
            "teachers": rows["n_teachers"].astype(int).to_numpy(),
            "flips": rows["flips"].astype(int).to_numpy(),
            "real flips": rows["real_flips"].astype(int).to_numpy(),
            "tied": rows["ties"].astype(int).to_numpy(),
            "note": rows["note"].fillna("").astype(str).to_numpy(),
        }
    )


def choice_options(report: RobustnessReport, metric: str) -> list[tuple[str, str]]:
    """(choice key, label) of one metric's alternatives, in the matrix's order."""
    rows = report.summary[report.summary["metric"] == metric]
    return list(zip(rows["choice"].astype(str), rows["label"].astype(str), strict=True))


def side_by_side(report: RobustnessReport, metric: str, choice: str) -> pd.DataFrame:
    """The default ranking and one alternative's, one row per teacher in default order:
    ranks, values and the teachers it swaps places with (each pair's verdict in brackets).

    Columns: ``teacher``, ``default rank``, ``default value``, ``rank under the choice``,
    ``value under the choice``, ``flipped with`` (empty when the teacher keeps its order).
    """
    rankings = report.rankings[report.rankings["metric"] == metric]
    default = rankings[rankings["choice"] == DEFAULT_CHOICE].set_index("teacher")
    other = rankings[rankings["choice"] == choice].set_index("teacher")
    flips = report.flips[(report.flips["metric"] == metric) & (report.flips["choice"] == choice)]
    partners: dict[str, list[str]] = {}
    for above, below, verdict in zip(flips["above"], flips["below"], flips["verdict"], strict=True):
        partners.setdefault(str(above), []).append(f"{below} ({verdict})")
        partners.setdefault(str(below), []).append(f"{above} ({verdict})")
    teachers = list(default.index) + [t for t in other.index if t not in default.index]
    return pd.DataFrame(
        {
            "teacher": teachers,
            "default rank": pd.array([default["rank"].get(t) for t in teachers], dtype="Int64"),
            "default value": [default["value"].get(t, math.nan) for t in teachers],
            "rank under the choice": pd.array(
                [other["rank"].get(t) for t in teachers], dtype="Int64"
            ),
            "value under the choice": [other["value"].get(t, math.nan) for t in teachers],
            "flipped with": ["; ".join(partners.get(str(t), [])) for t in teachers],
        }
    )


def flip_table(report: RobustnessReport, metric: str) -> pd.DataFrame:
    """One metric's flipped pairs with the choices' labels: choice, the teacher ranked above
    by default, the one below, both ranks by default and under the choice, the verdict."""
    flips = report.flips[report.flips["metric"] == metric]
    labels = dict(zip(report.summary["choice"], report.summary["label"], strict=True))
    return pd.DataFrame(
        {
            "choice": [labels.get(c, c) for c in flips["choice"]],
            "above by default": flips["above"].astype(str).to_numpy(),
            "below by default": flips["below"].astype(str).to_numpy(),
            "default ranks": [
                f"{a}, {b}"
                for a, b in zip(
                    flips["default_rank_above"], flips["default_rank_below"], strict=True
                )
            ],
            "ranks under the choice": [
                f"{a}, {b}"
                for a, b in zip(
                    flips["alternative_rank_above"], flips["alternative_rank_below"], strict=True
                )
            ],
            "verdict": flips["verdict"].astype(str).to_numpy(),
        }
    )


def survival_table(report: RobustnessReport) -> pd.DataFrame:
    """Per metric: whether its default ranking survives every alternative of this store.

    ``verdict``: "survives every choice compared: <choices>" when no alternative flips or
    ties a pair the default orders, naming the choices that were actually compared (a choice
    this store cannot give is listed apart, never counted as survived); "flips under:
    <choices> (r real of f)" when some flip (r: pairs the default's rank intervals separate);
    "no flip; ties under: <choices>" when some only tie; "all tied by default" when the
    default orders no pair (nothing can flip).

    >>> from legival_core.rankings.robustness_choices import Settings
    >>> summary = pd.DataFrame({"metric": ["tokens"], "family": ["encoding"],
    ...     "choice": ["encoding:o200k_base"], "label": ["tokens counted with o200k_base"],
    ...     "tau_b": [1.0], "rho": [1.0], "n_teachers": [3], "flips": [0], "real_flips": [0],
    ...     "ties": [0], "note": [""]})
    >>> rankings = pd.DataFrame({"metric": "tokens", "choice": "default",
    ...     "teacher": ["a", "b", "c"], "value": [1.0, 2.0, 3.0], "rank": [1, 2, 3]})
    >>> report = RobustnessReport(summary, rankings, pd.DataFrame(), pd.DataFrame(), Settings())
    >>> survival_table(report)["verdict"].tolist()
    ['survives every choice compared: tokens counted with o200k_base']
    """
    survival = report.survival()
    verdicts = []
    for ordered, flips, real, flipped_by, tied_by, compared in zip(
        survival["ordered_pairs"],
        survival["flips"],
        survival["real_flips"],
        survival["flipped_by"],
        survival["tied_by"],
        survival["compared"],
        strict=True,
    ):
        if not ordered:
            verdicts.append("all tied by default")
        elif flips:
            verdicts.append(f"flips under: {flipped_by} ({real} real of {flips})")
        elif tied_by:
            verdicts.append(f"no flip; ties under: {tied_by}")
        else:
            verdicts.append(f"survives every choice compared: {compared}")
    return pd.DataFrame(
        {
            "metric": [METRICS[m].label if m in METRICS else m for m in survival["metric"]],
            "ordered pairs": survival["ordered_pairs"].to_numpy(),
            "choices compared": survival["choices"].to_numpy(),
            "flipped pairs": survival["flips"].to_numpy(),
            "real flips": survival["real_flips"].to_numpy(),
            "tied pairs": survival["ties"].to_numpy(),
            "verdict": verdicts,
        }
    )


def mark_changing_ranks(
    shown: pd.DataFrame, report: RobustnessReport, metrics: Sequence[str]
) -> pd.DataFrame:
    """The leaderboard's text table with :data:`CHANGE_MARK` after every rank cell of a
    teacher whose order flips under some alternative choice (that metric's ``<label> rank``
    column; ``shown`` is :func:`legival_core.views.board.uncertainty_board`'s table).

    >>> from legival_core.rankings.robustness_choices import Settings
    >>> flips = pd.DataFrame({"metric": ["fotu"], "choice": ["grid:6"], "above": ["a"],
    ...     "below": ["b"], "verdict": ["within noise"]})
    >>> report = RobustnessReport(pd.DataFrame(), pd.DataFrame(), flips, pd.DataFrame(),
    ...     Settings())
    >>> shown = pd.DataFrame({"teacher": ["a", "b", "c"], "FOTU rank": ["1 (1–2)", "2", "3"]})
    >>> mark_changing_ranks(shown, report, ["fotu"])["FOTU rank"].tolist()
    ['1 (1–2) ⇅', '2 ⇅', '3']
    """
    out = shown.copy()
    for metric in metrics:
        column = f"{METRICS[metric].label if metric in METRICS else metric} rank"
        if column not in out:
            continue
        changing = report.changing_teachers(metric)
        out[column] = [
            f"{cell} {CHANGE_MARK}" if str(teacher) in changing else cell
            for teacher, cell in zip(out["teacher"].astype(str), out[column], strict=True)
        ]
    return out


def robustness_section(report: RobustnessReport) -> object:
    """The static snapshot's "Robustness" section (:class:`legival_core.views.snapshot.Section`):
    the survival table, then per metric its choice matrix and, folded, each flipped pair."""
    from legival_core.views.snapshot import Section

    settings = report.settings
    note = (
        "How each default ranking fares when one analysis choice is made the other way "
        f"(defaults here: redundancy τ = {settings.threshold:g}, transfer profile "
        f"{settings.profile}, tokens {settings.encoding}, steps by {settings.segmenter}, "
        f"backtracking by {settings.labeler or 'the stored labels'}). τ_b and ρ compare each "
        "alternative ranking with the default; a flip is a pair of teachers whose order "
        f"reverses: '{WITHIN_NOISE}' when their 95% rank intervals under the default overlap, "
        f"'{REAL_FLIP}' when they do not."
    )
    tables: list[tuple[str, pd.DataFrame]] = [("robustness-survival", survival_table(report))]
    folded = []
    for metric in dict.fromkeys(report.summary["metric"]):
        label = METRICS[metric].label if metric in METRICS else str(metric)
        folded.append((f"Choices: {label}", f"robustness-{metric}", choice_matrix(report, metric)))
        flips = report.flips[report.flips["metric"] == metric]
        if not len(flips):
            continue
        folded.append(
            (f"Flipped pairs: {label}", f"robustness-flips-{metric}", flip_table(report, metric))
        )
        # The page's "two rankings side by side" for a chosen choice: here every choice that
        # flips a pair, folded.
        flipping = set(flips["choice"].astype(str))
        for number, (choice, choice_label) in enumerate(choice_options(report, metric)):
            if choice in flipping:
                pairs = side_by_side(report, metric, choice)
                for column in ("default value", "value under the choice"):
                    pairs[column] = [
                        "–" if v is None or math.isnan(v) else f"{v:.4g}" for v in pairs[column]
                    ]  # as the page shows them
                folded.append(
                    (
                        f"Side by side: {label}, the default and {choice_label}",
                        f"robustness-{metric}-side-{number}",
                        pairs,
                    )
                )
    notes = [note]
    if "backtracking" in set(report.summary["metric"]):
        from legival_core.metrics.label_quality import quality_note

        notes.append(quality_note(settings.labeler))
    if len(report.unavailable):
        missing = "; ".join(
            f"{label}: {reason}"
            for label, reason in zip(
                report.unavailable["label"], report.unavailable["reason"], strict=True
            )
        )
        notes.append(f"Not compared on this store: {missing}.")
    return Section(
        "Robustness to analysis choices",
        notes=notes,
        tables=tables,
        folded=folded,
        anchor=SECTION_ANCHOR,
    )
