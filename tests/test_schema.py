"""Tests of legival_core.store.schema: every table's declaration, validation and its error
messages."""

from __future__ import annotations

import pandas as pd
import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from legival_core.store import schema
from tests.test_store import sample_frame


@pytest.mark.parametrize("name", sorted(schema.TABLES))
def test_declaration_is_consistent(name: str) -> None:
    spec = schema.TABLES[name]
    assert spec.name == name
    assert spec.keys and set(spec.keys) <= set(spec.columns)
    assert set(spec.required) <= set(spec.columns)
    assert len(set(spec.columns)) == len(spec.columns)
    assert spec.description
    assert schema.key_columns(name) == spec.keys


@pytest.mark.parametrize("name", sorted(schema.TABLES))
def test_every_schema_round_trips_through_pandas_and_arrow(name: str) -> None:
    frame = sample_frame(name)
    table = schema.validate_frame(name, frame)
    assert table.schema.equals(schema.spec(name).schema)
    assert table.num_rows == len(frame)
    # A pyarrow Table already in the declared layout takes the fast path and comes back equal.
    assert schema.validate_frame(name, table).equals(table)
    # A list of dicts works as input too.
    assert schema.validate_frame(name, frame.to_dict("records")).equals(table)
    # Back through pandas (as a stage would hand it over) gives the same table.
    assert schema.validate_frame(name, table.to_pandas()).equals(table)


def test_tables_the_contract_promises_exist() -> None:
    promised = {
        "problems", "traces", "grades", "steps", "similarity", "rollouts", "judgments",
        "rewards", "trace_efficiency", "trace_transfer", "teacher_metrics", "decomposition",
    }  # fmt: skip
    assert promised <= set(schema.TABLES)
    assert schema.spec("decomposition").keys == ("model", "benchmark", "layer")
    assert "hf_id" in schema.spec("teacher_metrics").columns


def test_missing_optional_columns_become_nulls() -> None:
    table = schema.validate_frame(
        "rewards", pd.DataFrame({"trace_id": ["t"], "reward_model": ["rm"], "score": [0.5]})
    )
    assert table.num_rows == 1
    grades = schema.validate_frame(
        "grades", pd.DataFrame({"trace_id": ["t"], "correct": [True], "status": ["ok"]})
    )
    assert grades.column("score").null_count == 1 and grades.column("extracted").null_count == 1


@pytest.mark.parametrize(
    ("name", "frame", "expected"),
    [
        # required column absent
        (
            "traces",
            {"trace_id": ["t"]},
            "table 'traces', field 'problem_id': required column is missing",
        ),
        # a null in a key column: row 1
        (
            "rewards",
            {"trace_id": ["a", None], "reward_model": ["rm", "rm"], "score": [1.0, 2.0]},
            "table 'rewards', row 1, field 'trace_id': value is missing (null)",
        ),
        # a lossy int: 1.5 cannot be a step number
        (
            "steps",
            {
                "trace_id": ["t", "t"],
                "step": [0, 1.5],
                "start": [0, 5],
                "end": [5, 9],
                "text": ["a", "b"],
            },
            "table 'steps', row 1, field 'step': cannot store 1.5 as int32",
        ),
        # text in a number column
        (
            "rewards",
            {"trace_id": ["a", "b", "c"], "reward_model": ["rm"] * 3, "score": [1.0, 0.5, "high"]},
            "table 'rewards', row 2, field 'score': cannot store 'high' as double",
        ),
        # a number in a text column
        (
            "grades",
            {"trace_id": ["a", 7], "correct": [True, False], "status": ["ok", "ok"]},
            "table 'grades', row 1, field 'trace_id': cannot store 7 as string",
        ),
        # a string where a boolean belongs
        (
            "grades",
            {"trace_id": ["a", "b"], "correct": [True, "yes"], "status": ["ok", "ok"]},
            "table 'grades', row 1, field 'correct': cannot store 'yes' as bool",
        ),
        # an int32 overflow
        (
            "similarity",
            {"trace_id": ["a"], "step": [2**40]},
            "table 'similarity', row 0, field 'step': cannot store 1099511627776 as int32",
        ),
        # an unknown column
        (
            "rewards",
            {"trace_id": ["a"], "reward_model": ["rm"], "score": [1.0], "bonus": [2]},
            "table 'rewards', field 'bonus'",
        ),
    ],
)
def test_validation_errors_name_table_row_and_field(name: str, frame: dict, expected: str) -> None:
    with pytest.raises(schema.SchemaError) as info:
        schema.validate_frame(name, pd.DataFrame(frame))
    assert str(info.value).startswith(expected), str(info.value)


def test_unknown_columns_may_be_dropped_on_request() -> None:
    frame = pd.DataFrame({"trace_id": ["a"], "reward_model": ["rm"], "score": [1.0], "bonus": [2]})
    assert schema.validate_frame("rewards", frame, allow_extra=True).column_names == [
        "trace_id", "reward_model", "score",
    ]  # fmt: skip


def test_unknown_table_lists_the_known_ones() -> None:
    with pytest.raises(
        schema.SchemaError, match=r"table 'nope': unknown table \(known tables: .*rollouts"
    ):
        schema.spec("nope")


def test_trace_ids_are_stable_and_distinct() -> None:
    # The value is fixed: stores written today must match stores written later.
    assert schema.trace_id_for("gpt-4", "champ/P_Inequality_1") == "t-e7ee3b61eac5d7e4"
    ids = {schema.trace_id_for(t, p, s) for t in ("a", "b") for p in ("p1", "p2") for s in (0, 1)}
    assert len(ids) == 8
    # sample 0 is the default and ints/strings of ints agree.
    assert schema.trace_id_for("a", "p1") == schema.trace_id_for("a", "p1", 0)


def _similarity_column_after_validation(column: str, values: list) -> list:
    """``values`` as one column of a similarity frame, read back from the validated table."""
    frame = pd.DataFrame(
        {"trace_id": [f"t{i}" for i in range(len(values))], "step": range(len(values)),
         column: values}
    )  # fmt: skip
    return schema.validate_frame("similarity", frame).column(column).to_pylist()


@given(st.lists(st.one_of(st.none(), st.integers(-(2**31), 2**31 - 1)), min_size=1, max_size=30))
def test_int32_columns_keep_values_and_nulls(values: list[int | None]) -> None:
    # matched_step is an optional int32 column: a None must stay a null, not become NaN or 0.
    assert _similarity_column_after_validation("matched_step", values) == values


@given(st.lists(st.one_of(st.none(), st.floats(allow_nan=False, allow_infinity=True)), min_size=1))
def test_float_columns_keep_values_and_nulls(values: list[float | None]) -> None:
    assert _similarity_column_after_validation("max_similarity", values) == values


def test_string_checks_reject_bytes() -> None:
    with pytest.raises(schema.SchemaError, match="row 0, field 'status'"):
        schema.validate_frame(
            "grades", pd.DataFrame({"trace_id": ["a"], "correct": [True], "status": [b"ok"]})
        )


def test_list_columns() -> None:
    table = schema.validate_frame(
        "judgments",
        pd.DataFrame(
            {"trace_id": ["a", "b"], "labeler": ["lexical"] * 2, "valid": [True, False],
             "steps": [[1, 3], None], "reasons": [["wait"], []]}
        ),
    )  # fmt: skip
    assert table.column("steps").to_pylist() == [[1, 3], None]
    assert table.column("steps").type == pa.list_(pa.int32())


def _lacking(column: str) -> pd.DataFrame:
    """A one-row frame with every column the checked functions want except ``column``."""
    every = {
        "model": "m", "benchmark": "b", "instance_id": "1", "correct": True, "tokens": 10.0,
        "truncated": False, "trace_id": "t", "teacher": "T", "dataset": "d", "student": "s",
        "problem_id": "p", "k": 0, "m": 1, "accuracy": 0.5, "r_ctx": 1.0, "r_logic": 0.5,
        "mean_tokens": 10.0, "workload": 2.0,
        "prefix_tokens": 5, "trace": "text", "monitor": "w", "variant": "original",
        "verdict": True,
    }  # fmt: skip
    return pd.DataFrame({k: [v] for k, v in every.items() if k != column})


def _checks() -> list[tuple[str, object, str]]:
    from legival_core.metrics import decomposition, efficiency, trace_audits, transfer, workload
    from legival_core.oversight import oversight
    from legival_core.published import cogniload_consistency
    from legival_core.stats import stats

    return [
        ("efficiency", lambda: efficiency.normalised_lengths(_lacking("tokens")), "tokens"),
        ("stats", lambda: stats.pareto_front(_lacking("accuracy"), "accuracy", "tokens"),
         "accuracy"),
        ("trace_audits", lambda: trace_audits.tokens_by_outcome(_lacking("truncated")),
         "truncated"),
        ("oversight", lambda: oversight.monitor_scores(_lacking("verdict"), n_boot=0), "verdict"),
        ("decomposition", lambda: decomposition.decompose(_lacking("tokens"), n_boot=0),
         "tokens"),
        ("transfer", lambda: transfer.trace_metrics(_lacking("k")), "k"),
        ("workload", lambda: workload.attach_workload(_lacking("x"), _lacking("workload")),
         "workload"),
        ("cogniload_consistency",
         lambda: cogniload_consistency.instances_from_summary(_lacking("r_ctx")), "r_ctx"),
    ]  # fmt: skip


@pytest.mark.parametrize("index", range(8))
def test_every_column_check_raises_the_schema_error_naming_the_field(index: int) -> None:
    module, call, field = _checks()[index]
    with pytest.raises(schema.SchemaError) as raised:
        call()
    assert raised.value.column == field, module
    assert f"field '{field}'" in str(raised.value) and "missing column(s)" in str(raised.value)
