#!/usr/bin/env bash
# (ran from scratch/; archived here)
# Session 38, call 5: the review mend (launch_config without a hook; the sanitizer subset on it): build, both sanitizer runs.
set -uo pipefail
STEPS="build sanitizer" OUT=$OUT/gc scripts/gpu/gpu_check.sh
