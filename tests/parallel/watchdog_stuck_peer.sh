#!/bin/sh
# Expects the watchdog to end a job whose peer is stuck: `mpirun -np 2 watchdog_stuck_peer MODE`
# must exit non-zero within the 2 s timeout + 30 s, with rank 0's report of collective #2.
# Usage: watchdog_stuck_peer.sh MPIEXEC BINARY sync|async
set -u
mpiexec=$1
binary=$2
mode=$3
case "$mode" in
  sync) collective=all_reduce_sum ;;
  async) collective=all_reduce_sum_async ;;
  *) echo "usage: $0 MPIEXEC BINARY sync|async" >&2; exit 2 ;;
esac
log=$(mktemp)
trap 'rm -f "$log"' EXIT
start=$(date +%s)
"$mpiexec" --oversubscribe -np 2 "$binary" "$mode" >"$log" 2>&1
status=$?
elapsed=$(($(date +%s) - start))
cat "$log"
expected="[tandem][rank 0] error: collective $collective #2 did not complete within 2 s; a peer is dead or stuck"
if [ "$status" -eq 0 ]; then
  echo "FAIL: mpirun exited 0; the watchdog should have ended the job"
  exit 1
fi
if ! grep -qF "$expected" "$log"; then
  echo "FAIL: no line '$expected'"
  exit 1
fi
if [ "$elapsed" -gt 32 ]; then
  echo "FAIL: the job ended after ${elapsed} s, later than the 2 s timeout + 30 s"
  exit 1
fi
echo "PASS: mpirun exited with status $status after ${elapsed} s"
