#!/usr/bin/env bash
# Session 42, call 1: the full check of a7b1ade (d02b2b7's test-helper and sanitizer-subset mends were not run on the device in session 41).
set -uo pipefail
STEPS="build tests sanitizer redo bench" BENCHES="v2 rms" TEST_WORKERS=12 BENCH_ARGS="--quick --no-baselines --runs 3" OUT=$OUT/gc scripts/gpu/gpu_check.sh
