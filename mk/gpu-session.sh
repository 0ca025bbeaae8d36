#!/usr/bin/env bash
# Everything hone runs on a GPU machine in one go, from the bundle (make bundle; see mk/gpu-env.sh): the GPU suite,
# the kernel micro-benchmarks, the generation benchmarks, the demo deck on the GPU and the GRPO step benchmarks;
# on a machine of two GPUs also the NCCL checks, data-parallel `hone run` checks and the two-GPU step benchmarks.
# Each part has its own time limit so a hang costs only its share.
#   mk/gpu-session.sh LOGDIR [part...]
#   one GPU:  suite kernels gen gen-llama demo grpo grpo-llama (the default)
#   data parallel: nccl (nccl_check, one rank per GPU), dp-check (mk/gpu-dp-check.sh; one GPU: its one-GPU part),
#             grpo-1gpu (the Qwen3-0.6B step on GPU 0 alone), gen-8b-half (the generation phase of one rank of the
#             two-GPU Llama-3.1-8B step, alone on GPU 0), and on two GPUs grpo-dp2 and grpo-dp2-zero (the Qwen3-0.6B
#             step with twice the prompts, plain and with the distributed optimizer), grpo-8b (the Llama-3.1-8B shape),
#             then report (hone-report of every step file)
#   faults (two GPUs): rank-kill (mk/gpu-rank-kill.sh: one rank killed mid-run ends the job within the NCCL timeout)
#   tensor parallel (two GPUs): tp-check (mk/gpu-tp-check.sh: tp=2 against one GPU over whole rows, with sequence
#             parallelism and with its collectives overlapped; the Qwen3-0.6B step times of each), grpo-8b-tp2 (the
#             Llama-3.1-8B shape at tp=2 with sequence parallelism)
#   your own reward: reward (the demo deck on the GPU scored by examples/reward/exact_match.py, every rollout kept
#             and listed by tools/hone-rollouts, a checkpoint with its hf/ folder)
#   the bundle itself: bundle (mk/gpu-bundle-check.sh: the MPI env.sh picks, the demo on the GPU and on two CPU ranks
#             with each MPI the machine offers; fails on any PMIx, dlopen or component warning); progress (two steps
#             of the Qwen3-0.6B step benchmark with a progress line every 2 s: the lines of the generation phase)
#   pipeline parallel (two GPUs): pp-check (mk/gpu-pp-check.sh: pp=2, interleaved, generation.tp=2 and the
#             offload against one GPU; bubble, exchanges, refit bytes and phase times)
#   long sequences (one GPU): cp-long (mk/gpu-cp-long.sh: the Qwen3-1.7B shape at 4k, 16k and 32k tokens with each
#             train.recompute, and the attention's TFLOP/s); context parallel (two GPUs): cp-check
#             (mk/gpu-cp-check.sh: cp=2 against one GPU), cp-32k (the Qwen3-1.7B shape with 32k-token sequences,
#             input/bench-grpo-qwen3-1.7b-32k.toml: one GPU, cp=2, cp=2 without recompute; 2 steps each)
#   mixture of experts: moe (one GPU: the Qwen3-30B-A3B shape cut to what fits: hone bench with the grouped GEMMs
#             against the dense ceiling and the projection to 48 layers and eight GPUs, bench-generation at 24 layers,
#             and transformers parity of the GPU engine on a tiny Qwen3-MoE and on two layers of the real shape when
#             python3 has torch), ep-check (two GPUs: mk/gpu-ep-check.sh, ep=2 against ep=1 and one GPU)
#   generation between steps (one GPU): keep-off (the Qwen3-0.6B step with generation.keep_graphs=false, beside grpo);
#             long tail: tail (input/bench-grpo-qwen3-1.7b-tail.toml and its fixed-length companion, 2 steps each),
#             tail-step (the tail's decode steps alone: input/bench-gen-qwen3-1.7b-tail-step.toml at 32 and 8 rows,
#             2,048-token prompts of their own, 1,024 new tokens)
#   GEMMs (one GPU): gemm (bench_gemm_algos: cuBLASLt's first candidate against its fastest at the layers' shapes),
#             moe-decode (bench_moe_decode: the experts' forward GEMMs at decode shapes, tiled against few-rows kernel)
#   checkpoints (two GPUs): resume-check (mk/gpu-resume-check.sh: tp=2, pp=2 and ep=2 saved and resumed on the
#             same layout against a straight run)
#   the real model (one GPU; the GGUF at $HONE_SMOLLM2_GGUF): smollm2 (input/smollm2-arithmetic.toml, 60 steps),
#             smollm2-fidelity (hone logprobs --device cuda against transformers fp32 and bf16 on the golden
#             sequences, tools/smollm2_reference.py), smollm2-reference (tools/reference_grpo.py: the same run in
#             PyTorch + transformers)
#   four GPUs: tail-8b (the Llama-3.1-8B step deck at the seed's shape: 2048 rollouts of 256-token prompts and
#             responses of the long-tail deck's log-normal lengths capped at 4096-token sequences, dp=4, 2 steps),
#             moe-4gpu (the Qwen3-30B-A3B shape cut to 4 layers, 256 prompts x 8, at ep=4, tp=2 x ep=2 and ep=1)
#   comparing two builds on one machine: grpo-baseline runs the Qwen3-0.6B step with the executable HONE_BASELINE
#             (another build's hone, using this bundle's libraries), named baseline-*, before or after `grpo`
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
  run_part 330 suite "$bundle/bin/gpu_tests" --color_output=no --log_level=test_suite --report_level=short
fi
if want kernels && [ -x "$bundle/bin/bench_decode_attention" ]; then
  run_part 45 kernels "$bundle/bin/bench_decode_attention"
fi
if want kernels && [ -x "$bundle/bin/bench_sampler" ]; then
  run_part 45 sampler "$bundle/bin/bench_sampler"
fi
if want gemm && [ -x "$bundle/bin/bench_gemm_algos" ]; then  # cuBLASLt's first choice against its fastest candidate
  run_part 120 gemm "$bundle/bin/bench_gemm_algos"
fi
if want moe-decode && [ -x "$bundle/bin/bench_moe_decode" ]; then  # the experts' decode GEMMs against the copy bandwidth
  run_part 60 moe-decode "$bundle/bin/bench_moe_decode"
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
if want reward; then  # the GPU engine's rollouts through reward.command, kept whole; the demo must still learn
  run_part 120 reward "$hone" run input/demo.toml run.device=cuda run.name=demo-reward \
    'reward.command="python3 examples/reward/exact_match.py"' output.rollouts=all "output.dir=$logdir" \
    "checkpoint.dir=$logdir/reward-checkpoints"
  run_part 60 reward-rollouts python3 tools/hone-rollouts "$logdir/demo-reward.h5" --steps 75-80
  ls -lR "$logdir/reward-checkpoints" >>"$logdir/reward-rollouts.txt" 2>&1
fi
if want grpo; then
  run_part 200 grpo "$hone" run input/bench-grpo-qwen3-0.6b.toml "output.dir=$logdir" "checkpoint.dir=$logdir/ck"
fi
if want keep-off; then  # the Qwen3-0.6B step with the decode graphs captured anew every step (the old way), to set
  # beside `grpo` (kept graphs: captures N, 0, 0, ... in /steps/generation/cuda_graph_captures)
  run_part 200 keep-off "$hone" run input/bench-grpo-qwen3-0.6b.toml run.name=keep-off-bench-grpo-qwen3-0.6b \
    generation.keep_graphs=false "output.dir=$logdir" "checkpoint.dir=$logdir/ck"
fi
if want tail; then  # the long-tail deck and its fixed-length companion (same expected tokens), two steps each
  run_part 280 tail "$hone" run input/bench-grpo-qwen3-1.7b-tail.toml run.max_steps=2 "output.dir=$logdir" \
    "checkpoint.dir=$logdir/ck"
  run_part 280 tail-fixed "$hone" run input/bench-grpo-qwen3-1.7b-tail-fixed.toml run.max_steps=2 \
    "output.dir=$logdir" "checkpoint.dir=$logdir/ck"
fi
if want tail-step; then
  for p in 4 1; do  # 32 rows, then the last 8
    run_part 120 tail-step "$hone" bench-generation input/bench-gen-qwen3-1.7b-tail-step.toml \
      "grpo.num_prompts_per_step=$p" bench.prompt_tokens=2048 generation.max_new_tokens=1024 \
      generation.max_total_sequence_length=3072 bench.shared_prefix=false "output.dir=$logdir"
  done
fi
if want grpo-baseline; then
  run_part 200 grpo-baseline "${HONE_BASELINE:?grpo-baseline needs HONE_BASELINE}" run input/bench-grpo-qwen3-0.6b.toml \
    run.name=baseline-bench-grpo-qwen3-0.6b "output.dir=$logdir" "checkpoint.dir=$logdir/ck"
fi
if want grpo-llama; then
  run_part 200 grpo "$hone" run input/bench-grpo-llama-3.2-1b.toml "output.dir=$logdir" "checkpoint.dir=$logdir/ck"
fi
if want moe; then
  run_part 420 moe "$hone" bench input/bench-qwen3-30b-a3b.toml --output-dir "$logdir"
  run_part 300 moe-gen "$hone" bench-generation input/bench-gen-qwen3-30b-a3b.toml "output.dir=$logdir"
  if python3 -c 'import torch, transformers' 2>/dev/null; then
    run_part 240 moe-parity bash mk/gpu-parity.sh "$logdir/moe-parity" --moe
  fi
fi
gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
# shellcheck disable=SC2206
mpi_args=(--allow-run-as-root --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -x PATH $HONE_MPIRUN_ENV)
mpi=(mpirun -np 2 "${mpi_args[@]}")
qwen=input/bench-grpo-qwen3-0.6b.toml
if want nccl; then
  run_part 150 nccl mpirun -np "$gpus" "${mpi_args[@]}" "$bundle/bin/nccl_check"
fi
if want dp-check; then
  run_part 420 dp-check bash mk/gpu-dp-check.sh "$logdir/dp-check"
fi
if want rank-kill; then
  run_part 150 rank-kill bash mk/gpu-rank-kill.sh "$logdir/rank-kill"
fi
if want tp-check; then
  run_part 600 tp-check bash mk/gpu-tp-check.sh "$logdir/tp-check"
fi
if want cp-long; then
  run_part 1500 cp-long bash mk/gpu-cp-long.sh "$logdir/cp-long"
fi
if want cp-check; then
  run_part 600 cp-check bash mk/gpu-cp-check.sh "$logdir/cp-check"
fi
if want pp-check; then
  run_part 600 pp-check bash mk/gpu-pp-check.sh "$logdir/pp-check"
fi
if want cp-32k; then  # 32k-token sequences (input/bench-grpo-qwen3-1.7b-32k.toml): one GPU against cp = 2
  long=input/bench-grpo-qwen3-1.7b-32k.toml
  run_part 200 cp-32k-one env CUDA_VISIBLE_DEVICES=0 "$hone" run $long run.name=long-one run.max_steps=2 \
    "output.dir=$logdir" "checkpoint.dir=$logdir/ck"
  run_part 200 cp-32k-cp2 "${mpi[@]}" "$hone" run $long run.name=long-cp2 parallel.cp=2 run.max_steps=2 \
    "output.dir=$logdir" "checkpoint.dir=$logdir/ck"
  run_part 200 cp-32k-cp2-none "${mpi[@]}" "$hone" run $long run.name=long-cp2-none parallel.cp=2 \
    train.recompute=none run.max_steps=2 "output.dir=$logdir" "checkpoint.dir=$logdir/ck"
fi
if want resume-check; then
  run_part 400 resume-check bash mk/gpu-resume-check.sh "$logdir/resume-check"
fi
# shellcheck disable=SC2206
mpi4=(mpirun -np 4 "${mpi_args[@]}")
if want tail-8b; then  # NeMo-RL's Llama-3.1-8B row: 64 prompts x 32 there, 256 x 8 here (the same 2048 rollouts)
  run_part 480 tail-8b "${mpi4[@]}" "$hone" run input/bench-grpo-llama-3.1-8b.toml run.name=llama-8b-tail-dp4 \
    grpo.num_prompts_per_step=256 data.response_length=lognormal data.response_length_mean=800 \
    data.response_length_sigma=0.8 generation.max_new_tokens=3840 generation.max_total_sequence_length=4096 \
    run.max_steps=2 "output.dir=$logdir" "checkpoint.dir=$logdir/ck"
fi
if want moe-4gpu; then  # the two-GPU ep=2 row's deck with twice the prompts on twice the GPUs
  moe30=(model.architecture=qwen3_moe model.hidden_size=2048 model.num_layers=4 model.num_attention_heads=32
         model.num_key_value_heads=4 model.head_dim=128 model.num_experts=128 model.num_experts_per_tok=8
         model.moe_intermediate_size=768 model.intermediate_size=6144 model.tie_word_embeddings=false
         grpo.num_prompts_per_step=256 generation.kv_cache_gib=20 run.max_steps=3)
  run_part 200 moe-ep4 "${mpi4[@]}" "$hone" run $qwen run.name=moe30-ep4 parallel.ep=4 "${moe30[@]}" \
    "output.dir=$logdir" "checkpoint.dir=$logdir/ck"
  run_part 200 moe-tp2-ep2 "${mpi4[@]}" "$hone" run $qwen run.name=moe30-tp2-ep2 parallel.tp=2 parallel.ep=2 \
    "${moe30[@]}" "output.dir=$logdir" "checkpoint.dir=$logdir/ck"
  run_part 200 moe-ep1 "${mpi4[@]}" "$hone" run $qwen run.name=moe30-ep1 "${moe30[@]}" "output.dir=$logdir" \
    "checkpoint.dir=$logdir/ck"
fi
if want ep-check; then
  run_part 600 ep-check bash mk/gpu-ep-check.sh "$logdir/ep-check"
fi
if want grpo-8b-tp2; then  # the Llama-3.1-8B shape at tp=2 (sequence parallel), against grpo-8b at dp=2
  run_part 420 grpo-8b-tp2 "${mpi[@]}" "$hone" run input/bench-grpo-llama-3.1-8b.toml run.name=llama-8b-tp2 \
    parallel.tp=2 "output.dir=$logdir" "checkpoint.dir=$logdir/ck"
fi
if want grpo-1gpu; then
  run_part 200 grpo-1gpu env CUDA_VISIBLE_DEVICES=0 "$hone" run $qwen run.name=qwen-1gpu-p64 "output.dir=$logdir" \
    "checkpoint.dir=$logdir/ck"
fi
if want gen-8b-half; then
  run_part 240 gen-8b-half env CUDA_VISIBLE_DEVICES=0 "$hone" bench-generation input/bench-grpo-llama-3.1-8b.toml \
    run.name=gen-llama-3.1-8b-half grpo.num_prompts_per_step=32 bench.prompt_tokens=256 bench.rounds=2 \
    "output.dir=$logdir"
fi
if want grpo-dp2; then
  run_part 200 grpo-dp2 "${mpi[@]}" "$hone" run $qwen run.name=qwen-2gpu-p128 grpo.num_prompts_per_step=128 \
    "output.dir=$logdir" "checkpoint.dir=$logdir/ck"
fi
if want grpo-dp2-zero; then
  run_part 200 grpo-dp2-zero "${mpi[@]}" "$hone" run $qwen run.name=qwen-2gpu-p128-zero grpo.num_prompts_per_step=128 \
    train.distributed_optimizer=true "output.dir=$logdir" "checkpoint.dir=$logdir/ck"
fi
if want grpo-8b; then
  run_part 540 grpo-8b "${mpi[@]}" "$hone" run input/bench-grpo-llama-3.1-8b.toml "output.dir=$logdir" \
    "checkpoint.dir=$logdir/ck"
fi
if want progress; then
  run_part 200 progress "$hone" run input/bench-grpo-qwen3-0.6b.toml run.name=progress run.max_steps=2 \
    run.progress_every_s=2 "output.dir=$logdir" "checkpoint.dir=$logdir/ck"
fi
if want bundle; then
  run_part 300 bundle bash mk/gpu-bundle-check.sh "$logdir/bundle"
fi
# The real model (SmolLM2-135M-Instruct from its GGUF, at $HONE_SMOLLM2_GGUF): the 60-step arithmetic run, the
# bf16 engine's logprobs against transformers' fp32 and bf16, and the same run in PyTorch + transformers.
gguf=${HONE_SMOLLM2_GGUF:-}
export HONE_CACHE_DIR=${HONE_CACHE_DIR:-/tmp/hone-cache}
if want smollm2; then
  run_part 400 smollm2 "$hone" run input/smollm2-arithmetic.toml "model.path=$gguf" "output.dir=$logdir" \
    "checkpoint.dir=/tmp/hone-ck"
fi
if want smollm2-fidelity; then
  python3 -c 'import json; [print(json.dumps({"tokens": c["tokens"]})) for c in json.load(open(
    "tests/data/real/smollm2_logprobs.json"))["cases"]]' >/tmp/smollm2-seqs.jsonl
  run_part 60 smollm2-fidelity "$hone" logprobs --model "$gguf" --device cuda --input /tmp/smollm2-seqs.jsonl \
    --output /tmp/smollm2-lp.h5
  run_part 120 smollm2-fidelity python3 tools/smollm2_reference.py compare --gguf "$gguf" --hone /tmp/smollm2-lp.h5
fi
if want smollm2-reference; then
  [ -f /tmp/smollm2-hf/config.json ] || "$hone" convert --model "$gguf" --output /tmp/smollm2-hf >>"$log" 2>&1
  run_part 540 smollm2-reference python3 tools/reference_grpo.py --model /tmp/smollm2-hf \
    --train input/data/arithmetic-train.jsonl --validation input/data/arithmetic-validation.jsonl --steps 60 \
    --device cuda --out "$logdir/smollm2-reference.jsonl"
fi
if want report; then
  files=$(ls "$logdir"/*.h5 2>/dev/null | grep -v "/gen-")  # hone run files only
  # shellcheck disable=SC2086
  [ -n "$files" ] && run_part 60 report python3 tools/hone-report $files --steps 2- --markdown --no-plots \
    --metric memory/peak_total --metric memory/device_peak --metric memory/peak_generation --metric memory/peak_training
fi
section done
