#!/usr/bin/env bash
# Everything hone runs on a one-GPU machine in one go, from the bundle (make bundle; see mk/gpu-env.sh): the GPU
# suite, the kernel micro-benchmarks, the generation benchmarks, the demo deck on the GPU and the GRPO step
# benchmarks. Each part has its own time limit so a hang costs only its share.
#   mk/gpu-session.sh LOGDIR [part...]   parts: suite kernels gen gen-llama demo grpo grpo-llama (default: all)
set -uo pipefail
cd "$(dirname "$0")/.."
logdir=${1:?usage: mk/gpu-session.sh LOGDIR [part...]}
shift
parts=${*:-suite kernels gen gen-llama demo grpo grpo-llama}
mkdir -p "$logdir"
# shellcheck source=mk/gpu-env.sh
source mk/gpu-env.sh
log=$logdir/session.txt
want() { [[ " $parts " == *" $1 "* ]]; }
section() { echo "== $(date -u +%T) $*" | tee -a "$log"; }
run_part() {  # seconds, name, command...
  local limit=$1 name=$2
  shift 2
  section "$name: $*"
  timeout --signal=TERM --kill-after=10 "$limit" "$@" >>"$logdir/$name.txt" 2>&1
  local rc=$?
  echo "   exit $rc" | tee -a "$log"
  tail -n 25 "$logdir/$name.txt" >>"$log"
}

{
  nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv 2>&1
  ldd "$bundle/bin/hone" | grep -E 'cudnn|nccl|cublas|not found'
} >>"$log" 2>&1
hone=$bundle/bin/hone
if want suite; then
  run_part 200 suite "$bundle/bin/gpu_tests" --color_output=no --log_level=test_suite --report_level=short
fi
if want kernels && [ -x "$bundle/bin/bench_decode_attention" ]; then
  run_part 45 kernels "$bundle/bin/bench_decode_attention"
fi
if want gen; then
  if command -v gdb >/dev/null; then  # a crash prints its stack
    run_part 150 gen gdb -q -batch -ex run -ex bt --args "$hone" bench-generation input/bench-gen-qwen3-0.6b.toml \
      "output.dir=$logdir"
  else
    run_part 100 gen "$hone" bench-generation input/bench-gen-qwen3-0.6b.toml "output.dir=$logdir"
  fi
fi
if want gen-llama; then
  run_part 100 gen "$hone" bench-generation input/bench-gen-llama-3.2-1b.toml "output.dir=$logdir"
fi
if want demo; then
  run_part 60 demo "$hone" run input/demo.toml run.device=cuda "output.dir=$logdir" \
    "checkpoint.dir=$logdir/demo-checkpoints"
fi
if want grpo; then
  run_part 200 grpo "$hone" run input/bench-grpo-qwen3-0.6b.toml "output.dir=$logdir" "checkpoint.dir=$logdir/ck"
fi
if want grpo-llama; then
  run_part 200 grpo "$hone" run input/bench-grpo-llama-3.2-1b.toml "output.dir=$logdir" "checkpoint.dir=$logdir/ck"
fi
section done
