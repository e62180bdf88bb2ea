"""Every op on a GPU that is not the current device: the outputs stay on the input's device and hold
the same bytes as the same call on the first GPU. This is what the launchers' device guard, their
current stream and their per-device caches (SM count, PTX version, occupancy) must get right, with
and without PDL, with clusters of blocks (the fused op's small calls), and captured in a CUDA graph on
the second device (a launch on another device's stream would be missing from the graph).

No machine this project has used so far has two GPUs, so the call builders below also run on the CPU
(test_builders_run_on_cpu, in CI): an API change then breaks them where it is seen, not on the first
two-GPU run."""
import pytest
import torch

import sgl_quant
from reference import FP8
from sgl_quant.testing import make_input, make_masked_m

two_gpus = pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two visible GPUs")

PACKED = dict(column_major_scales=True, scale_tma_aligned=True, scale_ue8m0=True)
COL_TMA = dict(column_major_scales=True, scale_tma_aligned=True, scale_ue8m0=False)
POISON = 0x55


def v2_call(shape, dtype, out, flags, silu=False, experts=None, seed=0):
    """Builder of a per_token_group_quant_8bit_v2 call: (device, pdl) -> (run, outputs, inputs to restore)."""
    def build(device, pdl):
        x = make_input(shape, dtype, seed=seed, device=device)
        masked_m = None if experts is None else make_masked_m(shape[0], shape[1], seed=seed, device=device)
        q_shape = (*shape[:-1], shape[-1] // 2 if silu else shape[-1])
        q = torch.empty(q_shape, dtype=out, device=device)
        s = sgl_quant.create_scale_tensor(q_shape, 128, device, **flags)

        def run():
            sgl_quant.per_token_group_quant_8bit_v2(x, q, s, 128, scale_ue8m0=flags["scale_ue8m0"],
                                                    fuse_silu_and_mul=silu, masked_m=masked_m, enable_pdl=pdl)
        return run, (q, s), ()
    return build


def dsv4_call(t, g, d):
    def build(device, pdl):
        x = make_input((t, g, d), torch.bfloat16, seed=5, device=device)
        q = torch.empty((t, g, d), dtype=FP8, device=device)
        s = torch.empty((g, t, d // 128), dtype=torch.float32, device=device).transpose(0, 1)

        def run():
            torch.ops.sgl_quant.per_token_group_quant_fp8_dsv4(x, q, s, pdl)
        return run, (q, s), ()
    return build


def rmsnorm_call(m, h, dtype, out, flags, normed):
    """The fused op with a residual (updated in place: restored before every run that is compared)."""
    def build(device, pdl):
        x = make_input((m, h), dtype, seed=11, device=device)
        w = make_input((h,), dtype, seed=12, device=device)
        r0 = make_input((m, h), dtype, seed=13, device=device)
        r = r0.clone()
        q = torch.empty((m, h), dtype=out, device=device)
        s = sgl_quant.create_scale_tensor((m, h), 128, device, **flags)
        n = torch.empty((m, h), dtype=dtype, device=device) if normed else None

        def run():
            sgl_quant.rmsnorm_per_token_group_quant_8bit(x, w, q, s, 128, residual=r, output_normed=n,
                                                         scale_ue8m0=flags["scale_ue8m0"], enable_pdl=pdl)
        return run, tuple(t for t in (q, s, r, n) if t is not None), ((r, r0),)
    return build


CALLS = {
    "v2-dense-packed-fp16": v2_call((33, 2048), torch.float16, FP8, PACKED, seed=17),
    "v2-dense-col-tma-4096x7168": v2_call((4096, 7168), torch.bfloat16, FP8, COL_TMA, seed=1),
    "v2-dense-silu-int8-row": v2_call((64, 2 * 4096), torch.bfloat16, torch.int8,
                                      dict(column_major_scales=False, scale_tma_aligned=False, scale_ue8m0=False),
                                      silu=True, seed=2),
    "v2-masked-8-experts": v2_call((8, 64, 2 * 2048), torch.bfloat16, FP8, PACKED, silu=True, experts=True, seed=3),
    "v2-masked-40-experts": v2_call((40, 16, 2 * 1024), torch.bfloat16, FP8, PACKED, silu=True, experts=True, seed=4),
    "dsv4-T4": dsv4_call(4, 8, 4096),
    # the fused op: clusters of 4 blocks per row (M=1, M=64), the two-chunk kernel, the prefetching kernel
    "rmsnorm-M1-cluster": rmsnorm_call(1, 7168, torch.bfloat16, FP8, COL_TMA, normed=False),
    "rmsnorm-M64-normed": rmsnorm_call(64, 7168, torch.bfloat16, FP8, PACKED, normed=True),
    "rmsnorm-M1024-two-chunks": rmsnorm_call(1024, 7168, torch.bfloat16, FP8, COL_TMA, normed=True),
    "rmsnorm-M4096-prefetching": rmsnorm_call(4096, 7168, torch.bfloat16, FP8, COL_TMA, normed=False),
    "rmsnorm-M300-fp16-int8": rmsnorm_call(300, 4096, torch.float16, torch.int8,
                                           dict(column_major_scales=False, scale_tma_aligned=False,
                                                scale_ue8m0=True), normed=True),
}


def as_bytes(t):
    return t.contiguous().view(torch.uint8).cpu()


def poison(outputs, restore):
    """Every output element set to a value no op writes there (rows a masked call skips stay so), and
    the in-place inputs reset."""
    for t in outputs:
        if t.is_contiguous():
            t.view(torch.uint8).fill_(POISON)
        else:  # the column-major scale views
            t.fill_(float("nan") if t.is_floating_point() else 0x55555555)
    for dst, src in restore:
        dst.copy_(src)


def results_on_first_gpu(build, pdl):
    run, outputs, restore = build("cuda:0", pdl)
    poison(outputs, restore)
    run()
    return [as_bytes(t) for t in outputs]


@pytest.mark.gpu
@two_gpus
@pytest.mark.parametrize("pdl", [False, True], ids=["nopdl", "pdl"])
@pytest.mark.parametrize("name", list(CALLS))
def test_second_gpu_same_bytes(name, pdl):
    build = CALLS[name]
    expected = results_on_first_gpu(build, pdl)
    with torch.cuda.device(0):  # the current device is not the input's: the op must switch to it
        run, outputs, restore = build("cuda:1", pdl)
        poison(outputs, restore)
        run()
        torch.cuda.synchronize(1)
        assert all(t.device == torch.device("cuda:1") for t in outputs)
        for i, (t, e) in enumerate(zip(outputs, expected)):
            assert torch.equal(as_bytes(t), e), f"{name}: output {i} differs from the first GPU's"
        assert torch.cuda.current_device() == 0, "the op left the current device changed"


@pytest.mark.gpu
@two_gpus
@pytest.mark.parametrize("name", list(CALLS))
def test_second_gpu_graph_capture(name):
    build = CALLS[name]
    expected = results_on_first_gpu(build, True)
    with torch.cuda.device(1):
        run, outputs, restore = build("cuda:1", True)
        run()  # warm-up outside the capture (first-call caches)
        torch.cuda.synchronize()
        graph = torch.cuda.CUDAGraph()
        poison(outputs, restore)
        with torch.cuda.graph(graph):
            run()
        poison(outputs, restore)  # the capture ran nothing: every byte below comes from the replay
        graph.replay()
        torch.cuda.synchronize()
        for i, (t, e) in enumerate(zip(outputs, expected)):
            assert torch.equal(as_bytes(t), e), f"{name}: output {i} of the graph replay differs"


# On the CPU the three largest calls take seconds each and call nothing that the others do not.
CPU_CALLS = [n for n in CALLS if n not in ("v2-dense-col-tma-4096x7168", "rmsnorm-M1024-two-chunks",
                                           "rmsnorm-M4096-prefetching")]


@pytest.mark.parametrize("name", CPU_CALLS)
def test_builders_run_on_cpu(name):
    """Each builder's call runs on the CPU from poisoned outputs, without and with the PDL flag (which the
    CPU implementation accepts and ignores), and writes the same bytes both times."""
    build = CALLS[name]
    results = []
    for pdl in (False, True):
        run, outputs, restore = build("cpu", pdl)
        poison(outputs, restore)
        run()
        results.append([as_bytes(t) for t in outputs])
    for i, (a, b) in enumerate(zip(*results)):
        assert torch.equal(a, b), f"{name}: output {i} depends on the PDL flag on the CPU"
