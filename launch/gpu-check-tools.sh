# shellcheck shell=bash disable=SC2154  # gpu-check.sh sets tools, work, out, corpus, python
# The GPU acceptance run's checks with Tandem's tools (docs/gpus.md), as functions that
# launch/gpu-check.sh calls after its build and GPU tests, with its variables (tools, work, out,
# corpus, python, REF_DATA, CT2_DIR) and its record function: tiny_checks (the tiny config on the
# GPU against the CPU in fp32 and bf16, every tool on what the GPU trained, bitwise resume, a
# skipped non-finite step, a rank shown one GPU) with cpu_comparison once its CPU run has ended;
# ctranslate2_check (CTranslate2 on the GPU against tandem-decode); marian_check (an imported
# MarianMT model fine-tuned in bf16).

train() {  # DIR LOG [--set ...]: the tiny config, fp32, no validation
  local dir=$1 log=$2
  shift 2
  "$tools/tandem-train" --config configs/tiny.yaml --set "data.corpus=\"$corpus\"" \
    --set "checkpoint.dir=\"$dir\"" --set train.max_minutes=0 --set valid.every_steps=0 \
    --set train.precision=fp32 --set log.every_steps=50 "$@" >"$log" 2>&1
}
step_loss() { grep "\"step\":$2," "$1/metrics.jsonl" | head -1 | sed 's/.*"loss":\([0-9.e+-]*\).*/\1/'; }

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

# The tiny config 200 steps on the GPU and on the CPU (in the background, for cpu_comparison),
# then the checks on what the GPU trained.
tiny_checks() {
  cpu_threads=$(( $(nproc) > 4 ? $(nproc) - 4 : 1 ))
  (renice -n 10 "$BASHPID" >/dev/null; train "$work/cpu" "$out/train-cpu.log" \
    --set train.max_steps=200 --set checkpoint.every_steps=100 --set train.device=cpu \
    --set "train.threads=$cpu_threads") &
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
}

# CTranslate2 on the GPU (CT2_DIR: launch/gpu-session.sh pack's ctranslate2 package, unpacked):
# the GPU-trained checkpoint exported, then greedy decoding on the GPU by CTranslate2 and by
# tandem-decode, both at most 100 steps, line for line. The wheel's library opens cuBLAS 12 by
# name; a CUDA 13 machine has cuBLAS 13, whose functions CTranslate2 calls keep their signatures,
# so a link named libcublas.so.12 stands in for it.
ctranslate2_check() {
  if [ ! -f "$work/gpu/last.h5" ]; then  # tiny_checks did not run
    train "$work/gpu" "$out/train-gpu.log" --set train.max_steps=200 --set train.device=cuda
  fi
  if [ -n "${REF_DATA:-}" ]; then
    head -n 200 "$REF_DATA/train.en" >"$work/ct2-src.txt"
  else
    printf '%s\n' "In the beginning God created the heavens and the earth." \
      "And God said, Let there be light: and there was light." >"$work/ct2-src.txt"
  fi
  mkdir -p "$work/cublas12"
  local find_cublas='import glob, os, nvidia
for base in nvidia.__path__:
    print(*glob.glob(os.path.join(base, "**", "libcublas.so.13"), recursive=True), sep="\n")'
  cublas13=$("$python" -c "$find_cublas" 2>/dev/null | head -1)
  ln -sf "${cublas13:-/usr/local/cuda/lib64/libcublas.so.13}" "$work/cublas12/libcublas.so.12"
  "$tools/tandem-export" --checkpoint "$work/gpu/last.h5" --to ctranslate2 --out "$work/ct2" \
    >"$out/ct2-export.log" 2>&1 &&
    "$tools/tandem-decode" --checkpoint "$work/gpu/last.h5" --device cuda --beam 1 \
      --max-len-a 0 --max-len-b 100 <"$work/ct2-src.txt" >"$work/ct2-tandem.txt" 2>"$out/ct2-tandem.log" &&
    LD_LIBRARY_PATH="$work/cublas12:${LD_LIBRARY_PATH:-}" PYTHONPATH="$CT2_DIR" "$python" \
      launch/ctranslate2-decode.py "$work/ct2" "$work/ct2-src.txt" "$work/ct2-gpu.txt" --device cuda \
      --beam 1 --min-len 0 --max-len 100 >"$out/ct2-gpu.log" 2>&1
  rc=$?
  detail=$("$python" - "$work/ct2-tandem.txt" "$work/ct2-gpu.txt" <<'PY'
import sys
a, b = (open(p, encoding="utf-8").read().splitlines() for p in sys.argv[1:3])
same = sum(x == y for x, y in zip(a, b))
differ = [i for i, (x, y) in enumerate(zip(a, b)) if x != y]
print(f"{same} of {len(a)} greedy lines identical ({len(b)} from CTranslate2)"
    + (f"; first differing line {differ[0]}: tandem '{a[differ[0]][:60]}' ct2 '{b[differ[0]][:60]}'" if differ else ""))
sys.exit(0 if a and len(a) == len(b) and same == len(a) else 1)
PY
  )
  record "CTranslate2 on cuda = tandem-decode" $(( rc || $? )) "$detail"
}

# An imported MarianMT (OPUS-MT shape) model fine-tuned in bf16 on the GPU: a random model built
# by Hugging Face transformers (tests/e2e/marian_reference.py, on 2,000 short verses of the
# training text), tandem-import, tandem-prep --vocab-from, then 20 steps straight and 10 + 10
# resumed: the loss falls and the resumed checkpoint equals the straight one bit for bit.
marian_check() {
  m=$work/marian
  mkdir -p "$m"
  # Verse pairs of 25 words or fewer a side: the model's positions end at 128.
  paste "$REF_DATA/train.en" "$REF_DATA/train.es" |
    awk -F '\t' 'split($1, a, " ") <= 25 && split($2, b, " ") <= 25' | head -n 2020 >"$m/pairs"
  head -n 2000 "$m/pairs" | cut -f1 >"$m/train.src"
  head -n 2000 "$m/pairs" | cut -f2 >"$m/train.tgt"
  tail -n 20 "$m/pairs" | cut -f1 >"$m/test.src"
  tail -n 20 "$m/pairs" | cut -f2 >"$m/test.tgt"
  finetune() {  # RUN [--set ...]
    local run=$1
    shift
    "$tools/tandem-train" --config "$m/ft.yaml" --set "checkpoint.dir=\"$m/$run\"" "$@" \
      >>"$out/marian-$run.log" 2>&1
  }
  cat >"$m/ft.yaml" <<YAML
model: {d_model: 32, heads: 4, encoder_layers: 2, decoder_layers: 2, d_ff: 64, dropout: 0.1,
      tie_embeddings: true, activation: swish, positions: halves, max_positions: 128}
data: {corpus: $m/ft.h5, max_tokens: 2048, seed: 3}
train: {max_steps: 20, max_minutes: 0, lr: 0.001, schedule: constant, seed: 5, device: cuda,
      precision: bf16}
valid: {every_steps: 0}
checkpoint: {every_steps: 10, keep_last: 0}
log: {every_steps: 1}
YAML
  from=(--resume "$m/imported.h5" --reset-optimizer --reset-data)
  "$python" tests/e2e/marian_reference.py "$m/ref" "$m/train.src" "$m/train.tgt" "$m/test.src" \
      "$m/test.tgt" 12 >"$out/marian-reference.log" 2>&1 &&
    "$tools/tandem-import" --from "$m/ref/model" --out "$m/imported.h5" >"$out/marian-import.log" 2>&1 &&
    "$tools/tandem-prep" --vocab-from "$m/imported.h5" --train-src "$m/train.src" \
      --train-tgt "$m/train.tgt" --test-src "$m/test.src" --test-tgt "$m/test.tgt" \
      --out "$m/ft.h5" >"$out/marian-prep.log" 2>&1 &&
    finetune straight "${from[@]}" && finetune split "${from[@]}" --set train.max_steps=10 &&
    finetune split
  rc=$?
  detail=$(same_checkpoints "$m/straight/step-00000020.h5" "$m/split/step-00000020.h5")
  bitwise=$?
  verdict=$("$python" - "$m/straight/metrics.jsonl" <<'PY'
import json, sys
losses = [r["loss"] for r in map(json.loads, open(sys.argv[1])) if "loss" in r]
first, last = sum(losses[:3]) / 3, sum(losses[-3:]) / 3
print(f"{int(not (len(losses) >= 20 and last < first))} loss {first:.3f} (steps 1-3) -> {last:.3f} (steps 18-20)")
PY
  )
  verdict=${verdict:-1 no losses in $m/straight/metrics.jsonl}
  record "MarianMT import fine-tunes in bf16" $(( rc || bitwise || ${verdict%% *} )) \
    "${verdict#* }; 10 + 10 vs 20 steps: $detail"
}

# The CPU run of tiny_checks, once it has ended, against the GPU runs.
cpu_comparison() {
  wait "$cpu_pid"
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
}
