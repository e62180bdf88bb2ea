"""Per-token and per-tensor FP8/INT8 quantization (docs/spec.md §8).

``x`` is ``[..., K]`` bf16 or fp16 (leading dimensions flattened into ``M`` rows, the last one contiguous,
rows may be strided); ``K = H``, or ``K = 2H`` with ``fuse_silu_and_mul`` (gate = ``x[..., :H]``, up =
``x[..., H:]``). Codes are ``[..., H]``. Scales are fp32 with ``x ≈ q * s`` (asymmetric int8:
``x ≈ (q - zp) * s``): per token one per row, ``[..., 1]``; per tensor one value, ``[1]``.

The math (all fp32 steps IEEE, round to nearest even; CPU and CUDA give the same bytes)::

    per token:   s = max(eps, min(max|v|, scale_ub)) / MAX      per tensor, dynamic: s = max(eps, max|v|) / MAX
    y = 1 / s    fp8: q = e4m3(clamp(v * y))   int8: q = saturate(round_half_even(v * y))
    int8 asymmetric (per token): s = max(eps, max v - min v) / 255, zp = round_half_even(-128 - min v * y),
                                 q = saturate(round_half_even(v * y) + zp)

A row (per tensor: the tensor) holding NaN or Inf gets a NaN scale and NaN (fp8) / 0 (int8) codes. A static
scale that is not positive and finite is refused where the host can read it (a Python float, a CPU tensor);
on a GPU, where reading it would synchronize, it turns every code into NaN / 0.
"""
import math
from typing import Optional, Tuple, Union

import torch

from .quant import FP8_DTYPE, _check_x, _pdl

_ScaleArg = Optional[Union[float, torch.Tensor]]


def per_token_quant_8bit(
    input: torch.Tensor,
    output_q: torch.Tensor,
    output_s: torch.Tensor,
    output_azp: Optional[torch.Tensor] = None,
    scale_ub: Optional[torch.Tensor] = None,
    eps: float = 1e-10,
    fuse_silu_and_mul: bool = False,
    enable_pdl: Optional[bool] = None,
) -> None:
    """In place: a scale per row into ``output_s`` (fp32, ``M`` elements, contiguous: ``[M, 1]`` or
    ``[M]``) and the codes into ``output_q`` (contiguous ``[..., H]``, float8_e4m3fn or int8).

    ``output_azp`` (int32, ``M`` elements, int8 codes only): asymmetric quantization with a zero point per
    row. ``scale_ub`` (fp32, one element on the input's device): an upper bound of the rows' amax.
    """
    torch.ops.sgl_quant.per_token_quant_8bit(input, output_q, output_s, output_azp, scale_ub, eps,
                                             fuse_silu_and_mul, _pdl(enable_pdl))


def per_tensor_quant_8bit(
    input: torch.Tensor,
    output_q: torch.Tensor,
    output_s: torch.Tensor,
    is_static: bool,
    eps: float = 1e-10,
    fuse_silu_and_mul: bool = False,
    enable_pdl: Optional[bool] = None,
) -> None:
    """In place: the codes of ``input`` at one scale into ``output_q``. ``is_static``: ``output_s`` (fp32, one
    element) holds the scale and is only read; else the op computes it from the whole tensor and writes it
    (``output_s`` need not be zeroed first; no host synchronization)."""
    torch.ops.sgl_quant.per_tensor_quant_8bit(input, output_q, output_s, is_static, eps, fuse_silu_and_mul,
                                              _pdl(enable_pdl))


_ANY_RANK = tuple(range(1, 65))  # [..., K]: every rank torch allows but 0


def _outputs(x: torch.Tensor, fuse_silu_and_mul: bool, dtype: torch.dtype) -> torch.Tensor:
    _check_x(x, _ANY_RANK, "[..., K] with at least one dimension")
    shape = (*x.shape[:-1], x.shape[-1] // 2) if fuse_silu_and_mul else x.shape
    return torch.empty(size=shape, dtype=dtype, device=x.device)


def per_token_quant_fp8(
    x: torch.Tensor,
    scale_ub: Optional[torch.Tensor] = None,
    fuse_silu_and_mul: bool = False,
    eps: float = 1e-10,
    enable_pdl: Optional[bool] = None,
) -> Tuple[torch.Tensor, torch.Tensor]:
    """Dynamic per-token FP8 (e4m3fn): returns ``(q, s)``, ``q`` ``[..., H]``, ``s`` fp32 ``[..., 1]``.

    ``scale_ub``: optional fp32 one-element tensor bounding each row's amax (vLLM's ``scale_ub``); vLLM's
    scale floor ``s >= 1 / (448 * 512)`` is ``eps=1/512``."""
    q = _outputs(x, fuse_silu_and_mul, FP8_DTYPE)
    s = torch.empty(size=(*q.shape[:-1], 1), dtype=torch.float32, device=x.device)
    torch.ops.sgl_quant.per_token_quant_8bit(x, q, s, None, scale_ub, eps, fuse_silu_and_mul, _pdl(enable_pdl))
    return q, s


def per_token_quant_int8(
    x: torch.Tensor,
    symmetric: bool = True,
    scale_ub: Optional[torch.Tensor] = None,
    fuse_silu_and_mul: bool = False,
    eps: float = 1e-10,
    enable_pdl: Optional[bool] = None,
) -> Union[Tuple[torch.Tensor, torch.Tensor], Tuple[torch.Tensor, torch.Tensor, torch.Tensor]]:
    """Dynamic per-token INT8 (codes rounded half to even): returns ``(q, s)``, or with ``symmetric=False``
    ``(q, s, zp)``, ``zp`` int32 ``[..., 1]`` (``x ≈ (q - zp) * s``)."""
    q = _outputs(x, fuse_silu_and_mul, torch.int8)
    s = torch.empty(size=(*q.shape[:-1], 1), dtype=torch.float32, device=x.device)
    zp = None if symmetric else torch.empty(size=s.shape, dtype=torch.int32, device=x.device)
    torch.ops.sgl_quant.per_token_quant_8bit(x, q, s, zp, scale_ub, eps, fuse_silu_and_mul, _pdl(enable_pdl))
    return (q, s) if symmetric else (q, s, zp)


def _static_scale(scale: Union[float, torch.Tensor], device: torch.device) -> torch.Tensor:
    if isinstance(scale, torch.Tensor):
        return scale  # the op checks dtype, size and device (and the value, on the CPU)
    value = float(scale)
    if not (math.isfinite(value) and value > 0):
        raise ValueError(f"scale must be a positive finite float, got {scale}")
    return torch.full((1,), value, dtype=torch.float32, device=device)


def _per_tensor(x, scale, fuse_silu_and_mul, eps, enable_pdl, dtype):
    q = _outputs(x, fuse_silu_and_mul, dtype)
    is_static = scale is not None
    s = _static_scale(scale, x.device) if is_static else torch.empty(size=(1,), dtype=torch.float32, device=x.device)
    torch.ops.sgl_quant.per_tensor_quant_8bit(x, q, s, is_static, eps, fuse_silu_and_mul, _pdl(enable_pdl))
    return q, s


def per_tensor_quant_fp8(
    x: torch.Tensor,
    scale: _ScaleArg = None,
    fuse_silu_and_mul: bool = False,
    eps: float = 1e-10,
    enable_pdl: Optional[bool] = None,
) -> Tuple[torch.Tensor, torch.Tensor]:
    """Per-tensor FP8: static with ``scale`` (a positive float, or an fp32 one-element tensor on x's device,
    returned as it is), else dynamic (the whole tensor's amax, on the device). Returns ``(q, s)``, ``s`` fp32
    ``[1]``."""
    return _per_tensor(x, scale, fuse_silu_and_mul, eps, enable_pdl, FP8_DTYPE)


def per_tensor_quant_int8(
    x: torch.Tensor,
    scale: _ScaleArg = None,
    fuse_silu_and_mul: bool = False,
    eps: float = 1e-10,
    enable_pdl: Optional[bool] = None,
) -> Tuple[torch.Tensor, torch.Tensor]:
    """Per-tensor INT8 (codes rounded half to even), static or dynamic as ``per_tensor_quant_fp8``."""
    return _per_tensor(x, scale, fuse_silu_and_mul, eps, enable_pdl, torch.int8)


# ------------------------------------------------------------------------------------------------
# Fused (add +) RMSNorm fronts (docs/spec.md §8.3): the RMSNorm of §6.2, then the per-token or static per-tensor
# quantization of its normed values, one pass over the input.

def rmsnorm_per_token_quant_8bit(
    input: torch.Tensor,
    weight: torch.Tensor,
    output_q: torch.Tensor,
    output_s: torch.Tensor,
    norm_eps: float = 1e-6,
    residual: Optional[torch.Tensor] = None,
    output_normed: Optional[torch.Tensor] = None,
    scale_ub: Optional[torch.Tensor] = None,
    eps: float = 1e-10,
    enable_pdl: Optional[bool] = None,
) -> None:
    """In place: ``residual <- T(x + residual)`` (if given), ``n = T(z / rms(z) * weight)`` (docs/spec.md §6.2:
    the same bytes as ``rmsnorm_per_token_group_quant_8bit``'s), ``output_normed <- n`` (if given), and the
    per-token codes and scales of ``n`` (``per_token_quant_8bit``'s bytes for ``n``) into ``output_q`` /
    ``output_s`` (fp32, ``M`` elements). ``input`` ``[M, H]``, ``H`` a multiple of 16 up to 32768."""
    torch.ops.sgl_quant.rmsnorm_per_token_quant_8bit(input, weight, residual, output_q, output_s, output_normed,
                                                     scale_ub, norm_eps, eps, _pdl(enable_pdl))


def rmsnorm_per_tensor_quant_8bit(
    input: torch.Tensor,
    weight: torch.Tensor,
    output_q: torch.Tensor,
    scale: torch.Tensor,
    norm_eps: float = 1e-6,
    residual: Optional[torch.Tensor] = None,
    output_normed: Optional[torch.Tensor] = None,
    enable_pdl: Optional[bool] = None,
) -> None:
    """``rmsnorm_per_token_quant_8bit`` with a static per-tensor ``scale`` (fp32, one element, read only)."""
    torch.ops.sgl_quant.rmsnorm_per_tensor_quant_8bit(input, weight, residual, output_q, scale, output_normed,
                                                      norm_eps, _pdl(enable_pdl))


def _rmsnorm_outputs(x, dtype, return_normed):
    _check_x(x, (2,), "2-D [M, H]")
    q = torch.empty(size=x.shape, dtype=dtype, device=x.device)
    return q, torch.empty(size=x.shape, dtype=x.dtype, device=x.device) if return_normed else None


def _rmsnorm_per_token(x, weight, eps, residual, scale_ub, return_normed, enable_pdl, quant_eps, dtype):
    q, normed = _rmsnorm_outputs(x, dtype, return_normed)
    s = torch.empty(size=(x.shape[0], 1), dtype=torch.float32, device=x.device)
    torch.ops.sgl_quant.rmsnorm_per_token_quant_8bit(x, weight, residual, q, s, normed, scale_ub, eps, quant_eps,
                                                     _pdl(enable_pdl))
    return (q, s, normed) if return_normed else (q, s)


def rmsnorm_per_token_quant_fp8(
    x: torch.Tensor,
    weight: torch.Tensor,
    eps: float = 1e-6,
    residual: Optional[torch.Tensor] = None,
    scale_ub: Optional[torch.Tensor] = None,
    return_normed: bool = False,
    enable_pdl: Optional[bool] = None,
    *,
    quant_eps: float = 1e-10,
) -> Tuple[torch.Tensor, ...]:
    """Fused (add +) RMSNorm -> dynamic per-token FP8: returns ``(q, s)`` or ``(q, s, normed)``; ``s`` fp32
    ``[M, 1]``. ``eps`` is the RMSNorm epsilon, ``quant_eps`` the quantization one; ``residual`` is updated in
    place. Deterministic and batch-invariant; the CPU implementation gives the same bytes."""
    return _rmsnorm_per_token(x, weight, eps, residual, scale_ub, return_normed, enable_pdl, quant_eps, FP8_DTYPE)


def rmsnorm_per_token_quant_int8(
    x: torch.Tensor,
    weight: torch.Tensor,
    eps: float = 1e-6,
    residual: Optional[torch.Tensor] = None,
    scale_ub: Optional[torch.Tensor] = None,
    return_normed: bool = False,
    enable_pdl: Optional[bool] = None,
    *,
    quant_eps: float = 1e-10,
) -> Tuple[torch.Tensor, ...]:
    """``rmsnorm_per_token_quant_fp8`` with int8 codes (rounded half to even)."""
    return _rmsnorm_per_token(x, weight, eps, residual, scale_ub, return_normed, enable_pdl, quant_eps, torch.int8)


def rmsnorm_per_tensor_quant_fp8(
    x: torch.Tensor,
    weight: torch.Tensor,
    scale: Union[float, torch.Tensor],
    eps: float = 1e-6,
    residual: Optional[torch.Tensor] = None,
    return_normed: bool = False,
    enable_pdl: Optional[bool] = None,
    out_dtype: torch.dtype = FP8_DTYPE,
) -> Tuple[torch.Tensor, ...]:
    """Fused (add +) RMSNorm -> static per-tensor FP8 (``out_dtype=torch.int8``: INT8) at ``scale`` (a positive
    float, or an fp32 one-element tensor on x's device): returns ``(q, scale)`` or ``(q, scale, normed)``."""
    q, normed = _rmsnorm_outputs(x, out_dtype, return_normed)
    s = _static_scale(scale, x.device)
    torch.ops.sgl_quant.rmsnorm_per_tensor_quant_8bit(x, weight, residual, q, s, normed, eps, _pdl(enable_pdl))
    return (q, s, normed) if return_normed else (q, s)
