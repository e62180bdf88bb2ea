"""Register budget and PDL load order of every CUDA kernel of the built extension, from its SASS and
resource usage (cuobjdump; no GPU, no second compile).

The kernels' speed rests on two register counts: plain v2 quantization at <= 32 registers (2048 resident
threads per SM: the memory-bound large calls need full occupancy) and fused SiLU at <= 40 (its launch
bounds; SiLUs overlapping within a thread). The fused RMSNorm kernels (one row per block of up to 1024
threads) must not spill within their launch bounds (64 registers; the four-chunk kernel's, 72). A change
that spills or crosses a bound would slow the kernels without failing any CPU test, so CI checks every
kernel of every SASS arch in sgl_quant._C, and counts them (docs/design.md: the kernel budget).

PDL: a kernel launched with programmatic dependent launch runs while its producer still writes, so every
128-bit load (input, weight, residual) must come after `griddepcontrol.wait` (SASS ACQBULK) on every
path, and no load may use the read-only path (ld.global.nc, SASS LDG...CONSTANT), which ptxas is free
to move above the wait. A race there would show as wrong bytes only now and then on a GPU; the SASS
shows it always. The no-PDL kernels (dense_no_pdl_kernel, masked_no_pdl_kernel) are launched only without
PDL (their producer has finished), so they have no wait; for them only the read-only-path rule applies.
Needs cuobjdump (the CUDA toolkit's, or the copy that ships with Triton) and a build with CUDA kernels.

    python scripts/ci/check_kernel_resources.py [path/to/_C.abi3.so]
"""
import argparse
import re
import shutil
import subprocess
import sys
from pathlib import Path

from ci_report import finish  # scripts/ci/ is the script's own directory, first on sys.path
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "build"))
from find_cuda_home import find_cuda_home  # noqa: E402  (scripts/build/)

MAX_REGISTERS = {False: 32, True: 40}  # v2: plain, fused SiLU
MAX_RMSNORM_REGISTERS = 64  # __launch_bounds__(1024)
MAX_RMSNORM_FOUR_CHUNK_REGISTERS = 72  # __launch_bounds__(896), kRmsNormFourChunksMaxThreads
MAX_SCALED_REGISTERS = 64  # per-token / per-tensor: __launch_bounds__(1024)
# Kernels per arch, by kernel name. Per group size (x 5), each over {bf16, fp16} x {fp8, int8}: v2, the general
# kernel (dense: {fp32, packed scales} x {plain, SiLU}; masked: {plain, SiLU}), the no-PDL kernels (dense:
# {fp32, packed} x {plain, SiLU}; masked: {plain, SiLU}) and the small-call kernel ({fp32, packed}); the fused
# RMSNorm op, 8 kernels (RMSNORM_SCHEDULES, the one-chunk ones from global memory in two PDL forms). Once:
# the fused op's per-token / per-tensor kernels ({bf16, fp16} x {fp8, int8} x 7: one chunk and prefetching in
# two PDL forms, two chunks, two and four chunks of input words); per-token / per-tensor quantization,
# {bf16, fp16} x {fp8, int8} x {plain, SiLU}, and its amax kernel ({bf16, fp16} x {plain, SiLU}).
GROUP_SIZES = 5  # 16, 32, 64, 128, 256: one instantiation file per family and group size
# (+ 4 of each dense plain form for vLLM's packed op: group size 128, ScaleStore::kPackedPadded)
KERNELS_PER_ARCH = {
    "per_token_group_quant_kernel": 24 * GROUP_SIZES + 4, "dense_no_pdl_kernel": 16 * GROUP_SIZES + 4,
    "masked_no_pdl_kernel": 8 * GROUP_SIZES, "small_call_quant_kernel": 8 * GROUP_SIZES + 4,
    "rmsnorm_quant_kernel": 32 * GROUP_SIZES + 28, "scaled_quant_kernel": 8, "tensor_amax_kernel": 4,
}
MAX_KERNELS_PER_ARCH = 500  # the budget (docs/design.md)
# rmsnorm_quant.cuh's RmsNormSchedule, by value
RMSNORM_SCHEDULES = ["1 chunk", "2 chunks", "1 chunk prefetching", "1 chunk clustered", "1 chunk staged",
                     "2 chunks, input words", "4 chunks, input words"]
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


def per_arch(cuobjdump, flag, library):
    """{arch: the cuobjdump output of its SASS (ELF) sections} for `cuobjdump <flag> library` (the PTX
    sections, compiled to SASS only where they run, are left out)."""
    out = subprocess.run([cuobjdump, flag, str(library)], capture_output=True, text=True, check=True).stdout
    sections, elf, arch = {}, False, None
    for line in out.splitlines():
        if m := re.match(r"Fatbin (\w+) code:", line):
            elf, arch = m.group(1) == "elf", None
        elif m := re.match(r"arch = (sm_\w+)", line):
            arch = m.group(1) if elf else None
        elif arch is not None:
            sections.setdefault(arch, []).append(line)
    return sections


def sass_functions(lines):
    """{function name: [(address, instruction text)]} of one arch's SASS."""
    functions, current = {}, None
    for line in lines:
        if m := re.match(r"\s+Function : (\S+)", line):
            current = functions.setdefault(m.group(1), [])
        elif (m := SASS_INSTRUCTION.match(line)) and current is not None:
            current.append((int(m.group(1), 16), m.group(2)))
    return functions


def resource_rows(lines):
    """[(kernel name, registers, stack + local bytes)] of one arch's resource usage (spills use the stack
    and local memory; the kernels have none otherwise)."""
    rows, name = [], None
    for line in lines:
        if m := re.match(r"\s*Function (\S+):", line):
            name = m.group(1)
        elif (m := re.search(r"REG:(\d+) STACK:(\d+) SHARED:\d+ LOCAL:(\d+)", line)) and name:
            rows.append((name, int(m.group(1)), int(m.group(2)) + int(m.group(3))))
            name = None
    return rows


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


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("library", nargs="?", help="the built extension (default: sgl_quant._C as imported)")
    args = ap.parse_args(argv)
    library = args.library
    if library is None:
        import sgl_quant
        from sgl_quant import _C
        if not sgl_quant.build_info()["cuda_kernels"]:
            raise SystemExit(f"{_C.__file__} holds no CUDA kernels (a CPU-only build)")
        library = _C.__file__
    cuobjdump = find_cuobjdump()
    resources, sass_of = per_arch(cuobjdump, "--dump-resource-usage", library), per_arch(cuobjdump, "-sass", library)

    errors, worst, pdl_checked, counts = [], {}, 0, {}
    for arch, lines in sorted(resources.items()):
        rows = [r for r in resource_rows(lines) if any(k in r[0] for k in KERNELS_PER_ARCH)]
        sass = sass_functions(sass_of.get(arch, []))
        counts[arch] = len(rows)
        for kernel, expected in KERNELS_PER_ARCH.items():
            found = sum(kernel in name for name, _, _ in rows)
            if found != expected:
                errors.append(f"{arch}: {found} {kernel}s, expected {expected}")
        for name, regs, spills in rows:
            no_pdl = "_no_pdl_kernel" in name  # launched only without PDL
            if "scaled_quant_kernel" in name or "tensor_amax_kernel" in name:
                key, bound = (arch, "per-token/per-tensor" + (" amax" if "amax" in name else "")), MAX_SCALED_REGISTERS
            elif "small_call_quant_kernel" in name:
                key, bound = (arch, "v2 small-call"), MAX_REGISTERS[False]
            elif "rmsnorm_quant_kernel" in name:
                # template arguments S (RmsNormSchedule, by value), WAIT_AT_ROW and SCALED
                flags = re.search(r"RmsNormScheduleE(\d)ELb([01])ELb([01])EEEv", name)
                kind = (f"RMSNorm {RMSNORM_SCHEDULES[int(flags.group(1))]}" + (", row wait" if flags.group(2) == "1" else "")
                        + (", per-token/tensor" if flags.group(3) == "1" else ""))
                four_chunks = RMSNORM_SCHEDULES[int(flags.group(1))].startswith("4")
                key, bound = (arch, kind), MAX_RMSNORM_FOUR_CHUNK_REGISTERS if four_chunks else MAX_RMSNORM_REGISTERS
            elif no_pdl:
                silu = re.search(r"ELb([01])EEEvNS_\d+(Dense|Masked)NoPdlArgs", name).group(1) == "1"  # template argument SILU
                layout = "masked" if "masked_no_pdl_kernel" in name else "dense"
                key, bound = (arch, f"v2 {layout} no-PDL {'fused SiLU' if silu else 'plain'}"), MAX_REGISTERS[silu]
            else:
                flags = re.search(r"ELb([01])ELb([01])EEEvNS_10KernelArgs", name)  # template arguments SILU, MASKED
                silu, masked = flags.group(1) == "1", flags.group(2) == "1"
                kind = f"v2 {'masked' if masked else 'dense'} {'fused SiLU' if silu else 'plain'}"
                key, bound = (arch, kind), MAX_REGISTERS[silu]
            worst[key] = (max(worst.get(key, (0, 0))[0], regs), bound)
            if spills:
                errors.append(f"{arch} {name}: {spills} bytes of stack / local memory (register spills)")
            if regs > bound:
                errors.append(f"{arch} {name}: {regs} registers > {bound}")
            try:
                early, read_only = loads_before_wait(sass.get(name, []))
            except ValueError as e:
                early, read_only = [], []
                errors.append(f"{arch} {name}: SASS walk: {e}")
            pdl_checked += name in sass
            if name not in sass:
                errors.append(f"{arch} {name}: not in the library's SASS")
            for address, text in [] if no_pdl else early[:2]:  # the no-PDL kernels have no wait to come after
                errors.append(f"{arch} {name}: {address:#06x} {text} can run before the PDL wait")
            for address, text in read_only[:2]:
                errors.append(f"{arch} {name}: {address:#06x} {text} is a read-only-path (.nc) load")
    if not counts:
        errors.append(f"{library}: no SASS found")
    for arch, count in sorted(counts.items()):
        if count > MAX_KERNELS_PER_ARCH:
            errors.append(f"{arch}: {count} kernels, more than the budget of {MAX_KERNELS_PER_ARCH}")
    for (arch, kind), (regs, bound) in sorted(worst.items()):
        print(f"{arch} {kind:>36}: at most {regs} registers (bound {bound})")
    return finish("kernel resources", errors,
                  f": {Path(library).name}, kernels per arch: "
                  + ", ".join(f"{arch} {count}" for arch, count in sorted(counts.items()))
                  + f" (budget {MAX_KERNELS_PER_ARCH}), no spills; {pdl_checked} kernels' SASS: every 128-bit load "
                  "after the PDL wait (but in the no-PDL kernels), no .nc loads")


if __name__ == "__main__":
    sys.exit(main())
