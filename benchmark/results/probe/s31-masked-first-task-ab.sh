#!/usr/bin/env bash
# Session 31's probe A/B of masked_no_pdl_kernel's first task (issue 13, masked 8 x 512 without PDL),
# for one device call (carry [".ab"], made here first: scripts/probe/headers_of.sh main .ab/main,
# main being the commit before the change):
# (Ran once, session 32, on branch head da47a37: logs s32-masked-first-task-ab-*.txt. Main has since
# taken its `branchy` edit, so on main that expression changes nothing and variant_headers.sh stops.)
#   OUT=$OUT/ab bash benchmark/results/probe/s31-masked-first-task-ab.sh
# Builds: main's headers, the tree, and the tree with one part of the change undone each:
#   loop    the expert by main's ballot loop and a shuffle of the start (not one vote and a reduction)
#   branchy the first task's loads and SiLU inside `valid` again (zeros for invalid tasks)
#   scan0   a test before every step of the scan
#   addr64  the input offset as 64-bit products
#   dense_branchy  dense_no_pdl_kernel's loads and SiLU inside `valid` again
# Problems (latency_probe.cu's list): 6 masked 8 x 512, 7 dense SiLU over the same 1490 rows (the
# floor), 8 masked 32 x 256, 22 / 23 the decode-sized 8 x 512 / 32 x 256, and for dense_no_pdl_kernel
# 1-4 (64 x 7168 ... 4096 x 4096, col fp32), 9 and 24 (dense SiLU), 16-19 (packed 64 x 4096 ... 4096 x
# 4096). Every build must write main's bytes (dump + cmp).
set -euo pipefail
cd "$(dirname "$0")/../../.."
[[ -f .ab/main/cuda/per_token_group_quant.cuh ]] || { echo "no .ab/main (carry it)"; exit 1; }
v=/tmp/s31v
scripts/probe/variant_headers.sh $v/loop \
  's/  const int expert = __popc(__ballot_sync(0xffffffffu, at_or_before)) - 1;/  const int expert = masked_expert_of_row(exclusive, num_experts, row_index);/' \
  's/  return {expert, __reduce_max_sync(0xffffffffu, at_or_before ? exclusive : 0)};/  return {expert, __shfl_sync(0xffffffffu, exclusive, expert)};/'
scripts/probe/variant_headers.sh $v/branchy \
  's/load_task_input<T, GS, SILU>(h.groups_per_row \* GS, t, lane, true)/load_task_input<T, GS, SILU>(h.groups_per_row * GS, t, lane, valid)/' \
  's/quantize_task<T, R, GS, SK, SILU, true>(p, locate_task<T, GS>(p, expert, row, g)/quantize_task<T, R, GS, SK, SILU>(p, locate_task<T, GS>(p, expert, row, g)/'
scripts/probe/variant_headers.sh $v/scan0 's/warp_exclusive_prefix<3>(/warp_exclusive_prefix(/'
scripts/probe/variant_headers.sh $v/addr64 \
  's/static_cast<uint64_t>(input_row) \* h.in_row_stride/(static_cast<int64_t>(expert) * h.rows_per_outer + static_cast<int64_t>(row)) * static_cast<int64_t>(h.in_row_stride)/'
scripts/probe/variant_headers.sh $v/dense_branchy \
  's/t.src = static_cast<const T\*>(h.input) + min(row_index, h.rows - 1) \* h.in_row_stride + min(g, h.groups - 1) \* GS;/t.src = static_cast<const T*>(h.input) + row_index * h.in_row_stride + g * GS;/' \
  's/load_task_input<T, GS, SILU>(h.groups \* GS, t, lane, true)/load_task_input<T, GS, SILU>(h.groups * GS, t, lane, valid)/' \
  's/quantize_task<T, R, GS, SK, SILU, true>(p, locate_task<T, GS>(p, 0, row_index, g)/quantize_task<T, R, GS, SK, SILU>(p, locate_task<T, GS>(p, 0, row_index, g)/'
PROBE_PROBLEMS=1,2,3,4,6,7,8,9,16,17,18,19,22,23,24 MODES="nopdl masked" \
  VARIANTS="-I.ab/main base -I$v/loop -I$v/branchy -I$v/scan0 -I$v/addr64 -I$v/dense_branchy" \
  scripts/probe/probe_run.sh
