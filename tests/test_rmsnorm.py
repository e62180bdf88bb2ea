"""The fused (add +) RMSNorm -> per-token-group quantization op (docs/spec.md §6): the CPU implementation
against an independent fp32 model of the documented steps and order (same bytes) and fp64 (within one
ulp), consistency with v2, batch invariance, every layout/dtype/group size, non-finite rows; on CUDA
(marked gpu) the same bytes as the CPU, across launch shapes, PDL and graph capture."""
import pytest
import torch

import sgl_quant
from helpers import LAYOUTS, activation_inputs, assert_same_bytes, compare, launch_config, run_rmsnorm, run_v2
from reference import FP8, rmsnorm_exact, rmsnorm_fp64, ulps_apart
from sgl_quant.testing import c_order_copy, make_masked_m

DTYPES = [torch.bfloat16, torch.float16]
GROUP_SIZES = [16, 32, 64, 128, 256]


def make_case(m, h, dtype, seed, with_residual=True, device="cpu"):
    """x, weight, residual (or None): magnitudes spread over several octaves per row, weights around 1."""
    x = activation_inputs((m, h), dtype, seed)
    g = torch.Generator().manual_seed(seed + 1)
    weight = (1 + 0.25 * torch.randn(h, generator=g)).to(dtype)
    residual = activation_inputs((m, h), dtype, seed + 2) if with_residual else None
    return x.to(device), weight.to(device), None if residual is None else residual.to(device)


def check_against_models(x, weight, residual, group_size, out, layout, norm_eps=1e-6):
    """Runs the op on x's device and checks it against the fp32 model (normed and residual: same bytes),
    fp64 (normed within one ulp) and v2 applied to its own normed output on the same device (codes and
    scales: same bytes). Returns the op's outputs."""
    q, s, normed, new_res = run_rmsnorm(x, weight, group_size, out, layout, residual=residual, norm_eps=norm_eps)
    x_cpu, w_cpu = x.cpu(), weight.cpu()
    r_cpu = None if residual is None else residual.cpu()
    want_normed, want_res = rmsnorm_exact(x_cpu, w_cpu, r_cpu, norm_eps)
    assert torch.equal(normed.view(torch.int16), want_normed.view(torch.int16)), \
        f"normed: {int((normed.view(torch.int16) != want_normed.view(torch.int16)).sum())} values differ from the fp32 model"
    if residual is not None:
        assert torch.equal(new_res.view(torch.int16), want_res.view(torch.int16)), "residual differs from T(x + r)"
    ref64 = rmsnorm_fp64(x_cpu, w_cpu, r_cpu, norm_eps)
    finite = ref64.isfinite().all(-1)  # rows with NaN/Inf are checked against the fp32 model above
    far = ulps_apart(normed[finite], ref64[finite].to(x.dtype))
    assert far.numel() == 0 or int(far.max()) <= 1, f"normed is {int(far.max())} ulps from fp64"
    v2 = run_v2(normed.to(x.device), group_size, out, layout)
    assert torch.equal(q.view(torch.uint8), v2[0].view(torch.uint8)), "codes differ from v2 on the normed values"
    assert torch.equal(s.view(torch.uint8), c_order_copy(v2[1]).view(torch.uint8)), \
        "scales differ from v2 on the normed values"
    return q, s, normed, new_res


@pytest.mark.parametrize("with_residual", [True, False], ids=["residual", "no-residual"])
@pytest.mark.parametrize("group_size", GROUP_SIZES)
@pytest.mark.parametrize("layout", list(LAYOUTS))
@pytest.mark.parametrize("out", [FP8, torch.int8], ids=["fp8", "int8"])
@pytest.mark.parametrize("dtype", DTYPES, ids=["bf16", "fp16"])
def test_cpu_matches_models(dtype, out, layout, group_size, with_residual):
    # group counts: one, one past a power of two, and a multiple of 4 that is no power of two
    for i, (m, groups) in enumerate([(1, 1), (5, 5), (3, 12)]):
        seed = 100 * i + group_size + list(LAYOUTS).index(layout)
        x, w, r = make_case(m, groups * group_size, dtype, seed, with_residual)
        check_against_models(x, w, r, group_size, out, layout)


@pytest.mark.parametrize("hidden", [16, 80, 1024, 4096, 7168, 16384, 16400, 20480, 32768])
def test_cpu_hidden_sizes(hidden):
    """Every H up to 32768: powers of two, no power of two, the kernel's one- and two-chunk sides."""
    gs = 16 if hidden % 128 else 128
    x, w, r = make_case(3, hidden, torch.bfloat16, hidden)
    check_against_models(x, w, r, gs, FP8, "col_tma")


def test_output_normed_is_optional():
    """Without output_normed (and in the allocating wrapper) the codes and scales are the same."""
    x, w, r = make_case(9, 2048, torch.bfloat16, 7)
    q, s, normed, res = run_rmsnorm(x, w, 128, FP8, "col_ue8m0", residual=r)
    q2, s2, none, res2 = run_rmsnorm(x, w, 128, FP8, "col_ue8m0", residual=r, with_normed=False)
    assert none is None and torch.equal(q.view(torch.uint8), q2.view(torch.uint8)) and torch.equal(s, s2)
    assert torch.equal(res, res2)
    r3 = r.clone()
    q3, s3, n3 = sgl_quant.rmsnorm_per_token_group_quant_fp8(x, w, 128, residual=r3, column_major_scales=True,
                                                            scale_tma_aligned=True, scale_ue8m0=True,
                                                            return_normed=True)
    assert torch.equal(q3.view(torch.uint8), q.view(torch.uint8)) and torch.equal(n3, normed) and torch.equal(r3, res)
    qi, si = sgl_quant.rmsnorm_per_token_group_quant_int8(x, w, 64)
    q4, s4, n4, _ = run_rmsnorm(x, w, 64, torch.int8, "row")
    assert torch.equal(qi, q4) and torch.equal(si, s4)


def test_batch_invariance_cpu():
    """A row's bytes do not depend on M or on the other rows: alone, in batches of other sizes, permuted."""
    x, w, r = make_case(37, 7168, torch.bfloat16, 3)
    full = run_rmsnorm(x, w, 128, FP8, "col_tma", residual=r)
    perm = torch.randperm(37, generator=torch.Generator().manual_seed(0))
    permuted = run_rmsnorm(x[perm], w, 128, FP8, "col_tma", residual=r[perm])
    for a, b in zip(full, permuted):
        assert torch.equal(a[perm].view(torch.uint8), b.view(torch.uint8))
    for rows in (slice(5, 6), slice(0, 17), slice(20, 37)):
        part = run_rmsnorm(x[rows], w, 128, FP8, "col_tma", residual=r[rows])
        for a, b in zip(full, part):
            assert torch.equal(a[rows].view(torch.uint8), b.view(torch.uint8))


def test_thread_count_invariance_cpu():
    """The CPU implementation splits the rows over torch's intra-op threads (about 16K elements per task):
    the bytes (fused op and v2, every output and the residual update) do not depend on how many there are."""
    before = torch.get_num_threads()
    try:
        for m, h in ((5, 32768), (67, 7168)):
            x, w, r = make_case(m, h, torch.bfloat16, 5)
            runs = {}
            for threads in (1, 2, 5):
                torch.set_num_threads(threads)
                q, s, _ = run_v2(x, 64, torch.int8, "col_tma")
                runs[threads] = (*run_rmsnorm(x, w, 128, FP8, "col_ue8m0", residual=r), q, c_order_copy(s))
            for threads in (2, 5):
                assert_same_bytes(runs[threads], runs[1], f"M={m} H={h}: {threads} threads differ from 1")
    finally:
        torch.set_num_threads(before)


def test_norm_eps_and_quant_eps():
    x, w, r = make_case(4, 512, torch.float16, 9)
    x[1] = 0  # an all-zero row: normed 0, amax = eps
    r[1] = 0
    for norm_eps in (1e-6, 1e-2, 3.0):
        check_against_models(x, w, r, 128, FP8, "row", norm_eps=norm_eps)
    q, s, _, _ = run_rmsnorm(x, w, 128, FP8, "row", residual=r, eps=1e-3)
    assert torch.equal(s[1], torch.full((4,), 1e-3, dtype=torch.float32) * torch.tensor(1 / 448, dtype=torch.float32))


def test_non_finite_rows():
    """The math as written, then docs/spec.md §1.2: NaN anywhere makes the whole row NaN (ss is NaN); an Inf makes
    ss Inf, inv 0, its own value NaN (Inf * 0) and the rest of the row 0."""
    x, w, r = make_case(4, 512, torch.bfloat16, 10)
    x[0, 3] = float("nan")
    x[1, 300] = float("inf")
    r[2, 511] = float("-inf")
    for out in (FP8, torch.int8):
        for layout in ("row", "col_ue8m0"):
            q, s, normed, res = run_rmsnorm(x, w, 128, out, layout, residual=r)
            want_normed, want_res = rmsnorm_exact(x, w, r)
            assert torch.equal(normed.view(torch.int16), want_normed.view(torch.int16))
            assert torch.equal(res.view(torch.int16), want_res.view(torch.int16))
            nan_scale = (s == 0xFF) if s.dtype == torch.uint8 else s.isnan()
            assert bool(nan_scale[0].all()), "a NaN row: every group is non-finite"
            assert nan_scale[1].tolist() == [False, False, True, False] and nan_scale[2].tolist() == [False] * 3 + [True]
            assert not bool(nan_scale[3].any())
            codes = q.view(torch.uint8).reshape(4, 4, 128)
            assert bool((codes[nan_scale] == (0x7F if out == FP8 else 0)).all())
            assert bool((normed[1, :256] == 0).all()) and bool((q[1, :256].float() == 0).all())  # +-0
            v2 = run_v2(normed, 128, out, layout)
            assert torch.equal(q.view(torch.uint8), v2[0].view(torch.uint8))
            assert torch.equal(s.view(torch.uint8), c_order_copy(v2[1]).view(torch.uint8))


def test_strided_input_rows():
    base, w, r = make_case(6, 3 * 1024, torch.bfloat16, 11)
    view = base[:, 1024:2048]
    a = run_rmsnorm(view, w[:1024], 128, FP8, "col_tma", residual=r[:, :1024].contiguous())
    b = run_rmsnorm(view.contiguous(), w[:1024], 128, FP8, "col_tma", residual=r[:, :1024].contiguous())
    for u, v in zip(a, b):
        assert torch.equal(u.view(torch.uint8), v.view(torch.uint8))


def test_empty_batch():
    x = torch.empty(0, 256, dtype=torch.bfloat16)
    q, s = sgl_quant.rmsnorm_per_token_group_quant_fp8(x, torch.ones(256, dtype=torch.bfloat16), 128,
                                                       residual=torch.empty(0, 256, dtype=torch.bfloat16))
    assert q.shape == (0, 256) and s.shape == (0, 2)


# ------------------------------------------------------------------------------------------------ CUDA

def cuda_codes_exact(layout):
    """docs/spec.md §1.1: UE8M0 codes are exact between the CPU op and the fast-math kernel; float-scale codes
    may be one step off where the fast division differs."""
    return LAYOUTS[layout][2]


def check_cuda_equals_cpu(x, w, r, group_size, out, layout, what=""):
    """CPU = CUDA: normed and residual bytes everywhere, codes and scales on UE8M0 paths, elsewhere scales
    exact and codes within docs/spec.md §1.1's one-step bound; and the CUDA codes are v2's on its normed output."""
    gpu = check_against_models(x.cuda(), w.cuda(), None if r is None else r.cuda(), group_size, out, layout)
    cpu = run_rmsnorm(x, w, group_size, out, layout, residual=r)
    assert torch.equal(gpu[2].view(torch.int16), cpu[2].view(torch.int16)), f"{what}: normed differs CPU vs CUDA"
    if r is not None:
        assert torch.equal(gpu[3].view(torch.int16), cpu[3].view(torch.int16)), f"{what}: residual differs"
    valid = torch.ones(x.shape[0], dtype=torch.bool)
    groups = x.shape[0] * x.shape[1] // group_size
    extra = 0.15 * groups if out == torch.int8 and not LAYOUTS[layout][2] else 0  # as in test_gpu.py
    compare(gpu, cpu[:2], valid, codes_exact=cuda_codes_exact(layout), scales_exact=True, max_code_fraction=2e-3,
            extra_allowed=extra, what=what)
    return gpu


@pytest.mark.gpu
@pytest.mark.parametrize("with_residual", [True, False], ids=["residual", "no-residual"])
@pytest.mark.parametrize("group_size", GROUP_SIZES)
@pytest.mark.parametrize("layout", list(LAYOUTS))
@pytest.mark.parametrize("out", [FP8, torch.int8], ids=["fp8", "int8"])
@pytest.mark.parametrize("dtype", DTYPES, ids=["bf16", "fp16"])
def test_cuda_matches_cpu(dtype, out, layout, group_size, with_residual):
    # sub-warp teams (several rows per block), one-warp and multi-warp teams, odd counts
    for i, (m, groups) in enumerate([(1, 1), (70, 3), (9, 56 * 128 // group_size), (33, 20)]):
        seed = 500 + 100 * i + group_size
        x, w, r = make_case(m, groups * group_size, dtype, seed, with_residual)
        check_cuda_equals_cpu(x, w, r, group_size, out, layout, what=f"{m}x{groups * group_size} seed {seed}")
    # the staged kernel (kStaged: rows in shared memory), forced through the launch hook: a block per row of 2048
    x, w, r = make_case(33, 2048, dtype, 900 + group_size, with_residual)
    with launch_config(rmsnorm_stages=2):
        check_cuda_equals_cpu(x, w, r, group_size, out, layout, what="33x2048 staged")


@pytest.mark.gpu
@pytest.mark.parametrize("hidden", [16, 48, 80, 512, 1040, 4096, 7168, 16384, 16400, 20480, 32768])
def test_cuda_hidden_sizes(hidden):
    """Team sizes 1..32 threads, several warps, 1024 threads (H = 16384), and two chunks per thread."""
    gs = 16 if hidden % 128 else 128
    for dtype in DTYPES:
        x, w, r = make_case(5, hidden, dtype, hidden)
        check_cuda_equals_cpu(x, w, r, gs, FP8, "col_ue8m0", what=f"H={hidden}")


@pytest.mark.gpu
def test_cuda_batch_invariance_launch_shapes_and_pdl():
    """The same bytes for every row whatever M, the rows around it, the grid (waves), the cluster of
    blocks sharing a row (1 = none, 2..8; 0 = automatic), the staged kernel's stages (1..3 forced where a
    block takes a row; clusters win; -1 never) and PDL."""
    # 1024 rows of 7168 with output_normed run the staged kernel on an H100 or H200 (`want` never stages),
    # whose blocks loop over rows. 2048 rows of 10240 run two chunks per thread on a grid capped by the
    # waves: under one wave each block takes several rows in turn, so both warp-sum buffers are used. The
    # other calls run one chunk per thread on a block (cluster) per row group, whatever the waves.
    x, w, r = make_case(1024, 7168, torch.bfloat16, 21, device="cuda")
    xs, ws, rs = make_case(300, 256, torch.float16, 22, device="cuda")  # small teams: 8 rows per warp
    # H=2048: one warp per block in clusters of 4; H=16384: 4 warps per block in clusters of 8 (a cluster
    # size whose blocks would not all hold chunks, or exceed 32 warps, becomes the largest that fits)
    x2, w2, r2 = make_case(9, 2048, torch.bfloat16, 23, device="cuda")
    x16, w16, _ = make_case(5, 16384, torch.bfloat16, 24, device="cuda")  # without residual
    x10, w10, r10 = make_case(2048, 10240, torch.bfloat16, 27, device="cuda")

    def run_all(pdl=None):
        return [run_rmsnorm(x, w, 128, FP8, "col_tma", residual=r, enable_pdl=pdl),
                run_rmsnorm(xs, ws, 64, FP8, "row", residual=rs, enable_pdl=pdl),
                run_rmsnorm(x2, w2, 128, torch.int8, "col_ue8m0", residual=r2, enable_pdl=pdl),
                run_rmsnorm(x16, w16, 64, FP8, "row_ue8m0", enable_pdl=pdl),
                run_rmsnorm(x10, w10, 128, FP8, "col_ue8m0", residual=r10, enable_pdl=pdl)]

    with launch_config(rmsnorm_cluster=1, rmsnorm_stages=-1):
        want = run_all()
    for waves, pdl, cluster, stages in ((1, False, 1, 0), (1, True, 0, 0), (3, None, 2, 0), (64, False, 4, 0),
                                        (16, True, 3, 0), (16, False, 7, 0), (2, True, 8, 0), (1, False, 4, 0),
                                        (1, True, 8, 0), (1, None, 2, 0), (64, False, 1, 1), (1, True, 1, 2),
                                        (64, None, 0, 3), (64, True, 2, 2), (3, False, 1, -1)):
        with launch_config(waves=waves, rmsnorm_cluster=cluster, rmsnorm_stages=stages):
            got = run_all(pdl)
        for g, wnt in zip(got, want):
            assert_same_bytes(g, wnt, f"{waves=} {pdl=} {cluster=} {stages=}")
    want = run_all()
    for rows in (slice(7, 8), slice(0, 129), slice(111, 300)):
        part = run_rmsnorm(x[rows], w, 128, FP8, "col_tma", residual=r[rows])
        for a, b in zip(want[0], part):
            assert torch.equal(a[rows].view(torch.uint8), b.view(torch.uint8))


@pytest.mark.gpu
def test_cuda_clusters_at_the_grid_y_limit():
    """Clustered launches run a 2-D grid (cluster, rows): at 65535 rows, gridDim.y's limit, every row is
    written by its cluster; one row more and the launcher runs one block per row. Both give the bytes of
    one block per row."""
    x, w, r = make_case(65536, 1024, torch.bfloat16, 26, device="cuda")  # 64 chunks: clusters of 2
    for m in (65535, 65536):
        got = []
        for cluster in (1, 2):
            with launch_config(rmsnorm_cluster=cluster):
                got.append(run_rmsnorm(x[:m], w, 128, FP8, "col_tma", residual=r[:m], enable_pdl=False))
        assert_same_bytes(*got, f"{m=}")


@pytest.mark.gpu
@pytest.mark.parametrize("m", [400, 900, 2000])
def test_cuda_chunks_per_thread_same_bytes(m):
    """Rows of 7168 run one 16-element chunk per thread, a block per row or a cluster of blocks per row
    for small calls: the same bytes whatever the call's size, and the CPU's."""
    x, w, r = make_case(m, 7168, torch.bfloat16, 25, device="cuda")
    full = run_rmsnorm(x, w, 128, FP8, "col_ue8m0", residual=r)
    for rows in (slice(0, 3), slice(m - 30, m), slice(m // 2, m // 2 + 1)):
        part = run_rmsnorm(x[rows], w, 128, FP8, "col_ue8m0", residual=r[rows])
        cpu = run_rmsnorm(x[rows].cpu(), w.cpu(), 128, FP8, "col_ue8m0", residual=r[rows].cpu())
        for a, b, c in zip(full, part, cpu):
            assert torch.equal(a[rows].view(torch.uint8), b.view(torch.uint8))
            assert torch.equal(b.view(torch.uint8), c.view(torch.uint8))


@pytest.mark.gpu
@pytest.mark.parametrize("m, hidden, stages, with_residual, pdl", [
    (1024, 7168, 0, True, None), (1000, 16384, 1, False, True), (1000, 16384, 3, True, False), (3000, 4096, 2, True, True)])
def test_cuda_staged_calls_same_bytes(m, hidden, stages, with_residual, pdl):
    """Blocks of the staged kernel (kStaged) loop over several rows, reusing their stages (1 stage: every row flips
    its barrier's phase; 1000 rows of 16384: 1024-thread blocks, one per SM, ~8 rows each). 1024 rows of
    7168 with output_normed run it as dispatched on an H200 (stages 0: automatic, 3-5 rounds of resident
    blocks). The bytes equal those of launches that never stage, and the CPU's."""
    x, w, r = make_case(m, hidden, torch.bfloat16, m + hidden, with_residual, device="cuda")
    got = []
    for st in (stages, -1):
        with launch_config(rmsnorm_stages=st):
            got.append(run_rmsnorm(x, w, 128, FP8, "col_ue8m0", residual=r, enable_pdl=pdl))
    assert_same_bytes(*got)
    rows = slice(m - 40, m)  # the last rows: blocks' final passes
    cpu = run_rmsnorm(x[rows].cpu(), w.cpu(), 128, FP8, "col_ue8m0", residual=None if r is None else r[rows].cpu())
    for a, c in zip(got[0], cpu):
        if a is not None:
            assert torch.equal(a[rows].view(torch.uint8), c.view(torch.uint8))


@pytest.mark.gpu
@pytest.mark.parametrize("m, hidden, normed, layout", [(4096, 7168, False, "col_tma"), (4200, 8192, True, "col_ue8m0"),
                                                       (16384, 4096, False, "row_ue8m0"), (5000, 6144, True, "col")])
def test_cuda_prefetching_calls_same_bytes(m, hidden, normed, layout):
    """Long one-chunk calls (H = 4096 ... 8192, at least 8 rounds of resident blocks) run the kernel that
    prefetches the next round's rows into L2: a row's bytes equal those of shorter calls, which run
    clusters of blocks or the plain one-chunk kernel, and the CPU's (docs/spec.md §6.3)."""
    x, w, r = make_case(m, hidden, torch.bfloat16, hidden + m, device="cuda")
    full = run_rmsnorm(x, w, 128, FP8, layout, residual=r, with_normed=normed)
    for rows in (slice(0, 1), slice(m - 64, m), slice(m // 2 - 500, m // 2 + 500)):
        part = run_rmsnorm(x[rows], w, 128, FP8, layout, residual=r[rows], with_normed=normed)
        for a, b in zip(full, part):
            assert (a is None) == (b is None)
            if a is not None:
                assert torch.equal(a[rows].view(torch.uint8), b.view(torch.uint8)), f"rows {rows}"
    rows = slice(m - 37, m)  # the end of the grid, where the last round prefetches nothing
    cpu = run_rmsnorm(x[rows].cpu(), w.cpu(), 128, FP8, layout, residual=r[rows].cpu(), with_normed=normed)
    for a, c in zip(full[2:], cpu[2:]):  # normed, residual: the same bytes
        if a is not None:
            assert torch.equal(a[rows].view(torch.int16), c.view(torch.int16))
    compare([t[rows] for t in full[:2]], cpu[:2], torch.ones(37, dtype=torch.bool), codes_exact=cuda_codes_exact(layout),
            scales_exact=True, max_code_fraction=2e-3, what=f"{m}x{hidden} {layout}")


@pytest.mark.gpu
def test_cuda_non_finite_rows():
    x, w, r = make_case(4, 512, torch.bfloat16, 10)
    x[0, 3] = float("nan")
    x[1, 300] = float("inf")
    r[2, 511] = float("-inf")
    for layout in ("row", "col_ue8m0"):
        check_cuda_equals_cpu(x, w, r, 128, FP8, layout)


@pytest.mark.gpu
def test_cuda_graph_capture_and_pdl_chain():
    """Captured in a graph and replayed: the eager bytes (residual restored before each replay); a
    chain of dependent launches with PDL equals the chain without."""
    x, w, r = make_case(64, 4096, torch.bfloat16, 23, device="cuda")
    res = r.clone()
    eager = sgl_quant.rmsnorm_per_token_group_quant_fp8(x, w, 128, residual=res, column_major_scales=True,
                                                        scale_tma_aligned=True, return_normed=True)
    eager_res = res.clone()
    res.copy_(r)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        out = sgl_quant.rmsnorm_per_token_group_quant_fp8(x, w, 128, residual=res, column_major_scales=True,
                                                          scale_tma_aligned=True, return_normed=True)
    for _ in range(3):
        res.copy_(r)
        out[0].view(torch.uint8).fill_(0x55)
        out[2].fill_(0)
        g.replay()
        torch.cuda.synchronize()
        assert torch.equal(out[0].view(torch.uint8), eager[0].view(torch.uint8)) and torch.equal(out[1], eager[1])
        assert torch.equal(out[2], eager[2]) and torch.equal(res, eager_res)

    def chain(pdl):
        y, resid, outs = x, r.clone(), []
        for _ in range(6):
            q, s, n = sgl_quant.rmsnorm_per_token_group_quant_fp8(y, w, 128, residual=resid, return_normed=True,
                                                                  enable_pdl=pdl)
            y = n
            outs.append(q.view(torch.uint8))
        return torch.stack(outs), resid

    a, b = chain(True), chain(False)
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])


@pytest.mark.gpu
@pytest.mark.parametrize("consumer", ["dense", "masked_silu", "masked_silu_few_rows", "fused"])
def test_pdl_consumer_reads_the_producers_output(consumer):
    """A kernel launched with PDL starts while the kernel before it still runs, and must read its input
    only after the producer's end (griddepcontrol.wait, then coherent loads: the SASS check of
    `make kernel-resources` looks at every kernel). Here the fused op (PDL) writes `normed` over a NaN
    poison and the consumer, queued right behind it with PDL, reads it: v2 dense, v2 masked SiLU over
    the same rows as [E, rows, 2 * 2048] (counts of the benchmark's kind, and a few rows per expert:
    mostly blocks without a task), or the fused op again. The producer's grid (512 rows of 4096, a block
    each) fits in one round of resident blocks, so it lets the consumer launch almost at its own start,
    and the consumer's blocks find room beside it: a load before the wait would read the poison. The
    consumer's bytes must equal the same call made after a synchronization, on fresh inputs each round."""
    e, rows, h = 8, 64, 4096
    m = e * rows
    counts = {"masked_silu": make_masked_m(e, rows, seed=3, device="cuda"),
              "masked_silu_few_rows": torch.tensor([0, 3, 1, 2, 0, 1, 3, 2], dtype=torch.int32, device="cuda")}.get(consumer)

    def consume(normed, w, pdl):
        if consumer == "dense":
            return sgl_quant.per_token_group_quant_fp8(normed, 128, column_major_scales=True, enable_pdl=pdl)
        if consumer == "fused":
            return sgl_quant.rmsnorm_per_token_group_quant_fp8(normed, w, 128, enable_pdl=pdl)
        q, s = sgl_quant.per_token_group_quant_fp8(normed.view(e, rows, h), 128, column_major_scales=True,
                                                   scale_tma_aligned=True, fuse_silu_and_mul=True,
                                                   masked_m=counts, enable_pdl=pdl)
        valid = torch.arange(rows, device="cuda")[None, :] < counts[:, None]  # rows past a count: not written
        return q[valid], s[valid]

    for round_ in range(4):
        x, w, r = make_case(m, h, torch.bfloat16, 60 + round_, device="cuda")
        q = torch.empty((m, h), dtype=FP8, device="cuda")
        s = torch.empty((m, h // 128), dtype=torch.float32, device="cuda")
        normed = torch.full((m, h), float("nan"), dtype=torch.bfloat16, device="cuda")
        sgl_quant.rmsnorm_per_token_group_quant_8bit(x, w, q, s, 128, 1e-6, residual=r, output_normed=normed,
                                                     enable_pdl=True)
        got = consume(normed, w, True)
        torch.cuda.synchronize()
        assert not torch.isnan(normed).any(), "the producer left poison in normed"
        want = consume(normed, w, False)
        torch.cuda.synchronize()
        for a, b in zip(got, want):  # codes, scales (column-major: as bytes in their logical order)
            assert torch.equal(a.contiguous().view(torch.uint8), b.contiguous().view(torch.uint8)), \
                f"round {round_}: the PDL consumer read something else than the final normed"


@pytest.mark.gpu
def test_cuda_mixed_devices_rejected():
    x, w, r = make_case(4, 256, torch.bfloat16, 1, device="cuda")
    op = torch.ops.sgl_quant.rmsnorm_per_token_group_quant_8bit
    q = torch.empty(4, 256, dtype=FP8, device="cuda")
    s = torch.empty(4, 2, device="cuda")
    for args, name in (((x, w.cpu(), r, q, s, None), "weight"), ((x, w, r.cpu(), q, s, None), "residual"),
                       ((x, w, r, q, s, torch.empty(4, 256, dtype=torch.bfloat16)), "output_normed")):
        with pytest.raises(RuntimeError, match=f"{name} must be on the same device as input"):
            op(*args, 128, 1e-6, 1e-10, -448.0, 448.0, False, False)
