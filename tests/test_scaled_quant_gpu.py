"""Per-token and per-tensor quantization on the GPU (docs/spec.md §8): the CUDA kernels against the C++ CPU
implementation (the same bytes), poisoned outputs, CUDA graphs, PDL, a dirty scale for dynamic per-tensor,
long and unaligned rows, > 2^31 elements, and a real consumer: torch._scaled_mm row-wise and tensor-wise."""
import pytest
import torch

import sgl_quant
from helpers import activation_inputs, bits
from test_scaled_quant import (CODE_GRANULARITIES, CODE_GRANULARITY_IDS, GRANULARITIES, assert_equal_bytes, run,
                               static_scale_for)
from reference import FP8, code_steps

pytestmark = pytest.mark.gpu

# (shape of x without SiLU): one row, few rows (two vectors a thread), many rows (four), a row tail and
# unaligned rows, leading dimensions, rows longer than a block's registers (read twice)
SHAPES = [(1, 7168), (3, 4096), (600, 512), (33, 4100), (2, 5, 136), (4, 40000)]


def against_cpu(x, out, granularity, silu, what):
    static = static_scale_for(x.cpu(), out, silu) if granularity == "tensor_static" else None
    gpu = run(x, out, granularity, silu, static_scale=None if static is None else static.cuda())
    cpu = run(x.cpu(), out, granularity, silu, static_scale=static)
    if not silu:
        assert_equal_bytes(gpu, cpu, what)
        return
    # the SiLU front's fast exp (docs/spec.md §1.1, §8.1): rare one-step differences of an activation, and so
    # of a scale or a code
    steps = code_steps(gpu[0].cpu(), cpu[0])
    assert int(steps.max()) <= 1 and int((steps > 0).sum()) <= max(2, 2e-3 * steps.numel()), what
    a, b = gpu[1].cpu(), cpu[1]
    same = bits(a) == bits(b)
    assert bool(((a - b).abs() <= 2.0**-7 * b.abs()).all()) and int((~same).sum()) <= max(1, 0.02 * same.numel()), what
    if gpu[2] is not None:
        assert int((gpu[2].cpu() - cpu[2]).abs().max()) <= 1, what


@pytest.mark.parametrize("silu", [False, True], ids=["plain", "silu"])
@pytest.mark.parametrize("out,granularity", CODE_GRANULARITIES, ids=CODE_GRANULARITY_IDS)
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=["bf16", "fp16"])
def test_cuda_matches_cpu(dtype, out, granularity, silu):
    for i, shape in enumerate(SHAPES):
        shape = (*shape[:-1], shape[-1] * (2 if silu else 1))
        x = activation_inputs(shape, dtype, seed=100 + i).cuda()
        against_cpu(x, out, granularity, silu, f"{shape}")
    # strided and unaligned views of one buffer
    base = activation_inputs((64, 1100), dtype, seed=7).cuda()
    for x in [base[:, :1024], base[:, 1:1001], base[::3, 5:517]]:
        against_cpu(x, out, granularity, silu, f"view {tuple(x.shape)} {x.stride()} +{x.storage_offset()}")


@pytest.mark.parametrize("granularity", GRANULARITIES)
def test_non_finite_and_scale_ub(granularity):
    out = torch.int8 if granularity == "token_asym" else FP8
    x = activation_inputs((300, 1024), torch.bfloat16, seed=3)
    x[5, 9], x[200, 1000] = float("nan"), float("inf")
    against_cpu(x.cuda(), out, granularity, False, "non-finite")
    if granularity == "token":
        ub = torch.tensor([0.01])
        assert_equal_bytes(run(x.cuda(), FP8, "token", scale_ub=ub.cuda()), run(x, FP8, "token", scale_ub=ub), "ub")


def test_bad_static_scale_on_the_device_gives_nan_codes():
    x = activation_inputs((4, 256), torch.bfloat16, seed=4).cuda()
    for bad in (0.0, -1.0, float("nan"), float("inf")):
        q, _, _ = run(x, FP8, "tensor_static", static_scale=torch.tensor([bad], device="cuda"))
        assert (bits(q).to(torch.uint8) == 0x7F).all(), bad


def test_dirty_scale_graphs_and_pdl():
    """Dynamic per-tensor with a dirty output_s, captured in a CUDA graph and replayed on fresh inputs; with and
    without PDL: the CPU's bytes every time."""
    for rows in (1, 64, 5000):
        x = torch.empty(rows, 2048, dtype=torch.bfloat16, device="cuda")
        q = torch.empty(rows, 2048, dtype=FP8, device="cuda")
        s = torch.full((1,), float("nan"), device="cuda")
        for pdl in (False, True):
            sgl_quant.per_tensor_quant_8bit(x, q, s, False, enable_pdl=pdl)  # first call outside the capture
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                sgl_quant.per_tensor_quant_8bit(x, q, s, False, enable_pdl=pdl)
            for seed in (1, 2):
                x.copy_(activation_inputs(x.shape, torch.bfloat16, seed=seed + rows))
                q.view(torch.uint8).fill_(0xCC)
                s.fill_(float("nan") if seed == 1 else 1e30)
                graph.replay()
                torch.cuda.synchronize()
                want = run(x.cpu(), FP8, "tensor_dynamic")
                assert_equal_bytes((q, s, None), want, f"rows {rows} pdl {pdl} seed {seed}")


def test_more_than_2_31_elements():
    rows, h = (1 << 31) // 4096 + 3, 4096
    x = torch.empty(rows, h, dtype=torch.bfloat16, device="cuda")
    x[:, :8].copy_(activation_inputs((rows, 8), torch.bfloat16, seed=1))
    x[:, 8:].copy_(activation_inputs((1, h - 8), torch.bfloat16, seed=2).cuda().expand(rows, h - 8))
    for granularity in ("token", "tensor_dynamic"):
        q, s, _ = run(x, FP8, granularity)
        tail = x[-5:].cpu()
        if granularity == "token":
            assert_equal_bytes((q[-5:], s[-5:], None), run(tail, FP8, "token"), "last rows")
        else:
            want_s = torch.maximum(x.abs().amax().float().cpu(), torch.tensor(1e-10)) / 448.0
            assert bits(s.cpu()).item() == bits(want_s.reshape(1)).item()
            static = run(tail, FP8, "tensor_static", static_scale=s.cpu())
            assert torch.equal(bits(q[-5:].cpu()), bits(static[0]))
        del q, s


def _dequantized_matmul(qa, sa, qb, sb):
    return (qa.float() * sa) @ (qb.float() * sb).t()


@pytest.mark.skipif(not torch.cuda.is_available() or torch.cuda.get_device_capability() < (9, 0), reason="SM90")
def test_scaled_mm_consumer():
    """torch._scaled_mm reads the outputs: per-token A [M, 1] x per-channel B [1, N] (row-wise) and tensor-wise."""
    m, k, n = 256, 4096, 512
    a = activation_inputs((m, k), torch.bfloat16, seed=21).cuda()
    w = (torch.randn(n, k, generator=torch.Generator().manual_seed(22)) * 0.05).to(torch.bfloat16).cuda()
    qw, sw = sgl_quant.per_token_quant_fp8(w)  # per output channel
    qa, sa = sgl_quant.per_token_quant_fp8(a)
    got = torch._scaled_mm(qa, qw.t(), scale_a=sa, scale_b=sw.t(), out_dtype=torch.bfloat16)
    want = _dequantized_matmul(qa, sa, qw, sw)
    torch.testing.assert_close(got.float(), want, rtol=2e-2, atol=2e-2 * float(want.abs().max()))
    ref = a.float() @ w.float().t()
    assert float((got.float() - ref).norm() / ref.norm()) < 0.05
    qa, sa = sgl_quant.per_tensor_quant_fp8(a)
    qw, sw = sgl_quant.per_tensor_quant_fp8(w)
    got = torch._scaled_mm(qa, qw.t(), scale_a=sa, scale_b=sw, out_dtype=torch.bfloat16)
    want = _dequantized_matmul(qa, sa, qw, sw)
    torch.testing.assert_close(got.float(), want, rtol=2e-2, atol=2e-2 * float(want.abs().max()))
    assert float((got.float() - ref).norm() / ref.norm()) < 0.08
