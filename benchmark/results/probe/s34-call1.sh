#!/usr/bin/env bash
# (ran from scratch/ with OUT=$OUT/c1; archived here)
# Session 34, call 1: one chunk against two per thread at 560-1200 rows of H = 6144, 7168, 8192, with and
# without output_normed; the SPEC's long calls as dispatched.
set -uo pipefail
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > "$OUT/smi.txt" 2>&1
PROBE=scripts/probe/rmsnorm_probe.cu scripts/probe/build_probe.sh /tmp/rms_probe > "$OUT/build.txt" 2>&1 || { cat "$OUT/build.txt"; exit 1; }
/tmp/rms_probe check > "$OUT/check.txt" 2>&1; echo "check rc=$?" >> "$OUT/check.txt"
/tmp/rms_probe cases 560:7168,600:7168,700:7168,792:7168,850:7168,900:7168,960:7168,1000:7168,1024:7168,1056:7168,1100:7168,1200:7168 0 1,2 0,1 > "$OUT/chunks-7168.txt" 2>&1
/tmp/rms_probe cases 700:6144,900:6144,1024:6144,1056:6144,1100:6144,700:8192,900:8192,1024:8192,1056:8192,1100:8192 0 1,2 0,1 > "$OUT/chunks-6144-8192.txt" 2>&1
/tmp/rms_probe cases 1024:7168,4096:7168,16384:7168 0 0 0,1 > "$OUT/dispatch-long.txt" 2>&1
tail -3 "$OUT/check.txt"; cat "$OUT/chunks-7168.txt" "$OUT/chunks-6144-8192.txt" "$OUT/dispatch-long.txt"
