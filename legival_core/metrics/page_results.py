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
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import pandas as pd
import pyarrow as pa

__all__ = [
    "INPUTS",
    "PAGE_RESULTS_VERSION",
    "frame_from_bytes",
    "frame_to_bytes",
    "inputs_stamp",
    "is_current",
    "page_results_rows",
    "selection_key",
    "stored_frame",
]

#: Bump when a stored result's definition changes: rows written before become stale.
PAGE_RESULTS_VERSION = 2

#: The tables each stored result is computed from (what its stamp covers).
INPUTS: dict[str, tuple[str, ...]] = {
    # per trace: how concentrated its per-step transfer attribution is (inspector, notebooks)
    "attribution_traces": ("rollouts",),
    "board_intervals": ("trace_efficiency", "trace_transfer", "teacher_metrics", "traces"),
    "board_resamples": ("trace_efficiency", "trace_transfer"),
    "decomposition_audits": (
        "traces", "grades", "trace_efficiency", "trace_counts", "decomposition",
    ),
    "decomposition_concentration": (
        "traces", "grades", "trace_efficiency", "trace_counts", "decomposition",
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


def frame_from_bytes(data: bytes) -> pd.DataFrame:
    """The frame :func:`frame_to_bytes` wrote."""
    with pa.ipc.open_stream(pa.py_buffer(data)) as reader:
        return reader.read_all().to_pandas()


def page_results_rows(
    results: Iterable[tuple[str, Sequence[Any], pd.DataFrame]], manifest: Mapping[str, Any]
) -> pa.Table:
    """Rows of ``page_results`` for ``results`` (name, arguments, frame), each stamped with
    :func:`inputs_stamp` of its :data:`INPUTS` in ``manifest`` (the store after the tables
    they were computed from were written)."""
    from legival_core.store.schema import spec

    names, selections, stamps, payloads = [], [], [], []
    for name, args, frame in results:
        names.append(name)
        selections.append(selection_key(args))
        stamps.append(inputs_stamp(manifest, INPUTS[name]))
        payloads.append(frame_to_bytes(frame))
    schema = spec("page_results").schema
    return pa.table([names, selections, stamps, payloads], schema=schema)


def is_current(
    table: pd.DataFrame | None, manifest: Mapping[str, Any], name: str, args: Sequence[Any]
) -> bool:
    """True when ``table`` (``page_results``, its payload column may be left out) holds the row
    ``name`` for ``args`` and it was computed from the store's inputs as they are now.

    >>> manifest = {"tables": {"steps": {"rows": 3, "parts": [{"blake2b": "1"}]}}}
    >>> rows = page_results_rows([("trace_steps", (), pd.DataFrame())], manifest).to_pandas()
    >>> is_current(rows, manifest, "trace_steps", ())
    True
    >>> manifest["tables"]["steps"]["parts"].append({"blake2b": "2"})  # steps written since
    >>> is_current(rows, manifest, "trace_steps", ())
    False
    """
    if table is None or table.empty or name not in INPUTS:
        return False
    hit = table[(table["name"] == name) & (table["selection"] == selection_key(args))]
    return len(hit) == 1 and hit["inputs_stamp"].iloc[0] == inputs_stamp(manifest, INPUTS[name])


def stored_frame(
    table: pd.DataFrame | None, manifest: Mapping[str, Any], name: str, args: Sequence[Any]
) -> pd.DataFrame | None:
    """The stored result ``name`` for ``args`` from a ``page_results`` ``table``, or None when
    the table has no such row or the row was computed from other inputs than the store's now
    (its stamp differs from :func:`inputs_stamp` of the current ``manifest``).

    >>> manifest = {"tables": {"monitor_verdicts": {"rows": 10, "parts": [{"blake2b": "1"}]}}}
    >>> rows = page_results_rows([("monitor_scores", (500,), pd.DataFrame({"f1": [0.5]}))],
    ...     manifest).to_pandas()
    >>> stored_frame(rows, manifest, "monitor_scores", (500,))["f1"].tolist()
    [0.5]
    >>> stored_frame(rows, manifest, "monitor_scores", (200,)) is None  # another selection
    True
    >>> manifest["tables"]["monitor_verdicts"]["parts"].append({"blake2b": "2"})  # written since
    >>> stored_frame(rows, manifest, "monitor_scores", (500,)) is None
    True
    """
    if table is None or table.empty or name not in INPUTS:
        return None
    hit = table[(table["name"] == name) & (table["selection"] == selection_key(args))]
    if len(hit) != 1 or hit["inputs_stamp"].iloc[0] != inputs_stamp(manifest, INPUTS[name]):
        return None
    return frame_from_bytes(hit["payload"].iloc[0])
