"""torch.library.opcheck on every op, torch.compile(fullgraph=True) and torch.export with a dynamic
row count around the Python API, on the CPU and (marked gpu) on CUDA."""
import pytest
import torch

import sgl_quant
import sgl_quant.compat  # noqa: F401  (the export test's compat cases)
from helpers import DEVICES, alloc_scales, bits, opcheck
from reference import FP8
from sgl_quant.testing import make_input, make_masked_m

@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("silu", [False, True], ids=["plain", "silu"])
@pytest.mark.parametrize("layout", ["row", "col_tma", "row_ue8m0", "col_ue8m0"])
@pytest.mark.parametrize("out", [FP8, torch.int8], ids=["fp8", "int8"])
def test_opcheck_v2(out, layout, silu, device):
    h = 384
    x = make_input((9, 2 * h if silu else h), torch.bfloat16, seed=1).to(device)
    q = torch.empty(9, h, dtype=out, device=device)
    s, _, ue8m0 = alloc_scales(layout, (9, h), 128, device)
    lo, hi = (-448.0, 448.0) if out == FP8 else (-128.0, 127.0)
    opcheck(torch.ops.sgl_quant.per_token_group_quant_8bit_v2.default, (x, q, s, 128, 1e-10, lo, hi, ue8m0, silu, None,
                                                                          False))


@pytest.mark.parametrize("device", DEVICES)
def test_opcheck_v2_masked(device):
    x = make_input((4, 8, 512), torch.float16, seed=2).to(device)
    q = torch.empty(4, 8, 256, dtype=FP8, device=device)
    s = sgl_quant.create_scale_tensor(q.shape, 128, device, True, True, True)
    m = make_masked_m(4, 8, seed=2).to(device)
    opcheck(torch.ops.sgl_quant.per_token_group_quant_8bit_v2.default,
            (x, q, s, 128, 1e-10, -448.0, 448.0, True, True, m, True))
    qi = torch.empty(4, 8, 256, dtype=torch.int8, device=device)
    opcheck(torch.ops.sgl_quant.per_token_group_quant_8bit_v2.default,
            (x, qi, s, 128, 1e-10, -128.0, 127.0, True, True, m, True))


@pytest.mark.parametrize("device", DEVICES)
def test_opcheck_dsv4(device):
    x = make_input((5, 3, 384), torch.bfloat16, seed=3).to(device)
    q = torch.empty(5, 3, 384, dtype=FP8, device=device)
    s = torch.empty(3, 5, 3, device=device).transpose(0, 1)
    opcheck(torch.ops.sgl_quant.per_token_group_quant_fp8_dsv4.default, (x, q, s, False))


def _same(a, b):
    """Same shape, strides, dtype and bytes. The strides of an empty tensor are not compared: a traced
    program computes them from a symbolic size (a transposed [G, 0] buffer has row stride 0 there, 1 in
    eager), and no element is ever addressed through them."""
    return (a.shape == b.shape and a.dtype == b.dtype and (a.numel() == 0 or a.stride() == b.stride())
            and torch.equal(bits(a), bits(b)))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_compile_fullgraph_api(backend, device):
    torch._dynamo.reset()

    def fn(x, masked_m):
        a = sgl_quant.per_token_group_quant_fp8(x, 128, column_major_scales=True, scale_tma_aligned=True,
                                                scale_ue8m0=True, fuse_silu_and_mul=True, masked_m=masked_m)
        b = sgl_quant.per_token_group_quant_fp8(x[0], 64)
        c = sgl_quant.per_token_group_quant_int8(x[1], 32, column_major_scales=True)
        return a + b + c

    x = make_input((3, 12, 1024), torch.bfloat16, seed=4).to(device)
    m = make_masked_m(3, 12, seed=4).to(device)
    compiled = torch.compile(fn, fullgraph=True, backend=backend)
    got, want = compiled(x, m), fn(x, m)
    # masked rows are never written (their memory is uninitialized), so compare valid rows only
    for e, count in enumerate(m.tolist()):
        assert torch.equal(got[0][e, :count].view(torch.uint8), want[0][e, :count].view(torch.uint8))
        assert torch.equal(got[1][e, :count], want[1][e, :count])
    assert got[1].stride() == want[1].stride() and got[1].dtype == torch.int32
    for g, w in zip(got[2:], want[2:]):
        assert _same(g, w)


@pytest.mark.parametrize("device", DEVICES)
def test_compile_fullgraph_dsv4(device):
    torch._dynamo.reset()
    storage = make_input((6, 5, 256), torch.float16, seed=5).to(device)
    fn = lambda x: sgl_quant.per_token_group_quant_fp8_dsv4(x[:, 1:, :])  # noqa: E731
    got, want = torch.compile(fn, fullgraph=True, backend="aot_eager")(storage), fn(storage)
    assert _same(got[0], want[0]) and _same(got[1], want[1])


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("with_residual", [True, False], ids=["residual", "no-residual"])
@pytest.mark.parametrize("layout", ["row", "col_tma", "col_ue8m0"])
@pytest.mark.parametrize("out", [FP8, torch.int8], ids=["fp8", "int8"])
def test_opcheck_rmsnorm(out, layout, with_residual, device):
    m, h = 9, 384
    x = make_input((m, h), torch.bfloat16, seed=6).to(device)
    w = make_input((h,), torch.bfloat16, seed=7).to(device)
    r = make_input((m, h), torch.bfloat16, seed=8).to(device) if with_residual else None
    q = torch.empty(m, h, dtype=out, device=device)
    s, _, ue8m0 = alloc_scales(layout, (m, h), 128, device)
    n = torch.empty(m, h, dtype=torch.bfloat16, device=device)
    lo, hi = (-448.0, 448.0) if out == FP8 else (-128.0, 127.0)
    opcheck(torch.ops.sgl_quant.rmsnorm_per_token_group_quant_8bit.default,
            (x, w, r, q, s, n, 128, 1e-6, 1e-10, lo, hi, ue8m0, False))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_compile_fullgraph_rmsnorm(backend, device):
    torch._dynamo.reset()

    def fn(x, w, residual):
        a = sgl_quant.rmsnorm_per_token_group_quant_fp8(x, w, 128, residual=residual, column_major_scales=True,
                                                        scale_tma_aligned=True, return_normed=True)
        b = sgl_quant.rmsnorm_per_token_group_quant_int8(a[2], w, 64, scale_ue8m0=True)
        return a + b

    x = make_input((12, 1024), torch.bfloat16, seed=9).to(device)
    w = make_input((1024,), torch.bfloat16, seed=10).to(device)
    r = make_input((12, 1024), torch.bfloat16, seed=11).to(device)
    r_eager, r_compiled = r.clone(), r.clone()
    want = fn(x, w, r_eager)
    got = torch.compile(fn, fullgraph=True, backend=backend)(x, w, r_compiled)
    assert torch.equal(r_eager, r_compiled), "the residual update must survive functionalization"
    for g, wnt in zip(got, want):
        assert _same(g, wnt)


H_EXPORT = 512


def _flashinfer_call(x, w, r):
    """FlashInfer's call shape: the caller allocates every output, block_scale [H/128, ceil4(M)] (zeroed:
    the op leaves its padding columns alone, and the test compares the whole buffer)."""
    m, h = x.shape
    out = torch.empty(m, h, dtype=FP8, device=x.device)
    block_scale = torch.zeros(h // 128, (m + 3) // 4 * 4, device=x.device)
    normed = torch.empty_like(x)
    sgl_quant.compat.fused_add_rmsnorm_fp8_block_quant(out, block_scale, normed, x, r, w)
    return out, block_scale, normed


# Each case: (function of (x, weight, residual), x's rank, whether it takes the residual). Every
# allocating wrapper, every scale layout among them (the TMA-aligned ones pad the row count to ceil4(M)),
# and FlashInfer's call shape, whose caller allocates the padded scale buffer.
EXPORT_CASES = {
    "fp8_row": (lambda x, w, r: sgl_quant.per_token_group_quant_fp8(x, 128), 2, False),
    "fp8_col": (lambda x, w, r: sgl_quant.per_token_group_quant_fp8(x, 128, column_major_scales=True), 2, False),
    "fp8_col_tma": (lambda x, w, r: sgl_quant.per_token_group_quant_fp8(x, 64, column_major_scales=True,
                                                                          scale_tma_aligned=True), 2, False),
    "fp8_col_ue8m0": (lambda x, w, r: sgl_quant.per_token_group_quant_fp8(
        x, 128, column_major_scales=True, scale_tma_aligned=True, scale_ue8m0=True), 2, False),
    "int8_row_ue8m0": (lambda x, w, r: sgl_quant.per_token_group_quant_int8(x, 32, scale_ue8m0=True), 2, False),
    "fp8_3d_silu_col_tma": (lambda x, w, r: sgl_quant.per_token_group_quant_fp8(
        x, 128, column_major_scales=True, scale_tma_aligned=True, fuse_silu_and_mul=True), 3, False),
    "dsv4": (lambda x, w, r: sgl_quant.per_token_group_quant_fp8_dsv4(x.view(x.shape[0], 4, H_EXPORT // 4)),
             2, False),
    "rmsnorm_fp8_col_tma_residual_normed": (lambda x, w, r: sgl_quant.rmsnorm_per_token_group_quant_fp8(
        x, w, 128, residual=r, column_major_scales=True, scale_tma_aligned=True, return_normed=True), 2, True),
    "rmsnorm_int8_col_ue8m0": (lambda x, w, r: sgl_quant.rmsnorm_per_token_group_quant_int8(
        x, w, 128, column_major_scales=True, scale_tma_aligned=True, scale_ue8m0=True), 2, False),
    "compat_vllm_col_tma": (lambda x, w, r: sgl_quant.compat.rms_norm_per_block_quant(
        x, w, 1e-6, FP8, [1, 128], residual=r, is_scale_transposed=True, has_tma_aligned_scales=True), 2, True),
    "compat_sglang_col_tma": (lambda x, w, r: sgl_quant.compat.sglang_per_token_group_quant_fp8(
        x, 128, column_major_scales=True, scale_tma_aligned=True), 2, False),
    "compat_flashinfer": (_flashinfer_call, 2, True),
}


class _Exported(torch.nn.Module):
    def __init__(self, fn, weight):
        super().__init__()
        self.fn = fn
        self.register_buffer("weight", weight)

    def forward(self, x, residual=None):
        return self.fn(x, self.weight, residual)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("strict", [False, True], ids=["nonstrict", "strict"])
@pytest.mark.parametrize("case", sorted(EXPORT_CASES))
def test_export_dynamic_rows(case, strict, device):
    """One program exported with a dynamic row count serves every M (0, 1, odd, a multiple of 4) with the
    eager call's bytes and layout, the residual update included. The wrappers must keep the row count
    symbolic: converting it to an int, or slicing a ceil4(M) buffer to M rows (a bound the tracer cannot
    prove), made export specialize the program to the example's M or fail."""
    from torch.export import Dim

    fn, rank, with_residual = EXPORT_CASES[case]
    row_dim = rank - 2

    def shape(m):
        return (m, H_EXPORT) if rank == 2 else (2, m, 2 * H_EXPORT)

    def args(m, seed):
        x = make_input(shape(m), torch.bfloat16, seed=seed).to(device)
        return (x, make_input((m, H_EXPORT), torch.bfloat16, seed=seed + 1).to(device)) if with_residual else (x,)

    weight = make_input((H_EXPORT,), torch.bfloat16, seed=12).to(device)
    module = _Exported(fn, weight)
    rows = Dim("rows", min=0, max=1 << 16)
    dynamic = {"x": {row_dim: rows}, **({"residual": {0: rows}} if with_residual else {})}
    program = torch.export.export(module, args(6, seed=13), dynamic_shapes=dynamic, strict=strict).module()
    for m in (0, 1, 5, 6, 8, 37):
        want_args = args(m, seed=20 + m)
        got_args = tuple(a.clone() for a in want_args)
        want, got = module(*want_args), program(*got_args)
        assert len(got) == len(want)
        for i, (g, w) in enumerate(zip(got, want)):
            assert _same(g, w), f"M={m}: output {i} differs from eager (shape {tuple(g.shape)} vs {tuple(w.shape)}, " \
                                f"strides {g.stride()} vs {w.stride()})"
        if with_residual:
            assert torch.equal(bits(got_args[1]), bits(want_args[1])), f"M={m}: the residual update differs"
