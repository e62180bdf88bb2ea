"""Benchmark of per-token and per-tensor quantization (docs/spec.md §8.4): CUDA-graph replay (median), launched
without and with PDL, against the roofline of the bytes moved (read the input once, write codes and scales;
dynamic per-tensor: read it twice) and the v2 per-token-group kernel (group 128, row-major fp32 scales) on the
same shape; and the fused (add +) RMSNorm fronts (per-token, static per-tensor; with and without residual)
against theirs (7 bytes per element with residual, 3 without). Each row with a §8.4 target says whether it is met. Writes scaled.txt, scaled.json. Without a GPU
it times the C++ CPU implementation instead (wall clock, median of 5).

    python benchmark/bench_scaled_quant.py [--quick] [--out DIR]
"""
import argparse
import json
import sys
import time
from pathlib import Path

import torch

import sgl_quant
from bench_per_token_group_quant import (copy_bandwidth_tbs, settle_graph_state, table_cells, table_header,
                                         time_graph_us, wall_us)
from sgl_quant.testing import make_input

FP8 = torch.float8_e4m3fn
GRANULARITIES = ("token", "tensor_static", "tensor_dynamic", "token_asym")
FUSED = ("rmsnorm_token", "rmsnorm_static")  # the fused RMSNorm fronts
# docs/spec.md §8.4 (the §6.5 targets) for the fused fronts: M -> % of the roofline of the bytes moved
FUSED_ROOFLINE_PCT = {4096: 92, 16384: 95}


def cases(quick):
    out = []
    for h in (4096, 7168):
        for code, granularities in ((FP8, GRANULARITIES[:3]), (torch.int8, ("token",) if quick else GRANULARITIES)):
            for g in granularities:
                for m in (1, 64, 256, 4096, 16384) if quick else (1, 64, 256, 1024, 4096, 16384):
                    out.append(dict(m=m, h=h, code=code, granularity=g, residual=False,
                                    name=f"{g}-M{m}-H{h}-{'fp8' if code == FP8 else 'int8'}"))
    for h in (7168,) if quick else (7168, 4096):
        for g in FUSED:
            for residual in (True, False):
                for m in (1, 64, 256, 1024, 4096, 16384):
                    out.append(dict(m=m, h=h, code=FP8, granularity=g, residual=residual,
                                    name=f"{g}-M{m}-H{h}-fp8{'-residual' if residual else ''}"))
    return out


def min_bytes(c):
    """bf16 input read once (twice for dynamic per-tensor), one byte per code, 4 per scale (and zero point)."""
    m, h = c["m"], c["h"]
    if c["granularity"] in FUSED:  # read x (and residual), write codes (and residual), the scales
        return m * h * (7 if c["residual"] else 3) + (4 * m if c["granularity"] == "rmsnorm_token" else 0)
    reads = 2 if c["granularity"] == "tensor_dynamic" else 1
    per_row = {"token": 4, "token_asym": 8}.get(c["granularity"], 0)
    return m * h * (2 * reads + 1) + m * per_row


def build(c, pdl, device="cuda"):
    m, h, g = c["m"], c["h"], c["granularity"]
    x = make_input((m, h), torch.bfloat16, seed=1, device=device)
    q = torch.empty(m, h, dtype=c["code"], device=device)
    if g in FUSED:
        w = (make_input((h,), torch.bfloat16, seed=2, device=device).float() * 64 + 1).to(torch.bfloat16)
        r = make_input((m, h), torch.bfloat16, seed=3, device=device) if c["residual"] else None
        if g == "rmsnorm_static":
            s = torch.full((1,), 0.01, device=device)
            return lambda: sgl_quant.rmsnorm_per_tensor_quant_8bit(x, w, q, s, residual=r, enable_pdl=pdl)
        s = torch.empty(m, 1, device=device)
        return lambda: sgl_quant.rmsnorm_per_token_quant_8bit(x, w, q, s, residual=r, enable_pdl=pdl)
    if g.startswith("token"):
        s = torch.empty(m, 1, device=device)
        zp = torch.empty(m, 1, dtype=torch.int32, device=device) if g == "token_asym" else None
        return lambda: sgl_quant.per_token_quant_8bit(x, q, s, zp, enable_pdl=pdl)
    s = torch.full((1,), 0.01, device=device)
    static = g == "tensor_static"
    return lambda: sgl_quant.per_tensor_quant_8bit(x, q, s, static, enable_pdl=pdl)


def build_v2(c, pdl):
    m, h = c["m"], c["h"]
    x = make_input((m, h), torch.bfloat16, seed=1, device="cuda")
    q = torch.empty(m, h, dtype=c["code"], device="cuda")
    s = torch.empty(m, h // 128, device="cuda")
    return lambda: sgl_quant.per_token_group_quant_8bit_v2(x, q, s, 128, enable_pdl=pdl)


def spec_targets(r):
    """docs/spec.md §8.4's targets for row r as [(what, met)]: per-token and static per-tensor at least 95% of
    the roofline from M = 4096 on and no slower than v2 (each launch mode) up to M = 256; dynamic per-tensor at
    least 90% of its (two-read) roofline from M = 4096 on and at most 1.5x v2's time at M = 1; the fused fronts at
least 92% of their roofline at M = 4096 and 95% at M = 16384."""
    out = []
    pairs = [(r[a], r[b]) for a, b in (("us", "v2_us"), ("us_pdl", "v2_pdl_us")) if r.get(b)]
    if r["granularity"] in FUSED:
        if r["m"] in FUSED_ROOFLINE_PCT:
            pct = FUSED_ROOFLINE_PCT[r["m"]]
            out.append((f">= {pct}% roofline", r["roofline_pct_pdl"] >= pct))
    elif r["granularity"] == "tensor_dynamic":
        if r["m"] >= 4096:
            out.append((">= 90% roofline", r["roofline_pct_pdl"] >= 90))
        if r["m"] == 1 and pairs:
            out.append(("<= 1.5x v2", all(ours <= 1.5 * v2 for ours, v2 in pairs)))
    else:
        if r["m"] >= 4096:
            out.append((">= 95% roofline", r["roofline_pct_pdl"] >= 95))
        if r["m"] <= 256 and pairs:
            out.append(("<= v2", all(ours <= v2 for ours, v2 in pairs)))
    return out


COLUMNS = [("name", "case", "{:<34}"), ("us", "µs", "{:>8.2f}"), ("us_pdl", "µs PDL", "{:>8.2f}"),
           ("roofline_us", "roof µs", "{:>8.2f}"), ("roofline_pct_pdl", "%roof PDL", "{:>9.1f}"),
           ("v2_us", "v2 µs", "{:>8.2f}"), ("v2_pdl_us", "v2 PDL", "{:>8.2f}")]
CPU_COLUMNS = [("name", "case", "{:<34}"), ("us", "µs", "{:>10.2f}"), ("ns_per_element", "ns/elem", "{:>8.3f}")]


def format_row(r, columns=COLUMNS):
    notes = [f"target {what}: {'MET' if met else 'MISSED'}" for what, met in (spec_targets(r) if columns is COLUMNS else [])]
    return (table_cells(r, columns) + "  " + "  ".join(notes)).rstrip()


def bench(quick):
    dev = torch.cuda.get_device_name()
    settle_graph_state()
    bw = copy_bandwidth_tbs()
    print(f"device: {dev}; copy bandwidth {bw:.3f} TB/s", flush=True)
    print(table_header(COLUMNS), flush=True)
    rows, v2_times = [], {}
    for c in cases(quick):
        r = dict(name=c["name"], m=c["m"], h=c["h"], granularity=c["granularity"], residual=c["residual"],
                 code="fp8" if c["code"] == FP8 else "int8", bytes=min_bytes(c))
        r["us"] = time_graph_us(build(c, False))
        r["us_pdl"] = time_graph_us(build(c, True))
        r["roofline_us"] = r["bytes"] / (bw * 1e12) * 1e6
        r["roofline_pct"] = 100 * r["roofline_us"] / r["us"]
        r["roofline_pct_pdl"] = 100 * r["roofline_us"] / r["us_pdl"]
        key = (c["m"], c["h"], r["code"])
        if c["granularity"] not in FUSED:
            if key not in v2_times:
                v2_times[key] = (time_graph_us(build_v2(c, False)), time_graph_us(build_v2(c, True)))
            r["v2_us"], r["v2_pdl_us"] = v2_times[key]
        rows.append(r)
        print(format_row(r), flush=True)
    return dict(device=dev, copy_tbs=bw, rows=rows)


def bench_cpu(quick):
    print(f"no CUDA device: timing the C++ CPU implementation ({torch.get_num_threads()} threads; wall clock, "
          "median of 5)", flush=True)
    print(table_header(CPU_COLUMNS), flush=True)
    rows = []
    for c in cases(True):
        if c["m"] > (64 if quick else 4096) or c["code"] != FP8 or c["residual"]:
            continue
        r = dict(name=c["name"], m=c["m"], h=c["h"], granularity=c["granularity"], code="fp8",
                 us=wall_us(build(c, False, "cpu")))
        r["ns_per_element"] = r["us"] * 1e3 / (c["m"] * c["h"])
        rows.append(r)
        print(format_row(r, CPU_COLUMNS), flush=True)
    return dict(device=f"CPU ({torch.get_num_threads()} threads)", copy_tbs=None, rows=rows)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="fewer M; int8 per-token only")
    ap.add_argument("--out", default="bench_out")
    args = ap.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    gpu = torch.cuda.is_available()
    result = bench(args.quick) if gpu else bench_cpu(args.quick)
    result["date"] = time.strftime("%Y-%m-%d")
    result["build_info"] = sgl_quant.build_info()
    (out / "scaled.json").write_text(json.dumps(result, indent=1))
    columns = COLUMNS if gpu else CPU_COLUMNS
    lines = [f"{result['date']} {result['device']}" + (f", copy {result['copy_tbs']:.3f} TB/s" if gpu else ""),
             table_header(columns)] + [format_row(r, columns) for r in result["rows"]]
    (out / "scaled.txt").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
