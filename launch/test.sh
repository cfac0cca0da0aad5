#!/usr/bin/env bash
# The README's test command: installs dependencies, builds, runs every CTest suite
# (labels: unit, mpi, e2e). Extra arguments go to ctest, e.g. `launch/test.sh -L unit`.
set -euo pipefail
cd "$(dirname "$0")/.."
launch/install-deps.sh
launch/build.sh
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
ctest --test-dir "${TANDEM_BUILD_DIR:-build}" --output-on-failure "$@"
