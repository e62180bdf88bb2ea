"""Session 33: one fused-op launch each at M = 64, 256, 4096 (H=7168, bf16, residual, col TMA fp32), warm, for ncu."""
import torch

import sgl_quant
from sgl_quant.testing import make_input

for m in (64, 256, 4096):
    x = make_input((m, 7168), torch.bfloat16, seed=1, device="cuda")
    r = make_input((m, 7168), torch.bfloat16, seed=2, device="cuda")
    w = make_input((7168,), torch.bfloat16, seed=3, device="cuda")
    for _ in range(2):
        sgl_quant.rmsnorm_per_token_group_quant_fp8(x, w, 128, residual=r, column_major_scales=True, scale_tma_aligned=True,
                                                    enable_pdl=False)
torch.cuda.synchronize()
