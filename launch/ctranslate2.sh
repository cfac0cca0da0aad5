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
launch/pip-target.sh ctranslate2 "$prefix" "ctranslate2-$CTRANSLATE2_VERSION.dist-info" \
  "${REQUIREMENTS[@]}"
echo "$(cd "$prefix" && pwd)"
