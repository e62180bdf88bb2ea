#!/usr/bin/env bash
# (ran from scratch/; archived here)
# Session 37, call 1: the probe's byte checks across schedules (refactored probe), then the full check of
# the submitted code (build, every test file, sanitizer subset, masked re-read, v2 and fused benchmarks).
set -uo pipefail
mkdir -p "$OUT/gc"
{ PROBE=scripts/probe/rmsnorm_probe.cu scripts/probe/build_probe.sh /tmp/rms && timeout 60 /tmp/rms check && timeout 60 /tmp/rms staged check; } > "$OUT/gc/probe_checks.log" 2>&1
echo "probe checks rc=$?: $(grep -h "check:" "$OUT/gc/probe_checks.log" | tr '\n' ' ')"
STEPS="build tests sanitizer redo bench" BENCHES="v2 rms" TEST_WORKERS=12 BENCH_ARGS="--quick --no-baselines --runs 3" OUT=$OUT/gc scripts/gpu/gpu_check.sh
