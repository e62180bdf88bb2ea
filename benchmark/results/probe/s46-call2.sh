#!/usr/bin/env bash
# Session 46, call 2 (an H100 came, not an H200): the submitted code's build, the sanitizer subset, the three
# benchmarks (the v2 and fused-op tables now draw no verdict against the H200's anchors on another GPU; the
# host benchmark now times rounds of every case and adds the no-PDL op and torch.ops.aten.abs.out); then the
# host benchmark's A/B of the wrappers, ac80f9a's (scratch/old) against these, in 3 ABAB process rounds,
# appended to the summary. Before a run:
#   mkdir -p scratch/old && for f in quant compat; do git show ac80f9a:sgl_quant/$f.py > scratch/old/$f.py; done
# and name scratch in carry.
set -uo pipefail
STEPS="build sanitizer bench" BENCHES="v2 rms host" BENCH_ARGS="--quick --no-baselines" OUT=$OUT/gc scripts/gpu/gpu_check.sh
mkdir -p /tmp/new /tmp/ab && cp sgl_quant/quant.py sgl_quant/compat.py /tmp/new/
for round in 1 2 3; do
  cp scratch/old/quant.py scratch/old/compat.py sgl_quant/
  timeout 90 python3 benchmark/bench_host_overhead.py --out /tmp/ab/old$round > /dev/null 2>&1
  cp /tmp/new/quant.py /tmp/new/compat.py sgl_quant/
  timeout 90 python3 benchmark/bench_host_overhead.py --out /tmp/ab/new$round > /dev/null 2>&1
done
python3 - <<'PY' 2>&1 | tee -a $OUT/gc/summary.txt
import json, statistics
runs = {v: [json.load(open(f"/tmp/ab/{v}{i}/host_overhead.json"))["rows"] for i in (1, 2, 3)] for v in ("old", "new")}
print("== host A/B, µs per call: ac80f9a's wrappers (old) | this code (new); median of the 3 runs' medians, fastest loop")
print(f"{'case':<58} {'old med':>8} {'old min':>8} {'new med':>8} {'new min':>8}")
for i, row in enumerate(runs["new"][0]):
    cells = []
    for v in ("old", "new"):
        rs = [run[i] for run in runs[v]]
        assert all(r["case"] == row["case"] for r in rs)
        cells += [statistics.median(r["us_per_call"] for r in rs), min(r["min_us_per_call"] for r in rs)]
    print(f"{row['case']:<58} " + " ".join(f"{c:>8.2f}" for c in cells))
PY
