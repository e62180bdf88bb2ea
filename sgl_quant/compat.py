"""Drop-in replacements with the call shapes of the code that SGLang, FlashInfer and vLLM run today.

``sgl_per_token_group_quant_8bit`` has the signature of ``sgl_kernel.sgl_per_token_group_quant_8bit``
(preallocated outputs, positional ``fp8_min``/``fp8_max``); ``sglang_per_token_group_quant_fp8`` has
the signature of SGLang's allocating wrapper in ``sglang.srt.layers.quantization.fp8_kernel``. Both
compute exactly what the native API computes (same op, same bytes), so swapping an import is enough::

    from sgl_quant.compat import sgl_per_token_group_quant_8bit, sglang_per_token_group_quant_fp8

``fused_add_rmsnorm_fp8_block_quant`` has the call shape of FlashInfer's fused add-RMSNorm + 1x128 fp8
quant and ``rms_norm_per_block_quant`` that of vLLM's ``_custom_ops.rms_norm_per_block_quant``: their
arguments and output layouts, sgl_quant's math (docs/spec.md §6.2: a fixed-order, IEEE-step RMS, codes and
scales exactly as v2 gives them for the normed values).

Per-token and per-tensor (docs/spec.md §8): vLLM's ``scaled_fp8_quant`` and ``scaled_int8_quant``, sgl-kernel's
``sgl_per_token_quant_fp8`` and ``sgl_per_tensor_quant_fp8``, SGLang's Triton ``per_token_quant_int8``: their
arguments and output layouts, sgl_quant's math (docs/spec.md §8.1; per-tensor fp8 gives vLLM's bytes, per-token
codes may differ from theirs by one step on a small fraction, int8 ties round to even).

Fused fronts (docs/spec.md §8.3): vLLM's ``rms_norm_dynamic_per_token_quant``, ``rms_norm_static_fp8_quant``,
``fused_add_rms_norm_static_fp8_quant`` and ``silu_and_mul_quant``, FlashInfer's ``rmsnorm_quant`` and
``fused_add_rmsnorm_quant``: their arguments, sgl_quant's math (the exact RMSNorm of §6.2, then §8.1).

vLLM's packed UE8M0 calls ``per_token_group_fp8_quant_packed`` (its ``torch.ops._C`` shape) and
``per_token_group_quant_fp8_packed_for_deepgemm`` run ``per_token_group_quant_8bit_packed``: vLLM's bytes in
the whole scale buffer, its padding rows included (README, "Which call writes what").

``enable_v2``: sgl_quant implements the v2 kernel's semantics only (the bits the serving stack
produces with ``enable_v2=True``). ``None`` and ``True`` are the same; ``False`` (the legacy v1
kernel) also runs v2 and warns once, since v1 and v2 are not guaranteed to agree bit for bit.
"""
import warnings
from typing import List, Optional, Tuple

import torch

from .quant import (
    FP8_DTYPE,
    FP8_MAX,
    FP8_MIN,
    create_scale_tensor,
    per_token_group_quant_8bit_packed,
    per_token_group_quant_8bit_v2,
    per_token_group_quant_fp8,
    _first_rows_transposed,
    rmsnorm_per_token_group_quant_8bit,
)
from .scaled import (per_tensor_quant_8bit, per_token_quant_8bit, rmsnorm_per_tensor_quant_8bit,
                     rmsnorm_per_token_quant_8bit)

_warned_v1 = False


def _check_enable_v2(enable_v2: Optional[bool]) -> None:
    global _warned_v1
    if enable_v2 is False and not _warned_v1:
        _warned_v1 = True
        warnings.warn("sgl_quant implements the v2 per-token-group kernel only; enable_v2=False runs v2",
                      stacklevel=3)


def sgl_per_token_group_quant_8bit(
    input: torch.Tensor,
    output_q: torch.Tensor,
    output_s: torch.Tensor,
    group_size: int,
    eps: float,
    fp8_min: float,
    fp8_max: float,
    scale_ue8m0: bool = False,
    fuse_silu_and_mul: bool = False,
    masked_m: Optional[torch.Tensor] = None,
    enable_v2: Optional[bool] = True,
) -> None:
    """``sgl_kernel.sgl_per_token_group_quant_8bit``: quantize into ``output_q`` / ``output_s``.

    ``fp8_min``/``fp8_max`` are the code range (for int8 outputs: -128 / 127), as in sgl-kernel.
    """
    _check_enable_v2(enable_v2)
    per_token_group_quant_8bit_v2(input, output_q, output_s, group_size, eps, fp8_min, fp8_max,
                                  scale_ue8m0=scale_ue8m0, fuse_silu_and_mul=fuse_silu_and_mul,
                                  masked_m=masked_m)


def sglang_per_token_group_quant_fp8(
    x: torch.Tensor,
    group_size: int,
    eps: float = 1e-10,
    column_major_scales: bool = False,
    scale_tma_aligned: bool = False,
    scale_ue8m0: bool = False,
    fuse_silu_and_mul: bool = False,
    masked_m: Optional[torch.Tensor] = None,
    enable_v2: Optional[bool] = None,
) -> Tuple[torch.Tensor, torch.Tensor]:
    """SGLang's ``sglang_per_token_group_quant_fp8``: returns ``(x_q, x_s)`` in the layout the flags
    select (see ``sgl_quant.create_scale_tensor``). Like SGLang's wrapper it requires a contiguous ``x``
    (the native ``per_token_group_quant_fp8`` also takes rows with a stride)."""
    _check_enable_v2(enable_v2)
    if not x.is_contiguous():
        raise ValueError("sglang_per_token_group_quant_fp8: x must be contiguous (as in SGLang)")
    return per_token_group_quant_fp8(x, group_size, eps, column_major_scales, scale_tma_aligned, scale_ue8m0,
                                     fuse_silu_and_mul, masked_m)


def per_token_group_fp8_quant_packed(input: torch.Tensor, output_q: torch.Tensor, output_s_packed: torch.Tensor,
                                     group_size: int, eps: float, fp8_min: float, fp8_max: float) -> None:
    """vLLM's ``torch.ops._C.per_token_group_fp8_quant_packed``: ``input`` ``[..., K]`` (rows ``M = numel / K``),
    ``output_q`` of input's shape, ``output_s_packed`` int32 ``[M, ceil(G/4)]`` with strides ``(1, ceil4(M))``;
    writes the codes, the packed UE8M0 scales and 0 in the scale words of the padding rows, as vLLM does."""
    k = input.shape[-1]
    per_token_group_quant_8bit_packed(input.reshape(-1, k), output_q.view(-1, k), output_s_packed, group_size, eps,
                                      fp8_min, fp8_max)


def per_token_group_quant_fp8_packed_for_deepgemm(x: torch.Tensor, group_size: int, eps: float = 1e-10,
                                                  use_ue8m0: Optional[bool] = True,
                                                  out_q: Optional[torch.Tensor] = None
                                                  ) -> Tuple[torch.Tensor, torch.Tensor]:
    """vLLM's ``per_token_group_quant_fp8_packed_for_deepgemm``: returns ``(x_q, x_s_packed)``, ``x_q`` fp8 of x's
    shape (``out_q`` when given), ``x_s_packed`` int32 ``[M, ceil(G/4)]`` with strides ``(1, ceil4(M))``, its
    padding rows zeroed (``per_token_group_fp8_quant_packed``). ``use_ue8m0`` must be true (``None``: true)."""
    if use_ue8m0 is False:
        raise ValueError("per_token_group_quant_fp8_packed_for_deepgemm: the packed layout needs UE8M0 scales "
                         "(use_ue8m0=True), as in vLLM")
    k = x.shape[-1]
    if group_size <= 0 or k % group_size != 0:
        raise ValueError(f"per_token_group_quant_fp8_packed_for_deepgemm: x's last dimension {k} must be divisible "
                         f"by group_size {group_size}")
    m = x.numel() // k if k else 0
    words, padded_rows = (k // group_size + 3) // 4, (m + 3) // 4 * 4
    x_s = torch.empty_strided((m, words), (1, padded_rows), dtype=torch.int32, device=x.device)
    x_q = torch.empty(size=x.shape, dtype=FP8_DTYPE, device=x.device) if out_q is None else out_q
    per_token_group_fp8_quant_packed(x, x_q, x_s, group_size, eps, FP8_MIN, FP8_MAX)
    return x_q.view(x.shape), x_s


def fused_add_rmsnorm_fp8_block_quant(
    out: torch.Tensor,
    block_scale: torch.Tensor,
    normed_out: torch.Tensor,
    input: torch.Tensor,
    residual: torch.Tensor,
    weight: torch.Tensor,
    eps: float = 1e-6,
    enable_pdl: Optional[bool] = None,
) -> None:
    """FlashInfer's ``flashinfer.norm.fused_add_rmsnorm_fp8_block_quant``: ``residual <- input + residual``,
    ``normed_out <- RMSNorm(residual) * weight``, ``out`` (fp8, ``[M, H]``) and ``block_scale`` the 1x128
    quantization of ``normed_out``. ``block_scale`` is FlashInfer's contiguous fp32 ``[H // 128, ceil4(M)]``
    buffer (column-major, TMA-aligned: the logical ``[M, H // 128]`` scales are
    ``block_scale.transpose(0, 1)[:M]``), as DeepGEMM consumes it."""
    if input.dim() != 2:
        raise ValueError(f"fused_add_rmsnorm_fp8_block_quant: input must be 2-D [M, H], got shape {list(input.shape)}")
    m, h = input.shape
    want = (h // 128, (m + 3) // 4 * 4)
    if block_scale.dim() != 2 or tuple(block_scale.shape) != want or not block_scale.is_contiguous():
        raise ValueError(f"fused_add_rmsnorm_fp8_block_quant: block_scale must be a contiguous [H // 128, ceil4(M)] = "
                         f"{list(want)} buffer, got shape {list(block_scale.shape)}, strides {list(block_scale.stride())}")
    scales = _first_rows_transposed(block_scale, (), m, want[0])
    rmsnorm_per_token_group_quant_8bit(input, weight, out, scales, 128, eps, residual=residual, output_normed=normed_out,
                                       enable_pdl=enable_pdl)


def rms_norm_per_block_quant(
    input: torch.Tensor,
    weight: torch.Tensor,
    epsilon: float,
    quant_dtype: torch.dtype,
    group_size: List[int],
    scale_ub: Optional[torch.Tensor] = None,
    residual: Optional[torch.Tensor] = None,
    is_scale_transposed: bool = False,
    has_tma_aligned_scales: bool = False,
) -> Tuple[torch.Tensor, torch.Tensor]:
    """vLLM's ``_custom_ops.rms_norm_per_block_quant``: returns ``(output, scales)``; ``group_size`` is
    ``[1, G]``; ``residual`` is updated in place; ``scales`` are ``[M, H // G]`` fp32, row-major, or with
    ``is_scale_transposed`` a transposed ``[H // G, M]`` buffer (``has_tma_aligned_scales``: ``ceil4(M)``
    columns). ``quant_dtype`` float8_e4m3fn or int8 (int8 codes truncate, as v2). ``scale_ub`` (a clamp of
    the scales) is not supported."""
    if len(group_size) != 2 or group_size[0] != 1:
        raise ValueError(f"rms_norm_per_block_quant: group_size must be [1, G], got {group_size}")
    if scale_ub is not None:
        raise ValueError("rms_norm_per_block_quant: scale_ub is not supported by sgl_quant")
    if quant_dtype not in (FP8_DTYPE, torch.int8):
        raise ValueError(f"rms_norm_per_block_quant: quant_dtype must be float8_e4m3fn or int8, got {quant_dtype}")
    if has_tma_aligned_scales and not is_scale_transposed:
        raise ValueError("rms_norm_per_block_quant: has_tma_aligned_scales needs is_scale_transposed=True")
    output = torch.empty(size=input.shape, dtype=quant_dtype, device=input.device)
    scales = create_scale_tensor(input.shape, group_size[1], input.device, column_major_scales=is_scale_transposed,
                                 scale_tma_aligned=has_tma_aligned_scales)
    rmsnorm_per_token_group_quant_8bit(input, weight, output, scales, group_size[1], epsilon, residual=residual)
    return output, scales


def scaled_fp8_quant(
    input: torch.Tensor,
    scale: Optional[torch.Tensor] = None,
    num_token_padding: Optional[int] = None,
    scale_ub: Optional[torch.Tensor] = None,
    use_per_token_if_dynamic: bool = False,
    output: Optional[torch.Tensor] = None,
) -> Tuple[torch.Tensor, torch.Tensor]:
    """vLLM's ``_custom_ops.scaled_fp8_quant``: returns ``(output, scale)``. ``input`` 2-D ``[M, H]``; static
    per-tensor with ``scale`` (one element), else dynamic per-tensor (``scale`` ``[1]``) or, with
    ``use_per_token_if_dynamic``, per-token (``scale`` ``[M_pad, 1]``, ``scale_ub`` bounding the amax).
    ``num_token_padding`` pads the rows of ``output`` (and of per-token scales) to at least that many; the
    padding rows are not written, as in vLLM."""
    if input.dim() != 2:
        raise ValueError(f"scaled_fp8_quant: input must be 2-D [M, H], got shape {list(input.shape)}")
    m, h = input.shape
    rows = max(num_token_padding, m) if num_token_padding else m
    if output is None:
        output = torch.empty(size=(rows, h), dtype=FP8_DTYPE, device=input.device)
    elif num_token_padding is not None:
        raise ValueError("scaled_fp8_quant: num_token_padding is not supported with output (as in vLLM)")
    if scale is None and use_per_token_if_dynamic:
        scale = torch.empty(size=(rows, 1), dtype=torch.float32, device=input.device)
        per_token_quant_8bit(input, output[:m], scale[:m], scale_ub=scale_ub)
    elif scale is None:
        scale = torch.empty(size=(1,), dtype=torch.float32, device=input.device)
        per_tensor_quant_8bit(input, output[:m], scale, is_static=False)
    else:
        if scale.numel() != 1:
            raise ValueError(f"scaled_fp8_quant: a static scale must have one element, got shape {list(scale.shape)}")
        per_tensor_quant_8bit(input, output[:m], scale, is_static=True)
    return output, scale


def scaled_int8_quant(
    input: torch.Tensor,
    scale: Optional[torch.Tensor] = None,
    azp: Optional[torch.Tensor] = None,
    symmetric: bool = True,
) -> Tuple[torch.Tensor, torch.Tensor, Optional[torch.Tensor]]:
    """vLLM's ``_custom_ops.scaled_int8_quant``: returns ``(output, scales, azp)``. Static per-tensor with
    ``scale`` (symmetric; a static ``azp`` is not supported), else dynamic per-token: ``scales`` fp32
    ``[M, 1]`` (``M = input.numel() // input.shape[-1]``), ``azp`` int32 ``[M, 1]`` when not ``symmetric``."""
    output = torch.empty(size=input.shape, dtype=torch.int8, device=input.device)
    if scale is not None:
        if azp is not None or not symmetric:
            raise ValueError("scaled_int8_quant: a static zero point (azp, symmetric=False) is not supported by "
                             "sgl_quant; static scales are symmetric")
        per_tensor_quant_8bit(input, output, scale, is_static=True)
        return output, scale, None
    rows = input.numel() // input.shape[-1] if input.shape[-1] else 0
    scales = torch.empty(size=(rows, 1), dtype=torch.float32, device=input.device)
    zp = None if symmetric else torch.empty(size=(rows, 1), dtype=torch.int32, device=input.device)
    per_token_quant_8bit(input, output, scales, zp)
    return output, scales, zp


def sgl_per_token_quant_fp8(input: torch.Tensor, output_q: torch.Tensor, output_s: torch.Tensor) -> None:
    """sgl-kernel's ``sgl_per_token_quant_fp8``: dynamic per-token FP8 into ``output_q`` and ``output_s``
    (fp32, one per row)."""
    per_token_quant_8bit(input, output_q, output_s)


def sgl_per_tensor_quant_fp8(input: torch.Tensor, output_q: torch.Tensor, output_s: torch.Tensor,
                             is_static: bool) -> None:
    """sgl-kernel's ``sgl_per_tensor_quant_fp8``: static (``output_s`` holds the scale) or dynamic per-tensor
    FP8. Unlike sgl-kernel's, the dynamic form does not need ``output_s`` zeroed first."""
    per_tensor_quant_8bit(input, output_q, output_s, is_static)


def per_token_quant_int8(x: torch.Tensor, scale_dtype: torch.dtype = torch.float32) -> Tuple[torch.Tensor, torch.Tensor]:
    """SGLang's Triton ``per_token_quant_int8``: returns ``(x_q, scales)``, ``scales`` ``[..., 1]`` of
    ``scale_dtype`` (computed in fp32). Ties round to even (SGLang's Triton kernel rounds them away from zero)."""
    x_q = torch.empty(size=x.shape, dtype=torch.int8, device=x.device)
    scales = torch.empty(size=(*x.shape[:-1], 1), dtype=torch.float32, device=x.device)
    per_token_quant_8bit(x, x_q, scales)
    return x_q, scales if scale_dtype == torch.float32 else scales.to(scale_dtype)


def rms_norm_dynamic_per_token_quant(
    input: torch.Tensor,
    weight: torch.Tensor,
    epsilon: float,
    quant_dtype: torch.dtype,
    scale_ub: Optional[torch.Tensor] = None,
    residual: Optional[torch.Tensor] = None,
) -> Tuple[torch.Tensor, torch.Tensor]:
    """vLLM's ``_custom_ops.rms_norm_dynamic_per_token_quant``: returns ``(output, scales)``, ``scales`` fp32
    ``[M, 1]``; ``residual`` (if given) is updated in place to ``input + residual`` and normalized."""
    if quant_dtype not in (FP8_DTYPE, torch.int8):
        raise ValueError(f"rms_norm_dynamic_per_token_quant: quant_dtype must be float8_e4m3fn or int8, got {quant_dtype}")
    h = input.shape[-1]
    rows = input.numel() // h if h else 0
    output = torch.empty(size=input.shape, dtype=quant_dtype, device=input.device)
    scales = torch.empty(size=(rows, 1), dtype=torch.float32, device=input.device)
    # [..., H] as the [M, H] rows the op takes (views: the residual is updated in place)
    rmsnorm_per_token_quant_8bit(input.reshape(rows, h), weight, output.view(rows, h), scales, epsilon,
                                 residual=None if residual is None else residual.view(rows, h), scale_ub=scale_ub)
    return output, scales


def rms_norm_static_fp8_quant(out: torch.Tensor, input: torch.Tensor, weight: torch.Tensor, scale: torch.Tensor,
                              epsilon: float) -> None:
    """vLLM's ``rms_norm_static_fp8_quant``: ``out`` (fp8) <- RMSNorm(input) * weight at the static ``scale``."""
    rmsnorm_per_tensor_quant_8bit(input, weight, out, scale, epsilon)


def fused_add_rms_norm_static_fp8_quant(out: torch.Tensor, input: torch.Tensor, residual: torch.Tensor,
                                        weight: torch.Tensor, scale: torch.Tensor, epsilon: float) -> None:
    """vLLM's ``fused_add_rms_norm_static_fp8_quant``: ``residual <- input + residual``, ``out`` (fp8) <-
    RMSNorm(residual) * weight at the static ``scale``."""
    rmsnorm_per_tensor_quant_8bit(input, weight, out, scale, epsilon, residual=residual)


def silu_and_mul_quant(out: torch.Tensor, input: torch.Tensor, scale: torch.Tensor) -> None:
    """vLLM's ``silu_and_mul_quant``: ``out`` (fp8, ``[..., H]``) <- SiLU(gate) * up of ``input`` (``[..., 2H]``) at
    the static ``scale``."""
    per_tensor_quant_8bit(input, out, scale, is_static=True, fuse_silu_and_mul=True)


def rmsnorm_quant(out: torch.Tensor, input: torch.Tensor, weight: torch.Tensor, scale: torch.Tensor,
                  eps: float = 1e-6, enable_pdl: Optional[bool] = None) -> None:
    """FlashInfer's ``flashinfer.norm.rmsnorm_quant``: ``out`` (fp8) <- RMSNorm(input) * weight at the static
    ``scale`` (``out * scale`` dequantizes)."""
    rmsnorm_per_tensor_quant_8bit(input, weight, out, scale, eps, enable_pdl=enable_pdl)


def fused_add_rmsnorm_quant(out: torch.Tensor, input: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor,
                            scale: torch.Tensor, eps: float = 1e-6, enable_pdl: Optional[bool] = None) -> None:
    """FlashInfer's ``flashinfer.norm.fused_add_rmsnorm_quant``: ``residual <- input + residual``, ``out`` (fp8) <-
    RMSNorm(residual) * weight at the static ``scale``."""
    rmsnorm_per_tensor_quant_8bit(input, weight, out, scale, eps, residual=residual, enable_pdl=enable_pdl)


__all__ = ["fused_add_rms_norm_static_fp8_quant", "fused_add_rmsnorm_fp8_block_quant", "fused_add_rmsnorm_quant",
           "per_token_group_fp8_quant_packed", "per_token_group_quant_fp8_packed_for_deepgemm",
           "per_token_quant_int8", "rms_norm_dynamic_per_token_quant", "rms_norm_per_block_quant",
           "rms_norm_static_fp8_quant", "rmsnorm_quant", "scaled_fp8_quant", "scaled_int8_quant", "silu_and_mul_quant",
           "sgl_per_tensor_quant_fp8", "sgl_per_token_group_quant_8bit", "sgl_per_token_quant_fp8",
           "sglang_per_token_group_quant_fp8"]
