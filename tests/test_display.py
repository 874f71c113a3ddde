"""Tests of legival_core.views.display, the one formatting helper of every page."""

from __future__ import annotations

import numpy as np
import pandas as pd
from hypothesis import given
from hypothesis import strategies as st

from legival_core.views.display import (
    MISSING,
    column_label,
    format_number,
    format_share,
    format_signed,
    tidy_table,
)


def test_missing_and_odd_values_never_show_as_artefacts() -> None:
    assert [format_number(v) for v in (None, np.nan, pd.NA, float("inf"), -np.inf)] == [
        MISSING, MISSING, MISSING, "∞", "−∞",
    ]  # fmt: skip
    # -0.0004 rounds to zero at 3 decimals: "0.000", never "-0.000"
    assert format_number(-0.0004) == "0.000" and format_number(-0.0006) == "-0.001"
    assert format_share(0.0) == "0.0%" and format_share(-0.00001) == "0.0%"
    assert format_signed(-0.0001) == "0.000" and format_signed(0.5) == "+0.500"


def test_column_labels_come_from_the_catalog() -> None:
    assert column_label("fotu") == "FOTU" and column_label("regression_rate") == "Regression"
    assert column_label("fotu_before_leak") == "FOTU before leak"
    assert column_label("n_traces") == "n traces" and column_label("teacher") == "teacher"
    assert column_label("share_at_or_after_leak") == "share at or after leak"
    # statistics and counts written out, never a raw field name (issue 39: `rho`, `tp`, `f1`)
    assert [column_label(c) for c in ("rho", "pvalue", "partial_rho", "tp", "fp", "fn", "tn")] == [
        "ρ (Spearman)", "p", "partial ρ (given tokens)",
        "true positives", "false positives", "false negatives", "true negatives",
    ]  # fmt: skip
    assert column_label("f1") == "F1" and column_label("recall_n") == "recall n"


def test_tidy_table_keeps_numbers_and_shows_text() -> None:
    frame = pd.DataFrame({"teacher": ["a", "b"], "fotu": [0.25, np.nan], "tokens": [812.4, 9.0],
                          "n_traces": [3, 4], "rho": [-0.0001, np.inf]})  # fmt: skip
    styled = tidy_table(frame)
    assert list(styled.data.columns) == ["teacher", "FOTU", "Tokens", "n traces", "ρ (Spearman)"]
    # a full column keeps its numbers (the grid sorts them); one with a gap holds its text
    assert styled.data["Tokens"].iloc[0] == 812.4
    assert styled.data["FOTU"].tolist() == ["25.0%", MISSING]
    html = styled.to_html()
    for shown in ("25.0%", "812", "0.000", "∞", MISSING):
        assert shown in html
    for artefact in ("nan", "None", "-0.000", "inf<"):
        assert artefact not in html


@given(st.floats(allow_nan=True, allow_infinity=True))
def test_property_no_number_formats_as_an_artefact(value: float) -> None:
    for text in (format_number(value), format_share(value), format_signed(value)):
        assert text not in ("nan", "None") and not text.startswith("-0.000")
        assert "inf" not in text.lower() and "nan" not in text.lower()
        if text.startswith(("-", "−")) and not text.endswith("∞"):
            assert float(text.lstrip("-−").rstrip("%").replace(",", "")) != 0


def test_tidy_table_shows_bidi_controls_escaped() -> None:
    """Issue 24, item 9, in the app's tables: a name holding U+202E was drawn raw in a grid
    cell (and in a header), so it read reversed; cells and headers get the visible escape."""
    from legival_core.views.display import tidy_table

    frame = pd.DataFrame({"teacher": ["report\u202egpj.exe", "plain"], "n_traces": [1, 2]})
    frame["wide\u202ename"] = pd.Categorical(["a\u202eb", "c"])
    shown = tidy_table(frame).data
    assert shown["teacher"].tolist() == ["report\\u202egpj.exe", "plain"]
    assert "wide\\u202ename" in shown.columns
    assert shown["wide\\u202ename"].astype(str).tolist() == ["a\\u202eb", "c"]
    assert shown["n traces"].tolist() == [1, 2]
