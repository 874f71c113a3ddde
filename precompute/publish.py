"""``python -m precompute publish``: a store's leaderboard as a static, self-contained snapshot.

Writes into ``--out``:

* ``index.html`` — the rank table with 95% value and rank intervals and n, the rank intervals
  per metric, the transfer curves and the Pareto chart, plotly.js inline: one file that opens
  from ``file://`` with no network (for a paper's supplement or a static host);
* ``leaderboard.csv`` — the table as numbers (value, interval, n, rank, rank interval, upper-bound
  rank per metric);
* ``leaderboard.tex`` — the table as a booktabs ``tabular``.

The numbers are the app's: :mod:`legival_core.rank_intervals` for the intervals (problems
resampled, the same draw for every teacher, seeded), :mod:`legival_core.board` for the cells.
Every name from the store is escaped (HTML in the page, Plotly labels in the charts).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from legival_core import board as board_layout
from legival_core import views
from legival_core.app_config import LOW_N_TRACES, RANK_RESAMPLES, RESAMPLE_SEED
from legival_core.safe_text import plotly_literals
from legival_core.snapshot import Section, snapshot_html
from legival_core.store import Store
from legival_core.views import figures

__all__ = ["PublishOptions", "publish"]

#: Resamples of traces behind the transfer-curve bands (as on the app's transfer page).
BAND_RESAMPLES = 200


@dataclass(frozen=True)
class PublishOptions:
    """What to resample and where the low-n mark starts (the app config's values by default)."""

    n_boot: int = RANK_RESAMPLES
    seed: int = RESAMPLE_SEED
    low_n: int = LOW_N_TRACES
    x: str = "tokens"
    y: str = "fotu"
    #: Rank reference teachers like any model (by default they get a row without a rank and
    #: a point never on the frontier, see legival_core.references).
    include_references: bool = False


def _curves_json(view: views.TransferView) -> str:
    """Every teacher's curve with its band, in name order: the transfer page's chart."""
    teachers = sorted(view.curves["teacher"].unique())
    return figures.transfer_curves_figure(view, teachers).to_json()


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


def _transfer_view(store: Store) -> views.TransferView | None:
    """The all-datasets, all-students view: the stored ``transfer_curves`` when current, else
    computed from the rollouts; None without rollouts."""
    if store.has("transfer_curves"):
        table = views.fresh_transfer_curves(
            store.read("transfer_curves"),
            store.manifest,
        )
        if table is not None:
            view = views.transfer_view_from_table(table, None, None, "paper", BAND_RESAMPLES)
            if view is not None:
                return view
    if not store.has("rollouts"):
        return None
    from legival_core.transfer import ROLLOUT_COLUMNS

    rollouts = store.read("rollouts", columns=list(ROLLOUT_COLUMNS))
    return views.transfer_view(rollouts, None, None, "paper", BAND_RESAMPLES)


def robustness_section(store: Store, options: PublishOptions) -> Section | None:
    """The snapshot's robustness section: every ranking under every alternative analysis choice
    the store can give (legival_core.robustness_choices), flips judged against the default's
    rank intervals from the same resamples as the rank table; None without per-trace tables."""
    from legival_core.robustness_choices import Settings, load_tables, robustness_report
    from legival_core.views.robustness import robustness_section as layout

    if not store.has("trace_efficiency"):
        return None
    report = robustness_report(
        load_tables(store),
        Settings.from_manifest(store.manifest),
        n_boot=options.n_boot,
        seed=options.seed,
    )
    return layout(report)  # type: ignore[return-value]


def publish(store_path: Path, out: Path, options: PublishOptions | None = None) -> list[Path]:
    """Write ``index.html``, ``leaderboard.csv`` and ``leaderboard.tex`` for the store at
    ``store_path`` into ``out`` (created if needed); return the paths written."""
    from legival_core.rank_intervals import (
        agreeing_intervals,
        frontier_shares,
        interval_table,
        points_agree,
        resample_teachers,
    )
    from precompute.stages.base import StageError

    options = options or PublishOptions()
    store = Store.open(store_path)
    if not store.has("teacher_metrics"):
        raise StageError(
            f"{store.path}: no teacher_metrics table to publish; run the metrics stage first"
        )
    from legival_core.references import store_reference_teachers

    teacher_metrics = store.read("teacher_metrics")
    metrics = views.ranked_metrics(teacher_metrics)
    references = store_reference_teachers(store)
    include = options.include_references
    board = views.leaderboard(teacher_metrics, metrics, None, references, include)
    tables = {
        name: store.read(name) if store.has(name) else None
        for name in ("trace_efficiency", "trace_transfer")
    }
    directions = {m: v.higher_is_better for m, v in views.METRICS.items()}
    resamples = None
    intervals = pd.DataFrame()
    if any(t is not None and len(t) for t in tables.values()):
        # reference teachers are resampled for their value intervals, left out of the ranks
        resamples = resample_teachers(*tables.values(), metrics, options.n_boot, options.seed)
        apart = () if include else references
        intervals = agreeing_intervals(
            interval_table(resamples, directions, references=apart), board
        )

    text_table = board_layout.uncertainty_board(board, intervals, metrics, options.low_n)
    numbers = board_layout.board_numbers(board, intervals, metrics)
    latex = views.latex_table(
        board_layout.ascii_cells(text_table),
        caption="Legi-Val rank table: value [95% interval]; n traces; rank (95% rank interval)",
    )

    name = store.path.name
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
            notes=[rank_note],
            tables=[("rank-table", text_table)],
            folded=folded,
        )
    ]

    view = _transfer_view(store)
    if view is not None and not view.curves.empty:
        sections.append(
            Section(
                "Transfer curves",
                notes=[
                    "How often the student answers correctly after seeing the first share x of "
                    f"a correct teacher trace (all datasets and students; bands: 95% over "
                    f"{BAND_RESAMPLES} resamples of traces). FOTU is the area under a curve."
                ],
                charts=[("transfer-curves", _curves_json(view))],
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
                    "gives the share of problem resamples in which each teacher is on it."
                ],
                charts=[("pareto-chart", _pareto_figure(points, x, y))],
                tables=[("pareto-shares", share_table)],
            )
        )

    robustness = robustness_section(store, options)
    if robustness is not None:
        sections.append(robustness)

    import plotly.offline

    page = snapshot_html(
        f"Legi-Val leaderboard: {name}",
        sections,
        plotly.offline.get_plotlyjs(),
        downloads={"CSV": "leaderboard.csv", "LaTeX": "leaderboard.tex"},
        low_n_mark=board_layout.LOW_N_MARK,
    )
    out.mkdir(parents=True, exist_ok=True)
    written = [out / "index.html", out / "leaderboard.csv", out / "leaderboard.tex"]
    written[0].write_text(page, encoding="utf-8")
    numbers.to_csv(written[1], index=False)
    written[2].write_text(latex + "\n", encoding="utf-8")
    return written
