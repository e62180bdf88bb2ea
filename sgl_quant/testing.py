"""Deterministic test data, bit-identical on every device and torch version.

This is the project's implementation of the golden-vector input generator (tests/golden/README.md):
values are an integer hash of the element index (exact int64 arithmetic), scaled by a power of two
chosen per 128-element block (magnitudes about 2^-12 .. 2^4; about one block in 23 is all zeros),
rounded once to the target dtype. Used by the tests, the benchmark and ``python -m sgl_quant selftest``.
"""
import contextlib
import ctypes
import hashlib
import math

import torch

_MASK32 = 0xFFFFFFFF


def _hash32(x: torch.Tensor) -> torch.Tensor:
    """Two rounds of xor-shift-multiply on 32-bit values held in int64 (no overflow: < 2^59)."""
    for _ in range(2):
        x = ((x ^ (x >> 16)) * 0x45D9F3B) & _MASK32
    return x ^ (x >> 16)


def _exp2_exact(e: torch.Tensor) -> torch.Tensor:
    """2**e as float32 from the exponent bits (exact for -126 <= e <= 127)."""
    return ((e + 127) << 23).to(torch.int32).view(torch.float32)


_MAKE_INPUT_CHUNK = 1 << 24  # elements per pass: the int64 temporaries stay ~0.5 GB for any shape


def make_input(shape, dtype=torch.bfloat16, seed=0, device="cpu") -> torch.Tensor:
    """A ``shape`` tensor of ``dtype`` whose values depend only on (index, seed)."""
    n = math.prod(shape)
    out = torch.empty(n, dtype=dtype, device=device)
    for start in range(0, n, _MAKE_INPUT_CHUNK):
        i = torch.arange(start, min(n, start + _MAKE_INPUT_CHUNK), dtype=torch.int64, device=device)
        mantissa = (_hash32((i + seed * 0x9E3779B1) & _MASK32) & 0xFFFF) - 32768
        block = _hash32(((i // 128) * 7919 + seed * 104729 + 12345) & _MASK32)
        value = mantissa.to(torch.float32) * _exp2_exact((block % 17) - 27)
        out[start:start + i.numel()] = torch.where(block % 23 == 0, torch.zeros_like(value), value).to(dtype)
    return out.reshape(shape)


def make_masked_m(num_experts, tokens_pad, seed=0, device="cpu") -> torch.Tensor:
    """int32 ``[num_experts]`` valid-row counts in ``[0, tokens_pad]``; expert 0 is empty and the last
    one (when there are several) is full."""
    j = torch.arange(num_experts, dtype=torch.int64, device=device)
    m = _hash32((j * 31 + seed * 977 + 7) & _MASK32) % (tokens_pad + 1)
    m[0] = 0
    if num_experts > 1:
        m[-1] = tokens_pad
    return m.to(torch.int32)


# ------------------------------------------------------------------------------------------------
# Golden cases (tests/golden/golden.json, sgl_quant/selftest_golden.json)

GOLDEN_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}
GOLDEN_LAYOUT_FLAGS = {  # "scale" -> (column_major_scales, scale_tma_aligned, scale_ue8m0)
    "row_f32": (False, False, False),
    "col_f32_tma": (True, True, False),
    "col_ue8m0": (True, True, True),
}


LAUNCH_FIELDS = ("block_threads", "waves", "rmsnorm_cluster", "rmsnorm_stages")


@contextlib.contextmanager
def launch_config(*shape, **changes):
    """Runs the block under a launch shape of the CUDA kernels set through the private test hook
    sgl_quant._C._set_launch_config (LAUNCH_FIELDS, 0 = automatic): its first len(shape) fields and the
    named ones replaced, then restores the shape in use before. For tests that check that the bytes do not
    depend on the launch shape; the hook is process-global, so it is no API. Builds without CUDA kernels
    have no hook: there the block runs as it is."""
    from sgl_quant import _C
    if not hasattr(_C, "_set_launch_config"):
        yield
        return
    before = _C._launch_config()
    values = dict(zip(LAUNCH_FIELDS, before))
    values.update(zip(LAUNCH_FIELDS, shape))
    values.update(changes)
    _C._set_launch_config(*values.values())
    try:
        yield
    finally:
        _C._set_launch_config(*before)


def c_order_copy(t: torch.Tensor) -> torch.Tensor:
    """A CPU copy in C order with plain strides (also for size-1 dimensions)."""
    out = torch.empty(t.shape, dtype=t.dtype)
    out.copy_(t)
    return out


def sha256_of(t: torch.Tensor) -> str:
    """SHA-256 of t's bytes in C order. Reads the memory directly: numpy is not a dependency."""
    b = c_order_copy(t).view(torch.uint8)
    return hashlib.sha256(ctypes.string_at(b.data_ptr(), b.numel())).hexdigest()


def run_golden_case(case, device):
    """sgl_quant's (codes, scales) for a golden case, as the bytes its hashes cover: C-order codes and
    the scales' logical view; masked cases keep the valid rows of each expert, in expert order."""
    import sgl_quant

    dtype = GOLDEN_DTYPES[case["dtype"]]
    if case["op"] == "dsv4":
        x = make_input((case["tokens"], case["heads"], case["hidden"]), dtype, seed=case["seed"]).to(device)
        q, s = sgl_quant.per_token_group_quant_fp8_dsv4(x)
        return c_order_copy(q.cpu()), c_order_copy(s.cpu())
    k = case["hidden"] * (2 if case["silu"] else 1)
    masked = case.get("masked")
    shape = (masked["experts"], masked["tokens_pad"], k) if masked else (case["tokens"], k)
    x = make_input(shape, dtype, seed=case["seed"]).to(device)  # generated on the CPU, as in the H200 runs
    masked_m = torch.tensor(masked["masked_m"], dtype=torch.int32, device=device) if masked else None
    col, tma, ue8m0 = GOLDEN_LAYOUT_FLAGS[case["scale"]]
    fn = sgl_quant.per_token_group_quant_fp8 if case["out"] == "fp8" else sgl_quant.per_token_group_quant_int8
    q, s = fn(x, case["group_size"], column_major_scales=col, scale_tma_aligned=tma, scale_ue8m0=ue8m0,
              fuse_silu_and_mul=case["silu"], masked_m=masked_m)
    q, s = c_order_copy(q.cpu()), c_order_copy(s.cpu())
    if masked:
        counts = masked["masked_m"]
        q = torch.cat([q[e, :counts[e]] for e in range(len(counts))])
        s = torch.cat([s[e, :counts[e]] for e in range(len(counts))])
    return q, s


def golden_cpu_exact(case) -> bool:
    """docs/spec.md §1.1: whether the CPU implementation is bit-exact with the CUDA reference kernel here
    (UE8M0 codes, plain or fused SiLU in bf16; DSV4). Scales are exact everywhere."""
    if case["op"] == "dsv4":
        return True
    if case["scale"] != "col_ue8m0":
        return False  # float-scale codes: the kernel's fast-math division
    return not (case["silu"] and case["dtype"] == "fp16")  # fused SiLU in fp16: the kernel's fast exp
