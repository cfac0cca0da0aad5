#!/usr/bin/env bash
# The GPU acceptance run as one known command, for whoever is lent a GPU machine for a few minutes
# (docs/gpus.md › The GPU acceptance run). Two steps:
#
#   launch/gpu-session.sh pack [CORPUS_H5 [TEXT_DIR [REF_TRAIN_PY]]]
#       On a connected Debian 12 machine. Fills .device/ (git-ignored) with what a bare GPU machine
#       lacks: the Debian packages (launch/bundle-pack.sh), the corpus, the compiled PyTorch
#       yardstick with its training text (gzipped), and with PACK_CT2=1 CTranslate2's package for
#       the GPU machine's Python 3.12 (its library opens cuBLAS 12 by name: gpu-check-tools.sh
#       says how it runs on CUDA 13; 14.6 MB, which with the bundle's protobuf no longer fits the
#       64 MiB a call carries beside the rest, so its check runs when it is asked for). Defaults:
#       work/bible/corpus.h5 (the README's main job makes it), work/bible,
#       ../shared/bench/ref_train.py. Carry .device to the machine.
#
#   launch/gpu-session.sh run OUT_DIR [BUDGET_S]
#       On the GPU machine, in the repository root. launch/gpu-check.sh with everything: the
#       yardstick, the checks with the tools and the GPU issue's bars (MIN_MFU=33, MIN_MFU_BIG=43,
#       MIN_RATIO=1.5, MIN_MFU_SHIPPED=25; override by setting them). It plans to end within
#       BUDGET_S seconds (default 540): the yardstick is given what is left then, and the profiles
#       are skipped when the time is short. OUT_DIR gets summary.txt (a line per check) and
#       logs.tar.gz, both refreshed every 15 s, so a run cut short still returns its figures, and
#       at the end the yardstick's compile cache as inductor-cache.tar.gz.* (parts of 15 MB):
#       copy them into .device/ and the next call's yardstick compiles from that cache. Extra
#       environment is passed to gpu-check (SHAPES, SKIP_BENCH, SHIPPED, AB_ENV, BASE_CURVES=1,
#       AB_KERNELS=1).
#
#   launch/gpu-session.sh rerun OUT_DIR [BUDGET_S]
#       The short second call (default 240 s), for a fix made after a first call: run with QUICK=1,
#       that is the build, ctest -L gpu and the benchmarks (with AB_ENV's switches), and the
#       yardstick when .device/ holds a compile cache.
set -uo pipefail
cd "$(dirname "$0")/.."
here=.device

usage() {
  echo "usage: launch/gpu-session.sh pack [CORPUS_H5 [TEXT_DIR [REF_TRAIN_PY]]]" >&2
  echo "       launch/gpu-session.sh run OUT_DIR [BUDGET_S]" >&2
  echo "       launch/gpu-session.sh rerun OUT_DIR [BUDGET_S]" >&2
  exit 2
}

# CTranslate2's wheel (the version launch/ctranslate2.sh pins) for CPython 3.12, unpacked with its
# Python extension stripped of debug symbols (69 MB to 1.3 MB), as .device/ct2.tar.xz.
pack_ctranslate2() {
  local version wheels
  version=$(sed -n 's/^readonly CTRANSLATE2_VERSION=//p' launch/ctranslate2.sh)
  wheels=$(mktemp -d)
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
    --implementation cp --platform manylinux_2_28_x86_64 -d "$wheels" "ctranslate2==$version" ||
    { echo "gpu-session pack: pip could not download ctranslate2==$version" >&2; exit 1; }
  mkdir "$wheels/files"
  python3 -m zipfile -e "$wheels"/ctranslate2-*.whl "$wheels/files"
  strip --strip-unneeded "$wheels"/files/ctranslate2/_ext*.so
  tar -C "$wheels/files" -cf - ctranslate2 ctranslate2.libs | xz -6 -T0 >"$here/ct2.tar.xz"
  rm -rf "$wheels"
}

pack() {
  local corpus=${1:-work/bible/corpus.h5} text=${2:-work/bible} ref=${3:-../shared/bench/ref_train.py}
  local f
  for f in "$corpus" "$text/train.en" "$text/train.es" "$ref"; do
    [ -s "$f" ] || { echo "gpu-session pack: '$f' is missing (the README's main job makes work/bible)" >&2; exit 2; }
  done
  mkdir -p "$here/ref"
  bash launch/bundle-pack.sh "$here/bundle" || exit 1
  cp "$corpus" "$here/corpus.h5"
  cp "$ref" "$here/ref_train.py"
  gzip -9 -c "$text/train.en" >"$here/ref/train.en.gz"
  gzip -9 -c "$text/train.es" >"$here/ref/train.es.gz"
  rm -f "$here/ct2.tar.xz"
  [ "${PACK_CT2:-0}" = 1 ] && pack_ctranslate2
  echo "gpu-session pack: $(du -sh "$here" | cut -f1) in $here; carry '$here' (64 MiB with the tree)"
}

run() {
  local out budget start
  [ $# -ge 1 ] || usage
  out=$(mkdir -p "$1" && realpath "$1")
  budget=${2:-540}
  start=$(date +%s)
  for f in "$here/bundle" "$here/corpus.h5" "$here/ref_train.py" "$here/ref/train.en.gz"; do
    [ -e "$f" ] || { echo "gpu-session run: '$f' is missing (run 'launch/gpu-session.sh pack' first)" >&2; exit 2; }
  done
  local logs ref cache ct2=""
  logs=$(mktemp -d /tmp/gpu-session.XXXX)
  ref=$logs/ref-data
  mkdir -p "$ref"
  gunzip -c "$here/ref/train.en.gz" >"$ref/train.en"
  gunzip -c "$here/ref/train.es.gz" >"$ref/train.es"
  if [ -f "$here/ct2.tar.xz" ]; then
    ct2=$logs/ct2
    mkdir -p "$ct2" && tar -C "$ct2" -xJf "$here/ct2.tar.xz"
  fi
  # The yardstick's compile cache (Inductor's graphs and Triton's kernels): an earlier call's,
  # when .device/ holds one, and handed back at the end for the next call.
  cache=$logs/inductor
  mkdir -p "$cache"
  if compgen -G "$here/inductor-cache.tar.gz.*" >/dev/null; then
    cat "$here"/inductor-cache.tar.gz.* | tar -C "$cache" -xz
    echo "gpu-session: the yardstick compiles from the cache in $here ($(du -sh "$cache" | cut -f1))"
  elif [ "${QUICK:-0}" = 1 ]; then
    export YARDSTICK=0  # minutes of compilation do not fit a short call
  fi

  snapshot() {  # what has been written so far, replaced whole (a cut-short call returns the last)
    [ -f "$logs/out/summary.txt" ] && cp "$logs/out/summary.txt" "$out/summary.txt.tmp" &&
      mv "$out/summary.txt.tmp" "$out/summary.txt"
    tar -C "$logs/out" -czf "$out/logs.tar.gz.tmp" --exclude='*.json' . 2>/dev/null &&
      mv "$out/logs.tar.gz.tmp" "$out/logs.tar.gz"
  }
  mkdir -p "$logs/out"
  ( while sleep 15; do snapshot; done ) &
  local snapshots=$!

  GPU_CHECK_DEADLINE=$((start + budget)) REF_DATA=$ref CT2_DIR=$ct2 \
    TORCHINDUCTOR_CACHE_DIR=$cache TRITON_CACHE_DIR=$cache/triton TORCHINDUCTOR_FX_GRAPH_CACHE=1 \
    TORCHINDUCTOR_AUTOGRAD_CACHE=1 MIN_MFU=${MIN_MFU:-33} MIN_MFU_BIG=${MIN_MFU_BIG:-43} \
    MIN_RATIO=${MIN_RATIO:-1.5} MIN_MFU_SHIPPED=${MIN_MFU_SHIPPED:-25} \
    bash launch/gpu-check.sh "$here/bundle" "$here/corpus.h5" "$logs/out" "$here/ref_train.py" 32768
  local rc=$?
  kill "$snapshots" 2>/dev/null
  wait "$snapshots" 2>/dev/null
  snapshot
  rm -f "$out"/inductor-cache.tar.gz.*
  tar -C "$cache" -czf - . | split -b 15M - "$out/inductor-cache.tar.gz."
  local parts=("$out"/inductor-cache.tar.gz.*)
  echo "gpu-session: compile cache $(du -sh "$cache" | cut -f1), $(cat "${parts[@]}" | wc -c) bytes" \
    "gzipped in ${#parts[@]} part(s)"
  echo "gpu-session: $(( $(date +%s) - start )) s of the ${budget} s planned, gpu-check rc $rc"
  return $rc
}

rerun() {
  [ $# -ge 1 ] || usage
  export QUICK=1
  run "$1" "${2:-240}"
}

case "${1:-}" in
  pack) shift; pack "$@" ;;
  run) shift; run "$@" ;;
  rerun) shift; rerun "$@" ;;
  *) usage ;;
esac
