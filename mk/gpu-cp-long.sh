#!/usr/bin/env bash
# Long sequences on one GPU, from the bundle (mk/gpu-env.sh): `hone bench` at the Qwen3-1.7B shape with one
# sequence per micro-batch of 4k, 16k and 32k tokens (64k tokens per step: 16, 4 and 2 sequences), with each
# train.recompute choice, profiled; then one table of training and logprob tokens/s, the device memory in use and
# the attention's TFLOP/s (inside the model, and alone through cuDNN) for doc/performance.md. A run that does not fit
# the GPU ends with the allocation's message, which the table shows as "does not fit".
#   mk/gpu-cp-long.sh LOGDIR
set -uo pipefail
cd "$(dirname "$0")/.."
logdir=${1:?usage: mk/gpu-cp-long.sh LOGDIR}
mkdir -p "$logdir"
# shellcheck source=mk/gpu-env.sh
source mk/gpu-env.sh
hone=$bundle/bin/hone
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader | head -n 1 | sed 's/^/GPU: /'
for len in 4096 16384 32768; do
  seqs=$((65536 / len))
  for r in none selective full; do
    name=L$len-$r
    mkdir -p "$logdir/$name"
    timeout 300 "$hone" bench input/bench-long-qwen3-1.7b.toml --seq-len "$len" --micro-batch-tokens "$len" \
      --sequences "$seqs" --recompute "$r" --output-dir "$logdir/$name" >"$logdir/$name/log.txt" 2>&1
    echo "bench $name: exit $?"
  done
done

# The table: tokens/s (training, logprob), device memory in use after the training step, attention TFLOP/s.
echo
echo "| tokens | recompute | training tokens/s | logprob tokens/s | device used, training (GiB) | attention fwd/bwd in the model (TFLOP/s) | attention fwd/bwd alone, cuDNN (TFLOP/s) |"
echo "| --- | --- | --- | --- | --- | --- | --- |"
for len in 4096 16384 32768; do
  for r in none selective full; do
    f=$logdir/L$len-$r/log.txt
    tr=$(awk '$1 == "training" && NF >= 6 {print $3 " | " $6; exit}' "$f")
    lp=$(awk '$1 == "logprob" && NF >= 6 {print $3; exit}' "$f")
    model=$(sed -n 's/.*attention in the model: forward \([0-9.]*\) TFLOP\/s, backward \([0-9.]*\).*/\1 \/ \2/p' "$f")
    alone=$(sed -n 's/.*attention alone.*= \([0-9.]*\) TFLOP\/s, backward .*= \([0-9.]*\) TFLOP\/s/\1 \/ \2/p' "$f")
    if [ -z "$tr" ]; then
      echo "| $len | $r | does not fit ($(grep -m1 -o 'device allocation of [0-9]* bytes' "$f" | head -c 80)) | | | | |"
    else
      echo "| $len | $r | ${tr% | *} | $lp | ${tr#* | } | $model | $alone |"
    fi
  done
done
