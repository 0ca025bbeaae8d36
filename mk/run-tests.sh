#!/usr/bin/env bash
# Runs hone's Boost.Test suites and prints one closing line: "N passed, N failed, N skipped".
#   mk/run-tests.sh unit mpi slurm gpu
# Each suite writes an XML report; the counts come from those reports, not from Boost's console output.
# A suite that crashes or writes no report counts as one failed test case.
# Extra Boost.Test arguments (e.g. --run_test=config*) can be passed in HONE_TEST_ARGS.
set -uo pipefail
cd "$(dirname "$0")/.."

BUILD=${HONE_BUILD:-build}
REPORTS=$BUILD/test-reports
mkdir -p "$REPORTS"
MPIRUN=(mpirun -np 2 --oversubscribe --allow-run-as-root)
export OMPI_MCA_rmaps_base_oversubscribe=1
export HONE_SOURCE_DIR=$PWD
export HONE_BUILD_DIR=$PWD/$BUILD
ARGS=(--color_output=no --log_level=test_suite --report_format=XML --report_level=detailed)
# shellcheck disable=SC2206
EXTRA=(${HONE_TEST_ARGS:-})

total_passed=0; total_failed=0; total_skipped=0; status=0
rm -f "$REPORTS/failed.txt"

# attr NAME FILE: the value of attribute NAME on the first TestSuite element of an XML report.
attr() {  # no pipes: under pipefail an early-closing reader would turn a large report into a failure
  awk -v k="$1" 'match($0, "<TestSuite [^>]*") {
      s = substr($0, RSTART, RLENGTH)
      if (match(s, " " k "=\"[0-9]+\"")) { v = substr(s, RSTART, RLENGTH); gsub(/[^0-9]/, "", v); print v; found = 1; exit }
    } END { if (!found) print 0 }' "$2"
}

# failed_cases FILE: the full names (suite/.../case) of the failed and aborted cases of an XML report, one per line.
failed_cases() {
  grep -o '<TestSuite name="[^"]*"\|</TestSuite>\|<TestCase name="[^"]*" result="[a-z]*"' "$1" |
    awk '/^<TestSuite/ { match($0, /"[^"]*"/); path[++d] = substr($0, RSTART + 1, RLENGTH - 2); next }
         /^<\/TestSuite/ { d--; next }
         /result="(failed|aborted)"/ { match($0, /"[^"]*"/); n = substr($0, RSTART + 1, RLENGTH - 2)
                                      p = ""; for (i = 2; i <= d; i++) p = p path[i] "/"; print p n }'
}

count() {  # suite report...
  local suite=$1; shift
  local p=0 f=0 s=0 r
  for r in "$@"; do
    if [ ! -s "$r" ] || ! grep -q "<TestSuite " "$r"; then
      echo "$suite: no report from $(basename "$r") (the suite crashed or did not start)"
      f=$((f + 1)); continue
    fi
    local rp rf ra rs
    rp=$(attr test_cases_passed "$r"); rf=$(attr test_cases_failed "$r")
    ra=$(attr test_cases_aborted "$r"); rs=$(attr test_cases_skipped "$r")
    # Under MPI every rank runs every case: count cases once (rank 0), failures from any rank.
    if [ "$r" = "$1" ]; then p=$rp; s=$rs; fi
    [ $((rf + ra)) -gt "$f" ] && f=$((rf + ra))
    [ $((rf + ra)) -gt 0 ] && failed_cases "$r" | sort -u | sed "s|^|$suite: failed: |" >> "$REPORTS/failed.txt"
  done
  echo "$suite: $p passed, $f failed, $s skipped"
  total_passed=$((total_passed + p)); total_failed=$((total_failed + f)); total_skipped=$((total_skipped + s))
}

for suite in "$@"; do
  bin=$BUILD/tests/${suite}_tests
  if [ ! -x "$bin" ]; then
    echo "$suite: $bin not built"; total_failed=$((total_failed + 1)); status=1; continue
  fi
  rm -f "$REPORTS/$suite".*.xml
  echo "=== suite $suite"
  if [ "$suite" = mpi ]; then
    timeout 600 "${MPIRUN[@]}" bash -c 'exec "$0" "$@" --report_sink='"$REPORTS/$suite"'.$OMPI_COMM_WORLD_RANK.xml' \
      "$bin" "${ARGS[@]}" "${EXTRA[@]}"
    rc=$?
    count "$suite" "$REPORTS/$suite.0.xml" "$REPORTS/$suite.1.xml"
  else
    timeout 1800 "$bin" "${ARGS[@]}" "${EXTRA[@]}" --report_sink="$REPORTS/$suite.0.xml"
    rc=$?
    count "$suite" "$REPORTS/$suite.0.xml"
  fi
  [ $rc -ne 0 ] && status=1
done

[ "$total_failed" -gt 0 ] && status=1
# The failed cases again, just above the closing line, where a log's tail shows them.
[ -s "$REPORTS/failed.txt" ] && sort -u "$REPORTS/failed.txt"
echo "$total_passed passed, $total_failed failed, $total_skipped skipped"
exit $status
