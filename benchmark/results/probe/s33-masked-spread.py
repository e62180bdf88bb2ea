"""Session 33: the same masked kernels timed alternately, PDL and no PDL, 7 rounds (the benchmark's
time_graph_us after settle_graph_state): is masked 256 x 128 with PDL at 44.70 (call 1) code or spread?"""
import statistics
import sys

sys.path.insert(0, "benchmark")
import bench_per_token_group_quant as b  # noqa: E402

b.settle_graph_state()
print(f"copy {b.copy_bandwidth_tbs():.3f} TB/s", flush=True)
names = ["masked-silu-E256x128-H2048-col_ue8m0", "masked-silu-E32x256-H2048-col_ue8m0", "masked-silu-E8x512-H2048-col_ue8m0"]
picked = [c for c in b.cases(True) if c["name"] in names]
fns = {(c["name"], pdl): b.build(c, "cuda", pdl) for c in picked for pdl in (False, True)}
samples = {k: [] for k in fns}
for rnd in range(7):
    for k, fn in fns.items():
        samples[k].append(b.time_graph_us(fn))
    print("round", rnd, " ".join(f"{k[0][12:20]}{'P' if k[1] else 'n'}={samples[k][-1]:.2f}" for k in fns), flush=True)
for k, v in samples.items():
    print(f"{k[0]:40s} {'PDL' if k[1] else 'no PDL':7s} median {statistics.median(v):7.2f}  min {min(v):7.2f}  max {max(v):7.2f}")
