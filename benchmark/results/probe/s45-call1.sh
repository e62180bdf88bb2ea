#!/usr/bin/env bash
# Session 45, call 1: the submitted code in one call: build, every test file (goldens included), the three benchmarks
# (one run each: v2/DSV4, the fused op, the host time per eager call; the kernels are session 44's, whose sanitizer runs
# passed, and this session changed Python only); then the host-time parts and the host benchmark
# on ac80f9a's wrappers (the A/B of the wrappers' allocations), appended to the summary (8 files come back at most).
# Not run: no device machine started in session 45 (12 failed starts, 10 refusals without a try). Before a run, put ac80f9a's wrappers in scratch/old:
#   mkdir -p scratch/old && for f in quant compat; do git show ac80f9a:sgl_quant/$f.py > scratch/old/$f.py; done
# and name scratch in carry.
set -uo pipefail
STEPS="build tests bench" BENCHES="v2 rms host" TEST_WORKERS=12 BENCH_ARGS="--quick --no-baselines" OUT=$OUT/gc scripts/gpu/gpu_check.sh
mkdir -p /tmp/new /tmp/ab && cp sgl_quant/quant.py sgl_quant/compat.py /tmp/new/
for round in 1 2; do
  cp scratch/old/quant.py scratch/old/compat.py sgl_quant/
  timeout 60 python3 benchmark/bench_host_overhead.py --out /tmp/ab/old$round > /dev/null 2>&1
  cp /tmp/new/quant.py /tmp/new/compat.py sgl_quant/
  timeout 60 python3 benchmark/bench_host_overhead.py --out /tmp/ab/new$round > /dev/null 2>&1
done
v() { awk '{print $NF}' /tmp/ab/$1/host_overhead.txt; }
{
  echo "== host A/B, µs per call (ac80f9a's wrappers: old1 old2 | this code: new1 new2, ABAB)"
  paste <(cut -c1-58 /tmp/ab/old1/host_overhead.txt) <(v old1) <(v old2) <(v new1) <(v new2) | tail -14
  echo "== host parts (scratch/host_parts.py), µs per call"
  timeout 90 python3 benchmark/results/probe/s45-host_parts.py 2>&1
} | tee -a $OUT/gc/summary.txt
