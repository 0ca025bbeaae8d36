#!/usr/bin/env bash
# Runs hone's GPU suite (and, when asked, the GPU benchmarks) on a machine with a GPU, from a bundle made here:
#   make bundle && mk/gpu-run.sh LOGDIR [bench...]
# The bundle (dist/hone-*/, or its .tar.xz) carries bin/hone, bin/gpu_tests and the non-system libraries; the CUDA libraries come
# from the machine: the toolkit's lib64 and, where cuDNN/NCCL live in a Python environment, its nvidia/*/lib folders.
set -uo pipefail
cd "$(dirname "$0")/.."
logdir=${1:?usage: mk/gpu-run.sh LOGDIR [bench...]}
shift
mkdir -p "$logdir"
# shellcheck source=mk/gpu-env.sh
source mk/gpu-env.sh

{
  echo "== $(date -u +%FT%TZ) $(hostname)"
  nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv 2>&1
  ldd "$bundle/bin/hone" | grep -E 'cudnn|nccl|cublas|not found'
} 2>&1 | tee "$logdir/env.txt"

status=0
if [ -x "$bundle/bin/gpu_tests" ]; then
  "$bundle/bin/gpu_tests" --color_output=no --log_level=test_suite --report_level=short 2>&1 | tee "$logdir/gpu_tests.txt"
  status=${PIPESTATUS[0]}
fi
for b in "$@"; do
  echo "== bench $b" | tee -a "$logdir/bench.txt"
  "$bundle/bin/hone" bench "$b" 2>&1 | tee -a "$logdir/bench.txt"
done
exit $status
