#!/usr/bin/env bash
# Session 44, call 2: the same code: build, compute-sanitizer (the subset under memcheck and racecheck, the argument fuzz's CUDA calls under memcheck), the masked PDL re-read check.
set -uo pipefail
STEPS="build sanitizer redo" OUT=$OUT/gc scripts/gpu/gpu_check.sh
