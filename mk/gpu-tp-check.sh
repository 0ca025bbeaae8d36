#!/usr/bin/env bash
# Tensor parallelism of `hone run` on two GPUs, from the bundle (mk/gpu-env.sh), in one call (about 7 minutes):
#
# 1. Correctness, the demo deck with run.device=cuda (40 steps, every rollout of every step stored as a sample): one
#    GPU; parallel.tp=2 over whole token rows; with sequence parallelism (parallel.sequence_parallel, the default);
#    with it and its collectives overlapped with the GEMMs (parallel.tp_comm_overlap); sequence parallel without
#    the decode steps' CUDA graphs (capturing NCCL). Compared (python3 with h5py):
#    * step 1 (same weights): the share of rollouts identical at tp=1 and tp=2 (bf16 partial sums reduced over the
#      pair round differently: near-ties may sample another token); the tp=2 runs against each other (generation
#      keeps whole rows whatever sequence parallelism says: identical), and with graphs on and off;
#    * step 1 loss and gradient norm of every tp=2 run against tp=1 (the same sums in another order);
#    * every run learns: one GPU gains reward, each tp=2 run at least half of one GPU's gain;
#    * the sequence-parallel run's tp=2 checkpoint (whole tensors) resumes on one GPU.
# 2. Speed, the Qwen3-0.6B step deck (input/bench-grpo-qwen3-0.6b.toml, 4 steps) at tp=2: whole rows, sequence
#    parallel, sequence parallel overlapped: the per-phase step times (mean of steps 2-4) and the peak memory of
#    each, printed as TIME lines and a table for doc/performance.md.
# Needs two GPUs: on one it says so and exits 0 (nothing to compare). Prints PASS/FAIL lines; exits 1 when anything
# failed.
#   mk/gpu-tp-check.sh LOGDIR
set -uo pipefail
cd "$(dirname "$0")/.."
logdir=${1:?usage: mk/gpu-tp-check.sh LOGDIR}
mkdir -p "$logdir"
# shellcheck source=mk/gpu-env.sh
source mk/gpu-env.sh
hone=$bundle/bin/hone
export NCCL_NVLS_ENABLE=0
# shellcheck disable=SC2206
mpi=(mpirun -np 2 --allow-run-as-root --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -x PATH $HONE_MPIRUN_ENV)
steps=40
common=(run.device=cuda "run.max_steps=$steps" output.sample_every=1 output.num_samples=256)

run() {  # name limit deck launcher-words... -- overrides...
  local name=$1 limit=$2 deck=$3
  shift 3
  local launcher=()
  while [ "$1" != "--" ]; do launcher+=("$1"); shift; done
  shift
  local dir=$logdir/$name
  mkdir -p "$dir"
  local t0=$SECONDS
  timeout "$limit" "${launcher[@]}" "$hone" run "$deck" "run.name=$name" "output.dir=$dir" "checkpoint.dir=$dir/ck" \
    "$@" >"$dir/log.txt" 2>&1
  local rc=$?
  echo "run $name: exit $rc ($(grep -c '^ *[0-9]' "$dir/log.txt") step lines, $((SECONDS - t0)) s)"
  [ $rc -eq 0 ] || tail -n 20 "$dir/log.txt"
  return $rc
}

gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
echo "INFO: $gpus GPU(s)"
if [ "$gpus" -lt 2 ]; then
  echo "SKIP: gpu-tp-check needs two GPUs"
  exit 0
fi
fail=0
demo=input/demo.toml
run one 120 $demo env CUDA_VISIBLE_DEVICES=0 -- "${common[@]}" || fail=1
run tp2 120 $demo "${mpi[@]}" -- "${common[@]}" parallel.tp=2 parallel.sequence_parallel=false || fail=1
run tp2-sp 120 $demo "${mpi[@]}" -- "${common[@]}" parallel.tp=2 || fail=1
run tp2-sp-overlap 120 $demo "${mpi[@]}" -- "${common[@]}" parallel.tp=2 parallel.tp_comm_overlap=true || fail=1
run tp2-sp-eager 120 $demo "${mpi[@]}" -- "${common[@]}" parallel.tp=2 generation.cuda_graphs=false || fail=1
cp -r "$logdir/tp2-sp" "$logdir/resumed"
timeout 120 env CUDA_VISIBLE_DEVICES=0 "$hone" run $demo "${common[@]}" run.name=tp2-sp \
  "output.dir=$logdir/resumed" "checkpoint.dir=$logdir/resumed/ck" run.resume=auto "run.max_steps=$((steps + 5))" \
  >"$logdir/resumed/log.txt" 2>&1
rc=$?
echo "run resumed (tp2-sp's checkpoint on one GPU): exit $rc"
[ $rc -eq 0 ] && grep -q "resuming from" "$logdir/resumed/log.txt" || { fail=1; tail -n 20 "$logdir/resumed/log.txt"; }
grep -h "tensor parallel\|step  *1 " "$logdir"/tp2-sp-overlap/log.txt | head -n 5

# The Qwen3-0.6B step at tp=2, three ways (random weights: no checkpoint needed).
bench=input/bench-grpo-qwen3-0.6b.toml
for how in whole sp sp-overlap; do
  case $how in
    whole) keys=(parallel.sequence_parallel=false) ;;
    sp) keys=() ;;
    sp-overlap) keys=(parallel.tp_comm_overlap=true) ;;
  esac
  run "qwen-tp2-$how" 170 $bench "${mpi[@]}" -- parallel.tp=2 ${keys[@]+"${keys[@]}"} || fail=1
done

python3 - "$logdir" "$steps" <<'EOF' || fail=1
import os, sys, h5py, numpy as np
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
    s = {k: f["steps"][k][:] for k in ("reward/mean", "loss", "grad_norm", "step")}
    smp = f["samples"]
    s["samples"] = list(zip(smp["step"][:], [text(x) for x in smp["completion"][:]], [text(x) for x in smp["prompt"][:]]))
    return s
names = ("one", "tp2", "tp2-sp", "tp2-sp-overlap", "tp2-sp-eager")
runs = {n: load(n) for n in names if os.path.exists(f"{d}/{n}/{n}.h5")}
report(len(runs) == len(names), f"runs with an output file: {', '.join(runs)}")
def same_share(a, b, step):
    if a not in runs or b not in runs:
        return 0.0, 0
    x = [s for s in runs[a]["samples"] if s[0] == step]
    y = [s for s in runs[b]["samples"] if s[0] == step]
    if len(x) != len(y) or not x:
        return 0.0, len(x)
    return sum(p == q for p, q in zip(x, y)) / len(x), len(x)
share, n = same_share("one", "tp2", 1)
report(n == 256 and share >= 0.9, f"step 1: {share:.3f} of {n} rollouts identical at tp=1 and tp=2")
# Generation runs on whole rows whatever parallel.sequence_parallel says: the same weights give the same rollouts.
for other in ("tp2-sp", "tp2-sp-overlap"):
    share, n = same_share("tp2", other, 1)
    report(n == 256 and share == 1.0, f"step 1: {share:.3f} of {n} rollouts identical at tp=2 and {other}")
share, n = same_share("tp2-sp", "tp2-sp-eager", 1)
report(share >= 0.9, f"step 1 at tp=2: {share:.3f} of {n} rollouts identical with CUDA graphs and without")
for other in ("tp2", "tp2-sp", "tp2-sp-overlap"):
    if other not in runs or "one" not in runs:
        continue
    for key in ("loss", "grad_norm"):
        a, b = runs["one"][key][0], runs[other][key][0]
        rel = abs(a - b) / max(abs(a), 1e-30)
        report(rel < 2e-2, f"step 1 {key}: tp=1 {a:.6g}, {other} {b:.6g} (rel {rel:.2e})")
# Learning: one GPU gains reward, each tp=2 run at least half of that gain in the 40 steps (after step 1 the bf16
# sums run in another order and the runs sample differently, so the curves differ by the demo's noise: over 80
# steps tp=2 reached 0.918 against one GPU's 0.949).
def gain(n):
    rw = runs[n]["reward/mean"]
    return float(np.mean(rw[:3])), float(np.mean(rw[-5:]))
for n in runs:
    first, last = gain(n)
    if n == "one":
        report(last > first + 0.2, f"{n}: reward {first:.3f} (steps 1-3) -> {last:.3f} (last 5 steps)")
    elif "one" in runs:
        f0, l0 = gain("one")
        report(last - first >= 0.5 * (l0 - f0) and last > first + 0.05,
               f"{n}: reward {first:.3f} (steps 1-3) -> {last:.3f} (last 5 steps); one GPU: {f0:.3f} -> {l0:.3f}")
if os.path.exists(f"{d}/resumed/tp2-sp.h5"):
    res = load("resumed", "tp2-sp")
    report(list(res["step"]) == list(range(1, steps + 6)),
           f"tp2-sp resumed on one GPU: steps 1-{steps + 5} in the file")
else:
    report(False, "tp2-sp resumed on one GPU: no output file")

# Per-phase step times of the Qwen3-0.6B step at tp=2 (mean of steps 2-4: step 1 warms up).
phases = ("generation", "logprob", "training", "refit", "total")
rows = []
for how in ("whole", "sp", "sp-overlap"):
    name = f"qwen-tp2-{how}"
    path = f"{d}/{name}/{name}.h5"
    if not os.path.exists(path):
        report(False, f"{name}: no output file")
        continue
    f = h5py.File(path, "r")["steps"]
    t = {p: float(np.mean(f["time"][p][1:])) for p in phases if p in f["time"]}
    has_peak = "memory" in f and "peak_training" in f["memory"]
    peak = float(np.max(f["memory"]["peak_training"][1:])) / 2**30 if has_peak else float("nan")
    print(f"TIME: {name}: " + ", ".join(f"{p} {t.get(p, float('nan')):.3f} s" for p in phases) +
          f", peak training memory {peak:.1f} GiB (steps 2-{len(f['step'])})")
    rows.append((how, t, peak))
if rows:
    print("| tp=2, Qwen3-0.6B step | " + " | ".join(phases) + " (s) | peak training (GiB) |")
    print("|---" * (len(phases) + 2) + "|")
    for how, t, peak in rows:
        print(f"| {how} | " + " | ".join(f"{t.get(p, float('nan')):.3f}" for p in phases) + f" | {peak:.1f} |")
    base = dict((h, t) for h, t, _ in rows)
    if "sp" in base and "sp-overlap" in base:
        a, b = base["sp"]["training"], base["sp-overlap"]["training"]
        print(f"INFO: the overlap changes the training phase by {100 * (b - a) / a:+.1f} % ({a:.3f} -> {b:.3f} s)")
sys.exit(0 if ok else 1)
EOF
[ $fail -eq 0 ] && echo "PASS: gpu-tp-check" || echo "FAIL: gpu-tp-check"
exit $fail
