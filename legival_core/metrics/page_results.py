"""Page results stored by the metrics stage, keyed by selection and by the state of their inputs.

Some pages compute a result on load that takes seconds on a big store (the leaderboard's
resampled intervals and robustness marks, the robustness report, the monitoring bootstrap,
the reward correlations, the first-solve table). The ``metrics`` stage computes those of the
default selection once and writes them to the ``page_results`` table: one row per
(``name``, ``selection``) holding the result frame as Arrow IPC bytes and the
:func:`inputs_stamp` of the tables it was computed from. A page uses a stored row only when
both its selection and its stamp equal the current ones (:func:`stored_frame`); any other
selection, or a store whose inputs were written since, is computed as before. The pages and
the stage name a result's inputs through :data:`INPUTS`, so they cannot disagree about what
makes a row stale.

Every stored result is keyed by a frozen value (:class:`ResultKey`): the stage stores a result
under the key value of its default selection and a page or notebook asks with the key value of
its own, so the stored ``selection`` text is made by one method (:meth:`ResultKey.key`) on both
sides. :data:`KEYS` names the key class of every result (the leaderboard's are
:class:`legival_core.rankings.selection.Selection`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import pandas as pd
import pyarrow as pa

__all__ = [
    "INPUTS",
    "KEYS",
    "MONITOR_RESAMPLES",
    "PAGE_RESULTS_VERSION",
    "DecompositionSelection",
    "MonitorSelection",
    "RedundancySelection",
    "ResultKey",
    "RewardSelection",
    "RobustnessSelection",
    "TransferSelection",
    "WholeStore",
    "frame_from_bytes",
    "frame_to_bytes",
    "inputs_stamp",
    "is_current",
    "page_results_rows",
    "selection_key",
    "stored_frame",
]

#: Bootstrap resamples behind the Monitoring page's F1 intervals (its stored default view).
MONITOR_RESAMPLES = 500

#: Bump when a stored result's definition changes: rows written before become stale.
PAGE_RESULTS_VERSION = 2

#: The tables each stored result is computed from (what its stamp covers).
INPUTS: dict[str, tuple[str, ...]] = {
    # per trace: how concentrated its per-step transfer attribution is (inspector, notebooks)
    "attribution_traces": ("rollouts",),
    "board_intervals": ("trace_efficiency", "trace_transfer", "teacher_metrics", "traces"),
    "board_resamples": ("trace_efficiency", "trace_transfer"),
    "decomposition_audits": (
        "traces",
        "grades",
        "trace_efficiency",
        "trace_counts",
        "decomposition",
    ),
    "decomposition_concentration": (
        "traces",
        "grades",
        "trace_efficiency",
        "trace_counts",
        "decomposition",
    ),
    "monitor_legibility": ("monitor_verdicts", "teacher_metrics", "traces"),
    "monitor_scores": ("monitor_verdicts",),
    "monitor_scores_pooled": ("monitor_verdicts",),
    "pareto_resamples": ("trace_efficiency", "trace_transfer", "traces"),
    "redundancy_sweep": ("similarity", "traces"),
    "reward_points": ("rewards", "trace_transfer", "grades"),
    "reward_rho": ("rewards", "trace_transfer", "grades", "traces"),
    "teacher_rewards": ("rewards", "trace_transfer", "grades", "traces"),
    **{
        f"robustness_{part}": (
            "trace_efficiency",
            "trace_transfer",
            "rollouts",
            "similarity",
            "judgments",
            "trace_counts",
            "robustness_steps",
            "robustness_similarity",
            "traces",  # the reference teachers (traces.source)
        )
        for part in ("summary", "rankings", "flips", "unavailable")
    },
    # The inspector's trace list (metrics.trace_list.store_trace_choices), one row per trace.
    "trace_choices": ("traces", "grades", "trace_transfer", "steps", "trace_efficiency"),
    # A marker (no frame): trace_efficiency's step counts were computed from today's steps.
    "trace_steps": ("steps", "trace_efficiency"),
    "transfer_coverage": ("rollouts",),
    "transfer_first_measured": ("rollouts",),
    "transfer_leaks": ("trace_transfer", "rollouts"),
}


#: The key class of every stored result (filled as each :class:`ResultKey` class is defined).
KEYS: dict[str, type[ResultKey]] = {}


class ResultKey:
    """Base of the frozen values that key stored results. A subclass (a frozen dataclass) lists
    in :attr:`RESULTS` each result it keys and the fields its stored key is made of, in the
    order of the stored text (the order rows of older stores were written in: changing it makes
    every stored row a miss); defining it registers those results in :data:`KEYS`.
    """

    #: result name -> the fields of its key, in stored order
    RESULTS: ClassVar[Mapping[str, tuple[str, ...]]] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        names = list(cls.__dict__.get("RESULTS", {}))
        for name in names:  # all checked before any is registered
            if KEYS.get(name, cls) is not cls:
                raise TypeError(f"{name!r} is keyed by {KEYS[name].__name__} already")
        KEYS.update(dict.fromkeys(names, cls))

    def args(self, result: str) -> tuple[Any, ...]:
        """The values the stored ``result`` is keyed by, in stored order."""
        try:
            fields = self.RESULTS[result]
        except KeyError:
            keyed = ", ".join(sorted(self.RESULTS))
            raise KeyError(
                f"{type(self).__name__} does not key {result!r} (it keys {keyed})"
            ) from None
        return tuple(getattr(self, name) for name in fields)

    def key(self, result: str) -> str:
        """The ``page_results`` selection text of ``result`` for this value
        (:func:`selection_key` of :meth:`args`)."""
        return selection_key(self.args(result))


@dataclass(frozen=True)
class WholeStore(ResultKey):
    """The key of results computed once for the whole store (no selection).

    >>> WholeStore().key("trace_choices")
    '[]'
    """

    RESULTS: ClassVar[Mapping[str, tuple[str, ...]]] = {
        "attribution_traces": (),
        "trace_steps": (),
        "trace_choices": (),
    }


@dataclass(frozen=True)
class MonitorSelection(ResultKey):
    """The Monitoring page's selection: ``n_boot`` bootstrap resamples of the detection scores,
    whether reference teachers add a point to ρ(FOTU, score) and which datasets a teacher's
    FOTU is averaged over (``support``). The default is the page's first view.

    >>> MonitorSelection().key("monitor_scores"), MonitorSelection().key("monitor_legibility")
    ('[500]', '[500, false, "common"]')
    """

    n_boot: int = MONITOR_RESAMPLES
    include_references: bool = False
    support: str = "common"

    RESULTS: ClassVar[Mapping[str, tuple[str, ...]]] = {
        "monitor_scores": ("n_boot",),
        "monitor_scores_pooled": ("n_boot",),
        "monitor_legibility": ("n_boot", "include_references", "support"),
    }

    def __post_init__(self) -> None:
        object.__setattr__(self, "n_boot", int(self.n_boot))
        object.__setattr__(self, "include_references", bool(self.include_references))


@dataclass(frozen=True)
class RewardSelection(ResultKey):
    """The Reward models page's selection: one reward ``model``, a ``dataset`` (None: all),
    the correlation ``level`` (``trace`` or ``teacher``), correct traces only or all, whether
    reference teachers are kept and the datasets a teacher is averaged over.

    >>> RewardSelection("rm").key("reward_points")
    '["rm", null, false]'
    >>> RewardSelection("rm", level="teacher").key("reward_rho")
    '["rm", null, "teacher", false, false, "common"]'
    """

    model: str
    dataset: str | None = None
    level: str = "trace"
    correct_only: bool = False
    include_references: bool = False
    support: str = "common"

    RESULTS: ClassVar[Mapping[str, tuple[str, ...]]] = {
        "reward_points": ("model", "dataset", "correct_only"),
        "reward_rho": (
            "model",
            "dataset",
            "level",
            "correct_only",
            "include_references",
            "support",
        ),
        "teacher_rewards": ("model", "dataset", "correct_only", "include_references", "support"),
    }

    def __post_init__(self) -> None:
        object.__setattr__(self, "model", str(self.model))
        object.__setattr__(self, "correct_only", bool(self.correct_only))
        object.__setattr__(self, "include_references", bool(self.include_references))


@dataclass(frozen=True)
class TransferSelection(ResultKey):
    """The Transfer curves page's selection: a ``dataset`` and a ``student`` (None: all) and
    the metrics ``profile`` the measured bins are counted under.

    >>> TransferSelection().key("transfer_leaks"), TransferSelection().key("transfer_coverage")
    ('[null, null]', '[null, null, "paper"]')
    """

    dataset: str | None = None
    student: str | None = None
    profile: str = "paper"

    RESULTS: ClassVar[Mapping[str, tuple[str, ...]]] = {
        "transfer_leaks": ("dataset", "student"),
        "transfer_coverage": ("dataset", "student", "profile"),
        "transfer_first_measured": ("dataset", "student"),
    }


@dataclass(frozen=True)
class DecompositionSelection(ResultKey):
    """The Efficiency decomposition page's selection of the solver-workload audits: one
    ``benchmark`` and whether reference teachers are in the solver pool.

    >>> DecompositionSelection("champ-sequence").key("decomposition_audits")
    '["champ-sequence", false]'
    """

    benchmark: str
    include_references: bool = False

    RESULTS: ClassVar[Mapping[str, tuple[str, ...]]] = {
        f"decomposition_{part}": ("benchmark", "include_references")
        for part in ("audits", "concentration")
    }

    def __post_init__(self) -> None:
        object.__setattr__(self, "benchmark", str(self.benchmark))
        object.__setattr__(self, "include_references", bool(self.include_references))


@dataclass(frozen=True)
class RedundancySelection(ResultKey):
    """The Redundancy threshold page's selection: the τ marked on the sweep (added to the
    published grid), the one the store's metrics run recorded.

    >>> RedundancySelection(0.8).key("redundancy_sweep")
    '[0.8]'
    """

    threshold: float

    RESULTS: ClassVar[Mapping[str, tuple[str, ...]]] = {"redundancy_sweep": ("threshold",)}

    def __post_init__(self) -> None:
        object.__setattr__(self, "threshold", float(self.threshold))


@dataclass(frozen=True)
class RobustnessSelection(ResultKey):
    """A robustness report's selection: the default analysis choices it is made under
    (``settings``, the text :func:`legival_core.rankings.robustness_choices.settings_key`
    gives), ``n_boot`` resamples behind the flips' rank intervals (0: none, the
    leaderboard's marks) and their ``seed``.

    >>> RobustnessSelection("{}", n_boot=0).key("robustness_flips")
    '[0, 0, "{}"]'
    """

    settings: str
    n_boot: int
    seed: int = 0

    RESULTS: ClassVar[Mapping[str, tuple[str, ...]]] = {
        f"robustness_{part}": ("n_boot", "seed", "settings")
        for part in ("summary", "rankings", "flips", "unavailable")
    }

    def __post_init__(self) -> None:
        object.__setattr__(self, "n_boot", int(self.n_boot))
        object.__setattr__(self, "seed", int(self.seed))


def _selection_text(name: str, key: ResultKey) -> str:
    """The stored selection text of ``name`` for ``key``; a bare tuple or a value of another
    key class is refused (the stage and the pages must make keys with the same class)."""
    if not isinstance(key, ResultKey):
        wanted = KEYS[name].__name__ if name in KEYS else "its ResultKey"
        raise TypeError(f"page result {name!r} is keyed by a {wanted} value, not {key!r}")
    return key.key(name)


def inputs_stamp(manifest: Mapping[str, Any], tables: Iterable[str]) -> str:
    """Which state of ``tables`` a result was computed from: each table's row count and a
    digest of its parts' checksums in the store's manifest (every write adds a part, every
    merge replaces them by one: either changes the stamp), and the
    :data:`PAGE_RESULTS_VERSION`.

    >>> manifest = {"tables": {"rollouts": {"rows": 120, "parts": [{"blake2b": "ab12"}]}}}
    >>> inputs_stamp(manifest, ["rollouts", "x"])
    'page results v2; rollouts rows 120 parts cabb3b29adb439d2; x rows 0 parts 0000000000000000'
    """
    import hashlib

    entries = manifest.get("tables") or {}
    stamp = [f"page results v{PAGE_RESULTS_VERSION}"]
    for table in tables:
        entry = entries.get(table) or {}
        listed = [str(p.get("blake2b") or p.get("file")) for p in entry.get("parts") or []]
        digest = (
            hashlib.blake2b(" ".join(listed).encode(), digest_size=8).hexdigest()
            if listed
            else "0" * 16
        )
        stamp.append(f"{table} rows {int(entry.get('rows') or 0)} parts {digest}")
    return "; ".join(stamp)


def selection_key(args: Sequence[Any]) -> str:
    """The arguments of a page computation as a JSON text (tuples as lists, None as null).

    >>> selection_key((None, "champ", 1000, 0, False))
    '[null, "champ", 1000, 0, false]'
    """
    return json.dumps(list(args), default=list)


def frame_to_bytes(frame: pd.DataFrame) -> bytes:
    """``frame`` as Arrow IPC stream bytes (dtypes, categoricals and a range index kept).

    >>> f = pd.DataFrame({"a": [1.5, float("nan")], "b": ["x", None]})
    >>> frame_from_bytes(frame_to_bytes(f)).equals(f)
    True
    """
    table = pa.Table.from_pandas(frame)
    sink = pa.BufferOutputStream()
    # zstd inside the payload too: a store reads page_results whole, and the inspector's trace
    # list is a million rows at a million traces (about 5x smaller compressed).
    options = pa.ipc.IpcWriteOptions(compression="zstd")
    with pa.ipc.new_stream(sink, table.schema, options=options) as writer:
        writer.write_table(table)
    return bytes(sink.getvalue().to_pybytes())


def frame_from_bytes(data: bytes, columns: Sequence[str] | None = None) -> pd.DataFrame:
    """The frame :func:`frame_to_bytes` wrote; with ``columns``, only those (in the frame's
    order; a name it lacks is left out), the others never decompressed: the inspector's
    per-teacher shares need three of the eight columns of a row per trace (460,000 rows at a
    million traces: 0.03 s decoded instead of 0.1 to 0.2 s).

    >>> f = pd.DataFrame({"a": [1, 2], "b": ["x", "y"], "c": [0.5, 1.5]})
    >>> frame_from_bytes(frame_to_bytes(f), ["c", "a"]).columns.tolist()
    ['a', 'c']
    """
    options = None
    if columns is not None:
        with pa.ipc.open_stream(pa.py_buffer(data)) as reader:
            names = reader.schema.names
        wanted = set(columns)
        options = pa.ipc.IpcReadOptions(
            included_fields=[i for i, name in enumerate(names) if name in wanted]
        )
    with pa.ipc.open_stream(pa.py_buffer(data), options=options) as reader:
        return reader.read_all().to_pandas()


class PageResultRows:
    """Rows of ``page_results`` built a result at a time: each frame is stamped and serialised
    (:func:`frame_to_bytes`, compressed) when it is added, so a caller that lets its frames go
    holds the payloads, not every result's frame until the end (a row per trace for several
    results at a million traces)."""

    def __init__(self, manifest: Mapping[str, Any]) -> None:
        self.manifest = manifest
        self._columns: tuple[list[str], list[str], list[str], list[bytes]] = ([], [], [], [])

    def append(self, result: tuple[str, ResultKey, pd.DataFrame]) -> None:
        """Add one result (name, key value, frame), stamped with :func:`inputs_stamp` of its
        :data:`INPUTS` in the manifest."""
        name, key, frame = result
        names, selections, stamps, payloads = self._columns
        names.append(name)
        selections.append(_selection_text(name, key))
        stamps.append(inputs_stamp(self.manifest, INPUTS[name]))
        payloads.append(frame_to_bytes(frame))

    def __iadd__(self, results: Iterable[tuple[str, ResultKey, pd.DataFrame]]) -> PageResultRows:
        for result in results:
            self.append(result)
        return self

    def __len__(self) -> int:
        return len(self._columns[0])

    def table(self) -> pa.Table:
        """The rows added so far, in the order they were added."""
        from legival_core.store.schema import spec

        return pa.table(list(self._columns), schema=spec("page_results").schema)


def page_results_rows(
    results: Iterable[tuple[str, ResultKey, pd.DataFrame]], manifest: Mapping[str, Any]
) -> pa.Table:
    """Rows of ``page_results`` for ``results`` (name, key value, frame), each stamped with
    :func:`inputs_stamp` of its :data:`INPUTS` in ``manifest`` (the store after the tables
    they were computed from were written)."""
    rows = PageResultRows(manifest)
    rows += results
    return rows.table()


def _current_row(
    table: pd.DataFrame | None, manifest: Mapping[str, Any], name: str, key: ResultKey
) -> pd.DataFrame | None:
    """The one row of ``table`` holding ``name`` for ``key``, when its stamp is current."""
    if table is None or table.empty or name not in INPUTS:
        return None
    hit = table[(table["name"] == name) & (table["selection"] == _selection_text(name, key))]
    if len(hit) != 1 or hit["inputs_stamp"].iloc[0] != inputs_stamp(manifest, INPUTS[name]):
        return None
    return hit


def is_current(
    table: pd.DataFrame | None, manifest: Mapping[str, Any], name: str, key: ResultKey
) -> bool:
    """True when ``table`` (``page_results``, its payload column may be left out) holds the row
    ``name`` for ``key`` and it was computed from the store's inputs as they are now.

    >>> manifest = {"tables": {"steps": {"rows": 3, "parts": [{"blake2b": "1"}]}}}
    >>> rows = page_results_rows([("trace_steps", WholeStore(), pd.DataFrame())], manifest)
    >>> is_current(rows.to_pandas(), manifest, "trace_steps", WholeStore())
    True
    >>> manifest["tables"]["steps"]["parts"].append({"blake2b": "2"})  # steps written since
    >>> is_current(rows.to_pandas(), manifest, "trace_steps", WholeStore())
    False
    """
    return _current_row(table, manifest, name, key) is not None


def stored_frame(
    table: pd.DataFrame | None,
    manifest: Mapping[str, Any],
    name: str,
    key: ResultKey,
    columns: Sequence[str] | None = None,
) -> pd.DataFrame | None:
    """The stored result ``name`` for ``key`` from a ``page_results`` ``table``, or None when
    the table has no such row or the row was computed from other inputs than the store's now
    (its stamp differs from :func:`inputs_stamp` of the current ``manifest``). ``columns``:
    only those of the result (:func:`frame_from_bytes`).

    >>> manifest = {"tables": {"monitor_verdicts": {"rows": 10, "parts": [{"blake2b": "1"}]}}}
    >>> default = MonitorSelection(n_boot=500)
    >>> rows = page_results_rows([("monitor_scores", default, pd.DataFrame({"f1": [0.5]}))],
    ...     manifest).to_pandas()
    >>> stored_frame(rows, manifest, "monitor_scores", default)["f1"].tolist()
    [0.5]
    >>> stored_frame(rows, manifest, "monitor_scores", MonitorSelection(200)) is None  # another
    True
    >>> manifest["tables"]["monitor_verdicts"]["parts"].append({"blake2b": "2"})  # written since
    >>> stored_frame(rows, manifest, "monitor_scores", default) is None
    True
    """
    hit = _current_row(table, manifest, name, key)
    return None if hit is None else frame_from_bytes(hit["payload"].iloc[0], columns)
