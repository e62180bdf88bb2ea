"""Register budget and PDL load order of every CUDA kernel variant, from ptxas and the SASS (no GPU
needed; ~6 s per file and arch).

The performance work of benchmark/NOTES.md rests on two register counts: plain quantization at
<= 32 registers (2048 resident threads per SM: the memory-bound large calls need full occupancy) and
fused SiLU at <= 40 (its launch bounds; 75% occupancy, SiLUs overlapping within a thread). The fused
RMSNorm kernels (one row per block of up to 1024 threads) must not spill within their launch bounds
(64 registers). A change that spills or crosses a bound would slow the kernels without failing any
CPU test, so CI compiles every instantiation file with `ptxas -v` and checks them all.

PDL: a kernel launched with programmatic dependent launch runs while its producer still writes, so
every 128-bit load (input, weight) must come after `griddepcontrol.wait` (SASS ACQBULK) on every path,
and no load may use the read-only path (ld.global.nc, SASS LDG...CONSTANT), which ptxas is free to move
above the wait (it did so once: benchmark/NOTES.md session 18). A race there would show as wrong bytes
only now and then on a GPU; the SASS shows it always. The no-PDL kernels (dense_no_pdl_kernel,
masked_no_pdl_kernel) are launched only without PDL (their producer has finished), so they have no
wait; for them only the read-only-path rule applies. Needs cuobjdump (the CUDA toolkit's,
or the copy that ships with Triton).

    python scripts/ci/check_kernel_resources.py [--arch 90a --arch 100a]
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from ci_report import finish  # scripts/ci/ is the script's own directory, first on sys.path
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "build"))
from find_cuda_home import find_cuda_home  # noqa: E402  (scripts/build/)

ROOT = Path(__file__).resolve().parents[2]

MAX_REGISTERS = {False: 32, True: 40}  # v2: plain, fused SiLU
MAX_RMSNORM_REGISTERS = 64  # __launch_bounds__(1024)
# kernels per instantiation file: v2 dense, v2 masked, RMSNorm
KERNELS_PER_FILE = {"dense": 24, "masked": 24, "rmsnorm": 96}
# rmsnorm_quant.cuh's RmsNormSchedule, by value
RMSNORM_SCHEDULES = ["1 chunk", "2 chunks", "1 chunk prefetching", "1 chunk clustered", "1 chunk staged"]
# and in each v2 file the kernels for launches without PDL (dense_no_pdl_kernel, masked_no_pdl_kernel)
NO_PDL_KERNELS_PER_FILE = 24
# and in each dense file the small-call kernels: {bf16, fp16} x {fp8, int8} x 3 scale kinds (plain bound)
SMALL_CALL_KERNELS_PER_FILE = 12
# The flags the extension's build uses for its CUDA sources (setup.py, torch.utils.cpp_extension); keep in step.
FLAGS = ["-O3", "-std=c++20", "--use_fast_math", "--expt-relaxed-constexpr", "-D__CUDA_NO_HALF_OPERATORS__",
         "-D__CUDA_NO_HALF_CONVERSIONS__", "-D__CUDA_NO_BFLOAT16_CONVERSIONS__", "-D__CUDA_NO_HALF2_OPERATORS__"]


def find_cuobjdump():
    """cuobjdump of the CUDA toolkit, else the one Triton ships (the local toolkit may lack it)."""
    for candidate in (Path(find_cuda_home()) / "bin" / "cuobjdump", shutil.which("cuobjdump")):
        if candidate and Path(candidate).is_file():
            return str(candidate)
    try:
        import triton
        candidate = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "cuobjdump"
        if candidate.is_file():
            return str(candidate)
    except ImportError:
        pass
    raise SystemExit("no cuobjdump found (CUDA toolkit bin/, PATH, or Triton's backends/nvidia/bin/)")


SASS_INSTRUCTION = re.compile(r"^\s+/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;")


def sass_functions(cuobjdump, cubin):
    """{function name: [(address, instruction text)]} of a cubin."""
    out = subprocess.run([cuobjdump, "-sass", str(cubin)], capture_output=True, text=True, check=True).stdout
    functions, current = {}, None
    for line in out.splitlines():
        if m := re.match(r"\s+Function : (\S+)", line):
            current = functions.setdefault(m.group(1), [])
        elif (m := SASS_INSTRUCTION.match(line)) and current is not None:
            current.append((int(m.group(1), 16), m.group(2)))
    return functions


def loads_before_wait(instructions):
    """The 128-bit global loads that some path from the kernel's entry reaches without passing an ACQBULK
    (griddepcontrol.wait), and every read-only-path (.CONSTANT) load. A predicated ACQBULK, or a
    conditional branch over just one ACQBULK, counts as the wait: pdl_wait_for_producer_after's wait,
    predicated on a pointer that is never null. Control flow the walk does not follow (indirect
    branches, calls, a branch target it cannot find) raises ValueError."""
    index = {address: i for i, (address, _) in enumerate(instructions)}
    n = len(instructions)

    def successors(i):
        text = instructions[i][1]
        pred = re.match(r"@!?U?P\w+\s+", text)
        op = text[pred.end():] if pred else text
        if op.startswith(("EXIT", "RET")):
            return [i + 1] if pred else []
        if op.startswith(("BRX", "JMX", "JMP", "CALL")):
            raise ValueError(f"control flow not followed: {text}")
        if m := re.match(r"BRA(?:\.\w+)*\s+(?:\S+,\s*)?`?\(?(0x[0-9a-f]+)", op):
            target = index.get(int(m.group(1), 16))
            if target is None:
                raise ValueError(f"branch target not found: {text}")
            if not pred:
                return [target]
            if i + 1 < n and instructions[i + 1][1].startswith("ACQBULK") and target == i + 2:
                return [i + 1]
            return [i + 1, target]
        return [i + 1]

    reached, stack = [False] * n, [0]
    reached[0] = n > 0
    while stack:
        i = stack.pop()
        if re.match(r"(@!?P\w+\s+)?ACQBULK", instructions[i][1]):
            continue  # what follows the wait is waited for
        for j in successors(i):
            if j < n and not reached[j]:
                reached[j] = True
                stack.append(j)
    early = [ins for i, ins in enumerate(instructions) if reached[i] and re.search(r"\bLDG\.E\.128", ins[1])]
    read_only = [ins for ins in instructions if re.search(r"\bLDG\S*\.CONSTANT", ins[1])]
    return early, read_only


def compile_and_report(nvcc, cuobjdump, source, arch, workdir):
    """([(kernel name, registers, spill bytes)], {kernel name: SASS}) for one source file and arch."""
    cubin = Path(workdir) / f"{source.stem}.sm_{arch}.cubin"
    cmd = [nvcc, *FLAGS, f"-gencode=arch=compute_{arch},code=sm_{arch}", "-Xptxas", "-v", "-cubin", str(source),
           "-o", str(cubin)]
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{out.stderr[-2000:]}")
    sass = sass_functions(cuobjdump, cubin)
    os.remove(cubin)
    return ptxas_rows(out.stderr), sass


def ptxas_rows(stderr):
    """[(kernel name, registers, spill bytes)] from ptxas -v."""
    rows, name, spills = [], None, 0
    for line in stderr.splitlines():
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
    cuobjdump = find_cuobjdump()
    sources = sorted((ROOT / "csrc" / "cuda").glob("instantiate_gs*.cu"))
    jobs = [(s, a) for s in sources for a in archs]
    with tempfile.TemporaryDirectory() as workdir, ThreadPoolExecutor(max_workers=2) as pool:
        reports = list(pool.map(lambda job: compile_and_report(nvcc, cuobjdump, *job, workdir), jobs))

    errors, worst, pdl_checked = [], {}, 0
    for (source, arch), (rows, sass) in zip(jobs, reports):
        layout = re.search(r"_(dense|masked|rmsnorm)\.cu$", source.name).group(1)
        family = "rmsnorm_quant_kernel" if layout == "rmsnorm" else "per_token_group_quant_kernel"
        kernels = [r for r in rows if family in r[0]]
        # v2: {bf16, fp16} x {fp8, int8} x 3 scale kinds x {plain, SiLU}, one layout per file, each of them
        # also as the layout's no-PDL kernel;
        # RMSNorm: {bf16, fp16} x {fp8, int8} x 3 scale kinds x 8 kernels: 5 schedules (RMSNORM_SCHEDULES), and
        # the three one-chunk schedules from global memory again with WAIT_AT_ROW (for PDL launches)
        expected = KERNELS_PER_FILE[layout]
        if len(kernels) != expected:
            errors.append(f"{source.name} sm_{arch}: {len(kernels)} kernels in the ptxas report, expected {expected}")
        if layout == "dense":
            small = [r for r in rows if "small_call_quant_kernel" in r[0]]
            if len(small) != SMALL_CALL_KERNELS_PER_FILE:
                errors.append(f"{source.name} sm_{arch}: {len(small)} small-call kernels in the ptxas report, "
                              f"expected {SMALL_CALL_KERNELS_PER_FILE}")
            kernels += small
        if layout != "rmsnorm":
            no_pdl_kernels = [r for r in rows if f"{layout}_no_pdl_kernel" in r[0]]
            if len(no_pdl_kernels) != NO_PDL_KERNELS_PER_FILE:
                errors.append(f"{source.name} sm_{arch}: {len(no_pdl_kernels)} no-PDL kernels in the ptxas report, "
                              f"expected {NO_PDL_KERNELS_PER_FILE}")
            kernels += no_pdl_kernels
        for name, regs, spills in kernels:
            no_pdl = "_no_pdl_kernel" in name  # launched only without PDL
            if "small_call_quant_kernel" in name:
                key, bound = (arch, "plain small-call", "dense"), MAX_REGISTERS[False]
            elif family == "rmsnorm_quant_kernel":
                # template arguments S (RmsNormSchedule, in the order of its declaration) and WAIT_AT_ROW
                flags = re.search(r"RmsNormScheduleE(\d)ELb([01])EEEvNS_", name)
                kind = f"RMSNorm {RMSNORM_SCHEDULES[int(flags.group(1))]}" + (", row wait" if flags.group(2) == "1" else "")
                key, bound = (arch, kind, ""), MAX_RMSNORM_REGISTERS
            elif no_pdl:
                silu = re.search(r"ELb([01])EEEvNS_9NoPdlArgs", name).group(1) == "1"  # template argument SILU
                masked = "masked_no_pdl_kernel" in name
                key, bound = (arch, "fused SiLU" if silu else "plain", "masked" if masked else "dense"), MAX_REGISTERS[silu]
            else:
                flags = re.search(r"ELb([01])ELb([01])EEEv", name)  # template arguments SILU, MASKED
                silu, masked = flags.group(1) == "1", flags.group(2) == "1"
                key, bound = (arch, "fused SiLU" if silu else "plain", "masked" if masked else "dense"), MAX_REGISTERS[silu]
            worst[key] = (max(worst.get(key, (0, 0))[0], regs), bound)
            if spills:
                errors.append(f"{source.name} sm_{arch} {name}: {spills} bytes of register spills")
            if regs > bound:
                errors.append(f"{source.name} sm_{arch} {name}: {regs} registers > {bound}")
            try:
                early, read_only = loads_before_wait(sass.get(name, []))
            except ValueError as e:
                early, read_only = [], []
                errors.append(f"{source.name} sm_{arch} {name}: SASS walk: {e}")
            pdl_checked += name in sass
            if name not in sass:
                errors.append(f"{source.name} sm_{arch} {name}: not in the cubin's SASS")
            for address, text in [] if no_pdl else early[:2]:  # no-PDL kernels have no wait to come after
                errors.append(f"{source.name} sm_{arch} {name}: {address:#06x} {text} can run before the PDL wait")
            for address, text in read_only[:2]:
                errors.append(f"{source.name} sm_{arch} {name}: {address:#06x} {text} is a read-only-path (.nc) load")
    for (arch, kind, layout), (regs, bound) in sorted(worst.items()):
        print(f"sm_{arch} {kind:>35} {layout:>6}: at most {regs} registers (bound {bound})")
    return finish("kernel resources", errors,
                  f": {len(sources)} files x {len(archs)} archs, "
                  f"{KERNELS_PER_FILE['dense']} + {SMALL_CALL_KERNELS_PER_FILE} + {NO_PDL_KERNELS_PER_FILE} (v2 dense, "
                  f"small-call, no-PDL), {KERNELS_PER_FILE['masked']} + {NO_PDL_KERNELS_PER_FILE} (v2 masked, no-PDL) or "
                  f"{KERNELS_PER_FILE['rmsnorm']} (RMSNorm) kernels each, no spills; {pdl_checked} kernels' SASS: every "
                  f"128-bit load after the PDL wait (but in the no-PDL kernels), no .nc loads")


if __name__ == "__main__":
    sys.exit(main())
