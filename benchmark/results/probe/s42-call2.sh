#!/usr/bin/env bash
# Session 42, call 2 (kind nvidia-h200-x2): test_multi_gpu, never run on two GPUs before, plus test_errors and test_build.
set -uo pipefail
nvidia-smi -L
STEPS="build tests" TEST_FILES="test_multi_gpu test_errors test_build" TEST_WORKERS=12 OUT=$OUT/gc scripts/gpu/gpu_check.sh
