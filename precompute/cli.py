"""Command line: ``python -m precompute <command> …``.

Commands::

    <stage> --store DIR [--config FILE] [--shard i/n]   one stage (see ``list``)
    run     --config FILE [--store DIR] [--shard i/n] [--stages a,b,…]
    run     --store DIR [--stages a,b,…]           no config: every CPU stage (grade, segment,
                                                       embed, judge with the lexical labeler,
                                                       metrics) over the traces already stored
    merge   --store DIR [--table NAME]                 compact each table's parts into one
    export  --store DIR --out DIR [--format parquet|csv] [--tables a,b]
    verify  --store DIR                                list problems (truncated parts, dup keys)
    publish --store DIR --out DIR [--resamples N] [--seed S] [--include-references]
                                                       static leaderboard snapshot (HTML, CSV, TeX)
    demo    [--problems N] [--out DIR]                 build the bundled CHAMP demo store
    calibrate --store DIR [--seed N] [--size small|full]  planted traces: how far each metric holds
    list                                               the stages, what they read and write

Without ``--config`` a stage uses the config recorded in the store's manifest (``run``
records it), else the defaults.

Errors are one line on stderr, never a traceback (details go to the stage's log file).
Exit codes:

====  ===========================================================================
0     success
1     a stage failed while running (model or engine error); see the stage's log
2     bad command line (unknown command, bad ``--shard``)
3     bad experiment config (file, section and key named)
4     store problem (not a store, corrupt part, a row that does not fit its schema)
5     missing input: an earlier stage has not run, or a model/asset is not installed
130   interrupted (Ctrl-C); rows written so far are kept, rerun to resume
====  ===========================================================================
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from precompute.config import ConfigError, ExperimentConfig, load_config
from precompute.sharding import ShardError, parse_shard

if TYPE_CHECKING:
    from precompute.stages import StageContext

__all__ = ["EXIT_CODES", "main"]

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_CONFIG = 3
EXIT_STORE = 4
EXIT_MISSING = 5
EXIT_INTERRUPTED = 130

EXIT_CODES = {
    EXIT_OK: "success",
    EXIT_FAILED: "a stage failed while running",
    EXIT_USAGE: "bad command line",
    EXIT_CONFIG: "bad experiment config",
    EXIT_STORE: "store problem",
    EXIT_MISSING: "missing input (earlier stage, model or asset)",
    EXIT_INTERRUPTED: "interrupted",
}


class UsageError(Exception):
    """A command line that parses but makes no sense."""


class _Parser(argparse.ArgumentParser):
    """argparse that reports errors as one line and exit code 2 (no usage dump)."""

    def error(self, message: str) -> NoReturn:
        print(f"precompute: error: {message} (see python -m precompute --help)", file=sys.stderr)
        raise SystemExit(EXIT_USAGE)


def _build_parser() -> argparse.ArgumentParser:
    from precompute.stages import STAGES

    parser = _Parser(
        prog="python -m precompute",
        description="Legi-Val precompute: stages that fill a results store.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="exit codes: " + "; ".join(f"{c} {w}" for c, w in EXIT_CODES.items()),
    )
    sub = parser.add_subparsers(dest="command", metavar="command", parser_class=_Parser)

    def common(p: argparse.ArgumentParser, *, store_required: bool = True) -> None:
        p.add_argument("--store", required=store_required, type=Path, help="results store folder")
        p.add_argument("--config", type=Path, help="TOML experiment config")
        p.add_argument("--shard", help="process slice i of n (0-based), e.g. 0/4")
        p.add_argument("--no-progress", action="store_true", help="hide progress bars")
        p.add_argument(
            "--threads", type=int, help="CPU threads for torch (1 is fastest on a busy machine)"
        )

    for name, info in STAGES.items():
        stage_parser = sub.add_parser(name, help=info.help, description=info.help)
        common(stage_parser)
        _stage_hook(info, "add_arguments", stage_parser)

    run = sub.add_parser(
        "run",
        help="execute a TOML experiment config end to end; without --config, every CPU stage "
        "over the traces in --store",
    )
    common(run, store_required=False)
    run.add_argument("--stages", help="comma-separated subset, in config order")

    merge = sub.add_parser("merge", help="compact the parts of each table into one")
    merge.add_argument("--store", required=True, type=Path)
    merge.add_argument("--table", help="only this table")

    export = sub.add_parser("export", help="write tables as Parquet or CSV")
    export.add_argument("--store", required=True, type=Path)
    export.add_argument("--out", required=True, type=Path)
    export.add_argument("--format", default="parquet", choices=("parquet", "csv"))
    export.add_argument("--tables", help="comma-separated table names (default: all)")

    verify = sub.add_parser("verify", help="check a store for corrupt parts and duplicate keys")
    verify.add_argument("--store", required=True, type=Path)

    publish = sub.add_parser(
        "publish",
        help="write a self-contained static leaderboard (index.html, CSV, LaTeX)",
        description="Write the leaderboard with 95%% value and rank intervals, the transfer "
        "curves and the Pareto chart as one HTML file that opens offline, plus the table as "
        "CSV and LaTeX.",
    )
    publish.add_argument("--store", required=True, type=Path)
    publish.add_argument("--out", required=True, type=Path, help="folder to write into")
    publish.add_argument(
        "--resamples", type=int, default=None, help="problem resamples (default: the app's)"
    )
    publish.add_argument("--seed", type=int, default=None, help="resampling seed")
    publish.add_argument(
        "--include-references",
        action="store_true",
        help="rank reference teachers (human solutions, gold rationales) like any model",
    )

    demo = sub.add_parser("demo", help="build the bundled CHAMP demo store (offline)")
    demo.add_argument(
        "--problems", type=int, default=None, help="the first N CHAMP problems (one dataset)"
    )
    demo.add_argument(
        "--per-category",
        type=int,
        default=None,
        help="the first N problems of each CHAMP category, one dataset each (default 10)",
    )
    demo.add_argument("--out", type=Path, default=None, help="store folder")
    demo.add_argument("--max-tokens", type=int, default=None, help="student budget")
    demo.add_argument("--engine", default=None, help="student engine (transformers, llamacpp)")
    demo.add_argument("--no-progress", action="store_true")
    demo.add_argument("--threads", type=int, help="CPU threads for torch")

    _calibrate().add_arguments(sub.add_parser("calibrate", help="calibration store and report"))
    sub.add_parser("list", help="list the stages")
    return parser


def _stage_hook(info: Any, name: str, arg: Any) -> Any:
    """Call a stage module's optional hook (``add_arguments`` / ``options_from_args``)."""
    hook = getattr(sys.modules[info.function.__module__], name, None)
    return hook(arg) if callable(hook) else None


def _config_for(args: argparse.Namespace, store: Any | None) -> ExperimentConfig:
    if getattr(args, "config", None) is not None:
        return load_config(args.config)
    recorded = (store.manifest.get("config") if store is not None else None) or {}
    if recorded:
        return ExperimentConfig.from_dict(recorded, source=f"{store.path}/manifest.json")
    return ExperimentConfig()


def _open_store(path: Path, config: ExperimentConfig | None = None, create: bool = True) -> Any:
    from legival_core.store import Store

    if create:
        return Store.create(path, config=config.to_dict() if config is not None else None)
    return Store.open(path)


def _cmd_stage(args: argparse.Namespace) -> int:
    from precompute.stages import StageContext, run_stage

    shard = parse_shard(args.shard)
    file_config = load_config(args.config) if args.config is not None else None
    store = _open_store(args.store, file_config)
    config = file_config or _config_for(args, store)
    ctx = StageContext(store=store, config=config, shard=shard, progress=_progress(args))
    from precompute.stages import STAGES

    # Stages with options of their own (reward --model, monitor --kinds, ...) parse them here.
    ctx.stage_options = {
        args.command: _stage_hook(STAGES[args.command], "options_from_args", args) or {}
    }
    try:
        result = run_stage(args.command, ctx)
    finally:
        ctx.engines.close()
    print(result.summary(), file=sys.stderr)
    return EXIT_OK


def _cmd_run(args: argparse.Namespace) -> int:
    from precompute.stages import STAGES, StageContext

    if args.config is None:
        if args.store is None:
            raise UsageError(
                "run needs --config FILE (an experiment TOML, e.g. configs/smoke.toml), or "
                "--store DIR to run the CPU stages over traces already in a store"
            )
        return _cmd_run_cpu(args)
    config = load_config(args.config)
    stages = list(config.stages)
    if args.stages:
        wanted = [s.strip() for s in args.stages.split(",") if s.strip()]
        unknown = [s for s in wanted if s not in STAGES]
        if unknown:
            raise UsageError(f"--stages: unknown stage(s) {unknown}; known: {sorted(STAGES)}")
        stages = [s for s in stages if s in wanted] + [s for s in wanted if s not in stages]
    unknown = [s for s in stages if s not in STAGES]
    if unknown:
        raise ConfigError(
            f"{config.source}: [experiment] stages: unknown stage(s) {unknown}; "
            f"known: {sorted(STAGES)}"
        )
    store_path = args.store or Path("results") / config.name
    store = _open_store(store_path, config)
    shard = parse_shard(args.shard)
    ctx = StageContext(store=store, config=config, shard=shard, progress=_progress(args))
    return _run_stages(ctx, stages)


def _run_stages(ctx: StageContext, stages: list[str]) -> int:
    """Run ``stages`` in order in one context, printing each summary; close its engines."""
    from precompute.stages import STAGES, run_stage

    try:
        for name in stages:
            if not ctx.shard.is_whole and not STAGES[name].shardable:
                print(f"{name}: skipped in a sharded run (run it after merge)", file=sys.stderr)
                continue
            result = run_stage(name, ctx)
            print(result.summary(), file=sys.stderr)
    finally:
        ctx.engines.close()
    print(f"store: {ctx.store.path}", file=sys.stderr)
    return EXIT_OK


#: What ``run --store DIR`` without a config runs, in order: every stage that needs neither a
#: GPU nor a model named in a config (``judge`` with the lexical labeler only).
CPU_STAGES = ("grade", "segment", "embed", "judge", "metrics")


def cpu_config(recorded: ExperimentConfig) -> ExperimentConfig:
    """The config of a CPU-only run: the store's recorded one with the judge made lexical.

    The LLM judge needs a model, so it is left out; everything else (segment mode, τ, profile,
    encoding) keeps the recorded values, so a rerun measures the store as it was measured.
    """
    from dataclasses import replace

    return replace(
        recorded,
        stages=CPU_STAGES,
        judge=replace(recorded.judge, labelers=("lexical",), model=None),
    )


def _cmd_run_cpu(args: argparse.Namespace) -> int:
    """``run --store DIR`` with no config: grade, segment, embed, judge, metrics, in order.

    Each stage skips the keys it has already written, so a rerun only finishes the work; a
    store without traces stops at once with exit 5, naming how to add some.
    """
    from precompute.stages import STAGES, StageContext, StageError

    if args.shard is not None:
        raise UsageError("run without --config works on the whole store: drop --shard")
    stages = list(CPU_STAGES)
    if args.stages:
        wanted = [s.strip() for s in args.stages.split(",") if s.strip()]
        other = [s for s in wanted if s not in CPU_STAGES]
        if other:
            unknown = [s for s in other if s not in STAGES]
            if unknown:
                raise UsageError(f"--stages: unknown stage(s) {unknown}; known: {sorted(STAGES)}")
            raise UsageError(
                f"--stages: {other} need a model from an experiment config; without --config "
                f"run only {list(CPU_STAGES)}"
            )
        stages = [s for s in CPU_STAGES if s in wanted]
    if not (Path(args.store) / "manifest.json").is_file():
        raise StageError(
            f"{args.store} is not a results store yet; add traces first with "
            f"`python -m precompute.ingest FILE --store {args.store} --teacher NAME --task TASK`"
        )
    store = _open_store(args.store, create=False)
    if not store.has("traces") or store.read("traces", columns=["trace_id"]).empty:
        raise StageError(
            f"{store.path}: table 'traces' is empty; add traces first with "
            "`python -m precompute.ingest FILE --store DIR --teacher NAME --task TASK` "
            "(or run `generate` with a config)"
        )
    config = cpu_config(_config_for(args, store))
    ctx = StageContext(store=store, config=config, progress=_progress(args))
    return _run_stages(ctx, stages)


def _cmd_merge(args: argparse.Namespace) -> int:
    store = _open_store(args.store, create=False)
    store.merge(args.table)
    print(f"merged {args.table or 'all tables'} in {store.path}", file=sys.stderr)
    return EXIT_OK


def _cmd_export(args: argparse.Namespace) -> int:
    store = _open_store(args.store, create=False)
    tables = [t.strip() for t in args.tables.split(",")] if args.tables else None
    for path in store.export(args.out, fmt=args.format, tables=tables):
        print(path)
    return EXIT_OK


def _cmd_verify(args: argparse.Namespace) -> int:
    store = _open_store(args.store, create=False)
    problems = store.verify()
    for problem in problems:
        print(problem)
    if problems:
        print(f"{len(problems)} problem(s) found in {store.path}", file=sys.stderr)
        return EXIT_STORE
    print(f"{store.path}: ok", file=sys.stderr)
    return EXIT_OK


def _cmd_publish(args: argparse.Namespace) -> int:
    from precompute.publish import PublishOptions, publish

    options = PublishOptions()
    if args.resamples is not None:
        if args.resamples < 1:
            raise UsageError(f"--resamples must be at least 1, got {args.resamples}")
        options = PublishOptions(n_boot=args.resamples, seed=options.seed)
    if args.seed is not None:
        options = PublishOptions(n_boot=options.n_boot, seed=args.seed)
    if args.include_references:
        options = dataclasses.replace(options, include_references=True)
    if args.out.exists() and not args.out.is_dir():
        raise UsageError(f"--out {args.out} exists and is not a folder")
    _open_store(args.store, create=False)  # a missing or damaged store is exit 4, not 1
    for path in publish(args.store, args.out, options):
        print(path)
    return EXIT_OK


def _cmd_demo(args: argparse.Namespace) -> int:
    from precompute.demo import DemoOptions, build_demo

    options = DemoOptions()
    overrides: dict[str, Any] = {}
    if args.problems is not None:
        if args.problems < 1:
            raise UsageError("--problems must be at least 1")
        overrides["problems"] = args.problems
    if args.per_category is not None:
        if args.per_category < 1:
            raise UsageError("--per-category must be at least 1")
        if args.problems is not None:
            raise UsageError("give --problems or --per-category, not both")
        overrides["per_category"] = args.per_category
    if args.out is not None:
        overrides["out"] = args.out
    if args.max_tokens is not None:
        if args.max_tokens < 1:
            raise UsageError("--max-tokens must be at least 1")
        overrides["max_tokens"] = args.max_tokens
    if args.engine is not None:
        overrides["engine"] = args.engine
    options = options.replace(**overrides)
    store = build_demo(options, progress=_progress(args))
    print(f"demo store: {store.path}", file=sys.stderr)
    return EXIT_OK


def _cmd_list(args: argparse.Namespace) -> int:
    del args
    from precompute.stages import STAGES

    for name, info in STAGES.items():
        reads = ",".join(info.reads) or "-"
        writes = ",".join(info.writes)
        print(f"{name:10s} reads {reads:40s} writes {writes:30s} {info.help}")
    return EXIT_OK


def _set_threads(count: int) -> None:
    """Limit torch's CPU threads (OpenMP threads spin-wait badly when cores are shared)."""
    import os

    if count < 1:
        raise UsageError(f"--threads must be at least 1, got {count}")
    os.environ["LEGIVAL_THREADS"] = str(count)  # read by the llama.cpp engine
    for variable in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[variable] = str(count)
    if "torch" in sys.modules:
        sys.modules["torch"].set_num_threads(count)


def _calibrate() -> Any:
    from precompute import calibrate

    return calibrate


def _progress(args: argparse.Namespace) -> bool | None:
    return False if getattr(args, "no_progress", False) else None


_COMMANDS = {
    "run": _cmd_run,
    "merge": _cmd_merge,
    "export": _cmd_export,
    "verify": _cmd_verify,
    "publish": _cmd_publish,
    "demo": _cmd_demo,
    "calibrate": lambda args: _calibrate().run(args),
    "list": _cmd_list,
}


def _exit_code(error: BaseException) -> int:
    """Map an exception to the documented exit code."""
    from legival_core.schema import SchemaError
    from precompute.stages import StageError

    store_errors: tuple[type[BaseException], ...] = (SchemaError,)
    try:
        from legival_core.store import StoreError

        store_errors = (*store_errors, StoreError)
    except ImportError:
        pass
    missing: tuple[type[BaseException], ...] = (StageError, FileNotFoundError, ImportError)
    try:
        from legival_core.assets import MissingAssetError

        missing = (*missing, MissingAssetError)
    except ImportError:
        pass
    if isinstance(error, UsageError | ShardError):
        return EXIT_USAGE
    if isinstance(error, ConfigError):
        return EXIT_CONFIG
    if isinstance(error, store_errors):
        return EXIT_STORE
    if isinstance(error, missing):
        return EXIT_MISSING
    return EXIT_FAILED


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the exit code (see the module docstring)."""
    parser = _build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    handler = _COMMANDS.get(args.command, _cmd_stage)
    try:
        if getattr(args, "threads", None) is not None:
            _set_threads(args.threads)
        return handler(args)
    except KeyboardInterrupt:
        print(
            "precompute: interrupted; rows written so far are kept, rerun to resume",
            file=sys.stderr,
        )
        return EXIT_INTERRUPTED
    except Exception as error:  # the CLI's contract: one line, never a traceback
        code = _exit_code(error)
        message = str(error).strip().splitlines()[0] if str(error).strip() else ""
        kind = type(error).__name__
        text = message if code in (EXIT_USAGE, EXIT_CONFIG) else f"{kind}: {message}"
        hint = ""
        store_path = getattr(args, "store", None)
        if code == EXIT_FAILED and store_path is not None and args.command not in _COMMANDS:
            hint = f" (details: {Path(store_path) / 'logs'})"
        print(f"precompute: error: {text}{hint}", file=sys.stderr)
        return code
