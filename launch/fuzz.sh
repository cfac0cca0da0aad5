#!/usr/bin/env bash
# Fuzzes Tandem's readers of outside input with libFuzzer (docs/sanitizers.md): builds the targets
# of tests/fuzz with clang, ASan + UBSan and libFuzzer's coverage in build-fuzz/ (or
# $TANDEM_BUILD_DIR), then runs each named target (all by default: config text vocab corpus
# manifest checkpoint safetensors markup) for FUZZ_SECONDS (default 1200) on FUZZ_JOBS at a time (default: the
# cores). Each starts from its seeds (real files Tandem's code writes) and tests/fuzz/inputs/<t>/;
# what it learns goes to work/fuzz/<t>/corpus/, a crash, hang or oversized allocation to
# work/fuzz/<t>/ (crash-*, timeout-*, oom-*), to be turned into a file of tests/fuzz/inputs/<t>/.
# Prints per target the executions, the coverage and what it found.
set -euo pipefail
cd "$(dirname "$0")/.."
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(config text vocab corpus manifest checkpoint safetensors markup)
seconds=${FUZZ_SECONDS:-1200}
jobs=${FUZZ_JOBS:-$(nproc)}
build=${TANDEM_BUILD_DIR:-build-fuzz}
for t in "${targets[@]}"; do
  case "$t" in config|text|vocab|corpus|manifest|checkpoint|safetensors) ;;
    *) echo "fuzz.sh: no target '$t' (config text vocab corpus manifest checkpoint" \
         "safetensors)" >&2; exit 2 ;;
  esac
done
TANDEM_BUILD_TARGETS="${targets[*]/#/fuzz_}" launch/sanitize.sh --build-only fuzz "$build" >&2
out=work/fuzz
mkdir -p "$out"

run_target() {
  local t=$1 dir=$out/$1
  mkdir -p "$dir/corpus"
  # One LibTorch thread; allocations past 2.5 GB (the RSS limit too) are findings, as are inputs
  # that take over 20 s.
  TANDEM_FUZZ_SEEDS=$dir/corpus OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 \
    ASAN_OPTIONS=detect_leaks=0:alloc_dealloc_mismatch=0 \
    "$build/tests/fuzz/fuzz_$t" -max_total_time="$seconds" -rss_limit_mb=2560 -timeout=20 \
    -print_final_stats=1 -artifact_prefix="$dir/" "$dir/corpus" "tests/fuzz/inputs/$t" \
    >"$dir.log" 2>&1 || true
}

summary() {
  local t=$1 dir=$out/$1 runs cov found
  runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$dir.log" | grep -o '[0-9]*$' || true)
  cov=$(grep -E '^#[0-9]+[[:space:]]+(DONE|pulse|NEW|REDUCE|INITED)' "$dir.log" | tail -1 |
        grep -oE 'cov: [0-9]+ ft: [0-9]+' || true)
  found=$(cd "$dir" && ls -1 crash-* timeout-* oom-* leak-* 2>/dev/null | tr '\n' ' ' || true)
  printf '%-12s %6ss  executions %-10s %-22s corpus %5s  findings: %s\n' "$t" "$seconds" \
    "${runs:-?}" "${cov:-cov: ?}" "$(ls "$dir/corpus" | wc -l)" "${found:-none}"
}

running=0
for t in "${targets[@]}"; do
  run_target "$t" &
  running=$((running + 1))
  if [ "$running" -ge "$jobs" ]; then wait -n; running=$((running - 1)); fi
done
wait
for t in "${targets[@]}"; do summary "$t"; done
