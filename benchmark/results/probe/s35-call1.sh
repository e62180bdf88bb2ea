#!/usr/bin/env bash
# (ran from scratch/; archived here)
# Session 35, call 1: the fused op's traffic without its math (scripts/probe/traffic_bound.cu), H = 7168 and 4096.
set -uo pipefail
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader
PROBE=scripts/probe/traffic_bound.cu scripts/probe/build_probe.sh /tmp/traffic || exit 1
/tmp/traffic 1,64,256,1024,4096,16384 7168 2>&1 | tee "$OUT/traffic_h7168.log"
/tmp/traffic 1,64,256,1024,4096,16384 7168 2>&1 | tee "$OUT/traffic_h7168_r2.log"
/tmp/traffic 1,64,256,1024 4096 2>&1 | tee "$OUT/traffic_h4096.log"
