"""The calibration suite: ``python -m precompute calibrate --store DIR [--seed N] [--size small]``.

Builds a store of synthetic traces with planted properties
(:mod:`legival_core.calibration.calibration`), runs the real stages on it — grade, segment
(Punkt), embed (all-MiniLM-L6-v2), rollout (the rule-based student, exact and with a known error
rate), leaks, judge (the lexical detector), metrics — and writes the table ``calibration_report``:
planted vs recovered for every metric, and precision/recall of every detector on development and
held-out templates.
Seeded and offline.

The rule-based student (:mod:`precompute.backends.rule_student`) is a calibration instrument:
it answers from an answer key written next to the store and is never used for results.

Sizes: ``small`` (48 traces, the regression test) and ``full`` (240 traces). ``--llm-judge``
adds the SmolLM2-135M judge (llama.cpp) to the judge stage and measures it beside the lexical
detector; it is off by default because it takes longer than the rest of the build.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd

from legival_core.calibration.calibration import (
    PlantedTrace,
    calibration_report,
    plant_traces,
    planted_instances,
)
from legival_core.store.schema import trace_id_for
from precompute.config import (
    ExperimentConfig,
    GradeConfig,
    JudgeConfig,
    MetricsConfig,
    ModelConfig,
    RolloutConfig,
)

__all__ = ["SIZES", "build_calibration", "calibration_config", "main"]

#: Traces per size.
SIZES = {"small": 48, "full": 240}
#: Stages run on the planted store, in order.
CALIBRATION_STAGES = ("grade", "segment", "embed", "rollout", "leaks", "judge", "metrics")
STUDENT = "rule-student"
NOISY_STUDENT = "rule-student-noisy"
#: The noisy student's flip probability ε.
ERROR_RATE = 0.1
ANSWER_KEY = "rule_student_answer_key.json"
DATASET = "calibration"


def _problem_prompt(trace: PlantedTrace) -> str:
    # The question a sentence of its own: its type (count, yes/no, residue) is read from it.
    return f"Problem {trace.problem_id} is a synthetic calibration item. {trace.question}"


#: The optional LLM judge: SmolLM2-135M-Instruct (packaged GGUF) through llama.cpp.
LLM_JUDGE = ModelConfig(
    name="smollm2-135m", engine="llamacpp", model="smollm2-135m", max_tokens=160
)

if TYPE_CHECKING:
    from legival_core.store.store import Store


def calibration_config(out: Path, seed: int, llm_judge: bool = False) -> ExperimentConfig:
    """The experiment config of the build (recorded in the manifest)."""
    key = str((out / ANSWER_KEY).resolve())
    students = tuple(
        ModelConfig(
            name=name,
            engine="rule-student",
            model=key,
            max_tokens=64,
            forcing_tokens=0,
            options={"error_rate": rate, "seed": seed},
        )
        for name, rate in ((STUDENT, 0.0), (NOISY_STUDENT, ERROR_RATE))
    )
    return ExperimentConfig(
        name="calibration",
        seed=seed,
        stages=CALIBRATION_STAGES,
        source="precompute.calibrate",
        students=students,
        grade=GradeConfig(timeout_s=10.0),
        rollout=RolloutConfig(interval=3, batch_size=64),
        judge=(
            JudgeConfig(labelers=("lexical", "llm"), model=LLM_JUDGE, batch_size=8)
            if llm_judge
            else JudgeConfig(labelers=("lexical",))
        ),
        metrics=MetricsConfig(primary_labeler="lexical"),
    )


def _write_inputs(store: Store, planted: Sequence[PlantedTrace], out: Path) -> None:
    """Problems, traces and the rule student's answer key (skipped when already there)."""
    key = {
        "problems": [
            {"marker": t.problem_id, "key_fact": t.key_fact, "answer": t.gold} for t in planted
        ]
    }
    if store.has("traces"):
        stored = store.read("traces", columns=["trace_id", "reasoning"])
        planted_text = {trace_id_for(t.teacher, t.problem_id): t.reasoning for t in planted}
        if dict(zip(stored["trace_id"], stored["reasoning"], strict=True)) != planted_text:
            from legival_core.store.store import StoreError

            raise StoreError(
                f"store {out} holds other traces than this seed and size would plant; "
                "resume it with the seed and size it was built with, or use a new folder"
            )
        (out / ANSWER_KEY).write_text(json.dumps(key, indent=1), encoding="utf-8")
        return
    (out / ANSWER_KEY).write_text(json.dumps(key, indent=1), encoding="utf-8")
    problems = pd.DataFrame(
        {
            "problem_id": [t.problem_id for t in planted],
            "dataset": DATASET,
            "task": "math",
            "prompt": [_problem_prompt(t) for t in planted],
            "gold": [t.gold for t in planted],
        }
    )
    store.write("problems", problems, stage="calibrate")
    traces = pd.DataFrame(
        {
            "trace_id": [trace_id_for(t.teacher, t.problem_id) for t in planted],
            "problem_id": [t.problem_id for t in planted],
            "dataset": DATASET,
            "teacher": [t.teacher for t in planted],
            "sample": 0,
            "reasoning": [t.reasoning for t in planted],
            "answer_text": [f"\\boxed{{{t.gold}}}" for t in planted],
            "complete": True,
            "tokens": [len(t.reasoning.split()) for t in planted],
            "truncated": False,
            "source": "calibration:planted",
        }
    )
    store.write("traces", traces, stage="calibrate")


def _with_store_ids(planted: Sequence[PlantedTrace]) -> list[PlantedTrace]:
    import dataclasses

    return [dataclasses.replace(t, trace_id=trace_id_for(t.teacher, t.problem_id)) for t in planted]


def build_calibration(
    out: Path,
    seed: int = 0,
    size: str = "small",
    *,
    llm_judge: bool = False,
    progress: bool | None = False,
) -> pd.DataFrame:
    """Build (or resume) the calibration store at ``out`` and return its report.

    With ``llm_judge`` the judge stage also asks SmolLM2-135M (llama.cpp) for backtracking
    labels and the report measures it beside the lexical detector. The report is also
    written to the store as table ``calibration_report``.
    """
    from legival_core.metrics.decomposition import decompose
    from legival_core.store.store import Store
    from precompute.stages import StageContext, run_stage

    if size not in SIZES:
        raise ValueError(f"calibrate: size must be one of {sorted(SIZES)}, got {size!r}")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    planted = _with_store_ids(plant_traces(SIZES[size], seed=seed))
    config = calibration_config(out, seed, llm_judge)
    store = Store.create(out, config=config.to_dict())
    started = time.monotonic()
    _write_inputs(store, planted, out)
    ctx = StageContext(store=store, config=config, progress=progress)
    seconds: dict[str, float] = {}
    try:
        for name in CALIBRATION_STAGES:
            result = run_stage(name, ctx)
            seconds[name] = round(result.seconds, 2)
            print(result.summary(), file=sys.stderr)
    finally:
        ctx.engines.close()
    tables = {
        name: store.read(name)
        for name in (
            "steps", "similarity", "judgments", "rollouts", "trace_transfer", "transfer_curves"
        )
    }  # fmt: skip
    report = calibration_report(
        planted,
        tables,
        student=STUDENT,
        noisy_student=NOISY_STUDENT,
        error_rate=ERROR_RATE,
        labelers=("lexical", f"judge:{LLM_JUDGE.name}") if llm_judge else ("lexical",),
        decomposed=decompose(planted_instances(), n_boot=0),
    )
    store.write("calibration_report", report, stage="calibrate")
    store.record_stage(
        "calibrate",
        seed=seed,
        size=size,
        traces=len(planted),
        error_rate=ERROR_RATE,
        instrument="rule-student: answers from an answer key; a calibration instrument only",
        seconds=seconds,
        total_seconds=round(time.monotonic() - started, 2),
    )
    return report


def format_report(report: pd.DataFrame) -> str:
    """The report as plain text (one line per row) for the terminal."""
    shown = report.drop(columns=["note"]).copy()
    with pd.option_context("display.max_rows", None, "display.width", 200):
        return shown.to_string(index=False, float_format=lambda v: f"{v:.3f}")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``calibrate`` (shared by :func:`main` and ``precompute.cli``)."""
    parser.add_argument("--store", type=Path, required=True, help="folder of the store to build")
    parser.add_argument("--seed", type=int, default=0, help="seed of the planted traces")
    parser.add_argument(
        "--size", choices=sorted(SIZES), default="small", help="traces: small 48, full 240"
    )
    parser.add_argument(
        "--llm-judge", action="store_true", help="also measure the SmolLM2-135M judge (slow)"
    )


def run(args: argparse.Namespace) -> int:
    """Build the store named by parsed ``args``, print the report; exit code 0."""
    started = time.monotonic()
    report = build_calibration(
        args.store, seed=args.seed, size=args.size, llm_judge=args.llm_judge, progress=None
    )
    print(format_report(report))
    failed = report[report["within_tolerance"].fillna(True) == False]  # noqa: E712
    print(
        f"\n{len(report)} rows; {len(failed)} outside tolerance; "
        f"{time.monotonic() - started:.1f}s; store {args.store}",
        file=sys.stderr,
    )
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """``calibrate --store DIR --seed N --size small|full``; prints the report."""
    parser = argparse.ArgumentParser(
        allow_abbrev=False, prog="python -m precompute.calibrate", description=__doc__
    )
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
