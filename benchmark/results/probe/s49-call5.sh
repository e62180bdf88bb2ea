#!/bin/bash
# Session 49 call 5 (H100). The SMEM variant is what landed (kSumsEarly); INV1: h100-2026-12-05-s49-inv1.diff.
# A/B of the fused kernel: committed headers (.ab/main) against the working tree (and its experiment
# switches); same bytes (dump + cmp, check), then times (rmsnorm_probe cases, builds alternating).
set -u
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader | tee $OUT/gpu.txt
declare -A FLAGS=([base]="-I.ab/main" [new]="" [smem]="-DSGLQ_EXP_SMEM" [inv1]="-DSGLQ_EXP_INV1")
VARS=${VARS:-"base new smem inv1"}
for v in $VARS; do PROBE=scripts/probe/rmsnorm_probe.cu scripts/probe/build_probe.sh /tmp/rp_$v ${FLAGS[$v]} & done; wait
for v in $VARS; do rm -rf /tmp/d_$v; mkdir -p /tmp/d_$v; /tmp/rp_$v dump /tmp/d_$v > /dev/null; done
for v in $VARS; do [ $v = base ] && continue; n=0; d=0
  for f in /tmp/d_base/*.bin; do n=$((n+1)); cmp -s $f /tmp/d_$v/$(basename $f) || { d=$((d+1)); echo "DIFFERENT $v $(basename $f)"; }; done
  echo "dump $v: $n files, $d differ"; /tmp/rp_$v check 2>&1 | tail -1; done | tee $OUT/cmp.txt
CASES=${CASES:-1:7168,64:7168,256:7168,1024:7168,4096:7168,16384:7168,256:4096}
for r in ${ROUNDS:-1}; do for v in $VARS; do /tmp/rp_$v cases $CASES 0 0 0,1 | sed "s/^/$v /" ; done; done > $OUT/ab.txt 2>&1
python3 scripts/probe/ab_summary.py $OUT/ab.txt $VARS | tee $OUT/ab_summary.txt
