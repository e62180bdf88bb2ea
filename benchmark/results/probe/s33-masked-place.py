"""Session 33: masked 32 x 256 and 256 x 128 with PDL, (a) built right before timing and dropped after, as the
benchmark does, (b) with every masked case's tensors alive (as masked_spread.py): placement or code?"""
import statistics
import sys

import torch

sys.path.insert(0, "benchmark")
import bench_per_token_group_quant as b  # noqa: E402

b.settle_graph_state()
names = ["masked-silu-E256x128-H2048-col_ue8m0", "masked-silu-E32x256-H2048-col_ue8m0", "masked-silu-E8x512-H2048-col_ue8m0"]
picked = [c for c in b.cases(True) if c["name"] in names]
res = {}
for rnd in range(3):  # (a) the benchmark's way: build, time no PDL, build, time PDL, drop
    for c in picked:
        for pdl in (False, True):
            res.setdefault(("fresh", c["name"], pdl), []).append(b.time_graph_us(b.build(c, "cuda", pdl)))
            torch.cuda.empty_cache()
fns = {(c["name"], pdl): b.build(c, "cuda", pdl) for c in picked for pdl in (False, True)}
for rnd in range(3):  # (b) all alive
    for (n, pdl), fn in fns.items():
        res.setdefault(("alive", n, pdl), []).append(b.time_graph_us(fn))
for k, v in res.items():
    print(f"{k[0]:6s} {k[1]:40s} {'PDL' if k[2] else 'no PDL':7s} median {statistics.median(v):7.2f}  all {' '.join(f'{x:.2f}' for x in v)}")
