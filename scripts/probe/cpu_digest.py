"""Digests of every output byte of a broad sweep of CPU calls, for A/B checks of changes to the C++ CPU
implementation (csrc/cpu/quant_cpu.cpp) that must not change a byte. Run it against two builds and
diff the outputs:

    PYTHONPATH=<old tree> python scripts/probe/cpu_digest.py > old.txt
    PYTHONPATH=<new tree> python scripts/probe/cpu_digest.py > new.txt
    diff old.txt new.txt && echo same bytes

The CPU implementation is the oracle the CUDA tests compare against (bytes for the fused op's normed
values and residual, SPEC §6.3), so "the same bytes as before" keeps that contract without a GPU.
Every output starts poisoned, so an element left unwritten changes the digest too. Inputs: several
magnitude mixes, among them every bf16/fp16 bit pattern class (subnormals, NaN, Inf, +-0) and values
tuned to sit on fp8/bf16 rounding ties; all of v2's layouts, group sizes, SiLU, masked; DSV4; the
fused op with and without residual and normed output, at row lengths up to 32768.
"""
import argparse
import hashlib
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "tests"))
import sgl_quant  # noqa: E402
from helpers import LAYOUTS, alloc_scales  # noqa: E402

FP8 = torch.float8_e4m3fn
GROUP_SIZES = (16, 32, 64, 128, 256)


def inputs(shape, dtype, kind, seed):
    """Seeded inputs of one magnitude mix."""
    g = torch.Generator().manual_seed(seed)
    if kind == "normal":  # per-row magnitudes over many octaves
        x = torch.randn(shape, generator=g) * torch.exp2(torch.randint(-20, 12, (*shape[:-1], 1), generator=g).float())
        return x.to(dtype)
    if kind == "bits":  # uniformly random bit patterns: subnormals, NaN, Inf, +-0, huge and tiny values
        bits = torch.randint(0, 1 << 16, shape, generator=g, dtype=torch.int32).to(torch.int16)
        return bits.view(dtype)
    if kind == "sparse_special":  # normal values with a few NaN/Inf/-0/subnormal entries
        x = torch.randn(shape, generator=g).to(dtype)
        flat = x.view(-1)
        if flat.numel() == 0:
            return x
        idx = torch.randint(0, flat.numel(), (max(1, flat.numel() // 500),), generator=g)
        specials = torch.tensor([float("nan"), float("inf"), -float("inf"), -0.0, 1e-40, -3e-39], dtype=torch.float32)
        flat[idx] = specials[torch.randint(0, len(specials), idx.shape, generator=g)].to(dtype)
        return x
    if kind == "ties":  # small integers and halves: fp8 codes and bf16 roundings land on ties
        x = torch.randint(-900, 900, shape, generator=g).float() / 2
        return x.to(dtype)
    if kind == "tiny":  # everything near eps: the eps clamp and subnormal scales
        return (torch.randn(shape, generator=g) * 1e-12).to(dtype)
    raise ValueError(kind)


KINDS = ("normal", "bits", "sparse_special", "ties", "tiny")


def digest(*tensors):
    h = hashlib.sha256()
    for t in tensors:
        if t is not None:
            h.update(t.contiguous().view(-1).view(torch.uint8).numpy().tobytes())
    return h.hexdigest()[:16]


def poisoned(shape, dtype, poison=0x55):
    t = torch.empty(shape, dtype=dtype)
    t.view(torch.uint8).fill_(poison)
    return t


def v2_cases():
    seed = 0
    for dtype in (torch.bfloat16, torch.float16):
        for out in (FP8, torch.int8):
            for gs in GROUP_SIZES:
                for layout in LAYOUTS:
                    for silu in (False, True):
                        for masked in (False, True):
                            for kind in KINDS:
                                seed += 1
                                yield seed, dtype, out, gs, layout, silu, masked, kind


def run_v2(seed, dtype, out, gs, layout, silu, masked, kind):
    h = gs * (1 + seed % 9)
    m = 1 + seed % 13
    batch = (3,) if masked else ()
    x = inputs((*batch, m, 2 * h if silu else h), dtype, kind, seed)
    if seed % 4 == 0 and not masked:  # strided rows
        wide = inputs((m, x.shape[-1] + 8 * gs), dtype, kind, seed)
        x = wide[:, : x.shape[-1]]
    q = poisoned((*batch, m, h), torch.uint8).view(out)
    x_s, buf, ue8m0 = alloc_scales(layout, (*batch, m, h), gs, "cpu")
    masked_m = torch.tensor([m, 0, m // 2], dtype=torch.int32) if masked else None
    eps = 1e-10 if kind != "tiny" else 1e-14
    sgl_quant.per_token_group_quant_8bit_v2(x, q, x_s, gs, eps, scale_ue8m0=ue8m0, fuse_silu_and_mul=silu,
                                            masked_m=masked_m)
    return digest(q, buf)


def rms_cases():
    seed = 10_000
    for dtype in (torch.bfloat16, torch.float16):
        for out in (FP8, torch.int8):
            for gs in GROUP_SIZES:
                for layout in LAYOUTS:
                    for residual in (False, True):
                        for normed in (False, True):
                            for kind in KINDS:
                                seed += 1
                                yield seed, dtype, out, gs, layout, residual, normed, kind


ROW_LENGTHS = (16, 48, 128, 640, 1536, 7168, 32768)


def run_rms(seed, dtype, out, gs, layout, residual, normed, kind):
    h = max(gs, ROW_LENGTHS[seed % len(ROW_LENGTHS)] // gs * gs)
    m = 1 + seed % 5 if h > 8192 else 1 + seed % 11
    x = inputs((m, h), dtype, kind, seed)
    if seed % 3 == 0:  # strided rows
        x = inputs((m, h + 64), dtype, kind, seed)[:, :h]
    w = inputs((h,), dtype, "normal" if kind == "tiny" else kind, seed + 1)
    res = inputs((m, h), dtype, kind, seed + 2) if residual else None
    q = poisoned((m, h), torch.uint8).view(out)
    x_s, buf, ue8m0 = alloc_scales(layout, (m, h), gs, "cpu")
    n = poisoned((m, h), dtype) if normed else None
    sgl_quant.rmsnorm_per_token_group_quant_8bit(x, w, q, x_s, gs, 1e-6, residual=res, output_normed=n,
                                                 scale_ue8m0=ue8m0)
    return digest(q, buf, n, res)


def run_dsv4(seed, kind):
    t = seed % 7
    x = inputs((t, 8, 128 * (1 + seed % 3) * 4), torch.bfloat16, kind, seed)
    t, g, d = x.shape
    x_q = poisoned((t, g, d), torch.uint8).view(FP8)
    buf = poisoned((g, t, d // 128), torch.float32)
    torch.ops.sgl_quant.per_token_group_quant_fp8_dsv4(x, x_q, buf.transpose(0, 1), False)
    return digest(x_q, buf)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--threads", type=int, default=0, help="intra-op threads (0: torch's default)")
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    for c in v2_cases():
        print("v2", *c, run_v2(*c))
    for c in rms_cases():
        print("rms", *c, run_rms(*c))
    for seed in range(20):
        for kind in KINDS:
            print("dsv4", seed, kind, run_dsv4(seed, kind))


if __name__ == "__main__":
    main()
