#!/usr/bin/env bash
# The speed of a file job (tandem-decode --input/--output) at 1 rank and at N, one thread a rank
# (--ranks pins each to a core): ROUNDS rounds, each a 1-rank run then an N-rank run of the same
# input into fresh outputs, lines/s from each run's summary (measured from the first chunk handed
# out, so model loading is left out); then the medians, their ratio, and whether every run wrote
# the bytes of the first. Then each rank's peak RSS (GNU time) at N ranks on the input and on its
# first 10,000 lines. Shared machines drift: compare the medians of one run of this script.
#   launch/bench-translate.sh CHECKPOINT INPUT [ROUNDS] [RANKS] [tandem-decode flags...]
#   launch/bench-translate.sh runs/tiny/last.h5 mono.en 5 2 --beam 4
# Environment: TANDEM_BUILD_DIR (default build).
set -euo pipefail
checkpoint=${1:?usage: bench-translate.sh CHECKPOINT INPUT [ROUNDS] [RANKS] [flags...]}
input=${2:?usage: bench-translate.sh CHECKPOINT INPUT [ROUNDS] [RANKS] [flags...]}
rounds=${3:-5}
ranks=${4:-2}
shift $(($# < 4 ? $# : 4))
bin=${TANDEM_BUILD_DIR:-build}/trainer/tools
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
work=$(mktemp -d /tmp/tandem-bench-translate-XXXXXX)
trap 'rm -rf "$work"' EXIT

# lines/s of one run: rate RANKS ROUND [flags...]; its output is kept as $work/out-RANKS-ROUND.
rate() {
  local n=$1 round=$2
  shift 2
  "$bin/tandem-decode" --checkpoint "$checkpoint" --input "$input" \
    --output "$work/out-$n-$round" --threads 1 --ranks "$n" "$@" 2>&1 >/dev/null |
    sed -n 's/.*wrote .*), \([0-9.]*\) lines\/s on.*/\1/p'
}
median() { sort -g | awk '{v[NR]=$1} END {print (NR%2 ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2)}'; }

one=() many=()
for round in $(seq "$rounds"); do
  one+=("$(rate 1 "$round" "$@")")
  many+=("$(rate "$ranks" "$round" "$@")")
  echo "round $round: 1 rank ${one[-1]} lines/s, $ranks ranks ${many[-1]} lines/s"
done
m1=$(printf '%s\n' "${one[@]}" | median)
mn=$(printf '%s\n' "${many[@]}" | median)
echo "median: 1 rank $m1 lines/s, $ranks ranks $mn lines/s, ratio $(awk "BEGIN {printf \"%.2f\", $mn / $m1}")"
same=yes
for out in "$work"/out-*; do
  [[ $out == *.job.json ]] || cmp -s "$out" "$work/out-1-1" || same="no: $out differs"
done
echo "every run wrote the same bytes: $same"

# Peak RSS of each rank, on the input and on its first 10,000 lines.
head -n 10000 "$input" >"$work/head.txt"
for file in "$input" "$work/head.txt"; do
  rm -rf "$work/rss.txt" "$work/rss.txt."*
  mpirun --oversubscribe -np "$ranks" --bind-to core -x OMP_NUM_THREADS=1 \
    -x OPENBLAS_NUM_THREADS=1 /usr/bin/time -f "rank peak RSS %M KiB" "$bin/tandem-decode" \
    --checkpoint "$checkpoint" --input "$file" --output "$work/rss.txt" --threads 1 "$@" 2>&1 |
    grep "peak RSS" | sed "s|^|$(wc -l <"$file") lines: |"
done
