#!/usr/bin/env bash
# (ran from scratch/; archived here)
# Written for session 36's probe, where chunks 10 + S meant the kStaged kernel with S stages (12, 13 below).
# Session 37's probe takes the stages as a list of their own; with it this sweep reads
#   cases "$C" 0 0,1 0,1   and   cases "$C" 0 1 0,1 2,3
# Session 36, call 3: the STAGED kernel (weight held in registers) against the dispatched kernels around
# 3-4 rounds of resident blocks: one chunk (1), two (dispatched there: 0), staged with 2 and 3 stages.
set -uo pipefail
mkdir -p "$OUT"
PROBE=scripts/probe/rmsnorm_probe.cu scripts/probe/build_probe.sh /tmp/rms > "$OUT/build.log" 2>&1 || { cat "$OUT/build.log"; exit 1; }
timeout 60 /tmp/rms staged check > "$OUT/check.log" 2>&1; echo "check rc=$?: $(tail -1 "$OUT/check.log")"
C=""
for h in 6144 7168 8192; do for m in 792 900 1024 1100 1300; do C="$C$m:$h,"; done; done
C="${C}1536:4096,2048:4096"
stdbuf -oL timeout 300 /tmp/rms cases "$C" 0 0,1,12,13 0,1 > "$OUT/sweep.log" 2>&1; echo "sweep rc=$?"
cat "$OUT/sweep.log"
