#!/usr/bin/env bash
# Session 42, call 6: the submitted code (ff43deb) in one call: build, the GPU test files, the goldens, both benchmarks (one run each).
set -uo pipefail
STEPS="build tests bench" BENCHES="v2 rms" TEST_FILES="test_golden test_gpu test_rmsnorm test_multi_gpu test_errors" TEST_WORKERS=12 BENCH_ARGS="--quick --no-baselines --runs 1" OUT=$OUT/gc scripts/gpu/gpu_check.sh
