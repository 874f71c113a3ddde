"""Command line: ``python -m precompute <command> …`` (installed: ``legival <command> …``).

Commands::

    <stage> --store DIR [--config FILE] [--shard i/n]   one stage (see ``list``); a stage's own
                                                       options are declared where it is
                                                       registered (``register_stage(options=…)``)
    run     --config FILE [--store DIR] [--shard i/n] [--stages a,b,…]
    run     --store DIR [--stages a,b,…] [--students default]
                                                       no config: every CPU stage (grade, segment,
                                                       embed, judge with the lexical labeler,
                                                       metrics) over the traces already stored;
                                                       --students adds the rollouts of the demo's
                                                       two packaged students (transfer utility)
    ingest  FILE --store DIR [--teacher NAME] [--task T] your own traces into a store
    datasets [NAME [SOURCE]] [--list] [--store DIR | --out FILE]   load a benchmark's problems
    published [--out DIR]                              build the store of the papers' numbers
    merge   --store DIR [--table NAME]                 compact each table's parts into one
    export  --store DIR --out DIR [--format parquet|csv] [--tables a,b]
    verify  --store DIR                                list problems (truncated parts, dup keys);
                                                       say which grader version graded it
    regrade --store DIR                                grade again what an older grader graded
                                                       (grades, rollouts); list what flipped
    publish --store DIR [--store DIR …] --out DIR [--resamples N] [--seed S] [--traces N]
            [--include-references] [--space] [--prefer STORE] [--allow-mixed-graders]
            [--skip FAMILY …]
                                                       static leaderboard site (HTML, CSV, TeX)
    publish --check SITE --store DIR [--store DIR …]   does the site still match? (exit 0 / 1)
    demo    [--problems N] [--out DIR]                 build the bundled CHAMP demo store
    calibrate --store DIR [--seed N] [--size small|full]  planted traces: how far each metric holds
    list                                               the stages, what they read and write

Without ``--config`` a stage uses the config recorded in the store's manifest (``run``
records it), else the defaults. Every command except the stages is an entry of
:data:`COMMANDS`, added with :func:`command`.

Errors are one line on stderr, never a traceback (details go to the stage's log file).
Every command uses the same exit codes, :data:`EXIT_CODES` (``--help`` prints them):

====  ===========================================================================
0     success (ingest: at least one row kept; the bad ones are in quarantine.jsonl)
1     failed while running: an unexpected error (a stage's details are in its log)
2     bad command line: unknown command or name, an option value out of range
3     bad experiment config (file, section and key named)
4     store problem: not a store, a damaged manifest or part, a row that does not fit its
      schema, a disk that refuses writes
5     missing input: an earlier stage has not run; a file, model, package, asset or hub
      dataset is not there
6     unusable input: a file that cannot be read, or not one of its rows could be kept
130   interrupted (Ctrl-C); rows written so far are kept, rerun to resume
====  ===========================================================================
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import sys
import textwrap
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from precompute.config import ConfigError, ExperimentConfig, load_config
from precompute.errors import InputMissingError, InputUnusableError, UsageError
from precompute.progress import progress_enabled, silence_library_bars
from precompute.sharding import ShardError, parse_shard

if TYPE_CHECKING:
    from legival_core.store.store import Store
    from legival_core.store.verify import StoreProblem
    from precompute.stages import StageContext

__all__ = ["COMMANDS", "EXIT_CODES", "Command", "UsageError", "command", "main"]

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_CONFIG = 3
EXIT_STORE = 4
EXIT_MISSING = 5
EXIT_UNUSABLE = 6
EXIT_INTERRUPTED = 130

#: The one set of exit codes of every command: code -> what it means.
EXIT_CODES = {
    EXIT_OK: "success (ingest: at least one row kept)",
    EXIT_FAILED: "failed while running (an unexpected error; a stage's details are in its log)",
    EXIT_USAGE: "bad command line (unknown command or name, an option value out of range)",
    EXIT_CONFIG: "bad experiment config",
    EXIT_STORE: "store problem (not a store, damaged part, schema mismatch, disk full)",
    EXIT_MISSING: "missing input (earlier stage, file, model, package, asset or hub dataset)",
    EXIT_UNUSABLE: "unusable input (a file that cannot be read, or no row of it could be kept)",
    EXIT_INTERRUPTED: "interrupted (rows written so far are kept; rerun to resume)",
}


def exit_code_table() -> str:
    """:data:`EXIT_CODES` as the lines ``--help`` prints, one code a line.

    >>> exit_code_table().splitlines()[1]
    '    0  success (ingest: at least one row kept)'
    """
    return "exit codes:\n" + "\n".join(f"  {c:>3}  {w}" for c, w in EXIT_CODES.items())


Handler = Callable[[argparse.Namespace], int]
Arguments = Callable[[argparse.ArgumentParser], None]


@dataclass(frozen=True)
class Command:
    """A command other than a stage: its name, one-line help, options and handler."""

    name: str
    help: str
    arguments: Arguments
    handler: Handler
    description: str | None = None


#: Every command that is not a stage, by name, in the order ``--help`` lists them.
COMMANDS: dict[str, Command] = {}


def command(
    name: str, *, help: str, arguments: Arguments, description: str | None = None
) -> Callable[[Handler], Handler]:
    """Decorator: make the handler runnable as ``python -m precompute <name>``.

    ``arguments`` adds the command's options to its parser; the handler gets the parsed
    namespace and returns an exit code, or raises (the error's kind picks the code).
    """

    def add(handler: Handler) -> Handler:
        if name in COMMANDS:
            raise ValueError(f"command {name!r} is registered twice")
        COMMANDS[name] = Command(name, help, arguments, handler, description)
        return handler

    return add


class _Parser(argparse.ArgumentParser):
    """argparse that reports errors as one line and exit code 2 (no usage dump)."""

    def error(self, message: str) -> NoReturn:
        print(f"precompute: error: {message} (see python -m precompute --help)", file=sys.stderr)
        raise SystemExit(EXIT_USAGE)


def _build_parser() -> argparse.ArgumentParser:
    from precompute.stages import STAGES

    parser = _Parser(
        prog="python -m precompute",
        allow_abbrev=False,
        description="Legi-Val precompute: stages that fill a results store, and the commands "
        "around them.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=exit_code_table(),
    )
    sub = parser.add_subparsers(dest="command", metavar="command", parser_class=_Parser)

    def add(name: str, help: str, description: str | None = None) -> argparse.ArgumentParser:
        return sub.add_parser(
            name,
            help=help,
            allow_abbrev=False,
            description=textwrap.fill(description or help, 79),  # raw text: wrapped here
            epilog=exit_code_table(),
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )

    clash = sorted(set(STAGES) & set(COMMANDS))
    if clash:
        raise ValueError(f"stage and command share a name: {clash}")
    for name, info in STAGES.items():
        stage_parser = add(name, info.help)
        _common(stage_parser)
        info.add_arguments(stage_parser)
    for cmd in COMMANDS.values():
        cmd.arguments(add(cmd.name, cmd.help, cmd.description))
    return parser


def _common(p: argparse.ArgumentParser, *, store_required: bool = True) -> None:
    """The options every stage (and ``run``) takes."""
    p.add_argument("--store", required=store_required, type=Path, help="results store folder")
    p.add_argument("--config", type=Path, help="TOML experiment config")
    p.add_argument("--shard", help="process slice i of n (0-based), e.g. 0/4")
    p.add_argument("--no-progress", action="store_true", help="hide progress bars")
    p.add_argument(
        "--threads", type=int, help="CPU threads for torch (1 is fastest on a busy machine)"
    )
    p.add_argument(
        "--dp",
        type=int,
        metavar="N",
        help="data-parallel replicas of every model on a vllm engine (its options.dp; "
        "ray-vllm: options.concurrency), overriding the config",
    )


def with_data_parallel(config: ExperimentConfig, replicas: int) -> ExperimentConfig:
    """``config`` with ``replicas`` data-parallel replicas for every model (teacher, student,
    judge) whose engine has them (:data:`precompute.backends.registry.DATA_PARALLEL_OPTIONS`);
    ``--dp N`` on the command line. A config with no such model is a usage error: the flag
    would change nothing."""
    from precompute.backends.registry import DATA_PARALLEL_OPTIONS

    if replicas < 1:
        raise UsageError(f"--dp must be at least 1, got {replicas}")
    changed = 0

    def scaled(spec: Any) -> Any:
        nonlocal changed
        key = DATA_PARALLEL_OPTIONS.get(spec.engine) if spec is not None else None
        if key is None:
            return spec
        changed += 1
        return dataclasses.replace(spec, options={**spec.options, key: replicas})

    judge = dataclasses.replace(config.judge, model=scaled(config.judge.model))
    config = dataclasses.replace(
        config,
        teachers=tuple(scaled(t) for t in config.teachers),
        students=tuple(scaled(s) for s in config.students),
        judge=judge,
    )
    if not changed:
        raise UsageError(
            f"--dp {replicas}: no model in {config.source} runs on an engine with "
            f"data-parallel replicas ({', '.join(sorted(DATA_PARALLEL_OPTIONS))})"
        )
    return config


def _config_for(args: argparse.Namespace, store: Store | None) -> ExperimentConfig:
    if getattr(args, "config", None) is not None:
        return load_config(args.config)
    if store is not None and (recorded := store.manifest.get("config")):
        return ExperimentConfig.from_dict(recorded, source=f"{store.path}/manifest.json")
    return ExperimentConfig()


def _open_store(path: Path, config: ExperimentConfig | None = None, create: bool = True) -> Any:
    from legival_core.store.store import Store

    if create:
        return Store.create(path, config=config.to_dict() if config is not None else None)
    return Store.open(path)


def _cmd_stage(args: argparse.Namespace) -> int:
    from precompute.stages import STAGES, StageContext, run_stage

    shard = parse_shard(args.shard)
    file_config = load_config(args.config) if args.config is not None else None
    if file_config is not None and args.dp is not None:
        file_config = with_data_parallel(file_config, args.dp)
    store = _open_store(args.store, file_config)
    config = file_config or _config_for(args, store)
    if file_config is None and args.dp is not None:
        config = with_data_parallel(config, args.dp)
    ctx = StageContext(store=store, config=config, shard=shard, progress=_progress(args))
    # The options the stage declared at registration (reward --model, monitor --kinds, ...).
    ctx.stage_options = {args.command: STAGES[args.command].option_values(args)}
    try:
        result = run_stage(args.command, ctx)
    finally:
        ctx.engines.close()
    print(result.summary(), file=sys.stderr)
    return EXIT_OK


def _run_arguments(p: argparse.ArgumentParser) -> None:
    from precompute.stages.rollout import STUDENTS_OPTION

    _common(p, store_required=False)
    p.add_argument("--stages", help="comma-separated subset, in config order")
    p.add_argument(
        STUDENTS_OPTION.flag,
        dest=STUDENTS_OPTION.key,
        default=None,
        metavar="default|NAME,…",
        help="add the rollouts of these students (transfer utility, FOTU): 'default' is the "
        "demo's two, smollm2-135m and gemma3-270m, packaged, on the CPU; the number of "
        "rollouts and the minutes they take are printed before they start. With --config "
        "they replace its [[students]]",
    )


@command(
    "run",
    help="execute a TOML experiment config end to end; without --config, every CPU stage "
    "over the traces in --store",
    arguments=_run_arguments,
)
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
    if args.dp is not None:
        config = with_data_parallel(config, args.dp)
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
    if args.students:
        ctx.stage_options = {"rollout": {"students": args.students}}
    return _run_stages(ctx, stages)


def _run_stages(ctx: StageContext, stages: list[str], parallel: Sequence[str] = ()) -> int:
    """Run ``stages`` in order in one context, printing each summary; close its engines.

    A stage named in ``parallel`` runs as one-thread shard processes, one per core
    (:func:`_run_rollouts`); the others run here.
    """
    from precompute.stages import STAGES, run_stage

    try:
        for name in stages:
            if not ctx.shard.is_whole and not STAGES[name].shardable:
                print(f"{name}: skipped in a sharded run (run it after merge)", file=sys.stderr)
                continue
            if name in parallel:
                _run_rollouts(ctx)
                continue
            result = run_stage(name, ctx)
            print(result.summary(), file=sys.stderr)
    finally:
        ctx.engines.close()
    print(f"store: {ctx.store.path}", file=sys.stderr)
    return EXIT_OK


def _run_rollouts(ctx: StageContext) -> None:
    """The students' rollouts of ``run --students``: the number of rollouts and the minutes
    they will take first, then one-thread shard processes (one per core, at most 8) under one
    progress bar. Each writes its rows as it goes, so a rerun after a stop resumes."""
    from precompute.parallel import run_in_shards
    from precompute.stages import run_stage
    from precompute.stages.rollout import cost_estimate, plan_jobs, stage_students

    jobs, done = plan_jobs(ctx, stage_students(ctx))
    if not jobs:
        print(f"rollout: nothing to run; {done} already done", file=sys.stderr)
        return
    # Before the first rollout: how many, and about how long (a run of minutes, or more).
    processes = rollout_processes(jobs)
    print(cost_estimate(ctx, jobs, done, processes), file=sys.stderr)
    if processes < 2:
        ctx.announce = False  # said above
        print(run_stage("rollout", ctx).summary(), file=sys.stderr)
        return
    ctx.engines.close()  # the shards load their own students; nothing here holds a model
    summaries = run_in_shards(
        "rollout", ctx.store.path, ctx.config, ctx.stage_options, processes, ctx.progress
    )
    for line in summaries:
        print(line, file=sys.stderr)


def rollout_processes(jobs: Sequence[Any]) -> int:
    """The shard processes of ``run --students``: one per core (at most 8), no more than there
    are traces to share out (a shard holds every prefix of its traces)."""
    from precompute.parallel import default_jobs

    return max(1, min(default_jobs(), len({job.trace_id for job in jobs})))


#: What ``run --store DIR`` without a config runs, in order: every stage that needs neither a
#: GPU nor a model named in a config (``judge`` with the offline labelers only).
CPU_STAGES = ("grade", "segment", "embed", "leaks", "judge", "metrics")
#: What ``run --store DIR --students …`` runs: the CPU stages and the students' rollouts,
#: which read the grades and steps and are read by the metrics (transfer utility).
STUDENT_STAGES = ("grade", "segment", "embed", "rollout", "leaks", "judge", "metrics")


def cpu_config(
    recorded: ExperimentConfig, stages: tuple[str, ...] = CPU_STAGES
) -> ExperimentConfig:
    """The config of a CPU-only run: the store's recorded one with the judge made offline.

    The LLM judge needs a model, so it is left out (the recorded offline labelers stay; a
    store that recorded only the LLM judge gets the lexical detector); everything else
    (segment mode, τ, profile, encoding, rollout grid) keeps the recorded values, so a rerun
    measures the store as it was measured.
    """
    from dataclasses import replace

    offline = tuple(name for name in recorded.judge.labelers if name != "llm") or ("lexical",)
    return replace(
        recorded,
        stages=stages,
        judge=replace(recorded.judge, labelers=offline, model=None),
    )


def _cmd_run_cpu(args: argparse.Namespace) -> int:
    """``run --store DIR`` with no config: grade, segment, embed, leaks, judge, metrics, in
    order; with ``--students``, the students' rollouts too, before the leaks.

    Each stage skips the keys it has already written, so a rerun only finishes the work; a
    store without traces stops at once with exit 5, naming how to add some. Without
    ``--students`` the last lines say how to add transfer utility when the store lacks it.
    """
    from precompute.stages import STAGES, StageContext, StageError
    from precompute.students import parse_students

    if args.shard is not None:
        raise UsageError("run without --config works on the whole store: drop --shard")
    if args.dp is not None:
        raise UsageError("run without --config runs the CPU stages only: drop --dp")
    if args.students is not None:
        parse_students(args.students)  # a bad name stops here, before any stage runs
    runnable = STUDENT_STAGES if args.students else CPU_STAGES
    stages = list(runnable)
    if args.stages:
        wanted = [s.strip() for s in args.stages.split(",") if s.strip()]
        other = [s for s in wanted if s not in runnable]
        if other:
            unknown = [s for s in other if s not in STAGES]
            if unknown:
                raise UsageError(f"--stages: unknown stage(s) {unknown}; known: {sorted(STAGES)}")
            if other == ["rollout"]:
                raise UsageError(
                    "--stages: rollout needs students: add `--students default` (smollm2-135m "
                    "and gemma3-270m, packaged, on the CPU)"
                )
            raise UsageError(
                f"--stages: {other} need a model from an experiment config; without --config "
                f"run only {list(runnable)}"
            )
        stages = [s for s in runnable if s in wanted]
    if not (Path(args.store) / "manifest.json").is_file():
        raise StageError(
            f"{args.store} is not a results store yet; add traces first with "
            f"`python -m precompute ingest FILE --store {args.store} --teacher NAME --task TASK`"
        )
    store = _open_store(args.store, create=False)
    if not store.has("traces") or store.read("traces", columns=["trace_id"]).empty:
        raise StageError(
            f"{store.path}: table 'traces' is empty; add traces first with "
            "`python -m precompute ingest FILE --store DIR --teacher NAME --task TASK` "
            "(or run `generate` with a config)"
        )
    config = cpu_config(_config_for(args, store), runnable)
    ctx = StageContext(store=store, config=config, progress=_progress(args))
    if args.students:
        ctx.stage_options = {"rollout": {"students": args.students}}
    code = _run_stages(ctx, stages, parallel=("rollout",) if args.students else ())
    if not args.students:
        hint = transfer_hint(ctx)
        if hint:
            print(hint, file=sys.stderr)
    return code


def transfer_hint(ctx: StageContext) -> str | None:
    """How to add transfer utility to a store whose correct traces lack the default students'
    rollouts: the command, and the rollouts and minutes it would take (None when nothing is
    missing, or when the store's rollouts come from other students, chosen by a config)."""
    import shlex

    from precompute.stages.common import read_or_empty
    from precompute.stages.rollout import cost_estimate, plan_jobs
    from precompute.students import DEFAULT_STUDENTS, parse_students

    present = set(read_or_empty(ctx.store, "rollouts", ["student"])["student"])
    if present - set(DEFAULT_STUDENTS):
        return None
    grades = read_or_empty(ctx.store, "grades", ["trace_id"])
    if grades.empty:
        return None
    jobs, done = plan_jobs(ctx, parse_students("default"))
    if not jobs:
        return None
    estimate = cost_estimate(ctx, jobs, done, rollout_processes(jobs))
    estimate = estimate.removeprefix("rollout: ").removesuffix("; if stopped, rerun to resume")
    what = "lacks" if not present else "has only some of"
    store = shlex.quote(str(ctx.store.path))
    return (
        f"transfer utility (FOTU): this store {what} the student rollouts it needs; add them "
        f"with `python -m precompute run --store {store} --students default` ({estimate})"
    )


def _module_command(
    name: str, module: str, run: str, *, help: str, description: str | None = None
) -> None:
    """Register a command whose options and work both live in ``module``.

    The module is imported only when the command's parser is built or the command runs (the CLI
    starts without the heavy imports): ``module.add_arguments(parser)`` adds the options and
    ``module.<run>(args)`` does the work, raising on failure (the error picks the exit code).
    """

    def arguments(parser: argparse.ArgumentParser) -> None:
        importlib.import_module(module).add_arguments(parser)

    def handler(args: argparse.Namespace) -> int:
        getattr(importlib.import_module(module), run)(args)
        return EXIT_OK

    command(name, help=help, arguments=arguments, description=description)(handler)


_module_command(
    "ingest",
    "precompute.ingest",
    "ingest_from_args",
    help="load your own traces (JSONL, JSON, Parquet, CSV, a hub dataset) into a store",
    description="Load your own reasoning traces into a results store. A bad row goes to the "
    "store's quarantine.jsonl with its file, line and field; the good rows are kept.",
)
_module_command(
    "datasets",
    "precompute.datasets",
    "load_from_args",
    help="list the benchmark loaders, or load one into the problems table",
)
_module_command(
    "published",
    "precompute.build_published",
    "build_from_args",
    help="build the store of the papers' published numbers (results/published)",
)


def _merge_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--store", required=True, type=Path)
    p.add_argument("--table", help="only this table")


@command("merge", help="compact the parts of each table into one", arguments=_merge_arguments)
def _cmd_merge(args: argparse.Namespace) -> int:
    store = _open_store(args.store, create=False)
    store.merge(args.table)
    print(f"merged {args.table or 'all tables'} in {store.path}", file=sys.stderr)
    return EXIT_OK


def _export_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--store", required=True, type=Path)
    p.add_argument("--out", required=True, type=Path)
    p.add_argument("--format", default="parquet", choices=("parquet", "csv"))
    p.add_argument("--tables", help="comma-separated table names (default: all)")


@command("export", help="write tables as Parquet or CSV", arguments=_export_arguments)
def _cmd_export(args: argparse.Namespace) -> int:
    store = _open_store(args.store, create=False)
    tables = [t.strip() for t in args.tables.split(",")] if args.tables else None
    for path in store.export(args.out, fmt=args.format, tables=tables):
        print(path)
    return EXIT_OK


def _store_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument("--store", required=True, type=Path)


def _verify_arguments(p: argparse.ArgumentParser) -> None:
    _store_argument(p)
    p.add_argument(
        "--quarantine",
        action="store_true",
        help="move every file it reports aside (tables/<table>/corrupt/) and drop it from the "
        "manifest, so the stage that wrote it redoes its rows on its next run",
    )


@command(
    "verify",
    help="check a store for corrupt parts and duplicate keys (--quarantine: move them aside)",
    arguments=_verify_arguments,
)
def _cmd_verify(args: argparse.Namespace) -> int:
    store = _open_store(args.store, create=False)
    problems = store.verify()
    for problem in problems:
        print(problem)
    if problems and args.quarantine:
        problems = _quarantine(store, problems)
    if problems:
        print(f"{len(problems)} problem(s) found in {store.path}", file=sys.stderr)
        return EXIT_STORE
    print(f"{store.path}: ok", file=sys.stderr)
    from legival_core.grading.stamps import grader_status

    grading = grader_status(store)
    if grading is not None:
        # Not damage, but a store graded by an older grader is said (``regrade`` fixes it).
        print(f"{store.path}: {grading.message}", file=sys.stderr)
    return EXIT_OK


def _quarantine(store: Store, problems: list[StoreProblem]) -> list[StoreProblem]:
    """Each reported file moved aside once (a file may hold several problems); what cannot be
    moved (the manifest) is said. Returns what a fresh check still finds."""
    from legival_core.store.store import StoreError

    moved: set[Path] = set()
    for problem in problems:
        if problem.path in moved:
            continue
        try:
            where = store.quarantine_part(problem.path, reason=str(problem))
        except StoreError as error:
            print(f"not moved: {error}", file=sys.stderr)
            continue
        moved.add(problem.path)
        print(f"moved aside: {problem.path} -> {where}")
    if moved:
        print(
            f"{len(moved)} file(s) moved aside; run the stages again (python -m precompute run "
            f"--store {store.path}, or the one that writes each table) to redo their rows",
            file=sys.stderr,
        )
    return store.verify()


def _publish_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--store",
        required=True,
        type=Path,
        action="append",
        help="a store to publish; several --store merge their teacher rows into one board",
    )
    p.add_argument("--out", type=Path, default=None, help="folder to write the site into")
    p.add_argument(
        "--check",
        type=Path,
        default=None,
        metavar="SITE",
        help="say whether the site SITE still matches the store(s) (exit 0 yes, 1 no); "
        "writes nothing",
    )
    p.add_argument(
        "--resamples", type=int, default=None, help="problem resamples (default: the app's)"
    )
    p.add_argument("--seed", type=int, default=None, help="resampling seed")
    p.add_argument(
        "--include-references",
        action="store_true",
        help="rank reference teachers (human solutions, gold rationales) like any model",
    )
    p.add_argument(
        "--traces",
        type=int,
        default=None,
        metavar="N",
        help="annotated trace pages for N traces per (teacher, dataset) row, chosen "
        "reproducibly (default: every trace)",
    )
    p.add_argument(
        "--space",
        action="store_true",
        help="add the Hugging Face Space card (README.md, sdk: static) to the site",
    )
    p.add_argument(
        "--prefer",
        default=None,
        metavar="STORE",
        help="with several --store: the store (by folder name) whose row wins when two hold "
        "one teacher and dataset",
    )
    p.add_argument(
        "--allow-mixed-graders",
        action="store_true",
        help="publish stores graded by different grader versions on one board (refused "
        "otherwise: their accuracies would not mean the same thing)",
    )
    p.add_argument(
        "--skip",
        action="append",
        default=[],
        metavar="FAMILY",
        help="leave out a robustness analysis family (e.g. encoding, the tokenizer comparison, "
        "where tiktoken is not installed); without it an analysis this environment cannot run "
        "fails the publish; the site and site.json say what was skipped",
    )


@command(
    "publish",
    help="write a static leaderboard site (HTML pages per row and trace, CSV, LaTeX)",
    description="Write the leaderboard with 95% value and rank intervals, the transfer "
    "curves and the Pareto chart, a page per teacher and per (teacher, dataset) row with "
    "every per-trace metric, and an annotated page per trace, as a static site that opens "
    "offline, plus the table as CSV and LaTeX and site.json pinning what it was made from. "
    "With --check SITE: compare a published site with the store(s) instead.",
    arguments=_publish_arguments,
)
def _cmd_publish(args: argparse.Namespace) -> int:
    from precompute.publish import PublishOptions, check_site, publish

    for store in args.store:
        _open_store(store, create=False)  # a missing or damaged store is exit 4, not 1
    if args.check is not None:
        if args.out is not None:
            raise UsageError("--check compares a site with a store; it takes no --out")
        result = check_site(args.check, args.store)
        print(result.message)
        return EXIT_OK if result.matches else EXIT_FAILED
    if args.out is None:
        raise UsageError("give --out DIR to write a site, or --check SITE to compare one")
    options = PublishOptions()
    if args.resamples is not None:
        if args.resamples < 1:
            raise UsageError(f"--resamples must be at least 1, got {args.resamples}")
        options = dataclasses.replace(options, n_boot=args.resamples)
    if args.seed is not None:
        options = dataclasses.replace(options, seed=args.seed)
    if args.traces is not None:
        if args.traces < 0:
            raise UsageError(f"--traces must be 0 or more, got {args.traces}")
        options = dataclasses.replace(options, traces=args.traces)
    options = dataclasses.replace(
        options,
        include_references=args.include_references,
        space=args.space,
        prefer=args.prefer,
        allow_mixed_graders=args.allow_mixed_graders,
        skip=_skip_families(args.skip),
    )
    if args.out.exists() and not args.out.is_dir():
        raise UsageError(f"--out {args.out} exists and is not a folder")
    written = publish(args.store, args.out, options)
    main_files = ("index.html", "leaderboard.csv", "leaderboard.tex", "site.json")
    for name in main_files:
        print(args.out / name)
    pages = sum(1 for p in written if p.suffix == ".html")
    size = sum(p.stat().st_size for p in written)
    print(
        f"{len(written)} files, {pages} pages, {size / 1e6:.1f} MB in {args.out}",
        file=sys.stderr,
    )
    return EXIT_OK


def _skip_families(names: list[str]) -> tuple[str, ...]:
    """``publish --skip`` names, checked against the robustness families."""
    from legival_core.rankings.robustness_choices import CHOICE_FAMILIES

    unknown = [n for n in names if n not in CHOICE_FAMILIES]
    if unknown:
        raise UsageError(
            f"--skip {unknown[0]}: no such analysis family (families: {', '.join(CHOICE_FAMILIES)})"
        )
    return tuple(sorted(set(names)))


def _demo_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--problems", type=int, default=None, help="the first N CHAMP problems (one dataset)"
    )
    p.add_argument(
        "--per-category",
        type=int,
        default=None,
        help="the first N problems of each CHAMP category, one dataset each (default 10)",
    )
    p.add_argument("--out", type=Path, default=None, help="store folder")
    p.add_argument(
        "--max-tokens",
        type=int,
        default=None,
        help="first-pass budget of every student (default: 192, Gemma 3 270M 48)",
    )
    p.add_argument("--engine", default=None, help="student engine (transformers, llamacpp)")
    p.add_argument(
        "--student",
        action="append",
        default=None,
        help="a student model: a packaged short name (smollm2-135m, gemma3-270m) or a .gguf "
        "file; repeat for several (default: smollm2-135m and gemma3-270m)",
    )
    p.add_argument("--no-progress", action="store_true")
    p.add_argument("--threads", type=int, help="CPU threads for torch")
    p.add_argument(
        "--jobs",
        type=int,
        default=None,
        help="processes for the rollout and reward stages, one thread each (default: one per "
        "core, at most 8; 1 runs them in this process)",
    )


@command("demo", help="build the bundled CHAMP demo store (offline)", arguments=_demo_arguments)
def _cmd_demo(args: argparse.Namespace) -> int:
    from precompute.demo import DemoOptions, build_demo

    # Every count the demo takes must be at least 1; a count not given keeps the default.
    for key in ("problems", "per_category", "max_tokens", "jobs"):
        value = getattr(args, key)
        if value is not None and value < 1:
            raise UsageError(f"--{key.replace('_', '-')} must be at least 1")
    if args.problems is not None and args.per_category is not None:
        raise UsageError("give --problems or --per-category, not both")
    given = ("problems", "per_category", "out", "max_tokens", "engine", "jobs")
    overrides: dict[str, Any] = {
        key: getattr(args, key) for key in given if getattr(args, key) is not None
    }
    if args.student:
        overrides["students"] = tuple(dict.fromkeys(args.student))  # in order, once each
    options = DemoOptions().replace(**overrides)
    store = build_demo(options, progress=_progress(args))
    print(f"demo store: {store.path}", file=sys.stderr)
    return EXIT_OK


def _no_arguments(p: argparse.ArgumentParser) -> None:
    del p


@command("list", help="list the stages", arguments=_no_arguments)
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


def _calibrate_arguments(p: argparse.ArgumentParser) -> None:
    _calibrate().add_arguments(p)


@command(
    "calibrate",
    help="calibration store: synthetic traces with planted properties, and the report",
    arguments=_calibrate_arguments,
)
def _cmd_calibrate(args: argparse.Namespace) -> int:
    return int(_calibrate().run(args))


def _progress(args: argparse.Namespace) -> bool | None:
    return False if getattr(args, "no_progress", False) else None


def _exit_code(error: BaseException) -> int:
    """Map an exception to the documented exit code."""
    from legival_core.store.schema import SchemaError
    from precompute.stages import StageError

    store_errors: tuple[type[BaseException], ...] = (SchemaError,)
    try:
        from legival_core.store.store import StoreError

        store_errors = (*store_errors, StoreError)
    except ImportError:
        pass
    missing: tuple[type[BaseException], ...] = (
        StageError,
        InputMissingError,
        FileNotFoundError,
        ImportError,
    )
    try:
        from legival_core.store.assets import MissingAssetError

        missing = (*missing, MissingAssetError)
    except ImportError:
        pass
    if isinstance(error, UsageError | ShardError):
        return EXIT_USAGE
    if isinstance(error, ConfigError):
        return EXIT_CONFIG
    if isinstance(error, store_errors):
        return EXIT_STORE
    if isinstance(error, InputUnusableError):
        return EXIT_UNUSABLE
    if isinstance(error, missing):
        return EXIT_MISSING
    return EXIT_FAILED


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the exit code (see the module docstring).

    Everything the command prints goes through :func:`precompute.terminal.escaped_output`: a
    name from someone else's file (a stray file in a store, a teacher, a quarantine reason)
    cannot move the cursor, erase a line or reverse text on the user's terminal."""
    from precompute.terminal import escaped_output

    with escaped_output():
        return _main(argv)


def _main(argv: Sequence[str] | None) -> int:
    parser = _build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    registered = COMMANDS.get(args.command)
    handler = registered.handler if registered is not None else _cmd_stage
    try:
        if getattr(args, "threads", None) is not None:
            _set_threads(args.threads)
        if not progress_enabled(_progress(args)):
            silence_library_bars()  # no bar at all: the libraries' own ones neither
        return handler(args)
    except KeyboardInterrupt:
        print(
            "precompute: interrupted; rows written so far are kept, rerun to resume",
            file=sys.stderr,
        )
        return EXIT_INTERRUPTED
    except Exception as error:  # the CLI's contract: one line, never a traceback
        from precompute.disk import disk_error

        if disk_error(error):
            print(f"precompute: error: {_disk_message(args, error)}", file=sys.stderr)
            return EXIT_STORE
        code = _exit_code(error)
        message = str(error).strip().splitlines()[0] if str(error).strip() else ""
        kind = type(error).__name__
        text = message if code in (EXIT_USAGE, EXIT_CONFIG) else f"{kind}: {message}"
        hint = ""
        store_path = getattr(args, "store", None)
        if code == EXIT_FAILED and store_path is not None and registered is None:
            hint = f" (details: {Path(store_path) / 'logs'})"
        print(f"precompute: error: {text}{hint}", file=sys.stderr)
        return code


def _disk_message(args: argparse.Namespace, error: BaseException) -> str:
    """The one line for a disk that refused a write (full, over quota, read-only), naming what
    the command was writing: the store it compacts (``merge``), the folder it writes into
    (``export``, ``publish``), else the store. Exit 4, as for every store problem."""
    from precompute.disk import describe_os_error

    assert isinstance(error, OSError)
    out = getattr(args, "out", None)
    store = getattr(args, "store", None)
    if isinstance(store, list):  # publish takes several stores
        store = ", ".join(str(s) for s in store)
    if out is not None and args.command != "merge":
        target = f"{out}" + (f" (from the store {store})" if store is not None else "")
    else:
        target = f"the store {store}" if store is not None else "its output"
    return (
        f"{args.command} cannot write to {target}: {describe_os_error(error)}; nothing already "
        "written was lost, rerun once the disk takes writes again"
    )
