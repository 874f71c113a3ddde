"""Stage ``judge``: backtracking labels per trace, from an LLM judge and/or the offline detectors.

Labelers (``[judge] labelers``):

``lexical``
    :func:`legival_core.metrics.backtracking.lexical_backtracking`: steps that open with a revision
    cue of the task family. Offline, instant, always valid. Kept for comparison: on
    hand-labelled maths steps most of its flags are connectives ("However, since …").
``cues``
    :func:`legival_core.metrics.backtracking.context_backtracking`: the context-aware cues (a
    dead end, a revision or another approach said in the step, a new plan right after a dead
    end). Offline, instant, always valid; the default primary labeler
    (docs/metrics/backtracking.md gives both detectors' measured precision and recall).
``llm``
    A model behind any engine, labeller name ``judge:<name>``. It sees the problem and the
    trace's *numbered* steps (so its step numbers are ours, 1-based) with the family's rubric,
    and must answer with one JSON object: ``backtracking_detected`` (bool), ``final_answer``
    (str), ``backtracking_steps`` (list of ``{step_number: int, reason: str}``),
    ``confidence`` (number in [0, 1]) and ``overall_reasoning`` (str)
    (docs/metrics/backtracking.md).
    Answers that do not parse or validate are stored with ``valid = False``, the error and
    the raw text; only valid rows count as done, so a rerun asks again.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from precompute.stages.base import (
    BatchWriter,
    StageContext,
    StageError,
    StageResult,
    register_stage,
)
from precompute.stages.common import (
    chunks,
    numbered_steps,
    problem_rows,
    read_or_empty,
    read_required,
    shard_rows,
    task_of,
)

if TYPE_CHECKING:
    from legival_core.store.store import Store

__all__ = [
    "JudgeVerdict",
    "judge_messages",
    "labeler_name",
    "parse_verdict",
    "run_judge",
]

LEXICAL = "lexical"
#: The offline labelers the stage runs itself, in the order it runs them.
OFFLINE = (LEXICAL, "cues")
#: Longest step text shown to the judge; longer steps are cut (with a marker) to bound prompts.
MAX_STEP_CHARS = 1200

_INSTRUCTIONS = """\
You review a worked solution, split into numbered steps, and decide which steps are \
backtracking: places where the writer abandons, revises or re-checks something they did \
earlier, or changes approach after a dead end.

What counts as backtracking for this kind of problem:
{rubric}

Reply with a single JSON object and nothing else, with exactly these keys:
  "backtracking_detected": true or false,
  "final_answer": the final answer the solution reaches, as a string ("" if none),
  "backtracking_steps": a list of {{"step_number": <step number from the list>, \
"reason": <short reason>}} (empty if none),
  "confidence": a number between 0 and 1,
  "overall_reasoning": one or two sentences explaining your decision.
Use the step numbers exactly as given."""


def labeler_name(model_name: str) -> str:
    """Name of the LLM labeler in the ``judgments`` table.

    >>> labeler_name("qwen2.5-7b")
    'judge:qwen2.5-7b'
    """
    return f"judge:{model_name}"


def judge_messages(problem_text: str, steps: Sequence[str], rubric: str) -> list[dict[str, str]]:
    """Chat messages asking the judge to label the backtracking steps of one trace."""
    system = _INSTRUCTIONS.format(rubric=rubric.strip())
    user = (
        f"Problem:\n{problem_text.strip()}\n\n"
        f"Solution steps ({len(steps)} in all):\n{numbered_steps(steps, MAX_STEP_CHARS)}\n\n"
        "Return the JSON object now."
    )
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


@dataclass
class JudgeVerdict:
    """A parsed judge answer, or why it could not be parsed (``valid=False``)."""

    valid: bool
    backtracking_detected: bool | None = None
    steps: list[int] = field(default_factory=list)
    reasons: list[str] = field(default_factory=list)
    confidence: float | None = None
    final_answer: str | None = None
    overall_reasoning: str | None = None
    error: str | None = None


_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.DOTALL | re.IGNORECASE)


def _json_objects(text: str) -> list[Any]:
    """JSON objects found in ``text``: fenced blocks first, then each '{' scanned in order."""
    found: list[Any] = []
    decoder = json.JSONDecoder()
    candidates = [m.group(1) for m in _FENCE.finditer(text)] + [text]
    for candidate in candidates:
        for match in re.finditer(r"\{", candidate):
            try:
                value, _ = decoder.raw_decode(candidate, match.start())
            except ValueError:
                continue
            if isinstance(value, dict):
                found.append(value)
                break
    return found


def parse_verdict(text: str, m: int) -> JudgeVerdict:
    """Parse and validate a judge's reply for a trace of ``m`` steps.

    The first JSON object in the reply must have the five fields with the right types;
    step numbers must lie in 1..m; confidence in [0, 1]. ``backtracking_detected`` must
    agree with whether any step is listed.

    >>> v = parse_verdict('{"backtracking_detected": true, "final_answer": "4", '
    ...     '"backtracking_steps": [{"step_number": 2, "reason": "Wait"}], '
    ...     '"confidence": 0.9, "overall_reasoning": "re-check"}', m=3)
    >>> v.valid, v.steps, v.reasons
    (True, [2], ['Wait'])
    >>> parse_verdict("no json here", m=3).error
    'no JSON object in the reply'
    """
    objects = _json_objects(text or "")
    if not objects:
        return JudgeVerdict(False, error="no JSON object in the reply")
    data = objects[0]
    required = (
        "backtracking_detected",
        "final_answer",
        "backtracking_steps",
        "confidence",
        "overall_reasoning",
    )
    missing = [key for key in required if key not in data]
    if missing:
        return JudgeVerdict(False, error=f"missing field(s) {missing}")
    detected = data["backtracking_detected"]
    if not isinstance(detected, bool):
        return JudgeVerdict(False, error=f"backtracking_detected is {detected!r}, not a boolean")
    final_answer = data["final_answer"]
    if final_answer is None:
        final_answer = ""
    if not isinstance(final_answer, str | int | float) or isinstance(final_answer, bool):
        return JudgeVerdict(False, error="final_answer is not a string")
    confidence = data["confidence"]
    if isinstance(confidence, bool) or not isinstance(confidence, int | float):
        return JudgeVerdict(False, error=f"confidence is {confidence!r}, not a number")
    if not (0.0 <= float(confidence) <= 1.0) or math.isnan(float(confidence)):
        return JudgeVerdict(False, error=f"confidence {confidence!r} is outside [0, 1]")
    overall = data["overall_reasoning"]
    if not isinstance(overall, str):
        return JudgeVerdict(False, error="overall_reasoning is not a string")
    listed = data["backtracking_steps"]
    if not isinstance(listed, list):
        return JudgeVerdict(False, error="backtracking_steps is not a list")
    steps: list[int] = []
    reasons: list[str] = []
    for index, item in enumerate(listed):
        if not isinstance(item, dict) or "step_number" not in item:
            return JudgeVerdict(False, error=f"backtracking_steps[{index}] has no step_number")
        number = item["step_number"]
        if isinstance(number, bool) or not isinstance(number, int):
            return JudgeVerdict(
                False, error=f"backtracking_steps[{index}].step_number is {number!r}"
            )
        if not 1 <= number <= m:
            return JudgeVerdict(
                False, error=f"backtracking_steps[{index}].step_number {number} not in 1..{m}"
            )
        reason = item.get("reason", "")
        if not isinstance(reason, str):
            return JudgeVerdict(False, error=f"backtracking_steps[{index}].reason is not a string")
        if number in steps:
            continue
        steps.append(number)
        reasons.append(reason)
    if detected != bool(steps):
        return JudgeVerdict(
            False,
            error=f"backtracking_detected={detected} but {len(steps)} step(s) listed",
        )
    return JudgeVerdict(
        True,
        backtracking_detected=detected,
        steps=steps,
        reasons=reasons,
        confidence=float(confidence),
        final_answer=str(final_answer),
        overall_reasoning=overall,
    )


def _verdict_row(trace_id: str, labeler: str, verdict: JudgeVerdict, raw: str | None) -> dict:
    return {
        "trace_id": trace_id,
        "labeler": labeler,
        "backtracking_detected": verdict.backtracking_detected,
        "steps": verdict.steps if verdict.valid else None,
        "reasons": verdict.reasons if verdict.valid else None,
        "confidence": verdict.confidence,
        "final_answer": verdict.final_answer,
        "overall_reasoning": verdict.overall_reasoning,
        "valid": verdict.valid,
        "error": verdict.error,
        "raw": raw,
    }


def _valid_done(store: Store, labeler: str) -> set[str]:
    if not store.has("judgments"):
        return set()
    frame = store.read(
        "judgments", columns=["trace_id", "labeler", "valid"], filters={"labeler": labeler}
    )
    return set(frame.loc[frame["valid"].fillna(False).astype(bool), "trace_id"])


def _offline_rows(
    trace_id: str, texts: list[str], family: str, labeler: str
) -> list[dict[str, Any]]:
    """The ``judgments`` row of an offline labeler (``lexical`` or ``cues``) for one trace."""
    from legival_core.metrics.backtracking import context_reasons, lexical_backtracking

    if labeler == LEXICAL:
        flagged = lexical_backtracking(texts, family)
        reasons = [f"opens with a revision cue: {texts[n - 1][:40]!r}" for n in flagged]
    else:
        found = context_reasons(texts, family)
        flagged, reasons = list(found), list(found.values())
    verdict = JudgeVerdict(True, bool(flagged), flagged, reasons)
    return [_verdict_row(trace_id, labeler, verdict, None)]


@register_stage(
    "judge",
    reads=("problems", "traces", "steps"),
    writes=("judgments",),
    help="backtracking labels: LLM judge on numbered steps, and the offline detectors",
)
def run_judge(ctx: StageContext) -> StageResult:
    from precompute.backends import GenerationRequest

    cfg = ctx.config.judge
    result = StageResult("judge")
    steps = read_required(ctx.store, "steps", ["trace_id", "step", "text"], "judge", "segment")
    traces = read_or_empty(ctx.store, "traces", ["trace_id", "problem_id"])
    problem_of = dict(zip(traces["trace_id"], traces["problem_id"], strict=True))
    problems = problem_rows(ctx.store)
    steps = shard_rows(steps, ctx.shard).sort_values(["trace_id", "step"])
    texts = {tid: g["text"].astype(str).tolist() for tid, g in steps.groupby("trace_id")}
    for trace_id in texts:
        if trace_id not in problem_of:
            raise StageError(f"table 'steps', trace {trace_id}: not in table 'traces'")

    labelers: list[str] = [name for name in OFFLINE if name in cfg.labelers]
    if "llm" in cfg.labelers:
        if cfg.model is None:
            raise StageError(f"{ctx.config.source}: [judge] labelers has 'llm' but no engine/model")
        labelers.append(labeler_name(cfg.model.name))
    plan: dict[str, list[str]] = {}
    for name in labelers:
        done = _valid_done(ctx.store, name)
        plan[name] = [t for t in texts if t not in done]
    result.todo = sum(len(v) for v in plan.values())
    result.skipped = sum(len(texts) - len(v) for v in plan.values())
    bar = ctx.bar(result.todo, "judge", "trace")
    invalid = 0
    with BatchWriter(ctx.store, "judgments", "judge", 64) as writer:
        for labeler in OFFLINE:
            for trace_id in plan.get(labeler, []):
                family = task_of(problems[problem_of[trace_id]]).family
                writer.add_group(_offline_rows(trace_id, texts[trace_id], family, labeler))
                bar.update(1)
        writer.flush()
        if cfg.model is not None and "llm" in cfg.labelers:
            name = labeler_name(cfg.model.name)
            engine = ctx.engines.get(cfg.model)
            writer.batch_size = cfg.batch_size
            for batch in chunks(plan[name], cfg.batch_size):
                requests = []
                for trace_id in batch:
                    problem = problems[problem_of[trace_id]]
                    task = task_of(problem)
                    requests.append(
                        GenerationRequest(
                            f"{trace_id}|{name}",
                            judge_messages(
                                problem["prompt"], texts[trace_id], task.backtracking_rubric
                            ),
                            max_tokens=cfg.model.max_tokens,
                            temperature=cfg.model.temperature,
                            top_p=cfg.model.top_p,
                            repetition_penalty=cfg.model.repetition_penalty,
                            seed=cfg.model.seed,
                        )
                    )
                for trace_id, completion in zip(batch, engine.generate(requests), strict=True):
                    if not completion.ok:
                        ctx.logger.warning("judge failed for %s: %s", trace_id, completion.error)
                        verdict = JudgeVerdict(False, error=f"engine: {completion.error}")
                    else:
                        verdict = parse_verdict(completion.text, len(texts[trace_id]))
                    invalid += not verdict.valid
                    writer.add(_verdict_row(trace_id, name, verdict, completion.text))
                bar.update(len(batch))
    bar.close()
    result.written["judgments"] = writer.written
    if invalid:
        result.notes.append(
            f"{invalid} judge answer(s) invalid (kept with raw text; rerun retries)"
        )
    if cfg.model is not None:
        result.provenance = {
            "models": {
                labeler_name(cfg.model.name): {"engine": cfg.model.engine, "model": cfg.model.model}
            },
            "sampling": {labeler_name(cfg.model.name): cfg.model.sampling()},
        }
    result.provenance["labelers"] = labelers
    return result
