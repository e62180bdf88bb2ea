"""sgl_quant: FP8/INT8 activation quantization for 8-bit GEMMs: per-token-group (block-scaled GEMMs),
per-token and per-tensor, with fused SiLU-and-mul and RMSNorm fronts.

Importing the package loads the native extension, which registers ``torch.ops.sgl_quant.*``
(CPU implementation always; CUDA kernels when built with CUDA), and the fake implementations
that let the ops trace under ``torch.compile``.
"""
import torch  # noqa: F401  (libtorch must be loaded before the extension)

from . import _C  # noqa: F401  registers the ops
from . import _fake  # noqa: F401  fake (meta) implementations
from ._version import __version__
from .quant import (
    FP8_DTYPE,
    create_scale_tensor,
    per_token_group_quant_8bit_packed,
    per_token_group_quant_8bit_v2,
    per_token_group_quant_fp8,
    per_token_group_quant_fp8_dsv4,
    per_token_group_quant_int8,
    rmsnorm_per_token_group_quant_8bit,
    rmsnorm_per_token_group_quant_fp8,
    rmsnorm_per_token_group_quant_int8,
)
from .scaled import (
    per_tensor_quant_8bit,
    per_tensor_quant_fp8,
    per_tensor_quant_int8,
    per_token_quant_8bit,
    per_token_quant_fp8,
    per_token_quant_int8,
    rmsnorm_per_tensor_quant_8bit,
    rmsnorm_per_tensor_quant_fp8,
    rmsnorm_per_token_quant_8bit,
    rmsnorm_per_token_quant_fp8,
    rmsnorm_per_token_quant_int8,
)


def build_info() -> dict:
    """How this install was built (version, torch and CUDA versions, compiled archs, whether the
    CUDA kernels exist) and what it runs on now."""
    info = dict(_C.build_info())
    info["torch_runtime"] = torch.__version__
    info["cuda_available"] = torch.cuda.is_available()
    if info["cuda_available"]:
        info["device"] = torch.cuda.get_device_name()
        info["device_capability"] = "%d.%d" % torch.cuda.get_device_capability()
        if info["cuda_kernels"]:
            # whether the archs built include code this device runs; if not, the error a call would raise
            problem = _C._device_kernel_problem(torch.cuda.current_device())
            info["device_has_kernels"] = not problem
            if problem:
                info["device_kernel_problem"] = problem
    return info


__all__ = [
    "__version__",
    "FP8_DTYPE",
    "build_info",
    "create_scale_tensor",
    "per_token_group_quant_8bit_packed",
    "per_token_group_quant_8bit_v2",
    "per_token_group_quant_fp8",
    "per_token_group_quant_fp8_dsv4",
    "per_token_group_quant_int8",
    "per_tensor_quant_8bit",
    "per_tensor_quant_fp8",
    "per_tensor_quant_int8",
    "per_token_quant_8bit",
    "per_token_quant_fp8",
    "per_token_quant_int8",
    "rmsnorm_per_token_group_quant_8bit",
    "rmsnorm_per_token_group_quant_fp8",
    "rmsnorm_per_token_group_quant_int8",
    "rmsnorm_per_tensor_quant_8bit",
    "rmsnorm_per_tensor_quant_fp8",
    "rmsnorm_per_token_quant_8bit",
    "rmsnorm_per_token_quant_fp8",
    "rmsnorm_per_token_quant_int8",
]
