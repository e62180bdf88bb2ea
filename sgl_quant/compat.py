"""Drop-in replacements with the call shapes of the code that SGLang runs today.

``sgl_per_token_group_quant_8bit`` has the signature of ``sgl_kernel.sgl_per_token_group_quant_8bit``
(preallocated outputs, positional ``fp8_min``/``fp8_max``); ``sglang_per_token_group_quant_fp8`` has
the signature of SGLang's allocating wrapper in ``sglang.srt.layers.quantization.fp8_kernel``. Both
compute exactly what the native API computes (same op, same bytes), so swapping an import is enough::

    from sgl_quant.compat import sgl_per_token_group_quant_8bit, sglang_per_token_group_quant_fp8

``enable_v2``: sgl_quant implements the v2 kernel's semantics only (the bits the serving stack
produces with ``enable_v2=True``). ``None`` and ``True`` are the same; ``False`` (the legacy v1
kernel) also runs v2 and warns once, since v1 and v2 are not guaranteed to agree bit for bit.
"""
import warnings
from typing import Optional, Tuple

import torch

from .quant import per_token_group_quant_8bit_v2, per_token_group_quant_fp8

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


__all__ = ["sgl_per_token_group_quant_8bit", "sglang_per_token_group_quant_fp8"]
