#!/usr/bin/env bash
# The README's test command: installs dependencies, builds, runs every CTest suite (labels: unit,
# mpi, e2e; gpu, skipped where no GPU is visible). Extra arguments go to ctest, e.g.
# `launch/test.sh -L unit`. CTranslate2's Python package, which the export test loads exported
# models with, is installed by launch/ctranslate2.sh; Hugging Face transformers, which the import
# test builds and runs a MarianMT model with, by launch/transformers.sh (with the PyPI PyTorch);
# TensorBoard, which the TensorBoard test reads the event files with, by launch/tensorboard.sh;
# eflomal, the word aligner that launch/align.sh runs for the alignment test, by launch/eflomal.sh.
# TANDEM_LIBTORCH=wheel builds and tests against the PyPI wheel's LibTorch (launch/torch-wheel.sh)
# with the NCCL backend (TANDEM_CUDA=ON, CUDA toolkit in /usr/local/cuda) in build-wheel/, instead
# of Debian's LibTorch in build/. TANDEM_BUILD_DIR names another folder.
set -euo pipefail
cd "$(dirname "$0")/.."
launch/install-deps.sh
launch/ctranslate2.sh >/dev/null
launch/transformers.sh >/dev/null
launch/tensorboard.sh >/dev/null
launch/eflomal.sh >/dev/null
case "${TANDEM_LIBTORCH:-debian}" in
  debian)
    build=${TANDEM_BUILD_DIR:-build}
    TANDEM_BUILD_DIR=$build launch/build.sh
    ;;
  wheel)
    torch=$(launch/torch-wheel.sh)
    build=${TANDEM_BUILD_DIR:-build-wheel}
    TANDEM_BUILD_DIR=$build launch/build.sh -DTANDEM_CUDA=ON "-DCMAKE_PREFIX_PATH=$torch"
    ;;
  *)
    echo "test.sh: TANDEM_LIBTORCH='$TANDEM_LIBTORCH': expected debian or wheel" >&2
    exit 2
    ;;
esac
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# One test per core at a time: the long e2e suites wait on watchdogs and child processes much of the
# time (10.5 min instead of 15 on 2 cores). `-j1` among the arguments runs them one by one.
ctest --test-dir "$build" --output-on-failure --parallel "$(nproc)" "$@"
