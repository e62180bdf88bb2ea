"""The C++ CPU implementation against the pure-torch reference over the full combination matrix
of docs/spec.md §3.1, plus masked counts, non-finite groups, empty inputs and the allocating API."""
import importlib.util
from pathlib import Path

import pytest
import torch

import sgl_quant
from helpers import LAYOUTS, activation_inputs, check_silu_subnormal, compare, expected_v2, run_v2, silu_subnormal_case
from reference import FP8, packed_exponent_bytes, reference_quant
from sgl_quant.testing import make_input, make_masked_m

DTYPES = [torch.bfloat16, torch.float16]
OUTS = [FP8, torch.int8]
GROUP_SIZES = [16, 32, 64, 128, 256]
# (tokens, groups per row): empty, decode, a G that is no multiple of 16 (nor of 4), a larger M
SHAPES = [(0, 3), (1, 5), (7, 17), (333, 6)]


def _check_against_reference(x, gs, out, layout, silu, masked_m, seedinfo):
    actual = run_v2(x, gs, out, layout, silu=silu, masked_m=masked_m)
    expected = expected_v2(x, gs, out, layout, silu=silu)
    # The C++ op and the reference do the same IEEE fp32 operations, so every path without SiLU is
    # bit-exact. With SiLU, torch.exp and the C++ expf may differ by an ulp, which can move a rounded
    # activation by one step: then a code may be one step off (bound: 0.1% of codes).
    return compare(actual, expected, actual[2], codes_exact=not silu, scales_exact=not silu, what=seedinfo)


@pytest.mark.parametrize("masked", [False, True], ids=["dense", "masked"])
@pytest.mark.parametrize("silu", [False, True], ids=["plain", "silu"])
@pytest.mark.parametrize("group_size", GROUP_SIZES)
@pytest.mark.parametrize("layout", list(LAYOUTS))
@pytest.mark.parametrize("out", OUTS, ids=["fp8", "int8"])
@pytest.mark.parametrize("dtype", DTYPES, ids=["bf16", "fp16"])
def test_cpu_matches_reference(dtype, out, layout, group_size, silu, masked):
    for i, (tokens, groups) in enumerate(SHAPES):
        h = groups * group_size
        k = 2 * h if silu else h
        seed = (i * 7919 + group_size * 31 + list(LAYOUTS).index(layout)) % 1000
        if masked:
            experts = 3
            x = make_input((experts, tokens, k), dtype, seed=seed)
            masked_m = make_masked_m(experts, tokens, seed=seed)
        else:
            x = make_input((tokens, k), dtype, seed=seed)
            masked_m = None
        _check_against_reference(x, group_size, out, layout, silu, masked_m, f"shape {tuple(x.shape)} seed {seed}")


@pytest.mark.parametrize("silu", [False, True], ids=["plain", "silu"])
@pytest.mark.parametrize("dtype", DTYPES, ids=["bf16", "fp16"])
def test_cpu_fresh_random_inputs(dtype, silu):
    """Normal-distributed data (not the golden generator) in every layout."""
    for layout in LAYOUTS:
        for seed in range(3):
            x = activation_inputs((65, (2 if silu else 1) * 7 * 128), dtype, seed)
            _check_against_reference(x, 128, FP8, layout, silu, None, f"{layout} seed {seed}")


def test_masked_counts_are_clamped():
    """Counts above M_pad act as M_pad, negative counts as 0; rows beyond are not written."""
    m_pad, h = 9, 256
    x = make_input((4, m_pad, 2 * h), torch.bfloat16, seed=5)
    masked_m = torch.tensor([-5, m_pad + 10, 3, 2**31 - 1], dtype=torch.int32)
    for layout in ("row", "col_tma", "col_ue8m0"):
        actual = run_v2(x, 128, FP8, layout, silu=True, masked_m=masked_m)
        valid = actual[2]
        assert valid.sum(1).tolist() == [0, m_pad, 3, m_pad]
        compare(actual, expected_v2(x, 128, FP8, layout, silu=True), valid, codes_exact=False, scales_exact=False)


def test_masked_3d_without_mask_is_batched():
    x = make_input((2, 5, 512), torch.float16, seed=8)
    actual = run_v2(x, 64, torch.int8, "col_tma")
    compare(actual, expected_v2(x, 64, torch.int8, "col_tma"), actual[2], codes_exact=True, scales_exact=True)


@pytest.mark.parametrize("out", OUTS, ids=["fp8", "int8"])
@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_non_finite_groups(layout, out):
    """A group with NaN/Inf gets a NaN scale (0xFF packed) and NaN codes (fp8 0x7F) or 0 (int8);
    the other groups are unaffected."""
    x = make_input((4, 512), torch.bfloat16, seed=11)
    x[0, 5] = float("nan")
    x[1, 130] = float("inf")
    x[2, 511] = float("-inf")
    q, s, valid = run_v2(x, 128, out, layout)
    bad = torch.zeros(4, 4, dtype=torch.bool)
    bad[0, 0] = bad[1, 1] = bad[2, 3] = True
    codes = q.view(torch.uint8).reshape(4, 4, 128)
    nan_code = 0x7F if out == FP8 else 0
    assert bool((codes[bad] == nan_code).all())
    if s.dtype == torch.uint8:
        assert bool((s[bad] == 0xFF).all()) and bool((s[~bad] != 0xFF).all())
    else:
        assert bool(s[bad].isnan().all()) and bool(s[~bad].isfinite().all())
    compare((q, s, valid), expected_v2(x, 128, out, layout), valid, codes_exact=True, scales_exact=True)
    # finite groups are exactly what they are without the bad values around
    clean = x.clone()
    clean[0, 5] = clean[1, 130] = clean[2, 511] = 0
    q2, s2, _ = run_v2(clean, 128, out, layout)
    assert torch.equal(codes[~bad], q2.view(torch.uint8).reshape(4, 4, 128)[~bad])


def test_silu_overflow_is_non_finite():
    """A finite fp16 input whose SiLU product overflows fp16 gives a non-finite group."""
    x = torch.ones(1, 2 * 256, dtype=torch.float16)
    x[0, 3] = 100.0
    x[0, 256 + 3] = 1000.0  # silu(100) * 1000 = 1e5 > 65504
    q, s, _ = run_v2(x, 128, FP8, "row", silu=True)
    assert s[0, 0].isnan() and s[0, 1].isfinite()
    assert bool((q.view(torch.uint8)[0, :128] == 0x7F).all())


def test_silu_product_flushes_subnormal_up():
    check_silu_subnormal("cpu")
    check_silu_subnormal("cpu", masked=True)
    x, eps, want_q, want_s = silu_subnormal_case()
    rq, rs, _ = reference_quant(x, 128, FP8, eps=eps, fuse_silu_and_mul=True)
    assert torch.equal(rq.view(torch.uint8), want_q) and torch.equal(rs[:, 0], want_s)


@pytest.mark.parametrize("shape", [(0, 256), (0, 3, 256), (3, 0, 256), (2, 0)], ids=str)
def test_empty_inputs(shape):
    x = torch.zeros(shape, dtype=torch.bfloat16)
    for kw in (dict(), dict(column_major_scales=True, scale_tma_aligned=True, scale_ue8m0=True)):
        q, s = sgl_quant.per_token_group_quant_fp8(x, 128 if shape[-1] else 16, **kw)
        assert q.shape == shape and q.dtype == FP8


def test_eps_is_honoured():
    x = torch.zeros(2, 128, dtype=torch.bfloat16)
    x[1, 0] = 1e-3
    for eps in (1e-10, 1e-4, 0.5):
        q, s = sgl_quant.per_token_group_quant_fp8(x, 128, eps=eps)
        rq, rs, _ = reference_quant(x, 128, FP8, eps=eps)
        assert torch.equal(s.view(torch.int32), rs.view(torch.int32))
        assert torch.equal(q.view(torch.uint8), rq.view(torch.uint8))


def test_row_strided_input():
    """Extension: input rows may be strided (last dim contiguous); same result as the compact copy."""
    base = make_input((6, 1024), torch.bfloat16, seed=2)
    view = base[:, 256:768]
    assert not view.is_contiguous()
    q1, s1 = sgl_quant.per_token_group_quant_fp8(view, 128)
    q2, s2 = sgl_quant.per_token_group_quant_fp8(view.contiguous(), 128)
    assert torch.equal(q1.view(torch.uint8), q2.view(torch.uint8)) and torch.equal(s1, s2)


@pytest.mark.parametrize("m", [1, 5, 8])
@pytest.mark.parametrize("g", [1, 3, 4, 7])
def test_create_scale_tensor_layouts(m, g):
    """Shapes, strides and dtypes of docs/spec.md §2, as SGLang's create_per_token_group_quant_fp8_output_scale."""
    q_shape, gs = (m, g * 128), 128
    s = sgl_quant.create_scale_tensor(q_shape, gs, "cpu")
    assert s.shape == (m, g) and s.is_contiguous() and s.dtype == torch.float32
    s = sgl_quant.create_scale_tensor(q_shape, gs, "cpu", column_major_scales=True)
    assert s.shape == (m, g) and s.stride() == (1, m)
    s = sgl_quant.create_scale_tensor(q_shape, gs, "cpu", column_major_scales=True, scale_tma_aligned=True)
    assert s.shape == (m, g) and s.stride() == (1, (m + 3) // 4 * 4)
    s = sgl_quant.create_scale_tensor(q_shape, gs, "cpu", scale_ue8m0=True)
    assert s.shape == (m, g) and s.is_contiguous() and s.dtype == torch.float32
    s = sgl_quant.create_scale_tensor(q_shape, gs, "cpu", True, True, True)
    assert s.dtype == torch.int32 and s.shape == (m, (g + 3) // 4) and s.stride() == (1, (m + 3) // 4 * 4)
    e = sgl_quant.create_scale_tensor((3, m, g * 128), gs, "cpu", True, True, True)
    assert e.shape == (3, m, (g + 3) // 4) and e.stride()[1:] == (1, (m + 3) // 4 * 4)
    with pytest.raises(ValueError, match="scale_tma_aligned"):
        sgl_quant.create_scale_tensor(q_shape, gs, "cpu", column_major_scales=True, scale_ue8m0=True)
    with pytest.raises(ValueError, match="divisible"):
        sgl_quant.create_scale_tensor((m, 200), gs, "cpu")


def test_allocating_api_matches_inplace_op():
    x = make_input((33, 2 * 1024), torch.bfloat16, seed=21)
    for layout in ("row", "col", "col_tma", "row_ue8m0", "col_ue8m0"):
        col, tma, ue8m0, _ = LAYOUTS[layout]
        q, s = sgl_quant.per_token_group_quant_fp8(x, 128, column_major_scales=col, scale_tma_aligned=tma,
                                                   scale_ue8m0=ue8m0, fuse_silu_and_mul=True)
        q2, s2, _ = run_v2(x, 128, FP8, layout, silu=True)
        assert torch.equal(q.view(torch.uint8), q2.view(torch.uint8))
        if s.dtype == torch.int32:
            assert torch.equal(packed_exponent_bytes(s, 8), s2)
        else:
            assert torch.equal(s, s2) and s.stride() == sgl_quant.create_scale_tensor(
                q.shape, 128, "cpu", col, tma, ue8m0).stride()
    qi, si = sgl_quant.per_token_group_quant_int8(x[:, :1024], 64)
    rq, rs, _ = reference_quant(x[:, :1024], 64, torch.int8)
    assert torch.equal(qi, rq) and torch.equal(si, rs)


def test_dequantization_error_is_small():
    """x ≈ q * s within fp8 e4m3 precision (relative 2^-4 of the group's amax)."""
    x = activation_inputs((64, 4096), torch.bfloat16, seed=4)
    for ue8m0 in (False, True):
        q, s = sgl_quant.per_token_group_quant_fp8(x, 128, scale_ue8m0=ue8m0)
        deq = (q.float().reshape(64, 32, 128) * s.unsqueeze(-1)).reshape(64, 4096)
        amax = x.float().abs().reshape(64, 32, 128).amax(-1, keepdim=True)
        err = (deq - x.float()).abs().reshape(64, 32, 128) / amax
        assert float(err.max()) <= 2.0**-4 * (2 if ue8m0 else 1)


def test_sanitizer_subset_calls_are_valid(capsys):
    """scripts/gpu/sanitize_subset.py runs only on a GPU, under compute-sanitizer. Here every one of its calls
    runs on the CPU op (its --cpu mode), so that a call the API refuses fails in CI rather than ending both
    sanitizer runs early on device time."""
    path = Path(__file__).resolve().parents[1] / "scripts" / "gpu" / "sanitize_subset.py"
    if not path.exists():
        pytest.skip("no scripts/ beside tests/ (a copy of the tests run against an installed wheel)")
    spec = importlib.util.spec_from_file_location("sanitize_subset", path)
    subset = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(subset)
    assert subset.main(["--cpu"]) == 0
    assert ", 0 mismatches" in capsys.readouterr().out


def test_public_api_is_typed():
    """The package says it is typed (py.typed): every public function, native and compat, annotates
    every parameter and its return, and the extension has a stub."""
    import inspect

    import sgl_quant.compat

    package = Path(sgl_quant.__file__).parent
    assert (package / "py.typed").is_file() and (package / "_C.pyi").is_file()
    functions = [getattr(sgl_quant, name) for name in sgl_quant.__all__ if inspect.isfunction(getattr(sgl_quant, name))]
    functions += [f for name, f in vars(sgl_quant.compat).items()
                  if inspect.isfunction(f) and not name.startswith("_") and f.__module__ == "sgl_quant.compat"]
    assert len(functions) >= 13
    for f in functions:
        sig = inspect.signature(f)
        missing = [p for p, param in sig.parameters.items() if param.annotation is inspect.Parameter.empty]
        assert not missing, f"{f.__name__}: parameters without a type: {missing}"
        assert sig.return_annotation is not inspect.Signature.empty, f"{f.__name__}: no return type"


def test_selftest_cli(capsys, monkeypatch):
    """`python -m sgl_quant selftest` passes on this machine's devices, and fails, naming the reason, where
    build_info() reports a GPU that the build has no code for (simulated: that needs such a GPU)."""
    from sgl_quant.__main__ import selftest

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)  # the CPU cases only, also on a GPU machine
    assert selftest() == 0
    assert "golden cases passed on cpu\n" in capsys.readouterr().out
    problem = "sgl_quant: cannot run its CUDA kernels on cuda:0 (NVIDIA A100-SXM4-80GB, compute capability 8.0): ..."
    real_info = sgl_quant.build_info
    monkeypatch.setattr(sgl_quant, "build_info",
                        lambda: dict(real_info(), device_has_kernels=False, device_kernel_problem=problem))
    assert selftest() == 1
    out = capsys.readouterr().out
    assert f"FAIL cuda: {problem}" in out and "none on cuda, which this build has no code for" in out, out
