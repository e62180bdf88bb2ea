#!/usr/bin/env bash
# (ran from scratch/; archived here)
# Session 35, call 3: where block 0's time goes in today's fused kernel (rmsnorm_probe phases, built with
# -DSGLQ_PROBE_PHASES), next to the math-free bound of calls 1 and 2.
set -uo pipefail
PROBE=scripts/probe/rmsnorm_probe.cu scripts/probe/build_probe.sh /tmp/rms_ph -DSGLQ_PROBE_PHASES || exit 1
/tmp/rms_ph phases 2>&1 | tee "$OUT/phases.log"
