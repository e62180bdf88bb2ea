"""Smoke test of an installed sgl_quant (run by `make wheel-check` in a fresh virtual environment,
from outside the source tree): import, build_info(), one CPU call of each op and public wrapper
checked against the docs/spec.md math, and the CPU golden selftest."""
import os
import subprocess
import sys

import torch

import sgl_quant
from sgl_quant import compat

here = os.path.dirname(os.path.abspath(sgl_quant.__file__))
assert "site-packages" in here, f"sgl_quant was imported from {here}, not from the installed wheel"
info = sgl_quant.build_info()
print("installed at", here)
for k, v in info.items():
    print(f"  {k}: {v}")
expect_cuda = os.environ.get("SGL_QUANT_EXPECT_CUDA_KERNELS")
if expect_cuda is not None:
    assert expect_cuda in ("0", "1"), f"SGL_QUANT_EXPECT_CUDA_KERNELS={expect_cuda!r}: want 0 or 1"
    assert info["cuda_kernels"] == (expect_cuda == "1"), info

torch.manual_seed(0)
x = (torch.randn(5, 512) * 3).to(torch.bfloat16)


def check_fp8(q, s):  # |x - q*s| within half an fp8 step of the group's scale (e4m3: 3 mantissa bits)
    deq = q.float().view(5, 4, 128) * s.float().view(5, 4, 1)
    err = (deq - x.float().view(5, 4, 128)).abs()
    bound = x.float().view(5, 4, 128).abs() * 2.0**-4 + s.float().view(5, 4, 1) * 2.0**-9
    assert bool((err <= bound).all()), float((err - bound).max())


q, s = sgl_quant.per_token_group_quant_fp8(x, 128)
check_fp8(q, s)
q8, s8 = sgl_quant.per_token_group_quant_int8(x, 128)
assert q8.dtype == torch.int8 and bool((q8.float() * s8.view(5, 4, 1).repeat_interleave(128, -1).view(5, 512)
                                         - x.float()).abs().max() <= s8.max())
q2 = torch.empty_like(q)
s2 = torch.empty_like(s)
compat.sgl_per_token_group_quant_8bit(x, q2, s2, 128, 1e-10, -448.0, 448.0)
assert torch.equal(q2.view(torch.uint8), q.view(torch.uint8)) and torch.equal(s2, s)
q3, s3 = compat.sglang_per_token_group_quant_fp8(x, 128, column_major_scales=True, scale_tma_aligned=True)
assert torch.equal(q3.view(torch.uint8), q.view(torch.uint8)) and torch.equal(s3, s)
xd = (torch.randn(3, 2, 256) * 5).to(torch.bfloat16)
qd, sd = sgl_quant.per_token_group_quant_fp8_dsv4(xd)
assert qd.shape == (3, 2, 256) and sd.shape == (3, 2, 2) and sd.stride() == (2, 6, 1)
assert bool((torch.log2(sd) == torch.round(torch.log2(sd))).all()), "DSV4 scales must be powers of two"
print("smoke: one CPU call of each op and wrapper: ok")
sys.exit(subprocess.call([sys.executable, "-m", "sgl_quant", "selftest"]))
