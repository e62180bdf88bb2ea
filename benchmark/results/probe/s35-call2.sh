#!/usr/bin/env bash
# (ran from scratch/; archived here)
# Session 35, call 2: the row kernels of long calls without math (traffic_bound rows), the fused probe's
# byte check, then the full check of the submitted code.
set -uo pipefail
mkdir -p "$OUT/gc"
{ PROBE=scripts/probe/traffic_bound.cu scripts/probe/build_probe.sh /tmp/traffic &&
  /tmp/traffic 1024,4096,16384 7168 rows && /tmp/traffic 4096,16384 4096 rows; } > "$OUT/gc/traffic_rows.log" 2>&1
echo "traffic rc=$?"; cat "$OUT/gc/traffic_rows.log"
{ PROBE=scripts/probe/rmsnorm_probe.cu scripts/probe/build_probe.sh /tmp/rms_probe && /tmp/rms_probe check; } > "$OUT/gc/probe_check.log" 2>&1
echo "probe check rc=$?"; tail -1 "$OUT/gc/probe_check.log"
STEPS="build tests sanitizer redo bench" BENCHES="v2 rms" TEST_WORKERS=12 BENCH_ARGS="--quick --no-baselines --runs 3" OUT=$OUT/gc scripts/gpu/gpu_check.sh
