#!/usr/bin/env bash
# Copies the working tree's kernel headers (csrc/quant_params.h, csrc/cuda/*.cuh) into DIR and edits
# them with sed expressions, each of which must change a line of csrc/cuda/per_token_group_quant.cuh
# (else it fails: a stale expression would A/B the tree against itself). For an A/B of the tree
# against the tree with one part undone, on the device machine (no git needed there):
#   scripts/probe/variant_headers.sh /tmp/v/loop 's/if (h.one_row_per_warp()) {/if (false) {/'
#   VARIANTS="base -I/tmp/v/loop" MODES=nopdl OUT=$OUT scripts/probe/probe_run.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
dir=$1; shift
rm -rf "$dir" && mkdir -p "$dir/cuda"
cp csrc/quant_params.h "$dir/"
cp csrc/cuda/*.cuh "$dir/cuda/"
header=$dir/cuda/per_token_group_quant.cuh
for expr in "$@"; do
  before=$(md5sum <"$header")
  sed -i "$expr" "$header"
  [[ $(md5sum <"$header") != "$before" ]] || { echo "variant_headers.sh: '$expr' changed nothing" >&2; exit 1; }
done
echo "$dir: the tree's headers with $# edit(s)"
