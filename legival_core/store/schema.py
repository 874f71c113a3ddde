"""Arrow schemas of every table in a results store, with versions and validation.

The store is the contract between the precompute stages, the app and notebooks: every table
that crosses that boundary is declared here once, with its key columns (what makes a row
unique, and what a resumable stage asks "is this done?" about) and a schema version.

Validation (:func:`validate_frame`) coerces a pandas DataFrame to the declared Arrow schema and,
when a value does not fit, raises :class:`SchemaError` naming the table, the row and the field.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

#: Version of the store layout and of the table schemas below. Bump on any incompatible change.
SCHEMA_VERSION = 1


class SchemaError(ValueError):
    """A value does not fit its table's schema. The message names table, row and field."""

    def __init__(self, table: str, message: str, row: int | None = None, column: str | None = None):
        self.table = table
        self.row = row
        self.column = column
        where = f"table '{table}'"
        if row is not None:
            where += f", row {row}"
        if column is not None:
            where += f", field '{column}'"
        super().__init__(f"{where}: {message}")


def require_columns(frame: Any, columns: Iterable[str], table: str) -> None:
    """Check that ``frame`` is a pandas DataFrame holding every one of ``columns``.

    The one column check of the library: a missing column raises :class:`SchemaError` naming
    the table (or the function's input) and the first missing field, with every missing
    column and the columns the frame has; a frame that is not a DataFrame raises TypeError.

    >>> import pandas as pd
    >>> require_columns(pd.DataFrame({"k": [1]}), ["trace_id", "k", "m"], "rollouts")
    Traceback (most recent call last):
    ...
    legival_core.store.schema.SchemaError: table 'rollouts', field 'trace_id': missing column(s) \
['trace_id', 'm']; it has ['k']
    """
    import pandas as pd

    if not isinstance(frame, pd.DataFrame):
        raise TypeError(f"table '{table}': expected a pandas DataFrame, got {type(frame).__name__}")
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise SchemaError(
            table,
            f"missing column(s) {missing}; it has {[str(c) for c in frame.columns]}",
            column=missing[0],
        )


@dataclass(frozen=True)
class TableSpec:
    """One table of the store: its Arrow schema, its key columns and a short description."""

    name: str
    schema: pa.Schema
    keys: tuple[str, ...]
    description: str
    version: int = 1
    #: Columns that must not be null (keys are always required).
    required: tuple[str, ...] = field(default=())

    @property
    def columns(self) -> list[str]:
        return list(self.schema.names)

    def required_columns(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(self.keys + self.required))


def _s(*fields: tuple[str, pa.DataType]) -> pa.Schema:
    return pa.schema([pa.field(name, dtype) for name, dtype in fields])


STR = pa.string()
LSTR = pa.large_string()  # reasoning text can exceed 2 GiB per column in big stores
I32 = pa.int32()
I64 = pa.int64()
F64 = pa.float64()
BOOL = pa.bool_()

TABLES: dict[str, TableSpec] = {}


def _register(spec: TableSpec) -> TableSpec:
    TABLES[spec.name] = spec
    return spec


# --- inputs -------------------------------------------------------------------------------------

PROBLEMS = _register(
    TableSpec(
        "problems",
        _s(
            ("problem_id", STR),
            ("dataset", STR),
            ("task", STR),  # task family: math, gpqa, connections, gsm8k, champ, jsonl
            ("prompt", LSTR),
            ("gold", STR),
            ("choices", pa.list_(STR)),  # GPQA options after the seeded shuffle, else null
            ("choice_seed", I64),
            ("workload", F64),  # native workload W > 0 where the dataset provides one
            ("workload_kind", STR),  # e.g. "gold_steps", "arith_ops", "proof_depth"
            ("reference_solution", LSTR),  # human solution where the dataset ships one
            ("meta", STR),  # JSON object with anything else the loader kept
        ),
        keys=("problem_id",),
        required=("dataset", "task", "prompt", "gold"),
        description="Benchmark problems: prompt, gold answer, optional choices and workload.",
    )
)

TRACES = _register(
    TableSpec(
        "traces",
        _s(
            ("trace_id", STR),
            ("problem_id", STR),
            ("dataset", STR),
            ("teacher", STR),
            ("sample", I32),
            ("reasoning", LSTR),  # parsed out of the think block / reasoning channel
            ("answer_text", LSTR),  # what follows the reasoning (the final answer part)
            ("raw", LSTR),  # the model's raw output, kept for audit
            ("complete", BOOL),  # False when a think block was opened and never closed
            ("tokens", I64),  # generated output tokens T (model tokenizer when known)
            ("truncated", BOOL),  # hit the output budget without an extractable answer
            # "generate", "ingest:<file>", "champ:<setting>", ...; "champ:reference" and
            # "reference:..." mark a reference teacher (legival_core.published.references)
            ("source", STR),
            ("sampling", STR),  # JSON of the sampling parameters
        ),
        keys=("trace_id",),
        required=("problem_id", "dataset", "teacher", "reasoning"),
        description="One teacher's answer to one problem: reasoning text, answer, token count.",
    )
)

GRADES = _register(
    TableSpec(
        "grades",
        _s(
            ("trace_id", STR),
            ("extracted", STR),  # the answer graded (see legival_core.grading.answers), or null
            ("correct", BOOL),
            ("score", F64),  # partial credit in [0, 1] (Connections: groups right / 4)
            ("status", STR),  # "ok", "no_answer", "timeout", "error: ..."
            # Where the graded answer stands: the answer layer's candidate kind ("task" for the
            # task's own extractor), the trace column that held it and its character span.
            ("answer_kind", STR),
            ("answer_field", STR),
            ("answer_start", I64),
            ("answer_end", I64),
            ("question_type", STR),  # what the problem asks (legival_core.grading.questions)
            # Which grader made the grade: GRADER_VERSION (legival_core.grading.grader; 0: the
            # verdict an ingested file gave; null: graded before versions were stored) and the
            # code revision that ran it.
            ("grader_version", I32),
            ("code_revision", STR),
        ),
        keys=("trace_id",),
        required=("correct", "status"),
        description="Grading of each trace against the gold answer.",
    )
)

STEPS = _register(
    TableSpec(
        "steps",
        _s(
            ("trace_id", STR),
            ("step", I32),  # 0-based index
            ("start", I64),  # char offset into traces.reasoning
            ("end", I64),
            ("text", LSTR),
            ("tokens", I32),  # tiktoken count of the step text
        ),
        keys=("trace_id", "step"),
        required=("start", "end", "text"),
        description="A trace's reasoning split into sentences, with character spans.",
    )
)

TRACE_COUNTS = _register(
    TableSpec(
        "trace_counts",
        _s(
            ("trace_id", STR),
            ("encoding", STR),  # the tiktoken encoding of ``tokens``
            ("tokens", I64),  # tiktoken count of the whole reasoning text (blank text counted)
            ("blank", BOOL),  # the reasoning is empty or whitespace only
            ("steps", I32),  # steps m the segment stage cut (0 for a blank reasoning)
            ("compression", F64),  # sigma = min(1, zlib/raw bytes) of the reasoning
        ),
        keys=("trace_id", "encoding"),
        required=("tokens", "blank", "steps", "compression"),
        description=(
            "The numbers the metrics need from a trace's text, counted once by the segment "
            "stage (one row per tiktoken encoding)."
        ),
    )
)

ANSWER_LEAKS = _register(
    TableSpec(
        "answer_leaks",
        _s(
            ("trace_id", STR),
            ("leak_k", I32),  # first step whose prefix states the gold; null: none / unfinished
            ("gold", STR),  # the gold answer checked against (a new gold makes the row stale)
            ("grader_version", I32),  # the grader that checked (a new grader: stale)
        ),
        keys=("trace_id",),
        required=("grader_version",),
        description=(
            "The answer-leak point of each trace with rollouts: the first step whose prefix "
            "already states the gold answer (the leaks stage)."
        ),
    )
)

SIMILARITY = _register(
    TableSpec(
        "similarity",
        _s(
            ("trace_id", STR),
            ("step", I32),
            ("max_similarity", F64),  # r_i = max_{j<i} cos(s_i, s_j); null for step 0
            ("matched_step", I32),  # argmax j; null for step 0
        ),
        keys=("trace_id", "step"),
        description="Per-step redundancy: the most similar earlier step and its cosine.",
    )
)

ROLLOUTS = _register(
    TableSpec(
        "rollouts",
        _s(
            ("trace_id", STR),
            ("student", STR),
            ("k", I32),  # steps of the teacher prefix shown; 0 = student alone
            ("sample", I32),
            ("teacher", STR),
            ("dataset", STR),
            ("problem_id", STR),
            ("m", I32),  # steps in the teacher trace
            ("completion", LSTR),
            ("extracted", STR),
            ("correct", F64),  # in [0, 1]; partial credit allowed
            ("forced", BOOL),  # the forcing-cue second pass was needed
            ("prompt_tokens", I32),
            ("completion_tokens", I32),
            ("status", STR),
            ("grader_version", I32),  # as in grades: the grader that graded the completion
            ("code_revision", STR),
        ),
        keys=("trace_id", "student", "k", "sample"),
        required=("teacher", "dataset", "problem_id", "m", "correct"),
        description="A student continuing the first k steps of a correct teacher trace.",
    )
)

JUDGMENTS = _register(
    TableSpec(
        "judgments",
        _s(
            ("trace_id", STR),
            ("labeler", STR),  # "judge:<model>", "lexical", "human"
            ("backtracking_detected", BOOL),
            ("steps", pa.list_(I32)),  # 1-based step numbers flagged as backtracking
            ("reasons", pa.list_(STR)),
            ("confidence", F64),
            ("final_answer", STR),
            ("overall_reasoning", LSTR),
            ("valid", BOOL),  # False when the judge's output could not be parsed/validated
            ("error", STR),
            ("raw", LSTR),
        ),
        keys=("trace_id", "labeler"),
        required=("valid",),
        description="Backtracking labels for a trace from one labeler.",
    )
)

ERROR_LABELS = _register(
    TableSpec(
        "error_labels",
        _s(
            ("trace_id", STR),
            ("labeler", STR),  # "human" for CHAMP's annotations
            ("teacher", STR),
            ("problem_id", STR),
            ("annotated", STR),  # the source conversation the annotation was made on
            ("error_found", BOOL),  # False = the annotator found no mistake
            ("step", I32),  # 1-based step holding the first wrong step (null when none)
            ("start", I64),  # char span of the wrong step in traces.reasoning
            ("end", I64),
            ("wrong_step_text", LSTR),
        ),
        keys=("trace_id", "labeler"),
        required=("error_found",),
        description="First-wrong-step labels of a trace (e.g. CHAMP's human annotations).",
    )
)

REWARDS = _register(
    TableSpec(
        "rewards",
        _s(("trace_id", STR), ("reward_model", STR), ("score", F64)),
        keys=("trace_id", "reward_model"),
        required=("score",),
        description="A reward model's scalar score for (problem, trace).",
    )
)

# --- derived metric tables ------------------------------------------------------------------------

TRACE_EFFICIENCY = _register(
    TableSpec(
        "trace_efficiency",
        _s(
            ("trace_id", STR),
            ("teacher", STR),
            ("dataset", STR),
            ("problem_id", STR),
            ("correct", BOOL),
            ("tokens", I64),  # tiktoken count n of the reasoning text
            ("steps", I32),  # m
            ("tokens_norm", F64),  # n / median n of the correct traces of the problem
            ("steps_norm", F64),
            ("redundancy", F64),  # share of steps i>=1 with r_i > tau
            ("backtracking", F64),  # share of steps flagged by the primary labeler
            ("compression", F64),  # sigma = min(1, zlib/raw bytes)
        ),
        keys=("trace_id",),
        description="Per-trace efficiency metrics (docs/metrics/index.md).",
    )
)

TRACE_TRANSFER = _register(
    TableSpec(
        "trace_transfer",
        _s(
            ("trace_id", STR),
            ("student", STR),
            ("teacher", STR),
            ("dataset", STR),
            ("problem_id", STR),
            ("m", I32),
            ("fotu", F64),
            ("hazard_bin", I32),
            ("regression_count", I32),
            ("regression_rate", F64),
            ("baseline", F64),
            ("lift", F64),
            # First step whose prefix already states an answer equal to the gold (null: none
            # found), and FOTU over the prefixes before it (docs/metrics/fotu-before-leak.md,
            # answer leak).
            ("leak_k", I32),
            ("fotu_before_leak", F64),
        ),
        keys=("trace_id", "student"),
        description="Per-(trace, student) transfer utility (docs/metrics/fotu.md).",
    )
)

TEACHER_METRICS = _register(
    TableSpec(
        "teacher_metrics",
        _s(
            ("teacher", STR),
            ("dataset", STR),
            ("accuracy", F64),  # fraction in [0, 1]
            ("tokens", F64),  # mean generated tokens of the teacher's traces
            ("redundancy", F64),
            ("backtracking", F64),
            ("fotu", F64),
            ("sotu", F64),
            ("regression_rate", F64),
            ("never_solved", F64),
            ("baseline", F64),
            ("fotu_before_leak", F64),  # FOTU from the prefixes before the answer leaks
            ("n_traces", I64),
            ("hf_id", STR),  # Hugging Face id of the teacher, where known
        ),
        keys=("teacher", "dataset"),
        description="Per-(teacher, dataset) summary used by the leaderboard (shares as fractions).",
    )
)

DECOMPOSITION = _register(
    TableSpec(
        "decomposition",
        _s(
            ("model", STR),
            ("benchmark", STR),
            # Which workload W the overhead terms use: "native" (benchmark metadata), "solver"
            # (solver-derived), "trace" (compressed-signal sigma*T in place of T).
            ("layer", STR),
            ("n_instances", I64),
            ("accuracy", F64),  # P(S=1), fraction
            ("e0", F64),  # correct answers per 1,000 generated tokens: 1000 * P(S=1) / E[T]
            ("mean_tokens", F64),  # E[T]
            ("r_ctx", F64),  # P(completed), fraction
            ("r_logic", F64),  # P(S=1 | completed), fraction
            ("mean_workload", F64),  # E[W]
            ("vo", F64),  # mean overhead: mean of T_i / W_i
            ("kappa", F64),  # coupling: E[T] / (E[W] * vo)
            ("coverage", F64),  # share of instances with a workload (solver layer drops some)
            ("mean_tokens_correct", F64),
            ("mean_tokens_incorrect", F64),
        ),
        keys=("model", "benchmark", "layer"),
        required=("accuracy",),
        description="Per-(model, benchmark) efficiency decomposition: E0, r_ctx, r_logic, VO, κ.",
    )
)


CALIBRATION_REPORT = _register(
    TableSpec(
        "calibration_report",
        _s(
            ("property", STR),  # segmentation, transfer, leak, redundancy, backtracking, ...
            ("measure", STR),  # the metric or detector measured, e.g. "minilm τ=0.8"
            ("template_set", STR),  # "dev", "held_out" (templates no detector saw) or "all"
            ("case", STR),  # planted case: "repeat", "wait_time", "prose", "summary", ...
            ("n", I64),  # items (steps, traces or teachers) behind the row
            ("planted", F64),  # the true value (mean), or 1/0 for a case a detector should flag
            ("recovered", F64),  # what the pipeline stored (mean), or the flagged share
            ("bias", F64),  # mean(recovered - planted)
            ("max_error", F64),  # max |recovered - planted|
            ("precision", F64),  # TP / (TP + FP), on "summary" rows
            ("recall", F64),  # TP / P
            ("tolerance", F64),  # largest error allowed, or the minimum recall demanded
            ("within_tolerance", BOOL),  # null where nothing is enforced
            ("note", STR),
        ),
        keys=("property", "measure", "template_set", "case"),
        required=("n",),
        description=(
            "Calibration: planted vs recovered values of each metric, and precision/recall "
            "of each detector on development and held-out templates (precompute.calibrate)."
        ),
    )
)


# --- oversight: sabotaged traces and weak-monitor verdicts ---------------------------------------

SABOTAGED = _register(
    TableSpec(
        "sabotaged",
        _s(
            ("trace_id", STR),  # the correct original trace the error was injected into
            ("kind", STR),  # a key of legival_core.oversight.sabotage.INJECTORS, or "llm_rewrite"
            ("seed", I64),
            ("teacher", STR),
            ("dataset", STR),
            ("step", I32),  # 0-based injection point in the original's steps
            ("changed_steps", pa.list_(I32)),  # 0-based original steps touched by an edit
            ("edits", STR),  # JSON list of {step, start, end, old, new} spans into the original
            ("text", LSTR),  # the sabotaged reasoning
            ("description", STR),
        ),
        keys=("trace_id", "kind", "seed"),
        required=("teacher", "dataset", "edits", "text"),
        description="Copies of correct traces with one injected error, and what changed where.",
    )
)

MONITOR_VERDICTS = _register(
    TableSpec(
        "monitor_verdicts",
        _s(
            ("trace_id", STR),
            ("variant", STR),  # "original", "natural" or "sabotage:<kind>"
            ("monitor", STR),  # label of the weak monitor model
            ("teacher", STR),
            ("dataset", STR),
            ("verdict", STR),  # "valid", "invalid", or null when the reply was malformed
            ("blamed_step", I32),  # 1-based step the monitor named after "invalid", if any
            ("steps", I32),  # number of steps shown to the monitor
            ("raw", LSTR),
            ("valid_format", BOOL),
            ("error", STR),
        ),
        keys=("trace_id", "variant", "monitor"),
        required=("teacher", "dataset", "valid_format"),
        description="A weak monitor's verdict on an original, failed or sabotaged trace.",
    )
)


# --- app view: transfer curves per selection (written by the metrics stage) ---------------------

TRANSFER_CURVES = _register(
    TableSpec(
        "transfer_curves",
        _s(
            ("profile", STR),  # a key of legival_core.metrics.transfer.PROFILES
            ("dataset", STR),  # one dataset, or "*" = every dataset pooled
            ("student", STR),  # one student, or "*" = every student
            ("teacher", STR),
            ("bin", I32),  # 1..50 on the position axis; 0 = the never-solved row
            ("x", F64),  # bin centre (bin - 0.5) / 50; null on bin 0
            ("mean", F64),  # mu_T(x) and its bootstrap band; null on bin 0
            ("lo", F64),
            ("hi", F64),
            ("baseline", F64),  # the student alone (k = 0), with its band; per teacher
            ("baseline_lo", F64),
            ("baseline_hi", F64),
            ("n_traces", I64),
            ("hazard_share", F64),  # share of (trace, student) pairs whose hazard is this bin
            ("n_students", I64),  # the teacher's summary over the selection, on every row
            ("fotu", F64),
            ("sotu", F64),
            ("never_solved", F64),
            ("regression_rate", F64),
            ("lift", F64),
            ("student_baseline", F64),  # the whole selection's student alone (all teachers)
            ("n_boot", I32),  # resamples of the band, its seed and 1 - confidence level
            ("seed", I64),
            ("alpha", F64),
            ("rollouts_stamp", STR),  # which state of the rollouts table this was computed from
        ),
        keys=("profile", "dataset", "student", "teacher", "bin"),
        required=("n_traces", "n_boot", "seed", "alpha", "rollouts_stamp"),
        description=(
            "Transfer curves, hazard histograms and teacher summaries for every dataset x "
            "student selection and profile, so the app need not read the rollouts."
        ),
    )
)


# --- app view: page results of the default selections (written by the metrics stage) -----------

PAGE_RESULTS = _register(
    TableSpec(
        "page_results",
        _s(
            ("name", STR),  # a key of legival_core.metrics.page_results.INPUTS
            ("selection", STR),  # the page computation's arguments as JSON
            ("inputs_stamp", STR),  # the state of the tables it was computed from
            ("payload", pa.large_binary()),  # the result frame as Arrow IPC stream bytes
        ),
        keys=("name", "selection"),
        required=("inputs_stamp", "payload"),
        description=(
            "Results the slow pages compute on load (resampled intervals, monitoring "
            "bootstrap, reward correlations, first-solve table) for their default selection, "
            "each stamped with the state of its inputs, so a page reads instead of computing."
        ),
    )
)

# --- robustness: side tables of the opt-in ``robustness`` stage (never the default ones) ----------

ROBUSTNESS_STEPS = _register(
    TableSpec(
        "robustness_steps",
        _s(
            ("segmenter", STR),  # the alternative segmentation (legival_core.text.segment mode)
            ("trace_id", STR),
            ("step", I32),
            ("start", I64),  # char offset into traces.reasoning
            ("end", I64),
            ("text", LSTR),
            ("tokens", I32),
            ("lexical_cue", BOOL),  # the lexical detector flags this step as backtracking
            ("context_cue", BOOL),  # the context-aware cues (labeler "cues") flag it
        ),
        keys=("segmenter", "trace_id", "step"),
        required=("start", "end", "text"),
        description="Steps of each trace under an alternative segmenter (robustness report).",
    )
)

ROBUSTNESS_SIMILARITY = _register(
    TableSpec(
        "robustness_similarity",
        _s(
            ("segmenter", STR),
            ("trace_id", STR),
            ("step", I32),
            ("max_similarity", F64),  # r_i over the alternative steps; null for step 0
            ("matched_step", I32),
        ),
        keys=("segmenter", "trace_id", "step"),
        description="Per-step redundancy of the alternative steps in robustness_steps.",
    )
)

# --- what a trace's own tool said (written by ingest --format …, precompute/formats) -----------

TOOL_GRADES = _register(
    TableSpec(
        "tool_grades",
        _s(
            ("trace_id", STR),
            ("tool", STR),  # "<format>:<scorer>", e.g. "inspect:match", "lm-eval:exact_match"
            ("correct", BOOL),  # the tool's verdict; null when its value was no yes/no
            ("answer", STR),  # the answer the tool graded, as it recorded it
        ),
        keys=("trace_id",),
        required=("tool",),
        description="The evaluation tool's own verdict on an ingested trace, kept beside grades.",
    )
)

CHUNK_IMPORTANCE = _register(
    TableSpec(
        "chunk_importance",
        _s(
            ("trace_id", STR),
            ("chunk", I32),  # the tool's chunk index
            ("start", I64),  # char span in traces.reasoning; null when not found verbatim
            ("end", I64),
            ("text", LSTR),
            ("importance", F64),  # counterfactual importance (accuracy), Thought Anchors
            ("resampling_importance", F64),
            ("accuracy", F64),  # accuracy of rollouts resampled from this chunk on
            ("function_tags", pa.list_(STR)),
        ),
        keys=("trace_id", "chunk"),
        required=("text",),
        description="Resampling importance of chunks of an ingested trace (Thought Anchors).",
    )
)


STEP_IMPORTANCE = _register(
    TableSpec(
        "step_importance",
        _s(
            ("trace_id", STR),
            ("step", I32),
            # the importance of the strongest chunk reaching the step (signed; null: none
            # reaches it), legival_core.text.chunk_alignment
            ("importance", F64),
            ("n_chunks", I32),  # how many chunks reach the step
            ("function_tags", STR),  # their tags, comma-separated
        ),
        keys=("trace_id", "step"),
        description="Chunk importances carried onto the steps by character span (segment).",
    )
)


def trace_id_for(teacher: str, problem_id: str, sample: int = 0) -> str:
    """Stable, short id of a trace: BLAKE2b-64 of an unambiguous encoding of (teacher,
    problem_id, sample).

    Encoding: the three fields joined by U+001F when neither name holds a U+001F (every id ever
    made with a name without one keeps its value: such a string has exactly two separators, so
    it splits back one way only); otherwise the JSON array ``[teacher, problem_id, sample]``,
    in which JSON writes U+001F as ``\\u001f``, so it holds no raw U+001F and can never equal a
    joined string. Two different triples therefore never share an encoding (before, teacher
    ``m`` on problem ``ds/p␟ds/q`` and teacher ``m␟ds/p`` on ``ds/q`` did).

    >>> trace_id_for("gpt-4", "champ/P_Inequality_1")
    't-e7ee3b61eac5d7e4'
    >>> trace_id_for("m", "ds/p\x1fds/q") == trace_id_for("m\x1fds/p", "ds/q")
    False
    """
    if "\x1f" in teacher or "\x1f" in problem_id:
        encoded = json.dumps([teacher, problem_id, int(sample)], ensure_ascii=False)
    else:
        encoded = f"{teacher}\x1f{problem_id}\x1f{int(sample)}"
    digest = hashlib.blake2b(encoded.encode("utf-8", "surrogatepass"), digest_size=8).hexdigest()
    return f"t-{digest}"


def spec(name: str) -> TableSpec:
    """The :class:`TableSpec` of a table, with a clear error for an unknown name."""
    try:
        return TABLES[name]
    except KeyError:
        known = ", ".join(sorted(TABLES))
        raise SchemaError(name, f"unknown table (known tables: {known})") from None


def _describe(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def validate_frame(name: str, frame: Any, *, allow_extra: bool = False) -> pa.Table:
    """Coerce ``frame`` (a pandas DataFrame, a pyarrow Table or a list of dicts) to the schema of
    table ``name`` and return it as a pyarrow Table with the declared column order.

    Missing optional columns are added as nulls; missing key/required columns, nulls in them, and
    values that do not convert raise :class:`SchemaError` naming table, row and field. Unknown
    columns are an error unless ``allow_extra`` (then they are dropped).
    """
    import pandas as pd

    table_spec = spec(name)
    if isinstance(frame, pa.Table):
        if frame.schema.remove_metadata().equals(table_spec.schema):
            # Already in the declared layout: only the null checks remain (no pandas round trip,
            # which matters for multi-million-row parts).
            frame = frame.replace_schema_metadata(None)
            _check_required(name, table_spec, frame)
            return frame
        frame = frame.to_pandas()
    elif not isinstance(frame, pd.DataFrame):
        frame = pd.DataFrame(list(frame))
    frame = frame.reset_index(drop=True)

    extra = [c for c in frame.columns if c not in table_spec.columns]
    if extra and not allow_extra:
        raise SchemaError(name, f"unknown column(s) {extra}", column=str(extra[0]))

    arrays = []
    for fld in table_spec.schema:
        if fld.name not in frame.columns:
            if fld.name in table_spec.required_columns():
                raise SchemaError(name, "required column is missing", column=fld.name)
            arrays.append(pa.nulls(len(frame), type=fld.type))
            continue
        arrays.append(_convert_column(name, fld, frame[fld.name]))

    table = pa.Table.from_arrays(arrays, schema=table_spec.schema)
    _check_required(name, table_spec, table)
    return table


def _check_required(name: str, table_spec: TableSpec, table: pa.Table) -> None:
    for col in table_spec.required_columns():
        column = table.column(col)
        if column.null_count:
            row = _first_null(column)
            raise SchemaError(name, "value is missing (null) in a required column", row, col)


def _first_null(column: pa.ChunkedArray) -> int:
    mask = column.is_null().to_numpy(zero_copy_only=False)
    return int(mask.argmax())


def _convert_column(table: str, fld: pa.Field, values: Any) -> pa.Array:
    import pandas as pd

    series = pd.Series(values)
    try:
        return pa.array(_python_values(series, fld.type), type=fld.type, from_pandas=True)
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError, OverflowError):
        pass
    # Slow path only to locate the offending row for the error message.
    for row, value in enumerate(series.tolist()):
        try:
            pa.array(_python_values(pd.Series([value], dtype=object), fld.type), type=fld.type)
        except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError, OverflowError):
            raise SchemaError(
                table, f"cannot store {_describe(value)} as {fld.type}", row, fld.name
            ) from None
    raise SchemaError(table, f"cannot convert column to {fld.type}", column=fld.name)


def _python_values(series: Any, dtype: pa.DataType) -> Any:
    """Prepare a pandas Series for ``pa.array``: reject silent lossy casts (e.g. 1.5 -> int)."""
    import numpy as np
    import pandas as pd

    if pa.types.is_integer(dtype):
        numeric = pd.to_numeric(series, errors="raise")
        finite = numeric.dropna()
        if len(finite) and not np.all(np.asarray(finite, dtype=float) % 1 == 0):
            bad = finite[np.asarray(finite, dtype=float) % 1 != 0].iloc[0]
            raise ValueError(f"{bad!r} is not a whole number")
        return numeric.astype("Int64")
    if pa.types.is_floating(dtype):
        return pd.to_numeric(series, errors="raise").astype("Float64")
    if pa.types.is_boolean(dtype):
        allowed = {True, False}
        clean = series.astype(object).where(series.notna(), None)
        if pd.api.types.infer_dtype(clean, skipna=True) in ("boolean", "empty"):
            return clean  # vectorised check passed; the loop below only finds the bad value
        for value in clean:
            if value is not None and not (isinstance(value, bool | np.bool_) and value in allowed):
                raise ValueError(f"{value!r} is not a boolean")
        return clean
    if pa.types.is_string(dtype) or pa.types.is_large_string(dtype):
        clean = series.astype(object).where(series.notna(), None)
        if pd.api.types.infer_dtype(clean, skipna=True) in ("string", "empty"):
            return clean
        for value in clean:
            if value is not None and not isinstance(value, str):
                raise ValueError(f"{value!r} is not a string")
        return clean
    return series.astype(object).where(series.notna(), None)


def key_columns(name: str) -> tuple[str, ...]:
    """The key columns of a table (what a stage checks to resume)."""
    return spec(name).keys
