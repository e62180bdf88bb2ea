#!/usr/bin/env bash
# (ran from scratch/; archived here)
# Session 36, call 4: the STAGED kernel's bytes in the probe, then the full check of the submitted code.
set -uo pipefail
mkdir -p "$OUT/gc"
{ PROBE=scripts/probe/rmsnorm_probe.cu scripts/probe/build_probe.sh /tmp/rms && /tmp/rms staged check; } > "$OUT/gc/probe_staged.log" 2>&1
echo "probe staged check rc=$?: $(tail -1 "$OUT/gc/probe_staged.log")"
STEPS="build tests sanitizer redo bench" BENCHES="v2 rms" TEST_WORKERS=12 BENCH_ARGS="--quick --no-baselines --runs 3" OUT=$OUT/gc scripts/gpu/gpu_check.sh
