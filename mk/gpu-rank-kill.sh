#!/usr/bin/env bash
# A rank killed mid-run on two GPUs: `hone run` of the demo deck under mpirun on two GPUs, one rank killed with
# SIGKILL after a few steps; the whole job must end well within parallel.nccl_timeout_s, and the output file keep
# the steps written before. From the bundle (mk/gpu-env.sh). Prints PASS/FAIL lines; exits 1 when anything failed.
#   mk/gpu-rank-kill.sh LOGDIR
set -uo pipefail
cd "$(dirname "$0")/.."
logdir=${1:?usage: mk/gpu-rank-kill.sh LOGDIR}
mkdir -p "$logdir"
# shellcheck source=mk/gpu-env.sh
source mk/gpu-env.sh
hone=$bundle/bin/hone
timeout_s=60
mpirun -np 2 --allow-run-as-root --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -x OPAL_PREFIX -x PATH \
  "$hone" run input/demo.toml run.device=cuda run.max_steps=100000 run.name=killed "parallel.nccl_timeout_s=$timeout_s" \
  "output.dir=$logdir" "checkpoint.dir=$logdir/ck" >"$logdir/log.txt" 2>&1 &
launcher=$!
for _ in $(seq 1 90); do
  [ "$(grep -c '^ *[0-9]' "$logdir/log.txt")" -ge 5 ] && break
  sleep 1
done
victim=$(pgrep -x hone | sort -n | tail -n 1)
echo "INFO: $(grep -c '^ *[0-9]' "$logdir/log.txt") step lines before the kill; killing pid $victim"
t0=$(date +%s.%N)
kill -9 "$victim"
wait "$launcher"
rc=$?
t1=$(date +%s.%N)
secs=$(python3 -c "print(f'{$t1 - $t0:.1f}')")
echo "INFO: the job ended ${secs} s after the kill, exit $rc"
tail -n 8 "$logdir/log.txt"
fail=0
python3 -c "import sys; sys.exit(0 if $t1 - $t0 < $timeout_s else 1)" && echo "PASS: ended within parallel.nccl_timeout_s = $timeout_s s" \
  || { echo "FAIL: still running after parallel.nccl_timeout_s"; fail=1; }
[ "$rc" -ne 0 ] && echo "PASS: non-zero exit ($rc)" || { echo "FAIL: exit 0 after a rank was killed"; fail=1; }
if python3 -c "import h5py, sys; f = h5py.File(sys.argv[1], 'r'); n = len(f['steps/step']); print(f'INFO: {n} steps in the output file'); sys.exit(0 if n >= 1 else 1)" "$logdir/killed.h5"; then
  echo "PASS: the output file is readable with the steps written before the kill"
else
  echo "FAIL: the output file is unreadable or empty"; fail=1
fi
exit $fail
