# The compiled extension (csrc/ops.cpp). Importing it registers the torch.ops.sgl_quant.* ops; its one
# Python function reports how it was built.
from typing import Any, Dict

def build_info() -> Dict[str, Any]: ...
