"""The fused (add +) RMSNorm fronts of per-token and static per-tensor quantization (docs/spec.md §8.3): the CPU
implementation against the exact fp32 model of the norm followed by the torch model of §8.1 (same bytes), the
normed and residual bytes of the per-group fused op, errors, opcheck, torch.compile and the compat shapes; on
CUDA (marked gpu) the CPU's bytes for every row whatever M, the launch shape or PDL, and a _scaled_mm consumer."""
import pytest
import torch

import sgl_quant
from helpers import assert_same_bytes, bits, launch_config, opcheck, poisoned
from reference import FP8, reference_scaled_quant, rmsnorm_exact
from sgl_quant import compat
from test_rmsnorm import make_case

HIDDEN = [16, 48, 512, 2048, 7168, 16400]  # one chunk per thread (small teams, one warp, many); two (> 16384)


def run(x, w, out, static_scale=None, residual=None, normed=True, scale_ub=None, norm_eps=1e-6, eps=1e-10,
        enable_pdl=None):
    """The op into poisoned outputs; returns (codes, scales, normed or None, residual or None)."""
    q = poisoned(x.shape, out, x.device)
    n = poisoned(x.shape, x.dtype, x.device) if normed else None
    r = None if residual is None else residual.clone()
    if static_scale is None:
        s = poisoned((x.shape[0], 1), torch.float32, x.device)
        sgl_quant.rmsnorm_per_token_quant_8bit(x, w, q, s, norm_eps, residual=r, output_normed=n, scale_ub=scale_ub,
                                               eps=eps, enable_pdl=enable_pdl)
    else:
        s = static_scale
        sgl_quant.rmsnorm_per_tensor_quant_8bit(x, w, q, s, norm_eps, residual=r, output_normed=n,
                                                enable_pdl=enable_pdl)
    return q, s, n, r


def expected(x, w, out, static_scale=None, residual=None, scale_ub=None, norm_eps=1e-6, eps=1e-10):
    normed, new_residual = rmsnorm_exact(x.cpu(), w.cpu(), None if residual is None else residual.cpu(), norm_eps)
    granularity = "token" if static_scale is None else "tensor_static"
    q, s, _ = reference_scaled_quant(normed, out, granularity, eps, scale_ub, static_scale)
    return q, s if static_scale is None else static_scale.cpu(), normed, new_residual


def assert_same(got, want, what):
    assert_same_bytes(got, want, what, names=("codes", "scales", "normed", "residual"))


@pytest.mark.parametrize("static", [False, True], ids=["per_token", "static"])
@pytest.mark.parametrize("out", [FP8, torch.int8], ids=["fp8", "int8"])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=["bf16", "fp16"])
def test_cpu_matches_models(dtype, out, static):
    for i, h in enumerate(HIDDEN):
        for with_residual in (True, False):
            x, w, r = make_case(5, h, dtype, seed=10 * i + with_residual, with_residual=with_residual)
            scale = torch.tensor([0.01 if out == FP8 else 0.03]) if static else None
            got = run(x, w, out, scale, r)
            assert_same(got, expected(x, w, out, scale, r), f"{h=} {with_residual=}")
            # normed and residual: the per-group fused op's bytes for the same rows
            group = sgl_quant.rmsnorm_per_token_group_quant_fp8(x, w, 16, residual=None if r is None else r.clone(),
                                                                return_normed=True)
            assert torch.equal(bits(got[2]), bits(group[2])), h


def test_scale_ub_eps_and_non_finite_rows():
    x, w, r = make_case(6, 512, torch.bfloat16, seed=3)
    ub = torch.tensor([0.5])
    assert_same(run(x, w, FP8, residual=r, scale_ub=ub, eps=1e-3), expected(x, w, FP8, residual=r, scale_ub=ub, eps=1e-3),
                "scale_ub")
    x[2, 5] = float("nan")
    for out in (FP8, torch.int8):
        q, s, n, _ = run(x, w, out, residual=r)
        assert s[2].isnan().all() and s[[0, 1, 3, 4, 5]].isfinite().all()
        assert (bits(q[2]).to(torch.uint8) == (0x7F if out == FP8 else 0)).all()
        assert_same((q, s, n, None), expected(x, w, out, residual=r)[:3] + (None,), "nan row")


def test_errors():
    x, w, _ = make_case(4, 64, torch.bfloat16, seed=1)
    q, s = torch.empty(4, 64, dtype=FP8), torch.empty(4, 1)
    tok, ten = torch.ops.sgl_quant.rmsnorm_per_token_quant_8bit, torch.ops.sgl_quant.rmsnorm_per_tensor_quant_8bit
    cases = [
        (lambda: tok(x[:, :40], w[:40], None, q[:, :40], s, None, None, 1e-6, 1e-10), "must be divisible by 16"),
        (lambda: tok(x, w, None, q, s[:3], None, None, 1e-6, 1e-10), "output_s must have 4 elements"),
        (lambda: tok(x, w, None, q, s, None, torch.ones(2), 1e-6, 1e-10), "scale_ub must have 1 element"),
        (lambda: tok(x, w, None, q.to(torch.float16), s, None, None, 1e-6, 1e-10), "output_q must be float8_e4m3fn or int8"),
        (lambda: tok(x, w[:32], None, q, s, None, None, 1e-6, 1e-10), "weight must have shape"),
        (lambda: tok(x, w, None, q, s, None, None, 0.0, 1e-10), "norm_eps"),
        (lambda: tok(x, w, None, q, s, None, None, 1e-6, 0.0), "eps must be"),
        (lambda: ten(x, w, None, q, torch.zeros(1), None, 1e-6), "scale must be a positive finite"),
        (lambda: ten(x, w, None, q, torch.ones(2), None, 1e-6), "scale must have 1 element"),
        (lambda: ten(x, w, None, q, torch.ones(1, dtype=torch.float64), None, 1e-6), "scale must be Float"),
        (lambda: sgl_quant.rmsnorm_per_tensor_quant_fp8(x, w, float("nan")), "positive finite"),
    ]
    for call, message in cases:
        with pytest.raises((RuntimeError, ValueError), match=message):
            call()


def test_opcheck_and_compile():
    x, w, r = make_case(3, 64, torch.bfloat16, seed=2)
    opcheck(torch.ops.sgl_quant.rmsnorm_per_token_quant_8bit,
            (x, w, r.clone(), torch.empty(3, 64, dtype=torch.int8), torch.empty(3, 1), torch.empty_like(x), None,
             1e-6, 1e-10))
    opcheck(torch.ops.sgl_quant.rmsnorm_per_tensor_quant_8bit,
            (x, w, None, torch.empty(3, 64, dtype=torch.int8), torch.tensor([0.1]), None, 1e-6))

    def f(x, w, r):
        q, s = sgl_quant.rmsnorm_per_token_quant_fp8(x, w, residual=r)
        q2, _ = sgl_quant.rmsnorm_per_tensor_quant_fp8(x, w, 0.05)
        return q, s, q2

    r1, r2 = r.clone(), r.clone()
    got = torch.compile(f, fullgraph=True, backend="aot_eager")(x, w, r1)
    want = f(x, w, r2)
    for a, b in zip((*got, r1), (*want, r2)):
        assert torch.equal(bits(a), bits(b))


def test_compat_shapes():
    x, w, r = make_case(6, 256, torch.bfloat16, seed=7)
    scale = torch.tensor([0.02])
    for dtype in (FP8, torch.int8):
        r1 = r.clone()
        q, s = compat.rms_norm_dynamic_per_token_quant(x, w, 1e-6, dtype, residual=r1)
        assert s.shape == (6, 1)
        assert_same((q, s, None, r1), expected(x, w, dtype, residual=r)[:2] + (None, expected(x, w, dtype, residual=r)[3]),
                    "rms_norm_dynamic_per_token_quant")
    want = expected(x, w, FP8, scale)
    for call in (lambda out: compat.rms_norm_static_fp8_quant(out, x, w, scale, 1e-6),
                 lambda out: compat.rmsnorm_quant(out, x, w, scale, 1e-6)):
        out = torch.empty(6, 256, dtype=FP8)
        call(out)
        assert torch.equal(bits(out), bits(want[0]))
    want = expected(x, w, FP8, scale, residual=r)
    for call in (lambda out, res: compat.fused_add_rms_norm_static_fp8_quant(out, x, res, w, scale, 1e-6),
                 lambda out, res: compat.fused_add_rmsnorm_quant(out, x, res, w, scale, 1e-6)):
        out, res = torch.empty(6, 256, dtype=FP8), r.clone()
        call(out, res)
        assert torch.equal(bits(out), bits(want[0])) and torch.equal(bits(res), bits(want[3]))
    h = torch.randn(6, 512, generator=torch.Generator().manual_seed(1)).to(torch.bfloat16)
    out = torch.empty(6, 256, dtype=FP8)
    compat.silu_and_mul_quant(out, h, scale)
    want_q, _, _ = reference_scaled_quant(h, FP8, "tensor_static", static_scale=scale, fuse_silu_and_mul=True)
    assert torch.equal(bits(out), bits(want_q))


@pytest.mark.gpu
@pytest.mark.parametrize("static", [False, True], ids=["per_token", "static"])
@pytest.mark.parametrize("out", [FP8, torch.int8], ids=["fp8", "int8"])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=["bf16", "fp16"])
def test_cuda_matches_cpu(dtype, out, static):
    """Every H class (small teams, one warp, a block of many warps, two chunks per thread; without residual from
    3 rows per SM, two or four chunks of input words, their teams padded or not), M from one row to many rounds
    of blocks (the prefetching and looping grids), with and without residual and normed output."""
    scale = torch.tensor([0.01 if out == FP8 else 0.03])
    cases = [(1, 7168), (7, 16), (300, 48), (64, 2048), (5, 16400), (3000, 4096), (2200, 10240), (600, 7168),
             (500, 3072), (450, 5120), (400, 32768)]
    for i, (m, h) in enumerate(cases):
        for with_residual, normed in ((True, True), (False, False), (False, True)):
            x, w, r = make_case(m, h, dtype, seed=100 + i, with_residual=with_residual, device="cuda")
            gpu = run(x, w, out, scale.cuda() if static else None, r, normed=normed)
            cpu = run(x.cpu(), w.cpu(), out, scale if static else None, None if r is None else r.cpu(), normed=normed)
            assert_same(gpu, cpu, f"{m=} {h=} {with_residual=} {normed=}")


@pytest.mark.gpu
def test_cuda_batch_invariance_launch_shapes_and_pdl():
    x, w, r = make_case(2048, 10240, torch.bfloat16, 31, device="cuda")  # two chunks per thread, looping blocks
    xs, ws, rs = make_case(5000, 4096, torch.bfloat16, 32, device="cuda")  # the prefetching kernel
    want = [run(x, w, FP8, residual=r), run(xs, ws, torch.int8, residual=rs)]
    for waves, pdl in ((1, False), (1, True), (3, None), (64, True)):
        with launch_config(waves=waves):
            got = [run(x, w, FP8, residual=r, enable_pdl=pdl), run(xs, ws, torch.int8, residual=rs, enable_pdl=pdl)]
        for g, wnt in zip(got, want):
            assert_same(g, wnt, f"{waves=} {pdl=}")
    for rows in (slice(0, 1), slice(100, 357)):
        part = run(x[rows], w, FP8, residual=r[rows])
        for a, b in zip(want[0], part):
            assert torch.equal(bits(a[rows]), bits(b))
    perm = torch.randperm(xs.shape[0], generator=torch.Generator().manual_seed(5)).cuda()
    permuted = run(xs[perm], ws, torch.int8, residual=rs[perm])
    for a, b in zip(want[1], permuted):
        assert torch.equal(bits(a[perm]), bits(b))
    # without residual, calls of at least 3 rows per SM keep the input words, two chunks per thread at H = 4096 and
    # four at H = 7168 (in blocks looping over rows with waves=1), shorter calls one chunk: the same bytes
    x7, w7, _ = make_case(1000, 7168, torch.bfloat16, 33, with_residual=False, device="cuda")
    for xx, ww in ((xs, ws), (x7, w7)):
        for static in (None, torch.tensor([0.01], device="cuda")):
            full = run(xx, ww, FP8, static)
            with launch_config(waves=1):
                looped = run(xx, ww, FP8, static, enable_pdl=True)
            assert_same(looped, full, f"H={xx.shape[1]} {static=} waves=1")
            for rows in (slice(0, 1), slice(300, 400)):
                part = run(xx[rows], ww, FP8, static)
                for a, b in zip((full[0], full[2]) + (() if static else (full[1],)),
                                (part[0], part[2]) + (() if static else (part[1],))):
                    assert torch.equal(bits(a[rows]), bits(b))


@pytest.mark.gpu
def test_cuda_graph_and_scaled_mm_consumer():
    x, w, r = make_case(256, 4096, torch.bfloat16, 41, device="cuda")
    q, s = sgl_quant.rmsnorm_per_token_quant_fp8(x, w, residual=r.clone())  # first call outside the capture
    res = r.clone()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        q2, s2 = sgl_quant.rmsnorm_per_token_quant_fp8(x, w, residual=res)
    res.copy_(r)
    graph.replay()
    torch.cuda.synchronize()
    assert torch.equal(bits(q2), bits(q)) and torch.equal(bits(s2), bits(s))
    if torch.cuda.get_device_capability() < (9, 0):
        return
    b = (torch.randn(512, 4096, generator=torch.Generator().manual_seed(2)) * 0.05).to(torch.bfloat16).cuda()
    qb, sb = sgl_quant.per_token_quant_fp8(b)
    got = torch._scaled_mm(q, qb.t(), scale_a=s, scale_b=sb.t(), out_dtype=torch.bfloat16)
    want = (q.float() * s) @ (qb.float() * sb).t()
    torch.testing.assert_close(got.float(), want, rtol=2e-2, atol=2e-2 * float(want.abs().max()))
