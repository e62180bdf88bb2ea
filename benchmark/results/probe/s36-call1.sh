#!/usr/bin/env bash
# (ran from scratch/; archived here)
# Session 36, call 1: the STAGED kernel (rows copied into shared memory by the bulk-copy engine), its bytes
# against the dispatched kernels, its times against them, then racecheck/memcheck of its byte check.
set -uo pipefail
mkdir -p "$OUT"
PROBE=scripts/probe/rmsnorm_probe.cu scripts/probe/build_probe.sh /tmp/rms > "$OUT/build.log" 2>&1 || { cat "$OUT/build.log"; exit 1; }
timeout 420 /tmp/rms staged > "$OUT/staged.log" 2>&1
echo "staged rc=$?"
for tool in racecheck memcheck; do
  timeout 60 compute-sanitizer --tool $tool /tmp/rms staged check > "$OUT/san_$tool.log" 2>&1
  echo "$tool rc=$?: $(tail -2 "$OUT/san_$tool.log" | tr '\n' ' ')"
done
grep -v "^rms" "$OUT/staged.log"
grep "^rms" "$OUT/staged.log" | awk '{print $2,$3,$4,$5,$6,$7,$8}' | column -t | head -400
