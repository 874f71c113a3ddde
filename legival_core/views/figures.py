"""The charts that both the app's pages and the static snapshot (``precompute publish``) draw.

A chart shown in the app and in the published snapshot is built here once, so the two can never
drift apart. Plotly is imported inside each function: the rest of the view layer stays free of
it, and importing :mod:`legival_core.views` needs no plotting library.

Every name from a store goes through :func:`legival_core.text.safe_text.plotly_literal` before it
becomes a label, because Plotly reads an HTML subset in labels.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import TYPE_CHECKING

import pandas as pd

from legival_core.metrics.transfer_curves import TransferView
from legival_core.text.safe_text import plotly_literal, plotly_literals
from legival_core.views.common import METRICS

if TYPE_CHECKING:
    import plotly.graph_objects as go

__all__ = [
    "PALETTE",
    "TEMPLATE_SET_COLOURS",
    "add_frontier",
    "add_measured_markers",
    "correlation_heatmap",
    "coverage_figure",
    "e0_bars_figure",
    "hazard_figure",
    "metric_bars_figure",
    "monitor_scores_figure",
    "overhead_coupling_figure",
    "pareto_figure",
    "published_bars_figure",
    "redundancy_sweep_figure",
    "reward_scatter_figure",
    "template_set_bars_figure",
    "transfer_curves_figure",
    "waterfall_figure",
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
        hover = "share %{y:.3f}<extra>%{fullData.name}</extra>"
        # (panel, x, rows, what only that panel's bar has): the legend entry comes from the
        # position bars, and only they are grouped side by side
        bars = (
            (
                1,
                [label] * len(never),
                never,
                {"showlegend": False, "hovertemplate": f"never solved<br>{hover}"},
            ),
            (
                2,
                placed["bin"].to_numpy() / HAZARD_BINS,
                placed,
                {"offsetgroup": label, "hovertemplate": f"position %{{x:.2f}}<br>{hover}"},
            ),
        )
        for col, x, rows, own in bars:
            figure.add_trace(
                go.Bar(
                    x=x,
                    y=rows["share"].to_numpy(),
                    name=label,
                    legendgroup=label,
                    marker_color=colour,
                    **own,
                ),
                row=1,
                col=col,
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


#: The monitoring chart's colour of each detection score.
MONITOR_COLOURS = {"precision": "#2e86c1", "recall": "#e67e22", "f1": "#27ae60"}


def monitor_scores_figure(
    view: pd.DataFrame,
    bar_labels: Sequence[str],
    is_reference: Sequence[bool],
    negative: str,
) -> go.Figure:
    """The Monitoring page's grouped bars: precision and recall (Wilson 95% intervals) and F1
    (bootstrap) of the monitor's detection per teacher (``view``:
    :func:`legival_core.views.monitoring.monitor_intervals`, one row per teacher, drawn as
    ``bar_labels``). An undefined score is a labelled gap, not a bar of height 0; the teachers
    marked in ``is_reference`` are grey outlines (shown for scale, not compared)."""
    import plotly.graph_objects as go

    from legival_core.views.display import column_label
    from legival_core.views.monitoring import NOT_DEFINED

    figure = go.Figure()
    for measure, how in (("precision", "Wilson"), ("recall", "Wilson"), ("f1", "bootstrap")):
        defined = view[measure].notna()
        colour = MONITOR_COLOURS[measure]
        figure.add_trace(
            go.Bar(
                name=f"{column_label(measure)} ({how} 95%)",
                x=plotly_literals(list(bar_labels)),
                y=view[measure].fillna(0.0),
                text=[None if ok else NOT_DEFINED for ok in defined],
                textposition="outside",
                marker={
                    "color": ["rgba(0,0,0,0)" if ref else colour for ref in is_reference],
                    "line": {
                        "color": ["#888" if ref else colour for ref in is_reference],
                        "width": 1.5,
                    },
                    "opacity": [1.0 if ok else 0.0 for ok in defined],
                },
                customdata=view[f"{measure}_n"],
                hovertemplate="%{x}<br>%{y:.3f} from n = %{customdata}"
                "<extra>%{fullData.name}</extra>",
                error_y={
                    "type": "data",
                    "symmetric": False,
                    "array": (view[f"{measure}_hi"] - view[measure]).fillna(0),
                    "arrayminus": (view[measure] - view[f"{measure}_lo"]).fillna(0),
                },
            )
        )
    figure.update_layout(
        barmode="group",
        title=f"Detection of invalid traces ({plotly_literal(negative)}), 95% intervals",
        yaxis={"title": "score", "range": [0, 1.12]},
        height=420,
    )
    return figure


def redundancy_sweep_figure(
    rows: pd.DataFrame, threshold: float, dashed: Collection[str], over_datasets: bool
) -> go.Figure:
    """The Redundancy threshold page's sweep: each teacher's redundancy share against the
    threshold τ (``rows``: teacher, threshold, redundancy), the teachers in ``dashed`` (the
    reference teachers) dashed and labelled, the chosen ``threshold`` a dotted line.
    ``over_datasets`` says the shares are means over datasets too (the axis says so)."""
    import plotly.graph_objects as go

    figure = go.Figure()
    for index, (teacher, group) in enumerate(rows.groupby("teacher", sort=True)):
        label = plotly_literal(teacher) + (" (reference)" if teacher in dashed else "")
        figure.add_trace(
            go.Scatter(
                x=group["threshold"],
                y=group["redundancy"],
                mode="lines+markers",
                name=label,
                line={
                    "color": PALETTE[index % len(PALETTE)],
                    "dash": "dash" if teacher in dashed else None,
                },
                hovertemplate="τ = %{x:.2f}<br>redundancy %{y:.1%}<extra>%{fullData.name}</extra>",
            )
        )
    figure.add_vline(
        x=threshold,
        line_dash="dot",
        line_color="#555",
        annotation_text=f"τ = {threshold:.2f}",
        annotation_position="top right",
    )
    figure.update_layout(
        height=430,
        xaxis_title="threshold τ",
        yaxis_title="redundancy share (mean over traces"
        + (", then over datasets)" if over_datasets else ")"),
        yaxis_tickformat=".0%",
        yaxis_range=[-0.02, 1.02],
        legend_title_text="teacher",
    )
    return figure


def reward_scatter_figure(
    points: pd.DataFrame, model: str, fotu_name: str, title: str
) -> go.Figure:
    """The Reward models page's scatter: one point per trace (``points``: teacher, trace_id,
    correct, score, fotu), the reward of ``model`` against the trace's transfer score
    (``fotu_name``), correct and incorrect traces as two series."""
    import plotly.graph_objects as go

    figure = go.Figure()
    for correct, group in points.groupby("correct", sort=True):
        figure.add_trace(
            go.Scatter(
                x=group["score"],
                y=group["fotu"],
                mode="markers",
                name="correct" if correct else "incorrect",
                text=plotly_literals(group["teacher"]),
                customdata=plotly_literals(group["trace_id"]),
                hovertemplate="%{text}<br>%{customdata}<br>reward %{x:.3f}<br>"
                + plotly_literal(fotu_name)
                + " %{y:.3f}<extra></extra>",
            )
        )
    figure.update_layout(
        title=title,
        xaxis_title=f"reward ({plotly_literal(model)})",
        yaxis_title=f"{fotu_name} (mean over students)",
        height=460,
    )
    return figure


def coverage_figure(covered: pd.DataFrame, teachers: Sequence[str], filled: bool) -> go.Figure:
    """The Transfer curves page's strip of traces measured per bin, one row per teacher in
    ``teachers`` (``covered``: :func:`legival_core.views.observed_coverage`). White only
    where nothing was measured; ``filled`` says the rest of each curve is filled in from the
    grid (the title says so)."""
    import plotly.graph_objects as go

    strip = covered[covered["teacher"].isin(teachers)]
    most = max(int(strip["n_observed"].max()) if len(strip) else 1, 1)
    figure = go.Figure(
        go.Heatmap(
            x=strip["x"],
            y=plotly_literals(strip["teacher"]),
            z=strip["n_observed"],
            zmin=0,
            zmax=most,
            # one trace is already a clear grey (on a linear grey scale up to the whole-trace
            # bin's ~50 traces it looked white)
            colorscale=[[0.0, "#ffffff"], [min(1 / most, 0.5), "#bdbdbd"], [1.0, "#000000"]]
            if most > 1
            else [[0.0, "#ffffff"], [1.0, "#000000"]],
            colorbar={"title": {"text": "traces"}},
            customdata=strip["n_traces"],
            hovertemplate="%{y}, x = %{x:.2f}<br>measured for %{z} of %{customdata} traces"
            "<extra></extra>",
        )
    )
    figure.update_layout(
        height=90 + 28 * max(1, len(teachers)),
        margin={"t": 30, "b": 40},
        title="Traces measured per bin"
        + (" (the rest of each curve is filled in)" if filled else ""),
        xaxis={"title": "share of the trace shown (x = k / m)", "range": [0, 1]},
    )
    return figure


def _format_p(p: float) -> str:
    """A p-value for the hover text: three significant digits, an em dash when undefined."""
    import numpy as np

    from legival_core.views.display import MISSING

    return MISSING if not np.isfinite(p) else f"{p:.3g}"


def correlation_heatmap(
    rho: pd.DataFrame,
    pvalue: pd.DataFrame,
    counts: pd.DataFrame,
    title: str,
    labels: Sequence[str],
    few: int,
) -> go.Figure:
    """The Correlations page's heatmap: ρ with stars and n in every cell (``labels`` name the
    metrics of ``rho``'s columns); stars read from the Holm-adjusted p over the pairs shown,
    none on a pair related by construction (marked, the reason in the hover); cells from fewer
    than ``few`` points drawn faded (a second, translucent heatmap on the same colour axis)."""
    import numpy as np
    import plotly.graph_objects as go

    from legival_core.views.correlations import (
        BY_CONSTRUCTION_MARK,
        cell_stars,
        construction_matrix,
        holm_matrix,
    )
    from legival_core.views.display import format_number

    shown = [plotly_literal(name) for name in labels]
    n = counts.loc[rho.index, rho.columns].to_numpy()
    adjusted = holm_matrix(pvalue)
    reasons = construction_matrix(rho.columns)
    text = [
        [
            ""
            if np.isnan(r)
            else format_number(r, 2)
            + ("" if i == j else BY_CONSTRUCTION_MARK if reason else cell_stars(q, int(k)))
            + f"<br>n {k}"
            for j, (r, q, k, reason) in enumerate(zip(rho_row, q_row, n_row, why_row, strict=True))
        ]
        for i, (rho_row, q_row, n_row, why_row) in enumerate(
            zip(rho.to_numpy(), adjusted.to_numpy(), n, reasons.to_numpy(), strict=True)
        )
    ]
    hover = [
        [
            f"{_format_p(p)} (Holm {_format_p(q)})"
            + (f"<br>by construction: {plotly_literal(reason)}" if reason else "")
            for p, q, reason in zip(p_row, q_row, why_row, strict=True)
        ]
        for p_row, q_row, why_row in zip(
            pvalue.to_numpy(), adjusted.to_numpy(), reasons.to_numpy(), strict=True
        )
    ]
    z = rho.to_numpy()
    figure = go.Figure()
    for faded in (False, True):
        chosen = (n < few) if faded else (n >= few)
        figure.add_trace(
            go.Heatmap(
                z=np.where(chosen, z, np.nan),
                x=shown,
                y=shown,
                text=np.where(chosen, np.array(text, dtype=object), "").tolist(),
                texttemplate="%{text}",
                # one colour axis for both layers: faded cells keep the scale's colours
                coloraxis="coloraxis",
                opacity=0.3 if faded else 1.0,
                # Plotly picks the text colour from the cell's full colour: white on a faded
                # cell was unreadable, so faded cells get dark text
                textfont={"color": "#333"} if faded else None,
                name=f"fewer than {few} points" if faded else f"{few} points or more",
                customdata=np.dstack([np.array(hover, dtype=object), n]),
                hovertemplate="%{y} vs %{x}<br>ρ = %{z:.3f}<br>p = %{customdata[0]}"
                "<br>n = %{customdata[1]}<extra>%{fullData.name}</extra>",
            )
        )
    figure.update_layout(
        coloraxis={"colorscale": "RdBu", "reversescale": True, "cmin": -1, "cmax": 1,
                   "colorbar": {"title": {"text": "ρ"}}},
    )  # fmt: skip
    figure.update_layout(title=title, height=460, yaxis_autorange="reversed")
    # no grid lines through the cells (they showed through the faded ones)
    figure.update_xaxes(showgrid=False)
    figure.update_yaxes(showgrid=False)
    return figure


def _reach(gaps: pd.Series) -> list[float]:
    """Error-bar lengths: an open end (an interval reaching −∞, no correct answer in some
    resamples) or a missing one is drawn as no bar on that side."""
    values = pd.to_numeric(gaps, errors="coerce").astype(float)
    return values.where(values.abs() != float("inf")).clip(lower=0).fillna(0.0).tolist()


def waterfall_figure(terms: pd.DataFrame, model: str, reference: str) -> go.Figure:
    """The Efficiency decomposition page's Δlog waterfall of ``model`` against ``reference``
    (``terms``: term, value, measure, and with intervals lo and hi). An infinite bar (no
    correct answer) is drawn at 0 and labelled with what it means; where the terms have
    intervals (paired resamples of the problems both models answered) each bar's end carries
    its 95% error bar, an open end drawn as none."""
    import plotly.graph_objects as go

    from legival_core.views.efficiency import dlog_text

    finite = terms["value"].map(lambda v: pd.notna(v) and abs(float(v)) != float("inf"))
    figure = go.Figure(
        go.Waterfall(
            x=terms["term"],
            y=terms["value"].where(finite, 0.0),
            measure=terms["measure"],
            text=[dlog_text(v) for v in terms["value"]],
            textposition="outside",
        )
    )
    if "lo" in terms and terms["lo"].notna().any():
        ends = terms["value"].where(finite, 0.0).astype(float)
        running = ends.where(terms["measure"] == "total", ends.cumsum())
        figure.add_trace(
            go.Scatter(
                x=terms["term"],
                y=running,
                mode="markers",
                marker={"size": 1, "color": "rgba(0,0,0,0)"},
                error_y={
                    "type": "data",
                    "visible": True,
                    "symmetric": False,
                    "array": _reach(terms["hi"] - terms["value"]),
                    "arrayminus": _reach(terms["value"] - terms["lo"]),
                    "color": "#333",
                },
                name="95% interval (paired problem resamples)",
                showlegend=False,
                hoverinfo="skip",
            )
        )
    figure.update_layout(
        title=f"{plotly_literal(model)} vs {plotly_literal(reference)}: Δlog E0 = sum of the bars",
        height=420,
        yaxis_title="log ratio (model / reference)",
        showlegend=False,  # one series of bars; the page's caption explains the error bars
    )
    return figure


def overhead_coupling_figure(rows: pd.DataFrame, is_reference: Sequence[bool]) -> go.Figure:
    """The Efficiency decomposition page's overhead VŌ against coupling κ, one labelled point
    per model of ``rows``; the rows marked in ``is_reference`` (reference teachers, a human
    solution) as open grey circles, for comparison, not one of the models; κ = 1 dotted."""
    import numpy as np
    import plotly.express as px
    import plotly.graph_objects as go

    apart = np.asarray(is_reference, dtype=bool)
    models = rows[~apart]
    figure = px.scatter(
        models.assign(model=plotly_literals(models["model"])),
        x="vo",
        y="kappa",
        hover_name="model",
        text="model",
        height=420,
        hover_data={c: ":.4g" for c in ("e0", "accuracy", "mean_tokens", "r_ctx", "r_logic")},
        labels={"vo": "VŌ = mean T/W", "kappa": "κ = E[T] / (E[W] · VŌ)"},
    )
    figure.update_traces(textposition="top center", name="models", showlegend=True)
    references = rows[apart]
    if len(references):
        figure.add_trace(
            go.Scatter(
                x=references["vo"],
                y=references["kappa"],
                mode="markers+text",
                text=plotly_literals(references["model"]),
                textposition="top center",
                name="reference (not compared)",
                marker={"symbol": "circle-open", "size": 10, "color": "#555"},
                hovertemplate="%{text} (reference)<br>VŌ %{x:.4g}<br>κ %{y:.4g}<extra></extra>",
            )
        )
    figure.add_hline(y=1.0, line_dash="dot", line_color="#888")
    return figure


#: The Pareto chart's marker of each teacher's place (its ``position``).
PARETO_SYMBOLS = {
    "on the frontier": "circle",
    "dominated": "circle-open",
    "reference (not compared)": "star-diamond",
}


def pareto_figure(
    points: pd.DataFrame, intervals: pd.DataFrame, x: str, y: str, metrics: Sequence[str]
) -> tuple[go.Figure, bool]:
    """The Pareto page's chart: one point per teacher of ``points``
    (:func:`legival_core.views.pareto.pareto_view`, with its ``on frontier in resamples``
    share), coloured by family, its marker saying whether it is on the frontier, dominated or
    a reference teacher left out of the comparison; each value's 95% interval from
    ``intervals`` (long: metric, teacher, lo, hi) as error bars; the frontier joined by
    :func:`add_frontier`. Also whether any error bar is drawn (the page's caption says so)."""
    import plotly.express as px

    from legival_core.views.pareto import interval_bars

    hover = {m: ":.4g" for m in metrics}
    hover["on frontier in resamples"] = ":.0%"
    position = points["frontier"].map({True: "on the frontier", False: "dominated"})
    position = position.where(
        ~(points["reference"] & ~points["frontier"]), "reference (not compared)"
    )
    # Names from the store are data: the chart gets them escaped (Plotly reads HTML in labels).
    drawn = points.assign(
        teacher=plotly_literals(points["teacher"]),
        family=plotly_literals(points["family"]),
        position=position,
    )
    bars: dict[str, str] = {}
    for axis, metric in (("x", x), ("y", y)):
        above, below = interval_bars(points, intervals, metric)
        if above.notna().any():
            drawn[f"_{axis}_above"], drawn[f"_{axis}_below"] = above, below
            bars |= {f"error_{axis}": f"_{axis}_above", f"error_{axis}_minus": f"_{axis}_below"}
    figure = px.scatter(
        drawn,
        x=x,
        y=y,
        **bars,
        color="family",
        symbol="position",
        hover_name="teacher",
        hover_data={**hover, "family": True, "position": True},
        text="teacher",
        height=520,
        labels={m: METRICS[m].label if m in METRICS else m for m in metrics},
        symbol_map=PARETO_SYMBOLS,
    )
    figure.update_traces(textposition="top center", marker={"size": 12})
    add_frontier(figure, points, x, y)
    return figure, bool(bars)


def e0_bars_figure(board: pd.DataFrame, apart: Collection[str], tokens_words: str) -> go.Figure:
    """The Efficiency decomposition page's E0 per model (``board``:
    :func:`legival_core.views.e0_board`). The teachers in ``apart`` (reference teachers) are
    not models: each is a labelled dashed line, and the axis stops at 1.25 × the best model's
    E0 when there are reference teachers, so a human E0 far above every model does not flatten
    the bars (the axis' range says where: a line above it is off the scale). ``tokens_words``
    says what E[T] counts."""
    import plotly.express as px

    is_apart = board["model"].astype(str).isin(set(apart))
    model_bars = board[~is_apart]
    figure = px.bar(
        model_bars.assign(model=plotly_literals(model_bars["model"])),
        x="model",
        y="e0",
        hover_data=[
            c for c in ("accuracy", "r_ctx", "r_logic", "mean_tokens", "vo", "kappa") if c in board
        ],
        labels={
            "e0": "E0 (correct per 1,000 tokens)",
            "mean_tokens": plotly_literal(f"E[T] ({tokens_words})"),
        },
        height=340,
    )
    for row in board[is_apart].itertuples():
        figure.add_hline(
            y=float(row.e0),
            line_dash="dash",
            line_color="#555",
            annotation_text=plotly_literal(f"{row.model} (reference): E0 {row.e0:.2f}"),
            annotation_position="top left",
        )
    shown_max = model_bars["e0"].max() if len(model_bars) else None
    if apart and shown_max is not None and pd.notna(shown_max):
        figure.update_yaxes(range=[0, max(float(shown_max) * 1.25, 1e-9)])
    return figure


#: Template sets of the calibration charts in a fixed order and colour: development, held
#: out, both together.
TEMPLATE_SET_COLOURS = {"dev": "#1f77b4", "held_out": "#ff7f0e", "all": "#7f7f7f"}


def template_set_bars_figure(rows: pd.DataFrame, share: str, share_label: str) -> go.Figure:
    """The Metric validity page's bars: one per (detector, planted case) and template set of
    the share in column ``share`` (0 to 1) of calibration report ``rows`` (``measure``,
    ``case``, ``template_set``), development and held-out templates side by side, so a gap
    between them shows."""
    import plotly.express as px

    return px.bar(
        rows.assign(
            label=plotly_literals(rows["measure"] + " · " + rows["case"]),
            template_set=plotly_literals(rows["template_set"]),
        ),
        x="label",
        y=share,
        color="template_set",
        barmode="group",
        range_y=(0, 1),
        height=380,
        # one colour per template set on both charts (Plotly's order-of-appearance colours
        # gave "dev" two different ones)
        color_discrete_map=TEMPLATE_SET_COLOURS,
        category_orders={"template_set": list(TEMPLATE_SET_COLOURS)},
        labels={
            "label": "detector · planted case",
            share: share_label,
            "template_set": "template set",
        },
    )


def published_bars_figure(table: pd.DataFrame, metric: str, label: str) -> go.Figure:
    """The Published numbers page's bars of one ``metric`` (axis title ``label``) per model of
    a published table (``model``, ``dataset``), datasets side by side."""
    import plotly.express as px

    return px.bar(
        table.assign(
            model=plotly_literals(table["model"]), dataset=plotly_literals(table["dataset"])
        ),
        x="model",
        y=metric,
        color="dataset",
        barmode="group",
        height=380,
        labels={metric: label},
    )
