# Sourced (never run) by the scripts that use hone's bundle on a machine with a GPU (mk/gpu-run.sh,
# mk/gpu-parity.sh), from the repository root: finds the bundle (dist/hone-*/, unpacking its .tar.xz if only that
# came along), sources its env.sh and adds the machine's CUDA libraries: the toolkit's lib64 and, where cuDNN/NCCL
# live in a Python environment, its nvidia/*/lib folders. Sets $bundle and exports HONE_SOURCE_DIR, HONE_BUILD_DIR.
if ! ls -d dist/hone-*-linux-*/ >/dev/null 2>&1; then  # only the compressed bundle came along: unpack it
  for t in dist/hone-*-linux-*.tar.xz; do [ -f "$t" ] && tar -C dist -xJf "$t"; done
fi
bundle=$(ls -d dist/hone-*-linux-*/ 2>/dev/null | head -n 1)
bundle=${bundle%/}
[ -n "$bundle" ] || { echo "no bundle in dist/: run make bundle first" >&2; exit 1; }
# shellcheck disable=SC1091
source "$bundle/env.sh"
for py in python3 /usr/bin/python3; do
  sp=$("$py" -c 'import site; print(" ".join(site.getsitepackages()))' 2>/dev/null) || continue
  for d in $sp; do
    for lib in "$d"/nvidia/*/lib; do [ -d "$lib" ] && LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$lib"; done
  done
done
[ -d /usr/local/cuda/lib64 ] && LD_LIBRARY_PATH="$LD_LIBRARY_PATH:/usr/local/cuda/lib64"
export LD_LIBRARY_PATH
export NCCL_NVLS_ENABLE=0
export HONE_SOURCE_DIR=$PWD HONE_BUILD_DIR=$PWD/$bundle/bin
