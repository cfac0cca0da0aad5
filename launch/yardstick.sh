# The compiled PyTorch yardstick (../shared/bench/ref_train.py) beside gpu-check.sh's benchmarks,
# within one call: started first, so that torch.compile (minutes) runs while Tandem builds and is
# checked; paused (SIGSTOP) while Tandem's timed windows run; then given the machine alone for its
# own windows (REF_HANDSHAKE: it waits after its warm-up until told to go). Sourced by
# launch/gpu-check.sh; needs REF_DATA (train.en, train.es, spm.model).
#
#   yardstick_start SHAPE TOKENS PYTHON REF_TRAIN_PY OUT_DIR     (background; sets yardstick_pid)
#   yardstick_pause / yardstick_resume
#   yardstick_finish WAIT_S    prints "compile S | windows A B C | best B | median M" or why not
#                              (call it in the shell that started the yardstick, not in $(...):
#                              it waits for its child)

yardstick_pid=""
yardstick_dir=""
yardstick_log=""

yardstick_start() {  # SHAPE TOKENS PYTHON REF_TRAIN_PY OUT_DIR
  local shape=$1 tokens=$2 python=$3 ref=$4 out=$5
  yardstick_dir=$(mktemp -d /tmp/yardstick.XXXX)
  yardstick_log="$out/ref-$shape-$tokens.log"
  # A process group of its own, so that pausing it reaches the compiler's worker processes too.
  PYTHONUNBUFFERED=1 REF_DEVICE=cuda REF_AMP=bf16 REF_SDPA=1 REF_COMPILE=1 REF_DYNAMIC=1 REF_FUSED=1 REF_WARMUP=30 \
    REF_WINDOWS=3 REF_SHAPE=$shape REF_TOKENS=$tokens REF_VOCAB=8000 \
    REF_HANDSHAKE=$yardstick_dir setsid "$python" "$ref" "$REF_DATA" "$REF_DATA/spm.model" 20 \
    >"$yardstick_log" 2>&1 &
  yardstick_pid=$!
}

yardstick_signal() {  # its process group, or itself while it has none yet (just started)
  [ -n "$yardstick_pid" ] || return 1
  kill "-$1" -- "-$yardstick_pid" 2>/dev/null || kill "-$1" "$yardstick_pid" 2>/dev/null
}
yardstick_pause() { yardstick_signal STOP; }
yardstick_resume() { yardstick_signal CONT; }

# Why there is no figure, with the log's last lines: they travel with the summary, the log may not.
yardstick_no_figure() {  # WHY
  echo "no figure: $1 (see $yardstick_log); its last lines:"
  tail -n 15 "$yardstick_log" | sed 's/^/    | /'
}

yardstick_finish() {  # WAIT_S: how long to wait for its warm-up (compilation) to end
  local wait_s=$1 waited=0
  [ -n "$yardstick_pid" ] || { echo "not started"; return 1; }
  yardstick_resume
  while [ ! -e "$yardstick_dir/ready" ] && kill -0 "$yardstick_pid" 2>/dev/null &&
        [ "$waited" -lt "$wait_s" ]; do
    sleep 1
    waited=$((waited + 1))
  done
  if [ ! -e "$yardstick_dir/ready" ]; then
    yardstick_signal KILL
    wait "$yardstick_pid" 2>/dev/null
    yardstick_no_figure "still compiling after ${wait_s} s more, or it failed"
    return 1
  fi
  touch "$yardstick_dir/go"
  wait "$yardstick_pid"
  local compile windows
  compile=$(grep -o 'compilation included) in [0-9.]* s' "$yardstick_log" | grep -o '[0-9.]* s')
  windows=$(grep -o '"window_tokens_per_s": \[[^]]*\]' "$yardstick_log" | grep -o '\[.*\]')
  [ -n "$windows" ] || { yardstick_no_figure "it printed none"; return 1; }
  python3 - "$compile" "$windows" <<'PY'
import json, statistics, sys
windows = json.loads(sys.argv[2])
print(f"warm-up incl. compile {sys.argv[1]} (wall time, pauses included) | windows {' '.join(f'{w:.0f}' for w in windows)}"
      f" | best {max(windows):.0f} | median {statistics.median(windows):.0f}")
PY
}
