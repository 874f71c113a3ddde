"""CHAMP, read from the ``champ-dataset`` package: problems, human solutions, recorded model
solutions and human first-wrong-step annotations — real data that works offline.

CHAMP (Mao, Kim & Zhou, 2024; MIT licence) ships one JSON file inside the package
(``champ_dataset/dataset_files/v0.json``). What it holds, as counted by :func:`champ_counts`:

* 270 competition problems in 5 categories, each with a gold answer (free text, e.g.
  ``"C(10, 5), or equivalently 252"``) and a human step-by-step solution (1–18 steps).
* Recorded conversations of four models — GPT-3.5, GPT-4, GPT-4 Turbo, PaLM 2 Medium —
  under 18 prompt settings (``"0-Shot"``, ``"5-Shot"``, ``"No C w/o H"``, ...): 19,440 in all.
  Each conversation asks for a worked solution, then asks the model to "summarize the answer
  above in one sentence"; we take the solution message as the reasoning and the one-sentence
  summary as ``answer_text``. A solution cut off by the model's length limit carries the
  error ``LENGTH_CURRENT`` (then ``truncated`` is True and the summary is absent).
* First-wrong-step annotations (``fws_annotations``) for one model's solution per problem in
  each of two settings, ``"No C w/o H"`` and ``"Direct C w/ H"`` (540 in all). Each holds
  the annotated solution text, a character span ``[start_idx, end_idx)`` marking the first
  wrong step in it, or no span at all, which the package reads as "No mistake"; its
  ``author`` field names the model that wrote the text. The package does not name the
  annotators; the CHAMP paper describes the annotations as made by people.

How they map onto the store
    problems  ``champ/<identifier>``, task ``champ``; prompt = problem text; gold = answer;
              reference_solution = the human steps joined by newlines; workload = number of
              human solution steps (``workload_kind="gold_steps"``).
    traces    teachers ``gpt-3.5``, ``gpt-4``, ``gpt-4-turbo``, ``palm-2-medium`` (suffixed
              ``@<setting>`` for settings other than the default ``"0-Shot"``) and ``human``
              (the reference solution, answer = the gold answer); source ``champ:<setting>``
              (``champ:reference`` for the human one). tokens = cl100k_base count of the
              solution message (the package records no token counts).
    labels    :func:`champ_first_wrong_steps` gives one row per annotated trace, labeller
              ``"human"``: ``error_found``, the span inside ``traces.reasoning`` and the
              1-based step (``legival_core.text.segment``) where the wrong step starts. An
              annotation is attached to a trace only when its text equals the trace's
              reasoning exactly; the ``"0-Shot"`` and ``"No C w/o H"`` conversations are
              identical in the package, so the default traces receive the 270 ``"No C w/o H"``
              annotations. These are first-*error* labels, not backtracking labels, so they
              are not written into the ``judgments`` table.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from legival_core.store.frames import pandas_dtypes
from legival_core.store.schema import TABLES, trace_id_for, validate_frame
from legival_core.store.store import Store

__all__ = [
    "CHAMP_MODELS",
    "CHAMP_TOKENS",
    "DATASET",
    "DEFAULT_SETTING",
    "HUMAN_TEACHER",
    "ChampError",
    "champ_counts",
    "champ_first_wrong_steps",
    "champ_json_path",
    "champ_problems",
    "champ_settings",
    "champ_traces",
    "teacher_name",
    "write_champ",
]

DATASET = "champ"
DEFAULT_SETTING = "0-Shot"
HUMAN_TEACHER = "human"
#: CHAMP's model names -> teacher names in the store.
CHAMP_MODELS: dict[str, str] = {
    "GPT-3.5": "gpt-3.5",
    "GPT-4": "gpt-4",
    "GPT-4 Turbo": "gpt-4-turbo",
    "PaLM 2 Medium": "palm-2-medium",
}
_SUMMARY_REQUEST = "summarize the answer above in one sentence"


class ChampError(RuntimeError):
    """The CHAMP data cannot be read; the message says what to install or fix."""


@dataclass(frozen=True)
class _Conversation:
    solution: str | None
    summary: str | None
    truncated: bool


@dataclass(frozen=True)
class _Problem:
    identifier: str
    category: str
    text: str
    answer: str
    steps: tuple[str, ...]
    hints: tuple[str, ...]
    conversations: dict[str, _Conversation]
    fws: dict[str, tuple[str, int | None, int | None, str]]


def champ_json_path() -> Path:
    """Path of the JSON file inside the installed ``champ-dataset`` package."""
    spec = importlib.util.find_spec("champ_dataset")
    if spec is None or not spec.submodule_search_locations:
        raise ChampError(
            "CHAMP needs the package 'champ-dataset' (MIT): pip install champ-dataset==1.0.0"
        )
    for folder in spec.submodule_search_locations:
        path = Path(folder) / "dataset_files" / "v0.json"
        if path.is_file():
            return path
    raise ChampError("the installed 'champ-dataset' package has no dataset_files/v0.json")


def _clean(text: str | None, raw: str | None) -> str | None:
    # CHAMP marks maths with '@@' in the raw text; the plain text drops the markers.
    if text is not None:
        return text
    return raw.replace("@@", "") if raw is not None else None


def _conversation(messages: Sequence[dict[str, Any]]) -> _Conversation:
    """The solution (last model turn before the summary request) and the summary."""
    ask = next(
        (
            i
            for i in range(len(messages) - 1, -1, -1)
            if messages[i].get("role") == "User"
            and _SUMMARY_REQUEST in (messages[i].get("text") or "").lower()
        ),
        len(messages),
    )
    model_turns = [i for i, m in enumerate(messages) if str(m.get("role", "")).startswith("Model.")]
    before = [i for i in model_turns if i < ask]
    after = [i for i in model_turns if i > ask]
    if not before:
        return _Conversation(None, None, False)
    solution = messages[before[-1]]
    summary = messages[after[0]] if after else None
    return _Conversation(
        solution=solution.get("text"),
        summary=summary.get("text") if summary else None,
        truncated=solution.get("error") == "LENGTH_CURRENT",
    )


@functools.lru_cache(maxsize=1)
def _load() -> dict[str, _Problem]:
    path = champ_json_path()
    try:
        with path.open(encoding="utf-8") as handle:
            data = json.load(handle)
    except (OSError, json.JSONDecodeError) as err:
        raise ChampError(f"{path}: cannot read ({type(err).__name__}: {err})") from None
    problems: dict[str, _Problem] = {}
    for key, item in data.get("problems", {}).items():
        steps = tuple(
            _clean(s.get("_text"), s.get("_raw_text")) or ""
            for s in (item.get("solution") or {}).get("steps", [])
        )
        conversations = {
            name: _conversation(conv.get("messages") or [])
            for name, conv in (item.get("conversations") or {}).items()
        }
        fws = {
            name: (a.get("text") or "", a.get("start_idx"), a.get("end_idx"), a.get("author"))
            for name, a in (item.get("fws_annotations") or {}).items()
        }
        problems[key] = _Problem(
            identifier=item.get("identifier", key),
            category=item.get("category", ""),
            text=_clean(item.get("_text"), item.get("_raw_text")) or "",
            answer=_clean(item.get("_answer"), item.get("_raw_answer")) or "",
            steps=steps,
            hints=tuple(item.get("ch_list") or ()),
            conversations=conversations,
            fws=fws,
        )
    if not problems:
        raise ChampError(f"{path}: no problems found")
    return problems


def _natural_key(identifier: str) -> tuple[Any, ...]:
    return tuple(int(p) if p.isdigit() else p for p in re.split(r"(\d+)", identifier))


def _selected(limit: int | None, per_category: int | None = None) -> list[_Problem]:
    """The first ``limit`` problems in natural order, or the first ``per_category`` of every
    category (categories in alphabetical order), or all of them."""
    problems = sorted(_load().values(), key=lambda p: _natural_key(p.identifier))
    if per_category is not None:
        by_category: dict[str, list[_Problem]] = {}
        for problem in problems:
            by_category.setdefault(problem.category, []).append(problem)
        return [p for c in sorted(by_category) for p in by_category[c][: max(per_category, 0)]]
    return problems if limit is None else problems[: max(limit, 0)]


def category_dataset(category: str) -> str:
    """The dataset name of a CHAMP category, when categories are kept apart as datasets.

    >>> category_dataset("Number-Theory")
    'champ-number-theory'
    """
    return f"{DATASET}-{re.sub(r'[^a-z0-9]+', '-', category.lower()).strip('-')}"


def _dataset_of(problem: _Problem, by_category: bool) -> str:
    return category_dataset(problem.category) if by_category else DATASET


def problem_id(identifier: str) -> str:
    """Store id of a CHAMP problem.

    >>> problem_id("P_Inequality_1")
    'champ/P_Inequality_1'
    """
    return f"{DATASET}/{identifier}"


def teacher_name(model: str, setting: str = DEFAULT_SETTING) -> str:
    """Teacher name of a CHAMP model under a prompt setting.

    >>> teacher_name("GPT-4 Turbo")
    'gpt-4-turbo'
    >>> teacher_name("GPT-4", "5-Shot")
    'gpt-4@5-shot'
    """
    base = CHAMP_MODELS.get(model) or re.sub(r"[^a-z0-9.]+", "-", model.lower()).strip("-")
    if setting == DEFAULT_SETTING:
        return base
    return f"{base}@{re.sub(r'[^a-z0-9/]+', '-', setting.lower()).strip('-')}"


def champ_settings() -> list[str]:
    """The prompt settings that have recorded conversations, in the package's order."""
    seen: dict[str, None] = {}
    for problem in _load().values():
        for key in problem.conversations:
            seen.setdefault(key.partition("|")[2])
    return list(seen)


def champ_problems(
    limit: int | None = None, *, per_category: int | None = None, by_category: bool = False
) -> pd.DataFrame:
    """The CHAMP problems as rows of the ``problems`` table (see the module docstring).

    Args:
        limit: the first N problems only (natural order of identifiers).
        per_category: instead, the first N problems of each of the five categories.
        by_category: the dataset of a problem is its category (:func:`category_dataset`), so
            the app's cross-dataset views compare categories; else every problem is ``champ``.
    """
    rows = []
    for p in _selected(limit, per_category):
        rows.append(
            {
                "problem_id": problem_id(p.identifier),
                "dataset": _dataset_of(p, by_category),
                "task": "champ",
                "prompt": p.text,
                "gold": p.answer,
                "choices": None,
                "choice_seed": None,
                "workload": float(len(p.steps)) if p.steps else None,
                "workload_kind": "gold_steps" if p.steps else None,
                "reference_solution": "\n".join(p.steps),
                "meta": json.dumps(
                    {
                        "category": p.category,
                        "identifier": p.identifier,
                        "concepts_hints": list(p.hints),
                        "source": "champ-dataset 1.0.0 (MIT)",
                    },
                    sort_keys=True,
                ),
            }
        )
    frame = pd.DataFrame(rows, columns=TABLES["problems"].columns)
    validate_frame("problems", frame)
    return frame.astype(pandas_dtypes("problems"))


def _count(texts: list[str]) -> list[int | None]:
    from legival_core.text.tokens import count_tokens_many

    return list(count_tokens_many(texts))


def champ_traces(
    setting: str = DEFAULT_SETTING,
    *,
    models: Iterable[str] | None = None,
    include_human: bool = True,
    limit: int | None = None,
    count_tokens: bool = True,
    per_category: int | None = None,
    by_category: bool = False,
) -> pd.DataFrame:
    """Recorded model solutions (and the human reference) as rows of the ``traces`` table.

    Args:
        setting: a CHAMP prompt setting (:func:`champ_settings`); default ``"0-Shot"``.
        models: CHAMP model names (keys of :data:`CHAMP_MODELS`); default all four.
        include_human: add the human reference solution as teacher ``"human"``.
        limit: first N problems only (natural order of identifiers).
        count_tokens: fill ``tokens`` with the cl100k_base count of the reasoning.
        per_category, by_category: as in :func:`champ_problems`.
    """
    chosen = list(models) if models is not None else list(CHAMP_MODELS)
    unknown = [m for m in chosen if m not in CHAMP_MODELS]
    if unknown:
        raise ChampError(f"unknown CHAMP model(s) {unknown}; known: {list(CHAMP_MODELS)}")
    if setting not in champ_settings():
        raise ChampError(f"unknown CHAMP setting {setting!r}; known: {champ_settings()}")
    sampling = json.dumps({"setting": setting, "recorded_by": "CHAMP"}, sort_keys=True)
    rows: list[dict[str, Any]] = []
    for p in _selected(limit, per_category):
        pid = problem_id(p.identifier)
        dataset = _dataset_of(p, by_category)
        for model in chosen:
            conv = p.conversations.get(f"{model}|{setting}")
            if conv is None or not conv.solution:
                continue
            teacher = teacher_name(model, setting)
            rows.append(
                {
                    "trace_id": trace_id_for(teacher, pid, 0),
                    "problem_id": pid,
                    "dataset": dataset,
                    "teacher": teacher,
                    "sample": 0,
                    "reasoning": conv.solution,
                    "answer_text": conv.summary,
                    "raw": conv.solution,
                    "complete": not conv.truncated,
                    "tokens": None,
                    "truncated": conv.truncated,
                    "source": f"champ:{setting}",
                    "sampling": sampling,
                }
            )
        if include_human and p.steps:
            reasoning = "\n".join(p.steps)
            rows.append(
                {
                    "trace_id": trace_id_for(HUMAN_TEACHER, pid, 0),
                    "problem_id": pid,
                    "dataset": dataset,
                    "teacher": HUMAN_TEACHER,
                    "sample": 0,
                    "reasoning": reasoning,
                    "answer_text": p.answer,
                    "raw": reasoning,
                    "complete": True,
                    "tokens": None,
                    "truncated": False,
                    "source": "champ:reference",
                    "sampling": None,
                }
            )
    frame = pd.DataFrame(rows, columns=TABLES["traces"].columns)
    if count_tokens and len(frame):
        frame["tokens"] = _count(frame["reasoning"].tolist())
    validate_frame("traces", frame)
    return frame.astype(pandas_dtypes("traces"))


#: Columns of :func:`champ_first_wrong_steps` (judgments-like: keyed by trace and labeller).
FWS_COLUMNS = [
    "trace_id",
    "labeler",
    "teacher",
    "problem_id",
    "annotated",
    "error_found",
    "start",
    "end",
    "step",
    "wrong_step_text",
]


def champ_first_wrong_steps(
    setting: str = DEFAULT_SETTING,
    *,
    models: Iterable[str] | None = None,
    limit: int | None = None,
    segment_mode: str = "paper",
    per_category: int | None = None,
) -> pd.DataFrame:
    """Human first-wrong-step labels for the traces of ``setting`` (see the module docstring).

    One row per annotated trace: ``labeler="human"``, ``annotated`` = the CHAMP conversation
    the annotation was made on (``"GPT-4|No C w/o H"``), ``error_found`` (False = "No
    mistake"), ``start``/``end`` = the wrong step's character span in ``traces.reasoning``,
    ``step`` = 1-based number of the step (``legival_core.text.segment.split_steps``) containing
    ``start``, ``wrong_step_text`` = the annotated span.
    """
    from legival_core.text.segment import split_steps

    chosen = list(models) if models is not None else list(CHAMP_MODELS)
    rows: list[dict[str, Any]] = []
    for p in _selected(limit, per_category):
        pid = problem_id(p.identifier)
        for model in chosen:
            conv = p.conversations.get(f"{model}|{setting}")
            if conv is None or not conv.solution:
                continue
            for annotated, (text, start, end, _author) in p.fws.items():
                if annotated.partition("|")[0] != model or text != conv.solution:
                    continue
                step = None
                if start is not None:
                    spans = split_steps(conv.solution, segment_mode)
                    step = next(
                        (n for n, s in enumerate(spans, start=1) if s.end > start), len(spans)
                    )
                rows.append(
                    {
                        "trace_id": trace_id_for(teacher_name(model, setting), pid, 0),
                        "labeler": HUMAN_TEACHER,
                        "teacher": teacher_name(model, setting),
                        "problem_id": pid,
                        "annotated": annotated,
                        "error_found": start is not None,
                        "start": start,
                        "end": end,
                        "step": step,
                        "wrong_step_text": text[start:end] if start is not None else None,
                    }
                )
                break
    frame = pd.DataFrame(rows, columns=FWS_COLUMNS)
    for column in ("start", "end", "step"):
        frame[column] = frame[column].astype("Int64")
    frame["error_found"] = frame["error_found"].astype("bool")
    return frame


def champ_counts() -> dict[str, Any]:
    """What the installed package holds (numbers quoted in the module docstring and README)."""
    problems = _load()
    conversations = sum(len(p.conversations) for p in problems.values())
    annotations = [a for p in problems.values() for a in p.fws.values()]
    by_setting: dict[str, int] = {}
    for p in problems.values():
        for key in p.fws:
            setting = key.partition("|")[2]
            by_setting[setting] = by_setting.get(setting, 0) + 1
    return {
        "problems": len(problems),
        "with_gold": sum(bool(p.answer.strip()) for p in problems.values()),
        "with_human_solution": sum(bool(p.steps) for p in problems.values()),
        "settings": len(champ_settings()),
        "conversations": conversations,
        "truncated_solutions": sum(
            c.truncated for p in problems.values() for c in p.conversations.values()
        ),
        "fws_annotations": len(annotations),
        "fws_by_setting": by_setting,
        "fws_no_mistake": sum(a[1] is None for a in annotations),
    }


#: How the ``tokens`` of CHAMP traces were obtained (recorded in the provenance; read by
#: ``legival_core.store.provenance.token_sources``): the package records no token counts.
CHAMP_TOKENS = "counted: tiktoken cl100k_base count of the recorded solution"


def write_champ(
    store: Store,
    setting: str = DEFAULT_SETTING,
    *,
    models: Iterable[str] | None = None,
    include_human: bool = True,
    limit: int | None = None,
) -> dict[str, int]:
    """Write CHAMP problems and traces of ``setting`` into a results store; return row counts."""
    problems = champ_problems(limit=limit)
    traces = champ_traces(setting, models=models, include_human=include_human, limit=limit)
    store.write("problems", problems, stage="champ")
    store.write("traces", traces, stage="champ")
    store.record_stage(
        "champ",
        setting=setting,
        models=list(models) if models is not None else list(CHAMP_MODELS),
        teachers=sorted(traces["teacher"].unique().tolist()),
        include_human=include_human,
        source="champ-dataset 1.0.0 (MIT)",
        tokens=CHAMP_TOKENS,
    )
    return {"problems": len(problems), "traces": len(traces)}
