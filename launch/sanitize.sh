#!/usr/bin/env bash
# Builds Tandem with clang's sanitizers and runs CTest there (docs/sanitizers.md):
#   launch/sanitize.sh address [ctest args]   ASan + UBSan, every report fatal, in build-asan/
#   launch/sanitize.sh thread [ctest args]    TSan, in build-tsan/ (default: -L tsan, the tests of
#                                             Tandem's own threads)
#   launch/sanitize.sh --build-only fuzz DIR  what launch/fuzz.sh runs: ASan + UBSan + libFuzzer
# Installs clang 16 and its runtimes (Debian) besides launch/install-deps.sh's packages. LibTorch
# runs one intra-op thread; the suppressions of launch/sanitizers/ cover reports from inside
# libraries Tandem does not build, each with its reason.
set -euo pipefail
cd "$(dirname "$0")/.."
build_only=0
if [ "${1:-}" = "--build-only" ]; then build_only=1; shift; fi
kind=${1:-}
[ $# -gt 0 ] && shift
case "$kind" in
  address) build=${TANDEM_BUILD_DIR:-build-asan}; flags=(-DTANDEM_SANITIZE=address) ;;
  thread) build=${TANDEM_BUILD_DIR:-build-tsan}; flags=(-DTANDEM_SANITIZE=thread) ;;
  fuzz) build=${1:?fuzz needs the build folder}; shift
        flags=(-DTANDEM_SANITIZE=address -DTANDEM_FUZZ=ON) ;;
  *) echo "sanitize.sh: expected address, thread or --build-only fuzz DIR, got '$kind'" >&2; exit 2 ;;
esac

launch/install-deps.sh
if ! command -v clang++-16 >/dev/null || [ ! -d /usr/lib/llvm-16/lib/clang/16/lib/linux ]; then
  sudo=""; [ "$(id -u)" -ne 0 ] && sudo="sudo"
  { $sudo apt-get update -qq &&
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq clang-16 libclang-rt-16-dev llvm-16
  } >/dev/null || { echo "sanitize.sh: apt-get failed" >&2; exit 1; }
fi
# Sanitizer builds are CPU-only: CUDA is off (nvcc would not take clang's sanitizer flags).
# -O1 with line tables: the sanitizers' usual trade of speed, compile time and readable reports.
CC=clang-16 CXX=clang++-16 TANDEM_BUILD_DIR=$build launch/build.sh -DTANDEM_CUDA=OFF \
  "-DCMAKE_CXX_FLAGS_RELEASE=-O1 -gline-tables-only -DNDEBUG" "${flags[@]}"
[ "$build_only" -eq 1 ] && exit 0

supp=$PWD/launch/sanitizers
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
# alloc_dealloc_mismatch=0: the SentencePiece module is opened behind ASan (data/vocab/vocab.cpp,
# dlopen_deepbind), and what its operator new allocates, Tandem deletes.
export ASAN_OPTIONS=detect_leaks=1:alloc_dealloc_mismatch=0:suppressions=$supp/asan.supp
export LSAN_OPTIONS=suppressions=$supp/lsan.supp:print_suppressions=0
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1:suppressions=$supp/ubsan.supp
export TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1:suppressions=$supp/tsan.supp
args=("$@")
if [ "$kind" = thread ] && [ ${#args[@]} -eq 0 ]; then args=(-L tsan); fi
ctest --test-dir "$build" --output-on-failure --parallel "$(nproc)" "${args[@]}"
