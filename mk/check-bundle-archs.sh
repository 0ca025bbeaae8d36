#!/usr/bin/env bash
# The GPU code inside the bundle's binaries (doc/building.md, "Bundles"): every architecture the bundle is built for
# has its machine code (an sm_XX ELF, "cubin") in each binary, and the newest also its PTX, which the driver
# compiles for a GPU newer than all of them. Prints per binary its size and, per architecture, the cubins and their
# bytes (cuobjdump --list-elf / --list-ptx, sizes from the extracted files).
#   mk/check-bundle-archs.sh "80 86 89 90a 100" BINARY...   exit 1 naming what is missing
#   mk/check-bundle-archs.sh --find                          print the cuobjdump it would use (exit 1: none)
# cuobjdump: $CUOBJDUMP, the CUDA toolkit's, the one make deps keeps in hone's cache, or the one on PATH.
set -euo pipefail

find_cuobjdump() {
  local cache=${HONE_CACHE_DIR:-${XDG_CACHE_HOME:-${HOME:-/root}/.cache}/hone}
  local c
  for c in "${CUOBJDUMP:-}" "${CUDA_HOME:-/usr/local/cuda}/bin/cuobjdump" "$cache"/cuda-tools/cuobjdump-*/cuobjdump \
           "$(command -v cuobjdump 2>/dev/null || true)"; do
    if [ -n "$c" ] && [ -x "$c" ]; then echo "$c"; return 0; fi
  done
  return 1
}

if [ "${1:-}" = "--find" ]; then
  find_cuobjdump
  exit
fi
archs=${1:?usage: mk/check-bundle-archs.sh \"ARCH ...\" BINARY...}
shift
[ $# -gt 0 ] || { echo "usage: mk/check-bundle-archs.sh \"ARCH ...\" BINARY..." >&2; exit 2; }
cuobjdump=$(find_cuobjdump) || {
  echo "check-bundle-archs: no cuobjdump (make deps fetches one): the GPU architectures were not checked" >&2
  exit 3
}
newest=${archs##* }

mb() { awk -v b="$1" 'BEGIN { printf "%.1f MB", b / 1e6 }'; }
failed=0
for bin in "$@"; do
  [ -f "$bin" ] || { echo "check-bundle-archs: $bin: no such file" >&2; failed=1; continue; }
  tmp=$(mktemp -d)
  # The cubins and PTX files, extracted to count their bytes (names: <binary>.<n>.sm_<arch>.cubin / .ptx).
  abs=$(realpath "$bin")
  (cd "$tmp" && "$cuobjdump" -xelf all "$abs" >/dev/null 2>&1 && "$cuobjdump" -xptx all "$abs" >/dev/null 2>&1) || true
  line="$bin ($(mb "$(stat -c %s "$bin")")):"
  missing=()
  for a in $archs; do
    n=$(find "$tmp" -name "*.sm_$a.cubin" | wc -l)
    if [ "$n" -eq 0 ]; then missing+=("sm_$a"); continue; fi
    bytes=$(find "$tmp" -name "*.sm_$a.cubin" -printf '%s\n' | awk '{ s += $1 } END { print s }')
    line="$line sm_$a ($n cubins, $(mb "$bytes")),"
  done
  # Machine code of an architecture the bundle is not built for would mean a build folder of another setting.
  others=$(find "$tmp" -name '*.cubin' | sed -n 's/.*\.sm_\([0-9a-z]*\)\.cubin$/\1/p' | sort -u |
           while read -r a; do [[ " $archs " == *" $a "* ]] || echo "sm_$a"; done | tr '\n' ' ')
  np=$(find "$tmp" -name "*.sm_$newest.ptx" | wc -l)
  if [ "$np" -eq 0 ]; then
    missing+=("PTX of sm_$newest")
  else
    pbytes=$(find "$tmp" -name "*.sm_$newest.ptx" -printf '%s\n' | awk '{ s += $1 } END { print s }')
    line="$line PTX sm_$newest ($np files, $(mb "$pbytes"))"
  fi
  oldptx=$(find "$tmp" -name '*.ptx' ! -name "*.sm_$newest.ptx" | wc -l)
  rm -rf "$tmp"
  echo "${line%,}"
  if [ ${#missing[@]} -gt 0 ]; then
    echo "check-bundle-archs: $bin lacks $(printf '%s, ' "${missing[@]}" | sed 's/, $//') (built for: $archs)" >&2
    failed=1
  fi
  if [ -n "$others" ]; then
    echo "check-bundle-archs: $bin holds machine code for ${others% } besides $archs" >&2
    failed=1
  fi
  if [ "$oldptx" -gt 0 ]; then
    echo "check-bundle-archs: $bin holds PTX of an architecture other than sm_$newest ($oldptx files)" >&2
    failed=1
  fi
done
exit $failed
