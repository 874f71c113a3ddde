"""legival_core.store.provenance on manifests written by the real writers (issue 13, item 6).

E[T]'s origin is read from provenance only: ingest records how many traces came with the
file's own token count and how many were counted with tiktoken; CHAMP (and so the demo)
records tiktoken counts of the recorded solutions; the published store holds the papers'
figures. The reward stand-in is recognised by its explicit record or, in stores built before
that record existed, by the demo's stand-in folder name.
"""

from __future__ import annotations

import json
from pathlib import Path

from legival_core.store.provenance import TOKEN_KINDS, reward_standin, token_sources
from legival_core.store.store import Store
from precompute.champ import write_champ
from precompute.cli import main

ROOT = Path(__file__).resolve().parents[1]


def _ingest(tmp_path: Path, store: Path, teacher: str, rows: list[dict]) -> None:
    file = tmp_path / f"{teacher}.jsonl"
    file.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    code = main(
        ["ingest", str(file), "--store", str(store), "--teacher", teacher, "--task", "math"]
    )
    assert code == 0


def test_ingest_records_whether_tokens_were_given_or_counted(tmp_path: Path) -> None:
    store_dir = tmp_path / "s"
    base = {"prompt": "What is 2 + 2?", "reasoning": "Two and two make four.", "answer": "4"}
    _ingest(tmp_path, store_dir, "own", [{**base, "problem_id": 1, "tokens": 17}])
    _ingest(tmp_path, store_dir, "counted", [{**base, "problem_id": 1}])
    _ingest(
        tmp_path,
        store_dir,
        "both",
        [{**base, "problem_id": 1, "tokens": 9}, {**base, "problem_id": 2}],
    )
    store = Store.open(store_dir)
    records = [r for r in store.manifest["provenance"] if r["stage"] == "ingest"]
    # own: 1 row with tokens; counted: 1 row without; both: one of each
    assert [(r["tokens"]["given"], r["tokens"]["counted"]) for r in records] == [
        (1, 0),
        (0, 1),
        (1, 1),
    ]
    sources = token_sources(store.manifest)
    assert sources.by_teacher == {"own": "given", "counted": "counted", "both": "partly_given"}
    assert sources.e_t == "mixed"
    assert sources.e_t_label(["counted"]) == TOKEN_KINDS["counted"]
    label = sources.e_t_label()
    assert label.startswith("mixed: ") and "both: " in label and "own: " in label


def test_champ_traces_are_counted_and_the_published_store_is_published(tmp_path: Path) -> None:
    store = Store.create(tmp_path / "champ")
    write_champ(store, "0-Shot", models=["GPT-4"], include_human=True, limit=2)
    sources = token_sources(store.manifest)
    assert sources.by_teacher == {"gpt-4": "counted", "human": "counted"}
    assert sources.e_t == "counted"
    assert "tiktoken" in sources.e_t_label() and "not the model's own" in sources.e_t_label()
    # The bundled stores: the demo's E[T] is counted text; the published one is the papers'.
    demo = token_sources(Store.open(ROOT / "results" / "demo").manifest)
    assert demo.e_t == "counted" and demo.lengths.startswith("tiktoken cl100k_base")
    published = token_sources(Store.open(ROOT / "results" / "published").manifest)
    assert published.e_t == "published" and "paper" in published.lengths


def test_the_bundled_demo_reward_model_is_recognised_as_a_standin() -> None:
    """The shipped demo store predates the explicit record: its reward entry names the
    stand-in's folder, which is enough."""
    manifest = Store.open(ROOT / "results" / "demo").manifest
    labels = [
        label
        for record in manifest["provenance"]
        if record.get("stage") == "reward"
        for label in record.get("models", {})
    ]
    assert labels
    assert all(reward_standin(manifest, label) for label in labels)
    assert reward_standin(manifest, "skywork-v2") is None
