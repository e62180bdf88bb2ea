# Session 45: where an eager call's host time goes on the GPU machine (M=1, H=7168).
import sys
from pathlib import Path

import torch

import sgl_quant
from sgl_quant import quant as Q
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # benchmark/
from bench_host_overhead import per_call_us  # the benchmark's own timing loop


def t(fn):
    return per_call_us(fn, torch.cuda.synchronize, calls=2000, reps=7)


dev="cuda"; h=7168
x=torch.randn(1,h,device=dev).bfloat16(); w=torch.randn(h,device=dev).bfloat16(); res=torch.randn(1,h,device=dev).bfloat16()
q=torch.empty(1,h,dtype=torch.float8_e4m3fn,device=dev)
s=Q.create_scale_tensor((1,h),128,dev,True,True); y=torch.empty_like(x)
x3=torch.randn(1,56,128,device=dev).bfloat16(); q3=torch.empty(1,56,128,dtype=torch.float8_e4m3fn,device=dev); s3=torch.empty(56,1,1,device=dev).transpose(0,1)
ops=torch.ops.sgl_quant; v2=ops.per_token_group_quant_8bit_v2.default; fu=ops.rmsnorm_per_token_group_quant_8bit.default
rows=[
("op v2 pdl", lambda: v2(x,q,s,128,1e-10,-448.,448.,False,False,None,True)),
("op v2 no pdl", lambda: v2(x,q,s,128,1e-10,-448.,448.,False,False,None,False)),
("op v2 packet", lambda: ops.per_token_group_quant_8bit_v2(x,q,s,128,1e-10,-448.,448.,False,False,None,True)),
("op dsv4", lambda: ops.per_token_group_quant_fp8_dsv4.default(x3,q3,s3,True)),
("op fused +res", lambda: fu(x,w,res,q,s,None,128,1e-6,1e-10,-448.,448.,False,True)),
("op fused no res", lambda: fu(x,w,None,q,s,None,128,1e-6,1e-10,-448.,448.,False,True)),
("torch.abs out", lambda: torch.abs(x,out=y)),
("torch.add out", lambda: torch.add(x,res,out=y)),
("empty fp8 device=x.device", lambda: torch.empty((1,h),dtype=torch.float8_e4m3fn,device=x.device)),
("empty fp8 device='cuda'", lambda: torch.empty((1,h),dtype=torch.float8_e4m3fn,device="cuda")),
("x.new_empty fp8", lambda: x.new_empty((1,h),dtype=torch.float8_e4m3fn)),
("empty_like", lambda: torch.empty_like(x)),
("create_scale row", lambda: Q.create_scale_tensor((1,h),128,x.device)),
("create_scale col tma", lambda: Q.create_scale_tensor((1,h),128,x.device,True,True)),
("_code_range", lambda: Q._code_range(q,None,None)),
("wrapper inplace v2", lambda: Q.per_token_group_quant_8bit_v2(x,q,s,128)),
("wrapper fp8 row", lambda: sgl_quant.per_token_group_quant_fp8(x,128)),
]
for name, fn in rows: print(f"{name:<32} {t(fn):8.2f}")
