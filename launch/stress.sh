#!/usr/bin/env bash
# Runs the mpi and e2e suites N times in a row while busy loops keep every core loaded, each time
# with GoogleTest's shuffled order under its own seed, and reports every failing test with the
# round and seed that reproduce it. Not part of CI: a check that the multi-process tests do not
# depend on timing.
#
#   launch/stress.sh [ROUNDS] [BUILD_DIR]        (default 20 rounds, build/)
# Environment: STRESS_LABELS (default "mpi|e2e"), STRESS_LOAD (busy loops; default: one per core).
# Reproduce a failure: GTEST_SHUFFLE=1 GTEST_RANDOM_SEED=<seed> ctest --test-dir BUILD -R <suite>
set -uo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-20}
build=${2:-build}
labels=${STRESS_LABELS:-mpi|e2e}
load=${STRESS_LOAD:-$(nproc)}
if [ ! -f "$build/CTestTestfile.cmake" ]; then
  echo "stress: no CTest tree in '$build' (bash launch/build.sh first)" >&2
  exit 2
fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

loops=()
stop_load() { [ ${#loops[@]} -eq 0 ] || kill "${loops[@]}" 2>/dev/null; }
trap stop_load EXIT
for _ in $(seq "$load"); do
  (while :; do :; done) &
  loops+=($!)
done
echo "stress: $rounds round(s) of ctest -L '$labels' in $build, $load busy loop(s) beside them"

log=$(mktemp -d)
failed_rounds=0
start=$(date +%s)
for round in $(seq "$rounds"); do
  seed=$((1000 + round))
  t0=$(date +%s)
  GTEST_SHUFFLE=1 GTEST_RANDOM_SEED=$seed ctest --test-dir "$build" -L "$labels" \
    --output-on-failure >"$log/round-$round.txt" 2>&1
  rc=$?
  summary=$(grep -E "tests passed|tests failed" "$log/round-$round.txt" | tail -1)
  echo "round $round (seed $seed): rc $rc, $(( $(date +%s) - t0 )) s, $summary"
  if [ $rc -ne 0 ]; then
    failed_rounds=$((failed_rounds + 1))
    grep -E "^\[  FAILED  \] [A-Za-z0-9_]+\.[A-Za-z0-9_/]+|\(Failed\)|\(Timeout\)|\*\*\*" \
      "$log/round-$round.txt" | sort -u | sed "s/^/  round $round seed $seed: /"
    cp "$log/round-$round.txt" "stress-round-$round.log"
    echo "  full output: stress-round-$round.log"
  fi
done
echo "stress: $failed_rounds of $rounds round(s) failed, $(( $(date +%s) - start )) s in all"
rm -rf "$log"
[ $failed_rounds -eq 0 ]
