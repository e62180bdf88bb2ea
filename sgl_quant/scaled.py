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


def _outputs(x: torch.Tensor, fuse_silu_and_mul: bool, dtype: torch.dtype) -> torch.Tensor:
    _check_x(x, tuple(range(1, 17)), "[..., K] with at least one dimension")
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
