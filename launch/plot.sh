#!/usr/bin/env bash
# Renders a training run's metrics.jsonl to a PNG with gnuplot: training and validation loss
# against steps (left axis) and validation BLEU (right axis), when the run validated.
#   launch/plot.sh runs/tiny/metrics.jsonl runs/tiny/loss.png
set -euo pipefail
metrics=${1:?usage: plot.sh METRICS.jsonl OUT.png}
out=${2:?usage: plot.sh METRICS.jsonl OUT.png}
[ -s "$metrics" ] || { echo "plot.sh: no metrics in '$metrics'" >&2; exit 2; }
command -v gnuplot >/dev/null || { echo "plot.sh: gnuplot is not installed (apt-get install gnuplot-nox)" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
python3 - "$metrics" "$work" <<'PY'
import json, sys
train = open(sys.argv[2] + "/train.tsv", "w")
valid = open(sys.argv[2] + "/valid.tsv", "w")
for line in open(sys.argv[1]):
    r = json.loads(line)
    if "loss" in r:
        print(r["step"], r["loss"], file=train)
    if "valid_loss" in r:
        print(r["step"], r["valid_loss"], r.get("valid_bleu", 0), file=valid)
PY
plots="\"$work/train.tsv\" using 1:2 with lines linewidth 2 title \"train loss\""
if [ -s "$work/valid.tsv" ]; then
  plots+=", \"$work/valid.tsv\" using 1:2 with linespoints linewidth 2 title \"valid loss\""
  plots+=", \"$work/valid.tsv\" using 1:3 axes x1y2 with linespoints linewidth 2 title \"valid BLEU\""
fi
gnuplot <<GP
set terminal pngcairo size 900,500 noenhanced
set output "$out"
set title "Training run: $metrics"
set xlabel "step"
set ylabel "loss (nats per target token)"
set y2label "BLEU"
set y2tics
set ytics nomirror
set grid
set key top center
plot $plots
GP
echo "$out"
