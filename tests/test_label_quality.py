"""The segmenters and backtracking labelers measured against hand labels (issue 38).

The stored measurements (``legival_core/data/label_quality.json``, which the app, the static
site and the docs show) must be what the code gives now on the committed hand labels: every
offline number is recomputed here, and each recorded LLM judge is re-scored from its recorded
replies with the judge stage's own parser. The counting itself is checked by hand.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import pytest

from legival_core.metrics import label_quality
from legival_core.metrics.label_quality import (
    Counts,
    backtracking_quality,
    boundary_counts,
    detector_scores,
    quality_note,
    read_jsonl,
)

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))

import label_quality as bench  # noqa: E402  (bench/label_quality.py, a script on sys.path)


@pytest.fixture(scope="module")
def stored() -> dict:
    return json.loads((REPO / "legival_core" / "data" / "label_quality.json").read_text())


def test_stored_segmentation_scores_are_what_the_segmenters_give_now(stored: dict) -> None:
    assert bench.segmentation_report() == stored["segmentation"]


def test_stored_backtracking_scores_are_what_the_labelers_give_now(stored: dict) -> None:
    fresh = bench.backtracking_report([])
    for name in ("lexical", "cues"):
        assert fresh["labelers"][name] == stored["backtracking"]["labelers"][name], name
    assert {k: v for k, v in fresh.items() if k != "labelers"} == {
        k: v for k, v in stored["backtracking"].items() if k != "labelers"
    }


def test_every_recorded_judge_is_rescored_from_its_replies(stored: dict) -> None:
    judges = {
        name: entry
        for name, entry in stored["backtracking"]["labelers"].items()
        if name.startswith("judge:")
    }
    for name, entry in judges.items():
        replies = REPO / entry["replies"]
        assert replies.is_file(), f"{name}: its replies {entry['replies']} are not committed"
        fresh = bench.backtracking_report([replies])["labelers"][name]
        assert fresh == entry, name


def test_the_math_segmenter_finds_the_readers_boundaries(stored: dict) -> None:
    """What the issue asks of the new segmenter, on the held-out half: it finds the readers'
    step boundaries far better than plain Punkt (which misses the line breaks and cuts after
    factorials and abbreviations)."""
    modes = stored["segmentation"]["modes"]
    for half in ("dev", "test"):
        assert modes["math"][half]["f1"] > 0.99
        assert modes["paper"][half]["f1"] < 0.75
    assert stored["segmentation"]["passages"] == {"dev": 105, "test": 105}


def test_the_cues_beat_the_lexical_detector_on_the_test_half(stored: dict) -> None:
    labelers = stored["backtracking"]["labelers"]
    cues, lexical = labelers["cues"]["test"], labelers["lexical"]["test"]
    assert cues["counts"]["precision"] > 0.85 > lexical["counts"]["precision"]
    assert cues["kappa"] > lexical["kappa"] and cues["rho"] > lexical["rho"]
    # The goal recall of 0.6 is not met on the test half (0.37): the app says so.
    assert cues["counts"]["recall"] < 0.6
    quality = backtracking_quality("cues")
    assert quality is not None and quality.test_steps == 298
    assert quality_note("cues") == (
        "Backtracking by cues: precision 0.88, recall 0.37 on 298 hand-labelled test steps "
        "(dev: 1.00, 0.62)."
    )


def test_the_classifier_was_not_shipped_because_it_did_not_beat_the_cues(stored: dict) -> None:
    check = stored["classifier_check"]
    assert check["half"] == "dev" and check["shipped"] is False
    best = max((c["f1"] or 0.0) for c in check["classifier"].values())
    assert best < check["rules"]["f1"]


# ---------------------------------------------------------------------------------- counting


def test_boundary_counts_by_hand() -> None:
    counts = boundary_counts([5, 9, 14], [5, 14, 20, 31])
    assert (counts.tp, counts.fp, counts.fn) == (2, 1, 2)
    assert counts.precision == pytest.approx(2 / 3) and counts.recall == pytest.approx(0.5)
    assert counts.f1 == pytest.approx(2 * (2 / 3) * 0.5 / (2 / 3 + 0.5))
    assert math.isnan(Counts(0, 0, 3).precision) and Counts(0, 0, 3).recall == 0


def test_detector_scores_by_hand() -> None:
    # Six dev items in three traces; two strata of the demo population, the census stratum
    # weighted 1 and the drawn one 2763 / 300.
    items = [
        {"half": "dev", "stratum": "lexical", "trace": "a", "label": 1},
        {"half": "dev", "stratum": "lexical", "trace": "a", "label": 0},
        {"half": "dev", "stratum": "demo", "trace": "b", "label": 1},
        {"half": "dev", "stratum": "demo", "trace": "b", "label": 0},
        {"half": "dev", "stratum": "wider_cue", "trace": "c", "label": 1},
        {"half": "dev", "stratum": "wider_cue", "trace": "c", "label": 0},
    ]
    flags = [True, True, False, False, True, None]  # None: no valid answer, no flag
    dev = detector_scores(items, flags)["dev"]
    # tp: items 1, 5; fp: item 2; fn: item 3 -> precision 2/3, recall 2/3
    assert dev["counts"]["tp"] == 2 and dev["counts"]["fp"] == 1 and dev["counts"]["fn"] == 1
    assert dev["invalid"] == 1 and dev["steps"] == 6 and dev["positives"] == 3
    # weighted over the demo population (wider strata weigh 0): tp 1, fp 1, fn 9.21
    w = 2763 / 300
    assert dev["weighted"]["precision"] == pytest.approx(0.5)
    assert dev["weighted"]["recall"] == pytest.approx(round(1 / (1 + w), 4))
    assert dev["strata"]["demo"]["fn"] == 1 and dev["strata"]["lexical"]["tp"] == 1
    # κ on the six steps: labels 1,0,1,0,1,0; flags 1,1,0,0,1,0 -> p_o = 4/6,
    # p_e = (3/6)(3/6) + (3/6)(3/6) = 1/2 -> κ = (2/3 - 1/2) / (1/2) = 1/3
    assert dev["kappa"] == pytest.approx(round(1 / 3, 4))
    # per-trace counts: hand a 1, b 1, c 1; flagged a 2, b 0, c 1 -> hand is constant: no ρ
    assert dev["rho"] is None
    assert set(dev["intervals"]) == {
        "precision",
        "recall",
        "weighted_precision",
        "weighted_recall",
    }


def test_a_damaged_label_file_is_refused_with_file_line_and_field(tmp_path: Path) -> None:
    path = tmp_path / "labels.jsonl"
    path.write_text('{"half": "dev", "text": "x"}\n{"half": "dev"}\n', encoding="utf-8")
    with pytest.raises(ValueError, match=r"labels.jsonl, line 2: field 'text' is missing"):
        read_jsonl(path, ["half", "text"])
    path.write_text('{"half": "train", "text": "x"}\n', encoding="utf-8")
    with pytest.raises(ValueError, match=r"line 1: field 'half' is 'train'"):
        read_jsonl(path, ["half", "text"])
    path.write_text("[1, 2]\nnot json\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"line 1: not a JSON object"):
        read_jsonl(path, ["half"])


def test_a_judge_reply_file_needs_one_judge(tmp_path: Path) -> None:
    items = read_jsonl(bench.BACKTRACKING_LABELS, bench.BACKTRACKING_FIELDS)[:2]
    path = tmp_path / "replies.jsonl"
    rows = [
        {"item": items[0]["item"], "labeler": "judge:a", "raw": "no json"},
        {"item": items[1]["item"], "labeler": "judge:b", "raw": "{}"},
    ]
    path.write_text("\n".join(json.dumps(r) for r in rows), encoding="utf-8")
    with pytest.raises(ValueError, match="replies of 2 labelers"):
        bench.judge_flags(items, path)
    path.write_text(json.dumps(rows[0]) + "\n", encoding="utf-8")
    name, answered, flags = bench.judge_flags(items, path)
    # one item answered, with an invalid reply: counted, as no flag
    assert (name, len(answered), flags) == ("judge:a", 1, [None])


def test_stored_file_is_read_once_and_shared() -> None:
    assert label_quality.stored_quality() is label_quality.stored_quality()
    assert (
        quality_note(None)
        == "Backtracking by the stored labels: not measured against the hand labels."
    )


# ------------------------------------------------------------------------------- the judge


@pytest.mark.slow
def test_the_judge_bench_asks_a_real_model_through_the_stages_prompt(tmp_path: Path) -> None:
    """bench/judge_hand_labels.py with the packaged SmolLM2-135M on llama.cpp: an item already
    answered is skipped, the next one asked; each reply recorded with its item and labeler and
    re-read by the scorer with the judge stage's parser (a reply that holds no valid verdict
    counts as no flag, and is counted)."""
    import judge_hand_labels  # bench/judge_hand_labels.py

    items = read_jsonl(bench.BACKTRACKING_LABELS, bench.BACKTRACKING_FIELDS)
    first, second = [item for item in items if item["half"] == "dev"][:2]
    out = tmp_path / "replies.jsonl"
    earlier = {"item": first["item"], "half": "dev", "labeler": "judge:smollm2-135m", "raw": "?"}
    out.write_text(json.dumps(earlier) + "\n", encoding="utf-8")
    argv = ["--model", "smollm2-135m", "--name", "smollm2-135m", "--half", "dev"]
    assert (
        judge_hand_labels.main([*argv, "--limit", "1", "--max-tokens", "64", "--out", str(out)])
        == 0
    )
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert rows[0] == earlier and [r["item"] for r in rows] == [first["item"], second["item"]]
    assert rows[1]["labeler"] == "judge:smollm2-135m" and isinstance(rows[1]["raw"], str)
    assert rows[1]["finish"] in ("stop", "length")
    name, answered, flags = bench.judge_flags(items, out)
    assert name == "judge:smollm2-135m" and [i["item"] for i in answered] == [
        first["item"],
        second["item"],
    ]
    assert flags[0] is None and flags[1] in (True, False, None)


@pytest.mark.slow
def test_the_gpu_check_script_parses_and_names_both_cpu_forms() -> None:
    """bench/gpu_check.sh: valid bash; without a GPU it exits 2 naming the CPU forms of the
    rollout check and of the judge check; a wrong GPU_CHECK is refused."""
    import os
    import subprocess

    script = REPO / "bench" / "gpu_check.sh"
    assert subprocess.run(["bash", "-n", str(script)], check=False).returncode == 0
    env = {**os.environ, "PYTHON": sys.executable, "CUDA_VISIBLE_DEVICES": ""}
    done = subprocess.run(
        ["bash", str(script)], env=env, capture_output=True, text=True, check=False, timeout=300
    )
    assert done.returncode == 2
    assert "bench/gpu_check.py --device cpu" in done.stderr
    assert "bench/judge_hand_labels.py --engine llamacpp" in done.stderr
    assert "bench/label_quality.py --score" in done.stderr
    wrong = subprocess.run(
        ["bash", str(script)],
        env={**env, "GPU_CHECK": "all"},
        capture_output=True,
        text=True,
        check=False,
    )
    assert wrong.returncode == 2 and "GPU_CHECK must be both, rollout or judge" in wrong.stderr


# --------------------------------------------------------------------------------- the docs


def _docs_table(page: str, marker: str) -> list[list[str]]:
    text = (REPO / "docs" / "metrics" / page).read_text(encoding="utf-8")
    rows = []
    for line in text.split(f"<!-- {marker} -->")[1].strip().splitlines()[2:]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip().strip("*`") for cell in line.strip("|").split("|")])
    return rows


def test_the_steps_page_reports_the_stored_boundary_scores(stored: dict) -> None:
    names = {"paper (Punkt)": "paper", "lines": "lines", "math": "math"}
    segmentation = stored["segmentation"]
    rows = _docs_table("steps.md", "segmentation-table")
    assert len(rows) == 8
    for name, half, found, extra, missed, precision, recall, f1 in rows:
        scores = (
            segmentation["second_reader"][half]
            if name == "second reader"
            else segmentation["modes"][names[name.replace("` (", " (")]][half]
        )
        assert [int(found), int(extra), int(missed)] == [scores["tp"], scores["fp"], scores["fn"]]
        for shown, value in ((precision, "precision"), (recall, "recall"), (f1, "f1")):
            assert float(shown) == pytest.approx(scores[value], abs=5e-4), (name, half, value)


def test_the_backtracking_page_reports_the_stored_scores(stored: dict) -> None:
    labelers = stored["backtracking"]["labelers"]
    rows = _docs_table("backtracking.md", "backtracking-quality-table")
    assert [(r[0], r[1]) for r in rows] == [
        ("cues", "dev"),
        ("cues", "test"),
        ("lexical", "dev"),
        ("lexical", "test"),
    ]
    for name, half, precision, recall, w_precision, w_recall, kappa, rho in rows:
        scores = labelers[name][half]
        intervals = scores["intervals"]
        for shown, value, span in (
            (precision, scores["counts"]["precision"], intervals["precision"]),
            (recall, scores["counts"]["recall"], intervals["recall"]),
        ):
            # two decimals, as the app's sentence writes them
            assert shown.replace("*", "") == f"{value:.2f} ({span[0]:.2f}–{span[1]:.2f})"
        assert w_precision == f"{scores['weighted']['precision']:.2f}"
        assert w_recall == f"{scores['weighted']['recall']:.2f}"
        assert (kappa, rho) == (f"{scores['kappa']:.2f}", f"{scores['rho']:.2f}")


def test_a_hostile_labeler_name_stays_text(tmp_path: Path) -> None:
    """The labeler's name comes from the store's manifest (untrusted): the note that carries it
    is escaped for HTML (the static site), LaTeX (the download) and Markdown (the app)."""
    import pandas as pd

    from legival_core import views
    from legival_core.metrics.label_quality import store_quality_note
    from legival_core.text.safe_text import markdown_literal
    from legival_core.views.snapshot import Section, snapshot_html

    hostile = "<img src=x onerror=alert(1)>$\\\\input{/etc/passwd}*[x](javascript:1)"
    manifest = {"provenance": [{"stage": "metrics", "primary_labeler": hostile}]}
    note = store_quality_note(manifest)
    assert note.startswith(f"Backtracking by {hostile}: not measured")
    page = snapshot_html("t", [Section("S", notes=[note])])
    assert "<img" not in page and "&lt;img" in page
    frame = pd.DataFrame({"teacher": ["a"], "Backtracking": [0.5]})
    latex = views.latex_table(frame, notes=views.latex_notes(frame, manifest))
    assert "\\textless{}img" in latex and "\\$\\textbackslash{}" in latex  # escaped
    shown = markdown_literal(note)
    assert "\\<img" in shown and "\\[x\\]\\(javascript" in shown  # every special escaped
