"""Small results stores for the app's tests, built through the real store API.

The inputs (problems, traces, steps, similarities, rollouts, judgments) are clearly synthetic:
three made-up teachers answer six made-up problems, and two made-up students continue their
correct traces with a fixed, readable success pattern. Everything derived from them
(``trace_efficiency``, ``trace_transfer``, ``teacher_metrics``, ``decomposition``) is computed
by the real metric code of the ``metrics`` stage, exactly as a pipeline run would.

One trace carries HTML/JS payloads in its reasoning, its answer and its teacher-facing text, so
the tests can check that the app shows them as text.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from legival_core.metrics.backtracking import lexical_backtracking
from legival_core.store.schema import trace_id_for
from legival_core.store.store import Store
from tests.run_scoped import copy_of

#: Teacher -> (Hugging Face id, transfer "skill").
#: The skill is the share of the trace a student needs to see before it answers correctly.
TEACHERS: dict[str, tuple[str, float]] = {
    "alpha-mini": ("org-a/Alpha-Mini", 0.30),
    "beta-large": ("org-b/Beta-Large", 0.70),
    "gamma-r1": ("org-a/Gamma-R1", 0.50),
}
STUDENTS: dict[str, float] = {"stu-small": 0.0, "stu-tiny": 0.2}
DATASETS = ("toy-math", "toy-logic")
XSS_SCRIPT = "<script>alert(1)</script>"
XSS_IMG = "<img src=x onerror=alert(1)>"
#: The trace whose reasoning carries the payloads (teacher, problem).
XSS_TRACE = ("gamma-r1", "toy-math/p2")
#: The trace the tiny student never solves (teacher, problem).
NEVER_SOLVED = ("alpha-mini", "toy-logic/p2")
#: A long trace for the inspector's paging (teacher, problem, number of steps).
LONG_TRACE = ("beta-large", "toy-logic/p1", 130)


@dataclass(frozen=True)
class ToyProblem:
    problem_id: str
    dataset: str
    prompt: str
    gold: str
    workload: float | None


PROBLEMS = (
    ToyProblem("toy-math/p0", "toy-math", "What is 2 + 3?", "5", 2.0),
    ToyProblem("toy-math/p1", "toy-math", "What is 4 * 6?", "24", 3.0),
    ToyProblem("toy-math/p2", "toy-math", "What is 10 - 7?", "3", 2.0),
    ToyProblem("toy-logic/p0", "toy-logic", "How many legs do 2 cats have?", "8", None),
    ToyProblem("toy-logic/p1", "toy-logic", "How many sides do 3 triangles have?", "9", None),
    ToyProblem("toy-logic/p2", "toy-logic", "How many wheels do 4 bikes have?", "8", None),
)

#: (teacher, problem) pairs the teacher gets wrong; everything else is right.
WRONG = {
    ("alpha-mini", "toy-math/p1"),
    ("beta-large", "toy-logic/p2"),
    ("gamma-r1", "toy-logic/p0"),
}


def _steps_for(teacher: str, problem: ToyProblem) -> list[str]:
    answer = problem.gold if (teacher, problem.problem_id) not in WRONG else "0"
    steps = [
        f"Let me read the question: {problem.prompt}",
        "I will work it out step by step.",
        "Wait, let me check the numbers again.",
        "The numbers are small, so I can count directly.",
        "Let me read the question again to be sure.",
        f"So the answer is \\boxed{{{answer}}}.",
    ]
    if (teacher, problem.problem_id) == XSS_TRACE:
        steps.insert(2, f"A model once wrote {XSS_SCRIPT} here.")
        steps.insert(3, f"And also {XSS_IMG} in its notes.")
    if (teacher, problem.problem_id) == LONG_TRACE[:2]:
        filler = [f"Counting item {i}: one more side is added." for i in range(LONG_TRACE[2] - 6)]
        steps = steps[:4] + filler + steps[4:]
    if teacher == "beta-large":
        # The large teacher restates itself: two extra near-duplicate steps.
        steps.insert(-1, "Let me read the question again, carefully.")
        steps.insert(-1, "I will work it out step by step, once more.")
    return steps


def _similarities(steps: list[str]) -> list[tuple[float | None, int | None]]:
    """Synthetic per-step redundancy: steps that repeat an earlier one get 0.9, others 0.3."""
    out: list[tuple[float | None, int | None]] = [(None, None)]
    for i, text in enumerate(steps[1:], start=1):
        words = set(re.findall(r"[a-z]+", text.lower()))
        best_j, best = 0, 0.0
        for j in range(i):
            other = set(re.findall(r"[a-z]+", steps[j].lower()))
            overlap = len(words & other) / max(1, len(words | other))
            if overlap > best:
                best_j, best = j, overlap
        out.append((0.9 if best >= 0.4 else 0.3, best_j))
    return out


def plotly_array(data: Any, dtype: Any = None) -> np.ndarray:
    """A Plotly 7 array of a chart's spec: a plain list (made an array of ``dtype``), or a
    ``{"dtype", "bdata"}`` base64 block, reshaped where it gives a ``shape``."""
    if isinstance(data, dict) and "bdata" in data:
        flat = np.frombuffer(base64.b64decode(data["bdata"]), data["dtype"])
        if "shape" in data:
            return flat.reshape([int(n) for n in str(data["shape"]).split(",")])
        return flat
    return np.asarray(data, dtype=dtype)


def step_rows(trace_id: str, texts: list[str]) -> list[dict[str, Any]]:
    """The steps table's rows of a trace whose reasoning is ``" ".join(texts)``: each text's
    number, its span in that reasoning, and the text."""
    rows, start = [], 0
    for index, text in enumerate(texts):
        rows.append(
            {"trace_id": trace_id, "step": index, "start": start, "end": start + len(text),
             "text": text}
        )  # fmt: skip
        start += len(text) + 1
    return rows


def write_trace_counts(store: Store, encoding: str = "cl100k_base") -> None:
    """``trace_counts`` for every trace of ``store``, as the segment stage counts them (its
    own function), from the store's traces and steps."""
    from precompute.stages.segment import count_encodings, trace_count_rows

    traces = store.read("traces", columns=["trace_id", "reasoning"])
    per_trace = (
        store.read("steps", columns=["trace_id"]).groupby("trace_id").size()
        if store.has("steps")
        else pd.Series(dtype=int)
    )
    rows = trace_count_rows(
        traces["trace_id"].tolist(),
        traces["reasoning"].tolist(),
        [int(per_trace.get(t, 0)) for t in traces["trace_id"]],
        count_encodings(encoding),
    )
    store.write("trace_counts", rows, stage="segment")


def build_store(
    path: str | Path, *, with_rollouts: bool = True, names: Mapping[str, str] | None = None
) -> Store:
    """A complete small store at ``path`` (inputs + derived tables), as :func:`write_store`
    writes it, and open.

    Each kind (``with_rollouts``, ``names``) is written once per test run and copied
    (:func:`tests.run_scoped.copy_of`): writing one finds every trace's leak step with
    math-verify, about 15 s on two cores, and nineteen places in the tests ask for one.
    """
    kind = json.dumps([with_rollouts, sorted((names or {}).items())])
    name = f"toy-store-{hashlib.sha256(kind.encode()).hexdigest()[:16]}"
    copy_of(
        name, lambda folder: write_store(folder, with_rollouts=with_rollouts, names=names), path
    )
    return Store.open(path)


def write_store(
    path: str | Path, *, with_rollouts: bool = True, names: Mapping[str, str] | None = None
) -> Store:
    """Write a complete small store at ``path`` (inputs + derived tables) and return it.

    ``names`` renames teachers, students, datasets and the judge's labeler as they are written
    (``{"alpha-mini": "<b>b</b>"}``): the hostile-name tests use it. Trace ids and problem ids
    keep the fixture's own names.
    """
    names = dict(names or {})

    def shown(name: str) -> str:
        return names.get(name, name)

    judge = shown("judge:toy-judge")
    from precompute.stages.common import problem_rows
    from precompute.stages.leaks import leak_table
    from precompute.stages.metrics import (
        decomposition_table,
        efficiency_table,
        teacher_table,
        transfer_table,
    )

    store = Store.create(path, config={"kind": "app test fixture", "synthetic": True})
    problems = pd.DataFrame(
        {
            "problem_id": [p.problem_id for p in PROBLEMS],
            "dataset": [shown(p.dataset) for p in PROBLEMS],
            "task": "math",
            "prompt": [p.prompt for p in PROBLEMS],
            "gold": [p.gold for p in PROBLEMS],
            "workload": [p.workload for p in PROBLEMS],
            "workload_kind": ["gold_steps" if p.workload else None for p in PROBLEMS],
        }
    )
    traces, grades, steps, similarity, judgments, rollouts = [], [], [], [], [], []
    for teacher, (hf_id, skill) in TEACHERS.items():
        for problem in PROBLEMS:
            trace_id = trace_id_for(teacher, problem.problem_id)
            texts = _steps_for(teacher, problem)
            reasoning = " ".join(texts)
            correct = (teacher, problem.problem_id) not in WRONG
            traces.append(
                {
                    "trace_id": trace_id,
                    "problem_id": problem.problem_id,
                    "dataset": shown(problem.dataset),
                    "teacher": shown(teacher),
                    "sample": 0,
                    "reasoning": reasoning,
                    "answer_text": f"Final: {problem.gold if correct else '0'}",
                    "complete": True,
                    "tokens": 12 * len(texts) + len(teacher),
                    "truncated": teacher == "beta-large" and not correct,
                    "source": f"test-fixture:{hf_id}",
                }
            )
            grades.append(
                {
                    "trace_id": trace_id,
                    "extracted": problem.gold if correct else "0",
                    "correct": correct,
                    "score": float(correct),
                    "status": "ok",
                }
            )
            steps += [
                {**row, "tokens": len(row["text"].split())} for row in step_rows(trace_id, texts)
            ]
            for index, (sim, matched) in enumerate(_similarities(texts)):
                similarity.append(
                    {
                        "trace_id": trace_id,
                        "step": index,
                        "max_similarity": sim,
                        "matched_step": matched,
                    }
                )
            lexical = lexical_backtracking(texts, "math")
            judged = sorted({*lexical, len(texts) // 2})
            judgments += [
                {
                    "trace_id": trace_id,
                    "labeler": "lexical",
                    "backtracking_detected": bool(lexical),
                    "steps": lexical,
                    "valid": True,
                },
                {
                    "trace_id": trace_id,
                    "labeler": judge,
                    "backtracking_detected": True,
                    "steps": judged,
                    "reasons": ["re-checks earlier work"] * len(judged),
                    "confidence": 0.8,
                    "valid": True,
                },
            ]
            if (teacher, problem.problem_id) == XSS_TRACE:
                judgments.append(
                    {
                        "trace_id": trace_id,
                        "labeler": "human",
                        "backtracking_detected": True,
                        "steps": [3],
                        "valid": True,
                    }
                )
            if correct and with_rollouts:
                rollouts += _rollouts(trace_id, teacher, problem, len(texts), skill, shown)
    store.write("problems", problems, stage="fixture")
    store.write("traces", pd.DataFrame(traces), stage="fixture")
    store.write("grades", pd.DataFrame(grades), stage="fixture")
    store.write("steps", pd.DataFrame(steps), stage="fixture")
    store.write("similarity", pd.DataFrame(similarity), stage="fixture")
    store.write("judgments", pd.DataFrame(judgments), stage="fixture")
    rollout_frame = pd.DataFrame(rollouts)
    if with_rollouts:
        store.write("rollouts", rollout_frame, stage="fixture")

    write_trace_counts(store)
    # Derived tables: the real metric code of the ``metrics`` stage.
    trace_frame = store.read("traces")
    efficiency = efficiency_table(
        trace_frame,
        store.read("grades"),
        store.read("steps"),
        store.read("similarity"),
        store.read("judgments"),
        threshold=0.8,
        labeler=judge,
        encoding="cl100k_base",
    )
    store.write("trace_efficiency", efficiency, stage="metrics")
    rollout_frame = store.read("rollouts") if with_rollouts else pd.DataFrame()
    if with_rollouts:
        # The leak steps too, as the stage stores them (the inspector shows the stored one).
        leaks = leak_table(
            rollout_frame, trace_frame, store.read("steps"), problem_rows(store), timeout_s=10.0
        )
        store.write(
            "trace_transfer",
            transfer_table(rollout_frame, "paper", "interpolate", leaks),
            stage="metrics",
        )
    teacher = teacher_table(efficiency, rollout_frame, "paper", "interpolate", 0)
    fixture_name = {shown(t): t for t in TEACHERS}
    teacher["hf_id"] = [TEACHERS[fixture_name[t]][0] for t in teacher["teacher"]]
    store.write("teacher_metrics", teacher, stage="metrics")
    from legival_core.views import decomposition_instances

    instances = decomposition_instances(trace_frame, store.read("grades"), problems)
    store.write("decomposition", decomposition_table(instances), stage="metrics")
    store.record_stage("fixture", note="synthetic inputs for the app's tests")
    return store


def _rollouts(
    trace_id: str,
    teacher: str,
    problem: ToyProblem,
    m: int,
    skill: float,
    shown: Callable[[str], str] = str,
) -> list[dict[str, object]]:
    """Prefixes k = 0..m (every step): correct once k/m >= skill + the student's handicap + a
    tenth per problem index, with one deliberate drop (a regression) for the tiny student and
    one trace the tiny student never solves."""
    rows = []
    index = int(problem.problem_id.rsplit("p", 1)[1])
    for student, handicap in STUDENTS.items():
        for k in range(m + 1):
            solved = k >= 1 and k / m >= min(1.0, skill + handicap + 0.1 * index)
            if student == "stu-tiny" and k == m - 1:
                solved = False
            if student == "stu-tiny" and (teacher, problem.problem_id) == NEVER_SOLVED:
                solved = False
            rows.append(
                {
                    "trace_id": trace_id,
                    "student": shown(student),
                    "k": k,
                    "sample": 0,
                    "teacher": shown(teacher),
                    "dataset": shown(problem.dataset),
                    "problem_id": problem.problem_id,
                    "m": m,
                    "completion": "answer " + ("right" if solved else "wrong"),
                    "correct": float(solved),
                    "status": "ok",
                }
            )
    return rows


def add_oversight_tables(store: Store, names: Mapping[str, str] | None = None) -> None:
    """Write rewards, sabotaged copies and a made-up monitor's verdicts into ``store``.

    Rewards are a fixed function of each trace (two reward models); sabotaged copies are the
    real sabotage injections where a trace offers a place, else a fixture rewrite whose edits
    come from the stage's own character diff; the monitor's skill differs by teacher.
    ``names`` renames reward models, the monitor and sabotage kinds as in :func:`build_store`.
    """
    import json

    from legival_core.oversight.sabotage import sabotage
    from precompute.stages.monitor import diff_edits, sabotage_seed

    names = dict(names or {})
    fixture_name = {names.get(t, t): t for t in TEACHERS}

    def shown(name: str) -> str:
        return names.get(name, name)

    traces = store.read("traces")
    grades = store.read("grades").set_index("trace_id")
    steps = store.read("steps").sort_values(["trace_id", "step"])
    spans = {t: list(zip(g["start"], g["end"], strict=True)) for t, g in steps.groupby("trace_id")}
    # Rewards: a fixed function of the trace (length and teacher), two reward models.
    rewards = []
    for index, row in enumerate(traces.itertuples()):
        base = len(row.reasoning) / 100 + (index % 5) * 0.37
        rewards.append({"trace_id": row.trace_id, "reward_model": shown("rm-a"), "score": base})
        rewards.append({"trace_id": row.trace_id, "reward_model": shown("rm-b"), "score": -base})
    store.write("rewards", pd.DataFrame(rewards), stage="fixture")

    sabotaged, verdicts = [], []
    skill = {"alpha-mini": 1.0, "beta-large": 0.0, "gamma-r1": 0.5}
    for row in traces.sort_values("trace_id").itertuples():
        correct = bool(grades.loc[row.trace_id, "correct"])
        teacher = fixture_name[row.teacher]
        made = sabotage(
            row.reasoning, spans[row.trace_id], "number", sabotage_seed(0, row.trace_id)
        )
        copies = []
        if correct and made is not None:
            copies.append((shown("number"), made.step, made.edits, made.text, made.description))
        if correct:
            rewrite = row.reasoning.replace("step by step", "in one go")
            edits = diff_edits(row.reasoning, rewrite, spans[row.trace_id])
            copies.append((shown("llm_rewrite"), edits[0].step, edits, rewrite, "fixture rewrite"))
        for kind, step, edits, text, description in copies:
            sabotaged.append(
                {
                    "trace_id": row.trace_id,
                    "kind": kind,
                    "seed": sabotage_seed(0, row.trace_id),
                    "teacher": row.teacher,
                    "dataset": row.dataset,
                    "step": step,
                    "changed_steps": sorted({e.step for e in edits}),
                    "edits": json.dumps([e.__dict__ for e in edits]),
                    "text": text,
                    "description": description,
                }
            )
        variants = (["original"] + [f"sabotage:{c[0]}" for c in copies]) if correct else ["natural"]
        for number, variant in enumerate(variants):
            flawed = variant != "original"
            catches = skill[teacher] == 1.0 or (skill[teacher] == 0.5 and number % 2)
            verdict = "invalid" if (flawed and catches) or skill[teacher] == 0.0 else "valid"
            malformed = teacher == "gamma-r1" and variant == "original" and number == 0
            verdicts.append(
                {
                    "trace_id": row.trace_id,
                    "variant": variant,
                    "monitor": shown("weak-m"),
                    "teacher": row.teacher,
                    "dataset": row.dataset,
                    "verdict": None if malformed else verdict,
                    "blamed_step": 2 if verdict == "invalid" and not malformed else None,
                    "steps": len(spans[row.trace_id]),
                    "raw": "<b>no idea</b>" if malformed else f"VERDICT: {verdict}",
                    "valid_format": not malformed,
                }
            )
    store.write("sabotaged", pd.DataFrame(sabotaged), stage="fixture")
    store.write("monitor_verdicts", pd.DataFrame(verdicts), stage="fixture")


#: Where the hostile names' images point; the browser test serves it and counts the requests.
PIXEL = "http://127.0.0.1:8765"


def hostile_names(pixel: str = PIXEL) -> dict[str, str]:
    """Fixture name -> a name that is Markdown, KaTeX, a Streamlit directive or HTML.

    Each kind of name a page shows (teacher, dataset, student, labeler, reward model, monitor,
    sabotage kind) gets one; an image would make the browser fetch ``pixel``.
    """
    return {
        "alpha-mini": f"![t]({pixel}/t.png)",
        "beta-large": '<a href="https://evil.example/p">X</a>',
        "gamma-r1": "$x^2$ :red[x] :material/warning: <b>b</b>",
        "toy-math": f":red[x] $x^2$ ![d]({pixel}/d.png)",
        "toy-logic": '<b>b</b> <a href="https://evil.example/d">D</a>',
        "stu-small": f"![s]({pixel}/s.png) $x^2$",
        "stu-tiny": ':material/warning: <a href="https://evil.example/s">S</a>',
        "judge:toy-judge": f"judge:![l]({pixel}/l.png) $x^2$ :red[x]",
        "rm-a": f"![r]({pixel}/r.png) <b>b</b>",
        "rm-b": "$x^2$ :material/warning:",
        "weak-m": f'![m]({pixel}/m.png) <a href="https://evil.example/m">M</a>',
        "number": f"$x^2$ ![k]({pixel}/k.png)",
        "llm_rewrite": ":red[x] <b>b</b>",
    }


def build_hostile_name_store(path: str | Path, pixel: str = PIXEL) -> Store:
    """The full toy store (with the oversight tables) under :func:`hostile_names`."""
    names = hostile_names(pixel)
    store = build_store(path, names=names)
    add_oversight_tables(store, names)
    return store
