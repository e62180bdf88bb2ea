"""Golden vectors of the reference kernel (sgl-kernel AOT v2, fast-math, sm_90a, H200).

CUDA: every case must match both hashes (codes and scales, byte for byte).
CPU: scales match everywhere; codes match on the paths docs/spec.md §1.1 calls exact (UE8M0 codes: plain,
and fused SiLU in bf16; DSV4). On the others (float-scale codes, fused SiLU in fp16) a code may be
one step off on a small fraction: the bound checked here is at most one step per code and at most
0.1% of the codes of those cases together (docs/spec.md §1.1 measured <= ~0.02%); cases whose full bytes
are not stored can only be checked by hash (their scales are still checked exactly).
"""
import functools
import json
from pathlib import Path

import numpy as np
import pytest
import torch

from conftest import add_summary_line
from reference import code_steps
from sgl_quant.testing import golden_cpu_exact as cpu_codes_exact
from sgl_quant.testing import run_golden_case as run_case
from sgl_quant.testing import sha256_of as sha256

_HERE = Path(__file__).resolve().parent
GOLDEN_DIR = next(d for d in (_HERE / "golden", _HERE.parent.parent / "shared" / "golden") if (d / "golden.json").is_file())
CASES = json.loads((GOLDEN_DIR / "golden.json").read_text())["cases"]
CPU_CODE_FRACTION_BOUND = 1e-3


@functools.lru_cache(maxsize=1)
def golden_bytes():
    return np.load(GOLDEN_DIR / "golden_small.npz")


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
        assert codes_exact, f"codes differ on a path docs/spec.md §1.1 calls exact ({diff} of {n}, largest {worst} steps)"
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
