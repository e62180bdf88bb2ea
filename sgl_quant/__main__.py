"""python -m sgl_quant info | bench [args] | selftest"""
import hashlib
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
    script = Path(__file__).resolve().parent.parent / "benchmark" / "bench_per_token_group_quant.py"
    if not script.is_file():
        print("the benchmark lives in the source tree (benchmark/bench_per_token_group_quant.py); "
              "run this from a source checkout", file=sys.stderr)
        return 2
    return subprocess.call([sys.executable, str(script), *args])


def _digest(t):
    out = torch.empty(t.shape, dtype=t.dtype)
    out.copy_(t)
    return hashlib.sha256(out.view(torch.uint8).numpy().tobytes()).hexdigest()


def selftest():
    """A few golden cases of the reference kernel on every available device: CUDA must match all of them
    byte for byte; the CPU implementation the ones SPEC §1.1 calls exact (UE8M0 codes, DSV4)."""
    import sgl_quant
    from sgl_quant.testing import make_input
    cases = json.loads((Path(__file__).resolve().parent / "selftest_golden.json").read_text())["cases"]
    devices = ["cpu"] + (["cuda"] if torch.cuda.is_available() and sgl_quant.build_info()["cuda_kernels"] else [])
    dtypes = {"bf16": torch.bfloat16, "fp16": torch.float16}
    flags = {"row_f32": (False, False, False), "col_f32_tma": (True, True, False), "col_ue8m0": (True, True, True)}
    failed = checked = 0
    for device in devices:
        for c in cases:
            exact_on_cpu = c["op"] == "dsv4" or (c["scale"] == "col_ue8m0" and not (c["silu"] and c["dtype"] == "fp16"))
            if device == "cpu" and not exact_on_cpu:
                continue
            dt = dtypes[c["dtype"]]
            if c["op"] == "dsv4":
                x = make_input((c["tokens"], c["heads"], c["hidden"]), dt, seed=c["seed"], device=device)
                q, s = sgl_quant.per_token_group_quant_fp8_dsv4(x)
                q, s = q.cpu(), s.cpu()
            else:
                k = c["hidden"] * (2 if c["silu"] else 1)
                masked = c.get("masked")
                shape = (masked["experts"], masked["tokens_pad"], k) if masked else (c["tokens"], k)
                x = make_input(shape, dt, seed=c["seed"], device=device)
                mm = torch.tensor(masked["masked_m"], dtype=torch.int32, device=device) if masked else None
                fn = sgl_quant.per_token_group_quant_fp8 if c["out"] == "fp8" else sgl_quant.per_token_group_quant_int8
                col, tma, ue8m0 = flags[c["scale"]]
                q, s = fn(x, c["group_size"], column_major_scales=col, scale_tma_aligned=tma, scale_ue8m0=ue8m0,
                          fuse_silu_and_mul=c["silu"], masked_m=mm)
                q, s = q.cpu(), s.cpu()
                if masked:
                    n = masked["masked_m"]
                    q = torch.cat([q[e, :n[e]] for e in range(len(n))])
                    s = torch.cat([s[e, :n[e]] for e in range(len(n))])
            ok = _digest(q) == c["q_sha256"] and _digest(s) == c["s_sha256"]
            checked += 1
            failed += not ok
            print(f"{'PASS' if ok else 'FAIL'} {device:4} golden case {c['id']}")
    print(f"selftest: {checked - failed}/{checked} golden cases passed on {', '.join(devices)}")
    return 1 if failed else 0


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
