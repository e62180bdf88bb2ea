"""An independent pure-torch reference of docs/spec.md §1, written to be read, plus helpers to read any
scale layout back into logical values. It shares no code with the C++/CUDA implementations.
"""
import torch

FP8 = torch.float8_e4m3fn
RANGES = {FP8: (-448.0, 448.0), torch.int8: (-128.0, 127.0)}
FP8_NAN_CODE = 0x7F


def _pow2(e: torch.Tensor) -> torch.Tensor:
    return ((e + 127) << 23).to(torch.int32).view(torch.float32)


def activation(x: torch.Tensor, fuse_silu_and_mul: bool) -> torch.Tensor:
    """v of docs/spec.md §1 in fp32: x, or T(T(silu(gate)) * up) with silu(z) = z / (1 + exp(-z))."""
    if not fuse_silu_and_mul:
        return x.float()
    h = x.shape[-1] // 2
    gate, up = flush_subnormal(x[..., :h].float()), flush_subnormal(x[..., h:].float())
    a = flush_subnormal(gate / (1 + torch.exp(-gate))).to(x.dtype).float()
    return flush_subnormal(a * up).to(x.dtype).float()


def flush_subnormal(v: torch.Tensor) -> torch.Tensor:
    """fp32 subnormals to zeros of their sign, as the reference kernel's --use_fast_math arithmetic does."""
    return torch.where(v.abs() < torch.finfo(torch.float32).tiny, v * 0, v)


def reference_quant(x, group_size, out_dtype, eps=1e-10, scale_ue8m0=False, fuse_silu_and_mul=False,
                    fast_division=True):
    """Returns (codes [..., H] out_dtype, scales [..., G] fp32 logical values, exponents [..., G] int32).

    ``fast_division``: y = MAX * (1 / amax), the closest CPU model of the CUDA fast-math division
    (docs/spec.md §1.1); False gives the IEEE MAX / amax of the spec's formula.
    Non-finite groups (§1.2): scale NaN, codes NaN (fp8 0x7F) or 0 (int8), exponent byte 0xFF - 127.
    """
    lo, hi = RANGES[out_dtype]
    v = activation(x, fuse_silu_and_mul)
    groups = v.reshape(*v.shape[:-1], v.shape[-1] // group_size, group_size)
    finite = torch.isfinite(groups).all(-1)
    amax = torch.clamp(groups.abs().amax(-1), min=torch.tensor(eps, dtype=torch.float32).item())
    amax = torch.where(finite, amax, torch.ones_like(amax))  # any finite stand-in; fixed below
    s = amax * torch.tensor(1.0 / hi, dtype=torch.float32)  # C = fp32(1 / MAX)
    exponent = torch.zeros(s.shape, dtype=torch.int32)
    if scale_ue8m0:
        bits = s.view(torch.int32)
        exponent = ((bits >> 23) & 0xFF) - 127 + ((bits & 0x7FFFFF) != 0).to(torch.int32)
        y = _pow2(-exponent)
        s = _pow2(exponent)
    elif fast_division:
        y = hi * (1.0 / amax)
    else:
        y = hi / amax
    scaled = torch.clamp(groups * y.unsqueeze(-1), lo, hi)
    if out_dtype == FP8:
        q = scaled.to(FP8)
        q = torch.where(finite.unsqueeze(-1), q.view(torch.uint8), torch.tensor(FP8_NAN_CODE, dtype=torch.uint8))
        q = q.view(FP8)
    else:
        q = torch.where(finite.unsqueeze(-1), scaled.trunc(), torch.zeros_like(scaled)).to(torch.int8)
    s = torch.where(finite, s, torch.full_like(s, float("nan")))
    exponent = torch.where(finite, exponent, torch.full_like(exponent, 0xFF - 127))
    return q.reshape(*v.shape[:-1], v.shape[-1]), s, exponent


def scales_as_values(x_s: torch.Tensor, groups: int) -> torch.Tensor:
    """Logical fp32 scale per group from any layout (packed UE8M0 bytes are decoded; 0xFF -> NaN)."""
    if x_s.dtype == torch.float32:
        return x_s.float().cpu()
    e = packed_exponent_bytes(x_s, groups).to(torch.int32)
    vals = _pow2(e - 127)
    return torch.where(e == 0xFF, torch.full_like(vals, float("nan")), vals)


def packed_exponent_bytes(x_s: torch.Tensor, groups: int) -> torch.Tensor:
    """The UE8M0 byte (e + 127) of every group from a packed int32 scale tensor [..., M, ceil(G/4)]."""
    return packed_bytes(x_s)[..., :groups]  # little-endian: byte k of word j is group 4j + k


def packed_bytes(x_s: torch.Tensor) -> torch.Tensor:
    """All bytes of the logical view [..., M, ceil(G/4)] of a packed scale tensor: [..., M, 4*ceil(G/4)]."""
    out = torch.empty(x_s.shape, dtype=x_s.dtype)  # plain strides, also for size-1 dimensions
    out.copy_(x_s)
    return out.view(torch.uint8)


def code_steps(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """|ordinal(a) - ordinal(b)| per element: how many representable codes apart two codes are."""
    def ordinal(t):
        if t.dtype == torch.int8:
            return t.to(torch.int32)
        u = t.view(torch.uint8).to(torch.int32)
        mag = u & 0x7F
        return torch.where(u >= 0x80, -mag, mag)
    return (ordinal(a.cpu()) - ordinal(b.cpu())).abs()


# ------------------------------------------------------------------------------------------------
# Fused (add +) RMSNorm (docs/spec.md §6.2), two ways: the exact fp32 steps in the documented order, and fp64.

def _fma32(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
    """fp32 fused multiply-add, correctly rounded: the fp64 product of two fp32 values is exact; their sum
    is rounded to fp64 *to odd* (TwoSum gives the rounding error), so that the final rounding to fp32
    is the one rounding of the exact value."""
    p, c = a.double() * b.double(), c.double()
    s = p + c
    bb = s - p
    err = (p - (s - bb)) + (c - bb)  # p + c == s + err exactly
    inexact_even = (err != 0) & ((s.view(torch.int64) & 1) == 0)
    toward = torch.where(err > 0, torch.full_like(s, float("inf")), torch.full_like(s, float("-inf")))
    return torch.where(inexact_even, torch.nextafter(s, toward), s).float()


def _fp32(v: torch.Tensor) -> torch.Tensor:
    """One IEEE fp32 operation computed in fp64 and rounded once more: for +, *, / and sqrt of fp32
    operands the fp64 result rounds to the correctly rounded fp32 one (53 >= 2 * 24 + 2 bits). (torch's
    own fp32 sqrt on the CPU is not always correctly rounded: vectorized, within 0.5001 ulp.)"""
    return v.float()


def rmsnorm_sum_of_squares(z: torch.Tensor) -> torch.Tensor:
    """ss per row of fp32 z [M, H] in docs/spec.md §6.3's order: an fma chain from +0 over each 8-element vector,
    then a pairwise tree over the vectors (adjacent pairs first), zero-padded to a power of two."""
    m, h = z.shape
    vec = z.reshape(m, h // 8, 8)
    q = torch.zeros(m, h // 8, dtype=torch.float32)
    for e in range(8):
        q = _fma32(vec[:, :, e], vec[:, :, e], q)
    width = 1
    while width < q.shape[1]:
        width *= 2
    q = torch.cat([q, torch.zeros(m, width - q.shape[1])], dim=1)
    while q.shape[1] > 1:
        q = _fp32(q[:, 0::2].double() + q[:, 1::2].double())
    return q[:, 0]


def _to_16bit(v: torch.Tensor, dtype) -> torch.Tensor:
    """v rounded to dtype, NaN as the canonical 0x7FFF (what the GPU's conversion writes, and the op too)."""
    return torch.where(v.isnan(), torch.tensor(0x7FFF, dtype=torch.int16), v.to(dtype).view(torch.int16)).view(dtype)


def rmsnorm_exact(x, weight, residual=None, norm_eps=1e-6):
    """(normed T [M, H], new residual T or None): docs/spec.md §6.2 with every fp32 step as written."""
    t = x.dtype
    z = x.float()
    new_residual = None
    if residual is not None:
        z = _fp32(z.double() + residual.double())
        new_residual = _to_16bit(z, t)
    ss = rmsnorm_sum_of_squares(z).double()
    eps32 = torch.tensor(norm_eps, dtype=torch.float32).double()
    inv = _fp32(1 / _fp32(_fp32(_fp32(ss / z.shape[1]).double() + eps32).double().sqrt()).double())
    zi = _fp32(z.double() * inv.double()[:, None])
    return _to_16bit(_fp32(zi.double() * weight.double()), t), new_residual


def rmsnorm_fp64(x, weight, residual=None, norm_eps=1e-6):
    """The normalized activation in fp64 (before rounding to T)."""
    z = x.double() + (residual.double() if residual is not None else 0)
    return z / torch.sqrt(z.square().mean(-1, keepdim=True) + norm_eps) * weight.double()


def ulps_apart(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """|ordinal(a) - ordinal(b)| of two 16-bit float tensors: how many representable values apart."""
    def ordinal(t):
        u = t.view(torch.int16).to(torch.int32)
        return torch.where(u < 0, -(u & 0x7FFF), u)
    return (ordinal(a) - ordinal(b)).abs()


# ------------------------------------------------------------------------------------------------
# Per-token and per-tensor quantization (docs/spec.md §8.1)

def _saturating_round_int32(c: torch.Tensor) -> torch.Tensor:
    """round half to even, saturated to int32, NaN -> 0 (as int64)."""
    r = torch.round(c.double()).nan_to_num(0.0).clamp(-(2.0 ** 31), 2.0 ** 31 - 1)
    return r.to(torch.int64)


def _codes(v: torch.Tensor, y: torch.Tensor, out_dtype, zp=None) -> torch.Tensor:
    c = v * y  # fp32, IEEE
    if out_dtype == FP8:
        q = torch.clamp(c, -448.0, 448.0).to(FP8).view(torch.uint8)
        return torch.where(torch.isnan(c), torch.tensor(FP8_NAN_CODE, dtype=torch.uint8), q).view(FP8)
    r = _saturating_round_int32(c) + (0 if zp is None else zp.to(torch.int64))
    return r.clamp(-128, 127).to(torch.int8)


def reference_scaled_quant(x, out_dtype, granularity, eps=1e-10, scale_ub=None, static_scale=None,
                           fuse_silu_and_mul=False):
    """docs/spec.md §8.1 in torch on the CPU. granularity: "token", "token_asym", "tensor_static",
    "tensor_dynamic". Returns (codes [..., H], scales fp32 ([..., 1] per token, [1] per tensor), zero points
    int32 [..., 1] or None)."""
    v = activation(x, fuse_silu_and_mul)
    rows = v.reshape(-1, v.shape[-1]) if v.numel() else v.reshape(0, v.shape[-1])
    hi_code = RANGES[out_dtype][1]
    eps32 = torch.tensor(eps, dtype=torch.float32)
    zp = None
    if granularity in ("token", "token_asym"):
        finite = torch.isfinite(rows).all(-1, keepdim=True)
        safe = torch.where(finite, rows, torch.zeros_like(rows))
        if granularity == "token":
            amax = safe.abs().amax(-1, keepdim=True) if rows.shape[-1] else torch.zeros(rows.shape[0], 1)
            if scale_ub is not None:
                amax = torch.minimum(amax, scale_ub.float().reshape(1, 1))
            s = torch.maximum(amax, eps32) / hi_code
            y = 1.0 / s
        else:
            lo, hi = safe.amin(-1, keepdim=True), safe.amax(-1, keepdim=True)
            s = torch.maximum(hi - lo, eps32) / 255.0
            y = 1.0 / s
            zp = _saturating_round_int32(-128.0 - lo * y)
        q = _codes(rows, y, out_dtype, zp)
        q = torch.where(finite, q.view(torch.uint8), torch.tensor(FP8_NAN_CODE if out_dtype == FP8 else 0,
                                                                   dtype=torch.uint8)).view(out_dtype)
        s = torch.where(finite, s, torch.tensor(float("nan")))
        if zp is not None:
            zp = torch.where(finite, zp, torch.zeros_like(zp)).to(torch.int32).reshape(*v.shape[:-1], 1)
        return q.reshape(v.shape), s.reshape(*v.shape[:-1], 1), zp
    if granularity == "tensor_static":
        s = static_scale.float().reshape(1)
        usable = bool(s.item() > 0 and torch.isfinite(s).item())
        q = _codes(rows, 1.0 / s, out_dtype)
        finite = torch.tensor(usable)
    else:
        finite = torch.isfinite(rows).all()
        amax = rows.abs().amax() if rows.numel() else torch.tensor(0.0)
        s = (torch.maximum(torch.where(finite, amax, torch.tensor(0.0)), eps32) / hi_code).reshape(1)
        q = _codes(rows, 1.0 / s, out_dtype)
        s = torch.where(finite, s, torch.tensor(float("nan")))
    nan = torch.tensor(FP8_NAN_CODE if out_dtype == FP8 else 0, dtype=torch.uint8)
    q = torch.where(finite, q.view(torch.uint8), nan).view(out_dtype)
    return q.reshape(v.shape), s, None
