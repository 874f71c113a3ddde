"""Cells of files other programs open (``legival_core/store/safe_export.py``), on hand-made values.

The commands and pages that write such files are tested where they are (``test_publish``,
``test_store``, ``test_grade_review``); here the helper itself meets every kind of column a
frame can hold, since a column type it skips is a CSV cell written verbatim.
"""

from __future__ import annotations

import pandas as pd
import pyarrow as pa

from legival_core.store.safe_export import csv_arrow, csv_frame

FORMULAS = ["=1+1", "+cmd|' /C calc'!A0", "-2+3", "@SUM(1+1)", "\t=1", "\r=1"]


def test_csv_frame_neutralises_text_of_every_column_type() -> None:
    """Categorical columns (how the app loads ids and names of big tables) were left as they
    were: a teacher named =1+1 reached the CSV as a live formula."""
    frame = pd.DataFrame(
        {
            "object": pd.Series(FORMULAS, dtype=object),
            "string": pd.Series(FORMULAS, dtype="string"),
            "category": pd.Categorical(FORMULAS),
            "number": [-1.5, -2, 0, 1, 2, 3],
        }
    )
    written = csv_frame(frame)
    for column in ("object", "string", "category"):
        assert written[column].astype(str).tolist() == ["'" + v for v in FORMULAS], column
    assert written["number"].tolist() == [-1.5, -2, 0, 1, 2, 3]  # numbers stay numbers
    assert frame["category"].tolist() == FORMULAS  # the caller's frame is not changed


def test_csv_arrow_neutralises_dictionary_columns() -> None:
    """The same for an Arrow table: a dictionary-encoded text column is text too."""
    table = pa.table({"name": pa.array(FORMULAS).dictionary_encode(), "n": list(range(6))})
    written = csv_arrow(table)
    assert written.column("name").to_pylist() == ["'" + v for v in FORMULAS]
    assert written.column("n").to_pylist() == list(range(6))


def test_a_tex_row_never_starts_with_an_argument_of_the_line_break() -> None:
    """LaTeX's ``\\\\`` looks past spaces and the line end for ``*`` (its starred form) and
    ``[`` (a length), and booktabs' rules for ``[``: a row whose first cell starts with either
    lost it, or failed to compile. ``[`` was braced already; ``*`` was written bare."""
    from legival_core.views import latex_table

    names = ["plain", "*starred", "[draft] x", "* [both]"]
    tex = latex_table(pd.DataFrame({"teacher": names, "score": [0.5, 0.25, 0.125, 1.0]}))
    rows = tex.splitlines()[4:-2]  # after \toprule, the header and \midrule; before \bottomrule
    assert [row.split(" & ")[0] for row in rows] == [
        "plain",
        "{*}starred",
        "{[}draft{]} x",
        "{*} {[}both{]}",
    ]
    assert tex.isascii()
