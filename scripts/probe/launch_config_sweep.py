"""Launch shapes through the benchmarking hook sgl_quant._C._set_launch_config (no rebuild): each case
under a few shapes, without and with PDL, median of three CUDA graphs (the benchmarks' timing, after
their settle step). Session 11's runs: benchmark/results/probe/h200-2026-12-01-s11-*.txt.

    python scripts/probe/launch_config_sweep.py v2    # masked 8x512 / 32x256 block sizes, small dense calls
    python scripts/probe/launch_config_sweep.py rms   # the fused op's grid cap (waves) at M = 1024 ... 16384
    python scripts/probe/launch_config_sweep.py masked  # masked block sizes over every masked shape, decode-sized counts too
    python scripts/probe/launch_config_sweep.py rms-cluster  # the fused op's blocks per row at M = 64 ... 1024, normed or not
    python scripts/probe/launch_config_sweep.py rms-small    # blocks per row 1, 2, 4, 8 at M = 1 ... 256 (session 26)
    python scripts/probe/launch_config_sweep.py rms-rule     # blocks per row 1, 2, 4 around the rule's edges, H = 2048 ... 7168
    python scripts/probe/launch_config_sweep.py rms-auto     # the automatic choice (0) against 1, 2, 4 up to H = 16384
    python scripts/probe/launch_config_sweep.py rms-cases 64:16384,48:16384 2,4  # given M:H cases and clusters
    python scripts/probe/launch_config_sweep.py masked-pdl  # masked grids of 1 ... 64 waves (PDL trigger at the start or not)
"""
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmark"))
import bench_per_token_group_quant as v2  # noqa: E402
import bench_rmsnorm_quant as rms  # noqa: E402
import torch  # noqa: E402
from sgl_quant import _C  # noqa: E402
from sgl_quant.testing import LAUNCH_FIELDS, launch_config  # noqa: E402


def timed(build, shape):
    """Median µs of three graphs of build() under launch config `shape`, then back to the defaults."""
    with launch_config(*shape):
        fn = build()
        return statistics.median(v2.time_graph_us(fn) for _ in range(3))


def both_modes(label, build_for_pdl, shape):
    no_pdl = timed(lambda: build_for_pdl(False), shape)
    pdl = timed(lambda: build_for_pdl(True), shape)
    print(f"{label:60s} noPDL {no_pdl:8.3f}  PDL {pdl:8.3f}", flush=True)


def masked_cases(full, decode):
    """Masked cases of the benchmark's form: (experts, rows) with every row valid, and decode-sized (at most
    7 valid rows per expert)."""
    return [v2.masked_case(e, r) for e, r in full] + [v2.masked_case(e, r, 7) for e, r in decode]


def masked_field_sweep(d, cases, field, name, values):
    """Each masked case (fused SiLU) with one field of the launch shape (LAUNCH_FIELDS[field], `name` in the
    printed label) set to each of `values`, the others at the defaults `d`."""
    for c in cases:
        label = f"{c['name']} valid rows {int(v2.masked_counts(c).clamp(0, c['rows']).sum())}"
        for value in values:
            shape = list(d[:4])
            shape[field] = value
            both_modes(f"{label} {name} {value}", lambda pdl, c=c: v2.build(c, "cuda", pdl), tuple(shape))


def masked_sweep(d):
    """Block sizes of the masked kernels (the automatic choice: 256 threads) on the benchmark's masked
    shapes and counts, two more shapes, and decode-sized counts."""
    cases = masked_cases(((8, 512), (32, 256), (256, 128), (8, 128), (32, 1024)), ((8, 512), (32, 256), (256, 128)))
    masked_field_sweep(d, cases, LAUNCH_FIELDS.index("block_threads"), "threads", (0, 64, 96, 128, 192, 512))


def masked_waves_sweep(d):
    """Masked grids capped at 1, 2, 4 or 64 waves of resident blocks. A capped grid with PDL triggers the
    next launch at its start (KernelArgs::trigger_at_start); an uncapped one after its wait. Session 47's H100
    runs read masked 32 x 256 slower with PDL than without (14.4-14.6 against 12.7-13.3 us); the H200 not."""
    cases = masked_cases(((8, 512), (32, 256), (256, 128)), ((8, 512), (32, 256)))
    masked_field_sweep(d, cases, LAUNCH_FIELDS.index("masked_waves"), "masked_waves", (1, 2, 4, 64))


def cluster_sweep(d, cases, clusters):
    """The fused op (bf16, group 128) on (M, H, normed) cases, under each number of blocks per row."""
    for m, h, normed in cases:
        c = dict(m=m, h=h, dtype=torch.bfloat16, normed=normed)
        for cluster in clusters:
            both_modes(f"rmsnorm M={m} H={h} normed={normed} cluster {cluster}",
                       lambda pdl, c=c: rms.build(c, pdl), (d[0], d[1], d[2], cluster))


def main(which):
    v2.settle_graph_state()
    d = _C._launch_config()  # [block_threads, waves, masked_waves, rmsnorm_cluster, rmsnorm_stages]
    print("defaults", d, flush=True)
    if which == "masked":
        masked_sweep(d)
    elif which == "masked-pdl":
        masked_waves_sweep(d)
    elif which == "rms-cluster":
        cluster_sweep(d, [(m, 7168, normed) for m in (64, 128, 256, 512, 1024) for normed in (False, True)], (0, 1, 2, 4))
    elif which == "rms-small":  # session 26, against the rule of before (4 while 4M <= SMs, then 2)
        cases = [(m, 7168, normed) for m in (1, 32, 64, 128, 256) for normed in (False, True)]
        cluster_sweep(d, cases + [(1, 4096, False), (64, 4096, False)], (1, 2, 4, 8))
    elif which == "rms-rule":
        cases = [(m, 7168) for m in (16, 48, 64, 66, 67, 80, 96, 112)]
        cases += [(m, 4096) for m in (1, 8, 16, 32, 48, 64)] + [(1, 5120), (32, 5120), (1, 2048), (16, 2048)]
        cluster_sweep(d, [(m, h, False) for m, h in cases], (1, 2, 4))
    elif which == "rms-auto":
        cases = [(1, 16384), (64, 16384), (96, 16384), (64, 8192), (96, 8192), (99, 7168), (100, 7168),
                 (66, 4096), (67, 4096), (96, 4096), (33, 6144)]
        cluster_sweep(d, [(m, h, False) for m, h in cases], (0, 1, 2, 4))
    elif which == "rms-cases":
        cases = [tuple(int(v) for v in case.split(":")) + (False,) for case in sys.argv[2].split(",")]
        cluster_sweep(d, cases, [int(v) for v in sys.argv[3].split(",")])
    elif which == "v2":
        masked = [c for c in v2.cases(True) if c["kind"] == "masked" and c["e"] in (8, 32) and "decode" not in c["name"]]
        for c in masked:
            for threads, masked_waves in ((0, 1), (64, 1), (96, 1), (128, 1), (160, 1), (192, 1), (512, 1), (0, 2), (0, 4)):
                both_modes(f"{c['name']} threads {threads} masked_waves {masked_waves}",
                           lambda pdl, c=c: v2.build(c, "cuda", pdl), (threads, d[1], masked_waves, d[3]))
        dense = [v2.dense_case(1, 4096), v2.dense_case(8, 4096), v2.dense_case(1, 7168),
                 v2.dense_case(64, 4096, "col_ue8m0"), v2.dense_case(256, 7168, "col_ue8m0")]
        for c in dense:
            for threads in (0, 64, 128, 256, 512):
                both_modes(f"{c['name']} threads {threads}", lambda pdl, c=c: v2.build(c, "cuda", pdl),
                           (threads, d[1], d[2], d[3]))
    else:
        for h in (7168, 4096):
            for m in (1024, 4096, 16384):
                c = dict(m=m, h=h, dtype=torch.bfloat16, normed=False)
                for waves in (8, 16, 32, 64):
                    both_modes(f"rmsnorm M={m} H={h} waves {waves}", lambda pdl, c=c: rms.build(c, pdl),
                               (d[0], waves, d[2], d[3]))


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "v2")
