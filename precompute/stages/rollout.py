"""Stage ``rollout``: students continue prefixes of correct teacher traces (docs/metrics/fotu.md).

For each correct trace with m steps and each student, prefixes k ∈ {0} ∪ {d, 2d, …} ∪ {m}
(d = ``[rollout] interval``; with ``include_full = false`` the last prefix is m − 1 instead
of m, as in the authors' released code). The prompt is the task's chat messages plus, for
k ≥ 1, an assistant message holding the *exact* character span
``reasoning[:steps[k-1].end]`` of the teacher's reasoning, rendered in
continue-final-message mode so the student carries on where the teacher stopped.

Generation stops as soon as the student's text holds an extractable answer. When it ends
without one, the task's forcing cue is appended and at most ``forcing_tokens`` more tokens
are generated (the second pass). The student's own text (never the teacher prefix) is then
graded. k = 0 is the student alone; its result depends only on (problem, student, sample),
so with ``reuse_baseline`` it is generated once per problem and copied to the problem's
other traces.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pandas as pd

from precompute.backends.base import Engine
from precompute.config import ModelConfig
from precompute.stages.base import (
    BatchWriter,
    StageContext,
    StageError,
    StageOption,
    StageResult,
    grading_stamp,
    register_stage,
)
from precompute.stages.common import chunks, problem_rows, read_or_empty, shard_rows, task_of

if TYPE_CHECKING:
    from legival_core.store.store import Store

__all__ = ["RolloutJob", "answer_extractable_in", "k_grid", "prefix_text", "run_rollout"]


def k_grid(m: int, interval: int = 3, include_full: bool = True) -> list[int]:
    """Prefix sizes shown to the student for a trace of ``m`` steps.

    {0} ∪ {interval, 2·interval, … < m} ∪ {m} (or {m − 1} without ``include_full``).

    >>> k_grid(7)
    [0, 3, 6, 7]
    >>> k_grid(6)
    [0, 3, 6]
    >>> k_grid(2), k_grid(0)
    ([0, 2], [0])
    >>> k_grid(7, include_full=False)
    [0, 3, 6]
    """
    if m < 0 or interval < 1:
        raise ValueError(f"k_grid needs m >= 0 and interval >= 1, got m={m}, interval={interval}")
    last = m if include_full else m - 1
    ks = {0, *range(interval, m, interval)}
    if last >= 1:
        ks.add(last)
    return sorted(k for k in ks if k <= max(last, 0))


def prefix_text(reasoning: str, step_ends: Sequence[int], k: int) -> str:
    """The first k steps as the exact character span ``reasoning[:ends[k-1]]``; '' for k = 0.

    >>> prefix_text("One.  Two. Three.", [4, 10, 17], 2)
    'One.  Two.'
    """
    if k == 0:
        return ""
    return reasoning[: int(step_ends[k - 1])]


@dataclass(frozen=True)
class RolloutJob:
    trace_id: str
    problem: dict[str, Any]
    teacher: str
    student: ModelConfig
    k: int
    m: int
    sample: int
    prefix: str

    @property
    def key(self) -> tuple[str, str, int, int]:
        return (self.trace_id, self.student.name, self.k, self.sample)

    @property
    def request_key(self) -> str:
        return f"{self.trace_id}|{self.student.name}|k={self.k}|s={self.sample}"

    @property
    def baseline_key(self) -> tuple[str, str, int]:
        return (str(self.problem["problem_id"]), self.student.name, self.sample)


def _messages(job: RolloutJob, assistant_text: str | None) -> list[dict[str, str]]:
    messages = task_of(job.problem).build_messages(job.problem)
    if assistant_text is not None:
        messages = [*messages, {"role": "assistant", "content": assistant_text}]
    return messages


def _checker(job: RolloutJob, lead: str = "") -> Callable[[str], bool]:
    task = task_of(job.problem)
    problem = job.problem

    def extractable(text: str) -> bool:
        return task.answer_extractable(lead + text, problem=problem)

    return extractable


def answer_extractable_in(text: str, *, task: str, problem: dict[str, Any], lead: str = "") -> bool:
    """The early-stop check of :func:`_checker`, rebuilt from plain data by an engine that runs
    it in another process (vLLM's engine core; :class:`StopCheckSpec`)."""
    from legival_core.tasks import get_task

    return bool(get_task(task).answer_extractable(lead + text, problem=problem))


def _stop_check(job: RolloutJob, lead: str = "") -> Any:
    """:func:`_checker` as a :class:`StopCheckSpec` (same task, problem and lead)."""
    from precompute.backends.base import StopCheckSpec, plain_data

    return StopCheckSpec(
        f"{__name__}:answer_extractable_in",
        {"task": str(job.problem["task"]), "problem": plain_data(dict(job.problem)), "lead": lead},
    )


def _triggers(task: Any) -> list[str]:
    """Strings after which the early-stop check is worth running.

    The task's own stop strings plus the characters that close an answer in any family
    (a brace closes ``\\boxed{…}``, a bracket a JSON list, a newline an "Answer:" line).
    Stop strings are used only as triggers, never to cut the text, so nothing of the
    answer is lost.
    """
    return list(dict.fromkeys([*task.stop_strings, "}", "]", "\n"]))


def _first_pass_request(job: RolloutJob) -> Any:
    from precompute.backends import GenerationRequest

    task = task_of(job.problem)
    student = job.student
    return GenerationRequest(
        job.request_key,
        _messages(job, job.prefix if job.k > 0 else None),
        max_tokens=student.max_tokens,
        continue_final_message=job.k > 0,
        temperature=student.temperature,
        top_p=student.top_p,
        repetition_penalty=student.repetition_penalty,
        seed=student.seed + job.sample,
        stop_when=_checker(job),
        stop_when_after=_triggers(task),
        stop_check=_stop_check(job),
    )


def forcing_lead(first_text: str, cue: str) -> str:
    """The student's first-pass text followed by the forcing cue.

    A cue that starts with whitespace is appended as is; otherwise it goes on a new line.

    >>> forcing_lead("so x is 4", "The answer is \\\\boxed{")
    'so x is 4\\nThe answer is \\\\boxed{'
    >>> forcing_lead("so x is 4", "\\n\\nThe answer is")
    'so x is 4\\n\\nThe answer is'
    >>> forcing_lead("", "The answer is")
    'The answer is'
    """
    if not first_text or first_text[-1].isspace() or cue[:1].isspace():
        return first_text + cue
    return first_text + "\n" + cue


def _forcing_request(job: RolloutJob, first_text: str) -> Any:
    from precompute.backends import GenerationRequest

    task = task_of(job.problem)
    student = job.student
    lead = forcing_lead(first_text, task.forcing_cue)
    return GenerationRequest(
        job.request_key + "|forced",
        _messages(job, job.prefix + lead),
        max_tokens=student.forcing_tokens,
        continue_final_message=True,
        temperature=student.temperature,
        top_p=student.top_p,
        repetition_penalty=student.repetition_penalty,
        seed=student.seed + job.sample,
        stop_when=_checker(job, lead),
        stop_when_after=_triggers(task),
        stop_check=_stop_check(job, lead),
    )


def _correct_traces(store: Store, profile: str = "paper") -> pd.DataFrame:
    """Correct traces with their reasoning, teacher and step ends (sorted by trace id).

    ``profile="release"`` takes the traces whose teacher score is > 0.5, as the authors'
    released scripts do (``migrate_database.py``: ``teacher_score > 0.5``; docs/profiles.md): the
    same
    traces for right/wrong tasks, and Connections traces with 3 of 4 groups right too.
    """
    grades = read_or_empty(store, "grades", ["trace_id", "correct", "score"])
    if grades.empty:
        raise StageError(
            "stage 'rollout' needs table 'grades', which is empty; run "
            "`python -m precompute grade` first"
        )
    chosen = grades["correct"].astype("boolean").fillna(False).astype(bool)
    if profile == "release" and "score" in grades:
        score = pd.to_numeric(grades["score"], errors="coerce").astype("float64")
        chosen = (score > 0.5).where(score.notna(), chosen).astype(bool)
    correct_ids = set(grades.loc[chosen.to_numpy(), "trace_id"])
    traces = read_or_empty(
        store, "traces", ["trace_id", "problem_id", "dataset", "teacher", "reasoning"]
    )
    return traces[traces["trace_id"].isin(correct_ids)].sort_values("trace_id")


def _step_ends(store: Store, trace_ids: set[str]) -> dict[str, list[int]]:
    steps = read_or_empty(store, "steps", ["trace_id", "step", "end"])
    steps = steps[steps["trace_id"].isin(trace_ids)].sort_values(["trace_id", "step"])
    return {tid: group["end"].astype(int).tolist() for tid, group in steps.groupby("trace_id")}


def plan_jobs(ctx: StageContext, students: Sequence[ModelConfig]) -> tuple[list[RolloutJob], int]:
    """Every (trace, student, k, sample) the shard still has to run, and how many are done."""
    cfg = ctx.config.rollout
    traces = _correct_traces(ctx.store, ctx.config.metrics.profile)
    traces = shard_rows(traces, ctx.shard)
    ends = _step_ends(ctx.store, set(traces["trace_id"]))
    unsegmented = sorted(set(traces["trace_id"]) - set(ends))
    problems = problem_rows(ctx.store)
    done = ctx.store.done_keys("rollouts") if ctx.store.has("rollouts") else set()
    jobs: list[RolloutJob] = []
    skipped = 0
    for row in traces.itertuples(index=False):
        reasoning = row.reasoning or ""
        step_ends = ends.get(row.trace_id, [])
        if not step_ends and reasoning.strip():
            continue  # not segmented yet (reported below)
        m = len(step_ends)
        for student in students:
            for k in k_grid(m, cfg.interval, cfg.include_full):
                for sample in range(cfg.samples):
                    key = (row.trace_id, student.name, k, sample)
                    if key in done:
                        skipped += 1
                        continue
                    jobs.append(
                        RolloutJob(
                            row.trace_id,
                            problems[row.problem_id],
                            row.teacher,
                            student,
                            k,
                            m,
                            sample,
                            prefix_text(reasoning, step_ends, k),
                        )
                    )
    if unsegmented:
        ctx.logger.warning(
            "%d correct trace(s) are not segmented yet: %s", len(unsegmented), unsegmented[:5]
        )
    jobs.sort(key=lambda j: (j.student.name, j.trace_id, j.k, j.sample))
    return jobs, skipped


def _existing_baselines(store: Store) -> dict[tuple[str, str, int], dict[str, Any]]:
    """k = 0 rows already stored, by (problem, student, sample), for reuse."""
    if not store.has("rollouts"):
        return {}
    frame = store.read("rollouts", filters={"k": 0})
    baselines: dict[tuple[str, str, int], dict[str, Any]] = {}
    for row in frame.to_dict(orient="records"):
        baselines.setdefault((row["problem_id"], row["student"], int(row["sample"])), row)
    return baselines


def _row(job: RolloutJob, outcome: dict[str, Any]) -> dict[str, Any]:
    return {
        "trace_id": job.trace_id,
        "student": job.student.name,
        "k": job.k,
        "sample": job.sample,
        "teacher": job.teacher,
        "dataset": job.problem["dataset"],
        "problem_id": job.problem["problem_id"],
        "m": job.m,
        **outcome,
    }


_OUTCOME_FIELDS = (
    "completion",
    "extracted",
    "correct",
    "forced",
    "prompt_tokens",
    "completion_tokens",
    "status",
    # A copied baseline keeps the stamp of the grading that produced it.
    "grader_version",
    "code_revision",
)


def _run_batch(
    engine: Engine, batch: list[RolloutJob], timeout_s: float, logger: Any
) -> list[dict[str, Any] | None]:
    """Generate, force where needed, and grade one batch; None for engine failures.

    An engine that keeps the cache of the last sequence it ran (``engine.caches_last_sequence``,
    so far llama.cpp) gets one rollout at a time, its forcing
    pass right after its first pass: the cache then still holds the prompt and the student's
    text, so the forcing pass prefills only the cue, and the next prefix of the same trace
    extends the cached prompt. Batched together, every forcing prompt would prefill its
    prefix again after the batch's other first passes.
    """
    if engine.caches_last_sequence and len(batch) > 1:
        return [
            outcome for job in batch for outcome in _run_together(engine, [job], timeout_s, logger)
        ]
    return _run_together(engine, batch, timeout_s, logger)


def _run_together(
    engine: Engine, batch: list[RolloutJob], timeout_s: float, logger: Any
) -> list[dict[str, Any] | None]:
    """First passes of ``batch`` in one engine call, then its forcing passes in one call."""
    firsts = engine.generate([_first_pass_request(job) for job in batch])
    outcomes: list[dict[str, Any] | None] = [None] * len(batch)
    texts: list[str] = [""] * len(batch)
    forced_at: list[int] = []
    for index, (job, completion) in enumerate(zip(batch, firsts, strict=True)):
        if not completion.ok:
            logger.warning("rollout %s failed: %s", job.request_key, completion.error)
            continue
        texts[index] = completion.text
        outcomes[index] = {
            "prompt_tokens": int(completion.prompt_tokens),
            "completion_tokens": int(completion.completion_tokens),
            "forced": False,
        }
        task = task_of(job.problem)
        if job.student.forcing_tokens > 0 and not task.answer_extractable(
            completion.text, problem=job.problem
        ):
            forced_at.append(index)
    if forced_at:
        seconds = engine.generate([_forcing_request(batch[i], texts[i]) for i in forced_at])
        for index, completion in zip(forced_at, seconds, strict=True):
            job = batch[index]
            if not completion.ok:
                logger.warning("forcing pass %s failed: %s", job.request_key, completion.error)
                outcomes[index] = None
                continue
            cue = task_of(job.problem).forcing_cue
            texts[index] = forcing_lead(texts[index], cue) + completion.text
            outcome = outcomes[index]
            assert outcome is not None
            outcome["forced"] = True
            outcome["completion_tokens"] += int(completion.completion_tokens)
    for index, job in enumerate(batch):
        outcome = outcomes[index]
        if outcome is None:
            continue
        task = task_of(job.problem)
        # The same reading as a teacher's grade (one policy for every path): the task's own
        # extractor, else the answer the student's prose states.
        graded = task.grade_text(
            {"completion": texts[index]},
            job.problem["gold"],
            timeout_s=timeout_s,
            problem=job.problem,
        )
        outcome.update(
            completion=texts[index],
            extracted=graded.answer,
            correct=float(graded.grade.score),
            status=graded.grade.status,
            **grading_stamp(),
        )
    return outcomes


def stage_students(ctx: StageContext) -> tuple[ModelConfig, ...]:
    """The students of this run: those of ``--students`` when given (they replace the
    config's), else the config's ``[[students]]``; none is an error naming the option."""
    from precompute.students import no_students_message, parse_students

    chosen = ctx.options_of("rollout").get("students")
    if chosen:
        return parse_students(str(chosen))
    if not ctx.config.students:
        raise StageError(no_students_message(ctx.config.source))
    return tuple(ctx.config.students)


def cost_estimate(
    ctx: StageContext, jobs: Sequence[RolloutJob], done: int, processes: int = 1
) -> str:
    """How many rollouts ``jobs`` will generate (a k = 0 baseline once per problem) and about
    how long they take on ``processes`` one-thread processes (:func:`rollout_estimate`)."""
    from precompute.students import rollout_estimate, rollouts_to_run

    reuse = ctx.config.rollout.reuse_baseline
    known = set(_existing_baselines(ctx.store)) if reuse else set()
    counts = rollouts_to_run(jobs, known, reuse=reuse)
    copied = len(jobs) - sum(counts.values())
    return rollout_estimate(counts, done=done, copied=copied, processes=processes)


def announce_cost(ctx: StageContext, jobs: Sequence[RolloutJob], done: int) -> None:
    """Say on stderr (and in the log) how many rollouts will run and about how long they take,
    before the first one starts: a run of the default students takes minutes."""
    import sys

    if not jobs or not ctx.announce:
        return
    line = cost_estimate(ctx, jobs, done)
    ctx.logger.info(line)
    print(line, file=sys.stderr)


#: ``--students``: the option of the stage (and of ``run``) that adds students to a run.
STUDENTS_OPTION = StageOption(
    "--students",
    "students",
    {
        "metavar": "default|NAME,…",
        "help": "students for this run, replacing the config's: 'default' is the demo's two "
        "(smollm2-135m and gemma3-270m, packaged, on the CPU), or packaged names and .gguf "
        "files separated by commas",
    },
)


@register_stage(
    "rollout",
    reads=("problems", "traces", "grades", "steps"),
    writes=("rollouts",),
    help="students continue k-step prefixes of correct traces; forcing pass; graded",
    options=(STUDENTS_OPTION,),
)
def run_rollout(ctx: StageContext) -> StageResult:
    config = ctx.config
    cfg = config.rollout
    result = StageResult("rollout")
    students = stage_students(ctx)
    jobs, result.skipped = plan_jobs(ctx, students)
    result.todo = len(jobs)
    result.provenance = {
        "models": {s.name: {"engine": s.engine, "model": s.model} for s in students},
        "sampling": {
            s.name: {**s.sampling(), "forcing_tokens": s.forcing_tokens} for s in students
        },
        "interval": cfg.interval,
        "include_full": cfg.include_full,
        "samples": cfg.samples,
    }
    announce_cost(ctx, jobs, result.skipped)
    baselines = _existing_baselines(ctx.store) if cfg.reuse_baseline else {}
    failed = 0
    reused = 0
    bar = ctx.bar(len(jobs), "rollout", "rollout")
    with BatchWriter(ctx.store, "rollouts", "rollout", cfg.batch_size) as writer:

        def copy_known_baselines(candidates: list[RolloutJob]) -> list[RolloutJob]:
            """Write each k = 0 job whose baseline is known as a copy of it; return the
            jobs left to run."""
            nonlocal reused
            left: list[RolloutJob] = []
            for job in candidates:
                base = baselines.get(job.baseline_key) if job.k == 0 else None
                if base is None:
                    left.append(job)
                    continue
                writer.add(_row(job, {f: base[f] for f in _OUTCOME_FIELDS}))
                reused += 1
                bar.update(1)
            return left

        for student in students:
            mine = [job for job in jobs if job.student is student]
            if not mine:
                continue
            engine = ctx.engines.get(student)
            pending = copy_known_baselines(mine)
            for batch in chunks(pending, cfg.batch_size):
                # A k = 0 job whose baseline an earlier batch produced is copied, not rerun.
                runnable = copy_known_baselines(batch)
                if not runnable:
                    continue
                outcomes = _run_batch(engine, runnable, config.grade.timeout_s, ctx.logger)
                for job, outcome in zip(runnable, outcomes, strict=True):
                    if outcome is None:
                        failed += 1
                        continue
                    row = _row(job, outcome)
                    writer.add(row)
                    if job.k == 0 and cfg.reuse_baseline:
                        baselines.setdefault(job.baseline_key, row)
                bar.update(len(runnable))
    bar.close()
    result.written["rollouts"] = writer.written
    if reused:
        result.notes.append(f"{reused} k=0 baseline(s) reused from the same problem")
    if failed:
        if failed == len(jobs):
            raise RuntimeError(f"all {failed} rollout(s) failed in the engine (see the log)")
        result.notes.append(f"{failed} failed in the engine (logged; rerun to retry)")
    return result
