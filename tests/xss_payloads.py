"""Hostile strings for the app's tests, and a results store that carries them in every text field.

Model text, teacher/dataset/student names and manifest strings all come from files a stranger
may have written, so the app must show each of these as inert text. Every payload that would
run script announces itself through ``alert(...)`` (a browser dialog) or by setting
``window.__xss``, so a test can tell whether anything ran.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

#: name -> payload. Covers HTML/script injection, event handlers, javascript: URLs in HTML,
#: Markdown and LaTeX, breaking out of a surrounding element or attribute, Streamlit's own
#: Markdown extensions, and a very long string.
PAYLOADS: dict[str, str] = {
    "script": "<script>alert('script')</script>",
    "img_onerror": "<img src=x onerror=alert('img')>",
    "svg_onload": "<svg onload=alert('svg')>",
    "iframe_js": "<iframe src=\"javascript:alert('iframe')\"></iframe>",
    "a_js": "<a href=\"javascript:alert('a')\">click me</a>",
    "markdown_js_link": "[click me](javascript:alert('md'))",
    "markdown_autolink": "<javascript:alert('autolink')>",
    "markdown_image": "![x](javascript:alert('mdimg'))",
    "close_div": "</div></span><script>window.__xss='close_div'</script><div>",
    "attribute_break": "\"'><img src=x onerror=\"window.__xss='attr'\">",
    "details_ontoggle": "<details open ontoggle=alert('details')>",
    "style_block": "<style>body{display:none !important}</style>",
    "streamlit_color": ":red[pwned] :material/warning: :rainbow-background[loud]",
    "latex_href": "$\\href{javascript:alert('latex')}{click}$",
    "latex_html": "$$\\htmlData{onclick=alert('katex')}{x}$$",
    "entity": "&lt;img src=x onerror=alert('entity')&gt;",
    "javascript_url": "javascript:alert('url')",
    "data_url": "data:text/html,<script>alert('data')</script>",
    "plotly_link": "<a href='javascript:alert(\"plotly\")'>legend</a>",
    "null_and_rtl": "abc\x00\u202edef\u200b",
}
#: A 100 kB string with a payload at the end (long traces must not break rendering either).
LONG = ("a very long line of reasoning without a full stop " * 2100)[:100_000] + PAYLOADS[
    "img_onerror"
]

TEACHERS = (
    "<img src=x onerror=alert('teacher')>",
    "[teacher](javascript:alert('teacher-md'))",
    "gpt-x <svg onload=alert('teacher-svg')>",
)
DATASETS = ("</div><script>alert('dataset')</script>", ":red[ds] $\\href{javascript:alert(1)}{x}$")
STUDENTS = ("<svg onload=alert('student')>", "plain-student")
JUDGE_LABELER = "judge:<img src=x onerror=alert('labeler')>"
HF_IDS = (
    "javascript:alert('hf')",
    "https://huggingface.co/\"><img src=x onerror=alert('hf2')>",
    "data:text/html,<script>alert('hf3')</script>",
)
#: CSS selectors of elements that only an injected payload would create.
INJECTED_SELECTORS = (
    "img[src='x']",
    "[onerror]",
    "[onload]",
    "[ontoggle]",
    "[onclick*='alert']",
    "iframe[src^='javascript']",
    "a[href^='javascript']",
    "a[href^='data:']",
    "svg[onload]",
    "details[ontoggle]",
)


def _reasoning(teacher_index: int, problem_index: int) -> list[str]:
    names = list(PAYLOADS)
    picked = [names[(teacher_index * 7 + problem_index * 3 + j) % len(names)] for j in range(6)]
    sentences = ["Let me read the question carefully."]
    sentences += [
        f"Note {j}: the text says {PAYLOADS[name]} here." for j, name in enumerate(picked)
    ]
    sentences += ["Wait, let me check that again.", "So the answer is \\boxed{4}."]
    return sentences


def build_hostile_store(path: str | Path) -> Path:
    """A complete small store (inputs through the real ``segment`` code, derived tables through
    the real ``metrics`` stage) with hostile strings in every text field the app shows."""
    from legival_core.metrics.backtracking import lexical_backtracking
    from legival_core.store.schema import trace_id_for
    from legival_core.store.store import Store
    from precompute.config import ExperimentConfig
    from precompute.stages import StageContext, run_stage
    from precompute.stages.segment import step_rows

    config = {
        "experiment": {"name": PAYLOADS["script"], "seed": 0},
        "note": PAYLOADS["img_onerror"],
        "metrics": {"primary_labeler": "lexical"},
    }
    store = Store.create(path, config=config)
    problems, traces, grades, steps, similarity, judgments, rollouts, rewards = (
        [], [], [], [], [], [], [], []
    )  # fmt: skip
    for p in range(4):
        dataset = DATASETS[p % 2]
        problems.append(
            {
                "problem_id": f"{dataset}/p{p}",
                "dataset": dataset,
                "task": "math",
                "prompt": f"What is 2 + 2? {PAYLOADS['close_div']} {PAYLOADS['markdown_js_link']}",
                "gold": "4",
                "workload": 2.0,
                "workload_kind": "gold_steps",
                "reference_solution": PAYLOADS["svg_onload"],
                "meta": json.dumps({"source": PAYLOADS["a_js"]}),
            }
        )
    for t, teacher in enumerate(TEACHERS):
        for p, problem in enumerate(problems):
            trace_id = trace_id_for(teacher, problem["problem_id"])
            sentences = _reasoning(t, p)
            if (t, p) == (0, 0):
                sentences.insert(1, LONG)
            reasoning = " ".join(sentences)
            correct = (t + p) % 4 != 3
            traces.append(
                {
                    "trace_id": trace_id,
                    "problem_id": problem["problem_id"],
                    "dataset": problem["dataset"],
                    "teacher": teacher,
                    "sample": 0,
                    "reasoning": reasoning,
                    "answer_text": f"The answer is 4. {PAYLOADS['attribute_break']}",
                    "raw": reasoning,
                    "complete": True,
                    "tokens": 40 + 5 * t + p,
                    "truncated": False,
                    "source": f"hostile:{PAYLOADS['javascript_url']}",
                    "sampling": json.dumps({"note": PAYLOADS["script"]}),
                }
            )
            grades.append(
                {
                    "trace_id": trace_id,
                    "extracted": PAYLOADS["img_onerror"] if not correct else "4",
                    "correct": correct,
                    "score": float(correct),
                    "status": "ok",
                }
            )
            rows = step_rows(trace_id, reasoning, "paper", "cl100k_base")
            steps += rows
            for row in rows:
                step = int(row["step"])  # type: ignore[call-overload]
                similarity.append(
                    {
                        "trace_id": trace_id,
                        "step": step,
                        "max_similarity": None if step == 0 else 0.3 + 0.6 * (step % 2),
                        "matched_step": None if step == 0 else step - 1,
                    }
                )
            texts = [str(r["text"]) for r in rows]
            flagged = lexical_backtracking(texts, "math")
            judgments += [
                {"trace_id": trace_id, "labeler": "lexical", "steps": flagged,
                 "backtracking_detected": bool(flagged), "valid": True},
                {"trace_id": trace_id, "labeler": JUDGE_LABELER, "steps": [1],
                 "backtracking_detected": True, "reasons": [PAYLOADS["script"]],
                 "overall_reasoning": PAYLOADS["img_onerror"], "valid": True,
                 "raw": PAYLOADS["close_div"]},
            ]  # fmt: skip
            rewards.append(
                {"trace_id": trace_id, "reward_model": PAYLOADS["svg_onload"], "score": 0.1 * t}
            )
            if not correct:
                continue
            m = len(rows)
            for s, student in enumerate(STUDENTS):
                for k in range(m + 1):
                    solved = k / max(m, 1) >= 0.3 + 0.2 * s + 0.1 * t
                    rollouts.append(
                        {
                            "trace_id": trace_id, "student": student, "k": k, "sample": 0,
                            "teacher": teacher, "dataset": problem["dataset"],
                            "problem_id": problem["problem_id"], "m": m,
                            "completion": f"{PAYLOADS['script']} answer {4 if solved else 5}",
                            "extracted": "4" if solved else PAYLOADS["img_onerror"],
                            "correct": float(solved), "status": "ok",
                        }
                    )  # fmt: skip
    for name, rows in (
        ("problems", problems), ("traces", traces), ("grades", grades), ("steps", steps),
        ("similarity", similarity), ("judgments", judgments), ("rollouts", rollouts),
        ("rewards", rewards),
    ):  # fmt: skip
        store.write(name, pd.DataFrame(rows), stage="hostile-fixture")

    metrics_config = ExperimentConfig.from_dict(
        {"metrics": {"primary_labeler": "lexical"}}, source="hostile-fixture"
    )
    ctx = StageContext(store=store, config=metrics_config, progress=False)
    from tests.app_fixtures import write_trace_counts

    write_trace_counts(store)  # what the segment stage counts from the texts
    run_stage("leaks", ctx)
    run_stage("metrics", ctx)
    teacher_metrics = store.read("teacher_metrics")
    order = {name: i for i, name in enumerate(TEACHERS)}
    teacher_metrics["hf_id"] = [HF_IDS[order[t] % len(HF_IDS)] for t in teacher_metrics["teacher"]]
    store.write("teacher_metrics", teacher_metrics, stage="hostile-fixture")
    store.record_stage(
        "hostile-fixture",
        note=PAYLOADS["script"],
        models={PAYLOADS["img_onerror"]: PAYLOADS["markdown_js_link"]},
        config=PAYLOADS["close_div"],
    )
    return Path(path)
