"""Benchmark of the fused (add +) RMSNorm -> per-token-group quant op (docs/spec.md §6.5): CUDA-graph
replay (median), launched without and with PDL, against the 7-byte roofline (9 bytes with output_normed),
the two-kernel pair this library can run side by side (a torch.compile'd add + RMSNorm kernel, then
sgl_quant's v2 quant) and the fixed points of FlashInfer's and vLLM's fused kernels for this GPU model
(benchmark/reference_points.py; not runnable here). Each row with a §6.5 target says whether it is met.
Writes rmsnorm.txt, rmsnorm.json, rmsnorm.png. Without a GPU it times the C++ CPU implementation instead
(wall clock, median of 5), beside the eager pair (torch's add + RMSNorm, then sgl_quant's v2 quant).

    python benchmark/bench_rmsnorm_quant.py [--quick] [--out DIR] [--no-baselines] [--hidden 7168,4096]

--hidden picks the row lengths (the fixed points are H=7168's; other real ones: 5120 and 2048 for Qwen3
models, 1536 for DeepSeek-V3's q_a_layernorm before q_b_proj).
"""
import argparse
import json
import sys
import time
from pathlib import Path

import torch

import sgl_quant
from bench_per_token_group_quant import (copy_bandwidth_tbs, empty_kernel_us, settle_graph_state, table_cells,
                                         table_header, time_graph_us, wall_us)
from reference_points import FLASHINFER_FUSED_US, FUSED_ANCHOR_H, VLLM_FUSED_US, gpu_model
from sgl_quant.testing import make_input

FP8 = torch.float8_e4m3fn
# docs/spec.md §6.5's roofline targets: M -> % of the roofline of the bytes moved (7 or 9 per element)
ROOFLINE_TARGET_PCT = {4096: 92, 16384: 95}


def cases(quick, hidden):
    ms = (1, 64, 256, 1024, 4096, 16384)
    out = []
    for h in hidden:
        for dtype in ((torch.bfloat16,) if quick else (torch.bfloat16, torch.float16)):
            for normed in (False, True):
                if quick and h != FUSED_ANCHOR_H and normed:
                    continue
                for m in ms:
                    out.append(dict(m=m, h=h, dtype=dtype, normed=normed,
                                    name=f"rmsnorm-M{m}-H{h}-{'bf16' if dtype == torch.bfloat16 else 'fp16'}"
                                         f"{'-normed' if normed else ''}"))
    return out


def min_bytes(c):
    """Read x and residual, write residual and codes (and normed), plus the scales: 7 (9) bytes per element."""
    m, h = c["m"], c["h"]
    return m * h * (9 if c["normed"] else 7) + m * (h // 128) * 4


def inputs(c, device="cuda"):
    """x, weight (around 1), residual, codes and column-major TMA fp32 scales for case c."""
    m, h, dt = c["m"], c["h"], c["dtype"]
    x = make_input((m, h), dt, seed=1, device=device)
    w = (make_input((h,), dt, seed=2, device=device).float() * 64 + 1).to(dt)
    r = make_input((m, h), dt, seed=3, device=device)
    q = torch.empty(m, h, dtype=FP8, device=device)
    s = sgl_quant.create_scale_tensor((m, h), 128, device, True, True, False)
    return x, w, r, q, s


def build(c, pdl, device="cuda"):
    x, w, r, q, s = inputs(c, device)
    n = torch.empty_like(x) if c["normed"] else None
    # The residual is updated in place on every call (as in a model), so repeated calls see changing data.
    return lambda: sgl_quant.rmsnorm_per_token_group_quant_8bit(x, w, q, s, 128, 1e-6, residual=r, output_normed=n,
                                                                enable_pdl=pdl)


def add_rmsnorm(x, r, w):
    z = x.float() + r.float()
    r.copy_(z.to(r.dtype))
    return (z * torch.rsqrt(z.square().mean(-1, keepdim=True) + 1e-6)).to(x.dtype) * w


def build_pair(c):
    """The two-kernel producer: one torch.compile'd add + RMSNorm kernel (11 bytes per element with the
    quant's read) and sgl_quant's v2 quant of its output."""
    x, w, r, q, s = inputs(c)
    compiled = torch.compile(add_rmsnorm, dynamic=False)

    def run():
        sgl_quant.per_token_group_quant_8bit_v2(compiled(x, r, w), q, s, 128, enable_pdl=False)
    return run


def bench(quick, baselines, hidden):
    torch._dynamo.config.cache_size_limit = 256
    dev = torch.cuda.get_device_name()
    model = gpu_model(dev)
    settle_graph_state()
    bw = copy_bandwidth_tbs()
    empty = empty_kernel_us()
    print(f"device: {dev}; copy bandwidth {bw:.3f} TB/s; empty kernel {empty if empty is None else round(empty, 2)} µs",
          flush=True)
    print(table_header(COLUMNS), flush=True)
    rows = []
    for c in cases(quick, hidden):
        r = dict(name=c["name"], m=c["m"], h=c["h"], normed=c["normed"], dtype=str(c["dtype"]).split(".")[-1],
                 bytes=min_bytes(c))
        r["us"] = time_graph_us(build(c, False))
        r["us_pdl"] = time_graph_us(build(c, True))
        r["roofline_us"] = r["bytes"] / (bw * 1e12) * 1e6
        r["roofline_pct"] = 100 * r["roofline_us"] / r["us"]
        r["roofline_pct_pdl"] = 100 * r["roofline_us"] / r["us_pdl"]
        if baselines and not c["normed"] and c["dtype"] == torch.bfloat16:
            r["pair_us"] = time_graph_us(build_pair(c))
        if c["h"] == FUSED_ANCHOR_H and c["dtype"] == torch.bfloat16:
            r["flashinfer_us"], r["flashinfer_pdl_us"] = FLASHINFER_FUSED_US.get(model, {}).get(c["m"], (None, None))
            r["vllm_us"] = VLLM_FUSED_US.get(model, {}).get(c["m"])
        rows.append(r)
        print(format_row(r), flush=True)
    return dict(device=dev, copy_tbs=bw, empty_kernel_us=empty, rows=rows)


def bench_cpu(quick, hidden):
    """The C++ CPU implementation (wall clock, median of 5) and the eager pair on the CPU, bf16."""
    print(f"no CUDA device: timing the C++ CPU implementation ({torch.get_num_threads()} threads; wall clock, "
          "median of 5)", flush=True)
    print(table_header(CPU_COLUMNS), flush=True)
    rows = []
    for h in hidden:
        for m in (1, 64, 1024) + (() if quick else (4096,)):
            c = dict(m=m, h=h, dtype=torch.bfloat16, normed=False, name=f"rmsnorm-M{m}-H{h}-bf16")
            x, w, r, q, s = inputs(c, "cpu")

            def pair():
                sgl_quant.per_token_group_quant_8bit_v2(add_rmsnorm(x, r, w), q, s, 128)
            row = dict(name=c["name"], m=m, h=h, normed=False, dtype="bfloat16", bytes=min_bytes(c),
                       us=wall_us(build(c, False, "cpu")), pair_us=wall_us(pair))
            row["ns_per_element"] = row["us"] * 1e3 / (m * h)
            rows.append(row)
            print(format_row(row, CPU_COLUMNS), flush=True)
    return dict(device=f"CPU ({torch.get_num_threads()} threads)", copy_tbs=None, rows=rows)


COLUMNS = [("name", "case", "{:<32}"), ("us", "µs", "{:>8.2f}"), ("us_pdl", "µs PDL", "{:>8.2f}"),
           ("roofline_us", "roof µs", "{:>8.2f}"), ("roofline_pct", "%roof", "{:>6.1f}"),
           ("roofline_pct_pdl", "%roof PDL", "{:>9.1f}"), ("pair_us", "pair µs", "{:>8.2f}"),
           ("flashinfer_us", "FI µs*", "{:>7.2f}"), ("flashinfer_pdl_us", "FI PDL*", "{:>7.2f}"),
           ("vllm_us", "vLLM*", "{:>7.2f}")]
# The CPU implementation's table (wall clock): ours and the eager pair, none of the GPU columns.
CPU_COLUMNS = [("name", "case", "{:<32}"), ("us", "µs", "{:>10.2f}"), ("ns_per_element", "ns/elem", "{:>8.3f}"),
               ("pair_us", "pair µs", "{:>10.2f}")]


def spec_targets(r):
    """docs/spec.md §6.5's targets for row r, as [(what, met)]: against FlashInfer's fixed point of this GPU
    model, in each launch mode it was timed (with output_normed: no slower; without it, from M = 1024 on:
    at most 0.85x its time); the roofline of the bytes moved at M = 4096 and 16384 (with PDL, the
    wrappers' default)."""
    out = []
    fi = [(r[ours], r[ref]) for ours, ref in (("us", "flashinfer_us"), ("us_pdl", "flashinfer_pdl_us")) if r.get(ref)]
    if fi and r["normed"]:
        out.append(("<= FlashInfer", all(ours <= ref for ours, ref in fi)))
    elif fi and r["m"] >= 1024:
        out.append(("<= 0.85x FlashInfer", all(ours <= 0.85 * ref for ours, ref in fi)))
    if r["m"] in ROOFLINE_TARGET_PCT and r.get("roofline_pct_pdl"):
        pct = ROOFLINE_TARGET_PCT[r["m"]]
        out.append((f">= {pct}% roofline", r["roofline_pct_pdl"] >= pct))
    return out


def format_row(r, columns=COLUMNS):
    notes = [f"target {what}: {'MET' if met else 'MISSED'}" for what, met in (spec_targets(r) if columns is COLUMNS else [])]
    if r.get("pair_us"):
        notes.append(f"pair/ours={r['pair_us'] / r['us']:.2f}x")
    return (table_cells(r, columns) + "  " + "  ".join(notes)).rstrip()


def plot(result, path):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    fig, ax = plt.subplots(figsize=(7.5, 4.8))
    hidden = sorted({r["h"] for r in result["rows"]}, reverse=True)
    styles = dict(zip(hidden, ["-", "--", ":", "-."] * len(hidden)))
    series = [("us_pdl", "sgl_quant fused, PDL", "C0"), ("us", "sgl_quant fused, no PDL", "C1"),
              ("pair_us", "torch.compile add+RMSNorm + sgl_quant v2", "C2"),
              ("roofline_us", "7-byte roofline", "0.5"), ("flashinfer_us", "FlashInfer fused, with normed (fixed point)", "C3"),
              ("vllm_us", "vLLM fused (fixed point)", "C4")]
    for h, ls in styles.items():
        rows = sorted((r for r in result["rows"] if r["h"] == h and not r["normed"] and r["dtype"] == "bfloat16"),
                      key=lambda r: r["m"])
        for key, label, color in series:
            pts = [(r["m"], r[key]) for r in rows if r.get(key)]
            if pts:
                ax.plot(*zip(*pts), ls, color=color, marker="o" if "fixed point" not in label else "x",
                        label=f"{label}, H={h}")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_ylim(bottom=0.5)  # the roofline of small M is far below any launch: left off the scale
    ax.set_xlabel("M (tokens); bf16 -> fp8, group 128, residual, column-major TMA fp32 scales")
    ax.set_ylabel("µs per call (CUDA graph replay, median)")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=6.5)
    ax.set_title(f"fused add + RMSNorm -> quant on {result['device']}")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    return True


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="bf16 only; output_normed at H=7168 only")
    ap.add_argument("--hidden", default="7168,4096", help="comma-separated row lengths H (multiples of 128)")
    ap.add_argument("--out", default="bench_out")
    ap.add_argument("--no-baselines", action="store_true", help="skip the torch.compile'd two-kernel pair")
    args = ap.parse_args(argv)
    hidden = tuple(int(h) for h in args.hidden.split(","))
    if any(h <= 0 or h % 128 for h in hidden):
        ap.error(f"--hidden: every H must be a positive multiple of 128 (the group size), got {args.hidden}")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    gpu = torch.cuda.is_available()
    result = bench(args.quick, not args.no_baselines, hidden) if gpu else bench_cpu(args.quick, hidden)
    result["date"] = time.strftime("%Y-%m-%d")
    result["build_info"] = sgl_quant.build_info()
    (out / "rmsnorm.json").write_text(json.dumps(result, indent=1))
    columns = COLUMNS if gpu else CPU_COLUMNS
    lines = [f"{result['date']} {result['device']}" + (f", copy {result['copy_tbs']:.3f} TB/s" if gpu else ""),
             table_header(columns)]
    lines += [format_row(r, columns) for r in result["rows"]]
    if gpu:
        lines.append("* FlashInfer / vLLM fused add + RMSNorm + FP8 block quant (FlashInfer's always writes the normed "
                     "output): fixed points of this GPU model (benchmark/reference_points.py), not measured in this run")
        plot(result, out / "rmsnorm.png")
    else:
        lines.append("wall clock, median of 5 calls after a warm-up; pair: torch eager add + RMSNorm, then "
                     "sgl_quant's v2 quant, on the CPU")
    (out / "rmsnorm.txt").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
