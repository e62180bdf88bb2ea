"""Three launches for Nsight Compute (ncu -c 3): M=16384 H=7168 with the default launch shape,
the same with 1 wave (persistent), and M=1 H=4096."""
import torch

import sgl_quant
from sgl_quant import _C
from sgl_quant.testing import make_input

big = make_input((16384, 7168), torch.bfloat16, seed=1, device="cuda")
small = make_input((1, 4096), torch.bfloat16, seed=1, device="cuda")
kw = dict(column_major_scales=True, scale_tma_aligned=True)
torch.cuda.synchronize()
sgl_quant.per_token_group_quant_fp8(big, 128, **kw)
_C._set_launch_config(256, 1, 1)
sgl_quant.per_token_group_quant_fp8(big, 128, **kw)
_C._set_launch_config(0, 16, 2)
sgl_quant.per_token_group_quant_fp8(small, 128, **kw)
torch.cuda.synchronize()
