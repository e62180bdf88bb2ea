#!/usr/bin/env bash
# Session 42, call 5: the submitted code (da77c9b): build, then test_multi_gpu (its CPU builder tests are new), test_errors, test_build.
set -uo pipefail
STEPS="build tests" TEST_FILES="test_multi_gpu test_errors test_build" TEST_WORKERS=12 OUT=$OUT/gc scripts/gpu/gpu_check.sh
