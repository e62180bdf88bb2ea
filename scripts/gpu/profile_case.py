"""Launches for Nsight Compute (ncu -k regex:per_token_group_quant_kernel).

    python scripts/gpu/profile_case.py [dense]   # M=16384 H=7168 default shape (256-thread blocks), same with 128, M=1 H=4096
    python scripts/gpu/profile_case.py masked    # masked SiLU 8x512, 32x256, 256x128 (H=2048, UE8M0 packed)
    python scripts/gpu/profile_case.py rmsnorm   # the fused op with residual, M=64 and 256, H=7168 (col TMA fp32 scales), twice each
"""
import sys

import torch

import sgl_quant
from sgl_quant.testing import launch_config, make_input, make_masked_m

which = sys.argv[1] if len(sys.argv) > 1 else "dense"
if which == "dense":
    big = make_input((16384, 7168), torch.bfloat16, seed=1, device="cuda")
    small = make_input((1, 4096), torch.bfloat16, seed=1, device="cuda")
    kw = dict(column_major_scales=True, scale_tma_aligned=True)
    torch.cuda.synchronize()
    sgl_quant.per_token_group_quant_fp8(big, 128, **kw)
    with launch_config(block_threads=128):  # dense grids are uncapped: only the block size changes
        sgl_quant.per_token_group_quant_fp8(big, 128, **kw)
    sgl_quant.per_token_group_quant_fp8(small, 128, **kw)
elif which == "masked":
    for e, rows in ((8, 512), (32, 256), (256, 128)):
        x = make_input((e, rows, 4096), torch.bfloat16, seed=1, device="cuda")
        masked_m = make_masked_m(e, rows, seed=3, device="cuda")
        q = torch.empty(e, rows, 2048, dtype=torch.float8_e4m3fn, device="cuda")
        s = sgl_quant.create_scale_tensor(q.shape, 128, "cuda", True, True, True)
        sgl_quant.per_token_group_quant_8bit_v2(x, q, s, 128, scale_ue8m0=True, fuse_silu_and_mul=True,
                                                masked_m=masked_m)
elif which == "rmsnorm":  # each twice: with ncu --cache-control none the second finds the rows in L2, as a replay does
    for m in (64, 256):
        x = make_input((m, 7168), torch.bfloat16, seed=1, device="cuda")
        r = make_input((m, 7168), torch.bfloat16, seed=2, device="cuda")
        w = make_input((7168,), torch.bfloat16, seed=3, device="cuda")
        for _ in range(2):
            sgl_quant.rmsnorm_per_token_group_quant_fp8(x, w, 128, residual=r, column_major_scales=True,
                                                        scale_tma_aligned=True)
else:
    sys.exit(f"unknown case set {which!r}: dense, masked or rmsnorm")
torch.cuda.synchronize()
