"""Mutation fuzz of the three ops' argument checks (the error contract, docs/spec.md §3.3): a valid call, then up to
three random mutations of its arguments (dtype, shape, rank, strides, device, alignment, an empty slice,
numbers out of range). Every call must either run or raise RuntimeError with an sgl_quant message
(never a crash, a hang or another error); when it runs, nothing is written past its outputs (each output
lies at the start of a poisoned buffer) and no output it took overlaps itself. Seeded: the same calls every
run. test_errors.py names each refusal; this looks for the combinations nobody listed."""
import math
import os
import random
from collections import Counter

import pytest
import torch

import sgl_quant
from helpers import DEVICES, POISON, bits, opcheck, poisoned

OPS = torch.ops.sgl_quant
FP8 = torch.float8_e4m3fn
DTYPES = [torch.bfloat16, torch.float16, torch.float32, FP8, torch.float8_e5m2, torch.int8, torch.uint8, torch.int32,
          torch.int64, torch.float64, torch.bool]
# per device: ~3 s on the CPU here; SGLQ_FUZZ_CALLS sets fewer for runs under compute-sanitizer (gpu_check.sh)
CALLS = int(os.environ.get("SGLQ_FUZZ_CALLS", 3000))
OPCHECKS = 40  # of the mutated calls that run (opcheck takes ~0.1 s a call)


def guarded(shape, dtype, device):
    """A tensor of `shape` at the start of a buffer 64 bytes longer, all of it poisoned; (tensor, buffer)."""
    nbytes = math.prod(shape) * torch.empty((), dtype=dtype).element_size()
    buf = torch.full((nbytes + 64,), POISON, dtype=torch.uint8, device=device)
    return buf[:nbytes].view(dtype).view(shape), buf


def mutate_tensor(t, rng):
    kind = rng.randrange(8)
    if kind == 0:
        return t.to(rng.choice(DTYPES))
    if kind == 1:  # shape mismatch
        return t[..., :-1] if t.dim() and t.shape[-1] > 1 else t.unsqueeze(0)
    if kind == 2:  # another layout or rank
        return t.t() if t.dim() == 2 else t.unsqueeze(-1)
    if kind == 3:  # a device mix
        return t.to("meta")
    if kind == 4:  # flattened
        return t.reshape(-1)
    if kind == 5 and t.dim() and t.shape[-1] >= 2:  # the same values one element further: misaligned rows
        return torch.cat([t, t], -1)[..., 1:1 + t.shape[-1]]
    if kind == 6 and t.numel():  # every element at one address
        return t.as_strided(t.shape, [0] * t.dim())
    return t[:0] if t.dim() else t  # an empty slice


def mutate_number(v, rng):
    if isinstance(v, int):
        return rng.choice([0, -1, 3, 7, 15, 17, 512, 1 << 31, 1 << 62])
    return rng.choice([float("nan"), float("inf"), -float("inf"), 0.0, -1.0, 1e-40, 2.0 ** -101, 1e38, 127.0])


class Call:
    """A call of one op: its arguments and, by index, which are tensors, numbers, outputs it writes and tensors it
    updates in place; `guards`: the poisoned buffers that hold outputs."""

    def __init__(self, name, op, args, tensors, numbers, written, updated=None, guards=None):
        self.name, self.op, self.args, self.tensors, self.numbers = name, op, args, tensors, numbers
        self.written, self.updated, self.guards = written, updated or [], guards or []


def valid_call(rng, device):
    """A valid call of a random op: group size, row count, dtypes, scale layout and options drawn from rng."""
    op = rng.choice(["v2", "v2", "dsv4", "rms", "rms"])
    gs = rng.choice([16, 32, 64, 128, 256])
    m, h = rng.choice([0, 1, 3, 17, 64]), gs * rng.choice([1, 2, 3, 5, 8])
    dtype, codes = rng.choice([torch.bfloat16, torch.float16]), rng.choice([FP8, torch.int8])
    lo, hi = (-448.0, 448.0) if codes == FP8 else (-128.0, 127.0)
    col = rng.random() < 0.5
    tma = col and rng.random() < 0.5
    packed = tma and rng.random() < 0.5  # int32 UE8M0 words; else UE8M0 fp32 scales half the time
    ue8m0 = packed or rng.random() < 0.5
    if op == "dsv4":
        x = torch.randn(m, rng.choice([1, 2, 8]), rng.choice([512, 4096]), device=device).bfloat16()
        q, s = sgl_quant.per_token_group_quant_fp8_dsv4(x)
        return Call(op, OPS.per_token_group_quant_fp8_dsv4, [x, q, s, False], [0, 1, 2], [], [1, 2])
    silu = op == "v2" and rng.random() < 0.3
    masked = op == "v2" and rng.random() < 0.3
    shape = [rng.choice([1, 2, 3]), m, h] if masked else [m, h]
    q, q_buf = guarded(shape, codes, device)
    s = sgl_quant.create_scale_tensor(shape, gs, device, col, tma, packed)
    if op == "v2":
        x = torch.randn(*shape[:-1], 2 * h if silu else h, device=device).to(dtype)
        counts = torch.randint(-3, m + 5, (shape[0],), dtype=torch.int32, device=device) if masked else None
        args = [x, q, s, gs, 1e-10, lo, hi, ue8m0, silu, counts, False]
        return Call(op, OPS.per_token_group_quant_8bit_v2, args, [0, 1, 2, 9], [3, 4, 5, 6], [1, 2], guards=[q_buf])
    x = torch.randn(m, h, device=device).to(dtype)
    weight = torch.randn(h, device=device).to(dtype)
    residual = torch.randn(m, h, device=device).to(dtype) if rng.random() < 0.6 else None
    normed = torch.empty(m, h, dtype=dtype, device=device) if rng.random() < 0.4 else None
    args = [x, weight, residual, q, s, normed, gs, 1e-6, 1e-10, lo, hi, ue8m0, False]
    return Call(op, OPS.rmsnorm_per_token_group_quant_8bit, args, [0, 1, 2, 3, 4, 5], [6, 7, 8, 9, 10], [3, 4, 5],
                updated=[2], guards=[q_buf])


def poison(t):
    """Every byte of t's elements (any strides) set to POISON; False where torch refuses the fill."""
    try:
        bits(t).fill_(int.from_bytes(bytes([POISON]) * t.element_size(), "little"))  # positive: POISON < 0x80
        return True
    except RuntimeError:
        return False


def same_bytes(a, b):
    return a.shape == b.shape and a.dtype == b.dtype and torch.equal(bits(a.contiguous()), bits(b.contiguous()))


def overlaps_itself(t):
    offsets = torch.zeros(t.shape, dtype=torch.int64)
    for d in range(t.dim()):
        shape = [1] * t.dim()
        shape[d] = t.shape[d]
        offsets = offsets + torch.arange(t.shape[d]).view(shape) * t.stride(d)
    return offsets.unique().numel() < t.numel()


def is_tensor(a):
    return isinstance(a, torch.Tensor)


@pytest.mark.parametrize("device", DEVICES)
def test_mutated_calls_run_or_raise_clearly(device):
    seen = Counter()
    for i in range(CALLS):
        rng = random.Random(i)
        call = valid_call(rng, device)
        args = call.args
        mutations = rng.choice([0, 1, 1, 2, 3])
        for _ in range(mutations):
            if call.numbers and rng.random() < 0.3:
                k = rng.choice(call.numbers)
                args[k] = mutate_number(args[k], rng)
            else:
                k = rng.choice(call.tensors)
                if args[k] is not None:
                    args[k] = mutate_tensor(args[k], rng)
        where = f"call {i} ({call.name}, {mutations} mutations)"
        real = all(not is_tensor(a) or a.device.type != "meta" for a in args)
        # outputs poisoned again after the mutations (a mutated output is a new tensor), inputs kept for the twin
        outputs_poisoned = real and all(poison(args[k]) for k in call.written if is_tensor(args[k]))
        before = [a.clone() if is_tensor(a) else a for a in args]
        try:
            call.op(*args)
            ran = True
        except RuntimeError as e:
            assert "sgl_quant" in str(e).splitlines()[0], (where, str(e)[:500])
            ran = False
        assert ran or mutations, f"{where}: a valid call was refused"
        seen["mutated, ran" if mutations and ran else "mutated, refused" if mutations else "valid"] += 1
        for buf in call.guards:
            assert bool((buf[-64:].cpu() == POISON).all()), f"{where}: bytes written past an output"
        if not ran:
            continue
        for k in call.written + call.updated:
            t = args[k]
            if is_tensor(t) and t.device.type != "meta" and t.numel() > 1:
                assert not overlaps_itself(t), f"{where}: an output overlapping itself was taken (argument {k})"
        if mutations and outputs_poisoned and seen["opcheck"] < OPCHECKS and all(
                a.numel() for a in before if is_tensor(a)):
            # registration, fake implementation and schema under the strides the checks let through (not for empty
            # tensors: opcheck's own copies of a [0, H] tensor with a padded row stride fail in torch)
            opcheck(call.op, tuple(a.clone() if is_tensor(a) else a for a in before))
            seen["opcheck"] += 1
        if mutations and outputs_poisoned:
            # the twin: the same call on contiguous copies of the inputs (and of the residual as it was) and fresh
            # contiguous outputs; where the op takes that too, the logical result must be the same bytes
            twin = [a.contiguous() if is_tensor(a) else a for a in before]
            for k in call.written:
                if is_tensor(twin[k]):
                    twin[k] = poisoned(twin[k].shape, twin[k].dtype, device)
            try:
                call.op(*twin)
            except RuntimeError:
                seen["twin refused"] += 1
                continue
            seen["twin compared"] += 1
            for k in call.written + call.updated:
                if is_tensor(args[k]):
                    assert same_bytes(args[k], twin[k]), f"{where}: argument {k} differs from the contiguous call's"
    # the fuzz reaches both sides of the checks (mutated calls that run, e.g. scales with a row stride the ops take,
    # and refusals), and the twins of the calls that ran compare
    assert seen["mutated, ran"] > CALLS // 20 and seen["mutated, refused"] > CALLS // 3, seen
    assert seen["twin compared"] > CALLS // 40 and seen["opcheck"] >= min(OPCHECKS, CALLS // 100), seen
