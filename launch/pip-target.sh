#!/usr/bin/env bash
# pip install --target --no-deps of pinned requirements into PREFIX, unless PREFIX already holds
# MARKER (a .dist-info folder of the pinned version): the Python packages that tests run with
# (launch/ctranslate2.sh, launch/transformers.sh). The install goes into a fresh folder renamed
# into place, so that an interrupted one is never taken for one.
#
#   launch/pip-target.sh WHO PREFIX MARKER REQUIREMENT...      ($PYTHON, default python3)
set -euo pipefail
who=$1 prefix=$2 marker=$3
shift 3
python=${PYTHON:-python3}
[ -d "$prefix/$marker" ] && exit 0
if ! "$python" -m pip --version >/dev/null 2>&1; then
  echo "$who: '$python -m pip' is missing (apt-get install python3-pip)" >&2
  exit 1
fi
log=$(mktemp)
trap 'rm -f "$log"' EXIT
rm -rf "$prefix.partial"
if ! "$python" -m pip install --quiet --disable-pip-version-check --no-deps \
    --target "$prefix.partial" "$@" >"$log" 2>&1; then
  cat "$log" >&2
  echo "$who: pip install $* failed (log above)" >&2
  exit 1
fi
rm -rf "$prefix"
mv "$prefix.partial" "$prefix"
