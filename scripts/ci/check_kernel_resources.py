"""Register budget of every CUDA kernel variant, from ptxas (no GPU needed; ~6 s per file and arch).

The performance work of benchmark/NOTES.md rests on two register counts: plain quantization at
<= 32 registers (2048 resident threads per SM: the memory-bound large calls need full occupancy) and
fused SiLU at <= 40 (its launch bounds; 75% occupancy, SiLUs overlapping within a thread). The fused
RMSNorm kernels (one row per block of up to 1024 threads) must not spill within their launch bounds
(64 registers). A change that spills or crosses a bound would slow the kernels without failing any
CPU test, so CI compiles every instantiation file with `ptxas -v` and checks them all.

    python scripts/ci/check_kernel_resources.py [--arch 90a --arch 100a]
"""
import argparse
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from ci_report import finish  # scripts/ci/ is the script's own directory, first on sys.path
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "build"))
from find_cuda_home import find_cuda_home  # noqa: E402  (scripts/build/)

ROOT = Path(__file__).resolve().parents[2]

MAX_REGISTERS = {False: 32, True: 40}  # v2: plain, fused SiLU
MAX_RMSNORM_REGISTERS = 64  # __launch_bounds__(1024)
# kernels per instantiation file: v2 dense, v2 masked (with and without PDL: FINAL_COUNTS), RMSNorm
KERNELS_PER_FILE = {"dense": 24, "masked": 48, "rmsnorm": 36}
# The flags the extension's build uses for its CUDA sources (setup.py, torch.utils.cpp_extension); keep in step.
FLAGS = ["-O3", "-std=c++20", "--use_fast_math", "--expt-relaxed-constexpr", "-D__CUDA_NO_HALF_OPERATORS__",
         "-D__CUDA_NO_HALF_CONVERSIONS__", "-D__CUDA_NO_BFLOAT16_CONVERSIONS__", "-D__CUDA_NO_HALF2_OPERATORS__"]


def ptxas_report(nvcc, source, arch):
    """[(kernel name, registers, spill bytes)] for one source file and arch."""
    cmd = [nvcc, *FLAGS, f"-gencode=arch=compute_{arch},code=sm_{arch}", "-Xptxas", "-v", "-c", str(source),
           "-o", "/dev/null"]
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{out.stderr[-2000:]}")
    rows, name, spills = [], None, 0
    for line in out.stderr.splitlines():
        if m := re.search(r"(?:Compiling entry function|Function properties for) '?([\w]+)'?", line):
            name = m.group(1)
        elif m := re.search(r"(\d+) bytes spill stores, (\d+) bytes spill loads", line):
            spills = int(m.group(1)) + int(m.group(2))
        elif (m := re.search(r"Used (\d+) registers", line)) and name:
            rows.append((name, int(m.group(1)), spills))
            name, spills = None, 0
    return rows


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--arch", action="append", help="sm architecture, e.g. 90a (default: 90a and 100a)")
    args = ap.parse_args(argv)
    archs = args.arch or ["90a", "100a"]
    nvcc = str(Path(find_cuda_home()) / "bin" / "nvcc")
    sources = sorted((ROOT / "csrc" / "cuda").glob("instantiate_gs*.cu"))
    jobs = [(s, a) for s in sources for a in archs]
    with ThreadPoolExecutor(max_workers=2) as pool:
        reports = list(pool.map(lambda job: ptxas_report(nvcc, *job), jobs))

    errors, worst = [], {}
    for (source, arch), rows in zip(jobs, reports):
        layout = re.search(r"_(dense|masked|rmsnorm)\.cu$", source.name).group(1)
        family = "rmsnorm_quant_kernel" if layout == "rmsnorm" else "per_token_group_quant_kernel"
        kernels = [r for r in rows if family in r[0]]
        # v2: {bf16, fp16} x {fp8, int8} x 3 scale kinds x {plain, SiLU}, one layout per file, and for the
        # masked layout each of them also as the no-PDL FINAL_COUNTS kernel;
        # RMSNorm: {bf16, fp16} x {fp8, int8} x 3 scale kinds x {1 chunk per thread, 1 prefetching, 2}
        expected = KERNELS_PER_FILE[layout]
        if len(kernels) != expected:
            errors.append(f"{source.name} sm_{arch}: {len(kernels)} kernels in the ptxas report, expected {expected}")
        for name, regs, spills in kernels:
            if family == "rmsnorm_quant_kernel":
                flags = re.search(r"ELi([12])ELb([01])EEEvNS_", name)  # template arguments CHUNKS, PREFETCH
                chunks, prefetch = flags.group(1), flags.group(2) == "1"
                kind = f"RMSNorm {chunks} chunk{'s' if chunks == '2' else ''}{' prefetching' if prefetch else ''}"
                key, bound = (arch, kind, ""), MAX_RMSNORM_REGISTERS
            else:
                flags = re.search(r"ELb([01])ELb([01])ELb[01]EEEv", name)  # template arguments SILU, MASKED, FINAL_COUNTS
                silu, masked = flags.group(1) == "1", flags.group(2) == "1"
                key, bound = (arch, "fused SiLU" if silu else "plain", "masked" if masked else "dense"), MAX_REGISTERS[silu]
            worst[key] = (max(worst.get(key, (0, 0))[0], regs), bound)
            if spills:
                errors.append(f"{source.name} sm_{arch} {name}: {spills} bytes of register spills")
            if regs > bound:
                errors.append(f"{source.name} sm_{arch} {name}: {regs} registers > {bound}")
    for (arch, kind, layout), (regs, bound) in sorted(worst.items()):
        print(f"sm_{arch} {kind:>29} {layout:>6}: at most {regs} registers (bound {bound})")
    return finish("kernel resources", errors,
                  f": {len(sources)} files x {len(archs)} archs, {KERNELS_PER_FILE['dense']} (v2 dense), "
                  f"{KERNELS_PER_FILE['masked']} (v2 masked) or {KERNELS_PER_FILE['rmsnorm']} (RMSNorm) kernels each, "
                  "no spills")


if __name__ == "__main__":
    sys.exit(main())
