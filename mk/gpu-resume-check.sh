#!/usr/bin/env bash
# Checkpoints of sharded layouts saved and read back on the same layout, on two GPUs, from the bundle
# (mk/gpu-env.sh): the demo deck with run.device=cuda at parallel.tp=2, at parallel.pp=2 and as a small mixture of
# experts at parallel.ep=2. Each layout runs 12 steps straight, then again as 6 steps (checkpoint at exit) and a
# resume (run.resume=auto) to step 12, on the same two GPUs. The checkpoint holds whole tensors: the save gathers the
# shards, the resume cuts this rank's slices back out (rl/gpu_engine_state). Compared (python3 with h5py): the
# resumed steps 7-12 against the straight run's (the same weights, moments and data: step 7's gradient norm within 1e-3
# relative and its loss within 1e-4, the mean reward of steps 7-12 within 0.02).
# Needs two GPUs: on one it says so and exits 0. Prints PASS/FAIL lines; exits 1 when anything failed.
#   mk/gpu-resume-check.sh LOGDIR
set -uo pipefail
cd "$(dirname "$0")/.."
logdir=${1:?usage: mk/gpu-resume-check.sh LOGDIR}
mkdir -p "$logdir"
# shellcheck source=mk/gpu-env.sh
source mk/gpu-env.sh
hone=$bundle/bin/hone
export NCCL_NVLS_ENABLE=0
# shellcheck disable=SC2206
mpi=(mpirun -np 2 --allow-run-as-root --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -x PATH $HONE_MPIRUN_ENV)
moe=(model.architecture=qwen3_moe model.num_experts=8 model.num_experts_per_tok=2 model.moe_intermediate_size=64
     loss.moe_aux_loss_coef=0.01)

gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
echo "INFO: $gpus GPU(s)"
if [ "$gpus" -lt 2 ]; then
  echo "SKIP: gpu-resume-check needs two GPUs"
  exit 0
fi
fail=0
hone_run() {  # dir name steps overrides...
  local dir=$1 name=$2 steps=$3
  shift 3
  mkdir -p "$dir"
  timeout 120 "${mpi[@]}" "$hone" run input/demo.toml run.device=cuda "run.name=$name" "run.max_steps=$steps" \
    "output.dir=$dir" "checkpoint.dir=$dir/ck" "$@" >>"$dir/log.txt" 2>&1
}
for layout in tp pp ep; do
  case $layout in
    tp) over=(parallel.tp=2) ;;
    pp) over=(parallel.pp=2 model.num_layers=2) ;;  # the demo model has one layer
    ep) over=(parallel.ep=2 "${moe[@]}") ;;
  esac
  d=$logdir/$layout
  hone_run "$d/straight" "$layout" 12 "${over[@]}" || { fail=1; echo "FAIL: $layout straight run"; tail -n 15 "$d/straight/log.txt"; }
  hone_run "$d/split" "$layout" 6 "${over[@]}" || { fail=1; echo "FAIL: $layout first 6 steps"; tail -n 15 "$d/split/log.txt"; }
  hone_run "$d/split" "$layout" 12 run.resume=auto "${over[@]}" || { fail=1; echo "FAIL: $layout resume"; tail -n 15 "$d/split/log.txt"; }
  grep -q "resuming from" "$d/split/log.txt" || { fail=1; echo "FAIL: $layout: no 'resuming from' line"; }
done

python3 - "$logdir" <<'PY' || fail=1
import sys, h5py, numpy as np
d = sys.argv[1]
ok = True
def report(good, what):
    global ok
    ok &= bool(good)
    print(("PASS: " if good else "FAIL: ") + what)
for layout in ("tp", "pp", "ep"):
    try:
        a = h5py.File(f"{d}/{layout}/straight/{layout}.h5", "r")["steps"]
        b = h5py.File(f"{d}/{layout}/split/{layout}.h5", "r")["steps"]
    except OSError as e:
        report(False, f"{layout}: {e}")
        continue
    sa, sb = list(a["step"][:]), list(b["step"][:])
    report(sb == list(range(1, 13)), f"{layout}: the resumed file holds steps {sb[0] if sb else '-'}-{sb[-1] if sb else '-'}")
    if sa != list(range(1, 13)) or sb != sa:
        continue
    x, y = float(a["grad_norm"][6]), float(b["grad_norm"][6])
    rel = abs(x - y) / max(abs(x), 1e-30)
    report(rel < 1e-3, f"{layout}: step 7 gradient norm straight {x:.6g}, resumed {y:.6g} (rel {rel:.2e})")
    x, y = float(a["loss"][6]), float(b["loss"][6])  # near 0 (advantages sum to 0 per group): compared absolutely
    report(abs(x - y) < 1e-4, f"{layout}: step 7 loss straight {x:.6g}, resumed {y:.6g}")
    x, y = float(np.mean(a["reward/mean"][6:])), float(np.mean(b["reward/mean"][6:]))
    report(abs(x - y) < 0.02, f"{layout}: mean reward of steps 7-12 straight {x:.4f}, resumed {y:.4f}")
sys.exit(0 if ok else 1)
PY
[ $fail -eq 0 ] && echo "PASS: gpu-resume-check" || echo "FAIL: gpu-resume-check"
exit $fail
