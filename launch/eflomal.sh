#!/usr/bin/env bash
# Installs eflomal (the word aligner launch/align.sh runs; the one place its version is pinned)
# into a private folder, and prints the folder to put on PYTHONPATH. eflomal ships as source: pip
# builds it with the C compiler (build-essential). A folder that already holds this version is
# left as it is.
#
#   launch/eflomal.sh [PREFIX]          (default: .deps/eflomal-<version> in the source tree)
set -euo pipefail
readonly EFLOMAL_VERSION=2.0.0
cd "$(dirname "$0")/.."
prefix=${1:-.deps/eflomal-$EFLOMAL_VERSION}
launch/pip-target.sh eflomal "$prefix" "eflomal-$EFLOMAL_VERSION.dist-info" \
  "eflomal==$EFLOMAL_VERSION" "numpy==2.4.6"
echo "$(cd "$prefix" && pwd)"
