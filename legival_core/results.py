"""The front door for notebooks: ``lv.open(path)`` and the app's tables as DataFrames.

>>> import legival_core as lv
>>> r = lv.open("results/demo")
>>> r
Results('results/demo')

Each method makes the same ``legival_core`` calls, with the same defaults, as the app page
it is named after, so a notebook reads the numbers the app shows (``tests/test_front_door.py``
runs every page headless and compares):

- :meth:`Results.leaderboard`: the Leaderboard's rank table (:func:`views.leaderboard`);
- :meth:`Results.rank_intervals`: its "Rank intervals of" table (:func:`board.metric_detail`).
  The Leaderboard page reads both through the very functions these call
  (:mod:`legival_core.views.board_view`, for one
  :class:`~legival_core.rankings.selection.Selection`), only cached its own way;
- :meth:`Results.curves` (and :meth:`Results.transfer`): the Transfer curves page's view;
- :meth:`Results.traces` and :meth:`Results.trace`: the Trace inspector's table of traces and
  one trace's steps (:func:`views.trace_choices`, :func:`views.step_table`);
- :meth:`Results.correlations`: the Correlations page's heatmap (ρ, p or n);
- :meth:`Results.decomposition`: the Efficiency decomposition page's E0 board
  (:func:`views.e0_board`).

A filter left at ``None`` is the page's "All"; every other default is the page's first view.
A value the store does not hold (a dataset, a student, a trace id) raises ``ValueError``
naming it and the values there are, where the page would fall back to its default.

The store is only read: nothing here writes, locks or creates a file. This module sits above
:mod:`legival_core.views` (it is the one library module outside ``views/`` that may import it,
see ``tests/test_layers.py``) and never imports streamlit or the app's ``pages``.
"""

from __future__ import annotations

import copy
import os
import warnings
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from legival_core import views
from legival_core.grading.stamps import GraderStatus, grader_status
from legival_core.metrics.page_results import ResultKey
from legival_core.metrics.transfer import ROLLOUT_CATEGORIES
from legival_core.metrics.transfer_curves import BAND_RESAMPLES
from legival_core.rankings.selection import Selection
from legival_core.stats.support import SUPPORTS
from legival_core.store.store import Store
from legival_core.views import board_view
from legival_core.views.app_config import LOW_N_TRACES, RANK_RESAMPLES, RESAMPLE_SEED

#: What :meth:`Results.correlations` can return for each pair of metrics.
CORRELATION_VALUES = ("rho", "p", "p_holm", "n", "pairs")


def open(path: str | os.PathLike[str], *, stacklevel: int = 2) -> Results:
    """Open the results store at ``path`` for reading.

    A store graded by an older grader opens with a warning; ``stacklevel`` says whose line it
    points at (2: this function's caller; ``lv.open`` passes 3, its own caller).

    A folder that is not a store raises :class:`legival_core.store.store.StoreError` naming it:

    >>> open("no/such/store")
    Traceback (most recent call last):
    ...
    legival_core.store.errors.StoreError: no/such/store: no such store (folder not found)
    """
    results = Results(Store.open(path))
    status = results.grader_status
    if status is not None and status.stale:
        warnings.warn(f"{results.path}: {status.message}", UserWarning, stacklevel=stacklevel)
    return results


def _choose(what: str, value: Any, options: Sequence[Any]) -> Any:
    """``value`` if the store has it (None passes: no filter), else a ValueError listing the
    options (the app shows a note and falls back; a notebook should hear about the typo)."""
    if value is not None and value not in options:
        shown = ", ".join(map(str, options)) or "none"
        raise ValueError(f"{what} {value!r} is not in this store; it has: {shown}")
    return value


class Results:
    """One results store, read as the app reads it. Make one with :func:`open`.

    >>> r = open("results/demo")
    >>> r.teachers
    ['gpt-3.5', 'gpt-4', 'gpt-4-turbo', 'human', 'palm-2-medium']
    >>> r.reference_teachers
    ['human']
    >>> len(r.datasets), r.students
    (5, ['gemma3-270m', 'smollm2-135m'])
    """

    def __init__(self, store: Store) -> None:
        self._store = store
        self._cache: dict[tuple[Any, ...], Any] = {}
        self._stamp: float | None = None

    def __repr__(self) -> str:
        return f"Results({str(self._store.path)!r})"

    @property
    def path(self) -> Path:
        return self._store.path

    @property
    def grader_status(self) -> GraderStatus | None:
        """Which grader graded the store's grades and rollouts (None: it holds none); ``open``
        warns when it is an older one than this code's.

        >>> open("results/demo").grader_status.stale
        False
        """
        return self._cached(("grader_status",), lambda: grader_status(self._store))

    # -- reading (cached until the store's manifest changes, as the app's cache is) ---------

    def _cached(self, key: tuple[Any, ...], make: Callable[[], Any]) -> Any:
        try:
            stamp = self._store.manifest_path.stat().st_mtime
        except OSError:
            stamp = None
        if stamp != self._stamp:  # a pipeline rewrote the store: read it again
            self._cache.clear()
            self._stamp = stamp
        if key not in self._cache:
            self._cache[key] = make()
        return self._cache[key]

    def _manifest(self) -> dict[str, Any]:
        return self._cached(("manifest",), lambda: self._store.manifest)

    @property
    def manifest(self) -> dict[str, Any]:
        """The store's manifest (a copy: changing it changes nothing)."""
        return copy.deepcopy(self._manifest())

    def has_table(self, table: str) -> bool:
        """Whether the store has rows in ``table`` (from the manifest, as the pages decide)."""
        entry = (self._manifest().get("tables") or {}).get(table) or {}
        return bool(entry.get("rows"))

    @property
    def tables(self) -> list[str]:
        """The tables with rows in this store."""
        return sorted(t for t in self._manifest().get("tables") or {} if self.has_table(t))

    def table(
        self, table: str, columns: Sequence[str] | None = None, categorical: Sequence[str] = ()
    ) -> pd.DataFrame:
        """A stored table as pandas (empty when absent); ``categorical`` string columns are
        dictionary-encoded. The frame is shared between calls: copy it before changing it."""

        def read() -> pd.DataFrame:
            if not self._store.has(table):
                return pd.DataFrame()
            picked = list(columns) if columns else None
            if categorical:
                return views.arrow_to_frame(self._store.read_arrow(table, picked), categorical)
            return self._store.read(table, columns=picked)

        key = ("table", table, tuple(columns or ()), tuple(categorical))
        return self._cached(key, read)

    def _distinct(self, table: str, column: str) -> list[str]:
        def read() -> list[str]:
            if not self._store.has(table):
                return []
            values = self._store.read_arrow(table, columns=[column]).column(column).unique()
            return sorted(str(v) for v in values.to_pylist() if v is not None)

        return self._cached(("distinct", table, column), read)

    def _rollouts(self) -> pd.DataFrame:
        from legival_core.metrics.transfer import ROLLOUT_COLUMNS

        return self.table("rollouts", list(ROLLOUT_COLUMNS), ROLLOUT_CATEGORIES)

    @property
    def teachers(self) -> list[str]:
        return self._distinct("traces", "teacher") or self._distinct("teacher_metrics", "teacher")

    @property
    def datasets(self) -> list[str]:
        return self._distinct("teacher_metrics", "dataset")

    @property
    def students(self) -> list[str]:
        return self._distinct("rollouts", "student")

    @property
    def reference_teachers(self) -> list[str]:
        """Teachers that are references (a human solution, a gold rationale), which pages show
        apart and leave out of ranks unless asked (``include_references``)."""
        from legival_core.published.references import store_reference_teachers

        return self._cached(("references",), lambda: store_reference_teachers(self._store))

    @property
    def profile(self) -> str:
        """The transfer profile the stored ``teacher_metrics`` were computed with."""
        return views.metrics_profile(self._manifest())

    def _fresh_curves(self) -> pd.DataFrame | None:
        if not self.has_table("transfer_curves"):
            return None
        return views.fresh_transfer_curves(self.table("transfer_curves"), self._manifest())

    def student_metrics(self, profile: str | None = None) -> pd.DataFrame:
        """Transfer metrics per (teacher, dataset, student) under ``profile`` (the stored
        ``teacher_metrics``' one by default): from the stored curves when they are current,
        else regrouped from the rollouts (:func:`legival_core.views.board_view.student_metrics`,
        as the pages read them)."""
        profile = self.profile if profile is None else profile

        def make() -> pd.DataFrame:
            return board_view.student_metrics(self._fresh_curves(), self._rollouts, profile)

        return self._cached(("student_metrics", profile), make)

    def stored_result(self, name: str, key: ResultKey) -> pd.DataFrame | None:
        """The result ``name`` for ``key`` as the metrics stage stored it (``page_results``),
        or None when it is not there or its inputs were written since
        (:func:`legival_core.metrics.page_results.stored_frame`), as the pages read it."""
        from legival_core.metrics.page_results import stored_frame

        if not self.has_table("page_results"):
            return None
        return stored_frame(self.table("page_results"), self._manifest(), name, key)

    def _need(self, table: str, method: str) -> None:
        if not self.has_table(table):
            raise ValueError(f"{method} needs the table {table}, which {self.path} does not have")

    # -- the pages' tables ------------------------------------------------------------------

    def leaderboard(
        self,
        dataset: str | None = None,
        student: str | None = None,
        *,
        weights: Mapping[str, float] | None = None,
        include_references: bool = False,
        support: str = "common",
    ) -> pd.DataFrame:
        """The Leaderboard page's rank table: one row per teacher, each metric averaged over
        the chosen datasets, ``<metric>_rank`` (1 = best) and ``<metric>_change`` (accuracy
        rank − metric rank, the page's Δ), by :func:`legival_core.views.leaderboard`.

        ``support`` is the page's ``?support=``: ``"common"`` (the default) averages every
        teacher over the datasets on which every ranked teacher has a value of the metric;
        ``"all"`` over every dataset, leaving unranked the teachers that miss one
        (:mod:`legival_core.stats.support`). ``<metric>_datasets`` says how many datasets each
        mean is over and ``<metric>_covered`` how many the teacher has a value on, of
        ``n_dataset`` in the selection.

        ``student`` takes the transfer columns from that student's rollouts only; ``weights``
        (metric → weight > 0) adds the page's ``composite``; reference teachers get no rank
        unless ``include_references``. Rows come in the stored order, as the page's frame
        (the page sorts for display; sort by ``fotu_rank`` for its order).

        >>> board = open("results/demo").leaderboard()
        >>> board.set_index("teacher")["accuracy_rank"].dropna().astype(int).sort_values().index[0]
        'gpt-4-turbo'
        >>> len(board), {"fotu", "fotu_rank", "fotu_change"} <= set(board.columns)
        (5, True)
        """
        frame, metrics = self._board_rows(dataset, student)
        chosen = self._selection(dataset, student, weights, metrics, include_references, support)
        return board_view.board_table(self, frame, metrics, chosen)

    def _board_rows(
        self, dataset: str | None, student: str | None
    ) -> tuple[pd.DataFrame, list[str]]:
        """The ``teacher_metrics`` rows of the selection (the transfer columns of one student
        when chosen) and the metrics they rank: the Leaderboard page's ``board_rows``."""
        self._need("teacher_metrics", "leaderboard")
        _choose("dataset", dataset, self.datasets)
        _choose("student", student, self.students)
        return board_view.board_rows(self, dataset, student)

    @staticmethod
    def _selection(
        dataset: str | None,
        student: str | None,
        weights: Mapping[str, float] | None,
        metrics: Sequence[str],
        include_references: bool,
        support: str,
        n_boot: int = RANK_RESAMPLES,
        seed: int = RESAMPLE_SEED,
    ) -> Selection:
        """The page's :class:`Selection` of these arguments (the composite's positive weights
        in name order, as the page's URL sorts them), each weighted metric and the support
        checked against what the store ranks."""
        chosen = Selection(dataset, student, tuple((weights or {}).items()), n_boot, seed,
                           include_references, support)  # fmt: skip
        for name, _weight in chosen.weights:
            _choose("weighted metric", name, metrics)
        _choose("support", support, SUPPORTS)
        return chosen

    def rank_intervals(
        self,
        metric: str | None = None,
        dataset: str | None = None,
        student: str | None = None,
        *,
        weights: Mapping[str, float] | None = None,
        include_references: bool = False,
        support: str = "common",
        n_boot: int = RANK_RESAMPLES,
        seed: int = RESAMPLE_SEED,
        low_n: int = LOW_N_TRACES,
    ) -> pd.DataFrame:
        """The Leaderboard page's "Rank intervals of" table for one metric: per teacher, best
        first, the value, its 95% interval over ``n_boot`` paired resamples of the problems
        (the same draw for every teacher), the traces behind it (``n traces``; ``low n`` below
        ``low_n``), its rank, the rank's 95% interval and the teachers it is not separated
        from (:func:`legival_core.views.board.metric_detail`).

        ``metric`` defaults to the page's: ``"composite"`` with ``weights``, else FOTU (or
        accuracy in a store without transfer). The resample count, seed and low-n threshold
        are the app's defaults (``legival_core.views.app_config``), which ``streamlit run app.py``
        options can change.

        >>> detail = open("results/demo").rank_intervals()
        >>> list(detail.columns[:5])
        ['teacher', 'value', '95% lo', '95% hi', 'n traces']
        """
        from legival_core.views import board as board_layout

        frame, metrics = self._board_rows(dataset, student)
        chosen = self._selection(
            dataset, student, weights, metrics, include_references, support, n_boot, seed
        )
        if metric is None:
            metric = "composite" if chosen.weights else "fotu" if "fotu" in metrics else "accuracy"
        _choose("metric", metric, ["composite", *metrics] if chosen.weights else metrics)
        board = board_view.board_table(self, frame, metrics, chosen)
        unweighted = chosen.unweighted()  # the draws serve every composite

        def draw() -> Any:
            return board_view.selection_resamples(self, unweighted, metrics)

        intervals = board_view.selection_intervals(
            self, chosen, board, lambda: self._cached(("resamples", unweighted), draw)
        )
        return board_layout.metric_detail(board, intervals, metric, low_n)

    def transfer(
        self,
        dataset: str | None = None,
        student: str | None = None,
        *,
        profile: str | None = None,
        bands: bool = True,
    ) -> views.TransferView:
        """The Transfer curves page's whole view (curves, hazards, baseline, pooled summary)
        for one selection; :meth:`curves` is its ``curves`` frame."""
        from legival_core.metrics.transfer import PROFILES

        self._need("rollouts", "transfer curves")
        # the page's first option (its selectbox lists PROFILES in order)
        profile = next(iter(PROFILES)) if profile is None else profile
        _choose("profile", profile, list(PROFILES))
        table = self._fresh_curves()
        if table is not None:
            datasets, students = views.transfer_options(table)
        else:
            datasets, students = self._distinct("rollouts", "dataset"), self.students
        _choose("dataset", dataset, datasets)
        _choose("student", student, students)
        n_boot = BAND_RESAMPLES if bands else 0

        def make() -> views.TransferView:
            return views.stored_or_computed_view(
                table, self._rollouts, dataset, student, profile, n_boot
            )

        return self._cached(("transfer", dataset, student, profile, n_boot), make)

    def curves(
        self,
        dataset: str | None = None,
        student: str | None = None,
        *,
        profile: str | None = None,
        bands: bool = True,
    ) -> pd.DataFrame:
        """The Transfer curves page's μ_T(x): one row per (teacher, bin) with the curve's
        ``mean`` (the share of students correct after the first x = bin/50 of the trace) and,
        with ``bands``, its 95% band (``lo``, ``hi``) from 200 resamples of traces.

        ``profile`` is ``"paper"`` (the page's default) or ``"release"``.

        >>> curves = open("results/demo").curves()
        >>> sorted(curves["teacher"].unique())
        ['gpt-3.5', 'gpt-4', 'gpt-4-turbo', 'human', 'palm-2-medium']
        >>> {"teacher", "bin", "x", "mean", "lo", "hi"} <= set(curves.columns)
        True
        """
        return self.transfer(dataset, student, profile=profile, bands=bands).curves

    def traces(
        self,
        text: str = "",
        *,
        regex: bool = False,
        field: str = "both",
        correct: bool | None = None,
        rollouts: bool | None = None,
        leak: str = "any",
        where: Mapping[str, str | tuple[float | None, float | None]] | None = None,
        sort: str | None = None,
        descending: bool = False,
    ) -> pd.DataFrame:
        """The Trace inspector's trace table: one row per trace (teacher, problem, correct,
        m steps, tokens, FOTU, leak k, whether it has rollouts), most telling first.

        With any argument, the same filters as the inspector's *Find traces* (and its URL):
        the stored per-trace metrics are added as columns (``redundancy``, ``backtracking``,
        ``backtracks``, ``fotu_before_leak``, ``top_share``); ``where`` sets thresholds on
        them or on ``m``, ``tokens``, ``fotu``, ``leak_k`` (``{"redundancy": ">0.3",
        "backtracks": ">=2"}``, or ``(low, high)``); ``correct`` / ``rollouts`` keep one value;
        ``leak`` is one of ``any``, ``leaks``, ``no-leak``, ``solved-before``, ``only-after``;
        ``text`` is looked for in the reasoning and/or answer (``field``), as a substring or a
        ``regex``, within the search's bounds (:mod:`legival_core.views.trace_search`: a
        warning says when they stopped it); ``sort`` names a column.

        >>> r = open("results/demo")
        >>> wrong = r.traces(correct=False, where={"m": ">=3"}, sort="tokens", descending=True)
        >>> bool((~wrong["correct"]).all() and (wrong["m"] >= 3).all())
        True
        """
        self._need("traces", "traces")

        def make() -> pd.DataFrame:
            return views.store_trace_choices(self._store)

        choices = self._cached(("traces",), make)
        asked = (text, regex, field, correct, rollouts, leak, where, sort, descending)
        if asked == ("", False, "both", None, None, "any", None, None, False):
            return choices
        from legival_core.views import trace_search

        ranges: dict[str, tuple[float | None, float | None]] = {}
        for name, bound in (where or {}).items():
            if isinstance(bound, str):
                ranges[name] = trace_search.parse_range(bound)
            else:
                low, high = bound  # a two-item list works too; any other length is an error
                ranges[name] = (low, high)
        query = trace_search.TraceQuery(
            text=text, regex=regex, field=field, correct=correct, rollouts=rollouts,
            leak=leak, ranges=ranges, sort=sort, descending=descending,
        )  # fmt: skip
        table = self._cached(
            ("trace_metrics",), lambda: trace_search.trace_metrics(choices, self._store)
        )
        found, result = trace_search.find_traces(table, self._store, query)
        if not result.complete:
            warnings.warn(result.summary(), stacklevel=2)
        return found

    def trace(self, trace_id: str | None = None) -> pd.DataFrame:
        """The Trace inspector's steps of one trace: ``step``, ``number``, ``text``, ``tokens``,
        ``similarity`` (r_i, the best cosine to an earlier step), ``matched_step``, ``redundant``
        (r_i > τ, the store's recorded threshold) and one ``flag_<labeler>`` column per
        backtracking labeler kind (the lexical detector's and the context-aware cues' flags
        computed when the store has none of them).

        Without ``trace_id``: the trace the inspector opens on (the first row of :meth:`traces`).

        >>> steps = open("results/demo").trace()
        >>> list(steps.columns[:7])
        ['step', 'number', 'text', 'tokens', 'similarity', 'matched_step', 'redundant']
        """
        from legival_core.metrics.efficiency import REDUNDANCY_THRESHOLDS
        from legival_core.metrics.redundancy_sweep_view import recorded_threshold

        self._need("steps", "trace")
        choices = self.traces()
        if trace_id is None:
            trace_id = str(choices["trace_id"].iloc[0])
        elif trace_id not in set(choices["trace_id"].astype(str)):
            raise ValueError(f"trace {trace_id!r} is not in this store (see Results.traces())")
        tau = recorded_threshold(self._manifest()) or REDUNDANCY_THRESHOLDS["paper"]

        def make() -> pd.DataFrame:
            one = {"trace_id": trace_id}

            def read(table: str) -> pd.DataFrame:
                return self._store.read(table, filters=one) if self._store.has(table) else None

            trace = self._store.read("traces", filters=one).iloc[0]
            problem = (
                self._store.read("problems", filters={"problem_id": trace["problem_id"]})
                if self._store.has("problems")
                else pd.DataFrame()
            )
            steps = read("steps")
            table = views.step_table(steps, read("similarity"), read("judgments"), threshold=tau)
            task = problem["task"].iloc[0] if len(problem) and "task" in problem else None
            return views.with_offline_flags(table, task)

        return self._cached(("trace", trace_id, tau), make)

    def step_attribution(self, trace_id: str) -> pd.DataFrame:
        """One trace's per-step transfer attribution (docs/metrics/attribution.md): one row
        per step (``step``, ``attribution``, ``se``, ``k_prev``, ``k``,
        ``interval_attribution``), from that trace's rollouts (a keyed read)."""
        from legival_core.metrics.attribution import step_attribution

        self._need("rollouts", "step_attribution")
        steps = self.trace(trace_id)

        def make() -> pd.DataFrame:
            rollouts = self._store.read(
                "rollouts", columns=["trace_id", "k", "correct"], filters={"trace_id": trace_id}
            )
            return step_attribution(rollouts, m=len(steps))

        return self._cached(("step_attribution", trace_id), make)

    def attribution(self) -> pd.DataFrame:
        """Per teacher: how concentrated the useful steps are, the mean over its traces of the
        share of positive per-step attribution the top 10% of steps carry (``top_share``,
        ``top_share_se``, ``uniform_share``, ``traces``, ``traces_without_help``)."""
        self._need("rollouts", "attribution")

        def make() -> pd.DataFrame:
            return views.stored_teacher_attribution(self._store)

        return self._cached(("attribution",), make)

    def correlations(
        self,
        level: str | None = None,
        dataset: str | None = None,
        *,
        correct_only: bool = False,
        partial: bool = False,
        include_references: bool = False,
        value: str = "rho",
        support: str = "common",
    ) -> pd.DataFrame:
        """The Correlations page's heatmap as a metric × metric frame: Spearman ρ (``value=
        "rho"``), its p-value (``"p"``), that p Holm-adjusted over the pairs of the matrix
        (``"p_holm"``, what the page's stars read) or the points behind it (``"n"``); with
        ``"pairs"`` one row per pair with all of these, the stars and the reason a pair is
        related by construction (:func:`legival_core.views.correlation_pairs`, the page's
        download).

        ``level`` is ``"trace"`` (one point per trace, the page's default when the store has
        per-trace tables) or ``"model"`` (one point per teacher, reference teachers left out
        unless ``include_references``, each averaged over the datasets ``support`` names as in
        :meth:`leaderboard`); ``correct_only`` recomputes the efficiency metrics from
        correct traces; ``partial`` holds tokens fixed (partial ρ, tokens itself left out).
        Metrics that do not vary in the selection are left out, as on the page.

        >>> rho = open("results/demo").correlations()
        >>> list(rho.columns) == list(rho.index), "tokens" in rho.columns
        (True, True)
        """
        self._need("teacher_metrics", "correlations")
        has_traces = self.has_table("trace_efficiency")
        levels = ["trace", "model"] if has_traces else ["model"]
        level = levels[0] if level is None else _choose("level", level, levels)
        _choose("dataset", dataset, self.datasets)
        _choose("value", value, CORRELATION_VALUES)
        _choose("support", support, SUPPORTS)
        correct_only = correct_only and has_traces  # the page greys the choice out otherwise

        def make() -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
            efficiency = views.filter_rows(self.table("trace_efficiency"), dataset=dataset)
            if level == "model":
                frame = views.model_level_frame(
                    views.filter_rows(self.table("teacher_metrics"), dataset=dataset),
                    efficiency,
                    correct_only,
                    self.reference_teachers,
                    include_references,
                    support,
                )
            else:
                transfer = views.filter_rows(self.table("trace_transfer"), dataset=dataset)
                frame = views.trace_level_frame(efficiency, transfer, correct_only)
            return views.correlation_matrices(frame, partial)

        key = ("correlations", level, correct_only, dataset, partial, include_references, support)
        rho, pvalue, counts = self._cached(key, make)
        if value == "p_holm":
            return views.holm_matrix(pvalue)
        if value == "pairs":
            return views.correlation_pairs(rho, pvalue, counts)
        return {"rho": rho, "p": pvalue, "n": counts}[value]

    def decomposition(
        self,
        benchmark: str | None = None,
        layer: str | None = None,
        *,
        include_references: bool = False,
        n_boot: int = RANK_RESAMPLES,
        seed: int = RESAMPLE_SEED,
    ) -> pd.DataFrame:
        """The Efficiency decomposition page's E0 board: one row per model of ``benchmark``
        (the page's first, alphabetically, when None), ranked by E0 = 1000 · P(correct) / E[T]
        (correct answers per 1,000 tokens), with accuracy, r_ctx, r_logic, E[T] (``mean_tokens``),
        VŌ and κ where the ``layer`` has them. ``layer``: ``"native"`` (the benchmark's own
        workload W, the page's default), ``"solver"`` or ``"trace"``. Reference teachers get no
        rank unless ``include_references``. Where the store has its traces and grades, E0 comes
        with its 95% interval over ``n_boot`` resamples of the problems (``e0_lo``, ``e0_hi``)
        and the problems behind it (``n_instances``) beside it
        (:func:`legival_core.views.efficiency.board_with_intervals`).

        >>> board = open("results/demo").decomposition()
        >>> board["benchmark"].unique().tolist()
        ['champ-combinatorics']
        >>> board["model"].iloc[-1]  # the reference teacher, unranked, last
        'human'
        """
        self._need("decomposition", "decomposition")
        rows = self.table("decomposition")
        benchmarks = sorted(rows["benchmark"].unique())
        benchmark = benchmarks[0] if benchmark is None else benchmark
        _choose("benchmark", benchmark, benchmarks)
        rows = rows[rows["benchmark"] == benchmark]
        layers = sorted(rows["layer"].unique())
        layer = ("native" if "native" in layers else layers[0]) if layer is None else layer
        _choose("layer", layer, layers)
        rows = rows[rows["layer"] == layer]
        board = views.e0_board(rows, self.reference_teachers, include_references)
        if not (self.has_table("traces") and self.has_table("grades")):
            return board
        from legival_core.views import efficiency as efficiency_view

        def draw() -> pd.DataFrame:
            instances = views.decomposition_instances(
                self.table("traces")[
                    [c for c in views.INSTANCE_TRACE_COLUMNS if c in self.table("traces")]
                ],
                self.table("grades")[["trace_id", "correct"]],
            )
            return efficiency_view.e0_intervals(
                instances[instances["benchmark"] == benchmark], n_boot, seed
            )  # fmt: skip

        intervals = self._cached(("e0_intervals", benchmark, n_boot, seed), draw)
        return efficiency_view.board_with_intervals(board, intervals)
