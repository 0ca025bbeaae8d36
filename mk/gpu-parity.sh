#!/usr/bin/env bash
# Whole-model parity of hone's GPU engine with Hugging Face transformers at real shapes (random weights), on a
# machine with a GPU, from a bundle made here:
#   make bundle && mk/gpu-parity.sh LOGDIR [--moe] [--lengths 300,200,257]
# Runs tools/hf_reference.py compare --device cuda --grads at qwen3-0.6b and llama-3.2-1b (with --moe instead: a
# tiny Qwen3-MoE and the Qwen3-30B-A3B shape cut to two layers) with the first python3 on PATH (it needs torch,
# transformers, safetensors, numpy; h5py or h5dump). Logs: LOGDIR/{env,<shape>}.txt; the SUMMARY lines are also
# collected in LOGDIR/summary.txt.
set -uo pipefail
cd "$(dirname "$0")/.."
logdir=${1:?usage: mk/gpu-parity.sh LOGDIR [--moe] [compare options...]}
shift
runs=("qwen3 qwen3-0.6b" "llama llama-3.2-1b")
if [ "${1:-}" = --moe ]; then
  runs=("qwen3_moe tiny" "qwen3_moe qwen3-30b-a3b-2l")
  shift
fi
mkdir -p "$logdir"
logdir=$(cd "$logdir" && pwd)
python_ld_library_path=${LD_LIBRARY_PATH:-}
# shellcheck source=mk/gpu-env.sh
source mk/gpu-env.sh
# hone gets the bundle's libraries through a wrapper; Python and torch keep the machine's own library path.
hone_wrapper=$logdir/hone
printf '#!/bin/sh\nLD_LIBRARY_PATH=%q exec %q "$@"\n' "$LD_LIBRARY_PATH" "$PWD/$bundle/bin/hone" >"$hone_wrapper"
chmod +x "$hone_wrapper"

{
  echo "== $(date -u +%FT%TZ) $(hostname)"
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv 2>&1
  "$hone_wrapper" --version 2>&1
  LD_LIBRARY_PATH=$python_ld_library_path python3 -c 'import torch, transformers; print("torch", torch.__version__, "cuda", torch.cuda.is_available(), "transformers", transformers.__version__)' 2>&1
} 2>&1 | tee "$logdir/env.txt"

status=0
for run in "${runs[@]}"; do
  set -- $run "$@"
  arch=$1 shape=$2
  shift 2
  echo "== $shape" | tee "$logdir/$shape.txt"
  LD_LIBRARY_PATH=$python_ld_library_path python3 tools/hf_reference.py --hone "$hone_wrapper" compare \
    --arch "$arch" --shape "$shape" --device cuda --grads "$@" 2>&1 | tee -a "$logdir/$shape.txt"
  [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
done
# A checkpoint's hf/ folder loaded by transformers as is (and by vLLM where it is installed).
echo "== checkpoint" | tee "$logdir/checkpoint.txt"
LD_LIBRARY_PATH=$python_ld_library_path python3 tools/hf_reference.py --hone "$hone_wrapper" checkpoint 2>&1 |
  tee -a "$logdir/checkpoint.txt"
[ "${PIPESTATUS[0]}" -eq 0 ] || status=1
grep -h '^SUMMARY' "$logdir"/*.txt >"$logdir/summary.txt"
cat "$logdir/summary.txt"
exit $status
