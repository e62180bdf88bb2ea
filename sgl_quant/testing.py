"""Deterministic test data, bit-identical on every device and torch version.

This is the project's implementation of the golden-vector input generator (tests/golden/README.md):
values are an integer hash of the element index (exact int64 arithmetic), scaled by a power of two
chosen per 128-element block (magnitudes about 2^-12 .. 2^4; about one block in 23 is all zeros),
rounded once to the target dtype. Used by the tests, the benchmark and ``python -m sgl_quant selftest``.
"""
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


def make_input(shape, dtype=torch.bfloat16, seed=0, device="cpu") -> torch.Tensor:
    """A ``shape`` tensor of ``dtype`` whose values depend only on (index, seed)."""
    n = math.prod(shape)
    i = torch.arange(n, dtype=torch.int64, device=device)
    mantissa = (_hash32((i + seed * 0x9E3779B1) & _MASK32) & 0xFFFF) - 32768
    block = _hash32(((i // 128) * 7919 + seed * 104729 + 12345) & _MASK32)
    value = mantissa.to(torch.float32) * _exp2_exact((block % 17) - 27)
    value = torch.where(block % 23 == 0, torch.zeros_like(value), value)
    return value.to(dtype).reshape(shape)


def make_masked_m(num_experts, tokens_pad, seed=0, device="cpu") -> torch.Tensor:
    """int32 ``[num_experts]`` valid-row counts in ``[0, tokens_pad]``; expert 0 is empty and the last
    one (when there are several) is full."""
    j = torch.arange(num_experts, dtype=torch.int64, device=device)
    m = _hash32((j * 31 + seed * 977 + 7) & _MASK32) % (tokens_pad + 1)
    m[0] = 0
    if num_experts > 1:
        m[-1] = tokens_pad
    return m.to(torch.int32)
