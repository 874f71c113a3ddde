"""Stage ``reward``: a reward model's scalar score for every (problem, trace)
(docs/metrics/oversight.md).

    python -m precompute reward --store DIR --model ID_OR_PATH [--batch-size N]

The model is loaded with ``transformers.AutoModelForSequenceClassification`` (one output:
the reward) and its own tokenizer. Each trace is rendered with the model's chat template as
a two-turn conversation: the user turn is the problem as the teacher was asked it (the task's
user prompt), the assistant turn is the teacher's reasoning followed by its final answer.
Scores go to the ``rewards`` table under the label ``--name`` (default: the model's folder or
hub name), keyed by (trace_id, reward_model); a rerun skips the keys already there. Traces are
scored shortest first (little padding) and written in parts of whole batches (at least 16
rows), so a kill loses at most one part. On a CPU, batching does not pay: with SmolLM2-135M a
batch of 8 took 3.00 s per trace and single traces 1.09 s (``bench/reward_bench.py``, 32 demo
traces, 2 cores), so the demo scores one at a time; on a GPU larger batches do pay.

Models. The published analysis (Legi-Val, arXiv 2603.20508) used two 8B reward models, which
have short names here: ``skywork-v2`` = ``Skywork/Skywork-Reward-V2-Llama-3.1-8B`` and
``allenai-rb2`` = ``allenai/Llama-3.1-8B-Instruct-RM-RB2``. Any local folder with a
sequence-classification head works. A hub id is looked up in the local Hugging Face cache
only, unless ``--allow-download`` is given (and the network exists); either way a missing
model fails with a one-line message that says what to do.

Long traces are cut from the left to ``--max-length`` tokens (the score head reads the last
token, so the end of the answer is kept); the number cut is logged and recorded.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from precompute.backends.base import torch_placement
from precompute.stages.base import (
    BatchWriter,
    StageContext,
    StageError,
    StageOption,
    StageResult,
    register_options_stage,
)
from precompute.stages.common import (
    cell_text,
    chunks,
    option_values,
    problem_rows,
    read_required,
    require_whole_numbers,
    shard_rows,
    task_of,
)

__all__ = [
    "PUBLISHED_REWARD_MODELS",
    "REWARD_OPTIONS",
    "STANDIN_MARKER",
    "RewardModelError",
    "RewardOptions",
    "RewardScorer",
    "build_standin_reward_model",
    "response_text",
    "score_rewards",
    "standin_reason",
]

#: Short names of the reward models of the published analysis (hub ids; 8B, GPU).
PUBLISHED_REWARD_MODELS: dict[str, str] = {
    "skywork-v2": "Skywork/Skywork-Reward-V2-Llama-3.1-8B",
    "allenai-rb2": "allenai/Llama-3.1-8B-Instruct-RM-RB2",
}


class RewardModelError(StageError):
    """The reward model cannot be found, loaded or used; the message names the model."""


@dataclass(frozen=True)
class RewardOptions:
    """Settings of the ``reward`` stage.

    Attributes:
        model: local folder, hub id, or a key of :data:`PUBLISHED_REWARD_MODELS`.
        name: label stored in ``rewards.reward_model`` (default: last part of the model id).
        batch_size: traces scored per forward pass (parts hold whole batches).
        max_length: longest token sequence scored; longer ones lose their beginning.
        device: ``"auto"`` (CUDA when available), ``"cpu"``, ``"cuda"``, ``"cuda:1"``, …
        dtype: torch dtype name; default bfloat16 on a GPU, float32 on the CPU.
        allow_download: let transformers fetch a hub id that is not in the local cache.
    """

    model: str
    name: str | None = None
    batch_size: int = 4
    max_length: int = 8192
    device: str = "auto"
    dtype: str | None = None
    allow_download: bool = False

    @property
    def model_id(self) -> str:
        return PUBLISHED_REWARD_MODELS.get(self.model, self.model)

    @property
    def label(self) -> str:
        if self.name:
            return self.name
        return Path(self.model_id.rstrip("/")).name or self.model_id

    @classmethod
    def from_mapping(
        cls, values: Mapping[str, Any], source: str = "reward options"
    ) -> RewardOptions:
        """Build from a dict (CLI arguments or a config table), naming a bad key or value."""
        given = option_values(cls, values, source)
        model = given.get("model")
        if not isinstance(model, str) or not model.strip():
            raise StageError(
                f"{source}: the reward stage needs a model: python -m precompute reward "
                "--store DIR --model ID_OR_PATH (e.g. --model skywork-v2, or a local folder)"
            )
        options = cls(**given)
        require_whole_numbers(options, ("batch_size", "max_length"), source)
        return options


#: The stage's own command-line options (``python -m precompute reward --model …``).
REWARD_OPTIONS = (
    StageOption(
        "--model", "model", {"help": "reward model: local folder, hub id, skywork-v2, allenai-rb2"}
    ),
    StageOption("--name", "name", {"help": "label stored in rewards.reward_model"}),
    StageOption("--batch-size", "batch_size", {"type": int, "help": "traces per batch"}),
    StageOption("--max-length", "max_length", {"type": int, "help": "token limit"}),
    StageOption("--device", "device", {"help": "auto, cpu, cuda, cuda:N"}),
    StageOption("--dtype", "dtype", {"help": "torch dtype, e.g. bfloat16"}),
    StageOption(
        "--allow-download",
        "allow_download",
        {
            "action": "store_true",
            "help": "fetch a hub model that is not in the local cache (needs the network)",
        },
    ),
)


def response_text(reasoning: str | None, answer_text: str | None) -> str:
    """The assistant turn shown to the reward model: reasoning, then the final answer.

    >>> response_text("2 + 2 = 4.", "The answer is 4.")
    '2 + 2 = 4.\\n\\nThe answer is 4.'
    >>> response_text("So it is 4.", None)
    'So it is 4.'
    """
    reasoning = (reasoning or "").strip()
    answer = (answer_text or "").strip()
    if not answer or reasoning.endswith(answer):
        return reasoning
    return f"{reasoning}\n\n{answer}" if reasoning else answer


def _truthy(value: str | None) -> bool:
    return (value or "").strip().lower() in {"1", "true", "yes", "on"}


class RewardScorer:
    """A sequence-classification reward model and its tokenizer, ready to score pairs.

    Args:
        model: local folder or hub id (see :class:`RewardOptions`).
        device, dtype, max_length, allow_download: as in :class:`RewardOptions`.
    """

    def __init__(
        self,
        model: str,
        *,
        device: str = "auto",
        dtype: str | None = None,
        max_length: int = 8192,
        allow_download: bool = False,
    ) -> None:
        from transformers import AutoModelForSequenceClassification, AutoTokenizer

        device, torch_dtype = torch_placement(device, dtype)
        local = Path(model).expanduser()
        source = str(local) if local.exists() else model
        offline = not allow_download or _truthy(os.environ.get("HF_HUB_OFFLINE"))
        kwargs: dict[str, Any] = {"local_files_only": True} if offline else {}
        try:
            self.tokenizer = AutoTokenizer.from_pretrained(source, **kwargs)
            self.model = AutoModelForSequenceClassification.from_pretrained(
                source, dtype=torch_dtype, **kwargs
            )
        except (OSError, ValueError) as error:
            first = (str(error).strip().splitlines() or [type(error).__name__])[0]
            if local.exists():
                raise RewardModelError(
                    f"reward model folder {source}: cannot load it as a sequence "
                    f"classification model ({first})"
                ) from None
            hint = (
                "it is not in the local Hugging Face cache; download it where the network "
                f"exists (huggingface-cli download {model}) or pass --allow-download"
                if offline
                else "the download failed (no network?); pass a local folder instead"
            )
            raise RewardModelError(f"reward model {model!r}: {hint} ({first})") from None
        if self.tokenizer.chat_template is None:
            raise RewardModelError(
                f"reward model {model!r}: its tokenizer has no chat template, so a "
                "(problem, answer) pair cannot be rendered the way it was trained"
            )
        labels = int(getattr(self.model.config, "num_labels", 1))
        if labels != 1:
            raise RewardModelError(
                f"reward model {model!r}: has {labels} output labels; a reward model has one"
            )
        self.model.to(device)
        self.model.eval()
        self.device = device
        self.dtype = str(torch_dtype).removeprefix("torch.")
        self.model_id = model
        self.max_length = int(max_length)
        self.revision = getattr(self.model.config, "_commit_hash", None) or _folder_digest(local)
        self.truncated = 0

    def encode(self, prompt: str, response: str) -> list[int]:
        """Token ids of the conversation (user = ``prompt``, assistant = ``response``).

        The template writes the special tokens it wants, so none are added on top; a
        sequence longer than ``max_length`` keeps its last ``max_length`` tokens.
        """
        messages = [
            {"role": "user", "content": prompt},
            {"role": "assistant", "content": response},
        ]
        text = self.tokenizer.apply_chat_template(messages, tokenize=False)
        ids = list(self.tokenizer(text, add_special_tokens=False)["input_ids"])
        if len(ids) > self.max_length:
            self.truncated += 1
            ids = ids[-self.max_length :]
        return ids

    def _pad_id(self, sequences: Sequence[Sequence[int]]) -> int:
        # The model finds each row's last token as the last one that is not the pad id; a pad id
        # that also occurs in the text (SmolLM2 pads with its end-of-turn token) would move that
        # point, so use one that occurs in no row of this batch.
        used = {token for seq in sequences for token in seq}
        preferred = [self.tokenizer.pad_token_id, self.tokenizer.unk_token_id]
        for candidate in preferred:
            if candidate is not None and candidate not in used:
                return int(candidate)
        vocab = int(self.model.get_input_embeddings().weight.shape[0])
        for candidate in range(vocab - 1, -1, -1):
            if candidate not in used:
                return candidate
        raise RewardModelError(f"reward model {self.model_id!r}: no token id free for padding")

    def score_ids(self, sequences: Sequence[Sequence[int]]) -> list[float]:
        """Rewards of already encoded sequences, scored together in one right-padded batch."""
        import torch

        if not sequences:
            return []
        pad = self._pad_id(sequences)
        width = max(len(seq) for seq in sequences)
        ids = torch.full((len(sequences), width), pad, dtype=torch.long)
        mask = torch.zeros((len(sequences), width), dtype=torch.long)
        for row, seq in enumerate(sequences):
            ids[row, : len(seq)] = torch.tensor(list(seq), dtype=torch.long)
            mask[row, : len(seq)] = 1
        self.model.config.pad_token_id = pad
        text_config = self.model.config.get_text_config()
        text_config.pad_token_id = pad
        with torch.inference_mode():
            logits = self.model(
                input_ids=ids.to(self.device), attention_mask=mask.to(self.device)
            ).logits
        return [float(v) for v in logits[:, 0].float().cpu().tolist()]

    def score(self, pairs: Sequence[tuple[str, str]], batch_size: int = 4) -> list[float]:
        """Rewards of (prompt, response) pairs, in order; batches group similar lengths."""
        encoded = [self.encode(prompt, response) for prompt, response in pairs]
        order = sorted(range(len(encoded)), key=lambda i: len(encoded[i]))
        scores: list[float] = [0.0] * len(encoded)
        for batch in chunks(order, max(1, int(batch_size))):
            for index, value in zip(
                batch, self.score_ids([encoded[i] for i in batch]), strict=True
            ):
                scores[index] = value
        return scores


def _folder_digest(folder: Path) -> str | None:
    """A short digest of a local model's config (a revision marker for provenance)."""
    config = folder / "config.json"
    if not config.is_file():
        return None
    return "config-sha256:" + hashlib.sha256(config.read_bytes()).hexdigest()[:16]


@register_options_stage(
    "reward",
    RewardOptions.from_mapping,
    reads=("problems", "traces"),
    writes=("rewards",),
    help="reward-model score of every (problem, trace), via a sequence-classification model",
    options=REWARD_OPTIONS,
)
def score_rewards(ctx: StageContext, options: RewardOptions) -> StageResult:
    """Score every trace of the shard that has no row for ``options.label`` yet."""
    result = StageResult("reward")
    columns = ["trace_id", "problem_id", "reasoning", "answer_text"]
    traces = read_required(ctx.store, "traces", columns, "reward", "generate", "ingest")
    traces = shard_rows(traces, ctx.shard)
    done: set[tuple[Any, ...]] = set()
    if ctx.store.has("rewards"):
        done = ctx.store.done_keys("rewards")
    label = options.label
    todo = traces[[(t, label) not in done for t in traces["trace_id"]]].sort_values("trace_id")
    result.skipped = len(traces) - len(todo)
    result.todo = len(todo)
    result.provenance = {
        "models": {label: {"model": options.model_id}},
        "reward": {k: v for k, v in asdict(options).items() if k != "model"},
    }
    standin = standin_reason(options.model_id)
    if standin is not None:
        # Recorded explicitly, so every page can say so (legival_core.store.provenance).
        result.provenance["models"][label]["standin"] = standin
        result.notes.append(f"{label} is a stand-in: its scores carry no preference signal")
    if todo.empty:
        result.written["rewards"] = 0
        return result
    problems = problem_rows(ctx.store)
    pairs: list[tuple[str, str]] = []
    for row in todo.itertuples(index=False):
        problem = problems.get(str(row.problem_id))
        if problem is None:
            raise StageError(
                f"table 'traces', trace {row.trace_id}: problem {row.problem_id!r} is not in "
                "table 'problems'"
            )
        pairs.append(
            (
                task_of(problem).user_prompt(problem),
                response_text(cell_text(row.reasoning), cell_text(row.answer_text)),
            )
        )
    scorer = RewardScorer(
        options.model_id,
        device=options.device,
        dtype=options.dtype,
        max_length=options.max_length,
        allow_download=options.allow_download,
    )
    ctx.logger.info(
        "reward model %s on %s (%s): %d traces",
        options.model_id,
        scorer.device,
        scorer.dtype,
        len(pairs),
    )
    bar = ctx.bar(len(pairs), "reward", "trace")
    ids = todo["trace_id"].tolist()
    encoded = [scorer.encode(prompt, response) for prompt, response in pairs]
    # Shortest first across the whole shard, so a batch pads little; ties by trace id keep the
    # order (and so a resumed run's batches) deterministic.
    order = sorted(range(len(encoded)), key=lambda i: (len(encoded[i]), str(ids[i])))
    # A part holds whole batches (a resumed run meets the same batches) and at least 16 rows.
    part_rows = options.batch_size * max(1, -(-16 // options.batch_size))
    with BatchWriter(ctx.store, "rewards", "reward", part_rows) as writer:
        for batch in chunks(order, options.batch_size):
            values = scorer.score_ids([encoded[i] for i in batch])
            writer.add_group(
                {"trace_id": ids[i], "reward_model": label, "score": value}
                for i, value in zip(batch, values, strict=True)
            )
            bar.update(len(batch))
    bar.close()
    result.written["rewards"] = writer.written
    if scorer.truncated:
        result.notes.append(
            f"{scorer.truncated} trace(s) cut to the last {options.max_length} tokens"
        )
    result.provenance["models"][label].update(
        revision=scorer.revision, device=scorer.device, dtype=scorer.dtype
    )
    result.provenance["reward"]["truncated"] = scorer.truncated
    return result


#: File a stand-in reward model's folder carries; its ``reason`` goes into the provenance.
STANDIN_MARKER = "legival-standin.json"
_STANDIN_REASON = (
    "an untrained score head on SmolLM2-135M-Instruct (seed {seed}), built for the demo: it "
    "exercises the reward path but carries no preference signal"
)


def standin_reason(model: str) -> str | None:
    """The stand-in marker's reason when ``model`` is a folder that carries one, else None."""
    marker = Path(model) / STANDIN_MARKER
    if not marker.is_file():
        return None
    try:
        reason = json.loads(marker.read_text(encoding="utf-8")).get("reason")
    except (OSError, ValueError, AttributeError):
        reason = None
    return str(reason) if reason else "marked as a stand-in reward model"


def _write_standin_marker(folder: Path, seed: int) -> None:
    text = json.dumps({"standin": True, "reason": _STANDIN_REASON.format(seed=seed)}, indent=1)
    (folder / STANDIN_MARKER).write_text(text + "\n", encoding="utf-8")


def build_standin_reward_model(out_dir: str | os.PathLike[str], *, seed: int = 0) -> Path:
    """A reward-model-shaped stand-in that runs offline: SmolLM2-135M-Instruct (the packaged
    GGUF, converted once) with a seeded, *untrained* one-output score head.

    It exercises the whole reward path (chat template, batching, pooling, store, app) on a
    machine without the 8B models, but its scores carry no preference signal: the head was
    never trained on preferences. Use it for demos and plumbing, never for conclusions.
    """
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    from precompute.models import smollm2_hf_folder

    out = Path(out_dir)
    if (out / "config.json").is_file() and any(out.glob("*.safetensors")):
        if not (out / STANDIN_MARKER).is_file():  # built before the marker existed
            _write_standin_marker(out, seed)
        return out
    base = smollm2_hf_folder()
    torch.manual_seed(seed)
    model = AutoModelForSequenceClassification.from_pretrained(
        base, num_labels=1, dtype=torch.float32, local_files_only=True
    )
    tokenizer = AutoTokenizer.from_pretrained(base, local_files_only=True)
    # Written under a temporary name and renamed, so a crash never leaves a half folder.
    staging = out.with_name(out.name + ".partial")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    tokenizer.save_pretrained(staging)
    model.save_pretrained(staging)
    _write_standin_marker(staging, seed)
    shutil.rmtree(out, ignore_errors=True)
    staging.rename(out)
    return out
