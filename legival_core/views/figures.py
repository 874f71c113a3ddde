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
from legival_core.text.safe_text import plotly_literal
from legival_core.views.common import METRICS

if TYPE_CHECKING:
    import plotly.graph_objects as go

__all__ = ["PALETTE", "add_frontier", "add_measured_markers", "transfer_curves_figure"]

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
    The student-alone baseline μ(k = 0) is a dashed horizontal line.
    """
    import plotly.graph_objects as go

    figure = go.Figure()
    for index, teacher in enumerate(teachers):
        group = view.curves[view.curves["teacher"] == teacher]
        colour = PALETTE[index % len(PALETTE)]
        label = plotly_literal(teacher)
        if teacher in dashed:
            label += " (reference)"
        if bands and group["lo"].notna().any():
            figure.add_trace(
                go.Scatter(
                    x=[*group["x"], *group["x"][::-1]],
                    y=[*group["hi"], *group["lo"][::-1]],
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
                mode="lines",
                name=label,
                legendgroup=label,
                line={"color": colour, "width": 2, "dash": "dash" if teacher in dashed else None},
                customdata=group[["lo", "hi", "n_traces"]].to_numpy(),
                hovertemplate="x = %{x:.2f}<br>μ = %{y:.3f} [%{customdata[0]:.3f}, "
                "%{customdata[1]:.3f}]<br>traces: %{customdata[2]}<extra>%{fullData.name}</extra>",
            )
        )
    if pd.notna(view.baseline):
        figure.add_hline(
            y=view.baseline,
            line_dash="dash",
            line_color="#555",
            annotation_text=f"student alone (k = 0): {view.baseline:.2f}",
            annotation_position="top left",
        )
    figure.update_layout(
        height=430,
        xaxis_title="position x = k / m in the teacher trace",
        yaxis_title="student accuracy μ_T(x)",
        yaxis_range=[-0.02, 1.02],
        margin={"t": 30},
    )
    return figure


def add_frontier(figure: go.Figure, points: pd.DataFrame, x: str, y: str) -> go.Figure:
    """Join the Pareto-optimal teachers (``points["frontier"]``, in the order of ``points``) with
    a dotted line and title both axes with the metric and its direction; returns ``figure``.

    The teacher markers are the caller's: the app colours them by family, the snapshot keeps
    one colour.
    """
    import plotly.graph_objects as go

    front = points[points["frontier"]]
    figure.add_trace(
        go.Scatter(
            x=front[x],
            y=front[y],
            mode="lines",
            name="frontier",
            line={"color": "#444", "dash": "dot", "width": 2},
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
