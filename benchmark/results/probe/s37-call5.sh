#!/usr/bin/env bash
# (ran from scratch/; archived here)
# Session 37, call 5 (the device time left): the review mend (launch_config moved into sgl_quant.testing,
# the sanitizer subset on it): build, the test files that use the hook, the goldens, both sanitizer runs.
set -uo pipefail
STEPS="build tests sanitizer" TEST_FILES="test_errors test_golden test_gpu test_rmsnorm" TEST_WORKERS=12 OUT=$OUT/gc scripts/gpu/gpu_check.sh
