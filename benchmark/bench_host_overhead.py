"""Host time per eager call: what a caller outside CUDA graphs (eager prefill, tools, tests) pays on the
CPU for each public function, next to torch ops of the same shape of work.

Every case runs at M=1 (H=7168 on a GPU: the kernels take ~2 µs, less than the host's time per call, so the
launch queue never fills and the wall time of a loop of calls is the host's time). After 300 warm-up calls
of every case, ``--reps`` rounds each time one loop of ``--calls`` back-to-back calls of every case in turn,
each loop between two device synchronizations; per case the median loop gives µs per call, the fastest loop
the column "min". Rounds rather than one case's loops back to back: a host whose speed drifts (on one H100
machine one op took 8.0 to 12.7 µs per call from run to run) then shifts every case alike.
On a machine without a GPU the CPU implementation is timed at H=128 (its host path, plus a few hundred
nanoseconds of work).

    python benchmark/bench_host_overhead.py [--out DIR] [--calls N] [--reps R]

Writes a table (stdout and host_overhead.txt) and host_overhead.json in --out.
"""
import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import torch

import sgl_quant
from sgl_quant import compat
from sgl_quant.testing import make_input


def loop_us(fn, sync, calls):
    """µs per call of one loop of `calls` calls of fn between two device synchronizations."""
    sync()
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    sync()
    return (time.perf_counter() - start) / calls * 1e6


def rounds_us(fns, sync, calls, reps):
    """(median, min) µs per call of each of fns: 300 warm-up calls of each, then `reps` rounds of one loop
    of each in turn."""
    for fn in fns:
        for _ in range(300):
            fn()
    loops = [[] for _ in fns]
    for _ in range(reps):
        for fn, mine in zip(fns, loops):
            mine.append(loop_us(fn, sync, calls))
    return [(statistics.median(mine), min(mine)) for mine in loops]


def per_call_us(fn, sync, calls, reps):
    """Median µs per call of fn alone (the probes' helper)."""
    return rounds_us([fn], sync, calls, reps)[0][0]


def cases(device, h):
    """(name, group, fn): the public functions, the ops themselves with their outputs preallocated, and
    torch baselines of the same kind of call."""
    x = make_input((1, h), torch.bfloat16, seed=1, device=device)
    w = make_input((h,), torch.bfloat16, seed=2, device=device)
    res = make_input((1, h), torch.bfloat16, seed=3, device=device)
    x3 = make_input((1, h // 128, 128), torch.bfloat16, seed=4, device=device)
    q = torch.empty((1, h), dtype=torch.float8_e4m3fn, device=device)
    s = sgl_quant.create_scale_tensor((1, h), 128, device, column_major_scales=True, scale_tma_aligned=True)
    y = torch.empty_like(x)
    ops = torch.ops.sgl_quant
    v2 = ops.per_token_group_quant_8bit_v2.default
    fused = ops.rmsnorm_per_token_group_quant_8bit.default
    aten_abs_out = torch.ops.aten.abs.out
    return [
        ("per_token_group_quant_fp8 (row fp32)", "wrapper", lambda: sgl_quant.per_token_group_quant_fp8(x, 128)),
        ("per_token_group_quant_fp8 (col TMA fp32)", "wrapper",
         lambda: sgl_quant.per_token_group_quant_fp8(x, 128, column_major_scales=True, scale_tma_aligned=True)),
        ("per_token_group_quant_fp8 (packed UE8M0)", "wrapper",
         lambda: sgl_quant.per_token_group_quant_fp8(x, 128, column_major_scales=True, scale_tma_aligned=True,
                                                     scale_ue8m0=True)),
        ("per_token_group_quant_int8", "wrapper", lambda: sgl_quant.per_token_group_quant_int8(x, 128)),
        ("per_token_group_quant_8bit_v2 (in place)", "wrapper",
         lambda: sgl_quant.per_token_group_quant_8bit_v2(x, q, s, 128)),
        ("per_token_group_quant_fp8_dsv4", "wrapper", lambda: sgl_quant.per_token_group_quant_fp8_dsv4(x3)),
        ("rmsnorm_per_token_group_quant_fp8 (+residual, col TMA)", "wrapper",
         lambda: sgl_quant.rmsnorm_per_token_group_quant_fp8(x, w, 128, residual=res, column_major_scales=True,
                                                             scale_tma_aligned=True)),
        ("compat.sglang_per_token_group_quant_fp8", "wrapper",
         lambda: compat.sglang_per_token_group_quant_fp8(x, 128)),
        ("op v2 (outputs given, PDL)", "op",
         lambda: v2(x, q, s, 128, 1e-10, -448.0, 448.0, False, False, None, True)),
        ("op v2 (outputs given, no PDL)", "op",
         lambda: v2(x, q, s, 128, 1e-10, -448.0, 448.0, False, False, None, False)),
        ("op rmsnorm (outputs given, +residual, PDL)", "op",
         lambda: fused(x, w, res, q, s, None, 128, 1e-6, 1e-10, -448.0, 448.0, False, True)),
        ("torch.empty_like", "torch", lambda: torch.empty_like(x)),
        ("torch.abs(out=)", "torch", lambda: torch.abs(x, out=y)),
        # the same op through torch.ops, the path of every custom op called from Python (schema matching, boxed
        # call): the floor under "op" rows
        ("torch.ops.aten.abs.out", "torch", lambda: aten_abs_out(x, out=y)),
        ("torch rms_norm", "torch", lambda: torch.nn.functional.rms_norm(x, (h,), w, 1e-6)),
    ]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="bench_out")
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--reps", type=int, default=7)
    args = ap.parse_args(argv)
    gpu = torch.cuda.is_available()
    device = "cuda" if gpu else "cpu"
    h = 7168 if gpu else 128
    sync = torch.cuda.synchronize if gpu else (lambda: None)
    where = torch.cuda.get_device_name() if gpu else f"CPU implementation, {torch.get_num_threads()} threads"
    table = cases(device, h)
    times = rounds_us([fn for _, _, fn in table], sync, args.calls, args.reps)
    rows = [{"case": name, "kind": kind, "us_per_call": med, "min_us_per_call": fastest}
            for (name, kind, _), (med, fastest) in zip(table, times)]
    lines = [f"# host time per eager call, M=1, H={h}, bf16: {where}; torch {torch.__version__}, "
             f"Python {sys.version.split()[0]}; median and fastest of {args.reps} rounds of a loop of {args.calls} "
             "calls of each case",
             f"{'case':<58} {'kind':<8} {'µs/call':>8} {'min':>8}"]
    lines += [f"{r['case']:<58} {r['kind']:<8} {r['us_per_call']:>8.2f} {r['min_us_per_call']:>8.2f}" for r in rows]
    text = "\n".join(lines)
    print(text)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "host_overhead.txt").write_text(text + "\n")
    (out / "host_overhead.json").write_text(json.dumps({"device": where, "h": h, "rows": rows}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
