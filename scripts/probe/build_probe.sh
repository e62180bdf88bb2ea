#!/usr/bin/env bash
# Builds a probe (default scripts/probe/latency_probe.cu; PROBE=scripts/probe/rmsnorm_probe.cu for the
# fused op: the real launcher and kernel, without torch) for sm_90a with the extension's math flags, as
# C++20 (the probes name launch fields with designated initializers);
# extra arguments go to nvcc before the tree's include path (e.g. -DSGLQ_EXP_... experiment switches, or
# -I<dir> with another version's headers: scripts/probe/headers_of.sh).
#   scripts/probe/build_probe.sh /tmp/latency_probe [nvcc flags...]
set -euo pipefail
cd "$(dirname "$0")/../.."
out=$1; shift
NVCC=$(command -v nvcc || ls /usr/local/cuda*/bin/nvcc | head -1)
exec "$NVCC" -O3 -std=c++20 --use_fast_math -gencode arch=compute_90a,code=sm_90a "$@" -I csrc \
  "${PROBE:-scripts/probe/latency_probe.cu}" -o "$out"
