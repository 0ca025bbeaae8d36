#!/usr/bin/env bash
# make bundle: a self-contained folder that runs hone on another x86-64 Linux machine which has a CUDA driver and
# CUDA toolkit libraries but none of our Debian packages.
#   dist/hone-<version>-linux-x86_64/
#     bin/hone           the executable
#     lib/               every non-system, non-CUDA shared library hone (and Open MPI's plugins) link
#     ompi/usr/...       Open MPI's plugins and help texts, at the paths Open MPI expects below OPAL_PREFIX
#     env.sh             source it: PATH, LD_LIBRARY_PATH, OPAL_PREFIX
set -euo pipefail
cd "$(dirname "$0")/.."

exe=${1:?usage: mk/bundle.sh build/hone VERSION}
version=${2:?usage: mk/bundle.sh build/hone VERSION}
name=hone-$version-linux-$(uname -m)
dest=dist/$name
rm -rf "$dest"
mkdir -p "$dest/bin" "$dest/lib"
cp "$exe" "$dest/bin/hone"
# The GPU suite travels with the bundle when it is built, so a GPU machine can run it (mk/gpu-run.sh).
gpu_tests=$(dirname "$exe")/tests/gpu_tests
[ -x "$gpu_tests" ] && cp "$gpu_tests" "$dest/bin/gpu_tests"
# So do the GPU programs among the test programs (benchmarks and multi-GPU checks run by hand there).
gpu_programs=(bench_decode_attention nccl_check)
for p in "${gpu_programs[@]}"; do
  f=$(dirname "$exe")/tests/programs/$p
  [ -x "$f" ] && cp "$f" "$dest/bin/$p"
done
# Debug sections stay behind: the bundle travels.
strip --strip-debug "$dest"/bin/* 2>/dev/null || true

# Libraries the target provides: the C library family (glibc's own, always matched to the kernel and loader)
# and CUDA's (driver and toolkit, matched to the GPU driver there).
system_re='^(linux-vdso|ld-linux|libc|libm|libdl|librt|libpthread|libutil|libresolv|libnsl|libanl)\.so'
cuda_re='^(libcuda|libcudart|libcublas|libcublasLt|libcudnn[a-z_]*|libnccl|libnvrtc|libnvJitLink|libnvidia-[a-z-]*)\.so'

ompi_libdir=$(mpicc --showme:libdirs 2>/dev/null | awk '{print $1}')
ompi_pkglib=""
[ -n "$ompi_libdir" ] && [ -d "$ompi_libdir/openmpi3" ] && ompi_pkglib=$ompi_libdir/openmpi3

# Every ELF whose dependencies we follow: hone itself and Open MPI's dynamically loaded components.
elves=("$dest/bin/hone")
[ -x "$dest/bin/gpu_tests" ] && elves+=("$dest/bin/gpu_tests")
for p in "${gpu_programs[@]}"; do [ -x "$dest/bin/$p" ] && elves+=("$dest/bin/$p"); done
if [ -n "$ompi_pkglib" ]; then
  mkdir -p "$dest/ompi$ompi_pkglib"
  cp -a "$ompi_pkglib/." "$dest/ompi$ompi_pkglib/"
  while IFS= read -r f; do elves+=("$f"); done < <(find "$dest/ompi$ompi_pkglib" -name '*.so')
  for d in /usr/share/openmpi /usr/share/pmix; do
    [ -d "$d" ] && mkdir -p "$dest/ompi$d" && cp -a "$d/." "$dest/ompi$d/"
  done
  # PMIx (and its plugins) when Open MPI uses an external one
  for d in /usr/lib/$(uname -m)-linux-gnu/pmix2; do
    if [ -d "$d" ]; then
      mkdir -p "$dest/ompi$d" && cp -a "$d/." "$dest/ompi$d/"
      while IFS= read -r f; do elves+=("$f"); done < <(find "$dest/ompi$d" -name '*.so')
    fi
  done
  # the launcher, for machines without an MPI of their own
  for b in mpirun orterun orted; do
    p=$(command -v $b 2>/dev/null || true)
    [ -n "$p" ] && cp -L "$p" "$dest/bin/$b" && elves+=("$dest/bin/$b")
  done
  # A process started without mpirun (a singleton) spawns orted from the installation prefix: OPAL_PREFIX/bin.
  if [ -x "$dest/bin/orted" ]; then
    mkdir -p "$dest/ompi/usr/bin"
    ln -sf ../../../bin/orted "$dest/ompi/usr/bin/orted"
  fi
fi

declare -A seen=()
for elf in "${elves[@]}"; do
  while read -r lib arrow path _; do
    [ "$arrow" = "=>" ] || continue
    [ -f "$path" ] || continue
    base=$(basename "$lib")
    [[ $base =~ $system_re ]] && continue
    [[ $base =~ $cuda_re ]] && continue
    [ -n "${seen[$base]:-}" ] && continue
    seen[$base]=1
    cp -L "$path" "$dest/lib/$base"
  done < <(ldd "$elf" 2>/dev/null || true)
done

cat > "$dest/env.sh" <<'EOF'
# Source this file to use this hone bundle: PATH, LD_LIBRARY_PATH and Open MPI's relocated prefix.
# The CUDA libraries (cuBLAS, cuDNN, NCCL) come from the machine: add their folders to LD_LIBRARY_PATH if they are
# not on the loader's path already (e.g. a PyTorch environment's site-packages/nvidia/*/lib).
HONE_HOME=$(cd "$(dirname "${BASH_SOURCE[0]:-$0}")" && pwd)
export HONE_HOME
export PATH="$HONE_HOME/bin:$PATH"
export LD_LIBRARY_PATH="$HONE_HOME/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export OPAL_PREFIX="$HONE_HOME/ompi/usr"
# PMIx loads its plugins from its own prefix: point it at the bundled copy, not a system PMIx of another version.
for d in "$HONE_HOME"/ompi/usr/lib/*/pmix2; do [ -d "$d" ] && export PMIX_INSTALL_PREFIX="$d"; done
export OMPI_MCA_plm_rsh_agent="${OMPI_MCA_plm_rsh_agent:-ssh}"
EOF

# One compressed file as well, for copying to a cluster: tar -xJf hone-<version>-linux-x86_64.tar.xz
tar -C dist -cf - "$name" | xz -T0 -6 > "dist/$name.tar.xz"
echo "bundle: $dest ($(du -sh "$dest" | cut -f1), $(ls "$dest/lib" | wc -l) libraries), dist/$name.tar.xz ($(du -sh "dist/$name.tar.xz" | cut -f1))"
