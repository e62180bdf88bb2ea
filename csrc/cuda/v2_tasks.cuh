// The v2 kernels' tasks (a task: one group of one row): the launch arguments, where a dense or masked
// task reads and writes (the dense task orders; the masked layout's prefix sums and expert lookups), a
// thread's input words and their quantization.
#pragma once

#include "launch.cuh"

namespace sgl_quant {

constexpr int kWarpScanMaxExperts = 32;  // masked layouts with more experts use a shared-memory prefix sum

// Dense launches with packed UE8M0 scales (without fused SiLU) take a row's tasks by columns of four
// groups, the groups whose exponents share a 32-bit scale word, so that, rows first, a warp writes whole
// words and a block adjacent ones (log2 of the groups per column: 2; every other launch: 0).
template <ScaleStore SS, bool SILU, bool MASKED>
constexpr int kTaskColumnLog2 = !MASKED && !SILU && kPackedStore<SS> ? 2 : 0;

// What one launch needs besides the problem: divisors for the task -> (row, group) mapping.
struct KernelArgs {
  QuantParams p;
  FastDivmod task_columns;  // a row's columns of tasks: its groups, or its scale words (kTaskColumnLog2)
  FastDivmod rows_per_outer;
  int32_t num_tasks;  // dense: all groups (rows rounded up when rows_first_log2 > 0); masked: from the counts
  int32_t num_rows;   // dense: rows over all (outer, row) pairs
  // Dense task order. 0: a warp's sub-warps take consecutive groups of one row. k > 0 (column-major
  // scales): the tasks run through 2^k consecutive rows of one column before the next column, so that a
  // warp's scales are adjacent (one store instruction) and a block's fill whole sectors.
  int32_t rows_first_log2;
  // Launched with programmatic dependent launch: the kernel may start before the previous one ends.
  int32_t pdl;
  // Masked, <= 32 experts, a grid of whole rounds of resident blocks: the next kernel may launch from our
  // blocks' start (see per_token_group_quant_kernel).
  int32_t trigger_at_start;
};

// ---------------------------------------------------------------------------------------------
// Task location.

template <typename T, int GS>
__device__ __forceinline__ Task<T> locate_task(const QuantParams& p, int outer, int row, int g) {
  Task<T> t;
  t.src = static_cast<const T*>(p.input) + outer * p.in_outer_stride + row * p.in_row_stride + g * GS;
  t.dst = static_cast<uint8_t*>(p.output_q) + (outer * p.rows_per_outer + row) * p.hidden + g * GS;
  t.s_row = outer * p.s_outer_stride + row * p.s_row_stride;
  t.g = g;
  return t;
}

// The row index and group of dense task `task` in the launch's task order (rows_first_log2,
// kTaskColumnLog2), as straight-line code: without PDL this index math is the latency before the first
// load. Rows-first order pads the rows to whole units: tasks of padding rows, like tasks past the end,
// come back with valid = false. `order` gives rows_first_log2(), columns() (the divisor by a row's task
// columns), groups_per_row() and num_rows(): KernelArgsOrder or DenseHead.
struct RowGroup {
  int row_index, g;
};
template <ScaleStore SS, bool SILU, typename Order>
__device__ __forceinline__ RowGroup dense_row_group(const Order& order, int task, bool& valid) {
  constexpr int c = kTaskColumnLog2<SS, SILU, false>;
  const int k = order.rows_first_log2();
  const int column_task = task >> c;  // the task's (row, column)
  const int unit = column_task >> k;  // (block of 2^k rows, column)
  const int row_block = order.columns().div(unit);
  const int columns = (order.groups_per_row() + (1 << c) - 1) >> c;
  const int g = ((unit - row_block * columns) << c) + (task & ((1 << c) - 1));
  const int row_index = (row_block << k) + (column_task & ((1 << k) - 1));
  valid = valid && row_index < order.num_rows() && (c == 0 || g < order.groups_per_row());
  return {row_index, g};
}

struct KernelArgsOrder {
  const KernelArgs& args;
  __device__ __forceinline__ int rows_first_log2() const { return args.rows_first_log2; }
  __device__ __forceinline__ const FastDivmod& columns() const { return args.task_columns; }
  __device__ __forceinline__ int groups_per_row() const { return args.p.groups_per_row; }
  __device__ __forceinline__ int num_rows() const { return args.num_rows; }
};

template <typename T, int GS, ScaleStore SS, bool SILU, bool kSplitOuter>
__device__ __forceinline__ Task<T> locate_dense_task_split(const KernelArgs& args, int task, bool& valid) {
  const QuantParams& p = args.p;
  const RowGroup rg = dense_row_group<SS, SILU>(KernelArgsOrder{args}, task, valid);
  const int outer = kSplitOuter ? args.rows_per_outer.div(rg.row_index) : 0;
  const int row = rg.row_index - outer * static_cast<int>(p.rows_per_outer);
  Task<T> t;  // locate_task's addresses; the codes' row is row_index itself
  t.src = static_cast<const T*>(p.input) + outer * p.in_outer_stride + row * p.in_row_stride + rg.g * GS;
  t.dst = static_cast<uint8_t*>(p.output_q) + static_cast<int64_t>(rg.row_index) * p.hidden + rg.g * GS;
  t.s_row = outer * p.s_outer_stride + row * p.s_row_stride;
  t.g = rg.g;
  return t;
}

// A dense task. The row index is split into (outer, row) by a second division only where the launcher
// could not fold the rows into one index (num_outer > 1: strided batches, DSV4 with T > 1): a uniform
// branch between two straight-line forms. (A select instead put the division and the outer offsets on
// every call's path to the PDL wait: H100, PDL, M=64 H=7168 7% slower.)
template <typename T, int GS, ScaleStore SS, bool SILU>
__device__ __forceinline__ Task<T> locate_dense_task(const KernelArgs& args, int task, bool& valid) {
  return args.p.num_outer == 1 ? locate_dense_task_split<T, GS, SS, SILU, false>(args, task, valid)
                               : locate_dense_task_split<T, GS, SS, SILU, true>(args, task, valid);
}

// Masked layout: the block-wide prefix sum of the per-expert valid row counts, clamped to
// [0, rows_per_outer]: prefix[e] = rows of experts < e, prefix[E] = all valid rows. Needs (E + 1 + 32) ints.
__device__ __forceinline__ void masked_row_prefix(const QuantParams& p, int* prefix, int* warp_sums) {
  const int num_experts = static_cast<int>(p.num_outer);
  const int rows = static_cast<int>(p.rows_per_outer);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, num_warps = blockDim.x >> 5;
  int carry = 0;
  for (int base = 0; base < num_experts; base += blockDim.x) {
    const int e = base + threadIdx.x;
    int v = e < num_experts ? min(max(p.masked_m[e], 0), rows) : 0;
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {  // inclusive scan within the warp
      const int n = __shfl_up_sync(0xffffffffu, v, o);
      if (lane >= o) v += n;
    }
    if (lane == 31) warp_sums[warp] = v;
    __syncthreads();
    if (warp == 0) {  // scan of the warp totals
      int w = lane < num_warps ? warp_sums[lane] : 0;
#pragma unroll
      for (int o = 1; o < 32; o <<= 1) {
        const int n = __shfl_up_sync(0xffffffffu, w, o);
        if (lane >= o) w += n;
      }
      if (lane < num_warps) warp_sums[lane] = w;
    }
    __syncthreads();
    if (e < num_experts) prefix[e + 1] = carry + (warp > 0 ? warp_sums[warp - 1] : 0) + v;
    carry += warp_sums[num_warps - 1];
    __syncthreads();  // warp_sums is reused by the next chunk
  }
  if (threadIdx.x == 0) prefix[0] = 0;
  __syncthreads();
}

// Dynamic shared memory the kernel needs (masked layout with more than 32 experts only).
inline size_t masked_smem_bytes(const QuantParams& p) {
  if (p.masked_m == nullptr || p.num_outer <= kWarpScanMaxExperts) return 0;
  return static_cast<size_t>(p.num_outer + 1 + 32) * sizeof(int);
}

// Masked layout: valid row `row_index` belongs to the largest expert e with prefix[e] <= row_index.
template <typename T, int GS>
__device__ __forceinline__ Task<T> locate_masked_task(const KernelArgs& args, const int* prefix, int task) {
  const QuantParams& p = args.p;
  const int row_index = args.task_columns.div(task);
  const int g = task - row_index * p.groups_per_row;
  int lo = 0, hi = static_cast<int>(p.num_outer) - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) >> 1;
    if (prefix[mid] <= row_index) lo = mid; else hi = mid - 1;
  }
  return locate_task<T, GS>(p, lo, row_index - prefix[lo], g);
}

// Masked layout, at most 32 experts: every warp reads the counts itself, lane e the clamped count of
// expert e. kBeforeWait: a read before the PDL wait goes to L2 and leaves no line in L1, where the read
// after the wait could otherwise find a stale one.
template <bool kBeforeWait>
__device__ __forceinline__ int warp_masked_count(const QuantParams& p) {
  const int lane = threadIdx.x & 31;
  if (lane >= p.num_outer) return 0;
  const int count = kBeforeWait ? __ldcg(p.masked_m + lane) : p.masked_m[lane];
  return min(max(count, 0), static_cast<int>(p.rows_per_outer));
}

// Sum over the 32 lanes, returned to all of them.
__device__ __forceinline__ int warp_sum(int v) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  return __reduce_add_sync(0xffffffffu, v);
#else
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
#endif
}

// Exclusive prefix sum of the counts over the lanes (lane e: the valid rows of experts < e), with only as
// many shuffle steps as the experts need, but the first kStepsAlways steps without a test between them (a
// step of distance o >= num_experts leaves the lanes below num_experts as they are). All 32 lanes must
// call it.
template <int kStepsAlways = 0>
__device__ __forceinline__ int warp_exclusive_prefix(int count, int num_experts) {
  const int lane = threadIdx.x & 31;
  int inclusive = count;
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    if (o >= (1 << kStepsAlways) && o >= num_experts) break;  // uniform over the warp
    const int n = __shfl_up_sync(0xffffffffu, inclusive, o);
    if (lane >= o) inclusive += n;
  }
  return inclusive - count;
}

// The expert (outer index) of valid row `row_index`, from the prefix held by the warp's lanes: the number
// of experts whose start is at or before the row, minus one; one ballot per distinct row among the warp's
// tasks (usually one). All 32 lanes must call it.
__device__ __forceinline__ int masked_expert_of_row(int exclusive, int64_t num_experts, int row_index) {
  const int lane = threadIdx.x & 31;
  const bool is_expert = lane < num_experts;
  int expert = 0;
  for (unsigned pending = 0xffffffffu; pending != 0;) {
    const int r = __shfl_sync(0xffffffffu, row_index, __ffs(pending) - 1);
    const unsigned starts_at_or_before = __ballot_sync(0xffffffffu, is_expert && exclusive <= r);
    if (row_index == r) expert = __popc(starts_at_or_before) - 1;
    pending &= ~__ballot_sync(0xffffffffu, row_index == r);
  }
  return expert;
}

// masked_expert_of_row for a warp whose lanes all hold the same row: one vote for the expert and, beside
// it, one reduction for its start (the largest start at or before the row; the starts do not decrease).
struct ExpertStart {
  int expert, start;
};
__device__ __forceinline__ ExpertStart masked_expert_of_warp_row(int exclusive, int num_experts, int row_index) {
  const bool at_or_before = (threadIdx.x & 31) < num_experts && exclusive <= row_index;
  const int expert = __popc(__ballot_sync(0xffffffffu, at_or_before)) - 1;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  return {expert, __reduce_max_sync(0xffffffffu, at_or_before ? exclusive : 0)};
#else
  return {expert, __shfl_sync(0xffffffffu, exclusive, expert)};
#endif
}

template <typename T, int GS>
__device__ __forceinline__ Task<T> locate_masked_task_in_warp(const KernelArgs& args, int exclusive, int task) {
  const QuantParams& p = args.p;
  const int row_index = args.task_columns.div(task);
  const int g = task - row_index * p.groups_per_row;
  const int expert = masked_expert_of_row(exclusive, p.num_outer, row_index);
  return locate_task<T, GS>(p, expert, row_index - __shfl_sync(0xffffffffu, exclusive, expert), g);
}

// ---------------------------------------------------------------------------------------------
// One task's input and quantization.

// A thread's input words: two 16-byte chunks of the group, [lane * 8, +8) and [GS / 2 + lane * 8, +8);
// with fused SiLU the same chunks of the gate half (v[0], v[1]) and of the up half (v[2], v[3]).
template <bool SILU>
struct TaskInput {
  uint4 v[SILU ? 4 : 2];
};

// hidden: H, the offset of the up half with fused SiLU.
template <typename T, int GS, bool SILU>
__device__ __forceinline__ TaskInput<SILU> load_task_input(int hidden, const Task<T>& t, int lane, bool valid) {
  TaskInput<SILU> in = {};
  if (!valid) return in;
  const int chunk0 = lane * 8, chunk1 = GS / 2 + lane * 8;
  in.v[0] = load_input_vec(t.src + chunk0);
  in.v[1] = load_input_vec(t.src + chunk1);
  if constexpr (SILU) {
    in.v[2] = load_input_vec(t.src + hidden + chunk0);
    in.v[3] = load_input_vec(t.src + hidden + chunk1);
  }
  return in;
}

// Quantizes one task from this thread's input words: the activation (the input, or with fused SiLU
// T(T(silu(gate)) * up) per pair), then quantize_words. kComputeAlways: the input was loaded whatever
// `valid` (from an address in range), so the SiLU needs no branch either; only the stores wait for it.
template <typename T, typename R, int GS, ScaleStore SS, bool SILU, bool kComputeAlways = false>
__device__ __forceinline__ void quantize_task(const QuantParams& p, const Task<T>& t, int lane, bool valid,
                                              const TaskInput<SILU>& in) {
  uint32_t w[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  if (valid || kComputeAlways) {
    const uint4 a = in.v[0], b = in.v[1];
    if constexpr (SILU) {
      const uint4 c = in.v[2], d = in.v[3];
      const uint32_t gate[8] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
      const uint32_t up[8] = {c.x, c.y, c.z, c.w, d.x, d.y, d.z, d.w};
#pragma unroll
      for (int j = 0; j < 8; ++j) w[j] = silu_and_mul_pair<T>(gate[j], up[j]);
    } else {
      w[0] = a.x, w[1] = a.y, w[2] = a.z, w[3] = a.w, w[4] = b.x, w[5] = b.y, w[6] = b.z, w[7] = b.w;
    }
  }
  quantize_words<T, R, GS, SS>(p, t, lane, valid, w);
}

template <typename T, typename R, int GS, ScaleStore SS, bool SILU>
__device__ __forceinline__ void load_and_quantize_task(const QuantParams& p, const Task<T>& t, int lane, bool valid) {
  quantize_task<T, R, GS, SS, SILU>(p, t, lane, valid, load_task_input<T, GS, SILU>(p.hidden, t, lane, valid));
}

}  // namespace sgl_quant
