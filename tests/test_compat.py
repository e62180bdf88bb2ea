"""sgl_quant.compat: the reference call shapes give the same bytes as the native API."""
import inspect
from typing import Optional

import pytest
import torch

import sgl_quant
from helpers import DEVICES, POISON, alloc_scales
from reference import FP8
from sgl_quant import compat
from sgl_quant.testing import make_input, make_masked_m

RANGE = {FP8: (-448.0, 448.0), torch.int8: (-128.0, 127.0)}


def _bytes(t):
    return t.flatten().view(torch.uint8)  # flatten: a copy in logical order where t is strided


def _poisoned_outputs(layout, q_shape, out_dtype, device):
    q = torch.full(q_shape, POISON, dtype=torch.uint8, device=device).view(out_dtype)
    s, buf, ue8m0 = alloc_scales(layout, q_shape, 128, device)
    return q, s, buf, ue8m0


# The reference call shapes, written out (names, order and defaults are the contract).
def _ref_sgl_kernel_signature(input: torch.Tensor, output_q: torch.Tensor, output_s: torch.Tensor, group_size: int,
                              eps: float, fp8_min: float, fp8_max: float, scale_ue8m0: bool = False,
                              fuse_silu_and_mul: bool = False, masked_m: Optional[torch.Tensor] = None,
                              enable_v2: Optional[bool] = True): ...


def _ref_sglang_signature(x: torch.Tensor, group_size: int, eps: float = 1e-10, column_major_scales: bool = False,
                          scale_tma_aligned: bool = False, scale_ue8m0: bool = False, fuse_silu_and_mul: bool = False,
                          masked_m: Optional[torch.Tensor] = None, enable_v2: Optional[bool] = None): ...


def _names_and_defaults(fn):
    return [(p.name, p.default) for p in inspect.signature(fn).parameters.values()]


def _ref_flashinfer_signature(out: torch.Tensor, block_scale: torch.Tensor, normed_out: torch.Tensor,
                              input: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6,
                              enable_pdl: Optional[bool] = None): ...


def _ref_vllm_signature(input: torch.Tensor, weight: torch.Tensor, epsilon: float, quant_dtype: torch.dtype,
                        group_size: list, scale_ub: Optional[torch.Tensor] = None,
                        residual: Optional[torch.Tensor] = None, is_scale_transposed: bool = False,
                        has_tma_aligned_scales: bool = False): ...


# Names, order and defaults are the call-shape contract (annotations are not compared).
def test_signature_names_and_defaults():
    assert _names_and_defaults(compat.sgl_per_token_group_quant_8bit) == _names_and_defaults(_ref_sgl_kernel_signature)
    assert _names_and_defaults(compat.sglang_per_token_group_quant_fp8) == _names_and_defaults(_ref_sglang_signature)
    assert _names_and_defaults(compat.fused_add_rmsnorm_fp8_block_quant) == \
        _names_and_defaults(_ref_flashinfer_signature)
    assert _names_and_defaults(compat.rms_norm_per_block_quant) == _names_and_defaults(_ref_vllm_signature)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("masked", [False, True], ids=["dense", "masked"])
@pytest.mark.parametrize("silu", [False, True], ids=["plain", "silu"])
@pytest.mark.parametrize("layout", ["row", "col_tma", "row_ue8m0", "col_ue8m0"])
@pytest.mark.parametrize("out_dtype", [FP8, torch.int8], ids=["fp8", "int8"])
def test_sgl_kernel_call_same_bytes_as_native(out_dtype, layout, silu, masked, device):
    e, m, h = (4, 24, 512) if masked else (None, 37, 512)
    k = 2 * h if silu else h
    shape = (e, m, k) if masked else (m, k)
    x = make_input(shape, torch.bfloat16, seed=11, device=device)
    masked_m = make_masked_m(e, m, seed=5, device=device) if masked else None
    q_shape = (*shape[:-1], h)
    lo, hi = RANGE[out_dtype]

    q1, s1, buf1, ue8m0 = _poisoned_outputs(layout, q_shape, out_dtype, device)
    compat.sgl_per_token_group_quant_8bit(x, q1, s1, 128, 1e-10, lo, hi, scale_ue8m0=ue8m0,
                                          fuse_silu_and_mul=silu, masked_m=masked_m, enable_v2=True)
    q2, s2, buf2, _ = _poisoned_outputs(layout, q_shape, out_dtype, device)
    sgl_quant.per_token_group_quant_8bit_v2(x, q2, s2, 128, 1e-10, lo, hi, scale_ue8m0=ue8m0,
                                            fuse_silu_and_mul=silu, masked_m=masked_m)
    assert torch.equal(_bytes(q1), _bytes(q2))
    assert torch.equal(_bytes(buf1), _bytes(buf2))
    # and something was written (the comparison is not between two untouched buffers)
    assert not torch.equal(_bytes(buf1), torch.full_like(_bytes(buf1), POISON))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("silu", [False, True], ids=["plain", "silu"])
@pytest.mark.parametrize("flags", [(False, False, False), (True, False, False), (True, True, False),
                                   (False, False, True), (True, True, True)],
                         ids=["row", "col", "col_tma", "row_ue8m0", "col_ue8m0"])
def test_sglang_wrapper_same_as_native(flags, silu, device):
    col, tma, ue8m0 = flags
    x = make_input((45, 1024 if silu else 512), torch.bfloat16, seed=3, device=device)
    q1, s1 = compat.sglang_per_token_group_quant_fp8(x, 128, 1e-10, col, tma, ue8m0, silu)
    q2, s2 = sgl_quant.per_token_group_quant_fp8(x, 128, eps=1e-10, column_major_scales=col, scale_tma_aligned=tma,
                                                 scale_ue8m0=ue8m0, fuse_silu_and_mul=silu)
    assert q1.shape == q2.shape and q1.dtype == q2.dtype == FP8
    assert s1.shape == s2.shape and s1.stride() == s2.stride() and s1.dtype == s2.dtype
    assert torch.equal(_bytes(q1), _bytes(q2))
    assert torch.equal(_bytes(s1), _bytes(s2))


@pytest.mark.parametrize("device", DEVICES)
def test_sglang_wrapper_masked_valid_rows(device):
    e, m = 3, 20
    x = make_input((e, m, 512), torch.bfloat16, seed=8, device=device)
    masked_m = make_masked_m(e, m, seed=2, device=device)
    q1, s1 = compat.sglang_per_token_group_quant_fp8(x, 128, column_major_scales=True, scale_tma_aligned=True,
                                                     scale_ue8m0=True, masked_m=masked_m)
    q2, s2 = sgl_quant.per_token_group_quant_fp8(x, 128, column_major_scales=True, scale_tma_aligned=True,
                                                 scale_ue8m0=True, masked_m=masked_m)
    for i, count in enumerate(masked_m.tolist()):  # rows past the count are not written by either
        assert torch.equal(_bytes(q1[i, :count]), _bytes(q2[i, :count]))
        assert torch.equal(s1[i, :count].cpu(), s2[i, :count].cpu())


def test_enable_v2_false_warns_and_runs_v2(monkeypatch):
    monkeypatch.setattr(compat, "_warned_v1", False)
    x = make_input((5, 256), torch.bfloat16, seed=1)
    with pytest.warns(UserWarning, match="v2"):
        q1, s1 = compat.sglang_per_token_group_quant_fp8(x, 128, enable_v2=False)
    q2, s2 = sgl_quant.per_token_group_quant_fp8(x, 128)
    assert torch.equal(_bytes(q1), _bytes(q2)) and torch.equal(s1, s2)


def test_sglang_wrapper_requires_contiguous_input():
    x = make_input((8, 512), torch.bfloat16, seed=1)[:, :256]
    with pytest.raises(ValueError, match="contiguous"):
        compat.sglang_per_token_group_quant_fp8(x, 128)


def test_sgl_kernel_call_errors_name_the_argument():
    x = make_input((4, 256), torch.bfloat16, seed=1)
    q = torch.empty(4, 256, dtype=FP8)
    s = torch.empty(4, 3, dtype=torch.float32)  # should be [4, 2]
    with pytest.raises(RuntimeError, match="output_s"):
        compat.sgl_per_token_group_quant_8bit(x, q, s, 128, 1e-10, -448.0, 448.0)


def _rms_case(m, h, device, dtype=torch.bfloat16):
    x = make_input((m, h), dtype, seed=30, device=device)
    w = (make_input((h,), dtype, seed=31, device=device).float() * 100 + 1).to(dtype)
    r = make_input((m, h), dtype, seed=32, device=device)
    return x, w, r


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("m", [1, 6, 37])
def test_flashinfer_call_same_bytes_as_native(m, device):
    """FlashInfer's layout: block_scale is a contiguous [H/128, ceil4(M)] buffer (the TMA padding is not
    written), normed_out and the residual are updated; the bytes are the native op's."""
    h = 1024
    x, w, r = _rms_case(m, h, device)
    out = torch.full((m, h), POISON, dtype=torch.uint8, device=device).view(FP8)
    block_scale = torch.full(((h // 128), (m + 3) // 4 * 4), float("nan"), device=device)
    normed_out = torch.empty(m, h, dtype=torch.bfloat16, device=device)
    r1 = r.clone()
    compat.fused_add_rmsnorm_fp8_block_quant(out, block_scale, normed_out, x, r1, w, eps=1e-5)
    r2 = r.clone()
    q2, s2, n2 = sgl_quant.rmsnorm_per_token_group_quant_fp8(x, w, 128, eps=1e-5, residual=r2, column_major_scales=True,
                                                             scale_tma_aligned=True, return_normed=True)
    assert torch.equal(_bytes(out), _bytes(q2)) and torch.equal(normed_out, n2) and torch.equal(r1, r2)
    assert torch.equal(block_scale.t()[:m], s2)
    assert bool(block_scale.t()[m:].isnan().all()), "the TMA padding columns must not be written"
    with pytest.raises(ValueError, match="block_scale must be a contiguous"):
        compat.fused_add_rmsnorm_fp8_block_quant(out, block_scale[:, 1:], normed_out, x, r1, w)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("quant_dtype", [FP8, torch.int8], ids=["fp8", "int8"])
@pytest.mark.parametrize("layout", [(False, False), (True, False), (True, True)], ids=["row", "col", "col_tma"])
def test_vllm_call_same_bytes_as_native(layout, quant_dtype, device):
    transposed, tma = layout
    x, w, r = _rms_case(9, 512, device, torch.float16)
    r1, r2 = r.clone(), r.clone()
    q1, s1 = compat.rms_norm_per_block_quant(x, w, 1e-6, quant_dtype, [1, 64], residual=r1,
                                             is_scale_transposed=transposed, has_tma_aligned_scales=tma)
    fn = sgl_quant.rmsnorm_per_token_group_quant_fp8 if quant_dtype == FP8 else sgl_quant.rmsnorm_per_token_group_quant_int8
    q2, s2 = fn(x, w, 64, eps=1e-6, residual=r2, column_major_scales=transposed, scale_tma_aligned=tma)
    assert q1.dtype == quant_dtype and s1.shape == (9, 8) and s1.stride() == s2.stride()
    assert torch.equal(_bytes(q1), _bytes(q2)) and torch.equal(s1, s2) and torch.equal(r1, r2)
    if transposed:
        assert s1.stride(0) == 1
    q3, _ = compat.rms_norm_per_block_quant(x, w, 1e-6, quant_dtype, [1, 64])  # no residual: x is normalized
    q4, _ = fn(x, w, 64, eps=1e-6)
    assert torch.equal(_bytes(q3), _bytes(q4))


def test_vllm_call_rejects_what_it_does_not_support():
    x, w, r = _rms_case(4, 256, "cpu")
    with pytest.raises(ValueError, match="group_size must be"):
        compat.rms_norm_per_block_quant(x, w, 1e-6, FP8, [128])
    with pytest.raises(ValueError, match="scale_ub is not supported"):
        compat.rms_norm_per_block_quant(x, w, 1e-6, FP8, [1, 128], scale_ub=torch.ones(()))
    with pytest.raises(ValueError, match="quant_dtype"):
        compat.rms_norm_per_block_quant(x, w, 1e-6, torch.bfloat16, [1, 128])
