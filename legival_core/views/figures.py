"""The charts that both the app's pages and the static snapshot (``precompute publish``) draw.

A chart shown in the app and in the published snapshot is built here once, so the two can never
drift apart. Plotly is imported inside each function: the rest of the view layer stays free of
it, and importing :mod:`legival_core.views` needs no plotting library.

Every name from a store goes through :func:`legival_core.text.safe_text.plotly_literal` before it
becomes a label, because Plotly reads an HTML subset in labels.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import pandas as pd

from legival_core.metrics.transfer_curves import TransferView
from legival_core.text.safe_text import plotly_literal, plotly_literals
from legival_core.views.common import METRICS

if TYPE_CHECKING:
    import plotly.graph_objects as go

__all__ = [
    "PALETTE",
    "add_frontier",
    "add_measured_markers",
    "hazard_figure",
    "metric_bars_figure",
    "transfer_curves_figure",
]

#: Plotly's default qualitative colours; teacher i gets colour i mod 10 in every chart.
PALETTE: tuple[str, ...] = ("#636EFA", "#EF553B", "#00CC96", "#AB63FA", "#FFA15A", "#19D3F3",
                            "#FF6692", "#B6E880", "#FF97FF", "#FECB52")  # fmt: skip

_BETTER = {True: "higher is better", False: "lower is better"}


def transfer_curves_figure(
    view: TransferView,
    teachers: Sequence[str],
    dashed: Sequence[str] = (),
    bands: bool = True,
) -> go.Figure:
    """Student accuracy μ_T(x) against the prefix share x = k / m, one line per teacher.

    Each teacher in ``teachers`` (in that order, which fixes its colour) gets its mean curve
    and, when ``bands`` and the view has intervals, the 95% bootstrap band [lo, hi] as a filled
    area; teachers in ``dashed`` (reference teachers) are drawn dashed and labelled as such.
    The student-alone baseline μ(k = 0) is a dashed horizontal line named in the legend.
    A curve with bins that hold no value (no trace measured there) is drawn from its measured
    bins only, as markers joined by lines.
    """
    import plotly.graph_objects as go

    figure = go.Figure()
    for index, teacher in enumerate(teachers):
        group = view.curves[view.curves["teacher"] == teacher]
        # Bins no trace was measured in hold no value (the release profile fills nothing in):
        # a line through NaN breaks, leaving isolated dots, so those curves are drawn from
        # their measured bins only, each a marker, joined by straight lines.
        gappy = bool(group["mean"].isna().any())
        group = group[group["mean"].notna()]
        colour = PALETTE[index % len(PALETTE)]
        label = plotly_literal(teacher)
        if teacher in dashed:
            label += " (reference)"
        band = group[group["lo"].notna() & group["hi"].notna()]
        if bands and len(band):
            figure.add_trace(
                go.Scatter(
                    x=[*band["x"], *band["x"][::-1]],
                    y=[*band["hi"], *band["lo"][::-1]],
                    fill="toself",
                    fillcolor=colour,
                    opacity=0.18,
                    line={"width": 0},
                    hoverinfo="skip",
                    showlegend=False,
                    legendgroup=label,
                    name=f"{label} band",
                )
            )
        figure.add_trace(
            go.Scatter(
                x=group["x"],
                y=group["mean"],
                mode="lines+markers" if gappy else "lines",
                marker={"size": 6, "color": colour},
                name=label,
                legendgroup=label,
                line={"color": colour, "width": 2, "dash": "dash" if teacher in dashed else None},
                customdata=group[["lo", "hi", "n_traces"]].to_numpy(),
                hovertemplate="x = %{x:.2f}<br>μ = %{y:.3f} [%{customdata[0]:.3f}, "
                "%{customdata[1]:.3f}]<br>traces: %{customdata[2]}<extra>%{fullData.name}</extra>",
            )
        )
    if pd.notna(view.baseline):
        # A legend entry, not a label on the chart: a label sits on whichever curve runs
        # along the baseline (most of them near 0 on a weak student).
        figure.add_trace(
            go.Scatter(
                x=[0.0, 1.0],
                y=[view.baseline, view.baseline],
                mode="lines",
                name=f"student alone (k = 0): {view.baseline:.2f}",
                line={"color": "#555", "dash": "dash", "width": 1.5},
                hovertemplate="student alone (k = 0): %{y:.3f}<extra></extra>",
            )
        )
    figure.update_layout(
        height=430,
        xaxis_title="position x = k / m in the teacher trace",
        yaxis_title="student accuracy μ_T(x)",
        yaxis_range=[-0.02, 1.02],
        margin={"t": 30},
    )
    return figure


#: Width of the hazard histogram's bins on the position axis (50 bins of 2%).
HAZARD_BINS = 50


def hazard_figure(hazards: pd.DataFrame, teachers: Sequence[str]) -> go.Figure:
    """Where students first succeed, one bar colour per teacher (in ``teachers``' order).

    ``hazards`` has ``teacher``, ``bin`` (0 = never solved, 1..50 the 2% position bins) and
    ``share``. "Never solved" is not a position, so it gets its own panel on the left: sharing
    the position axis, its bar (often most of the pairs) set the y scale and left the
    position bars as slivers. Each panel's y axis fits its own bars.
    """
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    figure = make_subplots(
        rows=1,
        cols=2,
        column_widths=[0.16, 0.84],
        horizontal_spacing=0.07,
        subplot_titles=("never solved", "first correct prefix (position x)"),
    )
    shown = hazards[hazards["teacher"].isin(list(teachers))]
    top = {"never": 0.0, "position": 0.0}
    for index, teacher in enumerate(teachers):
        group = shown[shown["teacher"] == teacher]
        if group.empty:
            continue
        label = plotly_literal(teacher)
        colour = PALETTE[index % len(PALETTE)]
        never = group[group["bin"] == 0]
        placed = group[group["bin"] > 0]
        top["never"] = max(top["never"], float(never["share"].max()) if len(never) else 0.0)
        top["position"] = max(top["position"], float(placed["share"].max()) if len(placed) else 0.0)
        figure.add_trace(
            go.Bar(
                x=[label] * len(never),
                y=never["share"].to_numpy(),
                name=label,
                legendgroup=label,
                marker_color=colour,
                showlegend=False,
                hovertemplate="never solved<br>share %{y:.3f}<extra>%{fullData.name}</extra>",
            ),
            row=1,
            col=1,
        )
        figure.add_trace(
            go.Bar(
                x=placed["bin"].to_numpy() / HAZARD_BINS,
                y=placed["share"].to_numpy(),
                name=label,
                legendgroup=label,
                marker_color=colour,
                offsetgroup=label,
                hovertemplate="position %{x:.2f}<br>share %{y:.3f}<extra>%{fullData.name}</extra>",
            ),
            row=1,
            col=2,
        )
    figure.update_layout(
        barmode="group",
        height=320,
        margin={"t": 40, "b": 40},
        legend_title_text="teacher",
    )
    figure.update_xaxes(showticklabels=False, row=1, col=1)
    figure.update_xaxes(title_text="hazard position (bin / 50)", range=[0, 1.02], row=1, col=2)
    figure.update_yaxes(title_text="share", range=[0, max(top["never"], 0.01) * 1.08], row=1, col=1)
    figure.update_yaxes(range=[0, max(top["position"], 0.01) * 1.08], row=1, col=2)
    return figure


def add_frontier(figure: go.Figure, points: pd.DataFrame, x: str, y: str) -> go.Figure:
    """Join the Pareto-optimal teachers (``points["frontier"]``, in the order of ``points``,
    which sorts them by ``x``) with a dotted staircase (the edge of the region they dominate,
    :func:`legival_core.views.pareto.frontier_line_shape`) and title both axes with the metric
    and its direction; returns ``figure``.

    The teacher markers are the caller's: the app colours them by family, the snapshot keeps
    one colour.
    """
    import plotly.graph_objects as go

    from legival_core.views.pareto import frontier_line_shape

    front = points[points["frontier"]]
    figure.add_trace(
        go.Scatter(
            x=front[x],
            y=front[y],
            mode="lines",
            name="frontier",
            line={"color": "#444", "dash": "dot", "width": 2, "shape": frontier_line_shape(x)},
            hoverinfo="skip",
        )
    )
    figure.update_layout(
        xaxis_title=f"{METRICS[x].label} ({_BETTER[METRICS[x].higher_is_better]})",
        yaxis_title=f"{METRICS[y].label} ({_BETTER[METRICS[y].higher_is_better]})",
    )
    return figure


def add_measured_markers(
    figure: go.Figure, view: TransferView, covered: pd.DataFrame, teachers: Sequence[str]
) -> None:
    """Mark measured against filled bins on :func:`transfer_curves_figure`'s chart: a marker
    (in the teacher's colour, ``teachers`` in the chart's order) on every bin where at least one
    trace has a prefix (``covered``: :func:`legival_core.views.observed_coverage`); the rest of
    each line comes from the grid (neighbouring prefixes, the first one back-filled)."""
    import plotly.graph_objects as go

    for index, teacher in enumerate(teachers):
        line = view.curves[view.curves["teacher"] == teacher].set_index("bin")["mean"]
        seen = covered[(covered["teacher"] == teacher) & (covered["n_observed"] > 0)]
        seen = seen[seen["bin"].isin(line.index)]
        if seen.empty:
            continue
        figure.add_trace(
            go.Scatter(
                x=seen["x"],
                y=line.loc[seen["bin"]].to_numpy(),
                mode="markers",
                marker={"color": PALETTE[index % len(PALETTE)], "size": 6},
                name=f"{plotly_literal(teacher)} measured",
                legendgroup=plotly_literal(teacher),
                showlegend=False,
                customdata=seen[["n_observed", "n_traces"]].to_numpy(),
                hovertemplate="x = %{x:.2f}: measured for %{customdata[0]} of %{customdata[1]} "
                "traces<extra>%{fullData.name}</extra>",
            )
        )


def metric_bars_figure(detail: pd.DataFrame, metric: str) -> go.Figure:
    """The Leaderboard's bars of one metric per teacher, in the order of ``detail`` (its "Rank
    intervals of" table, :func:`legival_core.views.board.metric_detail`: best first), with the
    95% value intervals as error bars, bars resting on few traces pale and hatched, and the
    unranked reference teachers as outlines (for comparison, not one of the models). The hover
    text uses the table's own formatting, so the chart and the table read the same."""
    import plotly.graph_objects as go

    from legival_core.views.board import NO_INTERVAL, REFERENCE_MARK, format_value

    label = plotly_literal(METRICS[metric].label if metric in METRICS else metric)
    with_ci = detail["95% lo"].notna()
    outline = detail["rank 95% interval"].eq(REFERENCE_MARK).to_numpy()
    low_n = detail["low n"].to_numpy()
    n_traces = detail["n traces"].astype(object).where(detail["n traces"].notna(), "—")
    figure = go.Figure(
        go.Bar(
            x=plotly_literals(detail["teacher"]),
            y=detail["value"],
            name=label,
            marker={
                "color": [
                    "rgba(0,0,0,0)" if ref else "#aab7c4" if low else "#2e86c1"
                    for low, ref in zip(low_n, outline, strict=True)
                ],
                "line": {"color": ["#555" if ref else "#2e86c1" for ref in outline], "width": 1.5},
                "pattern": {
                    "shape": [
                        "/" if low and not ref else ""
                        for low, ref in zip(low_n, outline, strict=True)
                    ]
                },
            },
            error_y={
                "type": "data",
                "symmetric": False,
                "array": (detail["95% hi"] - detail["value"]).where(with_ci),
                "arrayminus": (detail["value"] - detail["95% lo"]).where(with_ci),
                "visible": bool(with_ci.any()),
            },
            customdata=[
                [
                    format_value(lo, metric),
                    format_value(hi, metric),
                    n,
                    rank,
                    format_value(value, metric),
                ]
                for value, lo, hi, n, rank in zip(
                    detail["value"],
                    detail["95% lo"],
                    detail["95% hi"],
                    n_traces,
                    detail["rank 95% interval"],
                    strict=True,
                )
            ],
            hovertemplate="%{x}<br>%{customdata[4]} [%{customdata[0]}, %{customdata[1]}]"
            "<br>n traces = %{customdata[2]}<br>rank interval %{customdata[3]}<extra></extra>",
        )
    )
    if metric in METRICS and METRICS[metric].share:
        figure.update_yaxes(tickformat=".0%")
    suffix = "95% intervals over problems" if with_ci.any() else NO_INTERVAL
    figure.update_layout(
        title=f"{label} per teacher ({suffix})",
        height=380,
        yaxis_title=label,
        margin={"t": 50, "b": 40},
    )
    return figure
