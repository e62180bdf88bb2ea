"""Public API: allocating wrappers (SGLang names and defaults) and the in-place drop-in op.

Shapes: ``x`` is ``[M, K]`` or ``[E, M, K]`` (a leading expert/batch dimension), bf16 or fp16.
``K = H``, or ``K = 2H`` with ``fuse_silu_and_mul`` (gate = ``x[..., :H]``, up = ``x[..., H:]``).
Codes are ``[..., M, H]``; one scale per group of ``group_size`` consecutive elements of a row,
``G = H // group_size`` per row, in the layout chosen by the flags (see ``create_scale_tensor``).
Argument validation lives in the C++ ops (one place for CPU and CUDA); errors name the argument.
"""
import operator
from typing import Optional, Sequence, Tuple

import torch

FP8_DTYPE = torch.float8_e4m3fn
FP8_MIN, FP8_MAX = -448.0, 448.0
INT8_MIN, INT8_MAX = -128.0, 127.0

_RANGES = {FP8_DTYPE: (FP8_MIN, FP8_MAX), torch.int8: (INT8_MIN, INT8_MAX)}

# Host time (benchmark/bench_host_overhead.py): allocations pass the shape as size=, which torch's argument
# parser takes ~0.4 µs faster than a positional tuple, and the allocating wrappers call the op directly.


def _code_range(output_q: torch.Tensor, min_8bit: Optional[float], max_8bit: Optional[float]):
    """min_8bit/max_8bit, each defaulting to the range of output_q's dtype (a wrong dtype fails in the op)."""
    lo, hi = _RANGES.get(output_q.dtype, (float("nan"), float("nan")))
    return (lo if min_8bit is None else min_8bit), (hi if max_8bit is None else max_8bit)


def _pdl(enable_pdl: Optional[bool]) -> bool:
    """``None``: on (the op drops PDL on devices without it)."""
    return True if enable_pdl is None else enable_pdl


def _ceil_align(x: int, a: int) -> int:
    return (x + a - 1) // a * a


def _check_x(x, ranks: Tuple[int, ...], shapes: str) -> None:
    """The allocating wrappers read x's shape before the op sees it, so they name x themselves."""
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"x must be a torch.Tensor, got {type(x).__name__}")
    if x.dim() not in ranks:
        raise ValueError(f"x must be {shapes}, got shape {tuple(x.shape)}")


def create_scale_tensor(
    q_shape: Sequence[int],
    group_size: int,
    device: torch.types.Device,
    column_major_scales: bool = False,
    scale_tma_aligned: bool = False,
    scale_ue8m0: bool = False,
) -> torch.Tensor:
    """Allocate the scale tensor for codes of shape ``q_shape = [..., M, H]`` (SGLang's layouts).

    ============================  ========  ===========================  ==================================
    flags                         dtype     logical shape / strides      storage
    ============================  ========  ===========================  ==================================
    (default)                     float32   ``[..., M, G]`` contiguous   row-major
    column_major_scales           float32   ``[..., M, G]``, ``(1, M)``  ``[..., G, M]`` transposed
    + scale_tma_aligned           float32   ``[..., M, G]``, ``(1, ceil4(M))``  ``[..., G, ceil4(M)]`` transposed
    scale_ue8m0 (row-major)       float32   ``[..., M, G]`` contiguous   powers of two
    scale_ue8m0 + column_major    int32     ``[..., M, ceil(G/4)]``, ``(1, ceil4(M))``  packed UE8M0 bytes,
      + scale_tma_aligned                                                 ``[..., ceil4(G)/4, ceil4(M)]`` transposed
    ============================  ========  ===========================  ==================================

    The packed UE8M0 layout needs ``scale_tma_aligned=True`` (as in SGLang).
    """
    if len(q_shape) < 2:
        raise ValueError(f"q_shape must be [..., M, H] (at least 2 dimensions), got {tuple(q_shape)}")
    try:
        group_size = operator.index(group_size)
    except TypeError:
        raise TypeError(f"group_size must be an int, got {type(group_size).__name__}") from None
    # Symbolic sizes (torch.export, tracing with dynamic shapes) stay symbolic: int() would specialize
    # the traced program to the size it was traced with. A torch.Size (the wrappers' x.shape) holds ints
    # and SymInts already: taken as it is (host time, ~0.3 µs).
    if isinstance(q_shape, torch.Size):
        *batch, m, h = q_shape
    else:
        *batch, m, h = (d if isinstance(d, torch.SymInt) else int(d) for d in q_shape)
    if group_size <= 0:
        raise ValueError(f"group_size must be positive, got {group_size}")
    if h % group_size != 0:
        raise ValueError(f"q_shape[-1]={h} must be divisible by group_size={group_size}")
    g = h // group_size
    if not column_major_scales:
        return torch.empty(size=(*batch, m, g), dtype=torch.float32, device=device)
    if scale_ue8m0:  # packed: 4 exponent bytes per int32 word
        if not scale_tma_aligned:
            raise ValueError("column-major UE8M0 scales are packed and TMA-aligned: pass scale_tma_aligned=True")
        cols, rows, dtype = _ceil_align(g, 4) // 4, _ceil_align(m, 4), torch.int32
    else:
        cols, rows, dtype = g, _ceil_align(m, 4) if scale_tma_aligned else m, torch.float32
    buf = torch.empty(size=(*batch, cols, rows), dtype=dtype, device=device)
    return _first_rows_transposed(buf, batch, m, cols)


def _first_rows_transposed(buf: torch.Tensor, batch, m, cols) -> torch.Tensor:
    """The ``[*batch, m, cols]`` view of a transposed ``[*batch, cols, rows]`` buffer with ``rows >= m``."""
    # rows is m or ceil4(m). Slicing [..., :m, :] would make a tracer with a symbolic m prove m <= ceil4(m),
    # which it cannot, so it would specialize m to the traced size; as_strided states the view directly.
    # The caller passes the sizes it knows: reading buf.shape back costs ~0.4 µs of host time per call.
    strides = buf.stride()
    return buf.as_strided((*batch, m, cols), (*strides[:-2], 1, strides[-2]))


def per_token_group_quant_8bit_v2(
    input: torch.Tensor,
    output_q: torch.Tensor,
    output_s: torch.Tensor,
    group_size: int,
    eps: float = 1e-10,
    min_8bit: Optional[float] = None,
    max_8bit: Optional[float] = None,
    scale_ue8m0: bool = False,
    fuse_silu_and_mul: bool = False,
    masked_m: Optional[torch.Tensor] = None,
    enable_pdl: Optional[bool] = None,
) -> None:
    """Quantize ``input`` into preallocated ``output_q`` / ``output_s`` (drop-in for sgl-kernel's v2).

    ``input``: ``[M, K]`` or ``[E, M_pad, K]`` bf16/fp16, last dimension contiguous, any row stride and address.
    ``output_q``: ``[..., H]`` float8_e4m3fn or int8, last dimension contiguous, rows one stride ``>= H`` apart.
    Only the result is written (codes and scales of the valid rows; the pad bytes of packed scale words).
    ``output_s``: float32 ``[..., M, G]`` (row- or column-major strides) or int32 packed UE8M0
    ``[..., M, ceil(G/4)]`` column-major (needs ``scale_ue8m0=True``).
    ``masked_m``: int32 ``[E]`` valid rows per expert (read on the device, clamped to ``[0, M_pad]``);
    rows beyond the count are not written.
    ``min_8bit``/``max_8bit`` default to the range of ``output_q``'s dtype.
    ``enable_pdl``: programmatic dependent launch; ``None`` means on where the device supports it (SM90+).
    """
    min_8bit, max_8bit = _code_range(output_q, min_8bit, max_8bit)
    torch.ops.sgl_quant.per_token_group_quant_8bit_v2(
        input,
        output_q,
        output_s,
        group_size,
        eps,
        min_8bit,
        max_8bit,
        scale_ue8m0,
        fuse_silu_and_mul,
        masked_m,
        _pdl(enable_pdl),
    )


def per_token_group_quant_8bit_packed(
    input: torch.Tensor,
    output_q: torch.Tensor,
    output_s: torch.Tensor,
    group_size: int,
    eps: float = 1e-10,
    min_8bit: Optional[float] = None,
    max_8bit: Optional[float] = None,
    enable_pdl: Optional[bool] = None,
) -> None:
    """v2 with packed UE8M0 scales for DeepGEMM on SM100 (group size 128), with vLLM's contract for the whole
    scale buffer.

    ``input`` ``[M, K]``, ``output_q`` ``[M, H]`` as in ``per_token_group_quant_8bit_v2``; ``output_s`` int32
    ``[M, ceil(G/4)]`` with strides ``(1, ceil4(M))`` (``create_scale_tensor(..., True, True, True)``). Besides the
    result, the words of the padding rows ``M .. ceil4(M)-1`` are written with 0 (in every column but the last,
    whose padding lies past the buffer), in the same launch, as vLLM's ``per_token_group_fp8_quant_packed`` does.
    """
    min_8bit, max_8bit = _code_range(output_q, min_8bit, max_8bit)
    torch.ops.sgl_quant.per_token_group_quant_8bit_packed(input, output_q, output_s, group_size, eps, min_8bit,
                                                          max_8bit, _pdl(enable_pdl))


def _quantize(x, group_size, out_dtype, eps, column_major_scales, scale_tma_aligned, scale_ue8m0,
              fuse_silu_and_mul, masked_m, enable_pdl):
    _check_x(x, (2, 3), "2-D [M, K] or 3-D [E, M, K]")
    q_shape = (*x.shape[:-1], x.shape[-1] // 2) if fuse_silu_and_mul else x.shape
    x_q = torch.empty(size=q_shape, dtype=out_dtype, device=x.device)
    x_s = create_scale_tensor(q_shape, group_size, x.device, column_major_scales, scale_tma_aligned, scale_ue8m0)
    min_8bit, max_8bit = _RANGES[out_dtype]
    torch.ops.sgl_quant.per_token_group_quant_8bit_v2(x, x_q, x_s, group_size, eps, min_8bit, max_8bit, scale_ue8m0,
                                                      fuse_silu_and_mul, masked_m, _pdl(enable_pdl))
    return x_q, x_s


def per_token_group_quant_fp8(
    x: torch.Tensor,
    group_size: int,
    eps: float = 1e-10,
    column_major_scales: bool = False,
    scale_tma_aligned: bool = False,
    scale_ue8m0: bool = False,
    fuse_silu_and_mul: bool = False,
    masked_m: Optional[torch.Tensor] = None,
    enable_pdl: Optional[bool] = None,
) -> Tuple[torch.Tensor, torch.Tensor]:
    """Per-token-group FP8 (e4m3fn) quantization; returns ``(x_q, x_s)`` with ``x ≈ x_q * x_s``.

    Same names and defaults as SGLang's ``sglang_per_token_group_quant_fp8``. ``x``: ``[M, K]`` or
    ``[E, M, K]`` bf16/fp16 (``K = 2H`` with ``fuse_silu_and_mul``). ``x_q``: ``[..., M, H]``
    float8_e4m3fn. ``x_s``: see ``create_scale_tensor`` for the layout the flags select.
    """
    return _quantize(x, group_size, FP8_DTYPE, eps, column_major_scales, scale_tma_aligned, scale_ue8m0,
                     fuse_silu_and_mul, masked_m, enable_pdl)


def per_token_group_quant_int8(
    x: torch.Tensor,
    group_size: int,
    eps: float = 1e-10,
    column_major_scales: bool = False,
    scale_tma_aligned: bool = False,
    fuse_silu_and_mul: bool = False,
    masked_m: Optional[torch.Tensor] = None,
    scale_ue8m0: bool = False,
    enable_pdl: Optional[bool] = None,
) -> Tuple[torch.Tensor, torch.Tensor]:
    """Per-token-group INT8 quantization (codes truncate toward zero, as the reference kernel does).

    Same arguments as ``per_token_group_quant_fp8``; ``x_q`` is int8, MAX = 127, MIN = -128.
    """
    return _quantize(x, group_size, torch.int8, eps, column_major_scales, scale_tma_aligned, scale_ue8m0,
                     fuse_silu_and_mul, masked_m, enable_pdl)


def per_token_group_quant_fp8_dsv4(
    x: torch.Tensor, enable_pdl: Optional[bool] = None
) -> Tuple[torch.Tensor, torch.Tensor]:
    """DeepSeek-V4 ``wo_a`` quantization: ``x`` ``[T, G, D]`` bf16/fp16 (last dim contiguous, other
    strides arbitrary), group 128, UE8M0-rounded scales.

    Returns ``x_q`` contiguous ``[T, G, D]`` float8_e4m3fn and ``x_s`` float32 ``[T, G, D/128]`` with
    strides ``(D/128, T*D/128, 1)`` (a transposed ``[G, T, D/128]`` buffer), the layout
    ``deep_gemm.fp8_einsum("bhr,hdr->bhd", ...)`` consumes with recipe ``(1, 1, 128)``.
    """
    _check_x(x, (3,), "3-D [T, G, D]")
    t, g, d = x.shape
    x_q = torch.empty(size=(t, g, d), dtype=FP8_DTYPE, device=x.device)
    # the einsum strides in one allocation rather than a [G, T, D/128] buffer and its transpose (host time,
    # ~1 µs); an empty x_s (T = 0) may get other strides than the transpose's, which no consumer reads
    k = d // 128
    x_s = torch.empty_strided(size=(t, g, k), stride=(k, t * k, 1), dtype=torch.float32, device=x.device)
    torch.ops.sgl_quant.per_token_group_quant_fp8_dsv4(x, x_q, x_s, _pdl(enable_pdl))
    return x_q, x_s


# ------------------------------------------------------------------------------------------------
# Fused (add +) RMSNorm -> per-token-group quantization (docs/spec.md §6)

def rmsnorm_per_token_group_quant_8bit(
    input: torch.Tensor,
    weight: torch.Tensor,
    output_q: torch.Tensor,
    output_s: torch.Tensor,
    group_size: int,
    norm_eps: float = 1e-6,
    residual: Optional[torch.Tensor] = None,
    output_normed: Optional[torch.Tensor] = None,
    eps: float = 1e-10,
    min_8bit: Optional[float] = None,
    max_8bit: Optional[float] = None,
    scale_ue8m0: bool = False,
    enable_pdl: Optional[bool] = None,
) -> None:
    """In place: ``residual <- T(x + residual)`` (if given), ``n = T(z / rms(z) * weight)`` with the
    fixed-order, IEEE-step RMS of docs/spec.md §6.2, ``output_normed <- n`` (if given), and codes/scales of
    ``n`` into ``output_q`` / ``output_s`` exactly as ``per_token_group_quant_8bit_v2`` would write them.

    ``input``: ``[M, H]`` bf16/fp16, last dim contiguous (rows may be strided); ``weight``: ``[H]``;
    ``residual``/``output_normed``: contiguous ``[M, H]`` of input's dtype; ``output_q``/``output_s``: as
    v2 (every layout of ``create_scale_tensor``). ``norm_eps`` is the RMSNorm epsilon, ``eps`` the
    quantization one. ``H`` at most 32768.
    """
    min_8bit, max_8bit = _code_range(output_q, min_8bit, max_8bit)
    torch.ops.sgl_quant.rmsnorm_per_token_group_quant_8bit(
        input, weight, residual, output_q, output_s, output_normed, group_size, norm_eps, eps, min_8bit, max_8bit,
        scale_ue8m0, _pdl(enable_pdl))


def _rmsnorm_quantize(x, weight, group_size, out_dtype, eps, residual, column_major_scales, scale_tma_aligned,
                      scale_ue8m0, return_normed, enable_pdl, quant_eps):
    _check_x(x, (2,), "2-D [M, H]")
    x_q = torch.empty(size=x.shape, dtype=out_dtype, device=x.device)
    x_s = create_scale_tensor(x.shape, group_size, x.device, column_major_scales, scale_tma_aligned, scale_ue8m0)
    normed = torch.empty(size=x.shape, dtype=x.dtype, device=x.device) if return_normed else None
    min_8bit, max_8bit = _RANGES[out_dtype]
    torch.ops.sgl_quant.rmsnorm_per_token_group_quant_8bit(x, weight, residual, x_q, x_s, normed, group_size, eps,
                                                           quant_eps, min_8bit, max_8bit, scale_ue8m0, _pdl(enable_pdl))
    return (x_q, x_s, normed) if return_normed else (x_q, x_s)


def rmsnorm_per_token_group_quant_fp8(
    x: torch.Tensor,
    weight: torch.Tensor,
    group_size: int,
    eps: float = 1e-6,
    residual: Optional[torch.Tensor] = None,
    column_major_scales: bool = False,
    scale_tma_aligned: bool = False,
    scale_ue8m0: bool = False,
    return_normed: bool = False,
    enable_pdl: Optional[bool] = None,
    *,
    quant_eps: float = 1e-10,
) -> Tuple[torch.Tensor, ...]:
    """Fused (add +) RMSNorm -> per-token-group FP8 quantization; returns ``(x_q, x_s)`` or, with
    ``return_normed``, ``(x_q, x_s, normed)``.

    ``x``: ``[M, H]`` bf16/fp16; ``weight``: ``[H]`` of x's dtype; ``eps``: the RMSNorm epsilon.
    ``residual`` (``[M, H]``, contiguous, x's dtype) is updated in place to ``T(x + residual)`` and
    normalized instead of ``x``. Codes and scales are those of ``per_token_group_quant_fp8(normed, ...)``
    with the same flags (``quant_eps`` is its ``eps``), byte for byte. Deterministic: a row's bytes
    depend on that row, ``weight`` and the flags only, and the CPU implementation gives the same.
    """
    return _rmsnorm_quantize(x, weight, group_size, FP8_DTYPE, eps, residual, column_major_scales, scale_tma_aligned,
                             scale_ue8m0, return_normed, enable_pdl, quant_eps)


def rmsnorm_per_token_group_quant_int8(
    x: torch.Tensor,
    weight: torch.Tensor,
    group_size: int,
    eps: float = 1e-6,
    residual: Optional[torch.Tensor] = None,
    column_major_scales: bool = False,
    scale_tma_aligned: bool = False,
    scale_ue8m0: bool = False,
    return_normed: bool = False,
    enable_pdl: Optional[bool] = None,
    *,
    quant_eps: float = 1e-10,
) -> Tuple[torch.Tensor, ...]:
    """``rmsnorm_per_token_group_quant_fp8`` with int8 codes (truncation toward zero, as v2)."""
    return _rmsnorm_quantize(x, weight, group_size, torch.int8, eps, residual, column_major_scales, scale_tma_aligned,
                             scale_ue8m0, return_normed, enable_pdl, quant_eps)
