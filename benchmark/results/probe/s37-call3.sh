#!/usr/bin/env bash
# (ran from scratch/; archived here)
# Session 37, call 3: the sanitizer subset as changed after call 2 (its --cpu mode; the CUDA path through
# DEVICE and the hook helper), and test_cpu_ops with the new test that runs the subset on the CPU.
set -uo pipefail
STEPS="build tests sanitizer" TEST_FILES="test_cpu_ops" TEST_WORKERS=12 OUT=$OUT/gc scripts/gpu/gpu_check.sh
