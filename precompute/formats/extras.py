"""What ingest keeps beside a trace from a tool's file: the tool's own verdict (``tool_grades``)
and chunk importances (``chunk_importance``), written once per trace (resumable like the
ingest's own tables), with the summary lines that go with them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from legival_core.store.store import Store

__all__ = ["ExtraTables", "agreement_note", "chunk_alignment_note"]


@dataclass
class ExtraTables:
    """Rows of ``tool_grades`` and ``chunk_importance`` for one ingest, and what they add up to.

    ``done`` holds the trace ids each table already has, so a rerun after a kill writes only
    the missing rows.
    """

    done: dict[str, set[str]] = field(default_factory=dict)
    pending: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    #: (our verdict, the tool's) for every trace graded both ways in this ingest.
    pairs: list[tuple[bool, bool]] = field(default_factory=list)
    chunks_total: int = 0
    chunks_found: int = 0
    #: Traces graded by the tool's verdict alone (no gold answer to grade against).
    tool_only: int = 0

    @classmethod
    def for_store(cls, store: Store) -> ExtraTables:
        done = {}
        for table in ("tool_grades", "chunk_importance"):
            done[table] = (
                {k[0] for k in store.done_keys(table, ["trace_id"])} if store.has(table) else set()
            )
        return cls(done=done, pending={t: [] for t in done})

    def add(self, trace_id: str, extras: Mapping[str, Any], our_correct: bool | None) -> None:
        """Rows for one trace; ``our_correct`` is our grade of it (None: not graded here)."""
        scorer = extras.get("tool_scorer")
        if scorer is not None and trace_id not in self.done["tool_grades"]:
            verdict = extras.get("tool_correct")
            self.pending["tool_grades"].append(
                {
                    "trace_id": trace_id,
                    "tool": str(scorer),
                    "correct": verdict,
                    "answer": extras.get("tool_answer"),
                }
            )
            self.done["tool_grades"].add(trace_id)
            if verdict is not None and our_correct is not None:
                self.pairs.append((bool(our_correct), bool(verdict)))
        chunks = extras.get("chunks")
        if chunks and trace_id not in self.done["chunk_importance"]:
            for chunk in chunks:
                self.pending["chunk_importance"].append({"trace_id": trace_id, **chunk})
                self.chunks_total += 1
                self.chunks_found += chunk.get("start") is not None
            self.done["chunk_importance"].add(trace_id)

    def take(self) -> dict[str, list[dict[str, Any]]]:
        """The rows collected since the last call, per table (then forgotten)."""
        taken = {t: rows for t, rows in self.pending.items() if rows}
        self.pending = {t: [] for t in self.pending}
        return taken

    def notes(self, tool: str) -> list[str]:
        lines = []
        if self.pairs:
            lines.append(agreement_note(self.pairs, tool))
        if self.tool_only:
            lines.append(
                f"{self.tool_only} traces have no gold answer: their grade is {tool}'s verdict"
            )
        if self.chunks_total:
            lines.append(chunk_alignment_note(self.chunks_total, self.chunks_found))
        return lines


def agreement_note(pairs: list[tuple[bool, bool]], tool: str) -> str:
    """One summary line: how often our grade and the tool's verdict agree.

    >>> agreement_note([(True, True), (False, True), (False, False), (True, True)], "lm-eval")
    "our grade agrees with lm-eval's verdict on 3 of 4 traces (75.0%); we say correct 2, it says 3"
    """
    agree = sum(ours == theirs for ours, theirs in pairs)
    ours = sum(o for o, _ in pairs)
    theirs = sum(t for _, t in pairs)
    return (
        f"our grade agrees with {tool}'s verdict on {agree} of {len(pairs)} traces "
        f"({100 * agree / len(pairs):.1f}%); we say correct {ours}, it says {theirs}"
    )


def chunk_alignment_note(total: int, found: int) -> str:
    """One summary line on the chunks' character spans.

    >>> chunk_alignment_note(10, 9)
    'chunk importances: 9 of 10 chunks found in the reasoning (the rest have no span)'
    """
    return (
        f"chunk importances: {found} of {total} chunks found in the reasoning "
        "(the rest have no span)"
    )
