"""How the graph length biases small-call timings (issue 13): µs per call of a few latency-bound cases
timed with 20 calls per CUDA graph (the benchmark until session 6), with graphs of ~GRAPH_MS
(the benchmark now), and with triton.testing.do_bench_cudagraph (the method of the fixed reference
points), each the median of replays. Run from the source tree's root on a GPU:

    python scripts/gpu/timing_method.py
"""
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmark"))
import bench_per_token_group_quant as bench  # noqa: E402
import bench_rmsnorm_quant as bench_rms  # noqa: E402


def main():
    try:
        from triton.testing import do_bench_cudagraph
    except ImportError:
        do_bench_cudagraph = None
    dense = [bench.dense_case(1, 4096), bench.dense_case(8, 4096), bench.dense_case(1, 7168),
             bench.dense_case(64, 7168, "col_ue8m0"), bench.dense_case(4096, 4096, "col_ue8m0")]
    dsv4 = dict(kind="dsv4", name="dsv4-T1-G8-D4096", t=1, g=8, d=4096, dtype=torch.bfloat16)
    chain = dict(kind="chain", name="chain10-nopdl-M1-H4096", pdl=False, m=1, h=4096, layout="col_f32",
                 dtype=torch.bfloat16)
    fns = []
    for c in dense + [dsv4]:
        for pdl in (False, True):
            fns.append((f"{c['name']} {'PDL' if pdl else 'noPDL'}", bench.build(c, "cuda", pdl)))
    fns.append((chain["name"] + " (per chain)", bench.build(chain, "cuda", None)))
    for m in (1, 64, 256):
        c = dict(m=m, h=7168, dtype=torch.bfloat16, normed=False)
        for pdl in (False, True):
            fns.append((f"rmsnorm-M{m}-H7168 {'PDL' if pdl else 'noPDL'}", bench_rms.build(c, pdl)))
    print(f"{'case':<42}{'20/graph':>10}{'~10ms graph':>13}{'do_bench_cg':>13}")
    for name, fn in fns:
        old = bench.time_graph_us(fn, calls_per_graph=20)
        new = bench.time_graph_us(fn)
        tri = do_bench_cudagraph(fn, rep=20, return_mode="median") * 1e3 if do_bench_cudagraph else float("nan")
        print(f"{name:<42}{old:>10.3f}{new:>13.3f}{tri:>13.3f}", flush=True)


if __name__ == "__main__":
    main()
