#!/usr/bin/env bash
# Data parallelism of `hone run` on two GPUs, from the bundle (mk/gpu-env.sh): the demo deck with run.device=cuda
# on one GPU and on two (plain all-reduce; the distributed optimizer; bf16 reduction), every rollout of every step
# stored as a sample, then compared (python3 with h5py):
#   * step 1 (same weights everywhere): the share of rollouts identical between one and two GPUs (bf16 kernels see
#     other batch shapes, so near-ties may sample another token) and between the two optimizers (exactly equal);
#   * the distributed optimizer against the plain one over the run (loss, grad norm: the same sums);
#   * every run learns (the reward of the last steps);
#   * a distributed-optimizer checkpoint of two GPUs resumes on one.
# On a machine of one GPU only the one-GPU run and the resume of its own checkpoint run (and the checks of them).
# Prints PASS/FAIL lines; exits 1 when anything failed.
#   mk/gpu-dp-check.sh LOGDIR
set -uo pipefail
cd "$(dirname "$0")/.."
logdir=${1:?usage: mk/gpu-dp-check.sh LOGDIR}
mkdir -p "$logdir"
# shellcheck source=mk/gpu-env.sh
source mk/gpu-env.sh
hone=$bundle/bin/hone
# shellcheck disable=SC2206
mpi=(mpirun -np 2 --allow-run-as-root --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -x PATH $HONE_MPIRUN_ENV)
steps=40
common=(run.device=cuda "run.max_steps=$steps" output.sample_every=1 output.num_samples=256)

run() {  # name launcher-words... -- overrides...
  local name=$1; shift
  local launcher=()
  while [ "$1" != "--" ]; do launcher+=("$1"); shift; done
  shift
  local dir=$logdir/$name
  mkdir -p "$dir"
  timeout 120 "${launcher[@]}" "$hone" run input/demo.toml "${common[@]}" "run.name=$name" "output.dir=$dir" \
    "checkpoint.dir=$dir/ck" "$@" >"$dir/log.txt" 2>&1
  local rc=$?
  echo "run $name: exit $rc ($(grep -c '^ *[0-9]' "$dir/log.txt") step lines)"
  [ $rc -eq 0 ] || tail -n 20 "$dir/log.txt"
  return $rc
}

gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
echo "INFO: $gpus GPU(s)"
fail=0
run one env CUDA_VISIBLE_DEVICES=0 -- || fail=1
source_run=one
if [ "$gpus" -ge 2 ]; then
  run two "${mpi[@]}" -- || fail=1
  run zero "${mpi[@]}" -- train.distributed_optimizer=true || fail=1
  run bf16 "${mpi[@]}" -- train.grad_reduce_in_fp32=false || fail=1
  source_run=zero
fi
# Resume the last checkpoint (with two GPUs: the distributed run's, sharded over both) on one GPU, 5 more steps.
cp -r "$logdir/$source_run" "$logdir/resumed"
timeout 120 env CUDA_VISIBLE_DEVICES=0 "$hone" run input/demo.toml "${common[@]}" "run.name=$source_run" \
  "output.dir=$logdir/resumed" "checkpoint.dir=$logdir/resumed/ck" run.resume=auto "run.max_steps=$((steps + 5))" \
  >"$logdir/resumed/log.txt" 2>&1
rc=$?
echo "run resumed ($source_run's checkpoint on one GPU): exit $rc"
[ $rc -eq 0 ] && grep -q "resuming from" "$logdir/resumed/log.txt" || { fail=1; tail -n 20 "$logdir/resumed/log.txt"; }

python3 - "$logdir" "$steps" "$source_run" <<'EOF' || fail=1
import sys, h5py, numpy as np
d, steps, source_run = sys.argv[1], int(sys.argv[2]), sys.argv[3]
ok = True
def report(good, what):
    global ok
    ok &= bool(good)
    print(("PASS: " if good else "FAIL: ") + what)
def load(name, run=None):
    f = h5py.File(f"{d}/{name}/{run or name}.h5", "r")
    s = {k: f["steps"][k][:] for k in ("reward/mean", "loss", "grad_norm", "step")}
    smp = f["samples"]
    s["samples"] = list(zip(smp["step"][:], [x.decode() if isinstance(x, bytes) else x for x in smp["completion"][:]],
                            [x.decode() if isinstance(x, bytes) else x for x in smp["prompt"][:]]))
    return s
names = ("one", "two", "zero", "bf16") if source_run == "zero" else ("one",)
runs = {n: load(n) for n in names}
def same_share(a, b, step):
    x = [s for s in runs[a]["samples"] if s[0] == step]
    y = [s for s in runs[b]["samples"] if s[0] == step]
    if len(x) != len(y) or not x:
        return 0.0, len(x), len(y)
    return sum(p == q for p, q in zip(x, y)) / len(x), len(x), len(y)
if len(runs) > 1:
    share, n1, n2 = same_share("one", "two", 1)
    report(n1 == 256 and n2 == 256 and share >= 0.9,
           f"step 1: {share:.3f} of {n1} rollouts identical on one GPU and two (each rank generates its own half)")
    share, n1, n2 = same_share("two", "zero", 1)
    report(share == 1.0, f"step 1: plain and distributed optimizer runs: {share:.3f} of {n1} rollouts identical")
    later = [same_share("two", "zero", s)[0] for s in range(2, steps + 1)]
    print(f"INFO: steps 2-{steps}: plain vs distributed optimizer rollouts identical: min {min(later):.3f}, mean {np.mean(later):.3f}")
    g2, gz = runs["two"]["grad_norm"], runs["zero"]["grad_norm"]
    rel = abs(g2[0] - gz[0]) / max(abs(g2[0]), 1e-30)
    report(rel < 1e-5, f"step 1 gradient norm, plain vs distributed optimizer: {g2[0]:.6g} vs {gz[0]:.6g} (rel {rel:.2e})")
    l2, lz = runs["two"]["loss"], runs["zero"]["loss"]
    report(abs(l2[0] - lz[0]) <= 1e-6 * (1 + abs(l2[0])), f"step 1 loss, plain vs distributed: {l2[0]:.8g} vs {lz[0]:.8g}")
for n, r in runs.items():
    rw = r["reward/mean"]
    first, last = float(np.mean(rw[:3])), float(np.mean(rw[-5:]))
    report(last > first + 0.2, f"{n}: reward {first:.3f} (steps 1-3) -> {last:.3f} (last 5 steps)")
res = load("resumed", source_run)
report(list(res["step"]) == list(range(1, steps + 6)), f"{source_run} resumed on one GPU: steps 1-{steps + 5} in the file")
report(res["reward/mean"][-5:].mean() > runs["one"]["reward/mean"][:3].mean() + 0.2,
       f"{source_run} resumed: reward {res['reward/mean'][-5:].mean():.3f} in its last 5 steps")
sys.exit(0 if ok else 1)
EOF
[ $fail -eq 0 ] && echo "PASS: gpu-dp-check" || echo "FAIL: gpu-dp-check"
exit $fail
