#!/usr/bin/env bash
# make bundle: a folder that runs hone on another x86-64 Linux machine (glibc 2.34 or newer: RHEL 9, Ubuntu 22.04)
# with a CUDA driver and the CUDA libraries (cuBLAS, cuDNN, NCCL) but none of our Debian packages.
#   dist/hone-<version>-linux-x86_64/
#     bin/hone           statically linked but for glibc, MPI and the CUDA libraries (doc/building.md, "One binary")
#     bin/gpu_tests ...  the GPU suite and the GPU test programs, when built
#     lib/               what those test programs need beyond the system's libraries (Boost.Test)
#     mpi/               an Open MPI for machines that have none, used only there (env.sh decides; doc/slurm.md):
#       bin/             mpirun, orterun, orted
#       lib/             libmpi.so.40 and what it and its plugins link; no fabric library (InfiniBand verbs,
#                        libfabric, UCX, PSM): it talks over shared memory and TCP, and never shadows a site's stack
#       usr/...          Open MPI's and PMIx's plugins and help texts, at the paths they expect under their prefix
#       GLIBC            the newest glibc version its files need (env.sh compares it with the machine's)
#     env.sh             source it: PATH, LD_LIBRARY_PATH, and the MPI to use
#   mk/bundle.sh build/hone VERSION [DEST]   DEST: the folder to write instead (no .tar.xz then; the tests use it)
set -euo pipefail
cd "$(dirname "$0")/.."

exe=${1:?usage: mk/bundle.sh build/hone VERSION [DEST]}
version=${2:?usage: mk/bundle.sh build/hone VERSION [DEST]}
name=hone-$version-linux-$(uname -m)
dest=${3:-dist/$name}
rm -rf "$dest"
mkdir -p "$dest/bin" "$dest/lib"
cp "$exe" "$dest/bin/hone"
# The trackers' sidecar (doc/output.md, "Trackers"): hone run finds it beside itself.
cp tools/hone-log "$dest/bin/hone-log"
# The GPU suite travels with the bundle when it is built, so a GPU machine can run it (mk/gpu-run.sh).
gpu_tests=$(dirname "$exe")/tests/gpu_tests
[ -x "$gpu_tests" ] && cp "$gpu_tests" "$dest/bin/gpu_tests"
# So do the GPU programs among the test programs (benchmarks and multi-GPU checks run by hand there).
gpu_programs=(bench_decode_attention bench_sampler bench_gemm_algos bench_moe_decode nccl_check)
for p in "${gpu_programs[@]}"; do
  f=$(dirname "$exe")/tests/programs/$p
  [ -x "$f" ] && cp "$f" "$dest/bin/$p"
done
# Debug sections stay behind: the bundle travels.
strip --strip-debug "$dest"/bin/* 2>/dev/null || true

# Libraries every target has and that are never bundled: the C library family (glibc's own, matched to the
# kernel and loader), the system's GCC runtime (libgcc_s, libstdc++: every distribution ships them; a bundled copy
# from this machine would need this machine's newer glibc), and the CUDA libraries (matched to the GPU driver).
system_re='^(linux-vdso|ld-linux[a-z0-9_-]*|libc|libm|libdl|librt|libpthread|libutil|libresolv|libnsl|libanl|libgcc_s|libstdc\+\+)\.so'
cuda_re='^(libcuda|libcudart|libcublas|libcublasLt|libcudnn[a-z_]*|libnccl|libnvrtc|libnvJitLink|libnvidia-[a-z-]*)\.so'
# The site's fabric stack (its drivers and providers must match the machine): never bundled.
fabric_re='^(libibverbs|librdmacm|libfabric|libuc[mpst]|libpsm2|libpsm_infinipath|libefa|libmlx[45]|libnl-3|libnl-route-3|libmca_common_(ofi|ucx|verbs))\.so'

# copy_deps ELF FOLDER: every library ELF links (ldd) that is neither system, CUDA nor fabric, into FOLDER.
declare -A seen=()
copy_deps() {
  local elf=$1 to=$2 lib arrow path base
  while read -r lib arrow path _; do
    [ "$arrow" = "=>" ] || continue
    [ -f "$path" ] || continue
    base=$(basename "$lib")
    [[ $base =~ $system_re || $base =~ $cuda_re || $base =~ $fabric_re ]] && continue
    [ -n "${seen[$base]:-}" ] && continue
    seen[$base]=1
    cp -L "$path" "$to/$base"
  done < <(ldd "$elf" 2>/dev/null || true)
}
# Whether ELF links a fabric library (an Open MPI plugin for InfiniBand, OFI, UCX or PSM).
links_fabric() {
  local base
  for base in $(ldd "$1" 2>/dev/null | awk '{print $1}'); do
    [[ $(basename "$base") =~ $fabric_re ]] && return 0
  done
  return 1
}

# hone and the test programs: what they link beyond the system, CUDA and MPI (libmpi and everything it links,
# which go with the bundle's MPI below) goes to lib/.
libmpi=$(ldd "$dest/bin/hone" | awk '$1 == "libmpi.so.40" {print $3}')
declare -A mpi_closure=([libmpi.so.40]=1)
if [ -n "$libmpi" ]; then
  for base in $(ldd "$libmpi" 2>/dev/null | awk '{print $1}'); do mpi_closure[$(basename "$base")]=1; done
fi
for elf in "$dest"/bin/*; do
  while read -r lib arrow path _; do
    [ "$arrow" = "=>" ] && [ -f "$path" ] || continue
    base=$(basename "$lib")
    [[ $base =~ $system_re || $base =~ $cuda_re || $base =~ $fabric_re || -n ${mpi_closure[$base]:-} ]] && continue
    [ -n "${seen[$base]:-}" ] && continue
    seen[$base]=1
    cp -L "$path" "$dest/lib/$base"
  done < <(ldd "$elf" 2>/dev/null || true)
done
seen=()

# ---- the bundle's own Open MPI ------------------------------------------------------------------------------
ompi_libdir=$(mpicc --showme:libdirs 2>/dev/null | awk '{print $1}')
if [ -n "$libmpi" ] && [ -f "$libmpi" ]; then
  m=$dest/mpi
  mkdir -p "$m/bin" "$m/lib"
  mpi_elves=()
  copy_deps "$libmpi" "$m/lib"
  cp -L "$libmpi" "$m/lib/libmpi.so.40"
  # Open MPI's plugins (and PMIx's, when Open MPI uses an external one), without those for the fabric stacks.
  plugin_dirs=()
  [ -n "$ompi_libdir" ] && [ -d "$ompi_libdir/openmpi3" ] && plugin_dirs+=("$ompi_libdir/openmpi3")
  [ -d "/usr/lib/$(uname -m)-linux-gnu/pmix2" ] && plugin_dirs+=("/usr/lib/$(uname -m)-linux-gnu/pmix2")
  for d in "${plugin_dirs[@]}"; do
    mkdir -p "$m$d"
    cp -a "$d/." "$m$d/"
    while IFS= read -r f; do
      if links_fabric "$f"; then rm -f "$f"; else mpi_elves+=("$f"); fi
    done < <(find "$m$d" -name '*.so')
  done
  for d in /usr/share/openmpi /usr/share/pmix; do
    [ -d "$d" ] && mkdir -p "$m$d" && cp -a "$d/." "$m$d/"
  done
  # The launcher, and orted where a process started without mpirun (a singleton) looks for it: OPAL_PREFIX/bin.
  for b in mpirun orterun orted; do
    p=$(command -v $b 2>/dev/null || true)
    [ -n "$p" ] && cp -L "$p" "$m/bin/$b" && mpi_elves+=("$m/bin/$b")
  done
  if [ -x "$m/bin/orted" ]; then
    mkdir -p "$m/usr/bin"
    ln -sf ../../bin/orted "$m/usr/bin/orted"
  fi
  for f in "${mpi_elves[@]}"; do copy_deps "$f" "$m/lib"; done
  # The newest glibc version any of it needs: Debian's Open MPI is built for Debian's glibc.
  need=GLIBC_2.2.5
  while IFS= read -r f; do
    v=$(objdump -T "$f" 2>/dev/null | grep -o "GLIBC_[0-9.]*" | sort -uV | tail -n 1 || true)
    [ -n "$v" ] && need=$(printf '%s\n%s\n' "$need" "$v" | sort -V | tail -n 1)
  done < <(find "$m" -type f \( -name '*.so*' -o -path '*/bin/*' \))
  echo "${need#GLIBC_}" > "$m/GLIBC"
fi

# The CUDA major version hone was built against (HONE_CUDA_MAJOR from make bundle; empty: a CPU-only bundle) and the
# oldest driver that runs it (NVIDIA's minimum for the major version on Linux).
cuda_major=${HONE_CUDA_MAJOR:-}
case "$cuda_major" in
  13) driver_min=580 ;;
  12) driver_min=525 ;;
  *) driver_min="" ;;
esac
{
  if [ -n "$driver_min" ]; then
    echo "# Built against CUDA $cuda_major: needs an NVIDIA driver $driver_min or newer and the CUDA $cuda_major libraries (cuBLAS, cuDNN 9, NCCL)"
  else
    echo "# A CPU-only build${cuda_major:+ (CUDA $cuda_major)}: run.device = cpu"
  fi
  echo "HONE_CUDA_MAJOR=$cuda_major"
  echo "HONE_DRIVER_MIN=$driver_min"
  # The GPU architectures whose machine code hone carries (PTX of the last for newer GPUs); empty: CPU only.
  echo "HONE_GPU_ARCHS=\"${HONE_GPU_ARCHS:-}\""
} > "$dest/env.sh"
cat >> "$dest/env.sh" <<'EOF'
# Source this file to use this hone bundle: PATH, LD_LIBRARY_PATH, and the MPI hone runs with.
#   HONE_MPI=auto (default)  the machine's Open MPI when hone finds one (libmpi.so.40 on the loader's path: a loaded
#                            module, LD_LIBRARY_PATH, or the system's), else the bundle's own (mpi/)
#   HONE_MPI=site            the machine's, whatever the loader finds (an error at hone's start if there is none)
#   HONE_MPI=bundled         the bundle's, for a machine without an Open MPI (single node, or TCP between nodes)
# Load the site's Open MPI (e.g. `module load openmpi`) before sourcing this file. The bundle's MPI comes first
# only where the machine has none, and carries no fabric library (InfiniBand, libfabric, UCX), so it never shadows
# the site's. The CUDA libraries (cuBLAS, cuDNN, NCCL) come from the machine: add their folders to LD_LIBRARY_PATH
# if the loader does not find them (e.g. a Python environment's site-packages/nvidia/*/lib).
HONE_HOME=$(cd "$(dirname "${BASH_SOURCE[0]:-$0}")" && pwd)
export HONE_HOME
export PATH="$HONE_HOME/bin:$PATH"
# lib/ holds only what the bundled test programs need (Boost.Test): after everything else.
export LD_LIBRARY_PATH="${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}$HONE_HOME/lib"
HONE_MPI_MODE=${HONE_MPI:-auto}
if [ "$HONE_MPI_MODE" = auto ]; then
  if [ -d "$HONE_HOME/mpi" ] && ldd "$HONE_HOME/bin/hone" 2>/dev/null | grep -q 'libmpi\.so\.40 => not found'; then
    HONE_MPI_MODE=bundled
  else
    HONE_MPI_MODE=site
  fi
fi
# Arguments for mpirun that pass this environment to the ranks of other nodes (empty for the site's MPI).
HONE_MPIRUN_ENV=""
case "$HONE_MPI_MODE" in
  site) ;;
  bundled)
    have=$(getconf GNU_LIBC_VERSION 2>/dev/null | awk '{print $2}')
    need=$(cat "$HONE_HOME/mpi/GLIBC" 2>/dev/null || echo 0)
    if [ -n "$have" ] && [ "$(printf '%s\n%s\n' "$need" "$have" | sort -V | head -n 1)" != "$need" ]; then
      echo "env.sh: this machine has no Open MPI (libmpi.so.40) and its glibc $have is older than the $need the" \
           "bundle's own MPI needs: load the site's Open MPI (e.g. module load openmpi) and source env.sh again" >&2
    fi
    export PATH="$HONE_HOME/mpi/bin:$PATH"
    export LD_LIBRARY_PATH="$HONE_HOME/mpi/lib:$LD_LIBRARY_PATH"
    export OPAL_PREFIX="$HONE_HOME/mpi/usr"
    # PMIx's plugins: the bundled ones, never those of another PMIx installed on the machine.
    for d in "$HONE_HOME"/mpi/usr/lib/*/pmix2; do
      if [ -d "$d" ]; then
        export PMIX_INSTALL_PREFIX="$d"
        export PMIX_MCA_mca_base_component_path="$d/lib/pmix"
      fi
    done
    # That path does not hold for PMIx's one plugin that can fail: the bundled PMIx still finds its zlib compressor
    # in its build's folder (the machine's pmix-mca-params.conf and the compiled-in default win), and where another
    # PMIx lives there (a newer distribution) it fails to load with a warning. The bundle's PMIx runs without message
    # compression instead (it only shortens the start of very large jobs), on purpose and so without a word.
    export PMIX_MCA_pcompress="^zlib" PMIX_MCA_pcompress_base_silence_warning=1
    export OMPI_MCA_plm_rsh_agent="${OMPI_MCA_plm_rsh_agent:-ssh}"
    HONE_MPIRUN_ENV="-x OPAL_PREFIX -x PMIX_INSTALL_PREFIX -x PMIX_MCA_mca_base_component_path -x PMIX_MCA_pcompress"
    HONE_MPIRUN_ENV="$HONE_MPIRUN_ENV -x PMIX_MCA_pcompress_base_silence_warning"
    ;;
  *) echo "env.sh: HONE_MPI=$HONE_MPI_MODE: expected auto, site or bundled" >&2 ;;
esac
export HONE_MPI_MODE HONE_MPIRUN_ENV
# The GPU driver against the CUDA major version this hone needs (a word only; CPU runs need no driver).
if [ -n "$HONE_DRIVER_MIN" ] && command -v nvidia-smi >/dev/null 2>&1; then
  hone_driver=$(nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>/dev/null | head -n 1)
  if [ -n "$hone_driver" ] && [ "${hone_driver%%.*}" -lt "$HONE_DRIVER_MIN" ] 2>/dev/null; then
    echo "env.sh: this hone is built against CUDA $HONE_CUDA_MAJOR, which needs an NVIDIA driver $HONE_DRIVER_MIN or" \
         "newer; this machine's is $hone_driver (run.device = cpu still works)" >&2
  fi
  unset hone_driver
fi
export HONE_CUDA_MAJOR HONE_DRIVER_MIN HONE_GPU_ARCHS
EOF

if [ -z "${3:-}" ]; then
  # One compressed file as well, for copying to a cluster: tar -xJf hone-<version>-linux-x86_64.tar.xz
  tar -C "$(dirname "$dest")" -cf - "$(basename "$dest")" | xz -T0 -6 > "$dest.tar.xz"
  echo "bundle: $dest ($(du -sh "$dest" | cut -f1)), $dest.tar.xz ($(du -sh "$dest.tar.xz" | cut -f1))"
else
  echo "bundle: $dest ($(du -sh "$dest" | cut -f1))"
fi
