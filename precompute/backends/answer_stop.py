"""Deciding, token by token inside an engine, that a continuation holds its answer.

Engines that run Python between tokens (transformers, llama.cpp) call a request's
``stop_when`` check themselves. vLLM's decoding loop runs in its engine core (another
process) and offers no per-token callback to the caller, only logits processors that run
there before each step. :class:`AnswerWatch` is the per-sequence state such a processor keeps:
it is fed the sequence's new token ids after every step, tracks the text they spell
incrementally and runs the request's check (rebuilt from its
:class:`~precompute.backends.base.StopCheckSpec`) each time a new token completes one of the
request's trigger strings — the same points at which the round-based path used to stop,
check and resume, so the stop points, and hence the texts, are the same as before.

Cost per token: two decodes of a window of at most ``WINDOW + 1`` tokens and a search of
the new characters for the triggers (linear in the sequence length overall); the full text is
decoded only at trigger points, where the check needs it.

Nothing here imports vLLM (the processor class is in
:mod:`precompute.backends.vllm_answer_stop`), so it is tested without it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from precompute.backends.base import StopCheck

Decode = Callable[[Sequence[int]], str]

#: Where a request's opt-in sits in ``SamplingParams.extra_args``, and the processor's
#: fully qualified class name for ``vllm.LLM(logits_processors=...)``.
EXTRA_KEY = "legival_answer_stop"
PROCESSOR = "precompute.backends.vllm_answer_stop:AnswerStopProcessor"

#: Tokens of left context used to decode one new token's characters. Byte-level BPE splits a
#: multi-byte character over at most 4 tokens; the window lets a token that completes such a
#: character decode to it (the triggers themselves are ASCII, so a misread non-ASCII
#: character never hides one).
WINDOW = 4


class AnswerWatch:
    """Per-sequence early-stop state, fed the sequence's token ids as they are decoded.

    Args:
        decode: token ids -> text, as the caller decodes the final text (special tokens
            skipped), so the check sees the same text here as there.
        check: the request's early-stop check on the whole generated text.
        triggers: strings after which the check is worth running (``stop_when_after``);
            empty: after every token.
        before: tokens generated in earlier rounds of the same request (part of its
            prompt now, but of its generated text for the check).

    >>> chars = lambda ids: "".join(chr(i) for i in ids)
    >>> watch = AnswerWatch(chars, lambda t: t.endswith("{4}"), ["}"])
    >>> [watch.push([ord(c)]) for c in "x{1}{4}"]
    [False, False, False, False, False, False, True]
    """

    def __init__(
        self,
        decode: Decode,
        check: StopCheck,
        triggers: Sequence[str],
        before: Sequence[int] = (),
    ) -> None:
        self.decode = decode
        self.check = check
        self.triggers = [t for t in dict.fromkeys(triggers) if t]
        self._reach = max((len(t) for t in self.triggers), default=1) - 1
        self.ids: list[int] = list(before)
        self._start = len(self.ids)  # where this round's tokens begin
        self.tail = self.decode(self.ids[-self._reach :]) if self._reach and self.ids else ""
        self.done = False
        self.checks = 0  # how often the check ran (for tests and curiosity)

    @property
    def generated(self) -> int:
        """Tokens pushed so far (this round's)."""
        return len(self.ids) - self._start

    def push(self, new_ids: Sequence[int]) -> bool:
        """Take the tokens decoded since the last call; True once the answer is complete.

        Stays True after it first returns True (the engine then ends the sequence).
        """
        for token in new_ids:
            if self.done:
                break
            self.ids.append(int(token))
            piece = self._last_piece()
            # Only the new characters (and the few before them a trigger may start in) are
            # searched, so every token costs the same whatever the length of the text.
            window = self.tail + piece
            new_from = len(self.tail)
            self.tail = window[-self._reach :] if self._reach else ""
            # A trigger counts only if it ends in the new characters (one lying wholly in
            # the kept tail was seen on an earlier token).
            if self.triggers and not any(
                window.find(t, max(0, new_from - len(t) + 1)) >= 0 for t in self.triggers
            ):
                continue
            self.checks += 1
            # Earlier rounds' tokens (``before``) are generated text too: the check sees them.
            if self.check(self.decode(self.ids)):
                self.done = True
        return self.done

    def _last_piece(self) -> str:
        """The characters the last token adds to the text."""
        end = len(self.ids)
        start = max(0, end - 1 - WINDOW)
        head = self.decode(self.ids[start : end - 1])
        whole = self.decode(self.ids[start:end])
        return whole[len(head) :] if whole.startswith(head) else whole[-1:]
