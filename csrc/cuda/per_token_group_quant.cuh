// The per-token-group kernels (docs/spec.md §1-§3): v2 in every scale layout, with or without fused
// SiLU-and-mul, dense or masked (MoE), and the DeepSeek-V4 fp8_einsum layout (the same computation,
// its fp32 scales written through strides).
//
// Work decomposition: a "task" is one group of one row, handled by a sub-warp of GS/16 threads; each
// thread holds 16 input elements, 8 from each half of the group (two 16-byte loads, four with fused
// SiLU), so that each load instruction of a warp reads whole 32-byte sectors (quantize_words).
//
// Four kernels, chosen per call by launch_per_token_group_quant:
// - per_token_group_quant_kernel: every call the others do not take. Dense: one task per sub-warp, a
//   block per groups_per_block tasks, no loop; the block locates its task before the PDL wait, so that
//   the index math overlaps the producer's tail. Masked: only valid rows become tasks (padded rows cost
//   nothing), blocks walk them with a grid-stride loop; the prefix sum of the per-expert counts is
//   computed on the device, by every warp with shuffles (<= 32 experts) or by every block in shared memory.
// - dense_no_pdl_kernel, masked_no_pdl_kernel: launches without PDL (of one row index; of at most 32
//   evenly spaced experts). Without PDL the chain from the kernel's start to its first load is a small
//   call's latency; these kernels read everything on that chain from the parameters' first 64-byte
//   constant line and carry no PDL instructions.
// - small_call_quant_kernel: dense calls of at most 8 rows without SiLU: 8 values per thread (twice the
//   threads for a tiny problem), 48 bytes of parameters, one division.
#pragma once

#include "v2_tasks.cuh"

namespace sgl_quant {

// ---------------------------------------------------------------------------------------------
// Kernels.

// Registers: plain quantization at most 32 (4 blocks of 512 per SM: full occupancy for the memory-bound
// large calls); fused SiLU at most 40 (3 blocks), so that a thread's 16 SiLUs overlap instead of queuing
// on one another. Dense and masked layouts are separate kernels (MASKED), so that the masked layout's
// bookkeeping never costs the dense kernel registers.
template <typename T, typename R, int GS, ScaleStore SS, bool SILU, bool MASKED>
__global__ void __launch_bounds__(kMaxBlockThreads, SILU ? 3 : 4) per_token_group_quant_kernel(const KernelArgs args) {
  constexpr int kThreadsPerGroup = GS / kElemsPerThread;
  static_assert(kThreadsPerGroup >= 1 && kThreadsPerGroup <= 32 && (kThreadsPerGroup & (kThreadsPerGroup - 1)) == 0,
                "group size must be 16 * a power of two, at most 512");
  const QuantParams& p = args.p;
  const int sub = threadIdx.x / kThreadsPerGroup;
  const int lane = threadIdx.x % kThreadsPerGroup;
  const int groups_per_block = blockDim.x / kThreadsPerGroup;
  const int64_t grid_stride = static_cast<int64_t>(gridDim.x) * groups_per_block;
  int64_t first = static_cast<int64_t>(blockIdx.x) * groups_per_block;

  if constexpr (!MASKED) {
    // One task per sub-warp (the launcher makes a block per groups_per_block tasks): locate it before
    // waiting for the producer kernel, so that the index math overlaps the producer's tail.
    const uint32_t task = blockIdx.x * static_cast<uint32_t>(groups_per_block) + sub;  // < num_tasks + block < 2^32
    bool valid = task < static_cast<uint32_t>(args.num_tasks);
    const Task<T> t = locate_dense_task<T, GS, SS, SILU>(args, static_cast<int>(task), valid);
    pdl_wait_for_producer_after(t.src);  // the input may come from the previous kernel
    pdl_allow_dependents();              // the next kernel may launch; it waits for our completion itself
    const TaskInput<SILU> in = load_task_input<T, GS, SILU>(p.hidden, t, lane, valid);
    quantize_task<T, R, GS, SS, SILU>(p, t, lane, valid, in);
  } else if (p.num_outer <= kWarpScanMaxExperts) {
    // At most 32 experts: every warp scans the counts itself (one load, a warp sum, at most five
    // shuffles): no shared memory and no barrier between the counts and the inputs. Under PDL a warp reads
    // the counts (usually written kernels earlier, by the MoE dispatch) and locates its first task before
    // the wait; after it, it reads them again while that task's loads are in flight, and starts over only
    // if they changed.
    // A grid of whole rounds of resident blocks (args.trigger_at_start) lets the next kernel launch from
    // our start: its blocks then take only the places of ours that have exited. Triggered after the wait
    // instead, a decode-sized call (mostly blocks without a task) holds the next launch until the
    // producer's end. Not for smaller grids: there a chain of such kernels would all launch at once.
    pdl_allow_dependents_if(args.trigger_at_start);
    const int num_experts = static_cast<int>(p.num_outer);
    int guess = args.pdl ? warp_masked_count<true>(p) : warp_masked_count<false>(p);
    int num_tasks = warp_sum(guess) * p.groups_per_row;
    if (first >= num_tasks) {
      // No task for this block by the first read: it exits before the prefix and the lookup once the
      // counts are final and the same (decode-sized calls launch mostly such blocks).
      pdl_wait_for_producer();
      const int count = warp_masked_count<false>(p);
      const bool same = __all_sync(0xffffffffu, count == guess);
      guess = count;
      if (same) return;
      num_tasks = warp_sum(guess) * p.groups_per_row;
    }
    int exclusive = warp_exclusive_prefix(guess, num_experts);
    bool valid = first + sub < num_tasks;
    Task<T> t = locate_masked_task_in_warp<T, GS>(args, exclusive, valid ? static_cast<int>(first + sub) : 0);
    pdl_wait_for_producer();  // the input and the counts may come from the previous kernel
    pdl_allow_dependents_if(!args.trigger_at_start);
    TaskInput<SILU> in = load_task_input<T, GS, SILU>(p.hidden, t, lane, valid);
    const int count = args.pdl ? warp_masked_count<false>(p) : guess;
    if (!__all_sync(0xffffffffu, count == guess)) {  // rare: redo the first task's lookup and loads
      num_tasks = warp_sum(count) * p.groups_per_row;
      exclusive = warp_exclusive_prefix(count, num_experts);
      valid = first + sub < num_tasks;
      t = locate_masked_task_in_warp<T, GS>(args, exclusive, valid ? static_cast<int>(first + sub) : 0);
      in = load_task_input<T, GS, SILU>(p.hidden, t, lane, valid);
    }
    if (first >= num_tasks) return;  // (the counts are the same in all of the block's warps now)
    quantize_task<T, R, GS, SS, SILU>(p, t, lane, valid, in);
    for (first += grid_stride; first < num_tasks; first += grid_stride) {
      valid = first + sub < num_tasks;
      t = locate_masked_task_in_warp<T, GS>(args, exclusive, valid ? static_cast<int>(first + sub) : num_tasks - 1);
      load_and_quantize_task<T, R, GS, SS, SILU>(p, t, lane, valid);
    }
  } else {
    // Many experts: each block prefix-sums the clamped counts in shared memory and finds a row's expert
    // by binary search.
    pdl_wait_for_producer();  // the input and the counts may come from the previous kernel
    pdl_allow_dependents();
    extern __shared__ int prefix[];
    masked_row_prefix(p, prefix, prefix + p.num_outer + 1);
    const int num_tasks = prefix[p.num_outer] * p.groups_per_row;
    for (; first < num_tasks; first += grid_stride) {
      const bool valid = first + sub < num_tasks;
      const Task<T> t = locate_masked_task<T, GS>(args, prefix, valid ? static_cast<int>(first + sub) : num_tasks - 1);
      load_and_quantize_task<T, R, GS, SS, SILU>(p, t, lane, valid);
    }
  }
}

// Dense launches without PDL of one row index. A kernel's first read of a 64-byte constant line waits for
// that line (a miss per SM and launch); KernelArgs spreads what the first task's chain reads over three
// lines, read one after the other. This kernel's head holds all of it in the parameters' first line (at
// most 48 bytes at 0x210, beside the driver's word at 0x208); the outputs and scale strides are read from
// `args` once the loads are in flight. No PDL instructions: the data it reads is final.
struct DenseHead {
  const void* input;
  int64_t in_row_stride;  // elements
  int32_t num_tasks, rows, groups;
  uint32_t column_multiplier;  // task -> task column: FastDivmod(task columns), its shift in `shape`
  uint32_t shape;              // the division's shift (bits 0-7), rows_first_log2 (8-15), groups per block (16-31)

  // (the order accessors of dense_row_group)
  __device__ __forceinline__ int num_rows() const { return rows; }
  __device__ __forceinline__ int groups_per_row() const { return groups; }
  __device__ __forceinline__ FastDivmod columns() const { return FastDivmod::of(column_multiplier, shape & 0xffu); }
  __device__ __forceinline__ int rows_first_log2() const { return static_cast<int>((shape >> 8) & 0xffu); }
  __device__ __forceinline__ int groups_per_block() const { return static_cast<int>(shape >> 16); }
};
static_assert(sizeof(DenseHead) <= 48, "one 64-byte constant line with the driver's word at 0x208");

struct DenseNoPdlArgs {
  DenseHead head;
  KernelArgs args;  // the same call
};

inline DenseNoPdlArgs dense_no_pdl_args(const KernelArgs& args, int groups_per_block) {
  DenseNoPdlArgs a = {};
  a.head.input = args.p.input;
  a.head.in_row_stride = args.p.in_row_stride;
  a.head.num_tasks = args.num_tasks;
  a.head.rows = args.num_rows;
  a.head.groups = args.p.groups_per_row;
  a.head.column_multiplier = args.task_columns.multiplier;
  a.head.shape = args.task_columns.shift | static_cast<uint32_t>(args.rows_first_log2) << 8 |
                 static_cast<uint32_t>(groups_per_block) << 16;
  a.args = args;
  return a;
}

template <typename T, typename R, int GS, ScaleStore SS, bool SILU>
__global__ void __launch_bounds__(kMaxBlockThreads, SILU ? 3 : 4) dense_no_pdl_kernel(const DenseNoPdlArgs a) {
  constexpr int kThreadsPerGroup = GS / kElemsPerThread;
  const DenseHead& h = a.head;
  const int sub = threadIdx.x / kThreadsPerGroup;
  const int lane = threadIdx.x % kThreadsPerGroup;
  const uint32_t task = blockIdx.x * static_cast<uint32_t>(h.groups_per_block()) + sub;
  bool valid = task < static_cast<uint32_t>(h.num_tasks);
  const RowGroup rg = dense_row_group<SS, SILU>(h, static_cast<int>(task), valid);
  // An invalid task (past the end, a padding row or column of the task order) loads from the last row or
  // group instead (its codes are never stored), so that neither the loads nor the SiLU stand in a branch.
  Task<T> t;
  t.src = static_cast<const T*>(h.input) + min(rg.row_index, h.rows - 1) * h.in_row_stride +
          min(rg.g, h.groups - 1) * GS;
  const TaskInput<SILU> in = load_task_input<T, GS, SILU>(h.groups * GS, t, lane, true);
  const QuantParams& p = a.args.p;
  quantize_task<T, R, GS, SS, SILU, true>(p, locate_task<T, GS>(p, 0, rg.row_index, rg.g), lane, valid, in);
}

// Masked launches without PDL of the calls masked_no_pdl_fits: the general kernel's warp-scan path with the
// counts read once (they are final) and everything on the chain to the first input load in the
// parameters' first constant line (as DenseHead). In a one-round grid every warp runs the code between
// the counts' arrival and its first load at about the same time, so that code has no loop and few
// warp-collective steps: the scan's first three steps without tests, one vote for the expert (a warp's
// tasks share a row) beside one reduction for its start, and a 32-bit input offset.
struct MaskedHead {
  const int32_t* masked_m;
  const void* input;
  uint32_t in_row_stride;  // elements; expert e's rows start at row e * rows_per_outer (masked_no_pdl_fits)
  int32_t rows_per_outer;  // the counts' upper clamp
  int32_t groups_per_row;
  uint32_t row_multiplier;  // task -> valid row index: FastDivmod(groups per row), its shift in `shape`
  uint32_t shape;           // experts (bits 0-7), the division's shift (8-15), groups per block (16-31)

  __device__ __forceinline__ int experts() const { return static_cast<int>(shape & 0xffu); }
  __device__ __forceinline__ int groups_per_block() const { return static_cast<int>(shape >> 16); }
  __device__ __forceinline__ int row_of(int task) const {
    return FastDivmod::of(row_multiplier, (shape >> 8) & 0xffu).div(task);
  }
};
static_assert(sizeof(MaskedHead) <= 48, "one 64-byte constant line with the driver's word at 0x208");

struct MaskedNoPdlArgs {
  MaskedHead head;
  KernelArgs args;  // the same call
};

// The calls masked_no_pdl_kernel serves: at most 32 experts (the warp's prefix sum); the experts' rows
// evenly spaced (a contiguous [E, rows, K] input, as MoE dispatch writes it) with 32-bit row indices and
// row stride (the input offset is one 32-bit product); no warp holding tasks of two rows (a warp holds 32
// / (GS / 16) consecutive tasks from a multiple of that count: H a multiple of 512 whatever GS).
template <int GS>
inline bool masked_no_pdl_fits(const QuantParams& p) {
  constexpr int kTasksPerWarp = 32 * kElemsPerThread / GS;
  return p.num_outer <= kWarpScanMaxExperts && p.in_outer_stride == p.rows_per_outer * p.in_row_stride &&
         p.in_row_stride <= INT32_MAX && p.num_outer * p.rows_per_outer <= INT32_MAX &&
         p.groups_per_row % kTasksPerWarp == 0;
}

inline MaskedNoPdlArgs masked_no_pdl_args(const KernelArgs& args, int groups_per_block) {
  const QuantParams& p = args.p;
  MaskedNoPdlArgs a = {};
  a.head.masked_m = p.masked_m;
  a.head.input = p.input;
  a.head.in_row_stride = static_cast<uint32_t>(p.in_row_stride);
  a.head.rows_per_outer = static_cast<int32_t>(p.rows_per_outer);
  a.head.groups_per_row = p.groups_per_row;
  a.head.row_multiplier = args.task_columns.multiplier;
  a.head.shape = static_cast<uint32_t>(p.num_outer) | args.task_columns.shift << 8 |
                 static_cast<uint32_t>(groups_per_block) << 16;
  a.args = args;
  return a;
}

template <typename T, typename R, int GS, bool SILU>
__global__ void __launch_bounds__(kMaxBlockThreads, SILU ? 3 : 4) masked_no_pdl_kernel(const MaskedNoPdlArgs a) {
  constexpr int kThreadsPerGroup = GS / kElemsPerThread;
  const MaskedHead& h = a.head;
  const int sub = threadIdx.x / kThreadsPerGroup;
  const int lane = threadIdx.x % kThreadsPerGroup;
  const int groups_per_block = h.groups_per_block();
  int64_t first = static_cast<int64_t>(blockIdx.x) * groups_per_block;
  // The first task's row index and group do not depend on the counts (a task past the end gets a row that
  // is never read), so they are computed while the counts load.
  const int task = static_cast<int>(first) + sub;
  const int row_index = h.row_of(task);
  const int g = task - row_index * h.groups_per_row;
  const int num_experts = h.experts();
  const int warp_lane = threadIdx.x & 31;
  const int count = warp_lane < num_experts ? min(max(h.masked_m[warp_lane], 0), h.rows_per_outer) : 0;
  const int num_rows = warp_sum(count);
  const int num_tasks = num_rows * h.groups_per_row;
  const int exclusive = warp_exclusive_prefix<3>(count, num_experts);
  if (first >= num_tasks) return;  // no task for this block (decode-sized calls launch mostly such blocks)
  bool valid = task < num_tasks;
  // A task past the end looks up the last valid row (the warp's lanes keep one row) and loads nothing,
  // except with one thread per group (GS 16): there it loads that row, without a branch, which with fused
  // SiLU keeps ptxas from spilling.
  constexpr bool kLoadAlways = GS == 16;
  const int lookup_row = min(row_index, num_rows - 1);
  const ExpertStart es = masked_expert_of_warp_row(exclusive, num_experts, lookup_row);
  const int expert = es.expert, row = lookup_row - es.start;
  Task<T> t;
  const uint32_t input_row = static_cast<uint32_t>(expert * h.rows_per_outer + row);
  t.src = static_cast<const T*>(h.input) + static_cast<uint64_t>(input_row) * h.in_row_stride + g * GS;
  const TaskInput<SILU> in = load_task_input<T, GS, SILU>(h.groups_per_row * GS, t, lane, valid || kLoadAlways);
  const QuantParams& p = a.args.p;
  quantize_task<T, R, GS, ScaleStore::kEither, SILU, kLoadAlways>(p, locate_task<T, GS>(p, expert, row, g), lane,
                                                                  valid, in);
  const int64_t grid_stride = static_cast<int64_t>(gridDim.x) * groups_per_block;
  for (first += grid_stride; first < num_tasks; first += grid_stride) {
    valid = first + sub < num_tasks;
    const int next = valid ? static_cast<int>(first + sub) : num_tasks - 1;  // the warp's lanes keep one row
    const int next_row_index = h.row_of(next);
    const ExpertStart next_es = masked_expert_of_warp_row(exclusive, num_experts, next_row_index);
    t = locate_task<T, GS>(p, next_es.expert, next_row_index - next_es.start, next - next_row_index * h.groups_per_row);
    load_and_quantize_task<T, R, GS, ScaleStore::kEither, SILU>(p, t, lane, valid);
  }
}

// Small dense calls (small_call_fits): one task per GS/8 threads, each with one 16-byte load of 8
// adjacent values and one 8-byte store of their codes, and 48 bytes of parameters (one constant line
// with the driver's word at 0x208) instead of KernelArgs' three lines.
struct SmallCallArgs {
  const void* input;
  void* output_q;
  void* output_s;
  uint32_t row_multiplier;  // task -> row: FastDivmod(groups per row), its shift in `shape`
  // groups per row (bits 0-21), rows (22-25), the division's shift (26-30), fp32 scales rounded (31)
  uint32_t shape;
  int32_t in_row_stride, s_row_stride, s_group_stride;
  float eps;

  static constexpr int kGroupBits = 22, kRowBits = 4, kShiftBits = 5;
  __device__ __forceinline__ int groups() const { return static_cast<int>(shape & ((1u << kGroupBits) - 1)); }
  __device__ __forceinline__ int rows() const {
    return static_cast<int>((shape >> kGroupBits) & ((1u << kRowBits) - 1));
  }
  __device__ __forceinline__ int row_of(uint32_t task) const {
    const uint32_t shift = (shape >> (kGroupBits + kRowBits)) & ((1u << kShiftBits) - 1);
    return static_cast<int>((__umulhi(task, row_multiplier) + task) >> shift);
  }
  __device__ __forceinline__ ScaleKind scale_kind() const {
    return shape >> 31 ? ScaleKind::kFloatUE8M0 : ScaleKind::kFloat;  // (packed: a template argument)
  }
};
static_assert(sizeof(SmallCallArgs) == 48, "one 64-byte constant line with the driver's word at 0x208");

constexpr int64_t kSmallCallMaxRows = 8;
// A compile-time block size: the kernel then never reads blockDim (the driver's constant line 0x0).
constexpr int kSmallCallThreads = 128;

// Whether p (folded) is a small call: dense, no fused SiLU, one row index, strides in 32 bits, rows and
// groups per row within SmallCallArgs::shape's fields.
inline bool small_call_fits(const QuantParams& p) {
  constexpr int64_t kMax32 = (int64_t{1} << 31) - 1;
  static_assert(kSmallCallMaxRows < (1 << SmallCallArgs::kRowBits), "rows fit in SmallCallArgs::shape");
  auto fits = [](int64_t v) { return v >= 0 && v <= kMax32; };
  return p.masked_m == nullptr && !p.fuse_silu_and_mul && p.num_outer == 1 && p.rows_per_outer <= kSmallCallMaxRows &&
         p.groups_per_row < (1 << SmallCallArgs::kGroupBits) && fits(p.in_row_stride) && fits(p.s_row_stride) &&
         fits(p.s_group_stride);
}

inline SmallCallArgs small_call_args(const QuantParams& p) {
  const FastDivmod groups_per_row(static_cast<uint32_t>(p.groups_per_row));
  SmallCallArgs a;
  a.input = p.input;
  a.output_q = p.output_q;
  a.output_s = p.output_s;
  a.row_multiplier = groups_per_row.multiplier;
  a.shape = static_cast<uint32_t>(p.groups_per_row) | static_cast<uint32_t>(p.rows_per_outer) << SmallCallArgs::kGroupBits |
            groups_per_row.shift << (SmallCallArgs::kGroupBits + SmallCallArgs::kRowBits) |
            static_cast<uint32_t>(p.scale_kind == ScaleKind::kFloatUE8M0) << 31;
  a.in_row_stride = static_cast<int32_t>(p.in_row_stride);
  a.s_row_stride = static_cast<int32_t>(p.s_row_stride);
  a.s_group_stride = static_cast<int32_t>(p.s_group_stride);
  a.eps = p.eps;
  return a;
}

template <typename T, typename R, int GS, ScaleStore SS>
__global__ void __launch_bounds__(kMaxBlockThreads, 4) small_call_quant_kernel(const SmallCallArgs a) {
  constexpr int kThreadsPerGroup = GS / 8;
  const int sub = threadIdx.x / kThreadsPerGroup, lane = threadIdx.x % kThreadsPerGroup;
  const uint32_t task = blockIdx.x * (kSmallCallThreads / kThreadsPerGroup) + sub;  // < 2^31 (small_call_fits)
  const int groups = a.groups();
  const int row = a.row_of(task);
  const bool valid = row < a.rows();  // tasks past the last row's groups have row >= rows
  const int g = static_cast<int>(task) - row * groups;
  QuantParams p;  // what quantize_words reads
  p.output_s = a.output_s;
  p.s_group_stride = a.s_group_stride;
  p.groups_per_row = groups;
  p.eps = a.eps;
  p.scale_kind = a.scale_kind();
  if constexpr (SS == ScaleStore::kPackedPadded) p.rows_per_outer = a.rows();
  Task<T> t;
  t.src = static_cast<const T*>(a.input) + static_cast<int64_t>(row) * a.in_row_stride + g * GS + lane * 8;
  t.dst = static_cast<uint8_t*>(a.output_q) + static_cast<int64_t>(row) * (groups * GS) + g * GS;
  t.s_row = static_cast<int64_t>(row) * a.s_row_stride;
  t.g = g;
  pdl_wait_for_producer_after(t.src);  // the input may come from the previous kernel
  pdl_allow_dependents();
  const uint4 v = valid ? load_input_vec(t.src) : make_uint4(0, 0, 0, 0);
  const uint32_t w[4] = {v.x, v.y, v.z, v.w};
  quantize_words<T, R, GS, SS, 4>(p, t, lane, valid, w);
}

// ---------------------------------------------------------------------------------------------
// Launcher.

// Folds (outer, row) into one row index where the strides allow it (contiguous batches), which saves the
// kernel a division per task. 2-D inputs have num_outer == 1 already.
inline void fold_outer_rows(QuantParams& q) {
  if (q.masked_m == nullptr && q.num_outer > 1 && q.in_outer_stride == q.rows_per_outer * q.in_row_stride &&
      q.s_outer_stride == q.rows_per_outer * q.s_row_stride) {
    q.rows_per_outer *= q.num_outer;
    q.num_outer = 1;
  }
}

// The launch shape and arguments of one call of `kernel` (per_token_group_quant_kernel or, kNoPdl,
// dense_no_pdl_kernel / masked_no_pdl_kernel).
template <auto kernel, int GS, ScaleStore SS, bool SILU, bool MASKED, bool kNoPdl = false>
cudaError_t launch_quant_kernel(const QuantParams& p, const LaunchOptions& opt) {
  constexpr int kThreadsPerGroup = GS / kElemsPerThread;
  // Rows-first task order for dense column-major scales, in units of up to 32 rows, so that a block writes
  // whole 128-byte lines of fp32 scales and whole sectors of packed UE8M0 words. The rows are padded to
  // whole units; the unit halves, down to a warp's rows, until the padding is at most 1/8 of the rows.
  // Not for 16-element groups (a warp would then store 16-byte halves of many rows' code sectors) nor for
  // fewer rows than a warp takes.
  constexpr int kColumnLog2 = kTaskColumnLog2<SS, SILU, MASKED>;
  constexpr int kWarpRows = 32 / kThreadsPerGroup >> kColumnLog2;  // rows of a warp's tasks (0: part of one)
  constexpr int kMinUnitRows = kWarpRows > 1 ? kWarpRows : 1;
  constexpr int kMaxUnitRows = 32;
  constexpr bool kRowsFirstScales = SS == ScaleStore::kFloat || kColumnLog2 > 0;  // packed words go rows first by words only
  const int64_t num_rows = p.num_rows();
  const int64_t columns = (p.groups_per_row + (1 << kColumnLog2) - 1) >> kColumnLog2;
  int64_t num_tasks = num_rows * columns << kColumnLog2;  // (masked: replaced by the counts' on the device)
  int rows_first_log2 = 0;
  if (!MASKED && GS >= 32 && kRowsFirstScales && p.s_group_stride != 1 && num_rows >= kMinUnitRows) {
    auto padded_rows = [num_rows](int64_t unit) { return (num_rows + unit - 1) / unit * unit; };
    int unit = kMaxUnitRows;
    while (unit > kMinUnitRows && padded_rows(unit) * 8 > num_rows * 9) unit /= 2;
    const int64_t padded = padded_rows(unit) * columns << kColumnLog2;
    if (padded < (int64_t{1} << 31)) {
      num_tasks = padded;
      rows_first_log2 = log2_of_power_of_two(unit);
    }
  }
  int threads = opt.block_threads;
  if (threads == 0) {
    // Problems that fit in one round of 8 blocks of 128 threads per SM (half the resident threads) run in
    // blocks of 128, which spread the tasks more evenly over the SMs; larger ones in blocks of 256.
    const int64_t blocks_of_128 = (num_tasks * kThreadsPerGroup + 127) / 128;
    threads = blocks_of_128 <= 8 * static_cast<int64_t>(opt.num_sms) ? 128 : 256;
  }
  const int groups_per_block = threads / kThreadsPerGroup;
  const int64_t blocks_needed = (num_tasks + groups_per_block - 1) / groups_per_block;

  const size_t smem = masked_smem_bytes(p);
  if (smem > 48 * 1024) {  // many experts: raise the dynamic shared memory limit (validated <= 200 KiB)
    const cudaError_t err =
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem));
    if (err != cudaSuccess) return err;
  }

  // Dense: a block per groups_per_block tasks (the kernel has no loop). Masked: one round of resident
  // blocks looping over the valid rows; the grid is sized for all rows, valid or not, and its blocks read
  // the counts even where they have no task, so one round keeps them few.
  int64_t grid = blocks_needed;
  if constexpr (MASKED) {
    const cudaError_t err = capped_grid<kernel>(blocks_needed, threads, smem, opt.waves > 0 ? opt.waves : 1, opt, grid);
    if (err != cudaSuccess) return err;
  }
  KernelArgs args;
  args.p = p;
  args.task_columns = FastDivmod(static_cast<uint32_t>(columns));
  args.rows_per_outer = FastDivmod(static_cast<uint32_t>(p.rows_per_outer));
  args.num_tasks = static_cast<int32_t>(num_tasks);
  args.num_rows = static_cast<int32_t>(num_rows);
  args.rows_first_log2 = rows_first_log2;
  args.pdl = opt.pdl ? 1 : 0;
  args.trigger_at_start = MASKED && grid < blocks_needed && p.num_outer <= kWarpScanMaxExperts ? 1 : 0;
  if constexpr (kNoPdl && MASKED) {
    return launch_kernel(kernel, grid, threads, smem, opt, masked_no_pdl_args(args, groups_per_block));
  } else if constexpr (kNoPdl) {
    return launch_kernel(kernel, grid, threads, smem, opt, dense_no_pdl_args(args, groups_per_block));
  } else {
    return launch_kernel(kernel, grid, threads, smem, opt, args);
  }
}

// Launches one variant; MASKED must say whether p.masked_m is set. Returns the CUDA error of the launch.
template <typename T, typename R, int GS, ScaleStore SS, bool SILU, bool MASKED>
cudaError_t launch_per_token_group_quant(const QuantParams& p, const LaunchOptions& requested) {
  if (MASKED != (p.masked_m != nullptr)) return cudaErrorInvalidValue;
  QuantParams folded = p;  // masked calls: unchanged
  fold_outer_rows(folded);
  if constexpr (!MASKED && !SILU) {
    if (small_call_fits(folded)) {
      constexpr auto kernel = small_call_quant_kernel<T, R, GS, SS>;
      const int groups_per_block = kSmallCallThreads / (GS / 8);
      return launch_kernel(kernel, (folded.num_groups() + groups_per_block - 1) / groups_per_block, kSmallCallThreads,
                           0, options_for<kernel>(requested), small_call_args(folded));
    }
  }
  constexpr auto kernel = per_token_group_quant_kernel<T, R, GS, SS, SILU, MASKED>;
  const LaunchOptions opt = options_for<kernel>(requested);
  if constexpr (MASKED) {
    if (!opt.pdl && masked_no_pdl_fits<GS>(p)) {
      return launch_quant_kernel<masked_no_pdl_kernel<T, R, GS, SILU>, GS, SS, SILU, true, true>(folded, opt);
    }
  } else {
    if (!opt.pdl && folded.num_outer == 1) {
      return launch_quant_kernel<dense_no_pdl_kernel<T, R, GS, SS, SILU>, GS, SS, SILU, false, true>(folded, opt);
    }
  }
  return launch_quant_kernel<kernel, GS, SS, SILU, MASKED>(folded, opt);
}

// Every variant of one group size: {bf16, fp16} x {fp8, int8} x dense {fp32, packed scales} x {plain, SiLU}
// and masked {plain, SiLU} (either scale store). Instantiated in one .cu per group size (parallel builds)
// and declared extern in the dispatcher.
#define SGLQ_V2_VARIANTS_OF(T, R, GS, X)                                                            \
  X(T, R, GS, ScaleStore::kFloat, false, false) X(T, R, GS, ScaleStore::kFloat, true, false)        \
  X(T, R, GS, ScaleStore::kPacked, false, false) X(T, R, GS, ScaleStore::kPacked, true, false)      \
  X(T, R, GS, ScaleStore::kEither, false, true) X(T, R, GS, ScaleStore::kEither, true, true)
#define SGLQ_FOR_EACH_VARIANT(GS, X)                                                                 \
  SGLQ_V2_VARIANTS_OF(__nv_bfloat16, Fp8Range, GS, X) SGLQ_V2_VARIANTS_OF(__nv_bfloat16, Int8Range, GS, X) \
  SGLQ_V2_VARIANTS_OF(__half, Fp8Range, GS, X) SGLQ_V2_VARIANTS_OF(__half, Int8Range, GS, X)

// vLLM's packed op (2-D, group size 128, no SiLU): {bf16, fp16} x {fp8, int8}.
#define SGLQ_FOR_EACH_PACKED_PADDED_VARIANT(X)                                                              \
  X(__nv_bfloat16, Fp8Range, 128, ScaleStore::kPackedPadded, false, false)                                  \
  X(__nv_bfloat16, Int8Range, 128, ScaleStore::kPackedPadded, false, false)                                 \
  X(__half, Fp8Range, 128, ScaleStore::kPackedPadded, false, false)                                         \
  X(__half, Int8Range, 128, ScaleStore::kPackedPadded, false, false)

#define SGLQ_LAUNCHER_SIGNATURE(T, R, GS, SS, SILU, MASKED) \
  cudaError_t launch_per_token_group_quant<T, R, GS, SS, SILU, MASKED>(const QuantParams&, const LaunchOptions&);
#define SGLQ_INSTANTIATE_LAUNCHER(T, R, GS, SS, SILU, MASKED) \
  template SGLQ_LAUNCHER_SIGNATURE(T, R, GS, SS, SILU, MASKED)
#define SGLQ_DECLARE_LAUNCHER(T, R, GS, SS, SILU, MASKED) \
  extern template SGLQ_LAUNCHER_SIGNATURE(T, R, GS, SS, SILU, MASKED)

}  // namespace sgl_quant
