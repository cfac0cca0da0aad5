#!/usr/bin/env bash
# Builds Tandem for GPUs against the LibTorch inside an installed PyTorch (a CUDA pip wheel), with
# NCCL from the CUDA toolkit or from PyTorch's nvidia-nccl wheel. The other libraries come from the
# system, or from a bundle: run `eval "$(launch/bundle-unpack.sh BUNDLE PREFIX)"` first.
#
#   launch/build-cuda.sh [BUILD_DIR] [-- CMAKE_ARGS...]     (default build-cuda/; PYTHON=python3)
# Environment: TANDEM_TESTS=ON also configures the tests; TANDEM_TARGETS="a b" builds only those.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build-cuda}
shift || true
[ "${1:-}" = "--" ] && shift
python=${PYTHON:-python3}

# The torch folder itself, not its share/cmake: CMake then takes its libraries before any other
# LibTorch the machine has (CMakeLists.txt refuses a mix).
torch_root=$("$python" -c 'import os, torch; print(os.path.dirname(torch.__file__))') || {
  echo "build-cuda: '$python' cannot import torch (set PYTHON to a python with PyTorch)" >&2
  exit 2
}
# NCCL: the toolkit's, else the one PyTorch's wheel depends on (its library is only libnccl.so.2).
nccl_root=$("$python" - <<'PY' 2>/dev/null || true
import glob, os, nvidia
for base in nvidia.__path__:
    for header in glob.glob(os.path.join(base, "**", "include", "nccl.h"), recursive=True):
        print(os.path.dirname(os.path.dirname(header)))
        raise SystemExit
PY
)
args=(-DCMAKE_BUILD_TYPE=Release -DTANDEM_CUDA=ON -DTANDEM_TESTS="${TANDEM_TESTS:-OFF}"
      "-DCMAKE_PREFIX_PATH=${TANDEM_PREFIX_PATH:+$TANDEM_PREFIX_PATH;}$torch_root"
      # h5cc from a relocated bundle reports /usr paths; find HDF5 by its files instead.
      -DHDF5_C_COMPILER_EXECUTABLE=)
[ -n "$nccl_root" ] && [ ! -f /usr/local/cuda/include/nccl.h ] && args+=(-DNCCL_ROOT="$nccl_root")
echo "build-cuda: LibTorch from $torch_root${nccl_root:+, NCCL candidates $nccl_root}"
cmake -S . -B "$build" -G Ninja "${args[@]}" "$@" >"$build.configure.log" 2>&1 ||
  { cat "$build.configure.log" >&2; exit 1; }
grep -E "Tandem:|Torch|CUDA" "$build.configure.log" | head -5 || true
read -r -a targets <<<"${TANDEM_TARGETS:-}"
cmake --build "$build" -j "$(nproc)" ${targets[@]:+--target "${targets[@]}"}
