#!/usr/bin/env bash
# Configures (once) and builds Tandem into build/ (or $TANDEM_BUILD_DIR); incremental on reruns.
# Arguments go to CMake's first configure, e.g. -DTANDEM_CUDA=ON -DCMAKE_PREFIX_PATH=<torch>.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${TANDEM_BUILD_DIR:-build}
if [ ! -f "$build/build.ninja" ]; then
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release "$@" >"$build.configure.log" 2>&1 ||
    { cat "$build.configure.log" >&2; exit 1; }
  grep "Tandem:" "$build.configure.log" || true  # which LibTorch, CUDA and NCCL
fi
cmake --build "$build" -j "$(nproc)"
