#!/usr/bin/env bash
# The GPU acceptance run (docs/gpus.md), on a machine with one GPU and a CUDA PyTorch but possibly
# nothing else. It unpacks a bundle (launch/bundle-pack.sh), builds with launch/build-cuda.sh, then
# checks, each one PASS or FAIL in the summary at the end:
#  - ctest -L gpu: the GPU against the CPU (tests/gpu);
#  - the tiny config 200 steps on the GPU (one rank, NCCL, fp32) and on the CPU: losses within 1%;
#  - every tool exits 0: train, resume, eval, decode, average, bench-decode, bench;
#  - the tiny config 200 steps in bf16 on the GPU: loss within 2% of the CPU's fp32;
#  - resuming on the GPU is bitwise: 10 + 10 steps give the checkpoint 20 steps give; in bf16,
#    the loss at step 20 within 0.5%;
#  - a non-finite gradient makes the step skip, and training goes on;
#  - a rank shown one GPU by CUDA_VISIBLE_DEVICES (as SLURM's --gpus-per-task=1 does) trains;
# and measures the base and big shapes in bf16, both with 30 warm-up steps and the median of 3
# windows of 20, beside the strong PyTorch yardstick (bf16 autocast, SDPA, torch.compile with one
# dynamic-shape graph, fused Adam; launch/yardstick.sh): started before the build so that it
# compiles meanwhile, paused while Tandem's windows run, then alone for its own 3 windows. Ends
# with a profile summary of the base shape. Exits 1 when any check fails (the benchmarks only
# print, unless MIN_MFU or MIN_RATIO is set).
#
#   launch/gpu-check.sh BUNDLE_DIR CORPUS_H5 OUT_DIR REF_TRAIN_PY [MAX_TOKENS...]
# Environment: REF_DATA=DIR holds the yardstick's train.en and train.es (spm.model, the corpus's
# /vocab, is written there when missing); without it only Tandem is measured. REF_SHAPE (default
# base) is the shape the yardstick runs, at the first MAX_TOKENS; REF_WAIT_S (default 600) how long
# to wait for its compilation once Tandem is done. SHAPES="base big" (the default) names the
# benchmarked shapes, SKIP_BENCH=1 skips them. The issue's bars, when set: MIN_MFU=40 fails a
# base-shape MFU below 40% (MIN_MFU_BIG=45 the big shape's; it defaults to MIN_MFU), MIN_RATIO=1.5
# fails Tandem's median below 1.5x the compiled yardstick's best window (with REF_DATA).
# BASE_CURVES=1 also measures configs/base.yaml as shipped (data.max_tokens: auto) and with the
# 4,096 tokens per rank it shipped with before: the speed of each, and the loss of its first 1,000
# steps (trained while the checks run and the yardstick compiles; the loss does not depend on it);
# MIN_MFU_SHIPPED=20 fails the shipped config's MFU below 20%. AB_KERNELS=1 also measures the base
# shape with TANDEM_KERNELS=aten (LibTorch's kernels and attention choice in the same build).
# GPU_CHECK_DEADLINE=EPOCH_S (launch/gpu-session.sh sets it): the yardstick waits no later than a
# minute before it, and the closing profile is skipped past it.
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
if [ "${SKIP_BENCH:-0}" != 1 ] && [ -n "$data" ]; then
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
tools_targets="tandem-train tandem-eval tandem-decode tandem-average tandem-bench tandem-bench-decode"
if ! TANDEM_TESTS=ON TANDEM_TARGETS="$tools_targets gpu_tests device_tests" \
    bash launch/build-cuda.sh build-cuda >"$out/build.log" 2>&1; then
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

train() {  # DIR LOG [--set ...]: the tiny config, fp32, no validation
  local dir=$1 log=$2
  shift 2
  "$tools/tandem-train" --config configs/tiny.yaml --set "data.corpus=\"$corpus\"" \
    --set "checkpoint.dir=\"$dir\"" --set train.max_minutes=0 --set valid.every_steps=0 \
    --set train.precision=fp32 --set log.every_steps=50 "$@" >"$log" 2>&1
}
step_loss() { grep "\"step\":$2," "$1/metrics.jsonl" | head -1 | sed 's/.*"loss":\([0-9.e+-]*\).*/\1/'; }

# CPU against GPU, 200 steps; the CPU run goes on in the background while the GPU checks run.
cpu_threads=$(( $(nproc) > 4 ? $(nproc) - 4 : 1 ))
train "$work/cpu" "$out/train-cpu.log" --set train.max_steps=200 --set checkpoint.every_steps=100 \
  --set train.device=cpu --set "train.threads=$cpu_threads" &
cpu_pid=$!
train "$work/gpu" "$out/train-gpu.log" --set train.max_steps=200 --set checkpoint.every_steps=100 \
  --set train.device=cuda --set train.threads=4
record "tandem-train exits 0 (cuda)" $? ""
# The same in bf16 (the bf16 stream: its own linear layers, kernels and weight copies), against
# the CPU's fp32 below: a bf16 run learns like an fp32 one or something in its path is wrong.
train "$work/gpu-bf16" "$out/train-gpu-bf16.log" --set train.max_steps=200 \
  --set checkpoint.every_steps=100 --set train.device=cuda --set train.precision=bf16
record "tandem-train exits 0 (cuda, bf16)" $? ""

# Every tool on what the GPU trained.
train "$work/gpu" "$out/resume.log" --set train.max_steps=220 --set train.device=cuda
record "tandem-train resumes, exits 0" $? "$(grep -o 'resuming from [^ ]* at step [0-9]*' "$out/resume.log")"
"$tools/tandem-eval" --checkpoint "$work/gpu/last.h5" --split test --beam 4 >"$out/eval.log" 2>&1
record "tandem-eval exits 0" $? "$(grep -o 'BLEU = [0-9.]*' "$out/eval.log")"
printf '%s\n' "In the beginning God created the heavens and the earth." \
  "And God said, Let there be light: and there was light." >"$work/src.txt"
"$tools/tandem-decode" --checkpoint "$work/gpu/last.h5" <"$work/src.txt" >"$work/hyp.txt" 2>"$out/decode.log"
record "tandem-decode exits 0" $? "$(head -c 80 "$work/hyp.txt")"
"$tools/tandem-average" --out "$work/avg.h5" "$work/gpu/step-00000100.h5" \
  "$work/gpu/step-00000200.h5" >"$out/average.log" 2>&1
record "tandem-average exits 0" $? ""
"$tools/tandem-bench-decode" --checkpoint "$work/gpu/last.h5" --input "$work/src.txt" \
  --beams 1 5 >"$out/bench-decode.log" 2>&1
record "tandem-bench-decode exits 0" $? ""

# Bitwise resume: 20 steps against 10, then 10 more from the step-10 checkpoint.
same_checkpoints() {
  "$python" - "$1" "$2" <<'PY'
import sys, h5py, numpy as np
a, b = h5py.File(sys.argv[1], "r"), h5py.File(sys.argv[2], "r")
names = []
a.visit(lambda n: names.append(n) if isinstance(a[n], h5py.Dataset) and n.split("/")[0] in ("model", "optimizer", "ema") else None)
differ = [n for n in names if n not in b or not np.array_equal(a[n][()], b[n][()])]
print(f"{len(names) - len(differ)}/{len(names)} tensors bitwise equal" + (f", first differing: {differ[0]}" if differ else ""))
sys.exit(1 if differ or not names else 0)
PY
}
train "$work/twenty" "$out/twenty.log" --set train.max_steps=20 --set checkpoint.every_steps=10 \
  --set train.device=cuda
train "$work/ten" "$out/ten.log" --set train.max_steps=10 --set checkpoint.every_steps=10 \
  --set train.device=cuda &&
  train "$work/ten" "$out/ten-more.log" --set train.max_steps=20 --set checkpoint.every_steps=10 \
    --set train.device=cuda
detail=$(same_checkpoints "$work/twenty/step-00000020.h5" "$work/ten/step-00000020.h5")
record "resume on the GPU: 10 + 10 == 20 steps" $? "$detail"

# Resuming in bf16: 10 + 10 steps against 20 by their loss at step 20 (the attention kernels'
# backward may add in any order, so bits are not promised; the loss is).
train "$work/twenty-bf16" "$out/twenty-bf16.log" --set train.max_steps=20 \
  --set checkpoint.every_steps=10 --set log.every_steps=10 --set train.device=cuda \
  --set train.precision=bf16
train "$work/ten-bf16" "$out/ten-bf16.log" --set train.max_steps=10 --set checkpoint.every_steps=10 \
  --set log.every_steps=10 --set train.device=cuda --set train.precision=bf16 &&
  train "$work/ten-bf16" "$out/ten-more-bf16.log" --set train.max_steps=20 \
    --set checkpoint.every_steps=10 --set log.every_steps=10 --set train.device=cuda \
    --set train.precision=bf16
detail=$(same_checkpoints "$work/twenty-bf16/step-00000020.h5" "$work/ten-bf16/step-00000020.h5")
verdict=$("$python" -c "
a, b = float('$(step_loss "$work/twenty-bf16" 20)' or 'nan'), float('$(step_loss "$work/ten-bf16" 20)' or 'nan')
d = abs(a - b) / a * 100
print(f'{int(not d < 0.5)} loss at 20: {a:.4f} straight, {b:.4f} resumed ({d:.3f}% apart)')")
record "resume in bf16: 10 + 10 vs 20 steps" "${verdict%% *}" "${verdict#* }; $detail"

# A non-finite gradient on the GPU: the step is skipped, the run goes on and ends well.
TANDEM_FAULT_INJECT="rank=0,step=5,kind=nan_gradient" train "$work/nan" "$out/nan.log" \
  --set train.max_steps=10 --set train.device=cuda
rc=$?
grep -q "step 5: non-finite gradient norm, update skipped" "$out/nan.log"
record "non-finite gradient skips the step" $(( rc || $? )) "$(grep -o 'step 5: non-finite[^|]*' "$out/nan.log" | head -1)"

# One GPU shown to the rank by a wrapper, as SLURM's --gpus-per-task=1 does.
cat >"$work/one-gpu.sh" <<'SH'
#!/bin/sh
CUDA_VISIBLE_DEVICES=${OMPI_COMM_WORLD_LOCAL_RANK:-0} exec "$@"
SH
chmod +x "$work/one-gpu.sh"
mpirun -np 1 -x PATH -x LD_LIBRARY_PATH -x OPAL_PREFIX "$work/one-gpu.sh" "$tools/tandem-train" \
  --config configs/tiny.yaml --set "data.corpus=\"$corpus\"" --set "checkpoint.dir=\"$work/wrapped\"" \
  --set train.max_steps=20 --set train.max_minutes=0 --set valid.every_steps=0 \
  --set train.device=cuda >"$out/wrapped.log" 2>&1
record "a rank shown one GPU trains" $? "$(grep -o 'device: cuda:[0-9] ([^)]*)' "$out/wrapped.log" | head -1)"

wait $cpu_pid
record "tandem-train exits 0 (cpu, $cpu_threads threads)" $? ""
gpu=$(step_loss "$work/gpu" 200) cpu=$(step_loss "$work/cpu" 200)
verdict=$("$python" -c "
g, c = float('${gpu:-nan}'), float('${cpu:-nan}')
d = abs(g - c) / c * 100
print(f'{int(not d < 1.0)} gpu {g:.4f} cpu {c:.4f}: {d:.3f}% apart')")
record "loss at step 200, gpu vs cpu < 1%" "${verdict%% *}" "${verdict#* }"
bf16=$(step_loss "$work/gpu-bf16" 200)
verdict=$("$python" -c "
g, c = float('${bf16:-nan}'), float('${cpu:-nan}')
d = abs(g - c) / c * 100
print(f'{int(not d < 2.0)} gpu bf16 {g:.4f} cpu fp32 {c:.4f}: {d:.3f}% apart')")
record "loss at step 200, gpu bf16 vs cpu < 2%" "${verdict%% *}" "${verdict#* }"

if [ "${SKIP_BENCH:-0}" != 1 ]; then
  declare -A median
  bench() {  # SHAPE TOKENS LOG [ARGS...]
    local shape=$1 tokens=$2 log=$3
    shift 3
    "$tools/tandem-bench" --corpus "$corpus" --config "configs/$shape.yaml" \
      --set model.tie_embeddings=false --set "data.max_tokens=$tokens" --set train.device=cuda \
      --set train.precision=bf16 --warmup 30 "$@" >"$log" 2>&1
  }
  [ -n "${curves_pid:-}" ] && wait "$curves_pid"  # the GPU to the benchmarks alone
  yardstick_pause  # Tandem's windows run alone
  for shape in ${SHAPES:-base big}; do
    for tokens in "${sizes[@]}"; do
      log="$out/bench-$shape-$tokens.log"
      bench "$shape" "$tokens" "$log" --steps 20 --windows 3
      rc=$?
      rate=$(grep -o '"tgt_tokens_per_s":[0-9.]*' "$log" | cut -d: -f2)
      median[$shape-$tokens]=${rate:-0}
      mfu=$(grep -o 'MFU [0-9.]*%' "$log" | head -1)
      record "tandem-bench $shape $tokens exits 0" $rc \
        "${rate:-?} tok/s, ${mfu:-MFU ?}, windows $(grep -o '= [0-9.]* tokens/s' "$log" | cut -d' ' -f2 | paste -sd' ')"
      if [ -n "${MIN_MFU:-}" ]; then
        need=$MIN_MFU
        [ "$shape" = big ] && need=${MIN_MFU_BIG:-$MIN_MFU}
        "$python" -c "import sys; sys.exit(0 if float('${mfu//[!0-9.]/}' or 0) >= $need else 1)"
        record "$shape $tokens MFU >= $need%" $? "${mfu:-?}"
      fi
    done
  done
  if [ "${AB_KERNELS:-0}" = 1 ]; then  # Tandem's kernel choices against LibTorch's, one build
    log="$out/bench-base-${sizes[0]}-aten.log"
    TANDEM_KERNELS=aten bench base "${sizes[0]}" "$log" --steps 20 --windows 3
    record "tandem-bench base ${sizes[0]} TANDEM_KERNELS=aten" $? \
      "$(grep -o '"tgt_tokens_per_s":[0-9.]*' "$log" | cut -d: -f2) tok/s, $(grep -o 'MFU [0-9.]*%' "$log" | head -1)"
  fi
  if [ "${BASE_CURVES:-0}" = 1 ]; then
    for variant in "${curve_variants[@]}"; do
      log="$out/base-$variant-bench.log"
      # shellcheck disable=SC2046
      "$tools/tandem-bench" --corpus "$corpus" --config configs/base.yaml --set train.device=cuda \
        --warmup 30 --steps 20 --windows 3 $(curve_args "$variant") >"$log" 2>&1
      rc=$?
      mfu=$(grep -o 'MFU [0-9.]*%' "$log" | head -1)
      record "base.yaml $variant: tandem-bench" $rc \
        "$(grep -o '"tgt_tokens_per_s":[0-9.]*' "$log" | cut -d: -f2) tok/s, ${mfu:-MFU ?}, max_tokens $(grep -o '"max_tokens":[0-9]*' "$log" | cut -d: -f2)"
      if [ "$variant" = shipped ] && [ -n "${MIN_MFU_SHIPPED:-}" ]; then
        "$python" -c "import sys; sys.exit(0 if float('${mfu//[!0-9.]/}' or 0) >= $MIN_MFU_SHIPPED else 1)"
        record "base.yaml as shipped MFU >= $MIN_MFU_SHIPPED%" $? "${mfu:-?}"
      fi
    done
  fi
  if [ -n "$data" ]; then
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
  # Where the base shape's GPU time goes: 5 steps under the profiler after 30 warm-up steps.
  if [ "$(seconds_left 60 0)" -ge 45 ]; then
    bench base "${sizes[0]}" "$out/profile-run.log" --steps 5 --windows 1 \
      --profile "$out/trace-base.json"
    "$python" launch/profile-summary.py "$out/trace-base.json" 30 >"$out/profile-base.txt" 2>&1
  fi
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
[ -f "$out/profile-base.txt" ] && head -45 "$out/profile-base.txt"
echo
echo "summary ($(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)):"
cat "$summary"
! grep -q '^FAIL' "$summary"
