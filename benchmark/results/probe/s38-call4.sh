#!/usr/bin/env bash
# (ran from scratch/; archived here)
# Session 38, call 4: the overlap tests after the review's helper (test-only change): build, test_errors.
set -uo pipefail
STEPS="build tests" TEST_FILES="test_errors" TEST_WORKERS=12 OUT=$OUT/gc scripts/gpu/gpu_check.sh
