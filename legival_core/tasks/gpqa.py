"""GPQA multiple-choice science questions: the answer is an option letter.

The options are shuffled with a recorded seed (:func:`shuffle_choices`), so the letter of the
right option is reproducible; the authors' release shuffled without a seed (docs/grading.md). The
model's
answer is the last option letter it gives in a recognised form: ``Answer: (C)``, ``the answer
is C``, ``\\boxed{C}`` (what the forcing cue produces).

Reference: Rein et al., GPQA (arXiv 2311.12022); Legi-Val, arXiv 2603.20508 (§2 science rubric).
"""

from __future__ import annotations

import hashlib
import random
import re
import string
from collections.abc import Mapping, Sequence
from functools import lru_cache
from typing import Any

from legival_core.tasks.base import Task, problem_field, register_task

DEFAULT_LETTERS = "ABCD"

SCIENCE_BACKTRACKING_RUBRIC = """\
Count a step as backtracking when the solver revises a scientific claim or plan it made \
earlier rather than building on it. Typical signs: it takes something back (often with \
"Actually", "Wait", "On second thought", "Hmm, no"); it corrects a constant, a unit, a sign or a \
formula it had used; it notices a condition or constraint of the question it had overlooked and \
redoes the reasoning; or it switches to a different physical, chemical or biological framework \
or model. Do not count a small arithmetic correction that keeps the approach, a check that \
confirms the earlier result, or moving on to the next option to rule it out."""


def shuffle_choices(correct: str, incorrect: Sequence[str], seed: int) -> tuple[list[str], str]:
    """Shuffle the right option among the wrong ones with ``random.Random(seed)``.

    Args:
        correct: the right option's text.
        incorrect: the wrong options' texts.
        seed: the seed to record with the problem (``problems.choice_seed``).

    Returns:
        ``(choices, gold_letter)``: the options in their shown order and the letter (A, B, …)
        of the right one. The same inputs and seed always give the same result.

    Example:
        >>> shuffle_choices("right", ["w1", "w2", "w3"], seed=7)
        (['w3', 'w1', 'right', 'w2'], 'C')
    """
    options = [correct, *incorrect]
    if len(options) > len(string.ascii_uppercase):
        raise ValueError(f"at most 26 options can be lettered, got {len(options)}")
    order = list(range(len(options)))
    random.Random(seed).shuffle(order)
    # Track the position of index 0, not the text: a wrong option may repeat the right text.
    gold_letter = string.ascii_uppercase[order.index(0)]
    return [options[i] for i in order], gold_letter


def choice_seed_for(problem_id: str, base_seed: int = 0) -> int:
    """A stable per-problem seed (31 bits) derived from the problem id and a base seed.

    Example:
        >>> choice_seed_for("gpqa-1") == choice_seed_for("gpqa-1")
        True
    """
    digest = hashlib.blake2b(f"{base_seed}\x1f{problem_id}".encode(), digest_size=4).digest()
    return int.from_bytes(digest, "big") & 0x7FFFFFFF


@lru_cache(maxsize=32)
def _answer_patterns(letters: str) -> tuple[re.Pattern[str], re.Pattern[str]]:
    letter_class = f"[{re.escape(letters)}]"
    stated = re.compile(
        r"(?i:answer|option|choice)\s*(?i:is|:)?\s*[*:]*\s*(?i:option\s*)?\(?"
        rf"({letter_class})\)?(?![A-Za-z0-9])"
    )
    boxed = re.compile(
        r"\\boxed\s*\{\s*(?:\\text(?:bf)?\s*\{\s*)?\(?" rf"({letter_class})\)?(?![A-Za-z0-9])"
    )
    return stated, boxed


def _letters_for(problem: Mapping[str, Any] | None) -> str:
    choices = problem.get("choices") if problem is not None else None
    if choices is None or len(choices) == 0:
        return DEFAULT_LETTERS
    return string.ascii_uppercase[: len(choices)]


def normalise_letter(answer: str) -> str:
    """``" (c). "`` -> ``"C"``: the bare upper-case letter of an option label."""
    return re.sub(r"[\s().*:]", "", answer).upper()


@register_task
class GPQATask(Task):
    """GPQA: a question with lettered options; the answer is the letter of the right one."""

    name = "gpqa"
    family = "science"
    system_prompt = (
        "You are an expert scientist. Reason through each question step by step before you "
        "commit to one of the options."
    )
    stop_strings = tuple(
        stop
        for letter in DEFAULT_LETTERS
        for stop in (f"Answer: ({letter})", f"Answer: {letter}\n", f"\\boxed{{{letter}}}")
    )
    backtracking_rubric = SCIENCE_BACKTRACKING_RUBRIC
    reads_prose_answers = False  # the answer is an option letter, found above
    fixed_question_type = "choice"

    def instructions(self, problem: Mapping[str, Any]) -> str:
        """The lettered options, then how to state the chosen letter."""
        choices = list(problem_field(problem, "choices", task=self.name))
        options = "\n".join(
            f"({letter}) {choice}"
            for letter, choice in zip(string.ascii_uppercase, choices, strict=False)
        )
        return (
            f"{options}\n\n"
            "Think it through step by step. End with a final line of the form "
            "'Answer: (X)', where X is the letter of the option you choose."
        )

    def extract_answer(self, text: str, *, problem: Mapping[str, Any] | None = None) -> str | None:
        """The last option letter stated as an answer (``Answer: (C)``, ``\\boxed{C}``, …).

        Example:
            >>> GPQATask().extract_answer("B looks tempting, but... Answer: (C)")
            'C'
        """
        stated, boxed = _answer_patterns(_letters_for(problem))
        candidates = [*stated.finditer(text), *boxed.finditer(text)]
        if not candidates:
            return None
        return max(candidates, key=lambda match: match.start()).group(1)

    @staticmethod
    def score_answer(extracted: str, gold: str, options: Mapping[str, Any]) -> float:
        gold_letter = normalise_letter(gold)
        if len(gold_letter) != 1 or gold_letter not in string.ascii_uppercase:
            raise ValueError(f"GPQA gold must be an option letter, got {gold!r}")
        return 1.0 if normalise_letter(extracted) == gold_letter else 0.0
