"""Stage ``problems``: load the configured dataset into the store's ``problems`` table.

``[problems] dataset`` names a loader of :data:`precompute.datasets.DATASETS`; ``limit`` and
``ids`` pick a subset; ``options`` go to the loader (``source = "file.jsonl"`` for a local
copy). Problems already in the store are kept as they are (their ids are skipped), so adding
problems to a config and rerunning only loads the new ones.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from precompute.stages.base import StageContext, StageError, StageResult, register_stage
from precompute.stages.common import done_ids

__all__ = ["run_problems"]


def _resolve_source(source: str | None, config_source: str) -> str | None:
    """A relative ``source`` is looked up next to the config file first, then in the cwd."""
    if source is None or Path(source).is_absolute():
        return source
    beside_config = Path(config_source).parent / source
    if Path(config_source).is_file() and beside_config.exists():
        return str(beside_config)
    return source


@register_stage(
    "problems",
    writes=("problems",),
    help="load the configured dataset's problems into the store",
    shardable=False,
)
def run_problems(ctx: StageContext) -> StageResult:
    from precompute.datasets import DATASETS, DatasetError, load_problems

    cfg = ctx.config.problems
    result = StageResult("problems")
    if cfg.dataset is None:
        if ctx.store.has("problems"):
            result.notes.append("no [problems] dataset configured; kept the stored problems")
            return result
        raise StageError(
            f"{ctx.config.source}: [problems] dataset is not set and the store has no "
            f"problems (datasets: {', '.join(sorted(DATASETS))})"
        )
    options: dict[str, Any] = dict(cfg.options)
    source = _resolve_source(options.pop("source", None), ctx.config.source)
    # With explicit ids the whole dataset is read and filtered; otherwise the loader limits.
    limit = None if cfg.ids else cfg.limit
    try:
        frame = load_problems(cfg.dataset, source, limit=limit, **options)
    except DatasetError as err:  # the same kind (and exit code) as the datasets command gives
        raise type(err)(f"problems: {err}") from None
    for skipped in frame.attrs.get("skipped", []):
        ctx.logger.warning("skipped source row: %s", skipped)
    if cfg.ids:
        wanted = set(cfg.ids)
        missing = sorted(wanted - set(frame["problem_id"]))
        if missing:
            raise StageError(
                f"{ctx.config.source}: [problems] ids not in dataset {cfg.dataset!r}: "
                f"{missing[:5]}{' ...' if len(missing) > 5 else ''}"
            )
        frame = frame[frame["problem_id"].isin(wanted)]
        if cfg.limit is not None:
            frame = frame.head(cfg.limit)
    done = done_ids(ctx.store, "problems", "problem_id")
    fresh = frame[~frame["problem_id"].isin(done)].reset_index(drop=True)
    result.skipped = len(frame) - len(fresh)
    result.todo = len(fresh)
    if len(fresh):
        ctx.store.write("problems", fresh, stage="problems")
    result.written["problems"] = len(fresh)
    credit = getattr(DATASETS.get(cfg.dataset), "credit", "")
    result.provenance = {"dataset": cfg.dataset, "credit": credit, "limit": cfg.limit}
    return result
