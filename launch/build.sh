#!/usr/bin/env bash
# Configures (once) and builds Tandem into build/ (or $TANDEM_BUILD_DIR); incremental on reruns.
# Arguments go to CMake's first configure, e.g. -DTANDEM_CUDA=ON -DCMAKE_PREFIX_PATH=<torch>.
# TANDEM_BUILD_TARGETS (space-separated) builds only those targets.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${TANDEM_BUILD_DIR:-build}
if [ ! -f "$build/build.ninja" ]; then
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release "$@" >"$build.configure.log" 2>&1 ||
    { cat "$build.configure.log" >&2; exit 1; }
  grep "Tandem:" "$build.configure.log" || true  # which LibTorch, CUDA and NCCL
fi
# shellcheck disable=SC2086  # the targets are words
cmake --build "$build" -j "$(nproc)" ${TANDEM_BUILD_TARGETS:+--target $TANDEM_BUILD_TARGETS}
