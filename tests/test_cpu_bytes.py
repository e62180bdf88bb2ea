"""The C++ CPU implementation's bytes, pinned. It is the oracle of the GPU tests: the fused op's normed
values and residual must be the CUDA kernel's bytes (docs/spec.md §6.3), and a GPU has checked that they
are, but only a GPU can. So every output of a sweep of CPU calls (poisoned outputs, so unwritten elements
count too) is hashed and compared with `tests/golden/cpu_bytes.json`, recorded from the CPU code whose
fused-op bytes an H200 matched (commit a7b1ade; unchanged since). A change to the CPU code
that moves any byte (a summation order, a rounding, a vectorized rewrite) fails here, in CI, without a GPU.

Sweep: v2 (dense, masked, strided rows) and DSV4 without fused SiLU, and the fused op with and without
residual and normed output at row lengths up to 32768; every dtype, code type, group size and scale
layout; five input mixes (normal values over many octaves, random bit patterns with NaN/Inf/subnormals,
sparse specials, fp8 rounding ties, values near eps). Inputs come from an integer hash (no torch RNG),
so the bytes do not depend on the torch version. Fused SiLU is left out: it calls the C library's expf,
whose last bit may differ between C libraries and between glibc's builds for CPUs with and without FMA
(its CPU codes are checked against the reference within docs/spec.md §1.1's one-step bound in test_cpu_ops.py).

    python tests/test_cpu_bytes.py --record    # rewrite the JSON (only for an intended change of bytes)
"""
import hashlib
import json
import math
import sys
from pathlib import Path

import pytest
import torch

import sgl_quant
from helpers import LAYOUTS, alloc_scales, poisoned
from reference import FP8
from sgl_quant.testing import _hash32, make_input

RECORD = Path(__file__).resolve().parent / "golden" / "cpu_bytes.json"
DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}
OUTS = {"fp8": FP8, "int8": torch.int8}
GROUP_SIZES = (16, 32, 64, 128, 256)
KINDS = ("normal", "bits", "specials", "ties", "tiny")
ROW_LENGTHS = (16, 48, 128, 640, 1536, 7168, 32768)  # the fused op's H, rounded to the group size
SPECIALS = torch.tensor([float("nan"), float("inf"), -float("inf"), -0.0, 2.0**-133, -(2.0**-20)])


def _hashes(n, seed):
    return _hash32((torch.arange(n, dtype=torch.int64) * 0x9E3779B1 + seed * 40503 + 1) & 0xFFFFFFFF)


def inputs(shape, dtype, kind, seed):
    """A tensor of one input mix whose values depend only on (shape, dtype, kind, seed)."""
    n = math.prod(shape)
    if kind == "normal":
        return make_input(shape, dtype, seed)
    if kind == "bits":
        return (_hashes(n, seed) & 0xFFFF).to(torch.int32).to(torch.int16).view(dtype).reshape(shape)
    if kind == "specials":
        x = make_input((n,), dtype, seed)
        h = _hashes(n, seed + 7)
        pick = h % 97 == 0
        x[pick] = SPECIALS[(h[pick] // 97) % len(SPECIALS)].to(dtype)
        return x.reshape(shape)
    if kind == "ties":  # halves of small integers: fp8 codes and bf16 roundings land on ties
        return (((_hashes(n, seed) % 1801) - 900).to(torch.float32) / 2).to(dtype).reshape(shape)
    if kind == "tiny":  # 2^-40 .. 2^-24: the eps clamp and tiny scales
        return (make_input(shape, torch.float32, seed) * 2.0**-28).to(dtype)
    raise ValueError(kind)


def feed(h, *tensors):
    for t in tensors:
        if t is not None:
            h.update(t.contiguous().view(-1).view(torch.uint8).numpy().tobytes())


def v2_digest(dtype, out, gs, layout):
    """Dense and masked calls with every input mix, some with strided rows, one digest."""
    h = hashlib.sha256()
    for masked in (False, True):
        for k, kind in enumerate(KINDS):
            seed = 1000 * gs + 100 * masked + k + 10 * list(LAYOUTS).index(layout)
            m, hidden = 1 + seed % 13, gs * (1 + seed % 9)
            batch = (3,) if masked else ()
            if not masked and seed % 2:  # strided rows
                x = inputs((m, hidden + 4 * gs), dtype, kind, seed)[:, :hidden]
            else:
                x = inputs((*batch, m, hidden), dtype, kind, seed)
            q = poisoned((*batch, m, hidden), torch.uint8).view(out)
            x_s, buf, ue8m0 = alloc_scales(layout, (*batch, m, hidden), gs, "cpu")
            masked_m = torch.tensor([m, 0, m // 2], dtype=torch.int32) if masked else None
            sgl_quant.per_token_group_quant_8bit_v2(x, q, x_s, gs, 1e-14 if kind == "tiny" else 1e-10,
                                                    scale_ue8m0=ue8m0, masked_m=masked_m)
            feed(h, q, buf)
    return h.hexdigest()[:32]


def rmsnorm_digest(dtype, out, gs, layout):
    """Calls with and without residual and normed output, every input mix and row length, one digest."""
    h = hashlib.sha256()
    for residual in (False, True):
        for normed in (False, True):
            for k, kind in enumerate(KINDS):
                seed = 1000 * gs + 100 * residual + 10 * normed + k + 7 * list(LAYOUTS).index(layout)
                hidden = max(gs, ROW_LENGTHS[seed % len(ROW_LENGTHS)] // gs * gs)
                m = 1 + seed % (3 if hidden > 8192 else 9)
                x = inputs((m, hidden + 64), dtype, kind, seed)[:, :hidden] if seed % 3 == 0 else \
                    inputs((m, hidden), dtype, kind, seed)
                w = inputs((hidden,), dtype, "normal" if kind == "tiny" else kind, seed + 1)
                res = inputs((m, hidden), dtype, kind, seed + 2) if residual else None
                q = poisoned((m, hidden), torch.uint8).view(out)
                x_s, buf, ue8m0 = alloc_scales(layout, (m, hidden), gs, "cpu")
                n = poisoned((m, hidden), dtype) if normed else None
                sgl_quant.rmsnorm_per_token_group_quant_8bit(x, w, q, x_s, gs, 1e-6, residual=res, output_normed=n,
                                                             scale_ue8m0=ue8m0)
                feed(h, q, buf, n, res)
    return h.hexdigest()[:32]


def dsv4_digest():
    h = hashlib.sha256()
    for seed in range(12):
        for kind in KINDS:
            t, g, d = seed % 5, 1 + seed % 8, 128 * (1 + seed % 6)
            x = inputs((t, g, d), torch.bfloat16 if seed % 2 else torch.float16, kind, seed)
            x_q = poisoned((t, g, d), torch.uint8).view(FP8)
            buf = poisoned((g, t, d // 128), torch.float32)
            torch.ops.sgl_quant.per_token_group_quant_fp8_dsv4(x, x_q, buf.transpose(0, 1), False)
            feed(h, x_q, buf)
    return h.hexdigest()[:32]


def groups(op, dtype_name, out_name):
    """{key: digest} of one op, input dtype and code type, a digest per group size and layout."""
    fn = {"v2": v2_digest, "rmsnorm": rmsnorm_digest}[op]
    return {f"{op}/{dtype_name}/{out_name}/gs{gs}/{layout}": fn(DTYPES[dtype_name], OUTS[out_name], gs, layout)
            for gs in GROUP_SIZES for layout in LAYOUTS}


PARTS = [(op, d, o) for op in ("v2", "rmsnorm") for d in DTYPES for o in OUTS]


@pytest.mark.parametrize("op,dtype_name,out_name", PARTS, ids=["-".join(p) for p in PARTS])
def test_cpu_bytes_unchanged(op, dtype_name, out_name):
    recorded = json.loads(RECORD.read_text())["digests"]
    got = groups(op, dtype_name, out_name)
    differ = sorted(k for k, v in got.items() if recorded.get(k) != v)
    assert not differ, f"the CPU implementation's bytes changed in {len(differ)} of {len(got)} groups: {differ[:8]}"


def test_cpu_bytes_unchanged_dsv4():
    assert dsv4_digest() == json.loads(RECORD.read_text())["digests"]["dsv4"]


def record():
    digests = {}
    for part in PARTS:
        digests.update(groups(*part))
    digests["dsv4"] = dsv4_digest()
    RECORD.write_text(json.dumps({"about": "tests/test_cpu_bytes.py: sha256 (first 128 bits) of every output of "
                                  "its sweep of CPU calls", "digests": digests}, indent=1) + "\n")
    print(f"{RECORD}: {len(digests)} digests")


if __name__ == "__main__":
    if sys.argv[1:] != ["--record"]:
        sys.exit(__doc__)
    record()
