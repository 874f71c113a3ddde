"""The inspector's step layers: for one trace, one row of cells per measurement over the same
steps — resampling importance (Thought Anchors chunks carried onto steps by character span,
:mod:`legival_core.text.chunk_alignment`), the students' per-step transfer attribution
(:mod:`legival_core.metrics.attribution`), redundancy r_i, backtracking flags, then each weak
student's correctness after seeing the trace up to that step.

:func:`step_layers` is plain pandas; :func:`step_layers_figure` draws it with Plotly (imported
inside the function), every label escaped for Plotly, which reads HTML in text.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from legival_core.text.chunk_alignment import ChunkAlignment, align_chunks

__all__ = [
    "ATTRIBUTION_ROW",
    "IMPORTANCE_ROW",
    "chunk_alignment",
    "step_dtick",
    "step_layers",
    "step_layers_figure",
    "student_strip_figure",
]

IMPORTANCE_ROW = "resampling importance"
ATTRIBUTION_ROW = "transfer attribution"
REDUNDANCY_ROW = "redundancy r_i"
BACKTRACKING_ROW = "backtracking"


#: At most this many ticks on a step axis.
MAX_STEP_TICKS = 15
#: Up to this many steps (or measured prefixes) the values are written in the cells; beyond,
#: they would not fit and are on hover only.
MAX_WRITTEN = 40


def step_dtick(last_step: int) -> int:
    """Distance between ticks on an axis of steps 1 … ``last_step``: whole steps, 1, 2, 5, 10,
    20, … apart, the smallest that leaves at most :data:`MAX_STEP_TICKS` ticks.

    >>> step_dtick(12), step_dtick(40), step_dtick(1500)
    (1, 5, 100)
    """
    scale = 1
    while True:
        for factor in (1, 2, 5):
            if last_step <= MAX_STEP_TICKS * factor * scale:
                return factor * scale
        scale *= 10


def chunk_alignment(steps: pd.DataFrame, chunks: pd.DataFrame) -> ChunkAlignment | None:
    """The trace's chunks on its steps, or None when it has no chunk importances (or no
    steps yet)."""
    if chunks is None or chunks.empty or steps is None or steps.empty:
        return None
    return align_chunks(steps, chunks)


def step_layers(
    table: pd.DataFrame,
    alignment: ChunkAlignment | None = None,
    strip: pd.DataFrame | None = None,
    attribution: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """Layers × step numbers (1-based columns) of one trace.

    Rows, in order: ``resampling importance`` (only with an ``alignment``; signed, NaN where no
    chunk reaches the step), ``transfer attribution`` (only with ``attribution``, the
    :func:`legival_core.metrics.attribution.step_attribution` of the trace; signed, NaN outside
    the measured prefixes), ``redundancy r_i`` (NaN for step 1), ``backtracking`` (1.0 when
    any labeler flagged the step, else 0.0), then one row per student of ``strip``
    (:func:`legival_core.views.inspector.student_strip`; its k = 0 column, the student alone,
    is left out).

    Args:
        table: :func:`legival_core.views.inspector.step_table` of the trace.
        alignment: :func:`chunk_alignment` of the trace, or None.
        strip: the student strip, or None.
        attribution: the trace's per-step attribution (``step``, ``attribution``), or None.

    >>> table = pd.DataFrame({"step": [0, 1], "number": [1, 2], "similarity": [np.nan, 0.9],
    ...                       "flag_lexical": [False, True]})
    >>> step_layers(table).values.tolist()
    [[nan, 0.9], [0.0, 1.0]]
    """
    numbers = table["number"].astype(int).tolist()
    rows: dict[str, list[float]] = {}
    if alignment is not None:
        by_step = alignment.steps.set_index("step")["importance"]
        rows[IMPORTANCE_ROW] = [float(by_step.get(int(s), np.nan)) for s in table["step"]]
    if attribution is not None and len(attribution):
        by_number = attribution.set_index("step")["attribution"]
        rows[ATTRIBUTION_ROW] = [float(by_number.get(n, np.nan)) for n in numbers]
    rows[REDUNDANCY_ROW] = table["similarity"].astype("float64").tolist()
    flags = [c for c in table.columns if str(c).startswith("flag_")]
    flagged = table[flags].any(axis=1) if flags else pd.Series(False, index=table.index)
    rows[BACKTRACKING_ROW] = flagged.astype("float64").tolist()
    if strip is not None and not strip.empty:
        for student in strip.index:
            values = strip.loc[student]
            rows[str(student)] = [float(values.get(n, np.nan)) for n in numbers]
    return pd.DataFrame.from_dict(rows, orient="index", columns=numbers)


#: Colour scale per kind of row: importance diverges around 0, the others run from pale to deep.
_DIVERGING = [[0, "#c0392b"], [0.5, "#f8f9f9"], [1, "#1f618d"]]
_SCALES: dict[str, list[list[Any]]] = {
    IMPORTANCE_ROW: _DIVERGING,
    ATTRIBUTION_ROW: _DIVERGING,
    REDUNDANCY_ROW: [[0, "#fdf2e9"], [1, "#e67e22"]],
    BACKTRACKING_ROW: [[0, "#f4f6f6"], [1, "#7d3c98"]],
}
_STUDENT_SCALE = [[0, "#e74c3c"], [1, "#27ae60"]]


def step_layers_figure(
    layers: pd.DataFrame, errors: Mapping[str, Sequence[float]] | None = None
) -> Any:
    """A Plotly figure of :func:`step_layers`: one heatmap row per layer on one step axis.

    Importance is shaded blue (resampling the step away lowers accuracy: the step matters) to
    red (it raises accuracy), symmetric around 0 up to the largest |importance| of the trace;
    the transfer attribution likewise (blue: the step raises the students' solve rate), its
    standard error from ``errors`` (row name -> one value per step) in the hover; redundancy
    from 0 to 1; backtracking on/off; students red (wrong) to green (right). Up to
    :data:`MAX_WRITTEN` steps every value but backtracking's is written in its cell.

    Each layer is a subplot row of its own: Plotly.js fails to draw several one-row heatmap
    traces on one categorical axis ("Cannot read properties of undefined"), and a row of its
    own also gives each layer its own colour scale.
    """
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    from legival_core.text.safe_text import plotly_literal

    rows = max(1, len(layers))
    figure = make_subplots(rows=rows, cols=1, shared_xaxes=True, vertical_spacing=0.02)
    columns = [int(c) for c in layers.columns]
    written = len(columns) <= MAX_WRITTEN
    for position, name in enumerate(layers.index, start=1):
        values = layers.loc[name].to_numpy(dtype="float64")
        scale = _SCALES.get(str(name), _STUDENT_SCALE)
        low, high = 0.0, 1.0
        if name in (IMPORTANCE_ROW, ATTRIBUTION_ROW):
            finite = np.abs(values[np.isfinite(values)])
            high = float(finite.max()) if finite.size and finite.max() > 0 else 1.0
            low = -high
        label = plotly_literal(str(name))
        hover = f"{label} at step %{{x}}: %{{z:.2f}}"
        error = (errors or {}).get(str(name))
        if error is not None:
            hover += " ± %{customdata:.2f} (se)"
        figure.add_trace(
            go.Heatmap(
                z=[[None if not np.isfinite(v) else float(v) for v in values]],
                x=columns,
                y=[label],
                zmin=low,
                zmax=high,
                colorscale=scale,
                showscale=False,
                xgap=1,
                customdata=None if error is None else [list(error)],
                texttemplate="%{z:.2f}" if written and name != BACKTRACKING_ROW else None,
                textfont={"size": 9},
                hovertemplate=hover + "<extra></extra>",
            ),
            row=position,
            col=1,
        )
    figure.update_layout(
        height=60 + 30 * rows,
        margin={"t": 10, "b": 30, "l": 10, "r": 10},
    )
    # Whole steps: Plotly's own ticks fall between them on a short trace.
    figure.update_xaxes(tick0=0, dtick=step_dtick(max(columns, default=1)))
    figure.update_xaxes(title_text="step", row=rows, col=1)
    return figure


def student_strip_figure(strip: pd.DataFrame, m: int | None = None) -> Any:
    """The student strip: one row per student, one point per measured prefix at its k (the
    number of steps shown; k = 0 is the student alone), coloured red (wrong) to green (right)
    by the mean correctness there, which is written above the point up to
    :data:`MAX_WRITTEN` prefixes (on hover beyond). Points, not cells: the grid of measured
    prefixes is sparse (k = 0, 3, 6, 9, 10), and a cell per prefix would stretch each over the
    steps between. The axis runs from 0 to ``m`` (the trace's steps) when given."""
    import plotly.graph_objects as go

    from legival_core.text.safe_text import plotly_literal

    columns = sorted(int(k) for k in strip.columns)
    written = len(columns) <= MAX_WRITTEN
    figure = go.Figure()
    for student in strip.index:
        values = strip.loc[student, columns].to_numpy(dtype="float64")
        measured = np.isfinite(values)
        ks = [k for k, keep in zip(columns, measured, strict=True) if keep]
        kept = values[measured]
        label = plotly_literal(str(student))
        figure.add_trace(
            go.Scatter(
                x=ks,
                y=[label] * len(ks),
                mode="lines+markers+text" if written else "lines+markers",
                line={"color": "#d5d8dc", "width": 1},
                marker={
                    "size": 13,
                    "symbol": "square",
                    "color": kept,
                    "cmin": 0,
                    "cmax": 1,
                    "colorscale": _STUDENT_SCALE,
                    "line": {"color": "#566573", "width": 0.5},
                },
                text=[f"{v:.2f}" for v in kept],
                textposition="top center",
                textfont={"size": 10},
                name=label,
                showlegend=False,
                # the values written above the top row stay whole
                cliponaxis=False,
                hovertemplate=f"{label} after k = %{{x}} steps: %{{marker.color:.2f}}"
                "<extra></extra>",
            )
        )
    last = max([*columns, int(m or 0), 1])
    figure.update_layout(
        height=110 + 42 * len(strip),
        # room above the first row for its written values
        margin={"t": 30, "b": 50, "l": 10, "r": 10},
        # the title below the ticks, not on them
        xaxis={
            "title": {"text": "steps shown k (0 = the student alone)", "standoff": 12},
            "automargin": True,
            "tick0": 0,
            "dtick": step_dtick(last),
            "range": [-0.5, last + 0.5],
        },
        yaxis={"type": "category", "automargin": True},
    )
    return figure
