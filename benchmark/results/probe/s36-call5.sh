#!/usr/bin/env bash
# (ran from scratch/; archived here)
# Session 36, call 5 (the device time left after call 4): build, the fused op's tests and the hook's,
# then the fused op's benchmark.
set -uo pipefail
STEPS="build tests bench" TEST_FILES="test_rmsnorm test_errors" BENCHES=rms TEST_WORKERS=12 BENCH_ARGS="--quick --no-baselines --runs 1" OUT=$OUT/gc scripts/gpu/gpu_check.sh
