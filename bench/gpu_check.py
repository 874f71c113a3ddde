"""GPU check: the rollout stage on the transformers engine, against the bare engine.

A prepared check for any machine with a CUDA GPU and PyTorch (``bash bench/gpu_check.sh``),
needing no download and carrying nothing but this repository:

1. a byte-level BPE tokenizer is trained on the texts of the bundled demo store
   (``results/demo``: CHAMP problems and traces) and given a ChatML chat template;
2. a Llama model is built from a small config around it (random weights, seeded) and saved
   in bf16 to a temporary folder: a model of the right shape for a speed check, whose texts
   are noise (no rollout ever finds an answer, so every one decodes its full budget and is
   forced, the most decoding the stage can ask for);
3. the real ``rollout`` stage runs on ``--traces`` correct demo traces with the demo's student
   settings (k every 3 steps, 192 + 128 tokens) through the transformers engine on the GPU,
   every request recorded;
4. the same requests go straight to the same engine, call by call in the same order, each
   with a budget of exactly the tokens the stage decoded and no early-stop check, grading or
   store write.

It prints decoded tokens per second both ways and their ratio (the share of the engine's
speed the stage keeps), prefill against the ideal-cache limit, and whether the bare texts
start with the stage's. ``--device cpu`` runs the same path on a CPU with a smaller model::

    python bench/gpu_check.py [--device cuda] [--traces 32] [--batch-size 16]
    python bench/gpu_check.py --device cpu --traces 2 --hidden 64 --layers 2 --max-tokens 24
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # `python bench/x.py` puts bench/ on sys.path, not the repo root

#: ChatML turns; the assistant's content is written verbatim, so transformers can leave the
#: final assistant message open (continue_final_message), as the rollout stage needs.
CHAT_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n"
    "{{ message['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
#: Packages the check imports (module name → what to pip install when it is missing).
NEEDED = {
    "torch": "torch",
    "transformers": "transformers",
    "tokenizers": "tokenizers",
    "pandas": "pandas",
    "pyarrow": "pyarrow",
    "math_verify": "math-verify",
    "platformdirs": "platformdirs",
    "tqdm": "tqdm",
}


def missing_packages() -> list[str]:
    """The pip names of the packages in :data:`NEEDED` that are not installed."""
    return [pip for module, pip in NEEDED.items() if importlib.util.find_spec(module) is None]


def store_texts(source: Path) -> list[str]:
    """Every problem statement and trace of the store at ``source`` (the tokenizer's corpus)."""
    from legival_core.store.store import Store

    store = Store.open(source)
    problems = store.read("problems", columns=["prompt"])["prompt"].astype(str).tolist()
    traces = store.read("traces", columns=["reasoning", "answer_text"])
    return problems + [str(v) for c in traces.columns for v in traces[c].dropna()]


def build_tokenizer(texts: list[str], vocab_size: int) -> Any:
    """A byte-level BPE of ``vocab_size`` tokens trained on ``texts``, as a transformers fast
    tokenizer with the ChatML template (every byte is encodable, nothing is unknown)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    core = Tokenizer(models.BPE())
    core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    core.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    core.train_from_iterator(texts, trainer)
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=core, eos_token="<|im_end|>", pad_token="<|endoftext|>"
    )
    tokenizer.chat_template = CHAT_TEMPLATE
    return tokenizer


def build_model_folder(
    folder: Path, tokenizer: Any, *, hidden: int, layers: int, seed: int = 0
) -> tuple[Path, int]:
    """Save ``tokenizer`` and a seeded random Llama of ``layers`` × ``hidden`` (bf16) into
    ``folder``; returns the folder and the parameter count."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    heads = max(1, hidden // 64)
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=hidden,
        intermediate_size=3 * hidden,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=heads,
        max_position_embeddings=8192,
        bos_token_id=tokenizer.convert_tokens_to_ids("<|im_start|>"),
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        tie_word_embeddings=True,
    )
    torch.manual_seed(seed)
    model = LlamaForCausalLM(config).to(torch.bfloat16)
    folder.mkdir(parents=True, exist_ok=True)
    tokenizer.save_pretrained(folder)
    model.save_pretrained(folder)
    return folder, sum(p.numel() for p in model.parameters())


def device_line(device: str) -> str:
    """What the check runs on: the GPU's name and memory, or the CPU's core count."""
    import torch

    if device.startswith("cuda"):
        props = torch.cuda.get_device_properties(torch.device(device))
        return (
            f"{props.name}, {props.total_memory / 2**30:.0f} GiB; torch {torch.__version__}, "
            f"CUDA {torch.version.cuda}"
        )
    threads = torch.get_num_threads()
    return f"CPU, {os.cpu_count()} cores, {threads} torch threads; torch {torch.__version__}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cuda", help="cuda (default), cuda:1, … or cpu")
    parser.add_argument("--traces", type=int, default=32, help="correct demo traces to roll out")
    parser.add_argument(
        "--batch-size", type=int, default=16, help="rollout batch = rows decoded together"
    )
    parser.add_argument("--hidden", type=int, default=512, help="model width")
    parser.add_argument("--layers", type=int, default=8, help="model depth")
    parser.add_argument("--vocab", type=int, default=4096, help="tokenizer size")
    parser.add_argument("--dtype", default="bfloat16", help="torch dtype of the engine")
    parser.add_argument("--max-tokens", type=int, default=None, help="first-pass budget (192)")
    parser.add_argument(
        "--forcing-tokens", type=int, default=None, help="forcing-pass budget (128)"
    )
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads")
    parser.add_argument(
        "--source", type=Path, default=REPO / "results" / "demo", help="source store"
    )
    args = parser.parse_args(argv)
    for name in ("traces", "batch_size", "hidden", "layers", "vocab"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be at least 1")
    missing = missing_packages()
    if missing:
        print(f"gpu_check: missing packages: pip install {' '.join(missing)}", file=sys.stderr)
        return 2
    return run_check(args)


def run_check(args: argparse.Namespace) -> int:
    import torch

    sys.path.insert(0, str(REPO / "bench"))
    import rollout_bench

    from precompute.backends import make_engine
    from precompute.backends.base import GenerationRequest
    from precompute.demo import DemoOptions, demo_config

    if args.device.startswith("cuda") and not torch.cuda.is_available():
        print(
            "gpu_check: torch sees no CUDA device (torch.cuda.is_available() is False); "
            "run it on a GPU machine, or with --device cpu to check the path here",
            file=sys.stderr,
        )
        return 2
    if args.threads:
        torch.set_num_threads(args.threads)
    from transformers.utils import logging as transformers_logging

    transformers_logging.disable_progress_bar()  # the check's own lines are the output
    started = time.perf_counter()
    work = Path(tempfile.mkdtemp(prefix="legival-gpu-check-"))
    tokenizer = build_tokenizer(store_texts(args.source), args.vocab)
    folder, parameters = build_model_folder(
        work / "model", tokenizer, hidden=args.hidden, layers=args.layers
    )
    size_mb = sum(f.stat().st_size for f in folder.iterdir()) / 1e6

    config = demo_config(DemoOptions(out=Path("unused"), students=DemoOptions().students[:1]))
    student = config.students[0]
    student = dataclasses.replace(
        student,
        engine="transformers",
        model=str(folder),
        max_tokens=args.max_tokens or student.max_tokens,
        forcing_tokens=args.forcing_tokens or student.forcing_tokens,
        options={"device": args.device, "dtype": args.dtype, "batch_size": args.batch_size},
    )
    config = dataclasses.replace(
        config,
        students=(student,),
        rollout=dataclasses.replace(config.rollout, batch_size=args.batch_size),
    )
    engine = make_engine("transformers", str(folder), **student.options)
    recorder = rollout_bench.RecordingEngine(engine)
    engine.generate(
        [GenerationRequest("warm-up", [{"role": "user", "content": "Hi"}], max_tokens=4)]
    )
    if args.device.startswith("cuda"):
        torch.cuda.reset_peak_memory_stats()
    print(f"device: {device_line(args.device)}")
    print(
        f"model: random Llama {args.layers} x {args.hidden}, {parameters / 1e6:.1f} M "
        f"parameters, vocab {len(tokenizer)}, {args.dtype}, {size_mb:.0f} MB on disk; built "
        f"and loaded in {time.perf_counter() - started:.1f} s"
    )
    print(
        f"settings: {student.max_tokens} + {student.forcing_tokens} tokens, k every "
        f"{config.rollout.interval} steps, batches of {args.batch_size}, {args.traces} traces"
    )

    store, steps = rollout_bench.demo_subset_store(work / "store", args.source, args.traces)
    result, seconds, stats, calls = rollout_bench.run_stage_recorded(
        recorder, store, config, interleave=False
    )
    in_engine = sum(s for _, _, s in calls)
    bare_seconds, bare_stats, same = rollout_bench.run_bare(recorder, calls)
    stage_rate = stats["completion_tokens"] / seconds
    bare_rate = bare_stats["completion_tokens"] / bare_seconds
    limit = rollout_bench.prefill_limit(calls)

    print(
        f"\n{'run':28} {'requests':>8} {'prefill tok':>11} {'decoded tok':>11} {'wall s':>7} "
        f"{'decoded tok/s':>13}"
    )
    for name, row, wall in (
        ("rollout stage", stats, seconds),
        ("bare engine", bare_stats, bare_seconds),
    ):
        print(
            f"{name:28} {row['requests']:>8} {row['prefill_tokens']:>11} "
            f"{row['completion_tokens']:>11} {wall:>7.1f} {row['completion_tokens'] / wall:>13.1f}"
        )
    print(f"\n{result.summary()}; {steps} steps")
    print(
        f"stage {stage_rate:.1f} decoded tokens/s, bare engine {bare_rate:.1f} tokens/s: the "
        f"stage keeps {stage_rate / bare_rate:.1%} of the engine's speed (goal >= 90%)"
    )
    print(
        f"{seconds - in_engine:.1f} s of the stage's {seconds:.1f} s were outside engine calls "
        f"(planning, grading, store writes); same texts both ways: {same}"
    )
    print(
        f"prefill: {stats['prefill_tokens']:,} tokens against an ideal-cache limit of "
        f"{limit:,} ({stats['prefill_tokens'] / max(1, limit):.2f}x; batched transformers "
        "prefills every prompt in full)"
    )
    if args.device.startswith("cuda"):
        print(f"peak GPU memory: {torch.cuda.max_memory_allocated() / 2**30:.2f} GiB")
    print(f"total wall {time.perf_counter() - started:.1f} s")
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
