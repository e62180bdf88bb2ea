"""README tables from the benchmarks' JSON results (bench.json of bench_per_token_group_quant.py, rmsnorm.json
of bench_rmsnorm_quant.py, scaled.json of bench_scaled_quant.py, as kept under benchmark/results/<gpu>/), so that
the README shows a run's numbers as the run wrote them:

    python benchmark/readme_tables.py benchmark/results/h100/{bench,rmsnorm,scaled}.json

Prints, per file, a line naming the run (date, GPU, copy bandwidth, source file) and a Markdown table: µs
per call without / with PDL, the share of the copy-bandwidth roofline, the fixed points of the kernels in
use today for that GPU model, and docs/spec.md's targets with their verdicts (the benchmarks' own rules:
spec_target, spec_targets).
"""
import json
import re
import sys
import textwrap
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_per_token_group_quant as v2_bench  # noqa: E402
import bench_rmsnorm_quant as rms_bench  # noqa: E402
import bench_scaled_quant as scaled_bench  # noqa: E402

WIDTH = 105  # the README's line width for the notes under a table
LAYOUT_LABELS = {"col_f32": "", "col_ue8m0": ", packed UE8M0", "row_f32": ", row-major fp32",
                 "row_ue8m0": ", row-major UE8M0"}


def num(v, fmt="{:.2f}"):
    return "" if v is None else fmt.format(v)


def case_label(name):
    """A v2/DSV4 row's name as words: dense-silu-M64-H2048-col_ue8m0 -> "SiLU·mul, M=64, H=2048, packed UE8M0"."""
    m = re.fullmatch(r"dense(-silu)?-M(\d+)-H(\d+)-(\w+)", name)
    if m:
        return f"{'SiLU·mul, ' if m[1] else ''}M={m[2]}, H={m[3]}{LAYOUT_LABELS[m[4]]}"
    m = re.fullmatch(r"masked-silu-E(\d+)x(\d+)(-decode)?-H(\d+)-(\w+)", name)
    if m:
        return (f"masked SiLU·mul, {m[1]} experts × {m[2]} rows{', decode-sized counts' if m[3] else ''}, "
                f"H={m[4]}{LAYOUT_LABELS[m[5]]}")
    m = re.fullmatch(r"dsv4-T(\d+)-G(\d+)-D(\d+)", name)
    if m:
        return f"DSV4, T={m[1]}, {m[2]} heads, D={m[3]}"
    return name


def verdict_cell(targets):
    """"≤ reference: met": docs/spec.md's targets of a row with their verdicts."""
    return "; ".join(f"{what.replace('<=', '≤').replace('>=', '≥')}: {'met' if met else '**missed**'}"
                     for what, met in targets)


def row_order(r):
    """Dense rows by layout, SiLU, H, M; then masked and DSV4 rows in the benchmark's order."""
    if r["kind"] != "dense":
        return (1,)
    layout = r["name"].rsplit("-", 1)[1]
    return (0, "-silu" in r["name"], list(LAYOUT_LABELS).index(layout), r["h"], r["m"])


def v2_table(result):
    lines = ["| case | no PDL | ref¹ | PDL | ref PDL¹ | % roofline (PDL) | target |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    rows = {r["name"]: r for r in result["rows"]}
    for r in sorted(result["rows"], key=row_order):
        if r["name"].startswith("chain10-"):
            continue
        label = case_label(r["name"])
        if r.get("plain_v2_us"):
            label += f" (plain v2 {r['plain_v2_us']:.2f}, unfused {r['unfused_us']:.2f})"
        target = v2_bench.spec_target(r)
        lines.append(f"| {label} | {num(r['us'])} | {num(r.get('ref_us'))} | {num(r.get('us_pdl'))} | "
                     f"{num(r.get('ref_pdl_us'))} | {num(r.get('roofline_pct_pdl'), '{:.0f}')} | "
                     f"{verdict_cell([target] if target else [])} |")
    pdl, nopdl = rows.get("chain10-pdl-M1-H4096"), rows.get("chain10-nopdl-M1-H4096")
    if pdl and nopdl:  # one row: the chain's time in each mode (each a row of its own in the benchmark)
        targets = [t for t in (v2_bench.spec_target(nopdl), v2_bench.spec_target(pdl)) if t]
        met = [all(ok for _, ok in targets)] if targets else []
        lines.append(f"| 10 chained launches, M=1, H=4096 (µs per chain) | {num(nopdl['us'])} | "
                     f"{num(nopdl.get('ref_us'))} | {num(pdl['us'])} | {num(pdl.get('ref_pdl_us'))} | | "
                     f"{verdict_cell([('≤ reference', met[0])] if met else [])} |")
    lines += [""] + textwrap.wrap(
        "¹ sgl-kernel's v2 (the reference kernel): fixed points of this GPU model (benchmark/reference_points.py), not "
        "measured in this run. % roofline: the call's minimum bytes over the run's copy bandwidth; past 100 the data "
        "is L2-resident.", WIDTH)
    return lines


def rms_table(result):
    lines = ["| M | H | output_normed | no PDL | PDL | roofline | % roofline (PDL) | FlashInfer fused² (PDL) | "
             "vLLM fused² | target |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in result["rows"]:
        fi = num(r.get("flashinfer_us")) + (f" ({r['flashinfer_pdl_us']:.2f})" if r.get("flashinfer_pdl_us") else "")
        lines.append(f"| {r['m']} | {r['h']} | {'yes' if r['normed'] else ''} | {num(r['us'])} | {num(r['us_pdl'])} | "
                     f"{num(r['roofline_us'])} | {num(r['roofline_pct_pdl'], '{:.1f}')} | {fi} | "
                     f"{num(r.get('vllm_us'), '{:g}')} | {verdict_cell(rms_bench.spec_targets(r))} |")
    lines += [""] + textwrap.wrap(
        "roofline: 7 bytes per element (read x and residual, write residual and codes; 9 with output_normed) plus the "
        "scales, over the run's copy bandwidth. ² fixed points of this GPU model (benchmark/reference_points.py; "
        "FlashInfer's kernel always writes the normed output), not measured in this run.", WIDTH)
    return lines


SCALED_COLUMNS = [("token", "fp8"), ("tensor_static", "fp8"), ("tensor_dynamic", "fp8"), ("token", "int8")]


def scaled_table(result):
    """One row per (M, H): each granularity's µs without / with PDL, v2's on the same shape, the roofline shares
    (PDL) and the §8.4 targets that are missed (or "met")."""
    lines = ["| M | H | per-token fp8 | static fp8 | dynamic fp8 | per-token int8 | v2, group 128 | % roofline "
             "(PDL)³ | targets |", "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    plain = [r for r in result["rows"] if r["granularity"] not in scaled_bench.FUSED]
    rows = {(r["m"], r["h"], r["granularity"], r["code"]): r for r in plain}
    for m, h in sorted({(r["m"], r["h"]) for r in plain}, key=lambda k: (k[1], k[0])):
        cells, shares, missed, judged, v2 = [], [], [], False, ""
        for granularity, code in SCALED_COLUMNS:
            r = rows.get((m, h, granularity, code))
            cells.append(f"{num(r['us'])} / {num(r['us_pdl'])}" if r else "")
            if r:
                v2 = v2 or f"{num(r.get('v2_us'))} / {num(r.get('v2_pdl_us'))}"
                shares.append(num(r["roofline_pct_pdl"], "{:.0f}"))
                for what, met in scaled_bench.spec_targets(r):
                    judged = True
                    if not met:
                        missed.append(f"{granularity.replace('tensor_', '')} {code} {what.replace('>=', '≥').replace('<=', '≤')}")
        verdict = ("**missed**: " + ", ".join(missed)) if missed else ("met" if judged else "")
        lines.append(f"| {m} | {h} | {' | '.join(cells)} | {v2} | {' / '.join(shares)} | {verdict} |")
    lines += [""] + textwrap.wrap(
        "µs without / with PDL. ³ of the roofline of the bytes moved (read the input once, twice for dynamic "
        "per-tensor; write codes and scales) over the run's copy bandwidth, per column; past 100 the data is "
        "L2-resident. Targets (docs/spec.md §8.4): per-token and static ≥ 95% roofline from M = 4096 and ≤ v2 up "
        "to M = 256; dynamic ≥ 90% from M = 4096 and ≤ 1.5× v2 at M = 1.", WIDTH)
    fused = {(r["granularity"], r["m"], r["h"], r["residual"]): r for r in result["rows"]
             if r["granularity"] in scaled_bench.FUSED}
    if fused:
        lines += ["", "| fused front, fp8 | M | H | with residual | % roofline (PDL)⁴ | without | % roofline (PDL)⁴ | "
                  "targets |", "| --- | --- | --- | --- | --- | --- | --- | --- |"]
        for front, m, h in sorted({k[:3] for k in fused}, key=lambda k: (scaled_bench.FUSED.index(k[0]), k[2], k[1])):
            cells, targets = [], []
            for residual in (True, False):
                r = fused.get((front, m, h, residual))
                cells += [f"{num(r['us'])} / {num(r['us_pdl'])}" if r else "",
                          num(r["roofline_pct_pdl"], "{:.0f}") if r else ""]
                targets += [(f"{what} {'with' if residual else 'without'}", met)
                            for what, met in (scaled_bench.spec_targets(r) if r else [])]
            label = "RMSNorm → per-token" if front == "rmsnorm_token" else "RMSNorm → static per-tensor"
            lines.append(f"| {label} | {m} | {h} | {' | '.join(cells)} | {verdict_cell(targets)} |")
        lines += [""] + textwrap.wrap(
            "⁴ of the bytes moved: 7 per element with residual (read x and residual, write residual and codes), 3 "
            "without, plus the scales, over the run's copy bandwidth.", WIDTH)
    return lines


def render(path):
    result = json.loads(Path(path).read_text())
    rows = result["rows"]
    if not result.get("copy_tbs"):
        raise SystemExit(f"{path}: a CPU run (no copy bandwidth); the README's CPU tables are written by hand")
    head = (f"{result['date']}, {result['device']}, copy {result['copy_tbs']:.2f} TB/s, torch "
            f"{result['build_info'].get('torch_runtime', result['build_info'].get('torch'))}"
            + (f", our times the median of {result['runs']} runs" if result.get("runs", 1) > 1 else "")
            + f" (`{Path(path).as_posix()}`); µs per call")
    if rows and "granularity" in rows[0]:
        table = scaled_table(result)
    elif rows and "roofline_us" in rows[0]:
        table = rms_table(result)
    else:
        table = v2_table(result)
    return [head, ""] + table


def main(argv):
    if len(argv) < 2:
        sys.exit(__doc__)
    out = []
    for path in argv[1:]:
        out += render(path) + [""]
    print("\n".join(out).rstrip())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
