"""sgl_quant benchmark of the per-token-group ops: CUDA-graph replay timing (median) of the kernels, without
and with PDL, against what can run side by side in one process: the copy bandwidth (the roofline), a
torch.compile'd pure-torch quantizer and a Triton kernel written for this benchmark. The reference kernel
(sgl-kernel's v2) cannot be built here: its fixed points for this GPU model (benchmark/reference_points.py)
stand beside ours, and each row with a docs/spec.md §5 target says whether it is met.

Each row: time (µs), achieved TB/s (minimum bytes / time), % of roofline (minimum bytes / measured copy
bandwidth / time) and ratios to the baselines. Writes a table (stdout and bench.txt), bench.json and
bench.png (time and % roofline vs M). Without a GPU it times the CPU implementation instead.

    python benchmark/bench_per_token_group_quant.py [--quick] [--out DIR] [--no-baselines] [--runs N]
"""
import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import torch

import sgl_quant
from reference_points import V2_REFERENCE_US, gpu_model
from sgl_quant.testing import launch_config, make_input, make_masked_m

FP8 = torch.float8_e4m3fn

LAYOUTS = {  # name -> (column_major_scales, scale_tma_aligned, scale_ue8m0)
    "row_f32": (False, False, False), "col_f32": (True, True, False), "row_ue8m0": (False, False, True),
    "col_ue8m0": (True, True, True),
}


# ------------------------------------------------------------------------------------------------
# Cases


def dense_case(m, h, layout="col_f32", silu=False, dtype=torch.bfloat16):
    return dict(kind="dense", name=f"dense{'-silu' if silu else ''}-M{m}-H{h}-{layout}", m=m, h=h, layout=layout,
                silu=silu, dtype=dtype)


def masked_case(e, rows, max_count=None):
    """Masked fused SiLU, H=2048, packed UE8M0 scales: [e, rows, 2H] with make_masked_m's counts (seed 3)
    of at most max_count valid rows per expert (default: rows; "decode" in the name when fewer)."""
    max_count = rows if max_count is None else max_count
    tag = "" if max_count == rows else "-decode"
    return dict(kind="masked", name=f"masked-silu-E{e}x{rows}{tag}-H2048-col_ue8m0", e=e, rows=rows, h=2048,
                max_count=max_count, layout="col_ue8m0", silu=True, dtype=torch.bfloat16, m=e * rows)


def cases(quick):
    out = []
    hs = (4096, 7168) if quick else (2048, 4096, 7168)
    ms = (1, 64, 1024, 16384) if quick else (1, 8, 64, 256, 1024, 4096, 16384)
    for h in hs:
        for m in ms:
            out.append(dense_case(m, h))
    for extra in ((256, 7168), (4096, 4096), (8, 4096), (8, 7168)):
        if not any(c["m"] == extra[0] and c["h"] == extra[1] for c in out):
            out.append(dense_case(*extra))
    for m, h in ((64, 4096), (64, 7168), (256, 7168), (4096, 4096)):  # packed UE8M0 scales (DeepGEMM SM100)
        out.append(dense_case(m, h, "col_ue8m0"))
    layouts_m = (64, 4096) if quick else (1, 64, 1024, 4096, 16384)
    for layout in ("row_f32", "row_ue8m0", "col_ue8m0"):
        for m in layouts_m:
            if not any(c["name"] == dense_case(m, 7168, layout)["name"] for c in out):
                out.append(dense_case(m, 7168, layout))
    for m in ((64, 4096) if quick else (1, 64, 1024, 4096)):
        out.append(dense_case(m, 2048, "col_ue8m0", silu=True))
    masked = [(256, 128), (32, 256), (8, 512)] if quick else [(e, r) for e in (8, 32, 256) for r in (128, 256, 1024)]
    out += [masked_case(e, rows) for e, rows in masked]
    out += [masked_case(e, rows, 7) for e, rows in ((8, 512), (32, 256))]  # decode-sized MoE
    for t in (1, 64, 4096, 16384):
        out.append(dict(kind="dsv4", name=f"dsv4-T{t}-G8-D4096", t=t, g=8, d=4096, dtype=torch.bfloat16, m=t * 8))
    for pdl in (True, False):
        out.append(dict(kind="chain", name=f"chain10-{'pdl' if pdl else 'nopdl'}-M1-H4096", pdl=pdl, m=1, h=4096,
                        layout="col_f32", dtype=torch.bfloat16))
    return out


def masked_counts(c, device="cpu"):
    """The masked case's valid rows per expert: make_masked_m's counts up to c["max_count"] (seed 3, as the
    reference's fixed points were timed)."""
    return make_masked_m(c["e"], c["max_count"], seed=3, device=device)


def min_bytes(c):
    """Input read once + codes and scales written once (masked: valid rows only)."""
    if c["kind"] == "dsv4":
        rows, h, k, g = c["t"] * c["g"], c["d"], c["d"], c["d"] // 128
        return rows * (2 * k + h + 4 * g)
    h = c["h"]
    k = 2 * h if c.get("silu") else h
    g = h // 128
    s_bytes = 4 * ((g + 3) // 4) if c.get("layout") == "col_ue8m0" else 4 * g
    rows = c["m"]
    if c["kind"] == "masked":
        rows = int(masked_counts(c).clamp(0, c["rows"]).sum())
    per_call = rows * (2 * k + h + s_bytes)
    return per_call * (10 if c["kind"] == "chain" else 1)


def build(c, device, pdl):
    """A no-argument callable running sgl_quant for case c (inputs and outputs preallocated)."""
    dt = c["dtype"]
    if c["kind"] == "dsv4":
        x = make_input((c["t"], c["g"], c["d"]), dt, seed=1, device=device)
        return lambda: sgl_quant.per_token_group_quant_fp8_dsv4(x, enable_pdl=pdl)
    col, tma, ue8m0 = LAYOUTS[c["layout"]]
    h = c["h"]
    k = 2 * h if c.get("silu") else h
    if c["kind"] == "masked":
        x = make_input((c["e"], c["rows"], k), dt, seed=1, device=device)
        masked_m = masked_counts(c, device)
        q_shape = (c["e"], c["rows"], h)
    else:
        x = make_input((c["m"], k), dt, seed=1, device=device)
        masked_m = None
        q_shape = (c["m"], h)
    q = torch.empty(q_shape, dtype=FP8, device=device)
    s = sgl_quant.create_scale_tensor(q_shape, 128, device, col, tma, ue8m0)
    use_pdl = c["pdl"] if c["kind"] == "chain" else pdl

    def run():
        sgl_quant.per_token_group_quant_8bit_v2(x, q, s, 128, scale_ue8m0=ue8m0, fuse_silu_and_mul=c.get("silu", False),
                                                masked_m=masked_m, enable_pdl=use_pdl)
    if c["kind"] == "chain":
        return lambda: [run() for _ in range(10)]
    return run


# ------------------------------------------------------------------------------------------------
# Baselines


def torch_quant(x, group_size: int, ue8m0: bool, silu: bool, col: bool):
    """Pure-torch per-token-group fp8 quantization (compiled with torch.compile as a baseline)."""
    if silu:
        h = x.shape[-1] // 2
        x = (torch.nn.functional.silu(x[..., :h].float()).to(x.dtype) * x[..., h:])
    m, h = x.shape
    v = x.float().view(m, h // group_size, group_size)
    amax = v.abs().amax(-1).clamp(min=1e-10)
    s = amax / 448.0
    if ue8m0:
        s = torch.exp2(torch.ceil(torch.log2(s)))
    q = (v / s.unsqueeze(-1)).clamp(-448.0, 448.0).to(FP8).view(m, h)
    if col:
        s = s.t().contiguous().t()
    return q, s


def empty_kernel_us():
    """Graph-replay time of an empty kernel: the launch floor of this timing method."""
    try:
        import triton
    except ImportError:
        return None

    @triton.jit
    def _empty(x):
        pass
    x = torch.empty(1, device="cuda")
    return time_graph_us(lambda: _empty[(1,)](x))


def make_triton_baseline():
    try:
        import triton
        import triton.language as tl
    except ImportError:
        return None

    @triton.jit
    def _quant_kernel(x_ptr, q_ptr, s_ptr, H, G, x_row_stride, s_row_stride, s_group_stride, rows,
                      GS: tl.constexpr, BLOCK_G: tl.constexpr, SILU: tl.constexpr, UE8M0: tl.constexpr):
        row = tl.program_id(0)
        gb = tl.program_id(1)
        g = gb * BLOCK_G + tl.arange(0, BLOCK_G)
        e = tl.arange(0, GS)
        gmask = g < G
        offs = g[:, None] * GS + e[None, :]
        mask = gmask[:, None]
        base = x_ptr + row.to(tl.int64) * x_row_stride
        v = tl.load(base + offs, mask=mask, other=0.0).to(tl.float32)
        if SILU:
            up = tl.load(base + H + offs, mask=mask, other=0.0).to(tl.float32)
            a = (v / (1.0 + tl.exp(-v))).to(x_ptr.dtype.element_ty).to(tl.float32)
            v = (a * up).to(x_ptr.dtype.element_ty).to(tl.float32)
        amax = tl.maximum(tl.max(tl.abs(v), axis=1), 1e-10)
        s = amax / 448.0
        if UE8M0:
            s = tl.exp2(tl.ceil(tl.log2(s)))
        q = tl.clamp(v / s[:, None], -448.0, 448.0).to(q_ptr.dtype.element_ty)
        tl.store(q_ptr + row.to(tl.int64) * H + offs, q, mask=mask)
        tl.store(s_ptr + row.to(tl.int64) * s_row_stride + g * s_group_stride, s, mask=gmask)

    def run(x, q, s, silu, ue8m0):
        rows, h = q.shape
        g = h // 128
        block_g = 4
        _quant_kernel[(rows, triton.cdiv(g, block_g))](x, q, s, h, g, x.stride(0), s.stride(0), s.stride(1), rows,
                                                        GS=128, BLOCK_G=block_g, SILU=silu, UE8M0=ue8m0,
                                                        num_warps=4)
    return run


# ------------------------------------------------------------------------------------------------
# Timing

# Length of one timed graph replay (ms): its calls share the graph's own launch of a few µs.
GRAPH_MS = 10.0


def time_graph_us(fn, calls_per_graph=None, replays=25, graph_ms=GRAPH_MS):
    """Median µs per call over replays of a CUDA graph holding calls_per_graph calls.

    Each replay's events also hold the graph's own launch (the host's cudaGraphLaunch reaches an idle
    GPU after the start event: several µs), which a graph of few calls spreads over too few of them.
    By default the graph holds as many calls as take about graph_ms (at least 20, at most 5000), as
    triton.testing.do_bench_cudagraph sizes its graph (rep=20 ms), the method of the fixed reference
    points; the launch then adds less than 0.1% to each call."""
    fn()
    torch.cuda.synchronize()
    if calls_per_graph is None:
        per_call = _time_graph_once_us(fn, 20, replays=5)
        calls_per_graph = int(min(5000, max(20, graph_ms * 1e3 / max(per_call, 1e-3))))
    return _time_graph_once_us(fn, calls_per_graph, replays)


def _time_graph_once_us(fn, calls_per_graph, replays):
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, stream=stream):
        for _ in range(calls_per_graph):
            fn()
    # keep the GPU busy ~25 ms first, so that its clocks have ramped up from idle
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < 0.025:
        graph.replay()
        torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    samples = []
    for _ in range(replays):
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        samples.append(start.elapsed_time(end) * 1e3 / calls_per_graph)
    del graph
    return statistics.median(samples)


def settle_graph_state(graphs=4):
    """Builds, replays and drops a few small CUDA graphs before anything is timed. The first graphs of a
    torch process replay small launches faster without PDL than every later graph (v2 M=1: 1.22 then
    1.38 µs on an H200); without this the first cases would be timed in that passing state, and which ones
    would depend on what ran before."""
    x = torch.zeros(1, device="cuda")
    for _ in range(graphs):
        _time_graph_once_us(lambda: x.add_(1), 20, replays=1)


def copy_bandwidth_tbs(nbytes=2 << 30):
    """Device-to-device copy bandwidth, bytes read + written per second (CUDA events, median)."""
    src = torch.empty(nbytes, dtype=torch.uint8, device="cuda").random_()
    dst = torch.empty_like(src)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    samples = []
    for i in range(23):
        start.record()
        dst.copy_(src)
        end.record()
        end.synchronize()
        if i >= 3:
            samples.append(2 * nbytes / (start.elapsed_time(end) * 1e-3) / 1e12)
    del src, dst
    torch.cuda.empty_cache()
    return statistics.median(samples)


def bench_gpu(quick, baselines, runs=1):
    torch._dynamo.config.cache_size_limit = 256  # one compiled baseline per shape
    dev = torch.cuda.get_device_name()
    settle_graph_state()
    bw = copy_bandwidth_tbs()
    empty = empty_kernel_us()
    print(f"device: {dev}; copy bandwidth {bw:.3f} TB/s (2 GiB device-to-device, read+write); empty kernel "
          f"{empty if empty is None else round(empty, 2)} µs under graph replay", flush=True)
    triton_run = make_triton_baseline() if baselines else None

    def time_ours(fn):  # median of `runs` graphs
        return statistics.median(time_graph_us(fn) for _ in range(runs))
    rows = []
    for c in cases(quick):
        r = dict(name=c["name"], kind=c["kind"], m=c.get("m"), h=c.get("h", c.get("d")), bytes=min_bytes(c))
        if c["kind"] == "chain":
            # µs per chain of 10 launches, in the steady state like every other row (many chains per
            # graph); one chain per graph would add the graph's own launch (several µs) to the 10 kernels
            r["us"] = time_ours(build(c, "cuda", None))
        else:
            r["us"] = time_ours(build(c, "cuda", False))
            r["us_pdl"] = time_ours(build(c, "cuda", True))
        r["tbs"] = r["bytes"] / (r["us"] * 1e-6) / 1e12
        r["roofline_pct"] = 100.0 * r["bytes"] / (bw * 1e12) / (r["us"] * 1e-6)
        if r.get("us_pdl"):  # PDL is the wrappers' default on SM90+
            r["roofline_pct_pdl"] = 100.0 * r["bytes"] / (bw * 1e12) / (r["us_pdl"] * 1e-6)
        if c["kind"] == "dsv4":
            r.update(dsv4_baselines(c))
        if baselines and c["kind"] == "dense" and c["layout"] in ("col_f32", "col_ue8m0", "row_f32"):
            col, _, ue8m0 = LAYOUTS[c["layout"]]
            x = make_input((c["m"], 2 * c["h"] if c["silu"] else c["h"]), c["dtype"], seed=1, device="cuda")
            # torch.compile costs seconds per shape: in --quick mode only for the cases with fixed points
            if c["layout"] != "col_ue8m0" and (not quick or c["name"] in V2_REFERENCE_US["H100"]):
                compiled = torch.compile(torch_quant, dynamic=False)
                r["torch_compile_us"] = time_graph_us(lambda: compiled(x, 128, ue8m0, c["silu"], col))
            if triton_run is not None and c["layout"] != "col_ue8m0":
                q = torch.empty(c["m"], c["h"], dtype=FP8, device="cuda")
                s = sgl_quant.create_scale_tensor(q.shape, 128, "cuda", col, col, ue8m0)
                r["triton_us"] = time_graph_us(lambda: triton_run(x, q, s, c["silu"], ue8m0))
        r["ref_us"], r["ref_pdl_us"] = V2_REFERENCE_US.get(gpu_model(dev), {}).get(c["name"], (None, None))
        rows.append(r)
        print(format_row(r), flush=True)
    return dict(device=dev, copy_tbs=bw, empty_kernel_us=empty, runs=runs, rows=rows)


def dsv4_baselines(c):
    """(a) unfused: v2 packed UE8M0 + exponent -> fp32 + layout transpose with torch ops;
    (b) plain v2 quantization (row-major UE8M0 fp32 scales) of the flattened [T*G, D] input."""
    t, g, d = c["t"], c["g"], c["d"]
    x = make_input((t, g, d), c["dtype"], seed=1, device="cuda")
    flat = x.view(t * g, d)
    q = torch.empty(t * g, d, dtype=FP8, device="cuda")
    packed = sgl_quant.create_scale_tensor(q.shape, 128, "cuda", True, True, True)
    s_out = torch.empty(g, t, d // 128, device="cuda").transpose(0, 1)
    s_row = torch.empty(t * g, d // 128, device="cuda")

    def unfused():  # without PDL, like the "µs" column it is compared with
        sgl_quant.per_token_group_quant_8bit_v2(flat, q, packed, 128, scale_ue8m0=True, enable_pdl=False)
        exponent_bytes = packed.contiguous().view(torch.uint8)[:, : d // 128]  # [T*G, D/128], e + 127
        vals = (exponent_bytes.to(torch.int32) << 23).view(torch.float32)  # 2^e as fp32
        s_out.copy_(vals.view(t, g, d // 128))

    def plain():
        sgl_quant.per_token_group_quant_8bit_v2(flat, q, s_row, 128, scale_ue8m0=True, enable_pdl=False)
    return dict(unfused_us=time_graph_us(unfused), plain_v2_us=time_graph_us(plain))


SWEEP_CONFIGS = [(0, 16), (0, 2), (256, 1), (256, 4), (256, 8), (256, 16), (128, 8), (128, 16), (512, 8), (512, 16)]


def sweep_launch_shapes():
    """Time a few cases under several launch shapes (threads per block; waves of resident blocks capping
    the grid, which applies to the masked cases only: dense v2 grids have a block per task group), through
    the test hook, to check the defaults."""
    picks = [dense_case(1, 4096), dense_case(64, 7168), dense_case(1024, 4096), dense_case(4096, 4096),
             dense_case(16384, 7168), dense_case(16384, 7168, "row_f32")]
    picks += [c for c in cases(True) if c["name"] in ("masked-silu-E256x128-H2048-col_ue8m0",
                                                      "masked-silu-E8x512-H2048-col_ue8m0", "dsv4-T4096-G8-D4096")]
    lines = ["launch-shape sweep (µs; columns: threads x waves; 0 = automatic; waves cap masked grids only)",
             f"{'case':<42}" + "".join(f"{f'{t}x{w}':>9}" for t, w in SWEEP_CONFIGS)]
    print(lines[0] + "\n" + lines[1], flush=True)
    for c in picks:
        fn = build(c, "cuda", False)
        times = []
        for threads, waves in SWEEP_CONFIGS:
            with launch_config(block_threads=threads, waves=waves):
                times.append(time_graph_us(fn))
        lines.append(f"{c['name']:<42}" + "".join(f"{t:9.2f}" for t in times))
        print(lines[-1], flush=True)
    return lines


def wall_us(fn, runs=5):
    """Median wall-clock µs of `runs` calls after a warm-up (the CPU implementation's timing)."""
    fn()
    samples = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - t0) * 1e6)
    return statistics.median(samples)


def bench_cpu(quick):
    print("no CUDA device: timing the C++ CPU implementation (wall clock, median of 5)", flush=True)
    print(table_header(CPU_COLUMNS), flush=True)
    rows = []
    for m, h in [(1, 4096), (64, 7168), (1024, 4096)] + ([] if quick else [(4096, 7168)]):
        for layout in ("row_f32", "col_ue8m0"):
            c = dense_case(m, h, layout)
            r = dict(name=c["name"], kind="dense", m=m, h=h, bytes=min_bytes(c), us=wall_us(build(c, "cpu", False)))
            r["ns_per_element"] = r["us"] * 1e3 / (m * h)
            r["gbs"] = r["bytes"] / (r["us"] * 1e-6) / 1e9
            rows.append(r)
            print(format_row(r, CPU_COLUMNS), flush=True)
    return dict(device=f"CPU ({torch.get_num_threads()} threads)", copy_tbs=None, rows=rows)


# ------------------------------------------------------------------------------------------------
# Output


COLUMNS = [("name", "case", "{:<42}"), ("us", "µs", "{:>8.2f}"), ("us_pdl", "µs PDL", "{:>8.2f}"),
           ("tbs", "TB/s", "{:>6.2f}"), ("roofline_pct", "%roof", "{:>6.1f}"), ("roofline_pct_pdl", "%roof PDL", "{:>9.1f}"),
           ("ref_us", "ref µs*", "{:>8.2f}"), ("ref_pdl_us", "ref PDL*", "{:>8.2f}"),
           ("torch_compile_us", "compile µs", "{:>10.2f}"), ("triton_us", "triton µs", "{:>9.2f}"),
           ("unfused_us", "unfused µs", "{:>10.2f}"), ("plain_v2_us", "plainv2 µs", "{:>10.2f}")]
# The CPU implementation's table (wall clock): none of the GPU columns, the rate per element instead.
CPU_COLUMNS = [("name", "case", "{:<42}"), ("us", "µs", "{:>10.2f}"), ("ns_per_element", "ns/elem", "{:>8.3f}"),
               ("gbs", "GB/s", "{:>7.2f}")]


def _width(fmt):
    """Field width of a format such as "{:>9.2f}" -> 9."""
    return int("".join(ch for ch in fmt.split(":")[1] if ch.isdigit() or ch == ".").split(".")[0])


def table_cells(r, columns):
    """Row r's values in the (key, title, format) columns, blank where it has none (this and table_header serve
    both benchmarks)."""
    return " ".join(fmt.format(r[key]) if r.get(key) is not None else " " * _width(fmt) for key, _, fmt in columns)


def table_header(columns):
    return " ".join(title.ljust(_width(fmt)) if fmt.startswith("{:<") else title.rjust(_width(fmt))
                    for _, title, fmt in columns)


# docs/spec.md §5's roofline targets: case -> (% of roofline, in both launch modes or with PDL only)
ROOFLINE_TARGETS = {"dense-M4096-H4096-col_f32": (95, False), "dense-M16384-H7168-col_f32": (97, False),
                    "masked-silu-E256x128-H2048-col_ue8m0": (80, True), "masked-silu-E32x256-H2048-col_ue8m0": (80, True),
                    "masked-silu-E8x512-H2048-col_ue8m0": (80, True)}


def spec_target(r):
    """docs/spec.md §5's target for row r as (what, met), or None: latency-bound rows (M <= 256, the chain)
    no slower than the reference's fixed points of this GPU model in each launch mode timed; the roofline
    targets (PDL is the wrappers' default); DSV4 at most 1.05x plain v2 on the same bytes."""
    name = r["name"]
    if name in ROOFLINE_TARGETS:
        pct, both = ROOFLINE_TARGETS[name]
        got = min(r["roofline_pct"], r["roofline_pct_pdl"]) if both else r["roofline_pct_pdl"]
        return f">= {pct}% roofline", got >= pct
    if name in ("dsv4-T1-G8-D4096", "dsv4-T4096-G8-D4096") and r.get("plain_v2_us"):
        return "<= 1.05x plain v2", r["us"] <= 1.05 * r["plain_v2_us"]
    if (r["kind"] == "chain" or (r["kind"] == "dense" and r["m"] <= 256)) and (r.get("ref_us") or r.get("ref_pdl_us")):
        # (a chain row has one time, "us", in its own launch mode)
        pairs = [(r.get(ours) or r["us"], r[ref]) for ours, ref in (("us", "ref_us"), ("us_pdl", "ref_pdl_us")) if r.get(ref)]
        return "<= reference", all(ours <= ref for ours, ref in pairs)
    return None


def format_row(r, columns=COLUMNS):
    """Row r with its ratios and its docs/spec.md §5 verdict."""
    ratios = []
    if r.get("ref_us") and r.get("us"):
        ratios.append(f"ours/ref={r['us'] / r['ref_us']:.2f}")
    if r.get("ref_pdl_us") and (r.get("us_pdl") or r["kind"] == "chain"):
        ratios.append(f"ours/ref PDL={(r.get('us_pdl') or r['us']) / r['ref_pdl_us']:.2f}")
    for key, label in (("torch_compile_us", "compile"), ("triton_us", "triton"), ("unfused_us", "unfused"),
                       ("plain_v2_us", "plainv2")):
        if r.get(key):
            ratios.append(f"{label}/ours={r[key] / r['us']:.2f}x")
    target = spec_target(r) if columns is COLUMNS else None
    if target:
        ratios.append(f"target {target[0]}: {'MET' if target[1] else 'MISSED'}")
    return (table_cells(r, columns) + "  " + " ".join(ratios)).rstrip()


# Calls whose input and outputs take at most half the H200's 50 MiB L2 run from it when replayed (larger
# ones, up to the whole L2, only partly: M=4096, H=4096 at 50 MB measures as DRAM-bound).
L2_RESIDENT_BYTES = 25 * 2**20


def plot(result, path):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib not installed: no plot", flush=True)
        return False
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.8))
    # one colour per implementation, one line style per H: the same in both panels
    impls = [("us_pdl", "sgl_quant, PDL (default)", "C0"), ("us", "sgl_quant, no PDL", "C1"),
             ("torch_compile_us", "torch.compile", "C2"), ("triton_us", "Triton", "C3")]
    styles = {4096: "-", 7168: "--"}
    l2_m = []
    for h, ls in styles.items():
        series = sorted((r for r in result["rows"] if r["kind"] == "dense" and r["h"] == h
                         and r["name"].endswith("col_f32") and "-silu" not in r["name"]), key=lambda r: r["m"])
        if not series:
            continue
        l2_m += [r["m"] for r in series if r["bytes"] <= L2_RESIDENT_BYTES]
        for key, label, color in impls:
            pts = [(r["m"], r[key]) for r in series if r.get(key)]
            if pts:
                axes[0].plot(*zip(*pts), ls, color=color, marker="o", label=f"{label}, H={h}")
            if result["copy_tbs"] and pts:
                pct = [(r["m"], 100 * r["bytes"] / (result["copy_tbs"] * 1e12) / (r[key] * 1e-6))
                       for r in series if r.get(key)]
                axes[1].plot(*zip(*pct), ls, color=color, marker="o", label=f"{label}, H={h}")
        for key, label, color in (("ref_pdl_us", "reference kernel, PDL (fixed point)", "C4"),
                                  ("ref_us", "reference kernel, no PDL (fixed point)", "C5")):
            ref = [(r["m"], r[key]) for r in series if r.get(key)]
            if ref:
                axes[0].plot(*zip(*ref), ls, color=color, marker="x", label=f"{label}, H={h}")
    if l2_m:  # where input and outputs fit in L2, repeated calls run from it: "% of roofline" can pass 100
        for ax in axes:
            ax.axvspan(min(l2_m) / 1.4, max(l2_m) * 1.4, color="0.9", zorder=0)
        axes[1].text(min(l2_m), 5, "data fits in L2:\n% > 100 is L2 bandwidth,\nnot an error", fontsize=7)
    for ax, ylabel in zip(axes, ("µs per call (CUDA graph replay, median)", "% of copy-bandwidth roofline")):
        ax.set_xscale("log", base=2)
        ax.set_xlabel("M (tokens); bf16 -> fp8, group 128, column-major fp32 scales")
        ax.set_ylabel(ylabel)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=6.5)
    axes[0].set_yscale("log")
    fig.suptitle(f"sgl_quant on {result['device']}")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    return True


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="fewer cases")
    ap.add_argument("--out", default="bench_out", help="folder for bench.json, bench.txt, bench.png")
    ap.add_argument("--no-baselines", action="store_true", help="skip torch.compile and Triton")
    ap.add_argument("--sweep", action="store_true", help="also sweep the CUDA launch shape")
    ap.add_argument("--runs", type=int, default=1, help="time each of our GPU cases N times, report the median")
    args = ap.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    gpu = torch.cuda.is_available()
    columns = COLUMNS if gpu else CPU_COLUMNS
    if gpu:
        print(table_header(COLUMNS), flush=True)
        result = bench_gpu(args.quick, not args.no_baselines, max(1, args.runs))
    else:
        result = bench_cpu(args.quick)
    result["date"] = time.strftime("%Y-%m-%d")
    result["build_info"] = sgl_quant.build_info()
    (out / "bench.json").write_text(json.dumps(result, indent=1))
    lines = [f"{result['date']} {result['device']}" + (f", copy {result['copy_tbs']:.3f} TB/s" if result["copy_tbs"]
                                                       else "")
             + (f", empty kernel {result['empty_kernel_us']:.2f} µs" if result.get("empty_kernel_us") else "")
             + (f", our times: median of {result['runs']} runs" if result.get("runs", 1) > 1 else ""),
             table_header(columns)]
    lines += [format_row(r, columns) for r in result["rows"]]
    if gpu:
        lines.append("* ref: sgl-kernel's v2 (the reference kernel), fixed points of this GPU model "
                     "(benchmark/reference_points.py), not measured in this run")
    else:
        lines.append("wall clock, median of 5 calls after a warm-up; GB/s: the minimum bytes (input read once, codes "
                     "and scales written once) per second")
    if args.sweep and gpu:
        lines += [""] + sweep_launch_shapes()
    (out / "bench.txt").write_text("\n".join(lines) + "\n")
    if result["copy_tbs"]:
        plot(result, out / "bench.png")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
