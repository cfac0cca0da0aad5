#!/usr/bin/env bash
# Installs LibTorch from the PyPI wheel that GPU nodes use (the one place its version is pinned)
# into a private folder, and prints the folder to give CMake (-DCMAKE_PREFIX_PATH=...).
#
#   launch/torch-wheel.sh [PREFIX]          (default: .deps/torch-<version> in the source tree)
#
# Only the wheel's files are needed, not a Python environment: pip install --target, without the
# wheel's Python dependencies. libtorch_cuda.so's CUDA libraries come from the CUDA toolkit in
# /usr/local/cuda (or $CUDA_HOME) where it has them; the three it lacks (cuSPARSELt, NVSHMEM,
# cuFile) come from the NVIDIA wheels at the versions torch's own metadata names. Without a
# toolkit, every NVIDIA wheel torch depends on is installed (several GB). pip's cache is used, and
# a folder that already holds this version is left as it is: a second run downloads nothing.
set -euo pipefail
readonly TORCH_VERSION=2.11.0
cd "$(dirname "$0")/.."
prefix=${1:-.deps/torch-$TORCH_VERSION}
python=${PYTHON:-python3}
cuda_home=${CUDA_HOME:-/usr/local/cuda}
meta="$prefix/torch-$TORCH_VERSION.dist-info"

if [ ! -d "$meta" ]; then
  if ! "$python" -m pip --version >/dev/null 2>&1; then
    echo "torch-wheel: '$python -m pip' is missing (apt-get install python3-pip)" >&2
    exit 1
  fi
  log=$(mktemp)
  trap 'rm -f "$log"' EXIT
  pip_install() {
    if ! "$python" -m pip install --quiet --disable-pip-version-check --target "$prefix" "$@" \
        >"$log" 2>&1; then
      cat "$log" >&2
      echo "torch-wheel: pip install $* failed (log above)" >&2
      exit 1
    fi
  }
  pip_install --no-deps "torch==$TORCH_VERSION"
  # The NVIDIA packages torch pins, as pip requirements (environment markers dropped).
  mapfile -t nvidia < <(sed -n 's/^Requires-Dist: \(\(nvidia-\|cuda-toolkit\)[^;]*\).*/\1/p' \
    "$meta/METADATA" | tr -d ' ')
  if [ -f "$cuda_home/lib64/libcublas.so.13" ] || [ -f "$cuda_home/lib/libcublas.so.13" ]; then
    # What the toolkit lacks: cuSPARSELt and NVSHMEM, and cuFile (an extra of cuda-toolkit).
    wanted=()
    for requirement in "${nvidia[@]}"; do
      case "$requirement" in
        nvidia-cusparselt-*|nvidia-nvshmem-*) wanted+=("$requirement") ;;
        cuda-toolkit*) wanted+=("cuda-toolkit[cufile]==${requirement##*==}") ;;
      esac
    done
    pip_install "${wanted[@]}"
  else
    pip_install "${nvidia[@]}"
  fi
fi
echo "$(cd "$prefix/torch" && pwd)"
