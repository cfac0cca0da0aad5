#!/usr/bin/env bash
# The README's main job: install, build, prepare the Bible English→Spanish corpus, train (one rank
# per core, tandem-train --ranks), evaluate on the test split, translate a few sentences.
# Reruns are incremental: nothing is rebuilt or re-prepared without need, and training resumes.
# Ctrl-C or SIGTERM while training: every rank finishes its step and saves, then the script ends.
# A rank that dies is relaunched from the newest checkpoint, twice at most (--max-restarts 2).
# Environment: TANDEM_MINUTES (training wall time of this run, default 25), TANDEM_RANKS
# (default auto: one per core), TANDEM_RUN (checkpoint dir, default runs/tiny).
set -euo pipefail
cd "$(dirname "$0")/.."
minutes=${TANDEM_MINUTES:-25}
ranks=${TANDEM_RANKS:-auto}
run=${TANDEM_RUN:-runs/tiny}
bin=${TANDEM_BUILD_DIR:-build}/trainer/tools

step() { printf '\n== %s\n' "$*"; }

step "1/6 dependencies and build"
launch/install-deps.sh
# The tools this job runs and their libraries, not the test suite (launch/test.sh builds the rest).
TANDEM_BUILD_TARGETS="tandem-prep tandem-train tandem-eval tandem-decode" launch/build.sh

step "2/6 corpus text (data/prepare/bible.sh)"
[ -s work/bible/test.es ] || data/prepare/bible.sh work/bible

step "3/6 binarized corpus (tandem-prep)"
if [ ! -s work/bible/corpus.h5 ]; then
  "$bin/tandem-prep" --train-src work/bible/train.en --train-tgt work/bible/train.es \
    --valid-src work/bible/valid.en --valid-tgt work/bible/valid.es \
    --test-src work/bible/test.en --test-tgt work/bible/test.es \
    --vocab-size 8000 --out work/bible/corpus.h5
else
  echo "work/bible/corpus.h5 is up to date"
fi

step "4/6 training: $ranks rank(s), $minutes minutes (resumes from $run if it holds checkpoints)"
# The launcher runs in the background so that this script can pass a SIGTERM on and wait for the
# checkpoint; a terminal's Ctrl-C reaches the launcher by itself (same process group).
"$bin/tandem-train" --ranks "$ranks" --max-restarts 2 --config configs/tiny.yaml \
  --set "checkpoint.dir=$run" --set "train.max_minutes=$minutes" &
job=$!
trap 'kill -TERM "$job" 2>/dev/null' TERM HUP
trap ':' INT
status=0
wait "$job" || status=$?
while kill -0 "$job" 2>/dev/null; do status=0; wait "$job" || status=$?; done
trap - TERM HUP INT
[ "$status" -eq 0 ] || { echo "training ended with status $status" >&2; exit "$status"; }

step "5/6 evaluation on the test split (tandem-eval)"
"$bin/tandem-eval" --checkpoint "$run/last.h5" --split test --output "$run/test.hyp.es"

step "6/6 sample translations (tandem-decode)"
head -n 5 work/bible/test.en > "$run/samples.en"
"$bin/tandem-decode" --checkpoint "$run/last.h5" < "$run/samples.en" > "$run/samples.es"
paste -d '\n' "$run/samples.en" "$run/samples.es" | sed 'n;s/^/   → /'

plot=""
if launch/plot.sh "$run/metrics.jsonl" "$run/loss.png" >/dev/null 2>&1; then plot="$run/loss.png"; fi
cat <<MSG

Done.
  checkpoint:   $run/last.h5
  metrics:      $run/metrics.jsonl
  tensorboard:  tensorboard --logdir $(dirname "$run")   (event files in $run; docs/monitoring.md)
  plot:         ${plot:-(gnuplot not available)}
  translations: $run/test.hyp.es
MSG
