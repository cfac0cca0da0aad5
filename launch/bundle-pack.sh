#!/usr/bin/env bash
# Packs the Debian 12 packages Tandem builds and runs against (Open MPI, HDF5, yaml-cpp,
# SentencePiece, CLI11, nlohmann-json, protobuf with protoc, ISA-L) with their dependency closure
# into one folder of .deb files, for nodes that cannot reach a package registry. Run it on a
# connected Debian 12 machine; carry the folder to the node and run launch/bundle-unpack.sh there.
#
#   launch/bundle-pack.sh OUT_DIR [EXTRA_PACKAGE...]
#
# Left out: what any machine that compiles C++ already has (the closure of build-essential, and
# Debian's required/important base system), compilers (Fortran), autotools and ssh. LibTorch is
# not bundled: the node's PyTorch install provides it (with CUDA), see docs/gpus.md › Air-gapped nodes.
set -euo pipefail

if [ $# -lt 1 ] || [ "$1" = "-h" ] || [ "$1" = "--help" ]; then
  echo "usage: launch/bundle-pack.sh OUT_DIR [EXTRA_PACKAGE...]" >&2
  echo "example: launch/bundle-pack.sh /tmp/tandem-bundle && tar -C /tmp -cf tandem-bundle.tar tandem-bundle" >&2
  [ $# -ge 1 ] && exit 0 || exit 2
fi
out=$1
shift
packages=(libopenmpi-dev openmpi-bin libhdf5-dev libyaml-cpp-dev libsentencepiece-dev
          libcli11-dev nlohmann-json3-dev libprotobuf-dev protobuf-compiler libisal-dev "$@")
excluded='^(gfortran|libgfortran-[0-9]+-dev|autoconf|automake|autotools-dev|m4|libtool|openssh-client)'

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
: >"$work/empty-status"
# What apt would install on an empty system: one pick per alternative, as a real install makes.
closure() {
  apt-get -s -o Dir::State::status="$work/empty-status" install --no-install-recommends "$@" |
    awk '/^Inst /{print $2}' | sort -u
}
if ! closure "${packages[@]}" >"$work/wanted"; then
  echo "bundle-pack: apt-get could not resolve ${packages[*]} (run apt-get update?)" >&2
  exit 1
fi
closure build-essential >"$work/toolchain"
comm -23 "$work/wanted" "$work/toolchain" | grep -Ev "$excluded" >"$work/candidates" || true
: >"$work/list"
while read -r package; do
  priority=$(apt-cache show --no-all-versions "$package" | awk '/^Priority:/{print $2; exit}')
  case "$priority" in required|important) continue ;; esac
  echo "$package" >>"$work/list"
done <"$work/candidates"

mkdir -p "$out"
rm -f "$out"/*.deb
(cd "$out" && xargs apt-get download -q <"$work/list" >/dev/null)
for deb in "$out"/*.deb; do
  dpkg-deb -f "$deb" Package Version | paste -sd' '
done >"$out/MANIFEST"
cp "$(dirname "$0")/bundle-unpack.sh" "$out/"
echo "bundle-pack: $(wc -l <"$out/MANIFEST") packages, $(du -sh "$out" | cut -f1) in $out"
