"""Shared by the CPU and GPU tests: scale layouts, poisoned outputs, comparisons (and sgl_quant.testing's
launch_config, the launch hook as a context manager)."""
import pytest
import torch

import sgl_quant
from sgl_quant.testing import c_order_copy, launch_config  # noqa: F401 (launch_config: re-exported for the tests)
from reference import FP8, code_steps, packed_bytes, packed_exponent_bytes, reference_quant

POISON = 0x55
DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)]  # for tests that run on both
# name -> (column-major, TMA-aligned, UE8M0, packed int32)
LAYOUTS = {
    "row": (False, False, False, False),
    "col": (True, False, False, False),
    "col_tma": (True, True, False, False),
    "row_ue8m0": (False, False, True, False),
    "col_ue8m0": (True, True, True, True),
    "col_f32_ue8m0": (True, True, True, False),  # extension: fp32 powers of two, column-major
}



def poisoned(shape, dtype, device="cpu"):
    """A fresh contiguous tensor whose every byte is POISON."""
    t = torch.empty(shape, dtype=dtype, device=device)
    t.view(torch.uint8).fill_(POISON)
    return t


def ceil4(n):
    return (n + 3) // 4 * 4


def alloc_scales(layout, q_shape, group_size, device, poison=POISON):
    """(x_s, its whole storage buffer filled with poison bytes, scale_ue8m0) for a layout of docs/spec.md §2."""
    col, tma, ue8m0, packed = LAYOUTS[layout]
    *batch, m, h = q_shape
    g = h // group_size
    if packed:
        buf = torch.empty((*batch, ceil4(g) // 4, ceil4(m)), dtype=torch.int32, device=device)
    elif col:
        buf = torch.empty((*batch, g, ceil4(m) if tma else m), dtype=torch.float32, device=device)
    else:
        buf = torch.empty((*batch, m, g), dtype=torch.float32, device=device)
    buf.view(torch.uint8).fill_(poison)
    return scale_view(layout, buf, m), buf, ue8m0


def scale_view(layout, buf, m):
    col = LAYOUTS[layout][0]
    return buf.transpose(-1, -2)[..., :m, :] if col else buf


def valid_rows(batch_shape, m, masked_m):
    """bool [..., M]: rows the op must write."""
    if masked_m is None:
        return torch.ones((*batch_shape, m), dtype=torch.bool)
    counts = masked_m.cpu().to(torch.int64).clamp(0, m)
    return torch.arange(m)[None, :] < counts[:, None]


def run_v2(x, group_size, out_dtype, layout, silu=False, masked_m=None, eps=1e-10, enable_pdl=None):
    """Runs per_token_group_quant_8bit_v2 on x's device with poisoned outputs and checks that exactly
    the valid rows were written (codes, scales, pad bytes) and nothing else (masked rows, TMA padding).
    Returns (codes, scales, valid) on the CPU; scales are logical fp32 values, or UE8M0 bytes [.., M, G]
    for the packed layout."""
    h = x.shape[-1] // 2 if silu else x.shape[-1]
    q_shape = (*x.shape[:-1], h)
    m, g = q_shape[-2], h // group_size
    q = torch.full(q_shape, POISON, dtype=torch.uint8, device=x.device).view(out_dtype)
    x_s, buf, ue8m0 = alloc_scales(layout, q_shape, group_size, x.device)
    sgl_quant.per_token_group_quant_8bit_v2(x, q, x_s, group_size, eps, scale_ue8m0=ue8m0, fuse_silu_and_mul=silu,
                                            masked_m=masked_m, enable_pdl=enable_pdl)
    valid = valid_rows(q_shape[:-2], m, masked_m)
    q_cpu = q.cpu()
    assert bool((q_cpu.view(torch.uint8)[~valid] == POISON).all()), "codes written outside the valid rows"

    return q_cpu, read_scales(layout, x_s, buf, m, g, valid), valid


def read_scales(layout, x_s, buf, m, g, valid, poison=POISON):
    """Checks that nothing but the valid rows of the logical scale view changed in the whole poisoned
    buffer and that the packed words' pad bytes are 0; returns the scales on the CPU: logical fp32
    values, or UE8M0 bytes [..., M, G] for the packed layout."""
    buf_cpu = buf.cpu()
    expected = torch.empty_like(buf_cpu)
    expected.view(torch.uint8).fill_(poison)
    scale_view(layout, expected, m)[valid] = scale_view(layout, buf_cpu, m)[valid]
    assert torch.equal(expected.view(torch.uint8), buf_cpu.view(torch.uint8)), "scales written outside valid rows"
    s_cpu = x_s.cpu()
    if LAYOUTS[layout][3]:
        pad = packed_bytes(s_cpu)[..., g:]
        assert bool((pad[valid] == 0).all()), "pad bytes of the packed UE8M0 words must be 0"
        return packed_exponent_bytes(s_cpu, g)
    return s_cpu


def expected_v2(x, group_size, out_dtype, layout, silu=False, eps=1e-10):
    """The reference's codes and scales in the form run_v2 returns them."""
    ue8m0, packed = LAYOUTS[layout][2], LAYOUTS[layout][3]
    q, s, e = reference_quant(x.cpu(), group_size, out_dtype, eps=eps, scale_ue8m0=ue8m0, fuse_silu_and_mul=silu)
    return q, ((e + 127) & 0xFF).to(torch.uint8) if packed else s


def compare(actual, expected, valid, *, codes_exact, scales_exact, max_code_fraction=1e-3, extra_allowed=0, what=""):
    """Codes: identical, or at most one code step apart on at most max_code_fraction of them
    (plus extra_allowed codes).
    Scales: identical bits, or (inexact paths) equal up to one rounding step of the activation.
    Returns (number of codes differing, number of codes compared, largest step)."""
    aq, as_ = actual[:2]
    eq, es = expected
    steps = code_steps(aq[valid], eq[valid])
    n, diff = steps.numel(), int((steps > 0).sum())
    worst = int(steps.max()) if n else 0
    if codes_exact:
        assert diff == 0, f"{what}: {diff} of {n} codes differ (largest {worst} steps), expected bit-exact"
    else:
        assert worst <= 1, f"{what}: a code is {worst} steps off (bound: 1)"
        bound = max(1, max_code_fraction * n + extra_allowed)
        assert diff <= bound, f"{what}: {diff} of {n} codes one step off (bound {bound:.0f})"
    a, e = as_[valid], es[valid]
    if as_.dtype == torch.uint8:
        sd = (a.to(torch.int32) - e.to(torch.int32)).abs()
        bad = int((sd > 0).sum())
        if scales_exact:
            assert bad == 0, f"{what}: {bad} UE8M0 scale bytes differ"
        else:
            assert int(sd.max()) <= 1 if sd.numel() else True, f"{what}: UE8M0 exponent off by more than one"
            assert bad <= max(1, 0.02 * sd.numel()), f"{what}: {bad} UE8M0 scales differ"
    else:
        same = (a.view(torch.int32) == e.view(torch.int32))
        if scales_exact:
            assert bool(same.all()), f"{what}: {int((~same).sum())} of {same.numel()} scales differ"
        else:
            both_nan = a.isnan() & e.isnan()
            close = same | both_nan | ((a - e).abs() <= 2.0**-7 * e.abs())
            assert bool(close.all()), f"{what}: scales differ by more than one activation rounding step"
            assert int((~same).sum()) <= max(1, 0.02 * same.numel()), f"{what}: too many scales differ"
    return diff, n, worst


def activation_inputs(shape, dtype, seed, device="cpu"):
    """Fresh random activations: normal values with per-row magnitudes spread over many octaves."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(shape, generator=g) * torch.exp2(torch.randint(-10, 6, (*shape[:-1], 1), generator=g).float())
    return x.to(dtype).to(device)


def silu_subnormal_case():
    """A huge gate times a subnormal bf16 `up` (row 0) and times a normal one (row 1), with the
    smallest eps: the reference kernel's fast-math fp32 multiply flushes the subnormal, so row 0 is
    all zeros (scale eps / 448); a product of 2^-50 instead would become the amax and code 448."""
    x = torch.zeros(2, 2 * 128, dtype=torch.bfloat16)
    x[:, 0] = 2.0**80
    x[0, 128] = 2.0**-130  # subnormal
    x[1, 128] = 2.0**-120  # normal: the product 2^-40 is kept
    eps = 2.0**-100
    inv_max = torch.tensor(1 / 448, dtype=torch.float32)
    want_s = torch.stack([torch.tensor(eps, dtype=torch.float32) * inv_max, torch.tensor(2.0**-40) * inv_max])
    want_q = torch.zeros(2, 128, dtype=torch.uint8)
    want_q[1, 0] = 0x7E  # 448
    return x, eps, want_q, want_s


def check_silu_subnormal(device, masked=False):
    """silu_subnormal_case on `device`, dense [2, 256] or masked [2 experts, 1 row, 256]."""
    x, eps, want_q, want_s = silu_subnormal_case()
    x, masked_m = x.to(device), None
    if masked:
        x, masked_m = x.reshape(2, 1, -1), torch.ones(2, dtype=torch.int32, device=device)
    q, s, _ = run_v2(x, 128, FP8, "row", silu=True, eps=eps, masked_m=masked_m)
    assert torch.equal(q.view(torch.uint8).reshape(2, 128), want_q)
    assert torch.equal(s.reshape(2, -1)[:, 0], want_s)


def run_rmsnorm(x, weight, group_size, out_dtype, layout, residual=None, with_normed=True, norm_eps=1e-6, eps=1e-10,
                enable_pdl=None):
    """Runs rmsnorm_per_token_group_quant_8bit twice on x's device, with outputs poisoned by different
    bytes: both runs must give the same bytes (so every element was written) and leave the scale buffer
    outside the logical view alone. Returns (codes, scales as run_v2 returns them, normed or None,
    updated residual or None) on the CPU; `residual` itself is not modified."""
    m, h = x.shape
    g = h // group_size
    runs = []
    for poison in (POISON, 0xAA):
        q = torch.full((m, h), poison, dtype=torch.uint8, device=x.device).view(out_dtype)
        x_s, buf, ue8m0 = alloc_scales(layout, (m, h), group_size, x.device, poison)
        normed = None
        if with_normed:
            normed = torch.empty((m, h), dtype=x.dtype, device=x.device)
            normed.view(torch.uint8).fill_(poison)
        res = residual.clone() if residual is not None else None
        sgl_quant.rmsnorm_per_token_group_quant_8bit(x, weight, q, x_s, group_size, norm_eps, residual=res,
                                                     output_normed=normed, eps=eps, scale_ue8m0=ue8m0,
                                                     enable_pdl=enable_pdl)
        s = c_order_copy(read_scales(layout, x_s, buf, m, g, torch.ones(m, dtype=torch.bool), poison))
        runs.append((q.cpu(), s, None if normed is None else normed.cpu(), None if res is None else res.cpu()))
    for a, b in zip(*runs):
        if a is not None:
            assert torch.equal(bits(a), bits(b)), "an output element was not written"
    return runs[0]


def assert_same_bytes(got, want, what="", names=None):
    """Two runs' outputs (None where an output is absent; any devices) are the same shapes and bytes; a failure
    names the output (`names`, in order) and counts the elements that differ."""
    for i, (a, b) in enumerate(zip(got, want)):
        name = f"{what}: {names[i] if names else f'output {i}'}"
        assert (a is None) == (b is None), name
        if a is not None:
            assert a.shape == b.shape, f"{name}: shape {tuple(a.shape)} != {tuple(b.shape)}"
            same = bits(a.cpu().contiguous()) == bits(b.cpu().contiguous())
            assert bool(same.all()), f"{name}: {int((~same).sum())} of {same.numel()} differ"


OPCHECK_UTILS = ("test_schema", "test_autograd_registration", "test_faketensor", "test_aot_dispatch_dynamic")


def opcheck(op, args):
    """torch.library.opcheck of the op on args, every test util but test_schema where an argument is float8:
    test_schema compares mutated tensors with arithmetic float8 tensors do not support ("mul_cpu_reduced_float
    not implemented for Float8_e4m3fn"); the schema is the same for every dtype, and the int8 calls check it."""
    fp8 = any(isinstance(a, torch.Tensor) and a.dtype in (torch.float8_e4m3fn, torch.float8_e5m2) for a in args)
    torch.library.opcheck(op, args, test_utils=OPCHECK_UTILS[1:] if fp8 else OPCHECK_UTILS)


def bits(t):
    """t's elements as integers of the same width: a view (any strides) for exact, float8- and NaN-safe
    comparisons with torch.equal."""
    return t.view({1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[t.element_size()])
