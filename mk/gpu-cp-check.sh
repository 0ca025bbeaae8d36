#!/usr/bin/env bash
# Context parallelism of `hone run` on two GPUs, from the bundle (mk/gpu-env.sh): the demo deck with run.device=cuda
# on one GPU and at parallel.cp=2 on two (every sequence split in four chunks, ring attention over NCCL with its
# transfers overlapped), and the same with longer sequences (the reverse task on 30 to 60 digits: completions of up
# to 64 tokens), every rollout of every step stored as a sample, then compared (python3 with h5py):
#   * step 1 (same weights): the rollouts are identical (generation does not depend on cp: both ranks of the cp
#     group generate the same rollouts as one GPU);
#   * step 1 loss and gradient norm at cp=2 against one GPU (the same sums in bf16, in another order);
#   * the demo runs learn (the reward of the last steps);
#   * the cp=2 checkpoint (whole tensors) resumes on one GPU.
# Needs two GPUs: on one it says so and exits 0. Prints PASS/FAIL lines; exits 1 when anything failed.
#   mk/gpu-cp-check.sh LOGDIR
set -uo pipefail
cd "$(dirname "$0")/.."
logdir=${1:?usage: mk/gpu-cp-check.sh LOGDIR}
mkdir -p "$logdir"
# shellcheck source=mk/gpu-env.sh
source mk/gpu-env.sh
hone=$bundle/bin/hone
export NCCL_NVLS_ENABLE=0
mpi=(mpirun -np 2 --allow-run-as-root --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -x OPAL_PREFIX -x PATH)
steps=40
common=(run.device=cuda output.sample_every=1 output.num_samples=256)
long=(data.min_length=30 data.max_length=60 generation.max_new_tokens=64 generation.max_total_sequence_length=256
  "run.max_steps=5")

run() {  # name launcher-words... -- overrides...
  local name=$1; shift
  local launcher=()
  while [ "$1" != "--" ]; do launcher+=("$1"); shift; done
  shift
  local dir=$logdir/$name
  mkdir -p "$dir"
  timeout 180 "${launcher[@]}" "$hone" run input/demo.toml "${common[@]}" "run.name=$name" "output.dir=$dir" \
    "checkpoint.dir=$dir/ck" "$@" >"$dir/log.txt" 2>&1
  local rc=$?
  echo "run $name: exit $rc ($(grep -c '^ *[0-9]' "$dir/log.txt") step lines)"
  [ $rc -eq 0 ] || tail -n 20 "$dir/log.txt"
  return $rc
}

gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
echo "INFO: $gpus GPU(s)"
if [ "$gpus" -lt 2 ]; then
  echo "SKIP: gpu-cp-check needs two GPUs"
  exit 0
fi
fail=0
run one env CUDA_VISIBLE_DEVICES=0 -- "run.max_steps=$steps" || fail=1
run cp2 "${mpi[@]}" -- "run.max_steps=$steps" parallel.cp=2 || fail=1
run long-one env CUDA_VISIBLE_DEVICES=0 -- "${long[@]}" || fail=1
run long-cp2 "${mpi[@]}" -- "${long[@]}" parallel.cp=2 || fail=1
cp -r "$logdir/cp2" "$logdir/resumed"
timeout 180 env CUDA_VISIBLE_DEVICES=0 "$hone" run input/demo.toml "${common[@]}" run.name=cp2 \
  "output.dir=$logdir/resumed" "checkpoint.dir=$logdir/resumed/ck" run.resume=auto "run.max_steps=$((steps + 5))" \
  >"$logdir/resumed/log.txt" 2>&1
rc=$?
echo "run resumed (cp2's checkpoint on one GPU): exit $rc"
[ $rc -eq 0 ] && grep -q "resuming from" "$logdir/resumed/log.txt" || { fail=1; tail -n 20 "$logdir/resumed/log.txt"; }
grep -h "context parallel\|step  *1 " "$logdir"/cp2/log.txt "$logdir"/long-cp2/log.txt | head -n 6

python3 - "$logdir" "$steps" <<'PY' || fail=1
import sys, h5py, numpy as np
d, steps = sys.argv[1], int(sys.argv[2])
ok = True
def report(good, what):
    global ok
    ok &= bool(good)
    print(("PASS: " if good else "FAIL: ") + what)
def text(x):
    return x.decode() if isinstance(x, bytes) else x
def load(name, run=None):
    f = h5py.File(f"{d}/{name}/{run or name}.h5", "r")
    s = {k: f["steps"][k][:] for k in ("reward/mean", "loss", "grad_norm", "step", "time/training", "time/logprob")
         if k in f["steps"]}
    smp = f["samples"]
    s["samples"] = list(zip(smp["step"][:], [text(x) for x in smp["completion"][:]], [text(x) for x in smp["prompt"][:]]))
    return s
runs = {n: load(n) for n in ("one", "cp2", "long-one", "long-cp2")}
for a, b in (("one", "cp2"), ("long-one", "long-cp2")):
    x = [s for s in runs[a]["samples"] if s[0] == 1]
    y = [s for s in runs[b]["samples"] if s[0] == 1]
    share = sum(p == q for p, q in zip(x, y)) / max(len(x), 1)
    report(len(x) == len(y) == 256 and share == 1.0, f"{b} step 1: {share:.3f} of {len(x)} rollouts identical to one GPU")
    for key in ("loss", "grad_norm"):
        u, v = runs[a][key][0], runs[b][key][0]
        rel = abs(u - v) / max(abs(u), 1e-30)
        report(rel < 2e-2, f"{b} step 1 {key}: one GPU {u:.6g}, cp=2 {v:.6g} (rel {rel:.2e})")
    for key in ("time/training", "time/logprob"):
        if key in runs[a] and key in runs[b]:
            print(f"INFO: {b} {key} of steps 2-: one GPU {np.mean(runs[a][key][1:]):.3f} s, cp=2 {np.mean(runs[b][key][1:]):.3f} s")
for n in ("one", "cp2"):
    rw = runs[n]["reward/mean"]
    first, last = float(np.mean(rw[:3])), float(np.mean(rw[-5:]))
    report(last > first + 0.2, f"{n}: reward {first:.3f} (steps 1-3) -> {last:.3f} (last 5 steps)")
res = load("resumed", "cp2")
report(list(res["step"]) == list(range(1, steps + 6)), f"cp2 resumed on one GPU: steps 1-{steps + 5} in the file")
sys.exit(0 if ok else 1)
PY
[ $fail -eq 0 ] && echo "PASS: gpu-cp-check" || echo "FAIL: gpu-cp-check"
exit $fail
