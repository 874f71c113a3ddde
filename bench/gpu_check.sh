#!/usr/bin/env bash
# The prepared GPU checks (docs/running-at-scale.md, "Run on a GPU"). Needs PyTorch with CUDA
# and the packages bench/gpu_check.py names; downloads nothing.
#
# 1. rollout: the rollout stage on the transformers engine on a CUDA GPU against the bare
#    engine, tokens/s both ways and their ratio (stops after 8 minutes).
# 2. judge: the LLM judge stage's prompt and parser (bench/judge_hand_labels.py) on hand-labelled
#    backtracking steps of the test half, with a real model on the GPU through the transformers
#    engine, then its precision, recall, κ and ρ beside the offline labelers on the same items
#    (bench/label_quality.py --score; stops after 4 minutes). The model: JUDGE_MODEL (a .gguf
#    file, a local folder or a cached hub id), by default the packaged SmolLM2-135M-Instruct;
#    JUDGE_ITEMS steps (default 60), replies into JUDGE_OUT (default a temporary file).
#
#   bash bench/gpu_check.sh                     # both checks
#   GPU_CHECK=judge bash bench/gpu_check.sh     # one of them: rollout or judge
#   bash bench/gpu_check.sh --traces 64         # options of bench/gpu_check.py pass through
set -euo pipefail
cd "$(dirname "$0")/.."
python=${PYTHON:-python}
check=${GPU_CHECK:-both}
case "$check" in
  both | rollout | judge) ;;
  *)
    echo "gpu_check: GPU_CHECK must be both, rollout or judge, not '$check'" >&2
    exit 2
    ;;
esac
if ! "$python" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" 2>/dev/null; then
  echo "gpu_check: no CUDA GPU visible to PyTorch (or no torch); the CPU forms:" \
    "$python bench/gpu_check.py --device cpu --traces 2 --hidden 64 --layers 2;" \
    "$python bench/judge_hand_labels.py --engine llamacpp --model smollm2-135m --name smollm2-135m" \
    "--half test --limit 4 --out /tmp/judge.jsonl && $python bench/label_quality.py --score /tmp/judge.jsonl" >&2
  exit 2
fi
if [ "$check" != judge ]; then
  timeout 480 "$python" bench/gpu_check.py --device cuda "$@"
fi
if [ "$check" != rollout ]; then
  judge_model=${JUDGE_MODEL:-$("$python" -c "from precompute.models import smollm2_gguf_path; print(smollm2_gguf_path())")}
  judge_out=${JUDGE_OUT:-$(mktemp -d)/judge.jsonl}
  timeout 240 "$python" bench/judge_hand_labels.py --engine transformers --device cuda \
    --model "$judge_model" --name "${JUDGE_NAME:-gpu-judge}" --half test \
    --limit "${JUDGE_ITEMS:-60}" --out "$judge_out"
  "$python" bench/label_quality.py --score "$judge_out"
fi
