#!/usr/bin/env bash
# (ran from scratch/; archived here)
# Session 34, call 2: the chunk rule as dispatched (probe, into the logs archive), then the full check.
set -uo pipefail
mkdir -p "$OUT/gc"
{ PROBE=scripts/probe/rmsnorm_probe.cu scripts/probe/build_probe.sh /tmp/rms_probe &&
  /tmp/rms_probe check &&
  /tmp/rms_probe cases 600:7168,792:7168,850:7168,900:7168,1024:7168,1056:7168,1100:7168,1500:7168,1024:6144,1500:6144,900:8192,1024:8192,2048:8192 0 0 0,1; } > "$OUT/gc/probe_dispatch.log" 2>&1
echo "probe rc=$?"
STEPS="build tests sanitizer redo bench" BENCHES="v2 rms" TEST_WORKERS=12 BENCH_ARGS="--quick --no-baselines --runs 3" OUT=$OUT/gc scripts/gpu/gpu_check.sh
