#!/usr/bin/env bash
# Installs CTranslate2's Python package (the one place its version is pinned) with SentencePiece's
# into a private folder, and prints the folder to put on PYTHONPATH: what the export test, the
# decoding benchmark's CTranslate2 rows and docs/serving.md's example run with.
#
#   launch/ctranslate2.sh [PREFIX]          (default: .deps/ctranslate2-<version> in the source tree)
#
# pip install --target, the wheels' Python dependencies pinned too, for the interpreter that
# $PYTHON names (python3 by default): run the scripts with that same interpreter. A folder that
# already holds this version is left as it is: a second run downloads nothing.
set -euo pipefail
readonly CTRANSLATE2_VERSION=4.8.5
readonly REQUIREMENTS=("ctranslate2==$CTRANSLATE2_VERSION" "sentencepiece==0.2.1"
                       "numpy==2.4.6" "pyyaml==6.0.3")
cd "$(dirname "$0")/.."
prefix=${1:-.deps/ctranslate2-$CTRANSLATE2_VERSION}
python=${PYTHON:-python3}

if [ ! -d "$prefix/ctranslate2-$CTRANSLATE2_VERSION.dist-info" ]; then
  if ! "$python" -m pip --version >/dev/null 2>&1; then
    echo "ctranslate2: '$python -m pip' is missing (apt-get install python3-pip)" >&2
    exit 1
  fi
  log=$(mktemp)
  trap 'rm -f "$log"' EXIT
  # Into a fresh folder renamed into place, so that an interrupted install is never taken for one.
  rm -rf "$prefix.partial"
  if ! "$python" -m pip install --quiet --disable-pip-version-check --no-deps \
      --target "$prefix.partial" "${REQUIREMENTS[@]}" >"$log" 2>&1; then
    cat "$log" >&2
    echo "ctranslate2: pip install ${REQUIREMENTS[*]} failed (log above)" >&2
    exit 1
  fi
  rm -rf "$prefix"
  mv "$prefix.partial" "$prefix"
fi
echo "$(cd "$prefix" && pwd)"
