"""How much a large call's time depends on where its tensors lie (H200, session 23, benchmark/NOTES.md).

The benchmarks allocate each case's tensors through torch's caching allocator, so their addresses (and
with them which DRAM channels a call's reads and writes meet in) are whatever the allocator gives. This
script times the same call with its input placed at several offsets inside one buffer, the outputs
fixed, as the benchmark times (`time_graph_us` after `settle_graph_state`, graphs of ~10 ms, median of
3 graphs), without and with PDL; then v2's packed case once more with other input data.

    python scripts/probe/placement_sweep.py            # needs a GPU and sgl_quant importable
"""
import statistics
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmark"))
import sgl_quant  # noqa: E402
from bench_per_token_group_quant import settle_graph_state, time_graph_us  # noqa: E402
from bench_rmsnorm_quant import inputs as rms_inputs  # noqa: E402
from sgl_quant.testing import make_input  # noqa: E402

FP8 = torch.float8_e4m3fn
MB = 1 << 20
OFFSETS_MB = (0, 1, 2, 3, 8, 33)
OUTPUTS_AT_MB = 1024  # past every input placement below


def view(buf, offset, shape, dtype):
    n = torch.Size(shape).numel() * dtype.itemsize
    return buf[offset: offset + n].view(dtype).view(shape)


def v2_case(buf, x_at, m, h, ue8m0, data=None):
    x = view(buf, x_at, (m, h), torch.bfloat16)
    x.copy_(make_input((m, h), torch.bfloat16, seed=1, device="cuda") if data is None else data)
    q = view(buf, OUTPUTS_AT_MB * MB, (m, h), FP8)
    s = sgl_quant.create_scale_tensor((m, h), 128, "cuda", True, True, ue8m0)
    return lambda pdl: (lambda: sgl_quant.per_token_group_quant_8bit_v2(x, q, s, 128, scale_ue8m0=ue8m0, enable_pdl=pdl))


def rms_case(buf, x_at, m, h):
    x0, w, r0, _, s = rms_inputs(dict(m=m, h=h, dtype=torch.bfloat16))  # the fused benchmark's tensors
    x = view(buf, x_at, (m, h), torch.bfloat16)
    x.copy_(x0)
    r = view(buf, OUTPUTS_AT_MB * MB, (m, h), torch.bfloat16)  # read and written: with the outputs
    r.copy_(r0)
    q = view(buf, OUTPUTS_AT_MB * MB + 2 * m * h, (m, h), FP8)
    return lambda pdl: (lambda: sgl_quant.rmsnorm_per_token_group_quant_8bit(x, w, q, s, 128, 1e-6, residual=r,
                                                                             enable_pdl=pdl))


def timed(make):
    return [statistics.median(time_graph_us(make(pdl)) for _ in range(3)) for pdl in (False, True)]


def main():
    settle_graph_state()
    buf = torch.empty(2048 * MB, dtype=torch.uint8, device="cuda")
    cases = {
        "v2 M=4096 H=4096 packed UE8M0": lambda at: v2_case(buf, at, 4096, 4096, True),
        "v2 M=4096 H=4096 col fp32": lambda at: v2_case(buf, at, 4096, 4096, False),
        "fused M=4096 H=7168": lambda at: rms_case(buf, at, 4096, 7168),
        "fused M=16384 H=7168": lambda at: rms_case(buf, at, 16384, 7168),
    }
    print(f"{'case':34s} {'x at':>6s} {'us':>8s} {'us PDL':>8s}")
    for name, make in cases.items():
        rows = []
        for off in OFFSETS_MB:
            rows.append(timed(make(off * MB)))
            print(f"{name:34s} {off:4d}MB {rows[-1][0]:8.3f} {rows[-1][1]:8.3f}", flush=True)
        lo, hi = min(r[0] for r in rows), max(r[0] for r in rows)
        print(f"{name:34s} spread without PDL {lo:.3f} .. {hi:.3f} ({(hi - lo) / lo * 100:.1f}%)", flush=True)
    for tag, data in (("randn", torch.randn(4096, 4096, device="cuda").to(torch.bfloat16)),
                      ("zeros", torch.zeros(4096, 4096, device="cuda", dtype=torch.bfloat16))):
        us = timed(v2_case(buf, 0, 4096, 4096, True, data))
        print(f"{'v2 M=4096 H=4096 packed, ' + tag:34s} {0:4d}MB {us[0]:8.3f} {us[1]:8.3f}")


if __name__ == "__main__":
    main()
