# The two commands (both set up ./.venv first: torch, build tools, this package):
#   make test    build, then run the test suite (CPU tests everywhere, GPU tests where CUDA is available)
#   make bench   build, then run the benchmark (CUDA kernels on a GPU, else the CPU implementation)
# Other targets: make cmake (C++ build for development), make gpu-check (one-shot GPU run), make clean.
SHELL := bash
.SHELLFLAGS := -eu -o pipefail -c
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
# A torch already importable in the venv (also one inherited from the system site-packages) is kept.
TORCH_SPEC ?= torch==2.14.1
MAX_JOBS ?= $(shell nproc)
SOURCES := setup.py pyproject.toml $(wildcard csrc/*.* csrc/*/*.*)

.PHONY: test bench install cmake gpu-check clean

$(VENV)/.deps-stamp:
	test -x $(PY) || $(PYTHON) -m venv --system-site-packages $(VENV)
	$(PY) -c "import torch" 2>/dev/null || $(PY) -m pip install $(TORCH_SPEC)
	$(PY) -m pip install -q setuptools wheel ninja pybind11 numpy pytest
	touch $@

$(VENV)/.build-stamp: $(VENV)/.deps-stamp $(SOURCES)
	MAX_JOBS=$(MAX_JOBS) $(PY) -m pip install --no-build-isolation --no-deps -v -e . 2>&1 \
	  | grep -E "sgl_quant build|error|Error|Successfully" || (echo "build failed (run: $(PY) -m pip install --no-build-isolation -v -e .)"; exit 1)
	touch $@

install: $(VENV)/.build-stamp

test: install
	$(PY) -m sgl_quant info
	$(PY) -m pytest tests -q -rs -p no:cacheprovider

bench: install
	$(PY) -m sgl_quant bench --quick --out bench_out

cmake: $(VENV)/.deps-stamp
	cmake -S . -B build/cmake -G Ninja -DPython3_EXECUTABLE=$(abspath $(PY)) \
	  -DCMAKE_CUDA_COMPILER=$$($(PY) scripts/find_cuda_home.py)/bin/nvcc
	cmake --build build/cmake -j $(MAX_JOBS)

gpu-check:
	bash scripts/gpu_check.sh

clean:
	rm -rf build dist *.egg-info sgl_quant/_C*.so bench_out gpu_out $(VENV)/.build-stamp
