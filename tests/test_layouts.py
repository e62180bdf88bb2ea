"""Inputs and outputs at any 2-byte-aligned address, output_q with padded rows, and vLLM's packed UE8M0 op (its
padding rows zeroed). Each call with a general layout must give the bytes of the same call on contiguous, aligned
copies (on the GPU the launcher's staged copies, docs/design.md), write nothing outside its result, and (GPU) equal
the CPU implementation's bytes."""
import pytest
import torch

import sgl_quant
from sgl_quant import compat
from helpers import DEVICES, POISON, alloc_scales, assert_same_bytes, bits, ceil4, opcheck, poisoned

FP8 = torch.float8_e4m3fn


def placed(x, offset, pad, poison=0xFF):
    """x's values in a view `offset` elements into a buffer with rows `offset + pad` elements longer, whose other
    bytes are `poison` (0xFF: NaN in bf16, so that a read outside the view shows); returns (view, buffer)."""
    *lead, h = x.shape
    rows = x.reshape(-1, h)
    buf = torch.empty((rows.shape[0], h + offset + pad), dtype=x.dtype, device=x.device)
    buf.view(torch.uint8).fill_(poison)
    view = buf[:, offset:offset + h]
    view.copy_(rows)
    return view.view(*lead, h) if len(lead) != 1 else view, buf


# (input offset, output_q offset, output_q row padding) in elements: vectors (the aligned reference is the
# contiguous call), then rows off 16-byte boundaries (an odd offset or stride) and padded code rows
PLACEMENTS = [(1, 0, 0), (0, 3, 0), (0, 0, 16), (3, 1, 5)]


def run_v2_placed(x, gs, codes, layout, silu, masked_m, placement, device):
    in_off, q_off, q_pad = placement
    h = x.shape[-1] // 2 if silu else x.shape[-1]
    q_shape = (*x.shape[:-1], h)
    xv, _ = placed(x, in_off, 1 if in_off else 0)
    q, q_buf = placed(poisoned(q_shape, codes, device), q_off, q_pad, poison=POISON)
    s, s_buf, ue8m0 = alloc_scales(layout, q_shape, gs, device)
    sgl_quant.per_token_group_quant_8bit_v2(xv, q, s, gs, scale_ue8m0=ue8m0, fuse_silu_and_mul=silu, masked_m=masked_m)
    return q, q_buf, s_buf


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("kind", ["dense", "silu", "masked"])
@pytest.mark.parametrize("layout", ["row", "col_tma", "col_ue8m0"])
@pytest.mark.parametrize("gs", [16, 128])
def test_v2_any_layout(device, kind, layout, gs):
    torch.manual_seed(gs)
    silu, h = kind == "silu", 4 * gs
    shape = (3, 37, h) if kind == "masked" else (70, 2 * h if silu else h)
    x = (torch.randn(shape) * 3).bfloat16().to(device)
    masked_m = torch.tensor([37, 0, 20], dtype=torch.int32, device=device) if kind == "masked" else None
    for codes in (FP8, torch.int8):
        want_q, _, want_s = run_v2_placed(x, gs, codes, layout, silu, masked_m, (0, 0, 0), device)
        for placement in PLACEMENTS:
            q, q_buf, s_buf = run_v2_placed(x, gs, codes, layout, silu, masked_m, placement, device)
            what = f"{kind} {layout} gs={gs} {codes} placement={placement}"
            assert_same_bytes([q, s_buf], [want_q, want_s], what, ["codes", "scale buffer"])
            # the codes' buffer outside the view: untouched (rows past the valid ones as in the aligned call)
            outside = torch.ones_like(q_buf, dtype=torch.bool)
            _, q_off, q_pad = placement
            outside.view(-1, outside.shape[-1])[:, q_off:q_off + q.shape[-1]] = False
            assert bool((bits(q_buf)[outside] == POISON).all()), what + ": codes written outside output_q"
            if device == "cuda" and layout == "col_ue8m0":  # the CPU's bytes (fp32 scales: spec §1.1's bound)
                q_cpu, _, s_cpu = run_v2_placed(x.cpu(), gs, codes, layout, silu,
                                                None if masked_m is None else masked_m.cpu(), placement, "cpu")
                assert_same_bytes([q, s_buf], [q_cpu, s_cpu], what + " (CPU)", ["codes", "scale buffer"])


@pytest.mark.parametrize("device", DEVICES)
def test_dsv4_unaligned_input(device):
    x = (torch.randn(5, 8, 512) * 2).bfloat16().to(device)
    outs = []
    for offset in (0, 1):
        xv = placed(x.reshape(-1, 512), offset, 3 if offset else 0)[0].view(5, 8, 512)
        q = poisoned((5, 8, 512), FP8, device)
        s = torch.empty(8, 5, 4, device=device).transpose(0, 1)
        torch.ops.sgl_quant.per_token_group_quant_fp8_dsv4(xv, q, s)
        outs.append([q, s])
    assert_same_bytes(outs[1], outs[0], "dsv4 unaligned input", ["codes", "scales"])


def run_rmsnorm_placed(op, x, w, r, codes, offset, q_off, q_pad, device):
    """One fused call with every tensor `offset` elements off its buffer's start (codes q_off, rows q_pad
    longer); returns the outputs and the codes' buffer."""
    m, h = x.shape
    xv = placed(x, offset, 1 if offset else 0)[0]
    wv = placed(w[None], offset, 0)[0][0]
    rv = torch.empty(m * h + offset, dtype=r.dtype, device=device)[offset:].view(m, h)
    rv.copy_(r)
    normed = torch.empty(m * h + offset, dtype=x.dtype, device=device)[offset:].view(m, h)
    normed.view(torch.uint8).fill_(POISON)
    q, q_buf = placed(poisoned((m, h), codes, device), q_off, q_pad, poison=POISON)
    if op == "group":
        s = poisoned((m, h // 128), torch.float32, device)
        sgl_quant.rmsnorm_per_token_group_quant_8bit(xv, wv, q, s, 128, 1e-6, residual=rv, output_normed=normed)
    elif op == "token":
        s = poisoned((m, 1), torch.float32, device)
        sgl_quant.rmsnorm_per_token_quant_8bit(xv, wv, q, s, residual=rv, output_normed=normed)
    else:
        s = torch.tensor([0.05], device=device)
        sgl_quant.rmsnorm_per_tensor_quant_8bit(xv, wv, q, s, residual=rv, output_normed=normed)
    return [q, s, rv, normed], q_buf


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("op", ["group", "token", "tensor"])
@pytest.mark.parametrize("m,h", [(5, 256), (70, 2048), (2, 16384), (3, 20480)])
def test_rmsnorm_any_layout(device, op, m, h):
    torch.manual_seed(h)
    x = (torch.randn(m, h) * 2).bfloat16().to(device)
    w = (torch.rand(h) + 0.5).bfloat16().to(device)
    r = torch.randn(m, h).bfloat16().to(device)
    codes = FP8 if op != "token" else torch.int8
    want, _ = run_rmsnorm_placed(op, x, w, r, codes, 0, 0, 0, device)
    names = ["codes", "scales", "residual", "output_normed"]
    for offset, q_off, q_pad in [(1, 0, 0), (0, 3, 0), (0, 0, 32), (3, 1, 7)]:
        got, q_buf = run_rmsnorm_placed(op, x, w, r, codes, offset, q_off, q_pad, device)
        what = f"rmsnorm {op} M={m} H={h} offset={offset} q=({q_off}, {q_pad})"
        assert_same_bytes(got, want, what, names)
        outside = torch.ones_like(q_buf, dtype=torch.bool)
        outside[:, q_off:q_off + h] = False
        assert bool((bits(q_buf)[outside] == POISON).all()), what + ": codes written outside output_q"
        if device == "cuda" and op != "group":  # the CPU's bytes (exact per token / per tensor, spec §8.1)
            got_cpu, _ = run_rmsnorm_placed(op, x.cpu(), w.cpu(), r.cpu(), codes, offset, q_off, q_pad, "cpu")
            assert_same_bytes(got, got_cpu, what + " (CPU)", names)


def packed_call(x, gs, device, fill):
    """The packed op into a scale buffer whose every byte is `fill`; returns (codes, scales, the whole buffer)."""
    m, h = x.shape
    words = (h // gs + 3) // 4
    storage = torch.full(((words - 1) * ceil4(m) + m,), fill, dtype=torch.int32, device=device)
    s = storage.as_strided((m, words), (1, ceil4(m)))
    q = poisoned((m, h), FP8, device)
    sgl_quant.per_token_group_quant_8bit_packed(x, q, s, gs)
    return q, s, storage


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("m", [1, 2, 5, 8, 13, 64, 130])
@pytest.mark.parametrize("gs,h", [(128, 7168), (128, 512), (128, 384), (128, 1280)])
def test_packed_padding_rows(device, m, gs, h):
    torch.manual_seed(m)
    x = (torch.randn(m, h) * 4).bfloat16().to(device)
    q, s, storage = packed_call(x, gs, device, -1)
    words = (h // gs + 3) // 4
    # the result: v2's bytes (the native op into the same layout leaves the padding rows alone)
    want_s, want_buf, _ = alloc_scales("col_ue8m0", (m, h), gs, device)
    want_q = poisoned((m, h), FP8, device)
    sgl_quant.per_token_group_quant_8bit_v2(x, want_q, want_s, gs, scale_ue8m0=True)
    assert_same_bytes([q, s], [want_q, want_s], f"packed M={m}", ["codes", "scales"])
    assert bool((bits(want_buf.transpose(-1, -2)[m:]) == POISON * 0x01010101).all()), "v2 wrote the padding rows"
    # vLLM's buffer: every padding word within the storage is 0 (the last column's padding lies past it)
    stored = storage.cpu()
    for c in range(words):
        rows = stored[c * ceil4(m): c * ceil4(m) + ceil4(m)]
        assert rows.shape[0] == (ceil4(m) if c + 1 < words else m), "storage extent"
        assert bool((rows[m:] == 0).all()), f"column {c}: padding rows not zeroed"
    if device == "cuda":
        q_cpu, s_cpu, storage_cpu = packed_call(x.cpu(), gs, "cpu", -1)
        assert_same_bytes([q, storage], [q_cpu, storage_cpu], f"packed M={m} (CPU)", ["codes", "scale buffer"])


@pytest.mark.parametrize("device", DEVICES)
def test_vllm_packed_compat(device):
    x = (torch.randn(2, 3, 1024) * 3).bfloat16().to(device)
    x_q, x_s = compat.per_token_group_quant_fp8_packed_for_deepgemm(x, 128)
    assert x_q.shape == x.shape and x_q.dtype == FP8
    assert x_s.shape == (6, 2) and x_s.stride() == (1, 8) and x_s.dtype == torch.int32
    q, s, _ = packed_call(x.reshape(6, 1024), 128, device, 0x7f7f7f7f)
    assert_same_bytes([x_q.reshape(6, 1024), x_s], [q, s], "for_deepgemm", ["codes", "scales"])
    assert bool((x_s.as_strided((8,), (1,), 0)[6:] == 0).all()), "padding rows of the first column"
    out = torch.empty(2, 3, 1024, dtype=FP8, device=device)
    assert compat.per_token_group_quant_fp8_packed_for_deepgemm(x, 128, out_q=out)[0].data_ptr() == out.data_ptr()
    s2 = torch.empty_strided((6, 2), (1, 8), dtype=torch.int32, device=device)
    compat.per_token_group_fp8_quant_packed(x, out, s2, 128, 1e-10, -448.0, 448.0)
    assert_same_bytes([out, s2], [x_q, x_s], "per_token_group_fp8_quant_packed", ["codes", "scales"])
    with pytest.raises(ValueError, match="needs UE8M0 scales"):
        compat.per_token_group_quant_fp8_packed_for_deepgemm(x, 128, use_ue8m0=False)


def test_packed_errors():
    x = torch.randn(6, 1024).bfloat16()
    q = torch.empty(6, 1024, dtype=FP8)
    op = sgl_quant.per_token_group_quant_8bit_packed
    with pytest.raises(RuntimeError, match=r"per_token_group_quant_8bit_packed: output_s must have strides "
                                           r"\(1, ceil4\(M\)\) = \(1, 8\)"):
        op(x, q, torch.empty(2, 6, dtype=torch.int32).t(), 128)
    with pytest.raises(RuntimeError, match=r"group_size must be 128 \(as in vLLM's packed op\), got 64"):
        op(x, q, torch.empty(4, 6, dtype=torch.int32).t(), 64)
    with pytest.raises(RuntimeError, match=r"output_s must be int32 \(packed UE8M0 scales\), got Float"):
        op(x, q, torch.empty(6, 8), 128)
    with pytest.raises(RuntimeError, match=r"input must be 2-D \[M, H\], got shape \[2, 3, 1024\]"):
        op(x.view(2, 3, 1024), q.view(2, 3, 1024), torch.empty(2, 3, 2, dtype=torch.int32), 128)


def test_packed_opcheck():
    x = torch.randn(5, 512).bfloat16()
    for codes, lo, hi in ((FP8, -448.0, 448.0), (torch.int8, -128.0, 127.0)):
        s = torch.empty_strided((5, 1), (1, 8), dtype=torch.int32)
        opcheck(torch.ops.sgl_quant.per_token_group_quant_8bit_packed,
                (x, torch.empty(5, 512, dtype=codes), s, 128, 1e-10, lo, hi, False))
