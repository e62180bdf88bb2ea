"""Golden vectors of the reference kernel (sgl-kernel AOT v2, fast-math, sm_90a, H200).

CUDA: every case must match both hashes (codes and scales, byte for byte).
CPU: scales match everywhere; codes match on the paths SPEC §1.1 calls exact (UE8M0 codes: plain,
and fused SiLU in bf16; DSV4). On the others (float-scale codes, fused SiLU in fp16) a code may be
one step off on a small fraction: the bound checked here is at most one step per code and at most
0.1% of the codes of those cases together (SPEC §1.1 measured <= ~0.02%); cases whose full bytes
are not stored can only be checked by hash (their scales are still checked exactly).
"""
import functools
import hashlib
import json
from pathlib import Path

import numpy as np
import pytest
import torch

import sgl_quant
from conftest import add_summary_line
from reference import FP8, code_steps
from sgl_quant.testing import make_input

_HERE = Path(__file__).resolve().parent
GOLDEN_DIR = next(d for d in (_HERE / "golden", _HERE.parent.parent / "shared" / "golden") if (d / "golden.json").is_file())
CASES = json.loads((GOLDEN_DIR / "golden.json").read_text())["cases"]
LAYOUT_FLAGS = {"row_f32": (False, False, False), "col_f32_tma": (True, True, False), "col_ue8m0": (True, True, True)}
DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}
CPU_CODE_FRACTION_BOUND = 1e-3


@functools.lru_cache(maxsize=1)
def golden_bytes():
    return np.load(GOLDEN_DIR / "golden_small.npz")


def sha256(t: torch.Tensor) -> str:
    return hashlib.sha256(t.contiguous().view(torch.uint8).numpy().tobytes()).hexdigest()


def plain_copy(t: torch.Tensor) -> torch.Tensor:
    out = torch.empty(t.shape, dtype=t.dtype)  # C order, also for size-1 dimensions
    out.copy_(t)
    return out


def run_case(case, device):
    """The op's (codes, scales) for a golden case, as the bytes the hashes cover: C-order codes and the
    scales' logical view; masked: valid rows of each expert, in expert order."""
    dtype = DTYPES[case["dtype"]]
    if case["op"] == "dsv4":
        x = make_input((case["tokens"], case["heads"], case["hidden"]), dtype, seed=case["seed"]).to(device)
        q, s = sgl_quant.per_token_group_quant_fp8_dsv4(x)
        return plain_copy(q.cpu()), plain_copy(s.cpu())
    h, silu = case["hidden"], case["silu"]
    k = 2 * h if silu else h
    masked = case.get("masked")
    if masked:
        x = make_input((masked["experts"], masked["tokens_pad"], k), dtype, seed=case["seed"])
        masked_m = torch.tensor(masked["masked_m"], dtype=torch.int32, device=device)
    else:
        x = make_input((case["tokens"], k), dtype, seed=case["seed"])
        masked_m = None
    col, tma, ue8m0 = LAYOUT_FLAGS[case["scale"]]
    fn = sgl_quant.per_token_group_quant_fp8 if case["out"] == "fp8" else sgl_quant.per_token_group_quant_int8
    q, s = fn(x.to(device), case["group_size"], column_major_scales=col, scale_tma_aligned=tma, scale_ue8m0=ue8m0,
              fuse_silu_and_mul=silu, masked_m=masked_m)
    q, s = q.cpu(), plain_copy(s.cpu())
    if masked:
        counts = masked["masked_m"]
        q = torch.cat([q[e, :counts[e]] for e in range(len(counts))])
        s = torch.cat([s[e, :counts[e]] for e in range(len(counts))])
    return q, s


def cpu_codes_exact(case) -> bool:
    """SPEC §1.1: where the CPU implementation is bit-exact with the CUDA reference kernel."""
    if case["op"] == "dsv4":
        return True
    if case["scale"] != "col_ue8m0":
        return False  # float-scale codes: the kernel's fast-math division
    return not (case["silu"] and case["dtype"] == "fp16")  # fused SiLU in fp16: the kernel's fast exp


def case_id(case):
    if case["op"] == "dsv4":
        return f"{case['id']}-dsv4-{case['dtype']}-T{case['tokens']}xG{case['heads']}xD{case['hidden']}"
    shape = f"E{case['masked']['experts']}x{case['masked']['tokens_pad']}" if case.get("masked") else f"M{case['tokens']}"
    return (f"{case['id']}-{case['dtype']}-{case['out']}-g{case['group_size']}-{shape}-H{case['hidden']}-{case['scale']}"
            + ("-silu" if case["silu"] else ""))


@functools.lru_cache(maxsize=None)
def cpu_result(case_index):
    """(scales exact, codes exact, codes differing, codes compared, largest step, verified)."""
    case = CASES[case_index]
    q, s = run_case(case, "cpu")
    scales_ok = sha256(s) == case["s_sha256"]
    if sha256(q) == case["q_sha256"]:
        return scales_ok, True, 0, q.numel(), 0, True
    key = f"q_{case['id']}"
    if key not in golden_bytes().files:
        return scales_ok, False, None, q.numel(), None, False
    ref = torch.from_numpy(golden_bytes()[key].copy()).view(q.dtype).reshape(q.shape)
    steps = code_steps(q, ref)
    return scales_ok, False, int((steps > 0).sum()), q.numel(), int(steps.max()), True


@pytest.mark.parametrize("index", range(len(CASES)), ids=[case_id(c) for c in CASES])
def test_golden_cpu(index):
    case = CASES[index]
    scales_ok, codes_exact, diff, n, worst, verified = cpu_result(index)
    assert scales_ok, "scales must match the reference kernel exactly on every path"
    if cpu_codes_exact(case):
        assert codes_exact, f"codes differ on a path SPEC §1.1 calls exact ({diff} of {n}, largest {worst} steps)"
    elif verified and not codes_exact:
        assert worst <= 1, f"a code is {worst} steps off the reference kernel (bound: 1)"


def test_golden_cpu_bound_over_inexact_cases():
    exact_cases = [i for i, c in enumerate(CASES) if cpu_codes_exact(c)]
    inexact = [i for i, c in enumerate(CASES) if not cpu_codes_exact(c)]
    results = {i: cpu_result(i) for i in range(len(CASES))}
    hash_exact = sum(1 for r in results.values() if r[1])
    verified = [i for i in inexact if results[i][5]]
    unverified = [i for i in inexact if not results[i][5]]
    inexact_hash_exact = [i for i in inexact if results[i][1]]
    within = [i for i in verified if not results[i][1]]
    diff = sum(results[i][2] for i in verified)
    total = sum(results[i][3] for i in verified)
    worst = max([results[i][4] for i in verified] + [0])
    add_summary_line(
        f"goldens on CPU: {len(CASES)} cases; scales exact {sum(r[0] for r in results.values())}/{len(CASES)}; "
        f"codes hash-exact {hash_exact}/{len(CASES)} (exact paths: {sum(results[i][1] for i in exact_cases)}/"
        f"{len(exact_cases)}); inexact paths: {len(inexact)} cases: {len(inexact_hash_exact)} hash-exact, "
        f"{len(within)} within the bound (bytes compared), {len(unverified)} not exact and bytes not stored (scales "
        f"still exact); codes one step off over the {len(verified)} inexact cases with known bytes: "
        f"{diff}/{total} = {diff / max(total, 1):.4%}, largest deviation {worst} step(s)")
    assert worst <= 1
    assert diff <= CPU_CODE_FRACTION_BOUND * total, f"{diff} of {total} codes off (bound {CPU_CODE_FRACTION_BOUND:.2%})"


@pytest.mark.gpu
@pytest.mark.parametrize("index", range(len(CASES)), ids=[case_id(c) for c in CASES])
def test_golden_gpu(index):
    case = CASES[index]
    q, s = run_case(case, "cuda")
    assert sha256(s) == case["s_sha256"], "scales differ from the reference kernel"
    assert sha256(q) == case["q_sha256"], "codes differ from the reference kernel"
