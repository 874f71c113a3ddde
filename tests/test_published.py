"""Tests of legival_core.published.published and of the bundled store built by ``precompute
published``."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import pandas as pd
import pytest

from legival_core.published import published
from legival_core.store import schema
from legival_core.store.store import Store, StoreError
from precompute import build_published, cli

REPO = Path(__file__).resolve().parents[1]
BUNDLED = REPO / "results" / "published"


def test_table7_shape_units_and_values() -> None:
    table = published.legival_table7()
    assert len(table) == 36
    assert table.groupby("dataset").size().to_dict() == {"Connections": 12, "GPQA": 12, "MATH": 12}
    teachers = {d: set(g.model) for d, g in table.groupby("dataset")}
    assert teachers["Connections"] == teachers["GPQA"] == teachers["MATH"]
    assert not table.duplicated(["dataset", "model"]).any()
    assert "fraction" in table.attrs["unit"] and "2603.20508" in table.attrs["source"]
    row = table[(table.dataset == "Connections") & (table.model == "r1-distill")].iloc[0]
    # CSV: Connections,r1-distill,...,91,1808,14.9,4.5,53.2,73.4,20.3
    assert row.hf_id == "deepseek-ai/DeepSeek-R1-Distill-Qwen-32B"
    assert row.accuracy == 0.91 and row.accuracy_pct == 91
    assert row.tokens == 1808
    assert row.redundancy == 0.149 and row.backtracking == 0.045  # 14.9 % and 4.5 %
    assert row.fotu == 0.532 and row.sotu == 0.734 and row.regression_rate == 0.203
    row = table[(table.dataset == "GPQA") & (table.model == "llama-nano")].iloc[0]
    assert (row.fotu_pct, row.sotu_pct, row.regression_rate_pct) == (84.4, 59.5, 1.6)
    for column in ("accuracy", "redundancy", "backtracking", "fotu", "sotu", "regression_rate"):
        assert table[column].between(0, 1).all()
        # fraction = percent / 100, to the last bit of the nearest float
        assert (
            table[column] == [float(Decimal(str(p)) / 100) for p in table[f"{column}_pct"]]
        ).all()


def test_cogniload_shape_units_and_values() -> None:
    table = published.cogniload_efficiency()
    assert len(table) == 25 and table.model.is_unique
    assert set(table.benchmark) == {"CogniLoad"}
    assert (
        "per 1,000 output tokens" in table.attrs["unit"] and "2602.09805" in table.attrs["source"]
    )
    o3 = table.set_index("model").loc["o3"]
    # CSV: o3,15.25,89,5869,98,91,19.84,0.60,5351,8936
    assert o3.e0 == 0.1525 and o3.e0_x100 == 15.25
    assert o3.accuracy == 0.89 and o3.r_ctx == 0.98 and o3.r_logic == 0.91
    assert o3.mean_tokens == 5869 and o3.vo_nat == 19.84 and o3.kappa_nat == 0.60
    assert (o3.mean_tokens_correct, o3.mean_tokens_incorrect) == (5351, 8936)
    last = table.iloc[-1]
    assert last.model == "DS-R1D-Qwen-1.5B" and last.vo_nat == 127.03


def test_cogniload_rows_obey_the_decomposition_within_rounding() -> None:
    """E0 = 1000 * accuracy / E[T] and accuracy = r_ctx * r_logic (Kaiser et al.), each checked
    with the printed values' rounding as an interval: percentages are rounded to 1 point, 100*E0
    to 0.01, tokens to 1. Example o3: 1000 * 0.89 / 5869 = 0.15164 and the interval for accuracy
    [0.885, 0.895] gives E0 in [0.1508, 0.1525] (1000 * 0.895 / 5868.5), which holds 0.1525."""
    table = published.cogniload_efficiency()
    for row in table.itertuples():
        low = 1000 * (row.accuracy - 0.005) / (row.mean_tokens + 0.5)
        high = 1000 * (row.accuracy + 0.005) / (row.mean_tokens - 0.5)
        assert low - 0.00005 <= row.e0 <= high + 0.00005, row.model
        product_low = (row.r_ctx - 0.005) * (row.r_logic - 0.005)
        product_high = min(1.0, (row.r_ctx + 0.005)) * min(1.0, (row.r_logic + 0.005))
        assert product_low - 0.005 <= row.accuracy <= product_high + 0.005, row.model


def test_store_frames_fit_their_tables() -> None:
    metrics = schema.validate_frame("teacher_metrics", published.table7_teacher_metrics_frame())
    assert metrics.num_rows == 36
    assert metrics.column("n_traces").null_count == 36  # not published: left null, not invented
    decomposition = schema.validate_frame(
        "decomposition", published.cogniload_decomposition_frame()
    )
    assert decomposition.num_rows == 25
    assert set(decomposition.column("layer").to_pylist()) == {"native"}
    assert decomposition.column("mean_workload").null_count == 25


def test_sources_cite_both_papers() -> None:
    assert published.PUBLISHED_SOURCES["legival"]["arxiv"] == "2603.20508"
    assert published.PUBLISHED_SOURCES["kaiser"]["arxiv"] == "2602.09805"
    assert set(published.published_file_digests()) == {
        published.TABLE7_FILE,
        published.COGNILOAD_FILE,
    }


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("model,e0_x100\n", "missing column(s)"),
        (
            "model,e0_x100,accuracy_pct,mean_tokens,r_ctx_pct,r_logic_pct,vo_nat,kappa_nat,"
            "mean_tokens_correct,mean_tokens_incorrect\no3,15.25,89,5869,98,91,19.84,0.60,5351,8936\n"
            "x,1,2,lots,4,5,6,7,8,9\n",
            "row 1 (line 3), field 'mean_tokens': 'lots' is not a number",
        ),
        (
            "model,e0_x100,accuracy_pct,mean_tokens,r_ctx_pct,r_logic_pct,vo_nat,kappa_nat,"
            "mean_tokens_correct,mean_tokens_incorrect\no3,15.25,189,5869,98,91,19.84,0.60,5351,8936\n",
            "row 0 (line 2), field 'accuracy_pct': '189' is not a percentage",
        ),
    ],
)
def test_bad_csv_names_file_row_and_field(
    monkeypatch: pytest.MonkeyPatch, text: str, expected: str
) -> None:
    monkeypatch.setattr(published, "_read_text", lambda name: text)
    with pytest.raises(published.PublishedDataError) as info:
        published.cogniload_efficiency()
    assert str(info.value).startswith(published.COGNILOAD_FILE)
    assert expected in str(info.value)


def test_build_published_writes_a_verified_store(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    out = tmp_path / "published"
    assert cli.main(["published", "--out", str(out)]) == cli.EXIT_OK
    assert "teacher_metrics: 36 rows" in capsys.readouterr().out
    store = Store.open(out)
    assert store.tables() == ["decomposition", "teacher_metrics"]
    assert store.verify() == []
    metrics = store.read("teacher_metrics")
    assert len(metrics) == 36 and len(store.read("decomposition")) == 25
    row = metrics[(metrics.teacher == "qwq-32b") & (metrics.dataset == "MATH")].iloc[0]
    assert row.accuracy == 0.40 and row.tokens == 1311 and row.fotu == 0.501  # 40 %, 50.1 %
    record = store.manifest["provenance"][-1]
    assert record["stage"] == "published"
    assert record["tables"]["teacher_metrics"]["source"]["arxiv"] == "2603.20508"
    assert record["tables"]["decomposition"]["source"]["arxiv"] == "2602.09805"
    assert (
        record["tables"]["decomposition"]["sha256"]
        == published.published_file_digests()[published.COGNILOAD_FILE]
    )
    # Building again replaces the store as a whole (no duplicate parts, no leftovers).
    assert cli.main(["published", "--out", str(out)]) == cli.EXIT_OK
    assert [len(Store.open(out).parts(t)) for t in ("decomposition", "teacher_metrics")] == [1, 1]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["published"]


def test_build_published_refuses_a_folder_that_is_not_a_store(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    (tmp_path / "keep.txt").write_text("precious")
    assert cli.main(["published", "--out", str(tmp_path)]) == cli.EXIT_STORE
    assert "is not a results store" in capsys.readouterr().err
    assert (tmp_path / "keep.txt").read_text() == "precious"
    with pytest.raises(StoreError):
        build_published.build(tmp_path)


def test_bundled_store_matches_the_csvs() -> None:
    # The bundled store is part of the repository: a missing one is a failure, not a skip.
    assert (BUNDLED / "manifest.json").is_file(), (
        f"{BUNDLED} is missing; rebuild it with python -m precompute published"
    )
    store = Store.open(BUNDLED)
    assert store.verify() == []
    expected = schema.validate_frame("teacher_metrics", published.table7_teacher_metrics_frame())
    keys = [(k, "ascending") for k in schema.spec("teacher_metrics").keys]
    assert store.read_arrow("teacher_metrics").equals(expected.sort_by(keys))
    expected = schema.validate_frame("decomposition", published.cogniload_decomposition_frame())
    keys = [(k, "ascending") for k in schema.spec("decomposition").keys]
    assert store.read_arrow("decomposition").equals(expected.sort_by(keys))
    assert pd.Series([r["stage"] for r in store.manifest["provenance"]]).eq("published").any()
