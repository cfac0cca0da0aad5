#!/usr/bin/env bash
# Renders the training loss (and perplexity) of a metrics.jsonl file to a PNG with gnuplot.
#   launch/plot.sh runs/tiny/metrics.jsonl runs/tiny/loss.png
set -euo pipefail
metrics=${1:?usage: plot.sh METRICS.jsonl OUT.png}
out=${2:?usage: plot.sh METRICS.jsonl OUT.png}
[ -s "$metrics" ] || { echo "plot.sh: no metrics in '$metrics'" >&2; exit 2; }
command -v gnuplot >/dev/null || { echo "plot.sh: gnuplot is not installed (apt-get install gnuplot-nox)" >&2; exit 1; }
table=$(mktemp)
trap 'rm -f "$table"' EXIT
python3 -c '
import json, sys
for line in open(sys.argv[1]):
    r = json.loads(line)
    if "loss" in r: print(r["step"], r["loss"], r.get("tgt_tokens_per_s", 0))
' "$metrics" > "$table"
gnuplot <<GP
set terminal pngcairo size 900,500 noenhanced
set output "$out"
set title "Training loss: $metrics"
set xlabel "step"
set ylabel "loss (nats per target token)"
set grid
plot "$table" using 1:2 with lines linewidth 2 title "train loss"
GP
echo "$out"
