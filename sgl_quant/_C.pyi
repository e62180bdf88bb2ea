# The compiled extension (csrc/ops.cpp). Importing it registers the torch.ops.sgl_quant.* ops; its one
# Python function reports how it was built.
from typing import Any, Dict

def build_info() -> Dict[str, Any]: ...

# CUDA builds only: "" when the build has CUDA code that the device runs, else the error a call would raise.
def _device_kernel_problem(device: int) -> str: ...
