#!/usr/bin/env bash
# Installs TensorBoard's Python package (the one place its version is pinned) into a private
# folder, and prints the folder to put on PYTHONPATH: what the TensorBoard test reads the event
# files with, and a way to watch a run where no TensorBoard is installed:
#
#   PYTHONPATH=$(launch/tensorboard.sh) python3 -m tensorboard.main --logdir runs/
#
#   launch/tensorboard.sh [PREFIX]          (default: .deps/tensorboard-<version> in the source tree)
#
# pip install --target, the wheels' Python dependencies pinned too, for the interpreter that
# $PYTHON names (python3 by default). A folder that already holds this version is left as it is.
set -euo pipefail
readonly TENSORBOARD_VERSION=2.21.0
readonly REQUIREMENTS=(
  "tensorboard==$TENSORBOARD_VERSION" tensorboard-data-server==0.7.2 protobuf==7.36.2
  numpy==2.4.6 absl-py==2.5.1 grpcio==1.85.3 markdown==3.11.3 markupsafe==3.0.4
  packaging==26.4 pillow==13.0.0 setuptools==84.2.1 typing_extensions==4.16.0 werkzeug==3.1.9)
cd "$(dirname "$0")/.."
prefix=${1:-.deps/tensorboard-$TENSORBOARD_VERSION}
launch/pip-target.sh tensorboard "$prefix" "tensorboard-$TENSORBOARD_VERSION.dist-info" \
  "${REQUIREMENTS[@]}"
echo "$(cd "$prefix" && pwd)"
