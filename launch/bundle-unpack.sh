#!/usr/bin/env bash
# Unpacks a folder made by launch/bundle-pack.sh into PREFIX (no root, no dpkg database: files
# only) and prints the environment that builds and runs Tandem from it: PATH, LD_LIBRARY_PATH,
# CMAKE_PREFIX_PATH, HDF5_ROOT, OPAL_PREFIX (Open MPI moved away from /usr finds its plugins
# and help files through it) and PMIx's plugin folder (PMIX_PKGLIBDIR: without it PMIx loads the
# plugins of whatever PMIx the node has in /usr, which were seen failing to load on a GPU node,
# "undefined symbol: pmix_output_info"; PMIX_INSTALL_PREFIX alone does not move Debian's libdir,
# and PMIX_MCA_mca_base_component_path only adds a folder to search). Use it as:
#
#   eval "$(launch/bundle-unpack.sh BUNDLE_DIR PREFIX)"
#   cmake -S . -B build -G Ninja -DCMAKE_PREFIX_PATH="$TANDEM_PREFIX_PATH;$(python3 -c \
#     'import torch; print(torch.utils.cmake_prefix_path)')"
set -euo pipefail

if [ $# -ne 2 ]; then
  echo "usage: launch/bundle-unpack.sh BUNDLE_DIR PREFIX" >&2
  echo "example: eval \"\$(launch/bundle-unpack.sh tandem-bundle \$HOME/tandem-deps)\"" >&2
  exit 2
fi
bundle=$1
mkdir -p "$2"
prefix=$(cd "$2" && pwd)
shopt -s nullglob
debs=("$bundle"/*.deb)
if [ ${#debs[@]} -eq 0 ]; then
  echo "bundle-unpack: no .deb files in '$bundle' (made by launch/bundle-pack.sh?)" >&2
  exit 2
fi

extract() {  # dpkg-deb where there is one, else ar + tar (the data member's compression varies)
  if command -v dpkg-deb >/dev/null; then
    dpkg-deb -x "$1" "$prefix"
    return
  fi
  local member
  member=$(ar t "$1" | grep '^data\.tar')
  ar p "$1" "$member" | tar -x -a -f - -C "$prefix" 2>/dev/null ||
    ar p "$1" "$member" | tar -x --use-compress-program=unzstd -f - -C "$prefix"
}
for deb in "${debs[@]}"; do extract "$deb"; done

usr=$prefix/usr
triplet=x86_64-linux-gnu
lib=$usr/lib/$triplet
# The generic names are made by update-alternatives at install time, which dpkg -x skips.
for tool in mpirun mpiexec mpicc mpicxx mpic++; do
  [ -e "$usr/bin/$tool.openmpi" ] && ln -sf "$tool.openmpi" "$usr/bin/$tool"
done
[ -d "$lib/hdf5/serial" ] && [ ! -e "$lib/pkgconfig/hdf5.pc" ] &&
  ln -sf hdf5-serial.pc "$lib/pkgconfig/hdf5.pc" 2>/dev/null || true

cat <<ENV
export TANDEM_DEPS_PREFIX="$usr"
export PATH="$usr/bin:\$PATH"
export LD_LIBRARY_PATH="$lib:$lib/openmpi/lib:$lib/hdf5/serial\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}"
export OPAL_PREFIX="$usr"
export PMIX_INSTALL_PREFIX="$lib/pmix2"
export PMIX_PKGLIBDIR="$lib/pmix2/lib/pmix"
export HDF5_ROOT="$lib/hdf5/serial"
export TANDEM_PREFIX_PATH="$usr;$lib/cmake"
export CMAKE_PREFIX_PATH="$usr\${CMAKE_PREFIX_PATH:+:\$CMAKE_PREFIX_PATH}"
ENV
