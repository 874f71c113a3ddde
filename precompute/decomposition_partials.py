"""The decomposition's inputs built a bucket at a time (issue 43).

The accuracy-per-token decomposition needs one row per graded trace — its instance
(:func:`legival_core.metrics.decomposition.decomposition_instances`: teacher, dataset,
instance, correct, T, truncated, native workload, σ) — and the teachers that are references.
Both are final inside a bucket of problems: an instance reads only its own trace's rows, and
a teacher is a reference when every one of its (teacher, source) pairs is. So each bucket
builds its instances from the rows it already holds, and the stage no longer reads
``traces``, ``grades``, ``trace_efficiency`` and ``trace_counts`` whole again after the
buckets (at ten million traces those reads and the instances built from them took the
stage's peak to 13.9 GB; docs/benchmarks.md).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from legival_core.store.spilled_frames import SpilledFrame, held


@dataclass
class DecompositionPartial:
    """One bucket's (or several merged buckets') decomposition inputs: the instances of its
    graded traces and its distinct (teacher, source) pairs."""

    #: each merged bucket's instances, in merge order (concatenated once, by :meth:`joined`),
    #: or their :class:`~legival_core.store.spilled_frames.SpilledFrame`
    instances: list[pd.DataFrame | SpilledFrame] = field(default_factory=list)
    #: distinct ``teacher``/``source`` pairs (no ``source`` column: no pairs)
    sources: pd.DataFrame = field(default_factory=pd.DataFrame)

    @classmethod
    def of_chunk(
        cls,
        traces: pd.DataFrame,
        grades: pd.DataFrame,
        counted: pd.Series,
        efficiency: pd.DataFrame,
        workload: pd.Series | None = None,
    ) -> DecompositionPartial:
        """The bucket's partial from its rows of ``traces`` and ``grades``, ``counted`` (trace
        id → its count in the default encoding, what a trace without a stored T is counted
        with: :func:`precompute.stages.metrics.default_counts`) and its ``trace_efficiency``
        rows (σ = ``compression``); ``workload`` maps a problem id to its native workload
        (:func:`legival_core.metrics.decomposition.problem_workload`; None: the store has none).

        >>> traces = pd.DataFrame({"trace_id": ["a", "b"], "problem_id": ["p", "p"],
        ...     "dataset": "d", "teacher": "m", "sample": [0, 1], "tokens": [4, 6],
        ...     "truncated": False, "source": "run"})
        >>> grades = pd.DataFrame({"trace_id": ["a", "b"], "correct": [True, None]})
        >>> efficiency = pd.DataFrame({"trace_id": ["a", "b"], "compression": [2.0, 3.0]})
        >>> part = DecompositionPartial.of_chunk(traces, grades, pd.Series(), efficiency)
        >>> part.instances[0][["instance_id", "tokens", "sigma"]].values.tolist()
        [['p', 4.0, 2.0]]
        """
        from legival_core.metrics.decomposition import decomposition_instances
        from legival_core.published.references import teacher_sources

        problems = None
        if workload is not None:
            ids = traces["problem_id"].drop_duplicates()
            problems = pd.DataFrame(
                {"problem_id": ids.to_numpy(), "workload": ids.map(workload).to_numpy()}
            )
        sigma = pd.Series(
            efficiency["compression"].to_numpy(), index=efficiency["trace_id"].astype(str)
        )
        instances = decomposition_instances(traces, grades, problems, sigma, counted)
        return cls([instances] if len(instances) else [], teacher_sources(traces))

    def merge(self, other: DecompositionPartial) -> DecompositionPartial:
        """This partial with ``other``'s added (this one's list grows: the receiver is used
        up)."""
        self.instances.extend(other.instances)
        if self.sources.empty:
            self.sources = other.sources
        elif not other.sources.empty:
            joined = pd.concat([self.sources, other.sources], ignore_index=True)
            self.sources = joined.drop_duplicates(ignore_index=True)
        return self

    def joined(self) -> tuple[pd.DataFrame, list[str]]:
        """Every merged bucket's instances as one frame (emptied from the receiver as they go
        in) and the reference teachers
        (:func:`legival_core.published.references.reference_teachers` of the pairs)."""
        from legival_core.published.references import reference_teachers

        parts, self.instances = held(self.instances), []  # spilled ones read back
        instances = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()
        return instances, reference_teachers(self.sources)
