#!/usr/bin/env bash
# Expert parallelism of `hone run` on two GPUs, from the bundle (mk/gpu-env.sh): the demo deck turned into a small
# mixture of experts (qwen3_moe: 8 experts of width 64, 2 per token, the load-balancing loss on) with
# run.device=cuda, on two GPUs at parallel.ep=2 against two GPUs at parallel.ep=1 (the same data-parallel split: the
# same micro-batches on each rank) and against one GPU, every rollout of every step stored, then compared (python3
# with h5py):
#   * step 1 (same weights): the share of rollouts identical at ep=2 and ep=1 (generation keeps every expert on
#     every GPU: the same kernels on the same rows), and at ep=2 and one GPU;
#   * step 1 loss, gradient norm, load-balancing loss and load imbalance at ep=2 against ep=1 (the same sums, the
#     experts' rows computed on another GPU);
#   * every run learns (the reward of the last steps), and routes (moe/routing_mismatch: generation's experts
#     against training's, bf16 in both);
#   * the ep=2 checkpoint (whole tensors) resumes on one GPU;
#   * generation with the experts split (generation.experts=parallel: each GPU decodes on its own experts, the two
#     GPUs' passes in lockstep, rows exchanged at every sparse layer): step 1's rollouts against ep=2 with every
#     expert replicated (the same routing; the experts' GEMMs see other row counts, so bf16 near-ties may differ),
#     the run learns, and its generation time beside the replicated run's.
# Needs two GPUs: on one it says so and exits 0. Prints PASS/FAIL lines; exits 1 when anything failed.
#   mk/gpu-ep-check.sh LOGDIR
set -uo pipefail
cd "$(dirname "$0")/.."
logdir=${1:?usage: mk/gpu-ep-check.sh LOGDIR}
mkdir -p "$logdir"
# shellcheck source=mk/gpu-env.sh
source mk/gpu-env.sh
hone=$bundle/bin/hone
export NCCL_NVLS_ENABLE=0
mpi=(mpirun -np 2 --allow-run-as-root --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -x OPAL_PREFIX -x PATH)
steps=40
common=(run.device=cuda "run.max_steps=$steps" output.sample_every=1 output.num_samples=256
        model.architecture=qwen3_moe model.num_experts=8 model.num_experts_per_tok=2 model.moe_intermediate_size=64
        loss.moe_aux_loss_coef=0.01)

run() {  # name launcher-words... -- overrides...
  local name=$1; shift
  local launcher=()
  while [ "$1" != "--" ]; do launcher+=("$1"); shift; done
  shift
  local dir=$logdir/$name
  mkdir -p "$dir"
  timeout 240 "${launcher[@]}" "$hone" run input/demo.toml "${common[@]}" "run.name=$name" "output.dir=$dir" \
    "checkpoint.dir=$dir/ck" "$@" >"$dir/log.txt" 2>&1
  local rc=$?
  echo "run $name: exit $rc ($(grep -c '^ *[0-9]' "$dir/log.txt") step lines)"
  [ $rc -eq 0 ] || tail -n 20 "$dir/log.txt"
  return $rc
}

gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
echo "INFO: $gpus GPU(s)"
if [ "$gpus" -lt 2 ]; then
  echo "SKIP: gpu-ep-check needs two GPUs"
  exit 0
fi
fail=0
run one env CUDA_VISIBLE_DEVICES=0 -- || fail=1
run ep1 "${mpi[@]}" -- || fail=1
run ep2 "${mpi[@]}" -- parallel.ep=2 generation.experts=replicated || fail=1
run ep2split "${mpi[@]}" -- parallel.ep=2 generation.experts=parallel || fail=1
cp -r "$logdir/ep2" "$logdir/resumed"
timeout 180 env CUDA_VISIBLE_DEVICES=0 "$hone" run input/demo.toml "${common[@]}" run.name=ep2 \
  "output.dir=$logdir/resumed" "checkpoint.dir=$logdir/resumed/ck" run.resume=auto "run.max_steps=$((steps + 5))" \
  >"$logdir/resumed/log.txt" 2>&1
rc=$?
echo "run resumed (ep2's checkpoint on one GPU): exit $rc"
[ $rc -eq 0 ] && grep -q "resuming from" "$logdir/resumed/log.txt" || { fail=1; tail -n 20 "$logdir/resumed/log.txt"; }
grep -h "expert parallel\|step  *1 " "$logdir"/ep2/log.txt | head -n 5

python3 - "$logdir" "$steps" <<'PY' || fail=1
import sys, h5py, numpy as np
d, steps = sys.argv[1], int(sys.argv[2])
ok = True
keys = ("reward/mean", "loss", "grad_norm", "step", "moe/aux_loss", "moe/load_imbalance/max", "moe/routing_mismatch")
def report(good, what):
    global ok
    ok &= bool(good)
    print(("PASS: " if good else "FAIL: ") + what)
def text(x):
    return x.decode() if isinstance(x, bytes) else x
def load(name, run=None):
    f = h5py.File(f"{d}/{name}/{run or name}.h5", "r")
    s = {k: f["steps"][k][:] for k in keys if k in f["steps"]}
    smp = f["samples"]
    s["samples"] = list(zip(smp["step"][:], [text(x) for x in smp["completion"][:]], [text(x) for x in smp["prompt"][:]]))
    return s
runs = {n: load(n) for n in ("one", "ep1", "ep2", "ep2split")}
def same_share(a, b, step):
    x = [s for s in runs[a]["samples"] if s[0] == step]
    y = [s for s in runs[b]["samples"] if s[0] == step]
    if len(x) != len(y) or not x:
        return 0.0, len(x)
    return sum(p == q for p, q in zip(x, y)) / len(x), len(x)
share, n = same_share("ep1", "ep2", 1)
report(n == 256 and share >= 0.99, f"step 1: {share:.3f} of {n} rollouts identical at ep=1 and ep=2 on two GPUs")
share, n = same_share("one", "ep2", 1)
report(share >= 0.9, f"step 1: {share:.3f} of {n} rollouts identical on one GPU and at ep=2")
share, n = same_share("ep2", "ep2split", 1)
report(n == 256 and share >= 0.9, f"step 1: {share:.3f} of {n} rollouts identical at ep=2 with the experts replicated and split in generation")
gen = {}
for name in ("ep2", "ep2split"):
    f = h5py.File(f"{d}/{name}/{name}.h5", "r")
    gen[name] = float(np.mean(f["steps"]["time"]["generation"][1:]))
print(f"INFO: generation seconds per step (mean of steps 2-{steps}): replicated {gen['ep2']:.4f}, split {gen['ep2split']:.4f}")
for key in ("loss", "grad_norm", "moe/aux_loss", "moe/load_imbalance/max"):
    a, b = runs["ep1"][key][0], runs["ep2"][key][0]
    rel = abs(a - b) / max(abs(a), 1e-30)
    report(rel < 2e-2, f"step 1 {key}: ep=1 {a:.6g}, ep=2 {b:.6g} (rel {rel:.2e})")
for n, r in runs.items():
    rw = r["reward/mean"]
    first, last = float(np.mean(rw[:3])), float(np.mean(rw[-5:]))
    report(last > first + 0.2, f"{n}: reward {first:.3f} (steps 1-3) -> {last:.3f} (last 5 steps)")
    mm = r.get("moe/routing_mismatch")
    report(mm is not None and float(np.nanmax(mm)) < 0.05,
           f"{n}: routing mismatch generation vs training, largest of the steps {float(np.nanmax(mm)) if mm is not None else float('nan'):.4f}")
res = load("resumed", "ep2")
report(list(res["step"]) == list(range(1, steps + 6)), f"ep2 resumed on one GPU: steps 1-{steps + 5} in the file")
sys.exit(0 if ok else 1)
PY
[ $fail -eq 0 ] && echo "PASS: gpu-ep-check" || echo "FAIL: gpu-ep-check"
exit $fail
