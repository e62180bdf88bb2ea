"""Build of sgl_quant: one extension, sgl_quant._C (C++ CPU implementation + CUDA kernels).

Environment:
  TORCH_CUDA_ARCH_LIST  CUDA archs, e.g. "9.0a" or "9.0a;10.0a" (entries may end in +PTX).
                        Default: 9.0a, plus 10.0a when nvcc supports it, plus compute_90 PTX.
  MAX_JOBS              parallel compile jobs (ninja).
  CUDA_HOME             CUDA toolkit root; derived from nvcc when unset (also through wrapper scripts).
  SGL_QUANT_CPU_ONLY=1  build the CPU implementation only.
  SGL_QUANT_LOCAL_VERSION  local version label of the wheel (the CI matrix sets cu<ver>.sm<arch>).

The extension uses the LibTorch stable ABI only (docs/spec.md §7) and Python's limited C API: one build
loads in every torch >= TORCH_MIN and every CPython >= 3.10 (an abi3 wheel). It is compiled against
the installed torch's headers with TORCH_TARGET_VERSION = TORCH_MIN, so that no newer stable API
slips in.
"""
import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import setuptools
from setuptools import setup

ROOT = Path(__file__).resolve().parent


def log(msg):
    print(f"[sgl_quant build] {msg}", file=sys.stderr, flush=True)


def _load_cuda_toolkit_helpers():
    spec = importlib.util.spec_from_file_location("find_cuda_home", ROOT / "scripts" / "build" / "find_cuda_home.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.find_cuda_home, module.toolkit_version


find_cuda_home, toolkit_version = _load_cuda_toolkit_helpers()
cuda_home = find_cuda_home()
if cuda_home:
    os.environ["CUDA_HOME"] = cuda_home  # read by torch.utils.cpp_extension at import time

import torch  # noqa: E402
from torch.utils.cpp_extension import BuildExtension, CppExtension, CUDAExtension  # noqa: E402

VERSION = re.search(r'__version__ = "([^"]+)"', (ROOT / "sgl_quant" / "_version.py").read_text()).group(1)
if os.environ.get("SGL_QUANT_LOCAL_VERSION"):  # e.g. cu128.torch2.14.1.sm9.0a: one wheel per build flavour
    VERSION += "+" + os.environ["SGL_QUANT_LOCAL_VERSION"]
# The oldest torch whose stable ABI covers what csrc/ uses (torch::stable::parallel_for, string
# values and the versioned op registration arrived in 2.10); the wheel's metadata asks for it.
TORCH_MIN = (2, 10)
PY_LIMITED_API = "cp310"  # abi3 from CPython 3.10 (torch.utils.cpp_extension sets Py_LIMITED_API to match)


def nvcc_archs(nvcc):
    try:
        out = subprocess.run([nvcc, "--list-gpu-arch"], capture_output=True, text=True, check=True).stdout
        return set(re.findall(r"compute_(\d+)", out))
    except (OSError, subprocess.CalledProcessError):
        return set()


MIN_CUDA_ARCH = 8  # major compute capability: ptxas refuses the kernels' bf16x2 instructions below sm_80


def cuda_arch_flags(nvcc):
    """-gencode flags and a printable list of what they produce."""
    spec = os.environ.get("TORCH_CUDA_ARCH_LIST", "").strip()
    supported = nvcc_archs(nvcc)
    entries = []  # (number, suffix, ptx)
    if spec:
        for item in re.split(r"[;\s,]+", spec):
            m = re.fullmatch(r"(\d+)\.(\d+)([af]?)(\+PTX)?", item.strip())
            if not m:
                raise SystemExit(f"[sgl_quant build] cannot parse TORCH_CUDA_ARCH_LIST entry {item!r}")
            # before compiling, not as an "nvcc fatal" from the first of the build's jobs
            if supported and m.group(1) + m.group(2) not in supported:
                raise SystemExit(
                    f"[sgl_quant build] TORCH_CUDA_ARCH_LIST entry {item!r}: the nvcc at {nvcc} does not know "
                    f"compute_{m.group(1)}{m.group(2)}; it knows "
                    f"{', '.join(f'{int(a) // 10}.{int(a) % 10}' for a in sorted(supported, key=int))}")
            if int(m.group(1)) < MIN_CUDA_ARCH:
                raise SystemExit(
                    f"[sgl_quant build] TORCH_CUDA_ARCH_LIST entry {item!r}: the kernels need compute capability "
                    f"{MIN_CUDA_ARCH}.0 or newer (their bf16 arithmetic uses sm_80 instructions)")
            entries.append((m.group(1) + m.group(2), m.group(3), bool(m.group(4))))
    else:
        entries.append(("90", "a", False))
        if "100" in supported:
            entries.append(("100", "a", False))
        entries.append(("90", "", "ptx-only"))  # forward-compatible PTX, no extra SASS compile
    flags, produced = [], []
    for num, suffix, ptx in entries:
        if ptx != "ptx-only":
            flags.append(f"-gencode=arch=compute_{num}{suffix},code=sm_{num}{suffix}")
            produced.append(f"sm_{num}{suffix}")
        if ptx:
            flags.append(f"-gencode=arch=compute_{num}{suffix},code=compute_{num}{suffix}")
            produced.append(f"compute_{num}{suffix}")
    return flags, produced


def want_cuda():
    if os.environ.get("SGL_QUANT_CPU_ONLY") == "1":
        return False, "SGL_QUANT_CPU_ONLY=1"
    if torch.version.cuda is None:
        return False, "this torch has no CUDA support"
    if not cuda_home:
        return False, "no CUDA toolkit (nvcc) found; set CUDA_HOME"
    # The extension links torch's CUDA runtime, so it must be compiled for torch's CUDA major version.
    # torch.utils.cpp_extension refuses a mismatch too, but only when the build starts and with a bare
    # tuple for a message; say here what differs and the three ways out.
    toolkit = toolkit_version(cuda_home)
    torch_major = int(torch.version.cuda.split(".")[0])
    if toolkit and toolkit[0] != torch_major:
        raise SystemExit(
            f"[sgl_quant build] the CUDA toolkit at {cuda_home} is CUDA {toolkit[0]}.{toolkit[1]}, but torch "
            f"{torch.__version__} was built with CUDA {torch.version.cuda}, and the extension must use torch's CUDA "
            f"major version. Set CUDA_HOME to a CUDA {torch_major}.x toolkit, install a torch built for CUDA "
            f"{toolkit[0]}, or set SGL_QUANT_CPU_ONLY=1 to build the CPU implementation only.")
    return True, f"CUDA toolkit at {cuda_home}, torch {torch.__version__} (CUDA {torch.version.cuda})"


def extension():
    cpu_sources = ["csrc/ops.cpp", "csrc/quant_args.cpp", "csrc/cpu/quant_cpu.cpp"]
    # No -std flag: torch.utils.cpp_extension adds the C++ standard its own headers need.
    # Hidden visibility: the library exports PyInit__C only, so none of the header-only torch code
    # compiled into it can interpose on libtorch's own copies.
    # -ffp-contract=off: the CPU implementation's fp32 steps are the kernels' (no fused multiply-adds but
    # its explicit ones); -fno-trapping-math lets its branch-free selects vectorize (no value changes:
    # nothing reads the floating-point exception flags).
    target = "-DTORCH_TARGET_VERSION=0x%02x%02x000000000000" % TORCH_MIN
    cxx = ["-O3", "-ffp-contract=off", "-fno-trapping-math", "-fvisibility=hidden", "-fvisibility-inlines-hidden",
           target, f"-DSGL_QUANT_VERSION_TOKEN={VERSION}"]
    use_cuda, why = want_cuda()
    if not use_cuda:
        log(f"building the CPU implementation only: {why}")
        return CppExtension("sgl_quant._C", cpu_sources, extra_compile_args={"cxx": cxx}, py_limited_api=True)
    nvcc = str(Path(cuda_home) / "bin" / "nvcc")
    gencode, produced = cuda_arch_flags(nvcc)
    log(f"building CPU + CUDA kernels for {', '.join(produced)}: {why}")
    archs = f"-DSGL_QUANT_CUDA_ARCHS_TOKEN={','.join(produced)}"
    cuda_sources = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "csrc" / "cuda").glob("*.cu"))
    return CUDAExtension(
        "sgl_quant._C",
        cpu_sources + cuda_sources,
        extra_compile_args={
            "cxx": cxx + ["-DSGL_QUANT_WITH_CUDA", archs],
            # USE_CUDA: the stable C shim's CUDA declarations (the current stream)
            "nvcc": ["-O3", "--use_fast_math", "-DSGL_QUANT_WITH_CUDA", "-DUSE_CUDA", "-lineinfo", target,
                     "-Xcompiler=-fvisibility=hidden"] + gencode,
        },
        py_limited_api=True,
    )


# The license as an SPDX expression (core metadata 2.4's License-Expression) where setuptools takes one (77
# on); older ones take only the License text. pyproject.toml cannot say either for both: its table form is
# deprecated (refused by setuptools from 2027-02-18) and its string form is refused before 77, and the
# device machine builds with whatever setuptools it has (--no-build-isolation).
SETUPTOOLS_VERSION = tuple(int(p) for p in re.findall(r"\d+", setuptools.__version__)[:2])
LICENSE = {"license_expression": "Apache-2.0"} if SETUPTOOLS_VERSION >= (77, 0) else {"license": "Apache-2.0"}

setup(
    version=VERSION,
    packages=["sgl_quant"],
    package_data={"sgl_quant": ["selftest_golden.json", "py.typed", "_C.pyi"]},
    ext_modules=[extension()],
    cmdclass={"build_ext": BuildExtension.with_options(use_ninja=True)},
    install_requires=["torch>=%d.%d" % TORCH_MIN],  # stable ABI: any torch from TORCH_MIN on
    options={"bdist_wheel": {"py_limited_api": PY_LIMITED_API}},
    zip_safe=False,
    **LICENSE,
)
