#!/usr/bin/env bash
# Installs one sgl_quant wheel next to one torch in a fresh virtual environment and tests it there,
# from outside the source tree: the smoke test (import, build_info, one call per op, CPU golden
# selftest) and the CPU tests (a copy of tests/; GPU tests skip without a device): the files named in
# SGL_QUANT_CI_TESTS (relative to the repository, e.g. "tests/test_golden.py tests/test_errors.py"), or
# the whole suite.
#
#   [PYTHON=python3.10] scripts/ci/wheel_torch_check.sh WHEEL TORCH_VERSION VENV [lean [EXTRA...]]
#
# PYTHON: the CPython of the venv (default python3); the wheel is abi3, one file for every CPython.
# WHEEL may be an sdist (.tar.gz): pip builds it there, against that venv's torch and CPython, the CPU
# implementation only (SGL_QUANT_CPU_ONLY=1: what a torch of another CUDA major version than the
# local toolkit can build).
# Plain mode: `pip install torch==VERSION` with its dependencies (the build torch, from the local disk
# here). `lean`: torch's wheel without its dependencies, its pure-Python requirements, and the CUDA
# runtime libraries (nvidia-*/cuda-*) at the versions the build venv has: torch only needs their
# sonames to import, and CUDA 13 keeps them within the major version (cuda-bindings and its helper
# cuda-pathfinder are left out: torch does not import them, and the build venv's cuda-pathfinder needs
# CPython >= 3.11). It saves the ~3 GB of differently pinned CUDA libraries another torch would
# otherwise download; the tests are CPU tests.
# EXTRA: requirements installed after those, without dependencies, where VERSION needs a newer library
# than the build venv's to import at all (torch 2.15.0: NVSHMEM 3.7.2). Each is a requirement spec, or
# `pin:PREFIX`: every requirement of that torch wheel named PREFIX..., at the version the wheel pins
# (scripts/ci/torch_pins.py; `pin:nvidia-nvshmem-` gives nvidia-nvshmem-cu13==3.7.2 for the CUDA 13.2
# build of 2.15.0, and the CUDA 12 package at its pin for a +cu128 build).
# A machine-wide pip constraint (this workplace caps torch at its local release) does not apply here:
# the point is to install exactly VERSION.
set -euo pipefail
wheel=$(realpath "$1"); version=$2; venv=$(realpath -m "$3"); mode=${4:-plain}
extra=("${@:5}")
root=$(cd "$(dirname "$0")/../.." && pwd)
build_py=${BUILD_PY:-$root/.venv/bin/python}
python=${PYTHON:-python3}

rm -rf "$venv"
"$python" -m venv "$venv"
echo "# wheel_torch_check.sh: no constraints" >"$venv/no-constraints.txt"
export PIP_CONSTRAINT=$venv/no-constraints.txt
pip=("$venv/bin/python" -m pip install -q)
if [[ $mode == lean ]]; then
  cache=$root/build/torch-wheels
  mkdir -p "$cache"
  # the venv CPython's wheel of VERSION, with or without a local label (PyTorch's own index: 2.15.0+cu128)
  pyver=$("$venv/bin/python" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
  torch_wheel() { compgen -G "$cache/torch-$version-cp${pyver/./}-*.whl" || compgen -G "$cache/torch-$version+*-cp${pyver/./}-*.whl"; }
  torch_wheel >/dev/null || "$venv/bin/python" -m pip download -q --no-deps "torch==$version" -d "$cache"
  whl=$(torch_wheel | head -1) || { echo "no torch $version wheel for CPython $pyver in $cache" >&2; exit 1; }
  cuda_libs=$("$build_py" -m pip freeze | grep -E '^(nvidia-|cuda-)' | grep -vE '^cuda-(bindings|pathfinder)=' || true)
  "${pip[@]}" --no-deps "$whl" $cuda_libs
  specs=()
  for e in "${extra[@]}"; do
    if [[ $e == pin:* ]]; then
      pinned=$("$build_py" "$root/scripts/ci/torch_pins.py" "$whl" "${e#pin:}" --python "$pyver")
      specs+=($pinned)
    else
      specs+=("$e")
    fi
  done
  (( ${#specs[@]} == 0 )) || { echo "extra: ${specs[*]}"; "${pip[@]}" --no-deps "${specs[@]}"; }
  "${pip[@]}" filelock typing-extensions sympy networkx jinja2 fsspec setuptools
else
  "${pip[@]}" "torch==$version"
fi
"${pip[@]}" numpy pytest
# Its requirement torch>=X is met by the torch above. Lean: without resolving, since pip's resolver
# would also fetch the installed torch's own pins that the build venv's CUDA libraries do not meet.
if [[ $wheel == *.tar.gz ]]; then
  "${pip[@]}" setuptools wheel ninja
  SGL_QUANT_CPU_ONLY=1 "${pip[@]}" --no-build-isolation --no-deps "$wheel"
elif [[ $mode == lean ]]; then
  "${pip[@]}" --no-deps "$wheel"
else
  "${pip[@]}" "$wheel"
fi

work=$(mktemp -d)
cp -r "$root/tests" "$work/tests"
cd "$work"
echo "== $("$venv/bin/python" -c 'import platform, torch; print("CPython", platform.python_version(), "+ torch", torch.__version__)') + $(basename "$wheel")"
"$venv/bin/python" -c "import sgl_quant; print('sgl_quant from', sgl_quant.__file__)"
"$venv/bin/python" "$root/scripts/ci/wheel_smoke.py"
"$venv/bin/python" -m pytest ${SGL_QUANT_CI_TESTS:-tests} -q -p no:cacheprovider -x
rm -rf "$work"
