#!/usr/bin/env bash
# Where a decode step's device time goes: Nsight Compute times every kernel of two decode steps of the generation
# benchmark (bench.profile_pass opens the window in the last round; clocks and caches left as they are, so L2 reuse
# between kernels counts as in a real step) and sums them by kernel. Kernel time only: the gaps between launches
# are the difference to the benchmark's own step time.
#   mk/gpu-decode-profile.sh LOGDIR DECK [PASS]   (PASS: the batched pass after which the window opens; default 300)
set -uo pipefail
cd "$(dirname "$0")/.."
logdir=${1:?usage: mk/gpu-decode-profile.sh LOGDIR DECK [PASS]}
deck=${2:?usage: mk/gpu-decode-profile.sh LOGDIR DECK [PASS]}
pass=${3:-300}
mkdir -p "$logdir"
# shellcheck source=mk/gpu-env.sh
source mk/gpu-env.sh
ncu=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -n 1)
[ -n "$ncu" ] || { echo "no ncu on this machine" >&2; exit 1; }
name=$(basename "$deck" .toml)
csv=$logdir/$name-kernels.csv
"$ncu" --profile-from-start off --clock-control none --cache-control none --metrics gpu__time_duration.sum --csv \
  "$bundle/bin/hone" bench-generation "$deck" bench.rounds=1 "bench.profile_pass=$pass" "output.dir=$logdir" \
  "run.name=$name-profiled" >"$csv" 2>"$logdir/$name-ncu.err"
echo "ncu exit $? ($name, window after pass $pass)"
python3 - "$csv" <<'PY'
import csv, re, sys
rows = [l for l in open(sys.argv[1], errors="replace") if l.startswith('"')]
by, total = {}, 0.0
for r in csv.DictReader(rows):
    if r.get("Metric Name") != "gpu__time_duration.sum":
        continue
    unit = r["Metric Unit"]
    scale = {"ns": 1e-3, "nsecond": 1e-3, "us": 1.0, "usecond": 1.0, "ms": 1e3, "msecond": 1e3}.get(unit)
    if scale is None:
        sys.exit(f"unknown time unit {unit!r}")
    us = float(r["Metric Value"].replace(",", "")) * scale
    name = re.sub(r"\(.*", "", r["Kernel Name"])[:70]
    n, t = by.get(name, (0, 0.0))
    by[name] = (n + 1, t + us)
    total += us
print(f"{sum(n for n, _ in by.values())} kernels, {total:.1f} us of kernel time in the window (two decode steps)")
print(f"{'kernel':70s} {'calls':>6s} {'us':>9s} {'share':>6s}")
for name, (n, t) in sorted(by.items(), key=lambda kv: -kv[1][1]):
    print(f"{name:70s} {n:6d} {t:9.1f} {100 * t / max(total, 1e-9):5.1f}%")
PY
