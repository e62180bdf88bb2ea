"""docs/spec.md §3.3: every invalid call raises before any launch, with a message naming the argument.
The same checks (csrc/quant_args.cpp) run for CPU and CUDA; device-mix cases are in test_gpu.py."""
import math

import numpy as np
import pytest
import torch

import sgl_quant
from helpers import DEVICES, bits
from sgl_quant.quant import create_scale_tensor

FP8 = torch.float8_e4m3fn
op_v2 = torch.ops.sgl_quant.per_token_group_quant_8bit_v2
op_dsv4 = torch.ops.sgl_quant.per_token_group_quant_fp8_dsv4


def v2_args(m=4, h=256, gs=128, dtype=torch.bfloat16, out=FP8, silu=False, layout=(False, False, False), device="cpu"):
    x = torch.randn(m, 2 * h if silu else h, device=device).to(dtype)
    q = torch.empty(m, h, dtype=out, device=device)
    s = create_scale_tensor((m, h), gs, device, *layout)
    lo, hi = (-448.0, 448.0) if out == FP8 else (-128.0, 127.0)
    return dict(input=x, output_q=q, output_s=s, group_size=gs, eps=1e-10, min_8bit=lo, max_8bit=hi,
                scale_ue8m0=layout[2], fuse_silu_and_mul=silu, masked_m=None, enable_pdl=False)


def call_v2(**kw):
    op_v2(kw["input"], kw["output_q"], kw["output_s"], kw["group_size"], kw["eps"], kw["min_8bit"], kw["max_8bit"],
          kw["scale_ue8m0"], kw["fuse_silu_and_mul"], kw["masked_m"], kw["enable_pdl"])


def expect_error(match, **changes):
    kw = v2_args()
    kw.update(changes)
    with pytest.raises(RuntimeError, match=match):
        call_v2(**kw)


def test_valid_call_passes():
    call_v2(**v2_args())


def test_input_dtype():
    expect_error(r"input must be bfloat16 or float16, got Float", input=torch.randn(4, 256))


def test_input_rank():
    expect_error(r"input must be 2-D \[M, H\] or 3-D", input=torch.randn(256).bfloat16())
    expect_error(r"input must be 2-D \[M, H\] or 3-D", input=torch.randn(2, 2, 2, 256).bfloat16())


def test_input_last_dim_not_contiguous():
    x = torch.randn(256, 4).bfloat16().t()
    expect_error(r"input's last dimension must be contiguous", input=x)


def test_output_q_dtype():
    expect_error(r"output_q must be float8_e4m3fn or int8, got BFloat16", output_q=torch.empty(4, 256).bfloat16())


def test_output_q_shape():
    expect_error(r"output_q must have shape \[4, 256\], got \[4, 128\]", output_q=torch.empty(4, 128, dtype=FP8))


def test_output_q_layout():
    # rows one stride >= H apart, the last dimension contiguous (any address: tests/test_layouts.py)
    q = torch.empty(256, 4, dtype=FP8).t()
    expect_error(r"output_q's last dimension must be contiguous \(stride 1\)", output_q=q)
    q = torch.empty(4 * 256, dtype=FP8).as_strided((4, 256), (128, 1))
    expect_error(r"output_q's row stride must be at least H=256 and below 2\^31, got strides \[128, 1\]", output_q=q)


@pytest.mark.parametrize("gs", [0, 8, 48, 100, 512])
def test_unsupported_group_size(gs):
    expect_error(r"group_size must be one of 16, 32, 64, 128, 256, got %d" % gs, group_size=gs)


def test_hidden_not_divisible_by_group_size():
    kw = v2_args(h=192, gs=64)
    kw["group_size"] = 128
    with pytest.raises(RuntimeError, match=r"hidden size H=192 must be divisible by group_size=128"):
        call_v2(**kw)


def test_silu_needs_even_last_dim():
    kw = v2_args(silu=True)
    kw["input"] = torch.randn(1, 513).bfloat16()
    with pytest.raises(RuntimeError, match=r"fuse_silu_and_mul=True input's last dimension must be 2\*H"):
        call_v2(**kw)


def test_silu_output_shape_is_half():
    kw = v2_args(silu=True)
    kw["output_q"] = torch.empty(4, 512, dtype=FP8)
    with pytest.raises(RuntimeError, match=r"output_q must have shape \[4, 256\]"):
        call_v2(**kw)


@pytest.mark.parametrize("lo,hi", [(-127.0, 127.0), (-448.0, 240.0), (-128.0, 127.0)])
def test_range_mismatch_fp8(lo, hi):
    expect_error(r"min_8bit/max_8bit must equal the range of output_q's dtype", min_8bit=lo, max_8bit=hi)


def test_range_mismatch_int8():
    kw = v2_args(out=torch.int8)
    kw["min_8bit"], kw["max_8bit"] = -448.0, 448.0
    with pytest.raises(RuntimeError, match=r"min_8bit/max_8bit must equal the range of output_q's dtype Char \(-128, 127\)"):
        call_v2(**kw)


@pytest.mark.parametrize("eps", [0.0, -1e-10, float("nan"), float("inf"), 1e-40, 1e39])
def test_invalid_eps(eps):
    expect_error(r"eps must be a finite float >= 2\^-100", eps=eps)


def test_scale_dtype():
    expect_error(r"output_s must be float32 \(scales\) or int32 \(packed UE8M0 scales\), got Half",
                 output_s=torch.empty(4, 2, dtype=torch.float16))


def test_scale_shape():
    expect_error(r"output_s must have shape \[4, 2\] \(one scale per group\), got \[4, 3\]", output_s=torch.empty(4, 3))
    expect_error(r"output_s must have 2 dimensions like input", output_s=torch.empty(8))


def test_scale_overlapping_layout():
    s = torch.empty(1, 2).expand(4, 2)  # stride 0 rows
    expect_error(r"output_s must be row-major .* or column-major", output_s=s)


def test_packed_scales_need_ue8m0():
    s = create_scale_tensor((4, 256), 128, "cpu", True, True, True)
    expect_error(r"int32 output_s holds packed UE8M0 scales and needs scale_ue8m0=True", output_s=s)


def test_packed_scales_must_be_column_major():
    kw = v2_args(h=1024, layout=(True, True, True))
    kw["output_s"] = torch.zeros(4, 2, dtype=torch.int32)  # row-major words
    with pytest.raises(RuntimeError, match=r"packed UE8M0 output_s must be column-major"):
        call_v2(**kw)


def test_packed_scale_shape():
    s = torch.empty(4, 8, dtype=torch.int32).t()[:2].t()  # [4, 2]: should be [4, ceil(2/4)] = [4, 1]
    expect_error(r"output_s must have shape \[4, 1\] \(ceil\(G/4\) packed words per row\)", output_s=s,
                 scale_ue8m0=True)


def masked_args(e=3, m=8, h=256, counts=None):
    kw = v2_args(silu=True, layout=(True, True, True))
    kw["input"] = torch.randn(e, m, 2 * h).bfloat16()
    kw["output_q"] = torch.empty(e, m, h, dtype=FP8)
    kw["output_s"] = create_scale_tensor((e, m, h), 128, "cpu", True, True, True)
    kw["masked_m"] = torch.full((e,), m, dtype=torch.int32) if counts is None else counts
    return kw


def test_masked_valid_call_passes():
    call_v2(**masked_args())


def test_masked_m_dtype():
    kw = masked_args(counts=torch.full((3,), 8, dtype=torch.int64))
    with pytest.raises(RuntimeError, match=r"masked_m must be int32, got Long"):
        call_v2(**kw)


def test_masked_m_shape():
    kw = masked_args(counts=torch.full((4,), 8, dtype=torch.int32))
    with pytest.raises(RuntimeError, match=r"masked_m must have shape \[E\] = \[3\], got \[4\]"):
        call_v2(**kw)


def test_masked_m_needs_3d_input():
    kw = v2_args()
    kw["masked_m"] = torch.ones(1, dtype=torch.int32)
    with pytest.raises(RuntimeError, match=r"masked_m requires a 3-D input"):
        call_v2(**kw)


def test_masked_scale_experts_overlap():
    kw = masked_args()
    kw["output_s"] = create_scale_tensor((1, 8, 256), 128, "cpu", True, True, True).expand(3, 8, 1)
    with pytest.raises(RuntimeError, match=r"output_s experts overlap"):
        call_v2(**kw)


# name -> (call on x, an x of the wrong rank, the message it gets)
V2_RANK = ((256,), r"x must be 2-D \[M, K\] or 3-D \[E, M, K\], got shape \(256,\)")
RMS_RANK = ((1, 4, 256), r"x must be 2-D \[M, H\], got shape \(1, 4, 256\)")
ALLOCATING_WRAPPERS = {
    "fp8": (lambda x: sgl_quant.per_token_group_quant_fp8(x, 128), *V2_RANK),
    "int8": (lambda x: sgl_quant.per_token_group_quant_int8(x, 128), *V2_RANK),
    "dsv4": (lambda x: sgl_quant.per_token_group_quant_fp8_dsv4(x), (4, 256),
             r"x must be 3-D \[T, G, D\], got shape \(4, 256\)"),
    "rmsnorm_fp8": (lambda x: sgl_quant.rmsnorm_per_token_group_quant_fp8(x, torch.ones(256).bfloat16(), 128),
                    *RMS_RANK),
    "rmsnorm_int8": (lambda x: sgl_quant.rmsnorm_per_token_group_quant_int8(x, torch.ones(256).bfloat16(), 128),
                     *RMS_RANK),
}


@pytest.mark.parametrize("wrapper", sorted(ALLOCATING_WRAPPERS))
def test_allocating_wrappers_reject_bad_x(wrapper):
    """The allocating wrappers read x's shape to allocate, before the op's checks: they name x."""
    call, bad_shape, message = ALLOCATING_WRAPPERS[wrapper]
    for not_a_tensor in (np.zeros((4, 256), np.float32), [[0.0] * 256]):
        with pytest.raises(TypeError, match=f"x must be a torch.Tensor, got {type(not_a_tensor).__name__}"):
            call(not_a_tensor)
    with pytest.raises(ValueError, match=message):
        call(torch.randn(bad_shape).bfloat16())


def test_create_scale_tensor_rejects_bad_arguments():
    with pytest.raises(ValueError, match=r"q_shape must be \[\.\.\., M, H\] \(at least 2 dimensions\), got \(512,\)"):
        create_scale_tensor((512,), 128, "cpu")
    with pytest.raises(TypeError, match="group_size must be an int, got float"):
        create_scale_tensor((4, 512), 128.0, "cpu")
    with pytest.raises(TypeError, match="group_size must be an int, got float"):
        sgl_quant.per_token_group_quant_fp8(torch.randn(4, 512).bfloat16(), 128.0)
    for not_positive in (0, -128):  # -128 divides 512: the message must not say it does not
        with pytest.raises(ValueError, match=f"group_size must be positive, got {not_positive}"):
            create_scale_tensor((4, 512), not_positive, "cpu")
    with pytest.raises(ValueError, match="group_size must be positive, got -128"):
        sgl_quant.per_token_group_quant_fp8(torch.randn(4, 512).bfloat16(), -128)
    with pytest.raises(ValueError, match=r"q_shape\[-1\]=512 must be divisible by group_size=384"):
        create_scale_tensor((4, 512), 384, "cpu")
    # integer-like group sizes (numpy, 0-d tensors) are ints
    assert create_scale_tensor((4, 512), np.int64(128), "cpu").shape == (4, 4)
    assert create_scale_tensor((4, 512), torch.tensor(64), "cpu").shape == (4, 8)


# --- DSV4 -------------------------------------------------------------------------------------

def dsv4_call(x, q=None, s=None):
    t, g, d = x.shape
    q = torch.empty(t, g, d, dtype=FP8) if q is None else q
    s = torch.empty(g, t, d // 128).transpose(0, 1) if s is None else s
    op_dsv4(x, q, s, False)


def test_dsv4_valid_call_passes():
    dsv4_call(torch.randn(3, 2, 256).bfloat16())


def test_dsv4_d_not_multiple_of_128():
    x = torch.randn(3, 2, 192).bfloat16()
    with pytest.raises(RuntimeError, match=r"last dimension D=192 must be a multiple of 128"):
        dsv4_call(x, s=torch.empty(2, 3, 1).transpose(0, 1))


def test_dsv4_input_dtype():
    with pytest.raises(RuntimeError, match=r"input must be bfloat16 or float16, got Float"):
        dsv4_call(torch.randn(3, 2, 256))


def test_dsv4_last_dim_not_contiguous():
    x = torch.randn(3, 256, 2).bfloat16().transpose(1, 2)
    with pytest.raises(RuntimeError, match=r"input's last dimension must be contiguous"):
        dsv4_call(x)


def test_dsv4_output_q_dtype():
    with pytest.raises(RuntimeError, match=r"output_q must be float8_e4m3fn, got Char"):
        dsv4_call(torch.randn(3, 2, 256).bfloat16(), q=torch.empty(3, 2, 256, dtype=torch.int8))


def test_dsv4_scale_layout():
    with pytest.raises(RuntimeError, match=r"output_s must have the fp8_einsum layout, strides \(D/128, T\*D/128, 1\)"):
        dsv4_call(torch.randn(3, 2, 256).bfloat16(), s=torch.empty(3, 2, 2))
    with pytest.raises(RuntimeError, match=r"output_s must have shape \[T, G, D/128\] = \[3, 2, 2\]"):
        dsv4_call(torch.randn(3, 2, 256).bfloat16(), s=torch.empty(3, 2, 3))
    with pytest.raises(RuntimeError, match=r"output_s must be float32, got Int"):
        dsv4_call(torch.randn(3, 2, 256).bfloat16(), s=torch.empty(2, 3, 2, dtype=torch.int32).transpose(0, 1))


@pytest.mark.skipif(not hasattr(sgl_quant._C, "_launch_config"), reason="build without CUDA kernels")
def test_launch_config_hook():
    """The private test hook sgl_quant._C._set_launch_config: automatic by default, a round trip, and bad
    shapes refused with the argument named, leaving the shape in use unchanged."""
    from sgl_quant import _C
    assert _C._launch_config() == [0, 0, 0, 0]  # automatic block size, waves, cluster and stages
    try:
        _C._set_launch_config(128, 4, 3, 5)
        assert _C._launch_config() == [128, 4, 3, 5]
        for bad, match in [((48, 4, 2, 0), "block_threads must be 0"), ((1024, 4, 2, 0), "block_threads must be 0"),
                           ((0, -1, 2, 0), "waves must be 0"), ((0, 65, 2, 0), "waves must be 0"),
                           ((0, 4, 9, 0), "rmsnorm_cluster must be 0"), ((0, 4, -1, 0), "rmsnorm_cluster must be 0"),
                           ((0, 4, 2, 17), "rmsnorm_stages must be 0"), ((0, 4, 2, -2), "rmsnorm_stages must be 0")]:
            with pytest.raises(RuntimeError, match=match):
                _C._set_launch_config(*bad)
        assert _C._launch_config() == [128, 4, 3, 5]
        _C._set_launch_config(0, 0, 0, -1)  # never staged
        assert _C._launch_config() == [0, 0, 0, -1]
    finally:
        _C._set_launch_config(0, 0, 0, 0)


# --- fused RMSNorm -> quant (docs/spec.md §6.1) -------------------------------------------------------

op_rms = torch.ops.sgl_quant.rmsnorm_per_token_group_quant_8bit


def rms_args(m=4, h=256, gs=128, dtype=torch.bfloat16, out=FP8, layout=(False, False, False)):
    lo, hi = (-448.0, 448.0) if out == FP8 else (-128.0, 127.0)
    return dict(input=torch.randn(m, h).to(dtype), weight=torch.ones(h, dtype=dtype),
                residual=torch.randn(m, h).to(dtype), output_q=torch.empty(m, h, dtype=out),
                output_s=create_scale_tensor((m, h), gs, "cpu", *layout), output_normed=torch.empty(m, h, dtype=dtype),
                group_size=gs, norm_eps=1e-6, eps=1e-10, min_8bit=lo, max_8bit=hi, scale_ue8m0=layout[2],
                enable_pdl=False)


def expect_rms_error(match, **changes):
    kw = rms_args()
    kw.update(changes)
    with pytest.raises(RuntimeError, match=match):
        op_rms(*kw.values())


def test_rms_valid_calls_pass():
    op_rms(*rms_args().values())
    op_rms(*rms_args(out=torch.int8, layout=(True, True, True), gs=64, dtype=torch.float16).values())
    kw = rms_args()
    kw["residual"] = kw["output_normed"] = None
    op_rms(*kw.values())


def test_rms_input():
    expect_rms_error(r"rmsnorm_per_token_group_quant_8bit: input must be bfloat16 or float16, got Float",
                     input=torch.randn(4, 256))
    expect_rms_error(r"input must be 2-D \[M, H\], got shape \[2, 2, 256\]", input=torch.randn(2, 2, 256).bfloat16())
    expect_rms_error(r"input's last dimension must be contiguous", input=torch.randn(256, 4).bfloat16().t())


def test_rms_weight():
    expect_rms_error(r"weight must have input's dtype BFloat16, got Half", weight=torch.ones(256, dtype=torch.float16))
    expect_rms_error(r"weight must have shape \[256\], got \[128\]", weight=torch.ones(128, dtype=torch.bfloat16))
    expect_rms_error(r"weight must be contiguous", weight=torch.ones(512, dtype=torch.bfloat16)[::2])


def test_rms_residual():
    expect_rms_error(r"residual must have input's dtype BFloat16, got Float", residual=torch.randn(4, 256))
    expect_rms_error(r"residual must have shape \[4, 256\], got \[4, 128\]", residual=torch.randn(4, 128).bfloat16())
    expect_rms_error(r"residual must be contiguous", residual=torch.randn(4, 512).bfloat16()[:, :256])


def test_rms_output_normed():
    expect_rms_error(r"output_normed must have input's dtype BFloat16, got Half",
                     output_normed=torch.empty(4, 256, dtype=torch.float16))
    expect_rms_error(r"output_normed must have shape \[4, 256\], got \[4, 255\]",
                     output_normed=torch.empty(4, 255, dtype=torch.bfloat16))
    expect_rms_error(r"output_normed must be contiguous", output_normed=torch.empty(256, 4, dtype=torch.bfloat16).t())


@pytest.mark.parametrize("norm_eps", [0.0, -1e-6, float("nan"), float("inf"), 1e-50, 1e39])
def test_rms_norm_eps(norm_eps):
    expect_rms_error(r"norm_eps must be a finite float > 0", norm_eps=norm_eps)


def test_rms_group_and_hidden():
    expect_rms_error(r"group_size must be one of 16, 32, 64, 128, 256, got 96", group_size=96)
    kw = rms_args(h=192, gs=64)
    kw["group_size"] = 128
    with pytest.raises(RuntimeError, match=r"hidden size H=192 must be divisible by group_size=128"):
        op_rms(*kw.values())
    big = rms_args(m=1, h=32768 + 128)
    with pytest.raises(RuntimeError, match=r"hidden size H=32896 is too large \(at most 32768\)"):
        op_rms(*big.values())


def test_rms_codes_and_scales():
    expect_rms_error(r"output_q must be float8_e4m3fn or int8, got BFloat16", output_q=torch.empty(4, 256).bfloat16())
    expect_rms_error(r"output_q must have shape \[4, 256\], got \[4, 128\]", output_q=torch.empty(4, 128, dtype=FP8))
    expect_rms_error(r"min_8bit/max_8bit must equal the range of output_q's dtype", min_8bit=-127.0)
    expect_rms_error(r"eps must be a finite float >= 2\^-100", eps=0.0)
    expect_rms_error(r"output_s must have shape \[4, 2\] \(one scale per group\), got \[4, 3\]",
                     output_s=torch.empty(4, 3))
    expect_rms_error(r"int32 output_s holds packed UE8M0 scales and needs scale_ue8m0=True",
                     output_s=create_scale_tensor((4, 256), 128, "cpu", True, True, True))


# --- outputs sharing memory with another argument ----------------------------------------------
# The kernels read and write in parallel, so an output that shares bytes with another argument would
# give schedule-dependent bytes: refused before any launch, naming both. Spans that intersect without
# sharing bytes (interleaved views of one buffer) are accepted: decided exactly.

def carve(buf, offset, shape, dtype):
    """A contiguous tensor of `shape` and `dtype` inside the byte buffer `buf`, `offset` bytes in."""
    nbytes = math.prod(shape) * dtype.itemsize
    return buf[offset:offset + nbytes].view(dtype).view(shape)


def on_device(kw, device):
    """The argument dict kw with its tensors moved to device."""
    return {k: v.to(device) if isinstance(v, torch.Tensor) else v for k, v in kw.items()}


def expect_refusal(call, match, watched):
    """call() raises a RuntimeError matching `match`, and leaves every tensor of `watched` unchanged."""
    before = [bits(t).clone() for t in watched]
    with pytest.raises(RuntimeError, match=match):
        call()
    assert all(torch.equal(bits(t), b) for t, b in zip(watched, before)), f"{match}: bytes written before the error"


def expect_overlap(call, what, watched):
    """call() raises naming `what`, and leaves every tensor of `watched` unchanged."""
    expect_refusal(call, f"{what} in memory", watched)


@pytest.mark.parametrize("device", DEVICES)
def test_v2_outputs_sharing_memory(device):
    buf = torch.zeros(1 << 14, dtype=torch.uint8, device=device)
    x = carve(buf, 0, (4, 256), torch.bfloat16).normal_()  # bytes [0, 2048)
    q, s = carve(buf, 4096, (4, 256), FP8), carve(buf, 8192, (4, 2), torch.float32)
    call_v2(**dict(v2_args(device=device), input=x, output_q=q, output_s=s))  # apart: fine
    for what, change in [("output_q overlaps input", dict(output_q=carve(buf, 1024, (4, 256), FP8))),
                         ("output_q overlaps input", dict(output_q=carve(buf, 2032, (4, 256), FP8))),  # 16 bytes
                         ("output_q overlaps input", dict(output_q=x.view(FP8).view(-1)[:1024].view(4, 256))),  # x's own
                         ("output_s overlaps input", dict(output_s=carve(buf, 2032, (4, 2), torch.float32))),
                         ("output_s overlaps output_q", dict(output_s=carve(buf, 4096 + 1008, (4, 2), torch.float32)))]:
        args = dict(v2_args(device=device), input=x, output_q=q, output_s=s)
        args.update(change)
        expect_overlap(lambda: call_v2(**args), f"per_token_group_quant_8bit_v2: {what}", [buf])


@pytest.mark.parametrize("device", DEVICES)
def test_masked_outputs_sharing_memory_with_masked_m(device):
    kw = on_device(masked_args(), device)
    s = kw["output_s"]
    counts_in_scales = torch.as_strided(s, (3,), (1,), s.storage_offset())  # the scales' first three words
    counts_in_scales.fill_(8)
    expect_overlap(lambda: call_v2(**dict(kw, masked_m=counts_in_scales)), "output_s overlaps masked_m", [s])
    counts_in_codes = kw["output_q"].view(torch.int32).view(-1)[4:7]
    counts_in_codes.fill_(8)
    expect_overlap(lambda: call_v2(**dict(kw, masked_m=counts_in_codes)), "output_q overlaps masked_m",
                   [kw["output_q"].view(torch.uint8)])


@pytest.mark.parametrize("device", DEVICES)
def test_v2_interleaved_views_share_no_bytes(device):
    """A 3-D input whose experts lie two expert-sizes apart, and the codes in the gap between them: their
    spans intersect, their bytes do not. Accepted, with the bytes of a call on separate tensors; moved 16
    bytes into the input, refused."""
    e, m, h = 2, 4, 256
    expert_bytes = m * h * 2
    store = torch.zeros(3 * expert_bytes, dtype=torch.uint8, device=device)  # expert 0, the codes, expert 1
    x = torch.as_strided(store.view(torch.bfloat16), (e, m, h), (2 * m * h, h, 1))
    x.copy_(torch.randn(e, m, h).bfloat16())
    q = carve(store, expert_bytes, (e, m, h), FP8)
    s = torch.empty(e, m, 2, device=device)
    x_alone = x.clone()
    call_v2(**dict(v2_args(device=device), input=x, output_q=q, output_s=s))
    q_alone, s_alone = torch.empty(e, m, h, dtype=FP8, device=device), torch.empty(e, m, 2, device=device)
    call_v2(**dict(v2_args(device=device), input=x_alone, output_q=q_alone, output_s=s_alone))
    assert torch.equal(x, x_alone), "the input changed"
    assert torch.equal(q.view(torch.uint8), q_alone.view(torch.uint8)) and torch.equal(s, s_alone)
    moved = carve(store, expert_bytes - 16, (e, m, h), FP8)
    expect_overlap(lambda: call_v2(**dict(v2_args(device=device), input=x, output_q=moved, output_s=s)),
                   "output_q overlaps input", [store])


@pytest.mark.parametrize("device", DEVICES)
def test_dsv4_outputs_sharing_memory(device):
    buf = torch.zeros(1 << 14, dtype=torch.uint8, device=device)
    x = carve(buf, 0, (3, 2, 256), torch.bfloat16).normal_()  # bytes [0, 3072)
    q = carve(buf, 4096, (3, 2, 256), FP8)  # [4096, 5632)
    s = torch.empty(2, 3, 2, device=device).transpose(0, 1)
    dsv4_call(x, q=q, s=s)  # apart: fine
    expect_overlap(lambda: dsv4_call(x, q=carve(buf, 2048, (3, 2, 256), FP8), s=s),
                   "per_token_group_quant_fp8_dsv4: output_q overlaps input", [buf])
    s_in_q = carve(buf, 5120, (2, 3, 2), torch.float32).transpose(0, 1)
    expect_overlap(lambda: dsv4_call(x, q=q, s=s_in_q), "output_s overlaps output_q", [buf])


@pytest.mark.parametrize("device", DEVICES)
def test_rms_outputs_sharing_memory(device):
    """The fused op writes residual, output_q, output_s and output_normed: none may share bytes with
    another argument, an exact alias included (residual=input would mutate input, which the schema
    declares read-only)."""
    buf = torch.zeros(1 << 15, dtype=torch.uint8, device=device)
    bf16 = torch.bfloat16
    kw = dict(rms_args(), input=carve(buf, 0, (4, 256), bf16).normal_(),  # [0, 2048)
              weight=carve(buf, 2048, (256,), bf16).fill_(1), residual=carve(buf, 4096, (4, 256), bf16).normal_(),
              output_q=carve(buf, 8192, (4, 256), FP8), output_s=carve(buf, 12288, (4, 2), torch.float32),
              output_normed=carve(buf, 16384, (4, 256), bf16))
    op_rms(*dict(kw, residual=kw["residual"].clone()).values())  # apart: fine (residual kept for below)
    for what, change in [("residual overlaps input", dict(residual=kw["input"])),
                         ("residual overlaps input", dict(residual=carve(buf, 512, (4, 256), bf16))),  # a row on
                         ("output_q overlaps weight", dict(output_q=carve(buf, 2048, (4, 256), FP8))),
                         ("output_s overlaps residual", dict(output_s=carve(buf, 4096 + 16, (4, 2), torch.float32))),
                         ("output_s overlaps output_q", dict(output_s=carve(buf, 8192 + 1008, (4, 2), torch.float32))),
                         ("output_normed overlaps input", dict(output_normed=kw["input"])),
                         ("output_normed overlaps residual", dict(output_normed=kw["residual"])),
                         ("output_normed overlaps output_q", dict(output_normed=carve(buf, 8192 - 1024, (4, 256), bf16)))]:
        args = dict(kw, **change)
        expect_overlap(lambda: op_rms(*args.values()), f"rmsnorm_per_token_group_quant_8bit: {what}", [buf])


@pytest.mark.parametrize("device", DEVICES)
def test_rms_codes_between_strided_input_rows(device):
    """Input rows 512 elements apart and the codes in the gap between rows 0 and 1: accepted, with the
    bytes of a call on separate tensors."""
    store = torch.zeros(3 * 512, dtype=torch.uint8, device=device)  # row 0, the codes, row 1
    x = torch.as_strided(store.view(torch.bfloat16), (2, 256), (512, 1))
    x.copy_(torch.randn(2, 256).bfloat16())
    q = carve(store, 512, (2, 256), FP8)
    x_alone = x.clone()
    kw = on_device(rms_args(m=2), device)
    s, s_alone = torch.empty(2, 2, device=device), torch.empty(2, 2, device=device)
    residual = kw["residual"].clone()
    op_rms(*dict(kw, input=x, output_q=q, output_s=s).values())
    q_alone = torch.empty(2, 256, dtype=FP8, device=device)
    op_rms(*dict(kw, input=x_alone, residual=residual, output_q=q_alone, output_s=s_alone).values())
    assert torch.equal(x, x_alone), "the input changed"
    assert torch.equal(q.view(torch.uint8), q_alone.view(torch.uint8)) and torch.equal(s, s_alone)


# --- meta tensors among real ones ----------------------------------------------------------------
# One meta argument sends the whole call to the fake implementation, which the C++ checks never see:
# it must refuse the mix (as torch's own ops do) instead of returning with the real outputs unwritten.

@pytest.mark.parametrize("device", DEVICES)
def test_meta_tensor_among_real_ones(device):
    x4 = torch.randn(3, 2, 256, device=device).bfloat16()
    dsv4 = dict(input=x4, output_q=torch.empty(3, 2, 256, dtype=FP8, device=device),
                output_s=torch.empty(2, 3, 2, device=device).transpose(0, 1), enable_pdl=False)
    for op, kw, call in [("per_token_group_quant_8bit_v2", on_device(masked_args(), device), lambda a: call_v2(**a)),
                         ("per_token_group_quant_fp8_dsv4", dsv4, lambda a: op_dsv4(*a.values())),
                         ("rmsnorm_per_token_group_quant_8bit", on_device(rms_args(), device),
                          lambda a: op_rms(*a.values()))]:
        names = [k for k, v in kw.items() if isinstance(v, torch.Tensor)]
        for name in names:
            args = dict(kw, **{name: kw[name].to("meta")})
            real = [v for v in args.values() if isinstance(v, torch.Tensor) and v.device.type != "meta"]
            # a meta input: the first other tensor is the one that differs from it
            named, got = (names[1], device) if name == "input" else (name, "meta")
            expect_refusal(lambda: call(args), f"sgl_quant.{op}: {named} must be on the same device as input "
                                               rf"\({args['input'].device}\), got {got}", real)
        call({k: v.to("meta") if isinstance(v, torch.Tensor) else v for k, v in kw.items()})  # all meta: fine
