#!/usr/bin/env bash
# The GPU acceptance run (docs/gpus.md), on a machine with one GPU and a CUDA PyTorch but possibly
# nothing else. It unpacks a bundle (launch/bundle-pack.sh), builds with launch/build-cuda.sh, then
# checks, each one PASS or FAIL in the summary at the end:
#  - ctest -L gpu: the GPU against the CPU (tests/gpu);
#  - unless QUICK=1, the checks with Tandem's tools (launch/gpu-check-tools.sh): the tiny config
#    on the GPU against the CPU in fp32 and bf16, every tool, bitwise resume, a skipped
#    non-finite step, a rank shown one GPU, CTranslate2 on the GPU (CT2_DIR) against
#    tandem-decode, and an imported MarianMT model fine-tuned in bf16 (REF_DATA);
# and measures, in bf16 with 30 warm-up steps and the median of 3 windows of 20: the base and
# big shapes (untied); configs/base.yaml as shipped (tied, data.max_tokens: auto) and its two
# differences from the base shape one at a time (SHIPPED=0 leaves these out); the base shape
# under each AB_ENV assignment. Beside them the strong PyTorch yardstick (bf16 autocast, SDPA,
# torch.compile with one dynamic-shape graph, fused Adam; launch/yardstick.sh): started before the
# build so that it compiles meanwhile (the build and the CPU run are niced to leave its compiler a
# core), paused while Tandem's windows run, then alone for its own 3 windows. Ends with profile
# summaries of the base shape and of base.yaml as shipped. Exits 1 when any check fails (the
# benchmarks only print, unless MIN_MFU or MIN_RATIO is set).
#
#   launch/gpu-check.sh BUNDLE_DIR CORPUS_H5 OUT_DIR REF_TRAIN_PY [MAX_TOKENS...]
# Environment: REF_DATA=DIR holds the yardstick's train.en and train.es (spm.model, the corpus's
# /vocab, is written there when missing); without it (or with YARDSTICK=0) only Tandem is
# measured. REF_SHAPE (default base) is the shape the yardstick runs, at the first MAX_TOKENS;
# REF_WAIT_S (default 600) how long to wait for its compilation once Tandem is done
# (TORCHINDUCTOR_CACHE_DIR, when set, is its compile cache). SHAPES="base big" (the default) names the benchmarked shapes, SKIP_BENCH=1 skips
# them. The issue's bars, when set: MIN_MFU=40 fails a base-shape MFU below 40% (MIN_MFU_BIG=45
# the big shape's; it defaults to MIN_MFU), MIN_RATIO=1.5 fails Tandem's median below 1.5x the
# compiled yardstick's best window (with REF_DATA), MIN_MFU_SHIPPED=20 the shipped config's MFU
# below 20%. BASE_CURVES=1 also trains configs/base.yaml 1,000 steps as shipped and at the 4,096
# tokens per rank it shipped with before (while the checks run and the yardstick compiles), and
# reports their losses. AB_KERNELS=1 also measures the base shape with TANDEM_KERNELS=aten
# (LibTorch's kernels and attention choice in the same build). GPU_CHECK_DEADLINE=EPOCH_S
# (launch/gpu-session.sh sets it): the yardstick waits no later than a minute before it, and the
# profiles are skipped within 90 s of it.
set -uo pipefail
cd "$(dirname "$0")/.."
if [ $# -lt 4 ]; then
  echo "usage: launch/gpu-check.sh BUNDLE_DIR CORPUS_H5 OUT_DIR REF_TRAIN_PY [MAX_TOKENS...]" >&2
  exit 2
fi
bundle=$1 corpus=$(realpath "$2") out=$(mkdir -p "$3" && realpath "$3") ref=$(realpath "$4")
shift 4
sizes=("${@:-32768}")
python=${PYTHON:-python3}
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader

eval "$(bash launch/bundle-unpack.sh "$bundle" /tmp/tandem-deps)"
source launch/yardstick.sh
data=${REF_DATA:-}
if [ "${SKIP_BENCH:-0}" != 1 ] && [ -n "$data" ] && [ "${YARDSTICK:-1}" = 1 ]; then
  if [ ! -f "$data/spm.model" ]; then  # the corpus's SentencePiece model, as the yardstick reads it
    "$python" -c 'import sys, h5py; open(sys.argv[2], "wb").write(h5py.File(sys.argv[1], "r")["vocab"][()].tobytes())' \
      "$corpus" "$data/spm.model" 2>/dev/null ||
      h5dump -d /vocab -b LE -o "$data/spm.model" "$corpus" >/dev/null
  fi
  yardstick_start "${REF_SHAPE:-base}" "${sizes[0]}" "$python" "$ref" "$out"
  echo "yardstick: compiling in the background (pid $yardstick_pid)"
fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
summary=$out/summary.txt
: >"$summary"
record() {  # NAME OK(0/1) DETAIL: written at once, so a run cut short keeps what it checked
  local verdict=PASS
  [ "$2" = 0 ] || verdict=FAIL
  printf '%-4s %-34s %s\n' "$verdict" "$1" "$3" >>"$summary"
  echo "== $verdict $1 $3"
}

# min(CAP, the seconds until GPU_CHECK_DEADLINE less RESERVE), never below 0
seconds_left() {  # CAP RESERVE
  local left=$1
  if [ -n "${GPU_CHECK_DEADLINE:-}" ]; then
    left=$((GPU_CHECK_DEADLINE - $(date +%s) - $2))
    [ "$left" -gt "$1" ] && left=$1
    [ "$left" -lt 0 ] && left=0
  fi
  echo "$left"
}

start=$(date +%s)
tools_targets="tandem-train tandem-eval tandem-decode tandem-average tandem-bench tandem-bench-decode
               tandem-export tandem-import tandem-prep"
# Niced, as is the CPU training below: the yardstick's compiler (one Python thread, most of its
# minutes) keeps a core of its own.
if ! TANDEM_TESTS=ON TANDEM_TARGETS="${tools_targets//$'\n'/ } gpu_tests device_tests" \
    nice -n 10 bash launch/build-cuda.sh build-cuda >"$out/build.log" 2>&1; then
  grep -E "error|Error" -m 30 "$out/build.log"; tail -20 "$out/build.log"; exit 1
fi
echo "build: $(( $(date +%s) - start )) s"
tools=build-cuda/trainer/tools
work=$(mktemp -d /tmp/gpu-check.XXXX)

ctest --test-dir build-cuda -L gpu --timeout 180 --output-on-failure >"$out/ctest-gpu.log" 2>&1
rc=$?
record "ctest -L gpu" $rc "$(grep -E 'tests passed|tests failed' "$out/ctest-gpu.log" | tail -1)"
ctest --test-dir build-cuda -R device_tests >>"$out/ctest-gpu.log" 2>&1
record "device selection (device_tests)" $? ""

# configs/base.yaml on one GPU, 1,000 steps as shipped and at 4,096 tokens per rank (BASE_CURVES=1),
# one after the other in the background; their speed is measured with the other benchmarks.
curve_variants=(shipped 4096)
curve_args() {  # VARIANT
  [ "$1" = shipped ] || echo "--set data.max_tokens=$1"
}
if [ "${BASE_CURVES:-0}" = 1 ]; then
  (
    for variant in "${curve_variants[@]}"; do
      # shellcheck disable=SC2046
      "$tools/tandem-train" --config configs/base.yaml --set "data.corpus=\"$corpus\"" \
        --set "checkpoint.dir=\"$work/base-$variant\"" --set train.max_steps=1000 \
        --set train.max_minutes=0 --set valid.every_steps=0 --set log.every_steps=100 \
        --set checkpoint.every_steps=0 --set train.device=cuda $(curve_args "$variant") \
        >"$out/base-$variant-train.log" 2>&1
      echo $? >"$work/base-$variant.rc"
    done
  ) &
  curves_pid=$!
fi

# shellcheck source=launch/gpu-check-tools.sh
source launch/gpu-check-tools.sh
[ "${QUICK:-0}" = 1 ] || tiny_checks
[ -n "${CT2_DIR:-}" ] && ctranslate2_check
[ "${QUICK:-0}" = 1 ] || [ -z "${REF_DATA:-}" ] || marian_check
[ "${QUICK:-0}" = 1 ] || cpu_comparison

if [ "${SKIP_BENCH:-0}" != 1 ]; then
  declare -A median
  bench() {  # CONFIG TIE TOKENS LOG [ARGS...]: bf16 on the GPU, 30 warm-up steps
    local config=$1 tie=$2 tokens=$3 log=$4
    shift 4
    "$tools/tandem-bench" --corpus "$corpus" --config "configs/$config.yaml" \
      --set "model.tie_embeddings=$tie" --set "data.max_tokens=$tokens" --set train.device=cuda \
      --set train.precision=bf16 --warmup 30 "$@" >"$log" 2>&1
  }
  bench_line() {  # LOG: "R tok/s, MFU M%, windows A B C" (R the median window)
    echo "$(grep -o '"tgt_tokens_per_s":[0-9.]*' "$1" | cut -d: -f2) tok/s," \
      "$(grep -o 'MFU [0-9.]*%' "$1" | head -1)," \
      "windows $(grep -o '= [0-9.]* tokens/s' "$1" | cut -d' ' -f2 | paste -sd' ')"
  }
  mfu_at_least() {  # LOG PERCENT
    local mfu
    mfu=$(grep -o 'MFU [0-9.]*%' "$1" | head -1)
    "$python" -c "import sys; sys.exit(0 if float('${mfu//[!0-9.]/}' or 0) >= $2 else 1)"
  }
  [ -n "${curves_pid:-}" ] && wait "$curves_pid"  # the GPU to the benchmarks alone
  yardstick_pause  # Tandem's windows run alone
  for shape in ${SHAPES:-base big}; do
    for tokens in "${sizes[@]}"; do
      log="$out/bench-$shape-$tokens.log"
      bench "$shape" false "$tokens" "$log" --steps 20 --windows 3
      rc=$?
      rate=$(grep -o '"tgt_tokens_per_s":[0-9.]*' "$log" | cut -d: -f2)
      median[$shape-$tokens]=${rate:-0}
      record "tandem-bench $shape $tokens exits 0" $rc "$(bench_line "$log")"
      if [ -n "${MIN_MFU:-}" ]; then
        need=$MIN_MFU
        [ "$shape" = big ] && need=${MIN_MFU_BIG:-$MIN_MFU}
        mfu_at_least "$log" "$need"
        record "$shape $tokens MFU >= $need%" $? "$(grep -o 'MFU [0-9.]*%' "$log" | head -1)"
      fi
    done
  done
  # configs/base.yaml as shipped (tied embeddings, data.max_tokens: auto, which is 65,536 on an
  # H100 or H200), then its two differences from the base shape above one at a time.
  if [ "${SHIPPED:-1}" = 1 ]; then
    for variant in "shipped true auto" "tied true ${sizes[0]}" "65536 false 65536"; do
      read -r name tie tokens <<<"$variant"
      log="$out/bench-base-$name.log"
      bench base "$tie" "$tokens" "$log" --steps 20 --windows 3
      record "base.yaml $name (tie $tie, $tokens tokens)" $? \
        "$(bench_line "$log"), max_tokens $(grep -o '"max_tokens":[0-9]*' "$log" | cut -d: -f2)"
      if [ "$name" = shipped ] && [ -n "${MIN_MFU_SHIPPED:-}" ]; then
        mfu_at_least "$log" "$MIN_MFU_SHIPPED"
        record "base.yaml as shipped MFU >= $MIN_MFU_SHIPPED%" $? "$(grep -o 'MFU [0-9.]*%' "$log" | head -1)"
      fi
    done
  fi
  # AB_ENV="A=1 B=2": the base shape again under each assignment, one run each (a switch of
  # this build against its default, measured in the same call).
  for assignment in ${AB_ENV:-}; do
    log="$out/bench-base-${sizes[0]}-${assignment//[^A-Za-z0-9_.-]/_}.log"
    env "$assignment" "$tools/tandem-bench" --corpus "$corpus" --config configs/base.yaml \
      --set model.tie_embeddings=false --set "data.max_tokens=${sizes[0]}" \
      --set train.device=cuda --set train.precision=bf16 --warmup 30 --steps 20 --windows 3 \
      >"$log" 2>&1
    record "tandem-bench base ${sizes[0]} $assignment" $? "$(bench_line "$log")"
  done
  if [ "${AB_KERNELS:-0}" = 1 ]; then  # Tandem's kernel choices against LibTorch's, one build
    log="$out/bench-base-${sizes[0]}-aten.log"
    TANDEM_KERNELS=aten bench base false "${sizes[0]}" "$log" --steps 20 --windows 3
    record "tandem-bench base ${sizes[0]} TANDEM_KERNELS=aten" $? "$(bench_line "$log")"
  fi
  if [ "${BASE_CURVES:-0}" = 1 ]; then  # the old recipe's 4,096 tokens (its curve's speed)
    log="$out/base-4096-bench.log"
    bench base true 4096 "$log" --steps 20 --windows 3
    record "base.yaml 4096: tandem-bench" $? "$(bench_line "$log")"
  fi
  # Where the GPU time goes: 5 steps under the profiler after 30 warm-up steps, of the base shape
  # and of base.yaml as shipped (each while a minute and a half is left); summarised in the
  # background.
  profiles=("base-${sizes[0]} false ${sizes[0]}")
  [ "${SHIPPED:-1}" = 1 ] && profiles+=("shipped true auto")
  for profile in "${profiles[@]}"; do
    read -r name tie tokens <<<"$profile"
    [ "$(seconds_left 90 0)" -ge 90 ] || break
    bench base "$tie" "$tokens" "$out/profile-$name-run.log" --steps 5 --windows 1 \
      --profile "$work/trace-$name.json"
    "$python" launch/profile-summary.py "$work/trace-$name.json" 30 >"$out/profile-$name.txt" 2>&1 &
  done
  if [ -n "$yardstick_pid" ]; then
    ref_shape=${REF_SHAPE:-base}
    # Not in $(...): a subshell cannot wait for the yardstick, which is this shell's child.
    yardstick_finish "$(seconds_left "${REF_WAIT_S:-600}" 60)" >"$out/ref-line.txt"
    ref_ok=$?
    ref_line=$(cat "$out/ref-line.txt")
    echo "   yardstick $ref_shape ${sizes[0]} (compiled PyTorch): $ref_line"
    echo "yardstick $ref_shape ${sizes[0]}: $ref_line" >>"$summary"
    best=$(echo "$ref_line" | grep -o 'best [0-9]*' | cut -d' ' -f2)
    ratio=0  # no yardstick figure: no ratio
    [ -n "$best" ] && ratio=$("$python" -c "print(f'{${median[$ref_shape-${sizes[0]}]:-0} / $best:.2f}')")
    echo "   $ref_shape ${sizes[0]}: tandem ${median[$ref_shape-${sizes[0]}]:-?} (median) / pytorch ${best:-?} (best window) = ${ratio}x"
    if [ -n "${MIN_RATIO:-}" ]; then
      "$python" -c "import sys; sys.exit(0 if $ref_ok == 0 and $ratio >= $MIN_RATIO else 1)"
      record "$ref_shape ${sizes[0]} >= ${MIN_RATIO}x compiled PyTorch" $? \
        "tandem ${median[$ref_shape-${sizes[0]}]:-?} / pytorch best window ${best:-?} = ${ratio}x"
    fi
  fi
  wait  # the profile summaries
fi

if [ -n "${curves_pid:-}" ]; then
  wait "$curves_pid" 2>/dev/null
  for variant in "${curve_variants[@]}"; do
    record "base.yaml $variant: 1,000 steps" "$(cat "$work/base-$variant.rc" 2>/dev/null || echo 1)" \
      "$(grep -o 'max_tokens auto: [0-9]* tokens' "$out/base-$variant-train.log" | head -1) loss at 100, 200, ... 1000: $(
        "$python" -c 'import json, sys; print(" ".join("%.3f" % r["loss"] for r in map(json.loads, open(sys.argv[1])) if "loss" in r and r["step"] % 100 == 0))' \
          "$work/base-$variant/metrics.jsonl" 2>/dev/null)"
  done
fi

echo
for f in "$out"/profile-*.txt; do [ -f "$f" ] && { echo "$f:"; head -45 "$f"; }; done
echo
echo "summary ($(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)):"
cat "$summary"
! grep -q '^FAIL' "$summary"
