#!/usr/bin/env bash
# Session 44, call 1: the submitted code in one call: build, every test file (goldens included), both benchmarks (median of 3 runs).
set -uo pipefail
STEPS="build tests bench" BENCHES="v2 rms" TEST_WORKERS=12 BENCH_ARGS="--quick --no-baselines --runs 3" OUT=$OUT/gc scripts/gpu/gpu_check.sh
