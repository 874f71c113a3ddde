"""What a store's numbers are made of, read from its manifest's provenance records.

Two questions the pages must answer before they show a number:

* **Where do the token counts come from?** (:func:`token_sources`) The leaderboard's
  ``tokens`` column (``trace_efficiency.tokens``) is always the metrics stage's tiktoken count
  of the reasoning text — one ruler for every model — except in the published store, which
  holds the paper's own figures. The efficiency page's E[T] is ``traces.tokens``, which depends
  on who wrote the trace: the ``generate`` stage stores the engine's count of the model's own
  generated tokens; CHAMP's recorded traces (the demo included) store a tiktoken count of the
  recorded solution; ``ingest`` stores the file's ``tokens`` column where given, else a
  tiktoken count of the recorded text. Counting recorded text with tiktoken is not the model's
  own tokenizer, so an E0 built on it is comparable across models but not with papers that
  count generated tokens.
* **Is the reward model a stand-in?** (:func:`reward_standin`) The demo scores traces with an
  untrained score head on SmolLM2-135M; its ρ with FOTU says nothing about reward models and
  must never stand next to the paper's |ρ| ≤ 0.2 without saying so.

Only the manifest is read (no table), so the answer is cheap and the same on every page.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "STANDIN_FOLDER",
    "TOKEN_KINDS",
    "TokenSources",
    "reward_standin",
    "token_sources",
]

#: Folder name of the demo's stand-in reward model (``precompute.demo`` builds it there). Stores
#: built before the reward stage recorded ``standin`` explicitly are recognised by it.
STANDIN_FOLDER = "SmolLM2-135M-reward-standin"

#: How E[T] was obtained, per teacher, and the words the pages use for it.
TOKEN_KINDS: dict[str, str] = {
    "generated": "the model's own generated tokens (the engine's count)",
    "given": "the token counts given in the ingested file",
    "recorded": "the model's own token counts as its evaluation tool recorded them",
    "partly_given": "the ingested file's token counts where given, else a tiktoken count of "
    "the recorded text",
    "counted": "a tiktoken count of the recorded text, not the model's own tokens",
    "published": "the paper's published mean generated tokens",
    "unknown": "token counts whose origin the store does not record",
}


@dataclass(frozen=True)
class TokenSources:
    """Where a store's token numbers come from.

    Attributes:
        lengths: what the leaderboard's ``tokens`` column counts (``trace_efficiency.tokens``).
        e_t: one kind of :data:`TOKEN_KINDS` for E[T] over the whole store, or ``"mixed"``.
        by_teacher: teacher → kind of its E[T], for every teacher a record names.
        origins: teacher → the tool's field its given counts were read from (``recorded``).
    """

    lengths: str
    e_t: str
    by_teacher: Mapping[str, str] = field(default_factory=dict)
    origins: Mapping[str, str] = field(default_factory=dict)

    def teacher_label(self, teacher: str) -> str:
        """Where one teacher's T comes from, in words, with the tool's field when recorded.

        >>> s = TokenSources("x", "mixed", {"a": "recorded"}, {"a": "usage.output_tokens"})
        >>> s.teacher_label("a")
        "the model's own token counts as its evaluation tool recorded them (usage.output_tokens)"
        >>> s.teacher_label("b")
        'token counts whose origin the store does not record'
        """
        words = TOKEN_KINDS[self.by_teacher.get(teacher, self._fallback())]
        origin = self.origins.get(teacher)
        return f"{words} ({origin})" if origin else words

    def e_t_label(self, teachers: Iterable[str] | None = None) -> str:
        """E[T]'s origin in words, for ``teachers`` (default: all).

        One kind gives its words; several give ``"mixed: …"`` with each kind's teachers.

        >>> s = TokenSources("x", "mixed", {"a": "generated", "b": "counted"})
        >>> s.e_t_label(["a"])
        "the model's own generated tokens (the engine's count)"
        >>> s.e_t_label()
        "mixed: a: the model's own generated tokens (the engine's count); b: a tiktoken count \
of the recorded text, not the model's own tokens"
        """
        kinds = self.kinds(teachers)
        if not kinds:
            return TOKEN_KINDS.get(self.e_t, "mixed")
        if len(kinds) == 1:
            return TOKEN_KINDS[next(iter(kinds))]
        ordered = sorted(kinds.items(), key=lambda item: item[1][0])
        parts = [f"{', '.join(who)}: {TOKEN_KINDS[kind]}" for kind, who in ordered]
        return "mixed: " + "; ".join(parts)

    def kinds(self, teachers: Iterable[str] | None = None) -> dict[str, list[str]]:
        """Kind of E[T] → the ``teachers`` (default: all named) counted that way; more than
        one key means their E[T] are not on one scale.

        >>> TokenSources("x", "mixed", {"a": "generated", "b": "counted"}).kinds(["b", "c"])
        {'counted': ['b'], 'unknown': ['c']}
        """
        names = sorted(self.by_teacher) if teachers is None else sorted(set(teachers))
        kinds: dict[str, list[str]] = {}
        for name in names:
            kinds.setdefault(self.by_teacher.get(name, self._fallback()), []).append(name)
        return kinds

    def _fallback(self) -> str:
        return self.e_t if self.e_t in TOKEN_KINDS else "unknown"


def _records(manifest: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return [r for r in manifest.get("provenance") or [] if isinstance(r, Mapping)]


def _ingest_kind(tokens: Any) -> str:
    """The kind of one ingest's counts (``tokens``: its ``given``/``counted`` numbers and, from a
    format adapter, ``given_by``: the tool fields the given counts were read from)."""
    if not isinstance(tokens, Mapping):
        return "unknown"  # an ingest from before the counts were recorded
    given, counted = int(tokens.get("given") or 0), int(tokens.get("counted") or 0)
    if given and counted:
        return "partly_given"
    if given and tokens.get("given_by"):
        return "recorded"
    return "given" if given else "counted"


def _ingest_teachers(record: Mapping[str, Any]) -> dict[str, tuple[str, str | None]]:
    """teacher → (kind, origin) of one ingest record: per teacher where the ingest recorded
    it (``teachers``), else its one ``teacher`` with the file's counts. An ingest that wrote
    no trace (a rerun of the same file) says nothing about anyone."""
    per = record.get("teachers")
    if isinstance(per, Mapping):
        out = {}
        for name, tokens in per.items():
            if not _wrote_any(tokens):
                continue
            given_by = tokens.get("given_by") if isinstance(tokens, Mapping) else None
            origin = "; ".join(str(g) for g in given_by) if given_by else None
            out[str(name)] = (_ingest_kind(tokens), origin)
        return out
    tokens = record.get("tokens")
    if record.get("teacher") and (not isinstance(tokens, Mapping) or _wrote_any(tokens)):
        return {str(record["teacher"]): (_ingest_kind(tokens), None)}
    return {}


def _wrote_any(tokens: Any) -> bool:
    return isinstance(tokens, Mapping) and bool(tokens.get("given") or tokens.get("counted"))


def token_sources(manifest: Mapping[str, Any]) -> TokenSources:
    """Where the token numbers of the store with this ``manifest`` come from.

    Reads the provenance records in order, a later record about a teacher replacing an
    earlier one: ``generate`` (teachers = its ``models``) → ``generated``; ``champ`` (its
    ``teachers``) → ``counted`` (CHAMP records no token counts; they are tiktoken counts of
    the solution); ``ingest`` (its ``teacher``) → ``given``, ``counted`` or, for a file with
    both, ``partly_given``, from the ``tokens`` counts the ingest records (per teacher, and
    ``recorded`` when a format adapter read the counts from the tool's own field);
    ``published`` → the whole store is ``published``. A teacher no record names is ``unknown``.

    >>> m = {"provenance": [
    ...     {"stage": "champ", "teachers": ["gpt-4", "human"]},
    ...     {"stage": "generate", "models": {"qwen": {}}},
    ...     {"stage": "metrics", "encoding": "cl100k_base"}]}
    >>> s = token_sources(m)
    >>> s.e_t, s.by_teacher["gpt-4"], s.by_teacher["qwen"]
    ('mixed', 'counted', 'generated')
    >>> s.lengths
    'tiktoken cl100k_base count of the reasoning text (one ruler for every model)'
    >>> token_sources({"provenance": [{"stage": "published"}]}).e_t
    'published'
    """
    records = _records(manifest)
    if any(r.get("stage") == "published" for r in records):
        words = "the paper's published mean generated tokens per trace"
        return TokenSources(lengths=words, e_t="published")
    by_teacher: dict[str, str] = {}
    origins: dict[str, str] = {}
    encoding = ((manifest.get("config") or {}).get("metrics") or {}).get("encoding")
    for record in records:
        stage = record.get("stage")
        if stage == "generate":
            for name in record.get("models") or {}:
                by_teacher[str(name)] = "generated"
        elif stage == "champ":
            for name in record.get("teachers") or []:
                by_teacher[str(name)] = "counted"
        elif stage == "ingest":
            for name, (kind, origin) in _ingest_teachers(record).items():
                by_teacher[name] = kind
                if origin:
                    origins[name] = origin
                else:
                    origins.pop(name, None)
        elif stage == "metrics" and record.get("encoding"):
            encoding = record["encoding"]
    kinds = set(by_teacher.values())
    e_t = kinds.pop() if len(kinds) == 1 else ("unknown" if not kinds else "mixed")
    lengths = (
        f"tiktoken {encoding or 'cl100k_base'} count of the reasoning text "
        "(one ruler for every model)"
    )
    return TokenSources(lengths=lengths, e_t=e_t, by_teacher=by_teacher, origins=origins)


def reward_standin(manifest: Mapping[str, Any], reward_model: str) -> str | None:
    """Why ``reward_model`` (a ``rewards.reward_model`` label) is a stand-in, else ``None``.

    The reward stage records ``standin`` (a reason) in the model's provenance entry when the
    model folder carries the stand-in marker; older stores are recognised by the stand-in's
    folder name (:data:`STANDIN_FOLDER`). The latest reward record for the label decides.

    >>> m = {"provenance": [{"stage": "reward", "models": {"rm": {
    ...     "model": "/x/SmolLM2-135M-reward-standin"}}}]}
    >>> reward_standin(m, "rm") is not None, reward_standin(m, "other")
    (True, None)
    >>> reward_standin({"provenance": [{"stage": "reward", "models": {"rm": {
    ...     "model": "Skywork/Skywork-Reward-V2-Llama-3.1-8B"}}}]}, "rm") is None
    True
    """
    for record in reversed(_records(manifest)):
        if record.get("stage") != "reward":
            continue
        entry = (record.get("models") or {}).get(reward_model)
        if not isinstance(entry, Mapping):
            continue
        if entry.get("standin"):
            return str(entry["standin"])
        model = str(entry.get("model") or "").replace("\\", "/").rstrip("/")
        if model.rsplit("/", 1)[-1] == STANDIN_FOLDER:
            return (
                "an untrained score head on SmolLM2-135M-Instruct, built for the demo: it "
                "exercises the reward path but carries no preference signal"
            )
        return None
    return None
