"""per_token_group_quant_fp8_dsv4 (docs/spec.md §3.2): equal to v2 UE8M0 on x.reshape(T*G, D) followed by the
exponent -> fp32 conversion and the fp8_einsum layout transpose; contiguous and strided inputs."""
import pytest
import torch

import sgl_quant
from reference import FP8, packed_exponent_bytes
from sgl_quant.testing import make_input

# (T, G, D): T in {0, 1, 7, 10001, 300000}, G in {1, 5, 8, 128}, D in {128, 384, 512, 4096, 7168}
CPU_SHAPES = [(0, 5, 384), (1, 1, 128), (1, 8, 4096), (7, 5, 512), (7, 128, 7168), (10001, 1, 384),
              (300000, 1, 128)]
GPU_SHAPES = CPU_SHAPES + [(0, 8, 7168), (1, 128, 7168), (7, 8, 4096), (10001, 8, 4096), (10001, 5, 512),
                           (300000, 1, 512), (300000, 8, 128)]


def unfused_reference(x):
    """v2 UE8M0 quantization of the flattened rows, exponents -> fp32, then the fp8_einsum layout."""
    t, g, d = x.shape
    flat = x.reshape(t * g, d)
    q, s_packed = sgl_quant.per_token_group_quant_fp8(flat, 128, column_major_scales=True, scale_tma_aligned=True,
                                                      scale_ue8m0=True)
    exps = packed_exponent_bytes(s_packed, d // 128).to(torch.int32) - 127
    s = ((exps + 127) << 23).view(torch.float32).reshape(t, g, d // 128)
    s_layout = torch.empty(g, t, d // 128, dtype=torch.float32).transpose(0, 1)
    s_layout.copy_(s)
    return q.reshape(t, g, d).cpu(), s_layout


def check_dsv4(x):
    t, g, d = x.shape
    q, s = sgl_quant.per_token_group_quant_fp8_dsv4(x)
    assert q.shape == (t, g, d) and q.dtype == FP8 and q.is_contiguous()
    assert s.shape == (t, g, d // 128) and s.dtype == torch.float32
    if t > 1 and g > 1:
        assert s.stride() == (d // 128, t * d // 128, 1)
    rq, rs = unfused_reference(x.contiguous())
    assert torch.equal(q.cpu().view(torch.uint8), rq.view(torch.uint8))
    assert torch.equal(s.cpu(), rs)
    # row-major UE8M0 v2 gives the same values directly
    _, s_row = sgl_quant.per_token_group_quant_fp8(x.reshape(t * g, d), 128, scale_ue8m0=True)
    assert torch.equal(s.cpu().reshape(t * g, d // 128) if s.is_contiguous() else s.cpu().contiguous().reshape(
        t * g, d // 128), s_row.cpu())
    return q, s


def consumer_check(x, q, s):
    """What fp8_einsum with recipe (1, 1, 128) computes: x ≈ q * s per 128-group (fp8 error). In slices of
    T, so that the float temporaries stay small (the GPU tests' workers share one device)."""
    step = max(1, 2**24 // max(1, x[0].numel()))
    for t in range(0, x.shape[0], step):
        xs, qs, ss = x[t:t + step].float(), q[t:t + step], s[t:t + step]
        deq = qs.float() * ss.repeat_interleave(128, -1)
        amax = xs.abs().reshape(*xs.shape[:-1], -1, 128).amax(-1).repeat_interleave(128, -1)
        assert bool(((deq - xs).abs() <= amax * 2.0**-3).all())


def strided(shape, dtype, seed, device):
    t, g, d = shape
    storage = make_input((t, g + 1, d), dtype, seed=seed, device=device)  # up to ~370M values: made where used
    return storage[:, 1:, :]


@pytest.mark.parametrize("strided_input", [False, True], ids=["contiguous", "strided"])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=["bf16", "fp16"])
@pytest.mark.parametrize("shape", CPU_SHAPES, ids=str)
def test_dsv4_cpu(shape, dtype, strided_input):
    x = strided(shape, dtype, 7, "cpu") if strided_input else make_input(shape, dtype, seed=7)
    q, s = check_dsv4(x)
    if x.numel():
        consumer_check(x, q, s)


@pytest.fixture
def release_device_memory():
    """After the test (passed or not), give the cached blocks back to the other workers on this device."""
    yield
    torch.cuda.empty_cache()


@pytest.mark.gpu
@pytest.mark.usefixtures("release_device_memory")
@pytest.mark.parametrize("strided_input", [False, True], ids=["contiguous", "strided"])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=["bf16", "fp16"])
@pytest.mark.parametrize("shape", GPU_SHAPES, ids=str)
def test_dsv4_gpu(shape, dtype, strided_input):
    x = strided(shape, dtype, 9, "cuda") if strided_input else make_input(shape, dtype, seed=9, device="cuda")
    q, s = check_dsv4(x)
    if x.numel():
        consumer_check(x, q, s)
        if x.numel() <= 2**24:
            q_cpu, s_cpu = sgl_quant.per_token_group_quant_fp8_dsv4(x.cpu())  # UE8M0 plain: CPU == CUDA exactly
            assert torch.equal(q.cpu().view(torch.uint8), q_cpu.view(torch.uint8)) and torch.equal(s.cpu(), s_cpu)
