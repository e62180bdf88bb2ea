"""A device that the build has no CUDA code for is refused before any launch, with a message that names the
device, the archs built and the fix (csrc/cuda/kernel_image.h); the test GPU itself is found covered. The
refusal needs a kernel without code for the test GPU: a program compiled here, with the header, for another
arch (needs the source tree and nvcc)."""
import importlib.util
import subprocess
from pathlib import Path

import pytest
import torch

import sgl_quant

ROOT = Path(__file__).resolve().parents[1]
HEADER = ROOT / "csrc" / "cuda" / "kernel_image.h"

PROGRAM = r"""
#include <cstdio>
#include "kernel_image.h"
__global__ void probe_kernel(int* out) { *out = 1; }
int main() {
  const std::string problem = sgl_quant::kernel_image_problem(reinterpret_cast<const void*>(probe_kernel), 0, BUILT);
  const cudaError_t after = cudaGetLastError();
  std::printf("last error after: %d\nproblem: %s\n", static_cast<int>(after), problem.c_str());
  return 0;
}
"""

pytestmark = pytest.mark.gpu


def cuda_home():
    """The toolkit root as the build finds it (scripts/build/find_cuda_home.py); None without the source tree."""
    helpers = ROOT / "scripts" / "build" / "find_cuda_home.py"
    if not helpers.is_file():
        return None
    spec = importlib.util.spec_from_file_location("find_cuda_home", helpers)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.find_cuda_home()


def run_program(tmp_path, arch):
    """The program's output, built with SASS for sm_<arch> only and run on device 0 (torch's too)."""
    source = tmp_path / "probe.cu"
    source.write_text(PROGRAM)
    exe = tmp_path / f"probe_{arch}"
    nvcc = Path(cuda_home()) / "bin" / "nvcc"
    subprocess.run([str(nvcc), "-std=c++17", f"-gencode=arch=compute_{arch},code=sm_{arch}", f"-I{HEADER.parent}",
                    f'-DBUILT="sm_{arch}"', str(source), "-o", str(exe)], check=True)
    return subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout


@pytest.mark.skipif(not HEADER.is_file(), reason="no csrc/ beside tests/ (a copy of the tests run against a wheel)")
@pytest.mark.skipif(not torch.cuda.is_available() or cuda_home() is None, reason="needs a GPU and nvcc")
def test_device_without_kernel_image_is_named(tmp_path):
    major, minor = torch.cuda.get_device_capability(0)
    other = "80" if major != 8 else "90"  # SASS of another major version: never runs on this device
    out = run_program(tmp_path, other)
    assert "last error after: 0" in out, out  # the failed query's error does not linger for torch to find
    name = torch.cuda.get_device_name(0)
    for part in ("cudaErrorNoKernelImageForDevice", f"({name}, compute capability {major}.{minor})",
                 f"CUDA code for sm_{other}.", f'TORCH_CUDA_ARCH_LIST="{major}.{minor}"'):
        assert part in out, (part, out)
    # the same kernel with code for this device: no problem
    out = run_program(tmp_path, f"{major}{minor}")
    assert "last error after: 0\nproblem: \n" in out, out


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")
@pytest.mark.skipif(not sgl_quant.build_info()["cuda_kernels"], reason="build without CUDA kernels")
def test_build_has_kernels_for_every_device():
    for device in range(torch.cuda.device_count()):
        assert sgl_quant._C._device_kernel_problem(device) == ""
    info = sgl_quant.build_info()
    assert info["device_has_kernels"] is True and "device_kernel_problem" not in info
