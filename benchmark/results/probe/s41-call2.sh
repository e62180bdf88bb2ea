#!/usr/bin/env bash
# Session 41, call 2: e28dd97 (gpu_check lists test_build): the build and the two test files whose code changed since call 1.
set -uo pipefail
STEPS="build tests" TEST_FILES="test_build test_errors" TEST_WORKERS=12 OUT=$OUT/gc scripts/gpu/gpu_check.sh
