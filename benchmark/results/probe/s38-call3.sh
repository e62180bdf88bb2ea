#!/usr/bin/env bash
# (ran from scratch/; archived here)
# Session 38, call 3: the full check of the submitted code (the overlap checks and their tests).
set -uo pipefail
STEPS="build tests sanitizer redo bench" BENCHES="v2 rms" TEST_WORKERS=12 BENCH_ARGS="--quick --no-baselines --runs 3" OUT=$OUT/gc scripts/gpu/gpu_check.sh
