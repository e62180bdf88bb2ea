#!/bin/bash
# (Archived. The kernel change it measured, on 2dc2af9: h100-2026-12-06-s50-prologue.diff; results:
# h100-2026-12-06-s50-prologue-ab.txt.)
# Session 50's device call. A/B of the fused kernel's instruction trims: committed headers (.ab/main)
# against the working tree ("new": load_pair_if and the prologue's unsigned index math) and its SGLQ_EXP_*
# switches (same bytes: dump + cmp, check), times (rmsnorm_probe cases, variants alternating, two rounds in
# opposite orders when AB_SECONDS allows); then, unless AB_ONLY is set, the full check of the working tree
# (scripts/gpu/gpu_check.sh, fused benchmark). LIMIT: the seconds the whole call may take (default 585).
set -u
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
T0=$(date +%s)
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader | tee $OUT/gpu.txt
declare -A FLAGS=([base]="-I.ab/main" [new]="" [stns]="-DSGLQ_EXP_STIMM -DSGLQ_EXP_NSEL" [nn]="-DSGLQ_EXP_NONORMED")
VARS=${VARS:-"base new stns nn"}
for v in $VARS; do PROBE=scripts/probe/rmsnorm_probe.cu scripts/probe/build_probe.sh /tmp/rp_$v ${FLAGS[$v]} & done; wait
echo "built at $(( $(date +%s) - T0 )) s"
for v in $VARS; do rm -rf /tmp/d_$v; mkdir -p /tmp/d_$v; /tmp/rp_$v dump /tmp/d_$v > /dev/null; done
for v in $VARS; do [ $v = base ] && continue; n=0; d=0
  for f in /tmp/d_base/*.bin; do n=$((n+1)); cmp -s $f /tmp/d_$v/$(basename $f) || { d=$((d+1)); }; done
  echo "dump $v: $n files, $d differ"; [ $v = nn ] || /tmp/rp_$v check 2>&1 | tail -1; done | tee $OUT/cmp.txt
echo "checked at $(( $(date +%s) - T0 )) s"
CASES=${CASES:-1:7168,64:7168,256:7168,1024:7168,16384:7168,256:4096}
REV=$(echo $VARS | tr ' ' '\n' | tac | tr '\n' ' ')
for order in "$VARS" "$REV"; do
  for v in $order; do /tmp/rp_$v cases $CASES 0 0 0 | sed "s/^/$v /"; done
  [ $(( $(date +%s) - T0 )) -gt ${AB_SECONDS:-0} ] && { echo "time: one order only"; break; }
done > $OUT/ab.txt 2>&1
echo "timed at $(( $(date +%s) - T0 )) s"
python3 scripts/probe/ab_summary.py $OUT/ab.txt $VARS | tee $OUT/ab_summary.txt
echo "done at $(( $(date +%s) - T0 )) s"
[ -n "${AB_ONLY:-}" ] || STEPS="build tests sanitizer redo bench" BENCHES=rms TEST_WORKERS=12 BENCH_ARGS="--quick --no-baselines" \
  OUT=$OUT/gc timeout $(( ${LIMIT:-585} - ($(date +%s) - T0) )) scripts/gpu/gpu_check.sh
cat $OUT/ab_summary.txt $OUT/cmp.txt
