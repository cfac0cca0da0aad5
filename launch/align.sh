#!/usr/bin/env bash
# Word alignments for tandem-prep --train-align (and as the reference a model's alignments are
# scored against): eflomal (launch/eflomal.sh installs it) aligns every pair of files given
# together, both ways, and the two directions are symmetrized (grow-diag-final-and by default);
# each OUT gets one Pharaoh line ("i-j" over the words between white space) per line of its SRC.
#
#   launch/align.sh SRC TGT OUT [SRC TGT OUT]... [--symmetrize grow-diag-final-and|intersect|union]
#
# Align a test split together with its training text (eflomal learns from all it is given):
#   launch/align.sh train.en train.es train.align test.en test.es test.align
# Plain or gzip text; an OUT appears whole or not at all.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
eflomal=$("$here/launch/eflomal.sh")
PYTHONPATH="$eflomal${PYTHONPATH:+:$PYTHONPATH}" exec "${PYTHON:-python3}" \
  "$here/launch/align.py" --eflomal "$eflomal/bin/eflomal-align" "$@"
