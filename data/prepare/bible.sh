#!/usr/bin/env bash
# Builds a verse-aligned English→Spanish corpus from Debian's public-domain Bible packages:
# the World English Bible (module engWEB2015eb, package sword-text-web) and the Reina-Valera
# 1909 (module spaRV1909eb, package sword-text-sparv), exported with mod2imp (libsword-utils).
#
# Usage: data/prepare/bible.sh [OUT_DIR]      (default: work/bible, relative to the current dir)
# Writes OUT_DIR/{train,valid,test}.{en,es}, one verse per line, and prints one stats line.
# The split is fixed by a hash of each verse key (~1.5% valid, ~1.5% test), so reruns give
# byte-identical files. Exit 2 when a needed package is missing.
set -euo pipefail

readonly SRC_MODULE=engWEB2015eb SRC_PACKAGE=sword-text-web
readonly TGT_MODULE=spaRV1909eb TGT_PACKAGE=sword-text-sparv
out_dir="${1:-work/bible}"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

fail_missing() {  # fail_missing <what is missing> <package to install>
  echo "bible.sh: $1 not found; install it with: sudo apt-get install $2" >&2
  exit 2
}

command -v mod2imp >/dev/null || fail_missing "mod2imp" "libsword-utils"
command -v python3 >/dev/null || fail_missing "python3" "python3"

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

# export <module> <package>: the module's raw OSIS text, one "$$$Book C:V" entry per verse.
export_module() {
  if ! mod2imp "$1" >"$work/$1.imp" 2>"$work/$1.err" || [[ ! -s "$work/$1.imp" ]]; then
    fail_missing "SWORD module $1 ($(head -c 200 "$work/$1.err" | tr '\n' ' '))" "$2"
  fi
}
export_module "$SRC_MODULE" "$SRC_PACKAGE"
export_module "$TGT_MODULE" "$TGT_PACKAGE"

python3 "$here/bible_clean.py" --src-lang en --tgt-lang es \
  "$work/$SRC_MODULE.imp" "$work/$TGT_MODULE.imp" "$out_dir"
