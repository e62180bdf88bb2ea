"""Per-token and per-tensor quantization (docs/spec.md §8) on the CPU: the C++ implementation against the
independent torch model of §8.1 (exact bytes) over every dtype, code type, granularity and front; non-finite
input, empties, strided and unaligned rows, bad arguments, opcheck, torch.compile and the compat shapes."""
import pytest
import torch

import sgl_quant
from helpers import activation_inputs, assert_same_bytes, bits, opcheck, poisoned
from reference import FP8, reference_scaled_quant
from sgl_quant import compat

GRANULARITIES = ["token", "token_asym", "tensor_static", "tensor_dynamic"]
# every code type with every granularity it has (asymmetric quantization is int8 only)
CODE_GRANULARITIES = [(out, g) for out in (FP8, torch.int8) for g in GRANULARITIES if out == torch.int8 or g != "token_asym"]
CODE_GRANULARITY_IDS = [f"{'fp8' if out == FP8 else 'int8'}-{g}" for out, g in CODE_GRANULARITIES]
# shapes of x (K = H, or 2H with SiLU): vector rows, rows with a tail (H % 8 != 0), leading dimensions, one row
SHAPES = [(5, 256), (3, 2, 200), (1, 1000), (4, 13)]


def run(x, out, granularity, silu=False, eps=1e-10, scale_ub=None, static_scale=None):
    """The op into poisoned outputs; returns (codes, scales, zero points or None)."""
    h = x.shape[-1] // 2 if silu else x.shape[-1]
    q = poisoned((*x.shape[:-1], h), out, x.device)
    if granularity.startswith("token"):
        s = poisoned((*x.shape[:-1], 1), torch.float32, x.device)
        zp = poisoned(s.shape, torch.int32, x.device) if granularity == "token_asym" else None
        sgl_quant.per_token_quant_8bit(x, q, s, zp, scale_ub, eps, silu)
        return q, s, zp
    static = granularity == "tensor_static"
    s = static_scale.clone() if static else poisoned((1,), torch.float32, x.device)
    sgl_quant.per_tensor_quant_8bit(x, q, s, static, eps, silu)
    return q, s, None


def expected(x, out, granularity, silu=False, eps=1e-10, scale_ub=None, static_scale=None):
    return reference_scaled_quant(x.cpu(), out, granularity, eps, scale_ub, static_scale, silu)


def assert_equal_bytes(got, want, what):
    assert_same_bytes(got, want, what, names=("codes", "scales", "zero points"))


def static_scale_for(x, out, silu):
    """A static scale near the dynamic one (of the finite values), so that some codes saturate."""
    v = x.float().nan_to_num(0.0, posinf=0.0, neginf=0.0)
    return (v.abs().amax().reshape(1) / (600.0 if out == FP8 else 150.0)).clamp_min(1e-6)


@pytest.mark.parametrize("silu", [False, True], ids=["plain", "silu"])
@pytest.mark.parametrize("out,granularity", CODE_GRANULARITIES, ids=CODE_GRANULARITY_IDS)
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=["bf16", "fp16"])
def test_cpu_matches_reference(dtype, out, granularity, silu):
    for i, shape in enumerate(SHAPES):
        shape = (*shape[:-1], shape[-1] * (2 if silu else 1))
        x = activation_inputs(shape, dtype, seed=10 * i + 1)
        static = static_scale_for(x, out, silu) if granularity == "tensor_static" else None
        got = run(x, out, granularity, silu, static_scale=static)
        assert_equal_bytes(got, expected(x, out, granularity, silu, static_scale=static), f"{shape}")


@pytest.mark.parametrize("out", [FP8, torch.int8], ids=["fp8", "int8"])
def test_scale_ub_and_eps(out):
    x = activation_inputs((16, 512), torch.bfloat16, seed=3)
    ub = torch.tensor([0.05])
    assert_equal_bytes(run(x, out, "token", scale_ub=ub), expected(x, out, "token", scale_ub=ub), "scale_ub")
    eps = 1 / 512  # vLLM's floor s >= 1 / (448 * 512)
    tiny = x * 1e-4
    assert_equal_bytes(run(tiny, out, "token", eps=eps), expected(tiny, out, "token", eps=eps), "eps")
    q, s, _ = run(torch.zeros(2, 64, dtype=torch.bfloat16), out, "token", eps=eps)
    assert torch.equal(s, torch.full((2, 1), torch.tensor(eps, dtype=torch.float32).item() / (448.0 if out == FP8 else 127.0)))
    assert not bits(q).any()


@pytest.mark.parametrize("out", [FP8, torch.int8], ids=["fp8", "int8"])
def test_non_finite(out):
    nan_code = 0x7F if out == FP8 else 0
    x = activation_inputs((4, 64), torch.bfloat16, seed=5)
    x[1, 7], x[2, 0] = float("nan"), float("-inf")
    for granularity in ["token", "token_asym"] if out == torch.int8 else ["token"]:
        q, s, zp = run(x, out, granularity)
        assert s[1:3].isnan().all() and s[[0, 3]].isfinite().all(), granularity
        assert (bits(q[1:3]).to(torch.uint8) == nan_code).all(), granularity
        assert_equal_bytes((q, s, zp), expected(x, out, granularity), granularity)
    q, s, _ = run(x, out, "tensor_dynamic")  # the tensor holds NaN: every code
    assert s.isnan().all() and (bits(q).to(torch.uint8) == nan_code).all()
    static = torch.tensor([0.01])
    q, s, _ = run(x, out, "tensor_static", static_scale=static)  # per element: NaN -> NaN / 0, -Inf saturates
    assert torch.equal(s, static)
    assert int(bits(q)[1, 7].to(torch.uint8)) == nan_code
    assert float(q[2, 0].float()) == (-448.0 if out == FP8 else -128.0)
    assert_equal_bytes((q, s, None), expected(x, out, "tensor_static", static_scale=static), "static")


@pytest.mark.parametrize("granularity", GRANULARITIES)
def test_empty_and_strided(granularity):
    out = torch.int8 if granularity == "token_asym" else FP8
    static = torch.tensor([0.5])
    for shape in [(0, 64), (2, 0, 64), (0, 0)]:
        x = torch.empty(shape, dtype=torch.bfloat16)
        q, s, zp = run(x, out, granularity, static_scale=static)
        assert q.shape == shape
    # rows with a stride, unaligned starts (a column offset), leading dimensions that flatten
    base = activation_inputs((6, 300), torch.bfloat16, seed=9)
    for x in [base[:, :256], base[:, 1:201], base.view(2, 3, 300)[:, :, 3:133], base[::2, :100]]:
        got = run(x, out, granularity, static_scale=static)
        assert_equal_bytes(got, expected(x, out, granularity, static_scale=static), f"{tuple(x.shape)} {x.stride()}")


def test_dynamic_per_tensor_ignores_dirty_scale():
    x = activation_inputs((9, 128), torch.float16, seed=11)
    want = expected(x, FP8, "tensor_dynamic")
    for dirt in (1e30, float("nan"), -1.0):
        q = torch.empty(x.shape, dtype=FP8)
        s = torch.full((1,), dirt)
        sgl_quant.per_tensor_quant_8bit(x, q, s, False)
        assert_equal_bytes((q, s, None), want, f"dirty {dirt}")


def test_allocating_api():
    x = activation_inputs((2, 3, 256), torch.bfloat16, seed=13)
    q, s = sgl_quant.per_token_quant_fp8(x)
    assert q.shape == (2, 3, 256) and s.shape == (2, 3, 1)
    assert_equal_bytes((q, s, None), expected(x, FP8, "token"), "per_token_quant_fp8")
    q, s, zp = sgl_quant.per_token_quant_int8(x, symmetric=False)
    assert zp.shape == (2, 3, 1) and zp.dtype == torch.int32
    assert_equal_bytes((q, s, zp), expected(x, torch.int8, "token_asym"), "per_token_quant_int8 asym")
    q, s = sgl_quant.per_token_quant_int8(x, fuse_silu_and_mul=True)
    assert q.shape == (2, 3, 128)
    assert_equal_bytes((q, s, None), expected(x, torch.int8, "token", silu=True), "silu")
    q, s = sgl_quant.per_tensor_quant_fp8(x)
    assert s.shape == (1,)
    assert_equal_bytes((q, s, None), expected(x, FP8, "tensor_dynamic"), "per_tensor_quant_fp8")
    q, s = sgl_quant.per_tensor_quant_int8(x, scale=0.02)
    assert_equal_bytes((q, s, None), expected(x, torch.int8, "tensor_static", static_scale=torch.tensor([0.02])), "static")
    # dequantized, the codes are close to x
    q, s, zp = sgl_quant.per_token_quant_int8(x, symmetric=False)
    assert torch.allclose((q.float() - zp) * s, x.float(), atol=0, rtol=0) or \
        float(((q.float() - zp) * s - x.float()).abs().max()) <= float(s.max()) * 0.5 + 1e-6


def test_errors():
    x = activation_inputs((4, 64), torch.bfloat16, seed=1)
    q, s = torch.empty(4, 64, dtype=FP8), torch.empty(4, 1)
    op_t, op_p = torch.ops.sgl_quant.per_token_quant_8bit, torch.ops.sgl_quant.per_tensor_quant_8bit
    cases = [
        (lambda: op_t(x.float(), q, s, None, None, 1e-10, False), "input must be bfloat16 or float16"),
        (lambda: op_t(x, q.to(torch.float16), s, None, None, 1e-10, False), "output_q must be float8_e4m3fn or int8"),
        (lambda: op_t(x, q[:, :32], s, None, None, 1e-10, False), "output_q must have shape"),
        (lambda: op_t(x, q, s[:3], None, None, 1e-10, False), "output_s must have 4 elements"),
        (lambda: op_t(x, q, s.double(), None, None, 1e-10, False), "output_s must be Float"),
        (lambda: op_t(x, q, torch.empty(1, 4).t(), None, None, 1e-10, False), None),  # [4, 1] view of a row: ok
        (lambda: op_t(x, q, torch.empty(4, 2)[:, :1], None, None, 1e-10, False), "output_s must be contiguous"),
        (lambda: op_t(x, q, s, torch.empty(4, 1, dtype=torch.int32), None, 1e-10, False), "needs int8 output_q"),
        (lambda: op_t(x, q.view(torch.int8), s, torch.empty(4, 1), None, 1e-10, False), "output_azp must be Int"),
        (lambda: op_t(x, q.view(torch.int8), s, torch.empty(4, 1, dtype=torch.int32), torch.ones(1), 1e-10, False),
         "scale_ub applies to symmetric"),
        (lambda: op_t(x, q, s, None, torch.ones(2), 1e-10, False), "scale_ub must have 1 element"),
        (lambda: op_t(x, q, s, None, None, 0.0, False), "eps must be"),
        (lambda: op_t(x[:, :63], q[:, :31], s, None, None, 1e-10, True), r"must be 2\*H"),
        (lambda: op_t(x.t(), q, s, None, None, 1e-10, False), "last dimension must be contiguous"),
        (lambda: op_t(x.view(2, 2, 64).transpose(0, 1), q.view(2, 2, 64), s, None, None, 1e-10, False),
         "leading dimensions must flatten"),
        (lambda: op_t(x, x.view(FP8).view(-1)[:256].view(4, 64), s, None, None, 1e-10, False), "output_q overlaps input"),
        (lambda: op_p(x, q, torch.zeros(1), True, 1e-10, False), "positive finite"),
        (lambda: op_p(x, q, torch.full((1,), float("inf")), True, 1e-10, False), "positive finite"),
        (lambda: op_p(x, q, torch.ones(2), True, 1e-10, False), "output_s must have 1 element"),
        (lambda: op_p(x, q, torch.ones(1, dtype=torch.float16), False, 1e-10, False), "output_s must be Float"),
        (lambda: sgl_quant.per_tensor_quant_fp8(x, scale=-1.0), "positive finite"),
        (lambda: op_t(x, q, s.to("meta"), None, None, 1e-10, False), "same device"),
    ]
    for call, message in cases:
        if message is None:
            call()
            continue
        with pytest.raises((RuntimeError, ValueError), match=message):
            call()


def test_opcheck():
    x = activation_inputs((3, 2, 128), torch.bfloat16, seed=2)
    i8 = torch.empty(3, 2, 64, dtype=torch.int8)
    opcheck(torch.ops.sgl_quant.per_token_quant_8bit,
            (x, i8, torch.empty(3, 2, 1), torch.empty(3, 2, 1, dtype=torch.int32), None, 1e-10, True))
    opcheck(torch.ops.sgl_quant.per_token_quant_8bit,
            (x, torch.empty(3, 2, 128, dtype=FP8), torch.empty(6), None, torch.tensor([2.0]), 1e-10, False))
    opcheck(torch.ops.sgl_quant.per_tensor_quant_8bit, (x, torch.empty(3, 2, 128, dtype=torch.int8), torch.empty(1),
                                                        False, 1e-10, False))
    opcheck(torch.ops.sgl_quant.per_tensor_quant_8bit, (x, torch.empty(3, 2, 128, dtype=torch.int8),
                                                        torch.tensor([0.01]), True, 1e-10, False))


def test_torch_compile_fullgraph():
    def f(x):
        q1, s1 = sgl_quant.per_token_quant_fp8(x)
        q2, s2, zp = sgl_quant.per_token_quant_int8(x, symmetric=False)
        q3, s3 = sgl_quant.per_tensor_quant_fp8(x)
        return q1, s1, q2, s2, zp, q3, s3

    x = activation_inputs((8, 256), torch.bfloat16, seed=4)
    got = torch.compile(f, fullgraph=True, backend="aot_eager")(x)
    want = f(x)
    for a, b in zip(got, want):
        assert torch.equal(bits(a), bits(b))


def test_compat_shapes():
    x = activation_inputs((6, 256), torch.bfloat16, seed=7)
    tok = expected(x, FP8, "token")
    ten = expected(x, FP8, "tensor_dynamic")
    q, s = compat.scaled_fp8_quant(x)
    assert_equal_bytes((q, s, None), ten, "scaled_fp8_quant dynamic")
    q, s = compat.scaled_fp8_quant(x, use_per_token_if_dynamic=True)
    assert_equal_bytes((q, s, None), tok, "scaled_fp8_quant per token")
    q, s = compat.scaled_fp8_quant(x, num_token_padding=8, use_per_token_if_dynamic=True)
    assert q.shape == (8, 256) and s.shape == (8, 1)
    assert_equal_bytes((q[:6], s[:6], None), tok, "padded")
    static = torch.tensor([0.03])
    q, s = compat.scaled_fp8_quant(x, static)
    assert s is static
    assert_equal_bytes((q, s, None), expected(x, FP8, "tensor_static", static_scale=static), "static")
    q, s, zp = compat.scaled_int8_quant(x)
    assert zp is None and s.shape == (6, 1)
    assert_equal_bytes((q, s, None), expected(x, torch.int8, "token"), "scaled_int8_quant")
    q, s, zp = compat.scaled_int8_quant(x, symmetric=False)
    assert_equal_bytes((q, s, zp), expected(x, torch.int8, "token_asym"), "scaled_int8_quant azp")
    q, s, zp = compat.scaled_int8_quant(x, static)
    assert_equal_bytes((q, s, None), expected(x, torch.int8, "tensor_static", static_scale=static), "int8 static")
    with pytest.raises(ValueError, match="static zero point"):
        compat.scaled_int8_quant(x, static, azp=torch.zeros(1, dtype=torch.int32), symmetric=False)
    q, s = torch.empty(6, 256, dtype=FP8), torch.empty(6)
    compat.sgl_per_token_quant_fp8(x, q, s)
    assert_equal_bytes((q, s.view(6, 1), None), tok, "sgl_per_token_quant_fp8")
    s = torch.full((1,), 7.0)  # dirty: sgl-kernel would need it zeroed
    compat.sgl_per_tensor_quant_fp8(x, q, s, False)
    assert_equal_bytes((q, s, None), ten, "sgl_per_tensor_quant_fp8")
    q, s = compat.per_token_quant_int8(x.view(2, 3, 256))
    assert s.shape == (2, 3, 1)
    assert_equal_bytes((q.view(6, 256), s.view(6, 1), None), expected(x, torch.int8, "token"), "per_token_quant_int8")
    assert compat.per_token_quant_int8(x, scale_dtype=torch.float16)[1].dtype == torch.float16
