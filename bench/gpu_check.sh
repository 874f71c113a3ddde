#!/usr/bin/env bash
# The prepared GPU check (docs/running-at-scale.md, "Run on a GPU"): the rollout stage on the transformers engine
# on a CUDA GPU against the bare engine, tokens/s both ways and their ratio. Needs PyTorch with
# CUDA and the packages bench/gpu_check.py names; downloads nothing; stops after 8 minutes.
#   bash bench/gpu_check.sh                 # defaults: cuda, 32 demo traces, batches of 16
#   bash bench/gpu_check.sh --traces 64     # any option of bench/gpu_check.py passes through
set -euo pipefail
cd "$(dirname "$0")/.."
python=${PYTHON:-python}
if ! "$python" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" 2>/dev/null; then
  echo "gpu_check: no CUDA GPU visible to PyTorch (or no torch);" \
    "for the CPU form run: $python bench/gpu_check.py --device cpu --traces 2 --hidden 64 --layers 2" >&2
  exit 2
fi
exec timeout 480 "$python" bench/gpu_check.py --device cuda "$@"
