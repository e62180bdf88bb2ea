"""A representative subset of kernel launches for compute-sanitizer (memcheck / racecheck):
every group size, dtype, output type and scale layout (37 rows, and 5: the small-call kernel), fused
SiLU, masked (with clamped counts), strided input, DSV4, empty inputs; masked with and without PDL;
the fused RMSNorm op with small (several rows per warp), one-warp, many-warp, cluster (distributed
shared memory) and two-chunk teams, with and without residual and normed output, a long call (the
prefetching kernel) and the staged kernel (rows copied into shared memory by the bulk-copy engine;
blocks looping over rows with 1 and 2 stages); per-token (symmetric, asymmetric) and per-tensor (static,
dynamic: the two kernels and their workspace) quantization of aligned, unaligned, short and long rows; staged
calls (rows off 16-byte boundaries, padded codes) and vLLM's packed op. Exits non-zero if any result differs
from the CPU op (on the paths where the two are exact).

`--cpu` makes every call on the CPU instead (CI, tests/test_cpu_ops.py): the comparisons are then trivial,
but every call of the subset is checked to be a valid API call before device time is spent on it (an
invalid one ends both sanitizer runs early)."""
import itertools
import sys

import torch

import sgl_quant
from sgl_quant.testing import c_order_copy, launch_config, make_input, make_masked_m

LAYOUTS = [(False, False, False), (True, False, False), (True, True, False), (False, False, True), (True, True, True)]


def same(a, b):
    return torch.equal(c_order_copy(a.cpu()).view(torch.uint8), c_order_copy(b.cpu()).view(torch.uint8))


def mismatch(ok, what):
    """1 (and `what` printed) where a comparison failed, else 0."""
    if not ok:
        print(f"mismatch: {what}")
    return int(not ok)


def fused_mismatch(device, rows, h, seed, group_size=128, with_residual=True, **kw):
    """One fused (add +) RMSNorm -> quant call (bf16 -> fp8, `kw` the wrapper's flags) on `device` and on
    the CPU: 0 where normed (if asked) and residual (if given) are the same bytes, and so are codes and
    scales on the UE8M0 paths (elsewhere the two may differ by the one step docs/spec.md §1.1 allows), else 1."""
    x = make_input((rows, h), torch.bfloat16, seed=seed)
    w = (make_input((h,), torch.bfloat16, seed=1).float() * 100 + 1).to(torch.bfloat16)
    r = make_input((rows, h), torch.bfloat16, seed=seed + 1) if with_residual else None
    outs = []
    for dev in (device, "cpu"):
        res = None if r is None else r.clone().to(dev)
        out = sgl_quant.rmsnorm_per_token_group_quant_fp8(x.to(dev), w.to(dev), group_size, residual=res, **kw)
        outs.append((*out, res))
    exact = zip(*outs) if kw.get("scale_ue8m0") else zip(outs[0][2:], outs[1][2:])  # [2:]: past codes, scales
    return mismatch(all(a is None or same(a, b) for a, b in exact),
                    f"fused {rows}x{h}, group {group_size}, residual {with_residual}, {kw} vs CPU")


def main(argv=None):
    device = "cpu" if "--cpu" in (sys.argv[1:] if argv is None else argv) else "cuda"  # where the kernels run
    failures = 0
    launches = 0
    # 37 rows: the general dense kernel (with PDL) or the no-PDL one; 5 rows (plain): the small-call kernel
    for gs, dtype, fn, (col, tma, ue8m0), silu, rows, pdl in itertools.product(
            (16, 32, 64, 128, 256), (torch.bfloat16, torch.float16),
            (sgl_quant.per_token_group_quant_fp8, sgl_quant.per_token_group_quant_int8), LAYOUTS, (False, True),
            (37, 5), (True, False)):
        x = make_input((rows, (2 if silu else 1) * 7 * gs), dtype, seed=gs)
        kw = dict(column_major_scales=col, scale_tma_aligned=tma, scale_ue8m0=ue8m0, fuse_silu_and_mul=silu)
        qg, sg = fn(x.to(device), gs, enable_pdl=pdl, **kw)
        launches += 1
        if ue8m0 and not silu:  # exact path: compare with the CPU op
            qc, sc = fn(x, gs, **kw)
            failures += mismatch(same(qg, qc) and same(sg, sc), f"{fn.__name__} {rows}x{x.shape[1]} {kw} vs CPU")
    for e, rows in ((5, 64), (3, 1), (32, 5), (33, 4)):  # per-warp scan (<= 32 experts) and shared-memory prefix
        x = make_input((e, rows, 2 * 7168), torch.bfloat16, seed=e, device=device)
        m = make_masked_m(e, rows, seed=e, device=device)
        m[0] = -3
        m[-1] = rows + 9
        for layout in LAYOUTS:
            col, tma, ue8m0 = layout
            for pdl in (True, False):
                sgl_quant.per_token_group_quant_fp8(x, 128, column_major_scales=col, scale_tma_aligned=tma,
                                                    scale_ue8m0=ue8m0, fuse_silu_and_mul=True, masked_m=m,
                                                    enable_pdl=pdl)
                launches += 1
    for gs in (16, 32, 64, 128, 256):
        for h in (gs, 3 * gs, 7168 // gs * gs, 20480):
            for col, tma, ue8m0 in LAYOUTS:
                for with_residual in (False, True):
                    failures += fused_mismatch(device, 19, h, h, group_size=gs, with_residual=with_residual,
                                               column_major_scales=col, scale_tma_aligned=tma,
                                               scale_ue8m0=ue8m0, return_normed=with_residual)
                    launches += 1
    # a long one-chunk call (3200 rows of 5120: 8 rounds of resident blocks): the kernel that prefetches rows
    failures += fused_mismatch(device, 3200, 5120, 5, column_major_scales=True, scale_tma_aligned=True,
                               scale_ue8m0=True)
    launches += 1
    # clusters of every kind of block: one warp (H=2048 in 4 or 8), several (H=16384), uneven (3)
    for cluster in (3, 4, 8):
        with launch_config(rmsnorm_cluster=cluster):
            for h in (2048, 16384):
                failures += fused_mismatch(device, 5, h, h + cluster, scale_ue8m0=True, return_normed=True)
                launches += 1
    with launch_config(rmsnorm_stages=1):  # staged: 300 rows of 16384, a 1024-thread block per SM, 3 rows each
        failures += fused_mismatch(device, 300, 16384, 7, scale_ue8m0=True, return_normed=True)
    with launch_config(rmsnorm_stages=2):
        failures += fused_mismatch(device, 300, 16384, 8, column_major_scales=True, scale_tma_aligned=True,
                                   scale_ue8m0=True)
    launches += 2
    # per token / per tensor (docs/spec.md §8): the CPU gives the same bytes on the plain front
    for (rows, k), silu in itertools.product(((1, 7168), (300, 4096), (33, 4100), (3, 40000)), (False, True)):
        x = make_input((rows, k + 1), torch.bfloat16, seed=k, device=device)[:, 1:]  # unaligned rows
        device_outs = None
        for dev in (device,) if silu else (device, "cpu"):
            xs = x.to(dev)
            outs = [sgl_quant.per_token_quant_fp8(xs, fuse_silu_and_mul=silu),
                    sgl_quant.per_token_quant_int8(xs, symmetric=False, fuse_silu_and_mul=silu),
                    sgl_quant.per_tensor_quant_fp8(xs, fuse_silu_and_mul=silu),
                    sgl_quant.per_tensor_quant_int8(xs, scale=0.01, fuse_silu_and_mul=silu)]
            if device_outs is not None:
                failures += mismatch(all(same(a, b) for got, want in zip(device_outs, outs) for a, b in zip(got, want)),
                                     f"per token / per tensor {rows}x{k} vs CPU")
            device_outs = outs
        launches += 4
    # rows off 16-byte boundaries and padded code rows (staged through aligned copies), and vLLM's packed op
    # (its own kernels, which write the scale buffer's padding rows): the CPU's bytes on these UE8M0 paths;
    # the masked SiLU call (fast `exp`, not exact vs the CPU) the bytes of the same call on aligned rows
    for rows in (5, 130):
        x = make_input((rows, 1024 + 1), torch.bfloat16, seed=rows, device=device)[:, 1:]  # made there, then offset
        xm = make_input((3, rows, 2 * 512 + 1), torch.bfloat16, seed=rows, device=device)[..., 1:]
        words = 4 * ((rows + 3) // 4) + rows  # the packed scale buffer, padding rows included
        all_rows = torch.full((3,), rows, dtype=torch.int32, device=device)
        masked = [sgl_quant.per_token_group_quant_fp8(m, 128, True, True, True, fuse_silu_and_mul=True,
                                                      masked_m=all_rows) for m in (xm, xm.contiguous())]
        failures += mismatch(all(same(a, b) for a, b in zip(*masked)), f"masked staged vs aligned, {rows} rows")
        outs = []
        for dev in (device, "cpu"):
            xd = x if dev == device else x.cpu()
            q = torch.empty(rows, 1024 + 32, dtype=torch.float8_e4m3fn, device=dev)[:, 3:1027]
            s = sgl_quant.create_scale_tensor((rows, 1024), 128, dev, True, True, True)
            sgl_quant.per_token_group_quant_8bit_v2(xd, q, s, 128, scale_ue8m0=True)
            sp = sgl_quant.create_scale_tensor((rows, 1024), 128, dev, True, True, True)
            sp.as_strided((words,), (1,)).fill_(-1)
            qp = torch.empty(rows, 1024, dtype=torch.float8_e4m3fn, device=dev)
            sgl_quant.per_token_group_quant_8bit_packed(xd.contiguous(), qp, sp, 128)
            outs.append({"v2 staged": (q, s), "packed": (qp, sp.as_strided((words,), (1,))),
                         "fused staged": sgl_quant.rmsnorm_per_token_group_quant_fp8(xd, xd[0], 128, scale_ue8m0=True)})
        for name in outs[0] if device != "cpu" else ():
            failures += mismatch(all(same(a, b) for a, b in zip(outs[0][name], outs[1][name])),
                                 f"{name} vs CPU, {rows} rows")
        launches += 5
    base = make_input((9, 6, 512), torch.float16, seed=3, device=device)
    sgl_quant.per_token_group_quant_fp8_dsv4(base[:, 1:, :])
    sgl_quant.per_token_group_quant_fp8(base.view(54, 512)[:, 128:384], 64)
    sgl_quant.per_token_group_quant_fp8(torch.empty(0, 256, dtype=torch.bfloat16, device=device), 128)
    launches += 2
    if device == "cuda":
        torch.cuda.synchronize()
    print(f"sanitize_subset: {launches} launches, {failures} mismatches (vs CPU on exact paths)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
