#!/usr/bin/env bash
# Compiles the extension's host sources (csrc/*.cpp, csrc/cpu/*.cpp), syntax only, against the headers
# of another torch wheel. TORCH_TARGET_VERSION keeps newer stable-ABI calls out of the build, but not
# newer header-only C++ (HeaderOnlyArrayRef's operator==, absent from 2.11's headers, once broke the
# source build there while the wheel built against 2.14.1 loaded fine). A source build must work
# with the oldest torch the wheel supports too. Needs only a C++ compiler and the wheel file.
#   scripts/ci/host_sources_against.sh build/torch-wheels/torch-2.11.0-*.whl
set -euo pipefail
wheel=$(realpath "$1")
root=$(cd "$(dirname "$0")/../.." && pwd)
python=${PYTHON:-python3}
inc=$(mktemp -d)
trap 'rm -rf "$inc"' EXIT
unzip -q "$wheel" 'torch/include/*' -d "$inc"
target=$(sed -nE 's/^TORCH_MIN = \(([0-9]+), ([0-9]+)\)$/\1 \2/p' "$root/setup.py")
define=$(printf -- '-DTORCH_TARGET_VERSION=0x%02x%02x000000000000' $target)
py_include=$("$python" -c "import sysconfig; print(sysconfig.get_paths()['include'])")
status=0
for src in "$root"/csrc/*.cpp "$root"/csrc/cpu/*.cpp; do
  if ! "${CXX:-g++}" -std=c++17 -fsyntax-only "$define" -DPy_LIMITED_API=0x030a0000 -I "$root/csrc" \
      -I "$inc/torch/include" -I "$py_include" "$src"; then
    echo "host source ${src#$root/} does not compile against $(basename "$wheel")'s headers"
    status=1
  fi
done
(( status == 0 )) && echo "host sources compile against $(basename "$wheel")'s headers ($define)"
exit $status
