"""python -m sgl_quant info | bench [args] | selftest"""
import json
import subprocess
import sys
from pathlib import Path

import torch


def info():
    import sgl_quant
    for k, v in sgl_quant.build_info().items():
        print(f"{k:>18}: {v}")
    return 0


def bench(args):
    """The benchmarks: v2/DSV4 (all args), the fused RMSNorm op (--quick/--out/--no-baselines), per token and per
    tensor (--quick/--out), then the host time per eager call (--out); on the CPU implementation where there is
    no GPU."""
    folder = Path(__file__).resolve().parent.parent / "benchmark"
    if not (folder / "bench_per_token_group_quant.py").is_file():
        print("the benchmarks live in the source tree (benchmark/); run this from a source checkout", file=sys.stderr)
        return 2
    rc = subprocess.call([sys.executable, str(folder / "bench_per_token_group_quant.py"), *args])
    shared = [a for i, a in enumerate(args) if a in ("--quick", "--no-baselines", "--out")
              or (i > 0 and args[i - 1] == "--out")]
    rc = rc or subprocess.call([sys.executable, str(folder / "bench_rmsnorm_quant.py"), *shared])
    rc = rc or subprocess.call([sys.executable, str(folder / "bench_scaled_quant.py"),
                                *[a for a in shared if a != "--no-baselines"]])
    out = [a for a in shared if a not in ("--quick", "--no-baselines")]
    return rc or subprocess.call([sys.executable, str(folder / "bench_host_overhead.py"), *out])


def selftest():
    """A few golden cases of the reference kernel on every available device: CUDA must match all of them
    byte for byte; the CPU implementation the ones docs/spec.md §1.1 calls exact (UE8M0 codes, DSV4). A GPU that the
    build has no code for fails it, with the reason."""
    import sgl_quant
    from sgl_quant.testing import golden_cpu_exact, run_golden_case, sha256_of
    cases = json.loads((Path(__file__).resolve().parent / "selftest_golden.json").read_text())["cases"]
    info = sgl_quant.build_info()
    devices = ["cpu"] + (["cuda"] if info.get("device_has_kernels") else [])
    failed = checked = 0
    unusable = info.get("device_kernel_problem")  # a GPU this build has no code for: the install cannot serve it
    if unusable:
        print(f"FAIL cuda: {unusable}")
    for device in devices:
        for case in cases:
            if device == "cpu" and not golden_cpu_exact(case):
                continue
            q, s = run_golden_case(case, device)
            ok = sha256_of(q) == case["q_sha256"] and sha256_of(s) == case["s_sha256"]
            checked += 1
            failed += not ok
            print(f"{'PASS' if ok else 'FAIL'} {device:4} golden case {case['id']}")
    print(f"selftest: {checked - failed}/{checked} golden cases passed on {', '.join(devices)}"
          + ("; none on cuda, which this build has no code for (above)" if unusable else ""))
    return 1 if failed or unusable else 0


def main(argv):
    cmd = argv[0] if argv else "info"
    if cmd == "info":
        return info()
    if cmd == "bench":
        return bench(argv[1:])
    if cmd == "selftest":
        return selftest()
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
