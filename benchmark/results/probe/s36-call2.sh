#!/usr/bin/env bash
# (ran from scratch/; archived here)
# Session 36, call 2: why the STAGED kernel is slower from DRAM: the weight held in registers (W), the
# rows prefetched into L2 one stage round further ahead (PF), both.
set -uo pipefail
mkdir -p "$OUT"
i=0
for v in "" "-DSGLQ_EXP_STAGED_W" "-DSGLQ_EXP_STAGED_PF" "-DSGLQ_EXP_STAGED_W -DSGLQ_EXP_STAGED_PF"; do
  PROBE=scripts/probe/rmsnorm_probe.cu scripts/probe/build_probe.sh /tmp/rms$i $v > "$OUT/build$i.log" 2>&1 || { cat "$OUT/build$i.log"; exit 1; }
  i=$((i+1))
done
for i in 0 1 2 3; do
  echo "== variant $i" >> "$OUT/staged.log"
  timeout 100 /tmp/rms$i staged quick >> "$OUT/staged.log" 2>&1
  echo "variant $i rc=$?"
done
cat "$OUT/staged.log" | grep -v "^problem"
