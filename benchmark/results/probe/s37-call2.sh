#!/usr/bin/env bash
# (ran from scratch/; archived here)
# Session 37, call 2: the full check of the submitted code (call 1's code plus the sanitizer subset's fix).
set -uo pipefail
STEPS="build tests sanitizer redo bench" BENCHES="v2 rms" TEST_WORKERS=12 BENCH_ARGS="--quick --no-baselines --runs 3" OUT=$OUT/gc scripts/gpu/gpu_check.sh
