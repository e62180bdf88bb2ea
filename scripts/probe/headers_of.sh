#!/usr/bin/env bash
# Copies the kernel headers of git REF (csrc/quant_params.h, csrc/cuda/*.cuh) into DIR, for an A/B of
# the working tree against REF on the device machine (which gets the tree without .git): the probe
# built with -IDIR finds REF's headers before the working tree's.
#   scripts/probe/headers_of.sh main .ab/main      # here; then, on the device (carry [".ab"]):
#   VARIANTS="-I.ab/main base" MODES="nopdl; quick" OUT=$OUT scripts/probe/probe_run.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
ref=$1 dir=$2
rm -rf "$dir" && mkdir -p "$dir/cuda"
git show "$ref:csrc/quant_params.h" >"$dir/quant_params.h"
for f in $(git ls-tree --name-only "$ref" csrc/cuda/ | grep '\.cuh$'); do
  git show "$ref:$f" >"$dir/cuda/$(basename "$f")"
done
echo "$(git rev-parse --short "$ref") headers in $dir: $(cd "$dir" && ls quant_params.h cuda/* | tr '\n' ' ')"
