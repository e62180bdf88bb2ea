#!/usr/bin/env bash
# Session 41, call 1: the full check of 87d612d (the build checks, the CI changes, create_scale_tensor message).
set -uo pipefail
STEPS="build tests sanitizer redo bench" BENCHES="v2 rms" TEST_WORKERS=12 BENCH_ARGS="--quick --no-baselines --runs 3" OUT=$OUT/gc scripts/gpu/gpu_check.sh
