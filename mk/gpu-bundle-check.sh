#!/usr/bin/env bash
# The bundle on a GPU machine (part `bundle` of mk/gpu-session.sh): the machine (OS, glibc), the MPI env.sh picks
# there, and the bundle's hone on the demo deck, one rank on the GPU (started without mpirun) and two CPU ranks under
# mpirun, with each MPI the machine offers: the one env.sh picks (HONE_MPI=auto), the bundle's own (HONE_MPI=bundled),
# and the machine's when it has one (HONE_MPI=site). A run fails the check when it exits non-zero or prints a line
# about PMIx, dlopen, an MCA component that did not load, an undefined symbol, or a warning.
#   mk/gpu-bundle-check.sh LOGDIR      one file per run in LOGDIR, a summary on stdout; exit 1 when a run failed
set -uo pipefail
cd "$(dirname "$0")/.."
logdir=${1:?usage: mk/gpu-bundle-check.sh LOGDIR}
mkdir -p "$logdir"
status=0

{
  grep PRETTY_NAME /etc/os-release
  echo "glibc $(getconf GNU_LIBC_VERSION)"
  bundle=$(ls -d dist/hone-*-linux-*/ 2>/dev/null | head -n 1)
  echo "bundle $bundle: its own MPI needs glibc $(cat "${bundle}mpi/GLIBC" 2>/dev/null)"
  echo "ldd bin/hone (no environment):"
  env -i PATH=/usr/bin:/bin ldd "${bundle}bin/hone"
} 2>&1 | tee "$logdir/machine.txt"

# run NAME MODE COMMAND...: in a subshell with the bundle's environment for HONE_MPI=MODE.
run() {
  local name=$1 mode=$2
  shift 2
  local log=$logdir/$name.txt
  (
    export HONE_MPI=$mode
    # shellcheck source=mk/gpu-env.sh
    source mk/gpu-env.sh
    echo "== HONE_MPI=$mode -> $HONE_MPI_MODE; mpirun: $(command -v mpirun)"
    "$@"
  ) >"$log" 2>&1
  local rc=$?
  local bad
  bad=$(grep -nEi 'pmix|dlopen|mca_base_component|undefined symbol|warning|not found' "$log" | grep -v '^1:== ')
  if [ $rc -ne 0 ] || [ -n "$bad" ]; then
    echo "FAIL $name (exit $rc)"
    [ -n "$bad" ] && echo "$bad" | head -n 10
    tail -n 5 "$log"
    status=1
  else
    echo "ok   $name: $(head -n 1 "$log" | cut -c4-)"
  fi
}

demo=(input/demo.toml run.max_steps=3 output.overwrite=true checkpoint.overwrite=true)  # the deck validates at the start: validation runs too
modes="auto bundled"
site=$(HONE_MPI=auto; source mk/gpu-env.sh >/dev/null 2>&1; echo "$HONE_MPI_MODE")
[ "$site" = site ] && modes="$modes site"
for mode in $modes; do
  run "gpu-$mode" "$mode" bash -c 'hone run "$@"' _ "${demo[@]}" run.device=cuda "output.dir=$logdir/out-gpu-$mode" \
    "checkpoint.dir=$logdir/ck-gpu-$mode"
  # shellcheck disable=SC2016
  run "mpi2-$mode" "$mode" bash -c 'mpirun -np 2 --oversubscribe --allow-run-as-root --bind-to none $HONE_MPIRUN_ENV \
      -x LD_LIBRARY_PATH -x PATH hone run "$@"' _ "${demo[@]}" run.device=cpu "output.dir=$logdir/out-mpi2-$mode" \
    "checkpoint.dir=$logdir/ck-mpi2-$mode"
done
exit $status
