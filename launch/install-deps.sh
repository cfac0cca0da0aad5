#!/usr/bin/env bash
# Installs every Debian package that Tandem's build, tests and quickstart need (Debian 12).
# Idempotent: installs only what is missing, and prints nothing when all is well.
set -euo pipefail

PACKAGES=(
  build-essential cmake ninja-build ccache              # toolchain
  libtorch-dev libopenblas0-pthread                      # LibTorch; OpenBLAS or it runs ~30x slower
  libopenmpi-dev openmpi-bin                             # MPI
  libhdf5-dev hdf5-tools                                 # corpus and checkpoint files, h5dump
  libyaml-cpp-dev libsentencepiece-dev libcli11-dev nlohmann-json3-dev
  libprotobuf-dev protobuf-compiler libisal-dev          # TensorBoard event files (protobuf, CRC32C)
  libgtest-dev                                           # tests
  python3-pip                                            # the PyPI LibTorch (launch/torch-wheel.sh)
  iproute2                                               # the multi-node rehearsal test (ip netns)
  slurm-wlm munge                                        # the SLURM tests (launch/slurm/local-cluster.sh)
  libsword-utils sword-text-web sword-text-sparv python3 # the Bible corpus (data/prepare/bible.sh)
  gnuplot-nox                                            # loss curve plots
)

missing=()
for package in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" ||
    missing+=("$package")
done
[ ${#missing[@]} -eq 0 ] && exit 0

sudo=""
if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
log=$(mktemp)
trap 'rm -f "$log"' EXIT
if ! { $sudo apt-get update -qq &&
       DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}"; } >"$log" 2>&1; then
  cat "$log" >&2
  echo "install-deps: apt-get failed (log above)" >&2
  exit 1
fi
