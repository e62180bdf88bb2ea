"""The build's CUDA toolkit logic (setup.py, scripts/build/find_cuda_home.py), with fake toolkits: the root
found through a wrapper script, the toolkit's version, and the refusals before compiling of a toolkit
whose CUDA major version differs from torch's, of a TORCH_CUDA_ARCH_LIST entry the toolkit does not
know and of one older than the kernels support. Needs the source tree: skipped in a copy of the tests
run against an installed wheel."""
import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
HELPERS = ROOT / "scripts" / "build" / "find_cuda_home.py"
if not (ROOT / "setup.py").is_file() or not HELPERS.is_file():
    pytest.skip("no setup.py / scripts/build beside tests/ (a copy of the tests run against an installed wheel)",
                allow_module_level=True)

spec = importlib.util.spec_from_file_location("find_cuda_home", HELPERS)
helpers = importlib.util.module_from_spec(spec)
spec.loader.exec_module(helpers)


def fake_toolkit(where: Path, version: str) -> Path:
    """A directory that looks like a CUDA toolkit to the build: bin/nvcc (a script that answers --version
    and --list-gpu-arch like nvcc, knowing compute_75, 80, 90 and 100, and prints nothing else) and
    include/cuda_runtime.h."""
    root = where / f"cuda-{version}"
    (root / "bin").mkdir(parents=True)
    (root / "include").mkdir()
    (root / "include" / "cuda_runtime.h").write_text("")
    nvcc = root / "bin" / "nvcc"
    nvcc.write_text('#!/bin/sh\nif [ "$1" = --version ]; then\n'
                    f'  echo "Cuda compilation tools, release {version}, V{version}.0"\n'
                    'elif [ "$1" = --list-gpu-arch ]; then\n'
                    '  printf "compute_75\\ncompute_80\\ncompute_90\\ncompute_100\\n"\nfi\n')
    nvcc.chmod(0o755)
    return root


def test_find_cuda_home_follows_a_wrapper_script(tmp_path, monkeypatch):
    """An nvcc on PATH that is a wrapper script (`exec <root>/bin/nvcc "$@"`): the root is the toolkit
    the script runs, not the wrapper's parent (what torch would guess)."""
    root = fake_toolkit(tmp_path, "12.8")
    wrappers = tmp_path / "wrappers" / "bin"
    wrappers.mkdir(parents=True)
    (wrappers / "nvcc").write_text(f'#!/bin/sh\nexec {root}/bin/nvcc "$@"\n')
    (wrappers / "nvcc").chmod(0o755)
    monkeypatch.delenv("CUDA_HOME", raising=False)
    monkeypatch.delenv("CUDA_PATH", raising=False)
    monkeypatch.setenv("PATH", f"{wrappers}{os.pathsep}{os.environ['PATH']}")
    assert helpers.find_cuda_home() == str(root)
    monkeypatch.setenv("CUDA_HOME", "/somewhere/else")  # an explicit CUDA_HOME wins
    assert helpers.find_cuda_home() == "/somewhere/else"


def test_toolkit_version(tmp_path):
    assert helpers.toolkit_version(fake_toolkit(tmp_path, "12.8")) == (12, 8)
    assert helpers.toolkit_version(fake_toolkit(tmp_path, "13.0")) == (13, 0)
    assert helpers.toolkit_version(tmp_path / "no-toolkit") is None


def run_setup(cuda_home: Path, **env):
    """`python setup.py --version` with CUDA_HOME set: setup.py chooses what to build before setuptools
    reads its arguments, so a refused toolkit fails this too."""
    env = dict(os.environ, CUDA_HOME=str(cuda_home), **env)
    return subprocess.run([sys.executable, "setup.py", "--version"], cwd=ROOT, env=env, capture_output=True, text=True)


@pytest.mark.skipif(torch.version.cuda is None, reason="this torch has no CUDA version to compare with")
def test_setup_refuses_a_toolkit_of_another_cuda_major_version(tmp_path, monkeypatch):
    monkeypatch.delenv("SGL_QUANT_CPU_ONLY", raising=False)
    monkeypatch.delenv("TORCH_CUDA_ARCH_LIST", raising=False)
    torch_major = int(torch.version.cuda.split(".")[0])
    other = fake_toolkit(tmp_path, f"{torch_major - 1}.8")
    r = run_setup(other)
    assert r.returncode != 0
    assert (f"the CUDA toolkit at {other} is CUDA {torch_major - 1}.8, but torch {torch.__version__} was built "
            f"with CUDA {torch.version.cuda}") in r.stderr, r.stderr[-2000:]
    assert "SGL_QUANT_CPU_ONLY=1" in r.stderr
    # the same toolkit with the CPU implementation only, and a toolkit of torch's major version: accepted
    cpu_only = run_setup(other, SGL_QUANT_CPU_ONLY="1")
    assert cpu_only.returncode == 0 and "building the CPU implementation only" in cpu_only.stderr, cpu_only.stderr
    same = run_setup(fake_toolkit(tmp_path, f"{torch_major}.9"))
    assert same.returncode == 0 and "building CPU + CUDA kernels" in same.stderr, same.stderr[-2000:]


@pytest.mark.skipif(torch.version.cuda is None, reason="the arch list is read for CUDA builds only")
def test_setup_refuses_an_arch_the_toolkit_does_not_know(tmp_path, monkeypatch):
    monkeypatch.delenv("SGL_QUANT_CPU_ONLY", raising=False)
    toolkit = fake_toolkit(tmp_path, torch.version.cuda)  # knows compute_75, 80, 90 and 100
    monkeypatch.setenv("TORCH_CUDA_ARCH_LIST", "9.0a;9.5")
    r = run_setup(toolkit)
    assert r.returncode != 0
    assert (f"TORCH_CUDA_ARCH_LIST entry '9.5': the nvcc at {toolkit}/bin/nvcc does not know compute_95; "
            "it knows 7.5, 8.0, 9.0, 10.0") in r.stderr, r.stderr[-2000:]
    monkeypatch.setenv("TORCH_CUDA_ARCH_LIST", "9.0a;10.0a+PTX")
    r = run_setup(toolkit)
    assert r.returncode == 0 and "building CPU + CUDA kernels for sm_90a, sm_100a, compute_100a" in r.stderr, \
        r.stderr[-2000:]


@pytest.mark.skipif(torch.version.cuda is None, reason="the arch list is read for CUDA builds only")
def test_setup_refuses_an_arch_older_than_the_kernels_support(tmp_path, monkeypatch):
    """nvcc knows compute_75, but ptxas refuses the kernels' bf16x2 instructions there: refused before
    compiling, with the oldest supported compute capability; 8.0 is accepted."""
    monkeypatch.delenv("SGL_QUANT_CPU_ONLY", raising=False)
    toolkit = fake_toolkit(tmp_path, torch.version.cuda)
    monkeypatch.setenv("TORCH_CUDA_ARCH_LIST", "9.0a;7.5")
    r = run_setup(toolkit)
    assert r.returncode != 0
    assert "TORCH_CUDA_ARCH_LIST entry '7.5': the kernels need compute capability 8.0 or newer" in r.stderr, \
        r.stderr[-2000:]
    monkeypatch.setenv("TORCH_CUDA_ARCH_LIST", "8.0")
    r = run_setup(toolkit)
    assert r.returncode == 0 and "building CPU + CUDA kernels for sm_80:" in r.stderr, r.stderr[-2000:]
